/* test_pending_checkpoint.c - the pending checkpoint (coordinator/checkpoint.h)
 * driven without sockets: every task must acknowledge exactly once; a
 * duplicate or an unknown task's ACK is refused and can never complete the
 * checkpoint early; source positions land in stage/instance order. */
#include <criterion/criterion.h>
#include <string.h>

#include "coordinator/checkpoint.h"
#include "tests/unit/leak_check.h"

TestSuite(pending_checkpoint, .fini = eddy_test_leak_check);

static const char *stage_names(const void *arg, uint32_t stage)
{
    (void)arg;
    static const char *names[] = {"source", "count", "sink"};
    return names[stage];
}

/* source(2) -> count(3) -> sink(1) */
static coord_pending_checkpoint_t *three_stages(void)
{
    uint32_t p[] = {2, 3, 1};
    bool source[] = {true, false, false};
    coord_pending_checkpoint_t *pc = coord_pending_checkpoint_new(7, 4, 3, p, source, 1000);
    cr_assert(pc);
    cr_assert_eq(pc->n_tasks, 6);
    cr_assert_eq(pc->n_positions, 2);
    return pc;
}

Test(pending_checkpoint, completes_when_every_task_acked_once)
{
    coord_pending_checkpoint_t *pc = three_stages();
    uint32_t order[][2] = {{1, 2}, {0, 1}, {2, 0}, {1, 0}, {0, 0}, {1, 1}};
    for (int k = 0; k < 6; k++) {
        cr_assert_not(coord_pending_checkpoint_all_acked(pc), "complete after %d ACKs", k);
        /* the slowest task differs per part: each is the maximum over tasks */
        coord_checkpoint_cost_t cost = {.bytes = 10, .files = 1, .sync_us = k == 2 ? 900u : 5u,
                                        .async_us = 100u * (uint64_t)k, .align_us = k == 0 ? 70u : 0u};
        int64_t position = order[k][0] == 0 ? 100 + (int64_t)order[k][1] : -1;
        cr_assert_eq(coord_pending_checkpoint_ack(pc, order[k][0], order[k][1], position, NULL, 0, &cost),
                     COORD_ACK_ACCEPTED);
    }
    cr_assert(coord_pending_checkpoint_all_acked(pc));
    cr_assert_eq(pc->cost.bytes, 60);
    cr_assert_eq(pc->cost.files, 6);
    cr_assert_eq(pc->cost.sync_us, 900);
    cr_assert_eq(pc->cost.async_us, 500);
    cr_assert_eq(pc->cost.align_us, 70);
    cr_assert_eq(pc->positions[0].position, 100);
    cr_assert_eq(pc->positions[1].position, 101);
    char missing[64];
    cr_assert_eq(coord_pending_checkpoint_missing_text(pc, stage_names, NULL, missing, sizeof missing), 0);
    coord_pending_checkpoint_destroy(&pc);
    cr_assert_null(pc);
}

Test(pending_checkpoint, duplicate_ack_cannot_complete_it_early)
{
    coord_pending_checkpoint_t *pc = three_stages();
    const coord_checkpoint_cost_t five = {.bytes = 5, .files = 1, .sync_us = 3};
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 0, -1, NULL, 0, &five), COORD_ACK_ACCEPTED);
    /* the same task five more times: as many ACKs as there are tasks */
    const coord_checkpoint_cost_t slow = {.bytes = 5, .files = 1, .sync_us = 99};
    for (int k = 0; k < 5; k++)
        cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 0, -1, NULL, 0, &slow), COORD_ACK_DUPLICATE);
    cr_assert_not(coord_pending_checkpoint_all_acked(pc));
    cr_assert_eq(pc->n_acked, 1);
    cr_assert_eq(pc->cost.bytes, 5, "a duplicate's bytes were counted");
    cr_assert_eq(pc->cost.sync_us, 3, "a duplicate's time was counted");
    char missing[128];
    cr_assert_eq(coord_pending_checkpoint_missing_text(pc, stage_names, NULL, missing, sizeof missing), 5);
    cr_assert_str_eq(missing, "source[0], source[1], count[1], count[2], sink[0]");
    coord_pending_checkpoint_destroy(&pc);
}

Test(pending_checkpoint, unknown_tasks_are_refused)
{
    coord_pending_checkpoint_t *pc = three_stages();
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 3, 0, -1, NULL, 0, NULL), COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 0, 2, 5, NULL, 0, NULL), COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 2, 1, -1, NULL, 0, NULL), COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, UINT32_MAX, UINT32_MAX, -1, NULL, 0, NULL),
                 COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(pc->n_acked, 0);
    cr_assert_eq(pc->positions[0].position, -1);
    cr_assert_eq(pc->positions[1].position, -1);
    coord_pending_checkpoint_destroy(&pc);
}

