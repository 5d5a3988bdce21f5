/* liveness.h - a worker's liveness thread: says "this process lives" to the
 * coordinator every heartbeat interval, whatever the worker's loop does.
 *
 * The loop sends the application heartbeat (task metrics) and so stops
 * when it blocks (a large final output, a long state load, a machine under
 * load). This thread has its own DEALER, connected to the coordinator the
 * loop follows, with the same CURVE keys (a worker key: the coordinator's
 * ZAP handler admits it like the main socket), and sends LIVENESS
 * (net/proto.h) carrying the token of the worker's current registration,
 * so it counts for that worker only. The coordinator then calls a worker
 * whose heartbeats are late but whose liveness is fresh busy, not dead,
 * up to its --stuck-timeout-ms (docs/architecture.md, "Liveness").
 *
 * Nothing is sent while no target is set (before registration, or while
 * the loop seeks the leader after a coordinator went silent), so a worker
 * cut off from its coordinator, or stopped, stops both kinds of message.
 * Thread-safe: every call but new/destroy may come from the loop while the
 * thread runs. */
#ifndef EDDY_RUNTIME_LIVENESS_H
#define EDDY_RUNTIME_LIVENESS_H

#include <stdint.h>

#include "common/err.h"
#include "net/keys.h"

typedef struct eddy_liveness eddy_liveness_t;

/* Starts the thread (idle until a target is set). zctx: the worker's
 * ZeroMQ context; keys: NULL without CURVE. NULL with err on failure. */
eddy_liveness_t *eddy_liveness_new(void *zctx, const eddy_keys_t *keys, eddy_err_t *err);
/* Sends to endpoint as worker_id with token every interval_ms from now on
 * (a new endpoint reconnects); token 0 or endpoint NULL: sends nothing. */
void eddy_liveness_target(eddy_liveness_t *self, const char *endpoint, uint32_t worker_id,
                          uint64_t token, uint32_t interval_ms);
/* The loop turned (now, eddy_mono_ms): LIVENESS reports the time since. */
void eddy_liveness_loop_turned(eddy_liveness_t *self, uint64_t now_ms);
/* Stops and joins the thread, closes its socket, frees, NULLs *self_p. */
void eddy_liveness_destroy(eddy_liveness_t **self_p);

#endif
