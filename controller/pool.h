/* pool.h - an elastic worker pool: the resource-manager interface its
 * backends implement, and the pool policy that decides when to use it.
 *
 * The controller's scaling decisions say how many instances each operator
 * needs. Instances run in the workers' slots (--worker-slots per worker, 1
 * by default: a worker process is one slot); when the jobs want more slots
 * than the live workers offer, the pool asks its backend for workers, and it
 * releases a worker it started once the jobs need fewer slots and that
 * worker has run no instance for a grace period. Backends:
 *   local   forks `eddy worker` processes on this machine (pool_local.h)
 *   docker  starts worker containers through the Docker Engine API
 *           (pool_docker.h)
 *
 * The policy (eddy_pool_policy_*) is pure: no clock (now_ms is passed in),
 * no I/O, nothing printed, so the unit tests drive it through simulated
 * time. Its rules, in order:
 *   start      at its start (its first round), the pool adds no worker for
 *              start_wait_ms while the workers started with the cluster
 *              register (they retry their registration; a compose
 *              deployment's come within seconds of the coordinators'
 *              election): the wait ends early once expect_workers are alive
 *              (0: the whole window). Without it the pool counted the one
 *              worker registered so far and started two where --min-workers
 *              was 3 (issue 23).
 *   bounds     the target is ceil(slots wanted / slots per worker), held
 *              within [min_workers, max_workers]; with no demand known yet
 *              the target is the live count held within the bounds.
 *   grow       when live + starting workers < target: the difference, at
 *              once (a worker below min_workers, e.g. one that died, is
 *              replaced at once too); never again within cooldown_ms of a
 *              release.
 *   pending    a worker the backend started counts as starting until the
 *              coordinator lists it alive; one that has not registered
 *              within start_timeout_ms is released (it is stuck).
 *   shrink     when live > target, one worker the pool started that has run
 *              no instance for idle_grace_ms, and only after the demand
 *              has stayed below the live slots for idle_grace_ms and
 *              cooldown_ms have passed since the last change: one per
 *              decision, so a drop in load is followed slowly.
 * Every change is an eddy_pool_decision_t with a reason, e.g.
 *   "pool: +1 worker (count needs 3 slots, 2 live workers x 1 slot)". */
#ifndef EDDY_CONTROLLER_POOL_H
#define EDDY_CONTROLLER_POOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EDDY_POOL_NAME_MAX 64
#define EDDY_POOL_REASON_MAX 256

/* ---- backends ------------------------------------------------------------ */

/* What a backend can do. Calls come from the controller's loop thread;
 * each returns within a bounded time (timeouts), never waiting on a worker.
 * Workers are known by the names they register with (eddy worker --name). */
typedef struct eddy_pool_ops {
    const char *name; /* "local", "docker" */
    /* Starts one worker called name. 0, or -1 with err. */
    int (*grow)(void *backend, const char *name, eddy_err_t *err);
    /* Stops (and cleans up) the worker called name that it started. */
    int (*shrink)(void *backend, const char *name, eddy_err_t *err);
    /* Fills names[0..cap) with the workers it started that still run (it
     * forgets, and reaps, the ones that ended) and returns how many, or -1
     * with err when it cannot tell (e.g. the Docker socket is gone). */
    int (*live)(void *backend, char (*names)[EDDY_POOL_NAME_MAX], size_t cap, eddy_err_t *err);
    /* Stops every worker it started and frees the backend. */
    void (*destroy)(void *backend);
} eddy_pool_ops_t;

typedef struct eddy_pool_backend {
    const eddy_pool_ops_t *ops;
    void *self;
} eddy_pool_backend_t;

/* Stops its workers and frees it; NULL and an empty backend are fine. */
void eddy_pool_backend_destroy(eddy_pool_backend_t *backend);

/* ---- policy --------------------------------------------------------------- */

