/* test_trust_peers.c - authority by role, messages bound to their senders,
 * and caps on what a peer can make the coordinator hold (issue 24, items
 * 2-4), with real eddy processes and a hand-driven "fake worker": a ZeroMQ
 * DEALER that speaks the control protocol with net/proto.c's codec.
 *
 *  reader_epoch      etcd, CURVE keys, one coordinator and one worker running
 *                    an endless job: status requests made with the reader
 *                    key and leader_epoch 2^62 (three, as retries), then
 *                    with the worker and the client key, are answered; the leader
 *                    neither steps down (its epoch in /api/v1/leader stays)
 *                    nor restores the job; the epochs are counted
 *                    (eddy_rejected_messages_total{reason="leader_epoch"}).
 *                    Before: the leader stepped down, was re-elected and
 *                    restored the job.
 *  forged_tasks      keys, eddy local with two workers and an endless job; a
 *                    fake worker with the worker key (registered, placed
 *                    nowhere) sends TASK_FAILED for count[0] and TASK_DONE x5
 *                    for source[0], and heartbeats source[0]'s metrics: the
 *                    job keeps running without a restore, its counters do
 *                    not take the forged records, {reason="not_placed"}
 *                    rises. Before: the job restored. LIVENESS for the
 *                    real workers with the forger's own token, none or a
 *                    guess is rejected ({reason="liveness"}): a worker key
 *                    cannot keep another worker alive.
 *  duplicate_done    eddy coordinator whose only worker is the fake one: it
 *                    confirms the DEPLOY and then sends TASK_DONE x5 for its
 *                    own source[0]: counted once ({reason="duplicate"} = 4),
 *                    the job does not start finishing (no final COMPLETE
 *                    reaches the worker). Before: five of three tasks were
 *                    "done" and the final commit went out. Then every task
 *                    ends: source[0]'s final ACK three times does not
 *                    finish the job, the other two tasks' ACKs do.
 *  heartbeat_flood   eddy local; a fake worker sends heartbeats of 65,536
 *                    task entries (5.5 MB) and of 2,000 small ones: both
 *                    rejected ({reason="heartbeat_bytes"} and
 *                    {reason="heartbeat_entries"}), the coordinator's RSS
 *                    grows less than 100 MiB and `eddy status` answers.
 *                    Before: hundreds of MiB, status timed out.
 *  remote_worker_without_keys  no keys: a real worker in a network
 *                    namespace (another host's address) is refused
 *                    registration for good and exits saying why; a peer
 *                    using this machine's own address registers. Skipped
 *                    where namespaces cannot be made.
 *  caps              eddy local with small caps: a registration past
 *                    --max-registrations, a decision past
 *                    --max-decision-bytes, task series past
 *                    --max-worker-series, a plugin upload past --max-plugins
 *                    and replies to a client that never reads past
 *                    --reply-hwm are refused or dropped, each counted under
 *                    its reason.
 *
 * Every wait polls an observable condition with a deadline; the two plain
 * waits are marked: they give a wrong reaction the time to happen. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "api/operator.h"
#include "common/clock.h"
#include "net/curve.h"
#include "net/keys.h"
#include "net/proto.h"
#include "tests/support/cluster.h"
#include "tests/support/etcd.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"

/* The fixture gives the directory, the ports, eddy local and the plain
 * worker; the coordinators whose flags are the test (an etcd:// store, no
 * checkpoints, a wildcard bind) are started here by hand as coord. */
static eddy_test_cluster_t *cl;
static char *dir, *keys_dir, *reader_dir, *logp, *wlogp, *meta, *snaps;
static int ports[3];
static char *http_s, *coord_url, *bind_url;
static eddy_proc_t coord, worker;
static eddy_proc_t *leader; /* coord, or eddy local */
static eddy_test_etcd_t *etcd;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "trust", .checkpoint_interval = "300",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    keys_dir = eddy_test_cluster_path(cl, "keys");
    reader_dir = eddy_test_cluster_path(cl, "reader");
    logp = eddy_test_cluster_coordinator_log(cl, 0);
    wlogp = eddy_test_cluster_path(cl, "worker.log");
    meta = eddy_test_cluster_metastore(cl);
    snaps = eddy_test_cluster_path(cl, "snapshots");
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    ports[2] = eddy_test_free_port(&err); /* a data endpoint nobody listens on */
    cr_assert(ports[2] > 0, "%s", err.msg);
    http_s = eddy_test_cluster_http_port_s(cl, 0);
    coord_url = bind_url = eddy_test_cluster_url(cl, 0);
    memset(&coord, 0, sizeof coord);
    memset(&worker, 0, sizeof worker);
    leader = &coord;
}

static void teardown(void)
{
    eddy_proc_kill(&worker, 3000);
    eddy_proc_kill(&coord, 3000);
    eddy_test_cluster_destroy(&cl); /* the suite's .fini runs after a test's own */
    eddy_test_etcd_stop(&etcd);
}

