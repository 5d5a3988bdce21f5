/* test_route_table.c - versioned key-group routing and migration plans
 * (state/route_table.c): a table starts as the uniform assignment, steps
 * apply only with a newer version and are all-or-nothing, and a plan's steps
 * move exactly the groups whose owner changes, each step bounded and from
 * one old owner to one new one, and applying every step in order reaches
 * the uniform assignment at the new parallelism. */
#include <criterion/criterion.h>

#include "state/keygroup.h"
#include "state/route_table.h"

Test(route_table, starts_uniform)
{
    eddy_route_table_t t;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_route_table_init(&t, 128, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(t.version, 0);
    for (uint32_t kg = 0; kg < 128; kg++)
        cr_assert_eq(eddy_route_table_owner(&t, kg), eddy_kg_owner(kg, 3, 128));
    cr_assert(eddy_route_table_uniform(&t));
    eddy_route_table_free(&t);
    cr_assert_eq(eddy_route_table_init(&t, 128, 0, &err), -1);
    cr_assert_eq(eddy_route_table_init(&t, 4, 5, &err), -1);
}

Test(route_table, apply_versions_and_refusals)
{
    eddy_route_table_t t;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_route_table_init(&t, 16, 2, &err), 0);
    uint32_t kgs[] = {0, 1};
    cr_assert_eq(eddy_route_table_apply(&t, 1, kgs, 2, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_route_table_owner(&t, 0), 1);
    cr_assert_eq(eddy_route_table_owner(&t, 1), 1);
    cr_assert_eq(t.version, 1);
    cr_assert(!eddy_route_table_uniform(&t));
    /* not newer: refused, unchanged */
    uint32_t back[] = {0};
    cr_assert_eq(eddy_route_table_apply(&t, 1, back, 1, 0, &err), -1);
    cr_assert_eq(eddy_route_table_owner(&t, 0), 1);
    /* bad instance, bad group, repeated group: refused, unchanged */
    cr_assert_eq(eddy_route_table_apply(&t, 2, back, 1, 2, &err), -1);
    uint32_t bad[] = {3, 16};
    cr_assert_eq(eddy_route_table_apply(&t, 2, bad, 2, 0, &err), -1);
    cr_assert_eq(eddy_route_table_owner(&t, 3), 0);
    uint32_t twice[] = {2, 2};
    cr_assert_eq(eddy_route_table_apply(&t, 2, twice, 2, 1, &err), -1);
    cr_assert_eq(t.version, 1);
    eddy_route_table_free(&t);
}

/* Applying a plan's steps to a table at parallelism max(p, q) whose groups
 * are at their p owners must give the uniform assignment at q. */
static void check_plan(uint32_t k, uint32_t p, uint32_t q, uint32_t step)
{
    uint32_t wide = p > q ? p : q;
    eddy_route_table_t t;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_route_table_init(&t, k, wide, &err), 0);
    for (uint32_t kg = 0; kg < k; kg++)
        t.owner[kg] = (uint16_t)eddy_kg_owner(kg, p, k);
    eddy_route_plan_t plan;
    cr_assert_eq(eddy_route_plan_to(&t, q, step, &plan, &err), 0, "%s", err.msg);
    uint32_t moved = 0;
    for (uint32_t kg = 0; kg < k; kg++)
        moved += eddy_kg_owner(kg, p, k) != eddy_kg_owner(kg, q, k);
    cr_assert_eq(plan.n_groups, moved, "K=%u %u->%u: plan moves %u groups, %u change owner", k, p,
                 q, plan.n_groups, moved);
    uint32_t covered = 0;
    for (uint32_t s = 0; s < plan.n_steps; s++) {
        const eddy_route_step_t *st = &plan.steps[s];
        cr_assert(st->n >= 1 && st->n <= step);
        cr_assert_eq(st->first, covered);
        for (uint32_t i = st->first; i < st->first + st->n; i++) {
            cr_assert_eq(t.owner[plan.kgs[i]], st->from);
            cr_assert_eq(eddy_kg_owner(plan.kgs[i], q, k), st->to);
        }
        cr_assert_eq(eddy_route_table_apply(&t, s + 1, &plan.kgs[st->first], st->n, st->to, &err), 0,
                     "%s", err.msg);
        covered += st->n;
    }
    cr_assert_eq(covered, plan.n_groups);
    for (uint32_t kg = 0; kg < k; kg++)
        cr_assert_eq(t.owner[kg], eddy_kg_owner(kg, q, k), "K=%u %u->%u kg %u", k, p, q, kg);
    eddy_route_plan_free(&plan);
    eddy_route_table_free(&t);
}

Test(route_table, plans_reach_the_new_assignment)
{
    const uint32_t steps[] = {1, 4, 16, 128};
    for (uint32_t p = 1; p <= 8; p++)
        for (uint32_t q = 1; q <= 8; q++)
            for (uint32_t s = 0; s < 4; s++)
                check_plan(128, p, q, steps[s]);
    check_plan(4096, 3, 7, 32);
}

Test(route_table, nothing_moves_at_the_same_parallelism)
{
    eddy_route_table_t t;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_route_table_init(&t, 128, 4, &err), 0);
    eddy_route_plan_t plan;
    cr_assert_eq(eddy_route_plan_to(&t, 4, 8, &plan, &err), 0);
    cr_assert_eq(plan.n_groups, 0);
    cr_assert_eq(plan.n_steps, 0);
    eddy_route_plan_free(&plan);
    cr_assert_eq(eddy_route_plan_to(&t, 4, 0, &plan, &err), -1);
    eddy_route_table_free(&t);
}

/* A fluid migration's plan (coordinator/fluid.c): 4 instances routed as at
 * 4 over a table of 6; instances 1 and 3 give every group to 4 and 5, in
 * steps of at most 3 groups from one old owner to one new one; applied in
 * order, the table routes them there and leaves every other group alone. */
Test(route_table, a_plan_between_two_tables_moves_whole_instances)
{
    eddy_route_table_t from, to;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_route_table_init_as(&from, 128, 6, 4, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_route_table_init_as(&to, 128, 6, 4, &err), 0, "%s", err.msg);
    uint32_t moved = 0;
    for (uint32_t kg = 0; kg < 128; kg++)
        if (to.owner[kg] == 1 || to.owner[kg] == 3) {
            to.owner[kg] = to.owner[kg] == 1 ? 4 : 5;
            moved++;
        }
    eddy_route_plan_t plan;
    cr_assert_eq(eddy_route_plan_between(&from, &to, 3, &plan, &err), 0, "%s", err.msg);
    cr_assert_eq(plan.n_groups, moved);
    for (uint32_t s = 0; s < plan.n_steps; s++) {
        const eddy_route_step_t *st = &plan.steps[s];
        cr_assert(st->n >= 1 && st->n <= 3);
        cr_assert((st->from == 1 && st->to == 4) || (st->from == 3 && st->to == 5));
        cr_assert_eq(eddy_route_table_apply(&from, s + 1, &plan.kgs[st->first], st->n, st->to, &err),
                     0, "%s", err.msg);
    }
    for (uint32_t kg = 0; kg < 128; kg++)
        cr_assert_eq(from.owner[kg], to.owner[kg], "key group %u", kg);
    eddy_route_plan_free(&plan);
    /* tables of another size or parallelism: refused */
    eddy_route_table_t other;
    cr_assert_eq(eddy_route_table_init(&other, 128, 5, &err), 0);
    cr_assert_eq(eddy_route_plan_between(&from, &other, 3, &plan, &err), -1);
    eddy_route_table_free(&other);
    eddy_route_table_free(&from);
    eddy_route_table_free(&to);
}
