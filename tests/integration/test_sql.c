/* test_sql.c - streaming SQL through the real binary: `eddy local --sql
 * examples/sql/qN.sql --input EVENTS --output OUT` over generated Nexmark
 * events must give the reference's rows (tests/support/nexmark_ref.c), with
 * its epoch-millisecond columns written as SQL's TIMESTAMP(3) text; a bad
 * script is exit 2 with FILE:LINE:COLUMN, the line and a caret, before
 * anything starts. UNION ALL and SELECT DISTINCT are checked against rows
 * made from q2's reference (each row twice; each distinct auction once).
 * EXPLAIN in a script run by eddy local prints the plan and starts
 * nothing. A CUMULATE window's counts and sums are checked against ones
 * summed here from the events file. Kept small (10000 events, one run per query): CI time. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/support/cluster.h"
#include "tests/support/nexmark_ref.h"
#include "tests/support/proc.h"

static eddy_test_cluster_t *cl;
static char *dir, *events_path, *output;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "sql", .workers = 2, .checkpoint_interval = "",
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

TestSuite(sql, .init = setup, .fini = teardown, .timeout = 300);

/* ms as "YYYY-MM-DD HH:MM:SS.mmm" (UTC), SQL's TIMESTAMP(3) text. */
static void timestamp_text(const char *ms_text, char *out, size_t size)
{
    long long ms = atoll(ms_text);
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char day[40];
    strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out, size, "%s.%03lld", day, ms % 1000);
}

static int cmp_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The reference rows of query with the columns in ts (a -1-terminated
 * list) as TIMESTAMP(3) text, byte-sorted, as one text. */
static char *expected_rows(const char *query, const int *ts, size_t *len)
{
    eddy_ref_lines_t ref;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_nexmark_reference(query, events_path, &ref, &err), 0, "%s", err.msg);
    cr_assert(ref.count > 0, "%s: the reference has no rows: the test proves nothing", query);
    for (size_t i = 0; i < ref.count; i++) {
        char line[1024] = "", *save = NULL, *copy = strdup(ref.items[i]);
        int col = 0;
        for (char *f = strtok_r(copy, "\t", &save); f; f = strtok_r(NULL, "\t", &save), col++) {
            char field[64];
            bool is_ts = false;
            for (const int *t = ts; *t >= 0; t++)
                is_ts |= *t == col;
            if (is_ts)
                timestamp_text(f, field, sizeof field);
            snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s", col ? "\t" : "",
                     is_ts ? field : f);
        }
        free(copy);
        free(ref.items[i]);
        ref.items[i] = strdup(line);
    }
    qsort(ref.items, ref.count, sizeof *ref.items, cmp_bytes);
    char *text = eddy_ref_lines_join(&ref, len);
    eddy_ref_lines_free(&ref);
    return text;
}

