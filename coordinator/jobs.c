/* jobs.c - the job lifecycle: submit, the first deploy, finish, cancel, and
 * the per-job timers that call into each protocol.
 *
 * The protocols live one per file: deploy.c (DEPLOY/DEPLOYED/START, deploy
 * timeout and worker quarantine), checkpoint.c (TRIGGER/ACK, the commit
 * point, retained checkpoints, tolerable failures), rescale.c, recovery.c
 * (restores with backoff, fallback to an older checkpoint, failing a job),
 * job_store.c (the job record and checkpoint metadata, coordinator restart).
 *
 *  finish     when every task is done: COMPLETE(EDDY_FINAL_CHECKPOINT) so
 *             two-phase-commit sinks publish their last data; the job is
 *             finished (and RELEASEd) once every task ACKed that commit
 *             (checkpoint.c counts those ACKs).
 * Once a task reached end of input checkpoints go on without it
 * (finished.c, FLIP-147); no rescale is started any more. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"

static const char *state_names[] = {"waiting", "deploying", "running", "rescaling",
                                    "restoring", "finished", "failed", "cancelled", "stopped"};

const char *coord_job_state_name(job_state_t s)
{
    return state_names[s];
}

bool coord_job_ended(const coord_job_t *j)
{
    return j->state == JOB_FINISHED || j->state == JOB_FAILED || j->state == JOB_CANCELLED ||
           j->state == JOB_STOPPED;
}

coord_job_t *coord_job_with_id(coord_t *c, const char *id)
{
    for (coord_job_t *j = c->jobs; j; j = j->next)
        if (!strcmp(j->id, id))
            return j;
    return NULL;
}

coord_job_t *coord_job_find(coord_t *c, const char *id)
{
    coord_job_t *exact = coord_job_with_id(c, id);
    if (exact && !coord_job_ended(exact))
        return exact;
    /* A job's name names its newest submission that has not ended (the
     * list is newest first), so `eddy rescale wordcount ...` and a
     * controller given --job wordcount follow a resubmitted wordcount-2. */
    for (coord_job_t *j = c->jobs; j; j = j->next)
        if (!coord_job_ended(j) && !strcmp(j->name, id))
            return j;
    return exact;
}

bool coord_job_id_taken(coord_t *c, const char *id)
{
    return coord_job_with_id(c, id) || (c->used_ids && json_object_get(c->used_ids, id));
}

void coord_job_id_reserve(coord_t *c, const char *id)
{
    if (!c->used_ids)
        c->used_ids = json_object();
    if (c->used_ids)
        json_object_set_new(c->used_ids, id, json_true());
}

coord_job_t *coord_job_by_num(coord_t *c, uint32_t num)
{
    for (coord_job_t *j = c->jobs; j; j = j->next)
        if (j->num == num)
            return j;
    return NULL;
}

bool coord_all_jobs_ended(coord_t *c)
{
    for (coord_job_t *j = c->jobs; j; j = j->next)
        if (!coord_job_ended(j))
            return false;
    return true;
}

void coord_job_free(coord_job_t *j)
{
    eddy_strv_free(j->argc, j->argv);
    eddy_graph_clear(&j->graph);
    free(j->plan);
    eddy_strv_free(j->n_plugins, j->plugins);
    for (uint32_t s = 0; s < EDDY_MAX_STAGES; s++)
        free(j->placement[s].worker_of);
    coord_pending_checkpoint_destroy(&j->pending);
    coord_savepoint_fail(NULL, j, "the job ended");
    coord_fluid_clear(j); /* a job can end while its fluid migration runs */
    coord_retained_clear(j);
    coord_progress_free(&j->deploy_positions, j->n_deploy_positions);
    free(j->deploy_finished);
    free(j->reported_positions);
    free(j->moves);
    free(j->deploy_awaiting);
    free(j->task_seen);
    coord_latency_destroy(&j->latency);
    coord_counters_destroy(&j->counters);
    free(j);
}

uint32_t coord_job_total_tasks(const coord_job_t *j)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        n += j->placement[s].parallelism;
    return n;
}

uint32_t coord_job_count_positions(const coord_job_t *j)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        if (j->graph.stages[s].source)
            n += j->placement[s].parallelism;
    return n;
}

uint32_t coord_job_parallelism(const coord_job_t *j, uint32_t s)
{
    return j->placement[s].parallelism ? j->placement[s].parallelism : j->graph.stages[s].parallelism;
}

