/* test_guarantees.c - `--guarantee` under a SIGKILLed worker.
 *
 * A rate-limited wordcount (3 workers, parallelism 3, checkpoints every
 * 300 ms) loses one worker to kill -9 after its first completed checkpoint
 * and some more progress; the job is restored and finishes. Its --output
 * is compared word by word with a reference computed here:
 * - exactly-once: byte for byte equal;
 * - at-least-once: no count below the reference (no word missing); counts
 *   above it are allowed (replayed records after unaligned barriers);
 * - at-most-once: no count above the reference and no word the input does
 *   not have; counts below it (or missing words) are allowed (skipped
 *   input).
 * The job runs without local aggregation: with it, partial counts leave a
 * source instance only at barriers, so nothing crosses a barrier early and
 * at-least-once would never show a duplicate in wordcount.
 * A weaker mode is not required to differ (a kill can land where nothing
 * is replayed or skipped): the test checks the direction only, and logs
 * how many words differ. Every wait polls an observable condition
 * (`eddy status --json`) with a deadline. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define TEXT_BYTES (2u * 1024 * 1024)
#define RUN_SECONDS 7
#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "3000"
#else
#define HB_TIMEOUT "1000"
#endif

static eddy_test_cluster_t *cl;
static char *input, *output;
static char *text;
static size_t text_len;
static char rate[32];
static int ports[2];
static eddy_proc_t *local;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "guar", .workers = 3, .checkpoint_interval = "300",
                                  .heartbeat_timeout_ms = HB_TIMEOUT};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    cr_assert(eddy_gen_text(input, TEXT_BYTES, 777, &err) == 0, "%s", err.msg);
    text = eddy_read_file(input, &text_len);
    cr_assert(text);
    size_t lines = 1;
    for (size_t i = 0; i < text_len; i++)
        lines += text[i] == '\n';
    snprintf(rate, sizeof rate, "%zu", lines / RUN_SECONDS);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    local = eddy_test_cluster_local(cl);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    free(text);
}

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void start_local(const char *guarantee)
{
    eddy_err_t err = {{0}};
    const char *job[] = {"--quiet", "--guarantee", guarantee, "--job", "wordcount", "--input",
                         input, "--output", output, "--parallelism", "3", "--rate", rate,
                         "--no-local-aggregation", NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
}

/* Polls until the job runs with this much progress; fails with the log. */
static eddy_test_job_view_t wait_view(int64_t min_completed, int64_t min_restarts,
                                      int64_t min_source_in, const char *what)
{
    eddy_test_job_want_t want = {.state = "running", .min_completed = min_completed,
                                 .min_restarts = min_restarts, .min_source_in = min_source_in};
    eddy_test_job_view_t v;
    if (!eddy_test_cluster_wait_job(cl, "wordcount", &want, 60000, &v, NULL)) {
        char *l = log_text();
        cr_assert_fail("timed out waiting for %s (state %s, restarts %lld); log:\n%s", what,
                       v.state, (long long)v.restarts, l);
    }
    return v;
}

/* The pid of an alive worker that runs tasks. */
static pid_t victim(void)
{
    pid_t pid = eddy_test_busy_worker(ports[0], 0);
    cr_assert_gt(pid, 0, "no alive worker with tasks in status");
    return pid;
}

/* Runs the job under `guarantee`, kills a worker mid-run, waits for the
 * job to finish and returns its output. */
static char *run_with_kill(const char *guarantee)
{
    start_local(guarantee);
    eddy_test_job_view_t v = wait_view(1, 0, 0, "a completed checkpoint");
    cr_assert_str_eq(v.guarantee, guarantee, "status --json shows the job's guarantee");
    /* Some progress past it, so the kill lands between checkpoints with
     * records read since the last one (the interesting case). */
    wait_view(v.ck_completed, 0, v.source_in + 2000, "progress after the checkpoint");
    pid_t pid = victim();
    cr_assert(kill(pid, SIGKILL) == 0, "kill -9 %d failed", (int)pid);
    wait_view(0, 1, 0, "the job restored and running");
    int rc = eddy_proc_wait(local, 120000);
    if (rc != 0) {
        char *l = log_text();
        cr_assert_fail("eddy local --guarantee %s exited %d; log:\n%s", guarantee, rc, l);
    }
    char *got = eddy_read_file(output, NULL);
    if (!got) {
        char *l = log_text();
        cr_assert_fail("no output file; log:\n%s", l);
    }
    return got;
}

typedef struct diff {
    size_t above, below, exact, missing;
    int64_t total; /* sum of (output - reference) */
} diff_t;

static int word_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* Word by word, output against the reference (both in byte order). A word
 * the reference does not have fails the test in every mode. */