Test(sql, nexmark_queries_equal_the_reference)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_nexmark_generate(events_path, "10000", NULL, &err) == 0, "%s", err.msg);
    static const struct {
        const char *query;
        int ts[4]; /* the reference's epoch-ms columns, -1 ends */
    } cases[] = {
        {"q0", {3, -1}},    {"q1", {3, -1}},    {"q2", {-1}},       {"q3", {-1}},
        {"q5", {0, 1, -1}}, {"q7", {0, 1, 5, -1}}, {"q8", {2, -1}},  {"q11", {2, 3, -1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sql[700];
        snprintf(sql, sizeof sql, "%s/examples/sql/%s.sql", EDDY_SOURCE_DIR, cases[i].query);
        const char *argv[] = {"--sql", sql, "--input", events_path, "--output", output, NULL};
        int rc = eddy_test_cluster_run_local(cl, argv, 120000, &err);
        cr_assert_eq(rc, 0, "%s exited %d; log:\n%s", cases[i].query, rc,
                     eddy_test_cluster_log_text(cl));
        size_t el, gl;
        char *expected = expected_rows(cases[i].query, cases[i].ts, &el);
        char *got = eddy_read_file(output, &gl);
        cr_assert(got, "%s wrote no output", cases[i].query);
        cr_assert(gl == el && memcmp(got, expected, el) == 0,
                  "%s: SQL output (%zu bytes) differs from the reference (%zu bytes):\n%.300s\n"
                  "--- expected:\n%.300s", cases[i].query, gl, el, got, expected);
        free(expected);
        free(got);
    }
}

Test(sql, bad_scripts_exit_2_with_line_column_and_caret)
{
    char path[700];
    snprintf(path, sizeof path, "%s/bad.sql", dir);
    const char *text = "-- a typo\nINSERT INTO t\nSELECT auction, prise FROM bid;\n";
    cr_assert_eq(eddy_write_file(path, text, strlen(text)), 0);
    const char *subs[] = {"local", "plan"};
    for (size_t i = 0; i < 2; i++) {
        char *argv[] = {EDDY_BINARY, (char *)subs[i], "--sql", path, "--input", "/dev/null", NULL};
        char *out = NULL, *errout = NULL;
        int rc = eddy_proc_run(argv, 60000, &out, &errout);
        cr_assert_eq(rc, 2, "%s: exit %d (%s)", subs[i], rc, errout ? errout : "");
        cr_assert(errout && strstr(errout, "bad.sql:2:13: unknown table 't'"), "%s", errout);
        free(out);
        free(errout);
    }
    text = "CREATE TABLE t (a BIGINT) WITH ('connector' = 'print');\n"
           "INSERT INTO t\nSELECT auction, prise FROM bid;\n";
    cr_assert_eq(eddy_write_file(path, text, strlen(text)), 0);
    char *argv[] = {EDDY_BINARY, "local", "--sql", path, "--input", "/dev/null", NULL};
    char *out = NULL, *errout = NULL;
    cr_assert_eq(eddy_proc_run(argv, 60000, &out, &errout), 2, "%s", errout);
    cr_assert(strstr(errout, "bad.sql:3:17: unknown column 'prise' (did you mean 'price'?)\n"
                             "  SELECT auction, prise FROM bid;\n"
                             "                  ^"),
              "%s", errout);
    free(out);
    free(errout);
}

/* The rows of script (a file in the test's directory) run by eddy local. */
static char *run_script(const char *name, const char *script, size_t *len)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(eddy_write_file(path, script, strlen(script)), 0);
    eddy_err_t err = {{0}};
    const char *argv[] = {"--sql", path, "--input", events_path, "--output", output, NULL};
    int rc = eddy_test_cluster_run_local(cl, argv, 120000, &err);
    cr_assert_eq(rc, 0, "%s exited %d; log:\n%s", name, rc, eddy_test_cluster_log_text(cl));
    char *got = eddy_read_file(output, len);
    cr_assert(got, "%s wrote no output", name);
    return got;
}

/* ref's lines (taken), sorted, as one text. */
static char *sorted_text(eddy_ref_lines_t *ref, size_t *len)
{
    qsort(ref->items, ref->count, sizeof *ref->items, cmp_bytes);
    char *text = eddy_ref_lines_join(ref, len);
    eddy_ref_lines_free(ref);
    return text;
}

Test(sql, union_all_and_distinct_equal_rows_made_from_the_reference)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_nexmark_generate(events_path, "10000", NULL, &err) == 0, "%s", err.msg);
    eddy_ref_lines_t q2;
    cr_assert_eq(eddy_nexmark_reference("q2", events_path, &q2, &err), 0, "%s", err.msg);
    cr_assert(q2.count > 1, "q2's reference has too few rows to prove anything");
    /* UNION ALL of q2 with itself: every row twice */
    eddy_ref_lines_t twice = {calloc(2 * q2.count, sizeof(char *)), 0};
    for (size_t i = 0; i < q2.count; i++) {
        twice.items[twice.count++] = strdup(q2.items[i]);
        twice.items[twice.count++] = strdup(q2.items[i]);
    }
    /* DISTINCT auction: each first field once */
    eddy_ref_lines_t auctions = {calloc(q2.count, sizeof(char *)), 0};
    for (size_t i = 0; i < q2.count; i++) {
        char *a = strndup(q2.items[i], strcspn(q2.items[i], "\t"));
        bool seen = false;
        for (size_t k = 0; k < auctions.count && !seen; k++)
            seen = !strcmp(auctions.items[k], a);
        if (seen)
            free(a);
        else
            auctions.items[auctions.count++] = a;
    }
    cr_assert(auctions.count < q2.count, "no auction has two bids: DISTINCT proves nothing");
    eddy_ref_lines_free(&q2);
    static const char *const scripts[2] = {
        "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0\n"
        "UNION ALL\n"
        "SELECT auction, price FROM bid WHERE auction % 123 = 0;\n",
        "SELECT DISTINCT auction FROM bid WHERE MOD(auction, 123) = 0;\n",
    };
    eddy_ref_lines_t *want[2] = {&twice, &auctions};
    for (int i = 0; i < 2; i++) {
        size_t el, gl;
        char *expected = sorted_text(want[i], &el);
        char *got = run_script(i ? "distinct.sql" : "union.sql", scripts[i], &gl);
        cr_assert(gl == el && memcmp(got, expected, el) == 0,
                  "%s: SQL output (%zu bytes) differs from the expected (%zu bytes):\n%.300s\n"
                  "--- expected:\n%.300s", i ? "DISTINCT" : "UNION ALL", gl, el, got, expected);
        free(expected);
        free(got);
    }
}

