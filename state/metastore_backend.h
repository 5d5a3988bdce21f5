/* metastore_backend.h - private seam between metastore.c and its backends.
 *
 * metastore.c owns everything the backends share: URL parsing, validation of
 * keys and prefixes, the lock that serializes calls, and eddy_kv_list_t
 * bookkeeping. A backend only moves bytes: it gets keys that are already
 * known to be valid (non-empty printable ASCII, at most
 * EDDY_METASTORE_KEY_MAX bytes) and implements the operations below with the
 * same return conventions as the public functions in metastore.h.
 * Not installed, not for use outside state/metastore*.c. */
#ifndef EDDY_STATE_METASTORE_BACKEND_H
#define EDDY_STATE_METASTORE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "state/metastore.h"

typedef struct eddy_metastore_ops {
    const char *name; /* "file" or "etcd", for messages */
    int (*put)(void *impl, const char *key, const void *value, size_t len, eddy_err_t *err);
    int (*get)(void *impl, const char *key, char **value, size_t *len, eddy_err_t *err);
    int (*del)(void *impl, const char *key, eddy_err_t *err);
    /* Fills an empty *out; need not sort (metastore.c sorts). On error the
     * backend leaves *out empty. */
    int (*list)(void *impl, const char *prefix, eddy_kv_list_t *out, eddy_err_t *err);
    void (*destroy)(void **impl_p);
    /* eddy_metastore_lock; NULL: nothing to claim */
    int (*lock)(void *impl, eddy_err_t *err);
    /* Leases, create-if-absent and fencing (state/metastore_lease.h); NULL
     * in a backend without them (the file store). Same conventions. */
    int (*lease_grant)(void *impl, uint32_t ttl_s, int64_t *lease, eddy_err_t *err);
    int (*lease_keepalive)(void *impl, int64_t lease, int64_t *ttl_s, eddy_err_t *err);
    int (*lease_revoke)(void *impl, int64_t lease, eddy_err_t *err);
    int (*create_leased)(void *impl, const char *key, const void *value, size_t len,
                         int64_t lease, int64_t *create_rev, char **holder, eddy_err_t *err);
    int (*get_rev)(void *impl, const char *key, char **value, size_t *len, int64_t *create_rev,
                   eddy_err_t *err);
    int (*set_fence)(void *impl, const char *key, int64_t create_rev, eddy_err_t *err);
    /* put of key held by lease (fenced like put) */
    int (*put_leased)(void *impl, const char *key, const void *value, size_t len, int64_t lease,
                      eddy_err_t *err);
} eddy_metastore_ops_t;

/* Embedded store rooted at dir (created, with parents, if missing). */
void *eddy_metastore_file_open(const char *dir, eddy_err_t *err);
extern const eddy_metastore_ops_t eddy_metastore_file_ops;

/* etcd v3 JSON gateway at base_url ("http://host:port" or "https://...", no
 * trailing '/'); tls (may be NULL) only with https, checked by metastore.c.
 * display is how errors name the store (the URL the user gave). Checks
 * reachability before returning; on failure *unreachable (may be NULL) says
 * etcd did not answer at all, which may pass by waiting. */
void *eddy_metastore_etcd_open(const char *base_url, const char *display, long timeout_ms,
                               const eddy_metastore_tls_t *tls, bool *unreachable,
                               eddy_err_t *err);
extern const eddy_metastore_ops_t eddy_metastore_etcd_ops;

/* Appends one item to list, taking ownership of key and value (a
 * NUL-terminated buffer of len + 1 bytes). *cap is the allocated capacity of
 * list->items (0 for an empty list). On failure frees key and value and
 * returns -1; the list keeps what it had. */
int eddy_kv_list_push(eddy_kv_list_t *list, size_t *cap, char *key, char *value, size_t len,
                      eddy_err_t *err);

#endif
