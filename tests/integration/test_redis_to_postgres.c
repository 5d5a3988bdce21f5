/* test_redis_to_postgres.c - end to end from a real redis-server
 * (tests/support/redis.c) into a real PostgreSQL (tests/support/postgres.c)
 * through the real eddy binary: wordcount reading Redis Streams (entries
 * XADDed here with hiredis, field `line`) and upserting into a table.
 *
 * Exactly once end to end: with two workers killed with -9 (pids from
 * `eddy status --json`), and through a rescale of `count` plus a kill, the
 * table equals the counts computed here and pg_prepared_xacts is empty.
 *
 * Cancel: `eddy cancel` of an unbounded job must leave nothing prepared.
 * To cancel deterministically while a transaction is prepared and its
 * checkpoint not complete, a trigger on the staging table (created here
 * before the job) sleeps while the sink stages one marker word; the test
 * stops the coordinator (SIGSTOP) while the sink waits, so the sink's ACK
 * stays unread, and sends the cancel before it resumes the coordinator. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/postgres.h"
#include "tests/support/proc.h"
#include "tests/support/redis.h"

#define TEXT_BYTES (1024u * 1024)
#define RUN_SECONDS 10
#define STREAMS "in0,in1,in2"
#define STALL_WORD "eddystallmarker"

#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "4000"
#else
#define HB_TIMEOUT "3000"
#endif

static eddy_test_cluster_t *cl;
static char *dir;
static eddy_test_redis_t *redis;
static eddy_test_pg_t *pg;
static PGconn *db;
static char *expected;
static size_t expected_len;
static char rate[32], pg_uri[300], in_uri[300];
static int ports[2];
static char *coord_url;
static eddy_proc_t *local;

/* ---- fixture -------------------------------------------------------------- */

/* XADDs the text's lines round robin to the three streams (pipelined). */
static size_t fill(const char *text, size_t text_len)
{
    eddy_err_t err = {{0}};
    redisContext *c = eddy_test_redis_client(redis, &err);
    cr_assert(c, "%s", err.msg);
    static const char *const streams[] = {"in0", "in1", "in2"};
    size_t lines = 0, pending = 0;
    const char *p = text, *end = text + text_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *argv[] = {"XADD", streams[lines % 3], "*", "line", p};
        size_t lens[] = {4, 3, 1, 4, len};
        cr_assert_eq(redisAppendCommandArgv(c, 5, argv, lens), REDIS_OK);
        lines++;
        pending++;
        p += len + (nl ? 1 : 0);
        if (pending == 1000 || p >= end)
            for (; pending; pending--) {
                redisReply *r = NULL;
                cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK, "%s", c->errstr);
                cr_assert_eq(r->type, REDIS_REPLY_STRING, "XADD failed");
                freeReplyObject(r);
            }
    }
    redisFree(c);
    return lines;
}

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "redis-pg", .workers = 3, .checkpoint_interval = "300"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    coord_url = eddy_test_cluster_url(cl, 0);
    local = eddy_test_cluster_local(cl);
    redis = eddy_test_redis_start(false, &err);
    cr_assert(redis, "%s", err.msg);
    pg = eddy_test_pg_start(20, &err);
    cr_assert(pg, "%s", err.msg);
    db = eddy_test_pg_connect(pg, &err);
    cr_assert(db, "%s", err.msg);
    eddy_test_pg_uri(pg, "counts", pg_uri, sizeof pg_uri);

    const char *path = eddy_test_cluster_path(cl, "input.txt");
    cr_assert(eddy_gen_text(path, TEXT_BYTES, 4242, &err) == 0, "%s", err.msg);
    size_t len;
    char *text = eddy_read_file(path, &len);
    cr_assert(text);
    expected = eddy_reference_wordcount(text, len, &expected_len);
    size_t lines = fill(text, len);
    free(text);
    snprintf(rate, sizeof rate, "%zu", lines / RUN_SECONDS);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    if (db)
        PQfinish(db);
    db = NULL;
    eddy_test_pg_stop(&pg);
    eddy_test_redis_destroy(&redis);
    free(expected);
    expected = NULL;
}

