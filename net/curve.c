/* curve.c - CURVE socket options and the ZAP handler thread (see curve.h).
 *
 * The handler is a thread, not a socket in the owner's loop, because libzmq
 * asks ZAP synchronously from its I/O thread during every handshake: a
 * worker busy running tasks for a time slice must not hold up its peers'
 * handshakes. The thread owns the ZAP REP socket and the monitor of the
 * listening socket (handshake failures that never reach ZAP: a peer without
 * CURVE, or bytes that are not ZMTP). It reads the keys only; what it
 * shares with the owner is the stop flag. */
#include "net/curve.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define POLL_MS 200
/* Distinct addresses whose first refusal is logged at once; past that,
 * refusals share one limiter (a scan of many addresses costs a line a
 * second, not a line per address). */
#define LOGGED_ADDRESSES 256

typedef struct refused {
    char address[64];
    eddy_log_limit_t limit;
} refused_t;

struct eddy_zap {
    const eddy_keys_t *keys;
    char domain[32];
    char endpoint_label[64]; /* what the monitored socket is, for log lines */
    void *rep;               /* ZAP requests */
    void *monitor;           /* PAIR: events of the listening socket */
    pthread_t thread;
    bool started;
    atomic_bool stop;
    refused_t refused[LOGGED_ADDRESSES];
    size_t n_refused;
    eddy_log_limit_t overflow_limit, protocol_limit;
};

int eddy_curve_client(void *socket, const eddy_keys_t *keys, eddy_err_t *err)
{
    if (!keys)
        return 0;
    if (zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, keys->server_public, EDDY_KEY_Z85_LEN) != 0 ||
        zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, keys->public_key, EDDY_KEY_Z85_LEN) != 0 ||
        zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys->secret_key, EDDY_KEY_Z85_LEN) != 0)
        return eddy_err_set(err, "cannot set CURVE keys: %s", zmq_strerror(errno));
    return 0;
}

eddy_role_t eddy_curve_role(zmq_msg_t *msg)
{
    const char *user = zmq_msg_gets(msg, "User-Id");
    return user ? eddy_role_parse(user) : EDDY_ROLE_NONE;
}

/* ---- the handler thread --------------------------------------------------------- */

static eddy_log_limit_t *limit_for(eddy_zap_t *self, const char *address, bool *first)
{
    for (size_t i = 0; i < self->n_refused; i++)
        if (!strcmp(self->refused[i].address, address)) {
            *first = false;
            return &self->refused[i].limit;
        }
    *first = true;
    if (self->n_refused == LOGGED_ADDRESSES)
        return &self->overflow_limit;
    refused_t *r = &self->refused[self->n_refused++];
    snprintf(r->address, sizeof r->address, "%s", address);
    return &r->limit;
}

static void log_refused(eddy_zap_t *self, const char *address, const char *why)
{
    bool first;
    eddy_log_limit_t *limit = limit_for(self, address, &first);
    eddy_log_limited(limit, EDDY_LOG_WARN, "refused a connection from %s to %s: %s%s", address,
                     self->endpoint_label, why, first ? "" : " (again)");
}

/* Copies frame i of a request (at most cap - 1 bytes) as a string. */
static void frame_string(zmq_msg_t *frames, int i, char *out, size_t cap)
{
    size_t len = zmq_msg_size(&frames[i]);
    if (len >= cap)
        len = cap - 1;
    memcpy(out, zmq_msg_data(&frames[i]), len);
    out[len] = '\0';
}

static void send_str(void *sock, const char *s, int more)
{
    zmq_send(sock, s, strlen(s), more ? ZMQ_SNDMORE : 0);
}

/* ZAP request: version, request id, domain, address, routing id, mechanism,
 * credentials...; reply: version, request id, status, text, user id,
 * metadata. */
#define ZAP_MIN_FRAMES 6
#define ZAP_MAX_FRAMES 8

static void answer_request(eddy_zap_t *self)
{
    zmq_msg_t frames[ZAP_MAX_FRAMES];
    int n = 0;
    bool more = true, oversized = false;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, self->rep, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            break;
        }
        more = zmq_msg_more(&part);
        if (n < ZAP_MAX_FRAMES)
            frames[n++] = part;
        else {
            oversized = true;
            zmq_msg_close(&part);
        }
    }
    if (n == 0)
        return;
    char version[8] = "", domain[32] = "", address[64] = "", mechanism[16] = "";
    if (n >= ZAP_MIN_FRAMES) {
        frame_string(frames, 0, version, sizeof version);
        frame_string(frames, 2, domain, sizeof domain);
        frame_string(frames, 3, address, sizeof address);
        frame_string(frames, 5, mechanism, sizeof mechanism);
    }
    eddy_role_t role = EDDY_ROLE_NONE;
    const char *why = "not an authorised key";
    if (!oversized && n == 7 && !strcmp(mechanism, "CURVE") &&
        zmq_msg_size(&frames[6]) == EDDY_KEY_BIN_LEN) {
        role = eddy_keys_role_of(self->keys, zmq_msg_data(&frames[6]));
        if (role != EDDY_ROLE_NONE && !strcmp(domain, EDDY_ZAP_DATA) && role != EDDY_ROLE_WORKER) {
            why = "only worker keys may send data";
            role = EDDY_ROLE_NONE;
        }
    } else {
        why = "not a CURVE handshake";
    }
    if (role == EDDY_ROLE_NONE)
        log_refused(self, address[0] ? address : "?", why);
    /* libzmq sends well-formed requests; the reply must echo the id */
    send_str(self->rep, "1.0", 1);
    if (n >= 2)
        zmq_send(self->rep, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]), ZMQ_SNDMORE);
    else
        send_str(self->rep, "", 1);
    send_str(self->rep, role != EDDY_ROLE_NONE ? "200" : "400", 1);
    send_str(self->rep, role != EDDY_ROLE_NONE ? "OK" : why, 1);
    send_str(self->rep, role != EDDY_ROLE_NONE ? eddy_role_name(role) : "", 1);
    send_str(self->rep, "", 0);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&frames[i]);
}

