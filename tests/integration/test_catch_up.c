/* test_catch_up.c - backlog catch-up on a real redis-server (issue 29
 * item 2): the controller sizes the costly operator for draining the
 * source's lag within --catch-up-s, then scales it back in once drained,
 * and every entry is counted exactly once.
 *
 * The stream holds BACKLOG lines before the job starts (a job that was
 * down); while the test runs, TRICKLE lines/s more arrive (XADDed here).
 * count costs COST_US per word, sleeping (--cost-sleep: its capacity does
 * not depend on this machine's cores), so one instance counts at most
 * ~1000 words/s, a little less with sleep overshoot: the backlog of
 * BACKLOG x WORDS words would take ~10 s at parallelism 1. With
 * --catch-up-s 3, the first evaluation (~2.5 s in) sees ~1500 lines behind:
 * the source must read ~500 lines/s = ~2000 words/s, which DS2 at
 * utilisation 0.8 turns into 3 or more instances (capped at 4). Drained,
 * the target is the trickle's ~100 words/s: one instance, after the
 * cooldown and two agreeing intervals.
 *
 * Checked: count scaled out while the source had a lag, by an applied
 * decision whose reason names the backlog and whose rates carry it; the
 * lag went to ~0 (`source_lag` in status, " lag N" in `eddy status`);
 * count scaled back in to 1 after that; the changelog's
 * final counts equal the reference counts of every line XADDed
 * (tests/support/changelog.h). Conditions are polled with deadlines;
 * nothing about durations is asserted. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tests/support/changelog.h"
#include "tests/support/cluster.h"
#include "tests/support/ctl_proc.h"
#include "tests/support/proc.h"
#include "tests/support/redis.h"

#define BACKLOG 2500  /* lines in the stream before the job starts */
#define WORDS 4       /* words per line */
#define VOCABULARY 60
#define TRICKLE 25    /* lines/s added while the test runs */
#define COST_US "1000"
#define MAX_TEXT (1u << 20)

typedef struct run {
    eddy_test_cluster_t *cl;
    eddy_test_redis_t *redis;
    redisContext *client;
    char *coordinator, *changelog, *log;
    char *text; /* every line XADDed, '\n'-separated: the reference */
    size_t len;
    uint64_t lines, started_ms;
    bool trickle;
    json_t *decisions;
    /* what was seen */
    int64_t max_p;          /* count's largest parallelism */
    int64_t max_p_lag;      /* the source's lag when count first ran above 1 */
    bool drained;           /* the lag was ~0 after the scale-out */
    bool back_in;           /* count at 1 again after the drain */
    int64_t last_lag;
    uint64_t t_out, t_drained, t_in; /* ms after the start, for the log only */
    char *status_text;      /* `eddy status` once it shows the lag */
} run_t;

static const char *str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

/* Line k: WORDS words of a small vocabulary, deterministic. */
static void add_lines(run_t *r, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++, r->lines++) {
        char line[128];
        size_t len = 0;
        uint64_t x = r->lines * 0x9e3779b97f4a7c15ull + 7;
        for (int w = 0; w < WORDS; w++) {
            x ^= x >> 29;
            x *= 0xbf58476d1ce4e5b9ull;
            len += (size_t)snprintf(line + len, sizeof line - len, "%sw%u", w ? " " : "",
                                    (unsigned)(x % VOCABULARY));
        }
        const char *argv[] = {"XADD", "in", "*", "line", line};
        size_t lens[] = {4, 2, 1, 4, len};
        cr_assert_eq(redisAppendCommandArgv(r->client, 5, argv, lens), REDIS_OK);
        cr_assert(r->len + len + 1 < MAX_TEXT);
        memcpy(r->text + r->len, line, len);
        r->len += len;
        r->text[r->len++] = '\n';
    }
    for (uint64_t i = 0; i < n; i++) {
        redisReply *reply = NULL;
        cr_assert_eq(redisGetReply(r->client, (void **)&reply), REDIS_OK, "%s", r->client->errstr);
        cr_assert_eq(reply->type, REDIS_REPLY_STRING, "XADD failed");
        freeReplyObject(reply);
    }
}

