/* test_pipelines.c - declarative pipelines through the real binary:
 * `eddy local --pipeline examples/pipelines/qN.yaml --input EVENTS --output
 * OUT` over generated Nexmark events must equal the reference
 * (tests/support/nexmark_ref.c), optimised and with --no-optimize; `eddy
 * plan --pipeline` shows the rewrites with their reasons; a bad spec is
 * exit 2 with file, line and field; the adaptive filter order switches
 * when written in a bad order and says so in the log. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/nexmark_ref.h"
#include "tests/support/proc.h"

static eddy_test_cluster_t *cl;
static char *dir, *events_path, *output;

/* eddy local runs with eddy's own checkpoint and heartbeat timing. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "pipelines", .workers = 2, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    events_path = eddy_test_cluster_path(cl, "events.csv");
    output = eddy_test_cluster_path(cl, "out.tsv");
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(pipelines, .init = setup, .fini = teardown, .timeout = 300);

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void generate(const char *events)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_nexmark_generate(events_path, events, NULL, &err) == 0, "%s", err.msg);
}

/* eddy local --pipeline SPEC --input EVENTS --output OUT [extra]; returns
 * its exit status. */
static int run_pipeline(const char *spec, const char *const *extra)
{
    const char *argv[32] = {"--pipeline", spec, "--input", /* INFO lines read */
                            events_path, "--output", output};
    size_t n = 6;
    for (size_t i = 0; extra && extra[i] && n < 30; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    eddy_err_t err = {{0}};
    return eddy_test_cluster_run_local(cl, argv, 240000, &err);
}

static void expect_reference(const char *query)
{
    eddy_ref_lines_t ref;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_nexmark_reference(query, events_path, &ref, &err), 0, "%s", err.msg);
    size_t el, gl;
    char *expected = eddy_ref_lines_join(&ref, &el);
    char *got = eddy_read_file(output, &gl);
    cr_assert(got, "%s wrote no output; log:\n%s", query, log_text());
    cr_assert(ref.count > 0, "%s: the reference has no rows: the test proves nothing", query);
    cr_assert(gl == el && memcmp(got, expected, el) == 0,
              "%s: pipeline output (%zu bytes) differs from the reference (%zu bytes)", query, gl, el);
    free(expected);
    free(got);
    eddy_ref_lines_free(&ref);
}

static void spec_path(const char *query, char *out, size_t size)
{
    snprintf(out, size, "%s/examples/pipelines/%s.yaml", EDDY_SOURCE_DIR, query);
}

Test(pipelines, nexmark_specs_equal_the_reference)
{
    generate("30000");
    const char *queries[] = {"q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q11"};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        char spec[700];
        spec_path(queries[i], spec, sizeof spec);
        int rc = run_pipeline(spec, NULL);
        cr_assert_eq(rc, 0, "%s exited %d; log:\n%s", queries[i], rc, log_text());
        expect_reference(queries[i]);
        rc = run_pipeline(spec, (const char *[]){"--no-optimize", NULL});
        cr_assert_eq(rc, 0, "%s --no-optimize exited %d; log:\n%s", queries[i], rc, log_text());
        expect_reference(queries[i]);
    }
}

Test(pipelines, plan_shows_each_rewrite_and_why)
{
    char spec[700];
    spec_path("q2", spec, sizeof spec);
    char *argv[] = {EDDY_BINARY, "plan", "--pipeline", spec, "--input", "/dev/null", NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 60000, &out, &errout);
    cr_assert_eq(rc, 0, "eddy plan exited %d: %s", rc, errout ? errout : "");
    cr_assert(strstr(out, "pipeline steps as written:"), "%s", out);
    cr_assert(strstr(out, "after optimization (1 operator):"), "%s", out);
    cr_assert(strstr(out, "filter before map: steps[2] (filter, line 15) now runs before steps[1] "
                          "(map, line 12): it reads only columns the map passes through unchanged"),
              "%s", out);
    cr_assert(strstr(out, "fusion:"), "%s", out);
    free(out);
    free(errout);
}

