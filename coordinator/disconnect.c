/* disconnect.c - fast failure detection: a worker whose control connection
 * closes is declared dead at once, not when its heartbeats have been missing
 * for --heartbeat-timeout-ms (which stays, for hung or partitioned workers
 * whose connection is still open).
 *
 * libzmq 4.3.4 (Debian 12) builds ZMQ_ROUTER_NOTIFY only into its draft API,
 * so the ROUTER's socket monitor is used: ZMQ_EVENT_DISCONNECTED names the
 * closed connection by its file descriptor, and every message received on
 * the ROUTER names the descriptor it came through (ZMQ_SRCFD). The table
 * fd -> the peer last heard on it maps one to the other.
 *
 * Descriptors are reused: after a connection closes, a new one (a client, a
 * worker registering) may get its number and be heard from before the old
 * connection's DISCONNECTED event is read from the monitor. A message from a
 * different peer on a known descriptor therefore proves the old connection
 * closed (its worker, if any, is dead) and makes the next DISCONNECTED event
 * of that descriptor stale: it is skipped. The monitor is drained before the
 * ROUTER in every loop turn, which leaves only a peer that connected and
 * closed without sending anything unaccounted for. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/log.h"
#include "coordinator/internal.h"

/* Descriptors above this are not tracked (the heartbeat timeout covers them). */
#define DISCONNECT_MAX_FD 65536

struct coord_fd_table {
    uint64_t *owner;   /* [cap] hash of the routing id last heard on fd, 0 none */
    uint32_t *stale;   /* [cap] DISCONNECTED events of fd still to skip */
    size_t cap;
};

static uint64_t identity_hash(const unsigned char *id, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= id[i];
        h *= 1099511628211ull;
    }
    return h | 1; /* never 0, which means "no owner" */
}

static bool table_reserve(coord_fd_table_t *t, int fd)
{
    if (fd < 0 || fd >= DISCONNECT_MAX_FD)
        return false;
    if ((size_t)fd < t->cap)
        return true;
    size_t cap = t->cap ? t->cap : 256;
    while (cap <= (size_t)fd)
        cap *= 2;
    uint64_t *owner = realloc(t->owner, cap * sizeof *owner);
    if (!owner)
        return false;
    t->owner = owner;
    uint32_t *stale = realloc(t->stale, cap * sizeof *stale);
    if (!stale)
        return false;
    t->stale = stale;
    memset(owner + t->cap, 0, (cap - t->cap) * sizeof *owner);
    memset(stale + t->cap, 0, (cap - t->cap) * sizeof *stale);
    t->cap = cap;
    return true;
}

int coord_disconnect_start(coord_t *c, eddy_err_t *err)
{
    if (c->opts->heartbeat_only)
        return 0;
    /* one coordinator per process in eddy, but tests may run several */
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "inproc://eddy-coord-monitor-%p", (void *)c);
    if (zmq_socket_monitor(c->router, endpoint, ZMQ_EVENT_DISCONNECTED) != 0) {
        eddy_err_set(err, "socket monitor: %s", zmq_strerror(errno));
        return -1;
    }
    c->monitor = zmq_socket(c->zctx, ZMQ_PAIR);
    c->fds = calloc(1, sizeof *c->fds);
    if (!c->monitor || !c->fds || zmq_connect(c->monitor, endpoint) != 0) {
        eddy_err_set(err, "socket monitor: %s", zmq_strerror(errno));
        return -1;
    }
    return 0;
}

void coord_disconnect_stop(coord_t *c)
{
    if (c->monitor) {
        zmq_socket_monitor(c->router, NULL, 0);
        int zero = 0;
        zmq_setsockopt(c->monitor, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(c->monitor);
        c->monitor = NULL;
    }
    if (c->fds) {
        free(c->fds->owner);
        free(c->fds->stale);
        free(c->fds);
        c->fds = NULL;
    }
}

void coord_disconnect_heard(coord_t *c, int fd, const unsigned char *id, size_t id_len,
                            coord_worker_t *w)
{
    if (!c->fds || !table_reserve(c->fds, fd))
        return;
    uint64_t h = identity_hash(id, id_len);
    coord_fd_table_t *t = c->fds;
    if (t->owner[fd] && t->owner[fd] != h) {
        /* fd was reused: its previous connection closed, and that
         * connection's DISCONNECTED event is still to come */
        t->stale[fd]++;
        for (coord_worker_t *o = c->workers; o; o = o->next)
            if (o->alive && o->conn_fd == fd && o != w) {
                o->conn_fd = -1;
                coord_declare_dead(c, o, "its connection closed (disconnect detected)");
            }
    }
    t->owner[fd] = h;
    if (w)
        w->conn_fd = fd;
}

static void on_disconnected(coord_t *c, int fd)
{
    coord_fd_table_t *t = c->fds;
    if (fd < 0 || (size_t)fd >= t->cap)
        return;
    if (t->stale[fd]) {
        t->stale[fd]--;
        return;
    }
    t->owner[fd] = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (w->conn_fd == fd) {
            w->conn_fd = -1;
            if (w->alive)
                coord_declare_dead(c, w, "its connection closed (disconnect detected)");
        }
}

void coord_disconnect_drain(coord_t *c)
{
    if (!c->monitor)
        return;
    for (;;) {
        /* an event is two frames: u16 event + u32 value, then the endpoint */
        zmq_msg_t head, addr;
        zmq_msg_init(&head);
        if (zmq_msg_recv(&head, c->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&head);
            return;
        }
        int more = zmq_msg_more(&head);
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&head) >= 6) {
            memcpy(&event, zmq_msg_data(&head), 2);
            memcpy(&value, (const char *)zmq_msg_data(&head) + 2, 4);
        }
        zmq_msg_close(&head);
        while (more) {
            zmq_msg_init(&addr);
            if (zmq_msg_recv(&addr, c->monitor, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&addr);
                break;
            }
            more = zmq_msg_more(&addr);
            zmq_msg_close(&addr);
        }
        if (event == ZMQ_EVENT_DISCONNECTED)
            on_disconnected(c, (int)value);
    }
}

void *coord_disconnect_socket(coord_t *c)
{
    return c->monitor;
}
