/* loop.c - the controller's control loop (see loop.h): every interval it
 * asks the coordinator for the job's operator metrics ("metrics JOB"),
 * feeds them to the controller logic (controller.h), carries out the
 * decisions that are to be applied ("rescale JOB OP N", one after the
 * other: the coordinator runs one rescale at a time per job) and records
 * every decision ("decision {...}", shown by `eddy scaling` and GET
 * /api/v1/scaling), logging one line each. While the coordinator is not
 * reachable, or does not know the job yet, it retries every interval and
 * says so once. */
#include "controller/loop.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "controller/controller.h"
#include "controller/decision_json.h"
#include "net/client.h"

#define RESCALE_TIMEOUT_MS 60000
#define METRICS_TIMEOUT_MS 5000

/* Sleeps up to ms, returning early on a stop signal. */
static void nap(uint64_t ms, volatile sig_atomic_t *stop)
{
    uint64_t until = eddy_mono_ms() + ms;
    while (!*stop) {
        uint64_t now = eddy_mono_ms();
        if (now >= until)
            break;
        uint64_t left = until - now;
        usleep((useconds_t)(left > 100 ? 100000 : left * 1000));
    }
}

static void post_decision(const char *coordinator, const eddy_keys_t *keys,
                          const eddy_scaling_decision_t *d)
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
    if (eddy_client_call(coordinator, keys, "decision", 1, &text, METRICS_TIMEOUT_MS, &status, &body, &err) < 0)
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
static int carry_out(const char *coordinator, const eddy_keys_t *keys, const char *job,
                     eddy_scaling_decision_t *d)
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
    if (eddy_client_call(coordinator, keys, "rescale", 3, args, RESCALE_TIMEOUT_MS, &status, &body, &err) < 0)
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

int eddy_controller_run(const char *coordinator, const eddy_keys_t *keys,
                        const eddy_scaling_policy_config_t *pc,
                        volatile sig_atomic_t *stop, eddy_err_t *err)
{
    eddy_controller_t *ctl = eddy_controller_new(pc, err);
    if (!ctl)
        return -1;
    const char *job = pc->job;
    eddy_err_t lerr = {{0}}; /* a failed window or call is logged, and the loop goes on */
    uint64_t interval = (uint64_t)pc->interval_ms;
    char *margv[] = {(char *)job};
    bool said_unreachable = false, said_no_job = false, connected = false;
    int rc = 0;
    while (!*stop) {
        int64_t status = 0;
        char *body = NULL;
        if (eddy_client_call(coordinator, keys, "metrics", 1, margv, METRICS_TIMEOUT_MS, &status, &body, &lerr) < 0) {
            if (!said_unreachable)
                eddy_info("%s; retrying every %llu ms", lerr.msg, (unsigned long long)interval);
            said_unreachable = true;
            nap(interval, stop);
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
            nap(interval, stop);
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
            nap(interval, stop);
            continue;
        }
        int orc = eddy_controller_observe(ctl, doc, now, &step, &lerr);
        json_decref(doc);
        if (orc < 0) {
            eddy_warn("skipping this window: %s", lerr.msg);
            nap(interval, stop);
            continue;
        }
        if (step.job_ended) {
            eddy_info("job %s has ended (%s); exiting", job, step.state);
            break;
        }
        if (!step.evaluated) {
            eddy_debug("%s", step.note);
            nap(interval, stop);
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
        for (size_t i = 0; i < step.count && !*stop; i++) {
            if (!ds[i].applied || ds[i].action == EDDY_SCALING_NO_CHANGE)
                continue;
            if (carry_out(coordinator, keys, job, &ds[i]) == 0 &&
                eddy_controller_note_rescale(ctl, ds[i].operator_name, (int64_t)eddy_mono_ms(), &lerr) < 0)
                eddy_warn("%s", lerr.msg);
        }
        for (size_t i = 0; i < step.count; i++) {
            log_decision(&ds[i]);
            post_decision(coordinator, keys, &ds[i]);
        }
        free(ds);
        nap(interval, stop);
    }
    eddy_controller_destroy(&ctl);
    return rc;
}
