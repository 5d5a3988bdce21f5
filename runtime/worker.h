/* worker.h - the worker process: registers with the coordinator, runs the
 * tasks it is given on one event loop, moves data-plane messages between
 * its tasks and other workers, and heartbeats task metrics.
 *
 * Sockets: a DEALER to the coordinator's control ROUTER, a PULL bound for
 * incoming data-plane messages, and one PUSH per peer worker. Sends never
 * block: credit-based flow control bounds what is queued per channel. */
#ifndef EDDY_RUNTIME_WORKER_H
#define EDDY_RUNTIME_WORKER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "net/keys.h"

typedef struct eddy_worker_options {
    const char *coordinator;     /* tcp://HOST:PORT of the control socket */
    const char *name;            /* shown in status; default worker-PID */
    const char *bind_host;       /* data socket bind address (default 127.0.0.1) */
    const char *advertise_host;  /* address peers use (default: bind_host, or 127.0.0.1 for 0.0.0.0/ *) */
    uint32_t data_port;          /* 0 = any free port */
    uint32_t register_timeout_ms;
    const char *snapshot_dir;    /* used when the coordinator names none */
    const eddy_keys_t *keys;     /* server keys: CURVE on every socket (NULL: none) */
    /* Asked to stop, the worker tells its coordinator it leaves (LEAVE) and
     * waits up to this long for the answer; 0: it stops without a word. */
    uint32_t leave_wait_ms;
    /* Cache of plugins fetched from the coordinator: a private directory
     * (created 0700; refused unless owned by this user with no group or
     * other access). NULL: $XDG_RUNTIME_DIR/eddy-plugins, or without it a
     * fresh directory of this process, removed at exit. */
    const char *plugin_cache;
    /* --checkpoint-storage (a directory, file:///DIR or s3://...): when set
     * it wins over the storage the coordinator names in DEPLOY; opened
     * (probed) at start, so wrong credentials fail there. NULL: the
     * coordinator's, else snapshot_dir. */
    const char *checkpoint_storage;
    /* --no-local-recovery: keep no local copies of what this worker's
     * tasks checkpoint; every restore reads all its groups from checkpoint
     * storage (runtime/local_recovery.h). */
    bool no_local_recovery;
} eddy_worker_options_t;

/* Runs until *stop becomes non-zero or the coordinator cannot be reached at
 * registration. Returns 0 on a clean stop, -1 with err otherwise. */
int eddy_worker_run(const eddy_worker_options_t *opts, volatile sig_atomic_t *stop, eddy_err_t *err);

#endif
