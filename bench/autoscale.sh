#!/usr/bin/env bash
# autoscale.sh - the DS2 controller against a changing input rate.
#
# Runs `eddy local --autoscale` on wordcount with a simulated per-word cost
# in the keyed count operator and an offered-rate schedule (the issue's
# 0:20000,30:80000,60:10000 shape, scaled down to what one small machine can
# carry), samples `eddy status --json` every second and plots offered rate,
# achieved rate and count's parallelism over time.
#
#   bench/autoscale.sh [--eddy PATH] [--out DIR] [--duration S]
#
# Offered rate  = sum of the source instances' offered_rate (lines/s)
# Achieved rate = delta of the sources' records_in over the sampling interval
#                 (about 1 s; lines/s);
#                 the counters restart when a rescale recreates the tasks
#                 (new epoch), so samples across an epoch change are dropped.
# Output: DIR/autoscale.dat (time_s offered achieved p_source p_count p_sink),
#         DIR/autoscale.png, DIR/local.log, DIR/scaling.txt.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
eddy="$here/build/eddy"
out="$here/build/bench-autoscale"
duration=90
# Lines/s: low, 4x, then below the start; words-per-line 4, so count sees 4x.
schedule="0:200,30:800,60:100"
cost_us=1000
while [ $# -gt 0 ]; do
  case "$1" in
    --eddy) eddy=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --schedule) schedule=$2; shift 2 ;;
    --cost-us) cost_us=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "autoscale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v gnuplot >/dev/null || { echo "autoscale.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
command -v jq >/dev/null || { echo "autoscale.sh: needs jq" >&2; exit 1; }
mkdir -p "$out"
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
coord="tcp://127.0.0.1:$port"

# --cost-sleep: the cost does not need a core, so 5 instances behave like 5
# on a 2-core machine too. Interval 2 s, warm-up 4 s, cooldown 8 s: the
# policy's production defaults (10/30/60 s) scaled to a 90 s run.
"$eddy" local --workers 3 --job wordcount --generate --lines 0 --words-per-line 4 \
  --rate-schedule "$schedule" --cost-us "$cost_us" --cost-sleep --parallelism 1 \
  --heartbeat-timeout-ms 30000 --autoscale \
  --controller-flags "--interval-ms 2000 --warmup-ms 4000 --cooldown-ms 8000" \
  --control-port "$port" --http-port 0 --quiet >"$out/local.log" 2>&1 &
local_pid=$!
trap 'kill -INT $local_pid 2>/dev/null || true' EXIT

dat="$out/autoscale.dat"
echo "# time_s offered_lines_per_s achieved_lines_per_s p_source p_count p_sink" >"$dat"
start=$(date +%s.%N)
prev_in=""
prev_t=""
prev_epoch=""
while :; do
  sleep 1
  t=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.2f", n - s }')
  awk -v t="$t" -v d="$duration" 'BEGIN { exit !(t >= d) }' && break
  json=$("$eddy" status --json --coordinator "$coord" 2>/dev/null) || continue
  read -r epoch offered in ps pc pk < <(echo "$json" | jq -r '
    (.jobs[0].operators // []) as $ops |
    [ (.jobs[0].epoch // 0),
      ([$ops[] | select(.source) | .offered_rate] | add // 0),
      ([$ops[] | select(.source) | .records_in] | add // 0),
      ($ops[] | select(.name=="source") | .parallelism),
      ($ops[] | select(.name=="count") | .parallelism),
      ($ops[] | select(.name=="sink") | .parallelism) ] | @tsv') || continue
  achieved="NaN"
  # Tasks recreated by a rescale (new epoch) restart their counters.
  if [ -n "$prev_in" ] && [ "$epoch" = "$prev_epoch" ] && [ "$in" -ge "$prev_in" ]; then
    achieved=$(awk -v a="$in" -v b="$prev_in" -v t="$t" -v u="$prev_t" 'BEGIN { printf "%.0f", (a - b) / (t - u) }')
  fi
  prev_in=$in
  prev_t=$t
  prev_epoch=$epoch
  echo "$t $offered $achieved $ps $pc $pk" >>"$dat"
done
"$eddy" scaling --coordinator "$coord" >"$out/scaling.txt" 2>&1 || true
kill -INT $local_pid 2>/dev/null || true
wait $local_pid 2>/dev/null || true
trap - EXIT

gnuplot <<GP
set terminal pngcairo size 1100,600 font "Sans,11"
set output "$out/autoscale.png"
set title "eddy DS2 autoscaling: wordcount, ${cost_us} us/word in count, schedule $schedule (lines/s)"
set xlabel "time (s)"
set ylabel "lines/s"
set y2label "count parallelism"
set y2tics 1
set ytics nomirror
set yrange [0:*]
set y2range [0:*]
set key top right
set grid
plot "$dat" using 1:2 with lines lw 2 lc rgb "#999999" title "offered rate", \
     "$dat" using 1:3 with linespoints pt 7 ps 0.5 lw 1 lc rgb "#1f77b4" title "achieved rate", \
     "$dat" using 1:5 axes x1y2 with steps lw 3 lc rgb "#d62728" title "count parallelism"
GP
echo "wrote $dat and $out/autoscale.png"
