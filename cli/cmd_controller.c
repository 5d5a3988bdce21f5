/* cmd_controller.c - `eddy controller`: the DS2 autoscaling controller of
 * one job, as a process next to the coordinator.
 *
 * Every interval it asks the coordinator for the job's operator metrics
 * ("metrics JOB"), feeds them to the controller logic (controller/
 * controller.h), carries out the decisions that are to be applied
 * ("rescale JOB OP N", one after the other: the coordinator runs one rescale
 * at a time per job) and records every decision ("decision {...}", shown by
 * `eddy scaling` and GET /api/v1/scaling), logging one line each.
 *
 * It exits 0 when the job has ended or on SIGINT/SIGTERM. While the
 * coordinator is not reachable, or does not know the job yet, it retries
 * every interval and says so once. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/clock.h"
#include "common/log.h"
#include "controller/controller.h"
#include "controller/decision_json.h"
#include "state/keygroup.h"

#define RESCALE_TIMEOUT_MS 60000
#define METRICS_TIMEOUT_MS 5000

static const char *controller_usage =
    "--job JOB [flags]\n\n"
    "Autoscales the keyed operators of JOB with the DS2 model: every interval it\n"
    "reads the job's operator metrics from the coordinator, computes each\n"
    "operator's optimal parallelism at the target utilisation, rescales what the\n"
    "policy says to (scale up at once; scale down after confirmations; warm-up\n"
    "after every rescale, cooldown per operator) and records every decision\n"
    "(see `eddy scaling`). Exits when the job ends.";

/* Sleeps up to ms, returning early on a stop signal. */
static void nap(uint64_t ms)
{
    uint64_t until = eddy_mono_ms() + ms;
    while (!eddy_cli_stop) {
        uint64_t now = eddy_mono_ms();
        if (now >= until)
            break;
        uint64_t left = until - now;
        usleep((useconds_t)(left > 100 ? 100000 : left * 1000));
    }
}

static void post_decision(const char *coordinator, const eddy_scaling_decision_t *d)
{
    eddy_err_t err = {{0}};
    eddy_scaling_decision_t wall = *d;
    wall.time_ms = eddy_wall_ms(); /* the policy ran on the monotonic clock */
    json_t *doc = eddy_scaling_decision_to_json(&wall, &err);
    if (!doc) {
        eddy_warn("cannot encode the decision for %s: %s", d->operator_name, err.msg);
        return;
    }
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!text)
        return;
    int64_t status;
    char *body = NULL;
    if (eddy_client_call(coordinator, "decision", 1, &text, METRICS_TIMEOUT_MS, &status, &body, &err) < 0)
        eddy_warn("cannot record the decision for %s: %s", d->operator_name, err.msg);
    else if (status != 0)
        eddy_warn("the coordinator did not record the decision for %s: %s", d->operator_name, body);
    free(body);
    free(text);
}

static void log_decision(const eddy_scaling_decision_t *d)
{
    eddy_info("%s/%s %u -> %u %s%s: %s", d->job, d->operator_name, d->old_parallelism,
              d->new_parallelism, eddy_scaling_action_name(d->action),
              d->action == EDDY_SCALING_NO_CHANGE ? "" : d->applied ? " (applied)" : " (not applied)",
              d->reason);
}

/* Rescales d's operator; on failure marks the decision not applied and
 * says why in its reason. Returns 0 when the rescale completed. */
static int carry_out(const char *coordinator, const char *job, eddy_scaling_decision_t *d)
{
    char n[16];
    snprintf(n, sizeof n, "%u", d->new_parallelism);
    char *args[] = {(char *)job, d->operator_name, n};
    int64_t status = 0;
    char *body = NULL;
    eddy_err_t err = {{0}};
    uint64_t t0 = eddy_mono_ms();
    eddy_info("rescaling %s/%s %u -> %u", job, d->operator_name, d->old_parallelism, d->new_parallelism);
    const char *why = NULL;
    if (eddy_client_call(coordinator, "rescale", 3, args, RESCALE_TIMEOUT_MS, &status, &body, &err) < 0)
        why = err.msg;
    else if (status != 0)
        why = body;
    if (why) {
        eddy_warn("rescale of %s/%s to %u failed: %s", job, d->operator_name, d->new_parallelism, why);
        d->applied = false;
        size_t used = strlen(d->reason);
        snprintf(d->reason + used, sizeof d->reason - used, "; rescale failed: %s", why);
        free(body);
        return -1;
    }
    eddy_info("rescaled %s/%s to %u in %llu ms", job, d->operator_name, d->new_parallelism,
              (unsigned long long)(eddy_mono_ms() - t0));
    free(body);
    return 0;
}

