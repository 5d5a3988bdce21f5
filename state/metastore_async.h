/* metastore_async.h - metadata-store calls off the caller's event loop.
 *
 * The coordinator's loop must never wait on etcd (a call can take seconds
 * when etcd is slow or down). One background thread runs the queued calls
 * in submission order (FIFO), so a put followed by a delete of the same key
 * land in that order. A failed call is retried with exponential backoff
 * (100 ms doubling up to 5 s) as many times as the caller asked. Finished
 * calls queue a completion; the loop polls eddy_metastore_async_fd() for
 * readability and calls eddy_metastore_async_dispatch(), which runs the
 * callbacks on the loop's own thread, so callbacks need no locks. */
#ifndef EDDY_STATE_METASTORE_ASYNC_H
#define EDDY_STATE_METASTORE_ASYNC_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "state/metastore.h"

#define EDDY_META_RETRY_FOREVER (-1)

typedef struct eddy_metastore_async eddy_metastore_async_t;

typedef struct eddy_meta_result {
    int rc;          /* put/delete/lease calls: 0 ok, -1 failed; get: 1 found, 0 missing, -1 failed */
    const char *key; /* lease calls: the label given, NULL when none */
    char *value;     /* get: the value (NUL-terminated), valid during the callback only */
    size_t len;
    eddy_err_t err;  /* when rc == -1: the last attempt's error */
    unsigned attempts;
    int64_t lease;   /* lease calls: the lease granted or acted on */
    int64_t ttl_s;   /* grant: the TTL asked for; keepalive: the TTL left, 0 when the lease is gone */
} eddy_meta_result_t;

/* Runs on the thread that calls eddy_metastore_async_dispatch(). done may be NULL. */
typedef void (*eddy_meta_done_fn)(void *arg, const eddy_meta_result_t *res);

/* store is borrowed and must outlive the object; nobody else may use it
 * concurrently from another thread while the object exists (the loop may
 * still use it synchronously before _new and after _destroy). */
eddy_metastore_async_t *eddy_metastore_async_new(eddy_metastore_t *store, eddy_err_t *err);
/* Waits at most drain_ms for queued calls to finish (their callbacks are
 * then dispatched), abandons the rest (retries stop, callbacks not run),
 * joins the thread, frees, and NULLs *self_p. */
void eddy_metastore_async_destroy(eddy_metastore_async_t **self_p, unsigned drain_ms);

/* Readable (POLLIN) while completions wait for dispatch; for zmq_poll's fd items. */
int eddy_metastore_async_fd(const eddy_metastore_async_t *self);

/* Queue a call. key and value are copied. retries: how many times a failed
 * call is tried again before its failure is reported (0: once only;
 * EDDY_META_RETRY_FOREVER: until it succeeds or the object is destroyed). */
void eddy_metastore_async_put(eddy_metastore_async_t *self, const char *key, const char *value,
                              size_t len, int retries, eddy_meta_done_fn done, void *arg);
void eddy_metastore_async_delete(eddy_metastore_async_t *self, const char *key, int retries,
                                 eddy_meta_done_fn done, void *arg);
void eddy_metastore_async_get(eddy_metastore_async_t *self, const char *key, int retries,
                              eddy_meta_done_fn done, void *arg);

/* Leases (state/metastore_lease.h; on a store without them every call
 * fails at once saying so): queued in the same FIFO as the calls above, so a
 * grant, the put that uses the lease and a later revoke land in that order.
 * label (copied, may be NULL) is passed back as the result's key, so one
 * callback can tell whose lease a result is about; a non-NULL label must be
 * a valid key. A keepalive of a lease etcd no longer has succeeds with
 * ttl_s 0; revoking an unknown lease is not an error. */
void eddy_metastore_async_lease_grant(eddy_metastore_async_t *self, const char *label,
                                      uint32_t ttl_s, int retries, eddy_meta_done_fn done,
                                      void *arg);
void eddy_metastore_async_lease_keepalive(eddy_metastore_async_t *self, const char *label,
                                          int64_t lease, int retries, eddy_meta_done_fn done,
                                          void *arg);
void eddy_metastore_async_lease_revoke(eddy_metastore_async_t *self, const char *label,
                                       int64_t lease, int retries, eddy_meta_done_fn done,
                                       void *arg);
/* A put of key held by lease: it vanishes with the lease. */
void eddy_metastore_async_put_leased(eddy_metastore_async_t *self, const char *key,
                                     const char *value, size_t len, int64_t lease, int retries,
                                     eddy_meta_done_fn done, void *arg);

/* Runs the callbacks of finished calls, oldest first; returns how many ran. */
int eddy_metastore_async_dispatch(eddy_metastore_async_t *self);
/* Calls queued, running or finished but not yet dispatched. */
size_t eddy_metastore_async_pending(const eddy_metastore_async_t *self);

#endif