void coord_job_set_state(coord_t *c, coord_job_t *j, job_state_t s)
{
    if (j->state == s)
        return;
    j->state = s;
    if (coord_job_ended(j) && (j->rescale_client.waiting || j->fluid || j->rescale_stage >= 0)) {
        /* e.g. a bounded input ran out during a fluid rescale's steps: its
         * client must hear so, not wait for a reply that cannot come */
        char why[160];
        snprintf(why, sizeof why, "job %s %s during the rescale; the rescale did not complete",
                 j->id, coord_job_state_name(s));
        coord_rescale_abandon(c, j, why);
    }
    if (coord_job_ended(j) && j->savepoint) {
        char why[96];
        snprintf(why, sizeof why, "the job %s first", coord_job_state_name(s));
        coord_savepoint_fail(c, j, why);
    }
    if (coord_job_ended(j) && !j->ended_wall_ms)
        j->ended_wall_ms = eddy_wall_ms();
    if (coord_job_ended(j))
        coord_counters_save(c, j); /* its final numbers */
    coord_job_store_save(c, j, 3, NULL, NULL);
}

void coord_job_release(coord_t *c, coord_job_t *j)
{
    eddy_msg_t rel = {.type = EDDY_MSG_RELEASE};
    rel.u.release.job = j->num;
    /* The job's state says whether another attempt follows (a restore) or
     * not: then transactional sinks roll back what they prepared. */
    rel.u.release.reason = j->state == JOB_CANCELLED ? EDDY_RELEASE_CANCELLED
                           : j->state == JOB_FAILED  ? EDDY_RELEASE_FAILED
                           : j->state == JOB_FINISHED || j->state == JOB_STOPPED ? EDDY_RELEASE_FINISHED
                                                      : EDDY_RELEASE_RESTORE;
    coord_broadcast(c, &rel);
}

bool coord_releases_confirmed(coord_t *c, uint64_t now_ms)
{
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        if ((j->state != JOB_CANCELLED && j->state != JOB_FAILED) || j->history ||
            now_ms >= j->ended_ms + COORD_RELEASE_WAIT_MS)
            continue;
        for (coord_worker_t *w = c->workers; w; w = w->next) {
            if (!w->alive)
                continue;
            /* A worker answers the RELEASE with a heartbeat (runtime/worker.c). */
            if (w->last_heartbeat_ms < j->ended_ms)
                return false;
            for (uint32_t i = 0; i < w->n_metrics; i++)
                if (w->metrics[i].job == j->num)
                    return false;
        }
    }
    return true;
}

void coord_jobs_on_metrics(coord_t *c, const coord_worker_t *w)
{
    char key[COORD_COUNTER_WORKER_MAX];
    coord_counters_worker_key(key, sizeof key, w->endpoint, w->pid);
    for (uint32_t i = 0; i < w->n_metrics; i++) {
        const eddy_task_metrics_t *m = &w->metrics[i];
        coord_job_t *j = coord_job_by_num(c, m->job);
        /* an ended job's numbers are final (and after a coordinator restart
         * a number may name another job than the task's) */
        if (j && !coord_job_ended(j) && m->stage < j->graph.n_stages)
            coord_counters_observe(j->counters, key, w->id, m);
    }
}

/* ---- submit ------------------------------------------------------------------ */

