#!/usr/bin/env bash
# bench/nemesis.sh - a seeded random schedule of network faults against a
# real cluster for minutes, then: did the job's output stay exact?
#
# Topology (as tests/support/netns.h, made here with ip and nft): a hub
# namespace with a bridge and six test hosts on 10.98.0.0/24, no route out:
# host 0 etcd and the clients (submit, status), hosts 1 and 2 a coordinator
# each (etcd metastore, election), hosts 3..5 a worker each; CURVE keys on
# every socket. A wordcount job (--input TEXT --output FILE, exactly once)
# is paced to last about DURATION seconds. While it runs, faults are drawn
# from a generator seeded with SEED, each held HOLD_MIN..HOLD_MAX s, then
# healed, then QUIET_MIN..QUIET_MAX s of calm:
#   isolate        a host drops every packet (coordinator or worker)
#   silent         a worker host isolated and its process SIGSTOPped
#   partition      two hosts cut from each other, both ways
#   oneway         packets from one host to another dropped
#   leader_cut     the leading coordinator cut from the workers only
#   loss           LOSS_PCT % random loss on every host
#   etcd_blip      the standby's new connections to etcd dropped, and the
#                  leader SIGKILLed (and started again after the heal)
# With DELAY_MS > 0 every worker's connections to the coordinators cross a
# delay proxy of ours in the worker's host for the whole run
# (tests/tools/delay_proxy behind an nft redirect, as eddy_netns_delay in
# tests/support/netns.c): DELAY_MS +- JITTER_MS per chunk both ways, seeded
# by SEED; the faults above come on top of it.
# Afterwards everything is healed and the job must finish. Reported: the
# faults applied (by kind), coordinators that exited on their own, leader
# elections, restores, the time the job was not running (status polled every
# POLL_S from host 0; a failed status counts as unavailable) and whether the
# output is exact (against an awk reference count).
#
# Needs root, iproute2, nftables, etcd, jq; not part of CI (minutes long).
# Environment: BUILD (build dir), SEED (1), DURATION (180 s), MB (text size,
# 6), HOLD_MIN/HOLD_MAX (3/10 s), QUIET_MIN/QUIET_MAX (4/10 s), LOSS_PCT
# (20), POLL_S (0.5), HB_TIMEOUT_MS (1500), LEADER_TTL_MS (3000),
# FINISH_TIMEOUT (300 s), DELAY_MS (0: no delay proxy) and JITTER_MS (0).
set -euo pipefail

HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
SEED=${SEED:-1}
DURATION=${DURATION:-180}
MB=${MB:-6}
HOLD_MIN=${HOLD_MIN:-3} HOLD_MAX=${HOLD_MAX:-10}
QUIET_MIN=${QUIET_MIN:-4} QUIET_MAX=${QUIET_MAX:-10}
LOSS_PCT=${LOSS_PCT:-20}
POLL_S=${POLL_S:-0.5}
HB_TIMEOUT_MS=${HB_TIMEOUT_MS:-1500}
LEADER_TTL_MS=${LEADER_TTL_MS:-3000}
FINISH_TIMEOUT=${FINISH_TIMEOUT:-300}
DELAY_MS=${DELAY_MS:-0} JITTER_MS=${JITTER_MS:-0}
EDDY=$BUILD/eddy
PROXY=$BUILD/delay_proxy
GEN=$BUILD/gen_text
ETCD=${EDDY_ETCD:-/usr/bin/etcd}

