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
    "--coordinator list it follows their leader across a failover.";

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
        EDDY_FLAG_END,
    };
    int code;
    if (eddy_cli_parse("controller", controller_usage, flags, argc, argv, NULL, NULL, &code) < 0)
        return code;
    if (exit_when_done && (!job || !*job))
        return eddy_usage_error("controller", "--exit-when-done needs --job");
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

    eddy_keys_t *keys;
    if (eddy_cli_load_keys("controller", keys_dir, EDDY_KEYS_CLIENT, &keys) != 0)
        return 2;
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
    eddy_log_set_component("controller");
    eddy_cli_install_signals();
    eddy_info("autoscaling %s via %s: interval %llu ms, warm-up %llu ms, cooldown %llu ms, "
              "target utilisation %.2f, scale-down below %.2f after %llu intervals%s",
              job && *job ? job : "every running job", coordinator, (unsigned long long)interval, (unsigned long long)warmup,
              (unsigned long long)cooldown, target, down, (unsigned long long)confirmations,
              dry_run ? ", dry run" : "");
    eddy_err_t err = {{0}};
    int rc = eddy_controller_run(coordinator, keys, &pc, job, exit_when_done, &eddy_cli_stop, &err);
    eddy_keys_destroy(&keys);
    if (rc < 0)
        return eddy_usage_error("controller", err.msg);
    return rc;
}
