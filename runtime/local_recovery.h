/* local_recovery.h - the worker's side of local recovery: what a durable
 * checkpoint unit leaves in the worker's local copies (state/local_copies.h),
 * and what a restore takes from them instead of checkpoint storage.
 *
 * Keeping: once the snapshot writer made a unit of the job's current epoch
 * durable in the job's checkpoint storage, its groups' bytes move from the
 * unit into the copies (no copy, no hashing on the loop: the writer thread
 * hashed them) and its manifest's references extend the copies they name.
 * Taking: for a restore from checkpoint R, the groups this worker will load
 * that it holds a verified copy of for R come back as a read unit's data
 * (as if read ahead from storage), so the existing preload path hands them
 * to the restore; the rest stay to be read from storage. A copy that fails
 * its checksum is dropped and counted, and the group read from storage.
 * Worker's thread only. */
#ifndef EDDY_RUNTIME_LOCAL_RECOVERY_H
#define EDDY_RUNTIME_LOCAL_RECOVERY_H

#include <stdint.h>

#include "state/local_copies.h"
#include "state/snapshot_writer.h"

/* What one restore took from local copies. */
typedef struct eddy_local_restore_stats {
    uint64_t groups, bytes;
    uint64_t corrupt;   /* copies that failed their checksum (read from storage instead) */
    char why[EDDY_ERROR_MAX]; /* the first such failure */
} eddy_local_restore_stats_t;

/* Moves a durable unit's groups into lc (the unit must be a checkpoint's,
 * error-free, of the job's current epoch: the caller checks). */
void eddy_local_recovery_keep(eddy_local_copies_t *lc, eddy_snapshot_unit_t *u);

/* The groups among kgs[0..*n) (of op, for a restore of job from
 * checkpoint) with a verified local copy, as a read unit whose data the
 * caller preloads (NULL when none, or out of memory); *n and kgs keep only
 * the groups still to read from storage. */
eddy_snapshot_unit_t *eddy_local_recovery_take(eddy_local_copies_t *lc, const char *job,
                                               uint64_t checkpoint, const char *op,
                                               uint32_t *kgs, uint32_t *n,
                                               eddy_local_restore_stats_t *stats);

#endif
