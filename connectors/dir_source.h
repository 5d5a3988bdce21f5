/* dir_source.h - the dir source (`--input dir:///path`): watches a directory
 * and reads every file that appears in it, once, in name order; unbounded.
 *
 * Contract for writers: a file is read once it is complete, i.e. when it
 * is renamed into the directory (IN_MOVED_TO) or closed after writing
 * (IN_CLOSE_WRITE); files present when the source opens count as complete.
 * Write elsewhere, or under a name starting with '.' or ending in ".tmp"
 * (ignored), then rename. Files are not changed once complete. A name ending
 * in ".gz" is decompressed (line_reader.h); a corrupt or truncated one fails
 * the task naming the file. Subdirectories and other non-regular files are
 * skipped. The directory must be local to every worker (inotify).
 *
 * Instances: file NAME belongs to instance eddy_dir_source_owner(NAME, p),
 * a hash of the name, so the split is the same after every restore.
 *
 * Progress (write_state, api/operator.h): the names this instance read
 * completely and that are still in the directory, plus the file it is in
 * and the (uncompressed) offset of its next line. A restore re-reads
 * nothing a checkpoint counted and rescans the directory for the rest.
 * Removing files once read keeps that state small: names of removed files
 * are forgotten. The state is limited to EDDY_SOURCE_STATE_MAX bytes (a few
 * thousand names per instance); beyond it the task fails with that
 * message. position() is the count of lines emitted since open (metrics). */
#ifndef EDDY_CONNECTORS_DIR_SOURCE_H
#define EDDY_CONNECTORS_DIR_SOURCE_H

#include <stdint.h>

#include "api/operator.h"

#define EDDY_DIR_NAME_MAX 256 /* a directory entry's name (NAME_MAX) and NUL */

typedef struct eddy_dir_source_config {
    char path[4096];
} eddy_dir_source_config_t;
extern const eddy_source_ops_t eddy_dir_source_ops;

/* path is a readable, searchable directory. */
int eddy_dir_source_check(const char *path, eddy_err_t *err);
/* The instance of p that reads the file called name. */
uint32_t eddy_dir_source_owner(const char *name, uint32_t parallelism);
/* Whether a file of that name is input at all (hidden and .tmp are not). */
bool eddy_dir_source_wanted(const char *name);

/* A dir source instance's progress, as its state bytes hold it. */
typedef struct eddy_dir_progress {
    char current[EDDY_DIR_NAME_MAX]; /* "" none */
    int64_t offset;                  /* of the next line in current */
    uint32_t n_done, cap_done;
    char **done;                     /* sorted names read completely (owned) */
} eddy_dir_progress_t;

/* msgpack [1, current, offset, [done...]]: a malloc'd buffer in *out. */
int eddy_dir_state_encode(const eddy_dir_progress_t *p, char **out, size_t *len, eddy_err_t *err);
/* Fills p (zeroed first; eddy_dir_progress_clear frees it) or returns -1 with
 * a clear error for malformed bytes, leaving p empty. */
int eddy_dir_state_decode(const void *data, size_t len, eddy_dir_progress_t *p, eddy_err_t *err);
void eddy_dir_progress_clear(eddy_dir_progress_t *p);

#endif
