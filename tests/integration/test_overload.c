/* test_overload.c - an overloaded operator keeps its worker alive and lets a
 * rescale through quickly, through the real binary and control protocol.
 *
 * wordcount's count sleeps 1 ms per word (--cost-sleep: its capacity does
 * not depend on how busy the machine's cores are), so one instance counts
 * at most ~1000 words/s, while the source offers RATE lines/s of 1-6 words
 * (~3.5 on average, ~3100 words/s). Before worker task steps were time
 * slices, one step consumed a whole 32 KB batch (seconds of work), the
 * worker missed its heartbeats, was declared dead, and the rescale failed;
 * and a rescale's barrier waited behind 16 full batches per channel.
 *
 * While count is backlogged, `eddy rescale wordcount count 3` must succeed,
 * its pause (from the rescale reply and status rescales[].pause_ms) must be
 * under 1 s (3 s under sanitizers), no worker may be declared dead during the
 * whole run, and the final counts must equal the reference. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"

/* ~16 s of input at RATE; count catches up at ~3000 words/s after the
 * rescale, so the run takes ~20 s. */
#define LINES 14000
#define RATE "900"
/* records count must have consumed before we rescale: it is then behind */
#define BACKLOG_RECORDS 2000

#if defined(__SANITIZE_ADDRESS__)
#define MAX_PAUSE_MS 3000.0
#else
#define MAX_PAUSE_MS 1000.0
#endif

static eddy_test_cluster_t *cl;
static eddy_proc_t *job;
static char *input, *output;

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void setup(void)
{
    eddy_err_t err = {{0}};
    /* eddy's default liveness settings (heartbeat 500 ms, timeout 3 s). */
    eddy_test_cluster_opts_t o = {.tag = "overload", .workers = 3, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    cr_assert(eddy_gen_lines(input, LINES, 11, &err) == 0, "%s", err.msg);
    const char *argv[] = {"--quiet", "--job", "wordcount", "--input", input, "--output", output,
                          "--parallelism", "1", "--rate", RATE, "--cost-us", "1000",
                          "--cost-sleep", NULL};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    job = eddy_test_cluster_local(cl);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

static bool count_backlogged(void *arg)
{
    (void)arg;
    json_t *st = eddy_test_cluster_status(cl);
    json_t *op = eddy_test_status_operator(st, "wordcount", "count");
    bool ok = op && json_integer_value(json_object_get(op, "records_in")) >= BACKLOG_RECORDS;
    json_decref(st);
    return ok || !eddy_proc_alive(job);
}

static double status_pause_ms(void)
{
    json_t *st = eddy_test_cluster_status(cl);
    cr_assert(st, "eddy status --json failed");
    json_t *r = json_array_get(json_object_get(eddy_test_status_job(st, "wordcount"), "rescales"), 0);
    cr_assert(r, "status lists no rescale");
    double ms = json_real_value(json_object_get(r, "pause_ms"));
    json_decref(st);
    return ms;
}

Test(overload, busy_worker_stays_alive_and_rescales_quickly, .init = setup, .fini = teardown,
     .timeout = 240)
{
    static const eddy_test_job_want_t running = {.state = "running"};
    cr_assert(eddy_test_cluster_wait_job(cl, "wordcount", &running, 30000, NULL, NULL),
              "job never reached state running; log:\n%s", log_text());
    cr_assert(eddy_poll_until(count_backlogged, NULL, 30000) && eddy_proc_alive(job),
              "count never consumed %d records; log:\n%s", BACKLOG_RECORDS, log_text());

    const char *argv[] = {"rescale", "wordcount", "count", "3", NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_test_cluster_ctl(cl, argv, 90000, &out, &err);
    cr_assert_eq(rc, 0, "eddy rescale wordcount count 3 exited %d: %s%s\nlog:\n%s", rc, out, err,
                 log_text());
    const char *paused = out ? strstr(out, "paused ") : NULL;
    cr_assert(paused, "rescale reply names no pause: %s", out);
    double reply_ms = strtod(paused + strlen("paused "), NULL);
    cr_log_info("rescale while overloaded: %s", out);
    cr_assert_lt(reply_ms, MAX_PAUSE_MS, "the rescale paused the job %.1f ms: %s", reply_ms, out);
    double status_ms = status_pause_ms();
    cr_assert_lt(status_ms, MAX_PAUSE_MS, "status rescales[0].pause_ms = %.1f", status_ms);
    free(out);
    free(err);

    rc = eddy_proc_wait(job, 180000);
    char *log = log_text();
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log);
    cr_assert(!strstr(log, "declared dead"), "a busy worker was declared dead; log:\n%s", log);
    free(log);

    size_t gl, el;
    int same = eddy_test_same_wordcount(input, output, &gl, &el);
    cr_assert(same >= 0, "no output");
    cr_assert(same, "output differs from the reference (%zu vs %zu bytes)", gl, el);
}
