/* test_histogram.c - fixed-bucket histograms (common/histogram.c): bucket
 * placement at the bounds, quantiles as Prometheus interpolates them, and
 * the delta arithmetic the coordinator's aggregation relies on. */
#include <criterion/criterion.h>

#include "common/histogram.h"

Test(histogram, values_land_in_the_bucket_whose_bound_they_do_not_exceed)
{
    eddy_histogram_t h = {{0}, 0};
    eddy_hist_observe(&h, 0);
    eddy_hist_observe(&h, 100);   /* le 0.0001 */
    eddy_hist_observe(&h, 101);   /* le 0.00025 */
    eddy_hist_observe(&h, -5);    /* clock skew: 0 */
    eddy_hist_observe(&h, 61000000); /* beyond 60 s: +Inf */
    cr_assert_eq(h.counts[0], 3);
    cr_assert_eq(h.counts[1], 1);
    cr_assert_eq(h.counts[EDDY_HIST_BOUNDS], 1);
    cr_assert_eq(eddy_hist_count(&h), 5);
    cr_assert_eq(h.sum_us, 100 + 101 + 61000000);
    cr_assert_eq(eddy_hist_bound_us(3), 1000);
    for (uint32_t i = 1; i < EDDY_HIST_BOUNDS; i++)
        cr_assert_gt(eddy_hist_bound_us(i), eddy_hist_bound_us(i - 1));
}

Test(histogram, quantiles_interpolate_within_the_bucket)
{
    eddy_histogram_t h = {{0}, 0};
    cr_assert_eq(eddy_hist_quantile_us(&h, 0.5), -1);
    for (int i = 0; i < 100; i++)
        eddy_hist_observe(&h, 700); /* bucket (500, 1000] */
    double p50 = eddy_hist_quantile_us(&h, 0.5);
    cr_assert(p50 > 500 && p50 <= 1000, "p50 %f", p50);
    eddy_hist_observe(&h, 4000000); /* (2.5 s, 5 s] */
    cr_assert_leq(eddy_hist_quantile_us(&h, 0.99), 1000);
    cr_assert_gt(eddy_hist_quantile_us(&h, 1.0), 2500000);
}

Test(histogram, deltas_of_a_growing_histogram_add_up)
{
    eddy_histogram_t a = {{0}, 0}, b, d, total = {{0}, 0};
    eddy_hist_observe(&a, 300);
    b = a;
    eddy_hist_observe(&b, 3000);
    eddy_hist_observe(&b, 300);
    cr_assert(eddy_hist_grew_from(&b, &a));
    cr_assert(!eddy_hist_grew_from(&a, &b));
    eddy_hist_delta(&d, &b, &a);
    cr_assert_eq(eddy_hist_count(&d), 2);
    eddy_hist_add(&total, &a);
    eddy_hist_add(&total, &d);
    cr_assert_eq(eddy_hist_count(&total), eddy_hist_count(&b));
    cr_assert_eq(total.sum_us, b.sum_us);
}
