#!/usr/bin/env bash
# build-image.sh - build the eddy container image (default tag eddy:local).
#
#   deploy/build-image.sh [--offline | --registry | --auto] [--tag TAG]
#                         [--build-dir DIR | --binary PATH] [--no-etcd]
#
#   --offline    no registry needed: build eddy on this host with cmake,
#                copy build/eddy + every library `ldd` lists + the dynamic
#                loader (+ /usr/bin/etcd if installed) into a root filesystem
#                and build deploy/Dockerfile.local (FROM scratch).
#                The host must be glibc-based with the -dev packages installed.
#   --registry   docker build -f deploy/Dockerfile (multi-stage, debian:12).
#   --auto       (default) --registry if debian:12 is present locally or can be
#                pulled within $EDDY_PULL_TIMEOUT seconds (15), else --offline.
#   --tag TAG    image tag (eddy:local)
#   --build-dir  cmake build directory for --offline (REPO/build-image)
#   --binary     --offline only: use this already built eddy, skip cmake
#   --no-etcd    --offline only: do not put /usr/bin/etcd in the image
#
# Exit 0 on success, 1 on a failed build, 2 on bad flags.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
mode=auto
tag=eddy:local
build_dir=$repo/build-image
with_etcd=1
binary=

usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; }
die() { echo "build-image.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --offline) mode=offline; shift ;;
    --registry) mode=registry; shift ;;
    --auto) mode=auto; shift ;;
    --tag|--build-dir|--binary)
      [ $# -ge 2 ] || { echo "build-image.sh: $1 needs a value" >&2; exit 2; }
      case "$1" in --tag) tag=$2 ;; --build-dir) build_dir=$2 ;; --binary) binary=$2 ;; esac
      shift 2 ;;
    --no-etcd) with_etcd=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-image.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
  esac
done

command -v docker >/dev/null || die "no docker client"
docker info >/dev/null 2>&1 || die "docker daemon not reachable (deploy/start-dockerd.sh starts one)"

if [ "$mode" = auto ]; then
  if docker image inspect debian:12 >/dev/null 2>&1 \
     || timeout "${EDDY_PULL_TIMEOUT:-15}" docker pull -q debian:12 >/dev/null 2>&1; then
    mode=registry
  else
    mode=offline
  fi
  echo "build-image.sh: --auto chose --$mode"
fi

if [ "$mode" = registry ]; then
  exec docker build -f "$here/Dockerfile" -t "$tag" "$repo"
fi

# --- offline: assemble a root filesystem from this host ---------------------
# RelWithDebInfo, the project default: Release (-O3) currently trips
# -Werror=maybe-uninitialized in state/keyed_state.c with GCC 12.
if [ -n "$binary" ]; then
  eddy=$binary
  [ -x "$eddy" ] || die "--binary $eddy is not an executable"
else
  cmake -B "$build_dir" -S "$repo" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEDDY_TESTS=OFF >/dev/null \
    || die "cmake configure failed"
  cmake --build "$build_dir" -j"$(nproc)" --target eddy >/dev/null || die "cmake build failed"
  eddy=$build_dir/eddy
  [ -x "$eddy" ] || die "no $eddy after the build"
fi

ctx=$(mktemp -d "${TMPDIR:-/tmp}/eddy-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs
mkdir -p "$root/usr/local/bin" "$root/data/snapshots" "$root/tmp" "$root/etc"
chmod 1777 "$root/tmp"

# copy_with_libs FILE DEST: FILE to DEST, and every shared library it needs
# (plus the loader) to the same path inside the root filesystem.
copy_with_libs() {
  install -m 0755 "$1" "$root$2"
  local lib
  # ldd lines: "libx.so.N => /path (0x..)" or "/lib64/ld-linux-x86-64.so.2 (0x..)"
  for lib in $(ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    [ -e "$root$lib" ] && continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"     # -L: the real file under the soname's path
  done
  if ldd "$1" | grep -q 'not found'; then
    ldd "$1" | grep 'not found' >&2
    die "$1 has missing libraries"
  fi
}
copy_with_libs "$eddy" /usr/local/bin/eddy
strip "$root/usr/local/bin/eddy" 2>/dev/null || true
if [ "$with_etcd" = 1 ]; then
  if command -v etcd >/dev/null 2>&1; then
    copy_with_libs "$(command -v etcd)" /usr/local/bin/etcd
  else
    echo "build-image.sh: etcd not installed on this host (apt-get install etcd-server);" \
         "image has no etcd, use the directory metastore" >&2
  fi
fi
# glibc >= 2.34 has the files and dns NSS modules built in; make the order explicit.
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
printf 'root:x:0:0:root:/:/usr/local/bin/eddy\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"

cp "$here/Dockerfile.local" "$ctx/Dockerfile"
echo "build-image.sh: offline image from $eddy ($(du -sh "$root" | cut -f1) root filesystem)"
docker build -q -t "$tag" "$ctx" >/dev/null || die "docker build failed"
echo "build-image.sh: built $tag"
