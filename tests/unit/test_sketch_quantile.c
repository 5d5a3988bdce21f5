/* test_sketch_quantile.c - the relative-error quantile sketch
 * (state/sketch_quantile.c): every quantile within 1% of the exact one for
 * positive, negative and zero values, the large values kept accurate when
 * the small ones must be collapsed, merge of halves equals the whole, the
 * answers do not depend on the order values came in or merged in (what a
 * rescaled or restored window relies on), and the validate function
 * against corrupt buffers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "state/sketch_quantile.h"
#include "tests/support/fuzz_bytes.h"
#include "tests/support/proc.h"

static const double qs[] = {0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1};
#define N_QS (sizeof qs / sizeof qs[0])

static double uniform(uint64_t *s)
{
    return (double)(eddy_test_rand(s) >> 11) * 0x1.0p-53;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double exact_quantile(const double *sorted, size_t n, double q)
{
    return sorted[(size_t)floor(q * (double)(n - 1))];
}

static void assert_accurate(const eddy_quantile_t *sk, double *values, size_t n, double q_from)
{
    qsort(values, n, sizeof *values, cmp_double);
    for (size_t i = 0; i < N_QS; i++) {
        if (qs[i] < q_from)
            continue;
        double exact = exact_quantile(values, n, qs[i]);
        double got = eddy_quantile_quantile(sk, qs[i]);
        cr_assert(fabs(got - exact) <= EDDY_QUANTILE_ACCURACY * fabs(exact) * (1 + 1e-9),
                  "q=%g: sketch %.17g, exact %.17g (relative error %.4f%%)", qs[i], got, exact,
                  100 * fabs(got - exact) / fabs(exact));
    }
}

Test(sketch_quantile, accuracy_positive)
{
    enum { n = 50000 };
    static double values[n];
    uint64_t s = 1;
    eddy_quantile_t sk;
    eddy_quantile_init(&sk);
    for (size_t i = 0; i < n; i++) {
        /* Exponential with a long tail: latencies in microseconds. */
        values[i] = -log(1 - uniform(&s)) * 2500.0 + 0.5;
        cr_assert_eq(eddy_quantile_add(&sk, values[i]), 0);
    }
    cr_assert_eq(sk.count, n);
    assert_accurate(&sk, values, n, 0);
}

Test(sketch_quantile, accuracy_mixed_signs_and_zeros)
{
    enum { n = 40000 };
    static double values[n];
    uint64_t s = 2;
    eddy_quantile_t sk;
    eddy_quantile_init(&sk);
    for (size_t i = 0; i < n; i++) {
        double u = uniform(&s);
        if (i % 10 == 0)
            values[i] = 0;
        else
            values[i] = (u - 0.4) * 1e6; /* about 40% negative */
        cr_assert_eq(eddy_quantile_add(&sk, values[i]), 0);
    }
    assert_accurate(&sk, values, n, 0);
    cr_assert_eq(sk.zero_count, n / 10);
}

Test(sketch_quantile, refuses_non_finite)
{
    eddy_quantile_t sk;
    eddy_quantile_init(&sk);
    cr_assert_eq(eddy_quantile_add(&sk, NAN), -1);
    cr_assert_eq(eddy_quantile_add(&sk, INFINITY), -1);
    cr_assert_eq(eddy_quantile_add(&sk, -INFINITY), -1);
    cr_assert_eq(sk.count, 0);
    cr_assert(isnan(eddy_quantile_quantile(&sk, 0.5)), "empty sketch answers NaN");
    eddy_quantile_add(&sk, 3);
    cr_assert(isnan(eddy_quantile_quantile(&sk, 1.5)));
    cr_assert(isnan(eddy_quantile_quantile(&sk, -0.1)));
    cr_assert_eq(eddy_quantile_quantile(&sk, 0.5), 3.0, "one value: clamped to it exactly");
}

Test(sketch_quantile, collapses_lowest_buckets_keeping_large_values_accurate)
{
    enum { n = 30000 };
    static double values[n];
    uint64_t s = 3;
    eddy_quantile_t sk;
    eddy_quantile_init(&sk);
    for (size_t i = 0; i < n; i++) {
        /* Log-uniform over 24 decades, far wider than 1024 buckets span. */
        values[i] = pow(10.0, -12 + 24 * uniform(&s));
        eddy_quantile_add(&sk, values[i]);
    }
    cr_assert_eq(sk.count, n);
    cr_assert_eq(eddy_quantile_validate(&sk, sizeof sk, NULL), 0);
    /* The top 8e8 of range (1e12 down to ~1.2e3, q >= ~0.64) stays exact to 1%. */
    assert_accurate(&sk, values, n, 0.7);
    cr_assert_eq(eddy_quantile_quantile(&sk, 0), values[0], "minimum kept exactly");
    double previous = -INFINITY;
    for (size_t i = 0; i < N_QS; i++) {
        double v = eddy_quantile_quantile(&sk, qs[i]);
        cr_assert_geq(v, previous, "quantiles not monotone at q=%g", qs[i]);
        previous = v;
    }
}

