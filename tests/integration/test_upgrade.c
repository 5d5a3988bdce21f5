/* test_upgrade.c - `eddy upgrade` end to end (docs/savepoints.md,
 * "Upgrading a job"): a coordinator and two workers run a word-counting
 * pipeline (key_by word, aggregate count, uid counts) over a rate-limited
 * input; mid-input it is upgraded to a version that chains a stateless
 * filter after the aggregate (its state restored by operator identity in
 * the chain; the filter starts empty) and the new job's counts are exact
 * at the end. An upgrade whose new pipeline has a typo in the aggregate's
 * uid is refused after the stop-with-savepoint (its state would be claimed
 * by no operator): the command exits 1 naming the cause, the old version
 * runs again from the same savepoint; so does it when a new version whose
 * aggregate keeps other accumulators under the same uid fails its restore
 * (the cause from the new job's last_failure), and the old version, then
 * upgraded to v2, ends with exact counts. A typo
 * the spec check finds (an unknown step) stops the command before anything
 * is touched: exit status 2. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define LINES 3000
#define WORDS 40
#define RATE "300"
#define RATE_V2 "100000"

static eddy_test_cluster_t *cl;
static char *input, *output, *expected;

static const char v1[] = "source: {format: text, columns: [word]}\n"
                         "steps:\n"
                         "  - key_by: word\n"
                         "  - aggregate:\n"
                         "      n: count()\n"
                         "    uid: counts\n";

/* v1 with a stateless step chained after the aggregate */
static const char v2[] = "source: {format: text, columns: [word]}\n"
                         "steps:\n"
                         "  - key_by: word\n"
                         "  - aggregate:\n"
                         "      n: count()\n"
                         "    uid: counts\n"
                         "  - filter: n > 0\n";

/* One word a line, and the counts (word TAB count, byte order) expected. */
static void write_input(void)
{
    unsigned counts[WORDS] = {0};
    size_t cap = LINES * 8, n = 0;
    char *text = malloc(cap);
    uint64_t seed = 27;
    for (int i = 0; i < LINES; i++) {
        unsigned w = (unsigned)(eddy_test_rand(&seed) % WORDS);
        counts[w]++;
        n += (size_t)snprintf(text + n, cap - n, "w%02u\n", w);
    }
    cr_assert_eq(eddy_write_file(input, text, n), 0);
    free(text);
    expected = malloc(WORDS * 16 + 1);
    n = 0;
    for (unsigned w = 0; w < WORDS; w++) /* w00 .. w39 sort as numbers */
        if (counts[w])
            n += (size_t)sprintf(expected + n, "w%02u\t%u\n", w, counts[w]);
}

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "upgrade", .coordinators = 1, .workers = 2,
                                  .checkpoint_interval = "200"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "in.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    write_input();
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    free(expected);
    expected = NULL;
}

TestSuite(upgrade, .init = setup, .fini = teardown, .timeout = 120);

static char *spec(const char *name, const char *text)
{
    char *p = eddy_test_cluster_path(cl, name);
    cr_assert_eq(eddy_write_file(p, text, strlen(text)), 0);
    return p;
}

/* Submits v1 and waits until it has completed a checkpoint (the input
 * lasts 10 s at RATE: time for the upgrades below under ASan on a busy
 * machine; v2 reads the rest at RATE_V2). */
static void start_v1(void)
{
    eddy_err_t err = {{0}};
    const char *job[] = {"--pipeline", spec("v1.yaml", v1), "--input", input, "--output", output,
                         "--rate", RATE, NULL};
    char *out = NULL;
    cr_assert_eq(eddy_test_cluster_submit(cl, job, &out, &err), 0, "%s", err.msg);
    cr_assert(!strncmp(out, "pipeline", 8), "%s", out);
    free(out);
    eddy_test_job_view_t last;
    cr_assert(eddy_test_cluster_wait_job(cl, "pipeline", &(eddy_test_job_want_t){.state = "running", .min_completed = 1},
                                         30000, &last, NULL),
              "v1 never ran: %s", last.state);
}

/* eddy upgrade JOB --pipeline NEW_SPEC: its exit status, stdout and stderr. */
static int upgrade_with(const char *job, const char *new_spec, const char *rate, char **out,
                        char **errout)
{
    const char *args[16] = {"upgrade", job, "--pipeline", new_spec, "--dir",
                            eddy_test_cluster_path(cl, "savepoints"), "--timeout-ms", "60000"};
    if (rate) { /* job flags given: exactly these */
        const char *flags[] = {"--input", input, "--output", output, "--rate", rate};
        memcpy(args + 8, flags, sizeof flags);
    }
    return eddy_test_cluster_ctl(cl, args, 90000, out, errout);
}

static int upgrade(const char *job, const char *new_spec, char **out, char **errout)
{
    return upgrade_with(job, new_spec, NULL, out, errout);
}

/* The last line of text (trailing newlines dropped, in place). */
static char *last_line(char *text)
{
    size_t n = strlen(text);
    while (n && text[n - 1] == '\n')
        text[--n] = '\0';
    char *nl = strrchr(text, '\n');
    return nl ? nl + 1 : text;
}

