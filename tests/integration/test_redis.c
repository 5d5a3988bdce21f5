/* test_redis.c - the Redis Streams source and sink against a real
 * redis-server (tests/support/redis.c) and the real eddy binary.
 *
 * Entries are XADDed here through hiredis (field `line`, the lines of
 * generated text); the job's --output is compared with a wordcount
 * computed here, so a dropped or doubled entry shows as a wrong count.
 * Covered: a bounded read (?bounded=latest), streams by pattern split over
 * 2 source instances, the sink's XLEN, Redis unreachable when the job
 * starts, (with source state as bytes) a worker killed with -9 and
 * Redis restarted mid-run, a consumer group left with nothing pending, and
 * checkpoints that go on after an instance finished (a restore starts it
 * at its end). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"
#include "tests/support/redis.h"

#define RUN_TIMEOUT_MS 120000

static char *dir;
static eddy_test_redis_t *redis;
static char *text, *expected;
static size_t text_len, expected_len;
static int ports[2];
static eddy_test_cluster_t *cl;

static void start_redis(bool persistent)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "redis-test", .workers = 2, .checkpoint_interval = "300",
                                  .heartbeat_timeout_ms = "1500"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    redis = eddy_test_redis_start(persistent, &err);
    cr_assert(redis, "%s", err.msg);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
}

static void setup(void)
{
    start_redis(false);
}

static void setup_persistent(void)
{
    start_redis(true);
}

static void teardown(void)
{
    eddy_test_redis_destroy(&redis);
    free(text);
    free(expected);
    eddy_test_cluster_destroy(&cl);
}

/* Generates ~bytes of text, XADDs its lines round robin to the streams
 * (pipelined) and computes the expected counts. */
static size_t fill(const char *const *streams, int n_streams, size_t bytes)
{
    eddy_err_t err = {{0}};
    char path[700];
    snprintf(path, sizeof path, "%s/input.txt", dir);
    cr_assert(eddy_gen_text(path, bytes, 20261203, &err) == 0, "%s", err.msg);
    text = eddy_read_file(path, &text_len);
    cr_assert(text);
    expected = eddy_reference_wordcount(text, text_len, &expected_len);
    redisContext *c = eddy_test_redis_client(redis, &err);
    cr_assert(c, "%s", err.msg);
    size_t lines = 0, pending = 0;
    const char *p = text, *end = text + text_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *argv[] = {"XADD", streams[lines % (size_t)n_streams], "*", "line", p};
        size_t lens[] = {4, strlen(argv[1]), 1, 4, len};
        cr_assert_eq(redisAppendCommandArgv(c, 5, argv, lens), REDIS_OK);
        lines++;
        pending++;
        p += len + (nl ? 1 : 0);
        if (pending == 1000 || p >= end) {
            for (; pending; pending--) {
                redisReply *r = NULL;
                cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK, "%s", c->errstr);
                cr_assert_eq(r->type, REDIS_REPLY_STRING, "XADD failed: %s",
                             r->type == REDIS_REPLY_ERROR ? r->str : "?");
                freeReplyObject(r);
            }
        }
    }
    redisFree(c);
    return lines;
}

static long long redis_int(const char *fmt, const char *a, const char *b)
{
    eddy_err_t err = {{0}};
    redisContext *c = eddy_test_redis_client(redis, &err);
    cr_assert(c, "%s", err.msg);
    redisReply *r = redisCommand(c, fmt, a, b);
    cr_assert(r, "%s", c->errstr);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static eddy_proc_t *start_job(const char *input, const char *output, const char *parallelism,
                              const char *rate)
{
    eddy_err_t err = {{0}};
    const char *argv[16] = {"--job", "wordcount", "--input", input, "--parallelism", parallelism};
    int n = 6;
    if (output) {
        argv[n++] = "--output";
        argv[n++] = output;
    }
    if (rate) {
        argv[n++] = "--rate";
        argv[n++] = rate;
    }
    argv[n] = NULL;
    /* Without --output the changelog goes to stdout: /dev/null here. */
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    return eddy_test_cluster_local(cl);
}

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void finish_job(eddy_proc_t *proc)
{
    int rc = eddy_proc_wait(proc, RUN_TIMEOUT_MS);
    eddy_proc_kill(proc, 2000);
    char *l = log_text();
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, l);
    /* A worker that crashed (a sanitizer report under EDDY_SANITIZE) is
     * restarted and the job may still succeed: look for it explicitly. */
    cr_assert(!strstr(l, "runtime error") && !strstr(l, "Sanitizer") &&
                  !strstr(l, "exited with status"),
              "a process crashed or exited on its own; log:\n%s", l);
    free(l);
}

