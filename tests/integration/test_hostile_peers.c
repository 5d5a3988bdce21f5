/* test_hostile_peers.c - eddy under messages from peers that do not follow
 * the protocol, while a rate-limited wordcount runs under `eddy local`.
 *
 * - garbage: random multi-frame messages from DEALER, PUSH and REQ sockets,
 *   raw TCP bytes and frames over the size bounds, sent again and again to
 *   the coordinator's control port and to every worker's data port. The
 *   coordinator must answer `eddy status` after every round, and the job
 *   must finish with output equal to the reference byte for byte.
 * - forged end of stream: a well-formed EOS for a real channel of the
 *   running job, sent to the worker that hosts the channel's receiver. The
 *   data that follows on that channel is a protocol violation: the worker
 *   reports the task failed, the job is restored from its last checkpoint
 *   and finishes exactly (before, it wedged: checkpoints timed out forever).
 * - HTTP: 1500 idle connections from 127.0.0.2 must not keep GET /healthz
 *   from 127.0.0.1 from being answered within a few seconds.
 *
 * Every wait is a poll of an observable condition with a deadline. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "net/dataplane.h"
#include "net/proto.h"
#include "net/zrecv.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define TEXT_BYTES (3u * 1024 * 1024)
#define RUN_SECONDS 9 /* --rate is chosen so an undisturbed run takes this long */
#define MAX_WORKERS 8
#define HOSTILE_PER_ROUND 20
#define IDLE_HTTP_CONNECTIONS 1500
#define HEALTHZ_DEADLINE_MS 5000

#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "5000"
#else
#define HB_TIMEOUT "2000"
#endif

static eddy_test_cluster_t *cl;
static char *input, *output;
static eddy_test_wc_input_t wc; /* the input text and its reference output */
static char rate[32];
static int ports[2];
static char *coord_url;
static eddy_proc_t *local;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- fixture -------------------------------------------------------------- */

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "hostile", .workers = 3, .checkpoint_interval = "300",
                                  .heartbeat_timeout_ms = HB_TIMEOUT};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    cr_assert(eddy_test_wc_input(input, TEXT_BYTES, 777, &wc, &err) == 0, "%s", err.msg);
    snprintf(rate, sizeof rate, "%zu", wc.lines / RUN_SECONDS);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    coord_url = eddy_test_cluster_url(cl, 0);
    local = eddy_test_cluster_local(cl);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    eddy_test_wc_input_free(&wc);
}

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

/* The file wordcount (exact output to compare), or an unbounded generated
 * one that runs until the test ends. */
static void start_local(bool unbounded)
{
    eddy_err_t err = {{0}};
    const char *file_job[] = {"--quiet", "--job", "wordcount", "--parallelism", "3", "--input",
                              input, "--output", output, "--rate", rate, NULL};
    const char *generated[] = {"--quiet", "--job", "wordcount", "--parallelism", "3",
                               "--generate", "--lines", "0", "--rate", "2000", NULL};
    cr_assert(eddy_test_cluster_start_local(cl, unbounded ? generated : file_job, &err) == 0,
              "%s", err.msg);
}

/* ---- status ----------------------------------------------------------------- */

static eddy_test_job_view_t wait_job(const char *state, int64_t min_completed,
                                     int64_t min_restarts, uint64_t timeout_ms, const char *what)
{
    eddy_test_job_want_t want = {.state = state, .min_completed = min_completed,
                                 .min_restarts = min_restarts};
    eddy_test_job_view_t v;
    bool gone;
    if (!eddy_test_cluster_wait_job(cl, "wordcount", &want, timeout_ms, &v, &gone)) {
        char *l = log_text();
        cr_assert_fail("timed out waiting for %s (state %s, restarts %lld)%s; log:\n%s", what,
                       v.state, (long long)v.restarts, gone ? " - eddy local exited" : "", l);
    }
    return v;
}

typedef struct endpoints {
    char data[MAX_WORKERS][EDDY_ENDPOINT_MAX];
    uint32_t ids[MAX_WORKERS];
    int n;
} endpoints_t;

static void worker_endpoints(json_t *st, endpoints_t *e)
{
    memset(e, 0, sizeof *e);
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        const char *addr = json_string_value(json_object_get(w, "address"));
        if (!addr || e->n == MAX_WORKERS || !json_is_true(json_object_get(w, "alive")))
            continue;
        snprintf(e->data[e->n], sizeof e->data[e->n], "%s", addr);
        e->ids[e->n++] = (uint32_t)json_integer_value(json_object_get(w, "id"));
    }
}

