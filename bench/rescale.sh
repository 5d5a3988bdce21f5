#!/usr/bin/env bash
# bench/rescale.sh - sudden against fluid key-group migration, side by side.
#
# For each key count V in KEYS and each MODE in MODES (sudden, fluid), one
# fresh run of build/latency_probe (bench/latency_probe.c) feeding
#   eddy local --workers 3 --parallelism 2 --migration MODE
#              --migration-step-key-groups STEP --job wordcount --socket ...
# in phases: `fill` sends V distinct marker words as fast as eddy takes them
# (V keys of state in `count`), `before` 2 s at RATE lines/s, `rescale`
# RESCALE_S s at RATE with `eddy rescale wordcount count 3` at its start,
# `after` 2 s. Every marker's latency (sent -> its changelog row read) is
# kept (-o), and the rescale command's span is the migration window.
# Per run it prints: bytes and key groups moved, MB/s over the migration
# (bytes / the coordinator's migration time) and, for fluid, copy MB/s
# (bytes / the steps' copy time: old owner starts serialising -> new owner
# installed the last group, summed over steps; without the wait for the
# handoff markers), total migration time (the command's span),
# the sources' pause (sudden: all of it; fluid: only the EXPAND deploy, no
# state moves in it), max and p99 marker latency during the migration and in
# `before`, and the 50 ms buckets of the migration window without output;
# then fluid/sudden ratios per V, and with gnuplot a PNG per V of
# throughput (50 ms buckets) and marker latency over time for both modes.
#
# SCENARIO=backlog runs a job that is BEHIND instead (issue 25): wordcount
# on a BACKLOG_MB file of text (gen_text) at unlimited rate, parallelism 2,
# 3 workers, checkpoints every 2 s, and `eddy rescale wordcount count 4` at
# AT s, once per mode in BACKLOG_MODES (default "sudden fluid fluid-1";
# fluid-1 is fluid with --migration-steps-in-flight 1: one step after
# another), ROUNDS times (default 3) in turn. Per run it prints the rescale
# command's span, the coordinator's line (steps, total time, pause), and
# whether the output equals the first sudden run's; then per mode the
# median span and its ratio against sudden's.
#
# Environment: BUILD (build dir), KEYS ("1000000"; the issue also asks for
# 4000000), MODES ("sudden fluid"), RATE (2000), RESCALE_S (8), STEP (8,
# --migration-step-key-groups), STEP_BYTES (unset: eddy's default;
# --migration-step-bytes),
# OUT (directory for the marker files and PNGs; default a temporary one,
# kept when set).
set -euo pipefail
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
bench_args "$@"
BUILD=${BUILD:-$ROOT/build}
KEYS=${KEYS:-1000000}
MODES=${MODES:-sudden fluid}
RATE=${RATE:-2000}
RESCALE_S=${RESCALE_S:-8}
STEP=${STEP:-8}
STEP_BYTES=${STEP_BYTES:-}
STEP_FLAGS=(--migration-step-key-groups "$STEP")
[[ -n $STEP_BYTES ]] && STEP_FLAGS+=(--migration-step-bytes "$STEP_BYTES")
EDDY=$BUILD/eddy
PROBE=$BUILD/latency_probe

bench_need_bin "$EDDY" "$PROBE"
command -v jq >/dev/null || { echo "jq is required" >&2; exit 2; }

if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    TMP=$OUT
else
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-rescale.XXXXXX")
    trap 'rm -rf "$TMP"' EXIT
fi
# a free control port for each run
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
bench_machine