static diff_t compare(const char *got)
{
    size_t n = 0;
    eddy_wc_entry_t *ref = eddy_reference_counts(text, text_len, &n);
    cr_assert(ref);
    diff_t d = {0};
    size_t r = 0;
    for (const char *p = got; *p;) {
        const char *tab = strchr(p, '\t');
        const char *nl = tab ? strchr(tab, '\n') : NULL;
        cr_assert(tab && nl, "malformed output line at byte %zu", (size_t)(p - got));
        size_t wl = (size_t)(tab - p);
        int64_t count = strtoll(tab + 1, NULL, 10);
        while (r < n && word_cmp(ref[r].word, ref[r].len, p, wl) < 0) {
            d.missing++;
            d.below++;
            d.total -= (int64_t)ref[r].count;
            r++;
        }
        cr_assert(r < n && word_cmp(ref[r].word, ref[r].len, p, wl) == 0,
                  "output has '%.*s', which the input does not", (int)wl, p);
        int64_t want = (int64_t)ref[r].count;
        d.above += count > want;
        d.below += count < want;
        d.exact += count == want;
        d.total += count - want;
        r++;
        p = nl + 1;
    }
    for (; r < n; r++) {
        d.missing++;
        d.below++;
        d.total -= (int64_t)ref[r].count;
    }
    free(ref);
    return d;
}

Test(guarantees, exactly_once_equals_the_reference, .init = setup, .fini = teardown,
     .timeout = 180)
{
    char *got = run_with_kill("exactly-once");
    size_t ref_len = 0;
    char *ref = eddy_reference_wordcount(text, text_len, &ref_len);
    diff_t d = compare(got);
    cr_log_info("exactly-once: %zu exact, %zu above, %zu below", d.exact, d.above, d.below);
    cr_assert(strlen(got) == ref_len && !memcmp(got, ref, ref_len),
              "exactly-once output differs from the reference: %zu words above, %zu below",
              d.above, d.below);
    free(ref);
    free(got);
}

Test(guarantees, at_least_once_only_duplicates, .init = setup, .fini = teardown, .timeout = 180)
{
    char *got = run_with_kill("at-least-once");
    diff_t d = compare(got);
    cr_log_info("at-least-once: %zu exact, %zu above (+%lld in all), %zu below", d.exact, d.above,
                (long long)d.total, d.below);
    if (d.below) {
        char *l = log_text();
        cr_assert_fail("at-least-once lost records: %zu words below the reference (%zu missing); log:\n%s",
                       d.below, d.missing, l);
    }
    cr_assert_geq(d.total, 0);
    free(got);
}

Test(guarantees, at_most_once_only_losses, .init = setup, .fini = teardown, .timeout = 180)
{
    char *got = run_with_kill("at-most-once");
    diff_t d = compare(got);
    cr_log_info("at-most-once: %zu exact, %zu below (%lld in all, %zu missing), %zu above", d.exact,
                d.below, (long long)d.total, d.missing, d.above);
    if (d.above) {
        char *l = log_text();
        cr_assert_fail("at-most-once duplicated records: %zu words above the reference; log:\n%s",
                       d.above, l);
    }
    cr_assert_leq(d.total, 0);
    free(got);
}

/* A bad value is a one-line usage error, exit 2, nothing started. */
Test(guarantees, an_unknown_guarantee_is_a_usage_error, .init = setup, .fini = teardown)
{
    char *argv[] = {EDDY_BINARY, "local", "--guarantee", "twice", "--job", "wordcount",
                    "--input", input, NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &err);
    cr_assert_eq(rc, 2, "exit %d: %s%s", rc, out, err);
    cr_assert(strstr(err, "--guarantee"), "%s", err);
    free(out);
    free(err);
    char *sub[] = {EDDY_BINARY, "submit", "--guarantee", "once", "--job", "wordcount", "--input",
                   input, NULL};
    rc = eddy_proc_run(sub, 20000, &out, &err);
    cr_assert_eq(rc, 2, "exit %d: %s%s", rc, out, err);
    cr_assert(strstr(err, "--guarantee"), "%s", err);
    free(out);
    free(err);
}

/* eddy submit --guarantee reaches the coordinator: the job (waiting for
 * workers here) shows it in status --json. */
Test(guarantees, submit_passes_the_guarantee, .init = setup, .fini = teardown, .timeout = 60)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_coordinator(cl, 0, &err) == 0, "%s", err.msg);
    const char *job[] = {"--guarantee", "at-most-once", "--job", "wordcount", "--input", input,
                         "--output", output, NULL};
    cr_assert(eddy_test_cluster_submit(cl, job, NULL, &err) == 0, "%s", err.msg);
    eddy_test_job_view_t v = eddy_test_job_view(ports[0], "wordcount");
    cr_assert(v.ok, "no wordcount job in status");
    cr_assert_str_eq(v.guarantee, "at-most-once");
}
