/* test_pipeline_aggregates.c - a pipeline's key_by, window, aggregate and
 * max_by through the real binary on a small hand-written input whose
 * answer is known: per-key aggregates over the whole input, per-window
 * aggregates in event time (first and last by event time), max_by on
 * sessions, map steps between a key_by and its aggregate (run
 * after the shuffle), the same output with --no-optimize and at another
 * parallelism, and the sketches within their error. top_k on generated
 * bids (few bidders an auction, so its count-min answer is exact) equals
 * the exact top computed here, with checkpoints every 100 ms during the
 * run, and again while the aggregate is rescaled 2 -> 3 -> 1 mid-run (its
 * spec errors are test_pipelines.c's). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"

static eddy_test_cluster_t *cl;
static char *input, *output, *spec;
static int ports[2];
static eddy_proc_t *top_k_job;

/* eddy local runs with eddy's own heartbeat timing. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "pipeline_aggs", .workers = 2, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "in.csv");
    output = eddy_test_cluster_path(cl, "out.tsv");
    spec = eddy_test_cluster_path(cl, "spec.yaml");
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    top_k_job = eddy_test_cluster_local(cl);
    /* key, event time (ms), value, tag; out of order within the
     * watermark delay (a watermark comes only every 200 ms, so which rows
     * of a file read at once are late is not something to test here). */
    const char *rows = "a,1000,5,x\n"
                       "b,1500,7,y\n"
                       "a,3000,9,w\n"
                       "a,2500,-2,z\n"
                       "b,4000,1.5,v\n"
                       "c,4500,,u\n"
                       "a,12000,3,t\n"
                       "b,16000,4,s\n"
                       "b,30000,1,r\n";
    cr_assert_eq(eddy_write_file(input, rows, strlen(rows)), 0);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(pipeline_aggregates, .init = setup, .fini = teardown, .timeout = 240);

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

/* Runs text as a pipeline over the input (extra flags after); returns
 * the output file's text. */
static char *run(const char *text, const char *const *extra)
{
    cr_assert_eq(eddy_write_file(spec, text, strlen(text)), 0);
    const char *argv[24] = {"--quiet", "--pipeline", spec, "--input", input, "--output", output};
    size_t n = 7;
    for (size_t i = 0; extra && extra[i] && n < 22; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    eddy_err_t err = {{0}};
    int rc = eddy_test_cluster_run_local(cl, argv, 120000, &err);
    char *log = log_text();
    cr_assert_eq(rc, 0, "eddy local exited %d (%s); log:\n%s", rc, err.msg, log);
    free(log);
    char *out = eddy_read_file(output, NULL);
    cr_assert(out, "no output");
    return out;
}

static void expect_output(const char *text, const char *want)
{
    static const char *const variants[][4] = {
        {NULL}, {"--no-optimize", NULL}, {"--parallelism", "3", NULL}};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        char *got = run(text, variants[i]);
        cr_assert_str_eq(got, want, "variant %zu (%s): got\n%s\nwant\n%s", i,
                         variants[i][0] ? variants[i][0] : "as is", got, want);
        free(got);
    }
}

Test(pipeline_aggregates, per_key_over_the_whole_input)
{
    /* The map and filter after the key_by run on keyed rows after the
     * shuffle (the optimizer moves the filter ahead of it). */
    expect_output("source: {format: csv, columns: [k, ts, v, tag]}\n"
                  "steps:\n"
                  "  - key_by: upper(k)\n"
                  "  - map: {v: v, tag: tag}\n"
                  "  - filter: tag != 'r'\n"
                  "  - aggregate:\n"
                  "      n: count()\n"
                  "      nv: count(v)\n"
                  "      total: sum(v)\n"
                  "      lo: min(v)\n"
                  "      hi: max(v)\n"
                  "      mean: avg(v)\n"
                  "      tags: count_distinct(tag)\n",
                  /* HyperLogLog counts a few values exactly (linear counting) */
                  "A\t4\t4\t15\t-2\t9\t3.75\t4\n"
                  "B\t3\t3\t12.5\t1.5\t7\t4.166666666666667\t3\n"
                  "C\t1\t1\t\\N\t\t\t\\N\t1\n");
}

