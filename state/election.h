/* election.h - one leader among several coordinators, by an etcd lease.
 *
 * A background thread (its own store handle, so a slow etcd never stalls
 * the caller's loop) campaigns: it grants a lease of ttl_ms, creates the
 * leader key holding this process's endpoint with that lease if the key is
 * absent (a txn), and keeps the lease alive every ttl/3. The leader epoch is
 * the key's create revision: etcd revisions only grow, so every new leader
 * has a higher epoch than any before it. Standbys read the key every
 * poll_ms to know the leader, and campaign when it is gone (its lease
 * expired or was revoked).
 *
 * Leadership is trusted only until valid_until: the time the last
 * successful keepalive (or the grant) was *sent*, plus the TTL etcd
 * returned, minus a margin. etcd counts the TTL from when it received the
 * request, so this process stops believing it leads before etcd can give
 * the key to anyone else. A process paused (SIGSTOP) past that deadline sees
 * it expired the moment it runs again, before it acts. Once lost, a
 * leadership is never regained by the same campaign: the caller steps down
 * and starts a new election object. */
#ifndef EDDY_STATE_ELECTION_H
#define EDDY_STATE_ELECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "state/metastore.h"

#define EDDY_LEADER_KEY "/eddy/leader"
#define EDDY_ELECTION_ENDPOINT_MAX 256

typedef struct eddy_election eddy_election_t;

typedef struct eddy_election_view {
    bool leader;          /* this process leads and its lease is still valid */
    bool lost;            /* it led, and no longer does: step down */
    int64_t epoch;        /* when leader: the leader key's create revision */
    char leader_endpoint[EDDY_ELECTION_ENDPOINT_MAX]; /* "" when nobody is known to lead */
    char last_error[512]; /* the last store failure, "" when none */
} eddy_election_view_t;

/* Starts campaigning on store_url (with tls, may be NULL: as
 * eddy_metastore_open_tls) for endpoint (what clients and workers are told
 * to use). The thread opens its own store handle and keeps retrying while
 * the store is unreachable. */
eddy_election_t *eddy_election_new(const char *store_url, const eddy_metastore_tls_t *tls,
                                   const char *endpoint, uint32_t ttl_ms, eddy_err_t *err);
/* The same, campaigning only after holdoff_ms (a leader that stepped down
 * lets a standby win first). */
eddy_election_t *eddy_election_new_after(const char *store_url, const eddy_metastore_tls_t *tls,
                                         const char *endpoint, uint32_t ttl_ms,
                                         uint32_t holdoff_ms, eddy_err_t *err);
/* A standby's report of the workers that came to it (JSON text, copied):
 * the campaign thread writes it to EDDY_STANDBY_HEARD_KEY after its next
 * round, off the caller's loop. A later report replaces an unwritten one. */
#define EDDY_STANDBY_HEARD_KEY "/eddy/standby/heard"
void eddy_election_report(eddy_election_t *self, const char *json);
/* Stops the thread; a leader revokes its lease (best effort, bounded by the
 * store's timeout) so a standby takes over at once. */
void eddy_election_destroy(eddy_election_t **self_p);
/* A consistent snapshot; `leader` is checked against the deadline now. */
void eddy_election_view(eddy_election_t *self, eddy_election_view_t *out);
/* The fast check for every loop turn: leader with an unexpired lease. */
bool eddy_election_leading(eddy_election_t *self);

#endif
