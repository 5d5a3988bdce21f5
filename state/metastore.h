/* metastore.h - the metadata store: a small consistent key/value store for
 * jobs, placement, checkpoints, scaling decisions and worker registrations.
 *
 * One interface, two backends chosen by URL:
 *   "file:///abs/dir" or a plain path  embedded store for `eddy local`: one
 *                                      file per key under dir, written to a
 *                                      temp file, fsync'ed and renamed.
 *   "etcd://HOST:PORT" or "http://HOST:PORT"  etcd v3 through its JSON
 *                                      gateway (/v3/kv/put, /v3/kv/range,
 *                                      /v3/kv/deleterange) with libcurl.
 * Keys are '/'-separated printable ASCII ("/eddy/jobs/wordcount"), values
 * are arbitrary bytes. An unreachable etcd is an error naming the URL, never
 * a hang: every request has a timeout (default 3 s).
 *
 * URL details:
 *   file:///abs/dir, file://localhost/abs/dir  %XX escapes in the path are
 *       decoded; other hosts are rejected.
 *   anything without "://" is a path (absolute or relative to the cwd at
 *       open time); the directory is created, with parents, if missing.
 *   etcd://HOST[:PORT] means http://HOST:PORT (PORT defaults to 2379);
 *   http://HOST[:PORT] and https://HOST[:PORT] are used as they are (TLS
 *       files for https: eddy_metastore_open_tls). HOST may
 *       be a name, an IPv4 address or [IPv6]. No path (a lone trailing '/' is
 *       ignored), no user info, one endpoint only. An optional query
 *       "?timeout_ms=N" (1..600000) replaces the 3 s per-request timeout.
 *
 * Keys: non-empty, bytes 0x20..0x7E only, at most EDDY_METASTORE_KEY_MAX
 * bytes; anything else is rejected with an error. The file store maps a key
 * to one file name by percent-encoding every byte outside [A-Za-z0-9._-]
 * (and a leading '.'), so the encoded name must also fit in 255 bytes.
 * Prefixes follow the same byte rules but may be empty (or NULL): all keys.
 * Matching is by bytes, so prefix "/a/b" also lists "/a/bc".
 *
 * Threads: one handle may be shared; its calls are serialized by a lock.
 * Several handles (or processes) on the same file dir or etcd are fine:
 * each put/delete is atomic, the last writer wins. */
#ifndef EDDY_STATE_METASTORE_H
#define EDDY_STATE_METASTORE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

#define EDDY_METASTORE_KEY_MAX 1024

typedef struct eddy_metastore eddy_metastore_t;

typedef struct eddy_kv {
    char *key;
    char *value;  /* NUL-terminated for convenience; value_len excludes it */
    size_t value_len;
} eddy_kv_t;

typedef struct eddy_kv_list {
    eddy_kv_t *items;
    size_t count;
} eddy_kv_list_t;

/* Opens (and for etcd, checks reachability of) the store at url. */
eddy_metastore_t *eddy_metastore_open(const char *url, eddy_err_t *err);

/* TLS to etcd (https:// URLs only): files in PEM. Any field may be NULL:
 * ca_file NULL trusts the system's CAs; cert_file and key_file (a client
 * certificate for etcd's --client-cert-auth) go together. The server's
 * certificate and host name are always verified. */
typedef struct eddy_metastore_tls {
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
} eddy_metastore_tls_t;

/* eddy_metastore_open with TLS settings for etcd (tls NULL or all fields
 * NULL: as eddy_metastore_open). Settings with a file store or an http://
 * etcd URL are an error, not silently ignored; so is a key file that others
 * may read. */
eddy_metastore_t *eddy_metastore_open_tls(const char *url, const eddy_metastore_tls_t *tls,
                                          eddy_err_t *err);
/* eddy_metastore_open_tls that also says, when it fails, whether the
 * store did not answer at all (*unreachable: etcd refused the connection
 * or timed out), which may pass by waiting; a malformed URL, unusable TLS
 * files, a refused TLS handshake or a wrong answer do not. */
eddy_metastore_t *eddy_metastore_open_probe(const char *url, const eddy_metastore_tls_t *tls,
                                            bool *unreachable, eddy_err_t *err);
void eddy_metastore_destroy(eddy_metastore_t **self_p);
/* The url exactly as given to open. */
const char *eddy_metastore_url(const eddy_metastore_t *self);
/* Claims the store for this process alone, until destroy: the file store
 * takes an exclusive flock on <dir>/.lock (a second process gets "metadata
 * directory D is in use by pid P") and then encrypts records an older eddy
 * left in plain text; etcd needs none (coordinators elect a leader), so 0. */
int eddy_metastore_lock(eddy_metastore_t *self, eddy_err_t *err);

int eddy_metastore_put(eddy_metastore_t *self, const char *key, const void *value, size_t len,
                       eddy_err_t *err);
/* Returns 1 and a malloc'd NUL-terminated value when found, 0 when absent, -1 on error.
 * When not found (0 or -1) *value is NULL and *len 0. value and len may be
 * NULL (an existence check). */
int eddy_metastore_get(eddy_metastore_t *self, const char *key, char **value, size_t *len,
                       eddy_err_t *err);
/* Deleting an absent key is not an error. */
int eddy_metastore_delete(eddy_metastore_t *self, const char *key, eddy_err_t *err);
/* All keys starting with prefix, sorted by key (bytewise). *out is
 * overwritten (not freed) and must be released with eddy_kv_list_clear; on
 * error it is left empty. */
int eddy_metastore_list(eddy_metastore_t *self, const char *prefix, eddy_kv_list_t *out,
                        eddy_err_t *err);
/* Frees every item and leaves the list empty; NULL is fine. */
void eddy_kv_list_clear(eddy_kv_list_t *list);
/* 0 when key is legal (the rules above), else -1 naming the problem; for
 * callers that must tell a bad key (never worth retrying) from a store failure. */
int eddy_metastore_key_check(const char *key, eddy_err_t *err);

#endif
