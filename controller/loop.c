/* loop.c - the controller's control loop (see loop.h): every interval, for
 * every job it watches (the named ones, or every job not ended), it
 * asks the coordinator for the job's operator metrics ("metrics JOB"),
 * feeds them to the controller logic (controller.h), carries out the
 * decisions that are to be applied ("rescale JOB OP N", one after the
 * other: the coordinator runs one rescale at a time per job) and records
 * every decision ("decision {...}", shown by `eddy scaling` and GET
 * /api/v1/scaling), logging one line each. While the coordinator is not
 * reachable (a failover: the client follows the leader of a coordinator
 * list), or does not know the job yet, it retries every interval and says
 * so once. A job that ends is dropped, not a reason to exit (unless asked,
 * for eddy local). */
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

/* Records doc (taken) in the coordinator's decision log. */
static void post_doc(const char *coordinator, const eddy_keys_t *keys, json_t *doc, const char *what)
{
    eddy_err_t err = {{0}};
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!text)
        return;
    int64_t status;
    char *body = NULL;
    if (eddy_client_call(coordinator, keys, "decision", 1, &text, METRICS_TIMEOUT_MS, &status, &body, &err) < 0)
        eddy_warn("cannot record the decision for %s: %s", what, err.msg);
    else if (status != 0)
        eddy_warn("the coordinator did not record the decision for %s: %s", what, body);
    free(body);
    free(text);
}

static void post_decision(const char *coordinator, const eddy_keys_t *keys, const eddy_scaling_decision_t *d)
{
    eddy_err_t err = {{0}};
    eddy_scaling_decision_t wall = *d;
    wall.time_ms = eddy_wall_ms(); /* the policy ran on the job's clock */
    json_t *doc = eddy_scaling_decision_to_json(&wall, &err);
    if (!doc) {
        eddy_warn("cannot encode the decision for %s: %s", d->operator_name, err.msg);
        return;
    }
    /* ms since the job started, the clock its reason's times are on */
    json_object_set_new(doc, "job_time_ms", json_integer((json_int_t)d->time_ms));
    post_doc(coordinator, keys, doc, d->operator_name);
}

/* One round of the worker pool, if there is one. */
static void pool_round(const char *coordinator, const eddy_keys_t *keys, eddy_pool_t *pool)
{
    json_t *entry = pool ? eddy_pool_step(pool, coordinator, keys) : NULL;
    if (entry)
        post_doc(coordinator, keys, entry, "the pool");
}

/* With a pool starting workers, a scale-up past the live workers' slots
 * waits for them (pool_run.h). */
static void wait_for_workers(eddy_pool_t *pool, eddy_scaling_decision_t *d)
{
    if (!pool || !d->applied || d->action != EDDY_SCALING_SCALE_UP ||
        !eddy_pool_should_wait(pool, d->new_parallelism))
        return;
    d->applied = false;
    size_t used = strlen(d->reason);
    snprintf(d->reason + used, sizeof d->reason - used,
             "; not applied: waiting for %u worker%s the pool is starting", eddy_pool_starting(pool),
             eddy_pool_starting(pool) == 1 ? "" : "s");
}

/* One line per decision that changes something; a no-change decision is
 * in the history (`eddy scaling --all`) and at debug level only. */
static void log_decision(const eddy_scaling_decision_t *d)
{
    if (d->action == EDDY_SCALING_NO_CHANGE) {
        eddy_debug("%s/%s %u: no change: %s", d->job, d->operator_name, d->old_parallelism,
                   d->reason);
        return;
    }
    eddy_info("%s/%s %u -> %u %s%s [%s]: %s", d->job, d->operator_name, d->old_parallelism,
              d->new_parallelism, eddy_scaling_action_name(d->action),
              d->action == EDDY_SCALING_NO_CHANGE ? "" : d->applied ? " (applied)" : " (not applied)",
              d->policy, d->reason);
}

/* Rescales d's operator; on failure marks the decision not applied and
 * says why in its reason. Returns 0 when the rescale completed. */
static int carry_out(const char *coordinator, const eddy_keys_t *keys, const char *job, eddy_scaling_decision_t *d)
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

/* One job the controller watches: its own controller (DS2 windows, policy
 * state), made when the job is first seen running, dropped when it ends
 * (a job submitted again under the same id starts afresh). */
