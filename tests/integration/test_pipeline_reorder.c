/* test_pipeline_reorder.c - the adaptive filter order as metrics (issue 12
 * item 3): a pipeline whose two filters swap selectivities halfway through
 * a generated input. With adaptive reordering on, the output equals the
 * static run's (--no-optimize: the written order, no eddy), and
 * eddy_pipeline_filter_position at GET /metrics shows the switch: the
 * selective filter of the first half runs first, then the other one does,
 * with eddy_pipeline_reorders_total counting both changes; /api/v1/jobs
 * and `eddy status JOB` show the order line. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tests/support/cluster.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"

#define LINES 40000

static eddy_test_cluster_t *cl;
static char *input, *spec, *out_static, *out_adaptive;
static int ports[2];

/* eddy local runs with eddy's own checkpoint and heartbeat timing. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "reorder", .workers = 1, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "in.csv");
    spec = eddy_test_cluster_path(cl, "swap.yaml");
    out_static = eddy_test_cluster_path(cl, "static.tsv");
    out_adaptive = eddy_test_cluster_path(cl, "adaptive.tsv");
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(pipeline_reorder, .init = setup, .fini = teardown, .timeout = 300);

/* id,x,y: in the first half x == 'k' passes 99% and y == 'k' about 1%;
 * in the second half the other way round. Both pass about 1% overall. */
static void write_input(void)
{
    FILE *f = fopen(input, "w");
    cr_assert(f);
    for (int i = 0; i < LINES; i++) {
        bool common = i % 100 != 0, rare = i % 97 == 0;
        bool first_half = i < LINES / 2;
        char x = (first_half ? common : rare) ? 'k' : 'z';
        char y = (first_half ? rare : common) ? 'k' : 'z';
        fprintf(f, "%d,%c,%c\n", i, x, y);
    }
    cr_assert_eq(fclose(f), 0);
    const char *text = "source:\n"
                       "  format: csv\n"
                       "  columns: [id, x, y]\n"
                       "steps:\n"
                       "  - filter: x == 'k'\n"
                       "  - filter: y == 'k'\n";
    cr_assert_eq(eddy_write_file(spec, text, strlen(text)), 0);
}

static eddy_proc_t *start(const char *output, const char *const *extra)
{
    const char *argv[32] = {"--pipeline", spec, "--input", input, "--output", output,
                            "--parallelism", "1"};
    size_t n = 8;
    for (size_t i = 0; extra && extra[i] && n < 30; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    return eddy_test_cluster_local(cl);
}

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

/* The value of eddy_pipeline_filter_position for the filter with this
 * text in Prometheus text, or -1 when absent. */
static double position_of(const char *metrics, const char *filter)
{
    char label[128];
    snprintf(label, sizeof label, ",filter=\"%s\"}", filter);
    for (const char *line = metrics; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *name = "eddy_pipeline_filter_position{";
        if (!strncmp(line, name, strlen(name))) {
            const char *at = strstr(line, label);
            if (at && at < line + len)
                return atof(at + strlen(label));
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

/* The first job's id from /api/v1/jobs, and whether it shows a report line
 * naming the filters. */
static bool job_report(char *id, size_t size)
{
    long status = 0;
    char *body = eddy_test_http_get(ports[1], "/api/v1/jobs", 2000, &status);
    json_t *doc = body && status == 200 ? json_loads(body, 0, NULL) : NULL;
    free(body);
    json_t *job = json_array_get(doc, 0);
    const char *jid = json_string_value(json_object_get(job, "id"));
    if (jid)
        snprintf(id, size, "%s", jid);
    bool found = false;
    size_t i;
    json_t *op;
    json_array_foreach(json_object_get(job, "operators"), i, op)
    {
        const char *text =
            json_string_value(json_object_get(json_array_get(json_object_get(op, "reports"), 0), "text"));
        if (text && strstr(text, "x == 'k'") && strstr(text, "y == 'k'"))
            found = true;
    }
    json_decref(doc);
    return found;
}

Test(pipeline_reorder, selectivities_swap_midway)
{
    write_input();

    /* The static run: filters as written, no eddy. */
    eddy_proc_t *proc = start(out_static, (const char *[]){"--quiet", "--no-optimize", NULL});
    int rc = eddy_proc_wait(proc, 180000);
    eddy_proc_kill(proc, 2000);
    char *log = log_text();
    cr_assert_eq(rc, 0, "static run exited %d; log:\n%s", rc, log);
    free(log);

    /* The adaptive run, slowed down so /metrics can be watched while the
     * input turns over (about 10 s). */
    proc = start(out_adaptive, (const char *[]){"--rate", "4000", NULL});
    bool y_first = false, x_first_after = false, reported = false, status_shown = false;
    long long reorders = -1;
    char job[128] = "";
    uint64_t deadline = eddy_mono_ms() + 180000;
    while (eddy_proc_alive(proc) && eddy_mono_ms() < deadline && !(x_first_after && status_shown)) {
        long status = 0;
        char *metrics = eddy_test_http_get(ports[1], "/metrics", 2000, &status);
        if (metrics && status == 200) {
            double px = position_of(metrics, "x == 'k'"), py = position_of(metrics, "y == 'k'");
            if (py == 1 && px == 2)
                y_first = true;
            if (y_first && px == 1 && py == 2) {
                x_first_after = true;
                reorders = eddy_test_metric_sum(metrics, "eddy_pipeline_reorders_total{");
            }
        }
        free(metrics);
        if (y_first && !reported)
            reported = job_report(job, sizeof job);
        if (reported && !status_shown) {
            char *argv[] = {EDDY_BINARY, "status", job, "--coordinator",
                            eddy_test_cluster_url(cl, 0), NULL};
            char *out = NULL;
            if (eddy_proc_run(argv, 10000, &out, NULL) == 0 && out && strstr(out, "filters '") &&
                strstr(out, "reorders"))
                status_shown = true;
            free(out);
        }
        eddy_nap_ms(100);
    }
    rc = eddy_proc_wait(proc, 180000);
    eddy_proc_kill(proc, 2000);
    log = log_text();
    cr_assert_eq(rc, 0, "adaptive run exited %d; log:\n%s", rc, log);
    cr_assert(y_first, "the position metric never showed y == 'k' first; log:\n%s", log);
    cr_assert(x_first_after, "the position metric never switched back to x == 'k' first; log:\n%s", log);
    cr_assert_geq(reorders, 2, "eddy_pipeline_reorders_total %lld after two switches", reorders);
    cr_assert(reported, "/api/v1/jobs showed no report line with the filters");
    cr_assert(status_shown, "eddy status %s showed no filter order line", job);
    free(log);

    size_t sl, al;
    char *a = eddy_read_file(out_static, &sl), *b = eddy_read_file(out_adaptive, &al);
    cr_assert(a && b, "an output is missing");
    cr_assert_gt(sl, 0, "the static run wrote no rows: the comparison proves nothing");
    cr_assert(sl == al && memcmp(a, b, sl) == 0,
              "adaptive output (%zu bytes) differs from the static run's (%zu bytes)", al, sl);
    free(a);
    free(b);
}