/* The trickle: as many lines as TRICKLE/s since the job started. */
static void trickle(run_t *r)
{
    if (!r->trickle)
        return;
    uint64_t due = BACKLOG + (eddy_mono_ms() - r->started_ms) * TRICKLE / 1000;
    if (due > r->lines)
        add_lines(r, due - r->lines);
}

/* One poll: feed the trickle, read count's parallelism and the source's
 * lag from status, keep the decision log. */
static bool observe(void *arg)
{
    run_t *r = arg;
    trickle(r);
    json_t *st = eddy_test_cluster_status(r->cl);
    json_t *count = st ? eddy_test_status_operator(st, "wordcount", "count") : NULL;
    json_t *job = NULL;
    if (st) {
        size_t i;
        json_t *j;
        json_array_foreach(json_object_get(st, "jobs"), i, j)
            if (!strcmp(str(j, "job"), "wordcount"))
                job = j;
    }
    json_t *lag = NULL;
    if (job) {
        size_t i;
        json_t *op;
        json_array_foreach(json_object_get(job, "operators"), i, op)
            if (json_is_true(json_object_get(op, "source")))
                lag = json_object_get(op, "source_lag");
    }
    if (json_is_integer(lag))
        r->last_lag = json_integer_value(lag);
    /* the text view of a lag the JSON shows; right after a rescale the
     * new instances have not reported theirs yet, so ask again until the
     * text has one */
    if (json_is_integer(lag) && (!r->status_text || !strstr(r->status_text, " lag "))) {
        const char *args[] = {"status", NULL};
        free(r->status_text);
        r->status_text = NULL;
        eddy_test_cluster_ctl(r->cl, args, 10000, &r->status_text, NULL);
    }
    if (count) {
        json_int_t p = json_integer_value(json_object_get(count, "parallelism"));
        uint64_t t = eddy_mono_ms() - r->started_ms;
        if (p > 1 && r->max_p <= 1) {
            r->max_p_lag = r->last_lag;
            r->t_out = t;
        }
        if (p > r->max_p)
            r->max_p = p;
        if (r->max_p > 1 && !r->drained && json_is_integer(lag) && r->last_lag <= 2 * TRICKLE) {
            r->drained = true;
            r->t_drained = t;
        }
        if (r->drained && p == 1 && !r->back_in) {
            r->back_in = true;
            r->t_in = t;
        }
    }
    json_decref(st);
    if (r->max_p > 1)
        ctl_keep_decisions(r->coordinator, &r->decisions);
    return r->back_in || !eddy_proc_alive(eddy_test_cluster_local(r->cl));
}

static bool changelog_exact(void *arg)
{
    run_t *r = arg;
    char why[256];
    return eddy_changelog_matches(r->changelog, r->text, r->len, why, sizeof why) ||
           !eddy_proc_alive(eddy_test_cluster_local(r->cl));
}

/* The first applied scale-up of count, or NULL. */
static json_t *first_scale_up(json_t *decisions)
{
    size_t i;
    json_t *d;
    json_array_foreach(decisions, i, d)
    {
        if (!strcmp(str(d, "operator"), "count") && json_is_true(json_object_get(d, "applied")) &&
            !strcmp(str(d, "action"), "scale_up"))
            return d;
    }
    return NULL;
}

