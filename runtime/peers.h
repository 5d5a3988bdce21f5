/* peers.h - the worker's data-plane connections to other workers.
 *
 * One ZeroMQ PUSH socket per peer worker id, in a table that grows with the
 * cluster. A send is never lost silently: a message ZeroMQ cannot take now
 * (EAGAIN, EINTR) waits in the peer's queue, behind which later messages to
 * that peer line up (per-channel order is kept), and eddy_peers_retry(),
 * called from the worker loop, hands them on. A message that cannot be sent
 * at all (no address for the peer, or a ZeroMQ error) goes to the failed
 * callback, so the caller can fail the task that sent it. Single thread. */
#ifndef EDDY_RUNTIME_PEERS_H
#define EDDY_RUNTIME_PEERS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "net/keys.h"

typedef struct eddy_peers eddy_peers_t;

/* A message that could not be sent: data/len are valid during the call. */
typedef void (*eddy_send_failed_fn)(void *arg, uint32_t worker_id, const void *data, size_t len,
                                    const char *error);

/* send_hwm: the PUSH sockets' ZMQ_SNDHWM (0: unlimited; the worker bounds
 * its queues with credits). */
eddy_peers_t *eddy_peers_new(void *zctx, int send_hwm, eddy_send_failed_fn failed, void *arg,
                             eddy_err_t *err);
/* Peer sockets made from now on speak CURVE with keys (net/curve.h;
 * NULL: plain). keys must outlive self. */
void eddy_peers_set_keys(eddy_peers_t *self, const eddy_keys_t *keys);
void eddy_peers_destroy(eddy_peers_t **self_p);
/* Connects to peer id at endpoint (reconnects when the endpoint changed). */
int eddy_peers_set(eddy_peers_t *self, uint32_t id, const char *endpoint, eddy_err_t *err);
/* Sends or queues; takes ownership of data (malloc'd). */
void eddy_peers_send(eddy_peers_t *self, uint32_t id, char *data, size_t len);
/* Hands queued messages on; returns how many are still queued. */
size_t eddy_peers_retry(eddy_peers_t *self);
size_t eddy_peers_queued(const eddy_peers_t *self);
uint32_t eddy_peers_count(const eddy_peers_t *self);

#endif
