/* test_pipeline_faults.c - a declarative pipeline's stateful steps keep
 * eddy's promise (no row lost or counted twice) through live rescales and
 * kill -9, as the C jobs do in test_rescale_e2e.c and
 * test_fault_tolerance.c.
 *
 * Each test runs a pipeline over generated Nexmark events, rate-limited so
 * that it lasts about ten seconds with checkpoints every 300 ms, and
 * disturbs it while it runs: `eddy rescale pipeline STAGE 3` then `... 1`
 * on the stateful step (its stage name is the one `eddy plan --pipeline`
 * prints), or a SIGKILL of a worker holding an instance of that step. The
 * output file must then equal the expected one byte for byte:
 *  - a key_by + event-time tumbling window + aggregate with count, sum,
 *    count_distinct (HyperLogLog), quantile (DDSketch) and top_k
 *    (count-min): the output of the same spec run undisturbed, itself
 *    checked against counts and sums computed here from the events (the
 *    step keeps one fixed-size accumulator per key and window, folded in
 *    arrival order, plan/pipeline_window.h "ordered": HLL's and DDSketch's
 *    answers do not depend on the rows' order, top_k's candidates could,
 *    so the accumulator must be restored and moved exactly);
 *  - Nexmark q8 (a windowed semi-join) and q11 (session windows): the
 *    reference of tests/support/nexmark_ref.c.
 * A rescale naming a step by a wrong name is refused with the names of the
 * keyed operators it could name. Every wait polls `eddy status --json` or
 * the process with a deadline. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/nexmark_ref.h"
#include "tests/support/proc.h"

#define EVENTS "30000"
#define RATE "3000" /* lines/s: an undisturbed run lasts about 10 s */
#define JOB "pipeline"

/* Bids per (auction % 8, 2 s window) with the sketches. */
static const char agg_spec[] = "name: aggregate-faults\n"
                               "source:\n"
                               "  format: csv\n"
                               "  ragged: true\n"
                               "  columns: [event, date_time, auction, bidder, price, f5, f6, f7, f8]\n"
                               "steps:\n"
                               "  - filter: event == 'B'\n"
                               "  - key_by: auction % 8\n"
                               "  - window: {type: tumbling, size: 2s, timestamp: date_time}\n"
                               "  - aggregate:\n"
                               "      bids: count()\n"
                               "      total: sum(price)\n"
                               "      bidders: count_distinct(bidder)\n"
                               "      median: \"quantile(price, 0.5)\"\n"
                               "      p90: \"quantile(price, 0.9)\"\n"
                               "      top: \"top_k(bidder, 3)\"\n";
#define AGG_STAGE "step3_aggregate"

static eddy_test_cluster_t *cl;
static char *events, *output, *agg_path;
static eddy_proc_t *local; /* eddy local once start() ran it */

static void setup(void)
{
    eddy_err_t err = {{0}};
    /* eddy's own checkpoint and heartbeat timing (start() sets the interval) */
    eddy_test_cluster_opts_t o = {.tag = "pipeline_faults", .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    events = eddy_test_cluster_path(cl, "events.csv");
    output = eddy_test_cluster_path(cl, "out.tsv");
    agg_path = eddy_test_cluster_path(cl, "aggregate.yaml");
    cr_assert_eq(eddy_write_file(agg_path, agg_spec, strlen(agg_spec)), 0);
    local = NULL;
    cr_assert(eddy_test_nexmark_generate(events, EVENTS, NULL, &err) == 0, "%s", err.msg);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(pipeline_faults, .init = setup, .fini = teardown, .timeout = 240);

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void spec_of(const char *query, char *out, size_t size)
{
    snprintf(out, size, "%s/examples/pipelines/%s.yaml", EDDY_SOURCE_DIR, query);
}

/* ---- expected outputs ------------------------------------------------------- */

/* The spec run undisturbed, at full speed, on two workers. */
static char *undisturbed(const char *spec, size_t *len)
{
    char *ref = eddy_test_cluster_path(cl, "undisturbed.tsv");
    const char *argv[] = {"--quiet", "--pipeline", spec, "--input", events, "--output", ref, NULL};
    eddy_test_cluster_opts(cl)->workers = 2;
    eddy_err_t err = {{0}};
    int rc = eddy_test_cluster_run_local(cl, argv, 120000, &err);
    /* its log apart, so that local.log is the disturbed run's alone */
    char *run_log = eddy_test_cluster_path(cl, "undisturbed.log");
    rename(eddy_test_cluster_path(cl, "local.log"), run_log);
    char *errout = eddy_read_file(run_log, NULL);
    cr_assert_eq(rc, 0, "the undisturbed run exited %d: %s%s", rc, err.msg, errout ? errout : "");
    free(errout);
    char *text = eddy_read_file(ref, len);
    cr_assert(text, "the undisturbed run wrote no output");
    return text;
}

/* Bids and the sum of their prices in the events file, counted here. */
static void count_bids(int64_t *bids, int64_t *total)
{
    char *text = eddy_read_file(events, NULL);
    cr_assert(text);
    *bids = *total = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != 'B' || line[1] != ',')
            continue;
        /* B,date_time,auction,bidder,price,... */
        char *p = line;
        for (int commas = 0; *p && commas < 4; p++)
            commas += *p == ',';
        (*bids)++;
        *total += strtoll(p, NULL, 10);
    }
    free(text);
}

