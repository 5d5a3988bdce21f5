/* test_snapshot_chain.c - which key groups an incremental checkpoint
 * writes (state/snapshot_chain.c): the first checkpoint and every N-th are
 * full, unchanged groups refer to their base, a checkpoint becomes a base
 * only once complete and only if it is the newest taken, a written group
 * loses its old base, a changed or forgotten group is written, and a moved
 * watermark rewrites the group. */
#include <criterion/criterion.h>

#include "state/snapshot_chain.h"

#define K 8

static uint64_t plan(eddy_snapshot_chain_t *c, uint32_t kg, bool full, uint64_t id)
{
    return eddy_snapshot_chain_plan(c, kg, 0, full, id);
}

Test(snapshot_chain, first_full_then_references)
{
    eddy_snapshot_chain_t *c = eddy_snapshot_chain_new(K, 10);
    cr_assert_not_null(c);
    cr_assert(eddy_snapshot_chain_begin(c, 1));
    for (uint32_t kg = 0; kg < K; kg++)
        cr_assert_eq(plan(c, kg, true, 1), 0);
    eddy_snapshot_chain_completed(c, 1);
    cr_assert_not(eddy_snapshot_chain_begin(c, 2));
    eddy_snapshot_chain_forget(c, 3); /* changed */
    for (uint32_t kg = 0; kg < K; kg++)
        cr_assert_eq(plan(c, kg, false, 2), kg == 3 ? 0u : 1u, "kg %u", kg);
    eddy_snapshot_chain_completed(c, 2);
    cr_assert_eq(eddy_snapshot_chain_base(c, 3), 2);
    cr_assert_eq(eddy_snapshot_chain_base(c, 4), 1);
    cr_assert_not(eddy_snapshot_chain_begin(c, 3));
    cr_assert_eq(plan(c, 3, false, 3), 2);
    eddy_snapshot_chain_destroy(&c);
    cr_assert_null(c);
}

Test(snapshot_chain, never_completed_is_never_a_base)
{
    eddy_snapshot_chain_t *c = eddy_snapshot_chain_new(K, 10);
    eddy_snapshot_chain_begin(c, 1);
    cr_assert_eq(plan(c, 0, true, 1), 0);
    /* 1 never completes */
    cr_assert_not(eddy_snapshot_chain_begin(c, 2));
    cr_assert_eq(plan(c, 0, false, 2), 0, "no base yet: written again");
    eddy_snapshot_chain_completed(c, 1); /* late, and not the newest taken */
    cr_assert_eq(eddy_snapshot_chain_base(c, 0), 0);
    eddy_snapshot_chain_completed(c, 2);
    cr_assert_eq(eddy_snapshot_chain_base(c, 0), 2);
    eddy_snapshot_chain_destroy(&c);
}

Test(snapshot_chain, completion_after_a_later_snapshot_is_ignored)
{
    eddy_snapshot_chain_t *c = eddy_snapshot_chain_new(K, 10);
    eddy_snapshot_chain_begin(c, 1);
    plan(c, 0, true, 1);
    eddy_snapshot_chain_begin(c, 2); /* barrier 2 before COMPLETE(1) arrived */
    plan(c, 0, false, 2);
    eddy_snapshot_chain_completed(c, 1);
    cr_assert_eq(eddy_snapshot_chain_base(c, 0), 0);
    eddy_snapshot_chain_destroy(&c);
}

Test(snapshot_chain, written_group_loses_old_base)
{
    eddy_snapshot_chain_t *c = eddy_snapshot_chain_new(K, 3);
    eddy_snapshot_chain_begin(c, 1);
    plan(c, 0, true, 1);
    eddy_snapshot_chain_completed(c, 1);
    cr_assert_not(eddy_snapshot_chain_begin(c, 2));
    cr_assert_eq(plan(c, 0, false, 2), 1);
    eddy_snapshot_chain_completed(c, 2);
    cr_assert_not(eddy_snapshot_chain_begin(c, 3));
    cr_assert_eq(plan(c, 0, false, 3), 1);
    eddy_snapshot_chain_completed(c, 3);
    cr_assert(eddy_snapshot_chain_begin(c, 4), "every 3rd is full");
    cr_assert_eq(plan(c, 0, true, 4), 0);
    /* 4 is not complete yet: 5 must not refer to 1 any more */
    cr_assert_not(eddy_snapshot_chain_begin(c, 5));
    cr_assert_eq(plan(c, 0, false, 5), 0);
    eddy_snapshot_chain_destroy(&c);
}

Test(snapshot_chain, full_every_one_is_always_full)
{
    eddy_snapshot_chain_t *c = eddy_snapshot_chain_new(K, 1);
    for (uint64_t id = 1; id < 5; id++) {
        cr_assert(eddy_snapshot_chain_begin(c, id));
        cr_assert_eq(plan(c, 1, true, id), 0);
        eddy_snapshot_chain_completed(c, id);
    }
    eddy_snapshot_chain_destroy(&c);
}

Test(snapshot_chain, watermark_move_rewrites)
{
    eddy_snapshot_chain_t *c = eddy_snapshot_chain_new(K, 10);
    eddy_snapshot_chain_begin(c, 1);
    cr_assert_eq(eddy_snapshot_chain_plan(c, 2, 100, true, 1), 0);
    eddy_snapshot_chain_completed(c, 1);
    eddy_snapshot_chain_begin(c, 2);
    cr_assert_eq(eddy_snapshot_chain_plan(c, 2, 200, false, 2), 0);
    eddy_snapshot_chain_completed(c, 2);
    eddy_snapshot_chain_begin(c, 3);
    cr_assert_eq(eddy_snapshot_chain_plan(c, 2, 200, false, 3), 2);
    eddy_snapshot_chain_destroy(&c);
}

Test(snapshot_chain, bad_input)
{
    cr_assert_null(eddy_snapshot_chain_new(0, 10));
    cr_assert_null(eddy_snapshot_chain_new(K, 0));
}
