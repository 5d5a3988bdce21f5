/* test_decision_flood.c - a flood of scaling decisions must not freeze the
 * coordinator: its loop never waits on the metadata store.
 *
 * A real coordinator on a real etcd (tests/support/etcd.h) runs a
 * rate-limited, unbounded wordcount on one worker. A client thread posts
 * FLOOD decisions as fast as the coordinator takes them (the `decision`
 * request verb, pipelined over one DEALER), while the main thread asks for
 * the status again and again, throughout the flood and until the store has
 * caught up: the coordinator must answer every time within STATUS_BOUND_MS
 * and `eddy status --json` must answer every time (see expect_quick_status
 * for why the CLI's wall time is only reported). Before the fix each decision rewrote
 * the whole history (up to 1024 decisions) into one etcd key on the loop,
 * and status waited behind thousands of such writes.
 *
 * Then the history: `eddy scaling --json` holds the latest 1024 decisions,
 * etcd holds exactly those under /eddy/scaling/decisions/<sequence>, the
 * history written in the old single-key format before the start was read
 * and, once it left the window, deleted; and a restarted coordinator loads
 * the same history from the keys. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/clock.h"
#include "controller/decision_json.h"
#include "net/proto.h"
#include "state/metastore.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define FLOOD 5000
#define HISTORY 1024 /* COORD_MAX_DECISIONS */
#define WINDOW 500   /* requests in flight at once */
#define STATUS_BOUND_MS 1000
#define LEGACY_KEY "/eddy/scaling/decisions"
#define PREFIX "/eddy/scaling/decisions/"

static eddy_test_cluster_t *cl;
static char *output, *coord_url;
static int ports[2];
static eddy_metastore_t *ms; /* the test's own view of etcd */
static eddy_proc_t *coord;

/* A coordinator on an etcd of its own, with eddy's own timing. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "flood", .etcd = true, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    output = eddy_test_cluster_path(cl, "counts.tsv");
    coord_url = eddy_test_cluster_url(cl, 0);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    coord = eddy_test_cluster_coordinator(cl, 0);
    ms = eddy_metastore_open(eddy_test_cluster_etcd_url(cl), &err);
    cr_assert(ms, "%s", err.msg);
}

static void teardown(void)
{
    eddy_metastore_destroy(&ms);
    eddy_test_cluster_destroy(&cl);
}

/* ---- processes ------------------------------------------------------------- */

static void start_coordinator(void)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_coordinator(cl, 0, &err) == 0, "%s", err.msg);
}

static void start_worker_and_job(void)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_worker(cl, &err) >= 0, "%s", err.msg);
    const char *job[] = {"--job", "wordcount", "--generate", "--lines", "0", "--rate", "2000",
                         "--parallelism", "1", "--output", output, NULL};
    cr_assert(eddy_test_cluster_submit(cl, job, NULL, &err) == 0, "%s", err.msg);
    eddy_test_job_want_t running = {.state = "running"};
    cr_assert(eddy_test_job_wait(ports[0], "wordcount", &running, NULL, 60000, NULL, NULL),
              "the job never ran");
}

static json_t *scaling_json(void)
{
    char *argv[] = {EDDY_BINARY, "scaling", "--json", "--coordinator", coord_url, NULL};
    char *out = NULL;
    int rc = eddy_proc_run(argv, 10000, &out, NULL);
    json_t *doc = rc == 0 && out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    return doc;
}

/* ---- the flood --------------------------------------------------------------- */

static char *decision_text(int i)
{
    eddy_scaling_decision_t d;
    memset(&d, 0, sizeof d);
    d.time_ms = 1700000000000 + i;
    snprintf(d.job, sizeof d.job, "wordcount");
    snprintf(d.operator_name, sizeof d.operator_name, "count");
    d.old_parallelism = 1;
    d.new_parallelism = 2;
    d.action = EDDY_SCALING_SCALE_UP;
    d.applied = false;
    snprintf(d.reason, sizeof d.reason, "flood #%d: target 25000 rec/s / (10000 rec/s per "
             "instance x 0.80) = 3.12 -> 4", i);
    d.rates.target_input_rate = 25000.0;
    d.rates.true_rate_per_instance = 10000.0;
    d.rates.observed_input_rate = 9876.5;
    d.rates.selectivity = 1.0 / 3.0;
    d.rates.utilisation = 0.99;
    d.rates.target_utilisation = 0.8;
    d.rates.projected_utilisation = 0.625;
    json_t *doc = eddy_scaling_decision_to_json(&d, NULL);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return text;
}

/* A decision of the history an earlier eddy wrote (reason "legacy #i"). */
static char *legacy_text(int i)
{
    char *text = decision_text(i);
    json_error_t jerr;
    json_t *doc = text ? json_loads(text, 0, &jerr) : NULL;
    free(text);
    char reason[32];
    snprintf(reason, sizeof reason, "legacy #%d", i);
    json_object_set_new(doc, "reason", json_string(reason));
    text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return text;
}

