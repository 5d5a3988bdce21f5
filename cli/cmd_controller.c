/* cmd_controller.c - `eddy controller`: the DS2 autoscaling controller of
 * one job, as a process next to the coordinator: its flags; the loop is
 * controller/loop.c.
 *
 * Every interval it asks the coordinator for the job's operator metrics
 * ("metrics JOB"), feeds them to the controller logic (controller/
 * controller.h), carries out the decisions that are to be applied
 * ("rescale JOB OP N", one after the other: the coordinator runs one rescale
 * at a time per job) and records every decision ("decision {...}", shown by
 * `eddy scaling` and GET /api/v1/scaling), logging one line each.
 *
 * It is a service: it watches every running job (or those named by --job)
 * and exits only on SIGINT/SIGTERM (or, with --exit-when-done, once every
 * named job ended: eddy local). While the coordinator is not reachable
 * (given a list, it follows their leader across a failover), or does not
 * know a job yet, it retries every interval and says so once. */
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"
#include "controller/controller.h"
#include "controller/loop.h"
#include "controller/pool_docker.h"
#include "controller/pool_local.h"
#include "state/keygroup.h"

static const char *controller_usage =
    "[--job JOB[,JOB...]] [flags]\n\n"
    "Autoscales the keyed operators of every running job (or the jobs named)\n"
    "with the DS2 model: every interval it reads each job's operator metrics\n"
    "from the coordinator, computes each operator's optimal parallelism at the\n"
    "target utilisation, rescales what the policy says to (scale up at once;\n"
    "scale down after confirmations; warm-up after every rescale, cooldown per\n"
    "operator) and records every decision (see `eddy scaling`). A service: a\n"
    "job that ends is dropped and jobs submitted later are picked up; with a\n"
    "--coordinator list it follows their leader across a failover.\n\n"
    "With --pool local|docker it also runs an elastic worker pool: when the jobs\n"
    "need more slots (instances of their widest operator) than the live workers\n"
    "offer (--worker-slots each), it starts workers (forked `eddy worker`\n"
    "processes, or containers through the Docker Engine API), up to\n"
    "--max-workers, and scale-ups wait for them; a worker it started that has run\n"
    "no instance for --pool-idle-ms after the jobs scaled down is released, down\n"
    "to --min-workers. Every pool change is a decision in `eddy scaling`\n"
    "(operator \"pool\") with its reason.\n\n"
    "--policy chooses the rules that propose the changes (the interval, warm-up,\n"
    "cooldown, bounds and dry run apply to every one):\n"
    "  eddy       the above, with catch-up, latency objective, state budget, core,\n"
    "             hot-key and effectiveness limits (default)\n"
    "  ds2        plain DS2: ceil(target / true rate per instance), no headroom,\n"
    "             up or down at once, sources sized for what arrives (no catch-up)\n"
    "  threshold  one instance more above 80% busy, one fewer below 30%\n"
    "  flink      Flink's autoscaler: utilisation 0.7 unless within [0.4, 1.0],\n"
    "             busiest-instance busy time, key-group-aligned parallelism,\n"
    "             catch-up, scale-down after --scale-down-delay-ms";

/* The backend --pool names, with the flags it takes. */
typedef struct pool_flags {
    const char *kind, *snapshot_dir, *docker_socket, *template_container, *image, *network,
        *volumes, *command, *env, *prefix;
} pool_flags_t;

static int open_backend(const pool_flags_t *f, const char *coordinator, const char *keys_dir,
                        eddy_pool_backend_t *out, eddy_err_t *err)
{
    if (!strcmp(f->kind, "local")) {
        eddy_local_worker_flags_t wf = {coordinator, f->snapshot_dir, keys_dir, false, false, false};
        return eddy_pool_local_new(&wf, out, err);
    }
    if (!strcmp(f->kind, "docker")) {
        eddy_pool_docker_config_t dc = {
            .socket = f->docker_socket, .prefix = f->prefix, .template_container = f->template_container,
            .image = f->image, .network = f->network, .volumes = f->volumes, .command = f->command,
            .env = f->env};
        return eddy_pool_docker_new(&dc, out, err);
    }
    return eddy_err_set(err, "--pool: expected local or docker, got '%.64s'", f->kind);
}

