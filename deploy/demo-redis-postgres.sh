#!/usr/bin/env bash
# demo-redis-postgres.sh - one command from a text file to a PostgreSQL table
# through a Redis stream, on the compose deployment:
#
#   deploy/demo-redis-postgres.sh [INPUT.txt]       (default data/hamlet.txt)
#
# 1. builds the images that are missing (deploy/build-image.sh) and brings the
#    deployment up if its coordinator is not running;
# 2. writes every line of INPUT into the Redis stream `lines` (field `line`);
# 3. runs wordcount from the stream into the table `wordcount`, exactly once:
#      eddy submit --job wordcount --input 'redis://redis:6379/lines?bounded=latest'
#                  --output 'postgresql://eddy@postgres:5432/eddy?table=wordcount'
# 4. waits until the job finished and shows the table's top 20 words, its
#    row count and how many prepared transactions are left (0).
#
# Uses `docker compose`, else `docker-compose`; honours COMPOSE_PROJECT_NAME
# and the compose file's knobs (EDDY_IMAGE, EDDY_REDIS_IMAGE, ...). Knobs:
# EDDY_DEMO_STREAM (lines), EDDY_DEMO_TABLE (wordcount), EDDY_DEMO_DEADLINE
# (300 s for the job). The stream and the table are replaced on every run.
# Exit 0 done, 1 failure (with the reason), 2 bad arguments.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
input=${1:-$repo/data/hamlet.txt}
stream=${EDDY_DEMO_STREAM:-lines}
table=${EDDY_DEMO_TABLE:-wordcount}
deadline_s=${EDDY_DEMO_DEADLINE:-300}

