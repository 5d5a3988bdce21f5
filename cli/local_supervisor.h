/* local_supervisor.h - the child processes of `eddy local` (its workers and
 * the controller) and keeping them alive while the coordinator runs.
 *
 * `eddy local` started these processes, so it is the one that must restart
 * them: when one dies, the supervisor logs how (exit status or signal) and
 * starts it again after an exponential backoff. A child that keeps dying
 * (more than a bounded number of restarts, each within a short time of the
 * last start) makes the supervisor give up: it records the cause and sets
 * *stop, the flag the coordinator loop polls, so `eddy local` ends with the
 * cause instead of waiting forever for workers that will never register.
 *
 * The supervisor runs in its own thread (the coordinator loop owns the main
 * thread); children are started from that thread and get SIGKILL when it
 * ends (PR_SET_PDEATHSIG), so destroy stops them first, gracefully. */
#ifndef EDDY_CLI_LOCAL_SUPERVISOR_H
#define EDDY_CLI_LOCAL_SUPERVISOR_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

typedef struct eddy_local_supervisor eddy_local_supervisor_t;

/* stop: set to 1 when the supervisor gives up (borrowed; outlives it). */
eddy_local_supervisor_t *eddy_local_supervisor_new(volatile sig_atomic_t *stop);
/* Adds a child "eddy ARGV..." called name (argv is copied; argv[0] is the
 * program name shown in ps, the binary is this one). A child added with
 * done_on_success is not restarted after it exits 0 (the controller exits
 * when its job ended); every other exit is restarted. Before start only. */
int eddy_local_supervisor_add(eddy_local_supervisor_t *self, const char *name, char *const argv[],
                              bool done_on_success, eddy_err_t *err);
/* Starts every child and the supervising thread. */
int eddy_local_supervisor_start(eddy_local_supervisor_t *self, eddy_err_t *err);
/* True once it gave up; cause then says which child and how it died. */
bool eddy_local_supervisor_gave_up(eddy_local_supervisor_t *self, char *cause, size_t size);
/* Stops supervising, sends SIGTERM to the children (SIGKILL after a grace
 * period), reaps them and frees everything. */
void eddy_local_supervisor_destroy(eddy_local_supervisor_t **self_p);

#endif