static void assert_output(const char *path)
{
    size_t got_len = 0;
    char *got = eddy_read_file(path, &got_len);
    char *l = log_text();
    cr_assert(got, "no output %s; log:\n%s", path, l);
    cr_assert(got_len == expected_len && memcmp(got, expected, got_len) == 0,
              "output (%zu bytes) differs from the reference (%zu bytes); log:\n%s", got_len,
              expected_len, l);
    free(l);
    free(got);
}

static char *uri(const char *streams, const char *query)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "redis://127.0.0.1:%d/%s%s%s", eddy_test_redis_port(redis),
             streams, query ? "?" : "", query ? query : "");
    return buf;
}

Test(redis, bounded_wordcount_matches_reference, .init = setup, .fini = teardown, .timeout = 180)
{
    const char *streams[] = {"lines"};
    size_t lines = fill(streams, 1, 1u << 20);
    cr_assert_gt(lines, 1000);
    char out[800];
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    eddy_proc_t *proc;
    proc = start_job(uri("lines", "bounded=latest"), out, "2", NULL);
    finish_job(proc);
    assert_output(out);
}

Test(redis, pattern_streams_over_two_instances, .init = setup, .fini = teardown, .timeout = 180)
{
    const char *streams[] = {"ev:a", "ev:b", "ev:c", "ev:d", "ev:e", "ev:f"};
    fill(streams, 6, 1u << 19);
    /* A stream that does not match must not be read. */
    redis_int("XADD other * line %s%s", "not-a-word-of-the-text", "");
    char out[800];
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    eddy_proc_t *proc;
    proc = start_job(uri("ev:*", "bounded=latest"), out, "2", NULL);
    finish_job(proc);
    assert_output(out);
}

/* Counts the sink's entries and checks each against the reference line
 * "word\tcount". */
Test(redis, sink_xadds_every_output_record, .init = setup, .fini = teardown, .timeout = 180)
{
    const char *streams[] = {"in"};
    fill(streams, 1, 1u << 18);
    eddy_proc_t *proc;
    char out[600];
    snprintf(out, sizeof out, "%s", uri("out", NULL));
    proc = start_job(uri("in", "bounded=latest"), out, "2", NULL);
    finish_job(proc);
    size_t rows = 0;
    for (size_t i = 0; i < expected_len; i++)
        rows += expected[i] == '\n';
    long long xlen = redis_int("XLEN %s%s", "out", "");
    cr_assert_eq(xlen, (long long)rows, "XLEN out %lld, output records %zu", xlen, rows);

    eddy_err_t err = {{0}};
    redisContext *c = eddy_test_redis_client(redis, &err);
    cr_assert(c, "%s", err.msg);
    redisReply *r = redisCommand(c, "XRANGE out - +");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == rows);
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *f = r->element[i]->element[1];
        cr_assert_eq(f->elements, 6);
        cr_assert_str_eq(f->element[0]->str, "line");
        cr_assert_str_eq(f->element[2]->str, "value");
        cr_assert_str_eq(f->element[5]->str, "+I");
        char row[512];
        snprintf(row, sizeof row, "\n%s\t%s\n", f->element[1]->str, f->element[3]->str);
        bool first = !strncmp(expected, row + 1, strlen(row + 1));
        cr_assert(first || strstr(expected, row), "sink entry %s=%s is not in the reference",
                  f->element[1]->str, f->element[3]->str);
    }
    freeReplyObject(r);
    redisFree(c);
}

static bool log_has(void *arg)
{
    char *l = log_text();
    bool yes = strstr(l, (const char *)arg) != NULL;
    free(l);
    return yes;
}