static char *log_text(void)
{
    char *s = eddy_read_file(logp, NULL);
    return s ? s : strdup("(no log)");
}

static void copy_file(const char *from_dir, const char *name, const char *to_dir)
{
    char from[700], to[700];
    snprintf(from, sizeof from, "%s/%s", from_dir, name);
    snprintf(to, sizeof to, "%s/%s", to_dir, name);
    size_t len = 0;
    char *data = eddy_read_file(from, &len);
    cr_assert(data, "cannot read %s", from);
    cr_assert(eddy_write_file(to, data, len) == 0 && chmod(to, 0600) == 0);
    free(data);
}

/* keys_dir (eddy keygen) and reader_dir: what a reader is handed. */
static void make_keys(void)
{
    char *argv[] = {EDDY_BINARY, "keygen", keys_dir, NULL};
    char *errout = NULL;
    int rc = eddy_proc_run(argv, 20000, NULL, &errout);
    cr_assert_eq(rc, 0, "eddy keygen exited %d: %s", rc, errout ? errout : "");
    free(errout);
    cr_assert(mkdir(reader_dir, 0700) == 0);
    copy_file(keys_dir, "server.pub", reader_dir);
    copy_file(keys_dir, "reader.key", reader_dir);
    /* eddy status (eddy_test_status) uses the client key */
    setenv("EDDY_KEYS", keys_dir, 1);
}

static long long rejected(const char *reason)
{
    char series[128];
    snprintf(series, sizeof series, "eddy_rejected_messages_total{reason=\"%s\"}", reason);
    return eddy_test_scrape_sum(ports[1], series);
}

typedef struct metric_wait {
    const char *reason;
    long long min, last;
} metric_wait_t;

static bool metric_reached(void *arg)
{
    metric_wait_t *w = arg;
    w->last = rejected(w->reason);
    return w->last >= w->min;
}

static void wait_rejected(const char *reason, long long min)
{
    metric_wait_t w = {reason, min, -1};
    if (!eddy_poll_until(metric_reached, &w, 15000)) {
        char *l = log_text();
        cr_assert_fail("eddy_rejected_messages_total{reason=\"%s\"} stayed at %lld (< %lld); log:\n%s",
                       reason, w.last, min, l);
    }
}

static json_t *job_of(const char *job)
{
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? json_incref(eddy_test_status_job(st, job)) : NULL;
    json_decref(st);
    return j;
}

static void expect_running_unrestored(const char *job)
{
    json_t *j = job_of(job);
    char *l = log_text();
    cr_assert(j, "no job %s in eddy status; log:\n%s", job, l);
    const char *state = json_string_value(json_object_get(j, "state"));
    cr_assert(state && !strcmp(state, "running"), "job %s is %s, not running; log:\n%s", job,
              state ? state : "?", l);
    cr_assert_eq(json_integer_value(json_object_get(j, "restarts")), 0,
                 "job %s was restored; log:\n%s", job, l);
    free(l);
    json_decref(j);
}

/* ---- the fake worker ---------------------------------------------------------- */

typedef struct fake {
    void *ctx, *sock;
    uint32_t id;
    uint64_t liveness_token; /* its registration's (REGISTERED) */
} fake_t;

static void fake_connect_to(fake_t *f, const char *endpoint, const char *keys,
                            eddy_keys_use_t use)
{
    f->ctx = zmq_ctx_new();
    f->sock = zmq_socket(f->ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(f->sock, ZMQ_LINGER, &linger, sizeof linger);
    eddy_err_t err = {{0}};
    if (keys) {
        eddy_keys_t *k = eddy_keys_load(keys, use, &err);
        cr_assert(k, "%s", err.msg);
        cr_assert(eddy_curve_client(f->sock, k, &err) == 0, "%s", err.msg);
        eddy_keys_destroy(&k);
    }
    cr_assert(zmq_connect(f->sock, endpoint) == 0);
}

static void fake_connect(fake_t *f, const char *keys, eddy_keys_use_t use)
{
    fake_connect_to(f, coord_url, keys, use);
}

static void fake_close(fake_t *f)
{
    if (f->sock)
        zmq_close(f->sock);
    if (f->ctx)
        zmq_ctx_term(f->ctx);
    memset(f, 0, sizeof *f);
}

static void fake_send_bytes(fake_t *f, const char *data, size_t len)
{
    cr_assert(zmq_send(f->sock, data, len, 0) == (int)len, "send: %s", zmq_strerror(errno));
}

static void fake_send(fake_t *f, const eddy_msg_t *m)
{
    size_t len;
    char *data = eddy_msg_encode(m, &len);
    cr_assert(data);
    fake_send_bytes(f, data, len);
    free(data);
}

/* The next message within timeout_ms (decoded into *m): false when none. */
static bool fake_recv(fake_t *f, eddy_msg_t *m, long timeout_ms)
{
    zmq_pollitem_t it = {f->sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return false;
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, f->sock, 0) < 0) {
        zmq_msg_close(&msg);
        return false;
    }
    eddy_err_t err = {{0}};
    int rc = eddy_msg_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), m, &err);
    zmq_msg_close(&msg);
    cr_assert(rc == 0, "undecodable message from the coordinator: %s", err.msg);
    return true;
}

