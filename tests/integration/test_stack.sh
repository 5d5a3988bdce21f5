#!/usr/bin/env bash
# test_stack.sh - deploy/stack.yml on a single-node Docker Swarm, end to end:
#   `docker swarm init --advertise-addr 127.0.0.1` if this daemon is in no
#   swarm (and `docker swarm leave --force` at the end), build eddy and
#   eddy-s3 offline, make the keys with `eddy keygen` (swarm secrets),
#   `docker stack deploy` (etcd, s3, two coordinators, 3 workers, the
#   controller, one overlay network), wait for a leader and 3 workers;
#   check no eddy task mounts anything for checkpoints; submit a
#   rate-limited wordcount, wait for a checkpoint and find its objects in
#   the s3 service's bucket; `docker kill` a worker running instances of it:
#   the swarm starts a new task, the coordinator restores the job from the
#   checkpoint store, and the output matches the coreutils reference;
#   `docker service scale WORKER=4`: 4 live workers; `docker stack rm` and
#   remove its volumes.
#
#   tests/integration/test_stack.sh [EDDY_BINARY]
#
# Not part of scripts/test.sh or CI (their time budget, and it changes the
# daemon's swarm state): run it by hand, or configure with
# -DEDDY_TEST_SWARM=ON and `ctest -L swarm`. Exit 0 pass, 1 fail, 77 skip (no docker, no daemon, a
# daemon in a swarm as a worker node). Knobs: EDDY_TEST_LINES (10000),
# EDDY_TEST_RATE (500), EDDY_TEST_DEADLINE (180 s), EDDY_TEST_KEEP=1.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
binary=${1:-}
lines=${EDDY_TEST_LINES:-10000}
rate=${EDDY_TEST_RATE:-500}
deadline_s=${EDDY_TEST_DEADLINE:-180}
t0=$(date +%s)

log() { printf '[%4ds] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
skip() { echo "SKIP: $*"; exit 77; }
command -v docker >/dev/null 2>&1 || skip "no docker client"
docker info >/dev/null 2>&1 || skip "docker daemon not reachable (deploy/start-dockerd.sh starts one)"
command -v curl >/dev/null 2>&1 || skip "no curl"
command -v jq >/dev/null 2>&1 || skip "no jq"

stack=eddyst$$
tag=eddy:stack-$$
s3tag=eddy-s3:stack-$$
work=$(mktemp -d "${TMPDIR:-/tmp}/eddy-stack-test.XXXXXX")
left_swarm=0
swarm_state=$(docker info -f '{{.Swarm.LocalNodeState}}')
is_manager=$(docker info -f '{{.Swarm.ControlAvailable}}')
case "$swarm_state" in
  inactive) ;;
  active) [ "$is_manager" = true ] || skip "this daemon is a swarm worker node, not a manager" ;;
  *) skip "swarm state '$swarm_state'" ;;
esac

cleanup() {
  local rc=$?
  set +e
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    log "FAILED; service logs:"
    for s in coordinator-1 coordinator-2 worker s3; do
      docker service logs --no-trunc --tail 20 "${stack}_$s" 2>&1 | sed "s/^/    [$s] /"
    done
  fi
  if [ "${EDDY_TEST_KEEP:-0}" = 1 ]; then
    log "EDDY_TEST_KEEP=1: leaving stack $stack up (docker stack rm $stack)"
  else
    docker stack rm "$stack" >/dev/null 2>&1
    # the tasks' containers go asynchronously; the volumes only after them
    local end=$(( $(date +%s) + 60 ))
    while [ -n "$(docker ps -aq --filter "label=com.docker.stack.namespace=$stack")" ] \
          && [ "$(date +%s)" -lt "$end" ]; do sleep 1; done
    docker volume rm "${stack}_eddy-data" "${stack}_eddy-plugins" "${stack}_s3-data" >/dev/null 2>&1
    end=$(( $(date +%s) + 30 ))
    while docker network inspect "${stack}_eddy" >/dev/null 2>&1 && [ "$(date +%s)" -lt "$end" ]; do sleep 1; done
    [ "$left_swarm" = 1 ] && docker swarm leave --force >/dev/null 2>&1
    docker image rm "$tag" "$s3tag" >/dev/null 2>&1
    rm -rf "$work"
  fi
  log "total $(( $(date +%s) - t0 ))s"
}
trap cleanup EXIT
fail() { log "FAIL: $*"; exit 1; }
wait_until() {  # wait_until SECONDS WHAT CMD...
  local end=$(( $(date +%s) + $1 )) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || fail "timed out waiting for $what"
    sleep 1
  done
}

