/* test_nexmark.c - every Nexmark query through the real binary, checked
 * against a straightforward reference (tests/support/nexmark_ref.c) over
 * the same generated events.
 *
 * `eddy nexmark generate` writes the events; `eddy local --workers 2 --job
 * nexmark --query Q --input FILE --output OUT` runs the query; OUT must
 * equal the reference byte for byte. Also: out-of-order events (disorder
 * within the watermark delay: nothing is late), the in-memory generator
 * (--events) equal to the file it would write, a rescale of the keyed
 * window/join operator mid-run (q11's sessions, q5's combined counts, the
 * two-input joins of q3 and q8), a worker killed with SIGKILL mid-run (q7,
 * and q5, q3, q8 after their rescales), and
 * q12's shape (processing time: not deterministic). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/nexmark_ref.h"
#include "tests/support/proc.h"

#define EVENTS "60000" /* 60 s of event time: 6 tumbling, 30 sliding windows */

static eddy_test_cluster_t *cl;
static char *events_path, *output;
static int ports[2];
static eddy_proc_t *job;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "nexmark", .workers = 2, .checkpoint_interval = "300",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    events_path = eddy_test_cluster_path(cl, "events.csv");
    output = eddy_test_cluster_path(cl, "out.tsv");
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    job = eddy_test_cluster_local(cl);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(nexmark, .init = setup, .fini = teardown, .timeout = 300);

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void generate(const char *events, const char *disorder)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_nexmark_generate(events_path, events, disorder, &err) == 0, "%s", err.msg);
}

/* Starts the query on 2 workers; extra flags end with NULL. */
static void start_query(const char *query, const char *const *extra)
{
    const char *argv[48] = {"--quiet", "--job", "nexmark", "--query", query, "--output", output};
    size_t n = 7;
    for (size_t i = 0; extra && extra[i] && n < 46; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
}

static void expect_reference(const char *query)
{
    int rc = eddy_proc_wait(job, 240000);
    cr_assert_eq(rc, 0, "eddy local (%s) exited %d; log:\n%s", query, rc, log_text());
    eddy_ref_lines_t ref;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_nexmark_reference(query, events_path, &ref, &err), 0, "%s", err.msg);
    size_t el, gl;
    char *expected = eddy_ref_lines_join(&ref, &el);
    char *got = eddy_read_file(output, &gl);
    cr_assert(got, "%s wrote no output; log:\n%s", query, log_text());
    cr_assert(ref.count > 0, "%s: the reference has no rows: the test proves nothing", query);
    if (gl != el || memcmp(got, expected, el) != 0) {
        char path[700];
        snprintf(path, sizeof path, "/tmp/eddy-nexmark-%s.expected", query);
        eddy_write_file(path, expected, el);
        cr_assert_fail("%s: output (%zu bytes) differs from the reference (%zu bytes, %zu rows; "
                       "written to %s)",
                       query, gl, el, ref.count, path);
    }
    free(expected);
    free(got);
    eddy_ref_lines_free(&ref);
}

static void run_and_check(const char *query, const char *const *extra)
{
    start_query(query, extra);
    expect_reference(query);
}

Test(nexmark, every_query_equals_the_reference)
{
    generate(EVENTS, "0");
    const char *extra[] = {"--input", events_path, NULL};
    const char *queries[] = {"q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q11"};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++)
        run_and_check(queries[i], extra);
}

Test(nexmark, out_of_order_events_within_the_watermark_delay)
{
    generate(EVENTS, "1500");
    const char *extra[] = {"--input", events_path, "--max-delay-ms", "1500", NULL};
    const char *queries[] = {"q4", "q5", "q7", "q8", "q11"};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++)
        run_and_check(queries[i], extra);
}

/* q5's counts are pre-aggregated before the shuffle by default (window
 * local-global aggregation); without it the result is the same. */
Test(nexmark, q5_without_local_aggregation)
{
    generate(EVENTS, "1500");
    const char *extra[] = {"--input", events_path, "--max-delay-ms", "1500",
                           "--no-local-aggregation", NULL};
    run_and_check("q5", extra);
}

Test(nexmark, generator_source_equals_its_file)
{
    generate(EVENTS, "0");
    const char *extra[] = {"--events", EVENTS, "--parallelism", "1", NULL};
    run_and_check("q5", extra);
}

/* The (rate-limited) query runs on 2 workers. With `op`, its keyed step is
 * rescaled 2 -> 3 -> 1 while the source runs; with `kill`, a worker is then
 * killed with SIGKILL and the job restores from its last checkpoint. The
 * result must not change. One run serves both, as each run takes the
 * source's 15 s. */