static void fake_heartbeat(fake_t *f)
{
    eddy_msg_t hb = {.type = EDDY_MSG_HEARTBEAT};
    hb.u.heartbeat.worker_id = f->id;
    fake_send(f, &hb);
}

/* Registers and waits for the REGISTERED that accepts it. */
static void fake_register(fake_t *f, const char *name)
{
    eddy_msg_t reg = {.type = EDDY_MSG_REGISTER};
    snprintf(reg.u.reg.name, sizeof reg.u.reg.name, "%s", name);
    snprintf(reg.u.reg.data_endpoint, sizeof reg.u.reg.data_endpoint, "tcp://127.0.0.1:%d",
             ports[2]);
    snprintf(reg.u.reg.host, sizeof reg.u.reg.host, "fakehost");
    reg.u.reg.pid = getpid();
    reg.u.reg.protocol_version = EDDY_PROTOCOL_VERSION;
    uint64_t deadline = eddy_mono_ms() + 15000;
    while (eddy_mono_ms() < deadline) {
        fake_send(f, &reg);
        eddy_msg_t m;
        uint64_t until = eddy_mono_ms() + 1000;
        while (eddy_mono_ms() < until && fake_recv(f, &m, 200)) {
            bool ok = m.type == EDDY_MSG_REGISTERED && !m.u.registered.error[0];
            f->id = m.u.registered.worker_id;
            f->liveness_token = m.u.registered.liveness_token;
            eddy_msg_clear(&m);
            if (ok)
                return;
        }
    }
    char *l = log_text();
    cr_assert_fail("the fake worker was not registered; log:\n%s", l);
}

static void task_done(fake_t *f, uint32_t job, uint32_t epoch, uint32_t stage, uint32_t instance)
{
    eddy_msg_t m = {.type = EDDY_MSG_TASK_DONE};
    m.u.task_done.job = job;
    m.u.task_done.epoch = epoch;
    m.u.task_done.stage = stage;
    m.u.task_done.instance = instance;
    fake_send(f, &m);
}

static void final_ack(fake_t *f, uint32_t job, uint32_t epoch, uint32_t stage, uint32_t instance)
{
    eddy_msg_t m = {.type = EDDY_MSG_ACK};
    m.u.ack.job = job;
    m.u.ack.epoch = epoch;
    m.u.ack.checkpoint = EDDY_FINAL_CHECKPOINT;
    m.u.ack.stage = stage;
    m.u.ack.instance = instance;
    m.u.ack.position = -1;
    fake_send(f, &m);
}

/* Heartbeats for ms (so the fake stays alive), collecting what arrives;
 * *final set when a COMPLETE of the job's final checkpoint came. */
static void fake_idle(fake_t *f, uint64_t ms, bool *final)
{
    uint64_t until = eddy_mono_ms() + ms, next_hb = 0;
    while (eddy_mono_ms() < until) {
        if (eddy_mono_ms() >= next_hb) {
            fake_heartbeat(f);
            next_hb = eddy_mono_ms() + 200;
        }
        eddy_msg_t m;
        if (!fake_recv(f, &m, 50))
            continue;
        if (final && m.type == EDDY_MSG_COMPLETE && m.u.complete.checkpoint == EDDY_FINAL_CHECKPOINT)
            *final = true;
        eddy_msg_clear(&m);
    }
}

/* ---- processes ---------------------------------------------------------------- */

static char *endless_job[] = {"wordcount", "--generate", "--lines", "0", "--rate", "2000",
                              "--parallelism", "1", NULL};

/* eddy local --workers n --no-rebalance --quiet EXTRA..., checkpoints
 * every interval ms ("": eddy's default), with --keys keys (may be NULL). */
static void start_local_with(const char *keys, int workers, const char *interval,
                             const char *const extra[])
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t *o = eddy_test_cluster_opts(cl);
    o->workers = workers;
    o->keys_dir = keys;
    o->checkpoint_interval = interval;
    const char *argv[40] = {"--no-rebalance", "--quiet"};
    int k = 2;
    for (int i = 0; extra[i] && k < 39; i++)
        argv[k++] = extra[i];
    argv[k] = NULL;
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    leader = eddy_test_cluster_local(cl);
    logp = eddy_test_cluster_path(cl, "local.log");
}

static void start_local(bool with_keys, int workers)
{
    const char *argv[16] = {"--job"};
    int k = 1;
    for (char **a = endless_job; *a; a++)
        argv[k++] = *a;
    argv[k] = NULL;
    start_local_with(with_keys ? keys_dir : NULL, workers, "300", argv);
}

