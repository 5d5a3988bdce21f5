#!/usr/bin/env bash
# test_compose.sh - eddy in Docker Compose, end to end:
#   remove eddy's images and the builder cache (a cold start, as on a fresh
#   Docker host: the legacy builder failed only there), build the images
#   offline (deploy/build-image.sh --offline: eddy, redis,
#   postgres, prometheus, s3), compose up (keygen, etcd, s3 (s3rver, the
#   checkpoint store), coordinator-1 and -2, the worker service with 3
#   containers, controller, redis, postgres), all with CURVE keys from the
#   keys volume; no eddy container mounts a shared snapshot volume or names
#   a snapshot directory on /data, and the coordinators checkpoint to s3://; a client without keys gets no
#   status (a clear error, within its timeout), a host-side client with
#   server.pub and client.key copied out of the volume does; check each
#   worker's identity is its container's hostname, submit a rate-limited
#   wordcount (placed on all three workers), rescale `count` to 3 while it
#   runs, wait for a checkpoint and find its objects in the s3 service's
#   bucket (ListObjectsV2), `docker kill` the leading coordinator mid-job, check the standby takes over (/api/v1/leader),
#   wait for `finished` by polling GET /api/v1/jobs with a deadline, compare
#   the output with a reference computed by coreutils; start the killed
#   coordinator again (it stands by); submit a plugin job from the host;
#   run deploy/demo-redis-postgres.sh (Redis stream -> wordcount ->
#   PostgreSQL) and compare the table with the reference, pg_prepared_xacts
#   empty; submit a second wordcount (--parallelism 4, --rate 250) and
#   `up --scale worker=5` while it runs (keygen runs again and keeps the
#   keys): the two added workers get instances of it by rebalancing
#   (placement in /api/v1/jobs, eddy_migrations_total >= 1); turn the
#   controller's Docker pool on (deploy/docker-compose.pool.yml,
#   --min-workers 5), `docker kill` a worker container running instances of
#   the job: the job is restored from a checkpoint whose objects the
#   workers GET from the s3 service, a container labelled eddy.pool starts
#   and registers, and the job's output matches the reference; then `--scale worker=2` (the pool
#   off, its containers removed) and count live workers; start the
#   prometheus profile and query
#   through Prometheus: both coordinators up, one eddy_coordinator_leader,
#   eddy_workers_alive 2; tear everything down: `down` leaves only the named
#   volumes and no container or network of the project, `down -v` nothing.
#
#   tests/integration/test_compose.sh [EDDY_BINARY]
#
# EDDY_BINARY: an already built eddy to put in the image (ctest passes
# build/eddy); without it build-image.sh runs its own cmake build.
# Exit 0 pass, 1 fail, 77 skip (no docker client, no daemon, no compose).
# Registered in ctest with label "docker". Start a daemon first if needed:
# deploy/start-dockerd.sh. Knobs: EDDY_TEST_LINES (20000), EDDY_TEST_RATE
# (1000), EDDY_TEST_RATE2 (250, the second job's: it must outlast the
# scale-up and the kill), EDDY_TEST_DEADLINE (180 s), EDDY_TEST_KEEP=1
# (leave it running; the pool's containers too), EDDY_TEST_COLD=0 (keep
# eddy's images and the builder cache).
set -u

repo=$(cd "$(dirname "$0")/../.." && pwd)
binary=${1:-}
lines=${EDDY_TEST_LINES:-20000}
rate=${EDDY_TEST_RATE:-1000}
deadline_s=${EDDY_TEST_DEADLINE:-180}
t0=$(date +%s)

