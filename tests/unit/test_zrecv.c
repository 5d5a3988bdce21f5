/* test_zrecv.c - bounded, non-blocking receive of whole ZeroMQ messages
 * (net/zrecv.c) over real sockets.
 *
 * Each test sends what a hostile peer could (extra frames, a REQ envelope,
 * frames over the size bound, a frame over ZMQ_MAXMSGSIZE) followed by a
 * well-formed message, and checks that the bad message is reported
 * malformed and consumed to its last frame, so the good one is received
 * next. Receiving from an empty socket must return at once: a blocking
 * receive would hang the test until Criterion's timeout fails it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "common/clock.h"
#include "net/zrecv.h"

#include "leak_check.h"

TestSuite(zrecv, .fini = eddy_test_leak_check, .timeout = 30);

#define ARRIVAL_TIMEOUT_MS 5000

typedef struct pair {
    void *ctx, *rx, *tx;
    char endpoint[64];
} pair_t;

static void close_pair(pair_t *p)
{
    zmq_close(p->tx);
    zmq_close(p->rx);
    zmq_ctx_term(p->ctx);
}

static void *socket_of(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    return s;
}

/* rx binds an ephemeral loopback TCP port (ZMQ_MAXMSGSIZE is enforced by
 * the TCP transport only), tx connects to it. */
static void open_pair(pair_t *p, int rx_type, int tx_type, size_t rx_limit)
{
    p->ctx = zmq_ctx_new();
    p->rx = socket_of(p->ctx, rx_type);
    if (rx_limit)
        cr_assert_eq(eddy_zsock_limit_size(p->rx, rx_limit, NULL), 0);
    cr_assert_eq(zmq_bind(p->rx, "tcp://127.0.0.1:*"), 0);
    size_t size = sizeof p->endpoint;
    zmq_getsockopt(p->rx, ZMQ_LAST_ENDPOINT, p->endpoint, &size);
    p->tx = socket_of(p->ctx, tx_type);
    cr_assert_eq(zmq_connect(p->tx, p->endpoint), 0);
}

