/* senders.c - task-scoped messages bound to the worker they come from.
 *
 * A worker key authenticates a process as *a* worker, not as the one that
 * runs a given task: any holder of the key (or, without keys, anyone who
 * reaches the port) could otherwise report a task of someone else's job
 * done or failed and end or restore that job. So every task-scoped message
 * (checkpoint ACK, TASK_DONE, TASK_FAILED, a heartbeat's task metrics)
 * counts only when it comes from the worker the current deployment placed
 * that task on, for the current epoch of its job, and TASK_DONE and the
 * final ACK count once per task and epoch (a repeated TASK_DONE from the
 * genuine worker must not finish a job early). Everything else is dropped
 * and counted (rejects.h). */
#include "coordinator/internal.h"

#include <stdlib.h>
#include <string.h>

/* The task's index in j->task_seen: stages in order, then instances. */
static uint32_t task_index(const coord_job_t *j, uint32_t stage, uint32_t instance)
{
    uint32_t k = 0;
    for (uint32_t s = 0; s < stage; s++)
        k += j->placement[s].parallelism;
    return k + instance;
}

int coord_senders_begin_epoch(coord_job_t *j)
{
    free(j->task_seen);
    j->n_task_seen = coord_job_total_tasks(j);
    j->task_seen = calloc(j->n_task_seen ? j->n_task_seen : 1, 1);
    if (!j->task_seen) {
        j->n_task_seen = 0;
        return -1;
    }
    return 0;
}

/* Where (job, stage, instance) runs now, or 0 when that task does not exist. */
static uint32_t placed_on(const coord_job_t *j, uint32_t stage, uint32_t instance)
{
    if (stage >= j->graph.n_stages || stage >= EDDY_MAX_STAGES)
        return 0;
    const eddy_stage_placement_t *pl = &j->placement[stage];
    if (!pl->worker_of || instance >= pl->parallelism)
        return 0;
    return pl->worker_of[instance];
}

coord_job_t *coord_sender_task(coord_t *c, const coord_worker_t *w, const char *what,
                               uint32_t job, uint32_t epoch, uint32_t stage, uint32_t instance)
{
    coord_job_t *j = coord_job_by_num(c, job);
    if (!j || j->history) {
        coord_reject(&c->rejects, COORD_REJECT_UNKNOWN_TASK,
                     "%s for unknown job %u from worker %u (%s)", what, job, w->id, w->name);
        return NULL;
    }
    if (epoch != j->epoch) {
        coord_reject(&c->rejects, COORD_REJECT_STALE_EPOCH,
                     "%s for job %s epoch %u (current %u) from worker %u (%s)", what, j->id, epoch,
                     j->epoch, w->id, w->name);
        return NULL;
    }
    uint32_t on = placed_on(j, stage, instance);
    if (!on) {
        coord_reject(&c->rejects, COORD_REJECT_UNKNOWN_TASK,
                     "%s for job %s task %u[%u], which does not exist, from worker %u (%s)", what,
                     j->id, stage, instance, w->id, w->name);
        return NULL;
    }
    if (on != w->id) {
        coord_reject(&c->rejects, COORD_REJECT_NOT_PLACED,
                     "%s for job %s task %s[%u] from worker %u (%s); it is placed on worker %u",
                     what, j->id, j->graph.stages[stage].name, instance, w->id, w->name, on);
        return NULL;
    }
    return j;
}

bool coord_sender_once(coord_t *c, coord_job_t *j, uint32_t stage, uint32_t instance,
                       uint8_t flag, const char *what)
{
    uint32_t k = task_index(j, stage, instance);
    if (k >= j->n_task_seen)
        return false; /* out of memory at deploy: nothing counts twice, nothing counts */
    if (j->task_seen[k] & flag) {
        coord_reject(&c->rejects, COORD_REJECT_DUPLICATE, "%s again for job %s task %s[%u] (epoch %u)",
                     what, j->id, j->graph.stages[stage].name, instance, j->epoch);
        return false;
    }
    j->task_seen[k] |= flag;
    return true;
}

uint32_t coord_sender_filter_metrics(coord_t *c, const coord_worker_t *w, eddy_task_metrics_t *tasks,
                                     uint32_t n)
{
    uint32_t kept = 0, max = c->limits.max_worker_series;
    for (uint32_t i = 0; i < n; i++) {
        const eddy_task_metrics_t *m = &tasks[i];
        coord_job_t *j = coord_job_by_num(c, m->job);
        /* Tasks of an earlier epoch are what a worker still runs until it
         * handled a RELEASE or DEPLOY (coord_releases_confirmed reads
         * them); tasks of the current epoch must be the worker's own. */
        bool ok = true;
        if (!j) {
            ok = false;
            coord_reject(&c->rejects, COORD_REJECT_UNKNOWN_TASK,
                         "task metrics for unknown job %u from worker %u (%s)", m->job, w->id,
                         w->name);
        } else if (m->epoch > j->epoch) {
            ok = false;
            coord_reject(&c->rejects, COORD_REJECT_STALE_EPOCH,
                         "task metrics for job %s epoch %u (current %u) from worker %u (%s)",
                         j->id, m->epoch, j->epoch, w->id, w->name);
        } else if (m->epoch == j->epoch && placed_on(j, m->stage, m->instance) != w->id) {
            ok = false;
            coord_reject(&c->rejects, COORD_REJECT_NOT_PLACED,
                         "task metrics for job %s task %u[%u] from worker %u (%s), which does not "
                         "run it", j->id, m->stage, m->instance, w->id, w->name);
        }
        if (ok && kept >= max) {
            ok = false;
            coord_reject(&c->rejects, COORD_REJECT_WORKER_SERIES,
                         "worker %u (%s) reports more than %u tasks (--max-worker-series)", w->id,
                         w->name, max);
        }
        if (!ok)
            continue;
        if (kept != i)
            tasks[kept] = tasks[i];
        kept++;
    }
    return kept;
}