log() { printf '[%4ds] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
skip() { echo "SKIP: $*"; exit 77; }

command -v docker >/dev/null 2>&1 || skip "no docker client"
docker info >/dev/null 2>&1 || skip "docker daemon not reachable (deploy/start-dockerd.sh starts one)"
if docker compose version >/dev/null 2>&1; then
  compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  compose_cmd=(docker-compose)
else
  skip "neither 'docker compose' nor docker-compose is installed"
fi
command -v curl >/dev/null 2>&1 || skip "no curl"
command -v jq >/dev/null 2>&1 || skip "no jq"

project=eddytest$$
tag=eddy:ctest-$$
work=$(mktemp -d "${TMPDIR:-/tmp}/eddy-compose-test.XXXXXX")
export EDDY_IMAGE=$tag EDDY_HTTP_PUBLISH=127.0.0.1::9250 EDDY_CONTROL_PUBLISH=127.0.0.1::7600
export EDDY_HTTP_PUBLISH_2=127.0.0.1::9250 EDDY_CONTROL_PUBLISH_2=127.0.0.1::7600
export EDDY_REDIS_IMAGE=eddy-redis:ctest-$$ EDDY_POSTGRES_IMAGE=eddy-postgres:ctest-$$
export EDDY_PROMETHEUS_IMAGE=eddy-prometheus:ctest-$$ EDDY_PROMETHEUS_PUBLISH=127.0.0.1::9090
export EDDY_S3_IMAGE=eddy-s3:ctest-$$
# deploy/demo-redis-postgres.sh runs its own compose commands: same project.
export COMPOSE_PROJECT_NAME=$project
unset EDDY_DATA_DIR EDDY_METASTORE EDDY_WORKERS EDDY_KEYS EDDY_COORDINATOR EDDY_CHECKPOINT_STORAGE \
  EDDY_S3_ACCESS_KEY_ID EDDY_S3_SECRET_ACCESS_KEY EDDY_S3_SESSION_TOKEN EDDY_S3_BUCKET
compose() { "${compose_cmd[@]}" -p "$project" -f "$repo/deploy/docker-compose.yml" "$@"; }
# the same with the controller's Docker pool on (deploy/docker-compose.pool.yml)
compose_pool() {
  "${compose_cmd[@]}" -p "$project" -f "$repo/deploy/docker-compose.yml" \
    -f "$repo/deploy/docker-compose.pool.yml" "$@"
}
pool_label=eddy.pool=$project-pool
# The pool's containers are not compose's: `down` would leave them (and the
# network they hold).
remove_pool_workers() {
  local ids
  ids=$(docker ps -aq --filter "label=$pool_label")
  [ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1
}

cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    # What the step that failed was waiting for comes first: long container
    # logs are cut from the middle where CI output is shown.
    if [ -n "${diag_job:-}" ] && [ -n "${coord:-}" ]; then
      log "FAILED; coordinator-1 is $(role_of 1), coordinator-2 is $(role_of 2); $diag_job as the leader sees it:"
      docker exec "$coord" eddy status "$diag_job" 2>&1 | head -n 40 | sed 's/^/    /'
      for i in 1 2; do
        log "coordinator-$i's last log lines about $diag_job or its role:"
        docker logs "${c[$i]}" 2>&1 | grep -E -e "$diag_job|leader|standby" | tail -n 25 | sed 's/^/    /'
      done
      log "warnings and errors of the workers (pool ones included):"
      for w in $(compose ps -q worker) $(docker ps -aq --filter "label=$pool_label"); do
        docker logs "$w" 2>&1 | grep -E ' (WARN|ERROR) ' | tail -n 8 | sed "s/^/    ${w:0:12} /"
      done
    fi
    log "FAILED; container logs:"
    compose logs --no-color --tail=40 2>&1 | sed 's/^/    /'
  fi
  if [ "${EDDY_TEST_KEEP:-0}" = 1 ]; then
    log "EDDY_TEST_KEEP=1: leaving project $project up (compose -p $project down -v to remove)"
  else
    # the controller first: a pool would replace what is removed
    compose rm -f -s controller >/dev/null 2>&1
    remove_pool_workers
    compose --profile prometheus down -v --remove-orphans >/dev/null 2>&1
    docker image rm "$tag" "$EDDY_REDIS_IMAGE" "$EDDY_POSTGRES_IMAGE" "$EDDY_PROMETHEUS_IMAGE" \
      "$EDDY_S3_IMAGE" >/dev/null 2>&1
    rm -rf "$work"
  fi
  log "total $(( $(date +%s) - t0 ))s"
}
trap cleanup EXIT
fail() { log "FAIL: $*"; exit 1; }

# 1. the images, offline, from a cold start as on a fresh Docker host: no
# eddy image (every image build-image.sh makes carries the label eddy.image;
# older ones are named eddy*), no builder cache. The legacy builder used to
# fail only there (two COPYs of empty directories onto FROM scratch), which
# cached images hid. An eddy image a running container uses stays (docker
# refuses); EDDY_TEST_COLD=0 keeps them all.
if [ "${EDDY_TEST_COLD:-1}" = 1 ]; then
  n=0 kept=0
  for id in $( (docker images -q --filter label=eddy.image
                docker images --format '{{.Repository}} {{.ID}}' | awk '$1 ~ /^eddy(-|$)/ {print $2}') | sort -u); do
    if docker image rm -f "$id" >/dev/null 2>&1; then n=$((n + 1)); else kept=$((kept + 1)); fi
  done
  docker builder prune -af >/dev/null 2>&1
  log "cold start: removed $n eddy images ($kept in use kept), builder cache pruned"
fi
volumes_before=$(docker volume ls -q | sort)
log "building $tag and the service images offline"
args=(--offline --tag "$tag" --build-dir "$work/build")
[ -n "$binary" ] && args+=(--binary "$binary")
"$repo/deploy/build-image.sh" "${args[@]}" || fail "build-image.sh failed"
# the checkpoint store's image is skipped (a warning) where node or s3rver is missing
docker image inspect "$EDDY_S3_IMAGE" >/dev/null 2>&1 \
  || fail "no $EDDY_S3_IMAGE: build-image.sh skipped it (node or npm's s3rver missing; scripts/setup.sh installs them)"
log "images built"

# 2. input and reference (words: space/tab separated, empty tokens dropped)
awk -v n="$lines" 'BEGIN { srand(42); for (i = 0; i < n; i++) { l = "";
    for (j = 0; j < 8; j++) l = l (j ? (j == 4 ? "\t" : " ") : "") "w" int(rand() * rand() * 3000);
    print l } }' >"$work/in.txt"
