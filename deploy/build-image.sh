#!/usr/bin/env bash
# build-image.sh - build the container images of deploy/docker-compose.yml:
# eddy (default tag eddy:local) and the services next to it, eddy-redis,
# eddy-postgres, eddy-prometheus and eddy-s3 (tags derived from --tag:
# eddy:X gives eddy-redis:X, eddy-postgres:X, eddy-prometheus:X, eddy-s3:X).
#
#   deploy/build-image.sh [--offline | --registry | --auto] [--tag TAG]
#                         [--build-dir DIR | --binary PATH] [--no-etcd]
#                         [--images LIST]
#
#   --offline    no registry needed: build eddy on this host with cmake,
#                copy build/eddy + every library `ldd` lists + the dynamic
#                loader (+ /usr/bin/etcd if installed) into a root filesystem
#                and build deploy/Dockerfile.local (FROM scratch).
#                The host must be glibc-based with the -dev packages installed.
#                Service images: the same way from the host's Debian
#                packages (redis-server + redis-tools, postgresql, prometheus,
#                nodejs) and, for s3, npm's s3rver as scripts/setup.sh
#                installed it ($EDDY_S3RVER, else /usr/local/bin/s3rver);
#                Dockerfile.services.local. PostgreSQL's data directory is
#                initialised here (initdb, database and user `eddy`).
#   --registry   docker build -f deploy/Dockerfile (multi-stage, debian:12;
#                its build stage is kept as eddy-build:TAG, the compile
#                cache of the next rebuild);
#                services: deploy/Dockerfile.services (apt-get in debian:12).
#   --auto       (default) --registry if debian:12 is present locally or can be
#                pulled within $EDDY_PULL_TIMEOUT seconds (15), else --offline.
#   --tag TAG    image tag (eddy:local)
#   --build-dir  cmake build directory for --offline (REPO/build-image)
#   --binary     --offline only: use this already built eddy, skip cmake
#   --no-etcd    --offline only: do not put /usr/bin/etcd in the image
#   --images L   comma list of eddy,redis,postgres,prometheus,s3 (default all).
#                --offline skips a service whose host package is missing,
#                with a warning; naming it explicitly makes that an error.
#
# Either way the images a rebuild replaced are removed afterwards (only
# dangling images labelled eddy.image, which every stage of eddy's
# Dockerfiles carries).
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
images=all

usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; }
die() { echo "build-image.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --offline) mode=offline; shift ;;
    --registry) mode=registry; shift ;;
    --auto) mode=auto; shift ;;
    --tag|--build-dir|--binary|--images)
      [ $# -ge 2 ] || { echo "build-image.sh: $1 needs a value" >&2; exit 2; }
      case "$1" in --tag) tag=$2 ;; --build-dir) build_dir=$2 ;; --binary) binary=$2 ;;
                   --images) images=$2 ;; esac
      shift 2 ;;
    --no-etcd) with_etcd=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-image.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
  esac
done

want_eddy=0 want_redis=0 want_postgres=0 want_prometheus=0 want_s3=0 explicit=1
[ "$images" = all ] && { images=eddy,redis,postgres,prometheus,s3; explicit=0; }
IFS=, read -r -a image_list <<<"$images"
for i in "${image_list[@]}"; do
  case "$i" in
    eddy|redis|postgres|prometheus|s3) eval "want_$i=1" ;;
    *) echo "build-image.sh: unknown image '$i' in --images (eddy,redis,postgres,prometheus,s3)" >&2; exit 2 ;;
  esac