t0=$(date +%s)
say() { printf 'demo: [%3ds] %s\n' "$(( $(date +%s) - t0 ))" "$*" >&2; }
die() { say "$*"; exit 1; }
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;; esac
[ $# -le 1 ] || { say "usage: deploy/demo-redis-postgres.sh [INPUT.txt]"; exit 2; }
[ -r "$input" ] || { say "cannot read $input"; exit 2; }

if docker compose version >/dev/null 2>&1; then
  compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  compose_cmd=(docker-compose)
else
  die "neither 'docker compose' nor docker-compose is installed"
fi
compose() { "${compose_cmd[@]}" -f "$here/docker-compose.yml" "$@"; }
# cexec SERVICE CMD...: docker exec in the service's (first) container,
# without a TTY; plain docker, as docker-compose costs a Python start per call.
declare -A cid=()
cexec() {
  local s=$1; shift
  docker exec -i "${cid[$s]}" "$@"
}

# 1. images and services
tag=${EDDY_IMAGE:-eddy:local}
case "$tag" in *:*) repo_part=${tag%:*} ver=${tag##*:} ;; *) repo_part=$tag ver=latest ;; esac
# The service images go with the eddy image's tag, as build-image.sh names them.
export EDDY_IMAGE=$tag
export EDDY_REDIS_IMAGE=${EDDY_REDIS_IMAGE:-$repo_part-redis:$ver}
export EDDY_POSTGRES_IMAGE=${EDDY_POSTGRES_IMAGE:-$repo_part-postgres:$ver}
export EDDY_S3_IMAGE=${EDDY_S3_IMAGE:-$repo_part-s3:$ver}
need=()
docker image inspect "$tag" >/dev/null 2>&1 || need+=(eddy)
docker image inspect "$EDDY_REDIS_IMAGE" >/dev/null 2>&1 || need+=(redis)
docker image inspect "$EDDY_POSTGRES_IMAGE" >/dev/null 2>&1 || need+=(postgres)
docker image inspect "$EDDY_S3_IMAGE" >/dev/null 2>&1 || need+=(s3)   # the checkpoint store
if [ ${#need[@]} -gt 0 ]; then
  say "building images: ${need[*]}"
  images=$(IFS=,; echo "${need[*]}")
  "$here/build-image.sh" --tag "$tag" --images "$images" || die "build-image.sh failed"
fi
# Containers are found by compose's labels with plain docker (docker-compose
# costs a Python start per call, seconds on a loaded machine). The project
# is compose's: COMPOSE_PROJECT_NAME, else the compose file's folder.
project=${COMPOSE_PROJECT_NAME:-$(basename "$here" | tr 'A-Z' 'a-z' | tr -cd 'a-z0-9_-')}
running() {  # running SERVICE: id of its first running container, or fail
  local id
  id=$(docker ps -q --filter "label=com.docker.compose.project=$project" \
         --filter "label=com.docker.compose.service=$1" | head -n 1)
  [ -n "$id" ] && echo "$id"
}
# Either coordinator will do: the eddy CLI in it follows their leader
# (EDDY_COORDINATOR lists both, EDDY_KEYS has the keys).
running_coordinator() { running coordinator-1 || running coordinator-2; }
if ! running_coordinator >/dev/null; then
  say "starting the deployment"
  compose up -d >/dev/null || die "compose up failed"
elif ! running redis >/dev/null || ! running postgres >/dev/null; then
  # not a plain `up -d`: it would also reset a --scale'd worker service
  compose up -d --no-recreate redis postgres >/dev/null || die "compose up of redis and postgres failed"
fi
cid[coordinator]=$(running_coordinator) || die "no running coordinator container in project $project"
for s in redis postgres; do
  cid[$s]=$(running "$s") || die "no running $s container in project $project"
done

wait_for() {  # wait_for SECONDS WHAT CMD...
  local end=$(( $(date +%s) + $1 )) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || die "timed out waiting for $what"
    sleep 1
  done
}
worker_alive() { cexec coordinator eddy status | grep -q ' alive$'; }
wait_for 90 "the coordinator and a worker" worker_alive
wait_for 90 "Redis" cexec redis redis-cli ping
wait_for 90 "PostgreSQL" cexec postgres psql -Atc 'SELECT 1'

# 2. the input into the stream: XADD STREAM * line TEXT, in Redis's wire
# protocol for redis-cli --pipe (any byte may be in a line).
cexec redis redis-cli DEL "$stream" >/dev/null || die "DEL $stream failed"
LC_ALL=C awk -v s="$stream" '{
    printf "*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$4\r\nline\r\n$%d\r\n%s\r\n", length(s), s, length($0), $0
  }' "$input" | cexec redis redis-cli --pipe >/dev/null || die "loading the stream failed"
n=$(cexec redis redis-cli XLEN "$stream" | tr -dc 0-9)
say "stream $stream: $n entries from $input"

# 3. the job; the table is replaced (an upsert sink keeps rows it is not sent).
cexec postgres psql -q -c "SET client_min_messages = warning; DROP TABLE IF EXISTS $table" || die "cannot drop table $table"
job=$(cexec coordinator eddy submit --job wordcount \
        --input "redis://redis:6379/$stream?bounded=latest" \
        --output "postgresql://eddy@postgres:5432/eddy?table=$table") || die "submit failed"
job=$(echo "$job" | tr -d '\r' | tail -n 1)
say "submitted $job: wordcount redis://redis:6379/$stream -> postgresql://eddy@postgres:5432/eddy?table=$table"

# 4. wait, show
end=$(( $(date +%s) + deadline_s ))
while :; do
  state=$(cexec coordinator eddy status --all | tr -d '\r' \
            | awk -v id="$job" '$1 == id { sub(/,.*/, "", $3); print $3; exit }')
  case "$state" in
    finished) break ;;
    failed|cancelled) die "job $job ended $state (docker compose logs worker)" ;;
  esac
  [ "$(date +%s)" -lt "$end" ] || die "job $job not finished within ${deadline_s}s (state '$state')"
  sleep 1
done
say "job $job finished"
cexec postgres psql -c "SELECT word, count FROM $table ORDER BY count DESC, word LIMIT 20"
cexec postgres psql -Atc "SELECT count(*) || ' rows, ' || sum(count) || ' words in $table' FROM $table"
cexec postgres psql -Atc "SELECT count(*) || ' prepared transactions left' FROM pg_prepared_xacts"