/* eddy submit --keys keys (may be NULL) --job ENDLESS_JOB... */
static void submit_endless(const char *keys)
{
    const char *argv[16] = {"--job"};
    int k = 1;
    for (char **a = endless_job; *a; a++)
        argv[k++] = *a;
    argv[k] = NULL;
    eddy_test_cluster_opts(cl)->keys_dir = keys;
    eddy_err_t err = {{0}};
    int rc = eddy_test_cluster_submit(cl, argv, NULL, &err);
    char *l = log_text();
    cr_assert_eq(rc, 0, "%s; log:\n%s", err.msg, l);
    free(l);
}

static void wait_running(const char *job, int64_t min_completed)
{
    if (!eddy_test_wait_job_progress(ports[0], job, "running", min_completed, 0, 60000, leader)) {
        char *l = log_text();
        cr_assert_fail("job %s did not run; log:\n%s", job, l);
    }
}

/* ---- tests -------------------------------------------------------------------- */

TestSuite(trust_peers, .init = setup, .fini = teardown, .timeout = 240);

static int64_t leader_epoch(void)
{
    long status = 0;
    char *body = eddy_test_http_get(ports[1], "/api/v1/leader", 5000, &status);
    json_t *doc = body && status == 200 ? json_loads(body, 0, NULL) : NULL;
    const char *role = json_string_value(json_object_get(doc, "role"));
    int64_t epoch = role && !strcmp(role, "leader") ? json_integer_value(json_object_get(doc, "epoch")) : -1;
    json_decref(doc);
    free(body);
    return epoch;
}

static bool leading(void *arg)
{
    return (*(int64_t *)arg = leader_epoch()) > 0;
}

/* Three status requests carrying leader epoch 2^62, made with the keys of
 * dir (as use), each answered. */
static void status_with_epoch(const char *keys, eddy_keys_use_t use)
{
    fake_t f = {0};
    fake_connect(&f, keys, use);
    for (int i = 0; i < 3; i++) {
        eddy_msg_t req = {.type = EDDY_MSG_REQUEST, .leader_epoch = (uint64_t)1 << 62};
        snprintf(req.u.request.verb, sizeof req.u.request.verb, "status");
        fake_send(&f, &req);
        eddy_msg_t reply;
        bool got = fake_recv(&f, &reply, 10000);
        char *l = got ? NULL : log_text();
        cr_assert(got, "no answer to a status request; log:\n%s", l);
        cr_assert_eq(reply.type, EDDY_MSG_REPLY);
        cr_assert_eq(reply.u.reply.status, 0, "status refused: %s", reply.u.reply.body);
        eddy_msg_clear(&reply);
    }
    fake_close(&f);
}

Test(trust_peers, reader_epoch)
{
    eddy_err_t err = {{0}};
    etcd = eddy_test_etcd_start(&err);
    cr_assert(etcd, "%s", err.msg);
    make_keys();
    char metastore[128];
    snprintf(metastore, sizeof metastore, "etcd://%s", eddy_test_etcd_url(etcd) + strlen("http://"));
    char *cargv[] = {EDDY_BINARY, "coordinator", "--bind", bind_url, "--http-port", http_s,
                     "--metastore", metastore, "--snapshot-dir", snaps, "--keys", keys_dir,
                     "--checkpoint-interval", "300", "--no-rebalance", NULL};
    cr_assert(eddy_proc_start(&coord, cargv, NULL, logp, &err) == 0, "%s", err.msg);
    int64_t epoch = 0;
    if (!eddy_poll_until(leading, &epoch, 30000)) {
        char *l = log_text();
        cr_assert_fail("the coordinator did not lead; log:\n%s", l);
    }
    eddy_test_cluster_opts(cl)->keys_dir = keys_dir;
    /* a worker without --name */
    cr_assert(eddy_test_cluster_start_worker_as(cl, "", NULL, &err) >= 0, "%s", err.msg);
    submit_endless(keys_dir);
    wait_running("wordcount", 1);

    /* what `eddy status` with the reader key sends, with an epoch far above
     * any leader's; three times, as a client's retries would; then the
     * same with the worker key (server.key) and the client key */
    status_with_epoch(reader_dir, EDDY_KEYS_CLIENT);
    status_with_epoch(keys_dir, EDDY_KEYS_SERVER);
    status_with_epoch(keys_dir, EDDY_KEYS_CLIENT);
    /* plain wait: a step-down, re-election and restore would take this long */
    eddy_nap_ms(3000);
    char *l = log_text();
    cr_assert_eq(leader_epoch(), epoch, "the leader changed (epoch %lld, was %lld); log:\n%s",
                 (long long)leader_epoch(), (long long)epoch, l);
    cr_assert(!strstr(l, "stepping down") && !strstr(l, "leadership lost"),
              "the leader stepped down; log:\n%s", l);
    free(l);
    expect_running_unrestored("wordcount");
    wait_rejected("leader_epoch", 9);
}

