/* test_hot_key.c - a hot key end to end (issue 15): one word carries 30% of
 * the records, so the count instance that owns its key group must take 30%
 * of the load alone, and past ceil(1 / 0.3) = 4 instances more do not help.
 * The workers count records per key group where they partition them, the
 * coordinator names count's busiest group and its share (GET /metrics,
 * "metrics JOB") and the controller's decision names the hot key group
 * instead of asking for the parallelism DS2 alone would want.
 *
 * Load. count sleeps COST_US = 2 ms per word (--cost-sleep: the capacity
 * does not depend on the machine's cores), so one instance counts about
 * 480 words/s. The source offers RATE lines/s x WORDS = 2400 words/s: DS2
 * alone wants 2400 / (480 x 0.8) -> 7 instances, the hot key caps it at 4
 * (3 if the share measures above 1/3). Without local aggregation every word
 * is shuffled, so count sees the hot key as it is. The warm-up (5 s) lets
 * the senders report a few load windows (1 s and 1000 records each) before
 * the first decision. The job ends on its own (LINES lines, about 25 s) and
 * its output must be exact. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "connectors/sources.h"
#include "state/keygroup.h"
#include "tests/support/cluster.h"
#include "tests/support/ctl_proc.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"

#define HOT_SHARE 0.3
#define HOT_SHARE_S "0.3"
#define WORDS 4
#define LINES 4000
#define RATE "600"
#define COST_US "2000"
#define MAX_USEFUL_P 4 /* ceil(1 / HOT_SHARE) */

static void write_input(const char *path)
{
    eddy_generator_config_t cfg = {.lines = LINES, .words_per_line = WORDS, .vocabulary = 10000,
                                   .seed = 42, .hot_key_share = HOT_SHARE};
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    char buf[8192];
    uint64_t words = 0, hot = 0;
    for (uint64_t n = 0; n < LINES; n++) {
        uint32_t len = eddy_generator_line(&cfg, n, buf, sizeof buf - 1);
        buf[len] = '\0';
        fprintf(f, "%s\n", buf);
        for (char *w = strtok(buf, " "); w; w = strtok(NULL, " ")) {
            words++;
            hot += !strcmp(w, EDDY_GENERATOR_HOT_WORD);
        }
    }
    fclose(f);
    /* the generator's own share, before blaming anything else */
    cr_assert(hot > words * 0.27 && hot < words * 0.33, "%llu of %llu words are hot",
              (unsigned long long)hot, (unsigned long long)words);
}

/* The value of the series `series` (its full name with labels) in
 * Prometheus text, or -1. */
static double series_value(const char *text, const char *series)
{
    const char *p = text ? strstr(text, series) : NULL;
    return p ? strtod(p + strlen(series), NULL) : -1;
}

/* What the test saw while the job ran. */
typedef struct hot_poll {
    eddy_test_cluster_t *cl;
    double share_seen, group_seen;
    json_t *decisions;
} hot_poll_t;

static void poll_hot(void *arg)
{
    hot_poll_t *h = arg;
    long http = 0;
    char *metrics = eddy_test_http_get(eddy_test_cluster_http_port(h->cl, 0), "/metrics", 2000, &http);
    double share = series_value(metrics, "eddy_hot_key_group_share{job=\"wordcount\",operator=\"count\"} ");
    if (share >= 0) {
        h->share_seen = share;
        h->group_seen = series_value(metrics, "eddy_hot_key_group{job=\"wordcount\",operator=\"count\"} ");
    }
    free(metrics);
    ctl_keep_decisions(eddy_test_cluster_url(h->cl, 0), &h->decisions);
}