Test(catch_up, scales_out_to_drain_the_backlog_then_back_in_counting_each_entry_once,
     .timeout = 120)
{
    run_t r = {.max_p = 0, .last_lag = -1};
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "catchup", .workers = 2, .checkpoint_interval = "500"};
    r.cl = eddy_test_cluster_new(&o, &err);
    cr_assert(r.cl, "%s", err.msg);
    r.redis = eddy_test_redis_start(false, &err);
    cr_assert(r.redis, "%s", err.msg);
    r.client = eddy_test_redis_client(r.redis, &err);
    cr_assert(r.client, "%s", err.msg);
    r.text = malloc(MAX_TEXT);
    cr_assert(r.text);
    r.coordinator = eddy_test_cluster_url(r.cl, 0);
    r.changelog = eddy_test_cluster_path(r.cl, "changelog.txt");
    r.log = eddy_test_cluster_path(r.cl, "local.log");
    r.decisions = json_array();
    add_lines(&r, BACKLOG); /* the backlog of a job that was down */

    char uri[128];
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/in", eddy_test_redis_port(r.redis));
    /* --migration sudden: a fluid migration's handoff markers queue behind
     * the backlog in front of count (8.8 s in 12 steps here, against a
     * 0.25 s pause), which would only make the test longer. */
    const char *argv[] = {"--quiet", "--migration", "sudden", "--job", "wordcount", "--input",
                          uri, "--parallelism", "1",
                          "--cost-us", COST_US, "--cost-sleep", "--autoscale",
                          "--controller-flags",
                          "--interval-ms 1000 --warmup-ms 1500 --cooldown-ms 2000 "
                          "--scale-down-confirmations 2 --catch-up-s 3 --max-parallelism 4 "
                          "--allow-oversubscribe" /* sleeping instances need no cores */,
                          NULL};
    r.started_ms = eddy_mono_ms();
    r.trickle = true;
    cr_assert(eddy_test_cluster_start_local_to(r.cl, argv, r.changelog, &err) == 0, "%s", err.msg);

    bool done = eddy_poll_until(observe, &r, 60000);
    char *seen = json_dumps(r.decisions, JSON_COMPACT);
    cr_assert(done && r.back_in,
              "count did not scale out and back in (largest parallelism %lld, drained %d, last "
              "lag %lld); decisions: %s (log %s)",
              (long long)r.max_p, r.drained, (long long)r.last_lag, seen, r.log);
    cr_assert_gt(r.max_p, 1);
    cr_assert_gt(r.max_p_lag, 2 * TRICKLE, "count scaled out without a backlog (lag %lld)",
                 (long long)r.max_p_lag);
    cr_assert(r.status_text && strstr(r.status_text, " lag "),
              "eddy status shows no source lag:\n%s", r.status_text ? r.status_text : "(none)");
    json_t *up = first_scale_up(r.decisions);
    cr_assert(up, "no applied scale-up of count; decisions: %s", seen);
    const char *reason = json_string_value(json_object_get(up, "reason"));
    cr_assert(reason && strstr(reason, "backlog: ") && strstr(reason, "(--catch-up-s)"),
              "the scale-up does not name the backlog: %s", reason ? reason : "(none)");
    cr_assert_gt(json_number_value(json_object_get(json_object_get(up, "rates"), "backlog")), 0,
                 "the scale-up's rates carry no backlog: %s", seen);
    cr_log_info("catch-up: count 1 -> %lld at %.1f s with %lld entries behind (%s); drained at "
                "%.1f s, back to 1 at %.1f s",
                (long long)r.max_p, r.t_out / 1e3, (long long)r.max_p_lag, reason,
                r.t_drained / 1e3, r.t_in / 1e3);

    /* Exactly once: stop adding, then the final counts equal the reference. */
    r.trickle = false;
    uint64_t t0 = eddy_mono_ms();
    eddy_poll_until(changelog_exact, &r, 30000);
    cr_log_info("catch-up: counts exact %.1f s after the trickle stopped",
                (eddy_mono_ms() - t0) / 1e3);
    char why[256];
    cr_assert(eddy_changelog_matches(r.changelog, r.text, r.len, why, sizeof why),
              "the changelog's counts are not the reference after 30 s (%s); eddy local %s; "
              "log %s",
              why, eddy_proc_alive(eddy_test_cluster_local(r.cl)) ? "running" : "ended", r.log);
    /* A worker that crashed (a sanitizer report under EDDY_SANITIZE) would
     * be restarted and the counts could still come out right. */
    char *l = eddy_test_cluster_log_text(r.cl);
    cr_assert(l && !strstr(l, "runtime error") && !strstr(l, "Sanitizer") &&
                  !strstr(l, "exited with status"),
              "a process failed; log:\n%s", l ? l : "(none)");
    free(l);
    free(seen);
    free(r.status_text);
    json_decref(r.decisions);
    redisFree(r.client);
    eddy_test_redis_destroy(&r.redis);
    eddy_test_cluster_destroy(&r.cl);
    free(r.text);
}
