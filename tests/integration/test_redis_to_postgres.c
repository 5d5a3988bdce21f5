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

#include "tests/support/etcd.h"
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

static char *dir;
static char logp[700];
static eddy_test_redis_t *redis;
static eddy_test_pg_t *pg;
static PGconn *db;
static char *expected;
static size_t expected_len;
static char rate[32], pg_uri[300], in_uri[300];
static int ports[2];
static char port_s[16], http_s[16], coord_url[64];
static eddy_proc_t local;

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
    dir = eddy_test_mkdtemp("redis-pg", &err);
    cr_assert(dir, "%s", err.msg);
    snprintf(logp, sizeof logp, "%s/local.log", dir);
    cr_assert(eddy_test_free_ports(2, ports, &err) == 0, "%s", err.msg);
    snprintf(port_s, sizeof port_s, "%d", ports[0]);
    snprintf(http_s, sizeof http_s, "%d", ports[1]);
    snprintf(coord_url, sizeof coord_url, "tcp://127.0.0.1:%d", ports[0]);
    memset(&local, 0, sizeof local);
    redis = eddy_test_redis_start(false, &err);
    cr_assert(redis, "%s", err.msg);
    pg = eddy_test_pg_start(20, &err);
    cr_assert(pg, "%s", err.msg);
    db = eddy_test_pg_connect(pg, &err);
    cr_assert(db, "%s", err.msg);
    eddy_test_pg_uri(pg, "counts", pg_uri, sizeof pg_uri);

    char path[800];
    snprintf(path, sizeof path, "%s/input.txt", dir);
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
    eddy_proc_kill(&local, 3000);
    if (db)
        PQfinish(db);
    db = NULL;
    eddy_test_pg_stop(&pg);
    eddy_test_redis_destroy(&redis);
    free(expected);
    expected = NULL;
    if (dir)
        eddy_test_rm_rf(dir);
    free(dir);
    dir = NULL;
}

/* ---- eddy ------------------------------------------------------------------- */

static char *log_text(void)
{
    char *l = eddy_read_file(logp, NULL);
    return l ? l : strdup("");
}

static void start_local(const char *query, const char *parallelism, const char *hb_timeout)
{
    eddy_err_t err = {{0}};
    snprintf(in_uri, sizeof in_uri, "redis://127.0.0.1:%d/" STREAMS "%s%s",
             eddy_test_redis_port(redis), query ? "?" : "", query ? query : "");
    char *argv[] = {EDDY_BINARY, "local", "--workers", "3", "--control-port", port_s,
                    "--http-port", http_s, "--checkpoint-interval", "300", "--heartbeat-ms",
                    "200", "--heartbeat-timeout-ms", (char *)hb_timeout, "--quiet", "--job",
                    "wordcount", "--input", in_uri, "--output", pg_uri, "--parallelism", (char *)parallelism,
                    "--rate", rate, NULL};
    cr_assert(eddy_proc_start(&local, argv, NULL, logp, &err) == 0, "%s", err.msg);
}

typedef struct job_view {
    bool ok;
    char state[32];
    int64_t restarts, ck_completed;
} job_view_t;

static job_view_t job_view(void)
{
    job_view_t v = {0};
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, "wordcount") : NULL;
    if (j) {
        v.ok = true;
        snprintf(v.state, sizeof v.state, "%s", json_string_value(json_object_get(j, "state")));
        v.restarts = json_integer_value(json_object_get(j, "restarts"));
        v.ck_completed = json_integer_value(
            json_object_get(json_object_get(j, "last_checkpoint"), "completed"));
    }
    json_decref(st);
    return v;
}

typedef struct view_wait {
    bool gone;
    const char *state;
    int64_t min_completed, min_restarts;
    job_view_t last;
} view_wait_t;

static bool view_matches(void *arg)
{
    view_wait_t *w = arg;
    if (!eddy_proc_alive(&local)) {
        w->gone = true;
        return true;
    }
    job_view_t v = job_view();
    if (!v.ok)
        return false;
    w->last = v;
    return (!w->state || !strcmp(v.state, w->state)) && v.ck_completed >= w->min_completed &&
           v.restarts >= w->min_restarts;
}

static job_view_t wait_view(const char *state, int64_t min_completed, int64_t min_restarts,
                            const char *what)
{
    view_wait_t w = {false, state, min_completed, min_restarts, {0}};
    if (!eddy_poll_until(view_matches, &w, 60000) || w.gone) {
        char *l = log_text();
        cr_assert_fail("timed out waiting for %s (state %s, completed %lld, restarts %lld)%s; "
                       "log:\n%s",
                       what, w.last.state, (long long)w.last.ck_completed,
                       (long long)w.last.restarts, w.gone ? " - eddy local exited" : "", l);
    }
    return w.last;
}

/* An alive worker running tasks. */
static pid_t victim(void)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        json_t *st = eddy_test_status(ports[0]);
        size_t i;
        json_t *w;
        pid_t found = -1;
        json_array_foreach(json_object_get(st, "workers"), i, w)
        {
            pid_t pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
            if (json_is_true(json_object_get(w, "alive")) &&
                json_integer_value(json_object_get(w, "tasks")) > 0 && pid > 0)
                found = pid;
        }
        json_decref(st);
        if (found > 0)
            return found;
        eddy_nap_ms(100);
    }
    cr_assert_fail("no alive worker with tasks");
    return -1;
}

static void sigkill(pid_t pid)
{
    cr_assert(pid > 0);
    cr_assert(kill(pid, SIGKILL) == 0, "kill -9 %d failed", (int)pid);
}

static void expect_local_exit(int want)
{
    int rc = eddy_proc_wait(&local, 180000);
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
    cr_assert(kill(local.pid, SIGSTOP) == 0);
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
    cr_assert(kill(local.pid, SIGCONT) == 0);
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
