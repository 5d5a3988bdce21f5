/* savepoint.h - a savepoint's location and files (docs/savepoints.md): the
 * manifest written after every task wrote its state there, and a savepoint
 * opened and checked before anything restores from it. The format of the
 * manifest is state/savepoint_manifest.h.
 *
 * A location is a directory path (made absolute), file:///DIR or
 * s3://BUCKET/PREFIX?endpoint=URL&region=R - the roots of
 * state/snapshot_store.h. Every call but eddy_savepoint_location BLOCKS
 * (disk or network): the coordinator runs eddy_savepoint_seal on a thread
 * of its own; the CLI reads before it starts anything. */
#ifndef EDDY_STATE_SAVEPOINT_H
#define EDDY_STATE_SAVEPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "state/savepoint_manifest.h"

/* loc as a root every process reads alike: a relative directory is made
 * absolute (against the working directory), a trailing '/' dropped; URIs
 * are kept. 0, or -1 with err (empty, an unsupported scheme, too long). */
int eddy_savepoint_location(const char *loc, char *out, size_t cap, eddy_err_t *err);

/* Lists the files of m's checkpoint under root (JOB/chk-ID/), records them
 * with their sizes in m, and writes m as ROOT/savepoint.json, last, so a
 * location with a manifest is complete. 0, or -1 with err. */
int eddy_savepoint_seal(const char *root, eddy_savepoint_manifest_t *m, eddy_err_t *err);

/* Reads ROOT/savepoint.json into m (cleared with
 * eddy_savepoint_manifest_clear, also after a failure) and, when verify,
 * reads every file it names: each must exist with the size the manifest
 * gives and its checksum must match. Changes nothing at root. -1 with err
 * as one line naming the file and the problem (no savepoint there, not
 * readable, a newer format, truncated, corrupt). */
int eddy_savepoint_open(const char *root, bool verify, eddy_savepoint_manifest_t *m,
                        eddy_err_t *err);

#endif
