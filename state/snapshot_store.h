/* snapshot_store.h - durable files of a checkpoint, one per (checkpoint,
 * operator, key group) plus named blobs (source offsets, sink pending data).
 *
 * Layout under the root directory:
 *   ROOT/JOB/chk-<ID>/<OPERATOR>/kg-<KG>.snap     keyed state of one key group
 *   ROOT/JOB/chk-<ID>/<OPERATOR>/refs-<I>.ref     manifest of task instance I
 *                                                 (incremental checkpoints)
 *   ROOT/JOB/chk-<ID>/<NAME>.blob                  any other named blob
 * Incremental checkpoints (--checkpoint-full-every N > 1): a task writes
 * only the key groups that changed since its last completed checkpoint and
 * a manifest (state/snapshot_manifest.h) naming, for every group it held,
 * the checkpoint whose kg-<KG>.snap holds it. read_group follows it: a
 * group of checkpoint C that one of C's manifests (of that operator, any
 * instance: a restore at another parallelism reads them all) says is held
 * by H is read from chk-H; a group no manifest names, and every group of a
 * checkpoint or operator without manifests, from chk-C itself. The merged
 * manifests of the last few (job, checkpoint, operator) read are kept in
 * the store. A referenced object that is missing or corrupt is an error
 * naming it and the checkpoint that refers to it.
 * Every file is written to a temporary name (".FILE.tmp.PID.SEQ" in the same
 * directory), fsync'ed and renamed, then the directory is fsync'ed, so a
 * reader sees either the whole file or none. Each file carries a 24-byte
 * header: magic "EDDYSNP1", payload length (u64 LE), xxhash64 of the payload
 * (seed 0, u64 LE); the file is exactly 24 + length bytes.
 * A short, long or corrupted file is reported as an error naming the file,
 * never returned as data. Names (job, operator, blob) must be non-empty, at
 * most 200 characters, not "." or "..", and may contain only [A-Za-z0-9._-].
 * Empty payloads are allowed (read back as a 1-byte allocation, *len = 0).
 *
 * The root is a location (--checkpoint-storage): a directory path or
 * file:///DIR (the files above, batched syncfs), or
 * s3://BUCKET/PREFIX?endpoint=URL&region=R: one object per file with the
 * same key layout (JOB/chk-ID/OP/kg-KG.snap) and the same header, written
 * by one PUT each through state/object_store.h (credentials from the
 * environment, never in the URI). Every call but _new, _destroy and _root
 * BLOCKS (disk or network): run it on the snapshot writer thread, the
 * coordinator's reaper thread or another thread of its own, never on an
 * event loop. _new does no I/O for s3:// (the bucket is opened at first
 * use); _probe opens it now; _preload and _preload_clear do none either.
 * A store may be used from several threads. */
#ifndef EDDY_STATE_SNAPSHOT_STORE_H
#define EDDY_STATE_SNAPSHOT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct eddy_snapshot_store eddy_snapshot_store_t;

/* Creates a directory root if needed. NULL with err on failure (a bad
 * URI, an uncreatable directory). */
eddy_snapshot_store_t *eddy_snapshot_store_new(const char *root, eddy_err_t *err);
/* Opens an s3:// store now (one ListObjectsV2 request: wrong credentials,
 * bucket or endpoint fail here, by name); nothing for a directory. BLOCKS. */
int eddy_snapshot_store_probe(eddy_snapshot_store_t *self, eddy_err_t *err);
void eddy_snapshot_store_destroy(eddy_snapshot_store_t **self_p);
const char *eddy_snapshot_store_root(const eddy_snapshot_store_t *self);

int eddy_snapshot_store_write_group(eddy_snapshot_store_t *self, const char *job,
                                    uint64_t checkpoint, const char *op, uint32_t kg,
                                    const void *data, size_t len, eddy_err_t *err);
/* Writes several key groups of one operator as one batch: all files are
 * written, the file system is flushed once (syncfs), then each file is
 * renamed into place and the directory fsync'ed. Readers still see whole
 * files or none. Cheaper than write_group per group, which fsyncs each.
 * durable = false skips the flushes (for data that need not survive a crash,
 * such as a rescale's migration snapshot). */
