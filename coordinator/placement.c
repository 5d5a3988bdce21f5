/* placement.c - where each instance of each stage runs.
 *
 * A fresh job spreads instance i of every stage over the alive workers in
 * id order (instance i on worker i mod W), so the instances of consecutive
 * stages with the same index share a worker. A rescale or a recovery keeps
 * every instance that is still on an alive worker where it is (its in-memory
 * state stays put) and gives each new or orphaned instance to the least
 * loaded alive worker. Quarantined workers (deploy.c) count as not alive. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "coordinator/internal.h"

int coord_place(coord_t *c, coord_job_t *j, const uint32_t *parallelism, eddy_err_t *err)
{
    uint64_t now = eddy_mono_ms();
    uint32_t n_alive = coord_usable_workers(c);
    if (n_alive == 0)
        return eddy_err_set(err, "no alive workers");
    uint32_t *ids = calloc(n_alive, sizeof *ids);
    uint32_t *load = calloc(n_alive, sizeof *load);
    if (!ids || !load) {
        free(ids);
        free(load);
        return eddy_err_set(err, "out of memory");
    }
    uint32_t k = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (coord_worker_usable(w, now) && k < n_alive)
            ids[k++] = w->id;
    /* ids in ascending order (the list is newest first) */
    for (uint32_t a = 1; a < n_alive; a++)
        for (uint32_t b = a; b > 0 && ids[b - 1] > ids[b]; b--) {
            uint32_t t = ids[b];
            ids[b] = ids[b - 1];
            ids[b - 1] = t;
        }
    bool fresh = true;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        if (j->placement[s].worker_of)
            fresh = false;

    eddy_stage_placement_t next[EDDY_MAX_STAGES];
    memset(next, 0, sizeof next);
    int rc = 0;
    /* pass 1: instances that stay */
    for (uint32_t s = 0; s < j->graph.n_stages && rc == 0; s++) {
        next[s].parallelism = parallelism[s];
        next[s].worker_of = calloc(parallelism[s], sizeof(uint32_t));
        if (!next[s].worker_of) {
            rc = eddy_err_set(err, "out of memory");
            break;
        }
        for (uint32_t i = 0; i < parallelism[s]; i++) {
            if (fresh) {
                next[s].worker_of[i] = ids[i % n_alive];
                load[i % n_alive]++;
                continue;
            }
            if (i < j->placement[s].parallelism) {
                uint32_t old = j->placement[s].worker_of[i];
                for (uint32_t w = 0; w < n_alive; w++)
                    if (ids[w] == old) {
                        next[s].worker_of[i] = old;
                        load[w]++;
                    }
            }
        }
    }
    /* pass 2: new or orphaned instances go to the least loaded worker */
    for (uint32_t s = 0; s < j->graph.n_stages && rc == 0 && !fresh; s++) {
        for (uint32_t i = 0; i < parallelism[s]; i++) {
            if (next[s].worker_of[i])
                continue;
            uint32_t best = 0;
            for (uint32_t w = 1; w < n_alive; w++)
                if (load[w] < load[best])
                    best = w;
            next[s].worker_of[i] = ids[best];
            load[best]++;
        }
    }
    if (rc == 0) {
        for (uint32_t s = 0; s < j->graph.n_stages; s++) {
            free(j->placement[s].worker_of);
            j->placement[s] = next[s];
        }
    } else {
        for (uint32_t s = 0; s < j->graph.n_stages; s++)
            free(next[s].worker_of);
    }
    free(ids);
    free(load);
    return rc;
}
