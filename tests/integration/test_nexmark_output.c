/* test_nexmark_output.c - `--output FILE` of the append-only Nexmark queries
 * through exactly-once part files merged at the end (jobs/line_source.h
 * eddy_job_rows_merged_add), against the table of rows in keyed state
 * (`--output-table`, the path of updating results): the same bytes.
 *
 * q0 q1 q2 (projections and a filter; the sink chained with the source)
 * and q5 q7 (window results; the sink reads the last window round robin),
 * each run twice on 2 workers of `eddy local`; the merged runs write to
 * one path, so each also starts over what the run before it left in the
 * parts directory. Then q1 through a worker killed with SIGKILL and q7
 * through a rescale of its keyed window and a killed worker: the restore
 * publishes what completed checkpoints prepared and replays the rest, and
 * the merged file still equals the table path's. Waits poll with
 * deadlines; nothing sleeps to synchronise. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"

static eddy_test_cluster_t *cl;
static char *events_path, *merged, *table;
static int ports[2];
static eddy_proc_t *job;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "nxout", .workers = 2, .checkpoint_interval = "300",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    events_path = eddy_test_cluster_path(cl, "events.csv");
    merged = eddy_test_cluster_path(cl, "merged.tsv");
    table = eddy_test_cluster_path(cl, "table.tsv");
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    job = eddy_test_cluster_local(cl);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(nexmark_output, .init = setup, .fini = teardown, .timeout = 240);

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void generate(const char *events)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_nexmark_generate(events_path, events, "0", &err) == 0, "%s", err.msg);
}

/* Starts the query on 2 workers writing to out; extra flags end with NULL. */
static void start_query(const char *query, const char *out, const char *const *extra)
{
    const char *argv[32] = {"--quiet", "--job", "nexmark", "--query", query, "--output", out,
                            "--input", events_path};
    size_t n = 9;
    for (size_t i = 0; extra && extra[i] && n < 30; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
}

static void wait_done(const char *what)
{
    int rc = eddy_proc_wait(job, 120000);
    cr_assert_eq(rc, 0, "eddy local (%s) exited %d; log:\n%s", what, rc, log_text());
}

/* The parts directory beside the merged file holds no part after a merge. */
static void expect_no_parts_left(void)
{
    char *dir = eddy_test_cluster_path(cl, ".merged.tsv.parts");
    DIR *d = opendir(dir);
    cr_assert(d, "no parts directory %s", dir);
    struct dirent *e;
    while ((e = readdir(d)))
        cr_assert(strncmp(e->d_name, "part-", 5) != 0, "part file %s left in %s", e->d_name, dir);
    closedir(d);
}

static void expect_same(const char *query)
{
    size_t ml = 0, tl = 0;
    char *m = eddy_read_file(merged, &ml), *t = eddy_read_file(table, &tl);
    cr_assert(m, "%s: no merged output; log:\n%s", query, log_text());
    cr_assert(t, "%s: no table output", query);
    cr_assert_gt(tl, 0, "%s: the table path wrote no rows: the test proves nothing", query);
    cr_assert(ml == tl && memcmp(m, t, tl) == 0,
              "%s: merged output (%zu bytes) differs from the table path's (%zu bytes)", query, ml,
              tl);
    free(m);
    free(t);
    expect_no_parts_left();
}

static void compare(const char *query)
{
    const char *table_flag[] = {"--output-table", NULL};
    start_query(query, table, table_flag);
    wait_done("table path");
    start_query(query, merged, NULL);
    wait_done("merged path");
    expect_same(query);
}

Test(nexmark_output, projections_and_filter_merge_to_the_table_paths_bytes)
{
    generate("20000");
    const char *queries[] = {"q0", "q1", "q2"};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++)
        compare(queries[i]);
}

Test(nexmark_output, window_results_merge_to_the_table_paths_bytes)
{
    generate("40000");
    compare("q5");
    compare("q7");
}

/* The table path's result undisturbed, then the merged path at a capped
 * rate with the keyed step `op` rescaled 2 -> 3 (when set) and a worker
 * killed with SIGKILL after two completed checkpoints. */
static void disturbed(const char *query, const char *op)
{
    generate("24000");
    const char *table_flag[] = {"--output-table", NULL};
    start_query(query, table, table_flag);
    wait_done("table path");
    const char *rate[] = {"--rate", "3000", NULL};
    start_query(query, merged, rate);
    if (op) {
        bool ok = eddy_test_wait_job_state(ports[0], "nexmark", "running", 30000, job);
        cr_assert(ok, "job never reached state running; log:\n%s", log_text());
        char coord[64];
        snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", ports[0]);
        char *argv[] = {EDDY_BINARY, "rescale", "nexmark", (char *)op, "3", "--coordinator", coord,
                        NULL};
        char *out = NULL, *errout = NULL;
        int rc = eddy_proc_run(argv, 60000, &out, &errout);
        cr_assert_eq(rc, 0, "rescale %s failed: %s; log:\n%s", op, errout ? errout : "",
                     log_text());
        free(out);
        free(errout);
    }
    cr_assert(eddy_test_kill_worker_after(ports[0], "nexmark", 2, 30000, job) > 0,
              "no worker killed after two checkpoints; log:\n%s", log_text());
    wait_done("merged path, disturbed");
    expect_same(query);
}

Test(nexmark_output, q1_merged_output_survives_a_killed_worker)
{
    disturbed("q1", NULL);
}

Test(nexmark_output, q7_merged_output_survives_a_rescale_and_a_killed_worker)
{
    disturbed("q7", "max_per_auction");
}
