#!/usr/bin/env bash
# chaos.sh - kill a random eddy worker every K seconds for D seconds.
#
#   deploy/chaos.sh [--compose | --local] --every K --for D [--restart]
#                   [--down S] [--project NAME] [--seed N]
#
#   --compose       (default) `docker kill` a random running worker container
#                   of the compose deployment (services named worker*).
#   --local         `kill -9` a random `eddy worker` process on this host
#                   (processes in other PID namespaces, e.g. containers, are
#                   left alone).
#   --every K       seconds between kills (whole number >= 1); first kill at K.
#   --for D         stop after D seconds (whole number >= 1).
#   --restart       bring the victim back S seconds after the kill:
#                   compose: `docker start CONTAINER`;
#                   local: start a replacement `eddy worker ...` with the
#                   victim's exact command line (same --name, --coordinator,
#                   ports), detached, log in $TMPDIR/eddy-chaos-NAME.log.
#   --down S        seconds a victim stays dead before --restart (default 1).
#   --project NAME  compose: only containers of this compose project
#                   (default: any project).
#   --match STRING  local: only workers whose command line contains STRING,
#                   e.g. --match tcp://127.0.0.1:7600 for one coordinator's
#                   workers (default: every `eddy worker` in this namespace).
#   --seed N        seed bash's $RANDOM, for a repeatable victim sequence.
#
# Every action is printed as one timestamped line on stdout. `docker kill`
# counts as a manual stop: Docker's restart policy does NOT bring the
# container back, so without --restart a killed worker stays down.
# Exit 0 when done, 1 on a runtime failure (no docker, ...), 2 on bad flags.
set -u

mode=compose
every=
duration=
restart=0
down=1
project=
match=
seed=

usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; }
bad() { echo "chaos.sh: $*" >&2; echo "usage: deploy/chaos.sh [--compose | --local] --every K --for D [--restart] (see --help)" >&2; exit 2; }
need() { [ "$2" -ge 2 ] || bad "$1 needs a value"; }
is_uint() { case "$1" in ''|*[!0-9]*) return 1 ;; *) return 0 ;; esac; }

while [ $# -gt 0 ]; do
  case "$1" in
    --compose) mode=compose; shift ;;
    --local) mode=local; shift ;;
    --every) need "$1" $#; every=$2; shift 2 ;;
    --for) need "$1" $#; duration=$2; shift 2 ;;
    --restart) restart=1; shift ;;
    --down) need "$1" $#; down=$2; shift 2 ;;
    --project) need "$1" $#; project=$2; shift 2 ;;
    --match) need "$1" $#; match=$2; shift 2 ;;
    --seed) need "$1" $#; seed=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown flag '$1'" ;;
  esac
done
[ -n "$every" ] || bad "--every K is required"
[ -n "$duration" ] || bad "--for D is required"
is_uint "$every" && [ "$every" -ge 1 ] || bad "--every must be a whole number of seconds >= 1, got '$every'"
is_uint "$duration" && [ "$duration" -ge 1 ] || bad "--for must be a whole number of seconds >= 1, got '$duration'"
is_uint "$down" || bad "--down must be a whole number of seconds, got '$down'"
if [ -n "$seed" ]; then is_uint "$seed" || bad "--seed must be a whole number"; RANDOM=$seed; fi

say() { printf '%s chaos: %s\n' "$(date '+%Y-%m-%dT%H:%M:%S%z')" "$*"; }

if [ "$mode" = compose ]; then
  command -v docker >/dev/null || { echo "chaos.sh: no docker client" >&2; exit 1; }
  docker info >/dev/null 2>&1 || { echo "chaos.sh: docker daemon not reachable" >&2; exit 1; }
fi