/* Sends frames[0..n) as one message. */
static void send_frames(void *s, const char *const *frames, const size_t *lens, int n)
{
    for (int i = 0; i < n; i++)
        cr_assert(zmq_send(s, frames[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0) >= 0, "send: %s",
                  zmq_strerror(zmq_errno()));
}

static void send_text(void *s, const char *text)
{
    size_t len = strlen(text);
    send_frames(s, &text, &len, 1);
}

/* Waits until a message is there (poll), then receives it. */
static eddy_zrecv_result_t recv_when_ready(void *s, zmq_msg_t *frames, int n, size_t max,
                                           eddy_err_t *err)
{
    zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
    cr_assert_eq(zmq_poll(&item, 1, ARRIVAL_TIMEOUT_MS), 1, "no message arrived");
    return eddy_zrecv(s, frames, n, max, err);
}

static void expect_text(void *s, int n_frames, const char *text)
{
    zmq_msg_t frames[EDDY_ZRECV_MAX_FRAMES];
    eddy_err_t err = {{0}};
    cr_assert_eq(recv_when_ready(s, frames, n_frames, 1024, &err), EDDY_ZRECV_OK, "%s", err.msg);
    zmq_msg_t *body = &frames[n_frames - 1];
    cr_assert_eq(zmq_msg_size(body), strlen(text));
    cr_assert(!memcmp(zmq_msg_data(body), text, strlen(text)));
    for (int i = 0; i < n_frames; i++)
        zmq_msg_close(&frames[i]);
}

static void expect_malformed(void *s, int n_frames, size_t max, const char *why)
{
    zmq_msg_t frames[EDDY_ZRECV_MAX_FRAMES];
    eddy_err_t err = {{0}};
    cr_assert_eq(recv_when_ready(s, frames, n_frames, max, &err), EDDY_ZRECV_MALFORMED);
    cr_assert(strstr(err.msg, why), "error '%s' does not say '%s'", err.msg, why);
}

Test(zrecv, empty_socket_returns_at_once)
{
    pair_t p;
    open_pair(&p, ZMQ_PULL, ZMQ_PUSH, 0);
    zmq_msg_t frames[EDDY_ZRECV_MAX_FRAMES];
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(eddy_zrecv(p.rx, frames, 1, 1024, NULL), EDDY_ZRECV_NONE);
    close_pair(&p);
}

Test(zrecv, plain_message_of_one_frame)
{
    pair_t p;
    open_pair(&p, ZMQ_PULL, ZMQ_PUSH, 0);
    send_text(p.tx, "hello");
    expect_text(p.rx, 1, "hello");
    close_pair(&p);
}

Test(zrecv, extra_frames_are_dropped_with_their_message)
{
    pair_t p;
    open_pair(&p, ZMQ_PULL, ZMQ_PUSH, 0);
    const char *frames[] = {"a", "b", "c", "d", "e"};
    size_t lens[] = {1, 1, 1, 1, 1};
    for (int n = 2; n <= 5; n++)
        send_frames(p.tx, frames, lens, n);
    send_text(p.tx, "after");
    for (int n = 2; n <= 5; n++) {
        char why[64];
        snprintf(why, sizeof why, "message of %d frames, expected 1", n);
        expect_malformed(p.rx, 1, 1024, why);
    }
    expect_text(p.rx, 1, "after");
    close_pair(&p);
}

Test(zrecv, many_frames_never_block)
{
    pair_t p;
    open_pair(&p, ZMQ_PULL, ZMQ_PUSH, 0);
    static char payload[64];
    for (int i = 0; i < 9999; i++)
        cr_assert(zmq_send(p.tx, payload, sizeof payload, ZMQ_SNDMORE) >= 0);
    send_text(p.tx, "last frame");
    send_text(p.tx, "next");
    expect_malformed(p.rx, 1, 1024, "message of 10000 frames");
    expect_text(p.rx, 1, "next");
    close_pair(&p);
}

Test(zrecv, frame_over_the_size_bound)
{
    pair_t p;
    open_pair(&p, ZMQ_PULL, ZMQ_PUSH, 0);
    static char big[4096];
    size_t len = sizeof big;
    const char *frame = big;
    send_frames(p.tx, &frame, &len, 1);
    send_text(p.tx, "small");
    expect_malformed(p.rx, 1, 4095, "frame of 4096 bytes, more than 4095");
    expect_text(p.rx, 1, "small");
    /* exactly at the bound is fine */
    send_frames(p.tx, &frame, &len, 1);
    zmq_msg_t z;
    cr_assert_eq(recv_when_ready(p.rx, &z, 1, 4096, NULL), EDDY_ZRECV_OK);
    cr_assert_eq(zmq_msg_size(&z), 4096);
    zmq_msg_close(&z);
    close_pair(&p);
}

Test(zrecv, router_takes_identity_and_one_body)
{
    pair_t p;
    open_pair(&p, ZMQ_ROUTER, ZMQ_DEALER, 0);
    send_text(p.tx, "request");
    expect_text(p.rx, EDDY_ZRECV_FRAMES_ROUTER, "request");

    const char *frames[] = {"x", "y"};
    size_t lens[] = {1, 1};
    send_frames(p.tx, frames, lens, 2); /* identity + 2 frames */
    send_text(p.tx, "again");
    expect_malformed(p.rx, EDDY_ZRECV_FRAMES_ROUTER, 1024, "message of 3 frames, expected 2");
    expect_text(p.rx, EDDY_ZRECV_FRAMES_ROUTER, "again");
    close_pair(&p);
}

Test(zrecv, router_drops_req_envelopes)
{
    pair_t p;
    open_pair(&p, ZMQ_ROUTER, ZMQ_DEALER, 0);
    void *req = socket_of(p.ctx, ZMQ_REQ);
    cr_assert_eq(zmq_connect(req, p.endpoint), 0);
    send_text(req, "from req"); /* identity, empty delimiter, body */
    expect_malformed(p.rx, EDDY_ZRECV_FRAMES_ROUTER, 1024, "message of 3 frames");
    send_text(p.tx, "from dealer");
    expect_text(p.rx, EDDY_ZRECV_FRAMES_ROUTER, "from dealer");
    zmq_close(req);
    close_pair(&p);
}

static bool text_arrives(void *s, const char *text)
{
    zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, ARRIVAL_TIMEOUT_MS) != 1)
        return false;
    zmq_msg_t z;
    if (eddy_zrecv(s, &z, 1, 1 << 20, NULL) != EDDY_ZRECV_OK)
        return false;
    bool same = zmq_msg_size(&z) == strlen(text) && !memcmp(zmq_msg_data(&z), text, strlen(text));
    zmq_msg_close(&z);
    return same;
}

/* ZMQ_MAXMSGSIZE: the transport disconnects the sender of a larger frame,
 * so the frame is never buffered or delivered; other peers carry on. */
Test(zrecv, transport_cuts_oversized_frames)
{
    pair_t p;
    open_pair(&p, ZMQ_PULL, ZMQ_PUSH, 1024);
    static char big[1025];
    size_t len = sizeof big;
    const char *frame = big;
    send_frames(p.tx, &frame, &len, 1);
    void *other = socket_of(p.ctx, ZMQ_PUSH);
    cr_assert_eq(zmq_connect(other, p.endpoint), 0);
    send_text(other, "other peer");
    cr_assert(text_arrives(p.rx, "other peer"));
    zmq_msg_t z;
    cr_assert_eq(eddy_zrecv(p.rx, &z, 1, 1 << 20, NULL), EDDY_ZRECV_NONE);
    zmq_close(other);
    close_pair(&p);
}
