/* test_pipeline_aggregates.c - a pipeline's key_by, window, aggregate and
 * max_by through the real binary on a small hand-written input whose
 * answer is known: per-key aggregates over the whole input, per-window
 * aggregates in event time (first and last by event time), max_by on
 * sessions, map steps between a key_by and its aggregate (run
 * after the shuffle), the same output with --no-optimize and at another
 * parallelism, and the sketches within their error. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/etcd.h"
#include "tests/support/proc.h"

static char *dir;
static char input[600], output[600], spec[600], logp[600];
static int ports[2];

static void setup(void)
{
    eddy_err_t err = {{0}};
    dir = eddy_test_mkdtemp("pipeline_aggs", &err);
    cr_assert(dir, "%s", err.msg);
    snprintf(input, sizeof input, "%s/in.csv", dir);
    snprintf(output, sizeof output, "%s/out.tsv", dir);
    snprintf(spec, sizeof spec, "%s/spec.yaml", dir);
    snprintf(logp, sizeof logp, "%s/local.log", dir);
    cr_assert(eddy_test_free_ports(2, ports, &err) == 0, "%s", err.msg);
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
    if (dir)
        eddy_test_rm_rf(dir);
    free(dir);
}

TestSuite(pipeline_aggregates, .init = setup, .fini = teardown, .timeout = 240);

/* Runs text as a pipeline over the input (extra flags after); returns
 * the output file's text. */
static char *run(const char *text, const char *const *extra)
{
    cr_assert_eq(eddy_write_file(spec, text, strlen(text)), 0);
    char cp[16], hp[16];
    snprintf(cp, sizeof cp, "%d", ports[0]);
    snprintf(hp, sizeof hp, "%d", ports[1]);
    const char *argv[24] = {EDDY_BINARY, "local", "--workers", "2", "--control-port", cp,
                            "--http-port", hp, "--quiet", "--pipeline", spec, "--input", input,
                            "--output", output};
    size_t n = 15;
    for (size_t i = 0; extra && extra[i] && n < 22; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    eddy_err_t err = {{0}};
    eddy_proc_t proc;
    cr_assert(eddy_proc_start(&proc, (char *const *)argv, NULL, logp, &err) == 0, "%s", err.msg);
    int rc = eddy_proc_wait(&proc, 120000);
    eddy_proc_kill(&proc, 2000);
    char *log = eddy_read_file(logp, NULL);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log ? log : "");
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
