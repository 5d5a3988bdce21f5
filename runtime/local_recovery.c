/* local_recovery.c - local copies kept from durable checkpoint units and
 * taken by restores (see local_recovery.h). */
#include "runtime/local_recovery.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "state/snapshot_manifest.h"

void eddy_local_recovery_keep(eddy_local_copies_t *lc, eddy_snapshot_unit_t *u)
{
    for (uint32_t i = 0; u->hashes && i < u->n_groups; i++) {
        eddy_err_t err = {{0}};
        if (u->data[i] && eddy_local_copies_keep(lc, u->job, u->op, u->checkpoint, u->groups[i],
                                                 u->data[i], u->lens[i], u->hashes[i], &err) == 0)
            u->data[i] = NULL; /* the copies own it now */
    }
    /* Groups the checkpoint referred to earlier ones: their copies serve it too. */
    eddy_manifest_entry_t *e = NULL;
    uint32_t n = 0;
    eddy_err_t err = {{0}};
    if (u->manifest &&
        eddy_manifest_decode(u->manifest, u->manifest_len, u->checkpoint, &e, &n, &err) == 0)
        for (uint32_t i = 0; i < n; i++)
            if (e[i].holder != u->checkpoint)
                eddy_local_copies_refer(lc, u->job, u->op, u->checkpoint, e[i].kg, e[i].holder);
    free(e);
}

eddy_snapshot_unit_t *eddy_local_recovery_take(eddy_local_copies_t *lc, const char *job,
                                               uint64_t checkpoint, const char *op,
                                               uint32_t *kgs, uint32_t *n,
                                               eddy_local_restore_stats_t *stats)
{
    eddy_snapshot_unit_t *u = *n ? eddy_snapshot_unit_new(*n) : NULL;
    if (!u)
        return NULL;
    u->read = true;
    snprintf(u->job, sizeof u->job, "%s", job);
    snprintf(u->op, sizeof u->op, "%s", op);
    u->checkpoint = checkpoint;
    uint32_t left = 0;
    for (uint32_t i = 0; i < *n; i++) {
        eddy_err_t err = {{0}};
        uint32_t k = u->n_groups;
        int rc = eddy_local_copies_get(lc, job, op, checkpoint, kgs[i], &u->data[k], &u->lens[k],
                                       &err);
        if (rc == 1) {
            u->groups[k] = kgs[i];
            u->n_groups++;
            stats->groups++;
            stats->bytes += u->lens[k];
            continue;
        }
        if (rc < 0) {
            if (!stats->corrupt++)
                snprintf(stats->why, sizeof stats->why, "%s", err.msg);
        }
        kgs[left++] = kgs[i];
    }
    *n = left;
    if (!u->n_groups) {
        eddy_snapshot_unit_free(u);
        return NULL;
    }
    return u;
}