int eddy_snapshot_store_write_groups(eddy_snapshot_store_t *self, const char *job,
                                     uint64_t checkpoint, const char *op, uint32_t n,
                                     const uint32_t *kgs, char *const *data, const size_t *lens,
                                     bool durable, eddy_err_t *err);
/* Returns 0 and a malloc'd payload, or -1 (missing, truncated, checksum
 * mismatch, a bad manifest). Follows the checkpoint's manifests (above). */
int eddy_snapshot_store_read_group(eddy_snapshot_store_t *self, const char *job,
                                   uint64_t checkpoint, const char *op, uint32_t kg,
                                   char **data, size_t *len, eddy_err_t *err);

/* Read-ahead: hands the store a payload (data, malloc'd: the store owns it
 * on success, the caller keeps it on failure) that another thread already
 * read for (job, checkpoint, op, kg); the next
 * read_group of that group returns it without I/O (once). A worker reads
 * a restore's groups from an s3:// store on its snapshot writer thread and
 * preloads them, so the restore itself, on the event loop, does no network
 * I/O. No I/O; 0, or -1 with err (bad names, out of memory). */
int eddy_snapshot_store_preload(eddy_snapshot_store_t *self, const char *job, uint64_t checkpoint,
                                const char *op, uint32_t kg, char *data, size_t len,
                                eddy_err_t *err);
/* Frees whatever was preloaded and not read. No I/O. */
void eddy_snapshot_store_preload_clear(eddy_snapshot_store_t *self);
/* Whether reads go over the network (s3://) rather than to a directory. */
bool eddy_snapshot_store_is_remote(const eddy_snapshot_store_t *self);
/* The same for a root before a store is made of it. */
bool eddy_snapshot_store_root_is_remote(const char *root);

int eddy_snapshot_store_write_blob(eddy_snapshot_store_t *self, const char *job,
                                   uint64_t checkpoint, const char *name, const void *data,
                                   size_t len, eddy_err_t *err);
int eddy_snapshot_store_read_blob(eddy_snapshot_store_t *self, const char *job,
                                  uint64_t checkpoint, const char *name, char **data,
                                  size_t *len, eddy_err_t *err);

/* Task instance's manifest of (job, checkpoint, op): written like a group
 * (atomic, durable). */
int eddy_snapshot_store_write_manifest(eddy_snapshot_store_t *self, const char *job,
                                       uint64_t checkpoint, const char *op, uint32_t instance,
                                       const void *data, size_t len, eddy_err_t *err);

/* Keys relative to the root ("JOB/chk-7/count/kg-3.snap"), for the
 * collection of unreferenced objects (state/snapshot_gc.h). */
typedef int (*eddy_snapshot_store_list_fn)(const char *key, uint64_t size, void *ctx);
/* Every file or object under dir ("JOB", "JOB/chk-7"; no leading or
 * trailing '/'), in no particular order for a directory (byte order for
 * s3://); temporary files are not listed. 0, 1 when fn stopped, -1 with err. */
int eddy_snapshot_store_list_keys(eddy_snapshot_store_t *self, const char *dir,
                                  eddy_snapshot_store_list_fn fn, void *ctx, eddy_err_t *err);
/* The payload of the snapshot file at key (header and checksum checked). */
int eddy_snapshot_store_read_key(eddy_snapshot_store_t *self, const char *key, char **data,
                                 size_t *len, eddy_err_t *err);
/* Removes key (absent is not an error). */
int eddy_snapshot_store_delete_key(eddy_snapshot_store_t *self, const char *key, eddy_err_t *err);

/* Removes ROOT/JOB/chk-<ID> and everything in it (missing is not an error);
 * for s3:// every object under JOB/chk-<ID>/. */
int eddy_snapshot_store_remove_checkpoint(eddy_snapshot_store_t *self, const char *job,
                                          uint64_t checkpoint, eddy_err_t *err);

#endif
