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
 * a hang: every request has a timeout (default 3 s). */
#ifndef EDDY_STATE_METASTORE_H
#define EDDY_STATE_METASTORE_H

#include <stddef.h>

#include "common/err.h"

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
void eddy_metastore_destroy(eddy_metastore_t **self_p);
const char *eddy_metastore_url(const eddy_metastore_t *self);

int eddy_metastore_put(eddy_metastore_t *self, const char *key, const void *value, size_t len,
                       eddy_err_t *err);
/* Returns 1 and a malloc'd NUL-terminated value when found, 0 when absent, -1 on error. */
int eddy_metastore_get(eddy_metastore_t *self, const char *key, char **value, size_t *len,
                       eddy_err_t *err);
/* Deleting an absent key is not an error. */
int eddy_metastore_delete(eddy_metastore_t *self, const char *key, eddy_err_t *err);
/* All keys starting with prefix, sorted by key. */
int eddy_metastore_list(eddy_metastore_t *self, const char *prefix, eddy_kv_list_t *out,
                        eddy_err_t *err);
void eddy_kv_list_clear(eddy_kv_list_t *list);

#endif