Test(trust_peers, forged_tasks)
{
    make_keys();
    start_local(true, 2);
    wait_running("wordcount", 1);
    /* a process holding the worker key (server.key), placed nowhere */
    fake_t f = {0};
    fake_connect(&f, keys_dir, EDDY_KEYS_SERVER);
    fake_register(&f, "forger");
    /* the job's first deploy is epoch 1; a few more cover a restore */
    for (uint32_t epoch = 1; epoch <= 3; epoch++) {
        eddy_msg_t failed = {.type = EDDY_MSG_TASK_FAILED};
        failed.u.task_failed.job = 1;
        failed.u.task_failed.epoch = epoch;
        failed.u.task_failed.stage = 1; /* count[0] */
        snprintf(failed.u.task_failed.error, sizeof failed.u.task_failed.error, "forged");
        fake_send(&f, &failed);
        for (int i = 0; i < 5; i++)
            task_done(&f, 1, epoch, 0, 0); /* source[0] */
    }
    /* and task metrics of source[0], as if it ran there */
    eddy_task_metrics_t forged = {.job = 1, .epoch = 1, .stage = 0, .instance = 0,
                                  .records_in = 1000000000000000ull,
                                  .records_out = 1000000000000000ull, .position = -1};
    eddy_msg_t hb = {.type = EDDY_MSG_HEARTBEAT};
    hb.u.heartbeat.worker_id = f.id;
    hb.u.heartbeat.n_tasks = 1;
    hb.u.heartbeat.tasks = &forged;
    fake_send(&f, &hb);
    /* plain wait: a restore or a finish would have begun by now, and the
     * job's counters been saved with the forged records */
    fake_idle(&f, 2000, NULL);
    expect_running_unrestored("wordcount");
    long long in = eddy_test_scrape_sum(ports[1], "eddy_task_records_in_total{job=\"wordcount\"");
    cr_assert(in >= 0 && in < 1000000000000ll, "the forged metrics count: %lld records in", in);
    wait_rejected("not_placed", 7);
    /* LIVENESS for the real workers (ids 1 and 2), with the forger's own
     * token, none, or a guess: none counts (a stopped worker would still
     * be declared dead), each is rejected */
    cr_assert_neq(f.liveness_token, 0, "the registration carried no liveness token");
    const uint64_t tokens[] = {f.liveness_token, 0, 12345};
    for (uint32_t id = 1; id <= 2; id++)
        for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
            eddy_msg_t live = {.type = EDDY_MSG_LIVENESS};
            live.u.liveness.worker_id = id;
            live.u.liveness.token = tokens[i];
            fake_send(&f, &live);
        }
    wait_rejected("liveness", 6);
    fake_close(&f);
}

Test(trust_peers, duplicate_done)
{
    eddy_err_t err = {{0}};
    char *cargv[] = {EDDY_BINARY, "coordinator", "--bind", bind_url, "--http-port", http_s,
                     "--metastore", meta, "--snapshot-dir", snaps, "--checkpoint-interval", "0",
                     "--no-rebalance", NULL};
    cr_assert(eddy_proc_start(&coord, cargv, NULL, logp, &err) == 0, "%s", err.msg);
    fake_t f = {0};
    fake_connect(&f, NULL, EDDY_KEYS_CLIENT);
    fake_register(&f, "genuine");
    submit_endless(NULL);
    /* the DEPLOY places every task on the fake worker: confirm it */
    uint32_t job = 0, epoch = 0;
    uint64_t deadline = eddy_mono_ms() + 20000, next_hb = 0;
    while (!epoch && eddy_mono_ms() < deadline) {
        if (eddy_mono_ms() >= next_hb) {
            fake_heartbeat(&f);
            next_hb = eddy_mono_ms() + 200;
        }
        eddy_msg_t m;
        if (!fake_recv(&f, &m, 50))
            continue;
        if (m.type == EDDY_MSG_DEPLOY) {
            job = m.u.deploy.job;
            epoch = m.u.deploy.epoch;
            eddy_msg_t ok = {.type = EDDY_MSG_DEPLOYED};
            ok.u.deployed.job = job;
            ok.u.deployed.epoch = epoch;
            fake_send(&f, &ok);
        }
        eddy_msg_clear(&m);
    }
    char *l = epoch ? NULL : log_text();
    cr_assert(epoch, "no DEPLOY reached the only worker; log:\n%s", l);
    wait_running("wordcount", 0);
    for (int i = 0; i < 5; i++)
        task_done(&f, job, epoch, 0, 0); /* source[0], placed on this worker */
    bool final = false;
    fake_idle(&f, 2000, &final); /* plain wait: a final COMPLETE would have come */
    l = log_text();
    cr_assert(!final, "the job started its final commit after one task's TASK_DONE x5; log:\n%s", l);
    wait_rejected("duplicate", 4);
    cr_assert_eq(rejected("duplicate"), 4, "duplicates counted %lld times, expected 4",
                 rejected("duplicate"));
    free(l);
    expect_running_unrestored("wordcount");

    /* the other two tasks end: the final commit goes out; the final ACK of
     * source[0] three times is one task's, the job waits for the others */
    task_done(&f, job, epoch, 1, 0);
    task_done(&f, job, epoch, 2, 0);
    uint64_t until = eddy_mono_ms() + 10000;
    while (!final && eddy_mono_ms() < until)
        fake_idle(&f, 100, &final);
    l = final ? NULL : log_text();
    cr_assert(final, "no final COMPLETE after every task's TASK_DONE; log:\n%s", l);
    for (int i = 0; i < 3; i++)
        final_ack(&f, job, epoch, 0, 0);
    wait_rejected("duplicate", 6);
    fake_idle(&f, 1000, NULL); /* plain wait: the job would have finished by now */
    json_t *j = job_of("wordcount");
    const char *state = json_string_value(json_object_get(j, "state"));
    cr_assert(state && strcmp(state, "finished"), "the job finished on one task's final ACK x3");
    json_decref(j);
    final_ack(&f, job, epoch, 1, 0);
    final_ack(&f, job, epoch, 2, 0);
    if (!eddy_test_wait_job_state(ports[0], "wordcount", "finished", 10000, leader)) {
        l = log_text();
        cr_assert_fail("the job did not finish on every task's final ACK; log:\n%s", l);
    }
    fake_close(&f);
}