tr -s ' \t' '\n' <"$work/in.txt" | grep -v '^$' | LC_ALL=C sort | uniq -c \
  | awk '{print $2"\t"$1}' >"$work/expected.tsv"

# 3. up
compose up -d >"$work/up.log" 2>&1 || { cat "$work/up.log"; fail "compose up failed"; }
c=() api=() cport=()
published() {  # published I: coordinator-I's host ports (new ones after a restart)
  local p
  p=$(docker port "${c[$1]}" 9250/tcp | head -n 1 | sed 's/.*://')
  [ -n "$p" ] || fail "coordinator-$1 HTTP port not published"
  api[$1]=http://127.0.0.1:$p
  cport[$1]=$(docker port "${c[$1]}" 7600/tcp | head -n 1 | sed 's/.*://')
  [ -n "${cport[$1]}" ] || fail "coordinator-$1 control port not published"
  coordinators=tcp://127.0.0.1:${cport[1]:-0},tcp://127.0.0.1:${cport[2]:-0}
}
for i in 1 2; do
  c[$i]=$(compose ps -q coordinator-$i)
  [ -n "${c[$i]}" ] || fail "no coordinator-$i container"
  published $i
done
log "compose up; coordinator APIs at ${api[1]} and ${api[2]}, control $coordinators"

wait_until() {  # wait_until SECONDS WHAT CMD...
  local end=$(( $(date +%s) + $1 )) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || fail "timed out waiting for $what"
    sleep 1
  done
}
wait_until_ok() {  # wait_until_ok SECONDS CMD...: like wait_until, returns 1 on timeout
  local end=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 1
  done
}
role_of() { curl -fsS "${api[$1]}/api/v1/leader" | grep -o '"role": *"[a-z]*"' | sed 's/.*"\([a-z]*\)"$/\1/'; }
leads() { [ "$(role_of "$1")" = leader ]; }
one_leads() { leads 1 || leads 2; }
wait_until 60 "coordinator-1 /healthz" curl -fsS "${api[1]}/healthz"
wait_until 60 "coordinator-2 /healthz" curl -fsS "${api[2]}/healthz"
wait_until 60 "a leader among the coordinators" one_leads
if leads 1; then lead=1 standby=2; else lead=2 standby=1; fi
[ "$(role_of $standby)" = standby ] || fail "coordinator-$standby is '$(role_of $standby)', not standby"
coord=${c[$lead]}
log "coordinator-$lead leads, coordinator-$standby stands by"
# A standby's /metrics is scrapable (200) and says it does not lead.
curl -fsS "${api[$standby]}/metrics" | grep -qx 'eddy_coordinator_leader 0' \
  || fail "the standby's /metrics does not answer eddy_coordinator_leader 0"
curl -fsS "${api[$lead]}/metrics" | grep -qx 'eddy_coordinator_leader 1' \
  || fail "the leader's /metrics does not answer eddy_coordinator_leader 1"
docker cp "$work/in.txt" "$coord:/data/in.txt" || fail "docker cp of the input failed"

three_workers() { [ "$(docker exec "$coord" eddy status | grep -c ' alive$')" -ge 3 ]; }
wait_until 60 "3 workers registered" three_workers
docker exec "$coord" eddy status | sed 's/^/    /'
# One worker service; each replica registers under its container's hostname
# (the short container id, also its DNS name) and advertises it.
for w in $(compose ps -q worker); do
  h=$(docker inspect -f '{{.Config.Hostname}}' "$w")
  docker exec "$coord" eddy status | grep -Eq "^ +[0-9]+ +$h +tcp://$h:7700 .* alive$" \
    || fail "worker container $h is not registered as $h at tcp://$h:7700"
done

