#!/usr/bin/env bash
# suite.sh - scores scaling policies on scripted load (issue 29): every
# scenario under every policy, on real eddy processes, one run at a time.
#
#   bench/autoscale/suite.sh [--eddy PATH] [--out DIR]
#       [--scenarios "step_up step_down ..."] [--policies "eddy ds2 ..."]
#       [--duration S] [--migration fluid|sudden] [--plot-only]
#
# The job: wordcount on a generated, rate-scheduled source (--rate-schedule,
# lines/s), 4 words a line, count costing 4000 us per word (sleeping,
# except in cpu_contention), so few records carry much load and the
# machine's other work (the generator, the changelog on stdout) stays
# small. count starts at 1 instance (step_down at 3). One unit of load = one
# busy count instance = 62.5 lines/s.
# Scenarios (--duration, default 45 s each; rate steps at 15 s):
#   step_up         25 -> 175 lines/s (need 1 -> 3)
#   step_down       175 -> 40 lines/s, from 3 instances (need 3 -> 1)
#   noisy_plateau   125 lines/s +-20% every 2 s, seeded (need 2-3)
#   periodic        a compressed day: a 30 s sine between 25 and 175
#   hot_key         75 -> 225 lines/s, 30% of the words one key: at 225 one
#                   instance cannot carry that key (1.08 units); past 4
#                   instances nothing helps (cap 4)
#   cpu_contention  the cost spins: 25 -> 150 lines/s wants 2.4 cores, the
#                   machine has 2 and other processes (cap 2)
#   backlog         a Redis stream 1400 lines behind (35 s of downtime at
#                   40 lines/s) with 40 lines/s arriving; --catch-up-s 10:
#                   need 3 until drained, then 1 (needs redis-server)
# Policies (eddy controller --policy): eddy ds2 threshold flink, all with
# the same timing, the production values compressed 10x: interval 1 s,
# warm-up 3 s, cooldown 6 s, 3 confirmations, flink's scale-down delay
# 6 s, catch-up 10 s, max parallelism 8; --allow-oversubscribe except in
# cpu_contention.
# A flap is a reversal within 6 s (60 s compressed). --migration (fluid,
# eddy's default) is how rescales move state.
# Output: DIR/SCENARIO/POLICY/ (run_one.sh, score.py), DIR/results.tsv,
# the table on stdout, and DIR/SCENARIO.png when gnuplot is there
# (--plot-only redraws them and reprints the table from an earlier run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
eddy="$root/build/eddy"
out="$root/build/bench-autoscale-suite"
scenarios="step_up step_down noisy_plateau periodic hot_key cpu_contention backlog"
policies="eddy ds2 threshold flink"
duration=45
migration=fluid
plot_only=0
flap_s=6
cost_us=4000
while [ $# -gt 0 ]; do
  case "$1" in
    --eddy) eddy=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --scenarios) scenarios=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --migration) migration=$2; shift 2 ;;
    --plot-only) plot_only=1; shift ;;
    -h|--help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "suite.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
ROOT=$root
# shellcheck source=../common.sh
. "$root/bench/common.sh"
bench_need_bin "$eddy"
command -v jq >/dev/null || { echo "suite.sh: needs jq" >&2; exit 2; }
mkdir -p "$out"
timing="--interval-ms 1000 --warmup-ms 3000 --cooldown-ms 6000 --scale-down-confirmations 3 --scale-down-delay-ms 6000 --catch-up-s 10 --max-parallelism 8"

# T:R pairs every 2 s: base +- spread, seeded
noisy() { awk -v d="$duration" 'BEGIN { srand(29); s = ""; for (t = 0; t < d; t += 2) {
  r = int(125 * (0.8 + 0.4 * rand())); s = s (s ? "," : "") t ":" r } print s }'; }
sine() { awk -v d="$duration" 'BEGIN { s = ""; for (t = 0; t < d; t += 2) {
  r = int(100 - 75 * cos(2 * 3.14159265 * t / 30)); s = s (s ? "," : "") t ":" r } print s }'; }

