/* test_finished_checkpoint.c - checkpoints after tasks finish (FLIP-147),
 * the pure parts in coordinator/checkpoint.h: a pending checkpoint that
 * expects no ACK from tasks finished before it, and the rule that accepts
 * an ACK naming ended inputs only when each named upstream task reported
 * TASK_DONE in this epoch. */
#include <criterion/criterion.h>
#include <string.h>
#include <stdlib.h>

#include "coordinator/checkpoint.h"
#include "tests/unit/leak_check.h"

TestSuite(finished_checkpoint, .fini = eddy_test_leak_check);

static const char *stage_names(const void *arg, uint32_t stage)
{
    (void)arg;
    static const char *names[] = {"source", "count", "sink"};
    return names[stage];
}

#define DONE 1u
#define OTHER 2u /* another report (a final ACK) is not TASK_DONE */

/* source(3) -> count(2) -> sink(1) */
static const uint32_t par[] = {3, 2, 1};

static coord_pending_checkpoint_t *pending(void)
{
    bool source[] = {true, false, false};
    coord_pending_checkpoint_t *pc = coord_pending_checkpoint_new(9, 2, 3, par, source, 0);
    cr_assert(pc);
    return pc;
}

static const coord_checkpoint_cost_t one_file = {.bytes = 1, .files = 1};