# A rescale of a job that is behind (SCENARIO=backlog, above).
backlog() {
    local mb=${BACKLOG_MB:-60} at=${AT:-3} rounds=${ROUNDS:-3} modes=${BACKLOG_MODES:-sudden fluid fluid-1}
    local text=$TMP/text-$mb ref="" r mode
    bench_need_bin "$BUILD/gen_text"
    "$BUILD/gen_text" "$text" "$mb" 200000 7 >/dev/null
    declare -A spans
    for ((r = 1; r <= rounds; r++)); do
        for mode in $modes; do
            local port flags=(--migration "${mode%%-*}") run=$TMP/backlog-$mode-$r
            [[ $mode == *-* ]] && flags+=(--migration-steps-in-flight "${mode#*-}")
            port=$(bench_free_port)
            "$EDDY" local --workers 3 --parallelism 2 --checkpoint-interval 2000 --no-rebalance \
                "${flags[@]}" --control-port "$port" --http-port 0 --quiet --job wordcount \
                --input "$text" --output "$run.tsv" >/dev/null 2>"$run.log" &
            local pid=$! t0 t1
            sleep "$at"
            t0=$(date +%s%N)
            "$EDDY" rescale wordcount count 4 --coordinator "tcp://127.0.0.1:$port" \
                --timeout-ms 120000 >"$run.out" 2>&1 || true
            t1=$(date +%s%N)
            wait "$pid" || true
            local span=$(( (t1 - t0) / 1000000 )) same=-
            sort "$run.tsv" >"$run.sorted"
            if [[ -z $ref && $mode == sudden ]]; then ref=$run.sorted; fi
            [[ -n $ref ]] && { cmp -s "$ref" "$run.sorted" && same=yes || same=NO; }
            printf '%-8s round %d: rescale %5d ms, output same as sudden: %s; %s\n' "$mode" "$r" \
                "$span" "$same" "$(head -c 300 "$run.out")"
            spans[$mode]+="$span "
        done
    done
    local med
    median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
    local sudden_med
    sudden_med=$(median "${spans[sudden]:-}")
    for mode in $modes; do
        med=$(median "${spans[$mode]}")
        printf '%-8s median rescale %s ms (%s), %s x sudden\n' "$mode" "$med" "${spans[$mode]% }" \
            "$(bench_ratio "$med" "${sudden_med:-0}")"
    done
}
if [[ ${SCENARIO:-latency} == backlog ]]; then
    backlog
    exit 0
fi

