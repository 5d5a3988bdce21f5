/* rejects.c - counting and rate-limited logging of dropped messages
 * (rejects.h). Pure bookkeeping: the callers decide what to drop. */
#include "coordinator/rejects.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const names[COORD_REJECT_COUNT] = {
    [COORD_REJECT_NOT_PLACED] = "not_placed",
    [COORD_REJECT_UNKNOWN_TASK] = "unknown_task",
    [COORD_REJECT_STALE_EPOCH] = "stale_epoch",
    [COORD_REJECT_DUPLICATE] = "duplicate",
    [COORD_REJECT_LEADER_EPOCH] = "leader_epoch",
    [COORD_REJECT_HEARTBEAT_BYTES] = "heartbeat_bytes",
    [COORD_REJECT_HEARTBEAT_ENTRIES] = "heartbeat_entries",
    [COORD_REJECT_WORKER_SERIES] = "worker_series",
    [COORD_REJECT_REGISTRATIONS] = "registrations",
    [COORD_REJECT_REMOTE_WITHOUT_KEYS] = "remote_without_keys",
    [COORD_REJECT_DECISION_BYTES] = "decision_bytes",
    [COORD_REJECT_PLUGINS] = "plugins",
    [COORD_REJECT_REPLY_QUEUE] = "reply_queue",
    [COORD_REJECT_LIVENESS] = "liveness",
};

const char *coord_reject_name(coord_reject_reason_t reason)
{
    return reason < COORD_REJECT_COUNT ? names[reason] : "?";
}

void coord_reject(coord_rejects_t *self, coord_reject_reason_t reason, const char *fmt, ...)
{
    if (reason >= COORD_REJECT_COUNT)
        return;
    self->count[reason]++;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    eddy_log_limited(&self->log[reason],
                     reason == COORD_REJECT_STALE_EPOCH || reason == COORD_REJECT_LIVENESS
                         ? EDDY_LOG_INFO
                         : EDDY_LOG_WARN,
                     "rejected (%s): %s", names[reason], what);
}
