/* test_coordinator_recovery.c - the coordinator's own failures and bad
 * peers, with real processes: `eddy coordinator`, `eddy worker`s, a real
 * etcd (tests/support/etcd.h) or the file metadata store.
 *
 *  double_kill        the coordinator is SIGKILLed, restarted, and SIGKILLed
 *                     again right after it reloaded its jobs; the third one
 *                     finishes the job. Output exact; the epochs it deployed
 *                     strictly increase across all three; the job record
 *                     never goes back to a lower epoch or checkpoint.
 *                     (wordcount/etl x file store/etcd)
 *  etcd_outage        etcd is SIGSTOPped mid-job: no checkpoint completes
 *                     without its metadata, so sinks publish nothing beyond
 *                     the last recorded checkpoint and its files are kept;
 *                     the coordinator is SIGKILLed, etcd resumes, a new
 *                     coordinator resumes from the last recorded checkpoint.
 *  corrupt_newest     a file of the newest checkpoint is truncated and a
 *                     worker killed: the restore falls back to the previous
 *                     retained checkpoint, naming the file.
 *  fake_worker        a peer that registers and heartbeats but never answers
 *                     DEPLOY is quarantined once; the job and a rescale
 *                     complete without waiting on it again.
 *  stuck_checkpoints  a SIGSTOPped worker (heartbeat timeout far away) makes
 *                     checkpoints time out: after 3 in a row the job is
 *                     restored; the stopped worker misses the deploy timeout,
 *                     is quarantined, and the job finishes on the others.
 *  (A sink that always fails, restores backing off: test_restart_backoff.c,
 *  which needs no CPU of its own and so shares it with other tests.)
 *
 * Waits poll observable conditions with deadlines; the one plain wait (etcd
 * outage) is marked: it gives a stale coordinator time to misbehave. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "net/proto.h"
#include "state/metastore.h"
#include "tests/support/cluster.h"
#include "tests/support/etcd.h"
#include "tests/support/lines.h"
#include "tests/support/peer.h"
#include "tests/support/proc.h"

#define MAX_WORKERS 4
#define ETL_LINES 240000
#define ETL_RATE "40000" /* about 6 s */
#define WC_BYTES (2u * 1024 * 1024)
#define RUN_SECONDS 6

/* Under ASan a healthy worker can take seconds to apply a restore DEPLOY. */
#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "3000"
#define DEPLOY_TIMEOUT "8000"
#else
#define HB_TIMEOUT "1500"
#define DEPLOY_TIMEOUT "2000"
#endif

static eddy_test_cluster_t *cl;
static char *dir, *input, *output, *coord_logp, *snap_dir, *coord_url;
static char *expected;
static size_t expected_len;
static char rate[32];
static int ports[2];
static eddy_proc_t *coord;
static eddy_proc_t *workers[MAX_WORKERS];
static int n_workers;
static bool etl;

/* ---- inputs and expected outputs ------------------------------------------ */

static void make_etl_input(void)
{
    eddy_err_t err = {{0}};
    eddy_test_etl_input_t in = {.lines = ETL_LINES, .seed = 11, .users = 5000, .items = 300,
                                .min_amount = 300};
    cr_assert(eddy_test_write_etl_input(input, &in, &expected, &expected_len, NULL, &err) == 0,
              "%s", err.msg);
    snprintf(rate, sizeof rate, "%s", ETL_RATE);
}

/* Makes the job run `factor` times longer (a lower --rate). */
static void slow_down(int factor)
{
    snprintf(rate, sizeof rate, "%ld", strtol(rate, NULL, 10) / factor);
}

static void make_wordcount_input(void)
{
    eddy_err_t err = {{0}};
    size_t lines;
    expected = eddy_test_wc_reference(input, WC_BYTES, 777, &expected_len, &lines, &err);
    cr_assert(expected, "%s", err.msg);
    snprintf(rate, sizeof rate, "%zu", lines / RUN_SECONDS);
}

/* ---- fixture ------------------------------------------------------------- */