typedef struct eddy_pool_config {
    uint32_t min_workers;      /* >= 0 */
    uint32_t max_workers;      /* >= max(1, min_workers) */
    uint32_t slots_per_worker; /* >= 1 */
    int64_t cooldown_ms;       /* >= 0: after a release, before the next change */
    int64_t idle_grace_ms;     /* >= 0 */
    int64_t start_timeout_ms;  /* > 0 */
    int64_t start_wait_ms;     /* >= 0: at the pool's start, no growth for this long... */
    uint32_t expect_workers;   /* ...or until this many are alive (0: unknown) */
} eddy_pool_config_t;

/* min 1, max 4, 1 slot per worker, cooldown 30 s, idle grace 60 s, start
 * timeout 60 s, start wait 15 s, no expected workers (see pool_policy.c for
 * why). */
eddy_pool_config_t eddy_pool_config_default(void);
/* 0, or -1 with err naming the bad value (as a flag name: --max-workers). */
int eddy_pool_config_check(const eddy_pool_config_t *config, eddy_err_t *err);

/* A worker the coordinator lists as alive. */
typedef struct eddy_pool_worker {
    const char *name;
    uint32_t tasks; /* instances it runs */
} eddy_pool_worker_t;

/* What the jobs need: slots in total (0: not known yet) and, for the
 * reason, the operator that needs the most. */
typedef struct eddy_pool_demand {
    bool known;
    uint32_t slots;
    char job[EDDY_POOL_NAME_MAX];
    char operator_name[EDDY_POOL_NAME_MAX];
} eddy_pool_demand_t;

typedef enum eddy_pool_action {
    EDDY_POOL_NONE,
    EDDY_POOL_GROW,
    EDDY_POOL_SHRINK,
} eddy_pool_action_t;

typedef struct eddy_pool_decision {
    int64_t time_ms;
    eddy_pool_action_t action;
    uint32_t live;                        /* workers alive before the change */
    uint32_t target;                      /* workers wanted */
    uint32_t grow;                        /* GROW: workers to start */
    char release[EDDY_POOL_NAME_MAX];     /* SHRINK: the worker to stop */
    char job[EDDY_POOL_NAME_MAX];         /* whose demand it serves ("" when none) */
    char reason[EDDY_POOL_REASON_MAX];
} eddy_pool_decision_t;

typedef struct eddy_pool_policy eddy_pool_policy_t;

eddy_pool_policy_t *eddy_pool_policy_new(const eddy_pool_config_t *config, eddy_err_t *err);
void eddy_pool_policy_destroy(eddy_pool_policy_t **self_p);

/* One decision at now_ms from the demand, the workers alive
 * (workers[0..n_workers), every worker, the pool's or not) and the names of
 * the workers the backend runs (owned[0..n_owned): started by the pool;
 * those not alive are starting). Fills *decision (action NONE when nothing
 * is to change; its reason then says why, for debug logs). The caller
 * carries out GROW/SHRINK at once. */
void eddy_pool_policy_decide(eddy_pool_policy_t *self, int64_t now_ms,
                             const eddy_pool_demand_t *demand,
                             const eddy_pool_worker_t *workers, size_t n_workers,
                             const char (*owned)[EDDY_POOL_NAME_MAX], size_t n_owned,
                             eddy_pool_decision_t *decision);

/* A name for the next worker the pool starts: PREFIX-N, unique within
 * this policy's life. */
void eddy_pool_policy_next_name(eddy_pool_policy_t *self, const char *prefix, char *buf,
                                size_t size);

/* The decision as an entry of the scaling decision log (decision_json.h's
 * form, operator "pool", the worker counts as parallelisms, rates null),
 * so `eddy scaling` and /api/v1/scaling list it next to the scaling
 * decisions. A new reference, or NULL when out of memory. */
json_t *eddy_pool_decision_to_json(const eddy_pool_decision_t *decision, int64_t wall_ms);

#endif