Test(pending_checkpoint, positions_of_several_source_stages)
{
    uint32_t p[] = {2, 1, 3};
    bool source[] = {true, false, true};
    coord_pending_checkpoint_t *pc = coord_pending_checkpoint_new(1, 1, 3, p, source, 0);
    cr_assert(pc);
    cr_assert_eq(pc->n_positions, 5);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 2, 2, 42, NULL, 0, NULL), COORD_ACK_ACCEPTED);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 0, 1, 7, NULL, 0, NULL), COORD_ACK_ACCEPTED);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 0, 99, NULL, 0, NULL), COORD_ACK_ACCEPTED);
    cr_assert_eq(pc->positions[1].position, 7);
    cr_assert_eq(pc->positions[4].position, 42);
    cr_assert_eq(pc->positions[2].position, -1);
    coord_pending_checkpoint_destroy(&pc);
}

Test(pending_checkpoint, bad_shapes)
{
    uint32_t p[] = {1};
    bool source[] = {true};
    cr_assert_null(coord_pending_checkpoint_new(1, 1, 0, p, source, 0));
    cr_assert_null(coord_pending_checkpoint_new(1, 1, EDDY_MAX_STAGES + 1, p, source, 0));
    coord_pending_checkpoint_destroy(NULL);
}

Test(pending_checkpoint, keeps_a_copy_of_each_source_state)
{
    coord_pending_checkpoint_t *pc = three_stages();
    char state[] = "files=3;offset=17";
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 0, 1, 5, state, sizeof state, NULL),
                 COORD_ACK_ACCEPTED);
    state[0] = 'X'; /* the ACK's buffer is freed with its message */
    /* a non-source task's state is not kept */
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 0, -1, "junk", 4, NULL), COORD_ACK_ACCEPTED);
    cr_assert_eq(pc->positions[1].position, 5);
    cr_assert_eq(pc->positions[1].state_len, sizeof state);
    cr_assert_str_eq(pc->positions[1].state, "files=3;offset=17");
    cr_assert_null(pc->positions[0].state);
    coord_source_progress_t *copy = coord_progress_dup(pc->positions, pc->n_positions);
    cr_assert(copy);
    cr_assert_str_eq(copy[1].state, "files=3;offset=17");
    cr_assert_neq(copy[1].state, pc->positions[1].state);
    coord_progress_free(&copy, pc->n_positions);
    cr_assert_null(copy);
    coord_pending_checkpoint_destroy(&pc);
}

Test(pending_checkpoint, missing_text_names_every_task_not_acknowledged)
{
    coord_pending_checkpoint_t *pc = three_stages();
    char buf[160];
    cr_assert_eq(coord_pending_checkpoint_missing_text(pc, stage_names, NULL, buf, sizeof buf), 6);
    cr_assert_str_eq(buf, "source[0], source[1], count[0], count[1], count[2], sink[0]");
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 0, 1, 3, NULL, 0, NULL), COORD_ACK_ACCEPTED);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 1, -1, NULL, 0, NULL), COORD_ACK_ACCEPTED);
    cr_assert_eq(coord_pending_checkpoint_missing_text(pc, stage_names, NULL, buf, sizeof buf), 4);
    cr_assert_str_eq(buf, "source[0], count[0], count[2], sink[0]");
    /* a short buffer is cut, never overrun */
    char tiny[12];
    cr_assert_eq(coord_pending_checkpoint_missing_text(pc, stage_names, NULL, tiny, sizeof tiny), 4);
    cr_assert_eq(strlen(tiny), sizeof tiny - 1);
    coord_pending_checkpoint_destroy(&pc);
}

Test(pending_checkpoint, missing_text_stops_after_eight_tasks)
{
    uint32_t p[] = {12};
    bool source[] = {true};
    coord_pending_checkpoint_t *pc = coord_pending_checkpoint_new(1, 1, 1, p, source, 0);
    cr_assert(pc);
    char buf[256];
    cr_assert_eq(coord_pending_checkpoint_missing_text(pc, stage_names, NULL, buf, sizeof buf), 12);
    cr_assert_str_eq(buf, "source[0], source[1], source[2], source[3], source[4], source[5], "
                          "source[6], source[7] and 4 more");
    coord_pending_checkpoint_destroy(&pc);
}