int eddy_cmd_controller(int argc, char **argv)
{
    eddy_scaling_policy_config_t pc = eddy_scaling_policy_config_default();
    const char *coordinator = eddy_client_default_coordinator();
    const char *job = NULL, *keys_dir = eddy_cli_default_keys();
    uint64_t interval = (uint64_t)pc.interval_ms, warmup = (uint64_t)pc.warmup_ms,
             cooldown = (uint64_t)pc.cooldown_ms, confirmations = pc.scale_down_confirmations,
             max_p = 0;
    uint32_t min_p = 1;
    double target = pc.target_utilisation, down = -1;
    bool dry_run = false, oversubscribe = false, exit_when_done = false;
    double effectiveness = pc.effectiveness;
    uint64_t state_budget_mb = 0;
    double catch_up_s = pc.catch_up_s, latency_slo_ms = 0;
    const char *policy = "eddy";
    uint64_t scale_down_delay = (uint64_t)pc.scale_down_delay_ms;
    eddy_pool_config_t pool_cfg = eddy_pool_config_default();
    pool_flags_t pf = {.kind = NULL, .docker_socket = EDDY_DOCKER_DEFAULT_SOCKET, .prefix = "eddy-pool"};
    uint64_t pool_cooldown = (uint64_t)pool_cfg.cooldown_ms, pool_idle = (uint64_t)pool_cfg.idle_grace_ms,
             pool_start = (uint64_t)pool_cfg.start_timeout_ms, pool_wait = (uint64_t)pool_cfg.start_wait_ms;
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("coordinator", &coordinator, "tcp://HOST:PORT[,...]",
                      "coordinator, or a comma-separated list of coordinators whose leader to follow (env EDDY_COORDINATOR, default " EDDY_DEFAULT_COORDINATOR ")"),
        EDDY_FLAG_STR("job", &job, "JOB[,JOB...]", "ids of the jobs to autoscale (default: every running job)"),
        EDDY_FLAG_SWITCH("exit-when-done", &exit_when_done, "exit once every job named by --job has ended (eddy local)"),
        EDDY_CLI_KEYS_FLAG(keys_dir),
        EDDY_FLAG_U64("interval-ms", &interval, 1, EDDY_FLAG_MS_MAX, "MS", "metrics window / evaluation interval (10000)"),
        EDDY_FLAG_U64("warmup-ms", &warmup, 0, EDDY_FLAG_MS_MAX, "MS", "ignore metrics this long after a rescale (30000)"),
        EDDY_FLAG_U64("cooldown-ms", &cooldown, 0, EDDY_FLAG_MS_MAX, "MS", "do not rescale an operator again within (60000)"),
        EDDY_FLAG_F64("target-utilisation", &target, 0, 1, "U", "provision instances to be busy U of the time (0.8)"),
        EDDY_FLAG_F64("scale-down-utilisation", &down, 0, 1, "U",
                      "scale down only if fewer instances stay below U (target - 0.1)"),
        EDDY_FLAG_U64("scale-down-confirmations", &confirmations, 1, 1000, "N",
                      "consecutive intervals that must agree on a scale-down (3)"),
        EDDY_FLAG_U32("min-parallelism", &min_p, 1, EDDY_MAX_KEY_GROUPS, "N", "never fewer instances per operator (1)"),
        EDDY_FLAG_U64("max-parallelism", &max_p, 0, EDDY_MAX_KEY_GROUPS, "N",
                      "never more instances per operator (default: the job's max parallelism)"),
        EDDY_FLAG_SWITCH("dry-run", &dry_run, "decide and record, never rescale"),
        EDDY_FLAG_SWITCH("allow-oversubscribe", &oversubscribe,
                         "ask for more instances of an operator than the workers have cores"),
        EDDY_FLAG_F64("effectiveness", &effectiveness, 0, 1, "F",
                      "a scale-up bringing less than F of its predicted gain marks the operator's limit (0.5, 0 = off)"),
        EDDY_FLAG_U64("state-budget-mb", &state_budget_mb, 0, 1u << 30, "MB",
                      "keyed state per instance: scale an operator out before its state would exceed MB per instance (0 = no budget)"),
        EDDY_FLAG_F64("catch-up-s", &catch_up_s, 0, 1e6, "S",
                      "size for draining a source's backlog (its reported lag) within S seconds on top of what arrives (30, 0 = ignore backlogs)"),
        EDDY_FLAG_F64("latency-slo-ms", &latency_slo_ms, 0, 1e9, "MS",
                      "p99 latency objective: above it, add an instance to operators that are the queue (busy or backpressured upstream) (0 = none)"),
        EDDY_FLAG_STR("policy", &policy, "eddy|ds2|threshold|flink",
                      "the scaling rules (eddy; see above)"),
        EDDY_FLAG_U64("scale-down-delay-ms", &scale_down_delay, 0, EDDY_FLAG_MS_MAX, "MS",
                      "--policy flink: scale down only once it has been wanted for MS (60000)"),
        EDDY_FLAG_STR("pool", &pf.kind, "local|docker", "run an elastic worker pool with this backend (default: none)"),
        EDDY_FLAG_U32("min-workers", &pool_cfg.min_workers, 0, 1024, "N", "pool: never fewer live workers (1)"),
        EDDY_FLAG_U32("max-workers", &pool_cfg.max_workers, 1, 1024, "N", "pool: never more live workers (4)"),
        EDDY_FLAG_U32("worker-slots", &pool_cfg.slots_per_worker, 1, 1024, "N", "pool: instances of one operator a worker is counted for (1)"),
        EDDY_FLAG_U64("pool-cooldown-ms", &pool_cooldown, 0, EDDY_FLAG_MS_MAX, "MS", "pool: no change within MS of a release (30000)"),
        EDDY_FLAG_U64("pool-idle-ms", &pool_idle, 0, EDDY_FLAG_MS_MAX, "MS", "pool: release a worker only after MS without instances (60000)"),
        EDDY_FLAG_U64("pool-start-timeout-ms", &pool_start, 1, EDDY_FLAG_MS_MAX, "MS", "pool: stop a started worker that has not registered after MS (60000)"),
        EDDY_FLAG_U64("pool-start-wait-ms", &pool_wait, 0, EDDY_FLAG_MS_MAX, "MS", "pool: at start, add no worker for MS while the cluster's own workers register (15000)"),
        EDDY_FLAG_U32("pool-expect-workers", &pool_cfg.expect_workers, 0, 1024, "N", "pool: the start wait ends once N workers are alive (0: it lasts --pool-start-wait-ms)"),
        EDDY_FLAG_STR("pool-prefix", &pf.prefix, "NAME", "pool: its workers are NAME-1, NAME-2, ... (eddy-pool)"),
        EDDY_FLAG_STR("pool-snapshot-dir", &pf.snapshot_dir, "DIR", "pool local: the workers' --snapshot-dir"),
        EDDY_FLAG_STR("docker-socket", &pf.docker_socket, "PATH", "pool docker: the Docker Engine socket (" EDDY_DOCKER_DEFAULT_SOCKET ")"),
        EDDY_FLAG_STR("pool-template", &pf.template_container, "CONTAINER", "pool docker: copy image, command, env, network and volumes of this worker container"),
        EDDY_FLAG_STR("pool-image", &pf.image, "IMAGE", "pool docker: the workers' image (without --pool-template)"),
        EDDY_FLAG_STR("pool-network", &pf.network, "NET", "pool docker: the workers' network"),
        EDDY_FLAG_STR("pool-volume", &pf.volumes, "SRC:DST[,...]", "pool docker: volumes to mount"),
        EDDY_FLAG_STR("pool-command", &pf.command, "\"ARGS\"", "pool docker: the workers' command, e.g. \"worker --coordinator tcp://c:7600 --hostname-identity\""),
        EDDY_FLAG_STR("pool-env", &pf.env, "K=V[,...]", "pool docker: the workers' environment"),
        EDDY_FLAG_END,
    };
    int code;
    if (eddy_cli_parse("controller", controller_usage, flags, argc, argv, NULL, NULL, &code) < 0)
        return code;
    if (exit_when_done && (!job || !*job))
        return eddy_usage_error("controller", "--exit-when-done needs --job");
    if (eddy_scaling_policy_kind_parse(policy, &pc.kind) < 0)
        return eddy_usage_error("controller", "--policy: expected eddy, ds2, threshold or flink");
    if (!(target > 0 && target <= 1))
        return eddy_usage_error("controller", "--target-utilisation must be in (0, 1]");
    if (down < 0)
        down = target > 0.2 ? target - 0.1 : target / 2;
    if (!(down > 0 && down <= target))
        return eddy_usage_error("controller",
                                "--scale-down-utilisation must be in (0, --target-utilisation]");
    if (max_p && max_p < min_p)
        return eddy_usage_error("controller",
                                "need 1 <= --min-parallelism <= --max-parallelism");
    for (const char *p = job; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= EDDY_SCALING_NAME_MAX)
            return eddy_usage_error("controller", "--job: empty or too long job id");
        p = comma ? comma + 1 : NULL;
    }

    pool_cfg.cooldown_ms = (int64_t)pool_cooldown;
    pool_cfg.idle_grace_ms = (int64_t)pool_idle;
    pool_cfg.start_timeout_ms = (int64_t)pool_start;
    pool_cfg.start_wait_ms = (int64_t)pool_wait;
    eddy_pool_config_t pool_default = eddy_pool_config_default();
    bool pool_bounds_set = pool_cfg.min_workers != pool_default.min_workers ||
                           pool_cfg.max_workers != pool_default.max_workers ||
                           pool_cfg.slots_per_worker != pool_default.slots_per_worker ||
                           pool_cfg.cooldown_ms != pool_default.cooldown_ms ||
                           pool_cfg.idle_grace_ms != pool_default.idle_grace_ms ||
                           pool_cfg.start_timeout_ms != pool_default.start_timeout_ms ||
                           pool_cfg.start_wait_ms != pool_default.start_wait_ms ||
                           pool_cfg.expect_workers != pool_default.expect_workers;
    if (!pf.kind && (pool_bounds_set || pf.snapshot_dir ||
                     pf.template_container || pf.image || pf.network || pf.volumes || pf.command ||
                     pf.env))
        return eddy_usage_error("controller", "pool flags (--min-workers, --max-workers, --pool-*) need --pool local|docker");
    eddy_pool_t *pool = NULL;
    if (pf.kind) {
        eddy_err_t perr = {{0}};
        eddy_pool_backend_t backend = {0};
        if (eddy_pool_config_check(&pool_cfg, &perr) < 0 ||
            open_backend(&pf, coordinator, keys_dir, &backend, &perr) < 0)
            return eddy_usage_error("controller", perr.msg);
        pool = eddy_pool_new(&pool_cfg, &backend, pf.prefix, &perr);
        if (!pool) {
            eddy_pool_backend_destroy(&backend);
            return eddy_usage_error("controller", perr.msg);
        }
    }

    eddy_keys_t *keys;
    if (eddy_cli_load_keys("controller", keys_dir, EDDY_KEYS_CLIENT, &keys) != 0) {
        eddy_pool_destroy(&pool);
        return 2;
    }
    pc.job = NULL;
    pc.interval_ms = (int64_t)interval;
    pc.warmup_ms = (int64_t)warmup;
    pc.cooldown_ms = (int64_t)cooldown;
    pc.target_utilisation = target;
    pc.scale_down_utilisation = down;
    pc.scale_down_confirmations = (uint32_t)confirmations;
    pc.min_parallelism = min_p;
    pc.max_parallelism = (uint32_t)max_p;
    pc.dry_run = dry_run;
    pc.allow_oversubscribe = oversubscribe;
    pc.effectiveness = effectiveness;
    pc.state_budget_bytes = state_budget_mb * 1024u * 1024u;
    pc.catch_up_s = catch_up_s;
    pc.latency_slo_ms = latency_slo_ms;
    pc.scale_down_delay_ms = (int64_t)scale_down_delay;
    eddy_log_set_component("controller");
    eddy_cli_install_signals();
    eddy_info("autoscaling %s via %s: policy %s, interval %llu ms, warm-up %llu ms, cooldown %llu ms, "
              "target utilisation %.2f, scale-down below %.2f after %llu intervals%s",
              job && *job ? job : "every running job", coordinator, policy, (unsigned long long)interval, (unsigned long long)warmup,
              (unsigned long long)cooldown, target, down, (unsigned long long)confirmations,
              dry_run ? ", dry run" : "");
    if (state_budget_mb)
        eddy_info("state budget: %llu MB of keyed state per instance", (unsigned long long)state_budget_mb);
    if (catch_up_s > 0)
        eddy_info("backlogs: drained within %g s (--catch-up-s)", catch_up_s);
    if (latency_slo_ms > 0)
        eddy_info("latency objective: p99 %g ms", latency_slo_ms);
    if (pool)
        eddy_info("worker pool (%s): %u to %u workers x %u slot%s, idle grace %llu ms, cooldown %llu ms, "
                  "start wait %llu ms (or %u workers alive)",
                  pf.kind, pool_cfg.min_workers, pool_cfg.max_workers, pool_cfg.slots_per_worker,
                  pool_cfg.slots_per_worker == 1 ? "" : "s", (unsigned long long)pool_idle,
                  (unsigned long long)pool_cooldown, (unsigned long long)pool_wait,
                  pool_cfg.expect_workers);
    eddy_err_t err = {{0}};
    int rc = eddy_controller_run(coordinator, keys, &pc, job, exit_when_done, pool, &eddy_cli_stop, &err);
    eddy_pool_destroy(&pool); /* its workers stop with it */
    eddy_keys_destroy(&keys);
    if (rc < 0)
        return eddy_usage_error("controller", err.msg);
    return rc;
}
