/* test_sketch_hll.c - HyperLogLog (state/sketch_hll.c): accuracy on 1e5
 * distinct values, merge of two halves equals the whole, bytes as the
 * serialised form, and the validate function against corrupt buffers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "state/sketch_hll.h"
#include "tests/support/fuzz_bytes.h"
#include "tests/support/proc.h"

static void add_value(eddy_hll_t *h, unsigned long i)
{
    char value[32];
    int n = snprintf(value, sizeof value, "user-%lu", i);
    eddy_hll_add(h, value, (size_t)n);
}

Test(sketch_hll, empty_and_small)
{
    eddy_hll_t h;
    eddy_hll_init(&h);
    cr_assert_eq(eddy_hll_estimate(&h), 0.0);
    for (int rep = 0; rep < 3; rep++)
        for (unsigned long i = 0; i < 100; i++)
            add_value(&h, i);
    double e = eddy_hll_estimate(&h);
    /* Linear counting: small counts are nearly exact; repeats count once. */
    cr_assert(fabs(e - 100) <= 3, "estimate %f for 100 distinct values", e);
}

Test(sketch_hll, error_within_three_standard_errors)
{
    const double n = 1e5;
    const double standard_error = 1.04 / sqrt(EDDY_HLL_REGISTERS);
    eddy_hll_t h;
    eddy_hll_init(&h);
    for (unsigned long i = 0; i < (unsigned long)n; i++)
        add_value(&h, i);
    double e = eddy_hll_estimate(&h);
    cr_assert(fabs(e - n) / n <= 3 * standard_error, "estimate %f for %.0f distinct (error %.2f%%)",
              e, n, 100 * fabs(e - n) / n);
}

Test(sketch_hll, merge_of_halves_equals_whole)
{
    eddy_hll_t whole, a, b;
    eddy_hll_init(&whole);
    eddy_hll_init(&a);
    eddy_hll_init(&b);
    for (unsigned long i = 0; i < 100000; i++) {
        add_value(&whole, i);
        add_value(i % 2 ? &a : &b, i);
    }
    /* Overlap: values seen by both halves count once. */
    for (unsigned long i = 0; i < 5000; i++)
        add_value(&a, i * 2);
    eddy_hll_merge(&a, &b);
    cr_assert_eq(memcmp(&a, &whole, EDDY_HLL_SIZE), 0, "merged registers differ from the whole's");
    cr_assert_eq(eddy_hll_estimate(&a), eddy_hll_estimate(&whole));
}

Test(sketch_hll, bytes_round_trip)
{
    eddy_hll_t h, copy;
    eddy_hll_init(&h);
    for (unsigned long i = 0; i < 1000; i++)
        add_value(&h, i);
    unsigned char bytes[EDDY_HLL_SIZE];
    memcpy(bytes, &h, sizeof bytes);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_hll_validate(bytes, sizeof bytes, &err), 0, "%s", err.msg);
    memcpy(&copy, bytes, sizeof copy);
    cr_assert_eq(eddy_hll_estimate(&copy), eddy_hll_estimate(&h));
}

Test(sketch_hll, refuses_other_layouts)
{
    eddy_hll_t h;
    eddy_hll_init(&h);
    eddy_err_t err = {{0}};
    h.header.version = EDDY_HLL_VERSION + 1;
    cr_assert_eq(eddy_hll_validate(&h, sizeof h, &err), -1);
    cr_assert(strstr(err.msg, "version"), "%s", err.msg);
    eddy_hll_init(&h);
    h.header.order_mark = 0x0201;
    cr_assert_eq(eddy_hll_validate(&h, sizeof h, &err), -1);
    cr_assert(strstr(err.msg, "byte order"), "%s", err.msg);
    eddy_hll_init(&h);
    h.header.kind = EDDY_SKETCH_CMS;
    cr_assert_eq(eddy_hll_validate(&h, sizeof h, &err), -1);
    eddy_hll_init(&h);
    cr_assert_eq(eddy_hll_validate(&h, sizeof h - 1, &err), -1);
    cr_assert(strstr(err.msg, "expected"), "%s", err.msg);
    cr_assert_eq(eddy_hll_validate(&h, 3, &err), -1);
    cr_assert(strstr(err.msg, "truncated"), "%s", err.msg);
}

static void use_hll(const void *buf)
{
    eddy_hll_t h, other;
    memcpy(&h, buf, sizeof h);
    eddy_hll_init(&other);
    add_value(&other, 7);
    eddy_hll_merge(&other, &h);
    cr_assert(isfinite(eddy_hll_estimate(&other)));
    cr_assert_eq(eddy_hll_validate(&other, sizeof other, NULL), 0);
}

Test(sketch_hll, validate_on_random_bytes)
{
    eddy_hll_t h;
    eddy_hll_init(&h);
    for (unsigned long i = 0; i < 3000; i++)
        add_value(&h, i);
    eddy_fuzz_result_t r = eddy_fuzz_validate(eddy_hll_validate, use_hll, &h, sizeof h, 12, 2000);
    cr_assert_eq(r.valid_rejected, 0);
    cr_assert_eq(r.accepted_random, 0);
    cr_assert_eq(r.accepted_truncated, 0);
    cr_assert_eq(r.silent_rejections, 0);
    cr_assert_gt(r.rejected, 2000);
}