Test(pipelines, bad_specs_name_file_line_and_field)
{
    char spec[700];
    snprintf(spec, sizeof spec, "%s/bad.yaml", dir);
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"source: {format: csv, columns: [a, b]}\nsteps:\n  - filter: c > 1\n",
         "bad.yaml:3: steps[0].filter: column 1: unknown field 'c'"},
        {"source: {format: csv, columns: [a]}\nsteps:\n  - fliter: a\n",
         "bad.yaml:3: steps[0]: unknown key 'fliter'"},
        {"source: {format: csv, columns: [a]}\nsteps:\n  - map: {x: lowr(a)}\n",
         "bad.yaml:3: steps[0].map.x: column 1: unknown function 'lowr'"},
        {"source: [\n", "bad.yaml:"},
        /* type mismatch */
        {"source: {format: csv, columns: [a]}\nsteps:\n  - filter: a + 1\n",
         "bad.yaml:3: steps[0].filter: type mismatch: 'a + 1' is a number, a boolean is needed here"},
        {"source: {format: csv, columns: [a]}\nparallelism: two\n",
         "bad.yaml:2: parallelism: 'two' is not a number"},
        /* missing source */
        {"name: x\nsteps:\n  - filter: a\n", "bad.yaml:1: source: missing"},
        /* top_k's arity and K (a constant 1..16) */
        {"source: {format: csv, columns: [a, b]}\nsteps:\n  - key_by: a\n  - aggregate:\n"
         "      t: top_k(b)\n",
         "bad.yaml:5: steps[1].aggregate.t: top_k takes 2 arguments, (EXPR, K)"},
        {"source: {format: csv, columns: [a, b]}\nsteps:\n  - key_by: a\n  - aggregate:\n"
         "      t: top_k(b, 2, 3)\n",
         "bad.yaml:5: steps[1].aggregate.t: top_k takes 2 arguments"},
        {"source: {format: csv, columns: [a, b]}\nsteps:\n  - key_by: a\n  - aggregate:\n"
         "      t: top_k(b, 17)\n",
         "bad.yaml:5: steps[1].aggregate.t: top_k's K must be an integer constant in 1..16"},
        {"source: {format: csv, columns: [a, b]}\nsteps:\n  - key_by: a\n  - aggregate:\n"
         "      t: top_k(b, a)\n",
         "bad.yaml:5: steps[1].aggregate.t: top_k's K must be an integer constant"},
        /* joins, plugins, parallelism */
        {"source: {format: csv, columns: [a, t]}\nsteps:\n  - join: {on: a}\n",
         "bad.yaml:3: steps[0].join: needs with"},
        {"source: {format: csv, columns: [a, t]}\nsteps:\n  - join:\n      on: a\n"
         "      with: {steps: [{filter: b == 1}]}\n",
         "bad.yaml:5: steps[0].join.with.steps[0].filter: column 1: unknown field 'b'"},
        {"source: {format: csv, columns: [a, t]}\nsteps:\n  - join:\n      on: a\n      with: {}\n"
         "      window: {size: 10s, time: lower(t)}\n",
         "bad.yaml:6: steps[0].join.window.time: type mismatch"},
        {"source: {format: csv, columns: [a, t]}\nsteps:\n  - join:\n      on: a\n      with: {}\n"
         "      window: {from: t, time: t}\n",
         "bad.yaml:6: steps[0].join.window: an interval window needs both from and to"},
        {"source: {format: csv, columns: [a]}\nsteps:\n  - map: {x: a}\n    max_parallelism: 64\n",
         "bad.yaml:4: steps[0].max_parallelism: only keyed steps (join, key_by, window, aggregate, "
         "max_by) have key groups"},
        /* joins next to keyed sections */
        {"source: {format: csv, columns: [a, t]}\nsteps:\n  - join:\n      on: a\n"
         "      with: {steps: [{key_by: a}]}\n",
         "bad.yaml:5: steps[0].join.with.steps[0].key_by: a join's other side has no keyed steps"},
        {"source: {format: csv, columns: [a, t]}\nsteps:\n  - key_by: a\n  - join: {on: a, with: {}}\n"
         "  - aggregate: {n: count()}\n",
         "bad.yaml:4: steps[1].join: cannot run between a key_by and its aggregate or max_by"},
        {"source: {format: csv, columns: [a, t]}\nsteps:\n  - join: {on: a, with: {}}\n"
         "    max_parallelism: 64\n  - key_by: a\n  - aggregate: {n: count()}\n    max_parallelism: 32\n",
         "bad.yaml:6: steps[2].max_parallelism: 32, but an earlier keyed step says 64"},
        {"source: {format: csv, columns: [a]}\nsteps:\n  - filter: a == 1\n    parallelism: 0\n",
         "bad.yaml:4: steps[0].parallelism: '0' is not a number in 1..32768"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(eddy_write_file(spec, cases[i].text, strlen(cases[i].text)), 0);
        char *argv[] = {EDDY_BINARY, "local", "--pipeline", spec, "--input", "/dev/null", NULL};
        char *out = NULL, *errout = NULL;
        int rc = eddy_proc_run(argv, 60000, &out, &errout);
        cr_assert_eq(rc, 2, "case %zu: exit %d (%s)", i, rc, errout ? errout : "");
        cr_assert(errout && strstr(errout, cases[i].want), "case %zu: '%s' does not say '%s'", i,
                  errout ? errout : "", cases[i].want);
        free(out);
        free(errout);
    }
    char *argv[] = {EDDY_BINARY, "local", "--pipeline", "/nonexistent.yaml", NULL};
    char *out = NULL, *errout = NULL;
    cr_assert_eq(eddy_proc_run(argv, 60000, &out, &errout), 2);
    cr_assert(strstr(errout, "--pipeline /nonexistent.yaml: No such file"), "%s", errout);
    free(out);
    free(errout);
}

