/* test_socket_source.c - the TCP socket source (connectors/sources.c) through the
 * real binary, with a TCP server in the test process.
 *
 * Lines the server sends are counted by `eddy local --job wordcount --socket`
 * and written at end of input (the server closing the connection). While
 * the source cannot connect (a listening socket whose accept queue is full
 * drops the SYNs, so connect() hangs for minutes), the worker still answers
 * the coordinator: the job gets deployed and started, the worker keeps
 * heartbeating and `eddy status` answers. A port nobody listens on fails
 * the job with an error naming host:port. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/cluster.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"

static eddy_test_cluster_t *cl;
static char *outp;

/* eddy local runs with eddy's own checkpoint timing. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "socketsrc", .workers = 1, .checkpoint_interval = "",
                                  .heartbeat_timeout_ms = "1500"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    outp = eddy_test_cluster_path(cl, "counts.txt");
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(socket_source, .init = setup, .fini = teardown);

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

/* A listening TCP socket on 127.0.0.1 with the given backlog; *port set. */
static int listen_on_loopback(int backlog, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "%s", strerror(errno));
    cr_assert_eq(listen(fd, backlog), 0, "%s", strerror(errno));
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* A non-blocking connect to 127.0.0.1:port (it may stay in progress). */
static int connect_nonblocking(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    cr_assert(rc == 0 || errno == EINPROGRESS, "%s", strerror(errno));
    return fd;
}

static eddy_proc_t *start_wordcount(int *control_port, int source_port)
{
    eddy_err_t err = {{0}};
    *control_port = eddy_test_cluster_port(cl, 0);
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%d", source_port);
    const char *job[] = {"--quiet", "--job", "wordcount", "--socket", where, "--parallelism", "1",
                         "--output", outp, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
    return eddy_test_cluster_local(cl);
}

typedef struct accept_wait {
    int listener, conn;
    eddy_proc_t *owner;
} accept_wait_t;

static bool accepted(void *arg)
{
    accept_wait_t *a = arg;
    if (!eddy_proc_alive(a->owner))
        return true; /* the assertion after the wait reports it */
    struct pollfd p = {a->listener, POLLIN, 0};
    if (poll(&p, 1, 0) == 1)
        a->conn = accept(a->listener, NULL, NULL);
    return a->conn >= 0;
}

Test(socket_source, lines_from_a_tcp_server_are_counted, .timeout = 120)
{
    int port;
    int listener = listen_on_loopback(4, &port);
    int cp;
    eddy_proc_t *proc = start_wordcount(&cp, port);
    accept_wait_t a = {listener, -1, proc};
    cr_assert(eddy_poll_until(accepted, &a, 60000) && a.conn >= 0,
              "the socket source never connected; log:\n%s", log_text());
    /* 3000 lines in pieces that split lines and words. */
    char chunk[] = "apple be apple\ncat apple\nbe";
    char rest[] = "\n";
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(write(a.conn, chunk, strlen(chunk)), (ssize_t)strlen(chunk));
        cr_assert_eq(write(a.conn, rest, 1), 1);
    }
    close(a.conn);
    int rc = eddy_proc_wait(proc, 90000);
    eddy_proc_kill(proc, 2000);
    close(listener);
    char *log = log_text();
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log);
    free(log);
    char *got = eddy_read_file(outp, NULL);
    cr_assert(got, "no output file");
    cr_assert_str_eq(got, "apple\t3000\nbe\t2000\ncat\t1000\n");
    free(got);
}

typedef struct heartbeat_wait {
    int control_port;
    int fresh; /* heartbeats seen younger than the heartbeat timeout */
} heartbeat_wait_t;

/* The worker is alive and heartbeating, several times in a row. */
static bool worker_keeps_heartbeating(void *arg)
{
    heartbeat_wait_t *h = arg;
    json_t *st = eddy_test_status(h->control_port);
    if (!st)
        return false;
    json_t *workers = json_object_get(st, "workers"), *w = json_array_get(workers, 0);
    bool ok = json_is_true(json_object_get(w, "alive")) &&
              json_integer_value(json_object_get(w, "last_heartbeat_ms_ago")) < 1000;
    json_decref(st);
    h->fresh = ok ? h->fresh + 1 : 0;
    return h->fresh >= 10;
}

Test(socket_source, worker_answers_while_the_source_cannot_connect, .timeout = 120)
{
    /* An accept queue of one, filled: further SYNs are dropped, so the
     * source's connect() hangs (minutes, the kernel's SYN retries). */
    int port;
    int listener = listen_on_loopback(0, &port);
    int fill[3];
    for (int i = 0; i < 3; i++)
        fill[i] = connect_nonblocking(port);
    int cp;
    eddy_proc_t *proc = start_wordcount(&cp, port);
    /* DEPLOY is answered and START sent while the connect hangs. */
    bool running = eddy_test_wait_job_state(cp, "wordcount", "running", 30000, proc);
    char *log = log_text();
    cr_assert(running, "the job never ran while its source was connecting; log:\n%s", log);
    free(log);
    uint64_t t0 = eddy_mono_ms();
    json_t *st = eddy_test_status(cp);
    uint64_t took = eddy_mono_ms() - t0;
    cr_assert(st, "eddy status did not answer");
    json_decref(st);
    cr_assert_lt(took, 5000, "eddy status took %llu ms", (unsigned long long)took);
    heartbeat_wait_t h = {cp, 0};
    cr_assert(eddy_poll_until(worker_keeps_heartbeating, &h, 30000),
              "the worker stopped heartbeating while its source was connecting");
    cr_assert(eddy_proc_alive(proc));
    st = eddy_test_status(cp);
    json_t *job = eddy_test_status_job(st, "wordcount");
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "running");
    json_decref(st);
    eddy_proc_kill(proc, 2000);
    for (int i = 0; i < 3; i++)
        close(fill[i]);
    close(listener);
}

Test(socket_source, an_unreachable_server_fails_the_job_naming_it, .timeout = 120)
{
    eddy_err_t err = {{0}};
    int port = eddy_test_free_port(&err); /* free a moment ago: nobody listens */
    cr_assert(port > 0, "%s", err.msg);
    int cp;
    eddy_proc_t *proc = start_wordcount(&cp, port);
    int rc = eddy_proc_wait(proc, 90000);
    eddy_proc_kill(proc, 2000);
    char *log = log_text();
    cr_assert_neq(rc, 0, "eddy local succeeded without its source; log:\n%s", log);
    char want[96];
    snprintf(want, sizeof want, "cannot connect to socket source 127.0.0.1:%d", port);
    cr_assert(strstr(log, want), "the log does not say '%s':\n%s", want, log);
    free(log);
}