scenario_args() { # prints run_one.sh flags, then "|CAP"
  case "$1" in
    step_up) echo "--schedule 0:25,15:175|8" ;;
    step_down) echo "--schedule 0:175,15:40 --parallelism 3|8" ;;
    noisy_plateau) echo "--schedule $(noisy)|8" ;;
    periodic) echo "--schedule $(sine)|8" ;;
    hot_key) echo "--schedule 0:75,15:225 --hot-key-share 0.3|4" ;;
    cpu_contention) echo "--schedule 0:25,15:150 --spin|2" ;;
    backlog) echo "--redis 1400:40|8" ;;
    *) echo "suite.sh: unknown scenario $1" >&2; return 2 ;;
  esac
}

# One PNG per scenario: offered rate, need, and per policy count's
# parallelism (solid) and seconds behind (dashed) in the policy's colour.
plot_scenario() {
  local sc=$1 plots="" first="" pol colour
  command -v gnuplot >/dev/null || return 0
  for pol in $policies; do
    [ -s "$out/$sc/$pol/plot.dat" ] || continue
    case $pol in eddy) colour="#d62728" ;; ds2) colour="#1f77b4" ;; threshold) colour="#2ca02c" ;; *) colour="#9467bd" ;; esac
    first=${first:-$out/$sc/$pol/plot.dat}
    plots="$plots, '$out/$sc/$pol/plot.dat' using 1:4 axes x1y2 with steps lw 2 lc rgb '$colour' title 'p $pol'"
    plots="$plots, '$out/$sc/$pol/plot.dat' using 1:5 axes x1y1 with lines dt 2 lc rgb '$colour' title 'behind s $pol'"
  done
  [ -n "$first" ] || return 0
  gnuplot <<GP || true
set terminal pngcairo noenhanced size 1200,600 font "Sans,10"
set output "$out/$sc.png"
set title "autoscale suite: $sc (count parallelism per policy; seconds behind the schedule)"
set xlabel "time (s)"
set ylabel "offered lines/s / 25; seconds behind"
set y2label "count parallelism"
set y2tics 1
set ytics nomirror
set y2range [0:9]
set key outside bottom center horizontal
set grid
plot '$first' using 1:(\$2/25) with steps lw 2 lc rgb "#777777" title 'offered (lines/s / 25)', \
     '$first' using 1:3 axes x1y2 with steps lw 5 lc rgb "#cccccc" title 'need'$plots
GP
}

results="$out/results.tsv"
if [ "$plot_only" = 1 ]; then
  for sc in $scenarios; do plot_scenario "$sc"; done
  column -t -s $'\t' "$results"
  exit 0
fi
bench_machine
echo -e "scenario\tpolicy\tdecisions\tflaps\tt_opt_s\tover_pct\tover_inst_s\tbacklog_s\tmax_behind_s\trescale_ms\tdrained_s" >"$results"
for sc in $scenarios; do
  spec=$(scenario_args "$sc")
  args=${spec%|*} cap=${spec##*|}
  for pol in $policies; do
    dir="$out/$sc/$pol"
    rm -rf "$dir"
    ctl="$timing"
    [ "$sc" = cpu_contention ] || ctl="$ctl --allow-oversubscribe"
    echo "== $sc / $pol ($(date +%H:%M:%S))"
    # shellcheck disable=SC2086
    if ! "$here/run_one.sh" --eddy "$eddy" --out "$dir" --policy "$pol" --duration "$duration" \
        --cost-us "$cost_us" --migration "$migration" \
        --controller "$ctl" $args; then
      echo -e "$sc\t$pol\tfailed" >>"$results"
      continue
    fi
    line=$(python3 "$here/score.py" "$dir" "$cost_us" 4 "$cap" "$flap_s" 10)
    echo -e "$sc\t$pol\t$line" >>"$results"
    echo -e "   $line"
  done
  plot_scenario "$sc"
done
echo
echo "flap window ${flap_s} s; need = ceil(load), capped where more instances cannot help"
column -t -s $'\t' "$results"
