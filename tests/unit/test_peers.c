/* test_peers.c - the worker's peer table and send queues (runtime/peers.c),
 * over real ZeroMQ sockets (inproc).
 *
 * The table grows past the 1024 peers the worker once silently stopped at;
 * a message ZeroMQ cannot take (a full high-water mark) waits in order and
 * goes out from eddy_peers_retry() once the receiver reads; a message that
 * cannot be sent at all reaches the failed callback instead of vanishing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "runtime/peers.h"

#include "leak_check.h"

TestSuite(peers, .fini = eddy_test_leak_check);

typedef struct failures {
    uint32_t count;
    uint32_t last_worker;
    char last_data[64];
    char last_error[128];
} failures_t;

static void on_failed(void *arg, uint32_t worker_id, const void *data, size_t len,
                      const char *error)
{
    failures_t *f = arg;
    f->count++;
    f->last_worker = worker_id;
    snprintf(f->last_data, sizeof f->last_data, "%.*s", (int)len, (const char *)data);
    snprintf(f->last_error, sizeof f->last_error, "%s", error);
}

static char *text(const char *fmt, unsigned n)
{
    char *s = malloc(32);
    snprintf(s, 32, fmt, n);
    return s;
}

static void *bind_pull(void *ctx, const char *endpoint, int hwm)
{
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    zmq_setsockopt(pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
    cr_assert_eq(zmq_bind(pull, endpoint), 0, "%s", zmq_strerror(errno));
    return pull;
}

static bool recv_text(void *pull, char *buf, size_t size, int flags)
{
    int n = zmq_recv(pull, buf, size - 1, flags);
    if (n < 0)
        return false;
    buf[n < (int)size - 1 ? n : (int)size - 1] = 0;
    return true;
}

Test(peers, table_grows_past_1024_peers)
{
    void *ctx = zmq_ctx_new();
    zmq_ctx_set(ctx, ZMQ_MAX_SOCKETS, 4096);
    failures_t f = {0};
    eddy_err_t err = {{0}};
    eddy_peers_t *peers = eddy_peers_new(ctx, 0, on_failed, &f, &err);
    cr_assert_not_null(peers, "%s", err.msg);
    void *pull = bind_pull(ctx, "inproc://peer-1099", 0);
    for (uint32_t id = 0; id < 1100; id++) {
        char endpoint[64];
        snprintf(endpoint, sizeof endpoint, "inproc://peer-%u", id);
        cr_assert_eq(eddy_peers_set(peers, id, endpoint, &err), 0, "peer %u: %s", id, err.msg);
    }
    cr_assert_eq(eddy_peers_count(peers), 1100);
    /* Setting a known peer again to the same address changes nothing. */
    cr_assert_eq(eddy_peers_set(peers, 1099, "inproc://peer-1099", &err), 0);
    cr_assert_eq(eddy_peers_count(peers), 1100);
    eddy_peers_send(peers, 1099, text("to peer %u", 1099), strlen("to peer 1099"));
    char buf[64];
    cr_assert(recv_text(pull, buf, sizeof buf, 0));
    cr_assert_str_eq(buf, "to peer 1099");
    cr_assert_eq(f.count, 0);
    eddy_peers_destroy(&peers);
    cr_assert_null(peers);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}

Test(peers, refused_sends_wait_in_order_and_go_out_on_retry)
{
    void *ctx = zmq_ctx_new();
    failures_t f = {0};
    eddy_err_t err = {{0}};
    /* High-water marks of 1 on both ends: ZeroMQ takes only a few messages
     * while nobody reads, then says EAGAIN. */
    eddy_peers_t *peers = eddy_peers_new(ctx, 1, on_failed, &f, &err);
    cr_assert_not_null(peers, "%s", err.msg);
    void *pull = bind_pull(ctx, "inproc://slow-reader", 1);
    cr_assert_eq(eddy_peers_set(peers, 7, "inproc://slow-reader", &err), 0, "%s", err.msg);
    const unsigned n = 200;
    for (unsigned i = 0; i < n; i++) {
        char *m = text("message %u", i);
        eddy_peers_send(peers, 7, m, strlen(m));
    }
    cr_assert_gt(eddy_peers_queued(peers), 0, "the high-water mark never refused a message");
    cr_assert_lt(eddy_peers_queued(peers), n);
    unsigned received = 0;
    for (unsigned idle_polls = 0; received < n;) {
        char buf[64], want[64];
        if (!recv_text(pull, buf, sizeof buf, ZMQ_DONTWAIT)) {
            /* Nothing readable: only a retry can hand the rest on (ZeroMQ
             * learns of our reads asynchronously, so wait for input a bit). */
            cr_assert_gt(eddy_peers_queued(peers), 0, "%u of %u received, none queued: lost",
                         received, n);
            eddy_peers_retry(peers);
            zmq_pollitem_t item = {pull, 0, ZMQ_POLLIN, 0};
            if (zmq_poll(&item, 1, 10) == 0)
                cr_assert_lt(++idle_polls, 1000, "%u of %u received, the queue does not move",
                             received, n);
            continue;
        }
        snprintf(want, sizeof want, "message %u", received);
        cr_assert_str_eq(buf, want, "out of order or lost");
        received++;
    }
    cr_assert_eq(eddy_peers_queued(peers), 0);
    cr_assert_eq(f.count, 0);
    eddy_peers_destroy(&peers);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}

Test(peers, unsendable_messages_reach_the_failed_callback)
{
    void *ctx = zmq_ctx_new();
    failures_t f = {0};
    eddy_err_t err = {{0}};
    eddy_peers_t *peers = eddy_peers_new(ctx, 0, on_failed, &f, &err);
    cr_assert_not_null(peers, "%s", err.msg);
    eddy_peers_send(peers, 9, text("batch %u", 1), strlen("batch 1"));
    cr_assert_eq(f.count, 1);
    cr_assert_eq(f.last_worker, 9);
    cr_assert_str_eq(f.last_data, "batch 1");
    cr_assert_str_eq(f.last_error, "no address for worker 9");
    /* An address ZeroMQ cannot use fails the peer's setup, clearly. */
    cr_assert_eq(eddy_peers_set(peers, 3, "tcp://", &err), -1);
    cr_assert(strstr(err.msg, "cannot connect to worker 3 at tcp://"), "%s", err.msg);
    cr_assert_eq(eddy_peers_count(peers), 0);
    eddy_peers_destroy(&peers);
    zmq_ctx_term(ctx);
}
