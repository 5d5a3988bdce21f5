/* placement.c - where each instance of each stage runs (see placement.h):
 * the pure placement function, and coord_place, which feeds it the job's
 * current placement and the usable workers (quarantined ones, deploy.c,
 * count as not usable). */
#include "coordinator/placement.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "coordinator/internal.h"

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void eddy_placement_clear(uint32_t n_stages, eddy_stage_placement_t *placement)
{
    for (uint32_t s = 0; s < n_stages; s++) {
        free(placement[s].worker_of);
        placement[s].worker_of = NULL;
        placement[s].parallelism = 0;
    }
}

int eddy_placement_compute(uint32_t n_stages, const uint32_t *parallelism,
                           const eddy_stage_placement_t *current, const uint32_t *worker_ids,
                           uint32_t n_workers, eddy_stage_placement_t *next, eddy_err_t *err)
{
    memset(next, 0, n_stages * sizeof *next);
    if (n_workers == 0)
        return eddy_err_set(err, "no alive workers");
    uint32_t *ids = malloc(n_workers * sizeof *ids);
    uint32_t *load = calloc(n_workers, sizeof *load);
    if (!ids || !load) {
        free(ids);
        free(load);
        return eddy_err_set(err, "out of memory");
    }
    memcpy(ids, worker_ids, n_workers * sizeof *ids);
    qsort(ids, n_workers, sizeof *ids, cmp_u32);
    bool fresh = true;
    for (uint32_t s = 0; current && s < n_stages; s++)
        if (current[s].worker_of)
            fresh = false;
    int rc = 0;
    uint32_t cursor = 0; /* a fresh job: the worker the next instance goes to */
    /* pass 1: a fresh spread, or the instances that stay */
    for (uint32_t s = 0; s < n_stages && rc == 0; s++) {
        next[s].parallelism = parallelism[s];
        next[s].worker_of = calloc(parallelism[s] ? parallelism[s] : 1, sizeof(uint32_t));
        if (!next[s].worker_of) {
            rc = eddy_err_set(err, "out of memory");
            break;
        }
        for (uint32_t i = 0; i < parallelism[s]; i++) {
            if (fresh) {
                next[s].worker_of[i] = ids[cursor];
                load[cursor]++;
                cursor = (cursor + 1) % n_workers;
                continue;
            }
            if (i >= current[s].parallelism || !current[s].worker_of)
                continue;
            uint32_t old = current[s].worker_of[i];
            for (uint32_t w = 0; w < n_workers; w++)
                if (ids[w] == old) {
                    next[s].worker_of[i] = old;
                    load[w]++;
                }
        }
    }
    /* pass 2: new or orphaned instances go to the least loaded worker
     * (worker ids start at 1, so 0 means "not placed yet") */
    for (uint32_t s = 0; s < n_stages && rc == 0 && !fresh; s++) {
        for (uint32_t i = 0; i < parallelism[s]; i++) {
            if (next[s].worker_of[i])
                continue;
            uint32_t best = 0;
            for (uint32_t w = 1; w < n_workers; w++)
                if (load[w] < load[best])
                    best = w;
            next[s].worker_of[i] = ids[best];
            load[best]++;
        }
    }
    if (rc < 0)
        eddy_placement_clear(n_stages, next);
    free(ids);
    free(load);
    return rc;
}

int coord_place(coord_t *c, coord_job_t *j, const uint32_t *parallelism, eddy_err_t *err)
{
    uint64_t now = eddy_mono_ms();
    uint32_t n = coord_usable_workers(c);
    uint32_t *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids)
        return eddy_err_set(err, "out of memory");
    uint32_t k = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (coord_worker_usable(w, now) && k < n)
            ids[k++] = w->id;
    eddy_stage_placement_t next[EDDY_MAX_STAGES];
    int rc = eddy_placement_compute(j->graph.n_stages, parallelism, j->placement, ids, k, next, err);
    free(ids);
    if (rc < 0)
        return -1;
    eddy_placement_clear(j->graph.n_stages, j->placement);
    memcpy(j->placement, next, j->graph.n_stages * sizeof *next);
    return 0;
}

bool coord_job_on_worker(const coord_job_t *j, uint32_t worker_id)
{
    for (uint32_t s = 0; s < j->graph.n_stages && s < EDDY_MAX_STAGES; s++)
        for (uint32_t i = 0; j->placement[s].worker_of && i < j->placement[s].parallelism; i++)
            if (j->placement[s].worker_of[i] == worker_id)
                return true;
    return false;
}
