/* test_pipeline_opt.c - the pipeline optimizer's rules (plan/pipeline_opt.h):
 * each applies where its safety condition holds and only there, and says
 * why; --no-optimize keeps the written order, one operator per step. */
#include <criterion/criterion.h>
#include <string.h>

#include "plan/pipeline_opt.h"

static eddy_pipeline_spec_t *load(const char *text)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = eddy_pipeline_spec_parse("t.yaml", text, strlen(text), &err);
    cr_assert(s, "%s", err.msg);
    return s;
}

static void expect_order(const eddy_pipeline_opt_t *o, const uint32_t *want, uint32_t n)
{
    cr_assert_eq(o->n, n);
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(o->order[i], want[i], "position %u: steps[%u], want steps[%u]", i, o->order[i],
                     want[i]);
}

static bool logged(const eddy_pipeline_opt_t *o, const char *what)
{
    for (uint32_t i = 0; i < o->n_log; i++)
        if (strstr(o->log[i], what))
            return true;
    return false;
}

#define SRC "source: {format: csv, columns: [a, b, c]}\n"

Test(pipeline_opt, filter_moves_before_a_map_that_passes_its_columns)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - map: {a: a, d: b * 2}\n  - filter: a > 1\n");
    eddy_pipeline_opt_t o;
    cr_assert_eq(eddy_pipeline_optimize(s, true, &o, NULL), 0);
    expect_order(&o, (uint32_t[]){1, 0}, 2);
    cr_assert(logged(&o, "filter before map: steps[1]"));
    cr_assert_eq(o.n_groups, 1);
    cr_assert(logged(&o, "fusion"));
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
}

Test(pipeline_opt, filter_on_a_computed_or_renamed_column_stays)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - map: {a: a, d: b * 2, e: c}\n"
                                       "  - filter: d > 1\n  - filter: e == 'x'\n");
    eddy_pipeline_opt_t o;
    cr_assert_eq(eddy_pipeline_optimize(s, true, &o, NULL), 0);
    cr_assert_eq(o.order[0], 0, "the map must stay first");
    cr_assert(!logged(&o, "filter before map"));
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
}

Test(pipeline_opt, adjacent_filters_cheapest_first)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - filter: matches(c, '^x+y$')\n  - filter: a == 1\n");
    eddy_pipeline_opt_t o;
    cr_assert_eq(eddy_pipeline_optimize(s, true, &o, NULL), 0);
    expect_order(&o, (uint32_t[]){1, 0}, 2);
    cr_assert(logged(&o, "filter order: steps[1]"));
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
}

Test(pipeline_opt, no_optimize_keeps_everything)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - map: {a: a}\n  - filter: a > 1\n  - filter: matches(a, 'x')\n");
    eddy_pipeline_opt_t o;
    cr_assert_eq(eddy_pipeline_optimize(s, false, &o, NULL), 0);
    expect_order(&o, (uint32_t[]){0, 1, 2}, 3);
    cr_assert_eq(o.n_groups, 3);
    cr_assert_eq(o.n_log, 0);
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
}

Test(pipeline_opt, costs_weigh_regexes)
{
    cr_assert_gt(eddy_pipeline_expr_cost("matches(a, 'x')"), eddy_pipeline_expr_cost("a == 1 and b == 2"));
}

/* ---- stateful steps: key_by, window, aggregate, max_by ---- */

Test(pipeline_opt, filter_moves_before_a_key_by)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - key_by: a\n  - filter: b > 1\n"
                                       "  - aggregate: {n: count()}\n");
    eddy_pipeline_opt_t o;
    cr_assert_eq(eddy_pipeline_optimize(s, true, &o, NULL), 0);
    expect_order(&o, (uint32_t[]){1, 0, 2}, 3);
    cr_assert(logged(&o, "filter before shuffle: steps[1]"));
    /* The filter and the key_by whose key it computes are one operator. */
    cr_assert_eq(o.n_groups, 2);
    cr_assert_eq(o.group_end[0], 2);
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
}

