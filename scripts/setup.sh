#!/usr/bin/env bash
# setup.sh - install eddy's build and test dependencies (Debian 12, as root)
# and build it. Idempotent: apt runs only when a package is missing, and
# the build is incremental.
#
#   sudo bash scripts/setup.sh              # optimised build (RelWithDebInfo) in build/
#   sudo bash scripts/setup.sh --sanitize   # also build-asan/ (ASan + UBSan)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SANITIZE=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) SANITIZE=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown flag '$arg'" >&2; exit 2 ;;
  esac
done

PACKAGES=(build-essential cmake pkg-config libzmq3-dev libczmq-dev libmsgpack-dev
          libcurl4-openssl-dev libcriterion-dev libmicrohttpd-dev libjansson-dev
          libxxhash-dev etcd-server gnuplot-nox prometheus procps)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: missing packages: ${missing[*]}; run as root (sudo bash scripts/setup.sh)" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${PACKAGES[@]}"
  # The packages start services we do not want: tests start their own.
  for svc in etcd prometheus prometheus-node-exporter; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
      systemctl stop "$svc" || true
      systemctl disable "$svc" >/dev/null 2>&1 || true
    fi
  done
else
  echo "setup.sh: all packages present"
fi

JOBS="$(nproc 2>/dev/null || echo 2)"
build() { # dir, extra cmake args...
  local dir="$1"; shift
  # RelWithDebInfo (-O2 -g), the project default: -O3 (Release) trips GCC 12
  # -Wmaybe-uninitialized false positives in state/keyed_state.c under -Werror.
  cmake -S "$ROOT" -B "$ROOT/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$ROOT/$dir" -j"$JOBS"
}
build build -DEDDY_SANITIZE=OFF
if ((SANITIZE)); then
  build build-asan -DEDDY_SANITIZE=ON
fi
echo "setup.sh: built $ROOT/build/eddy"