/* Both feature sets in one job: q3's join, then a key_by and a whole-input
 * aggregate over the joined rows, each at its own parallelism, keyed steps
 * agreeing on max_parallelism. Must equal q3's reference rows counted per
 * state (computed here from the reference, not by eddy). */
Test(pipelines, join_then_aggregate_counts_q3_per_state)
{
    generate("30000");
    char spec[700];
    snprintf(spec, sizeof spec, "%s/q3_by_state.yaml", dir);
    const char *text =
        "source:\n"
        "  format: csv\n"
        "  ragged: true\n"
        "  columns: [event, date_time, f2, f3, f4, f5, f6, f7, f8]\n"
        "steps:\n"
        "  - filter: event == 'A' and f8 == '10'\n"
        "  - map: {seller: f7, auction: f2}\n"
        "  - join:\n"
        "      with:\n"
        "        steps:\n"
        "          - filter: event == 'P' and (f7 == 'OR' or f7 == 'ID' or f7 == 'CA')\n"
        "          - map: {id: f2, name: f3, city: f6, state: f7}\n"
        "      left_key: seller\n"
        "      right_key: id\n"
        "    parallelism: 3\n"
        "    max_parallelism: 64\n"
        "  - key_by: state\n"
        "    parallelism: 1\n"
        "  - aggregate: {n: count()}\n"
        "    parallelism: 2\n"
        "    max_parallelism: 64\n";
    cr_assert_eq(eddy_write_file(spec, text, strlen(text)), 0);
    eddy_ref_lines_t ref;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_nexmark_reference("q3", events_path, &ref, &err), 0, "%s", err.msg);
    cr_assert(ref.count > 0, "q3's reference has no rows: the test proves nothing");
    /* q3's rows: name, city, state, auction. */
    const char *states[] = {"CA", "ID", "OR"}; /* byte order, as the sink sorts */
    size_t counts[3] = {0, 0, 0};
    for (size_t i = 0; i < ref.count; i++) {
        const char *p = strchr(ref.items[i], '\t');
        p = p ? strchr(p + 1, '\t') : NULL;
        cr_assert(p, "q3 row '%s' has no state", ref.items[i]);
        for (size_t s = 0; s < 3; s++)
            counts[s] += !strncmp(p + 1, states[s], 2) && p[3] == '\t';
    }
    char expected[128] = "";
    for (size_t s = 0; s < 3; s++)
        if (counts[s])
            snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s\t%zu\n",
                     states[s], counts[s]);
    eddy_ref_lines_free(&ref);
    for (int pass = 0; pass < 2; pass++) {
        int rc = run_pipeline(spec, pass ? (const char *[]){"--no-optimize", NULL} : NULL);
        cr_assert_eq(rc, 0, "pass %d: exit %d; log:\n%s", pass, rc, log_text());
        char *got = eddy_read_file(output, NULL);
        cr_assert(got, "pass %d: no output; log:\n%s", pass, log_text());
        cr_assert_str_eq(got, expected, "pass %d", pass);
        free(got);
    }
}