/* A heartbeat of n entries, encoded once (sent many times). */
static char *big_heartbeat(uint32_t worker_id, uint32_t n, size_t *len)
{
    eddy_msg_t hb = {.type = EDDY_MSG_HEARTBEAT};
    hb.u.heartbeat.worker_id = worker_id;
    hb.u.heartbeat.n_tasks = n;
    hb.u.heartbeat.tasks = calloc(n, sizeof *hb.u.heartbeat.tasks);
    cr_assert(hb.u.heartbeat.tasks);
    for (uint32_t i = 0; i < n; i++) {
        hb.u.heartbeat.tasks[i].job = 1;
        hb.u.heartbeat.tasks[i].epoch = 1;
        hb.u.heartbeat.tasks[i].instance = i % 1000;
        hb.u.heartbeat.tasks[i].position = -1;
    }
    char *data = eddy_msg_encode(&hb, len);
    free(hb.u.heartbeat.tasks);
    cr_assert(data);
    return data;
}

static bool status_answers(void *arg)
{
    (void)arg;
    json_t *st = eddy_test_status(ports[0]);
    bool ok = st != NULL;
    json_decref(st);
    return ok;
}

Test(trust_peers, heartbeat_flood)
{
#if defined(__SANITIZE_ADDRESS__)
    /* ASan keeps freed memory in quarantine (256 MiB by default): each
     * received 5.5 MB message would stay in the RSS after it was freed */
    char asan[512];
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%squarantine_size_mb=4", was ? was : "", was && *was ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
#endif
    start_local(false, 1);
    wait_running("wordcount", 1);
    long rss_before = eddy_proc_rss_kb(leader->pid);
    cr_assert(rss_before > 0);
    fake_t f = {0};
    fake_connect(&f, NULL, EDDY_KEYS_CLIENT);
    fake_register(&f, "flooder");
    size_t big_len, many_len;
    char *big = big_heartbeat(f.id, 65536, &big_len);
    char *many = big_heartbeat(f.id, 2000, &many_len);
    cr_assert(big_len > 5000000, "the big heartbeat is only %zu bytes", big_len);
    cr_assert(many_len < 2u << 20);
    long rss_max = rss_before;
    for (int round = 0; round < 20; round++) {
        fake_send_bytes(&f, big, big_len);
        fake_send_bytes(&f, many, many_len);
        long rss = eddy_proc_rss_kb(leader->pid);
        if (rss > rss_max)
            rss_max = rss;
    }
    cr_assert(eddy_poll_until(status_answers, NULL, 10000), "eddy status does not answer");
    long rss = eddy_proc_rss_kb(leader->pid);
    if (rss > rss_max)
        rss_max = rss;
    char *l = log_text();
    cr_assert(rss_max - rss_before < 100 * 1024,
              "the coordinator grew from %ld KiB to %ld KiB under the flood; log:\n%s",
              rss_before, rss_max, l);
    free(l);
    wait_rejected("heartbeat_bytes", 20);
    wait_rejected("heartbeat_entries", 20);
    free(big);
    free(many);
    fake_close(&f);
    expect_running_unrestored("wordcount");
}

