/* task_chain.c - incremental checkpoints of a keyed task (see
 * task_internal.h; the bookkeeping is state/snapshot_chain.h, the manifest
 * format state/snapshot_manifest.h).
 *
 * With --checkpoint-full-every N > 1 (env checkpoint_full_every) a keyed
 * task whose chained operators keep no state of their own per key group
 * (no write_group: those have no change tracking yet, so they are always
 * written whole) writes at each checkpoint only the groups changed since
 * its last completed checkpoint, and a manifest naming the holder of every
 * group it holds. Groups change through the keyed state (every write access
 * marks them: keyed_state.h take_changed); at the barrier the marks are
 * taken for every group, so a group dropped, loaded or moved meanwhile has
 * no base either. A restore, rescale or migration builds a new task or
 * loads groups (marked): their first checkpoint writes them. Migration
 * snapshots stay full and have no manifest. */
#include <stdlib.h>

#include "state/snapshot_manifest.h"
#include "runtime/task_internal.h"

int task_chain_open(eddy_task_t *t, eddy_err_t *err)
{
    if (!t->state || t->env->checkpoint_full_every <= 1)
        return 0;
    for (uint32_t i = 0; i < t->def->n_ops; i++)
        if (t->def->ops[i].ops->write_group)
            return 0;
    uint32_t k = t->graph->max_parallelism;
    t->chain = eddy_snapshot_chain_new(k, t->env->checkpoint_full_every);
    t->chain_holder = calloc(k, sizeof *t->chain_holder);
    if (!t->chain || !t->chain_holder) {
        task_chain_close(t);
        return eddy_err_set(err, "out of memory");
    }
    return 0;
}

void task_chain_close(eddy_task_t *t)
{
    eddy_snapshot_chain_destroy(&t->chain);
    free(t->chain_holder);
    t->chain_holder = NULL;
}

void task_chain_plan(eddy_task_t *t, uint64_t checkpoint, bool force_full, uint32_t *n_referenced)
{
    *n_referenced = 0;
    if (!t->chain)
        return;
    uint32_t k = t->graph->max_parallelism;
    bool full = eddy_snapshot_chain_begin(t->chain, checkpoint) || force_full;
    for (uint32_t kg = 0; kg < k; kg++) {
        if (eddy_keyed_state_take_changed(t->state, kg))
            eddy_snapshot_chain_forget(t->chain, kg);
        t->chain_holder[kg] = 0;
        if (!t->held[kg]) {
            eddy_snapshot_chain_forget(t->chain, kg);
            continue;
        }
        t->chain_holder[kg] = eddy_snapshot_chain_plan(t->chain, kg, t->watermark, full, checkpoint);
        *n_referenced += t->chain_holder[kg] != 0;
    }
}

bool task_chain_writes(const eddy_task_t *t, uint32_t kg)
{
    return !t->chain || !t->chain_holder[kg];
}

int task_chain_manifest(eddy_task_t *t, eddy_snapshot_unit_t *u, eddy_err_t *err)
{
    if (!t->chain)
        return 0;
    uint32_t k = t->graph->max_parallelism, n = 0;
    for (uint32_t kg = 0; kg < k; kg++)
        n += t->held[kg];
    eddy_manifest_entry_t *e = calloc(n ? n : 1, sizeof *e);
    if (!e)
        return eddy_err_set(err, "out of memory");
    n = 0;
    for (uint32_t kg = 0; kg < k; kg++)
        if (t->held[kg])
            e[n++] = (eddy_manifest_entry_t){kg, t->chain_holder[kg] ? t->chain_holder[kg]
                                                                     : u->checkpoint};
    u->manifest = eddy_manifest_encode(u->checkpoint, e, n, &u->manifest_len);
    u->manifest_instance = t->instance;
    free(e);
    return u->manifest ? 0 : eddy_err_set(err, "out of memory (checkpoint manifest)");
}