if [ "$swarm_state" = inactive ]; then
  docker swarm init --advertise-addr 127.0.0.1 >/dev/null || fail "docker swarm init failed"
  left_swarm=1
  log "single-node swarm initialised (advertise 127.0.0.1)"
fi

# 1. images (offline) and keys
args=(--offline --tag "eddy:stack-$$" --images eddy,s3 --build-dir "$work/build")
[ -n "$binary" ] && args+=(--binary "$binary")
"$repo/deploy/build-image.sh" "${args[@]}" >"$work/build.log" 2>&1 \
  || { tail -n 20 "$work/build.log"; fail "build-image.sh failed"; }
mkdir -m 700 "$work/keys"
docker run --rm -v "$work/keys:/keys" "$tag" keygen /keys >/dev/null || fail "eddy keygen failed"
log "images $tag and $s3tag built, keys made"

# 2. input and reference
awk -v n="$lines" 'BEGIN { srand(43); for (i = 0; i < n; i++) { l = "";
    for (j = 0; j < 8; j++) l = l (j ? " " : "") "w" int(rand() * rand() * 3000); print l } }' >"$work/in.txt"
tr -s ' \t' '\n' <"$work/in.txt" | grep -v '^$' | LC_ALL=C sort | uniq -c \
  | awk '{print $2"\t"$1}' >"$work/expected.tsv"

# 3. deploy, on free ports (the routing mesh publishes on every interface)
free_port() {
  local p
  while :; do
    p=$(shuf -i 20000-39999 -n 1)
    ss -Hltn "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
  done
}
export EDDY_IMAGE=$tag EDDY_S3_IMAGE=$s3tag EDDY_STACK_KEYS=$work/keys EDDY_WORKERS=3
export EDDY_HTTP_PORT EDDY_CONTROL_PORT EDDY_HTTP_PORT_2 EDDY_CONTROL_PORT_2
EDDY_HTTP_PORT=$(free_port) EDDY_CONTROL_PORT=$(free_port)
EDDY_HTTP_PORT_2=$(free_port) EDDY_CONTROL_PORT_2=$(free_port)
unset EDDY_CHECKPOINT_STORAGE EDDY_S3_ACCESS_KEY_ID EDDY_S3_SECRET_ACCESS_KEY EDDY_S3_SESSION_TOKEN EDDY_S3_BUCKET
docker stack deploy -c "$repo/deploy/stack.yml" "$stack" >"$work/deploy.log" 2>&1 \
  || { cat "$work/deploy.log"; fail "docker stack deploy failed"; }
log "deployed stack $stack (HTTP ports $EDDY_HTTP_PORT, $EDDY_HTTP_PORT_2)"
api=(x "http://127.0.0.1:$EDDY_HTTP_PORT" "http://127.0.0.1:$EDDY_HTTP_PORT_2")
task_of() {  # task_of SERVICE: a running container of the service on this node
  docker ps -q --filter "label=com.docker.swarm.service.name=${stack}_$1" --filter status=running | head -n 1
}
role_of() { curl -fsS "${api[$1]}/api/v1/leader" 2>/dev/null | jq -r .role; }
one_leads() { [ "$(role_of 1)" = leader ] || [ "$(role_of 2)" = leader ]; }
wait_until 180 "a leader among the coordinators" one_leads
if [ "$(role_of 1)" = leader ]; then lead=1
elif [ "$(role_of 2)" = leader ]; then lead=2
else fail "no coordinator leads any more"; fi
coord=$(task_of "coordinator-$lead")
[ -n "$coord" ] || fail "no container of coordinator-$lead"
alive() { docker exec "$coord" eddy status | grep -c ' alive$'; }
alive_is() { [ "$(alive)" -eq "$1" ]; }
wait_until 120 "3 live workers" alive_is 3
docker exec "$coord" eddy status | sed 's/^/    /'
log "coordinator-$lead leads; 3 workers registered"

# no volume for checkpoints: workers mount only /data (jobs' files), the
# coordinators also their plugin volume; the keys are secrets
for ctr in $(docker ps -q --filter "label=com.docker.stack.namespace=$stack"); do
  name=$(docker inspect -f '{{.Name}}' "$ctr" | tr -d /)
  for m in $(docker inspect -f '{{range .Mounts}}{{.Destination}} {{end}}' "$ctr"); do
    case "$m:$name" in
      /data:*|/var/lib/eddy:*coordinator*|/data:*s3*) ;;
      *) fail "$name mounts $m" ;;
    esac
  done
  case "$(docker inspect -f '{{join .Config.Cmd " "}}' "$ctr")" in
    *snapshot-dir=/data*) fail "$name keeps snapshots on /data" ;;
  esac
