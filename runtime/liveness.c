/* liveness.c - the worker's liveness thread (see liveness.h).
 *
 * Owns one DEALER socket, used only by its thread (ZeroMQ sockets are not
 * thread-safe), and a small target under a mutex that the loop sets. The
 * thread waits on a condition variable for the next send or a change, so
 * destroy and a new target take effect at once. The socket queues at most
 * a few messages (ZMQ_SNDHWM) and none to an unfinished connection
 * (ZMQ_IMMEDIATE): a partition does not build a backlog of stale ones. */
#include "runtime/liveness.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/curve.h"
#include "net/proto.h"

struct eddy_liveness {
    void *zctx;
    const eddy_keys_t *keys;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool stop;
    uint64_t generation; /* bumped by every eddy_liveness_target */
    char endpoint[EDDY_ENDPOINT_MAX];
    uint32_t worker_id;
    uint64_t token;
    uint32_t interval_ms;
    _Atomic uint64_t loop_turned_ms;
};

/* The thread's own view of the target, copied under the lock. */
typedef struct target {
    char endpoint[EDDY_ENDPOINT_MAX];
    uint32_t worker_id;
    uint64_t token;
    uint32_t interval_ms;
} target_t;

static void *open_socket(eddy_liveness_t *self)
{
    void *s = zmq_socket(self->zctx, ZMQ_DEALER);
    if (!s)
        return NULL;
    int zero = 0, one = 1, hwm = 4;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    eddy_err_t err;
    if (eddy_curve_client(s, self->keys, &err) < 0) {
        eddy_warn("liveness socket: %s", err.msg);
        zmq_close(s);
        return NULL;
    }
    return s;
}

static void send_liveness(eddy_liveness_t *self, void *s, const target_t *t)
{
    eddy_msg_t m = {.type = EDDY_MSG_LIVENESS};
    m.u.liveness.worker_id = t->worker_id;
    m.u.liveness.token = t->token;
    uint64_t now = eddy_mono_ms(), turned = atomic_load(&self->loop_turned_ms);
    m.u.liveness.loop_silent_ms = now > turned ? now - turned : 0;
    size_t len;
    char *data = eddy_msg_encode(&m, &len);
    if (data)
        zmq_send(s, data, len, ZMQ_DONTWAIT); /* a full queue: this one is dropped */
    free(data);
}

static void *run(void *arg)
{
    eddy_liveness_t *self = arg;
    void *s = NULL;
    char connected[EDDY_ENDPOINT_MAX] = "";
    uint64_t seen = 0;
    target_t t = {0};
    pthread_mutex_lock(&self->lock);
    while (!self->stop) {
        if (self->generation != seen) {
            seen = self->generation;
            memcpy(t.endpoint, self->endpoint, sizeof t.endpoint);
            t.worker_id = self->worker_id;
            t.token = self->token;
            t.interval_ms = self->interval_ms ? self->interval_ms : 500;
        }
        bool active = t.token && t.endpoint[0];
        pthread_mutex_unlock(&self->lock);
        if (active && strcmp(connected, t.endpoint)) {
            if (s)
                zmq_close(s); /* the old coordinator hears no more */
            s = open_socket(self);
            if (s && zmq_connect(s, t.endpoint) == 0) {
                snprintf(connected, sizeof connected, "%s", t.endpoint);
            } else {
                if (s)
                    zmq_close(s);
                s = NULL;
                connected[0] = '\0';
            }
        }
        if (active && s)
            send_liveness(self, s, &t);
        pthread_mutex_lock(&self->lock);
        struct timespec until = eddy_timespec_in(CLOCK_MONOTONIC, active ? t.interval_ms : 1000);
        while (!self->stop && self->generation == seen &&
               pthread_cond_timedwait(&self->changed, &self->lock, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&self->lock);
    if (s)
        zmq_close(s);
    return NULL;
}

eddy_liveness_t *eddy_liveness_new(void *zctx, const eddy_keys_t *keys, eddy_err_t *err)
{
    eddy_liveness_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->zctx = zctx;
    self->keys = keys;
    atomic_store(&self->loop_turned_ms, eddy_mono_ms());
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->changed, &attr);
    pthread_condattr_destroy(&attr);
    int rc = pthread_create(&self->thread, NULL, run, self);
    if (rc != 0) {
        eddy_err_set(err, "liveness thread: %s", strerror(rc));
        pthread_cond_destroy(&self->changed);
        pthread_mutex_destroy(&self->lock);
        free(self);
        return NULL;
    }
    return self;
}

void eddy_liveness_target(eddy_liveness_t *self, const char *endpoint, uint32_t worker_id,
                          uint64_t token, uint32_t interval_ms)
{
    if (!self)
        return;
    pthread_mutex_lock(&self->lock);
    snprintf(self->endpoint, sizeof self->endpoint, "%s", endpoint ? endpoint : "");
    self->worker_id = worker_id;
    self->token = endpoint ? token : 0;
    self->interval_ms = interval_ms;
    self->generation++;
    pthread_cond_signal(&self->changed);
    pthread_mutex_unlock(&self->lock);
}

void eddy_liveness_loop_turned(eddy_liveness_t *self, uint64_t now_ms)
{
    if (self)
        atomic_store_explicit(&self->loop_turned_ms, now_ms, memory_order_relaxed);
}

void eddy_liveness_destroy(eddy_liveness_t **self_p)
{
    eddy_liveness_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock(&self->lock);
    self->stop = true;
    pthread_cond_signal(&self->changed);
    pthread_mutex_unlock(&self->lock);
    pthread_join(self->thread, NULL);
    pthread_cond_destroy(&self->changed);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}