/* The aggregate spec's expected output: the undisturbed run, whose count
 * and sum columns must add up to what the events hold. */
static char *aggregate_expected(size_t *len)
{
    char *text = undisturbed(agg_path, len);
    int64_t want_bids, want_total, bids = 0, total = 0;
    count_bids(&want_bids, &want_total);
    size_t rows = 0;
    for (const char *p = text; p < text + *len; rows++) {
        /* key, window_start, window_end, bids, total, ... */
        const char *f = p;
        for (int tabs = 0; tabs < 3; f++)
            tabs += *f == '\t';
        bids += strtoll(f, (char **)&f, 10);
        total += strtoll(f + 1, NULL, 10);
        p = strchr(p, '\n') + 1;
    }
    cr_assert_gt(rows, 50, "only %zu rows: the test would prove little", rows);
    cr_assert_eq(bids, want_bids, "the undisturbed run counted %" PRId64 " bids of %" PRId64, bids,
                 want_bids);
    cr_assert_eq(total, want_total, "the undisturbed run summed %" PRId64 ", the bids %" PRId64,
                 total, want_total);
    return text;
}

static char *nexmark_expected(const char *query, size_t *len)
{
    eddy_ref_lines_t ref;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_nexmark_reference(query, events, &ref, &err), 0, "%s", err.msg);
    cr_assert_gt(ref.count, 20, "%s: %zu reference rows prove little", query, ref.count);
    char *text = eddy_ref_lines_join(&ref, len);
    eddy_ref_lines_free(&ref);
    return text;
}

/* ---- the disturbed run --------------------------------------------------------- */

static void start(const char *spec)
{
    /* No --quiet: a failure shows the coordinator's INFO lines. The default
     * heartbeat timeout (3 s): a killed worker is declared dead at once by
     * its closed connection, and a loaded machine must not make a live one
     * look dead in the middle of a rescale. */
    const char *argv[] = {"--checkpoint-interval", "300", "--pipeline", spec, "--input", events,
                          "--output", output, "--rate", RATE, NULL};
    eddy_test_cluster_opts(cl)->workers = 3;
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    local = eddy_test_cluster_local(cl);
}

/* The job runs with at least min_completed checkpoints and min_restarts
 * restores behind it. */
static void wait_job(int64_t min_completed, int64_t min_restarts, const char *what)
{
    const eddy_test_job_want_t want = {.state = "running", .min_completed = min_completed,
                                       .min_restarts = min_restarts};
    if (!eddy_test_cluster_wait_job(cl, JOB, &want, 30000, NULL, NULL)) {
        char *l = log_text();
        cr_assert_fail("timed out waiting for %s%s; log:\n%s", what,
                       eddy_proc_alive(local) ? "" : " (eddy local exited)", l);
    }
}

/* eddy rescale pipeline STAGE P; returns its stdout ("... moved N key
 * groups (B bytes)"). */
static char *rescale(const char *stage, const char *p)
{
    const char *argv[] = {"rescale", JOB, stage, p, NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_test_cluster_ctl(cl, argv, 90000, &out, &err);
    if (rc != 0) {
        char *l = log_text();
        cr_assert_fail("eddy rescale %s %s %s exited %d: %s\nlog:\n%s", JOB, stage, p, rc,
                       err ? err : "", l);
    }
    free(err);
    return out;
}

/* Bytes of state a rescale moved, from its answer. */
static long long moved_bytes(const char *answer)
{
    const char *p = strstr(answer, "key groups (");
    return p ? strtoll(p + strlen("key groups ("), NULL, 10) : -1;
}

/* The pid of a worker running an instance of stage. */
static pid_t holder_of(const char *stage)
{
    json_t *st = eddy_test_cluster_status(cl);
    json_t *j = st ? eddy_test_status_job(st, JOB) : NULL;
    cr_assert(j, "no status of job %s", JOB);
    json_int_t worker = -1;
    size_t i, k;
    json_t *op, *inst, *w;
    json_array_foreach(json_object_get(j, "operators"), i, op)
    {
        const char *name = json_string_value(json_object_get(op, "name"));
        if (!name || strcmp(name, stage))
            continue;
        json_array_foreach(json_object_get(op, "instances"), k, inst)
            worker = json_integer_value(json_object_get(inst, "worker"));
    }
    pid_t pid = -1;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (json_integer_value(json_object_get(w, "id")) == worker &&
            json_is_true(json_object_get(w, "alive")))
            pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
    }
    json_decref(st);
    cr_assert(pid > 0, "no alive worker holds an instance of %s", stage);
    return pid;
}