/* The controller's clock: ms since the job started, on this process's
 * monotonic clock (fixed from the job's uptime when first seen, so it never
 * goes back, even if a restarted coordinator restarts the uptime). */
typedef struct job_clock {
    bool set;
    int64_t origin_ms;
} job_clock_t;

static int64_t job_clock_now(job_clock_t *clock, const json_t *job_doc)
{
    int64_t mono = (int64_t)eddy_mono_ms();
    if (!clock->set) {
        double uptime_s = json_number_value(json_object_get(job_doc, "uptime_s"));
        int64_t uptime_ms = uptime_s > 0 && uptime_s < 1e9 ? (int64_t)(uptime_s * 1000.0) : 0;
        clock->origin_ms = uptime_ms < mono ? mono - uptime_ms : 0;
        clock->set = true;
    }
    return mono - clock->origin_ms;
}

typedef struct watched {
    char job[EDDY_SCALING_NAME_MAX];
    eddy_controller_t *ctl;
    job_clock_t clock;
    bool said_no_job, ended;
    struct watched *next;
} watched_t;

static watched_t *watch(watched_t **list, const char *job)
{
    for (watched_t *w = *list; w; w = w->next)
        if (!strcmp(w->job, job))
            return w;
    watched_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    snprintf(w->job, sizeof w->job, "%s", job);
    w->next = *list;
    *list = w;
    return w;
}

/* The jobs to watch this round: the named ones, or every job the
 * coordinator lists that has not ended. 0, or -1 when it cannot be asked. */
static int refresh_jobs(const char *coordinator, const eddy_keys_t *keys, const char *named, watched_t **list,
                        eddy_err_t *err)
{
    if (named && *named) {
        for (const char *p = named; p && *p;) {
            const char *comma = strchr(p, ',');
            char job[EDDY_SCALING_NAME_MAX];
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            if (len && len < sizeof job) {
                memcpy(job, p, len);
                job[len] = '\0';
                watch(list, job);
            }
            p = comma ? comma + 1 : NULL;
        }
        return 0;
    }
    int64_t status = 0;
    char *body = NULL;
    if (eddy_client_call(coordinator, keys, "jobs", 0, NULL, METRICS_TIMEOUT_MS, &status, &body, err) < 0)
        return -1;
    json_t *doc = status == 0 ? json_loads(body, 0, NULL) : NULL;
    free(body);
    size_t i;
    json_t *j;
    json_array_foreach(doc, i, j)
    {
        const char *id = json_string_value(json_object_get(j, "id"));
        const char *state = json_string_value(json_object_get(j, "state"));
        bool ended = state && (!strcmp(state, "finished") || !strcmp(state, "failed") ||
                               !strcmp(state, "cancelled"));
        if (id && !ended && strlen(id) < EDDY_SCALING_NAME_MAX) {
            watched_t *w = watch(list, id);
            if (w && w->ended) {
                w->ended = false; /* submitted again */
                eddy_info("watching job %s again", id);
            }
        }
    }
    json_decref(doc);
    return 0;
}