/* A client's `decision` request of `bytes` bytes of JSON: the reply's status. */
static int64_t send_decision(fake_t *f, size_t bytes)
{
    /* a decision that fits its schema (decision_json.h), padded with spaces */
    static const char valid[] =
        "{\"time_ms\":1,\"job\":\"wordcount\",\"operator\":\"count\",\"old_parallelism\":1,"
        "\"new_parallelism\":2,\"action\":\"scale_up\",\"applied\":false,\"reason\":\"r\","
        "\"rates\":{\"target_input_rate\":null,\"true_rate_per_instance\":null,"
        "\"observed_input_rate\":null,\"selectivity\":null,\"utilisation\":null,"
        "\"target_utilisation\":null,\"projected_utilisation\":null}}";
    cr_assert(bytes >= sizeof valid - 1);
    char *doc = malloc(bytes + 1);
    cr_assert(doc);
    memset(doc, ' ', bytes);
    memcpy(doc, valid, sizeof valid - 1);
    doc[bytes] = '\0';
    eddy_msg_t req = {.type = EDDY_MSG_REQUEST};
    snprintf(req.u.request.verb, sizeof req.u.request.verb, "decision");
    req.u.request.argc = 1;
    req.u.request.argv = &doc;
    fake_send(f, &req);
    free(doc);
    eddy_msg_t reply;
    cr_assert(fake_recv(f, &reply, 10000), "no answer to a decision");
    int64_t status = reply.u.reply.status;
    eddy_msg_clear(&reply);
    return status;
}

static int submit_with_plugin(const char *plugin, char **errout)
{
    const char *argv[] = {"submit", "--plugin", plugin, "--job", "wordcount", "--generate",
                          "--lines", "10", NULL};
    return eddy_test_cluster_ctl(cl, argv, 20000, NULL, errout);
}

/* The caps other than the heartbeat's, each at a small value: a second
 * live worker is refused registration, a decision over the size cap is
 * refused, a worker's task series past the cap are dropped, the upload of
 * a second plugin is refused, replies to a client that never reads are
 * dropped at the high-water mark. Each is counted under its reason. */
Test(trust_peers, caps)
{
    const char *argv[] = {"--max-registrations", "1", "--max-decision-bytes", "1000",
                          "--max-worker-series", "1", "--max-plugins", "1", "--reply-hwm", "10",
                          "--job", "wordcount", "--generate", "--lines", "0", "--rate", "2000",
                          "--parallelism", "1", NULL};
    start_local_with(NULL, 1, "", argv);
    wait_running("wordcount", 0);

    /* registrations: the one live worker is the limit */
    fake_t f = {0};
    fake_connect(&f, NULL, EDDY_KEYS_CLIENT);
    eddy_msg_t reg = {.type = EDDY_MSG_REGISTER};
    snprintf(reg.u.reg.name, sizeof reg.u.reg.name, "one-too-many");
    snprintf(reg.u.reg.data_endpoint, sizeof reg.u.reg.data_endpoint, "tcp://127.0.0.1:%d", ports[2]);
    snprintf(reg.u.reg.host, sizeof reg.u.reg.host, "fakehost");
    reg.u.reg.pid = getpid();
    reg.u.reg.protocol_version = EDDY_PROTOCOL_VERSION;
    fake_send(&f, &reg);
    eddy_msg_t m;
    cr_assert(fake_recv(&f, &m, 10000), "no answer to a registration");
    cr_assert_eq(m.type, EDDY_MSG_REGISTERED);
    cr_assert(strstr(m.u.registered.error, "--max-registrations"), "registration answered '%s'",
              m.u.registered.error);
    eddy_msg_clear(&m);
    wait_rejected("registrations", 1);

    /* decisions: 1000 bytes pass, 1001 do not */
    cr_assert_eq(send_decision(&f, 1000), 0);
    cr_assert_eq(send_decision(&f, 1001), 2);
    cr_assert_eq(rejected("decision_bytes"), 1);

    /* series: the worker runs three tasks, one series is kept */
    wait_rejected("worker_series", 2);

    /* plugins: the first upload is stored, the second refused */
    char ok[700], row[700];
    snprintf(ok, sizeof ok, "%s/libtest_plugin_ok.so", EDDY_TEST_PLUGIN_DIR);
    snprintf(row, sizeof row, "%s/libtest_plugin_row.so", EDDY_TEST_PLUGIN_DIR);
    char *errout = NULL;
    int rc = submit_with_plugin(ok, &errout);
    cr_assert_eq(rc, 0, "the first plugin upload failed (%d): %s", rc, errout ? errout : "");
    free(errout);
    errout = NULL;
    rc = submit_with_plugin(row, &errout);
    cr_assert_neq(rc, 0, "a second plugin was stored past --max-plugins 1");
    cr_assert(errout && strstr(errout, "--max-plugins"), "eddy submit said: %s", errout ? errout : "");
    free(errout);
    cr_assert_eq(rejected("plugins"), 1);

    /* replies: a client that sends and never reads */
    for (int i = 0; i < 20000 && rejected("reply_queue") < 1; i += 2000) {
        for (int k = 0; k < 2000; k++) {
            eddy_msg_t req = {.type = EDDY_MSG_REQUEST};
            snprintf(req.u.request.verb, sizeof req.u.request.verb, "status");
            fake_send(&f, &req);
        }
    }
    wait_rejected("reply_queue", 1);
    fake_close(&f);
    cr_assert(eddy_poll_until(status_answers, NULL, 10000), "eddy status does not answer");
}