# analyse MARKS: one line of figures from a probe's marker file:
# during_max during_p99 before_max before_p99 window_ms buckets empty_buckets
analyse() {
    awk -v before_s=2 '
        NR == 1 { cs = $3; ce = $4; next }
        $3 < 0 { next }
        { sent = $2; lat = $3; at = sent + lat / 1000
          if (sent >= cs && sent <= ce) d[nd++] = lat
          else if (sent < cs && sent >= cs - before_s) b[nb++] = lat
          if (at >= cs && at <= ce) bucket[int((at - cs) / 0.05)]++ }
        function srt(a, n,   i, j, t) { for (i = 1; i < n; i++) { t = a[i]; for (j = i - 1; j >= 0 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
        END {
          srt(d, nd); srt(b, nb)
          nbk = int((ce - cs) / 0.05) + 1; empty = 0
          for (k = 0; k < nbk; k++) if (!(k in bucket)) empty++
          printf "%.1f %.1f %.1f %.1f %.0f %d %d\n",
            nd ? d[nd - 1] : -1, nd ? d[int((nd - 1) * 0.99)] : -1,
            nb ? b[nb - 1] : -1, nb ? b[int((nb - 1) * 0.99)] : -1,
            (ce - cs) * 1000, nbk, empty }' "$1"
}

declare -A R
for V in $KEYS; do
    for MODE in $MODES; do
        PORT=$(free_port)
        COORD=tcp://127.0.0.1:$PORT
        marks=$TMP/marks-$V-$MODE.txt
        out=$TMP/rescale-$V-$MODE.out
        fill_s=$(( V / 100000 + 5 ))
        "$PROBE" -w 20 -o "$marks" \
            -p "fill,$(( V / fill_s )),$fill_s" -p "before,$RATE,2" \
            -p "rescale,$RATE,$RESCALE_S,$EDDY rescale wordcount count 3 --coordinator $COORD --timeout-ms 120000 >$out 2>&1; $EDDY status --json --coordinator $COORD >$TMP/status-$V-$MODE.json 2>/dev/null" \
            -p "after,$RATE,2" -- \
            "$EDDY" local --workers 3 --parallelism 2 --checkpoint-interval 0 --migration "$MODE" \
            "${STEP_FLAGS[@]}" --control-port "$PORT" --http-port 0 \
            --quiet --job wordcount --socket '127.0.0.1:{PORT}' >"$TMP/probe-$V-$MODE.txt" 2>"$TMP/eddy-$V-$MODE.log" || true
        fill=$(awk '$1 == "phase" && $2 == "fill" {print $8}' "$TMP/probe-$V-$MODE.txt")
        rec=$(jq -r '[.jobs[0].rescales[] | select(.operator == "count")] | last |
            "\(.pause_ms) \(.bytes_moved) \(.key_groups_moved) \(.transfer_ms // 0) \(.steps // 0)"' "$TMP/status-$V-$MODE.json" 2>/dev/null || echo "- - - 0 0")
        read -r pause bytes kgs xfer_ms steps <<<"$rec"
        read -r dmax dp99 bmax bp99 win nbk empty <<<"$(analyse "$marks")"
        # the coordinator's own time for the migration, from its reply
        mig_ms=$(grep -oE '(paused|in) [0-9.]+ ms' "$out" | head -1 | grep -oE '[0-9.]+' || echo "$win")
        mbs=$(awk -v b="${bytes:-0}" -v t="${mig_ms:-0}" 'BEGIN { printf "%.1f", (t > 0 ? b / 1048576 / (t / 1000) : 0) }')
        copy=$(awk -v b="${bytes:-0}" -v t="${xfer_ms:-0}" 'BEGIN { if (t > 0) printf "%.1f", b / 1048576 / (t / 1000); else printf "-" }')
        printf '%-8s V=%-8s keys=%-8s moved %s key groups, %s bytes, %s MB/s; total %s ms, sources paused %s ms\n' \
            "$MODE" "$V" "${fill:-?}" "${kgs:-?}" "${bytes:-?}" "$mbs" "$win" "${pause:-?}"
        [[ $MODE == fluid ]] && printf '         copy: %s steps, %s ms copying, %s MB/s per transfer (without waiting for markers)\n' \
            "${steps:-?}" "${xfer_ms:-?}" "$copy"
        printf '         latency during: max %s ms p99 %s ms; before: max %s ms p99 %s ms; 50 ms buckets without output: %s of %s\n' \
            "$dmax" "$dp99" "$bmax" "$bp99" "$empty" "$nbk"
        printf '         %s\n' "$(cat "$out")"
        R[$V,$MODE]="$win $dmax $dp99 $empty ${pause:-0} $mbs"
    done
    if [[ -n ${R[$V,sudden]:-} && -n ${R[$V,fluid]:-} ]]; then
        read -r sw sm sp se spa smb <<<"${R[$V,sudden]}"
        read -r fw fm fp fe fpa fmb <<<"${R[$V,fluid]}"
        awk -v V="$V" -v sw="$sw" -v fw="$fw" -v sm="$sm" -v fm="$fm" -v sp="$sp" -v fp="$fp" \
            -v spa="$spa" -v fpa="$fpa" -v smb="$smb" -v fmb="$fmb" -v fe="$fe" 'function r(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "-" }
            BEGIN { printf "fluid/sudden V=%s: total time %s, max latency %s, p99 latency %s, pause %s, MB/s %s; fluid empty 50 ms buckets: %s\n",
                    V, r(fw, sw), r(fm, sm), r(fp, sp), r(fpa, spa), r(fmb, smb), fe }'
    fi
    if command -v gnuplot >/dev/null && [[ -f $TMP/marks-$V-sudden.txt && -f $TMP/marks-$V-fluid.txt ]]; then
        for MODE in sudden fluid; do
            awk 'NR == 1 { cs = $3; next } $3 >= 0 { at = $2 + $3 / 1000 - cs; print at, $3; b[int(at / 0.05)]++ }
                 END { for (k in b) print k * 0.05, b[k] * 20 > "/dev/stderr" }' \
                "$TMP/marks-$V-$MODE.txt" >"$TMP/lat-$V-$MODE.dat" 2>"$TMP/tput-$V-$MODE.unsorted"
            sort -n "$TMP/tput-$V-$MODE.unsorted" >"$TMP/tput-$V-$MODE.dat"
        done
        gnuplot <<GP 2>/dev/null || true
set terminal png size 1200,800
set output "$TMP/rescale-$V.png"
set multiplot layout 2,1 title "rescale 2 -> 3 at $V keys (t = 0: rescale command)"
set xrange [-2:$RESCALE_S + 2]
set ylabel "rows/s (50 ms buckets)"
set yrange [0:$((RATE * 4))]
plot "$TMP/tput-$V-sudden.dat" with steps title "sudden", "$TMP/tput-$V-fluid.dat" with steps title "fluid"
set ylabel "marker latency (ms)"
set autoscale y
set logscale y
plot "$TMP/lat-$V-sudden.dat" with points pt 7 ps 0.3 title "sudden", "$TMP/lat-$V-fluid.dat" with points pt 7 ps 0.3 title "fluid"
unset multiplot
GP
        [[ -f $TMP/rescale-$V.png ]] && echo "plot: $TMP/rescale-$V.png${OUT:+}"
    fi
done
