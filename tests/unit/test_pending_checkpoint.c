/* test_pending_checkpoint.c - the pending checkpoint (coordinator/checkpoint.h)
 * driven without sockets: every task must acknowledge exactly once; a
 * duplicate or an unknown task's ACK is refused and can never complete the
 * checkpoint early; source positions land in stage/instance order. */
#include <criterion/criterion.h>

#include "coordinator/checkpoint.h"
#include "tests/unit/leak_check.h"

TestSuite(pending_checkpoint, .fini = eddy_test_leak_check);

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
        cr_assert_eq(coord_pending_checkpoint_ack(pc, order[k][0], order[k][1],
                                                  order[k][0] == 0 ? 100 + (int64_t)order[k][1] : -1, NULL, 0, 10, 1),
                     COORD_ACK_ACCEPTED);
    }
    cr_assert(coord_pending_checkpoint_all_acked(pc));
    cr_assert_eq(pc->bytes, 60);
    cr_assert_eq(pc->files, 6);
    cr_assert_eq(pc->positions[0].position, 100);
    cr_assert_eq(pc->positions[1].position, 101);
    uint32_t s, i;
    cr_assert_not(coord_pending_checkpoint_first_missing(pc, &s, &i));
    coord_pending_checkpoint_destroy(&pc);
    cr_assert_null(pc);
}

Test(pending_checkpoint, duplicate_ack_cannot_complete_it_early)
{
    coord_pending_checkpoint_t *pc = three_stages();
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 0, -1, NULL, 0, 5, 1), COORD_ACK_ACCEPTED);
    /* the same task five more times: as many ACKs as there are tasks */
    for (int k = 0; k < 5; k++)
        cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 0, -1, NULL, 0, 5, 1), COORD_ACK_DUPLICATE);
    cr_assert_not(coord_pending_checkpoint_all_acked(pc));
    cr_assert_eq(pc->n_acked, 1);
    cr_assert_eq(pc->bytes, 5, "a duplicate's bytes were counted");
    uint32_t s, i;
    cr_assert(coord_pending_checkpoint_first_missing(pc, &s, &i));
    cr_assert_eq(s, 0);
    cr_assert_eq(i, 0);
    coord_pending_checkpoint_destroy(&pc);
}

Test(pending_checkpoint, unknown_tasks_are_refused)
{
    coord_pending_checkpoint_t *pc = three_stages();
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 3, 0, -1, NULL, 0, 0, 0), COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 0, 2, 5, NULL, 0, 0, 0), COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 2, 1, -1, NULL, 0, 0, 0), COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, UINT32_MAX, UINT32_MAX, -1, NULL, 0, 0, 0),
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
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 2, 2, 42, NULL, 0, 0, 0), COORD_ACK_ACCEPTED);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 0, 1, 7, NULL, 0, 0, 0), COORD_ACK_ACCEPTED);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 0, 99, NULL, 0, 0, 0), COORD_ACK_ACCEPTED);
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
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 0, 1, 5, state, sizeof state, 0, 0),
                 COORD_ACK_ACCEPTED);
    state[0] = 'X'; /* the ACK's buffer is freed with its message */
    /* a non-source task's state is not kept */
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 0, -1, "junk", 4, 0, 0), COORD_ACK_ACCEPTED);
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