/* eddy local finishes and its output equals expected byte for byte. */
static void expect_output(const char *expected, size_t expected_len)
{
    int rc = eddy_proc_wait(local, 120000);
    if (rc != 0) {
        char *l = log_text();
        cr_assert_fail("eddy local exited %d; log:\n%s", rc, l);
    }
    size_t gl = 0;
    char *got = eddy_read_file(output, &gl);
    cr_assert(got, "no output");
    if (gl != expected_len || memcmp(got, expected, gl)) {
        size_t at = 0, line = 1;
        while (at < gl && at < expected_len && got[at] == expected[at])
            line += got[at++] == '\n';
        const char *g = got + at, *e = expected + at;
        while (g > got && g[-1] != '\n')
            g--;
        while (e > expected && e[-1] != '\n')
            e--;
        char *l = log_text();
        cr_assert_fail("output (%zu bytes) differs from the expected (%zu bytes) at line %zu:\n"
                       "got:  %.*s\nwant: %.*s\nlog:\n%s",
                       gl, expected_len, line, (int)strcspn(g, "\n"), g, (int)strcspn(e, "\n"), e,
                       l);
    }
    free(got);
}

/* Rescales stage up to 3 and down to 1 while the spec runs (started here
 * unless the test started it). */
static void rescale_up_then_down(const char *spec, const char *stage, const char *expected,
                                 size_t expected_len)
{
    if (!local)
        start(spec);
    wait_job(1, 0, "a completed checkpoint");
    char *up = rescale(stage, "3");
    cr_assert_gt(moved_bytes(up), 0, "the rescale up moved no state: %s", up);
    wait_job(1, 0, "the job running after the rescale up");
    char *down = rescale(stage, "1");
    cr_assert_gt(moved_bytes(down), 0, "the rescale down moved no state: %s", down);
    cr_log_info("%s: %s%s", stage, up, down);
    free(up);
    free(down);
    expect_output(expected, expected_len);
}

/* SIGKILLs a worker holding an instance of stage after two checkpoints
 * (unless the test started the job and waited itself); the job is restored
 * (from a checkpoint, or from the beginning when it had none). */
static void kill_holder(const char *spec, const char *stage, const char *expected,
                        size_t expected_len)
{
    bool after_checkpoints = !local;
    if (after_checkpoints) {
        start(spec);
        wait_job(2, 0, "two completed checkpoints");
    }
    pid_t pid = holder_of(stage);
    cr_assert(kill(pid, SIGKILL) == 0, "kill -9 %d failed", (int)pid);
    wait_job(0, 1, "the job restored and running again");
    char *l = log_text();
    cr_assert(!after_checkpoints || strstr(l, "restoring from checkpoint "),
              "no restore in the log:\n%s", l);
    free(l);
    expect_output(expected, expected_len);
}

typedef struct source_wait {
    const char *stage;
    int64_t records;
} source_wait_t;

/* The source stage has read at least w->records lines. */
static bool source_read(void *arg)
{
    source_wait_t *w = arg;
    json_t *st = eddy_test_cluster_status(cl);
    json_t *op = eddy_test_status_operator(st, JOB, w->stage);
    bool ok = op && json_integer_value(json_object_get(op, "records_in")) >= w->records;
    json_decref(st);
    return ok;
}

/* ---- tests ------------------------------------------------------------------- */