static void expect_finished_exact(const char *id)
{
    eddy_test_job_view_t last;
    bool ok = eddy_test_cluster_wait_job(cl, id, &(eddy_test_job_want_t){.state = "finished"},
                                         60000, &last, NULL);
    char *log = ok ? NULL : eddy_test_cluster_log_text(cl);
    cr_assert(ok, "%s did not finish (%s); logs:\n%s", id, last.state, log);
    cr_assert_eq(last.restarts, 0, "%s restarted", id);
    char *got = eddy_read_file(output, NULL);
    cr_assert(got, "no output");
    cr_assert_str_eq(got, expected, "the counts after the upgrade differ");
    free(got);
}

/* One run of the input (a cluster and a job cost seconds under ASan): the
 * typos first, then the real upgrade of the rolled-back job. */
Test(upgrade, typos_roll_back_and_v1_to_v2_keeps_exact_counts)
{
    /* caught by the spec check (with the job flags given, before the
     * cluster is asked anything): exit status 2, nothing touched */
    char *out = NULL, *errout = NULL;
    const char *typo_args[] = {"upgrade", "pipeline", "--pipeline",
                               spec("typo.yaml", "source: {format: text, columns: [word]}\n"
                                                 "steps:\n"
                                                 "  - key_by: word\n"
                                                 "  - agregate:\n"
                                                 "      n: count()\n"),
                               "--input", input, "--output", output, NULL};
    int rc = eddy_test_cluster_ctl(cl, typo_args, 30000, &out, &errout);
    cr_assert_eq(rc, 2, "rc %d: %s", rc, errout);
    cr_assert(strstr(errout, "agregate") && strstr(errout, "not touched"), "%s", errout);
    free(out);
    free(errout);

    start_v1();
    /* a typo in the uid: the savepoint's state fits no operator, the old
     * version runs again from it */
    out = errout = NULL;
    char *typo = spec("uid.yaml", "source: {format: text, columns: [word]}\n"
                                  "steps:\n"
                                  "  - key_by: word\n"
                                  "  - aggregate:\n"
                                  "      n: count()\n"
                                  "    uid: cuonts\n");
    rc = upgrade("pipeline", typo, &out, &errout);
    cr_assert_eq(rc, 1, "rc %d: %s", rc, errout);
    cr_assert(strstr(errout, "the state of operator counts is claimed by no operator"), "%s", errout);
    cr_assert(strstr(errout, "rolled back: pipeline runs again as pipeline-2"), "%s", errout);
    cr_assert_eq(strchr(errout, '\n'), errout + strlen(errout) - 1, "not one line: %s", errout);
    free(out);
    free(errout);

    /* a new version whose aggregate under the same uid keeps other
     * accumulators: it is submitted but its restore fails; it is cancelled
     * and the old version runs again, the cause from its last_failure */
    out = errout = NULL;
    rc = upgrade("pipeline-2", spec("bad.yaml", "source: {format: text, columns: [word]}\n"
                                                "steps:\n"
                                                "  - key_by: word\n"
                                                "  - aggregate:\n"
                                                "      n: count()\n"
                                                "      q: quantile(word, 0.5)\n"
                                                "    uid: counts\n"),
                 &out, &errout);
    cr_assert_eq(rc, 1, "rc %d: %s", rc, errout);
    cr_assert(strstr(errout, "the new version (pipeline-3) failed to start: deploy failed: "), "%s", errout);
    cr_assert(strstr(errout, "holds accumulators of"), "%s", errout);
    cr_assert(strstr(errout, "rolled back: pipeline-2 runs again as pipeline-4"), "%s", errout);
    json_t *st = eddy_test_cluster_status(cl);
    json_t *bad = eddy_test_status_job(st, "pipeline-3");
    cr_assert_str_eq(json_string_value(json_object_get(bad, "state")), "cancelled");
    cr_assert(strstr(json_string_value(json_object_get(bad, "last_failure")), "holds accumulators of"));
    json_decref(st);
    free(out);
    free(errout);

    /* v2 chains a stateless filter after the aggregate: the aggregate's
     * state is found by its kind in the chain, the filter starts empty.
     * Its job flags are given: the same but the rate, so that the rest of
     * the input goes at once */
    out = errout = NULL;
    rc = upgrade_with("pipeline-4", spec("v2.yaml", v2), RATE_V2, &out, &errout);
    cr_assert_eq(rc, 0, "eddy upgrade exited %d: %s", rc, errout);
    cr_assert(!strncmp(out, "savepoint ", 10), "%s", out);
    char *id = last_line(out);
    cr_assert_str_eq(id, "pipeline-5");
    st = eddy_test_cluster_status(cl);
    json_t *old = eddy_test_status_job(st, "pipeline-4");
    cr_assert_str_eq(json_string_value(json_object_get(old, "state")), "stopped");
    json_decref(st);
    expect_finished_exact(id);
    free(out);
    free(errout);
}
