/* peers.c - peer table and per-peer send queues (see peers.h).
 *
 * Messages go out zero-copy (zmq_msg_init_data with free() as destructor).
 * A message ZeroMQ refused stays a zmq_msg_t in the peer's queue: a failed
 * zmq_msg_send leaves it untouched and still ours. */
#include "runtime/peers.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "net/curve.h"
#include "net/proto.h"

typedef struct queued {
    struct queued *next;
    zmq_msg_t msg;
} queued_t;

typedef struct peer {
    uint32_t id;
    char endpoint[EDDY_ENDPOINT_MAX];
    void *push;
    queued_t *head, *tail;
} peer_t;

struct eddy_peers {
    void *zctx;
    const eddy_keys_t *keys;
    int send_hwm;
    eddy_send_failed_fn failed;
    void *arg;
    peer_t *peers;
    uint32_t count, cap;
    size_t queued;
};

static void free_buffer(void *data, void *hint)
{
    (void)hint;
    free(data);
}

eddy_peers_t *eddy_peers_new(void *zctx, int send_hwm, eddy_send_failed_fn failed, void *arg,
                             eddy_err_t *err)
{
    eddy_peers_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->zctx = zctx;
    self->send_hwm = send_hwm;
    self->failed = failed;
    self->arg = arg;
    return self;
}

static void fail_message(eddy_peers_t *self, uint32_t id, zmq_msg_t *m, const char *error)
{
    self->failed(self->arg, id, zmq_msg_data(m), zmq_msg_size(m), error);
    zmq_msg_close(m);
}

/* Fails everything queued for p (its socket is gone or broken). */
static void fail_queue(eddy_peers_t *self, peer_t *p, const char *error)
{
    while (p->head) {
        queued_t *q = p->head;
        p->head = q->next;
        fail_message(self, p->id, &q->msg, error);
        free(q);
        self->queued--;
    }
    p->tail = NULL;
}

void eddy_peers_set_keys(eddy_peers_t *self, const eddy_keys_t *keys)
{
    self->keys = keys;
}

void eddy_peers_destroy(eddy_peers_t **self_p)
{
    eddy_peers_t *self = *self_p;
    if (!self)
        return;
    for (uint32_t i = 0; i < self->count; i++) {
        peer_t *p = &self->peers[i];
        while (p->head) { /* shutting down: nobody is left to report to */
            queued_t *q = p->head;
            p->head = q->next;
            zmq_msg_close(&q->msg);
            free(q);
        }
        zmq_close(p->push);
    }
    free(self->peers);
    free(self);
    *self_p = NULL;
}

static peer_t *find(eddy_peers_t *self, uint32_t id)
{
    for (uint32_t i = 0; i < self->count; i++)
        if (self->peers[i].id == id)
            return &self->peers[i];
    return NULL;
}

static void *connect_push(eddy_peers_t *self, uint32_t id, const char *endpoint, eddy_err_t *err)
{
    void *push = zmq_socket(self->zctx, ZMQ_PUSH);
    if (!push) {
        eddy_err_set(err, "cannot create a socket for worker %u: %s", id, zmq_strerror(errno));
        return NULL;
    }
    int linger = 2000;
    zmq_setsockopt(push, ZMQ_SNDHWM, &self->send_hwm, sizeof self->send_hwm);
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    if (eddy_curve_client(push, self->keys, err) < 0) {
        zmq_close(push);
        return NULL;
    }
    if (zmq_connect(push, endpoint) != 0) {
        eddy_err_set(err, "cannot connect to worker %u at %s: %s", id, endpoint,
                     zmq_strerror(errno));
        zmq_close(push);
        return NULL;
    }
    return push;
}

int eddy_peers_set(eddy_peers_t *self, uint32_t id, const char *endpoint, eddy_err_t *err)
{
    peer_t *p = find(self, id);
    if (p && !strcmp(p->endpoint, endpoint))
        return 0;
    if (strlen(endpoint) >= sizeof p->endpoint)
        return eddy_err_set(err, "endpoint of worker %u is too long", id);
    void *push = connect_push(self, id, endpoint, err);
    if (!push)
        return -1;
    if (p) {
        /* The peer moved (it registered again): what waits for it goes to
         * the new address; ZeroMQ drops what the old socket still held
         * after the linger, as it would for a dead peer. */
        zmq_close(p->push);
    } else {
        if (self->count == self->cap) {
            uint32_t cap = self->cap ? self->cap * 2 : 16;
            peer_t *peers = realloc(self->peers, cap * sizeof *peers);
            if (!peers) {
                zmq_close(push);
                return eddy_err_set(err, "out of memory");
            }
            self->peers = peers;
            self->cap = cap;
        }
        p = &self->peers[self->count++];
        memset(p, 0, sizeof *p);
        p->id = id;
    }
    snprintf(p->endpoint, sizeof p->endpoint, "%s", endpoint);
    p->push = push;
    return 0;
}

/* 1: sent, 0: ZeroMQ cannot take it now (m untouched), -1: failed (m untouched). */
static int try_send(peer_t *p, zmq_msg_t *m, const char **error)
{
    if (zmq_msg_send(m, p->push, ZMQ_DONTWAIT) >= 0)
        return 1;
    if (errno == EAGAIN || errno == EINTR)
        return 0;
    *error = zmq_strerror(errno);
    return -1;
}

static int enqueue(eddy_peers_t *self, peer_t *p, zmq_msg_t *m)
{
    queued_t *q = malloc(sizeof *q);
    if (!q)
        return -1;
    q->next = NULL;
    zmq_msg_init(&q->msg);
    zmq_msg_move(&q->msg, m);
    if (p->tail)
        p->tail->next = q;
    else
        p->head = q;
    p->tail = q;
    self->queued++;
    return 0;
}

void eddy_peers_send(eddy_peers_t *self, uint32_t id, char *data, size_t len)
{
    zmq_msg_t m;
    if (zmq_msg_init_data(&m, data, len, free_buffer, NULL) != 0) {
        self->failed(self->arg, id, data, len, zmq_strerror(errno));
        free(data);
        return;
    }
    peer_t *p = find(self, id);
    if (!p) {
        char error[64];
        snprintf(error, sizeof error, "no address for worker %u", id);
        fail_message(self, id, &m, error);
        return;
    }
    const char *error = NULL;
    int rc = p->head ? 0 : try_send(p, &m, &error); /* behind what already waits */
    if (rc == 1)
        return;
    if (rc == 0 && enqueue(self, p, &m) == 0)
        return;
    fail_message(self, id, &m, error ? error : "out of memory");
}

size_t eddy_peers_retry(eddy_peers_t *self)
{
    for (uint32_t i = 0; i < self->count && self->queued; i++) {
        peer_t *p = &self->peers[i];
        while (p->head) {
            const char *error = NULL;
            int rc = try_send(p, &p->head->msg, &error);
            if (rc == 0)
                break;
            if (rc < 0) {
                fail_queue(self, p, error);
                break;
            }
            queued_t *q = p->head;
            p->head = q->next;
            if (!p->head)
                p->tail = NULL;
            zmq_msg_close(&q->msg); /* sent: now empty */
            free(q);
            self->queued--;
        }
    }
    return self->queued;
}

size_t eddy_peers_queued(const eddy_peers_t *self) { return self->queued; }
uint32_t eddy_peers_count(const eddy_peers_t *self) { return self->count; }
