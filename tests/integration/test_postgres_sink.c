/* test_postgres_sink.c - the PostgreSQL sink (connectors/postgres/) against
 * a real PostgreSQL server started by the test (tests/support/postgres.c),
 * through the real eddy binary.
 *
 * Exactly once is checked where duplicates would show: wordcount upserts
 * absolute counts (a duplicate upsert would go unnoticed), so the append
 * sink of the etl job is checked too: its table, as a sorted multiset of
 * lines, must equal the expected output computed here, with workers
 * SIGKILLed (pids from `eddy status --json`) or the coordinator SIGKILLed
 * while a transaction is prepared and not yet committed. After every run
 * pg_prepared_xacts must be empty. The error tests check the message and
 * that eddy exits non-zero within a deadline (no hang).
 *
 * Timing: every wait polls an observable condition with a deadline. The
 * one plain wait (after the coordinator is killed) is wall-clock progress
 * for a COMPLETE that may already be on its way; it is marked. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "connectors/postgres/pg_sink.h"
#include "tests/support/cluster.h"
#include "tests/support/etcd.h"
#include "tests/support/postgres.h"
#include "tests/support/lines.h"
#include "tests/support/proc.h"

#define TEXT_BYTES (1536u * 1024)
#define RUN_SECONDS 8
#define ETL_LINES 120000
#define ETL_RATE "15000"
#define MIN_AMOUNT 300

#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "3000"
#else
#define HB_TIMEOUT "1000"
#endif

static eddy_test_cluster_t *cl;
static char *input, *logp, *coord_logp, *coord_url;
static char uri[300];
static char *expected;
static size_t expected_len;
static char rate[32];
static size_t input_lines;
static int ports[2];
static eddy_test_pg_t *pg;
static PGconn *db;
static eddy_proc_t *local, *coord;

/* ---- fixture -------------------------------------------------------------- */

static void setup_common(int max_prepared)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "pgsink", .workers = 3, .checkpoint_interval = "300",
                                  .heartbeat_timeout_ms = HB_TIMEOUT};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    logp = eddy_test_cluster_path(cl, "local.log");
    coord_logp = eddy_test_cluster_coordinator_log(cl, 0);
    coord_url = eddy_test_cluster_url(cl, 0);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    local = eddy_test_cluster_local(cl);
    coord = eddy_test_cluster_coordinator(cl, 0);
    if (max_prepared >= 0) {
        pg = eddy_test_pg_start(max_prepared, &err);
        cr_assert(pg, "%s", err.msg);
        db = eddy_test_pg_connect(pg, &err);
        cr_assert(db, "%s", err.msg);
    }
}

static void setup_wordcount(void)
{
    setup_common(20);
    eddy_err_t err = {{0}};
    expected = eddy_test_wc_reference(input, TEXT_BYTES, 777, &expected_len, &input_lines, &err);
    cr_assert(expected, "%s", err.msg);
    snprintf(rate, sizeof rate, "%zu", input_lines / RUN_SECONDS);
    eddy_test_pg_uri(pg, "counts", uri, sizeof uri);
}

/* user,item,amount lines (repeated lines among them: each copy must be
 * stored once) and, independently of eddy, the expected rows. */
static void setup_etl(void)
{
    setup_common(20);
    eddy_err_t err = {{0}};
    eddy_test_etl_input_t in = {.lines = ETL_LINES, .seed = 3, .users = 3000, .items = 200,
                                .min_amount = MIN_AMOUNT, .repeat_every = 11};
    cr_assert(eddy_test_write_etl_input(input, &in, &expected, &expected_len, NULL, &err) == 0,
              "%s", err.msg);
    eddy_test_pg_uri(pg, "etl_rows", uri, sizeof uri);
}

static void setup_none(void)
{
    setup_common(-1);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    if (db)
        PQfinish(db);
    db = NULL;
    eddy_test_pg_stop(&pg);
    free(expected);
    expected = NULL;
}

/* ---- logs and status ---------------------------------------------------------- */

static char *all_logs(void)
{
    return eddy_test_cluster_log_text(cl);
}

typedef eddy_test_job_view_t job_view_t;

static const char *job_name = "wordcount";

static job_view_t wait_view(eddy_proc_t *owner, const char *state, int64_t min_completed,
                            int64_t min_restarts, uint64_t timeout_ms, const char *what)
{
    eddy_test_job_want_t want = {.state = state, .min_completed = min_completed,
                                 .min_restarts = min_restarts};
    job_view_t last;
    bool gone;
    if (!eddy_test_job_wait(ports[0], job_name, &want, owner, timeout_ms, &last, &gone)) {
        char *l = all_logs();
        cr_assert_fail("timed out waiting for %s (state %s, completed %lld, restarts %lld)%s; logs:\n%s",
                       what, last.state, (long long)last.ck_completed, (long long)last.restarts,
                       gone ? " - the process exited" : "", l);
    }
    return last;
}