/* A monitor event: [u16 event, u32 value] then the endpoint. */
static void read_event(eddy_zap_t *self)
{
    zmq_msg_t head, addr;
    zmq_msg_init(&head);
    if (zmq_msg_recv(&head, self->monitor, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&head);
        return;
    }
    uint16_t event = 0;
    uint32_t value = 0;
    if (zmq_msg_size(&head) >= 2)
        memcpy(&event, zmq_msg_data(&head), 2);
    if (zmq_msg_size(&head) >= 6)
        memcpy(&value, (const char *)zmq_msg_data(&head) + 2, 4);
    bool more = zmq_msg_more(&head);
    zmq_msg_close(&head);
    while (more) {
        zmq_msg_init(&addr);
        if (zmq_msg_recv(&addr, self->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&addr);
            break;
        }
        more = zmq_msg_more(&addr);
        zmq_msg_close(&addr);
    }
    /* libzmq names the listening endpoint here, not the peer (the ZAP
     * request, which names the peer, comes only after a CURVE hello) */
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        eddy_log_limited(&self->protocol_limit, EDDY_LOG_WARN,
                         "refused a connection to %s: its handshake was not CURVE with this "
                         "cluster's keys (a peer without --keys, or not ZeroMQ)",
                         self->endpoint_label);
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
        char buf[128];
        /* also a peer that hung up mid-handshake (a client that moved on to
         * the leader, a port probe): not necessarily a key problem */
        eddy_log_limited(&self->protocol_limit, EDDY_LOG_WARN,
                         "refused a connection to %s: its handshake failed (%s): a peer "
                         "without --keys, not ZeroMQ, or one that hung up during it",
                         self->endpoint_label,
                         value ? strerror_r((int)value, buf, sizeof buf) : "no detail");
    }
}

static void *run(void *arg)
{
    eddy_zap_t *self = arg;
    while (!atomic_load(&self->stop)) {
        zmq_pollitem_t items[2] = {{self->rep, 0, ZMQ_POLLIN, 0},
                                   {self->monitor, 0, ZMQ_POLLIN, 0}};
        int rc = zmq_poll(items, self->monitor ? 2 : 1, POLL_MS);
        if (rc < 0 && errno == ETERM)
            break;
        if (rc <= 0)
            continue;
        if (items[0].revents & ZMQ_POLLIN)
            answer_request(self);
        if (self->monitor && (items[1].revents & ZMQ_POLLIN))
            read_event(self);
    }
    zmq_close(self->rep);
    if (self->monitor)
        zmq_close(self->monitor);
    return NULL;
}

eddy_zap_t *eddy_zap_start(void *zctx, const eddy_keys_t *keys, void *socket, const char *domain,
                           eddy_err_t *err)
{
    if (keys->use != EDDY_KEYS_SERVER) {
        eddy_err_set(err, "a listening socket needs the server keys");
        return NULL;
    }
    eddy_zap_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->keys = keys;
    snprintf(self->domain, sizeof self->domain, "%s", domain);
    snprintf(self->endpoint_label, sizeof self->endpoint_label, "the %s socket", domain);
    int server = 1;
    if (zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &server, sizeof server) != 0 ||
        zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys->secret_key, EDDY_KEY_Z85_LEN) != 0 ||
        zmq_setsockopt(socket, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) != 0) {
        eddy_err_set(err, "cannot make the %s socket a CURVE server: %s", domain,
                     zmq_strerror(errno));
        goto fail;
    }
    self->rep = zmq_socket(zctx, ZMQ_REP);
    int linger = 0;
    if (self->rep)
        zmq_setsockopt(self->rep, ZMQ_LINGER, &linger, sizeof linger);
    if (!self->rep || zmq_bind(self->rep, ZAP_ENDPOINT) != 0) {
        eddy_err_set(err, "cannot start the ZAP handler: %s", zmq_strerror(errno));
        goto fail;
    }
    /* the monitor is best effort: refusals are logged by ZAP regardless */
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://eddy-curve-monitor-%p", (void *)self);
    if (zmq_socket_monitor(socket, mon,
                           ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0) {
        self->monitor = zmq_socket(zctx, ZMQ_PAIR);
        if (self->monitor) {
            zmq_setsockopt(self->monitor, ZMQ_LINGER, &linger, sizeof linger);
            if (zmq_connect(self->monitor, mon) != 0) {
                zmq_close(self->monitor);
                self->monitor = NULL;
            }
        }
    }
    /* sockets move to the thread: pthread_create is the memory barrier
     * ZeroMQ asks for when a socket changes threads */
    if (pthread_create(&self->thread, NULL, run, self) != 0) {
        eddy_err_set(err, "cannot start the ZAP handler thread");
        goto fail;
    }
    self->started = true;
    return self;
fail:
    if (self->monitor)
        zmq_close(self->monitor);
    if (self->rep)
        zmq_close(self->rep);
    free(self);
    return NULL;
}

void eddy_zap_destroy(eddy_zap_t **self_p)
{
    eddy_zap_t *self = *self_p;
    if (!self)
        return;
    atomic_store(&self->stop, true);
    if (self->started)
        pthread_join(self->thread, NULL);
    free(self);
    *self_p = NULL;
}