/* A network namespace joined to this one by a veth pair: a "host" whose
 * address is not this machine's (deleted in teardown). */
static char netns[32];

static bool run_quiet(const char *cmd)
{
    char full[2048];
    snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
    return system(full) == 0;
}

static void netns_drop(void)
{
    if (!netns[0])
        return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ip netns del %s", netns);
    run_quiet(cmd);
    netns[0] = '\0';
}

/* Creates the namespace; here (this machine's end) and there get the two
 * addresses of a /30. false when namespaces cannot be made here. */
static bool netns_make(char *here, char *there, size_t size)
{
    unsigned pid = (unsigned)getpid();
    unsigned a = pid % 250, b = (pid / 250) % 60 * 4;
    snprintf(netns, sizeof netns, "eddytp%u", pid);
    snprintf(here, size, "10.214.%u.%u", a, b + 1);
    snprintf(there, size, "10.214.%u.%u", a, b + 2);
    char cmds[5][256];
    snprintf(cmds[0], sizeof cmds[0], "ip netns add %s", netns);
    snprintf(cmds[1], sizeof cmds[1], "ip link add tpa%u type veth peer name tpb%u netns %s",
             pid % 100000, pid % 100000, netns);
    snprintf(cmds[2], sizeof cmds[2], "ip addr add %s/30 dev tpa%u && ip link set tpa%u up", here,
             pid % 100000, pid % 100000);
    snprintf(cmds[3], sizeof cmds[3],
             "ip netns exec %s ip addr add %s/30 dev tpb%u && ip netns exec %s ip link set tpb%u up",
             netns, there, pid % 100000, netns, pid % 100000);
    snprintf(cmds[4], sizeof cmds[4], "ip netns exec %s ip link set lo up", netns);
    for (int i = 0; i < 5; i++)
        if (!run_quiet(cmds[i])) {
            netns_drop();
            return false;
        }
    return true;
}

/* Whether `eddy SUB --help` lists flag. */
static bool has_flag(const char *sub, const char *flag)
{
    char *argv[] = {EDDY_BINARY, (char *)sub, "--help", NULL};
    char *out = NULL;
    eddy_proc_run(argv, 10000, &out, NULL);
    bool has = out && strstr(out, flag);
    free(out);
    return has;
}

static void teardown_netns(void)
{
    eddy_proc_kill(&worker, 3000);
    netns_drop();
    teardown();
}

/* Without keys, a worker on another host (a network namespace here) is
 * refused registration for good: it would be given tasks and job data; it
 * exits saying why. A worker on loopback registers. */
Test(trust_peers, remote_worker_without_keys, .fini = teardown_netns)
{
    char here[32], there[32];
    if (!netns_make(here, there, sizeof here))
        cr_skip_test("cannot make a network namespace here (needs root and ip netns)");
    eddy_err_t err = {{0}};
    char wildcard[64], outside[64];
    snprintf(wildcard, sizeof wildcard, "tcp://0.0.0.0:%d", ports[0]);
    snprintf(outside, sizeof outside, "tcp://%s:%d", here, ports[0]);
    char *cargv[16] = {EDDY_BINARY, "coordinator", "--bind", wildcard, "--http-port", http_s,
                       "--metastore", meta, "--snapshot-dir", snaps};
    int k = 10;
    if (has_flag("coordinator", "--insecure"))
        cargv[k++] = "--insecure"; /* beyond loopback without keys on purpose */
    cargv[k] = NULL;
    cr_assert(eddy_proc_start(&coord, cargv, NULL, logp, &err) == 0, "%s", err.msg);

    char loopback[64];
    snprintf(loopback, sizeof loopback, "%s", coord_url);
    fake_t local = {0};
    fake_connect_to(&local, loopback, NULL, EDDY_KEYS_CLIENT);
    fake_register(&local, "on-this-machine");
    fake_close(&local);

    /* --insecure: past the worker's own refusal to go beyond loopback
     * without keys, to the coordinator's */
    char *wargv[] = {"/usr/sbin/ip", "netns", "exec", netns, EDDY_BINARY, "worker",
                     "--coordinator", outside, "--snapshot-dir", snaps, "--insecure", NULL};
    cr_assert(eddy_proc_start(&worker, wargv, NULL, wlogp, &err) == 0, "%s", err.msg);
    int rc = eddy_proc_wait(&worker, 20000);
    char *wl = eddy_read_file(wlogp, NULL);
    char *l = log_text();
    cr_assert(rc != 0 && rc != -1, "the worker from %s did not exit (%d); its log:\n%s\nlog:\n%s",
              there, rc, wl ? wl : "", l);
    cr_assert(wl && strstr(wl, "without --keys"), "the worker's log does not say why:\n%s",
              wl ? wl : "");
    cr_assert(strstr(l, "registration from " ) && strstr(l, there),
              "the coordinator did not log the refusal of %s:\n%s", there, l);
    free(wl);
    free(l);
    wait_rejected("remote_without_keys", 1);
}