/* An alive worker running tasks, other than except. */
static pid_t victim(pid_t except)
{
    cr_assert(eddy_test_cluster_wait_workers(cl, 1, true, 10000), "no alive worker with tasks");
    pid_t pid = eddy_test_busy_worker(ports[0], except);
    cr_assert_gt(pid, 0, "no alive worker with tasks");
    return pid;
}

/* ---- the database --------------------------------------------------------------- */

static long long scalar(const char *sql)
{
    eddy_err_t err = {{0}};
    long long v = eddy_test_pg_scalar(db, sql, &err);
    cr_assert_geq(v, 0, "%s", err.msg);
    return v;
}

static bool table_has_rows(void *arg)
{
    const char *sql = arg;
    PGresult *r = PQexec(db, sql);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
              atoll(PQgetvalue(r, 0, 0)) > 0;
    PQclear(r);
    return ok;
}

/* The table's rows as sorted "a\tb\n" lines (columns joined by tabs). */
static char *table_text(const char *sql, size_t *len)
{
    eddy_err_t err = {{0}};
    char *text = eddy_test_pg_rows_text(db, sql, len, &err);
    cr_assert(text, "%s", err.msg);
    return text;
}

static void expect_table(const char *sql)
{
    size_t len;
    char *got = table_text(sql, &len);
    if (len != expected_len || memcmp(got, expected, len) != 0) {
        size_t i = 0, line = 1;
        while (i < len && i < expected_len && got[i] == expected[i])
            line += got[i++] == '\n';
        char *l = all_logs();
        cr_assert_fail("table differs from the reference (%zu vs %zu bytes), first at line %zu:\n"
                       "got ...%.200s\nwant ...%.200s\nlogs:\n%s",
                       len, expected_len, line, got + (i > 40 ? i - 40 : 0),
                       expected + (i > 40 ? i - 40 : 0), l);
    }
    free(got);
    cr_assert_eq(scalar("SELECT count(*) FROM pg_prepared_xacts"), 0,
                 "prepared transactions were left behind");
    /* Upserts are staged per checkpoint and merged at commit: none left. */
    cr_assert_eq(scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'eddy_upsert_stage'") == 0 ||
                     scalar("SELECT count(*) FROM eddy_upsert_stage") == 0,
                 1, "staged rows were left behind");
    /* Under ASan/UBSan a sanitizer report in any process fails the test. */
    char *l = all_logs();
    cr_assert(!strstr(l, "AddressSanitizer") && !strstr(l, "LeakSanitizer") &&
                  !strstr(l, "runtime error:"),
              "a sanitizer reported a problem:\n%s", l);
    free(l);
}

/* ---- processes -------------------------------------------------------------------- */