die() { echo "nemesis.sh: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "needs root (network namespaces)"
for t in ip nft jq; do command -v $t >/dev/null || die "$t is required"; done
[[ -x $EDDY && -x $GEN ]] || die "missing $EDDY or $GEN; build first (cmake --build build --target eddy gen_text)"
[[ -x $ETCD ]] || die "missing $ETCD (apt-get install etcd-server)"
[[ $DELAY_MS == 0 || -x $PROXY ]] || die "missing $PROXY; build it (cmake --build build --target delay_proxy)"

P=nem$$
HUB=$P-hub
N=6
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-nemesis.XXXXXX")
declare -A PIDS   # role -> pid
POLLER=

addr() { echo "10.98.0.$(($1 + 1))"; }
ns() { echo "$P-h$1"; }
nsx() { local h=$1; shift; ip netns exec "$(ns "$h")" "$@"; }
# In the background, with $! the process's own pid (ip netns exec execs it;
# `nsx ... &` would give a subshell's pid, which SIGSTOP and SIGKILL miss).
nsbg() { local h=$1 out=$2; shift 2; ip netns exec "$(ns "$h")" "$@" >>"$out" 2>&1 & }
nftx() { nsx "$1" nft "$2"; }

cleanup() {
    [[ -n $POLLER ]] && kill "$POLLER" 2>/dev/null || true
    for r in "${!PIDS[@]}"; do
        kill -CONT "${PIDS[$r]}" 2>/dev/null || true
        kill -KILL "${PIDS[$r]}" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    for h in $(seq 0 $((N - 1))); do ip netns del "$(ns "$h")" 2>/dev/null || true; done
    ip netns del "$HUB" 2>/dev/null || true
    [[ -n ${KEEP:-} ]] || rm -rf "$TMP"
}
trap cleanup EXIT

# ---- hosts ----------------------------------------------------------------
ip netns add "$HUB"
ip -n "$HUB" link add br0 type bridge
ip -n "$HUB" link set br0 up
for h in $(seq 0 $((N - 1))); do
    ip netns add "$(ns "$h")"
    ip -n "$(ns "$h")" link set lo up
    ip -n "$HUB" link add "v${h}h" type veth peer name eth0
    ip -n "$HUB" link set eth0 netns "$(ns "$h")"
    ip -n "$HUB" link set "v${h}h" master br0 up
    ip -n "$(ns "$h")" addr add "$(addr "$h")/24" dev eth0
    ip -n "$(ns "$h")" link set eth0 up
    nftx "$h" "add table inet eddyfault"
    nftx "$h" "add chain inet eddyfault in { type filter hook input priority 0; policy accept; }"
    nftx "$h" "add chain inet eddyfault out { type filter hook output priority 0; policy accept; }"
done

heal() {
    for h in $(seq 0 $((N - 1))); do
        nftx "$h" "flush chain inet eddyfault in"
        nftx "$h" "flush chain inet eddyfault out"
    done
    for r in "${!PIDS[@]}"; do kill -CONT "${PIDS[$r]}" 2>/dev/null || true; done
}
isolate() { nftx "$1" 'add rule inet eddyfault out oifname "eth0" drop'; nftx "$1" 'add rule inet eddyfault in iifname "eth0" drop'; }
oneway() { nftx "$1" "add rule inet eddyfault out ip daddr $(addr "$2") drop"; nftx "$2" "add rule inet eddyfault in ip saddr $(addr "$1") drop"; }
partition() { oneway "$1" "$2"; oneway "$2" "$1"; }
loss() { nftx "$1" "add rule inet eddyfault out oifname \"eth0\" numgen random mod 100 < $2 drop"; nftx "$1" "add rule inet eddyfault in iifname \"eth0\" numgen random mod 100 < $2 drop"; }
# delay_to H T PORT: host H's new connections to host T's PORT through a
# delay proxy in H (its own connections, marked 0x24, exempt from the redirect)
delay_to() {
    local h=$1 t=$2 port=$3 lport=$((30000 + $2 * 1000 + $3 % 1000)) log=$TMP/delay-$1-$2.log
    nsbg "$h" "$log" "$PROXY" --listen "127.0.0.1:$lport" --target "$(addr "$t"):$port" \
        --delay-ms "$DELAY_MS" --jitter-ms "$JITTER_MS" --seed "$((SEED * 100 + h * 10 + t))" --mark 0x24
    PIDS[d$h$t]=$!
    for _ in $(seq 100); do grep -q listening "$log" 2>/dev/null && break; sleep 0.1; done
    grep -q listening "$log" || die "delay proxy in host $h did not start: $(cat "$log")"
    nftx "$h" "add table ip eddydelay"
    nftx "$h" "add chain ip eddydelay out { type nat hook output priority -100; }"
    nftx "$h" "add rule ip eddydelay out meta mark != 0x24 ip daddr $(addr "$t") tcp dport $port redirect to :$lport"
}
block_connects() { nftx "$1" "add rule inet eddyfault out ip daddr $(addr "$2") tcp flags & (syn | ack) == syn drop"; }

# ---- cluster --------------------------------------------------------------
export EDDY_KEYS=$TMP/keys
"$EDDY" keygen "$EDDY_KEYS" >/dev/null
E=$(addr 0)
nsbg 0 "$TMP/etcd.log" "$ETCD" --name nem --data-dir "$TMP/etcd" --listen-client-urls "http://$E:2379" \
    --advertise-client-urls "http://$E:2379" --listen-peer-urls "http://$E:2380" \
    --initial-advertise-peer-urls "http://$E:2380" --initial-cluster "nem=http://$E:2380"
PIDS[etcd]=$!
for _ in $(seq 100); do nsx 0 curl -s --max-time 1 "http://$E:2379/health" 2>/dev/null | grep -q true && break; sleep 0.2; done
META="http://$E:2379?timeout_ms=1000"
COORDS="tcp://$(addr 1):7600,tcp://$(addr 2):7600"
start_coordinator() { # 1 or 2
    nsbg "$1" "$TMP/coordinator-$1.log" "$EDDY" coordinator --bind "tcp://$(addr "$1"):7600" \
        --http-port 0 --metastore "$META" --snapshot-dir "$TMP/snapshots" --checkpoint-interval 1000 \
        --heartbeat-ms 200 --heartbeat-timeout-ms "$HB_TIMEOUT_MS" --leader-ttl-ms "$LEADER_TTL_MS"
    PIDS[c$1]=$!
}
start_coordinator 1
start_coordinator 2
for h in 3 4 5; do
    if [[ $DELAY_MS != 0 ]]; then delay_to "$h" 1 7600; delay_to "$h" 2 7600; fi
    nsbg "$h" "$TMP/worker-$((h - 2)).log" "$EDDY" worker --coordinator "$COORDS" --name "worker-$((h - 2))" \
        --snapshot-dir "$TMP/snapshots" --bind-host "$(addr "$h")" --data-port 7700
    PIDS[w$h]=$!
done
status() { nsx 0 "$EDDY" status --json --coordinator "$COORDS" 2>/dev/null || true; }
job_state() { jq -r '.jobs[0].state // "none"' 2>/dev/null <<<"$(status)" || echo none; }
leader_host() { # 1 or 2: whose log says it leads now
    local l1 l2
    l1=$(grep -c "elected leader" "$TMP/coordinator-1.log" || true)
    l2=$(grep -c "elected leader" "$TMP/coordinator-2.log" || true)
    local s
    s=$(status)
    jq -r '.leader.leader // ""' <<<"$s" 2>/dev/null | grep -q "$(addr 2)" && { echo 2; return; }
    jq -r '.leader.leader // ""' <<<"$s" 2>/dev/null | grep -q "$(addr 1)" && { echo 1; return; }
    (( l2 > l1 )) && echo 2 || echo 1
}

TEXT=$TMP/input.txt OUT=$TMP/out.tsv
"$GEN" "$TEXT" "$MB" 20000 "$SEED" >/dev/null
LINES=$(wc -l <"$TEXT")
RATE=$((LINES / DURATION + 1))
export LC_ALL=C
awk '{for (i = 1; i <= NF; i++) n[$i]++} END {for (w in n) printf "%s\t%d\n", w, n[w]}' "$TEXT" | sort >"$TMP/reference.tsv"
sleep 2
nsx 0 "$EDDY" submit --coordinator "$COORDS" --job wordcount --input "$TEXT" --output "$OUT" \
    --parallelism 3 --rate "$RATE" >/dev/null || die "submit failed: $(tail -5 "$TMP"/coordinator-*.log)"
for _ in $(seq 100); do [[ $(job_state) == running ]] && break; sleep 0.3; done
echo "seed $SEED: $LINES lines at $RATE lines/s (~$DURATION s), faults for $DURATION s"

# availability: one sample per POLL_S, "1" when the job runs
# (a status that hangs on a cut-off coordinator makes a long sample: each
# sample's state holds until the next one's time)
( while :; do s=$(job_state); v=0; [[ $s == running || $s == finished ]] && v=1
  echo "$(date +%s.%N) $v"; sleep "$POLL_S"; done ) >"$TMP/samples" 2>/dev/null &
POLLER=$!

# ---- schedule -------------------------------------------------------------
RANDOM=$SEED
KINDS=(isolate silent partition oneway leader_cut loss etcd_blip)
declare -A COUNT
# R = a number in [$1, $2]. Never through $(...): bash reseeds RANDOM in a
# subshell, and the schedule would not follow SEED.
rnd() { R=$(($1 + RANDOM % ($2 - $1 + 1))); }
end=$((SECONDS + DURATION))
while (( SECONDS < end )); do
    kind=${KINDS[$((RANDOM % ${#KINDS[@]}))]}
    rnd "$HOLD_MIN" "$HOLD_MAX"; hold=$R
    lead=$(leader_host)
    case $kind in
    isolate) rnd 1 5; h=$R; isolate "$h"; what="host $h" ;;
    silent) rnd 3 5; h=$R; isolate "$h"; kill -STOP "${PIDS[w$h]}"; what="worker host $h" ;;
    partition) rnd 1 5; a=$R; rnd 0 5; b=$R; [[ $a == "$b" ]] && b=0; partition "$a" "$b"; what="$a<->$b" ;;
    oneway) rnd 0 5; a=$R; rnd 1 5; b=$R; [[ $a == "$b" ]] && a=0; oneway "$a" "$b"; what="$a->$b" ;;
    leader_cut) for h in 3 4 5; do partition "$lead" "$h"; done; what="leader $lead" ;;
    loss) for h in $(seq 0 5); do loss "$h" "$LOSS_PCT"; done; what="$LOSS_PCT %" ;;
    etcd_blip) other=$((3 - lead)); block_connects "$other" 0; kill -KILL "${PIDS[c$lead]}" 2>/dev/null || true
               what="leader $lead killed, $other blocked" ;;
    esac
    COUNT[$kind]=$((${COUNT[$kind]:-0} + 1))
    echo "$(date +%T) fault $kind ($what) for $hold s"
    sleep "$hold"
    heal
    if [[ $kind == etcd_blip ]]; then wait "${PIDS[c$lead]}" 2>/dev/null || true; start_coordinator "$lead"; fi
    rnd "$QUIET_MIN" "$QUIET_MAX"; sleep "$R"