Test(sketch_quantile, merge_of_halves_equals_whole)
{
    uint64_t s = 4;
    eddy_quantile_t whole, a, b;
    eddy_quantile_init(&whole);
    eddy_quantile_init(&a);
    eddy_quantile_init(&b);
    for (size_t i = 0; i < 20000; i++) {
        double v = (uniform(&s) - 0.3) * pow(10.0, 6 * uniform(&s));
        if (i % 17 == 0)
            v = 0;
        eddy_quantile_add(&whole, v);
        eddy_quantile_add(i < 7000 ? &a : &b, v);
    }
    eddy_quantile_merge(&a, &b);
    cr_assert_eq(a.count, whole.count);
    cr_assert_eq(a.zero_count, whole.zero_count);
    cr_assert_eq(a.min, whole.min);
    cr_assert_eq(a.max, whole.max);
    for (double q = 0; q <= 1.0; q += 0.001)
        cr_assert_eq(eddy_quantile_quantile(&a, q), eddy_quantile_quantile(&whole, q), "q=%g", q);
    cr_assert_eq(eddy_quantile_validate(&a, sizeof a, NULL), 0);

    /* Merging an empty sketch changes nothing; merging into one copies. */
    eddy_quantile_t empty, copy;
    eddy_quantile_init(&empty);
    eddy_quantile_init(&copy);
    eddy_quantile_merge(&a, &empty);
    eddy_quantile_merge(&copy, &whole);
    cr_assert_eq(eddy_quantile_quantile(&copy, 0.5), eddy_quantile_quantile(&whole, 0.5));
    cr_assert_eq(a.count, whole.count);
}

/* A pipeline's quantile must not change when a rescale or a restore
 * hands a window's values over in another order or in other parts
 * (tests/integration/test_pipeline_faults.c): adding in any order, and
 * merging parts in any grouping, gives the same answers, also when the
 * range is wide enough that buckets are collapsed. */
Test(sketch_quantile, order_and_merge_grouping_do_not_matter)
{
    enum { n = 30000, parts = 3 };
    static double values[n];
    static eddy_quantile_t forward, backward, part[parts], left, right;
    uint64_t s = 5;
    for (size_t i = 0; i < n; i++) /* 24 decades and both signs: collapses */
        values[i] = (i % 5 ? 1 : -1) * pow(10.0, -12 + 24 * uniform(&s));
    eddy_quantile_init(&forward);
    eddy_quantile_init(&backward);
    for (size_t i = 0; i < n; i++) {
        eddy_quantile_add(&forward, values[i]);
        eddy_quantile_add(&backward, values[n - 1 - i]);
    }
    for (size_t p = 0; p < parts; p++)
        eddy_quantile_init(&part[p]);
    for (size_t i = 0; i < n; i++) /* parts by a hash, as key groups split keys */
        eddy_quantile_add(&part[eddy_test_rand(&s) % parts], values[i]);
    /* (p0 + p1) + p2 against p2 + (p1 + p0) */
    left = part[0];
    eddy_quantile_merge(&left, &part[1]);
    eddy_quantile_merge(&left, &part[2]);
    right = part[2];
    static eddy_quantile_t inner;
    inner = part[1];
    eddy_quantile_merge(&inner, &part[0]);
    eddy_quantile_merge(&right, &inner);
    const eddy_quantile_t *all[] = {&backward, &left, &right};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        cr_assert_eq(all[k]->count, forward.count);
        cr_assert_eq(all[k]->zero_count, forward.zero_count);
        cr_assert_eq(all[k]->min, forward.min);
        cr_assert_eq(all[k]->max, forward.max);
        for (int q = 0; q <= 1000; q++)
            cr_assert_eq(eddy_quantile_quantile(all[k], q / 1000.0),
                         eddy_quantile_quantile(&forward, q / 1000.0), "sketch %zu, q=%g", k,
                         q / 1000.0);
    }
}

Test(sketch_quantile, refuses_other_layouts)
{
    static eddy_quantile_t sk;
    eddy_quantile_init(&sk);
    eddy_quantile_add(&sk, 5);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_quantile_validate(&sk, sizeof sk, &err), 0, "%s", err.msg);
    sk.header.version++;
    cr_assert_eq(eddy_quantile_validate(&sk, sizeof sk, &err), -1);
    cr_assert(strstr(err.msg, "version"), "%s", err.msg);
    sk.header.version--;
    sk.count++;
    cr_assert_eq(eddy_quantile_validate(&sk, sizeof sk, &err), -1);
    cr_assert(strstr(err.msg, "count"), "%s", err.msg);
    sk.count--;
    cr_assert_eq(eddy_quantile_validate(&sk, sizeof sk - 8, &err), -1);
}

static void use_quantile(const void *buf)
{
    static eddy_quantile_t sk, other;
    memcpy(&sk, buf, sizeof sk);
    for (size_t i = 0; i < N_QS; i++)
        (void)eddy_quantile_quantile(&sk, qs[i]);
    eddy_quantile_init(&other);
    eddy_quantile_add(&other, -2.5);
    eddy_quantile_merge(&other, &sk);
    cr_assert_eq(other.count, sk.count + 1);
}

Test(sketch_quantile, validate_on_random_bytes)
{
    static eddy_quantile_t sk;
    eddy_quantile_init(&sk);
    uint64_t s = 5;
    for (size_t i = 0; i < 2000; i++)
        eddy_quantile_add(&sk, (uniform(&s) - 0.5) * 1e4);
    eddy_fuzz_result_t r =
        eddy_fuzz_validate(eddy_quantile_validate, use_quantile, &sk, sizeof sk, 13, 1000);
    cr_assert_eq(r.valid_rejected, 0);
    cr_assert_eq(r.accepted_random, 0);
    cr_assert_eq(r.accepted_truncated, 0);
    cr_assert_eq(r.silent_rejections, 0);
    cr_assert_gt(r.rejected, 1000);
}