Test(sql, explain_in_eddy_local_prints_the_plan_and_starts_nothing)
{
    char path[700];
    snprintf(path, sizeof path, "%s/explain.sql", dir);
    const char *text = "CREATE TABLE s (auction BIGINT) WITH ('connector' = 'print');\n"
                       "EXPLAIN PLAN FOR INSERT INTO s SELECT auction FROM bid WHERE price > 9;\n";
    cr_assert_eq(eddy_write_file(path, text, strlen(text)), 0);
    char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--sql", path, "--input", "/dev/null",
                    NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 60000, &out, &errout);
    cr_assert_eq(rc, 0, "exit %d (%s)", rc, errout ? errout : "");
    cr_expect(out && strstr(out, "pipeline steps as written:") &&
                  strstr(out, "filter (price > 9)   (line 2)"), "%s", out ? out : "");
    cr_expect(errout && !strstr(errout, "worker"), "something started: %s", errout);
    free(out);
    free(errout);
}

/* Per cumulating window (size 4 s, a window ending every second) of the
 * bids in events_path: "START<TAB>END<TAB>COUNT<TAB>SUM" lines as text. */
static char *cumulate_rows(size_t *len)
{
    enum { SIZE = 4000, STEP = 1000, K = SIZE / STEP, MAX_WINDOWS = 4096 };
    static long long count[MAX_WINDOWS][K], sum[MAX_WINDOWS][K];
    memset(count, 0, sizeof count);
    memset(sum, 0, sizeof sum);
    size_t n;
    char *text = eddy_read_file(events_path, &n), *save = NULL;
    cr_assert(text);
    long long base = -1;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        long long t, price;
        if (sscanf(line, "B,%lld,%*[^,],%*[^,],%lld", &t, &price) != 2)
            continue;
        long long start = t - t % SIZE;
        if (base < 0)
            base = start; /* the generated events are in time order */
        long long w = (start - base) / SIZE;
        cr_assert(w >= 0 && w < MAX_WINDOWS, "bid at %lld", t);
        for (int k = 0; k < K; k++)
            if (start + (k + 1) * STEP > t) {
                count[w][k]++;
                sum[w][k] += price;
            }
    }
    free(text);
    eddy_ref_lines_t lines = {calloc(MAX_WINDOWS * K, sizeof(char *)), 0};
    for (long long w = 0; w < MAX_WINDOWS; w++)
        for (int k = 0; k < K; k++) {
            if (!count[w][k])
                continue;
            char start[40], end[40], ms[32], line[160];
            snprintf(ms, sizeof ms, "%lld", base + w * SIZE);
            timestamp_text(ms, start, sizeof start);
            snprintf(ms, sizeof ms, "%lld", base + w * SIZE + (k + 1) * STEP);
            timestamp_text(ms, end, sizeof end);
            snprintf(line, sizeof line, "%s\t%s\t%lld\t%lld", start, end, count[w][k], sum[w][k]);
            lines.items[lines.count++] = strdup(line);
        }
    cr_assert(lines.count > K, "too few windows to prove anything");
    return sorted_text(&lines, len);
}

Test(sql, cumulate_windows_equal_sums_made_from_the_events)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_nexmark_generate(events_path, "10000", NULL, &err) == 0, "%s", err.msg);
    size_t el, gl;
    char *expected = cumulate_rows(&el);
    char *got = run_script("cumulate.sql",
                           "SELECT window_start, window_end, COUNT(*), SUM(price)\n"
                           "FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(dateTime),\n"
                           "                    INTERVAL '1' SECOND, INTERVAL '4' SECOND))\n"
                           "GROUP BY window_start, window_end;\n", &gl);
    cr_assert(gl == el && memcmp(got, expected, el) == 0,
              "CUMULATE: SQL output (%zu bytes) differs from the expected (%zu bytes):\n%.400s\n"
              "--- expected:\n%.400s", gl, el, got, expected);
    free(expected);
    free(got);
}