typedef struct flood {
    atomic_bool done;
    int sent, recorded;
    char error[256];
} flood_t;

static void *flood_main(void *arg)
{
    flood_t *f = arg;
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(sock, coord_url);
    uint64_t deadline = eddy_mono_ms() + 240000;
    while (f->recorded < FLOOD && !f->error[0]) {
        while (f->sent < FLOOD && f->sent - f->recorded < WINDOW) {
            char *text = decision_text(f->sent);
            eddy_msg_t req = {.type = EDDY_MSG_REQUEST};
            snprintf(req.u.request.verb, sizeof req.u.request.verb, "decision");
            req.u.request.argc = 1;
            req.u.request.argv = &text;
            size_t len;
            char *data = text ? eddy_msg_encode(&req, &len) : NULL;
            free(text);
            if (!data || zmq_send(sock, data, len, 0) < 0) {
                snprintf(f->error, sizeof f->error, "cannot send decision %d", f->sent);
                free(data);
                break;
            }
            free(data);
            f->sent++;
        }
        uint64_t now = eddy_mono_ms();
        if (now >= deadline) {
            snprintf(f->error, sizeof f->error, "only %d of %d decisions recorded in time",
                     f->recorded, FLOOD);
            break;
        }
        zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 1000) <= 0)
            continue;
        zmq_msg_t z;
        zmq_msg_init(&z);
        while (zmq_msg_recv(&z, sock, ZMQ_DONTWAIT) >= 0) {
            eddy_msg_t m;
            eddy_err_t err;
            if (eddy_msg_decode(zmq_msg_data(&z), zmq_msg_size(&z), &m, &err) == 0) {
                if (m.type == EDDY_MSG_REPLY && m.u.reply.status != 0 && !f->error[0])
                    snprintf(f->error, sizeof f->error, "decision refused: %s", m.u.reply.body);
                f->recorded += m.type == EDDY_MSG_REPLY;
                eddy_msg_clear(&m);
            }
        }
        zmq_msg_close(&z);
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    atomic_store(&f->done, true);
    return NULL;
}

/* ---- checks -------------------------------------------------------------------- */

/* Milliseconds for one `status` request answered by the coordinator, asked
 * in-process (no process start): tells a busy machine from a stuck loop in
 * failure messages. */
static long direct_status_ms(void)
{
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(sock, coord_url);
    eddy_msg_t req = {.type = EDDY_MSG_REQUEST};
    snprintf(req.u.request.verb, sizeof req.u.request.verb, "status");
    size_t len;
    char *data = eddy_msg_encode(&req, &len);
    uint64_t t0 = eddy_mono_ms();
    long took = -1;
    if (data && zmq_send(sock, data, len, 0) >= 0) {
        zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 30000) > 0)
            took = (long)(eddy_mono_ms() - t0);
    }
    free(data);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return took;
}

static const char *load_average(void)
{
    static char buf[64];
    char *text = eddy_read_file("/proc/loadavg", NULL);
    snprintf(buf, sizeof buf, "%.14s", text ? text : "?");
    free(text);
    return buf;
}

static uint64_t worst_status_ms;
static long worst_direct_ms;
static int status_calls, slow_cli;

/* One round: the coordinator answers a status request within the bound
 * (asked in-process, so the time is the coordinator's), and `eddy status`
 * answers too, with the job running. The CLI's own wall time includes
 * starting a process, which on a shared, overloaded test machine alone can
 * pass a second (seen: 1.3 s at load 12 on 2 cores while the coordinator
 * answered in 2 ms); it is reported, not asserted. */
static void expect_quick_status(const char *when)
{
    long direct = direct_status_ms();
    uint64_t t0 = eddy_mono_ms();
    json_t *st = eddy_test_status(ports[0]);
    uint64_t took = eddy_mono_ms() - t0;
    json_t *job = st ? eddy_test_status_job(st, "wordcount") : NULL;
    const char *state = job ? json_string_value(json_object_get(job, "state")) : NULL;
    cr_assert(direct >= 0 && direct < STATUS_BOUND_MS,
              "the coordinator took %ld ms to answer status %s (eddy status: %llu ms)", direct,
              when, (unsigned long long)took);
    cr_assert(st, "eddy status failed %s", when);
    cr_assert(state && !strcmp(state, "running"), "job state %s %s", state ? state : "?", when);
    json_decref(st);
    worst_direct_ms = direct > worst_direct_ms ? direct : worst_direct_ms;
    worst_status_ms = took > worst_status_ms ? took : worst_status_ms;
    if (took >= STATUS_BOUND_MS)
        slow_cli++;
    status_calls++;
}

