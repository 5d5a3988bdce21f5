#!/usr/bin/env bash
# test.sh - set up, build and run every test (unit + integration) with ctest.
#
#   bash scripts/test.sh              # release build (as root, or a user with sudo)
#   bash scripts/test.sh --sanitize   # every test under ASan + UBSan instead (the
#                                     # compose test: release; CI's time budget)
#   bash scripts/test.sh --all-types  # also compile Debug and Release (no tests)
#   bash scripts/test.sh --docker     # also install Docker, start dockerd (root)
#                                     # and run the docker-compose test
#
# Ends with one line "N passed, N failed" (ctest tests, both runs together)
# and exits non-zero when anything failed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SANITIZE=0
DOCKER=0
ALL_TYPES=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) SANITIZE=1 ;;
    --docker) DOCKER=1 ;;
    --all-types) ALL_TYPES=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown flag '$arg'" >&2; exit 2 ;;
  esac
done

setup_args=()
((SANITIZE)) && setup_args+=(--sanitize)
((ALL_TYPES)) && setup_args+=(--all-types)
if ! bash "$ROOT/scripts/setup.sh" "${setup_args[@]}"; then
  echo "test.sh: setup/build failed"
  echo "0 passed, 1 failed"
  exit 1
fi

if ((DOCKER)) && [[ $(id -u) -ne 0 ]]; then
  echo "test.sh: --docker installs Docker and starts dockerd: run it as root" >&2
  exit 2
fi
if ((DOCKER)); then
  # The compose test builds an image offline and runs coordinator, etcd and
  # workers in containers; it needs a Docker engine, which nothing starts for us.
  if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker-compose >/dev/null 2>&1; then
    install_docker() {
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io docker-compose
    }
    install_docker || { apt-get update && install_docker; } \
      || { echo "test.sh: cannot install docker"; echo "0 passed, 1 failed"; exit 1; }
  fi
  # Where this machine cannot run a daemon the compose test reports SKIP.
  bash "$ROOT/deploy/start-dockerd.sh" --timeout 90 \
    || echo "test.sh: WARNING: dockerd did not start; the docker-compose test will be skipped"
fi

PASSED=0
FAILED=0
STATUS=0
run_ctest() { # build dir, label, extra ctest args...
  local dir="$1" label="$2" log
  shift 2
  log="$(mktemp)"
  echo "==== ctest ($label) in $dir"
  # -j2: most tests wait on processes and sockets; the timing-sensitive ones
  # are RUN_SERIAL in CMakeLists.txt and still run alone.
  (cd "$dir" && ctest --output-on-failure --timeout 600 -j2 "$@") 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  # "NN% tests passed, F tests failed out of T"
  local line total failed
  line="$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)"
  if [[ -n "$line" ]]; then
    failed="$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")"
    total="$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")"
    PASSED=$((PASSED + total - failed))
    FAILED=$((FAILED + failed))
  else
    FAILED=$((FAILED + 1)) # ctest itself did not run properly
  fi
  ((rc != 0)) && STATUS=1
  rm -f "$log"
}

start=$(date +%s)
if ((SANITIZE)); then
  # Every test runs once: unit and integration tests under the sanitizers
  # (slower, and they catch what a release run would not), the compose test
  # with the release binary its image is built from. Running the whole suite
  # twice would not fit CI's 45 minutes on two cores (once takes about 32).
  # With --all-types that binary is build-release/'s (setup.sh then makes
  # no build/).
  release_dir="$ROOT/build"
  ((ALL_TYPES)) && release_dir="$ROOT/build-release"
  run_ctest "$release_dir" release -L docker
else
  run_ctest "$ROOT/build" release
fi
if ((SANITIZE)); then
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # The containers run the release binary; the compose test adds nothing here.
  run_ctest "$ROOT/build-asan" "asan+ubsan" -LE docker
fi
echo "test.sh: tests took $(( $(date +%s) - start )) s"
((FAILED > 0)) && STATUS=1
echo "$PASSED passed, $FAILED failed"
exit $STATUS