/* Redis is down when the job starts: the source logs its retries and the
 * job proceeds, exactly, once Redis is back. */
Test(redis, unreachable_at_start_retries_then_proceeds, .init = setup_persistent,
     .fini = teardown, .timeout = 180)
{
    const char *streams[] = {"lines"};
    fill(streams, 1, 1u << 18);
    eddy_test_redis_stop(redis);
    char out[800];
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    eddy_proc_t *proc;
    proc = start_job(uri("lines", "bounded=latest"), out, "2", NULL);
    cr_assert(eddy_poll_until(log_has, "retrying", 30000), "no retry logged");
    cr_assert(eddy_proc_alive(proc), "the job ended while Redis was down");
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_redis_restart(redis, &err) == 0, "%s", err.msg);
    finish_job(proc);
    assert_output(out);
    cr_assert(log_has("connected again"), "the recovery was not logged");
}

/* ---- failures (source state as bytes) -------------------------------------- */

static int64_t completed_checkpoints(void)
{
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, "wordcount") : NULL;
    int64_t n = j ? json_integer_value(json_object_get(json_object_get(j, "last_checkpoint"),
                                                       "completed"))
                  : -1;
    json_decref(st);
    return n;
}

static bool checkpoint_done(void *arg)
{
    return completed_checkpoints() >= *(int64_t *)arg;
}

/* An alive worker that runs tasks, from `eddy status --json`. */
static pid_t busy_worker(void)
{
    json_t *st = eddy_test_status(ports[0]);
    pid_t pid = -1;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (pid < 0 && json_is_true(json_object_get(w, "alive")) &&
            json_integer_value(json_object_get(w, "tasks")) > 0)
            pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
    }
    json_decref(st);
    return pid;
}

static size_t count_in_log(const char *what)
{
    char *l = log_text();
    size_t n = 0;
    for (const char *p = l; (p = strstr(p, what)); p += strlen(what))
        n++;
    free(l);
    return n;
}

typedef struct more_than {
    const char *what;
    size_t n;
} more_than_t;

static bool log_count_above(void *arg)
{
    more_than_t *m = arg;
    return count_in_log(m->what) > m->n;
}

/* Kills a worker (-9) once a checkpoint completed, then stops Redis while
 * the job restores and starts it again once the source logged a retry. */
static void kill_worker_then_bounce_redis(eddy_proc_t *proc)
{
    int64_t one = 1;
    char *l = NULL;
    if (!eddy_poll_until(checkpoint_done, &one, 60000)) {
        l = log_text();
        cr_assert_fail("no checkpoint completed; log:\n%s", l);
    }
    pid_t victim = busy_worker();
    cr_assert_gt(victim, 0, "no worker with tasks in eddy status");
    cr_assert(eddy_proc_alive(proc), "the job ended before the kill: raise the input or lower --rate");
    cr_assert_eq(kill(victim, SIGKILL), 0);
    more_than_t retry = {"retrying", count_in_log("retrying")};
    eddy_test_redis_stop(redis);
    if (!eddy_poll_until(log_count_above, &retry, 30000)) {
        l = log_text();
        cr_assert_fail("the source logged no retry while Redis was down; log:\n%s", l);
    }
    cr_assert(eddy_proc_alive(proc), "the job ended while Redis was down");
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_redis_restart(redis, &err) == 0, "%s", err.msg);
}

Test(redis, worker_killed_and_redis_restarted_counts_exact, .init = setup_persistent,
     .fini = teardown, .timeout = 240)
{
    const char *streams[] = {"s1", "s2", "s3"};
    size_t lines = fill(streams, 3, 1u << 20);
    char out[800], rate[32];
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    snprintf(rate, sizeof rate, "%zu", lines / 8); /* about 8 s undisturbed */
    eddy_proc_t *proc;
    proc = start_job(uri("s1,s2,s3", "bounded=latest"), out, "2", rate);
    kill_worker_then_bounce_redis(proc);
    finish_job(proc);
    assert_output(out);
    char *l = log_text();
    cr_assert(strstr(l, "connected again"), "the recovery was not logged:\n%s", l);
    free(l);
}

