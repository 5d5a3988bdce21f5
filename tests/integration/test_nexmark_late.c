/* test_nexmark_late.c - late events of the nexmark job through the real
 * binary: `--late-output FILE` (DESIGN.md, "Nexmark") and the counter
 * eddy_late_records_total at /metrics.
 *
 * Which events are late depends on when watermarks were emitted (wall
 * clock), so a run is checked against itself: with out-of-order events and
 * no watermark delay, the late file must be a sub-multiset of the input's
 * lines, and the result must equal the reference over the input minus
 * exactly those lines (every event counted once: in the result or in the
 * late file); also after a worker was killed mid-run (exactly once across
 * a restore). Where the test needs the same late set in two runs it makes
 * lateness certain: a few bids of the first window with a price no other
 * bid has, put into the middle of an in-order file read at a capped rate,
 * arrive long after their window fired. They must be the late file,
 * exactly; without --late-output the result must still be the reference
 * without them and /metrics must count them while the job runs. A
 * watermark delay that covers the disorder leaves the late file empty. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/http_get.h"
#include "tests/support/nexmark_ref.h"
#include "tests/support/proc.h"

#define EVENTS "30000" /* 30 s of event time: 3 tumbling windows */

static eddy_test_cluster_t *cl;
static char *events_path, *kept_path, *output, *late_path;
static int ports[2];
static eddy_proc_t *job;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "nexmark-late", .workers = 2,
                                  .checkpoint_interval = "300", .heartbeat_ms = "",
                                  .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    events_path = eddy_test_cluster_path(cl, "events.csv");
    kept_path = eddy_test_cluster_path(cl, "kept.csv");
    output = eddy_test_cluster_path(cl, "out.tsv");
    late_path = eddy_test_cluster_path(cl, "late.csv");
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    job = eddy_test_cluster_local(cl);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(nexmark_late, .init = setup, .fini = teardown, .timeout = 400);

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void generate(const char *disorder)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_nexmark_generate(events_path, EVENTS, disorder, &err) == 0, "%s", err.msg);
}

/* ---- lines ---------------------------------------------------------------- */

typedef struct lines {
    char *text;
    char **at;
    size_t n;
} lines_t;

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The file's lines (a missing file: NULL text). Not sorted. */
static lines_t read_lines(const char *path)
{
    lines_t l = {0};
    l.text = eddy_read_file(path, NULL);
    if (!l.text)
        return l;
    size_t cap = 1024;
    l.at = malloc(cap * sizeof *l.at);
    for (char *p = l.text; *p;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        if (l.n == cap)
            l.at = realloc(l.at, (cap *= 2) * sizeof *l.at);
        l.at[l.n++] = p;
        if (!nl)
            break;
        p = nl + 1;
    }
    return l;
}

static void free_lines(lines_t *l)
{
    free(l->text);
    free(l->at);
    memset(l, 0, sizeof *l);
}

static void write_lines(const char *path, char *const *at, size_t n)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", at[i]);
    cr_assert_eq(fclose(f), 0);
}

/* Writes the events minus the late lines (as multisets) to kept_path;
 * fails unless every late line is one of the events. Sorts both. */
static void events_minus(lines_t *events, lines_t *late)
{
    qsort(events->at, events->n, sizeof *events->at, cmp_line);
    qsort(late->at, late->n, sizeof *late->at, cmp_line);
    char **kept = malloc((events->n ? events->n : 1) * sizeof *kept);
    size_t nk = 0, j = 0;
    for (size_t i = 0; i < events->n; i++) {
        int c = j < late->n ? strcmp(events->at[i], late->at[j]) : -1;
        cr_assert(c <= 0, "late line '%s' is not an input event (or is there more often)",
                  late->at[j]);
        if (c == 0)
            j++;
        else
            kept[nk++] = events->at[i];
    }
    cr_assert_eq(j, late->n, "late line '%s' is not an input event (or is there more often)",
                 j < late->n ? late->at[j] : "");
    /* The reference reads events in any order. */
    write_lines(kept_path, kept, nk);
    free(kept);
}

/* ---- runs ----------------------------------------------------------------- */

