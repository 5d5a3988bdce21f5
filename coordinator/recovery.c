/* recovery.c - restoring a job after a failure, and failing it for good.
 *
 * A dead worker, a failed task, a failed deploy or too many failed
 * checkpoints restore the job: DEPLOY(mode=RESTORE) of the whole job on the
 * usable workers from its newest complete checkpoint (sources rewind to its
 * positions), or from the beginning when there is none. Restores after a
 * failure after the first in a row back off exponentially (none for the
 * first, then 100 ms doubling to 10 s) and are limited
 * to COORD_MAX_RESTARTS in a row without a complete checkpoint between; the
 * final failure names the last cause.
 *
 * Recovery never crosses a commit. When a restore fails because a file of
 * the newest checkpoint is corrupt or missing, the job may fall back to the
 * previous retained checkpoint (a warning names the file) only if nothing
 * was published past that one: COMPLETE went out when the newest
 * checkpoint completed, so a two-phase-commit sink (an operator with
 * commit(), e.g. part files or PostgreSQL) may have published its epoch,
 * and restoring an older checkpoint would publish the replay a second
 * time. Under exactly-once and at-most-once such a job fails instead, with
 * the cause in its status and the log; under at-least-once (duplicates
 * allowed) it falls back. The same holds when a new coordinator finds the
 * newest recorded checkpoint unreadable (job_store.c sets
 * j->unrestorable).
 *
 * at-most-once (--guarantee, common/guarantee.h): the keyed state still
 * comes from the newest checkpoint, but every source whose progress is its
 * position (file, generator, nexmark) starts from the furthest position it
 * reported in a heartbeat (or the checkpoint's, if further): the records
 * between the checkpoint and that position are lost, nothing is read
 * twice. What a source read after its last heartbeat is replayed; that is
 * no duplicate in the state (the state is the checkpoint's, which predates
 * it) but a write-through sink may have shown its effect already. Sources
 * whose progress is write_state's bytes (dir, redis) cannot be moved ahead
 * from here and resume from the checkpoint, as under at-least-once. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"

void coord_fail_job(coord_t *c, coord_job_t *j, const char *why)
{
    /* callers pass longer buffers (a cause plus context): cut at the field */
    size_t n = strnlen(why, sizeof j->error - 1);
    memcpy(j->error, why, n);
    j->error[n] = '\0';
    /* the status's last_failure: this failure is the last one */
    memmove(j->last_cause, why, n); /* why may be last_cause */
    j->last_cause[n] = '\0';
    eddy_error("job %s failed: %s", j->id, why);
    j->ended_ms = eddy_mono_ms();
    j->restore_scheduled = false;
    j->deploy_persisting = false;
    j->deploys_pending = 0;
    c->any_failed = true;
    coord_checkpoint_discard(c, j);
    coord_job_set_state(c, j, JOB_FAILED);
    coord_job_release(c, j);
    coord_rescale_abandon(c, j, why);
}

/* The first restore after a stable run goes at once: a killed worker costs
 * its detection plus the restore, not a fixed wait on top. Restores in a
 * row without a checkpoint between back off (100 ms doubling). */
static uint64_t restart_delay_ms(uint32_t attempt)
{
    if (attempt <= 1)
        return 0;
    uint64_t ms = COORD_RESTART_DELAY_MIN_MS;
    for (uint32_t i = 2; i < attempt && ms < COORD_RESTART_DELAY_MAX_MS; i++)
        ms *= 2;
    return ms < COORD_RESTART_DELAY_MAX_MS ? ms : COORD_RESTART_DELAY_MAX_MS;
}

/* at-most-once: the checkpoint's source progress (none: from the start)
 * with each position-only source moved to the furthest position it
 * reported. NULL when out of memory. */
static coord_source_progress_t *skip_ahead(const coord_job_t *j, const coord_retained_t *from)
{
    uint32_t n = coord_job_count_positions(j);
    coord_source_progress_t *p = from && from->n_positions == n ? coord_progress_dup(from->positions, n)
                                                                : coord_progress_new(n);
    if (!p)
        return NULL;
    for (uint32_t k = 0; k < n && k < j->n_reported_positions; k++)
        if (p[k].state_len == 0 && j->reported_positions[k] > p[k].position)
            p[k].position = j->reported_positions[k];
    return p;
}

const char *coord_job_commit_fence(const coord_job_t *j)
{
    if (j->guarantee == EDDY_GUARANTEE_AT_LEAST_ONCE)
        return NULL;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        for (uint32_t i = 0; i < j->graph.stages[s].n_ops; i++)
            if (j->graph.stages[s].ops[i].ops && j->graph.stages[s].ops[i].ops->commit)
                return j->graph.stages[s].name;
    return NULL;
}

