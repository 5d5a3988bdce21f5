/* pool_local.h - the worker pool's local backend: `eddy worker` processes
 * forked on this machine, and the one place that says which flags a local
 * worker gets (eddy local's own workers are started with the same argv).
 *
 * Workers are children of the process that makes the backend (the
 * controller), die with it (common/spawn.h) and are reaped by live(); a
 * released worker gets SIGTERM (it leaves its coordinator cleanly) and
 * SIGKILL if it has not ended STOP_GRACE later. */
#ifndef EDDY_CONTROLLER_POOL_LOCAL_H
#define EDDY_CONTROLLER_POOL_LOCAL_H

#include <stdbool.h>

#include "common/err.h"
#include "controller/pool.h"

typedef struct eddy_local_worker_flags {
    const char *coordinator;  /* --coordinator (a list is fine) */
    const char *snapshot_dir; /* --snapshot-dir; NULL: the coordinator's */
    const char *keys_dir;     /* --keys; NULL: none */
    /* --leave-wait-ms 0: workers stopped only after their coordinator
     * ended (eddy local's own) need not wait for it to confirm they left */
    bool no_leave_wait;
    /* --insecure: no keys, and the coordinator beyond loopback (eddy local
     * --insecure --bind-host ADDR) */
    bool insecure;
    /* --no-local-recovery: the workers keep no local copies of their
     * checkpoints; restores read everything from checkpoint storage */
    bool no_local_recovery;
} eddy_local_worker_flags_t;

#define EDDY_LOCAL_WORKER_ARGV_MAX 16

/* Fills argv with "eddy worker --coordinator ... --name NAME ..." and a
 * NULL end; the strings are borrowed from flags and name. */
void eddy_local_worker_argv(const eddy_local_worker_flags_t *flags, const char *name,
                            char *argv[EDDY_LOCAL_WORKER_ARGV_MAX]);

/* A backend starting workers with flags (copied). 0, or -1 with err. */
int eddy_pool_local_new(const eddy_local_worker_flags_t *flags, eddy_pool_backend_t *out,
                        eddy_err_t *err);

#endif
