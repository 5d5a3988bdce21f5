/* local_copies.h - a worker's local copies of the key groups its tasks
 * wrote to checkpoint storage, for local recovery (Flink's local recovery:
 * a restore reads what this worker wrote itself from memory and fetches
 * from checkpoint storage only what it has no valid copy of).
 *
 * A copy is the exact payload of one snapshot object, chk-H/OP/kg-KG.snap
 * (H, the holder), kept in memory with its XXH64, and the set of checkpoints
 * whose snapshot of this worker's task named those bytes for the group: H
 * itself, and later incremental checkpoints that referred to H instead of
 * writing the group again (state/snapshot_manifest.h). A copy serves a
 * restore from checkpoint R only when R is in that set and R completed
 * here (COMPLETE reached this worker; checkpoint ids of a job that never
 * completed may be taken again after a restore, so pending ones are
 * forgotten at every new epoch) and its checksum still matches.
 *
 * Bounded: once checkpoint C completed, a copy that no checkpoint >= C
 * names is dropped, so what is kept is the newest completed checkpoint's
 * groups plus those of checkpoints in flight; a job's copies go when it
 * ends. Not thread-safe: the worker's thread only (the writer thread's
 * units are handed over after poll). No I/O. */
#ifndef EDDY_STATE_LOCAL_COPIES_H
#define EDDY_STATE_LOCAL_COPIES_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct eddy_local_copies eddy_local_copies_t;

eddy_local_copies_t *eddy_local_copies_new(void);
void eddy_local_copies_destroy(eddy_local_copies_t **self_p);

/* Keeps data (malloc'd, taken on success: the caller must not free it) as
 * the copy of (job, op, kg) written at checkpoint; hash is XXH64(data, len,
 * 0). 0, or -1 with err (bad names, out of memory: the caller keeps data). */
int eddy_local_copies_keep(eddy_local_copies_t *self, const char *job, const char *op,
                           uint64_t checkpoint, uint32_t kg, char *data, size_t len,
                           uint64_t hash, eddy_err_t *err);
/* Checkpoint's snapshot referred (job, op, kg) to holder: the copy written
 * at holder, if kept, serves checkpoint too. */
void eddy_local_copies_refer(eddy_local_copies_t *self, const char *job, const char *op,
                             uint64_t checkpoint, uint32_t kg, uint64_t holder);
/* Checkpoint completed: copies it can serve become usable, those that only
 * older checkpoints name are dropped. */
void eddy_local_copies_complete(eddy_local_copies_t *self, const char *job, uint64_t checkpoint);
/* A new epoch of job: checkpoints that did not complete are forgotten. */
void eddy_local_copies_new_epoch(eddy_local_copies_t *self, const char *job);
/* The job ended (finished, cancelled, failed): all its copies go. */
void eddy_local_copies_drop_job(eddy_local_copies_t *self, const char *job);

/* The copy of (job, op, kg) for a restore from checkpoint: 1 with a
 * malloc'd duplicate in *data (the copy stays, for a later restore), 0 when
 * there is none usable, -1 when there was one but its checksum no longer
 * matches (it is dropped; err says so) or out of memory. */
int eddy_local_copies_get(eddy_local_copies_t *self, const char *job, const char *op,
                          uint64_t checkpoint, uint32_t kg, char **data, size_t *len,
                          eddy_err_t *err);

/* Copies and bytes kept (for logs and tests). */
void eddy_local_copies_usage(const eddy_local_copies_t *self, uint64_t *copies, uint64_t *bytes);
/* Test hook: flips one byte of every copy of job (a corrupt local copy). */
void eddy_local_copies_corrupt(eddy_local_copies_t *self, const char *job);

#endif
