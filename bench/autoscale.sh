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
# Progress: one line per sample on stdout while it runs.
# Offered rate  = sum of the source instances' offered_rate (lines/s), drawn
#                 as a step (it changes at the schedule's times).
# Achieved rate = difference of the sources' records_in over the difference
#                 of the job's counters_ms (the wall-clock time the totals
#                 were taken at the coordinator), so each rate covers the
#                 true interval between two readings, however late the
#                 `eddy status` call was. records_in is cumulative over the
#                 job (it never restarts at a rescale or restore), so a
#                 rescale leaves no spike; a reading whose counters_ms did
#                 not move is skipped.
# Parallelism of source, count and sink on the second axis; each scaling
# decision that changed something is a marker at its time labelled a -> b.
# Output: DIR/autoscale.dat (time_s offered achieved p_source p_count p_sink),
#         DIR/decisions.dat (time_s operator old new), DIR/autoscale.png,
#         DIR/local.log, DIR/scaling.txt.
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
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "autoscale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v gnuplot >/dev/null || { echo "autoscale.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
command -v jq >/dev/null || { echo "autoscale.sh: needs jq" >&2; exit 1; }
mkdir -p "$out"
# shellcheck source=common.sh
. "$here/bench/common.sh"
port=$(bench_free_port)
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
start_ms=$(date +%s%3N)
prev_in=""
prev_ms=""
echo "sampling every second for ${duration} s (log: $out/local.log)"
printf '%7s %9s %9s %8s %7s %6s\n' time_s offered achieved source count sink
while :; do
  sleep 1
  now_ms=$(date +%s%3N)
  [ $((now_ms - start_ms)) -ge $((duration * 1000)) ] && break
  kill -0 $local_pid 2>/dev/null || { echo "autoscale.sh: eddy local exited; see $out/local.log" >&2; exit 1; }
  json=$("$eddy" status --json --coordinator "$coord" 2>/dev/null) || continue
  read -r cms offered in ps pc pk < <(echo "$json" | jq -r '
    (.jobs[-1].operators // []) as $ops |
    [ (.jobs[-1].counters_ms // 0),
      ([$ops[] | select(.source) | .offered_rate] | add // 0),
      ([$ops[] | select(.source) | .records_in] | add // 0),
      ($ops[] | select(.name=="source") | .parallelism),
      ($ops[] | select(.name=="count") | .parallelism),
      ($ops[] | select(.name=="sink") | .parallelism) ] | @tsv') || continue
  [ "$cms" -gt 0 ] || continue
  if [ -n "$prev_ms" ] && [ "$cms" -gt "$prev_ms" ]; then
    t=$(awk -v c="$cms" -v s="$start_ms" 'BEGIN { printf "%.2f", (c - s) / 1000 }')
    achieved=$(awk -v a="$in" -v b="$prev_in" -v c="$cms" -v p="$prev_ms" \
      'BEGIN { printf "%.0f", (a - b) * 1000 / (c - p) }')
    echo "$t $offered $achieved $ps $pc $pk" >>"$dat"
    printf '%7s %9.0f %9s %8s %7s %6s\n' "$t" "$offered" "$achieved" "$ps" "$pc" "$pk"
  fi
  if [ -z "$prev_ms" ] || [ "$cms" -gt "$prev_ms" ]; then
    prev_in=$in
    prev_ms=$cms
  fi
done
"$eddy" scaling --all --coordinator "$coord" >"$out/scaling.txt" 2>&1 || true
decisions="$out/decisions.dat"
echo "# time_s operator old_parallelism new_parallelism applied" >"$decisions"
"$eddy" scaling --json --coordinator "$coord" 2>/dev/null |
  jq -r --argjson s "$start_ms" '.[] | select(.action != "no_change") |
    [((.time_ms - $s) / 1000), .operator, .old_parallelism, .new_parallelism,
     (if .applied then 1 else 0 end)] | @tsv' \
  >>"$decisions" || true
kill -INT $local_pid 2>/dev/null || true
wait $local_pid 2>/dev/null || true
trap - EXIT
echo "decisions that changed something:"
grep -v '^#' "$decisions" | awk '{ printf "  at %6.1f s %s %s -> %s%s\n", $1, $2, $3, $4, $5 ? "" : " (not applied)" }'

# The y range follows the offered rate (x1.5) so that the curves of a
# low-rate schedule are not flattened by a burst; clipped points are shown
# at the top edge.
ymax=$(awk '!/^#/ && $2 > m { m = $2 } END { print (m > 0 ? m * 1.5 : 1) }' "$dat")
pmax=$(awk '!/^#/ && FILENAME ~ /autoscale/ { for (i = 4; i <= 6; i++) if ($i > m) m = $i }
  !/^#/ && FILENAME ~ /decisions/ && $4 > m { m = $4 } END { print m + 1 }' "$dat" "$decisions")
gnuplot <<GP
set terminal pngcairo size 1200,640 font "Sans,11"
set output "$out/autoscale.png"
set title "eddy DS2 autoscaling: wordcount, ${cost_us} us/word in count, schedule $schedule (lines/s)"
set xlabel "time since start (s)"
set ylabel "lines/s"
set y2label "parallelism"
set y2tics 1
set ytics nomirror
set yrange [0:$ymax]
set y2range [0:$pmax]
set key outside bottom center horizontal
set grid
clip(y) = y > $ymax ? $ymax : y
plot "$dat" using 1:2 with steps lw 2 lc rgb "#777777" title "offered rate", \
     "$dat" using 1:(clip(\$3)) with linespoints pt 7 ps 0.5 lw 1 lc rgb "#1f77b4" title "achieved rate", \
     "$dat" using 1:5 axes x1y2 with steps lw 3 lc rgb "#d62728" title "count parallelism", \
     "$dat" using 1:4 axes x1y2 with steps lw 1 dt 2 lc rgb "#2ca02c" title "source parallelism", \
     "$dat" using 1:6 axes x1y2 with steps lw 1 dt 3 lc rgb "#9467bd" title "sink parallelism", \
     "$decisions" using 1:(\$5 ? \$4 : 1/0) axes x1y2 with points pt 9 ps 2 lc rgb "#000000" title "scaling decision", \
     "$decisions" using 1:(\$5 ? 1/0 : \$4) axes x1y2 with points pt 8 ps 2 lc rgb "#000000" title "decision not applied (cooldown)", \
     "$decisions" using 1:4:(sprintf("%s %d->%d", stringcolumn(2), \$3, \$4)) axes x1y2 with labels offset 0,1.2 font ",9" notitle
GP
echo "wrote $dat, $decisions and $out/autoscale.png"
