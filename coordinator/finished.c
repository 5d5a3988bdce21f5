/* finished.c - checkpoints after tasks finish (Flink's FLIP-147).
 *
 * A task that reached the end of its input (a bounded source instance with
 * nothing more to read, or a task all of whose inputs ended) reports
 * TASK_DONE; checkpoints go on without it:
 *  trigger   the tasks done so far in this epoch are marked finished in the
 *            new pending checkpoint: they are not expected to ACK (finished
 *            sources ignore the TRIGGER; finished tasks get no barrier).
 *  ack       a task whose input ended takes the checkpoint and names those
 *            inputs in its ACK; the ACK counts only if each of them reported
 *            TASK_DONE in this epoch (coord_ended_inputs_verdict), else the
 *            checkpoint is declined: a forged end of stream must not let a
 *            task snapshot without records its real upstream sent before
 *            the barrier.
 *  done      a TASK_DONE while a checkpoint is pending abandons it (not
 *            counted as a failure) unless that task acknowledged it already
 *            (and holds no two-phase-commit operator, and the checkpoint is
 *            not a rescale's):
 *            a task that ended before its barrier took no part in it and
 *            cannot be recorded as finished in it either.
 *  record    the checkpoint's metadata names its finished tasks; a restore
 *            from it deploys them finished (DEPLOY's finished list): each
 *            starts at its end, replays nothing and reports TASK_DONE again.
 * Limitation: while a finished task holds a two-phase-commit operator (what
 * it prepared at its end belongs to no checkpoint, and a restore would roll
 * it back) no checkpoint starts, as before. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "coordinator/internal.h"

/* Whether stage s holds an operator with pre-commit or commit. */
static bool two_phase_stage(const coord_job_t *j, uint32_t s)
{
    const eddy_stage_def_t *st = &j->graph.stages[s];
    for (uint32_t i = 0; i < st->n_ops; i++)
        if (st->ops[i].ops && (st->ops[i].ops->prepare || st->ops[i].ops->commit))
            return true;
    return false;
}

static bool task_done(const coord_job_t *j, uint32_t k)
{
    return j->task_seen && k < j->n_task_seen && (j->task_seen[k] & COORD_TASK_SEEN_DONE);
}

bool coord_finished_blocks_checkpoints(const coord_job_t *j, uint32_t *stage, uint32_t *instance)
{
    if (!j->any_done)
        return false;
    uint32_t k = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        for (uint32_t i = 0; i < j->placement[s].parallelism; i++, k++)
            if (task_done(j, k) && two_phase_stage(j, s)) {
                *stage = s;
                *instance = i;
                return true;
            }
    return false;
}

bool coord_job_has_finished(const coord_job_t *j)
{
    return j->any_done || j->n_deploy_finished > 0;
}

void coord_finished_mark(coord_job_t *j)
{
    if (!j->pending || !j->any_done)
        return;
    uint32_t k = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        for (uint32_t i = 0; i < j->placement[s].parallelism; i++, k++)
            if (task_done(j, k))
                coord_pending_checkpoint_finish_task(j->pending, s, i);
}

void coord_finished_on_task_done(coord_t *c, coord_job_t *j, uint32_t stage, uint32_t instance)
{
    coord_pending_checkpoint_t *pc = j->pending;
    if (!pc || pc->committing)
        return;
    /* A rescale's snapshot never survives an end of input (as before). */
    if (!pc->pause && coord_pending_checkpoint_acked(pc, stage, instance) &&
        stage < j->graph.n_stages && !two_phase_stage(j, stage))
        return; /* it took part, and a restore replays it from its position */
    coord_checkpoint_abort(c, j, "input ended while it was in flight", false);
}

bool coord_finished_ack_ok(coord_t *c, coord_job_t *j, const eddy_msg_t *m)
{
    uint32_t p[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        p[s] = j->placement[s].parallelism;
    eddy_task_ref_t bad = {0, 0};
    coord_ended_verdict_t v =
        coord_ended_inputs_verdict(j->graph.n_stages, p, j->task_seen, j->n_task_seen,
                                   COORD_TASK_SEEN_DONE, m->u.ack.ended, m->u.ack.n_ended, &bad);
    if (v == COORD_ENDED_ACCEPT)
        return true;
    const char *task = m->u.ack.stage < j->graph.n_stages ? j->graph.stages[m->u.ack.stage].name : "?";
    char why[EDDY_ERROR_MAX];
    if (v == COORD_ENDED_UNKNOWN_TASK)
        snprintf(why, sizeof why, "task %s[%u] counted an input from %u[%u] as ended, which is "
                 "no task of the job; declined", task, m->u.ack.instance, bad.stage, bad.instance);
    else
        snprintf(why, sizeof why, "task %s[%u] counted its input from %s[%u] as ended, which "
                 "has not reported TASK_DONE; declined", task, m->u.ack.instance,
                 j->graph.stages[bad.stage].name, bad.instance);
    coord_checkpoint_abort(c, j, why, false);
    return false;
}

int coord_finished_for_deploy(coord_job_t *j, const coord_retained_t *from)
{
    free(j->deploy_finished);
    j->deploy_finished = NULL;
    j->n_deploy_finished = 0;
    if (!from || !from->n_finished)
        return 0;
    j->deploy_finished = malloc(from->n_finished * sizeof *j->deploy_finished);
    if (!j->deploy_finished)
        return -1;
    memcpy(j->deploy_finished, from->finished, from->n_finished * sizeof *j->deploy_finished);
    j->n_deploy_finished = from->n_finished;
    return 0;
}
