/* object_store_backend.h - private seam between object_store.c and its
 * backends (object_store_file.c, object_store_s3.c).
 *
 * object_store.c parses URIs, fills in default options, validates keys and
 * prefixes and prefixes every message with the store's URI; a backend gets
 * valid keys and resolved options and implements the operations with the
 * return conventions of object_store.h. Not for use outside
 * state/object_store*.c. */
#ifndef EDDY_STATE_OBJECT_STORE_BACKEND_H
#define EDDY_STATE_OBJECT_STORE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "state/object_store.h"

typedef struct eddy_object_store_ops {
    const char *name; /* "file" or "s3" */
    int (*put)(void *impl, const char *key, const void *data, size_t len, eddy_err_t *err);
    int (*get)(void *impl, const char *key, char **data, size_t *len, eddy_err_t *err);
    int (*del)(void *impl, const char *key, eddy_err_t *err);
    int (*list)(void *impl, const char *prefix, eddy_object_store_list_fn fn, void *ctx,
                eddy_err_t *err);
    void (*destroy)(void **impl_p);
} eddy_object_store_ops_t;

/* Keys and prefixes: see object_store.h. A prefix may be empty, may end in
 * '/' and its last segment may be partial. */
int eddy_object_store_check_prefix(const char *prefix, eddy_err_t *err);

/* Store rooted at dir, an existing directory (absolute, no trailing '/'). */
void *eddy_object_store_file_open(const char *dir, const eddy_object_store_opts_t *opts,
                                  eddy_err_t *err);
extern const eddy_object_store_ops_t eddy_object_store_file_ops;

/* Where an s3:// URI points, parsed by object_store.c. */
typedef struct eddy_s3_location {
    const char *bucket;   /* valid S3 bucket name */
    const char *prefix;   /* "" or valid key, without trailing '/' */
    const char *endpoint; /* "http(s)://host[:port][/path]", no trailing '/' */
    const char *region;
} eddy_s3_location_t;

/* Reads the credentials from the environment and probes the bucket. */
void *eddy_object_store_s3_open(const eddy_s3_location_t *loc, const eddy_object_store_opts_t *opts,
                                eddy_err_t *err);
extern const eddy_object_store_ops_t eddy_object_store_s3_ops;

#endif
