/* pool_policy.c - when the worker pool grows and shrinks (see pool.h for
 * the rules).
 *
 * Why the defaults are what they are:
 *   min 1, max 4        a pool that is asked for nothing keeps one worker;
 *                       four is a small cluster's worth, so a runaway demand
 *                       cannot fill a machine before someone raises it.
 *   1 slot per worker   eddy places every operator's instance i on a worker
 *                       of its own where it can, so one worker per instance
 *                       of the widest operator is what a scale-up needs.
 *   cooldown 30 s       a released worker's slot is not wanted back at once:
 *                       the controller's default warm-up (30 s) must pass
 *                       before its demand is measured again.
 *   idle grace 60 s     the controller's default cooldown: a worker emptied
 *                       by a scale-down may be wanted again by the next
 *                       scale-up, which cannot come sooner.
 *   start timeout 60 s  a container image pull or a slow machine; a worker
 *                       that has not registered by then will not.
 *   start wait 15 s     the workers started next to the controller (compose's
 *                       worker service) register once a coordinator leads:
 *                       the election's lease (3 s) and their retries fit. */
#include "controller/pool.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/decision_json.h"

typedef struct owned_state {
    char name[EDDY_POOL_NAME_MAX];
    int64_t started_ms;   /* when the policy first saw the backend run it */
    bool registered;      /* seen alive at the coordinator */
    bool idle;
    int64_t idle_since_ms;
    bool seen;            /* scratch: still owned in this call */
} owned_state_t;

struct eddy_pool_policy {
    eddy_pool_config_t config;
    owned_state_t *owned;
    size_t n_owned, cap_owned;
    bool has_released;
    int64_t last_release_ms;
    bool has_changed;
    int64_t last_change_ms;
    bool surplus;
    int64_t surplus_since_ms;
    bool started;         /* the first decision was made, at started_ms */
    int64_t started_ms;
    bool start_over;      /* the start wait ended (for good) */
    uint64_t next_id;
};

eddy_pool_config_t eddy_pool_config_default(void)
{
    eddy_pool_config_t c = {
        .min_workers = 1,
        .max_workers = 4,
        .slots_per_worker = 1,
        .cooldown_ms = 30000,
        .idle_grace_ms = 60000,
        .start_timeout_ms = 60000,
        .start_wait_ms = 15000,
        .expect_workers = 0,
    };
    return c;
}

int eddy_pool_config_check(const eddy_pool_config_t *c, eddy_err_t *err)
{
    if (!c)
        return eddy_err_set(err, "pool: no config");
    if (c->max_workers < 1)
        return eddy_err_set(err, "--max-workers must be at least 1");
    if (c->min_workers > c->max_workers)
        return eddy_err_set(err, "--min-workers %u is above --max-workers %u", c->min_workers,
                            c->max_workers);
    if (c->slots_per_worker < 1)
        return eddy_err_set(err, "--worker-slots must be at least 1");
    if (c->cooldown_ms < 0 || c->idle_grace_ms < 0)
        return eddy_err_set(err, "pool: cooldown and idle grace must be >= 0");
    if (c->start_timeout_ms <= 0)
        return eddy_err_set(err, "pool: the start timeout must be > 0");
    if (c->start_wait_ms < 0)
        return eddy_err_set(err, "pool: the start wait must be >= 0");
    return 0;
}

eddy_pool_policy_t *eddy_pool_policy_new(const eddy_pool_config_t *config, eddy_err_t *err)
{
    if (eddy_pool_config_check(config, err) < 0)
        return NULL;
    eddy_pool_policy_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "pool: out of memory");
        return NULL;
    }
    self->config = *config;
    self->next_id = 1;
    return self;
}

void eddy_pool_policy_destroy(eddy_pool_policy_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->owned);
    free(*self_p);
    *self_p = NULL;
}

void eddy_pool_policy_next_name(eddy_pool_policy_t *self, const char *prefix, char *buf,
                                size_t size)
{
    snprintf(buf, size, "%s-%llu", prefix, (unsigned long long)self->next_id++);
}

static const eddy_pool_worker_t *find_worker(const eddy_pool_worker_t *workers, size_t n,
                                             const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (workers[i].name && !strcmp(workers[i].name, name))
            return &workers[i];
    return NULL;
}

static owned_state_t *find_owned(eddy_pool_policy_t *self, const char *name)
{
    for (size_t i = 0; i < self->n_owned; i++)
        if (!strcmp(self->owned[i].name, name))
            return &self->owned[i];
    return NULL;
}

/* Brings the per-worker state up to date with what the backend runs: new
 * ones start their clocks, ended ones are forgotten. Returns false when out
 * of memory (the state then misses a worker until the next call). */