static long long group_pending(const char *stream, const char *group)
{
    eddy_err_t err = {{0}};
    redisContext *c = eddy_test_redis_client(redis, &err);
    if (!c)
        return -1;
    redisReply *r = redisCommand(c, "XPENDING %s %s", stream, group);
    long long n = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER)
        n = r->element[0]->integer;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return n;
}

static bool nothing_pending(void *arg)
{
    (void)arg;
    return group_pending("g1", "grp") == 0 && group_pending("g2", "grp") == 0;
}

typedef struct pending_probe {
    eddy_proc_t *job;
    bool seen;
} pending_probe_t;

static bool some_pending(void *arg)
{
    pending_probe_t *p = arg;
    p->seen = group_pending("g1", "grp") > 0 || group_pending("g2", "grp") > 0;
    return p->seen || !eddy_proc_alive(p->job);
}

/* ?group=G: entries are read as the group's consumers, left pending until a
 * checkpoint covering them completed (seen pending while the job runs), and
 * after the job (with a worker killed on the way) nothing is pending and the
 * counts are exact. */
Test(redis, group_acks_after_checkpoints_and_nothing_stays_pending, .init = setup_persistent,
     .fini = teardown, .timeout = 240)
{
    const char *streams[] = {"g1", "g2"};
    size_t lines = fill(streams, 2, 1u << 20);
    char out[800], rate[32];
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    snprintf(rate, sizeof rate, "%zu", lines / 8);
    eddy_proc_t *proc;
    proc = start_job(uri("g1,g2", "bounded=latest&group=grp"), out, "2", rate);
    /* Read but not yet acknowledged: the group holds pending entries while
     * checkpoints are in flight (the interval is 300 ms). */
    pending_probe_t probe = {proc, false};
    eddy_poll_until(some_pending, &probe, 60000);
    cr_assert(probe.seen, "no entry was ever pending: acknowledged before a checkpoint?");
    kill_worker_then_bounce_redis(proc);
    finish_job(proc);
    assert_output(out);
    bool clean = eddy_poll_until(nothing_pending, NULL, 20000);
    cr_assert(clean, "entries still pending after the job: g1 %lld, g2 %lld",
              group_pending("g1", "grp"), group_pending("g2", "grp"));
}

/* ---- lag metric ------------------------------------------------------------ */

/* The sum of eddy_source_lag over the job's source instances from
 * /metrics; -1 when it is not there (yet). */
static long long lag_metric(void)
{
    return eddy_test_scrape_sum(ports[1], "eddy_source_lag{job=\"wordcount\"");
}

typedef struct lag_wait {
    long long below, seen;
} lag_wait_t;

static bool lag_between(void *arg)
{
    lag_wait_t *w = arg;
    w->seen = lag_metric();
    return w->seen > 0 && w->seen < w->below;
}

/* An unbounded job read slowly: eddy_source_lag shows the entries not read
 * yet, falls as the source reads, and grows when entries are added. */
