/* test_rebalance.c - the rebalance planner (coordinator/rebalance.c): an
 * empty cluster, an even spread left alone, a new worker filled from the
 * busiest ones, several jobs, unmovable stages, workers with unknown (0)
 * and different core counts, instances on a worker no longer listed. */
#include <criterion/criterion.h>
#include <string.h>

#include "coordinator/rebalance.h"
#include "tests/unit/leak_check.h"

TestSuite(rebalance_plan, .fini = eddy_test_leak_check);

static eddy_rebalance_plan_t plan_of(const eddy_rebalance_worker_t *w, uint32_t nw,
                                     const eddy_rebalance_stage_t *s, uint32_t ns)
{
    eddy_rebalance_plan_t p;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_rebalance_compute(w, nw, s, ns, &p, &err), 0, "%s", err.msg);
    return p;
}

static const char *spread(const uint32_t *loads, uint32_t n)
{
    static char buf[128];
    return eddy_rebalance_spread(loads, n, buf, sizeof buf);
}

Test(rebalance_plan, an_empty_cluster_moves_nothing)
{
    eddy_rebalance_plan_t p = plan_of(NULL, 0, NULL, 0);
    cr_assert_eq(p.n_moves, 0);
    eddy_rebalance_plan_clear(&p);

    const eddy_rebalance_worker_t w[2] = {{1, 2}, {2, 2}};
    p = plan_of(w, 2, NULL, 0);
    cr_assert_eq(p.n_moves, 0);
    cr_assert_str_eq(spread(p.load_after, 2), "0/0");
    eddy_rebalance_plan_clear(&p);
}

Test(rebalance_plan, an_even_spread_stays)
{
    const eddy_rebalance_worker_t w[3] = {{1, 2}, {2, 2}, {3, 2}};
    const uint32_t src[3] = {1, 2, 3}, count[4] = {1, 2, 3, 1};
    const eddy_rebalance_stage_t s[2] = {{1, 0, false, 3, src}, {1, 1, true, 4, count}};
    eddy_rebalance_plan_t p = plan_of(w, 3, s, 2);
    cr_assert_eq(p.n_moves, 0, "3/2/2 differs by 1: no move");
    cr_assert_str_eq(spread(p.load_before, 3), "3/2/2");
    eddy_rebalance_plan_clear(&p);
}

/* wordcount --parallelism 4 on workers 1 and 2, then worker 3 joins: only
 * count (keyed) may move; 5/4/0 becomes 3/3/3 in three moves to worker 3. */
Test(rebalance_plan, a_new_worker_gets_instances_of_the_busiest)
{
    const eddy_rebalance_worker_t w[3] = {{1, 2}, {2, 2}, {3, 2}};
    const uint32_t src[4] = {1, 2, 1, 2}, count[4] = {1, 2, 1, 2}, sink[1] = {1};
    const eddy_rebalance_stage_t s[3] = {
        {7, 0, false, 4, src}, {7, 1, true, 4, count}, {7, 2, false, 1, sink}};
    eddy_rebalance_plan_t p = plan_of(w, 3, s, 3);
    cr_assert_str_eq(spread(p.load_before, 3), "5/4/0");
    cr_assert_str_eq(spread(p.load_after, 3), "3/3/3");
    cr_assert_eq(p.n_moves, 3);
    bool seen[4] = {false};
    for (uint32_t i = 0; i < p.n_moves; i++) {
        const eddy_rebalance_move_t *m = &p.moves[i];
        cr_assert_eq(m->job, 7);
        cr_assert_eq(m->stage, 1, "only the keyed stage moves");
        cr_assert_eq(m->to, 3);
        cr_assert_eq(m->from, count[m->instance], "move %u names where instance %u was", i, m->instance);
        cr_assert(!seen[m->instance], "instance %u moved twice", m->instance);
        seen[m->instance] = true;
    }
    cr_assert_eq(p.moves[0].from, 1, "the first move relieves the busiest worker");
    eddy_rebalance_plan_clear(&p);
}

/* Two jobs with a keyed stage of 2 on workers 1 and 2: 4/4/0 -> 3/3/2, and
 * each job's moves are consecutive (one migration per job and stage). */
Test(rebalance_plan, several_jobs_share_the_new_worker)
{
    const eddy_rebalance_worker_t w[3] = {{1, 4}, {2, 4}, {3, 4}};
    const uint32_t a[2] = {1, 2}, b[2] = {1, 2}, c[2] = {2, 1}, d[2] = {1, 2};
    const eddy_rebalance_stage_t s[4] = {
        {1, 0, false, 2, a}, {1, 1, true, 2, b}, {2, 0, true, 2, c}, {2, 1, false, 2, d}};
    eddy_rebalance_plan_t p = plan_of(w, 3, s, 4);
    cr_assert_str_eq(spread(p.load_before, 3), "4/4/0");
    cr_assert_str_eq(spread(p.load_after, 3), "3/3/2");
    cr_assert_eq(p.n_moves, 2);
    cr_assert_neq(p.moves[0].from, p.moves[1].from, "one from each busy worker");
    cr_assert_eq(p.moves[0].job, p.moves[1].job, "the second move stays in the first's job (%u, %u)",
                 p.moves[0].job, p.moves[1].job);
    eddy_rebalance_plan_clear(&p);
}

