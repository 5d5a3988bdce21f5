/* client.c - the coordinator's request/reply client (see client.h): one
 * DEALER per call, the request sent, the REPLY awaited with a deadline;
 * anything else that arrives is skipped. Used by the CLI and the controller. */
#include "net/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/clock.h"
#include "net/curve.h"
#include "net/zrecv.h"

const char *eddy_client_default_coordinator(void)
{
    const char *env = getenv("EDDY_COORDINATOR");
    return env && *env ? env : EDDY_CLIENT_DEFAULT_COORDINATOR;
}

int eddy_client_call(const char *coordinator, const eddy_keys_t *keys, const char *verb, int argc,
                     char **argv, uint32_t timeout_ms, int64_t *status, char **body,
                     eddy_err_t *err)
{
    eddy_msg_t req = {.type = EDDY_MSG_REQUEST};
    snprintf(req.u.request.verb, sizeof req.u.request.verb, "%s", verb);
    req.u.request.argc = (uint32_t)argc;
    req.u.request.argv = argv;
    return eddy_client_send(coordinator, keys, &req, timeout_ms, status, body, err);
}

/* A failed handshake, from the socket's monitor: the reason in one line, or
 * NULL for any other event. */
static const char *handshake_failure(void *monitor, const eddy_keys_t *keys)
{
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, monitor, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&part);
        return NULL;
    }
    uint16_t event = 0;
    if (zmq_msg_size(&part) >= 2)
        memcpy(&event, zmq_msg_data(&part), 2);
    while (zmq_msg_more(&part)) {
        zmq_msg_close(&part);
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, monitor, ZMQ_DONTWAIT) < 0)
            break;
    }
    zmq_msg_close(&part);
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return "the coordinator refused this key (it is not in its authorized_keys)";
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        return keys ? "the CURVE handshake failed (the coordinator runs without --keys, or with "
                      "another cluster's keys)"
                    : "the handshake failed (the coordinator requires CURVE keys: use --keys DIR "
                      "or EDDY_KEYS)";
    return NULL;
}

int eddy_client_send(const char *coordinator, const eddy_keys_t *keys, const eddy_msg_t *req,
                     uint32_t timeout_ms, int64_t *status, char **body, eddy_err_t *err)
{
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    void *monitor = NULL;
    int linger = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    int rc = -1;
    if (eddy_curve_client(sock, keys, err) < 0)
        goto out;
    /* A refused handshake is retried by libzmq forever and looks like
     * silence: the monitor turns it into an error that says why. */
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://eddy-client-monitor-%p", sock);
    if (zmq_socket_monitor(sock, mon,
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0) {
        monitor = zmq_socket(ctx, ZMQ_PAIR);
        zmq_setsockopt(monitor, ZMQ_LINGER, &linger, sizeof linger);
        if (zmq_connect(monitor, mon) != 0) {
            zmq_close(monitor);
            monitor = NULL;
        }
    }
    if (zmq_connect(sock, coordinator) != 0) {
        eddy_err_set(err, "invalid coordinator address '%s': %s", coordinator, zmq_strerror(errno));
        goto out;
    }
    size_t len;
    char *data = eddy_msg_encode(req, &len);
    zmq_send(sock, data, len, 0);
    free(data);
    uint64_t deadline = eddy_mono_ms() + timeout_ms;
    for (;;) {
        uint64_t now = eddy_mono_ms();
        if (now >= deadline) {
            eddy_err_set(err, "no reply from the coordinator at %s within %u ms (is it running?)",
                         coordinator, timeout_ms);
            goto out;
        }
        zmq_pollitem_t items[2] = {{sock, 0, ZMQ_POLLIN, 0}, {monitor, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, monitor ? 2 : 1, (long)(deadline - now)) <= 0)
            continue;
        if (monitor && (items[1].revents & ZMQ_POLLIN)) {
            const char *why = handshake_failure(monitor, keys);
            if (why) {
                eddy_err_set(err, "no reply from the coordinator at %s: %s", coordinator, why);
                goto out;
            }
        }
        if (!(items[0].revents & ZMQ_POLLIN))
            continue;
        zmq_msg_t z;
        eddy_err_t rerr;
        if (eddy_zrecv(sock, &z, EDDY_ZRECV_FRAMES_PLAIN, EDDY_ZRECV_MAX_CONTROL, &rerr) !=
            EDDY_ZRECV_OK)
            continue; /* nothing yet, or a malformed message: wait for the reply */
        eddy_msg_t m;
        int d = eddy_msg_decode(zmq_msg_data(&z), zmq_msg_size(&z), &m, err);
        zmq_msg_close(&z);
        if (d < 0)
            goto out;
        if (m.type != EDDY_MSG_REPLY) {
            eddy_msg_clear(&m);
            continue;
        }
        *status = m.u.reply.status;
        *body = m.u.reply.body ? m.u.reply.body : strdup("");
        m.u.reply.body = NULL;
        eddy_msg_clear(&m);
        rc = 0;
        break;
    }
out:
    if (monitor) {
        zmq_socket_monitor(sock, NULL, 0);
        zmq_close(monitor);
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return rc;
}
