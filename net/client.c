/* client.c - the coordinator's request/reply client (see client.h).
 *
 * The coordinator may be a comma-separated list (several coordinators, one
 * leader): the request goes to every listed endpoint at once, one DEALER
 * each. Standbys never act on it; they answer EDDY_STATUS_NOT_LEADER naming
 * the leader, which is then asked too if it was not listed. The first
 * other answer is the reply. While no leader is elected (a failover), the
 * request is sent again to those that said so, until the deadline. Anything
 * that is not a REPLY is skipped. Used by the CLI and the controller. */
#include "net/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/clock.h"
#include "net/curve.h"
#include "net/zrecv.h"

#define MAX_TARGETS EDDY_MAX_COORDINATORS
#define RESEND_MS 300

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

int eddy_client_split(const char *list, char out[][EDDY_ENDPOINT_MAX], int max)
{
    int n = 0;
    const char *p = list;
    while (p && *p && n < max) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len && len < EDDY_ENDPOINT_MAX) {
            memcpy(out[n], p, len);
            out[n][len] = '\0';
            n++;
        }
        p = comma ? comma + 1 : NULL;
    }
    return n;
}

typedef struct target {
    char endpoint[EDDY_ENDPOINT_MAX];
    void *sock;
    void *monitor;        /* its failed handshakes (NULL: none) */
    bool not_leader;      /* answered "not leader": ask again later */
    const char *refused;  /* why its handshake failed (NULL: it did not) */
    uint64_t asked_ms;
} target_t;

/* A failed handshake, from a socket's monitor: the reason in one line, or
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

/* A refused handshake is retried by libzmq forever and looks like silence:
 * the monitor turns it into an error that says why. */
static void *watch_handshake(void *ctx, void *sock)
{
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://eddy-client-monitor-%p", sock);
    if (zmq_socket_monitor(sock, mon,
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0)
        return NULL;
    void *monitor = zmq_socket(ctx, ZMQ_PAIR);
    int linger = 0;
    zmq_setsockopt(monitor, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(monitor, mon) != 0) {
        zmq_close(monitor);
        return NULL;
    }
    return monitor;
}

static int add_target(void *ctx, const eddy_keys_t *keys, target_t *t, int *n, const char *endpoint,
                      eddy_err_t *err)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(t[i].endpoint, endpoint))
            return i;
    if (*n >= MAX_TARGETS)
        return -1;
    target_t *x = &t[*n];
    memset(x, 0, sizeof *x);
    snprintf(x->endpoint, sizeof x->endpoint, "%s", endpoint);
    x->sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(x->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (eddy_curve_client(x->sock, keys, err) < 0) {
        zmq_close(x->sock);
        return -2;
    }
    x->monitor = watch_handshake(ctx, x->sock);
    if (zmq_connect(x->sock, endpoint) != 0) {
        eddy_err_set(err, "invalid coordinator address '%s': %s", endpoint, zmq_strerror(errno));
        zmq_close(x->sock);
        if (x->monitor)
            zmq_close(x->monitor);
        return -2;
    }
    return (*n)++;
}