static void setup_job(bool is_etl, bool with_etcd)
{
    eddy_err_t err = {{0}};
    etl = is_etl;
    /* short per-request timeouts: a stopped etcd fails calls quickly */
    eddy_test_cluster_opts_t o = {.tag = "coordrec", .etcd = with_etcd,
                                  .etcd_query = "?timeout_ms=300", .checkpoint_interval = "300",
                                  .heartbeat_timeout_ms = HB_TIMEOUT};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, etl ? "out" : "counts.tsv");
    coord_logp = eddy_test_cluster_coordinator_log(cl, 0);
    snap_dir = eddy_test_cluster_path(cl, "snapshots");
    coord_url = eddy_test_cluster_url(cl, 0);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    coord = eddy_test_cluster_coordinator(cl, 0);
    n_workers = 0;
    if (etl)
        make_etl_input();
    else
        make_wordcount_input();
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    free(expected);
    expected = NULL;
}

/* ---- logs -------------------------------------------------------------------- */

static char *all_logs(void)
{
    return eddy_test_cluster_log_text(cl);
}

static int count_in_log(const char *needle)
{
    char *s = eddy_read_file(coord_logp, NULL);
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, needle)); p++)
        n++;
    free(s);
    return n;
}

typedef struct log_wait {
    const char *needle;
    int count;
} log_wait_t;

static bool log_has(void *arg)
{
    log_wait_t *w = arg;
    return count_in_log(w->needle) >= w->count;
}

static void wait_log(const char *needle, int count, uint64_t timeout_ms)
{
    log_wait_t w = {needle, count};
    if (!eddy_poll_until(log_has, &w, timeout_ms)) {
        char *l = all_logs();
        cr_assert_fail("timed out waiting for %d x '%s' in the coordinator log; logs:\n%s", count,
                       needle, l);
    }
}

/* ---- processes -------------------------------------------------------------- */

static void start_coordinator_with(char *const *extra);

static void start_coordinator(const char *extra_flag, const char *extra_value)
{
    char *extra[] = {(char *)extra_flag, (char *)extra_value, NULL};
    start_coordinator_with(extra_flag ? extra : NULL);
}

static void start_coordinator_with(char *const *extra)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_coordinator_with(cl, 0, (const char *const *)extra, &err) == 0,
              "%s", err.msg);
}

/* A worker with these flags (NULL: none). */
static void start_worker_with(const char *const *extra)
{
    cr_assert(n_workers < MAX_WORKERS);
    eddy_err_t err = {{0}};
    int i = eddy_test_cluster_start_worker_as(cl, NULL, extra, &err);
    cr_assert(i >= 0, "%s", err.msg);
    workers[n_workers++] = eddy_test_cluster_worker(cl, i);
}

static void start_worker(void)
{
    start_worker_with(NULL);
}

static const char *job_id(void)
{
    return etl ? "etl" : "wordcount";
}

static void submit(void)
{
    /* Every started worker takes part: a test that stops "worker 3" means
     * one with tasks, not one that registered after the deploy. */
    wait_log(") registered, data at", n_workers, 30000);
    char *wc[] = {EDDY_BINARY, "submit", "--coordinator", coord_url, "--job", "wordcount",
                  "--input", input, "--output", output, "--parallelism", "3", "--rate", rate, NULL};
    char *etl_argv[] = {EDDY_BINARY, "submit", "--coordinator", coord_url, "--job", "etl",
                        "--input", input, "--output-dir", output, "--min-amount", "300",
                        "--parallelism", "2", "--sink-parallelism", "2", "--rate", rate, NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(etl ? etl_argv : wc, 20000, &out, &err);
    cr_assert_eq(rc, 0, "eddy submit exited %d: %s%s", rc, out, err);
    free(out);
    free(err);
}

typedef struct view {
    char state[32];
    int64_t ck;
} view_t;

static bool job_view(view_t *v)
{
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, job_id()) : NULL;
    if (j) {
        snprintf(v->state, sizeof v->state, "%s", json_string_value(json_object_get(j, "state")));
        v->ck = json_integer_value(json_object_get(json_object_get(j, "last_checkpoint"), "id"));
    }
    json_decref(st);
    return j != NULL;
}

typedef struct view_wait {
    const char *state;
    int64_t min_ck;
    view_t last;
} view_wait_t;

