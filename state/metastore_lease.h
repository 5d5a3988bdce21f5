/* metastore_lease.h - leases, create-if-absent and fenced writes: what a
 * leader election needs from the metadata store (state/election.h).
 *
 * Only etcd has them (its v3 lease and txn APIs through the JSON gateway);
 * on the file store every call fails saying so, and has_leases is false,
 * so callers keep one coordinator there as before.
 *
 * Fencing: after eddy_metastore_set_fence(store, key, rev), every put and
 * delete through that handle is an etcd txn that succeeds only while key's
 * create revision is still rev (the leader key this process created); a
 * deposed leader's late write fails with "fenced" instead of landing. */
#ifndef EDDY_STATE_METASTORE_LEASE_H
#define EDDY_STATE_METASTORE_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "state/metastore.h"

bool eddy_metastore_has_leases(const eddy_metastore_t *self);
/* A lease of ttl_s seconds (etcd may raise it to its minimum). */
int eddy_metastore_lease_grant(eddy_metastore_t *self, uint32_t ttl_s, int64_t *lease,
                               eddy_err_t *err);
/* Refreshes lease; *ttl_s is its TTL from now, 0 when the lease is gone. */
int eddy_metastore_lease_keepalive(eddy_metastore_t *self, int64_t lease, int64_t *ttl_s,
                                   eddy_err_t *err);
/* Revoking an unknown lease is not an error. */
int eddy_metastore_lease_revoke(eddy_metastore_t *self, int64_t lease, eddy_err_t *err);
/* Creates key = value held by lease (0: none) unless key exists. 1: created,
 * *create_rev its create revision; 0: it existed, *create_rev its create
 * revision and *holder (malloc'd, may be NULL) its value; -1: error. */
int eddy_metastore_create_leased(eddy_metastore_t *self, const char *key, const void *value,
                                 size_t len, int64_t lease, int64_t *create_rev, char **holder,
                                 eddy_err_t *err);
/* eddy_metastore_put of key held by lease: the key vanishes when the lease
 * expires or is revoked. A put with another lease moves the key onto it.
 * Fenced like every put (see eddy_metastore_set_fence). */
int eddy_metastore_put_leased(eddy_metastore_t *self, const char *key, const void *value,
                              size_t len, int64_t lease, eddy_err_t *err);
/* eddy_metastore_get that also returns the key's create revision (0 when absent). */
int eddy_metastore_get_rev(eddy_metastore_t *self, const char *key, char **value, size_t *len,
                           int64_t *create_rev, eddy_err_t *err);
/* Fences every later put and delete on key's create revision (0: no fence). */
int eddy_metastore_set_fence(eddy_metastore_t *self, const char *key, int64_t create_rev,
                             eddy_err_t *err);

#endif
