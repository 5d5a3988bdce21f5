# bench/common.sh - sourced by every benchmark script for what they all do
# the same way:
#
#   bench_help                 prints the script's leading comment block
#                              (its --help) and exits 0
#   bench_args "$@"            a bench that takes no argument: --help/-h
#                              prints the help, anything else is a usage
#                              error (exit 2)
#   bench_need_bin PATH...     each PATH must be an executable, else the
#                              bench says how to build it and exits 2
#
# The caller sets ROOT (the checkout) before bench_need_bin.

bench_help() {
    awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"
    exit 0
}

bench_args() {
    case "${1:-}" in
        "") ;;
        -h|--help) bench_help ;;
        *) echo "$(basename "$0"): unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
}

bench_need_bin() {
    local bin
    for bin in "$@"; do
        if [[ ! -x $bin ]]; then
            echo "missing $bin; build first:" >&2
            echo "  cmake -B build -S ${ROOT:-.} -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2" >&2
            exit 2
        fi
    done
}