static const char *reason_of(json_t *decision)
{
    const char *r = json_string_value(json_object_get(decision, "reason"));
    return r ? r : "(none)";
}

/* `eddy scaling` shows decisions first..FLOOD-1 of the flood, oldest first. */
static void expect_latest_history(json_t *doc)
{
    cr_assert(json_is_array(doc), "eddy scaling --json is not an array");
    cr_assert_eq(json_array_size(doc), HISTORY, "history holds %zu decisions",
                 json_array_size(doc));
    for (size_t i = 0; i < HISTORY; i++) {
        char want[32];
        snprintf(want, sizeof want, "flood #%zu:", FLOOD - HISTORY + i);
        cr_assert(!strncmp(reason_of(json_array_get(doc, i)), want, strlen(want)),
                  "decision %zu is '%s', want '%s...'", i, reason_of(json_array_get(doc, i)), want);
    }
}

typedef struct store_check {
    size_t keys;
    bool legacy_gone, last_ok;
} store_check_t;

/* The store holds exactly the window: HISTORY keys, the newest one the
 * flood's last decision, and no legacy key. */
static bool store_settled(void *arg)
{
    store_check_t *s = arg;
    expect_quick_status("while the store catches up");
    eddy_kv_list_t l;
    if (eddy_metastore_list(ms, PREFIX, &l, NULL) < 0)
        return false;
    s->keys = l.count;
    s->last_ok = false;
    if (l.count) {
        json_t *last = json_loads(l.items[l.count - 1].value, 0, NULL);
        char want[32];
        snprintf(want, sizeof want, "flood #%d:", FLOOD - 1);
        s->last_ok = last && !strncmp(reason_of(last), want, strlen(want));
        json_decref(last);
    }
    eddy_kv_list_clear(&l);
    s->legacy_gone = eddy_metastore_get(ms, LEGACY_KEY, NULL, NULL, NULL) == 0;
    return s->keys == HISTORY && s->last_ok && s->legacy_gone;
}

static bool scaling_answers(void *arg)
{
    json_t **doc = arg;
    *doc = scaling_json();
    return *doc != NULL;
}

/* ---- the test -------------------------------------------------------------------- */

Test(decision_flood, status_stays_responsive_and_history_is_kept, .init = setup,
     .fini = teardown, .timeout = 540)
{
    eddy_err_t err = {{0}};
    /* a history in the old single-key format, as an earlier eddy wrote it */
    char legacy[2048];
    char *l0 = legacy_text(0), *l1 = legacy_text(1);
    cr_assert(l0 && l1);
    snprintf(legacy, sizeof legacy, "[%s,%s]", l0, l1);
    free(l0);
    free(l1);
    cr_assert(eddy_metastore_put(ms, LEGACY_KEY, legacy, strlen(legacy), &err) == 0, "%s",
              err.msg);
    start_coordinator();
    json_t *before = scaling_json();
    cr_assert(json_is_array(before) && json_array_size(before) == 2, "legacy history not read");
    cr_assert_str_eq(reason_of(json_array_get(before, 1)), "legacy #1");
    json_decref(before);
    start_worker_and_job();

    static flood_t f;
    memset(&f, 0, sizeof f);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, flood_main, &f), 0);
    while (!atomic_load(&f.done)) {
        char when[96];
        snprintf(when, sizeof when, "during the flood (%d of %d decisions recorded)", f.recorded,
                 FLOOD);
        expect_quick_status(when);
    }
    pthread_join(t, NULL);
    cr_assert(!f.error[0], "%s", f.error);
    cr_assert_eq(f.recorded, FLOOD);
    cr_log_info("%d status rounds during the flood: coordinator slowest %ld ms, eddy status "
                "slowest %llu ms (%s)", status_calls, worst_direct_ms,
                (unsigned long long)worst_status_ms, load_average());

    json_t *doc = scaling_json();
    expect_latest_history(doc);
    json_decref(doc);

    /* the background writes catch up: exactly the window is stored */
    store_check_t s = {0};
    cr_assert(eddy_poll_until(store_settled, &s, 240000),
              "store: %zu decision keys (want %d), newest is the last: %d, legacy key gone: %d",
              s.keys, HISTORY, s.last_ok, s.legacy_gone);
    cr_log_info("%d status rounds until the store caught up: coordinator slowest %ld ms, eddy "
                "status slowest %llu ms, %d of them over %d ms (%s)", status_calls,
                worst_direct_ms, (unsigned long long)worst_status_ms, slow_cli, STATUS_BOUND_MS,
                load_average());

    /* a restarted coordinator loads the history from the keys */
    eddy_proc_kill(coord, 5000);
    start_coordinator();
    doc = NULL;
    cr_assert(eddy_poll_until(scaling_answers, &doc, 20000), "eddy scaling after restart");
    expect_latest_history(doc);
    json_decref(doc);
}