Test(pipeline_aggregates, per_event_time_window)
{
    expect_output("source: {format: csv, columns: [k, ts, v, tag]}\n"
                  "steps:\n"
                  "  - key_by: k\n"
                  "  - window: {type: tumbling, size: 10s, timestamp: ts, watermark_delay: 5s}\n"
                  "  - aggregate:\n"
                  "      n: count()\n"
                  "      total: sum(v)\n"
                  "      first_tag: first(tag)\n"
                  "      last_tag: last(tag)\n",
                  "a\t0\t10000\t3\t12\tx\tw\n"
                  "a\t10000\t20000\t1\t3\tt\tt\n"
                  "b\t0\t10000\t2\t8.5\ty\tv\n"
                  "b\t10000\t20000\t1\t4\ts\ts\n"
                  "b\t30000\t40000\t1\t1\tr\tr\n"
                  "c\t0\t10000\t1\t\\N\tu\tu\n");
}

Test(pipeline_aggregates, max_by_per_session)
{
    expect_output("source: {format: csv, columns: [k, ts, v, tag]}\n"
                  "steps:\n"
                  "  - key_by: k\n"
                  "  - window: {type: session, gap: 2s, timestamp: ts, watermark_delay: 5s}\n"
                  "  - max_by: v\n"
                  "  - map: {k: k, tag: tag, v: v}\n",
                  "a\tt\t3\n"
                  "a\tw\t9\n"
                  "b\tr\t1\n"
                  "b\ts\t4\n"
                  "b\tv\t1.5\n"
                  "b\ty\t7\n"
                  "c\tu\t\n");
}

/* ---- top_k ---------------------------------------------------------------- */

enum { AUCTIONS = 6, BIDDERS = 12, WINDOW_MS = 5000, TOP = 3 };

static const char top_k_spec[] =
    "source: {format: csv, columns: [auction, ts, bidder]}\n"
    "steps:\n"
    "  - key_by: auction\n"
    "  - window: {type: tumbling, size: 5s, timestamp: ts}\n"
    "  - aggregate:\n"
    "      bids: count()\n"
    "      top_bidders: top_k(bidder, 3)\n"
    "    parallelism: 2\n";

static int compare_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Writes `rows` bids (auction, time, bidder; times ascending, bidders
 * skewed so counts differ and sometimes tie) to the input file and returns
 * the exact answer of top_k_spec over them: the output file's text. */
