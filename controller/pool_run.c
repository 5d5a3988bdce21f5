/* pool_run.c - the worker pool in the controller's loop (see pool_run.h).
 *
 * The workers' view comes from the coordinator's "status" (alive workers,
 * how many instances each runs); which of them the pool started comes from
 * the backend. Both are read fresh every round, so a worker that died, a
 * container someone removed or a coordinator failover are simply what the
 * next round sees. */
#include "controller/pool_run.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/client.h"

#define STATUS_TIMEOUT_MS 5000
#define MAX_OWNED 256

typedef struct job_demand {
    char job[EDDY_POOL_NAME_MAX];
    char operator_name[EDDY_POOL_NAME_MAX];
    uint32_t slots;
    struct job_demand *next;
} job_demand_t;

struct eddy_pool {
    eddy_pool_config_t config;
    eddy_pool_policy_t *policy;
    eddy_pool_backend_t backend;
    char prefix[32];
    job_demand_t *demands;
    uint32_t live_workers;   /* at the last round */
    uint32_t starting;       /* the pool's, not registered at the last round */
    bool said_unavailable;
};

eddy_pool_t *eddy_pool_new(const eddy_pool_config_t *config, eddy_pool_backend_t *backend,
                           const char *prefix, eddy_err_t *err)
{
    eddy_pool_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "pool: out of memory");
        return NULL;
    }
    self->policy = eddy_pool_policy_new(config, err);
    if (!self->policy) {
        free(self);
        return NULL;
    }
    self->config = *config;
    self->backend = *backend;
    memset(backend, 0, sizeof *backend);
    snprintf(self->prefix, sizeof self->prefix, "%s", prefix && *prefix ? prefix : "pool");
    return self;
}

void eddy_pool_destroy(eddy_pool_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_pool_t *self = *self_p;
    eddy_pool_backend_destroy(&self->backend);
    eddy_pool_policy_destroy(&self->policy);
    while (self->demands) {
        job_demand_t *d = self->demands;
        self->demands = d->next;
        free(d);
    }
    free(self);
    *self_p = NULL;
}

void eddy_pool_note_decisions(eddy_pool_t *self, const char *job,
                              const eddy_scaling_decision_t *decisions, size_t count)
{
    const eddy_scaling_decision_t *widest = NULL;
    bool tie = false;
    for (size_t i = 0; i < count; i++) {
        uint32_t want = decisions[i].wanted_parallelism;
        if (!want)
            continue;
        if (widest && want == widest->wanted_parallelism)
            tie = true;
        if (!widest || want > widest->wanted_parallelism) {
            widest = &decisions[i];
            tie = false;
        }
    }
    if (!widest)
        return; /* warm-up or nothing measured: the last demand stands */
    job_demand_t *d = self->demands;
    while (d && strcmp(d->job, job))
        d = d->next;
    if (!d) {
        d = calloc(1, sizeof *d);
        if (!d)
            return;
        snprintf(d->job, sizeof d->job, "%s", job);
        d->next = self->demands;
        self->demands = d;
    }
    d->slots = widest->wanted_parallelism;
    /* the reason names the operator that needs the most, or the job */
    snprintf(d->operator_name, sizeof d->operator_name, "%s", tie ? job : widest->operator_name);
}

void eddy_pool_forget_job(eddy_pool_t *self, const char *job)
{
    for (job_demand_t **p = &self->demands; *p; p = &(*p)->next) {
        if (!strcmp((*p)->job, job)) {
            job_demand_t *gone = *p;
            *p = gone->next;
            free(gone);
            return;
        }
    }
}

/* Every job's slots added up (instances of one job's operators share the
 * slots: slot sharing, so a job needs as many as its widest operator). */
static void total_demand(const eddy_pool_t *self, eddy_pool_demand_t *out)
{
    memset(out, 0, sizeof *out);
    const job_demand_t *widest = NULL;
    for (const job_demand_t *d = self->demands; d; d = d->next) {
        out->known = true;
        out->slots += d->slots;
        if (!widest || d->slots > widest->slots)
            widest = d;
    }
    if (widest) {
        snprintf(out->job, sizeof out->job, "%s", widest->job);
        if (self->demands->next) /* several jobs: the sum is what counts */
            snprintf(out->operator_name, sizeof out->operator_name, "the jobs");
        else
            snprintf(out->operator_name, sizeof out->operator_name, "%s", widest->operator_name);
    }
}

bool eddy_pool_should_wait(const eddy_pool_t *self, uint32_t new_parallelism)
{
    return self->starting > 0 &&
           (uint64_t)new_parallelism > (uint64_t)self->live_workers * self->config.slots_per_worker;
}

uint32_t eddy_pool_starting(const eddy_pool_t *self)
{
    return self->starting;
}

