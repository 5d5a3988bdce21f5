/* test_ds2.c - the DS2 model on hand-computed graphs: linear, fan-out,
 * fan-in, selectivity != 1, clamping, missing measurements, bad input.
 *
 * Every expected number below is worked out in the comment next to it, at
 * target utilisation 0.8 and a 10 s window unless stated otherwise. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "controller/ds2.h"

#define WINDOW_NS 10000000000ull /* 10 s */
#define SEC_NS 1000000000ull
#define EPS 1e-6

static eddy_ds2_operator_t source(const char *name, uint32_t p, double offered,
                                  uint64_t records_out, uint64_t useful_ns)
{
    eddy_ds2_operator_t op = {
        .name = name, .parallelism = p, .min_parallelism = 1, .max_parallelism = 64,
        .metrics = {.records_out = records_out, .useful_ns = useful_ns,
                    .window_ns = WINDOW_NS, .offered_rate = offered},
    };
    return op;
}

static eddy_ds2_operator_t inner(const char *name, uint32_t p, const size_t *ups, size_t nups,
                                 uint64_t records_in, uint64_t records_out, uint64_t useful_ns)
{
    eddy_ds2_operator_t op = {
        .name = name, .parallelism = p, .min_parallelism = 1, .max_parallelism = 64,
        .upstreams = ups, .upstream_count = nups,
        .metrics = {.records_in = records_in, .records_out = records_out,
                    .useful_ns = useful_ns, .window_ns = WINDOW_NS, .offered_rate = NAN},
    };
    return op;
}

static void run(const eddy_ds2_operator_t *ops, size_t n, eddy_ds2_estimate_t *est)
{
    eddy_err_t err = {{0}};
    int rc = eddy_ds2_estimate(ops, n, EDDY_DS2_DEFAULT_TARGET_UTILISATION, est, &err);
    cr_assert_eq(rc, 0, "eddy_ds2_estimate failed: %s", err.msg);
}

Test(ds2, linear_source_map_sink)
{
    static const size_t from_source[] = {0}, from_map[] = {1};
    eddy_ds2_operator_t ops[] = {
        /* 100000 records in 2 useful seconds: 50000 rec/s per instance. */
        source("source", 1, 60000, 100000, 2 * SEC_NS),
        /* 2 instances, 10 useful seconds in total: 10000 rec/s per instance. */
        inner("map", 2, from_source, 1, 100000, 100000, 10 * SEC_NS),
        /* 4 useful seconds: 25000 rec/s per instance. */
        inner("sink", 1, from_map, 1, 100000, 0, 4 * SEC_NS),
    };
    eddy_ds2_estimate_t est[3];
    run(ops, 3, est);

    /* source: 60000 / (50000 * 0.8) = 1.5 -> 2 */
    cr_assert_eq(est[0].status, EDDY_DS2_OK);
    cr_assert_float_eq(est[0].true_rate_per_instance, 50000.0, EPS);
    cr_assert_float_eq(est[0].selectivity, 1.0, EPS);
    cr_assert_float_eq(est[0].target_input_rate, 60000.0, EPS);
    cr_assert_float_eq(est[0].target_output_rate, 60000.0, EPS);
    cr_assert_float_eq(est[0].exact_parallelism, 1.5, EPS);
    cr_assert_eq(est[0].optimal_parallelism, 2);
    /* observed: 100000 records in 10 s; busy 2 s of 10 s on 1 instance */
    cr_assert_float_eq(est[0].observed_input_rate, 10000.0, EPS);
    cr_assert_float_eq(est[0].observed_utilisation, 0.2, EPS);

    /* map: 60000 / (10000 * 0.8) = 7.5 -> 8 */
    cr_assert_eq(est[1].status, EDDY_DS2_OK);
    cr_assert_float_eq(est[1].true_rate_per_instance, 10000.0, EPS);
    cr_assert_float_eq(est[1].true_output_rate_per_instance, 10000.0, EPS);
    cr_assert_float_eq(est[1].selectivity, 1.0, EPS);
    cr_assert_float_eq(est[1].target_input_rate, 60000.0, EPS);
    cr_assert_float_eq(est[1].exact_parallelism, 7.5, EPS);
    cr_assert_eq(est[1].optimal_parallelism, 8);
    /* 10 useful seconds over 2 instances x 10 s */
    cr_assert_float_eq(est[1].observed_utilisation, 0.5, EPS);

    /* sink: 60000 / (25000 * 0.8) = 3.0 exactly -> 3, not 4 */
    cr_assert_eq(est[2].status, EDDY_DS2_OK);
    cr_assert_float_eq(est[2].selectivity, 0.0, EPS);
    cr_assert_float_eq(est[2].target_output_rate, 0.0, EPS);
    cr_assert_float_eq(est[2].exact_parallelism, 3.0, EPS);
    cr_assert_eq(est[2].optimal_parallelism, 3);
}

