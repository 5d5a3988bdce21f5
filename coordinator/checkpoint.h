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

typedef struct coord_pending_checkpoint {
    uint64_t id;
    uint32_t epoch;
    bool pause;        /* sources stop behind its barrier (a rescale) */
    bool committing;   /* every task acknowledged; its metadata is being written */
    uint64_t started_ms;
    uint64_t bytes, files;
    uint32_t n_stages;
    uint32_t parallelism[EDDY_MAX_STAGES];
    bool source[EDDY_MAX_STAGES];
    uint32_t n_tasks, n_acked;
    bool *acked;        /* [n_tasks], stage-major */
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
 * its source state (state_len bytes, NULL/0: none) when it is a source. */
coord_ack_verdict_t coord_pending_checkpoint_ack(coord_pending_checkpoint_t *self, uint32_t stage,
                                                 uint32_t instance, int64_t position,
                                                 const char *state, uint32_t state_len,
                                                 uint64_t bytes, uint64_t files);
bool coord_pending_checkpoint_all_acked(const coord_pending_checkpoint_t *self);
/* A task that has not acknowledged yet (for messages); false when none. */
bool coord_pending_checkpoint_first_missing(const coord_pending_checkpoint_t *self,
                                            uint32_t *stage, uint32_t *instance);

#endif