/* ---- eddy ------------------------------------------------------------------- */

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void start_local(const char *query, const char *parallelism, const char *hb_timeout)
{
    eddy_err_t err = {{0}};
    snprintf(in_uri, sizeof in_uri, "redis://127.0.0.1:%d/" STREAMS "%s%s",
             eddy_test_redis_port(redis), query ? "?" : "", query ? query : "");
    eddy_test_cluster_opts(cl)->heartbeat_timeout_ms = hb_timeout;
    const char *job[] = {"--job", "wordcount", "--input", in_uri, "--output", pg_uri,
                         "--parallelism", parallelism, "--rate", rate, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
}

typedef eddy_test_job_view_t job_view_t;

static job_view_t wait_view(const char *state, int64_t min_completed, int64_t min_restarts,
                            const char *what)
{
    eddy_test_job_want_t want = {.state = state, .min_completed = min_completed,
                                 .min_restarts = min_restarts};
    job_view_t last;
    bool gone;
    if (!eddy_test_cluster_wait_job(cl, "wordcount", &want, 60000, &last, &gone)) {
        char *l = log_text();
        cr_assert_fail("timed out waiting for %s (state %s, completed %lld, restarts %lld)%s; "
                       "log:\n%s",
                       what, last.state, (long long)last.ck_completed, (long long)last.restarts,
                       gone ? " - eddy local exited" : "", l);
    }
    return last;
}

/* An alive worker running tasks. */
static pid_t victim(void)
{
    cr_assert(eddy_test_cluster_wait_workers(cl, 1, true, 10000), "no alive worker with tasks");
    pid_t pid = eddy_test_busy_worker(ports[0], 0);
    cr_assert_gt(pid, 0, "no alive worker with tasks");
    return pid;
}

static void sigkill(pid_t pid)
{
    cr_assert(pid > 0);
    cr_assert(kill(pid, SIGKILL) == 0, "kill -9 %d failed", (int)pid);
}

static void expect_local_exit(int want)
{
    int rc = eddy_proc_wait(local, 180000);
    if (rc != want) {
        char *l = log_text();
        cr_assert_fail("eddy local exited %d, expected %d; log:\n%s", rc, want, l);
    }
}

static void run_cli(char **argv)
{
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 60000, &out, &err);
    if (rc != 0) {
        char *l = log_text();
        cr_assert_fail("eddy %s exited %d: %s%s\nlog:\n%s", argv[1], rc, out ? out : "",
                       err ? err : "", l);
    }
    free(out);
    free(err);
}

/* ---- the database ------------------------------------------------------------- */

static long long scalar(const char *sql)
{
    eddy_err_t err = {{0}};
    long long v = eddy_test_pg_scalar(db, sql, &err);
    cr_assert_geq(v, 0, "%s", err.msg);
    return v;
}

static bool positive(void *arg)
{
    PGresult *r = PQexec(db, arg);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
              atoll(PQgetvalue(r, 0, 0)) > 0;
    PQclear(r);
    return ok;
}

/* The table equals the reference; nothing prepared or staged is left. */
static void expect_counts(void)
{
    eddy_err_t err = {{0}};
    size_t len;
    char *got = eddy_test_pg_rows_text(db, "SELECT word, count FROM counts", &len, &err);
    cr_assert(got, "%s", err.msg);
    if (len != expected_len || memcmp(got, expected, len) != 0) {
        size_t i = 0;
        while (i < len && i < expected_len && got[i] == expected[i])
            i++;
        char *l = log_text();
        cr_assert_fail("table differs from the reference (%zu vs %zu bytes) at byte %zu:\n"
                       "got ...%.200s\nwant ...%.200s\nlog:\n%s",
                       len, expected_len, i, got + (i > 40 ? i - 40 : 0),
                       expected + (i > 40 ? i - 40 : 0), l);
    }
    free(got);
    cr_assert_eq(scalar("SELECT count(*) FROM pg_prepared_xacts"), 0,
                 "prepared transactions were left behind");
    cr_assert_eq(scalar("SELECT count(*) FROM eddy_upsert_stage"), 0, "staged rows were left");
    char *l = log_text();
    cr_assert(!strstr(l, "AddressSanitizer") && !strstr(l, "runtime error:"),
              "a sanitizer reported a problem:\n%s", l);
    free(l);
}

/* ---- tests ------------------------------------------------------------------------- */

Test(redis_to_postgres, wordcount_two_worker_kills, .init = setup, .fini = teardown,
     .timeout = 300)
{
    start_local("bounded=latest", "3", HB_TIMEOUT);
    wait_view("running", 1, 0, "a completed checkpoint");
    cr_assert(eddy_poll_until(positive, "SELECT count(*) FROM counts", 30000),
              "no committed rows while the job runs");
    sigkill(victim());
    job_view_t v = wait_view("running", 0, 1, "the restore after the first kill");
    wait_view("running", v.ck_completed + 1, 1, "a checkpoint after the restore");
    sigkill(victim());
    wait_view(NULL, 0, 2, "the restore after the second kill");
    expect_local_exit(0);
    expect_counts();
}

