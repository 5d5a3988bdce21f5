/* peer.h - a hand-made peer of the coordinator for the tests that play a
 * misbehaving worker over a plain DEALER socket: the REGISTER message a
 * worker sends and a fire-and-forget send of any message. One copy for
 * the tests that had their own (coordinator recovery, dashboard XSS). */
#ifndef EDDY_TESTS_SUPPORT_PEER_H
#define EDDY_TESTS_SUPPORT_PEER_H

#include "net/proto.h"

/* A REGISTER as a worker named `name` with this data endpoint and host
 * sends it (this process's pid, the current protocol version). */
eddy_msg_t eddy_test_peer_registration(const char *name, const char *data_endpoint,
                                       const char *host);
/* Encodes m and sends it on sock without blocking; 0, or -1 when it could
 * not be encoded or sent. */
int eddy_test_peer_send(void *sock, const eddy_msg_t *m);

#endif