static void start_local_wordcount(const char *extra_flag, const char *extra_value)
{
    eddy_err_t err = {{0}};
    const char *job[] = {"--quiet", "--job", "wordcount", "--input", input, "--output", uri,
                         "--parallelism", "3", "--rate", rate, extra_flag, extra_value, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
}

static void start_local_etl(void)
{
    eddy_err_t err = {{0}};
    char min[16];
    snprintf(min, sizeof min, "%d", MIN_AMOUNT);
    const char *job[] = {"--quiet", "--job", "etl", "--input", input, "--output", uri,
                         "--min-amount", min, "--parallelism", "2", "--sink-parallelism", "2",
                         "--rate", ETL_RATE, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
}

static void sigkill(pid_t pid)
{
    cr_assert(pid > 0);
    cr_assert(kill(pid, SIGKILL) == 0, "kill -9 %d failed", (int)pid);
}

static void expect_local_exit_0(void)
{
    int rc = eddy_proc_wait(local, 180000);
    if (rc != 0) {
        char *l = all_logs();
        cr_assert_fail("eddy local exited %d; logs:\n%s", rc, l);
    }
}

/* Two worker kills, each after a checkpoint completed since the last one. */
static void two_kills(void)
{
    job_view_t v = wait_view(local, "running", 1, 0, 60000, "a completed checkpoint");
    sigkill(victim(0));
    v = wait_view(local, "running", 0, 1, 60000, "the restore after the first kill");
    v = wait_view(local, "running", v.ck_completed + 1, 1, 60000, "a checkpoint after the restore");
    sigkill(victim(0));
    wait_view(local, NULL, 0, 2, 60000, "the restore after the second kill");
}

#define WORDCOUNT_TABLE "SELECT word, count FROM counts"
#define ETL_TABLE "SELECT line FROM etl_rows"

/* ---- tests -------------------------------------------------------------------------- */

Test(postgres_sink, wordcount_two_worker_kills, .init = setup_wordcount, .fini = teardown,
     .timeout = 300)
{
    /* A checkpoint, a rescale, another checkpoint and only then the kill:
     * twice the usual run time, so that a loaded machine still kills a
     * worker before the input ends. */
    snprintf(rate, sizeof rate, "%zu", input_lines / (2 * RUN_SECONDS));
    start_local_wordcount(NULL, NULL);
    wait_view(local, "running", 1, 0, 60000, "a completed checkpoint");
    /* Rows are published per checkpoint, while the job runs. */
    cr_assert(eddy_poll_until(table_has_rows, "SELECT count(*) FROM counts", 30000),
              "no committed rows in the table while the job runs");
    two_kills();
    expect_local_exit_0();
    expect_table(WORDCOUNT_TABLE);
}

Test(postgres_sink, etl_append_two_worker_kills, .init = setup_etl, .fini = teardown,
     .timeout = 300)
{
    job_name = "etl";
    start_local_etl();
    two_kills();
    expect_local_exit_0();
    expect_table(ETL_TABLE);
}

Test(postgres_sink, wordcount_rescale_and_kill, .init = setup_wordcount, .fini = teardown,
     .timeout = 300)
{
    start_local_wordcount(NULL, NULL);
    wait_view(local, "running", 1, 0, 60000, "a completed checkpoint");
    char *argv[] = {EDDY_BINARY, "rescale", "wordcount", "count", "5", "--coordinator", coord_url,
                    NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 60000, &out, &err);
    if (rc != 0) {
        char *l = all_logs();
        cr_assert_fail("eddy rescale exited %d: %s%s\nlogs:\n%s", rc, out, err, l);
    }
    free(out);
    free(err);
    job_view_t v = wait_view(local, "running", 0, 0, 60000, "running after the rescale");
    wait_view(local, "running", v.ck_completed + 1, 0, 60000, "a checkpoint after the rescale");
    sigkill(victim(0));
    wait_view(local, NULL, 0, 1, 60000, "the restore after the kill");
    expect_local_exit_0();
    expect_table(WORDCOUNT_TABLE);
}

/* ---- coordinator restart ------------------------------------------------------------ */

static void start_coordinator(const char *hb_timeout)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts(cl)->heartbeat_timeout_ms = hb_timeout;
    cr_assert(eddy_test_cluster_start_coordinator(cl, 0, &err) == 0, "%s", err.msg);
}

static void start_worker(void)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_worker(cl, &err) >= 0, "%s", err.msg);
}

/* eddy submit of the etl job; retried while the workers register. */
static void submit_etl(void)
{
    char min[16];
    snprintf(min, sizeof min, "%d", MIN_AMOUNT);
    const char *job[] = {"--job", "etl", "--input", input, "--output", uri, "--min-amount", min,
                         "--parallelism", "2", "--sink-parallelism", "2", "--rate", ETL_RATE,
                         NULL};
    eddy_err_t err = {{0}};
    int rc = -1;
    for (int i = 0; i < 50 && rc != 0; i++) {
        rc = eddy_test_cluster_submit(cl, job, NULL, &err);
        if (rc != 0)
            eddy_nap_ms(200);
    }
    cr_assert_eq(rc, 0, "%s", err.msg);
}

/* Polls pg_prepared_xacts without pause (the prepare-to-commit window is
 * a few milliseconds); true when a transaction of the job is prepared. */
static bool prepared_now(void)
{
    PGresult *r = PQexec(db, "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'eddy:etl:%'");
    bool any = PQresultStatus(r) == PGRES_TUPLES_OK && atoll(PQgetvalue(r, 0, 0)) > 0;
    PQclear(r);
    return any;
}