Test(redis_to_postgres, wordcount_rescale_and_kill, .init = setup, .fini = teardown,
     .timeout = 300)
{
    start_local("bounded=latest", "2", HB_TIMEOUT);
    wait_view("running", 1, 0, "a completed checkpoint");
    char *argv[] = {EDDY_BINARY, "rescale", "wordcount", "count", "3", "--coordinator",
                    coord_url, NULL};
    run_cli(argv);
    job_view_t v = wait_view("running", 0, 0, "running after the rescale");
    wait_view("running", v.ck_completed + 1, 0, "a checkpoint after the rescale");
    sigkill(victim());
    wait_view(NULL, 0, 1, "the restore after the kill");
    expect_local_exit(0);
    expect_counts();
}

static bool sink_stalled(void *arg)
{
    (void)arg;
    return positive("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'");
}

Test(redis_to_postgres, cancel_leaves_nothing_prepared, .init = setup, .fini = teardown,
     .timeout = 300)
{
    eddy_err_t err = {{0}};
    /* The sink's staging table, made here with a trigger that holds the
     * staging of the marker word for 3 s (the sink keeps a table it finds). */
    PGresult *r = eddy_test_pg_query(
        db,
        "CREATE TABLE eddy_upsert_stage (sink text NOT NULL, cp numeric NOT NULL, seq bigint "
        "NOT NULL, k text NOT NULL, v bigint, del boolean NOT NULL);"
        "CREATE FUNCTION eddy_test_stall() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.k = '" STALL_WORD "' THEN PERFORM pg_sleep(3); END IF; RETURN NEW; END $$;"
        "CREATE TRIGGER stall BEFORE INSERT ON eddy_upsert_stage FOR EACH ROW "
        "EXECUTE FUNCTION eddy_test_stall()",
        &err);
    cr_assert(r, "%s", err.msg);
    PQclear(r);
    /* Unbounded: runs until cancelled. The coordinator is stopped for a few
     * seconds below: a long heartbeat timeout keeps its workers alive. */
    start_local(NULL, "3", "30000");
    wait_view("running", 1, 0, "a completed checkpoint");
    cr_assert(eddy_poll_until(positive, "SELECT count(*) FROM counts", 30000),
              "no committed rows while the job runs");

    /* The marker word: its checkpoint's PREPARE waits in the trigger. */
    redisContext *c = eddy_test_redis_client(redis, &err);
    cr_assert(c, "%s", err.msg);
    redisReply *xr = redisCommand(c, "XADD in0 * line %s", STALL_WORD);
    cr_assert(xr && xr->type == REDIS_REPLY_STRING);
    freeReplyObject(xr);
    redisFree(c);
    if (!eddy_poll_until(sink_stalled, NULL, 30000)) {
        char *l = log_text();
        cr_assert_fail("the sink never staged the marker word; log:\n%s", l);
    }
    /* The coordinator stops before the sink's ACK can reach it: that
     * checkpoint cannot complete, its transaction stays prepared. */
    cr_assert(kill(local->pid, SIGSTOP) == 0);
    bool prepared = eddy_poll_until(positive, "SELECT count(*) FROM pg_prepared_xacts", 30000);
    eddy_proc_t cancel = {0};
    char *argv[] = {EDDY_BINARY, "cancel", "wordcount", "--coordinator", coord_url, NULL};
    char cancel_log[800];
    snprintf(cancel_log, sizeof cancel_log, "%s/cancel.log", dir);
    cr_assert(eddy_proc_start(&cancel, argv, NULL, cancel_log, &err) == 0, "%s", err.msg);
    /* Marked plain wait: time for the cancel request to reach the stopped
     * coordinator's socket, so that it is read together with the sink's
     * ACK. Too short only makes the test weaker (the checkpoint may then
     * complete and commit), never fail a correct eddy. */
    eddy_nap_ms(1000);
    cr_assert(kill(local->pid, SIGCONT) == 0);
    cr_assert(prepared, "no prepared transaction while the sink's ACK was held");
    int rc = eddy_proc_wait(&cancel, 60000);
    eddy_proc_kill(&cancel, 1000);
    cr_assert_eq(rc, 0, "eddy cancel exited %d", rc);
    expect_local_exit(3);
    long long left = scalar("SELECT count(*) FROM pg_prepared_xacts");
    if (left != 0) {
        char *l = log_text();
        cr_assert_fail("%lld prepared transaction(s) left after the cancel; log:\n%s", left, l);
    }
    /* Rows of completed checkpoints stay. */
    cr_assert_gt(scalar("SELECT count(*) FROM counts"), 0);
    char *l = log_text();
    cr_log_info("the sink %s", strstr(l, "rolled back") ? "rolled back what it had prepared"
                                                        : "had nothing left to roll back");
    free(l);
}