# No shared snapshot volume: checkpoints go to the s3 service. Every eddy
# container (coordinators, workers, controller) mounts only /data (jobs'
# files), /keys, the coordinators also eddy-plugins on /var/lib/eddy (no
# worker does), the controller the Docker socket; nobody names a snapshot
# directory on /data, and the coordinators run with an s3:// storage.
s3c=$(compose ps -q s3)
[ -n "$s3c" ] || fail "no s3 container"
# what no eddy container may have: checked now and after the pool ran
check_mounts() {  # one docker ps and one docker inspect: compose ps costs a Python start each
  local ids line name mounts cmd m
  ids=$( (docker ps -q --filter "label=com.docker.compose.project=$project"
          docker ps -q --filter "label=$pool_label") | sort -u)
  while IFS='|' read -r name mounts cmd; do
    case "$name" in *coordinator*|*worker*|*controller*|*-pool-*) ;; *) continue ;; esac
    for m in $mounts; do
      case "$m" in
        /data=*|/keys=*) ;;
        /var/lib/eddy=*_eddy-plugins*) case "$name" in *coordinator*) ;; *) fail "$name mounts the coordinators' plugin volume: $m" ;; esac ;;
        /var/run/docker.sock=*) case "$name" in *controller*) ;; *) fail "$name mounts the Docker socket" ;; esac ;;
        *) fail "$name mounts $m (only /data, /keys and the coordinators' /var/lib/eddy are expected)" ;;
      esac
    done
    case "$cmd" in *snapshot-dir=/data*|*/data/snapshots*) fail "$name keeps snapshots on /data: $cmd" ;; esac
    case "$name" in
      *coordinator*) case "$cmd" in *--checkpoint-storage=s3://*) ;; *) fail "$name has no s3:// --checkpoint-storage: $cmd" ;; esac ;;
    esac
  done < <(docker inspect -f '{{.Name}}|{{range .Mounts}}{{.Destination}}={{.Name}}{{.Source}} {{end}}|{{join .Config.Cmd " "}}' $ids)
}
check_mounts
log "PASS: no eddy container mounts a shared snapshot volume; the coordinators checkpoint to s3://"
# s3_keys PREFIX: the keys of the bucket under PREFIX, one a line: an
# unsigned path-style ListObjectsV2 (s3rver allows it) from inside the s3
# container (its port is not published), by its own node.
s3_keys() {
  docker exec "$s3c" /usr/local/bin/node -e '
    const http = require("http");
    http.get("http://127.0.0.1:4568/eddy?list-type=2&max-keys=1000&prefix=" + encodeURIComponent(process.argv[1]), r => {
      let b = ""; r.on("data", d => b += d);
      r.on("end", () => {
        if (r.statusCode !== 200) { console.error("HTTP " + r.statusCode + " " + b); process.exit(1); }
        for (const m of b.matchAll(/<Key>([^<]*)<\/Key>/g)) console.log(m[1]);
      });
    }).on("error", e => { console.error(e.message); process.exit(1); });' "$1"
}
# s3_reads SINCE JOB: how many checkpoint objects of JOB s3rver served
# since SINCE (a `docker logs --since` time) that it did not store in that
# time, i.e. reads. Its log (colour codes stripped): one line per response,
# `info: KEY STATUS ...` (s3rver 3.7 cuts "  --> GET /eddy/" off, and as
# much of a PUT's; a PUT also logs `Stored object "KEY"`).
s3_reads() {
  local l
  l=$(docker logs --since "$1" "$s3c" 2>&1 | sed 's/\x1b\[[0-9;]*m//g')
  comm -23 <(echo "$l" | sed -n "s#^info: \(checkpoints/$2/[^ ?]*\) 20[06] .*#\1#p" | sort -u) \
           <(echo "$l" | sed -n "s#^info: Stored object \"\(checkpoints/$2/[^\"]*\)\".*#\1#p" | sort -u) | wc -l
}

# Keys: everything above ran with the keys volume (EDDY_KEYS=/keys in every
# eddy container). Without keys a client gets nothing: the coordinator
# refuses its handshake, and it says so (at the latest after its 5 s timeout).
t=$(date +%s)
if out=$(docker exec -e EDDY_KEYS= "$coord" eddy status 2>&1); then
  fail "a client without keys got a status: $out"
fi
log "no keys, in a container: refused after $(( $(date +%s) - t ))s: $out"
echo "$out" | grep -q '^eddy status: .*handshake failed.*--keys' || fail "no clear error without keys: '$out'"
echo "$out" | grep -q ' alive$' && fail "a client without keys saw workers: $out"
# The host-side client: server.pub and client.key copied out of the volume
# (deploy/README.md, "Keys"), and nothing else.
if [ -n "$binary" ]; then
  keys=$work/keys
  mkdir -m 700 "$keys"
  for f in server.pub client.key; do
    docker cp "$coord:/keys/$f" "$keys/$f" || fail "docker cp of /keys/$f failed"
  done
  chmod 600 "$keys"/*
  if out=$(EDDY_KEYS= "$binary" status --coordinator "$coordinators" 2>&1); then
    fail "a host-side client without keys got a status: $out"
  fi
  log "no keys, on the host: refused: $out"
  echo "$out" | grep -q '^eddy status: .*--keys' || fail "no clear error without keys on the host: '$out'"
  out=$("$binary" status --keys "$keys" --coordinator "$coordinators" 2>&1) \
    || fail "the host-side client with the copied client key got no status: $out"
  [ "$(echo "$out" | grep -c ' alive$')" -ge 3 ] || fail "the host-side client saw no workers: $out"
  log "PASS: keys: none -> refused, the copied client key -> status with $(echo "$out" | grep -c ' alive$') workers"
fi

# 4. submit, rescale while running, kill the leading coordinator, wait for
# the end under the other one
job=$(docker exec "$coord" eddy submit --job wordcount --input /data/in.txt \
        --output /data/out.tsv --rate "$rate") \
  || fail "submit failed"
log "submitted $job ($lines lines at --rate $rate)"
state_at() { curl -fsS "${api[$1]}/api/v1/jobs" | grep -o '"state": *"[a-z]*"' | head -n 1 | sed 's/.*"\([a-z]*\)"$/\1/'; }
running() { [ "$(state_at $lead)" = running ]; }
wait_until 60 "job running" running
# Placement spreads a fresh job over every live worker (issue 23: wordcount,
# 5 instances, was placed 3/2/0 on three workers): each has instances.
spread=$(curl -fsS "${api[$lead]}/api/v1/jobs" | jq -r '(if type == "array" then . else .jobs end)[0].operators[].instances[].worker // empty' | sort -u | wc -l)
[ "$spread" -ge 3 ] || fail "the fresh job is placed on $spread of 3 workers"
docker exec "$coord" eddy status | grep 'spread over workers' | sed 's/^/    /'
log "PASS: the fresh job has instances on all 3 workers"
if out=$(docker exec "$coord" eddy rescale "$job" count 3 2>&1); then
  log "rescaled count to 3: $out"
  rescaled=1
else
  log "rescale not done: $out"
  rescaled=0
fi
# After a complete checkpoint, so that the new leader restores from one.
checkpointed() { [ "$(curl -fsS "${api[$lead]}/api/v1/jobs" | grep -o '"completed": *[0-9]*' | head -n 1 | tr -dc 0-9)" -ge 1 ]; }
wait_until 60 "a complete checkpoint" checkpointed
# ... whose state is objects in the s3 service's bucket (JOB/chk-ID/OP/kg-KG.snap)
s3_keys "checkpoints/$job/" >"$work/keys1.txt" 2>&1 || { cat "$work/keys1.txt"; fail "cannot list the s3 bucket"; }
grep -q "^checkpoints/$job/chk-[0-9]*/.*\.snap\$" "$work/keys1.txt" \
  || { head -n 20 "$work/keys1.txt"; fail "no checkpoint objects of $job in the s3 bucket"; }
