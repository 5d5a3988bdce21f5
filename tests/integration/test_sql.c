/* test_sql.c - streaming SQL through the real binary: `eddy local --sql
 * examples/sql/qN.sql --input EVENTS --output OUT` over generated Nexmark
 * events must give the reference's rows (tests/support/nexmark_ref.c), with
 * its epoch-millisecond columns written as SQL's TIMESTAMP(3) text; a bad
 * script is exit 2 with FILE:LINE:COLUMN, the line and a caret, before
 * anything starts. One script checks SELECT DISTINCT over CUMULATE windows
 * and a UNION ALL after it against rows made here from the events file.
 * EXPLAIN in a script run by eddy local prints the plan and starts
 * nothing. Kept small (10000 events, one run per query): CI time. */
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
    int n = snprintf(out, size, "%s.%03lld", day, ms % 1000);
    cr_assert(n > 0 && (size_t)n < size, "timestamp text of %s does not fit", ms_text);
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
        {"q0", {3, -1}},    {"q1", {3, -1}},    {"q2", {-1}},       {"q3", {-1}},  {"q4", {-1}},
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

/* Appends a copy of line to v. */
static void add_line(eddy_ref_lines_t *v, size_t *cap, const char *line)
{
    if (v->count == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        v->items = realloc(v->items, *cap * sizeof *v->items);
        cr_assert(v->items);
    }
    v->items[v->count++] = strdup(line);
}

/* The rows of union_script below, made from the bids of events_path: per
 * cumulating window (size 4 s, ending every second) its distinct
 * auctions, then every bid on every 123rd auction; sorted, as text. */
static char *distinct_cumulate_union_rows(size_t *len)
{
    enum { SIZE = 4000, STEP = 1000 };
    size_t n, cap_w = 0, cap_u = 0;
    char *text = eddy_read_file(events_path, &n), *save = NULL;
    cr_assert(text);
    eddy_ref_lines_t windowed = {0}, unioned = {0};
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        long long t, auction;
        if (sscanf(line, "B,%lld,%lld,", &t, &auction) != 2)
            continue;
        char ms[32], at[40], start[40], end[40], row[160];
        snprintf(ms, sizeof ms, "%lld", t);
        timestamp_text(ms, at, sizeof at);
        if (auction % 123 == 0) {
            snprintf(row, sizeof row, "%s\t%s\t%lld", at, at, auction);
            add_line(&unioned, &cap_u, row);
        }
        long long first = t - t % SIZE;
        snprintf(ms, sizeof ms, "%lld", first);
        timestamp_text(ms, start, sizeof start);
        for (long long e = first + STEP; e <= first + SIZE; e += STEP) {
            if (e <= t)
                continue; /* the window [first, e) ended before the bid */
            snprintf(ms, sizeof ms, "%lld", e);
            timestamp_text(ms, end, sizeof end);
            snprintf(row, sizeof row, "%s\t%s\t%lld", start, end, auction);
            add_line(&windowed, &cap_w, row);
        }
    }
    free(text);
    /* DISTINCT: each window's auctions once */
    qsort(windowed.items, windowed.count, sizeof *windowed.items, cmp_bytes);
    size_t kept = 0;
    for (size_t i = 0; i < windowed.count; i++) {
        if (kept && !strcmp(windowed.items[kept - 1], windowed.items[i])) {
            free(windowed.items[i]);
            continue;
        }
        windowed.items[kept++] = windowed.items[i];
    }
    cr_assert(kept < windowed.count, "no window has an auction twice: DISTINCT proves nothing");
    cr_assert(unioned.count > 1, "too few bids on every 123rd auction to prove anything");
    windowed.count = kept;
    for (size_t i = 0; i < unioned.count; i++)
        add_line(&windowed, &cap_w, unioned.items[i]);
    eddy_ref_lines_free(&unioned);
    return sorted_text(&windowed, len);
}