Test(redis, unbounded_source_reports_its_lag, .init = setup, .fini = teardown, .timeout = 180)
{
    const char *streams[] = {"u1", "u2"};
    size_t lines = fill(streams, 2, 1u << 18);
    char rate[32];
    snprintf(rate, sizeof rate, "%zu", lines / 30 + 1); /* about 30 s to read all */
    eddy_proc_t *proc;
    proc = start_job(uri("u1,u2", NULL), NULL, "2", rate);
    lag_wait_t w = {(long long)lines + 1, -1};
    cr_assert(eddy_poll_until(lag_between, &w, 30000), "eddy_source_lag never in 1..%zu (last %lld)",
              lines, w.seen);
    long long first = w.seen;
    w.below = first;
    cr_assert(eddy_poll_until(lag_between, &w, 30000), "the lag did not fall below %lld (last %lld)",
              first, w.seen);
    /* 5000 more entries: the lag grows by about that much. */
    eddy_err_t err = {{0}};
    redisContext *c = eddy_test_redis_client(redis, &err);
    cr_assert(c, "%s", err.msg);
    for (int i = 0; i < 5000; i++)
        redisAppendCommand(c, "XADD u1 * line extra");
    for (int i = 0; i < 5000; i++) {
        redisReply *r = NULL;
        cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    redisFree(c);
    long long before = w.seen;
    bool grew = false;
    for (int i = 0; i < 100 && !grew; i++) {
        grew = lag_metric() > before + 3000;
        if (!grew)
            eddy_nap_ms(50);
    }
    cr_assert(grew, "the lag did not grow after 5000 XADDs (was %lld, now %lld)", before, lag_metric());
    cr_assert(eddy_proc_alive(proc), "an unbounded job ended");
    eddy_proc_kill(proc, 2000);
}

/* A bad URI is a one-line usage error (exit 2) before anything starts. */
Test(redis, bad_uris_are_usage_errors, .timeout = 60)
{
    const struct {
        const char *flag, *value, *why;
    } cases[] = {
        {"--input", "redis://h:99999/x", "port '99999' must be 1..65535"},
        {"--input", "redis://h:1/x?bounded=yes", "the only value is 'latest'"},
        {"--output", "redis://h:1/a,b", "a Redis sink takes one stream name"},
        {"--output", "redis://h:1/a?group=g", "a Redis sink takes one stream name"},
        {"--input", "redis://h:1/unbounded", "add ?bounded=latest"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool in = !strcmp(cases[i].flag, "--input");
        char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--http-port", "0", "--job",
                        "wordcount", "--input",
                        in ? (char *)cases[i].value : "redis://h:1/in?bounded=latest",
                        "--output", in ? "/nonexistent/out.tsv" : (char *)cases[i].value, NULL};
        char *out = NULL, *errout = NULL;
        int rc = eddy_proc_run(argv, 30000, &out, &errout);
        cr_assert_eq(rc, 2, "%s %s: exit %d, stderr %s", cases[i].flag, cases[i].value, rc, errout);
        cr_assert(strstr(errout, cases[i].why), "%s %s: stderr lacks '%s': %s", cases[i].flag,
                  cases[i].value, cases[i].why, errout);
        cr_assert(!strchr(errout, '\n') || strchr(errout, '\n') == strrchr(errout, '\n'),
                  "more than one line: %s", errout);
        free(out);
        free(errout);
    }
}

/* The sink when Redis is away as the job writes: it retries (logged), the
 * job's end waits for it, and once Redis is back every output record is in
 * the stream, at least once (a batch cut by the stop is sent again). */
Test(redis, sink_survives_a_redis_restart_at_least_once, .init = setup_persistent,
     .fini = teardown, .timeout = 180)
{
    const char *streams[] = {"in"};
    fill(streams, 1, 1u << 18);
    eddy_test_redis_stop(redis);
    char input[800], out[600];
    snprintf(input, sizeof input, "%s/input.txt", dir);
    snprintf(out, sizeof out, "%s", uri("out", NULL));
    eddy_proc_t *proc;
    proc = start_job(input, out, "2", NULL);
    if (!eddy_poll_until(log_has, "redis sink", 60000)) {
        char *l = log_text();
        cr_assert_fail("the sink logged no retry while Redis was down; log:\n%s", l);
    }
    cr_assert(eddy_proc_alive(proc), "the job ended while its sink could not write");
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_redis_restart(redis, &err) == 0, "%s", err.msg);
    finish_job(proc);

    size_t rows = 0;
    for (size_t i = 0; i < expected_len; i++)
        rows += expected[i] == '\n';
    long long xlen = redis_int("XLEN %s%s", "out", "");
    cr_assert_geq(xlen, (long long)rows, "XLEN out %lld < output records %zu", xlen, rows);
    /* Every reference row is there (duplicates allowed, nothing else). */
    redisContext *c = eddy_test_redis_client(redis, &err);
    cr_assert(c, "%s", err.msg);
    redisReply *r = redisCommand(c, "XRANGE out - +");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY);
    size_t got_len = 0;
    char *got = calloc(1, (size_t)r->elements * 300 + 1);
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *f = r->element[i]->element[1];
        got_len += (size_t)sprintf(got + got_len, "\n%s\t%s\n", f->element[1]->str,
                                   f->element[3]->str);
    }
    for (const char *p = expected; p < expected + expected_len;) {
        const char *nl = strchr(p, '\n');
        char row[512];
        snprintf(row, sizeof row, "\n%.*s\n", (int)(nl - p), p);
        cr_assert(strstr(got, row), "reference row %.*s missing from the sink's stream",
                  (int)(nl - p), p);
        p = nl + 1;
    }
    free(got);
    freeReplyObject(r);
    redisFree(c);
}