log "PASS: $(wc -l <"$work/keys1.txt") checkpoint objects of $job in the s3 bucket, e.g. $(grep -m1 '\.snap$' "$work/keys1.txt")"
[ "$(state_at $lead)" = running ] || fail "the job is '$(state_at $lead)' before the kill (job too short? raise EDDY_TEST_LINES)"
docker kill "${c[$lead]}" >/dev/null || fail "docker kill coordinator-$lead failed"
t_kill=$(date +%s)
log "killed coordinator-$lead (docker kill) mid-job"
wait_until 60 "coordinator-$standby to take over" leads $standby
log "coordinator-$standby leads $(( $(date +%s) - t_kill ))s after the kill"
old=$lead lead=$standby standby=$old
coord=${c[$lead]}
end=$(( $(date +%s) + deadline_s ))
while :; do
  s=$(state_at $lead)
  case "$s" in
    finished) break ;;
    failed|cancelled) fail "job ended $s" ;;
  esac
  [ "$(date +%s)" -lt "$end" ] || fail "job not finished within ${deadline_s}s (state '$s')"
  sleep 1
done
log "job finished under coordinator-$lead, $(( $(date +%s) - t_kill ))s after the kill"
docker logs "${c[$lead]}" 2>&1 | grep -E 'elected leader|resumed job|restor' | sed 's/^/    /'
docker logs "${c[$lead]}" 2>&1 | grep -q 'restoring from checkpoint ' \
  || fail "coordinator-$lead did not restore the job from a checkpoint"
docker exec "$coord" eddy status | sed 's/^/    /'
[ -n "$(curl -fsS "${api[$lead]}/metrics")" ] || fail "GET /metrics is empty"
curl -fsS "${api[$lead]}/api/v1/scaling" >/dev/null || fail "GET /api/v1/scaling failed"

# 5. compare
docker cp "$coord:/data/out.tsv" "$work/out.tsv" || fail "no /data/out.tsv"
if ! cmp -s "$work/expected.tsv" "$work/out.tsv"; then
  diff "$work/expected.tsv" "$work/out.tsv" | head -n 20
  fail "output differs from the reference ($(wc -l <"$work/out.tsv") vs $(wc -l <"$work/expected.tsv") lines)"
fi
[ "$rescaled" = 1 ] || fail "the mid-run rescale did not happen (job too short? raise EDDY_TEST_LINES)"
log "PASS: $(wc -l <"$work/out.tsv") distinct words match the reference (rescaled, leader killed)"

# The killed coordinator comes back as the standby.
docker start "${c[$standby]}" >/dev/null || fail "docker start coordinator-$standby failed"
published $standby
stands_by() { [ "$(role_of $standby)" = standby ]; }
wait_until 60 "the restarted coordinator-$standby to stand by" stands_by
log "PASS: the restarted coordinator-$standby stands by"