static int port_of(const char *endpoint)
{
    const char *colon = strrchr(endpoint, ':');
    return colon ? atoi(colon + 1) : 0;
}

static void expect_exact_output(void)
{
    int rc = eddy_proc_wait(local, 120000);
    if (rc != 0) {
        char *l = log_text();
        cr_assert_fail("eddy local exited %d; log:\n%s", rc, l);
    }
    size_t gl = 0;
    char *got = eddy_read_file(output, &gl);
    if (!got || gl != wc.expected_len || memcmp(got, wc.expected, wc.expected_len) != 0) {
        bool missing = !got;
        free(got); /* the failure does not return: free first, so no leak hides it */
        static char l[65536];
        char *full = log_text();
        snprintf(l, sizeof l, "%s", full);
        free(full);
        cr_assert_fail("output %s differs from the reference (%zu vs %zu bytes); log:\n%s",
                       missing ? "missing" : "", gl, wc.expected_len, l);
    }
    free(got);
    char *l = log_text();
    cr_assert(!strstr(l, "Sanitizer"), "a sanitizer reported an error:\n%s", l);
    free(l);
}

/* ---- hostile senders ---------------------------------------------------------- */

static void *hostile_socket(void *ctx, int type, const char *endpoint)
{
    void *s = zmq_socket(ctx, type);
    int linger = 200, zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
    cr_assert_eq(zmq_connect(s, endpoint), 0, "connect %s", endpoint);
    return s;
}

/* n frames of random bytes (up to max_len each) as one message; single
 * frames start with a byte msgpack never uses, so they cannot decode. */
