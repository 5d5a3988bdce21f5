/* test_pipeline_row.c - a pipeline's rows on the wire (operators/
 * pipeline_row.h): COPY-text fields split and joined back byte for byte,
 * escapes and \N undone into the scratch buffer, empty fields and lines,
 * and a wrong field count named in the error. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "operators/pipeline_row.h"
#include "tests/unit/leak_check.h"

TestSuite(pipeline_row, .fini = eddy_test_leak_check);

/* Splits line into n fields, checks each against want (NULL: null) and
 * that joining them gives the line back. */
static void round_trip(const char *line, uint32_t n, const char *const *want)
{
    eddy_val_t vals[8];
    eddy_buf_t scratch = {0}, out = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_row_split(line, strlen(line), vals, n, &scratch, &err), 0, "'%s': %s", line,
                 err.msg);
    for (uint32_t i = 0; i < n; i++) {
        if (!want[i]) {
            cr_expect_eq(vals[i].type, EDDY_VAL_NULL, "'%s': field %u is not null", line, i);
            continue;
        }
        cr_assert_eq(vals[i].type, EDDY_VAL_STR, "'%s': field %u", line, i);
        cr_expect(vals[i].u.s.len == strlen(want[i]) &&
                      !memcmp(vals[i].u.s.ptr, want[i], vals[i].u.s.len),
                  "'%s': field %u is '%.*s', want '%s'", line, i, (int)vals[i].u.s.len,
                  vals[i].u.s.ptr, want[i]);
    }
    cr_assert_eq(eddy_row_join(vals, n, &out), 0);
    cr_expect_str_eq(out.p ? out.p : "", line);
    eddy_buf_free(&scratch);
    eddy_buf_free(&out);
}

Test(pipeline_row, split_and_join_round_trip)
{
    round_trip("a\tb\tc", 3, (const char *[]){"a", "b", "c"});
    round_trip("", 1, (const char *[]){""});
    round_trip("\t", 2, (const char *[]){"", ""});
    round_trip("\\N\tx\t\\N", 3, (const char *[]){NULL, "x", NULL});
    round_trip("tab\\there\tnl\\nback\\\\slash\tcr\\r", 3,
               (const char *[]){"tab\there", "nl\nback\\slash", "cr\r"});
    round_trip("\\\\N", 1, (const char *[]){"\\N"}); /* the text \N, not null */
}

Test(pipeline_row, wrong_counts_are_named)
{
    eddy_val_t vals[4];
    eddy_buf_t scratch = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_row_split("a\tb\tc", 5, vals, 2, &scratch, &err), -1);
    cr_expect(strstr(err.msg, "expected 2 fields, got more"), "%s", err.msg);
    cr_assert_eq(eddy_row_split("a\tb", 3, vals, 3, &scratch, &err), -1);
    cr_expect(strstr(err.msg, "expected 3 fields, got 2"), "%s", err.msg);
    cr_assert_eq(eddy_row_split(NULL, 0, vals, 1, &scratch, &err), 0, "%s", err.msg);
    cr_expect_eq(vals[0].u.s.len, 0);
    eddy_buf_free(&scratch);
}

Test(pipeline_row, ints_and_floats_join_as_text)
{
    eddy_val_t vals[] = {eddy_val_int(-42), eddy_val_float(2.5), eddy_val_bool(true),
                         eddy_val_str("a\tb", 3)};
    eddy_buf_t out = {0};
    cr_assert_eq(eddy_row_join(vals, 4, &out), 0);
    cr_expect_str_eq(out.p, "-42\t2.5\ttrue\ta\\tb");
    eddy_buf_free(&out);
}