# A user's job from the host: a plugin built here (examples/clicks) is
# uploaded by a host-side `eddy submit --plugin` (with the copied client
# key, through both coordinators) to the running containers, which fetch it
# from the coordinator; no new image.
plugin="$(dirname "${binary:-$repo/build/eddy}")/examples/libclicks.so"
if [ -n "$binary" ] && [ -f "$plugin" ]; then
  awk 'BEGIN { srand(7); for (i = 0; i < 5000; i++) printf "u%d p%d\n", int(rand() * 50), int(rand() * 9) }' \
    >"$work/clicks.txt"
  cut -d' ' -f1 "$work/clicks.txt" | LC_ALL=C sort | uniq -c | awk '{print $2"\t"$1}' \
    >"$work/clicks-expected.tsv"
  docker cp "$work/clicks.txt" "$coord:/data/clicks.txt" || fail "docker cp of the clicks input failed"
  out=$("$binary" submit --keys "$keys" --plugin "$plugin" --job clicks --input /data/clicks.txt \
          --output /data/clicks.tsv --coordinator "$coordinators" 2>&1) \
    || fail "host-side submit of the clicks plugin failed: $out"
  log "submitted the clicks plugin from the host: $out"
  # (the offline image has no shell tools: docker cp is the existence check)
  clicks_done() { docker cp "$coord:/data/clicks.tsv" "$work/clicks.tsv"; }
  wait_until 120 "the plugin job's output" clicks_done
  cmp -s "$work/clicks-expected.tsv" "$work/clicks.tsv" || fail "the plugin job's output differs"
  log "PASS: the plugin job submitted from the host matches ($(wc -l <"$work/clicks.tsv") users)"
else
  log "plugin check skipped: no $plugin"
fi


# 6. the one-command demo: a Redis stream into a PostgreSQL table, exactly
# once; the table must equal the reference and nothing may stay prepared.
head -n 2000 "$work/in.txt" >"$work/demo.txt"
tr -s ' \t' '\n' <"$work/demo.txt" | grep -v '^$' | LC_ALL=C sort | uniq -c \
  | awk '{print $2"\t"$1}' >"$work/demo-expected.tsv"
EDDY_DEMO_DEADLINE=180 "$repo/deploy/demo-redis-postgres.sh" "$work/demo.txt" >"$work/demo.log" 2>&1 \
  || { tail -n 30 "$work/demo.log"; fail "deploy/demo-redis-postgres.sh failed"; }
sed -n '/^demo: /p; /rows, /p; /prepared/p' "$work/demo.log" | sed 's/^/    /'
pg=$(compose ps -q postgres)
psql_q() { docker exec "$pg" psql -X -AtF "$(printf '\t')" -c "$1"; }
psql_q 'SELECT word, count FROM wordcount ORDER BY word COLLATE "C"' | tr -d '\r' >"$work/demo-table.tsv" \
  || fail "cannot read the wordcount table"
if ! cmp -s "$work/demo-expected.tsv" "$work/demo-table.tsv"; then
  diff "$work/demo-expected.tsv" "$work/demo-table.tsv" | head -n 20
  fail "PostgreSQL table differs from the reference ($(wc -l <"$work/demo-table.tsv") vs $(wc -l <"$work/demo-expected.tsv") rows)"
fi
prepared=$(psql_q 'SELECT count(*) FROM pg_prepared_xacts' | tr -dc 0-9)
[ "$prepared" = 0 ] || fail "pg_prepared_xacts has $prepared entries after the job finished"
log "PASS: Redis stream -> PostgreSQL table matches ($(wc -l <"$work/demo-table.tsv") words), no prepared transactions left"

# 7. the worker service scales: 5 containers while a job runs; the two new
# workers get instances of it by rebalancing (migrations, not a restart).
# Then the controller's Docker pool (docker-compose.pool.yml, --min-workers
# 5) replaces a worker container that is killed, and the job's output stays
# exact. Then 2 containers, each a live worker.
# (`up` runs keygen again: it keeps the keys, or nothing could connect.)
alive() { docker exec "$coord" eddy status | grep -c ' alive$'; }
alive_is() { [ "$(alive)" -eq "$1" ]; }
# The leader's API: under load the lease may move between the coordinators
# (that is their job), and a standby knows no jobs.
leader_api() {
  if leads "$lead"; then echo "${api[$lead]}"; elif leads "$standby"; then echo "${api[$standby]}"
  else echo "${api[$lead]}"; fi
}
job_doc() { curl -fsS "$(leader_api)/api/v1/jobs" | jq -c --arg id "$1" '(if type == "array" then . else .jobs end)[] | select(.id == $id)'; }
job_state() { job_doc "$1" | jq -r .state; }
job_running() { [ "$(job_state "$1")" = running ]; }
# the worker ids holding instances of job $1, one a line
job_workers() { job_doc "$1" | jq -r '.operators[].instances[].worker // empty' | sort -u; }
worker_id() { docker exec "$coord" eddy status --json | jq -r --arg n "$1" '.workers[] | select(.name == $n and .alive) | .id'; }
migrations() { curl -fsS "$(leader_api)/metrics" | grep "^eddy_migrations_total{job=\"$1\"" | awk '{print $2}' | head -n 1; }
rate2=${EDDY_TEST_RATE2:-250}
before=$(compose ps -q worker | sort)
job2=$(docker exec "$coord" eddy submit --job wordcount --input /data/in.txt \
         --output /data/out2.tsv --rate "$rate2" --parallelism 4) || fail "submit of the second job failed"
