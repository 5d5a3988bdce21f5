/* object_store.h - a flat store of named blobs for checkpoint and savepoint
 * files, on a local directory or an S3-compatible service.
 *
 * URIs (--checkpoint-storage):
 *   file:///DIR                                  DIR must exist (not created)
 *   s3://BUCKET[/PREFIX][?endpoint=URL&region=R]  S3 API, path-style URLs
 *                                                (ENDPOINT/BUCKET/PREFIX/KEY),
 *                                                SigV4 signed by libcurl
 * S3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (both
 * required) and AWS_SESSION_TOKEN (optional), read once at open. The region
 * defaults to us-east-1 and the endpoint to https://s3.REGION.amazonaws.com.
 * open() of an s3:// store makes one ListObjectsV2 request, so a wrong bucket,
 * refused credentials or an unreachable endpoint fail there, by name.
 *
 * Keys are relative paths such as "JOB/chk-7/count/kg-12.snap": 1 to
 * EDDY_OBJECT_STORE_KEY_MAX bytes of [A-Za-z0-9._-/], '/'-separated segments
 * of 1 to EDDY_OBJECT_STORE_SEGMENT_MAX bytes (a file name's limit, with room
 * for a temporary suffix) that do not start with '.' (so no "." or "..", no
 * clash with the file backend's temporary files), no leading or trailing '/'.
 * put() is atomic: a reader sees the whole old value, the whole new one, or
 * (for a new key) none; a file is written to a temporary name, fsync'ed,
 * renamed and its directory fsync'ed; an S3 object is one PUT, or above the
 * multipart threshold a multipart upload that is aborted on failure.
 *
 * Every call BLOCKS (disk, network, retries with backoff): callers must run
 * it off any event loop, on a thread of their own - the rule of the
 * metastore. A store may be used from several threads (S3 calls on one store
 * are serialized). Errors come back in err as one line naming the store,
 * the key and the cause; a secret is never part of a message. */
#ifndef EDDY_STATE_OBJECT_STORE_H
#define EDDY_STATE_OBJECT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EDDY_OBJECT_STORE_KEY_MAX 512
#define EDDY_OBJECT_STORE_SEGMENT_MAX 200

typedef struct eddy_object_store eddy_object_store_t;

/* Tuning; a zero field means its default. The file backend uses only
 * max_object_bytes. */
typedef struct eddy_object_store_opts {
    const char *endpoint;  /* S3: instead of the URI's ?endpoint= */
    long timeout_ms;       /* connect, and longest stall of a transfer (30000) */
    int max_attempts;      /* per request, 1 = no retry (5); transport errors,
                              5xx, 429 and RequestTimeout are retried */
    long backoff_ms;       /* wait before the 2nd attempt, doubling, at most 5 s (100) */
    size_t part_size;      /* multipart part size, >= 5 MiB (8 MiB) */
    size_t multipart_threshold; /* larger objects are uploaded in parts (16 MiB) */
    int list_page_size;    /* keys per ListObjectsV2 request, 1..1000 (1000) */
    size_t max_object_bytes; /* get() of a larger object is an error (2 GiB) */
} eddy_object_store_opts_t;

/* opts may be NULL. NULL with err on a bad URI, bad options or (s3) a
 * failed probe request. */
eddy_object_store_t *eddy_object_store_open(const char *uri, const eddy_object_store_opts_t *opts,
                                            eddy_err_t *err);
void eddy_object_store_destroy(eddy_object_store_t **self_p);
/* The URI the store was opened with. */
const char *eddy_object_store_uri(const eddy_object_store_t *self);

/* Stores data (len bytes; NULL only when len is 0) under key, replacing any
 * value. 0, or -1 with err. */
int eddy_object_store_put(eddy_object_store_t *self, const char *key, const void *data, size_t len,
                          eddy_err_t *err);
/* 1 with *data malloc'd (len + 1 bytes, NUL-terminated) and *len, 0 when the
 * key is absent (*data NULL), -1 with err. */
int eddy_object_store_get(eddy_object_store_t *self, const char *key, char **data, size_t *len,
                          eddy_err_t *err);
/* Removes key; an absent key is not an error. 0, or -1 with err. */
int eddy_object_store_delete(eddy_object_store_t *self, const char *key, eddy_err_t *err);

/* Called once per key; return 0 to go on, anything else to stop. */
typedef int (*eddy_object_store_list_fn)(const char *key, uint64_t size, void *ctx);
/* Every key that starts with prefix ("" for all; "JOB/chk-7/" for one
 * checkpoint), in byte order, with its size. Objects under the store's S3
 * prefix whose names are not valid keys (written by other tools) are
 * skipped. 0 when all keys were listed, 1 when fn stopped the listing, -1
 * with err (fn may have seen some keys by then). */
int eddy_object_store_list(eddy_object_store_t *self, const char *prefix,
                           eddy_object_store_list_fn fn, void *ctx, eddy_err_t *err);

/* 0 when key is valid (see above), else -1 with err saying why. */
int eddy_object_store_check_key(const char *key, eddy_err_t *err);

#endif