static void disturbed_run(const char *query, const char *op, bool kill_worker)
{
    generate(EVENTS, "0");
    const char *extra[] = {"--input", events_path, "--rate", "4000", NULL};
    start_query(query, extra);
    char coord[64];
    snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", ports[0]);
    const char *steps[] = {"3", "1"};
    for (size_t i = 0; op && i < 2; i++) {
        bool ok = eddy_test_wait_job_state(ports[0], "nexmark", "running", 30000, job);
        cr_assert(ok, "job never (again) reached state running; log:\n%s", log_text());
        char *argv[] = {EDDY_BINARY, "rescale", "nexmark", (char *)op, (char *)steps[i],
                        "--coordinator", coord, NULL};
        char *out = NULL, *errout = NULL;
        int rc = eddy_proc_run(argv, 90000, &out, &errout);
        cr_assert_eq(rc, 0, "rescale %s to %s failed: %s; log:\n%s", op, steps[i],
                     errout ? errout : "", log_text());
        free(out);
        free(errout);
    }
    /* a checkpoint or two completed, so the restore has one to go from */
    if (kill_worker)
        cr_assert(eddy_test_kill_worker_after(ports[0], "nexmark", 2, 30000, job) > 0,
                  "no worker killed after two checkpoints; log:\n%s", log_text());
    expect_reference(query);
}

Test(nexmark, q11_sessions_survive_a_rescale)
{
    disturbed_run("q11", "sessions", false);
}

Test(nexmark, q5_combined_counts_survive_a_rescale_and_a_killed_worker)
{
    disturbed_run("q5", "bids_per_auction", true);
}

/* q3 and q8 are two-input keyed steps (persons by id, auctions by seller):
 * a rescale moves their state by key group and re-routes both inputs. */
Test(nexmark, q3_join_survives_a_rescale_and_a_killed_worker)
{
    disturbed_run("q3", "join", true);
}

Test(nexmark, q8_window_join_survives_a_rescale_and_a_killed_worker)
{
    disturbed_run("q8", "new_sellers", true);
}

Test(nexmark, q7_survives_a_killed_worker)
{
    disturbed_run("q7", NULL, true);
}

Test(nexmark, q12_processing_time_windows_have_the_right_shape)
{
    generate("20000", "0");
    const char *extra[] = {"--input", events_path, NULL};
    start_query("q12", extra);
    int rc = eddy_proc_wait(job, 120000);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log_text());
    char *got = eddy_read_file(output, NULL);
    cr_assert(got && *got, "q12 wrote no rows; log:\n%s", log_text());
    /* bidder count window_start window_end, with end - start = 10 s, and
     * the counts adding up to the number of bids. */
    long long total = 0;
    size_t rows = 0;
    for (char *line = strtok(got, "\n"); line; line = strtok(NULL, "\n")) {
        long long bidder, count, start, end;
        cr_assert_eq(sscanf(line, "%lld\t%lld\t%lld\t%lld", &bidder, &count, &start, &end), 4,
                     "bad row '%s'", line);
        cr_assert_eq(end - start, 10000, "row '%s'", line);
        cr_assert_eq(start % 10000, 0, "row '%s'", line);
        total += count;
        rows++;
    }
    cr_assert_eq(total, 20000 / 50 * 46, "q12 counted %lld bids in %zu rows", total, rows);
    free(got);
}

Test(nexmark, bad_flags_are_clear_errors)
{
    struct {
        const char *args[6];
        const char *needle;
    } cases[] = {
        {{"--query", "q6", "--events", "10", NULL}, "unknown query 'q6'"},
        {{"--events", "10", NULL}, "needs --query"},
        {{"--query", "q1", NULL}, "exactly one of --events N and --input FILE"},
        {{"--query", "q1", "--events", "10", "--max-delay-ms", "-1"}, "max-delay-ms"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[16] = {EDDY_BINARY, "local", "--job", "nexmark"};
        size_t n = 4;
        for (size_t k = 0; k < 6 && cases[i].args[k]; k++)
            argv[n++] = cases[i].args[k];
        argv[n] = NULL;
        char *out = NULL, *errout = NULL;
        int rc = eddy_proc_run((char *const *)argv, 30000, &out, &errout);
        cr_assert_eq(rc, 2, "case %zu: exit %d", i, rc);
        cr_assert(errout && strstr(errout, cases[i].needle), "case %zu: '%s' not in '%s'", i,
                  cases[i].needle, errout ? errout : "");
        free(out);
        free(errout);
    }
}