Test(postgres_sink, coordinator_restart_between_prepare_and_commit, .init = setup_etl,
     .fini = teardown, .timeout = 300)
{
    job_name = "etl";
    start_coordinator(HB_TIMEOUT);
    for (int i = 0; i < 2; i++)
        start_worker();
    submit_etl();
    wait_view(coord, "running", 1, 0, 60000, "a completed checkpoint");

    /* Kill the coordinator while a transaction is prepared: a COMPLETE may
     * already be on its way, so check afterwards and try again if the
     * commit slipped in. */
    bool caught = false;
    for (int attempt = 0; attempt < 8 && !caught; attempt++) {
        uint64_t deadline = eddy_mono_ms() + 20000;
        bool seen = false;
        while (!seen && eddy_mono_ms() < deadline)
            seen = prepared_now();
        cr_assert(seen, "no transaction was ever seen prepared");
        kill(-coord->pid, SIGKILL);
        cr_assert_eq(eddy_proc_wait(coord, 10000), 128 + SIGKILL);
        eddy_nap_ms(500); /* wall-clock progress: a COMPLETE in flight lands */
        caught = prepared_now();
        cr_log_info("attempt %d: coordinator killed with %s prepared", attempt + 1,
                    caught ? "a transaction" : "nothing (committed meanwhile)");
        start_coordinator(HB_TIMEOUT);
        if (!caught)
            wait_view(coord, "running", 0, 0, 60000, "the job running after the restart");
    }
    cr_assert(caught, "never caught a prepared transaction at the coordinator's death");
    wait_view(coord, "finished", 0, 0, 180000, "the job to finish after the restart");
    expect_table(ETL_TABLE);
}

/* ---- a worker lost during the final commit ------------------------------------------------ */

#define FINAL_GIDS "gid LIKE 'eddy:etl:sink:%:18446744073709551615:%'" /* EDDY_FINAL_CHECKPOINT */

static bool finals_prepared(void *arg)
{
    (void)arg;
    PGresult *r = PQexec(db, "SELECT count(*) FROM pg_prepared_xacts WHERE " FINAL_GIDS);
    bool both = PQresultStatus(r) == PGRES_TUPLES_OK && atoll(PQgetvalue(r, 0, 0)) >= 2;
    PQclear(r);
    return both;
}

static bool none_prepared(void *arg)
{
    (void)arg;
    return scalar("SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'eddy:etl:%'") == 0;
}

static bool two_registered(void *arg)
{
    (void)arg;
    char *l = eddy_read_file(coord_logp, NULL);
    int n = 0;
    for (const char *p = l; p && (p = strstr(p, ") registered, data at")); p++)
        n++;
    free(l);
    return n >= 2;
}

/* The pid of the worker running instance `index` of the job's last stage. */
static pid_t sink_worker_pid(uint32_t index)
{
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, job_name) : NULL;
    json_t *ops = json_object_get(j, "operators");
    json_t *sink = json_array_get(ops, json_array_size(ops) - 1);
    json_int_t worker = -1;
    size_t i;
    json_t *inst;
    json_array_foreach(json_object_get(sink, "instances"), i, inst) {
        if (json_integer_value(json_object_get(inst, "index")) == index)
            worker = json_integer_value(json_object_get(inst, "worker"));
    }
    pid_t pid = -1;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w) {
        if (json_integer_value(json_object_get(w, "id")) == worker)
            pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
    }
    json_decref(st);
    return pid;
}

/* Every task is done, so every sink instance has its final transaction
 * prepared; the worker of one of them stops before its COMMIT PREPARED
 * (the coordinator is held while the job ends, so COMPLETE of the final
 * checkpoint reaches no one before the worker is stopped). The job fails
 * (a worker lost during the final commit), and the surviving instance
 * commits the lost one's final transaction too: nothing stays prepared
 * (holding its locks) and the table has every row exactly once. */
