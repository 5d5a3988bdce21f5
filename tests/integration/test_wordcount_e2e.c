/* test_wordcount_e2e.c - end-to-end wordcount through the real binary.
 *
 * Runs `eddy local --job wordcount` (coordinator + worker processes over
 * real ZeroMQ sockets) on ~3 MB of generated text with awkward whitespace
 * (tabs, runs of spaces, leading spaces, blank lines, punctuation glued to
 * words, UTF-8, a last line without newline) for 1, 2 and 3 workers and
 * parallelism 1..4, and requires the --output file to be byte-identical
 * to a reference computed here in C. Also checks changelog mode: the last
 * +I/+U value printed for each word equals the reference count.
 *
 * Why: this is the README's main command; exact output across placements
 * shows that partitioning by key groups neither drops nor duplicates. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/changelog.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define TEXT_BYTES (3u * 1024 * 1024)
#define RUN_TIMEOUT_MS 120000

static eddy_test_cluster_t *cl;
static char *dir, *input;
static eddy_test_wc_input_t wc; /* the input text and its reference output */

/* eddy local runs with eddy's own checkpoint and heartbeat timing. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "wc-e2e", .checkpoint_interval = "", .heartbeat_ms = "",
                                  .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    input = eddy_test_cluster_path(cl, "input.txt");
    cr_assert(eddy_test_wc_input(input, TEXT_BYTES, 20240601, &wc, &err) == 0, "%s", err.msg);
}

static void teardown(void)
{
    eddy_test_wc_input_free(&wc);
    eddy_test_cluster_destroy(&cl);
}

/* Index of the first differing line, for a readable failure. */
static void report_diff(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t i = 0, line = 1, start = 0;
    while (i < alen && i < blen && a[i] == b[i]) {
        if (a[i] == '\n') {
            line++;
            start = i + 1;
        }
        i++;
    }
    cr_log_error("outputs differ at line %zu: expected '%.60s' got '%.60s' (sizes %zu vs %zu)",
                 line, a + start, b + start, alen, blen);
}

typedef struct wc_case {
    int workers, parallelism;
} wc_case_t;

ParameterizedTestParameters(wordcount, output_matches_reference)
{
    static wc_case_t cases[] = {{1, 1}, {1, 2}, {1, 4}, {2, 1}, {2, 2}, {2, 3},
                                {2, 4}, {3, 1}, {3, 3}, {3, 4}};
    return cr_make_param_array(wc_case_t, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(wc_case_t *c, wordcount, output_matches_reference, .init = setup,
                  .fini = teardown, .timeout = 180)
{
    eddy_err_t err = {{0}};
    char out[700], p[16];
    snprintf(out, sizeof out, "%s/counts-w%d-p%d.tsv", dir, c->workers, c->parallelism);
    snprintf(p, sizeof p, "%d", c->parallelism);
    eddy_test_cluster_opts(cl)->workers = c->workers;
    const char *job[] = {"--quiet", "--job", "wordcount", "--input", input, "--output", out,
                         "--parallelism", p, NULL};
    int rc = eddy_test_cluster_run_local(cl, job, RUN_TIMEOUT_MS, &err);
    char *log = eddy_test_cluster_log_text(cl);
    cr_assert_eq(rc, 0, "eddy local (workers %d, parallelism %d) exited %d (%s); log:\n%s",
                 c->workers, c->parallelism, rc, err.msg, log);
    size_t got_len = 0;
    char *got = eddy_read_file(out, &got_len);
    cr_assert(got, "no output file %s; log:\n%s", out, log);
    if (got_len != wc.expected_len || memcmp(got, wc.expected, got_len) != 0)
        report_diff(wc.expected, wc.expected_len, got, got_len);
    cr_assert(got_len == wc.expected_len && memcmp(got, wc.expected, got_len) == 0,
              "workers %d, parallelism %d: output differs from the reference", c->workers,
              c->parallelism);
    free(got);
    free(log);
}

/* Changelog lines look like "+I[word, 1]", "-U[word, 1]", "+U[word, 2]".
 * Words contain no spaces or tabs but may contain ',' and ']', so split at
 * the last ", ". */
Test(wordcount, changelog_last_value_is_reference_count, .init = setup, .fini = teardown,
     .timeout = 180)
{
    eddy_err_t err = {{0}};
    char *out = eddy_test_cluster_path(cl, "changelog.txt");
    eddy_test_cluster_opts(cl)->workers = 2;
    const char *job[] = {"--quiet", "--job", "wordcount", "--input", input, "--parallelism", "3",
                         NULL};
    cr_assert(eddy_test_cluster_start_local_to(cl, job, out, &err) == 0, "%s", err.msg);
    int rc = eddy_proc_wait(eddy_test_cluster_local(cl), RUN_TIMEOUT_MS);
    cr_assert_eq(rc, 0, "eddy local exited %d", rc);

    size_t n;
    eddy_wc_entry_t *ref = eddy_reference_counts(wc.text, wc.text_len, &n);
    cr_assert(ref);
    uint64_t *last = calloc(n, sizeof *last);
    size_t len;
    char *log = eddy_read_file(out, &len);
    cr_assert(log && last);
    size_t lines = 0;
    for (char *line = log, *nl; line < log + len; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(log + len - line));
        if (!nl)
            nl = log + len;
        size_t l = (size_t)(nl - line);
        if (l < 7 || line[l - 1] != ']')
            continue;
        eddy_changelog_row_t row;
        cr_assert(eddy_changelog_row(line, l, &row) == 0, "malformed changelog line '%.*s'", (int)l,
                  line);
        if (strcmp(row.kind, "+I") && strcmp(row.kind, "+U")) {
            cr_assert(!strcmp(row.kind, "-U"), "unexpected changelog line '%.*s'", (int)l, line);
            continue;
        }
        size_t k = eddy_changelog_find(ref, n, row.word, row.len);
        cr_assert(k < n, "changelog names a word not in the input: '%.*s'", (int)row.len, row.word);
        last[k] = row.value;
        lines++;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        if (last[i] != ref[i].count) {
            if (wrong++ < 5)
                cr_log_error("word '%.*s': last changelog value %llu, reference %llu",
                             (int)ref[i].len, ref[i].word, (unsigned long long)last[i],
                             (unsigned long long)ref[i].count);
        }
    cr_assert_eq(wrong, 0, "%zu of %zu words have a wrong final value (%zu +I/+U lines)", wrong,
                 n, lines);
    free(last);
    free(ref);
    free(log);
}
