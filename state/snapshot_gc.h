/* snapshot_gc.h - deletion by reference of a job's checkpoint objects
 * (incremental checkpoints, state/snapshot_manifest.h).
 *
 * An object of an old checkpoint may still hold a key group that a retained
 * checkpoint refers to. Collection works only from what is stored, so it
 * is the same after a coordinator failover or restart: it lists the job's
 * keys, reads the manifests of the kept (retained) checkpoints, and of every
 * other stored checkpoint with id <= upto removes each object no kept
 * manifest names - the whole checkpoint when none is named (blobs,
 * manifests and group objects alike: nothing reads a dropped checkpoint's
 * own manifests, since holders are never chained). So abandoned and failed
 * checkpoints (never named) go whole, and a partly referenced one loses
 * what nobody needs and is looked at again by the next collection.
 * Checkpoints above upto (in flight) are never touched. A kept manifest
 * that cannot be read stops the collection before anything is deleted.
 * BLOCKS (listing, reads, deletes): run it on a thread of its own (the
 * coordinator's reaper). */
#ifndef EDDY_STATE_SNAPSHOT_GC_H
#define EDDY_STATE_SNAPSHOT_GC_H

#include <stdint.h>

#include "common/err.h"
#include "state/snapshot_store.h"

typedef struct eddy_snapshot_gc_stats {
    uint64_t checkpoints_removed; /* whole */
    uint64_t objects_removed;     /* one by one, in checkpoints kept in part */
    uint64_t objects_kept;        /* referenced by a kept checkpoint */
} eddy_snapshot_gc_stats_t;

/* stats may be NULL. 0, or -1 with err (some deletes may have happened:
 * only ever of unreferenced objects). */
int eddy_snapshot_gc_collect(eddy_snapshot_store_t *store, const char *job, uint64_t upto,
                             const uint64_t *keep, uint32_t n_keep, eddy_snapshot_gc_stats_t *stats,
                             eddy_err_t *err);

#endif