static bool track_owned(eddy_pool_policy_t *self, int64_t now_ms,
                        const char (*owned)[EDDY_POOL_NAME_MAX], size_t n_owned,
                        const eddy_pool_worker_t *workers, size_t n_workers)
{
    bool ok = true;
    for (size_t i = 0; i < self->n_owned; i++)
        self->owned[i].seen = false;
    for (size_t i = 0; i < n_owned; i++) {
        owned_state_t *o = find_owned(self, owned[i]);
        if (!o) {
            if (self->n_owned == self->cap_owned) {
                size_t cap = self->cap_owned ? self->cap_owned * 2 : 8;
                owned_state_t *grown = realloc(self->owned, cap * sizeof *grown);
                if (!grown) {
                    ok = false;
                    continue;
                }
                self->owned = grown;
                self->cap_owned = cap;
            }
            o = &self->owned[self->n_owned++];
            memset(o, 0, sizeof *o);
            snprintf(o->name, sizeof o->name, "%s", owned[i]);
            o->started_ms = now_ms;
        }
        o->seen = true;
        const eddy_pool_worker_t *w = find_worker(workers, n_workers, o->name);
        if (!w)
            continue;
        o->registered = true;
        if (w->tasks > 0) {
            o->idle = false;
        } else if (!o->idle) {
            o->idle = true;
            o->idle_since_ms = now_ms;
        }
    }
    size_t kept = 0;
    for (size_t i = 0; i < self->n_owned; i++)
        if (self->owned[i].seen)
            self->owned[kept++] = self->owned[i];
    self->n_owned = kept;
    return ok;
}

static const char *plural(uint32_t n)
{
    return n == 1 ? "" : "s";
}