done
# eddy:local -> eddy-redis:local; a tag without ':' gets ':latest'.
case "$tag" in *:*) tag_repo=${tag%:*} tag_ver=${tag##*:} ;; *) tag_repo=$tag tag_ver=latest ;; esac
service_tag() { echo "$tag_repo-$1:$tag_ver"; }

command -v docker >/dev/null || die "no docker client"
docker info >/dev/null 2>&1 || die "docker daemon not reachable (deploy/start-dockerd.sh starts one)"

# What a rebuild replaces: the image a tag named before (now untagged,
# `<none>`), and any other dangling image of eddy's (an intermediate stage
# of an older registry build). Every stage of eddy's Dockerfiles carries the
# label eddy.image, so pruning the dangling images with that label touches
# nothing else on the host; an image a container still uses stays (docker
# refuses), as does one with another tag. Only images made before this run
# started are pruned: a concurrent build's intermediate image is dangling
# between two of its steps.
old_ids=()
started_s=$(date +%s)
image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }
prune_replaced() {
  local id n=0
  for id in "${old_ids[@]}"; do
    [ -n "$id" ] || continue
    [ -z "$(docker image inspect -f '{{join .RepoTags ","}}' "$id" 2>/dev/null)" ] || continue
    docker image rm "$id" >/dev/null 2>&1 && n=$((n + 1))
  done
  docker image prune -f --filter label=eddy.image --filter "until=$started_s" >/dev/null 2>&1 || true
  [ "$n" = 0 ] || echo "build-image.sh: removed $n replaced image(s)"
}

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
  if [ "$want_eddy" = 1 ]; then
    # The build stage gets a tag of its own (eddy-build:TAG): untagged it
    # would be pruned below with everything under it, and the next rebuild
    # would install the packages and compile from scratch again.
    old_ids+=("$(image_id "$tag")" "$(image_id "$(service_tag build)")")
    docker build -f "$here/Dockerfile" --target build -t "$(service_tag build)" "$repo" \
      || die "docker build of $(service_tag build) failed"
    docker build -f "$here/Dockerfile" -t "$tag" "$repo" || die "docker build of $tag failed"
  fi
  for s in redis postgres prometheus s3; do
    eval "[ \"\$want_$s\" = 1 ]" || continue
    old_ids+=("$(image_id "$(service_tag "$s")")")
    docker build -f "$here/Dockerfile.services" --target "$s" -t "$(service_tag "$s")" "$here" \
      || die "docker build of $(service_tag "$s") failed"
  done
  prune_replaced
  exit 0
fi

