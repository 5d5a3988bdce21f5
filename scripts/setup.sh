#!/usr/bin/env bash
# setup.sh - install eddy's build and test dependencies (Debian 12) and
# build it. Run it as root (apt-get directly) or as a normal user with sudo
# (apt-get through sudo; the build stays yours). Idempotent: apt runs only
# when a package is missing, and the build is incremental.
#
#   bash scripts/setup.sh                 # optimised build (RelWithDebInfo) in build/
#   bash scripts/setup.sh --sanitize      # also build-asan/ (ASan + UBSan, with the tests);
#                                         # build/ then gets only eddy and the example plugins
#   bash scripts/setup.sh --all-types     # also Debug and Release (build-debug/, build-release/),
#                                         # which CI compiles to keep -Werror clean in every type
#   (--sanitize --all-types, CI's: build/ is not made; the compose test
#    takes build-release/'s eddy and example plugins instead)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SANITIZE=0
ALL_TYPES=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) SANITIZE=1 ;;
    --all-types) ALL_TYPES=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown flag '$arg'" >&2; exit 2 ;;
  esac
done

PACKAGES=(build-essential cmake pkg-config libzmq3-dev libczmq-dev libmsgpack-dev
          libcurl4-openssl-dev libcriterion-dev libmicrohttpd-dev libjansson-dev
          libxxhash-dev zlib1g-dev etcd-server gnuplot-nox prometheus procps
          libhiredis-dev redis-server libpq-dev postgresql libyaml-dev chromium openssl libssl-dev jq)

# the network-fault harness (tests/support/netns.h) and bench/nemesis.sh
PACKAGES+=(iproute2 nftables)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# As root (a fresh Debian machine has no sudo) apt-get and npm run directly;
# a normal user needs sudo for them.
AS_ROOT=()
as_root_for() { # what needs it, for the message
  if [[ $(id -u) -ne 0 && ${#AS_ROOT[@]} -eq 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "setup.sh: need root for $*; run as root or install sudo" >&2
      exit 1
    fi
    AS_ROOT=(sudo)
  fi
}
if ((${#missing[@]})); then
  as_root_for "missing packages: ${missing[*]}"
  echo "setup.sh: installing ${missing[*]}"
  "${AS_ROOT[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${AS_ROOT[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${PACKAGES[@]}"
  # The packages start services we do not want: tests start their own.
  for svc in etcd prometheus prometheus-node-exporter redis-server postgresql; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
      "${AS_ROOT[@]}" systemctl stop "$svc" || true
      "${AS_ROOT[@]}" systemctl disable "$svc" >/dev/null 2>&1 || true
    fi
  done
else
  echo "setup.sh: all packages present"
fi

# npm's s3rver, the S3-compatible server of the object store's tests
# (tests/support/s3rver.h looks for /usr/local/bin/s3rver or $EDDY_S3RVER).
# Node.js and npm come from apt only when missing: a machine may have
# NodeSource's nodejs, which bundles npm and conflicts with Debian's npm.
S3RVER_VERSION=3.7.1
S3RVER_PREFIX=/usr/local
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  as_root_for "installing nodejs and npm"
  echo "setup.sh: installing nodejs npm"
  "${AS_ROOT[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${AS_ROOT[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm
fi
have_s3rver="$(node -p "require('$S3RVER_PREFIX/lib/node_modules/s3rver/package.json').version" 2>/dev/null || true)"
if [[ "$have_s3rver" != "$S3RVER_VERSION" || ! -x "$S3RVER_PREFIX/bin/s3rver" ]]; then
  as_root_for "installing s3rver into $S3RVER_PREFIX"
  echo "setup.sh: installing s3rver@$S3RVER_VERSION into $S3RVER_PREFIX"
  "${AS_ROOT[@]}" npm install -g --prefix "$S3RVER_PREFIX" --no-audit --no-fund --loglevel=error \
    "s3rver@$S3RVER_VERSION"
else
  echo "setup.sh: s3rver $S3RVER_VERSION present"
fi

JOBS="$(nproc 2>/dev/null || echo 2)"
TARGETS=() # empty: everything
build() { # dir, build type, extra cmake args...
  local dir="$1" type="$2"; shift 2
  cmake -S "$ROOT" -B "$ROOT/$dir" -DCMAKE_BUILD_TYPE="$type" "$@" >/dev/null
  cmake --build "$ROOT/$dir" -j"$JOBS" ${TARGETS[@]+--target "${TARGETS[@]}"}
}
# RelWithDebInfo (-O2 -g) is the project default and what the tests run.
# With --sanitize the tests run from build-asan (RelWithDebInfo too, so its
# -Werror covers the same code at -O2), and build/ needs only what the
# compose test takes from it: the binary its image is made of and the
# example plugins. With --all-types too, build-release/ has both (an
# optimised, unsanitized eddy), so build/ would compile eddy's whole core a
# fourth time for nothing: it is left out, and scripts/test.sh runs the
# compose test from build-release/.
if ((SANITIZE && ALL_TYPES)); then
  :
else
  ((SANITIZE)) && TARGETS=(eddy eddy_examples)
  build build RelWithDebInfo -DEDDY_SANITIZE=OFF
  TARGETS=()
fi
if ((SANITIZE)); then
  build build-asan RelWithDebInfo -DEDDY_SANITIZE=ON
fi
if ((ALL_TYPES)); then
  # Compiled only (no tests): -Werror must hold at -O0 and -O3 too, whose
  # warnings differ (GCC's -Wmaybe-uninitialized at -O3, for one).
  build build-debug Debug -DEDDY_SANITIZE=OFF
  build build-release Release -DEDDY_SANITIZE=OFF
fi
if ((SANITIZE && ALL_TYPES)); then
  echo "setup.sh: built $ROOT/build-asan/eddy and $ROOT/build-release/eddy"
else
  echo "setup.sh: built $ROOT/build/eddy"
fi