Test(rebalance_plan, moves_of_one_stage_are_grouped)
{
    /* job 1's stage holds worker 1's instances, job 2's worker 2's: the
     * walk alternates between them, the plan groups them */
    const eddy_rebalance_worker_t w[3] = {{1, 1}, {2, 1}, {3, 1}};
    const uint32_t x[3] = {1, 1, 1}, y[3] = {2, 2, 2};
    const eddy_rebalance_stage_t s[2] = {{1, 0, true, 3, x}, {2, 0, true, 3, y}};
    eddy_rebalance_plan_t p = plan_of(w, 3, s, 2);
    cr_assert_str_eq(spread(p.load_after, 3), "2/2/2");
    cr_assert_eq(p.n_moves, 2);
    cr_assert_neq(p.moves[0].job, p.moves[1].job);

    const uint32_t z[6] = {1, 1, 1, 2, 2, 2};
    const eddy_rebalance_worker_t w4[4] = {{1, 1}, {2, 1}, {3, 1}, {4, 1}};
    const eddy_rebalance_stage_t s2[2] = {{1, 0, true, 6, z}, {2, 0, true, 6, z}};
    eddy_rebalance_plan_t q = plan_of(w4, 4, s2, 2);
    cr_assert_str_eq(spread(q.load_after, 4), "3/3/3/3");
    for (uint32_t i = 1; i < q.n_moves; i++)
        if (q.moves[i].job != q.moves[i - 1].job)
            for (uint32_t k = i + 1; k < q.n_moves; k++)
                cr_assert_eq(q.moves[k].job, q.moves[i].job, "job %u's moves are split", q.moves[i - 1].job);
    eddy_rebalance_plan_clear(&q);
    eddy_rebalance_plan_clear(&p);
}

Test(rebalance_plan, nothing_movable_nothing_moves)
{
    const eddy_rebalance_worker_t w[2] = {{1, 2}, {2, 2}};
    const uint32_t src[4] = {1, 1, 1, 1};
    const eddy_rebalance_stage_t s[1] = {{1, 0, false, 4, src}};
    eddy_rebalance_plan_t p = plan_of(w, 2, s, 1);
    cr_assert_eq(p.n_moves, 0);
    cr_assert_str_eq(spread(p.load_after, 2), "4/0");
    eddy_rebalance_plan_clear(&p);
}

Test(rebalance_plan, a_single_worker_keeps_everything)
{
    const eddy_rebalance_worker_t w[1] = {{5, 8}};
    const uint32_t k[3] = {5, 5, 5};
    const eddy_rebalance_stage_t s[1] = {{1, 0, true, 3, k}};
    eddy_rebalance_plan_t p = plan_of(w, 1, s, 1);
    cr_assert_eq(p.n_moves, 0);
    eddy_rebalance_plan_clear(&p);
}

/* Unknown cores (0) weigh like the smallest known machine: here like the
 * others, so 6/0/0 becomes 2/2/2. */
Test(rebalance_plan, a_worker_with_0_cores_counts_as_the_smallest)
{
    const eddy_rebalance_worker_t w[3] = {{1, 4}, {2, 0}, {3, 4}};
    const uint32_t k[6] = {1, 1, 1, 1, 1, 1};
    const eddy_rebalance_stage_t s[1] = {{1, 0, true, 6, k}};
    eddy_rebalance_plan_t p = plan_of(w, 3, s, 1);
    cr_assert_str_eq(spread(p.load_after, 3), "2/2/2");
    cr_assert_eq(p.n_moves, 4);
    eddy_rebalance_plan_clear(&p);

    /* nobody reported cores: all weigh 1 */
    const eddy_rebalance_worker_t z[2] = {{1, 0}, {2, 0}};
    p = plan_of(z, 2, s, 1);
    cr_assert_str_eq(spread(p.load_after, 2), "3/3");
    eddy_rebalance_plan_clear(&p);
}

Test(rebalance_plan, more_cores_carry_more)
{
    const eddy_rebalance_worker_t w[2] = {{1, 2}, {2, 6}};
    const uint32_t k[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const eddy_rebalance_stage_t s[1] = {{1, 0, true, 8, k}};
    eddy_rebalance_plan_t p = plan_of(w, 2, s, 1);
    cr_assert_str_eq(spread(p.load_after, 2), "2/6", "8 instances on 2 + 6 cores: %s",
                     spread(p.load_after, 2));
    cr_assert_eq(p.n_moves, 6);
    eddy_rebalance_plan_clear(&p);
}

Test(rebalance_plan, instances_on_an_unlisted_worker_are_left_alone)
{
    const eddy_rebalance_worker_t w[2] = {{1, 2}, {2, 2}};
    const uint32_t k[4] = {9, 9, 9, 1};
    const eddy_rebalance_stage_t s[1] = {{1, 0, true, 4, k}};
    eddy_rebalance_plan_t p = plan_of(w, 2, s, 1);
    cr_assert_eq(p.n_moves, 0, "1/0 is even enough; worker 9's instances are not ours to move");
    cr_assert_str_eq(spread(p.load_before, 2), "1/0");
    eddy_rebalance_plan_clear(&p);
}

Test(rebalance_plan, the_spread_text_is_truncated_safely)
{
    const uint32_t loads[4] = {12, 3, 0, 7};
    char buf[6];
    cr_assert_str_eq(eddy_rebalance_spread(loads, 4, buf, sizeof buf), "12/3/");
    char big[32];
    cr_assert_str_eq(eddy_rebalance_spread(loads, 4, big, sizeof big), "12/3/0/7");
}
