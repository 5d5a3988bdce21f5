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
#   bench_machine              prints the "machine: N cores, load average"
#                              line every result starts with
#   bench_ratio A B [DIGITS]   prints A / B with DIGITS decimals (2), or
#                              "-" when B is not positive
#   bench_free_port            prints a free TCP port on 127.0.0.1
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

bench_machine() {
    echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

bench_ratio() {
    awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { if (b > 0) printf "%.*f", d, a / b; else print "-" }'
}

bench_free_port() {
    python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}
