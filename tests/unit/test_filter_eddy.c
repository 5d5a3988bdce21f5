/* test_filter_eddy.c - the adaptive filter order (operators/filter_eddy.h):
 * with synthetic filters of known selectivity and cost, the eddy settles
 * on the rank order, does not flap on equal filters, and follows a change
 * in the data's character. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "operators/filter_eddy.h"

typedef struct synth {
    double pass;   /* probability a record passes */
    uint64_t ns;   /* cost */
} synth_t;

/* Feeds records until the decision period has passed `periods` times. */
static void feed(eddy_filter_eddy_t *e, const synth_t *f, uint32_t n, int periods)
{
    for (int r = 0; r < periods * EDDY_FILTER_EDDY_PERIOD; r++) {
        const uint32_t *order = eddy_filter_eddy_order(e);
        bool timed = eddy_filter_eddy_timed(e);
        for (uint32_t k = 0; k < n; k++) {
            uint32_t i = order[k];
            bool pass = (double)rand() / RAND_MAX < f[i].pass;
            eddy_filter_eddy_observe(e, i, pass, f[i].ns, timed);
            if (!pass)
                break;
        }
        eddy_filter_eddy_tick(e);
    }
}

Test(filter_eddy, settles_on_rank_order)
{
    srand(1);
    /* As written: an expensive, unselective filter first. */
    synth_t f[3] = {{0.95, 900}, {0.5, 100}, {0.1, 120}};
    eddy_filter_eddy_t *e = eddy_filter_eddy_new(3);
    feed(e, f, 3, 6);
    const uint32_t *o = eddy_filter_eddy_order(e);
    /* ranks: (1-.1)/120 = .0075, (1-.5)/100 = .005, (1-.95)/900 = .00006 */
    cr_assert_eq(o[0], 2, "order %u %u %u", o[0], o[1], o[2]);
    cr_assert_eq(o[1], 1);
    cr_assert_eq(o[2], 0);
    cr_assert_lt(eddy_filter_eddy_selectivity(e, 2), 0.2);
    cr_assert_gt(eddy_filter_eddy_cost_ns(e, 0), 800);
    eddy_filter_eddy_destroy(&e);
    cr_assert_null(e);
}

Test(filter_eddy, equal_filters_do_not_flap)
{
    srand(2);
    synth_t f[2] = {{0.5, 100}, {0.5, 100}};
    eddy_filter_eddy_t *e = eddy_filter_eddy_new(2);
    feed(e, f, 2, 20);
    cr_assert_eq(eddy_filter_eddy_changes(e), 0, "changed order %llu times",
                 (unsigned long long)eddy_filter_eddy_changes(e));
    eddy_filter_eddy_destroy(&e);
}

Test(filter_eddy, follows_a_change_in_the_data)
{
    srand(3);
    synth_t f[2] = {{0.9, 100}, {0.1, 100}};
    eddy_filter_eddy_t *e = eddy_filter_eddy_new(2);
    feed(e, f, 2, 6);
    cr_assert_eq(eddy_filter_eddy_order(e)[0], 1);
    f[0].pass = 0.05;
    f[1].pass = 0.95;
    feed(e, f, 2, 10);
    cr_assert_eq(eddy_filter_eddy_order(e)[0], 0);
    cr_assert_geq(eddy_filter_eddy_changes(e), 2);
    eddy_filter_eddy_destroy(&e);
}
