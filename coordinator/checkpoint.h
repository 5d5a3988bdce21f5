/* checkpoint.h - a checkpoint whose acknowledgements are being collected
 * (Flink's PendingCheckpoint).
 *
 * It knows every task (stage, instance) that must acknowledge, accepts each
 * task's ACK exactly once (a duplicate or an ACK from a task that is not part
 * of the job is refused, so it can never complete the checkpoint early), sums
 * what the tasks wrote, keeps the source positions, and says when every task
 * acknowledged. Pure bookkeeping: no sockets, no stores, so it is
 * unit-tested on its own (tests/unit/test_pending_checkpoint.c). The
 * protocol that drives it lives in checkpoint.c. */
#ifndef EDDY_COORDINATOR_CHECKPOINT_H
#define EDDY_COORDINATOR_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/proto.h"

typedef enum coord_ack_verdict {
    COORD_ACK_ACCEPTED,
    COORD_ACK_DUPLICATE,    /* this task already acknowledged */
    COORD_ACK_UNKNOWN_TASK, /* no such stage or instance in the checkpoint */
    COORD_ACK_NO_MEMORY,    /* its source state could not be kept */
} coord_ack_verdict_t;

/* Where a source instance resumes from a checkpoint: its position and the
 * bytes its write_state gave (api/operator.h), NULL/0 when none. */
typedef struct coord_source_progress {
    int64_t position;
    char *state;        /* owned */
    uint32_t state_len;
} coord_source_progress_t;

/* n entries at position -1 without state; NULL when out of memory. */
coord_source_progress_t *coord_progress_new(uint32_t n);
/* A deep copy of n entries; NULL when out of memory. */
coord_source_progress_t *coord_progress_dup(const coord_source_progress_t *p, uint32_t n);
/* Frees n entries and their states, and NULLs *p. */
void coord_progress_free(coord_source_progress_t **p, uint32_t n);

/* What a checkpoint cost, from its tasks' ACKs: bytes and files (objects)
 * summed over the tasks; the synchronous part (a task's time at the
 * barrier), the asynchronous part (its snapshot writer's, up to the ACK) and
 * the barrier alignment, microseconds, of the slowest task in each. */
typedef struct coord_checkpoint_cost {
    uint64_t bytes, files;
    uint64_t referenced; /* key groups referred to in earlier checkpoints, not written */
    uint64_t sync_us, async_us, align_us;
} coord_checkpoint_cost_t;

typedef struct coord_pending_checkpoint {
    uint64_t id;
    uint32_t epoch;
    bool pause;        /* sources stop behind its barrier (a rescale) */
    bool committing;   /* every task acknowledged; its metadata is being written */
    bool savepoint;    /* a savepoint (coordinator/savepoint.c): not a recovery point */
    /* Why a task cannot take part: its TRIGGER was not sent (empty: it was);
     * the checkpoint is given up at the next tick. */
    char undelivered[EDDY_NAME_MAX + 192];
    uint64_t started_ms;
    coord_checkpoint_cost_t cost; /* of the tasks acknowledged so far */
    uint32_t n_stages;
    uint32_t parallelism[EDDY_MAX_STAGES];
    bool source[EDDY_MAX_STAGES];
    uint32_t n_tasks, n_acked;
    bool *acked;        /* [n_tasks], stage-major */
    /* Tasks that had finished when it was triggered (FLIP-147): they do
     * not ACK, and the checkpoint records them as finished. */
    uint32_t n_finished;
    bool *finished;     /* [n_tasks], stage-major */
    uint32_t n_positions;
    coord_source_progress_t *positions; /* [n_positions]: instances of the source stages, in stage order */
} coord_pending_checkpoint_t;

/* parallelism[s] instances of each of n_stages stages must acknowledge;
 * source[s] marks stages whose ACK carries a position. NULL on bad input
 * (no stage, too many) or out of memory. */
coord_pending_checkpoint_t *coord_pending_checkpoint_new(uint64_t id, uint32_t epoch,
                                                         uint32_t n_stages,
                                                         const uint32_t *parallelism,
                                                         const bool *source, uint64_t now_ms);
void coord_pending_checkpoint_destroy(coord_pending_checkpoint_t **self_p);

/* Records task (stage, instance)'s acknowledgement once, with a copy of
 * its source state (state_len bytes, NULL/0: none) when it is a source,
 * and adds its cost (NULL: none) to the checkpoint's. */
coord_ack_verdict_t coord_pending_checkpoint_ack(coord_pending_checkpoint_t *self, uint32_t stage,
                                                 uint32_t instance, int64_t position,
                                                 const char *state, uint32_t state_len,
                                                 const coord_checkpoint_cost_t *cost);
bool coord_pending_checkpoint_all_acked(const coord_pending_checkpoint_t *self);

/* Marks task (stage, instance) as finished before the checkpoint began: it
 * is not expected to ACK (an ACK from it is refused as from an unknown
 * task). UNKNOWN_TASK for no such task, DUPLICATE when it already acked or
 * was marked. */
coord_ack_verdict_t coord_pending_checkpoint_finish_task(coord_pending_checkpoint_t *self,
                                                         uint32_t stage, uint32_t instance);
/* Whether task (stage, instance) acknowledged (false for no such task). */
bool coord_pending_checkpoint_acked(const coord_pending_checkpoint_t *self, uint32_t stage,
                                    uint32_t instance);
/* The finished tasks, stage-major, malloc'd; NULL (and *n 0) when there
 * are none, NULL with *n set when out of memory. */
eddy_task_ref_t *coord_pending_checkpoint_finished(const coord_pending_checkpoint_t *self,
                                                   uint32_t *n);

/* The acceptance rule for an ACK whose task counted inputs as ended
 * (protocol 9): every named upstream task must exist (stage < n_stages,
 * instance < parallelism[stage]) and have reported TASK_DONE in this epoch
 * (done_flag set in seen[k], k its stage-major index; seen may be NULL:
 * none reported). Otherwise the task may have snapshotted without records
 * its real upstream sent before the barrier (a forged end of stream), and
 * the checkpoint is declined. On refusal *bad names the first offender. */
typedef enum coord_ended_verdict {
    COORD_ENDED_ACCEPT,
    COORD_ENDED_NOT_DONE,     /* the upstream task has not reported TASK_DONE */
    COORD_ENDED_UNKNOWN_TASK, /* no such upstream task */
} coord_ended_verdict_t;

coord_ended_verdict_t coord_ended_inputs_verdict(uint32_t n_stages, const uint32_t *parallelism,
                                                 const uint8_t *seen, uint32_t n_seen,
                                                 uint8_t done_flag, const eddy_task_ref_t *ended,
                                                 uint32_t n_ended, eddy_task_ref_t *bad);
/* Writes the tasks that have not acknowledged, as "count[0], sink[1]" (at
 * most 8, then "and N more"), into buf; stage_name(s) names stage s.
 * Returns how many are missing. A timed-out checkpoint's log line names
 * them all: which ones hang is what tells a lost barrier from a slow task. */
uint32_t coord_pending_checkpoint_missing_text(const coord_pending_checkpoint_t *self,
                                              const char *(*stage_name)(const void *arg,
                                                                        uint32_t stage),
                                              const void *arg, char *buf, size_t size);

#endif