static char *gen_bids(unsigned rows)
{
    unsigned windows = (unsigned)((uint64_t)rows * 2 / WINDOW_MS) + 1;
    unsigned (*counts)[BIDDERS] = calloc((size_t)AUCTIONS * windows, sizeof *counts);
    size_t cap = (size_t)rows * 24 + 1, len = 0;
    char *text = malloc(cap);
    cr_assert(counts && text);
    uint64_t seed = 12;
    for (unsigned i = 0; i < rows; i++) {
        unsigned a = (unsigned)(eddy_test_rand(&seed) % AUCTIONS);
        /* bidder min(r1, r2) of two uniform draws: 0 most often */
        unsigned r1 = (unsigned)(eddy_test_rand(&seed) % BIDDERS);
        unsigned r2 = (unsigned)(eddy_test_rand(&seed) % BIDDERS);
        unsigned b = r1 < r2 ? r1 : r2;
        unsigned ts = 1000 + 2 * i;
        counts[(size_t)a * windows + ts / WINDOW_MS][b]++;
        len += (size_t)snprintf(text + len, cap - len, "a%u,%u,%u\n", a, ts, 1001 + b);
    }
    cr_assert_eq(eddy_write_file(input, text, len), 0);
    free(text);

    char **lines = calloc((size_t)AUCTIONS * windows, sizeof *lines);
    size_t n = 0;
    for (unsigned a = 0; a < AUCTIONS; a++)
        for (unsigned w = 0; w < windows; w++) {
            const unsigned *c = counts[(size_t)a * windows + w];
            unsigned total = 0, order[BIDDERS];
            for (unsigned b = 0; b < BIDDERS; b++) {
                total += c[b];
                order[b] = b;
            }
            if (!total)
                continue;
            /* count descending, then the bidder's text (equal lengths) */
            for (unsigned i = 1; i < BIDDERS; i++)
                for (unsigned j = i; j > 0 && c[order[j]] > c[order[j - 1]]; j--) {
                    unsigned t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
            char line[256];
            int l = snprintf(line, sizeof line, "a%u\t%u\t%u\t%u\t", a, w * WINDOW_MS,
                             (w + 1) * WINDOW_MS, total);
            for (unsigned i = 0; i < TOP && c[order[i]]; i++)
                l += snprintf(line + l, sizeof line - (size_t)l, "%s%u:%u", i ? "," : "",
                              1001 + order[i], c[order[i]]);
            lines[n++] = strdup(line);
        }
    qsort(lines, n, sizeof *lines, compare_lines);
    size_t out_len = 0;
    char *out = malloc(n * 256 + 1);
    cr_assert(out);
    out[0] = 0;
    for (size_t i = 0; i < n; i++) {
        out_len += (size_t)sprintf(out + out_len, "%s\n", lines[i]);
        free(lines[i]);
    }
    free(lines);
    free(counts);
    return out;
}

/* Starts top_k_spec over the input with checkpoints every 100 ms and the
 * source capped at rate lines/s, so the job runs for a while. */
static void start_top_k(const char *rate)
{
    cr_assert_eq(eddy_write_file(spec, top_k_spec, strlen(top_k_spec)), 0);
    eddy_test_cluster_opts_t *o = eddy_test_cluster_opts(cl);
    o->workers = 3;
    o->checkpoint_interval = "100";
    const char *argv[] = {"--quiet", "--pipeline", spec, "--input", input, "--output", output,
                          "--rate", rate, NULL};
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
}


static json_int_t last_checkpoint(void)
{
    json_t *st = eddy_test_status(ports[0]);
    json_t *job = st ? eddy_test_status_job(st, "pipeline") : NULL;
    json_int_t id = job ? json_integer_value(json_object_get(json_object_get(job, "last_checkpoint"), "id")) : 0;
    json_decref(st);
    return id;
}

/* Polled: a checkpoint completed (*seen) or the job ended. */
static bool checkpointed(void *arg)
{
    bool *seen = arg;
    *seen = last_checkpoint() > 0;
    return *seen || !eddy_proc_alive(top_k_job);
}

/* The job exits 0 and its output is want. */
static void expect_top_k_output(const char *want)
{
    int rc = eddy_proc_wait(top_k_job, 120000);
    char *log = log_text();
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log);
    char *got = eddy_read_file(output, NULL);
    cr_assert(got, "no output; log:\n%s", log);
    size_t at = 0;
    while (got[at] && got[at] == want[at])
        at++;
    cr_assert(!got[at] && !want[at], "output differs from the exact top at byte %zu: got\n%.300s\nwant\n%.300s",
              at, got + (at > 100 ? at - 100 : 0), want + (at > 100 ? at - 100 : 0));
    free(got);
    free(log);
}

Test(pipeline_aggregates, top_k_exact_with_checkpoints_mid_run)
{
    char *want = gen_bids(24000); /* 48 s of event time, ~3 s at the rate */
    start_top_k("8000");
    bool seen = false;
    if (!eddy_poll_until(checkpointed, &seen, 60000) || !seen)
        cr_assert_fail("no checkpoint completed while the job ran; log:\n%s", log_text());
    expect_top_k_output(want);
    free(want);
}

static int rescale_aggregate(const char *p)
{
    char *argv[] = {EDDY_BINARY, "rescale", "pipeline", "step2_aggregate", (char *)p,
                    "--coordinator", eddy_test_cluster_url(cl, 0), NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 90000, &out, &err);
    if (rc != 0)
        cr_log_error("eddy rescale pipeline step2_aggregate %s: exit %d: %s", p, rc, err ? err : "");
    free(out);
    free(err);
    return rc;
}

Test(pipeline_aggregates, top_k_exact_across_rescales)
{
    char *want = gen_bids(60000); /* ~10 s at the rate: room for two rescales */
    start_top_k("6000");
    static const char *const steps[] = {"3", "1"};
    for (size_t i = 0; i < 2; i++) {
        if (!eddy_test_wait_job_state(ports[0], "pipeline", "running", 60000, top_k_job))
            cr_assert_fail("the job never (again) reached running; log:\n%s", log_text());
        cr_assert_eq(rescale_aggregate(steps[i]), 0, "rescale to %s refused; log:\n%s", steps[i],
                     log_text());
    }
    expect_top_k_output(want);
    free(want);
}