Test(finished_checkpoint, completes_without_the_finished_tasks)
{
    coord_pending_checkpoint_t *pc = pending();
    cr_assert_eq(coord_pending_checkpoint_finish_task(pc, 0, 2), COORD_ACK_ACCEPTED);
    /* the five others ACK; the finished source never does */
    uint32_t order[][2] = {{0, 0}, {1, 1}, {0, 1}, {2, 0}, {1, 0}};
    for (int k = 0; k < 5; k++) {
        cr_assert_not(coord_pending_checkpoint_all_acked(pc), "complete after %d ACKs", k);
        cr_assert_eq(coord_pending_checkpoint_ack(pc, order[k][0], order[k][1], 5, NULL, 0, &one_file),
                     COORD_ACK_ACCEPTED);
    }
    cr_assert(coord_pending_checkpoint_all_acked(pc));
    char missing[64];
    cr_assert_eq(coord_pending_checkpoint_missing_text(pc, stage_names, NULL, missing, sizeof missing), 0);
    uint32_t n;
    eddy_task_ref_t *f = coord_pending_checkpoint_finished(pc, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(f[0].stage, 0);
    cr_assert_eq(f[0].instance, 2);
    /* its position stays "none": it starts finished, not from a position */
    cr_assert_eq(pc->positions[2].position, -1);
    free(f);
    coord_pending_checkpoint_destroy(&pc);
}

Test(finished_checkpoint, a_finished_task_cannot_ack_nor_be_marked_twice)
{
    coord_pending_checkpoint_t *pc = pending();
    cr_assert_eq(coord_pending_checkpoint_finish_task(pc, 1, 1), COORD_ACK_ACCEPTED);
    cr_assert_eq(coord_pending_checkpoint_finish_task(pc, 1, 1), COORD_ACK_DUPLICATE);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 1, 1, -1, NULL, 0, &one_file), COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(coord_pending_checkpoint_finish_task(pc, 1, 2), COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(coord_pending_checkpoint_finish_task(pc, 3, 0), COORD_ACK_UNKNOWN_TASK);
    cr_assert_eq(coord_pending_checkpoint_ack(pc, 0, 0, 1, NULL, 0, &one_file), COORD_ACK_ACCEPTED);
    cr_assert(coord_pending_checkpoint_acked(pc, 0, 0));
    cr_assert_not(coord_pending_checkpoint_acked(pc, 0, 1));
    cr_assert_not(coord_pending_checkpoint_acked(pc, 1, 1), "finished is not acknowledged");
    /* a task that acknowledged cannot be marked finished afterwards */
    cr_assert_eq(coord_pending_checkpoint_finish_task(pc, 0, 0), COORD_ACK_DUPLICATE);
    cr_assert_eq(pc->n_acked, 1);
    cr_assert_eq(pc->n_finished, 1);
    char missing[96];
    cr_assert_gt(coord_pending_checkpoint_missing_text(pc, stage_names, NULL, missing, sizeof missing), 0);
    cr_assert(!strncmp(missing, "source[1], ", 11), "%s", missing);
    cr_assert_null(strstr(missing, "count[1]"), "finished, yet listed: %s", missing);
    coord_pending_checkpoint_destroy(&pc);
}

Test(finished_checkpoint, none_finished_lists_nothing)
{
    coord_pending_checkpoint_t *pc = pending();
    uint32_t n = 7;
    cr_assert_null(coord_pending_checkpoint_finished(pc, &n));
    cr_assert_eq(n, 0);
    coord_pending_checkpoint_destroy(&pc);
}

/* seen: stage-major flags of the 6 tasks */
static coord_ended_verdict_t verdict(const uint8_t *seen, const eddy_task_ref_t *ended, uint32_t n,
                                     eddy_task_ref_t *bad)
{
    return coord_ended_inputs_verdict(3, par, seen, 6, DONE, ended, n, bad);
}

Test(finished_checkpoint, ended_inputs_accepted_only_when_their_tasks_are_done)
{
    uint8_t seen[6] = {0};
    eddy_task_ref_t bad;
    eddy_task_ref_t one[] = {{0, 2}};
    /* no ended input: nothing to check */
    cr_assert_eq(verdict(seen, NULL, 0, &bad), COORD_ENDED_ACCEPT);
    /* an end of stream from 0[2], which never reported TASK_DONE: forged,
     * or its report is late; either way the checkpoint is declined */
    cr_assert_eq(verdict(seen, one, 1, &bad), COORD_ENDED_NOT_DONE);
    cr_assert(bad.stage == 0 && bad.instance == 2);
    seen[2] = OTHER;
    cr_assert_eq(verdict(seen, one, 1, &bad), COORD_ENDED_NOT_DONE, "only TASK_DONE counts");
    seen[2] |= DONE;
    cr_assert_eq(verdict(seen, one, 1, &bad), COORD_ENDED_ACCEPT);
    /* every named input must be done, not just one */
    eddy_task_ref_t two[] = {{0, 2}, {0, 0}};
    cr_assert_eq(verdict(seen, two, 2, &bad), COORD_ENDED_NOT_DONE);
    cr_assert(bad.stage == 0 && bad.instance == 0);
    seen[0] = DONE;
    cr_assert_eq(verdict(seen, two, 2, &bad), COORD_ENDED_ACCEPT);
    /* without the epoch's reports (out of memory at deploy), nothing is done */
    cr_assert_eq(coord_ended_inputs_verdict(3, par, NULL, 0, DONE, one, 1, &bad),
                 COORD_ENDED_NOT_DONE);
}

Test(finished_checkpoint, ended_inputs_naming_no_task_are_refused)
{
    uint8_t seen[6] = {DONE, DONE, DONE, DONE, DONE, DONE};
    eddy_task_ref_t bad;
    eddy_task_ref_t no_instance[] = {{0, 3}};
    cr_assert_eq(verdict(seen, no_instance, 1, &bad), COORD_ENDED_UNKNOWN_TASK);
    cr_assert(bad.stage == 0 && bad.instance == 3);
    eddy_task_ref_t no_stage[] = {{3, 0}};
    cr_assert_eq(verdict(seen, no_stage, 1, &bad), COORD_ENDED_UNKNOWN_TASK);
    /* the flags array shorter than the tasks (a stale epoch's): not done */
    eddy_task_ref_t last[] = {{2, 0}};
    cr_assert_eq(coord_ended_inputs_verdict(3, par, seen, 5, DONE, last, 1, &bad),
                 COORD_ENDED_NOT_DONE);
}