t7=$(date +%s) diag_job=$job2
wait_until 60 "$job2 running" job_running "$job2"
log "submitted $job2 (--parallelism 4, --rate $rate2); instances on workers $(job_workers "$job2" | tr '\n' ' ')"
compose up -d --scale worker=5 >"$work/scale.log" 2>&1 || { cat "$work/scale.log"; fail "--scale worker=5 failed"; }
[ "$(compose ps -q worker | wc -l)" -eq 5 ] || fail "--scale worker=5 did not give 5 containers"
wait_until 90 "5 live workers after --scale worker=5" alive_is 5
added=() added_ids=()
for w in $(compose ps -q worker | sort); do
  echo "$before" | grep -q "^$w\$" && continue
  added+=("$(docker inspect -f '{{.Config.Hostname}}' "$w")")
done
[ "${#added[@]}" -eq 2 ] || fail "--scale worker=5 added ${#added[@]} containers, not 2"
for h in "${added[@]}"; do
  id=$(worker_id "$h")
  [ -n "$id" ] || fail "added worker $h is not registered"
  added_ids+=("$id")
done
log "5 live workers, $(( $(date +%s) - t7 ))s after the submit; added: ${added[*]} (ids ${added_ids[*]})"
added_have_work() {
  local ws; ws=$(job_workers "$job2")
  for id in "${added_ids[@]}"; do echo "$ws" | grep -qx "$id" || return 1; done
  [ "$(migrations "$job2")" -ge 1 ]
}
if ! wait_until_ok 60 added_have_work; then
  docker logs "${c[$lead]}" 2>&1 | grep -iE 'rebalanc|migrat' | tail -n 10 | sed 's/^/    /'
  [ "$(job_state "$job2")" = running ] || fail "$job2 ended ($(job_state "$job2")) before the added workers got work (raise EDDY_TEST_LINES or lower EDDY_TEST_RATE2)"
  fail "the added workers did not get instances of $job2 (on workers: $(job_workers "$job2" | tr '\n' ' '), eddy_migrations_total $(migrations "$job2"))"
fi
log "PASS: rebalancing: the added workers run instances of $job2 (workers $(job_workers "$job2" | tr '\n' ' '), eddy_migrations_total $(migrations "$job2")), $(( $(date +%s) - t7 ))s after the submit"
docker logs "${c[$lead]}" 2>&1 | grep -iE 'rebalanc|migrat' | tail -n 3 | sed 's/^/    /'

# The pool: the controller again, with the Docker socket and --pool docker.
# --no-deps: merging the override file reorders the coordinators' ports,
# and compose would recreate them.
EDDY_POOL_MIN_WORKERS=5 EDDY_POOL_MAX_WORKERS=5 compose_pool up -d --no-deps controller \
  >"$work/pool.log" 2>&1 || { cat "$work/pool.log"; fail "compose up with docker-compose.pool.yml failed"; }
ctl=$(compose ps -q controller)
pool_on() { docker inspect -f '{{.State.Running}} {{join .Config.Cmd " "}}' "$ctl" | grep -q '^true .*--pool=docker'; }
wait_until 30 "the controller to run with --pool=docker" pool_on
victim=$(docker ps -q --no-trunc --filter "id=$(compose ps -q worker | head -n 1)")
for w in $(compose ps -q worker); do  # one that runs instances of the job, if the job still runs
  id=$(worker_id "$(docker inspect -f '{{.Config.Hostname}}' "$w")")
  if [ -n "$id" ] && job_workers "$job2" | grep -qx "$id"; then victim=$w; break; fi
done
vname=$(docker inspect -f '{{.Config.Hostname}}' "$victim")
restores() { docker logs "${c[$lead]}" 2>&1 | grep -c "job $job2: .*restoring from checkpoint "; }
restores_before=$(restores)
s3_since=$(date -u +%Y-%m-%dT%H:%M:%S)
docker kill "$victim" >/dev/null || fail "docker kill of worker $vname failed"
t_kill=$(date +%s)
log "killed worker container $vname (docker kill); $job2 is $(job_state "$job2")"
pool_replaced() {  # a running container of the pool, registered and alive
  local p h
  for p in $(docker ps -q --filter "label=$pool_label"); do
    h=$(docker inspect -f '{{.Config.Hostname}}' "$p")
    [ -n "$(worker_id "$h")" ] && return 0
  done
  return 1
}
if ! wait_until_ok 60 pool_replaced; then
  docker logs "$ctl" 2>&1 | tail -n 15 | sed 's/^/    /'
  fail "the pool did not replace the killed worker within 60s"
fi
pw=$(docker ps -q --filter "label=$pool_label" | head -n 1)
log "PASS: the pool replaced $vname with $(docker inspect -f '{{.Name}}' "$pw" | tr -d /) ($(docker inspect -f '{{index .Config.Labels "eddy.pool"}}' "$pw")), registered $(( $(date +%s) - t_kill ))s after the kill; $(alive) live workers"
docker exec "$coord" eddy scaling 2>/dev/null | grep -i pool | tail -n 3 | sed 's/^/    /'
job2_ended() { case "$(job_state "$job2")" in finished|failed|cancelled) return 0 ;; esac; return 1; }
wait_until "$deadline_s" "$job2 to end" job2_ended
[ "$(job_state "$job2")" = finished ] || fail "$job2 ended $(job_state "$job2")"
docker cp "$coord:/data/out2.tsv" "$work/out2.tsv" || fail "no /data/out2.tsv"
if ! cmp -s "$work/expected.tsv" "$work/out2.tsv"; then
  diff "$work/expected.tsv" "$work/out2.tsv" | head -n 20
  fail "$job2's output differs from the reference after the worker kill"
