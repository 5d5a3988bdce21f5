/* fsutil.h - the durable-file primitives every store and sink shares:
 * complete writes, directory fsync and mkdir -p that makes new directories
 * durable in their parents. One implementation, so the crash-safety rules
 * (temp + fsync + rename + fsync the directory) are applied the same way by
 * the snapshot store, the file metadata store and the file sinks. */
#ifndef EDDY_COMMON_FSUTIL_H
#define EDDY_COMMON_FSUTIL_H

#include <stddef.h>

#include "common/err.h"

/* Writes all len bytes (retrying on EINTR and short writes); -1 with errno. */
int eddy_write_all(int fd, const void *data, size_t len);
/* fsync a directory so that entries created, renamed or removed in it are
 * durable. Filesystems that cannot fsync directories (EINVAL) are tolerated. */
int eddy_fsync_dir(const char *path, eddy_err_t *err);
/* mkdir -p; each directory created is fsync'ed into its parent, and an
 * existing path component that is not a directory is an error. */
int eddy_mkdir_p(const char *path, eddy_err_t *err);
/* A private directory: creates path (mode 0700; missing parents 0755) and
 * returns an O_DIRECTORY descriptor of it, opened without following a
 * symlink, after checking on that descriptor that it is a directory owned by
 * this process's effective uid with no group or other permission bits
 * (what `what` names it in the error: "plugin cache"). -1 with err saying
 * which rule failed and how to fix it. Use the descriptor (openat) for
 * everything inside, so a renamed or replaced parent changes nothing. */
int eddy_private_dir_open(const char *path, const char *what, eddy_err_t *err);

#endif
