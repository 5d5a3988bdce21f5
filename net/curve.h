/* curve.h - CURVE on eddy's ZeroMQ sockets, and the ZAP handler that
 * decides who may connect.
 *
 * A connecting socket (client DEALER, worker DEALER and PUSH) presents the
 * process's own key pair and checks that the server holds the cluster's
 * server key (eddy_curve_client). A listening socket (coordinator ROUTER,
 * worker PULL) is a CURVE server (eddy_zap_start): every handshake is
 * authorised by a ZAP handler (RFC 27, inproc://zeromq.zap.01) on its own
 * thread, which accepts a key listed in authorized_keys for the socket's
 * domain and hands its role name back as the ZAP User-Id, which the owner
 * reads per message with eddy_curve_role. A peer that fails the handshake
 * (no CURVE, an unknown key, bytes that are not ZMTP) is disconnected by
 * libzmq before any of its bytes reach a decoder; the handler logs it,
 * once per address and then at most once a second.
 *
 * Domains: EDDY_ZAP_CONTROL (the coordinator) admits every authorised
 * role; EDDY_ZAP_DATA (a worker's data socket) admits workers only. */
#ifndef EDDY_NET_CURVE_H
#define EDDY_NET_CURVE_H

#include <stdbool.h>
#include <zmq.h>

#include "common/err.h"
#include "net/keys.h"

#define EDDY_ZAP_CONTROL "control"
#define EDDY_ZAP_DATA "data"

/* Makes socket (not yet connected) a CURVE client with keys' own pair,
 * expecting keys' server key. keys NULL: nothing to do. */
int eddy_curve_client(void *socket, const eddy_keys_t *keys, eddy_err_t *err);

typedef struct eddy_zap eddy_zap_t;

/* Makes socket (not yet bound) a CURVE server of domain with keys' server
 * secret, and starts the ZAP handler of zctx (one per context) on its own
 * thread. keys must outlive the handler. */
eddy_zap_t *eddy_zap_start(void *zctx, const eddy_keys_t *keys, void *socket, const char *domain,
                           eddy_err_t *err);
/* Stops the handler. Call before zmq_ctx_term (or after: it ends then too). */
void eddy_zap_destroy(eddy_zap_t **self_p);

/* The role the ZAP handler gave the peer that sent msg (a received frame),
 * EDDY_ROLE_NONE for a peer that went through no ZAP handler. */
eddy_role_t eddy_curve_role(zmq_msg_t *msg);

#endif