fi
log "PASS: $job2 finished $(( $(date +%s) - t_kill ))s after the kill; output matches the reference"
# It was restored from the object store: the coordinator restored it from a
# checkpoint after the kill, and the workers fetched checkpoint objects.
[ "$(restores)" -gt "$restores_before" ] || fail "$job2 was not restored from a checkpoint after the worker kill"
reads=$(s3_reads "$s3_since" "$job2")
[ "$reads" -ge 1 ] || fail "no checkpoint object of $job2 was read from the s3 service after the worker kill"
docker logs "${c[$lead]}" 2>&1 | grep "job $job2: .*restoring from checkpoint " | tail -n 1 | sed 's/^/    /'
log "PASS: $job2 restored from checkpoint storage after the kill ($reads checkpoint objects read from s3)"
check_mounts
log "PASS: no shared snapshot volume on the pool's workers either"

# Pool off again (the controller as compose.yml has it), its workers gone.
compose up -d --scale worker=2 >"$work/scale.log" 2>&1 || { cat "$work/scale.log"; fail "--scale worker=2 failed"; }
pool_off() { ! docker inspect -f '{{join .Config.Cmd " "}}' "$(compose ps -q controller)" | grep -q -- '--pool'; }
pool_off || fail "the controller still runs its pool after a plain up"
remove_pool_workers
wait_until 60 "2 live workers after --scale worker=2" alive_is 2
log "PASS: --scale worker=5 then 2: $(alive) live workers ($(( $(date +%s) - t7 ))s for step 7)"

# 8. the prometheus profile scrapes both coordinators: each is up (a
# standby's /metrics answers 200), one leads, the leader's series count.
compose --profile prometheus up -d prometheus >"$work/prom.log" 2>&1 \
  || { cat "$work/prom.log"; fail "compose --profile prometheus up failed"; }
pport=$(docker port "$(compose ps -q prometheus)" 9090/tcp | head -n 1 | sed 's/.*://')
[ -n "$pport" ] || fail "prometheus port not published"
prom_is() {  # prom_is QUERY VALUE: the query's one sample has VALUE
  curl -fsS -G "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" \
    | grep -q "\"value\":\[[0-9.]*,\"$2\"\]"
}
wait_until 90 "Prometheus to report eddy_workers_alive 2" prom_is eddy_workers_alive 2
wait_until 30 "Prometheus to scrape both coordinators" prom_is 'sum(up{job="eddy-coordinator"})' 2
wait_until 30 "Prometheus to see one leader" prom_is 'sum(eddy_coordinator_leader)' 1
log "PASS: Prometheus scrapes both coordinators (up 2, one leader, eddy_workers_alive = 2)"

# 9. nothing left behind: a plain `down` removes the project's containers
# and network and keeps only its named volumes (no anonymous ones: no image
# declares a VOLUME, every service says what it mounts); `down -v` then
# removes those, and nothing of the project remains.
compose rm -f -s controller >/dev/null 2>&1
remove_pool_workers
compose --profile prometheus down --remove-orphans >"$work/down.log" 2>&1 || { cat "$work/down.log"; fail "compose down failed"; }
project_filter=label=com.docker.compose.project=$project
[ -z "$(docker ps -aq --filter "$project_filter")" ] || fail "containers of $project left after down: $(docker ps -a --filter "$project_filter" --format '{{.Names}}' | tr '\n' ' ')"
[ -z "$(docker network ls -q --filter "$project_filter")" ] || fail "a network of $project left after down"
left=$(comm -13 <(echo "$volumes_before") <(docker volume ls -q | sort))
expected=$(printf '%s\n' "${project}_eddy-data" "${project}_eddy-keys" "${project}_eddy-plugins" \
             "${project}_redis-data" "${project}_s3-data" | sort)
[ "$left" = "$expected" ] || fail "after down, volumes other than the named ones: $(echo "$left" | tr '\n' ' ')"
compose --profile prometheus down -v --remove-orphans >"$work/down.log" 2>&1 || { cat "$work/down.log"; fail "compose down -v failed"; }
left=$(comm -13 <(echo "$volumes_before") <(docker volume ls -q | sort))
[ -z "$left" ] || fail "volumes left after down -v: $(echo "$left" | tr '\n' ' ')"
[ -z "$(docker ps -aq --filter "$project_filter")$(docker network ls -q --filter "$project_filter")" ] \
  || fail "containers or networks of $project left after down -v"
log "PASS: down leaves only the 5 named volumes, down -v leaves no container, volume or network of $project"