Test(pipeline_opt, filter_after_an_aggregate_or_window_stays)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - key_by: a\n  - aggregate: {n: count()}\n"
                                       "  - filter: n > 1\n  - key_by: a\n"
                                       "  - max_by: n\n");
    eddy_pipeline_opt_t o;
    cr_assert_eq(eddy_pipeline_optimize(s, true, &o, NULL), 0);
    /* The filter reads the aggregate's output: it never moves before it;
     * it does move... nowhere else either (it is already before the key_by). */
    expect_order(&o, (uint32_t[]){0, 1, 2, 3, 4}, 5);
    cr_assert(!logged(&o, "filter before"));
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);

    s = load("source: {format: csv, columns: [a, b, ts]}\nsteps:\n  - key_by: a\n"
             "  - window: {type: tumbling, size: 1s, timestamp: ts}\n  - aggregate: {n: count()}\n"
             "  - map: {a: a, n: n}\n  - filter: a == 'x'\n");
    cr_assert_eq(eddy_pipeline_optimize(s, true, &o, NULL), 0);
    /* Pushed before the map, but not across the aggregate (stateful). */
    expect_order(&o, (uint32_t[]){0, 1, 2, 4, 3}, 5);
    cr_assert(logged(&o, "filter before map: steps[4]"));
    cr_assert(!logged(&o, "filter before shuffle"));
    /* key_by alone, window + aggregate together, filter + map fused. */
    cr_assert_eq(o.n_groups, 3);
    cr_assert_eq(o.group_end[0], 1);
    cr_assert_eq(o.group_end[1], 3);
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
}

Test(pipeline_opt, no_optimize_keeps_a_window_with_its_aggregate)
{
    eddy_pipeline_spec_t *s = load("source: {format: csv, columns: [a, ts]}\nsteps:\n"
                                   "  - filter: a != ''\n  - key_by: a\n"
                                   "  - window: {type: session, gap: 5s, timestamp: ts}\n"
                                   "  - aggregate: {n: count()}\n");
    eddy_pipeline_opt_t o;
    cr_assert_eq(eddy_pipeline_optimize(s, false, &o, NULL), 0);
    expect_order(&o, (uint32_t[]){0, 1, 2, 3}, 4);
    cr_assert_eq(o.n_groups, 3);
    cr_assert_eq(o.group_end[2], 4);
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
}

/* A join is stateful (keyed state): an operator of its own; nothing moves
 * across it and nothing fuses with it. Steps of another parallelism do not
 * fuse either (a rebalance between them), and the plan says why. */
Test(pipeline_opt, joins_and_parallelism_bound_fusion)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - map: {a: a, b: b}\n"
                                       "  - join: {on: a, with: {steps: [{filter: c == 'x'}]}}\n"
                                       "  - filter: a == 1\n  - filter: b == 2\n"
                                       "    parallelism: 4\n");
    eddy_pipeline_opt_t o;
    cr_assert_eq(eddy_pipeline_optimize(s, true, &o, NULL), 0);
    expect_order(&o, (uint32_t[]){0, 1, 2, 3}, 4);
    cr_assert_eq(o.n_groups, 4, "map | join | filter | filter (parallelism 4): %u groups", o.n_groups);
    cr_assert(logged(&o, "no fusion of steps[2] (line 5) with steps[3] (line 6): parallelism the job's and 4"));
    cr_assert_eq(s->steps[1].kind, EDDY_PSTEP_JOIN);
    cr_assert_eq(s->steps[1].n, 5, "join output: the left's a, b, then right_a, right_b, c");
    cr_assert_str_eq(s->steps[1].columns[2], "right_a");
    cr_assert_str_eq(s->steps[1].columns[4], "c");
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
}

/* A key_by fuses into the stateless run before it (which computes its key)
 * only at the same parallelism; a join's output can be keyed and
 * aggregated. */
Test(pipeline_opt, key_by_fuses_only_at_the_same_parallelism)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - filter: a == 1\n  - key_by: b\n"
                                       "    parallelism: 4\n  - aggregate: {n: count()}\n");
    eddy_pipeline_opt_t o;
    cr_assert_eq(eddy_pipeline_optimize(s, true, &o, NULL), 0);
    cr_assert_eq(o.n_groups, 3, "filter | key_by | aggregate: %u groups", o.n_groups);
    cr_assert(logged(&o, "no fusion of steps[0] (line 3) with steps[1] (line 4): parallelism the job's and 4"));
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);

    s = load(SRC "steps:\n  - join: {on: a, with: {}}\n  - filter: a == 1\n  - key_by: right_b\n"
                 "  - aggregate: {n: count()}\n    max_parallelism: 16\n");
    cr_assert_eq(eddy_pipeline_optimize(s, true, &o, NULL), 0);
    cr_assert_eq(o.n_groups, 3, "join | filter+key_by | aggregate: %u groups", o.n_groups);
    cr_assert_eq(o.group_end[1], 3);
    cr_assert(logged(&o, "but the last, a key_by"));
    cr_assert_eq(s->max_parallelism, 16);
    cr_assert_str_eq(s->steps[3].columns[0], "right_b");
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
}