static bool view_matches(void *arg)
{
    view_wait_t *w = arg;
    if (!eddy_proc_alive(coord) || !job_view(&w->last))
        return false;
    return (!w->state || !strcmp(w->last.state, w->state)) && w->last.ck >= w->min_ck;
}

static void wait_view(const char *state, int64_t min_ck, uint64_t timeout_ms, const char *what)
{
    view_wait_t w = {state, min_ck, {{0}, 0}};
    if (!eddy_poll_until(view_matches, &w, timeout_ms)) {
        char *l = all_logs();
        cr_assert_fail("timed out waiting for %s (state %s, checkpoint %lld); logs:\n%s", what,
                       w.last.state, (long long)w.last.ck, l);
    }
}

static void kill_coordinator(void)
{
    kill(-coord->pid, SIGKILL);
    cr_assert_eq(eddy_proc_wait(coord, 10000), 128 + SIGKILL);
}

/* ---- metadata store, read directly ------------------------------------------ */

typedef struct record_view {
    int64_t epoch, last_checkpoint, newest_recorded;
} record_view_t;

static record_view_t read_record(void)
{
    record_view_t r = {-1, -1, 0};
    eddy_err_t err = {{0}};
    eddy_metastore_t *m = eddy_metastore_open(eddy_test_cluster_metastore(cl), &err);
    cr_assert(m, "%s", err.msg);
    char key[128], *text = NULL;
    size_t len;
    snprintf(key, sizeof key, "/eddy/jobs/%s", job_id());
    if (eddy_metastore_get(m, key, &text, &len, &err) == 1) {
        json_t *doc = json_loads(text, 0, NULL);
        r.epoch = json_integer_value(json_object_get(doc, "epoch"));
        r.last_checkpoint = json_integer_value(json_object_get(doc, "last_checkpoint"));
        json_decref(doc);
    }
    free(text);
    eddy_kv_list_t list = {0};
    snprintf(key, sizeof key, "/eddy/jobs/%s/checkpoints/", job_id());
    cr_assert(eddy_metastore_list(m, key, &list, &err) == 0, "%s", err.msg);
    for (size_t i = 0; i < list.count; i++) {
        int64_t id = strtoll(list.items[i].key + strlen(key), NULL, 10);
        if (id > r.newest_recorded)
            r.newest_recorded = id;
    }
    eddy_kv_list_clear(&list);
    eddy_metastore_destroy(&m);
    return r;
}

/* ---- output -------------------------------------------------------------------- */

/* Non-final part files: their highest checkpoint id; *n their number. */
static int64_t newest_published(int *n)
{
    DIR *d = opendir(output);
    int64_t newest = 0;
    *n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned inst;
        unsigned long long id;
        if (sscanf(e->d_name, "part-%u-%llu.txt", &inst, &id) == 2 && id != UINT64_MAX) {
            (*n)++;
            if ((int64_t)id > newest)
                newest = (int64_t)id;
        }
    }
    closedir(d);
    return newest;
}

static void expect_exact_output(void)
{
    size_t len = 0;
    char *got;
    if (etl) {
        eddy_err_t err = {{0}};
        got = eddy_test_read_parts(output, &len, NULL, &err);
        cr_assert(got, "%s", err.msg);
        char *sorted = eddy_test_sort_lines(got, len, &len, NULL);
        free(got);
        got = sorted;
    } else {
        got = eddy_read_file(output, &len);
        cr_assert(got, "no output file %s", output);
    }
    if (len != expected_len || memcmp(got, expected, len) != 0) {
        char *l = all_logs();
        cr_assert_fail("output differs from the reference (%zu vs %zu bytes); logs:\n%s", len,
                       expected_len, l);
    }
    free(got);
}

/* Every "deploying epoch N" of every coordinator run, in order. */
static void expect_epochs_increase(int min_deploys)
{
    char *s = eddy_read_file(coord_logp, NULL);
    cr_assert(s);
    long prev = -1;
    int n = 0;
    for (const char *p = s; (p = strstr(p, "deploying epoch ")); n++) {
        p += strlen("deploying epoch ");
        long e = strtol(p, NULL, 10);
        cr_assert_gt(e, prev, "epoch %ld deployed after epoch %ld:\n%s", e, prev, s);
        prev = e;
    }
    cr_assert_geq(n, min_deploys, "only %d deploys logged:\n%s", n, s);
    free(s);
}

