/* rejects.h - messages the coordinator drops because of who sent them or
 * how much they ask for, counted by reason.
 *
 * Every rejection is counted in eddy_rejected_messages_total{reason} (GET
 * /metrics, views.c) and logged at most once per EDDY_LOG_LIMIT_INTERVAL_MS
 * per reason, so a hostile peer costs a counter increment, not a log line
 * per message. The reasons are part of the metrics contract (docs/security.md). */
#ifndef EDDY_COORDINATOR_REJECTS_H
#define EDDY_COORDINATOR_REJECTS_H

#include <stdint.h>

#include "common/log.h"

typedef enum coord_reject_reason {
    /* task-scoped messages (ACK, TASK_DONE, TASK_FAILED, heartbeat task
     * metrics: senders.c) */
    COORD_REJECT_NOT_PLACED,        /* from a worker the task is not placed on */
    COORD_REJECT_UNKNOWN_TASK,      /* a job, stage or instance that does not exist */
    COORD_REJECT_STALE_EPOCH,       /* a job epoch other than the current one */
    COORD_REJECT_DUPLICATE,         /* TASK_DONE or a final ACK again for the same task and epoch */
    /* authority by role */
    COORD_REJECT_LEADER_EPOCH,      /* a leader epoch on a message from a non-coordinator: ignored */
    /* caps (eddy_coordinator_limits_t) */
    COORD_REJECT_HEARTBEAT_BYTES,   /* a heartbeat over --max-heartbeat-bytes */
    COORD_REJECT_HEARTBEAT_ENTRIES, /* a heartbeat with more than --max-heartbeat-entries tasks */
    COORD_REJECT_WORKER_SERIES,     /* task metrics past --max-worker-series kept per worker */
    COORD_REJECT_REGISTRATIONS,     /* a registration past --max-registrations live workers */
    COORD_REJECT_REMOTE_WITHOUT_KEYS, /* without keys, a registration from beyond loopback */
    COORD_REJECT_DECISION_BYTES,    /* a decision over --max-decision-bytes */
    COORD_REJECT_PLUGINS,           /* a plugin upload past --max-plugins stored */
    COORD_REJECT_REPLY_QUEUE,       /* a message to a peer whose queue is at --reply-hwm */
    COORD_REJECT_LIVENESS,          /* LIVENESS without the token of a live worker's registration */
    COORD_REJECT_COUNT
} coord_reject_reason_t;

typedef struct coord_rejects {
    uint64_t count[COORD_REJECT_COUNT];
    eddy_log_limit_t log[COORD_REJECT_COUNT];
} coord_rejects_t;

/* The reason's label value in eddy_rejected_messages_total. */
const char *coord_reject_name(coord_reject_reason_t reason);

/* Counts one rejection and logs `what` (printf) for it, rate-limited per
 * reason. Stale epochs are a normal race after a restore, and a stale
 * liveness token one after a worker registered again: logged at info. */
void coord_reject(coord_rejects_t *self, coord_reject_reason_t reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