Test(ds2, fan_out_then_fan_in_diamond)
{
    /* source -> a, source -> b, {a, b} -> sink. Each consumer of the source
     * receives the whole stream, and the sink receives both a's and b's. */
    static const size_t from_source[] = {0}, from_a_and_b[] = {1, 2};
    eddy_ds2_operator_t ops[] = {
        source("source", 1, 20000, 100000, 1 * SEC_NS), /* 100000 rec/s */
        inner("a", 1, from_source, 1, 50000, 50000, 10 * SEC_NS), /* 5000 rec/s */
        inner("b", 1, from_source, 1, 80000, 80000, 10 * SEC_NS), /* 8000 rec/s */
        inner("sink", 1, from_a_and_b, 2, 100000, 0, 5 * SEC_NS), /* 20000 rec/s */
    };
    eddy_ds2_estimate_t est[4];
    run(ops, 4, est);

    /* source: 20000 / 80000 = 0.25 -> 1 */
    cr_assert_eq(est[0].optimal_parallelism, 1);
    /* a: 20000 / (5000 * 0.8) = 5.0 -> 5 */
    cr_assert_float_eq(est[1].target_input_rate, 20000.0, EPS);
    cr_assert_eq(est[1].optimal_parallelism, 5);
    /* b: 20000 / (8000 * 0.8) = 3.125 -> 4 */
    cr_assert_float_eq(est[2].target_input_rate, 20000.0, EPS);
    cr_assert_eq(est[2].optimal_parallelism, 4);
    /* sink: (20000 + 20000) / (20000 * 0.8) = 2.5 -> 3 */
    cr_assert_float_eq(est[3].target_input_rate, 40000.0, EPS);
    cr_assert_float_eq(est[3].exact_parallelism, 2.5, EPS);
    cr_assert_eq(est[3].optimal_parallelism, 3);
}

Test(ds2, fan_in_two_sources_into_join)
{
    static const size_t from_sources[] = {0, 1}, from_join[] = {2};
    eddy_ds2_operator_t ops[] = {
        source("orders", 1, 30000, 100000, 1 * SEC_NS),
        source("customers", 1, 10000, 100000, 1 * SEC_NS),
        /* join: 160000 in, 40000 out in 10 useful s: 16000 rec/s, selectivity 0.25 */
        inner("join", 2, from_sources, 2, 160000, 40000, 10 * SEC_NS),
        /* sink: 40000 in 8 useful s: 5000 rec/s */
        inner("sink", 1, from_join, 1, 40000, 0, 8 * SEC_NS),
    };
    eddy_ds2_estimate_t est[4];
    run(ops, 4, est);

    /* join: (30000 + 10000) / (16000 * 0.8) = 3.125 -> 4 */
    cr_assert_float_eq(est[2].target_input_rate, 40000.0, EPS);
    cr_assert_float_eq(est[2].true_rate_per_instance, 16000.0, EPS);
    cr_assert_float_eq(est[2].selectivity, 0.25, EPS);
    cr_assert_eq(est[2].optimal_parallelism, 4);
    /* sink: 40000 * 0.25 = 10000; 10000 / (5000 * 0.8) = 2.5 -> 3 */
    cr_assert_float_eq(est[2].target_output_rate, 10000.0, EPS);
    cr_assert_float_eq(est[3].target_input_rate, 10000.0, EPS);
    cr_assert_eq(est[3].optimal_parallelism, 3);
}

Test(ds2, selectivity_one_half_filter)
{
    static const size_t from_source[] = {0}, from_filter[] = {1};
    eddy_ds2_operator_t ops[] = {
        source("source", 1, 10000, 100000, 1 * SEC_NS),
        /* 1000 in, 500 out, 0.1 useful s: 10000 rec/s in, 5000 rec/s out */
        inner("filter", 1, from_source, 1, 1000, 500, SEC_NS / 10),
        /* 2000 in 1 useful s: 2000 rec/s */
        inner("sink", 1, from_filter, 1, 2000, 0, 1 * SEC_NS),
    };
    eddy_ds2_estimate_t est[3];
    run(ops, 3, est);

    /* filter: 10000 / (10000 * 0.8) = 1.25 -> 2 */
    cr_assert_float_eq(est[1].selectivity, 0.5, EPS);
    cr_assert_float_eq(est[1].true_output_rate_per_instance, 5000.0, EPS);
    cr_assert_eq(est[1].optimal_parallelism, 2);
    /* sink: 10000 * 0.5 = 5000; 5000 / (2000 * 0.8) = 3.125 -> 4 */
    cr_assert_float_eq(est[2].target_input_rate, 5000.0, EPS);
    cr_assert_eq(est[2].optimal_parallelism, 4);
}