coord_job_t *coord_job_new(coord_t *c, const char *job_name, int argc, char **argv,
                           const void *plan_bytes, size_t plan_len, eddy_err_t *err)
{
    coord_job_t *j = calloc(1, sizeof *j);
    if (!j) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    /* A resumed job runs the plan it was submitted with (its record keeps
     * it), not one rebuilt from its flags by whatever code runs now. */
    int built = plan_bytes ? eddy_job_build_from_plan(&j->graph, plan_bytes, plan_len, 0, err)
                           : eddy_job_build(&j->graph, job_name, argc, argv, err);
    if (built < 0) {
        free(j);
        return NULL;
    }
    /* The plan is built here once; workers instantiate it from its bytes. */
    const eddy_plan_t *plan = eddy_graph_plan(&j->graph);
    j->plan = plan ? eddy_plan_encode(plan, &j->plan_len) : NULL;
    if (!j->plan) {
        eddy_graph_clear(&j->graph);
        free(j);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    j->plan_fingerprint = eddy_plan_fingerprint(plan);
    if (eddy_registry_plan_plugins(eddy_registry_default(), plan, &j->plugins, &j->n_plugins, err) < 0) {
        free(j->plan);
        eddy_graph_clear(&j->graph);
        free(j);
        return NULL;
    }
    j->counters = coord_counters_new();
    if (!j->counters) {
        eddy_strv_free(j->n_plugins, j->plugins);
        free(j->plan);
        eddy_graph_clear(&j->graph);
        free(j);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    j->num = ++c->next_job_num;
    /* The job id is the job's name, made unique among every job this
     * cluster has run (their records stay readable as history): a
     * resubmission of wordcount is wordcount-2, then wordcount-3. A resumed
     * job takes its recorded id back (coord_jobs_restore_from_store). */
    snprintf(j->id, sizeof j->id, "%s", job_name);
    for (uint32_t n = 2; coord_job_id_taken(c, j->id); n++)
        snprintf(j->id, sizeof j->id, "%.40s-%u", job_name, n);
    snprintf(j->name, sizeof j->name, "%s", job_name);
    j->argc = (uint32_t)argc;
    j->argv = eddy_strv_dup((uint32_t)argc, argv);
    j->submitted_wall_ms = eddy_wall_ms();
    j->started_ms = eddy_mono_ms();
    j->next_checkpoint = 1;
    j->rescale_stage = -1;
    j->state = JOB_WAITING;
    return j;
}

void coord_job_add(coord_t *c, coord_job_t *j)
{
    coord_job_id_reserve(c, j->id);
    j->next = c->jobs;
    c->jobs = j;
    /* Ended jobs stay in memory for the views up to --max-ended-jobs; older
     * ones are forgotten here (their records stay in the metadata store and
     * their ids stay taken). */
    uint32_t ended = 0;
    for (coord_job_t **pp = &c->jobs; *pp;) {
        if (coord_job_ended(*pp) && ++ended > c->limits.max_ended_jobs) {
            coord_job_t *old = *pp;
            *pp = old->next;
            coord_job_free(old);
        } else {
            pp = &(*pp)->next;
        }
    }
}

coord_job_t *coord_job_submit(coord_t *c, const char *job_name, eddy_guarantee_t guarantee,
                              int argc, char **argv, const coord_savepoint_from_t *from,
                              eddy_err_t *err)
{
    coord_job_t *j = coord_job_new(c, job_name, argc, argv, NULL, 0, err);
    if (!j)
        return NULL;
    if (from && coord_savepoint_restore(j, from, err) < 0) {
        coord_job_free(j);
        return NULL;
    }
    j->guarantee = guarantee;
    coord_job_add(c, j);
    coord_job_store_save(c, j, 3, NULL, NULL);
    eddy_info("job %s submitted (%s, %u stages, %s)", j->id, job_name, j->graph.n_stages,
              eddy_guarantee_name(j->guarantee));
    coord_jobs_on_worker_joined(c);
    return j;
}

void coord_jobs_on_worker_joined(coord_t *c)
{
    /* After a coordinator restart, give the workers one heartbeat timeout to
     * register again before resumed jobs are placed; after a failover the
     * wait ends early once every worker the previous leader listed is back. */
    bool all_back = coord_takeover_all_back(c);
    if (c->resumed_jobs && !all_back && eddy_mono_ms() < c->started_ms + coord_takeover_grace_ms(c))
        return;
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        if (j->state != JOB_WAITING || j->restore_scheduled || coord_usable_workers(c) == 0)
            continue;
        if (j->epoch == 0 && !j->last_checkpoint) {
            uint32_t p[EDDY_MAX_STAGES];
            for (uint32_t s = 0; s < j->graph.n_stages; s++)
                p[s] = coord_job_parallelism(j, s);
            eddy_err_t err;
            if (coord_place(c, j, p, &err) < 0)
                continue;
            coord_job_set_state(c, j, JOB_DEPLOYING);
            coord_deploy(c, j, EDDY_DEPLOY_FRESH, 0, NULL);
        } else if (j->resumed_restore_pending) {
            /* the previous coordinator's tasks are void: a restore after a
             * failure, counted in restarts and logged with its cause */
            j->resumed_restore_pending = false;
            char why[160];
            if (c->election)
                snprintf(why, sizeof why, "leader failover (this coordinator took over as leader epoch %llu)",
                         (unsigned long long)c->leader_epoch);
            else
                snprintf(why, sizeof why, "coordinator restart");
            coord_restore_job(c, j, why, true);
        } else {
            coord_restore_job(c, j, "workers available again", false); /* waiting is not a failure */
        }
    }
}

/* ---- finish and cancel --------------------------------------------------------- */

void coord_job_on_task_done(coord_t *c, const eddy_msg_t *m)
{
    coord_job_t *j = coord_job_by_num(c, m->u.task_done.job);
    if (!j || m->u.task_done.epoch != j->epoch || coord_job_ended(j) || j->deploys_pending)
        return;
    j->any_done = true;
    uint32_t stage = m->u.task_done.stage, instance = m->u.task_done.instance;
    coord_finished_on_task_done(c, j, stage, instance);
    if (++j->tasks_done < j->tasks_total) {
        eddy_info("job %s: task %s[%u] finished (%u of %u tasks); checkpoints go on", j->id,
                  stage < j->graph.n_stages ? j->graph.stages[stage].name : "?", instance,
                  j->tasks_done, j->tasks_total);
        return;
    }
    /* Every task is done: publish what two-phase-commit sinks prepared at end
     * of input (COMPLETE of the final checkpoint), and finish once each task
     * confirmed its commit, so no worker is released or stopped before. */
    if (j->pending) /* its metadata is being written; it no longer matters */
        coord_checkpoint_abort(c, j, "every task finished", false);
    j->finishing = true;
    j->final_acks_pending = j->tasks_total;
    j->finishing_started_ms = eddy_mono_ms();
    eddy_msg_t m2 = {.type = EDDY_MSG_COMPLETE};
    m2.u.complete.job = j->num;
    m2.u.complete.checkpoint = EDDY_FINAL_CHECKPOINT;
    coord_broadcast(c, &m2);
}

int coord_job_cancel(coord_t *c, const char *job_id, eddy_err_t *err)
{
    coord_job_t *j = coord_job_find(c, job_id);
    if (!j)
        return eddy_err_set(err, "no job '%s'", job_id);
    if (coord_job_ended(j))
        return eddy_err_set(err, "job %s has already ended (%s)", job_id, coord_job_state_name(j->state));
    j->ended_ms = eddy_mono_ms();
    c->any_cancelled = true;
    coord_job_set_state(c, j, JOB_CANCELLED);
    coord_job_release(c, j);
    eddy_info("job %s cancelled", job_id);
    return 0;
}

/* ---- timers ------------------------------------------------------------------- */

static void print_progress(coord_t *c, coord_job_t *j, uint64_t now_ms)
{
    uint64_t in = 0, out = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        for (uint32_t i = 0; w->alive && i < w->n_metrics; i++) {
            const eddy_task_metrics_t *m = &w->metrics[i];
            if (m->job != j->num || m->stage >= j->graph.n_stages)
                continue;
            if (j->graph.stages[m->stage].source)
                in += m->records_in;
            if (m->stage + 1 == j->graph.n_stages)
                out += m->records_in;
        }
    char par[256] = "";
    size_t n = 0;
    for (uint32_t s = 0; s < j->graph.n_stages && n < sizeof par - 1; s++)
        n += (size_t)snprintf(par + n, sizeof par - n, "%s%s=%u", s ? " " : "",
                              j->graph.stages[s].name, j->placement[s].parallelism);
    eddy_info("job %s %s %.1fs: %" PRIu64 " records read, %" PRIu64 " at the sink, parallelism %s, checkpoint %" PRIu64,
              j->id, coord_job_state_name(j->state), (double)(now_ms - j->started_ms) / 1000.0, in, out,
              par, j->last_checkpoint);
}

void coord_jobs_tick(coord_t *c, uint64_t now_ms)
{
    if (c->resumed_jobs && coord_usable_workers(c) > 0)
        coord_jobs_on_worker_joined(c);
    bool progress = c->opts->progress && now_ms - c->last_progress_ms >= 1000;
    if (progress)
        c->last_progress_ms = now_ms;
    bool save_counters = now_ms - c->last_counters_save_ms >= COORD_COUNTERS_SAVE_MS;
    if (save_counters)
        c->last_counters_save_ms = now_ms;
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        if (coord_job_ended(j))
            continue;
        if (save_counters && j->epoch > 0)
            coord_counters_save(c, j);
        if (progress && j->state != JOB_WAITING)
            print_progress(c, j, now_ms);
        if (j->restore_scheduled) {
            coord_recovery_tick(c, j, now_ms);
            continue;
        }
        if (j->deploys_pending) {
            coord_deploy_tick(c, j, now_ms);
            continue;
        }
        if (j->deploy_persisting)
            continue;
        if (j->finishing) {
            if (now_ms > j->finishing_started_ms + c->opts->checkpoint_timeout_ms)
                coord_fail_job(c, j, "the final commit was not confirmed in time");
            continue;
        }
        coord_checkpoint_tick(c, j, now_ms);
    }
}