static void start_query(const char *query, const char *const *extra)
{
    const char *argv[48] = {"--quiet", "--job", "nexmark", "--query", query, "--input",
                            events_path, "--output", output};
    size_t n = 9;
    for (size_t i = 0; extra && extra[i] && n < 46; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    unlink(output);
    unlink(late_path);
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
}

static void wait_job(const char *query)
{
    int rc = eddy_proc_wait(job, 240000);
    cr_assert_eq(rc, 0, "eddy local (%s) exited %d; log:\n%s", query, rc, log_text());
}

/* --output must equal the reference over the events in `events`. */
static void expect_reference(const char *query, const char *events)
{
    eddy_ref_lines_t ref;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_nexmark_reference(query, events, &ref, &err), 0, "%s", err.msg);
    size_t el, gl;
    char *expected = eddy_ref_lines_join(&ref, &el);
    char *got = eddy_read_file(output, &gl);
    cr_assert(got, "%s wrote no output; log:\n%s", query, log_text());
    cr_assert(ref.count > 0, "%s: the reference has no rows: the test proves nothing", query);
    if (gl != el || memcmp(got, expected, el) != 0) {
        char path[700];
        snprintf(path, sizeof path, "/tmp/eddy-nexmark-late-%s.expected", query);
        eddy_write_file(path, expected, el);
        cr_assert_fail("%s: output (%zu bytes) differs from the reference over the events "
                       "without the late ones (%zu bytes, %zu rows; written to %s)",
                       query, gl, el, ref.count, path);
    }
    free(expected);
    free(got);
    eddy_ref_lines_free(&ref);
}

/* The late file is in byte order, one line per late event. */
static lines_t read_late(const char *query)
{
    size_t len;
    char *raw = eddy_read_file(late_path, &len);
    cr_assert(raw, "%s wrote no late file; log:\n%s", query, log_text());
    cr_assert(len == 0 || raw[len - 1] == '\n', "%s: the late file does not end in a newline",
              query);
    free(raw);
    lines_t late = read_lines(late_path);
    for (size_t i = 1; i < late.n; i++)
        cr_assert(strcmp(late.at[i - 1], late.at[i]) <= 0, "%s: late file not sorted at '%s'",
                  query, late.at[i]);
    return late;
}

/* Every late line is an input event, and the result is the reference over
 * the rest: each event counted exactly once. Returns the late count. */
static size_t expect_accounted(const char *query)
{
    lines_t late = read_late(query), events = read_lines(events_path);
    cr_assert(events.n > 0);
    events_minus(&events, &late);
    expect_reference(query, kept_path);
    size_t n = late.n;
    free_lines(&late);
    free_lines(&events);
    return n;
}

/* ---- /metrics ------------------------------------------------------------- */

/* The sum of eddy_late_records_total over the job's tasks; -1 when /metrics
 * does not answer (not up yet, or the job ended). */
static long long late_metric(void)
{
    return eddy_test_scrape_sum(ports[1], "eddy_late_records_total{job=\"nexmark\"");
}

/* The largest late count /metrics showed while the job ran. */
static long long watch_late_metric(void)
{
    long long max = -1;
    while (eddy_proc_alive(job)) {
        long long v = late_metric();
        if (v > max)
            max = v;
        eddy_nap_ms(100);
    }
    return max;
}

/* ---- certain late events -------------------------------------------------- */

#define PLANTED 5