Test(ds2, selectivity_three_flat_map)
{
    static const size_t from_source[] = {0}, from_flat_map[] = {1};
    eddy_ds2_operator_t ops[] = {
        source("lines", 1, 10000, 100000, 1 * SEC_NS),
        /* 1000 lines in, 3000 words out, 0.05 useful s: 20000 in/s, 60000 out/s */
        inner("split", 1, from_source, 1, 1000, 3000, SEC_NS / 20),
        /* 10000 words in 1 useful s */
        inner("count", 1, from_flat_map, 1, 10000, 0, 1 * SEC_NS),
    };
    eddy_ds2_estimate_t est[3];
    run(ops, 3, est);

    /* split: 10000 / (20000 * 0.8) = 0.625 -> 1 */
    cr_assert_float_eq(est[1].selectivity, 3.0, EPS);
    cr_assert_float_eq(est[1].true_rate_per_instance, 20000.0, EPS);
    cr_assert_float_eq(est[1].true_output_rate_per_instance, 60000.0, EPS);
    cr_assert_eq(est[1].optimal_parallelism, 1);
    /* count: 10000 * 3 = 30000; 30000 / (10000 * 0.8) = 3.75 -> 4 */
    cr_assert_float_eq(est[2].target_input_rate, 30000.0, EPS);
    cr_assert_eq(est[2].optimal_parallelism, 4);
}

Test(ds2, clamps_to_min_and_max)
{
    static const size_t from_source[] = {0};
    eddy_ds2_operator_t ops[] = {
        source("source", 1, 60000, 100000, 1 * SEC_NS),
        inner("capped", 2, from_source, 1, 100000, 100000, 10 * SEC_NS),  /* needs 7.5 -> 8 */
        inner("floored", 5, from_source, 1, 100000, 100000, 1 * SEC_NS), /* needs 0.75 -> 1 */
    };
    ops[1].max_parallelism = 4;
    ops[2].min_parallelism = 3;
    eddy_ds2_estimate_t est[3];
    run(ops, 3, est);

    cr_assert_float_eq(est[1].exact_parallelism, 7.5, EPS);
    cr_assert_eq(est[1].optimal_parallelism, 4);
    cr_assert_float_eq(est[2].exact_parallelism, 0.75, EPS);
    cr_assert_eq(est[2].optimal_parallelism, 3);
}

Test(ds2, missing_measurement_keeps_parallelism_and_blocks_downstream)
{
    static const size_t from_source[] = {0}, from_map[] = {1};
    eddy_ds2_operator_t ops[] = {
        source("source", 1, 60000, 100000, 1 * SEC_NS),
        inner("map", 3, from_source, 1, 0, 0, 0), /* nothing measured yet */
        inner("sink", 2, from_map, 1, 100000, 0, 1 * SEC_NS),
    };
    eddy_ds2_estimate_t est[3];
    run(ops, 3, est);

    cr_assert_eq(est[0].status, EDDY_DS2_OK);
    cr_assert_eq(est[1].status, EDDY_DS2_NO_MEASUREMENT);
    cr_assert_eq(est[1].optimal_parallelism, 3);
    cr_assert(isnan(est[1].true_rate_per_instance));
    cr_assert(isnan(est[1].selectivity));
    cr_assert(isnan(est[1].exact_parallelism));
    /* The sink's own rate is known but its target is not. */
    cr_assert_eq(est[2].status, EDDY_DS2_NO_TARGET);
    cr_assert_eq(est[2].optimal_parallelism, 2);
    cr_assert(isnan(est[2].target_input_rate));
    cr_assert_float_eq(est[2].true_rate_per_instance, 100000.0, EPS);
    cr_assert_str_eq(eddy_ds2_status_name(est[2].status), "no_target");
}

Test(ds2, counts_without_useful_time_still_give_selectivity)
{
    /* The map processed records but reported no useful time: its own
     * parallelism is kept, yet its selectivity (0.5) is known from the counts,
     * so the sink's target can still be computed. */
    static const size_t from_source[] = {0}, from_map[] = {1};
    eddy_ds2_operator_t ops[] = {
        source("source", 1, 8000, 100000, 1 * SEC_NS),
        inner("map", 2, from_source, 1, 1000, 500, 0),
        inner("sink", 1, from_map, 1, 1000, 0, SEC_NS / 2), /* 2000 rec/s */
    };
    eddy_ds2_estimate_t est[3];
    run(ops, 3, est);

    cr_assert_eq(est[1].status, EDDY_DS2_NO_MEASUREMENT);
    cr_assert_eq(est[1].optimal_parallelism, 2);
    cr_assert_float_eq(est[1].selectivity, 0.5, EPS);
    /* sink: 8000 * 0.5 = 4000; 4000 / (2000 * 0.8) = 2.5 -> 3 */
    cr_assert_eq(est[2].status, EDDY_DS2_OK);
    cr_assert_eq(est[2].optimal_parallelism, 3);
}

