/* sync_list.h - fsyncs an operator hands to the runtime instead of doing
 * them on the worker loop.
 *
 * A two-phase-commit operator's prepare() or commit() adds the files (as
 * open descriptors, owned by the list) and directories that must be durable;
 * the worker runs the list on its snapshot writer thread and sends the
 * checkpoint's ACK (or TASK_DONE, or the final ACK) only after it ran
 * without error. Files are synced before directories, in the order added.
 *
 * A sink whose pre-commit is not a file (a database's PREPARE TRANSACTION)
 * adds a call instead: fn(arg) runs on the writer thread after the fsyncs
 * and may block there (waiting for the sink's own thread); its error goes
 * into the ACK like a failed fsync. release(arg), if set, runs once the call
 * ran or the list is destroyed without running it. */
#ifndef EDDY_STATE_SYNC_LIST_H
#define EDDY_STATE_SYNC_LIST_H

#include <stdbool.h>

#include "common/err.h"

typedef struct eddy_sync_list eddy_sync_list_t;

eddy_sync_list_t *eddy_sync_list_new(void);
/* Closes the descriptors not yet synced. */
void eddy_sync_list_destroy(eddy_sync_list_t **self_p);
/* Takes fd (closed by the list in any case); path names it in errors. */
int eddy_sync_list_add_file(eddy_sync_list_t *self, int fd, const char *path, eddy_err_t *err);
int eddy_sync_list_add_dir(eddy_sync_list_t *self, const char *path, eddy_err_t *err);
typedef int (*eddy_sync_call_fn)(void *arg, eddy_err_t *err);
int eddy_sync_list_add_call(eddy_sync_list_t *self, eddy_sync_call_fn fn, void *arg,
                            void (*release)(void *arg), eddy_err_t *err);
bool eddy_sync_list_empty(const eddy_sync_list_t *self);
/* fsyncs every file, then every directory, then runs the calls; the first
 * error is returned,
 * but everything is attempted and every descriptor closed. Runs once. */
int eddy_sync_list_run(eddy_sync_list_t *self, eddy_err_t *err);

#endif