Test(postgres_sink, worker_lost_during_final_commit, .init = setup_etl, .fini = teardown,
     .timeout = 300)
{
    job_name = "etl";
    /* longer than the coordinator is held below, so no worker is declared
     * dead for the pause itself */
    start_coordinator("8000");
    for (int i = 0; i < 2; i++)
        start_worker();
    /* both registered before the submit: sink instance i goes to worker i */
    cr_assert(eddy_poll_until(two_registered, NULL, 30000), "the workers did not register");
    submit_etl();
    wait_view(coord, "running", 1, 0, 60000, "a completed checkpoint");
    pid_t lost = sink_worker_pid(0), other = sink_worker_pid(1);
    cr_assert(lost > 0 && other > 0 && lost != other,
              "the two sink instances should run on the two workers (pids %d and %d)", (int)lost,
              (int)other);

    /* Near the end of the input, hold the coordinator: the workers run to
     * the end and prepare their final transactions; their TASK_DONEs wait
     * for it. */
    long long lines = 0;
    for (size_t i = 0; i < expected_len; i++)
        lines += expected[i] == '\n';
    char near_end[96];
    snprintf(near_end, sizeof near_end, "SELECT (count(*) >= %lld)::int FROM etl_rows", lines * 3 / 4);
    cr_assert(eddy_poll_until(table_has_rows, near_end, 60000), "the job never got near its end");
    cr_assert(kill(coord->pid, SIGSTOP) == 0);
    bool prepared = eddy_poll_until(finals_prepared, NULL, 90000);
    if (!prepared)
        kill(coord->pid, SIGCONT);
    cr_assert(prepared, "the sink instances never prepared their final transactions");
    cr_assert(kill(lost, SIGSTOP) == 0);
    cr_assert(kill(coord->pid, SIGCONT) == 0);

    wait_view(coord, "failed", 0, 0, 60000, "the job to fail (a worker lost during its final commit)");
    if (!eddy_poll_until(none_prepared, NULL, 30000)) {
        char *l = all_logs();
        cr_assert_fail("%lld final transaction(s) stayed prepared after the job failed; logs:\n%s",
                       scalar("SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'eddy:etl:%'"), l);
    }
    expect_table(ETL_TABLE);
    char *l = eddy_read_file(coord_logp, NULL);
    cr_assert(l && strstr(l, "was lost during the final commit"), "%s", l ? l : "(no log)");
    free(l);
}

/* ---- errors --------------------------------------------------------------------------- */

static void expect_failure_with(const char *needle)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t *o = eddy_test_cluster_opts(cl);
    o->workers = 1;
    o->checkpoint_interval = o->heartbeat_timeout_ms = "";
    const char *job[] = {"--quiet", "--max-restarts", "2", "--job", "wordcount", "--input", input,
                         "--output", uri, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
    uint64_t t0 = eddy_mono_ms();
    int rc = eddy_proc_wait(local, 150000);
    char *l = eddy_read_file(logp, NULL);
    cr_assert_neq(rc, -1, "eddy local did not exit within 150 s; log:\n%s", l);
    cr_assert_neq(rc, 0, "eddy local succeeded; log:\n%s", l);
    cr_assert(l && strstr(l, needle), "the log does not say '%s':\n%s", needle, l);
    /* The cause is eddy local's last line. */
    const char *last = l + strlen(l);
    while (last > l && last[-1] == '\n')
        last--;
    while (last > l && last[-1] != '\n')
        last--;
    cr_assert(strstr(last, needle), "the last line does not name the cause: %s", last);
    cr_log_info("failed after %.1f s (exit %d): %s", (double)(eddy_mono_ms() - t0) / 1000.0, rc, last);
    free(l);
}

Test(postgres_sink, no_prepared_transactions_is_a_clear_error, .init = setup_none,
     .fini = teardown, .timeout = 300)
{
    eddy_err_t err = {{0}};
    pg = eddy_test_pg_start(0, &err);
    cr_assert(pg, "%s", err.msg);
    cr_assert(eddy_write_file(input, "a b c\nb c\n", 10) == 0);
    eddy_test_pg_uri(pg, "counts", uri, sizeof uri);
    expect_failure_with(EDDY_PG_NO_PREPARED_XACTS);
}

Test(postgres_sink, unreachable_server_is_a_clear_error, .init = setup_none, .fini = teardown,
     .timeout = 300)
{
    eddy_err_t err = {{0}};
    int port = eddy_test_free_port(&err);
    cr_assert_gt(port, 0, "%s", err.msg);
    cr_assert(eddy_write_file(input, "a b c\nb c\n", 10) == 0);
    snprintf(uri, sizeof uri, "postgresql://postgres@127.0.0.1:%d/postgres?table=counts", port);
    char needle[64];
    snprintf(needle, sizeof needle, "PostgreSQL at 127.0.0.1:%d: cannot connect", port);
    expect_failure_with(needle);
}

Test(postgres_sink, bad_uri_is_a_usage_error, .init = setup_none, .fini = teardown)
{
    cr_assert(eddy_write_file(input, "a\n", 2) == 0);
    char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--control-port",
                    eddy_test_cluster_port_s(cl, 0), "--http-port",
                    eddy_test_cluster_http_port_s(cl, 0), "--job", "wordcount", "--input", input,
                    "--output",
                    "postgresql://postgres@127.0.0.1:99999/postgres?table=t", NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &errout);
    cr_assert_eq(rc, 2, "exit %d: %s%s", rc, out, errout);
    cr_assert(strstr(errout, "port 99999 is out of range") || strstr(errout, "port '99999'"),
              "%s", errout);
    free(out);
    free(errout);
}