static void send_random(void *s, int n, size_t max_len)
{
    char buf[512];
    for (int f = 0; f < n; f++) {
        size_t len = (size_t)(next_random() % (max_len + 1));
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)next_random();
        if (n == 1 && len)
            buf[0] = (char)0xc1;
        zmq_send(s, buf, len, (f + 1 < n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    }
}

static void send_oversized(void *s, size_t bytes)
{
    char *big = calloc(1, bytes);
    cr_assert(big);
    zmq_send(s, big, bytes, ZMQ_DONTWAIT);
    free(big);
}

/* Connects, writes random bytes (no ZMTP greeting), closes. */
static void raw_tcp_garbage(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        char buf[300];
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = (char)next_random();
        if (next_random() & 1)
            memcpy(buf, "\xff\0\0\0\0\0\0\0\x01\x7f", 10); /* a ZMTP signature, then junk */
        ssize_t w = send(fd, buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
    }
    close(fd);
}

typedef struct hostile {
    void *ctx;
    void *dealer;                 /* to the control port */
    void *push_data[MAX_WORKERS]; /* to each worker's data port */
    endpoints_t ep;
} hostile_t;

static void hostile_open(hostile_t *h, const endpoints_t *ep)
{
    memset(h, 0, sizeof *h);
    h->ctx = zmq_ctx_new();
    h->ep = *ep;
    h->dealer = hostile_socket(h->ctx, ZMQ_DEALER, coord_url);
    for (int i = 0; i < ep->n; i++)
        h->push_data[i] = hostile_socket(h->ctx, ZMQ_PUSH, ep->data[i]);
}

static void hostile_close(hostile_t *h)
{
    zmq_close(h->dealer);
    for (int i = 0; i < h->ep.n; i++)
        zmq_close(h->push_data[i]);
    zmq_ctx_term(h->ctx);
}

static void hostile_round(hostile_t *h, int round)
{
    for (int k = 0; k < HOSTILE_PER_ROUND; k++) {
        send_random(h->dealer, 1 + (int)(next_random() % 5), 300);
        for (int i = 0; i < h->ep.n; i++)
            send_random(h->push_data[i], 1 + (int)(next_random() % 5), 300);
    }
    /* REQ adds an empty delimiter frame: three frames at the ROUTER. */
    void *req = hostile_socket(h->ctx, ZMQ_REQ, coord_url);
    send_random(req, 1, 100);
    zmq_close(req);
    /* Socket types the listener does not accept: the handshake fails. */
    void *push_ctl = hostile_socket(h->ctx, ZMQ_PUSH, coord_url);
    send_random(push_ctl, 2, 100);
    zmq_close(push_ctl);
    for (int i = 0; i < h->ep.n; i++) {
        void *dealer_data = hostile_socket(h->ctx, ZMQ_DEALER, h->ep.data[i]);
        send_random(dealer_data, 3, 100);
        zmq_close(dealer_data);
    }
    raw_tcp_garbage(ports[0]);
    for (int i = 0; i < h->ep.n; i++)
        raw_tcp_garbage(port_of(h->ep.data[i]));
    if (round % 4 == 0) {
        send_oversized(h->dealer, EDDY_ZRECV_MAX_CONTROL + 1);
        for (int i = 0; i < h->ep.n; i++)
            send_oversized(h->push_data[i], EDDY_ZRECV_MAX_DATA + 1);
    }
}

typedef struct attack {
    endpoints_t ep;
    atomic_bool stop;
    atomic_int rounds;
} attack_t;

static void *attack_main(void *arg)
{
    attack_t *a = arg;
    hostile_t h;
    hostile_open(&h, &a->ep);
    while (!atomic_load(&a->stop)) {
        hostile_round(&h, atomic_load(&a->rounds));
        atomic_fetch_add(&a->rounds, 1);
    }
    hostile_close(&h);
    return NULL;
}

/* ---- tests ---------------------------------------------------------------------- */

Test(hostile_peers, garbage_on_control_and_data_ports, .init = setup, .fini = teardown,
     .timeout = 240)
{
    start_local(false);
    wait_job("running", 0, 0, 30000, "the job to run");
    json_t *st = eddy_test_status(ports[0]);
    cr_assert(st);
    endpoints_t ep;
    worker_endpoints(st, &ep);
    json_decref(st);
    cr_assert_eq(ep.n, 3, "want 3 workers with data endpoints in status");

    /* The attack runs on its own thread, so a status call that is slow on a
     * loaded machine does not thin it out: the job (paced by --rate) meets
     * hostile traffic all the time it runs. */
    attack_t attack = {.ep = ep};
    pthread_t attacker;
    cr_assert_eq(pthread_create(&attacker, NULL, attack_main, &attack), 0);
    bool finished = false;
    uint64_t deadline = eddy_mono_ms() + 120000;
    while (!finished && eddy_mono_ms() < deadline) {
        uint64_t asked = eddy_mono_ms();
        json_t *doc = eddy_test_status(ports[0]);
        if (!doc && !eddy_proc_alive(local))
            break; /* the job finished and eddy local exited meanwhile */
        if (!doc) {
            atomic_store(&attack.stop, true);
            pthread_join(attacker, NULL);
            char *l = log_text();
            cr_assert_fail("after %d rounds: `eddy status` got no answer within %llu ms; log:\n%s",
                           atomic_load(&attack.rounds),
                           (unsigned long long)(eddy_mono_ms() - asked), l);
        }
        json_t *j = eddy_test_status_job(doc, "wordcount");
        const char *state = j ? json_string_value(json_object_get(j, "state")) : NULL;
        finished = state && strcmp(state, "running") && strcmp(state, "deploying") &&
                   strcmp(state, "restoring") && strcmp(state, "waiting");
        json_decref(doc);
        if (!eddy_proc_alive(local))
            break;
        eddy_nap_ms(100); /* between polls of the job's state */
    }
    atomic_store(&attack.stop, true);
    pthread_join(attacker, NULL);
    int rounds = atomic_load(&attack.rounds);
    cr_assert_geq(rounds, 3, "only %d rounds of hostile messages during the run", rounds);
    cr_log_info("garbage: %d rounds of hostile messages during the run", rounds);
    expect_exact_output();
    char *l = log_text();
    cr_assert(strstr(l, "dropping control message"), "the coordinator dropped nothing:\n%s", l);
    cr_assert(strstr(l, "dropping data-plane message"), "no worker dropped anything:\n%s", l);
    /* garbage never decodes as a message of the job: nothing to restore for */
    cr_assert(!strstr(l, "protocol violation"), "garbage was taken for a violation:\n%s", l);
    free(l);
}

Test(hostile_peers, forged_end_of_stream, .init = setup, .fini = teardown, .timeout = 240)
{
    start_local(false);
    wait_job("running", 1, 0, 30000, "a completed checkpoint");
    json_t *st = eddy_test_status(ports[0]);
    cr_assert(st);
    json_t *j = eddy_test_status_job(st, "wordcount");
    cr_assert(j);
    json_t *num = json_object_get(j, "num");
    cr_assert(json_is_integer(num), "status has no job number");
    json_t *count = json_array_get(json_object_get(j, "operators"), 1);
    cr_assert_str_eq(json_string_value(json_object_get(count, "name")), "count");
    json_t *inst = json_array_get(json_object_get(count, "instances"), 0);
    uint32_t host = (uint32_t)json_integer_value(json_object_get(inst, "worker"));
    endpoints_t ep;
    worker_endpoints(st, &ep);
    const char *target = NULL;
    for (int i = 0; i < ep.n; i++)
        if (ep.ids[i] == host)
            target = ep.data[i];
    cr_assert(target, "no data endpoint for worker %u", host);

    /* source[0] -> count[0]: an end of stream the source never sent. */
    eddy_channel_id_t ch = {
        .job = (uint32_t)json_integer_value(num),
        .epoch = (uint32_t)json_integer_value(json_object_get(j, "epoch")),
        .src_stage = 0, .src_instance = 0, .dst_stage = 1, .dst_instance = 0};
    json_decref(st);
    size_t len;
    char *eos = eddy_eos_encode(&ch, &len);
    cr_assert(eos);
    void *ctx = zmq_ctx_new();
    void *push = hostile_socket(ctx, ZMQ_PUSH, target);
    cr_assert(zmq_send(push, eos, len, 0) == (int)len);
    free(eos);
    zmq_close(push);
    zmq_ctx_term(ctx);

    eddy_test_job_view_t w = wait_job("running", 0, 1, 60000, "the job restored after the forged EOS");
    cr_log_info("forged EOS: restarts %lld", (long long)w.restarts);
    expect_exact_output();
    char *l = log_text();
    cr_assert(strstr(l, "protocol violation"), "no protocol violation in the log:\n%s", l);
    free(l);
}

/* ---- HTTP ----------------------------------------------------------------------- */

static int connect_from(const char *src, int port, bool nonblocking)
{
    int fd = socket(AF_INET, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in from = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &from.sin_addr);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
        (connect(fd, (struct sockaddr *)&to, sizeof to) != 0 && errno != EINPROGRESS)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* GET /healthz from 127.0.0.1; the status code, or -1 when no answer came
 * before the deadline. */
static int healthz(int port, uint64_t deadline)
{
    int fd = connect_from("127.0.0.1", port, true);
    if (fd < 0)
        return -1;
    const char req[] = "GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    char buf[1024];
    size_t got = 0;
    int code = -1, soerr = 0;
    socklen_t soerr_len = sizeof soerr;
    struct pollfd connected = {fd, POLLOUT, 0};
    uint64_t now = eddy_mono_ms();
    bool up = now < deadline && poll(&connected, 1, (int)(deadline - now)) == 1 &&
              getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &soerr_len) == 0 && soerr == 0;
    if (up && send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1)) {
        while (got < sizeof buf - 1) {
            now = eddy_mono_ms();
            struct pollfd p = {fd, POLLIN, 0};
            if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
                break;
            ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
            buf[got] = '\0';
            if (strstr(buf, "\r\n")) {
                sscanf(buf, "HTTP/1.%*d %d", &code);
                break;
            }
        }
    }
    close(fd);
    return code;
}

