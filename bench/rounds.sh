# bench/rounds.sh - sourced by benchmarks that compare variants on a noisy,
# shared machine (bench/reorder.sh, bench/pipeline_vs_c.sh). Variants run
# interleaved in rounds (A B C D, A B C D, ...), so a burst of load from
# elsewhere hits every variant of a round rather than one variant's runs;
# each variant is summarised by its median, and each ratio both as the ratio
# of medians and as the spread (min/max) of the per-round ratios.
#
# Every run is timed by bash's `time` (getrusage, millisecond resolution):
# wall seconds and CPU seconds (user + system of the process and the
# children it waited for). CPU time is what the job itself spent: time
# spent waiting for a core that another process holds is not in it, which
# on a 2-core machine shared with builds is most of the noise in wall time.
#
#   rounds_setup "$@"          the bench's arguments: --long triples
#                              ROUNDS; makes OUT and TMP (removed at exit),
#                              where the runs' logs go
#   rounds_time LABEL CMD...   run CMD, append its wall and CPU seconds to
#                              LABEL's lists; the command's stderr goes to
#                              $ROUNDS_LOG_DIR/LABEL.log, stdout where the
#                              caller sends it; a failure stops the bench
#   rounds_median LABEL wall|cpu
#   rounds_ratio LABEL BASE wall|cpu      median(BASE) / median(LABEL):
#                                         LABEL's throughput relative to BASE
#   rounds_spread LABEL BASE wall|cpu     "min max" of the per-round ratios
#   rounds_list LABEL wall|cpu            the runs, in round order
#   rounds_net LABEL STARTUP              makes LABEL.net: LABEL's runs less
#                                         the median of STARTUP's (a run of
#                                         the same command on a tiny input):
#                                         the time the records took

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

declare -gA ROUNDS_WALL ROUNDS_CPU
ROUNDS_LOG_DIR=/tmp

rounds_setup() {
    case ${1:-} in
        "") ;;
        --long) ROUNDS=$((ROUNDS * 3)) ;;
        -h|--help) bench_help ;;
        *) echo "usage: $0 [--long] (see --help)" >&2; exit 2 ;;
    esac
    mkdir -p "$OUT"
    TMP=$(mktemp -d)
    trap 'rm -rf "$TMP"' EXIT
    ROUNDS_LOG_DIR=$TMP
}

rounds_time() {
    local label=$1; shift
    local tf=$ROUNDS_LOG_DIR/$label.time TIMEFORMAT='%3R %3U %3S' rc=0
    { time "$@" 2>"$ROUNDS_LOG_DIR/$label.log"; } 2>"$tf" || rc=$?
    if ((rc)); then
        echo "$label failed (exit $rc): $*" >&2
        tail -n 5 "$ROUNDS_LOG_DIR/$label.log" >&2
        exit 1
    fi
    local wall user sys
    read -r wall user sys < <(tail -n 1 "$tf")
    ROUNDS_WALL[$label]+="$wall "
    ROUNDS_CPU[$label]+="$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }') "
}

rounds_list() {
    if [[ $2 == cpu ]]; then echo "${ROUNDS_CPU[$1]:-}"; else echo "${ROUNDS_WALL[$1]:-}"; fi
}

rounds_median() {
    rounds_list "$1" "$2" | tr ' ' '\n' | grep . | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f", m }'
}

rounds_ratio() {
    awk -v a="$(rounds_median "$2" "$3")" -v b="$(rounds_median "$1" "$3")" \
        'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'
}

rounds_spread() {
    awk -v xs="$(rounds_list "$1" "$3")" -v bs="$(rounds_list "$2" "$3")" 'BEGIN {
        n = split(xs, x, " "); split(bs, b, " ");
        for (i = 1; i <= n; i++) {
            if (x[i] <= 0) continue;
            r = b[i] / x[i];
            if (min == "" || r < min) min = r;
            if (max == "" || r > max) max = r;
        }
        printf "%.2f %.2f", min, max
    }'
}

rounds_net() {
    local m
    m=$(rounds_median "$2" cpu)
    ROUNDS_CPU[$1.net]=$(awk -v xs="$(rounds_list "$1" cpu)" -v m="$m" \
        'BEGIN { n = split(xs, x, " "); for (i = 1; i <= n; i++) printf "%.3f ", x[i] - m }')
    m=$(rounds_median "$2" wall)
    ROUNDS_WALL[$1.net]=$(awk -v xs="$(rounds_list "$1" wall)" -v m="$m" \
        'BEGIN { n = split(xs, x, " "); for (i = 1; i <= n; i++) printf "%.3f ", x[i] - m }')
}
