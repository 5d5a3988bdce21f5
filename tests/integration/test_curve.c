/* test_curve.c - a cluster run with CURVE keys (`eddy keygen`, --keys):
 * only authorised keys get in, each only as far as its role allows, and the
 * job's output stays exact throughout.
 *
 * - outsiders: while a rate-limited wordcount runs under `eddy local
 *   --keys`, a client without keys gets no status and changes nothing
 *   (rescale, cancel, plugin upload fail with a clear error in bounded
 *   time); random multi-frame garbage from DEALER, PUSH and REQ sockets
 *   without keys, and raw TCP bytes, hit the control port and every
 *   worker's data port and never reach a decoder; a worker key cannot
 *   submit, rescale or upload a plugin, a reader key cannot cancel, a
 *   client key can rescale; the output equals the reference byte for byte.
 * - key files: loose permissions and corrupt keys are one-line usage
 *   errors (exit 2) of every kind of process, nothing started.
 *
 * Every wait is a poll of an observable condition with a deadline. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define TEXT_BYTES (2u * 1024 * 1024)
/* --rate is chosen so an undisturbed run takes this long: longer than the
 * checks made while it runs (each a process start, slow under ASan) */
#if defined(__SANITIZE_ADDRESS__)
#define RUN_SECONDS 90
#else
#define RUN_SECONDS 40
#endif
#define MAX_WORKERS 8
/* A refused client must give up well within its own timeout. */
#define REFUSED_DEADLINE_MS 20000