int eddy_client_send(const char *coordinator, const eddy_keys_t *keys, const eddy_msg_t *req,
                     uint32_t timeout_ms, int64_t *status, char **body, eddy_err_t *err)
{
    char listed[MAX_TARGETS][EDDY_ENDPOINT_MAX];
    int n_listed = eddy_client_split(coordinator, listed, MAX_TARGETS);
    if (n_listed == 0)
        return eddy_err_set(err, "invalid coordinator address '%s'", coordinator);
    void *ctx = zmq_ctx_new();
    target_t t[MAX_TARGETS];
    int n = 0, rc = -1;
    size_t len;
    char *data = eddy_msg_encode(req, &len);
    char last_not_leader[EDDY_ERROR_MAX] = "";
    for (int i = 0; i < n_listed; i++)
        if (add_target(ctx, keys, t, &n, listed[i], err) == -2)
            goto out;
    for (int i = 0; i < n; i++) {
        zmq_send(t[i].sock, data, len, 0);
        t[i].asked_ms = eddy_mono_ms();
    }
    uint64_t deadline = eddy_mono_ms() + timeout_ms;
    for (;;) {
        uint64_t now = eddy_mono_ms();
        if (now >= deadline) {
            const target_t *r = NULL;
            for (int i = 0; i < n && !r; i++)
                r = t[i].refused ? &t[i] : NULL;
            if (last_not_leader[0])
                eddy_err_set(err, "no leader among the coordinators at %s within %u ms: %s",
                             coordinator, timeout_ms, last_not_leader);
            else if (r)
                eddy_err_set(err, "no reply from the coordinators at %s within %u ms; %s: %s",
                             coordinator, timeout_ms, r->endpoint, r->refused);
            else
                eddy_err_set(err, "no reply from the coordinator at %s within %u ms (is it running?)",
                             coordinator, timeout_ms);
            goto out;
        }
        for (int i = 0; i < n; i++)
            if (t[i].not_leader && now - t[i].asked_ms >= RESEND_MS) {
                t[i].not_leader = false;
                t[i].asked_ms = now;
                zmq_send(t[i].sock, data, len, 0);
            }
        zmq_pollitem_t items[2 * MAX_TARGETS];
        for (int i = 0; i < n; i++) {
            items[i] = (zmq_pollitem_t){t[i].sock, 0, ZMQ_POLLIN, 0};
            items[n + i] = (zmq_pollitem_t){t[i].monitor, 0, t[i].monitor ? ZMQ_POLLIN : 0, 0};
        }
        long wait = (long)(deadline - now);
        if (wait > 50)
            wait = 50;
        if (zmq_poll(items, 2 * n, wait) <= 0)
            continue;
        int refused = 0;
        for (int i = 0; i < n; i++) {
            const char *why = (items[n + i].revents & ZMQ_POLLIN) ? handshake_failure(t[i].monitor, keys) : NULL;
            if (why)
                t[i].refused = why;
            refused += t[i].refused != NULL;
        }
        /* One refusing coordinator of a list may be a stale entry: fail
         * when every one has refused (the same keys go to all of them). */
        if (refused == n) {
            eddy_err_set(err, "no reply from the coordinator%s at %s: %s", n > 1 ? "s" : "",
                         n > 1 ? coordinator : t[0].endpoint, t[0].refused);
            goto out;
        }
        for (int i = 0; i < n; i++) {
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            zmq_msg_t z;
            eddy_err_t rerr;
            if (eddy_zrecv(t[i].sock, &z, EDDY_ZRECV_FRAMES_PLAIN, EDDY_ZRECV_MAX_CONTROL, &rerr) !=
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
            if (m.u.reply.status == EDDY_STATUS_NOT_LEADER) {
                const char *b = m.u.reply.body ? m.u.reply.body : "";
                snprintf(last_not_leader, sizeof last_not_leader, "%s", b);
                t[i].not_leader = true;
                size_t plen = strlen(EDDY_NOT_LEADER_PREFIX);
                if (!strncmp(b, EDDY_NOT_LEADER_PREFIX, plen) && b[plen]) {
                    int before = n;
                    int k = add_target(ctx, keys, t, &n, b + plen, err);
                    if (k >= before) { /* a leader not in the list: ask it */
                        zmq_send(t[k].sock, data, len, 0);
                        t[k].asked_ms = eddy_mono_ms();
                    }
                }
                eddy_msg_clear(&m);
                continue;
            }
            *status = m.u.reply.status;
            *body = m.u.reply.body ? m.u.reply.body : strdup("");
            m.u.reply.body = NULL;
            eddy_msg_clear(&m);
            rc = 0;
            goto out;
        }
    }
out:
    free(data);
    for (int i = 0; i < n; i++) {
        zmq_close(t[i].sock);
        if (t[i].monitor)
            zmq_close(t[i].monitor);
    }
    zmq_ctx_term(ctx);
    return rc;
}