done
log "PASS: no task mounts a volume for checkpoints"

# 4. a job; its checkpoint in the bucket
docker cp "$work/in.txt" "$coord:/data/in.txt" || fail "docker cp of the input failed"
job=$(docker exec "$coord" eddy submit --job wordcount --input /data/in.txt --output /data/out.tsv \
        --rate "$rate" --parallelism 3) || fail "submit failed"
log "submitted $job ($lines lines at --rate $rate)"
job_doc() { curl -fsS "${api[$lead]}/api/v1/jobs" | jq -c --arg id "$job" '(if type == "array" then . else .jobs end)[] | select(.id == $id)'; }
job_state() { job_doc | jq -r .state; }
checkpointed() { [ "$(job_doc | grep -o '"completed": *[0-9]*' | head -n 1 | tr -dc 0-9)" -ge 1 ]; }
wait_until 60 "a complete checkpoint" checkpointed
s3c=$(task_of s3)
docker exec "$s3c" /usr/local/bin/node -e '
  require("http").get("http://127.0.0.1:4568/eddy?list-type=2&prefix=checkpoints/" + process.argv[1] + "/", r => {
    let b = ""; r.on("data", d => b += d);
    r.on("end", () => { for (const m of b.matchAll(/<Key>([^<]*)<\/Key>/g)) console.log(m[1]); });
  });' "$job" >"$work/keys.txt" || fail "cannot list the bucket"
grep -q "^checkpoints/$job/chk-[0-9]*/.*\.snap$" "$work/keys.txt" || fail "no checkpoint objects of $job in the bucket"
log "PASS: $(wc -l <"$work/keys.txt") checkpoint objects of $job in the s3 service's bucket"

# 5. kill a worker that runs instances of the job: the swarm replaces the
# task, the coordinator restores the job from the checkpoint store
[ "$(job_state)" = running ] || fail "$job is $(job_state) before the kill (raise EDDY_TEST_LINES)"
job_workers() { job_doc | jq -r '.operators[].instances[].worker // empty' | sort -u; }
names_alive() { docker exec "$coord" eddy status --json | jq -r '.workers[] | select(.alive) | .name' | sort; }
before=$(names_alive)
victim=
for w in $(docker ps -q --filter "label=com.docker.swarm.service.name=${stack}_worker"); do
  h=$(docker inspect -f '{{.Config.Hostname}}' "$w")
  id=$(docker exec "$coord" eddy status --json | jq -r --arg n "$h" '.workers[] | select(.name == $n and .alive) | .id')
  if [ -n "$id" ] && job_workers | grep -qx "$id"; then victim=$w; break; fi
done
[ -n "$victim" ] || fail "no worker container runs instances of $job"
docker kill "$victim" >/dev/null || fail "docker kill failed"
t_kill=$(date +%s)
log "killed worker $(docker inspect -f '{{.Config.Hostname}}' "$victim") (docker kill)"
replaced() { [ -n "$(comm -13 <(echo "$before") <(names_alive))" ] && alive_is 3; }
wait_until 90 "the swarm to replace the killed worker (a new one, 3 live)" replaced
log "PASS: the swarm replaced it with $(comm -13 <(echo "$before") <(names_alive) | tr '\n' ' ')$(( $(date +%s) - t_kill ))s after the kill; 3 live workers"
ended() { case "$(job_state)" in finished|failed|cancelled) return 0 ;; esac; return 1; }
wait_until "$deadline_s" "$job to end" ended
[ "$(job_state)" = finished ] || fail "$job ended $(job_state)"
docker logs "$coord" 2>&1 | grep -q "job $job: .*restoring from checkpoint " \
  || fail "the coordinator did not restore $job from a checkpoint"
docker cp "$coord:/data/out.tsv" "$work/out.tsv" || fail "no /data/out.tsv"
cmp -s "$work/expected.tsv" "$work/out.tsv" || { diff "$work/expected.tsv" "$work/out.tsv" | head; fail "output differs"; }
log "PASS: $job restored from the checkpoint store after the kill; $(wc -l <"$work/out.tsv") words match the reference"

# 6. docker service scale
docker service scale -d "${stack}_worker=4" >/dev/null || fail "docker service scale failed"
wait_until 90 "4 live workers" alive_is 4
log "PASS: docker service scale ${stack}_worker=4: 4 live workers"