int eddy_cmd_controller(int argc, char **argv)
{
    eddy_scaling_policy_config_t pc = eddy_scaling_policy_config_default();
    const char *coordinator = eddy_client_default_coordinator();
    const char *job = NULL;
    uint64_t interval = (uint64_t)pc.interval_ms, warmup = (uint64_t)pc.warmup_ms,
             cooldown = (uint64_t)pc.cooldown_ms, confirmations = pc.scale_down_confirmations,
             max_p = 0;
    uint32_t min_p = 1;
    double target = pc.target_utilisation, down = -1;
    bool dry_run = false;
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("coordinator", &coordinator, "tcp://HOST:PORT",
                      "coordinator to talk to (env EDDY_COORDINATOR, default " EDDY_DEFAULT_COORDINATOR ")"),
        EDDY_FLAG_STR("job", &job, "JOB", "id of the job to autoscale (required)"),
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
        EDDY_FLAG_END,
    };
    int code;
    if (eddy_cli_parse("controller", controller_usage, flags, argc, argv, NULL, NULL, &code) < 0)
        return code;
    if (!job || !*job)
        return eddy_usage_error("controller", "--job is required");
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
    if (strlen(job) >= EDDY_SCALING_NAME_MAX)
        return eddy_usage_error("controller", "--job is too long");

    pc.job = job;
    pc.interval_ms = (int64_t)interval;
    pc.warmup_ms = (int64_t)warmup;
    pc.cooldown_ms = (int64_t)cooldown;
    pc.target_utilisation = target;
    pc.scale_down_utilisation = down;
    pc.scale_down_confirmations = (uint32_t)confirmations;
    pc.min_parallelism = min_p;
    pc.max_parallelism = (uint32_t)max_p;
    pc.dry_run = dry_run;
    eddy_err_t err = {{0}};
    eddy_controller_t *ctl = eddy_controller_new(&pc, &err);
    if (!ctl)
        return eddy_usage_error("controller", err.msg);

    eddy_log_set_component("controller");
    eddy_cli_install_signals();
    eddy_info("autoscaling job %s via %s: interval %llu ms, warm-up %llu ms, cooldown %llu ms, "
              "target utilisation %.2f, scale-down below %.2f after %llu intervals%s",
              job, coordinator, (unsigned long long)interval, (unsigned long long)warmup,
              (unsigned long long)cooldown, target, down, (unsigned long long)confirmations,
              dry_run ? ", dry run" : "");
    char *margv[] = {(char *)job};
    bool said_unreachable = false, said_no_job = false, connected = false;
    int rc = 0;
    while (!eddy_cli_stop) {
        int64_t status = 0;
        char *body = NULL;
        if (eddy_client_call(coordinator, "metrics", 1, margv, METRICS_TIMEOUT_MS, &status, &body, &err) < 0) {
            if (!said_unreachable)
                eddy_info("%s; retrying every %llu ms", err.msg, (unsigned long long)interval);
            said_unreachable = true;
            nap(interval);
            continue;
        }
        if (!connected || said_unreachable)
            eddy_info("connected to the coordinator at %s", coordinator);
        connected = true;
        said_unreachable = false;
        if (status != 0) {
            if (!said_no_job)
                eddy_info("coordinator: %s; retrying every %llu ms", body, (unsigned long long)interval);
            said_no_job = true;
            free(body);
            nap(interval);
            continue;
        }
        said_no_job = false;
        json_error_t jerr;
        json_t *doc = json_loads(body, 0, &jerr);
        free(body);
        int64_t now = (int64_t)eddy_mono_ms();
        eddy_controller_step_t step;
        if (!doc) {
            eddy_warn("unreadable metrics from the coordinator: %s", jerr.text);
            nap(interval);
            continue;
        }
        int orc = eddy_controller_observe(ctl, doc, now, &step, &err);
        json_decref(doc);
        if (orc < 0) {
            eddy_warn("skipping this window: %s", err.msg);
            nap(interval);
            continue;
        }
        if (step.job_ended) {
            eddy_info("job %s has ended (%s); exiting", job, step.state);
            break;
        }
        if (!step.evaluated) {
            eddy_debug("%s", step.note);
            nap(interval);
            continue;
        }
        /* Copy: carrying out a rescale may change what was decided. */
        eddy_scaling_decision_t *ds = malloc(step.count * sizeof *ds);
        if (!ds) {
            eddy_error("out of memory");
            rc = 1;
            break;
        }
        memcpy(ds, step.decisions, step.count * sizeof *ds);
        for (size_t i = 0; i < step.count && !eddy_cli_stop; i++) {
            if (!ds[i].applied || ds[i].action == EDDY_SCALING_NO_CHANGE)
                continue;
            if (carry_out(coordinator, job, &ds[i]) == 0 &&
                eddy_controller_note_rescale(ctl, ds[i].operator_name, (int64_t)eddy_mono_ms(), &err) < 0)
                eddy_warn("%s", err.msg);
        }
        for (size_t i = 0; i < step.count; i++) {
            log_decision(&ds[i]);
            post_decision(coordinator, &ds[i]);
        }
        free(ds);
        nap(interval);
    }
    eddy_controller_destroy(&ctl);
    return rc;
}