Test(sql, distinct_cumulate_and_union_all_equal_rows_made_from_the_events)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_nexmark_generate(events_path, "10000", NULL, &err) == 0, "%s", err.msg);
    size_t el, gl;
    char *expected = distinct_cumulate_union_rows(&el);
    char *got = run_script("union.sql",
                           "SELECT DISTINCT window_start, window_end, auction\n"
                           "FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(dateTime),\n"
                           "                    INTERVAL '1' SECOND, INTERVAL '4' SECOND))\n"
                           "UNION ALL\n"
                           "SELECT dateTime, dateTime, auction FROM bid WHERE MOD(auction, 123) = 0;\n",
                           &gl);
    cr_assert(gl == el && memcmp(got, expected, el) == 0,
              "SQL output (%zu bytes) differs from the expected (%zu bytes):\n%.400s\n"
              "--- expected:\n%.400s", gl, el, got, expected);
    free(expected);
    free(got);
}

/* The rows of a LEFT window join of persons and auctions (10 s tumbling
 * windows, on seller): per person, one row per auction it opened in its
 * window, or one row with a null auction; sorted, as text. *nulls: how
 * many rows have the null. */
static char *left_window_join_rows(size_t *len, size_t *nulls)
{
    enum { SIZE = 10000 };
    size_t n, cap = 0, n_p = 0, n_a = 0;
    char *text = eddy_read_file(events_path, &n), *save = NULL;
    cr_assert(text);
    long long(*persons)[2] = calloc(n / 8 + 1, sizeof *persons);
    long long(*auctions)[3] = calloc(n / 8 + 1, sizeof *auctions);
    cr_assert(persons && auctions);
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        long long t, id, seller;
        if (sscanf(line, "P,%lld,%lld,", &t, &id) == 2) {
            persons[n_p][0] = id;
            persons[n_p++][1] = t - t % SIZE;
        } else if (sscanf(line, "A,%lld,%lld,%*[^,],%*[^,],%*[^,],%*[^,],%lld,", &t, &id, &seller) == 3) {
            auctions[n_a][0] = id;
            auctions[n_a][1] = t - t % SIZE;
            auctions[n_a++][2] = seller;
        }
    }
    free(text);
    eddy_ref_lines_t rows = {0};
    *nulls = 0;
    for (size_t i = 0; i < n_p; i++) {
        char ms[32], start[40], row[160];
        snprintf(ms, sizeof ms, "%lld", persons[i][1]);
        timestamp_text(ms, start, sizeof start);
        bool matched = false;
        for (size_t k = 0; k < n_a; k++) {
            if (auctions[k][2] != persons[i][0] || auctions[k][1] != persons[i][1])
                continue;
            matched = true;
            snprintf(row, sizeof row, "%lld\t%lld\t%s", persons[i][0], auctions[k][0], start);
            add_line(&rows, &cap, row);
        }
        if (!matched) {
            snprintf(row, sizeof row, "%lld\t\\N\t%s", persons[i][0], start);
            add_line(&rows, &cap, row);
            (*nulls)++;
        }
    }
    cr_assert(*nulls > 0 && *nulls < rows.count, "%zu of %zu rows unmatched: the test proves nothing",
              *nulls, rows.count);
    free(persons);
    free(auctions);
    return sorted_text(&rows, len);
}

/* A LEFT JOIN of two TUMBLE TVFs: every person comes out, with the
 * auctions it opened in its window or, when the window ends without one,
 * once with a null auction. */
Test(sql, left_window_join_keeps_the_unmatched_rows_with_nulls)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_nexmark_generate(events_path, "10000", NULL, &err) == 0, "%s", err.msg);
    size_t el, gl, nulls;
    char *expected = left_window_join_rows(&el, &nulls);
    char *got = run_script("left.sql",
                           "SELECT P.id, A.id AS auction, P.window_start\n"
                           "FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) P\n"
                           "LEFT JOIN TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) A\n"
                           "ON P.id = A.seller AND P.window_start = A.window_start\n"
                           "AND P.window_end = A.window_end;\n",
                           &gl);
    cr_assert(gl == el && memcmp(got, expected, el) == 0,
              "SQL output (%zu bytes) differs from the expected (%zu bytes, %zu null rows):\n%.400s\n"
              "--- expected:\n%.400s", gl, el, nulls, got, expected);
    free(expected);
    free(got);
}