# --- compose ----------------------------------------------------------------
compose_workers() {   # running worker containers, one name per line
  local filter=(--filter label=com.docker.compose.service)
  [ -n "$project" ] && filter+=(--filter "label=com.docker.compose.project=$project")
  docker ps "${filter[@]}" --format '{{.Names}} {{.Label "com.docker.compose.service"}}' \
    | awk '$2 ~ /^worker/ {print $1}'
}

# --- local ------------------------------------------------------------------
local_workers() {     # pids of `eddy worker` processes in our PID namespace (builtins only)
  local pid
  local -a a
  for pid in $(pgrep -x eddy); do
    [[ /proc/$pid/ns/pid -ef /proc/$$/ns/pid ]] || continue
    mapfile -d '' a 2>/dev/null </proc/"$pid"/cmdline || continue
    [ "${a[1]-}" = worker ] || continue
    [ -z "$match" ] || [[ "${a[*]}" == *"$match"* ]] || continue
    echo "$pid"
  done
}
respawn_local() {     # respawn_local CMDLINE-FILE NAME CWD
  local -a argv
  mapfile -d '' argv <"$1"
  local log="${TMPDIR:-/tmp}/eddy-chaos-$2.log" pid
  # A background job of a non-interactive shell is not a group leader, so
  # setsid does not fork and $! is the new worker's pid.
  cd "$3" 2>/dev/null || cd /
  setsid "${argv[@]}" >>"$log" 2>&1 </dev/null &
  pid=$!
  cd - >/dev/null || true
  sleep 0.2
  if kill -0 "$pid" 2>/dev/null; then
    say "restarted $2 as pid $pid (${argv[*]}), log $log"
  else
    say "replacement for $2 exited at once (${argv[*]}), see $log"
  fi
}

# --- main loop --------------------------------------------------------------
pick() { local n=$#; [ "$n" -gt 0 ] || return 1; local i=$(( RANDOM % n + 1 )); echo "${!i}"; }

say "mode $mode, every ${every}s for ${duration}s$([ $restart = 1 ] && echo ", restart after ${down}s")"
start=$(date +%s)
rounds=0
kills=0
while :; do
  next=$(( start + (rounds + 1) * every ))
  [ "$next" -le $(( start + duration )) ] || break
  now=$(date +%s)
  [ "$next" -gt "$now" ] && sleep $(( next - now ))
  rounds=$((rounds + 1))
  if [ "$mode" = compose ]; then
    # shellcheck disable=SC2046
    victim=$(pick $(compose_workers)) || { say "no running worker container to kill"; continue; }
    if docker kill "$victim" >/dev/null 2>&1; then
      kills=$((kills + 1)); say "killed container $victim (docker kill)"
    else
      say "docker kill $victim failed"; continue
    fi
    if [ "$restart" = 1 ]; then
      sleep "$down"
      if docker start "$victim" >/dev/null 2>&1; then say "restarted container $victim (docker start)"
      else say "docker start $victim failed"; fi
    fi
  else
    # shellcheck disable=SC2046
    victim=$(pick $(local_workers)) || { say "no local eddy worker process to kill"; continue; }
    saved=$(mktemp)
    cp "/proc/$victim/cmdline" "$saved" 2>/dev/null
    cwd=$(readlink "/proc/$victim/cwd" 2>/dev/null || echo /)
    name=$(tr '\0' '\n' <"$saved" | awk 'p {print; exit} /^--name$/ {p=1} /^--name=/ {sub(/^--name=/, ""); print; exit}')
    name=${name:-worker-pid$victim}
    if kill -9 "$victim" 2>/dev/null; then
      kills=$((kills + 1)); say "killed $name pid $victim (kill -9)"
    else
      say "kill -9 $victim failed (already gone?)"; rm -f "$saved"; continue
    fi
    if [ "$restart" = 1 ] && [ -s "$saved" ]; then
      sleep "$down"
      respawn_local "$saved" "$name" "$cwd"
    fi
    rm -f "$saved"
  fi
done
say "done: $kills kill(s) in ${duration}s"