/* Places the job on the usable workers and deploys it from its newest
 * retained checkpoint. */
static void restore_now(coord_t *c, coord_job_t *j, const char *why)
{
    j->restore_scheduled = false;
    if (j->unrestorable[0]) {
        coord_fail_job(c, j, j->unrestorable);
        return;
    }
    if (coord_usable_workers(c) == 0) {
        eddy_warn("job %s: %s; waiting for a worker to register", j->id, why);
        coord_job_set_state(c, j, JOB_WAITING);
        return;
    }
    uint32_t p[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        p[s] = coord_job_parallelism(j, s);
    eddy_err_t err;
    if (coord_place(c, j, p, &err) < 0) {
        eddy_warn("job %s: cannot place it: %s; waiting for workers", j->id, err.msg);
        coord_job_set_state(c, j, JOB_WAITING);
        return;
    }
    const coord_retained_t *from = j->n_retained ? &j->retained[j->n_retained - 1] : NULL;
    coord_source_progress_t *ahead = NULL;
    if (j->guarantee == EDDY_GUARANTEE_AT_MOST_ONCE && !(ahead = skip_ahead(j, from))) {
        coord_fail_job(c, j, "out of memory");
        return;
    }
    if (coord_finished_for_deploy(j, from) < 0) {
        coord_progress_free(&ahead, coord_job_count_positions(j));
        coord_fail_job(c, j, "out of memory");
        return;
    }
    if (from && from->n_finished)
        eddy_warn("job %s: %s; restoring from checkpoint %" PRIu64 " (%u tasks finished at it start "
                  "at their end)", j->id, why, from->id, from->n_finished);
    else if (from)
        eddy_warn("job %s: %s; restoring from checkpoint %" PRIu64, j->id, why, from->id);
    else
        eddy_warn("job %s: %s; restarting from the beginning (no checkpoint yet)", j->id, why);
    coord_job_set_state(c, j, JOB_RESTORING);
    coord_deploy(c, j, EDDY_DEPLOY_RESTORE, from ? from->id : 0,
                 ahead ? ahead : from ? from->positions : NULL);
    coord_progress_free(&ahead, coord_job_count_positions(j));
}

/* The end of a recovery as users see it: records move between tasks
 * again, i.e. a task of a stage after the sources took records in the
 * restored epoch. (Not the sink: a sink that writes at the end of input,
 * such as wordcount's --output FILE, takes nothing until then.) */
static void note_flow(coord_job_t *j, const eddy_task_metrics_t *m)
{
    if (!j->awaiting_flow || j->state != JOB_RUNNING || m->epoch != j->epoch ||
        m->stage >= j->graph.n_stages || m->records_in == 0 ||
        (j->graph.stages[m->stage].source && j->graph.n_stages > 1))
        return;
    j->awaiting_flow = false;
    eddy_info("job %s: records flowing again, %" PRIu64 " ms after the failure was noticed", j->id,
              eddy_mono_ms() - j->failure_noticed_ms);
}

void coord_recovery_on_metrics(coord_t *c, const eddy_task_metrics_t *m, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++, m++) {
        coord_job_t *fj = coord_job_by_num(c, m->job);
        if (fj)
            note_flow(fj, m);
        if (m->position < 0)
            continue;
        coord_job_t *j = coord_job_by_num(c, m->job);
        if (!j || j->guarantee != EDDY_GUARANTEE_AT_MOST_ONCE || m->epoch != j->epoch ||
            m->stage >= j->graph.n_stages || !j->graph.stages[m->stage].source ||
            m->instance >= j->placement[m->stage].parallelism)
            continue;
        uint32_t k = m->instance;
        for (uint32_t s = 0; s < m->stage; s++)
            if (j->graph.stages[s].source)
                k += j->placement[s].parallelism;
        if (k < j->n_reported_positions && m->position > j->reported_positions[k])
            j->reported_positions[k] = m->position;
    }
}

