/* test_line_merge.c - the external merge of line files (operators/line_merge.c).
 *
 * Random lines (with shared prefixes, prefixes of each other, high bytes and
 * duplicates) in several files are merged with a budget small enough for
 * many sorted runs; the output must equal the lines sorted in memory by
 * the table file sink's order (unsigned bytes, a line before its
 * extensions), duplicates kept; the runs are gone afterwards. The
 * inputs, each sorted in place first, merged as sorted inputs give the
 * same; unsorted inputs given as sorted are found out and sorted. Also: no
 * input lines give an empty file, and a last line without '\n' gets one. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "operators/line_merge.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"
#include "tests/unit/leak_check.h"

static char *dir;

static void setup(void)
{
    eddy_err_t err = {{0}};
    dir = eddy_test_mkdtemp("linemerge", &err);
    cr_assert(dir, "%s", err.msg);
}

static void teardown(void)
{
    if (dir)
        eddy_test_rm_rf(dir);
    free(dir);
    dir = NULL;
    eddy_test_leak_check();
}

TestSuite(line_merge, .init = setup, .fini = teardown);

static int cmp_lines(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t xl = strlen(x), yl = strlen(y);
    int c = memcmp(x, y, xl < yl ? xl : yl);
    return c ? c : (xl > yl) - (xl < yl);
}

static size_t count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(line_merge, many_runs_equal_an_in_memory_sort)
{
    enum { FILES = 5, LINES = 4000 };
    char **lines = calloc(FILES * LINES, sizeof *lines);
    char *inputs[FILES];
    unsigned seed = 7;
    for (int f = 0; f < FILES; f++) {
        char path[512];
        snprintf(path, sizeof path, "%s/in-%d.txt", dir, f);
        inputs[f] = strdup(path);
        FILE *out = fopen(path, "w");
        cr_assert(out);
        for (int i = 0; i < LINES; i++) {
            char line[64];
            int len = (int)(rand_r(&seed) % 20); /* 0..19: empty lines too */
            for (int k = 0; k < len; k++) {
                unsigned r = (unsigned)rand_r(&seed) % 6;
                line[k] = r < 3 ? "ab\t"[r] : r == 3 ? (char)0xe9 : (char)('0' + rand_r(&seed) % 3);
            }
            line[len] = '\0';
            lines[f * LINES + i] = strdup(line);
            /* the last line of the last file has no '\n' */
            fprintf(out, f == FILES - 1 && i == LINES - 1 ? "%s" : "%s\n", line);
        }
        fclose(out);
    }
    /* a last line without '\n' must not be empty, or it is no line */
    if (!lines[FILES * LINES - 1][0]) {
        FILE *out = fopen(inputs[FILES - 1], "a");
        fputs("z", out);
        fclose(out);
        free(lines[FILES * LINES - 1]);
        lines[FILES * LINES - 1] = strdup("z");
    }
    qsort(lines, FILES * LINES, sizeof *lines, cmp_lines);
    size_t want_len = 0;
    for (int i = 0; i < FILES * LINES; i++)
        want_len += strlen(lines[i]) + 1;
    char *want = malloc(want_len + 1), *p = want;
    for (int i = 0; i < FILES * LINES; i++)
        p += sprintf(p, "%s\n", lines[i]);

    char out[512], runs[512];
    snprintf(out, sizeof out, "%s/merged.txt", dir);
    snprintf(runs, sizeof runs, "%s/runs", dir);
    eddy_err_t err = {{0}};
    eddy_line_merge_stats_t st;
    cr_assert_eq(eddy_line_merge((const char *const *)inputs, FILES, runs, out, 16 << 10, &st,
                                 &err),
                 0, "%s", err.msg);
    cr_assert_eq(st.lines, FILES * LINES);
    cr_assert_gt(st.runs, 10, "only %zu runs: the budget did not bound the memory", st.runs);
    size_t got_len = 0;
    char *got = eddy_read_file(out, &got_len);
    cr_assert(got);
    cr_assert_eq(got_len, want_len);
    cr_assert(memcmp(got, want, want_len) == 0, "merged lines differ from the sorted lines");
    cr_assert_eq(count_entries(runs), 0, "run files left behind");

    /* the same in one run (a budget larger than the input) */
    cr_assert_eq(eddy_line_merge((const char *const *)inputs, FILES, runs, out, 0, &st, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(st.runs, 1);
    free(got);
    got = eddy_read_file(out, &got_len);
    cr_assert(got_len == want_len && memcmp(got, want, want_len) == 0);

    /* as sorted inputs: first the unsorted ones (found out), then each
     * sorted onto itself */
    cr_assert_eq(unlink(out), 0);
    cr_assert_eq(eddy_line_merge_sorted((const char *const *)inputs, FILES, runs, out, 16 << 10,
                                        &st, &err),
                 0, "%s", err.msg);
    cr_assert_gt(st.runs, 10, "unsorted inputs were merged as sorted");
    free(got);
    got = eddy_read_file(out, &got_len);
    cr_assert(got_len == want_len && memcmp(got, want, want_len) == 0);
    for (int f = 0; f < FILES; f++) /* in runs for some, in memory for the others */
        cr_assert_eq(eddy_line_sort_in_place(inputs[f], runs, f % 2 ? 16 << 10 : 0, NULL, &err),
                     0, "%s", err.msg);
    cr_assert_eq(eddy_line_merge_sorted((const char *const *)inputs, FILES, runs, out, 16 << 10,
                                        &st, &err),
                 0, "%s", err.msg);
    cr_assert_eq(st.runs, FILES);
    cr_assert_eq(st.lines, FILES * LINES);
    free(got);
    got = eddy_read_file(out, &got_len);
    cr_assert(got_len == want_len && memcmp(got, want, want_len) == 0,
              "sorted inputs merged differ from the sorted lines");
    cr_assert_eq(count_entries(runs), 0, "run files left behind");

    free(got);
    free(want);
    for (int i = 0; i < FILES * LINES; i++)
        free(lines[i]);
    free(lines);
    for (int f = 0; f < FILES; f++)
        free(inputs[f]);
}

Test(line_merge, no_lines_give_an_empty_file)
{
    char in[512], out[512], runs[512];
    snprintf(in, sizeof in, "%s/empty.txt", dir);
    snprintf(out, sizeof out, "%s/merged.txt", dir);
    snprintf(runs, sizeof runs, "%s/runs", dir);
    FILE *f = fopen(in, "w");
    fclose(f);
    const char *inputs[] = {in};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_line_merge(inputs, 1, runs, out, 0, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_line_merge(NULL, 0, runs, out, 0, NULL, &err), 0, "%s", err.msg);
    size_t len = 99;
    char *got = eddy_read_file(out, &len);
    cr_assert(got);
    cr_assert_eq(len, 0);
    free(got);
}

Test(line_merge, a_missing_input_is_an_error)
{
    char in[512], out[512], runs[512];
    snprintf(in, sizeof in, "%s/nope.txt", dir);
    snprintf(out, sizeof out, "%s/merged.txt", dir);
    snprintf(runs, sizeof runs, "%s/runs", dir);
    const char *inputs[] = {in};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_line_merge(inputs, 1, runs, out, 0, NULL, &err), -1);
    cr_assert(strstr(err.msg, "nope.txt"), "%s", err.msg);
    cr_assert(access(out, F_OK) != 0, "an output was written");
}

Test(line_merge, sorting_in_place_never_creates_the_file)
{
    char path[512], runs[512];
    snprintf(path, sizeof path, "%s/gone.txt", dir);
    snprintf(runs, sizeof runs, "%s/runs", dir);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_line_sort_in_place(path, runs, 0, NULL, &err), -1);
    cr_assert(access(path, F_OK) != 0, "the file was created");
    FILE *f = fopen(path, "w");
    fputs("b\na\nab\n\n", f);
    fclose(f);
    cr_assert_eq(eddy_line_sort_in_place(path, runs, 0, NULL, &err), 0, "%s", err.msg);
    size_t len = 0;
    char *got = eddy_read_file(path, &len);
    cr_assert(got && len == 8 && memcmp(got, "\na\nab\nb\n", 8) == 0, "got '%.*s'", (int)len,
              got ? got : "");
    free(got);
}