static int cmp_planted(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Puts PLANTED bids into the in-order events file, at 40% of its bytes
 * (the first source instance's half): copies of the first bid with date
 * times in the first 10 s window and a price above every generated one.
 * Reading at 4000 events/s (2000 per instance), the first window fired
 * seconds of wall time earlier. Returns them, sorted, in planted[]. */
static void plant_late_bids(char planted[PLANTED][256])
{
    size_t len;
    char *text = eddy_read_file(events_path, &len);
    cr_assert(text && len > 0);
    char *bid = strstr(text, "\nB,");
    cr_assert(bid, "no bid in the events");
    bid++;
    long long dt, auction, bidder, price;
    char channel[64];
    cr_assert_eq(sscanf(bid, "B,%lld,%lld,%lld,%lld,%63[^\n]", &dt, &auction, &bidder, &price,
                        channel),
                 5);
    long long window_end = (dt / 10000 + 1) * 10000;
    for (int i = 0; i < PLANTED; i++) {
        long long t = dt + (window_end - 1 - dt) * i / PLANTED;
        snprintf(planted[i], 256, "B,%lld,%lld,%lld,%lld,%s", t, auction, bidder,
                 999999999999LL - i, channel);
    }
    qsort(planted, PLANTED, sizeof planted[0], cmp_planted);
    char *cut = strchr(text + len * 4 / 10, '\n');
    cr_assert(cut);
    cut++;
    FILE *f = fopen(events_path, "w");
    cr_assert(f);
    fwrite(text, 1, (size_t)(cut - text), f);
    for (int i = 0; i < PLANTED; i++)
        fprintf(f, "%s\n", planted[i]);
    fwrite(cut, 1, len - (size_t)(cut - text), f);
    cr_assert_eq(fclose(f), 0);
    /* The reference for both runs: the events as generated. */
    f = fopen(kept_path, "w");
    cr_assert(f);
    fwrite(text, 1, len, f);
    cr_assert_eq(fclose(f), 0);
    free(text);
}

/* ---- tests ---------------------------------------------------------------- */

/* Out of order by up to 3 s, no watermark delay, read at a capped rate so
 * that watermarks come while the file is read: many events are late. */
Test(nexmark_late, every_event_is_in_the_result_or_the_late_file_once)
{
    generate("3000");
    const char *queries[] = {"q7", "q8", "q4"};
    const char *extra[] = {"--max-delay-ms", "0", "--rate", "10000", "--late-output", late_path,
                           NULL};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        start_query(queries[i], extra);
        wait_job(queries[i]);
        size_t n = expect_accounted(queries[i]);
        cr_assert_gt(n, 0, "%s: no event was late: the test proves nothing", queries[i]);
    }
}

/* A worker killed with SIGKILL mid-run: the job restores from its last
 * checkpoint; late events are still each written once and the result is
 * the reference over the others. */
Test(nexmark_late, a_killed_worker_neither_loses_nor_repeats_late_events)
{
    generate("3000");
    const char *extra[] = {"--max-delay-ms", "0", "--rate", "4000", "--late-output", late_path,
                           NULL};
    start_query("q7", extra);
    cr_assert(eddy_test_kill_worker_after(ports[0], "nexmark", 2, 30000, job) > 0,
              "no worker killed after two checkpoints; log:\n%s", log_text());
    wait_job("q7");
    char *log = log_text();
    cr_assert(strstr(log, "restoring from checkpoint"), "the job was not restored after the kill; log:\n%s", log);
    free(log);
    cr_assert_gt(expect_accounted("q7"), 0, "no event was late: the test proves nothing");
}

/* Certain late events: the same in every run. With --late-output they are
 * the late file exactly; without it they are dropped, and either way the
 * result is the reference over the events without them and /metrics
 * counts them while the job runs. */
Test(nexmark_late, planted_late_bids_are_the_late_file_and_are_counted_at_metrics)
{
    generate("0");
    char planted[PLANTED][256];
    plant_late_bids(planted);
    const char *with[] = {"--max-delay-ms", "0", "--rate", "4000", "--late-output", late_path,
                          NULL};
    start_query("q7", with);
    long long seen = watch_late_metric();
    wait_job("q7");
    lines_t late = read_late("q7");
    cr_assert_eq(late.n, PLANTED, "late file has %zu lines, %d planted; log:\n%s", late.n, PLANTED,
                 log_text());
    for (int i = 0; i < PLANTED; i++)
        cr_assert_str_eq(late.at[i], planted[i]);
    free_lines(&late);
    expect_reference("q7", kept_path);
    cr_assert_eq(seen, PLANTED, "/metrics showed eddy_late_records_total %lld while the job ran",
                 seen);

    const char *without[] = {"--max-delay-ms", "0", "--rate", "4000", NULL};
    start_query("q7", without);
    seen = watch_late_metric();
    wait_job("q7");
    expect_reference("q7", kept_path);
    cr_assert(eddy_read_file(late_path, NULL) == NULL, "a late file without --late-output");
    cr_assert_eq(seen, PLANTED, "/metrics showed eddy_late_records_total %lld while the job ran",
                 seen);
}

/* A watermark delay at least the disorder: nothing is late, the late file
 * is written and empty, and the result is the reference over every event. */
Test(nexmark_late, a_delay_covering_the_disorder_leaves_the_late_file_empty)
{
    generate("3000");
    const char *extra[] = {"--max-delay-ms", "3000", "--rate", "10000", "--late-output",
                           late_path, NULL};
    const char *queries[] = {"q7", "q4"};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        start_query(queries[i], extra);
        wait_job(queries[i]);
        size_t len = 1;
        char *late = eddy_read_file(late_path, &len);
        cr_assert(late, "%s wrote no late file; log:\n%s", queries[i], log_text());
        cr_assert_eq(len, 0, "%s: late file not empty: %.200s", queries[i], late);
        free(late);
        expect_reference(queries[i], events_path);
    }
}

Test(nexmark_late, late_output_for_a_query_without_late_events_is_a_clear_error)
{
    const char *argv[] = {EDDY_BINARY, "local", "--job", "nexmark", "--query", "q1", "--events",
                          "10", "--late-output", late_path, NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run((char *const *)argv, 30000, &out, &errout);
    cr_assert_eq(rc, 2, "exit %d", rc);
    cr_assert(errout && strstr(errout, "--late-output: nothing is late in q1"), "stderr: %s",
              errout ? errout : "");
    free(out);
    free(errout);
}
