/* rebalance.h - which instances to move so that the running jobs are
 * spread evenly over the workers (a worker that joined gets its share):
 * a pure function of the workers and the jobs' placement.
 *
 * A worker's load is the number of instances placed on it (every stage of
 * every job given); its weight is its cores, an unknown (0) count as the
 * fewest cores any worker reported (1 when none did), so equal machines
 * weigh the same. A move of one instance from worker a to worker b is made
 * only when it lowers sum(load^2 / weight): with equal weights exactly when
 * load(a) - load(b) > 1. Moves go from the most loaded worker that has a
 * movable instance to the least loaded worker, one at a time, until no move
 * helps, so the spread becomes as even as the movable instances allow with
 * as few moves as that greedy walk needs. Only instances of stages marked
 * movable move (the caller's choice: keyed stages of running jobs). An
 * instance on a worker not in the list is left alone and counts nowhere.
 * No I/O, no clock, no state. */
#ifndef EDDY_COORDINATOR_REBALANCE_H
#define EDDY_COORDINATOR_REBALANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct eddy_rebalance_worker {
    uint32_t id;
    uint32_t cores; /* 0: unknown */
} eddy_rebalance_worker_t;

/* One stage of one job as it is placed now. */
typedef struct eddy_rebalance_stage {
    uint32_t job;               /* the caller's job number, copied into moves */
    uint32_t stage;
    bool movable;
    uint32_t parallelism;
    const uint32_t *worker_of;  /* [parallelism] worker id of each instance */
} eddy_rebalance_stage_t;

typedef struct eddy_rebalance_move {
    uint32_t job, stage, instance;
    uint32_t from, to;          /* worker ids */
} eddy_rebalance_move_t;

typedef struct eddy_rebalance_plan {
    eddy_rebalance_move_t *moves; /* in the order chosen; consecutive moves of
                                   * one job and stage are kept together */
    uint32_t n_moves;
    uint32_t *load_before;      /* [n_workers], in the order of the workers given */
    uint32_t *load_after;
    uint32_t n_workers;
} eddy_rebalance_plan_t;

/* Fills *plan (free with eddy_rebalance_plan_clear); n_moves 0 when the
 * spread is already even (or nothing movable would help). -1 with err only
 * when out of memory. */
int eddy_rebalance_compute(const eddy_rebalance_worker_t *workers, uint32_t n_workers,
                           const eddy_rebalance_stage_t *stages, uint32_t n_stages,
                           eddy_rebalance_plan_t *plan, eddy_err_t *err);
void eddy_rebalance_plan_clear(eddy_rebalance_plan_t *plan);

/* "4/4/0": loads joined by '/', truncated to fit buf. Returns buf. */
char *eddy_rebalance_spread(const uint32_t *loads, uint32_t n, char *buf, size_t size);

#endif
