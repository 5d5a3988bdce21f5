#!/usr/bin/env bash
# run_one.sh - one scenario under one scaling policy, on real eddy
# processes: `eddy local --autoscale` running wordcount on a scripted rate
# schedule, sampled once a second, then scored (score.py).
#
#   bench/autoscale/run_one.sh --eddy PATH --out DIR --policy P
#       --schedule T:R,... --duration S [--cost-us US] [--words N]
#       [--spin] [--hot-key-share F] [--parallelism P] [--cap N]
#       [--controller "FLAGS"] [--redis BACKLOG:ARRIVAL] [--workers N]
#       [--migration fluid|sudden]
#
# suite.sh calls it once per scenario and policy. --spin makes the per-word
# cost burn CPU (the CPU-contention scenario); otherwise it sleeps, so that
# instances scale like independent machines on this 2-core box; a worker
# runs its tasks on one thread, so a sleeping instance holds up the others
# on its worker: --workers (10) gives each of up to 8 count instances,
# the source and the sink a worker of its own. --cap is
# the most instances that can help (hot key, cores): the feasible optimum
# never exceeds it.
# --redis BACKLOG:ARRIVAL reads a Redis stream instead (a redis-server
# started here on a free port): BACKLOG lines wait in it before the job
# starts (a job that was down), ARRIVAL lines/s more are XADDed while it
# runs; --schedule is then ignored and the samples' fifth column is the
# source's lag (entries behind).
# Writes DIR/samples.dat (t_s offered_lines_s read_lines p_count [lag]),
# DIR/decisions.dat (t_s old new applied), DIR/local.log, DIR/scaling.txt.
set -euo pipefail
eddy="" out="" policy="" schedule="" duration=45 cost_us=1000 words=4 spin=0 hot=0 par=1 cap=0
controller="" redis="" workers=10 migration=fluid
while [ $# -gt 0 ]; do
  case "$1" in
    --eddy) eddy=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --schedule) schedule=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --cost-us) cost_us=$2; shift 2 ;;
    --words) words=$2; shift 2 ;;
    --spin) spin=1; shift ;;
    --hot-key-share) hot=$2; shift 2 ;;
    --parallelism) par=$2; shift 2 ;;
    --cap) cap=$2; shift 2 ;;
    --controller) controller=$2; shift 2 ;;
    --redis) redis=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --migration) migration=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_one.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
# shellcheck source=../common.sh
. "$(dirname "$0")/../common.sh"
port=$(bench_free_port)
coord="tcp://127.0.0.1:$port"
cost_mode=(--cost-sleep)
[ "$spin" = 1 ] && cost_mode=()
hot_flags=()
[ "$hot" != 0 ] && hot_flags=(--hot-key-share "$hot" --no-local-aggregation)

input=(--generate --lines 0 --words-per-line "$words" --rate-schedule "$schedule")
redis_pid="" feeder_pid=""
cleanup() {
  kill -INT "${local_pid:-}" 2>/dev/null || true
  [ -z "$feeder_pid" ] || kill "$feeder_pid" 2>/dev/null || true
  [ -z "$redis_pid" ] || kill "$redis_pid" 2>/dev/null || true
}
trap cleanup EXIT
if [ -n "$redis" ]; then
  backlog=${redis%%:*} arrival=${redis##*:}
  rport=$(bench_free_port)
  redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no >"$out/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
  # N lines of $words words from a 1000-word vocabulary, as XADD commands
  xadds() { awk -v n="$1" -v w="$words" -v seed="$2" 'BEGIN { srand(seed); for (i = 0; i < n; i++) {
    l = ""; for (k = 0; k < w; k++) l = l (k ? " " : "") "w" int(rand() * 1000)
    printf "XADD lines * line \"%s\"\n", l } }'; }
  xadds "$backlog" 1 | redis-cli -p "$rport" >/dev/null
  ( seed=2; while :; do xadds "$arrival" $((seed++)) | redis-cli -p "$rport" >/dev/null; sleep 1; done ) &
  feeder_pid=$!
  input=(--input "redis://127.0.0.1:$rport/lines")
fi

"$eddy" local --workers "$workers" --migration "$migration" --job wordcount "${input[@]}" \
  --cost-us "$cost_us" "${cost_mode[@]}" "${hot_flags[@]}" \
  --parallelism "$par" --source-parallelism 1 --heartbeat-timeout-ms 30000 --autoscale \
  --controller-flags "--policy $policy $controller" \
  --control-port "$port" --http-port 0 >"$out/local.log" 2>&1 &
local_pid=$!

samples="$out/samples.dat"
echo "# t_s offered_lines_per_s read_lines p_count" >"$samples"
start_ms=""
while :; do
  sleep 1
  kill -0 $local_pid 2>/dev/null || { echo "run_one.sh: eddy local exited; see $out/local.log" >&2; exit 1; }
  json=$("$eddy" status --json --coordinator "$coord" 2>/dev/null) || continue
  read -r cms offered in pc lag < <(echo "$json" | jq -r '
    (.jobs[-1].operators // []) as $ops |
    [ (.jobs[-1].counters_ms // 0),
      ([$ops[] | select(.source) | .offered_rate] | add // 0),
      ([$ops[] | select(.source) | .records_in] | add // 0),
      ($ops[] | select(.name=="count") | .parallelism),
      ([$ops[] | select(.source) | .source_lag // -1] | add // -1) ] | @tsv') || continue
  [ -z "$redis" ] || offered=$arrival
  [ "${cms:-0}" -gt 0 ] || continue
  # time 0: the first sample with the job running (the schedule's start,
  # within a second)
  [ -n "$start_ms" ] || start_ms=$cms
  t=$(awk -v c="$cms" -v s="$start_ms" 'BEGIN { printf "%.2f", (c - s) / 1000 }')
  if [ -n "$redis" ]; then echo "$t $offered $in $pc $lag"; else echo "$t $offered $in $pc"; fi >>"$samples"
  [ $((cms - start_ms)) -ge $((duration * 1000)) ] && break
done
"$eddy" scaling --all --coordinator "$coord" >"$out/scaling.txt" 2>&1 || true
echo "# t_s old new applied" >"$out/decisions.dat"
"$eddy" scaling --json --coordinator "$coord" 2>/dev/null |
  jq -r --argjson s "$start_ms" '.[] | select(.action != "no_change" and .operator == "count") |
    [((.time_ms - $s) / 1000), .old_parallelism, .new_parallelism,
     (if .applied then 1 else 0 end)] | @tsv' >>"$out/decisions.dat" || true
kill -INT $local_pid 2>/dev/null || true
wait $local_pid 2>/dev/null || true
cleanup
trap - EXIT