void coord_restore_job(coord_t *c, coord_job_t *j, const char *why, bool after_failure)
{
    if (coord_job_ended(j))
        return;
    coord_checkpoint_discard(c, j);
    char msg[EDDY_ERROR_MAX + 96];
    snprintf(msg, sizeof msg, "rescale interrupted (%.400s); the job is restored from checkpoint %" PRIu64,
             why, j->last_checkpoint);
    coord_rescale_abandon(c, j, msg);
    /* the previous epoch's deploy is void */
    j->deploy_persisting = false;
    j->deploys_pending = 0;
    if (!after_failure) {
        restore_now(c, j, why);
        return;
    }
    if (!j->awaiting_flow) /* a failure during a restore keeps the first's time */
        j->failure_noticed_ms = eddy_mono_ms();
    j->awaiting_flow = true;
    size_t n = strnlen(why, sizeof j->last_cause - 1);
    memcpy(j->last_cause, why, n);
    j->last_cause[n] = '\0';
    j->restarts++;
    uint32_t max_restarts = c->opts->max_restarts;
    if (++j->consecutive_restarts > max_restarts) {
        char fail[EDDY_ERROR_MAX + 64];
        snprintf(fail, sizeof fail, "too many restarts (%u); last cause: %.420s", max_restarts, why);
        coord_fail_job(c, j, fail);
        return;
    }
    uint64_t delay = restart_delay_ms(j->consecutive_restarts);
    eddy_info("job %s: %s; restore %u of at most %u in %" PRIu64 " ms", j->id, why,
              j->consecutive_restarts, max_restarts, delay);
    j->restore_scheduled = true;
    j->restore_at_ms = eddy_mono_ms() + delay;
    coord_job_set_state(c, j, JOB_RESTORING);
    /* tasks of the old epoch stop now, not after the delay */
    coord_job_release(c, j);
}

void coord_recovery_tick(coord_t *c, coord_job_t *j, uint64_t now_ms)
{
    if (j->restore_scheduled && now_ms >= j->restore_at_ms)
        restore_now(c, j, j->last_cause);
}

void coord_recovery_on_deploy_error(coord_t *c, coord_job_t *j, const char *err)
{
    /* The snapshot store names the file ("snapshot file PATH is truncated"). */
    bool bad_snapshot = strstr(err, "snapshot file") != NULL;
    const char *fence = coord_job_commit_fence(j);
    if (bad_snapshot && fence && j->last_checkpoint && j->deploy_checkpoint == j->last_checkpoint) {
        char fail[EDDY_ERROR_MAX + 128];
        snprintf(fail, sizeof fail,
                 "checkpoint %" PRIu64 " cannot be restored (%.300s); sink %s may have published up "
                 "to it, and restoring an older checkpoint would publish the replay twice",
                 j->last_checkpoint, err, fence);
        coord_fail_job(c, j, fail);
        return;
    }
    if (bad_snapshot && j->n_retained > 1 && j->deploy_checkpoint == j->last_checkpoint) {
        uint64_t bad = j->last_checkpoint;
        coord_retained_drop_newest(j);
        coord_checkpoint_forget(c, j, bad);
        eddy_warn("job %s: checkpoint %" PRIu64 " cannot be restored (%s); falling back to checkpoint %" PRIu64,
                  j->id, bad, err, j->last_checkpoint);
        char why[EDDY_ERROR_MAX + 64];
        snprintf(why, sizeof why, "checkpoint %" PRIu64 " is unusable", bad);
        coord_restore_job(c, j, why, false);
        return;
    }
    char why[EDDY_ERROR_MAX + 32];
    snprintf(why, sizeof why, "deploy failed: %.480s", err);
    coord_restore_job(c, j, why, true);
}

void coord_job_on_task_failed(coord_t *c, const eddy_msg_t *m)
{
    coord_job_t *j = coord_job_by_num(c, m->u.task_failed.job);
    if (!j || m->u.task_failed.epoch != j->epoch || coord_job_ended(j))
        return;
    char why[EDDY_ERROR_MAX + 64];
    snprintf(why, sizeof why, "task %s[%u] failed: %.400s",
             m->u.task_failed.stage < j->graph.n_stages ? j->graph.stages[m->u.task_failed.stage].name : "?",
             m->u.task_failed.instance, m->u.task_failed.error);
    if (!j->last_checkpoint && !j->any_done && j->restarts >= 2) {
        char fail[EDDY_ERROR_MAX + 128];
        snprintf(fail, sizeof fail, "too many restarts (%u) without a checkpoint; last cause: %.420s",
                 j->restarts, why);
        coord_fail_job(c, j, fail);
    } else {
        coord_restore_job(c, j, why, true);
    }
}

void coord_jobs_on_worker_lost(coord_t *c, coord_worker_t *w)
{
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        if (coord_job_ended(j) || j->state == JOB_WAITING || j->restore_scheduled)
            continue;
        bool involved = j->deploys_pending > 0 || j->deploy_persisting || coord_job_on_worker(j, w->id);
        if (involved && j->finishing) {
            /* Every task finished, some sinks may have published already: a
             * restore would replay and duplicate. What the lost worker's
             * sinks prepared stays unpublished (their .pending files). */
            char why[160];
            snprintf(why, sizeof why, "worker %u (%s) was lost during the final commit", w->id,
                     w->name);
            coord_fail_job(c, j, why);
        } else if (involved) {
            char why[128];
            snprintf(why, sizeof why, "worker %u (%s) was lost", w->id, w->name);
            coord_restore_job(c, j, why, true);
        }
    }
}