/* One interval of one job: metrics, the policy, the rescales it orders. */
static int step_job(const char *coordinator, const eddy_keys_t *keys, const eddy_scaling_policy_config_t *pc,
                    watched_t *w, eddy_pool_t *pool, volatile sig_atomic_t *stop)
{
    eddy_err_t lerr = {{0}};
    if (!w->ctl) {
        eddy_scaling_policy_config_t jpc = *pc;
        jpc.job = w->job;
        w->ctl = eddy_controller_new(&jpc, &lerr);
        if (!w->ctl) {
            eddy_warn("job %s: %s", w->job, lerr.msg);
            return 0;
        }
        eddy_info("watching job %s", w->job);
    }
    char *margv[] = {w->job};
    int64_t status = 0;
    char *body = NULL;
    if (eddy_client_call(coordinator, keys, "metrics", 1, margv, METRICS_TIMEOUT_MS, &status, &body, &lerr) < 0)
        return -1; /* unreachable: the caller says so */
    if (status != 0) {
        if (!w->said_no_job)
            eddy_info("coordinator: %s; retrying every %llu ms", body,
                      (unsigned long long)pc->interval_ms);
        w->said_no_job = true;
        free(body);
        return 0;
    }
    w->said_no_job = false;
    json_error_t jerr;
    json_t *doc = json_loads(body, 0, &jerr);
    free(body);
    if (!doc) {
        eddy_warn("unreadable metrics from the coordinator: %s", jerr.text);
        return 0;
    }
    eddy_controller_step_t step;
    int orc = eddy_controller_observe(w->ctl, doc, job_clock_now(&w->clock, doc), &step, &lerr);
    json_decref(doc);
    if (orc < 0) {
        eddy_warn("job %s: skipping this window: %s", w->job, lerr.msg);
        return 0;
    }
    if (step.job_ended) {
        eddy_info("job %s has ended (%s)", w->job, step.state);
        w->ended = true;
        if (pool)
            eddy_pool_forget_job(pool, w->job);
        eddy_controller_destroy(&w->ctl);
        return 0;
    }
    if (!step.evaluated) {
        eddy_debug("%s", step.note);
        return 0;
    }
    /* Copy: carrying out a rescale may change what was decided. */
    eddy_scaling_decision_t *ds = malloc(step.count * sizeof *ds);
    if (!ds) {
        eddy_error("out of memory");
        return 1;
    }
    memcpy(ds, step.decisions, step.count * sizeof *ds);
    if (pool) {
        /* workers first, instances once they are there */
        eddy_pool_note_decisions(pool, w->job, ds, step.count);
        pool_round(coordinator, keys, pool);
    }
    for (size_t i = 0; i < step.count && !*stop; i++) {
        wait_for_workers(pool, &ds[i]);
        if (!ds[i].applied || ds[i].action == EDDY_SCALING_NO_CHANGE)
            continue;
        if (carry_out(coordinator, keys, w->job, &ds[i]) == 0 &&
            eddy_controller_note_rescale(w->ctl, ds[i].operator_name, job_clock_now(&w->clock, NULL), &lerr) < 0)
            eddy_warn("%s", lerr.msg);
    }
    for (size_t i = 0; i < step.count; i++) {
        log_decision(&ds[i]);
        post_decision(coordinator, keys, &ds[i]);
    }
    free(ds);
    return 0;
}

int eddy_controller_run(const char *coordinator, const eddy_keys_t *keys, const eddy_scaling_policy_config_t *pc,
                        const char *jobs, bool exit_when_done, eddy_pool_t *pool,
                        volatile sig_atomic_t *stop, eddy_err_t *err)
{
    /* the configuration is checked once, before anything runs */
    eddy_controller_t *probe = eddy_controller_new(pc, err);
    if (!probe)
        return -1;
    eddy_controller_destroy(&probe);
    uint64_t interval = (uint64_t)pc->interval_ms;
    watched_t *list = NULL;
    bool said_unreachable = false, connected = false;
    int rc = 0;
    while (!*stop) {
        eddy_err_t lerr = {{0}};
        bool reachable = refresh_jobs(coordinator, keys, jobs, &list, &lerr) == 0;
        bool any_open = false;
        for (watched_t *w = list; reachable && w && !*stop; w = w->next) {
            if (w->ended)
                continue;
            int got = step_job(coordinator, keys, pc, w, pool, stop);
            if (got < 0) {
                reachable = false;
                snprintf(lerr.msg, sizeof lerr.msg, "the coordinator at %s does not answer",
                         coordinator);
            } else if (got > 0) {
                rc = 1;
                goto out;
            }
            any_open |= !w->ended;
        }
        if (!reachable) {
            /* a failover in progress, or the coordinators are down: keep trying */
            if (!said_unreachable)
                eddy_info("%s; retrying every %llu ms", lerr.msg, (unsigned long long)interval);
            said_unreachable = true;
        } else {
            if (!connected || said_unreachable)
                eddy_info("connected to the coordinator at %s", coordinator);
            connected = true;
            said_unreachable = false;
            pool_round(coordinator, keys, pool);
            if (exit_when_done && jobs && *jobs && list && !any_open) {
                eddy_info("every watched job has ended; exiting");
                break;
            }
        }
        nap(interval, stop);
    }
out:
    while (list) {
        watched_t *w = list;
        list = w->next;
        eddy_controller_destroy(&w->ctl);
        free(w);
    }
    return rc;
}
