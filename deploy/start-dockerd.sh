#!/usr/bin/env bash
# start-dockerd.sh - make sure a Docker daemon answers on this machine.
#
# If `docker info` already works, do nothing. Otherwise start dockerd in the
# background (log: $EDDY_DOCKERD_LOG, default /tmp/dockerd.log) and poll
# `docker info` until it answers or the deadline passes.
#
#   deploy/start-dockerd.sh [--timeout SECONDS]     (default 60)
#
# Exit 0: a daemon is up. Exit 1: dockerd is missing or did not come up in
# time (the tail of its log is printed). Exit 2: bad flags.
# Meant for CI (.ci/run) and for hosts without systemd; it needs root.
set -u

timeout=60
log=${EDDY_DOCKERD_LOG:-/tmp/dockerd.log}

usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) [ $# -ge 2 ] || { echo "start-dockerd.sh: --timeout needs a value" >&2; exit 2; }
               timeout=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "start-dockerd.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$timeout" in ''|*[!0-9]*) echo "start-dockerd.sh: --timeout must be whole seconds" >&2; exit 2 ;; esac

if ! command -v docker >/dev/null 2>&1; then
  echo "start-dockerd.sh: no docker client (apt-get install docker.io)" >&2
  exit 1
fi
if docker info >/dev/null 2>&1; then
  echo "start-dockerd.sh: docker daemon already running"
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "start-dockerd.sh: no dockerd (apt-get install docker.io)" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "start-dockerd.sh: starting dockerd needs root" >&2
  exit 1
fi

# Detached from this shell so it outlives the caller (CI step, test script).
nohup setsid dockerd >"$log" 2>&1 </dev/null &
pid=$!
echo "start-dockerd.sh: started dockerd (pid $pid, log $log)"

deadline=$(( $(date +%s) + timeout ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  if docker info >/dev/null 2>&1; then
    echo "start-dockerd.sh: docker daemon is up after $(( timeout - (deadline - $(date +%s)) ))s"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "start-dockerd.sh: dockerd exited; last log lines:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  sleep 0.5
done
echo "start-dockerd.sh: docker daemon not up within ${timeout}s; last log lines:" >&2
tail -n 20 "$log" >&2
exit 1