Test(pipeline_faults, plan_names_the_rescalable_stages)
{
    char q8[700];
    spec_of("q8", q8, sizeof q8);
    const struct {
        const char *spec, *line;
    } want[] = {{agg_path, "  " AGG_STAGE "  parallelism 2  <- stage 0 by key (tab_prefix), rescalable"},
                {q8, "  step2_join  parallelism 2  <- stage 1 by key (tab_prefix) and stage 2 by key "
                     "(tab_prefix), rescalable"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char *argv[] = {EDDY_BINARY, "plan", "--pipeline", (char *)want[i].spec, "--input", events,
                        NULL};
        char *out = NULL, *err = NULL;
        int rc = eddy_proc_run(argv, 30000, &out, &err);
        cr_assert_eq(rc, 0, "eddy plan exited %d: %s", rc, err ? err : "");
        cr_assert(strstr(out, want[i].line), "eddy plan --pipeline %s lacks '%s':\n%s",
                  want[i].spec, want[i].line, out);
        free(out);
        free(err);
    }
}

/* A rescale naming a step wrongly is refused with the names it could use. */
static void expect_refusal_naming(const char *wrong, const char *stage)
{
    const char *argv[] = {"rescale", JOB, wrong, "3", NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_test_cluster_ctl(cl, argv, 30000, &out, &err);
    cr_assert_gt(rc, 0, "eddy rescale %s %s 3: exit %d, want a refusal", JOB, wrong, rc);
    cr_assert(err && strstr(err, stage), "the refusal of '%s' does not name %s: %s", wrong, stage,
              err ? err : "");
    free(out);
    free(err);
}

Test(pipeline_faults, aggregate_rescaled_up_then_down)
{
    size_t len;
    char *expected = aggregate_expected(&len);
    start(agg_path);
    wait_job(0, 0, "the job running");
    expect_refusal_naming("aggregate", AGG_STAGE);
    expect_refusal_naming("source", AGG_STAGE);
    rescale_up_then_down(agg_path, AGG_STAGE, expected, len);
    free(expected);
}

Test(pipeline_faults, aggregate_worker_killed)
{
    size_t len;
    char *expected = aggregate_expected(&len);
    kill_holder(agg_path, AGG_STAGE, expected, len);
    free(expected);
}

/* A Nexmark query's spec, disturbed, against the reference. */
static void nexmark_case(const char *query, const char *stage, bool kill_worker)
{
    char spec[700];
    spec_of(query, spec, sizeof spec);
    size_t len;
    char *expected = nexmark_expected(query, &len);
    if (kill_worker)
        kill_holder(spec, stage, expected, len);
    else
        rescale_up_then_down(spec, stage, expected, len);
    free(expected);
}

Test(pipeline_faults, windowed_join_rescaled_up_then_down)
{
    nexmark_case("q8", "step2_join", false);
}

Test(pipeline_faults, windowed_join_worker_killed)
{
    nexmark_case("q8", "step2_join", true);
}

Test(pipeline_faults, sessions_worker_killed)
{
    nexmark_case("q11", "step3_aggregate", true);
}

/* Nexmark q3 with its persons read from a file of their own, which ends
 * long before the events: from then on the job takes no checkpoints
 * (docs/pipelines.md), and a worker killed after that is recovered from
 * an older point (here: the beginning); the output is still exact. */
Test(pipeline_faults, join_with_an_ended_side_worker_killed)
{
    char *persons = eddy_test_cluster_path(cl, "persons.csv");
    char *spec_path = eddy_test_cluster_path(cl, "q3_persons_file.yaml");
    char *text = eddy_read_file(events, NULL);
    cr_assert(text);
    FILE *f = fopen(persons, "w");
    cr_assert(f);
    int64_t n_persons = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (line[0] == 'P' && line[1] == ',') {
            fprintf(f, "%s\n", line);
            n_persons++;
        }
    cr_assert_eq(fclose(f), 0);
    free(text);
    char spec[1200];
    int n = snprintf(spec, sizeof spec,
                     "source:\n"
                     "  format: csv\n"
                     "  ragged: true\n"
                     "  columns: [event, date_time, f2, f3, f4, f5, f6, f7, f8]\n"
                     "steps:\n"
                     "  - filter: event == 'A' and f8 == '10'\n"
                     "  - map: {seller: f7, auction: f2}\n"
                     "  - join:\n"
                     "      with:\n"
                     "        input: %s\n"
                     "        steps:\n"
                     "          - filter: event == 'P' and (f7 == 'OR' or f7 == 'ID' or f7 == 'CA')\n"
                     "          - map: {id: f2, name: f3, city: f6, state: f7}\n"
                     "      left_key: seller\n"
                     "      right_key: id\n"
                     "  - map: {name: name, city: city, state: state, auction: auction}\n",
                     persons);
    cr_assert(n > 0 && (size_t)n < sizeof spec);
    cr_assert_eq(eddy_write_file(spec_path, spec, (size_t)n), 0);
    size_t len;
    char *expected = nexmark_expected("q3", &len);
    start(spec_path);
    source_wait_t w = {"join2_source", n_persons};
    if (!eddy_poll_until(source_read, &w, 30000)) {
        char *l = log_text();
        cr_assert_fail("the persons file (%" PRId64 " lines) was never read to its end; log:\n%s",
                       n_persons, l);
    }
    kill_holder(spec_path, "step2_join", expected, len);
    free(expected);
}
