/* peer.c - messages of a hand-made worker for the integration tests (see
 * peer.h): it owns only the building and sending, never a test's
 * protocol, so each test keeps the misbehaviour it is about. */
#include "tests/support/peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zmq.h>

eddy_msg_t eddy_test_peer_registration(const char *name, const char *data_endpoint,
                                       const char *host)
{
    eddy_msg_t reg = {.type = EDDY_MSG_REGISTER};
    snprintf(reg.u.reg.name, sizeof reg.u.reg.name, "%s", name);
    snprintf(reg.u.reg.data_endpoint, sizeof reg.u.reg.data_endpoint, "%s", data_endpoint);
    snprintf(reg.u.reg.host, sizeof reg.u.reg.host, "%s", host);
    reg.u.reg.pid = getpid();
    reg.u.reg.protocol_version = EDDY_PROTOCOL_VERSION;
    return reg;
}

int eddy_test_peer_send(void *sock, const eddy_msg_t *m)
{
    size_t len;
    char *data = eddy_msg_encode(m, &len);
    if (!data)
        return -1;
    int rc = zmq_send(sock, data, len, ZMQ_DONTWAIT);
    free(data);
    return rc == (int)len ? 0 : -1;
}