# --- offline: assemble root filesystems from this host ----------------------
ctx=$(mktemp -d "${TMPDIR:-/tmp}/eddy-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT

# copy_with_libs ROOT FILE DEST: FILE to ROOT/DEST, and every shared library
# it needs (plus the loader) to the same path inside ROOT.
copy_with_libs() {
  local root=$1 lib
  mkdir -p "$root$(dirname "$3")"
  install -m 0755 "$2" "$root$3"
  # ldd lines: "libx.so.N => /path (0x..)" or "/lib64/ld-linux-x86-64.so.2 (0x..)"
  for lib in $(ldd "$2" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    [ -e "$root$lib" ] && continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"     # -L: the real file under the soname's path
  done
  if ldd "$2" | grep -q 'not found'; then
    ldd "$2" | grep 'not found' >&2
    die "$2 has missing libraries"
  fi
}
# new_root DIR: the skeleton every image has (no shell, no package manager).
new_root() {
  mkdir -p "$1/tmp" "$1/etc"
  chmod 1777 "$1/tmp"
  # glibc >= 2.34 has the files and dns NSS modules built in; make the order explicit.
  printf 'hosts: files dns\n' >"$1/etc/nsswitch.conf"
  printf 'root:x:0:0:root:/:/nonexistent\n' >"$1/etc/passwd"
  printf 'root:x:0:\n' >"$1/etc/group"
}

build_eddy_offline() {
  # RelWithDebInfo, the project default: Release (-O3) currently trips
  # -Werror=maybe-uninitialized in state/keyed_state.c with GCC 12.
  local eddy root=$ctx/eddy/rootfs
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
  new_root "$root"
  mkdir -p "$root/data/snapshots"
  copy_with_libs "$root" "$eddy" /usr/local/bin/eddy
  strip "$root/usr/local/bin/eddy" 2>/dev/null || true
  if [ "$with_etcd" = 1 ]; then
    if command -v etcd >/dev/null 2>&1; then
      copy_with_libs "$root" "$(command -v etcd)" /usr/local/bin/etcd
    else
      echo "build-image.sh: etcd not installed on this host (apt-get install etcd-server);" \
           "image has no etcd, use the directory metastore" >&2
    fi
  fi
  cp "$here/Dockerfile.local" "$ctx/eddy/Dockerfile"
  echo "build-image.sh: offline image from $eddy ($(du -sh "$root" | cut -f1) root filesystem)"
  old_ids+=("$(image_id "$tag")")
  docker build -q -t "$tag" "$ctx/eddy" >/dev/null || die "docker build failed"
  echo "build-image.sh: built $tag"
}

# Service root filesystems, assembled in $svc/NAME (postgres also
# $svc/pgdata), each built in a context of its own from ONE stage of
# Dockerfile.services.local (stage_of). Not `--target NAME` on the whole
# file: the legacy builder (docker.io 20.10 without BuildKit) builds every
# stage before the target too, and those stages' directories would be empty
# in this context; two COPYs of empty directories in a row onto FROM scratch
# (postgres/ and pgdata/) fail on an empty image store with "failed to export
# image: ... layer does not exist" (a rerun passes only because the stages
# are cached by then).
svc=$ctx/services
mkdir -p "$svc"

# missing WHAT HINT: a host package a service needs is not installed.
missing() {
  if [ "$explicit" = 1 ]; then die "$1 is not installed on this host ($2)"; fi
  echo "build-image.sh: skipping the $1 image: not installed on this host ($2)" >&2
  return 1
}

root_redis() {
  command -v redis-server >/dev/null 2>&1 || { missing redis-server "apt-get install redis-server"; return 1; }
  new_root "$svc/redis"
  mkdir -p "$svc/redis/data"
  copy_with_libs "$svc/redis" "$(command -v redis-server)" /usr/local/bin/redis-server
  # redis-cli loads the demo's input and is handy for `docker compose exec redis redis-cli`.
  if command -v redis-cli >/dev/null 2>&1; then
    copy_with_libs "$svc/redis" "$(command -v redis-cli)" /usr/local/bin/redis-cli
  fi
}

# PostgreSQL runs as uid/gid 999 in the image (Dockerfile.services.local
# copies the data directory with that owner); initdb runs here, on the host,
# because the image has no shell for initdb's own child processes.
root_postgres() {
  local pgbin
  pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$pgbin" ] && [ -x "$pgbin/postgres" ] && [ -x "$pgbin/initdb" ] \
    || { missing PostgreSQL "apt-get install postgresql"; return 1; }
  local pglib=${pgbin%/bin}/lib ver
  ver=$(basename "${pgbin%/bin}")
  local r=$svc/postgres f
  new_root "$r"
  printf 'postgres:x:999:999:PostgreSQL:/var/lib/postgresql:/nonexistent\n' >>"$r/etc/passwd"
  printf 'postgres:x:999:\n' >>"$r/etc/group"
  copy_with_libs "$r" "$pgbin/postgres" "$pgbin/postgres"
  copy_with_libs "$r" "$pgbin/psql" "$pgbin/psql"
  mkdir -p "$r/usr/local/bin"
  ln -s "$pgbin/postgres" "$r/usr/local/bin/postgres"
  ln -s "$pgbin/psql" "$r/usr/local/bin/psql"
  # Loadable modules of the server itself (PL/pgSQL, the text search
  # stemmers, encoding conversions; they need only libc): no contrib
  # extensions, no llvmjit (JIT is off; it pulls in 100 MB of LLVM).
  mkdir -p "$r$pglib"
  for f in "$pglib"/plpgsql.so "$pglib"/dict_snowball.so "$pglib"/*_and_*.so; do
    [ -e "$f" ] && cp "$f" "$r$f"
  done
  mkdir -p "$r/usr/share/postgresql" "$r/usr/share/zoneinfo/Etc"
  cp -a "/usr/share/postgresql/$ver" "$r/usr/share/postgresql/"
  cp -L /usr/share/zoneinfo/Etc/UTC "$r/usr/share/zoneinfo/Etc/UTC"
  cp -L /usr/share/zoneinfo/Etc/UTC "$r/usr/share/zoneinfo/UTC"

  # The data directory: initdb as an unprivileged user (postgres refuses root).
  local data=$ctx/pginit/data as=()
  mkdir -p "$ctx/pginit"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "no 'postgres' user to run initdb as"
    chmod 0755 "$ctx"
    chown postgres "$ctx/pginit"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$pgbin/initdb" -D "$data" -U postgres --auth=trust --locale=C -E UTF8 \
      >"$ctx/pginit/initdb.log" 2>&1 || { cat "$ctx/pginit/initdb.log" >&2; die "initdb failed"; }
  # Single-user mode: no server, no socket; one statement per line.
  printf 'CREATE ROLE eddy LOGIN;\nCREATE DATABASE eddy OWNER eddy;\n' \
    | "${as[@]}" "$pgbin/postgres" --single -D "$data" postgres >"$ctx/pginit/single.log" 2>&1 \
    || { cat "$ctx/pginit/single.log" >&2; die "creating the eddy database failed"; }
  cat >>"$data/postgresql.conf" <<'CONF'

# --- eddy compose service (deploy/build-image.sh) ---
listen_addresses = '*'
# eddy's PostgreSQL sink commits by two-phase commit (PREPARE TRANSACTION).
max_prepared_transactions = 64
unix_socket_directories = '/tmp'
timezone = 'UTC'
log_timezone = 'UTC'
jit = off
CONF
  # Any client on the compose network, no password: a demo and test
  # deployment. Set passwords and narrow this before exposing the port.
  printf 'host all all all trust\n' >>"$data/pg_hba.conf"
  # pgdata/data, not pgdata's contents: COPY keeps a copied directory's
  # mode, and postgres insists on 0700 for its data directory.
  mkdir -p "$svc/pgdata"
  cp -a "$data" "$svc/pgdata/data"
}

root_prometheus() {
  command -v prometheus >/dev/null 2>&1 || { missing prometheus "apt-get install prometheus"; return 1; }
  local r=$svc/prometheus
  new_root "$r"
  mkdir -p "$r/prometheus" "$r/etc/prometheus" "$r/usr/share"
  chmod 0777 "$r/prometheus"
  copy_with_libs "$r" "$(command -v prometheus)" /usr/local/bin/prometheus
  # Debian's build serves the web UI from these files.
  [ -d /usr/share/prometheus ] && cp -a /usr/share/prometheus "$r/usr/share/"
  cp "$here/prometheus.yml" "$r/etc/prometheus/prometheus.yml"
}

# s3rver (npm) on this host's node: the node binary with its libraries, and
# the installed package (its node_modules inside it, as `npm install -g`
# leaves them). Debian's own nodejs links the system OpenSSL, whose legacy
# provider (s3rver's DES continuation tokens) is a module node loads at run
# time, not a library ldd lists: the ossl-modules directory goes along.
root_s3() {
  local node s3js pkg r=$svc/s3 crypto
  node=$(command -v node 2>/dev/null || command -v nodejs 2>/dev/null || true)
  [ -n "$node" ] || { missing node "apt-get install nodejs"; return 1; }
  s3js=${EDDY_S3RVER:-/usr/local/bin/s3rver}
  [ -e "$s3js" ] || { missing s3rver "scripts/setup.sh installs it: npm install -g --prefix /usr/local s3rver@3.7.1"; return 1; }
  s3js=$(readlink -f "$s3js")
  pkg=$(dirname "$(dirname "$s3js")")
  [ -f "$pkg/package.json" ] && [ -d "$pkg/node_modules" ] \
    || die "$pkg does not look like an installed s3rver package (no package.json or node_modules)"
  new_root "$r"
  mkdir -p "$r/data" "$r/usr/local/lib/node_modules"
  copy_with_libs "$r" "$(readlink -f "$node")" /usr/local/bin/node
  crypto=$(ldd "$node" | awk '$1 ~ /^libcrypto\.so/ && $3 ~ /^\// {print $3}')
  if [ -n "$crypto" ] && [ -d "$(dirname "$crypto")/ossl-modules" ]; then
    mkdir -p "$r$(dirname "$crypto")"
    cp -a "$(dirname "$crypto")/ossl-modules" "$r$(dirname "$crypto")/"
  fi
  cp -a "$pkg" "$r/usr/local/lib/node_modules/s3rver"
}

# stage_of FILE NAME: the stage `FROM ... AS NAME` of FILE alone, up to the
# next FROM (the comments above it stay out; the file's header goes along).
stage_of() {
  awk -v want="$2" '
    /^FROM / { on = (tolower($NF) == want && tolower($(NF - 1)) == "as"); seen = 1 }
    !seen && /^#/ { print; next }
    on { print }' "$1"
}

if [ "$want_eddy" = 1 ]; then build_eddy_offline; fi
for s in redis postgres prometheus s3; do
  eval "[ \"\$want_$s\" = 1 ]" || continue
  "root_$s" || continue
  b=$ctx/build-$s
  mkdir -p "$b"
  stage_of "$here/Dockerfile.services.local" "$s" >"$b/Dockerfile"
  grep -q '^FROM ' "$b/Dockerfile" || die "no stage '$s' in Dockerfile.services.local"
  mv "$svc/$s" "$b/$s"
  if [ "$s" = postgres ]; then mv "$svc/pgdata" "$b/pgdata"; fi
  old_ids+=("$(image_id "$(service_tag "$s")")")
  if ! docker build -q --target "$s" -t "$(service_tag "$s")" "$b" >"$ctx/build-$s.log" 2>&1; then
    tail -n 20 "$ctx/build-$s.log" >&2
    die "docker build of $(service_tag "$s") failed"
  fi
  echo "build-image.sh: built $(service_tag "$s") ($(du -sh "$b/$s" | cut -f1) root filesystem)"
done
prune_replaced