done
heal
echo "$(date +%T) healed; waiting for the job to finish"
deadline=$((SECONDS + FINISH_TIMEOUT))
state=none
while (( SECONDS < deadline )); do
    state=$(job_state)
    [[ $state == finished || $state == failed || $state == cancelled ]] && break
    sleep 1
done
kill "$POLLER" 2>/dev/null || true
POLLER=

# ---- report ---------------------------------------------------------------
exits=0
for c in 1 2; do kill -0 "${PIDS[c$c]}" 2>/dev/null || exits=$((exits + 1)); done
elections=$(cat "$TMP"/coordinator-*.log | grep -c "elected leader" || true)
restores=$(cat "$TMP"/coordinator-*.log | grep -cE "restoring from checkpoint|restarting from the beginning" || true)
read -r unavailable sampled < <(awk 'NR > 1 && pv == 0 {down += $1 - pt} NR > 1 {all += $1 - pt}
    {pt = $1; pv = $2} END {printf "%.1f %.0f\n", down, all}' "$TMP/samples")
exact=no
[[ $state == finished && -f $OUT ]] && sort "$OUT" | cmp -s - "$TMP/reference.tsv" && exact=yes
faults=0
kinds=""
for k in "${!COUNT[@]}"; do faults=$((faults + COUNT[$k])); kinds+=" $k=${COUNT[$k]}"; done
echo "seed                 $SEED"
echo "control-plane delay  ${DELAY_MS} +- ${JITTER_MS} ms"
echo "faults survived      $faults ($kinds )"
echo "coordinator exits    $exits (not counting the etcd_blip kills)"
echo "leader elections     $elections"
echo "restores             $restores"
echo "time unavailable     ${unavailable} s of ${sampled} s (job not running, or no status)"
echo "job                  $state"
echo "output exact         $exact"
[[ $exact == yes ]]