static eddy_test_cluster_t *cl;
static char *dir, *keys, *reader, *workerkey, *input, *output;
static eddy_test_wc_input_t wc; /* the input text and its reference output */
static char rate[32];
static int ports[2];
static char *port_s, *coord_url;
static eddy_proc_t *local;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_random(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Copies src/name to dst/as, mode 0600. */
static void copy_key(const char *src, const char *name, const char *dst, const char *as)
{
    char from[700], to[700];
    snprintf(from, sizeof from, "%s/%s", src, name);
    snprintf(to, sizeof to, "%s/%s", dst, as);
    size_t len;
    char *data = eddy_read_file(from, &len);
    cr_assert(data, "cannot read %s", from);
    cr_assert(eddy_write_file(to, data, len) == 0);
    cr_assert(chmod(to, 0600) == 0);
    free(data);
}

static void run_keygen(const char *path)
{
    char *argv[] = {EDDY_BINARY, "keygen", (char *)path, NULL};
    char *err = NULL;
    int rc = eddy_proc_run(argv, 20000, NULL, &err);
    cr_assert_eq(rc, 0, "eddy keygen exited %d: %s", rc, err ? err : "");
    free(err);
}

static void setup(void)
{
    eddy_err_t err = {{0}};
    /* liveness is not under test */
    eddy_test_cluster_opts_t o = {.tag = "curve", .workers = 3, .checkpoint_interval = "300",
                                  .heartbeat_timeout_ms = "10000"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    keys = eddy_test_cluster_path(cl, "keys");
    reader = eddy_test_cluster_path(cl, "reader");
    workerkey = eddy_test_cluster_path(cl, "workerkey");
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    run_keygen(keys);
    /* what an operator hands out: a reader gets server.pub and reader.key;
     * "workerkey" presents the workers' pair as a client would */
    cr_assert(mkdir(reader, 0700) == 0 && mkdir(workerkey, 0700) == 0);
    copy_key(keys, "server.pub", reader, "server.pub");
    copy_key(keys, "reader.key", reader, "reader.key");
    copy_key(keys, "server.pub", workerkey, "server.pub");
    copy_key(keys, "server.key", workerkey, "client.key");
    cr_assert(eddy_test_wc_input(input, TEXT_BYTES, 4242, &wc, &err) == 0, "%s", err.msg);
    snprintf(rate, sizeof rate, "%zu", wc.lines / RUN_SECONDS);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    port_s = eddy_test_cluster_port_s(cl, 0);
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

/* ---- clients ------------------------------------------------------------------ */

typedef struct ran {
    int rc;
    uint64_t ms;
    char *out, *err;
} ran_t;

static void ran_free(ran_t *r)
{
    free(r->out);
    free(r->err);
}

/* Runs `eddy SUB ARGS... --coordinator URL [--keys K]`. */
static ran_t eddy_client(const char *keys_dir, char *const args[])
{
    char *argv[24] = {EDDY_BINARY};
    int k = 1;
    for (int i = 0; args[i]; i++)
        argv[k++] = args[i];
    argv[k++] = "--coordinator";
    argv[k++] = coord_url;
    if (keys_dir) {
        argv[k++] = "--keys";
        argv[k++] = (char *)keys_dir;
    }
    argv[k] = NULL;
    ran_t r = {0};
    uint64_t t0 = eddy_mono_ms();
    r.rc = eddy_proc_run(argv, 90000, &r.out, &r.err);
    r.ms = eddy_mono_ms() - t0;
    if (!r.out)
        r.out = strdup("");
    if (!r.err)
        r.err = strdup("");
    return r;
}

static json_t *status_as(const char *keys_dir)
{
    char *args[] = {"status", "--json", NULL};
    ran_t r = eddy_client(keys_dir, args);
    json_t *doc = r.rc == 0 ? json_loads(r.out, 0, NULL) : NULL;
    ran_free(&r);
    return doc;
}

/* A command that must be refused: non-zero exit within the deadline, one
 * line on stderr containing needle. */
static void expect_refused(const char *keys_dir, char *const args[], const char *needle)
{
    cr_assert(eddy_proc_alive(local), "eddy local ended before the checks did; log:\n%s",
              log_text());
    ran_t r = eddy_client(keys_dir, args);
    cr_assert_neq(r.rc, 0, "`eddy %s` with keys %s succeeded: %s", args[0],
                  keys_dir ? keys_dir : "(none)", r.out);
    cr_assert_neq(r.rc, -1, "`eddy %s` did not end (hung)", args[0]);
    cr_assert_lt(r.ms, REFUSED_DEADLINE_MS, "`eddy %s` took %llu ms to give up", args[0],
                 (unsigned long long)r.ms);
    cr_assert(strstr(r.err, needle), "`eddy %s` said '%s', want '%s'", args[0], r.err, needle);
    ran_free(&r);
}

/* ---- the job -------------------------------------------------------------------- */

static void start_local(void)
{
    eddy_err_t err = {{0}};
    const char *job[] = {"--keys", keys, "--quiet", "--job", "wordcount", "--parallelism", "3",
                         "--input", input, "--output", output, "--rate", rate, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
}

typedef struct job_view {
    bool found;
    char state[32];
    int64_t epoch, count_parallelism, restarts;
} job_view_t;

static job_view_t view_job(const char *keys_dir)
{
    job_view_t v = {0};
    json_t *st = status_as(keys_dir);
    json_t *j = st ? eddy_test_status_job(st, "wordcount") : NULL;
    if (j) {
        v.found = true;
        const char *s = json_string_value(json_object_get(j, "state"));
        snprintf(v.state, sizeof v.state, "%s", s ? s : "?");
        v.epoch = json_integer_value(json_object_get(j, "epoch"));
        v.restarts = json_integer_value(json_object_get(j, "restarts"));
        size_t i;
        json_t *op;
        json_array_foreach(json_object_get(j, "operators"), i, op)
        {
            const char *name = json_string_value(json_object_get(op, "name"));
            if (name && !strcmp(name, "count"))
                v.count_parallelism = json_integer_value(json_object_get(op, "parallelism"));
        }
    }
    json_decref(st);
    return v;
}

static bool running(void *arg)
{
    (void)arg;
    if (!eddy_proc_alive(local))
        return true;
    job_view_t v = view_job(keys);
    return v.found && !strcmp(v.state, "running");
}

typedef struct endpoints {
    char data[MAX_WORKERS][128];
    int n;
} endpoints_t;

static void worker_endpoints(endpoints_t *e)
{
    memset(e, 0, sizeof *e);
    json_t *st = status_as(keys);
    cr_assert(st, "no status with the client key");
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        const char *addr = json_string_value(json_object_get(w, "address"));
        if (addr && e->n < MAX_WORKERS && json_is_true(json_object_get(w, "alive")))
            snprintf(e->data[e->n++], sizeof e->data[0], "%s", addr);
    }
    json_decref(st);
}

static int port_of(const char *endpoint)
{
    const char *colon = strrchr(endpoint, ':');
    return colon ? atoi(colon + 1) : 0;
}

/* ---- outsiders' garbage ------------------------------------------------------------ */

static void *plain_socket(void *ctx, int type, const char *endpoint)
{
    void *s = zmq_socket(ctx, type);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    cr_assert_eq(zmq_connect(s, endpoint), 0, "connect %s", endpoint);
    return s;
}

static void send_random(void *s, int n, size_t max_len)
{
    char buf[512];
    for (int f = 0; f < n; f++) {
        size_t len = (size_t)(next_random() % (max_len + 1));
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)next_random();
        zmq_send(s, buf, len, (f + 1 < n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    }
}

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

static void garbage_round(const endpoints_t *ep)
{
    void *ctx = zmq_ctx_new();
    void *dealer = plain_socket(ctx, ZMQ_DEALER, coord_url);
    void *req = plain_socket(ctx, ZMQ_REQ, coord_url);
    void *push[MAX_WORKERS], *dealer_data[MAX_WORKERS];
    for (int i = 0; i < ep->n; i++) {
        push[i] = plain_socket(ctx, ZMQ_PUSH, ep->data[i]);
        dealer_data[i] = plain_socket(ctx, ZMQ_DEALER, ep->data[i]);
    }
    for (int k = 0; k < 10; k++) {
        send_random(dealer, 1 + (int)(next_random() % 5), 300);
        for (int i = 0; i < ep->n; i++) {
            send_random(push[i], 1 + (int)(next_random() % 5), 300);
            send_random(dealer_data[i], 1 + (int)(next_random() % 3), 100);
        }
    }
    send_random(req, 1, 100);
    raw_tcp_garbage(ports[0]);
    for (int i = 0; i < ep->n; i++)
        raw_tcp_garbage(port_of(ep->data[i]));
    zmq_close(dealer);
    zmq_close(req);
    for (int i = 0; i < ep->n; i++) {
        zmq_close(push[i]);
        zmq_close(dealer_data[i]);
    }
    zmq_ctx_term(ctx);
}

/* ---- tests ---------------------------------------------------------------------------- */

Test(curve, only_authorised_keys_within_their_role, .init = setup, .fini = teardown,
     .timeout = 300)
{
    start_local();
    cr_assert(eddy_poll_until(running, NULL, 60000) && eddy_proc_alive(local),
              "the job did not start running; log:\n%s", log_text());
    job_view_t before = view_job(keys);
    cr_assert_eq(before.count_parallelism, 3);
    endpoints_t ep;
    worker_endpoints(&ep);
    cr_assert_eq(ep.n, 3, "want 3 workers with data endpoints in status");

    /* no keys: no status, no effect; the error says what is missing */
    char *status_args[] = {"status", NULL};
    expect_refused(NULL, status_args, "requires CURVE keys");
    char *rescale_args[] = {"rescale", "wordcount", "count", "2", NULL};
    expect_refused(NULL, rescale_args, "requires CURVE keys");
    char *cancel_args[] = {"cancel", "wordcount", NULL};
    expect_refused(NULL, cancel_args, "requires CURVE keys");
    char *upload_args[] = {"submit", "--plugin", EDDY_BINARY_DIR "/examples/libclicks.so",
                           "--job", "clicks", "--input", input, "--output", output, NULL};
    expect_refused(NULL, upload_args, "requires CURVE keys");

    /* garbage from outsiders, on every port, several rounds */
    for (int round = 0; round < 5; round++)
        garbage_round(&ep);

    /* a reader reads but cannot cancel; a worker key cannot submit,
     * rescale or upload */
    json_t *st = status_as(reader);
    cr_assert(st, "a reader key got no status");
    json_decref(st);
    expect_refused(reader, cancel_args, "permission denied: a reader key");
    expect_refused(workerkey, rescale_args, "permission denied: a worker key");
    char *submit_args[] = {"submit", "--job", "wordcount", "--input", input, NULL};
    expect_refused(workerkey, submit_args, "permission denied: a worker key");
    expect_refused(workerkey, upload_args, "permission denied: a worker key");

    job_view_t after = view_job(keys);
    cr_assert(after.found, "the job vanished; log:\n%s", log_text());
    cr_assert_eq(after.count_parallelism, 3, "an outsider changed the parallelism");
    cr_assert_eq(after.epoch, before.epoch, "the job was redeployed (epoch %lld -> %lld)",
                 (long long)before.epoch, (long long)after.epoch);
    cr_assert_eq(after.restarts, 0, "the job restarted");
    cr_assert(!strcmp(after.state, "running") || !strcmp(after.state, "finished"),
              "job state %s", after.state);

    /* the client key works: a rescale while the garbage goes on */
    garbage_round(&ep);
    if (!strcmp(after.state, "running")) {
        char *ok_rescale[] = {"rescale", "wordcount", "count", "2", NULL};
        ran_t r = eddy_client(keys, ok_rescale);
        cr_assert(r.rc == 0 || strstr(r.err, "finished"), "client rescale failed (%d): %s", r.rc,
                  r.err);
        ran_free(&r);
    }
    garbage_round(&ep);

    int rc = eddy_proc_wait(local, 150000);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log_text());
    size_t gl = 0;
    char *got = eddy_read_file(output, &gl);
    cr_assert(got && gl == wc.expected_len && !memcmp(got, wc.expected, wc.expected_len),
              "output differs from the reference (%zu vs %zu bytes); log:\n%s", gl, wc.expected_len,
              log_text());
    free(got);
    char *l = log_text();
    cr_assert(strstr(l, "refused a connection"), "no refused handshake was logged:\n%s", l);
    cr_assert(strstr(l, "refused 'cancel' from a reader key"), "no refused command logged:\n%s", l);
    /* with CURVE, no outsider's byte reaches a decoder */
    cr_assert(!strstr(l, "dropping control message"), "garbage reached the coordinator:\n%s", l);
    cr_assert(!strstr(l, "dropping data-plane message"), "garbage reached a worker:\n%s", l);
    cr_assert(!strstr(l, "Sanitizer"), "a sanitizer reported an error:\n%s", l);
    /* refusals are rate limited: not a line per garbage message */
    size_t refused_lines = 0;
    for (const char *p = l; (p = strstr(p, "refused a connection")); p++)
        refused_lines++;
    cr_assert_lt(refused_lines, 200, "%zu refusal lines: not rate limited", refused_lines);
    free(l);
}

/* Runs argv and expects a usage error (2) whose one line contains needle. */
static void expect_usage_error(char *const argv[], const char *needle)
{
    char *err = NULL;
    int rc = eddy_proc_run(argv, 30000, NULL, &err);
    cr_assert_eq(rc, 2, "`eddy %s` exited %d, want 2: %s", argv[1], rc, err ? err : "");
    cr_assert(err && strstr(err, needle), "`eddy %s` said '%s', want '%s'", argv[1],
              err ? err : "", needle);
    char *nl = strchr(err, '\n');
    cr_assert(!nl || !nl[1], "more than one line: %s", err);
    free(err);
}

Test(curve, loose_or_corrupt_key_files_refused, .init = setup, .fini = teardown, .timeout = 120)
{
    char path[700];
    char *local_argv[] = {EDDY_BINARY, "local", "--keys", keys, "--control-port", port_s,
                          "--http-port", "0", "--job", "wordcount", "--input", input,
                          "--output", output, NULL};
    char *coord_argv[] = {EDDY_BINARY, "coordinator", "--keys", keys, "--bind", coord_url,
                          "--http-port", "0", NULL};
    char *worker_argv[] = {EDDY_BINARY, "worker", "--keys", keys, "--coordinator", coord_url, NULL};
    char *status_argv[] = {EDDY_BINARY, "status", "--keys", keys, "--coordinator", coord_url, NULL};

    /* keygen --keep-existing (what the compose deployment runs at every
     * start): a complete set is checked and kept, byte for byte */
    snprintf(path, sizeof path, "%s/server.key", keys);
    size_t before_len;
    char *before = eddy_read_file(path, &before_len);
    cr_assert(before);
    char *keep_argv[] = {EDDY_BINARY, "keygen", "--keep-existing", keys, NULL};
    char *out = NULL;
    int rc = eddy_proc_run(keep_argv, 20000, &out, NULL);
    cr_assert_eq(rc, 0, "keygen --keep-existing on a complete set exited %d", rc);
    cr_assert(out && strstr(out, "kept"), "keygen --keep-existing said '%s'", out ? out : "");
    free(out);
    size_t after_len;
    char *after = eddy_read_file(path, &after_len);
    cr_assert(after && after_len == before_len && !memcmp(before, after, before_len),
              "keygen --keep-existing changed server.key");
    free(before);
    free(after);
    /* a partial set is never completed (new keys beside old ones would
     * split the cluster) */
    char partial[700];
    snprintf(partial, sizeof partial, "%s/partial", dir);
    cr_assert(mkdir(partial, 0700) == 0);
    copy_key(keys, "server.pub", partial, "server.pub");
    char *partial_argv[] = {EDDY_BINARY, "keygen", "--keep-existing", partial, NULL};
    expect_usage_error(partial_argv, "holds only some of the key files (no server.key)");

    cr_assert(chmod(path, 0644) == 0);
    expect_usage_error(local_argv, "server.key: permissions 0644 are too open");
    expect_usage_error(coord_argv, "server.key: permissions 0644 are too open");
    expect_usage_error(worker_argv, "server.key: permissions 0644 are too open");
    cr_assert(chmod(path, 0600) == 0);

    snprintf(path, sizeof path, "%s/client.key", keys);
    cr_assert(chmod(path, 0604) == 0);
    expect_usage_error(status_argv, "client.key: permissions 0604 are too open");
    cr_assert(chmod(path, 0600) == 0);

    snprintf(path, sizeof path, "%s/authorized_keys", keys);
    cr_assert(chmod(path, 0660) == 0);
    expect_usage_error(coord_argv, "authorized_keys: permissions 0660 are too open");
    cr_assert(chmod(path, 0600) == 0);

    /* corrupt: a flipped character of the secret key */
    snprintf(path, sizeof path, "%s/server.key", keys);
    size_t len;
    char *key = eddy_read_file(path, &len);
    cr_assert(key);
    char *sec = strstr(key, "secret ");
    cr_assert(sec);
    sec[10] = sec[10] == 'x' ? 'y' : 'x';
    cr_assert(eddy_write_file(path, key, len) == 0);
    cr_assert(chmod(path, 0600) == 0);
    expect_usage_error(coord_argv, "does not match the secret key");
    expect_usage_error(local_argv, "does not match the secret key");
    /* truncated */
    cr_assert(eddy_write_file(path, key, (size_t)(sec - key) + 20) == 0);
    expect_usage_error(worker_argv, "corrupt key");
    free(key);
    /* a broken set is not kept silently */
    expect_usage_error(keep_argv, "corrupt key");

    /* a missing directory, and keygen refusing to overwrite */
    char *missing_argv[] = {EDDY_BINARY, "status", "--keys", "/nonexistent/eddy-keys", NULL};
    expect_usage_error(missing_argv, "/nonexistent/eddy-keys");
    char *again_argv[] = {EDDY_BINARY, "keygen", keys, NULL};
    expect_usage_error(again_argv, "exists");
}