Test(hostile_peers, idle_http_connections, .init = setup, .fini = teardown, .timeout = 120)
{
    struct rlimit rl;
    cr_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_cur < IDLE_HTTP_CONNECTIONS + 256) {
        rl.rlim_cur = rl.rlim_max < IDLE_HTTP_CONNECTIONS + 256 ? rl.rlim_max
                                                               : IDLE_HTTP_CONNECTIONS + 256;
        cr_assert(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    }
    start_local(true);
    wait_job("running", 0, 0, 30000, "the job to run");
    cr_assert_eq(healthz(ports[1], eddy_mono_ms() + HEALTHZ_DEADLINE_MS), 200);

    static int fds[IDLE_HTTP_CONNECTIONS];
    int held = 0;
    for (int i = 0; i < IDLE_HTTP_CONNECTIONS; i++) {
        fds[i] = connect_from("127.0.0.2", ports[1], true);
        held += fds[i] >= 0;
    }
    cr_assert_geq(held, IDLE_HTTP_CONNECTIONS * 9 / 10, "could open only %d connections", held);

    uint64_t asked = eddy_mono_ms();
    int code = healthz(ports[1], asked + HEALTHZ_DEADLINE_MS);
    uint64_t took = eddy_mono_ms() - asked;
    for (int i = 0; i < IDLE_HTTP_CONNECTIONS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (code != 200) {
        char *l = log_text();
        cr_assert_fail("GET /healthz with %d idle connections open: %d after %llu ms; log:\n%s",
                       held, code, (unsigned long long)took, l);
    }
    cr_log_info("healthz with %d idle connections held: 200 in %llu ms", held,
                (unsigned long long)took);
    json_t *st = eddy_test_status(ports[0]);
    cr_assert(st, "the coordinator stopped answering");
    json_decref(st);
}