Test(hot_key, decision_names_the_hot_key_group_instead_of_scaling_past_it, .timeout = 150)
{
    eddy_err_t err = {{0}};
    /* eddy's own checkpoint and heartbeat timing */
    eddy_test_cluster_opts_t o = {.tag = "hotkey", .workers = 3, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    eddy_test_cluster_t *cl = eddy_test_cluster_new(&o, &err);
    cr_assert_not_null(cl, "%s", err.msg);
    char *input = eddy_test_cluster_path(cl, "input.txt");
    char *output = eddy_test_cluster_path(cl, "counts.tsv");
    char *log = eddy_test_cluster_path(cl, "local.log");
    write_input(input);
    char lines_s[16], words_s[8];
    snprintf(lines_s, sizeof lines_s, "%d", LINES);
    snprintf(words_s, sizeof words_s, "%d", WORDS);
    const char *argv[] = {"--job", "wordcount", "--generate", "--lines", lines_s,
                          "--words-per-line", words_s, "--hot-key-share", HOT_SHARE_S, "--rate",
                          RATE, "--cost-us", COST_US, "--cost-sleep", "--no-local-aggregation",
                          "--parallelism", "1", "--autoscale", "--controller-flags",
                          "--interval-ms 1000 --warmup-ms 5000 --cooldown-ms 3000 --allow-oversubscribe",
                          "--output", output, "--quiet", NULL};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);

    uint32_t hot_group = eddy_key_group_of(EDDY_GENERATOR_HOT_WORD,
                                           (uint32_t)strlen(EDDY_GENERATOR_HOT_WORD),
                                           EDDY_DEFAULT_MAX_PARALLELISM);
    char named[64];
    snprintf(named, sizeof named, "hot key group %u (", hot_group);
    hot_poll_t h = {cl, -1, -1, NULL};
    int status = eddy_test_cluster_wait_local(cl, 120000, 500, poll_hot, &h);
    double share_seen = h.share_seen, group_seen = h.group_seen;
    json_t *decisions = h.decisions;
    cr_assert(status >= 0, "eddy local did not finish within 120 s (log: %s)", log);
    cr_assert_eq(status, 0, "eddy local exited %d (log: %s)", status, log);

    /* the coordinator measured the hot key: its group, about 30% */
    cr_assert(share_seen > 0.2 && share_seen < 0.45,
              "eddy_hot_key_group_share of count: %g, want about %g (log %s)", share_seen, HOT_SHARE, log);
    cr_assert_eq((long)group_seen, (long)hot_group, "eddy_hot_key_group %g, the word 'hot' is in %u",
                 group_seen, hot_group);

    /* a decision names it, and count never went past what helps */
    bool names_it = false;
    long max_p = 1;
    char seen[2048] = "";
    size_t used = 0, i;
    json_t *d;
    json_array_foreach(decisions, i, d)
    {
        if (strcmp(json_string_value(json_object_get(d, "operator")), "count") != 0)
            continue;
        const char *reason = json_string_value(json_object_get(d, "reason"));
        if (reason && strstr(reason, named) && json_is_true(json_object_get(d, "infeasible")))
            names_it = true;
        if (json_is_true(json_object_get(d, "applied"))) {
            long p = (long)json_integer_value(json_object_get(d, "new_parallelism"));
            max_p = p > max_p ? p : max_p;
            if (used < sizeof seen)
                used += (size_t)snprintf(seen + used, sizeof seen - used, "%s -> %ld: %s; ",
                                         json_string_value(json_object_get(d, "action")), p, reason);
        }
    }
    cr_assert(names_it, "no decision for count named '%s...'; applied: %s (log %s)", named, seen, log);
    cr_assert_leq(max_p, MAX_USEFUL_P, "count went to %ld instances past the hot key's %d: %s", max_p,
                  MAX_USEFUL_P, seen);
    json_decref(decisions);

    char *want = ctl_reference_counts(input);
    char *got = ctl_output_as_uniq(output);
    cr_assert_not_null(want);
    cr_assert_not_null(got, "no output at %s (log %s)", output, log);
    cr_assert(strstr(want, " " EDDY_GENERATOR_HOT_WORD "\n"));
    cr_assert(strcmp(want, got) == 0, "final counts differ from the reference (output %s)", output);
    free(want);
    free(got);
    eddy_test_cluster_destroy(&cl);
}