/* ---- checkpoints after an instance finished (FLIP-147) --------------------- */

static bool log_has_all(void *arg)
{
    const char *const *needles = arg;
    char *l = log_text();
    bool yes = true;
    for (; *needles && yes; needles++)
        yes = strstr(l, *needles) != NULL;
    free(l);
    return yes;
}

/* The bounded source with more instances than streams: of "s1,s2" over 3
 * instances, source[2] has no stream and finishes at once, source[0] reads
 * the small s1 and finishes soon, source[1] reads s2 for seconds.
 * Checkpoints go on after both finished; a worker killed with -9 then
 * restores from a checkpoint taken after the finishes, in which both are
 * recorded as finished: they start at their end (s1 is not read again, or
 * its words would count twice) and the counts are exact. */
Test(redis, checkpoints_go_on_after_an_instance_finished, .init = setup_persistent,
     .fini = teardown, .timeout = 240)
{
    /* one line in 50 to s1 */
    const char *streams[50];
    streams[0] = "s1";
    for (int i = 1; i < 50; i++)
        streams[i] = "s2";
    size_t lines = fill(streams, 50, 1u << 20);
    char out[800], rate[32];
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    snprintf(rate, sizeof rate, "%zu", lines / 5); /* s2 takes about 15 s at a third of it */
    eddy_proc_t *proc = start_job(uri("s1,s2", "bounded=latest"), out, "3", rate);
    const char *finished[] = {"task source[0] finished", "task source[2] finished", NULL};
    char *l = NULL;
    if (!eddy_poll_until(log_has_all, finished, 60000)) {
        l = log_text();
        cr_assert_fail("source[0] and source[2] did not both finish; log:\n%s", l);
    }
    /* a checkpoint triggered after both finishes completes */
    int64_t after = completed_checkpoints() + 2;
    if (!eddy_poll_until(checkpoint_done, &after, 20000)) {
        l = log_text();
        cr_assert_fail("no checkpoint completed after an instance finished (%lld, want %lld); "
                       "log:\n%s", (long long)completed_checkpoints(), (long long)after, l);
    }
    cr_assert(eddy_proc_alive(proc), "the job ended before the kill: lower --rate");
    /* the newest checkpoint records both as finished (eddy status) */
    json_t *st = eddy_test_status(ports[0]);
    json_t *job = st ? eddy_test_status_job(st, "wordcount") : NULL;
    json_int_t fin = json_integer_value(
        json_object_get(json_object_get(job, "last_checkpoint"), "finished_tasks"));
    json_int_t done = json_integer_value(json_object_get(job, "tasks_done"));
    json_decref(st);
    cr_assert_eq(fin, 2, "last_checkpoint.finished_tasks %lld", (long long)fin);
    cr_assert_eq(done, 2, "tasks_done %lld", (long long)done);
    pid_t victim = busy_worker();
    cr_assert_gt(victim, 0, "no worker with tasks in eddy status");
    cr_assert_eq(kill(victim, SIGKILL), 0);
    finish_job(proc);
    assert_output(out);
    l = log_text();
    cr_assert(strstr(l, "(2 tasks finished at it start at their end)"),
              "the restore was not from a checkpoint with both instances finished; log:\n%s", l);
    cr_assert(strstr(l, "task source[0] was finished at checkpoint") &&
                  strstr(l, "task source[2] was finished at checkpoint"),
              "the finished instances did not start at their end; log:\n%s", l);
    cr_assert(!strstr(l, "task source[1] was finished"), "source[1] had not finished; log:\n%s", l);
    free(l);
}