Test(ds2, source_without_offered_rate_and_fan_in_with_one_unknown)
{
    static const size_t from_sources[] = {0, 1};
    eddy_ds2_operator_t ops[] = {
        source("known", 1, 10000, 100000, 1 * SEC_NS),
        source("unknown", 2, NAN, 100000, 1 * SEC_NS),
        inner("join", 3, from_sources, 2, 100000, 100000, 1 * SEC_NS),
    };
    eddy_ds2_estimate_t est[3];
    run(ops, 3, est);

    cr_assert_eq(est[1].status, EDDY_DS2_NO_TARGET);
    cr_assert_eq(est[1].optimal_parallelism, 2);
    /* A partial sum would under-provision the join: it is left alone. */
    cr_assert_eq(est[2].status, EDDY_DS2_NO_TARGET);
    cr_assert_eq(est[2].optimal_parallelism, 3);
}

Test(ds2, zero_offered_rate_goes_to_minimum)
{
    static const size_t from_source[] = {0};
    eddy_ds2_operator_t ops[] = {
        source("source", 4, 0.0, 100000, 1 * SEC_NS),
        inner("map", 6, from_source, 1, 100000, 100000, 1 * SEC_NS),
    };
    ops[1].min_parallelism = 2;
    eddy_ds2_estimate_t est[2];
    run(ops, 2, est);

    cr_assert_eq(est[0].optimal_parallelism, 1);
    cr_assert_eq(est[1].optimal_parallelism, 2);
}

Test(ds2, empty_graph_is_fine)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_ds2_estimate(NULL, 0, 0.8, NULL, &err), 0);
}

Test(ds2, rejects_invalid_input)
{
    static const size_t forward_reference[] = {1}, self_reference[] = {0};
    eddy_ds2_operator_t ops[] = {
        source("source", 1, 1000, 1000, 1 * SEC_NS),
        inner("map", 1, self_reference, 1, 1000, 1000, 1 * SEC_NS),
    };
    eddy_ds2_estimate_t est[2];
    eddy_err_t err = {{0}};

    ops[1].upstreams = forward_reference;
    cr_assert_eq(eddy_ds2_estimate(ops, 2, 0.8, est, &err), -1);
    cr_assert(strstr(err.msg, "topological order"), "message: %s", err.msg);

    ops[1].upstreams = self_reference; /* index 0: valid again */
    cr_assert_eq(eddy_ds2_estimate(ops, 2, 0.8, est, &err), 0);
    cr_assert_eq(eddy_ds2_estimate(ops, 2, 0.0, est, &err), -1);
    cr_assert_eq(eddy_ds2_estimate(ops, 2, 1.5, est, &err), -1);
    cr_assert_eq(eddy_ds2_estimate(ops, 2, NAN, est, &err), -1);

    ops[1].min_parallelism = 5;
    ops[1].max_parallelism = 4;
    cr_assert_eq(eddy_ds2_estimate(ops, 2, 0.8, est, &err), -1);
    ops[1].min_parallelism = 1;

    ops[1].parallelism = 0;
    cr_assert_eq(eddy_ds2_estimate(ops, 2, 0.8, est, &err), -1);
    ops[1].parallelism = 1;

    ops[0].metrics.offered_rate = -1.0;
    cr_assert_eq(eddy_ds2_estimate(ops, 2, 0.8, est, &err), -1);
    ops[0].metrics.offered_rate = INFINITY;
    cr_assert_eq(eddy_ds2_estimate(ops, 2, 0.8, est, &err), -1);
    cr_assert(strstr(err.msg, "source"), "message: %s", err.msg);
}

Test(ds2, parallelism_formula_edges)
{
    /* exactly an integer stays that integer despite rounding noise */
    cr_assert_eq(eddy_ds2_parallelism_for(24000.0, 10000.0, 0.8, 1, 100), 3);
    cr_assert_eq(eddy_ds2_parallelism_for(24000.0000001, 10000.0, 0.8, 1, 100), 3);
    cr_assert_eq(eddy_ds2_parallelism_for(24100.0, 10000.0, 0.8, 1, 100), 4);
    /* an unknown target needs nothing; a zero capacity or a huge need, everything */
    cr_assert_eq(eddy_ds2_parallelism_for(NAN, 10000.0, 0.8, 2, 100), 2);
    cr_assert_eq(eddy_ds2_parallelism_for(1000.0, 0.0, 0.8, 2, 100), 100);
    cr_assert_eq(eddy_ds2_parallelism_for(1e300, 1e-300, 0.8, 1, 100), 100);
    cr_assert_eq(eddy_ds2_parallelism_for(0.0, 10000.0, 0.8, 1, 100), 1);
}