/* Writes dir/name: a spec over the Nexmark events whose steps keep the
 * bids as (auction, price) and then run more_steps; its path into path. */
static void write_bids_spec(const char *name, const char *more_steps, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", dir, name);
    char text[2048];
    snprintf(text, sizeof text,
             "source:\n"
             "  format: csv\n"
             "  ragged: true\n"
             "  columns: [event, date_time, auction, bidder, price, f5, f6, f7, f8]\n"
             "steps:\n"
             "  - filter: event == 'B'\n"
             "  - map: {auction: auction, price: price}\n"
             "%s",
             more_steps);
    cr_assert_eq(eddy_write_file(path, text, strlen(text)), 0);
}

/* Filters in a bad order the static optimizer cannot see: a cheap test
 * that passes nearly every event before an equally cheap one that passes
 * about 1%. The eddy must move the selective one first (and log it), and
 * the output must not change. */
Test(pipelines, adaptive_order_moves_the_selective_filter_first)
{
    generate("30000");
    char spec[700];
    write_bids_spec("adaptive.yaml", "  - filter: price >= 0\n  - filter: auction % 123 == 0\n",
                    spec, sizeof spec);
    int rc = run_pipeline(spec, (const char *[]){"--parallelism", "1", NULL});
    char *log = log_text();
    cr_assert_eq(rc, 0, "exit %d; log:\n%s", rc, log);
    cr_assert(strstr(log, "filters now run as 'auction % 123 == 0'"),
              "no adaptive reorder in the log:\n%s", log);
    free(log);
    expect_reference("q2");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A plugin operator as a step, by name with its config: q2's rows through
 * the test plugin's "test_tag_row" (appends a column: tag repeated times
 * times), then a filter on that column - equals q2's reference with the
 * column added, so the plugin ran, with its config, where the spec says. */
Test(pipelines, plugin_step_runs_the_named_operator_with_its_config)
{
    generate("20000");
    char spec[700];
    write_bids_spec("plugin.yaml",
                    "  - filter: auction % 123 == 0\n"
                    "  - plugin: test_tag_row\n"
                    "    config: {tag: ab, times: 2}\n"
                    "    columns: [auction, price, tag]\n"
                    "    parallelism: 1\n"
                    "  - filter: tag == 'abab'\n",
                    spec, sizeof spec);
    int rc = run_pipeline(spec, (const char *[]){"--plugin", EDDY_BINARY_DIR
                                                 "/test-plugins/libtest_plugin_row.so", NULL});
    cr_assert_eq(rc, 0, "exit %d; log:\n%s", rc, log_text());
    eddy_ref_lines_t ref;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_nexmark_reference("q2", events_path, &ref, &err), 0, "%s", err.msg);
    cr_assert(ref.count > 0);
    size_t total = 1;
    for (size_t i = 0; i < ref.count; i++) {
        char *tagged = malloc(strlen(ref.items[i]) + 6);
        sprintf(tagged, "%s\tabab", ref.items[i]);
        free(ref.items[i]);
        ref.items[i] = tagged;
        total += strlen(tagged) + 1;
    }
    qsort(ref.items, ref.count, sizeof *ref.items, cmp_str);
    char *expected = calloc(1, total);
    for (size_t i = 0; i < ref.count; i++)
        strcat(strcat(expected, ref.items[i]), "\n");
    char *got = eddy_read_file(output, NULL);
    cr_assert(got, "no output; log:\n%s", log_text());
    cr_assert_str_eq(got, expected);
    free(got);
    free(expected);
    eddy_ref_lines_free(&ref);

    /* A kind nobody registered: the spec's line, exit 2. */
    const char *bad = "source: {format: csv, columns: [a]}\nsteps:\n  - plugin: no_such_kind\n";
    cr_assert_eq(eddy_write_file(spec, bad, strlen(bad)), 0);
    char *argv[] = {EDDY_BINARY, "local", "--pipeline", spec, "--input", "/dev/null", NULL};
    char *out = NULL, *errout = NULL;
    cr_assert_eq(eddy_proc_run(argv, 60000, &out, &errout), 2, "%s", errout ? errout : "");
    cr_assert(errout && strstr(errout, "plugin.yaml:3: steps[0].plugin: no operator kind "
                                       "'no_such_kind'"), "%s", errout ? errout : "");
    free(out);
    free(errout);
}