/* ---- double coordinator kill ---------------------------------------------------- */

typedef struct kill_case {
    bool etl, etcd;
} kill_case_t;

ParameterizedTestParameters(coordinator_recovery, double_kill)
{
    static kill_case_t cases[] = {{false, false}, {true, false}, {false, true}, {true, true}};
    return cr_make_param_array(kill_case_t, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(kill_case_t *kc, coordinator_recovery, double_kill, .fini = teardown,
                  .timeout = 240)
{
    setup_job(kc->etl, kc->etcd);
    start_coordinator(NULL, NULL);
    start_worker();
    start_worker();
    submit();
    wait_view("running", 2, 30000, "two completed checkpoints");
    kill_coordinator();
    record_view_t before = read_record();
    cr_assert_geq(before.epoch, 1);

    start_coordinator(NULL, NULL);
    wait_log("resumed job ", 1, 10000);
    kill_coordinator(); /* right after the reload, before the restore */
    record_view_t between = read_record();
    cr_assert_geq(between.epoch, before.epoch, "the reload wrote epoch %lld over %lld",
                  (long long)between.epoch, (long long)before.epoch);
    cr_assert_geq(between.last_checkpoint, before.last_checkpoint,
                  "the reload wrote last checkpoint %lld over %lld",
                  (long long)between.last_checkpoint, (long long)before.last_checkpoint);
    cr_assert_geq(between.newest_recorded, before.newest_recorded);

    start_coordinator(NULL, NULL);
    wait_view("finished", 0, 120000, "the job to finish after two coordinator kills");
    char *l = eddy_read_file(coord_logp, NULL);
    const char *third = l;
    for (int k = 0; k < 2; k++)
        third = strstr(third, "] listening on ") + 1;
    cr_assert(strstr(third, "restoring from checkpoint "),
              "the third coordinator did not restore from a checkpoint:\n%s", l);
    unsigned long long from = strtoull(strstr(third, "restoring from checkpoint ") +
                                           strlen("restoring from checkpoint "), NULL, 10);
    cr_assert_geq(from, (unsigned long long)before.newest_recorded,
                  "restored from %llu although %lld was recorded", from,
                  (long long)before.newest_recorded);
    free(l);
    record_view_t after = read_record();
    cr_assert_gt(after.epoch, before.epoch);
    expect_epochs_increase(2);
    expect_exact_output();
}

/* ---- etcd outage ------------------------------------------------------------------- */

/* etl: the part-file sink publishes per checkpoint; wordcount: the count
 * operator writes key-group files per checkpoint. */
ParameterizedTestParameters(coordinator_recovery, etcd_outage)
{
    static bool cases[] = {true, false};
    return cr_make_param_array(bool, cases, 2);
}

ParameterizedTest(bool *is_etl, coordinator_recovery, etcd_outage, .fini = teardown, .timeout = 240)
{
    setup_job(*is_etl, true);
    slow_down(3); /* etcd must stop well before the input ends, under ASan too */
    /* a leader lease that outlasts the checkpoint's retries: the coordinator
     * keeps leading (and failing to record) instead of stepping down first.
     * No rebalancing: a migration that etcd's stop catches half-way waits
     * for its record and no checkpoint is taken meanwhile, so whether
     * "cannot record" comes would depend on which happens first */
    char *extra[] = {"--leader-ttl-ms", "10000", "--no-rebalance", NULL};
    start_coordinator_with(extra);
    start_worker();
    start_worker();
    submit();
    wait_view("running", 1, 30000, "a completed checkpoint");
    int etcd_pid = eddy_test_cluster_etcd_pid(cl);
    cr_assert(kill(etcd_pid, SIGSTOP) == 0);
    /* a checkpoint has every ACK but cannot be recorded */
    wait_log("cannot record", 1, 30000);
    /* wall-clock progress: time for a coordinator that publishes unrecorded
     * checkpoints (COMPLETE) to do so and delete older files */
    eddy_nap_ms(1500);
    kill_coordinator();
    int published_n = 0;
    int64_t published = newest_published(&published_n);
    cr_assert(kill(etcd_pid, SIGCONT) == 0);
    record_view_t rec = read_record();
    cr_assert_gt(rec.newest_recorded, 0);
    cr_assert_leq(published, rec.newest_recorded,
                  "part files of checkpoint %lld were published, but only %lld was recorded",
                  (long long)published, (long long)rec.newest_recorded);
    if (!etl) {
        char chk[900];
        snprintf(chk, sizeof chk, "%s/wordcount/chk-%lld/count", snap_dir, (long long)rec.newest_recorded);
        struct stat sb;
        cr_assert(stat(chk, &sb) == 0, "the last recorded checkpoint's files are gone (%s)", chk);
    }

    start_coordinator(NULL, NULL);
    wait_view("finished", 0, 120000, "the job to finish after the outage");
    char *l = eddy_read_file(coord_logp, NULL);
    const char *second = strstr(strstr(l, "] listening on ") + 1, "] listening on ");
    cr_assert(second);
    const char *r = strstr(second, "restoring from checkpoint ");
    cr_assert(r, "the new coordinator did not restore from a checkpoint:\n%s", l);
    unsigned long long from = strtoull(r + strlen("restoring from checkpoint "), NULL, 10);
    cr_assert_eq(from, (unsigned long long)rec.newest_recorded, "restored from %llu, recorded %lld",
                 from, (long long)rec.newest_recorded);
    free(l);
    expect_epochs_increase(2);
    expect_exact_output();
}

/* ---- corrupt newest checkpoint ---------------------------------------------------- */

static bool truncate_one_file(const char *chk_dir, char *path, size_t size)
{
    char op_dir[1000];
    snprintf(op_dir, sizeof op_dir, "%s/count", chk_dir);
    DIR *d = opendir(op_dir);
    if (!d)
        return false;
    struct dirent *e;
    bool done = false;
    while (!done && (e = readdir(d)))
        if (!strncmp(e->d_name, "kg-", 3)) {
            snprintf(path, size, "%s/%s", op_dir, e->d_name);
            done = truncate(path, 10) == 0;
        }
    closedir(d);
    return done;
}

Test(coordinator_recovery, corrupt_newest_checkpoint, .fini = teardown, .timeout = 240)
{
    setup_job(false, false);
    start_coordinator("--heartbeat-timeout-ms", "4000");
    /* the restore must read the truncated file: no survivor may serve its
     * groups from its local copies */
    const char *const no_local[] = {"--no-local-recovery", NULL};
    for (int i = 0; i < 3; i++)
        start_worker_with(no_local);
    submit();
    wait_view("running", 3, 30000, "three completed checkpoints");
    /* no checkpoint completes while a worker is stopped: the newest stays */
    pid_t victim = workers[2]->pid;
    cr_assert(kill(victim, SIGSTOP) == 0);
    view_t a = {{0}, 0}, b = {{0}, 0};
    cr_assert(job_view(&a));
    char chk[900], bad[1400];
    snprintf(chk, sizeof chk, "%s/wordcount/chk-%lld", snap_dir, (long long)a.ck);
    cr_assert(truncate_one_file(chk, bad, sizeof bad), "no key-group file in %s", chk);
    cr_assert(job_view(&b));
    cr_assert_eq(a.ck, b.ck, "a checkpoint completed while a worker was stopped");
    cr_assert(kill(victim, SIGKILL) == 0);

    wait_log("falling back to checkpoint", 1, 60000);
    wait_view("finished", 0, 120000, "the job to finish after the fallback");
    char *l = eddy_read_file(coord_logp, NULL);
    const char *fb = strstr(l, "cannot be restored");
    cr_assert(fb, "%s", l);
    const char *name = strrchr(bad, '/') + 1;
    cr_assert(strstr(fb, name), "the warning does not name %s:\n%s", name, l);
    char want[128];
    snprintf(want, sizeof want, "checkpoint %lld cannot be restored", (long long)a.ck);
    cr_assert(strstr(l, want), "no '%s':\n%s", want, l);
    free(l);
    expect_exact_output();
}

/* ---- fake worker ------------------------------------------------------------------- */

typedef struct fake {
    pthread_t thread;
    volatile int stop;
    int deploys; /* DEPLOY messages it got (and ignored) */
} fake_t;

static void fake_register(void *sock)
{
    eddy_msg_t reg = eddy_test_peer_registration("fake", "tcp://127.0.0.1:9", "localhost");
    eddy_test_peer_send(sock, &reg);
}

static void *fake_run(void *arg)
{
    fake_t *f = arg;
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(sock, coord_url);
    fake_register(sock);
    uint32_t id = 0;
    uint64_t next_hb = 0;
    while (!f->stop) {
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 50);
        char buf[1 << 16];
        int n;
        while ((n = zmq_recv(sock, buf, sizeof buf, ZMQ_DONTWAIT)) >= 0) {
            eddy_msg_t m;
            eddy_err_t err;
            if (n > (int)sizeof buf || eddy_msg_decode(buf, (size_t)n, &m, &err) < 0)
                continue;
            if (m.type == EDDY_MSG_REGISTERED) {
                if (m.u.registered.error[0])
                    fake_register(sock); /* told it is unknown: join again */
                else
                    id = m.u.registered.worker_id;
            } else if (m.type == EDDY_MSG_DEPLOY) {
                f->deploys++;
            }
            eddy_msg_clear(&m);
        }
        if (eddy_mono_ms() >= next_hb) {
            eddy_msg_t hb = {.type = EDDY_MSG_HEARTBEAT};
            hb.u.heartbeat.worker_id = id;
            eddy_test_peer_send(sock, &hb);
            next_hb = eddy_mono_ms() + 200;
        }
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return NULL;
}

static bool three_registered(void *arg)
{
    (void)arg;
    return count_in_log(") registered, data at") >= 3;
}

Test(coordinator_recovery, fake_worker, .fini = teardown, .timeout = 240)
{
    setup_job(false, false);
    start_coordinator("--deploy-timeout-ms", DEPLOY_TIMEOUT);
    start_worker();
    start_worker();
    fake_t fake = {0};
    cr_assert(pthread_create(&fake.thread, NULL, fake_run, &fake) == 0);
    cr_assert(eddy_poll_until(three_registered, NULL, 15000), "the fake did not register");
    submit();
    wait_view("running", 1, 60000, "the job running without the fake worker");
    char *out = NULL, *err = NULL;
    char *argv[] = {EDDY_BINARY, "rescale", "wordcount", "count", "4", "--coordinator", coord_url, NULL};
    int rc = eddy_proc_run(argv, 60000, &out, &err);
    cr_assert_eq(rc, 0, "rescale failed (%d): %s%s", rc, out, err);
    free(out);
    free(err);
    wait_view("finished", 0, 120000, "the job to finish");
    fake.stop = 1;
    pthread_join(fake.thread, NULL);
    int quarantined = count_in_log("quarantined for");
    if (quarantined != 1) {
        char *l = all_logs();
        cr_assert_fail("the fake worker was quarantined %d times (want 1); logs:\n%s", quarantined, l);
    }
    cr_assert_geq(count_in_log("(fake, pid"), 1);
    /* it joined again, but no later deploy waited on it */
    cr_assert_eq(count_in_log("declared dead: did not confirm the deployment"), 1);
    cr_assert_eq(count_in_log("rescaled wordcount/count 3 -> 4"), 1);
    expect_exact_output();
}

/* ---- tolerable checkpoint failures + deploy timeout with a real worker ------------ */

Test(coordinator_recovery, stuck_checkpoints, .fini = teardown, .timeout = 240)
{
    setup_job(false, false);
    char *extra[] = {"--heartbeat-timeout-ms", "60000", "--checkpoint-timeout-ms", "1000",
                     "--deploy-timeout-ms", DEPLOY_TIMEOUT, NULL};
    start_coordinator_with(extra);
    for (int i = 0; i < 3; i++)
        start_worker();
    submit();
    wait_view("running", 2, 30000, "two completed checkpoints");
    cr_assert(kill(workers[2]->pid, SIGSTOP) == 0);
    wait_log("3 checkpoints in a row failed", 1, 30000);
    wait_log("quarantined for", 1, 30000);
    wait_view("finished", 0, 120000, "the job to finish on the two other workers");
    cr_assert_eq(count_in_log("quarantined for"), 1);
    kill(workers[2]->pid, SIGKILL);
    expect_epochs_increase(3);
    expect_exact_output();
}