/* The alive workers in a status document: names point into doc. */
static size_t alive_workers(const json_t *doc, eddy_pool_worker_t **out)
{
    const json_t *arr = json_object_get(doc, "workers");
    size_t n = json_array_size(arr), k = 0;
    *out = calloc(n ? n : 1, sizeof **out);
    if (!*out)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *w = json_array_get(arr, i);
        const char *name = json_string_value(json_object_get(w, "name"));
        if (!name || !json_is_true(json_object_get(w, "alive")))
            continue;
        json_int_t tasks = json_integer_value(json_object_get(w, "tasks"));
        (*out)[k].name = name;
        (*out)[k].tasks = tasks > 0 ? (uint32_t)tasks : 0;
        k++;
    }
    return k;
}

/* Appends to a decision's reason, cut to fit. */
static void reason_append(eddy_pool_decision_t *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reason_append(eddy_pool_decision_t *d, const char *fmt, ...)
{
    size_t used = strlen(d->reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->reason + used, sizeof d->reason - used, fmt, ap);
    va_end(ap);
}

static void carry_out(eddy_pool_t *self, eddy_pool_decision_t *d)
{
    eddy_err_t err = {{0}};
    if (d->action == EDDY_POOL_GROW) {
        uint32_t started = 0;
        for (uint32_t i = 0; i < d->grow; i++) {
            char name[EDDY_POOL_NAME_MAX];
            eddy_pool_policy_next_name(self->policy, self->prefix, name, sizeof name);
            if (self->backend.ops->grow(self->backend.self, name, &err) < 0) {
                eddy_warn("pool: cannot start worker %s: %s", name, err.msg);
                break;
            }
            eddy_info("pool: started worker %s (%s)", name, self->backend.ops->name);
            started++;
        }
        self->starting += started;
        if (started < d->grow)
            reason_append(d, "; started %u: %s", started, err.msg);
    } else if (d->action == EDDY_POOL_SHRINK) {
        if (self->backend.ops->shrink(self->backend.self, d->release, &err) < 0) {
            eddy_warn("pool: cannot stop worker %s: %s", d->release, err.msg);
            reason_append(d, "; failed: %s", err.msg);
        }
    }
}

json_t *eddy_pool_step(eddy_pool_t *self, const char *coordinator, const eddy_keys_t *keys)
{
    eddy_err_t err = {{0}};
    int64_t status = 0;
    char *body = NULL;
    if (eddy_client_call(coordinator, keys, "status", 0, NULL, STATUS_TIMEOUT_MS, &status, &body,
                         &err) < 0 ||
        status != 0) {
        free(body);
        return NULL; /* the loop says when the coordinator is unreachable */
    }
    json_t *doc = json_loads(body, 0, NULL);
    free(body);
    if (!doc)
        return NULL;
    char (*owned)[EDDY_POOL_NAME_MAX] = calloc(MAX_OWNED, sizeof *owned);
    eddy_pool_worker_t *workers = NULL;
    size_t n_workers = alive_workers(doc, &workers);
    json_t *entry = NULL;
    if (!owned || !workers)
        goto out;
    int n_owned = self->backend.ops->live(self->backend.self, owned, MAX_OWNED, &err);
    if (n_owned < 0) {
        /* a pool that cannot see its workers must not start more */
        if (!self->said_unavailable)
            eddy_warn("pool: the %s backend is unavailable: %s; retrying every round",
                      self->backend.ops->name, err.msg);
        self->said_unavailable = true;
        goto out;
    }
    if (self->said_unavailable)
        eddy_info("pool: the %s backend answers again", self->backend.ops->name);
    self->said_unavailable = false;
    eddy_pool_demand_t demand;
    total_demand(self, &demand);
    eddy_pool_decision_t d;
    uint64_t now = eddy_mono_ms();
    eddy_pool_policy_decide(self->policy, (int64_t)now, &demand, workers, n_workers,
                            (const char(*)[EDDY_POOL_NAME_MAX])owned, (size_t)n_owned, &d);
    self->live_workers = (uint32_t)n_workers;
    self->starting = 0;
    for (int i = 0; i < n_owned; i++) {
        bool alive = false;
        for (size_t k = 0; k < n_workers && !alive; k++)
            alive = !strcmp(workers[k].name, owned[i]);
        self->starting += !alive;
    }
    if (d.action == EDDY_POOL_NONE) {
        eddy_debug("%s", d.reason);
        goto out;
    }
    carry_out(self, &d);
    eddy_info("%s", d.reason);
    entry = eddy_pool_decision_to_json(&d, eddy_wall_ms());
out:
    free(owned);
    free(workers);
    json_decref(doc);
    return entry;
}