static void none(eddy_pool_decision_t *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void none(eddy_pool_decision_t *d, const char *fmt, ...)
{
    d->action = EDDY_POOL_NONE;
    int used = snprintf(d->reason, sizeof d->reason, "pool: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->reason + used, sizeof d->reason - (size_t)used, fmt, ap);
    va_end(ap);
}

/* "count needs 3 slots, 2 live workers x 1 slot" */
static void describe_need(const eddy_pool_policy_t *self, const eddy_pool_demand_t *demand,
                          uint32_t live, char *buf, size_t size)
{
    uint32_t spw = self->config.slots_per_worker;
    if (!demand->known) {
        snprintf(buf, size, "no demand measured yet, %u live worker%s", live, plural(live));
        return;
    }
    const char *op = demand->operator_name[0] ? demand->operator_name : "the jobs";
    snprintf(buf, size, "%s needs %u slot%s, %u live worker%s x %u slot%s", op, demand->slots,
             plural(demand->slots), live, plural(live), spw, plural(spw));
}

void eddy_pool_policy_decide(eddy_pool_policy_t *self, int64_t now_ms,
                             const eddy_pool_demand_t *demand,
                             const eddy_pool_worker_t *workers, size_t n_workers,
                             const char (*owned)[EDDY_POOL_NAME_MAX], size_t n_owned,
                             eddy_pool_decision_t *d)
{
    memset(d, 0, sizeof *d);
    d->time_ms = now_ms;
    const eddy_pool_config_t *c = &self->config;
    eddy_pool_demand_t no_demand = {0};
    if (!demand)
        demand = &no_demand;
    snprintf(d->job, sizeof d->job, "%s", demand->known ? demand->job : "");
    if (!track_owned(self, now_ms, owned, n_owned, workers, n_workers)) {
        none(d, "%s", "out of memory tracking the pool's workers");
        return;
    }
    uint32_t live = (uint32_t)n_workers;
    d->live = live;
    uint32_t starting = 0;
    for (size_t i = 0; i < self->n_owned; i++) {
        owned_state_t *o = &self->owned[i];
        if (find_worker(workers, n_workers, o->name))
            continue;
        if (o->registered) {
            /* it was alive and is not listed: the coordinator declared it
             * dead while its process or container still runs; it counts
             * as nothing, and goes when idle for the grace like the rest */
            o->idle = true;
            continue;
        }
        if (now_ms - o->started_ms >= c->start_timeout_ms) {
            d->action = EDDY_POOL_SHRINK;
            d->target = live;
            snprintf(d->release, sizeof d->release, "%s", o->name);
            snprintf(d->reason, sizeof d->reason,
                     "pool: -1 worker (%s did not register within %.0f s; stopping it)", o->name,
                     (double)c->start_timeout_ms / 1000.0);
            self->has_changed = true;
            self->last_change_ms = now_ms;
            return;
        }
        starting++;
    }

    /* the target: the demand's workers, within the bounds */
    uint32_t target = live;
    bool capped = false;
    if (demand->known)
        target = (uint32_t)((demand->slots + c->slots_per_worker - 1) / c->slots_per_worker);
    if (target > c->max_workers) {
        capped = demand->known;
        target = c->max_workers;
    }
    if (target < c->min_workers)
        target = c->min_workers;
    d->target = target;
    char need[160];
    describe_need(self, demand, live, need, sizeof need);

    /* the start wait: the cluster's own workers may still be registering */
    if (!self->started) {
        self->started = true;
        self->started_ms = now_ms;
    }
    if (!self->start_over &&
        (now_ms - self->started_ms >= c->start_wait_ms || (c->expect_workers && live >= c->expect_workers)))
        self->start_over = true;
    if (live + starting < target && !self->start_over) {
        if (c->expect_workers)
            none(d, "%s; waiting up to %.1f s more for the %u expected workers to register",
                 need, (double)(self->started_ms + c->start_wait_ms - now_ms) / 1000.0,
                 c->expect_workers);
        else
            none(d, "%s; waiting %.1f s more for the cluster's workers to register", need,
                 (double)(self->started_ms + c->start_wait_ms - now_ms) / 1000.0);
        return;
    }

    if (live + starting < target) {
        uint32_t n = target - live - starting;
        bool below_min = live + starting < c->min_workers;
        if (!below_min && self->has_released && now_ms - self->last_release_ms < c->cooldown_ms) {
            none(d, "wants +%u worker%s (%s); cooldown until %.1f s", n,
                     plural(n), need, (double)(self->last_release_ms + c->cooldown_ms) / 1000.0);
            return;
        }
        d->action = EDDY_POOL_GROW;
        d->grow = n;
        if (below_min && !(demand->known && target > c->min_workers))
            snprintf(d->reason, sizeof d->reason, "pool: +%u worker%s (%u live, %u starting, --min-workers %u)",
                     n, plural(n), live, starting, c->min_workers);
        else
            snprintf(d->reason, sizeof d->reason, "pool: +%u worker%s (%s%s%s)", n, plural(n), need,
                     starting ? ", some starting" : "", capped ? "; capped by --max-workers" : "");
        self->surplus = false;
        self->has_changed = true;
        self->last_change_ms = now_ms;
        return;
    }
    if (live <= target) {
        self->surplus = false;
        none(d, "%s%s: no change%s", need, starting ? " (some starting)" : "",
                 capped ? " (capped by --max-workers)" : "");
        return;
    }

    /* more workers than wanted: release an idle one of the pool's, slowly */
    if (!self->surplus) {
        self->surplus = true;
        self->surplus_since_ms = now_ms;
    }
    if (now_ms - self->surplus_since_ms < c->idle_grace_ms) {
        none(d, "%s: a surplus since %.1f s, waiting %.0f s before releasing",
                 need, (double)self->surplus_since_ms / 1000.0, (double)c->idle_grace_ms / 1000.0);
        return;
    }
    if (self->has_changed && now_ms - self->last_change_ms < c->cooldown_ms) {
        none(d, "%s: cooldown until %.1f s", need,
                 (double)(self->last_change_ms + c->cooldown_ms) / 1000.0);
        return;
    }
    /* the most recently started idle worker goes first: the older ones
     * are more likely to hold what a scale-up will want back */
    const owned_state_t *pick = NULL;
    for (size_t i = 0; i < self->n_owned; i++) {
        const owned_state_t *o = &self->owned[i];
        if (o->registered && o->idle && now_ms - o->idle_since_ms >= c->idle_grace_ms &&
            (!pick || o->started_ms >= pick->started_ms))
            pick = o;
    }
    if (!pick) {
        none(d, "%s: none of the pool's workers has been idle for %.0f s", need,
                 (double)c->idle_grace_ms / 1000.0);
        return;
    }
    d->action = EDDY_POOL_SHRINK;
    snprintf(d->release, sizeof d->release, "%s", pick->name);
    snprintf(d->reason, sizeof d->reason, "pool: -1 worker (%s idle for %.0f s; %s)", pick->name,
             (double)(now_ms - pick->idle_since_ms) / 1000.0, need);
    self->has_released = true;
    self->last_release_ms = now_ms;
    self->has_changed = true;
    self->last_change_ms = now_ms;
}

json_t *eddy_pool_decision_to_json(const eddy_pool_decision_t *pd, int64_t wall_ms)
{
    eddy_scaling_decision_t d;
    memset(&d, 0, sizeof d);
    d.time_ms = wall_ms;
    snprintf(d.job, sizeof d.job, "%s", pd->job);
    snprintf(d.operator_name, sizeof d.operator_name, "pool");
    d.old_parallelism = pd->live;
    d.new_parallelism = pd->action == EDDY_POOL_GROW     ? pd->live + pd->grow
                        : pd->action == EDDY_POOL_SHRINK ? (pd->live ? pd->live - 1 : 0)
                                                         : pd->live;
    d.action = pd->action == EDDY_POOL_GROW     ? EDDY_SCALING_SCALE_UP
               : pd->action == EDDY_POOL_SHRINK ? EDDY_SCALING_SCALE_DOWN
                                                : EDDY_SCALING_NO_CHANGE;
    d.applied = pd->action != EDDY_POOL_NONE;
    snprintf(d.reason, sizeof d.reason, "%s", pd->reason);
    d.rates = (eddy_scaling_rates_t){NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    json_t *doc = eddy_scaling_decision_to_json(&d, NULL);
    if (!doc)
        return NULL;
    /* what a reader needs to tell it from an operator's decision */
    json_object_set_new(doc, "kind", json_string("pool"));
    json_object_set_new(doc, "target_workers", json_integer(pd->target));
    if (pd->release[0])
        json_object_set_new(doc, "worker", json_string(pd->release));
    return doc;
}

void eddy_pool_backend_destroy(eddy_pool_backend_t *backend)
{
    if (!backend || !backend->ops)
        return;
    backend->ops->destroy(backend->self);
    backend->ops = NULL;
    backend->self = NULL;
}
