/* deploy.c - the deploy protocol, used for a fresh start, a rescale (tasks
 * keep their state) and a restore.
 *
 *  1. The job's epoch goes up by one and its record (with that epoch) is
 *     written to the metadata store, retried until it is durable: epochs
 *     never repeat, whatever sequence of coordinator crashes follows.
 *  2. Only then does every usable worker get DEPLOY(epoch, full placement).
 *     Each must answer DEPLOYED; the coordinator tracks which have not.
 *  3. When all answered, the sources get START.
 * A worker that does not answer within --deploy-timeout-ms while others
 * did is declared failed and quarantined (no tasks for a backoff period,
 * even if it registers again), and the job is restored on the others, so a
 * peer that heartbeats but never deploys cannot stall every deploy. When
 * none answered, the deploy is retried (a restore with backoff) instead. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"

static const char *mode_names[] = {"fresh", "rescale", "restore"};

static void send_deploy(coord_t *c, coord_job_t *j)
{
    uint64_t now = eddy_mono_ms();
    eddy_msg_t m = {.type = EDDY_MSG_DEPLOY};
    eddy_deploy_t *d = &m.u.deploy;
    d->job = j->num;
    snprintf(d->job_id, sizeof d->job_id, "%s", j->id);
    snprintf(d->job_name, sizeof d->job_name, "%s", j->name);
    d->plan = j->plan;
    d->plan_len = (uint32_t)j->plan_len;
    d->plan_fingerprint = j->plan_fingerprint;
    d->n_plugins = j->n_plugins;
    d->plugins = j->plugins;
    d->epoch = j->epoch;
    d->mode = j->deploy_mode;
    d->restore_checkpoint = j->deploy_checkpoint;
    /* s3://: the URI in its own field, no directory (an older worker
     * without the field fails to find its state rather than writing to a
     * directory nobody else reads) */
    if (c->opts->checkpoint_storage)
        snprintf(d->storage_uri, sizeof d->storage_uri, "%s", c->opts->checkpoint_storage);
    else
        snprintf(d->snapshot_dir, sizeof d->snapshot_dir, "%s", c->opts->snapshot_dir);
    /* a restore from the savepoint the job started from reads it there */
    if (j->restore_savepoint && j->deploy_checkpoint == j->restore_savepoint) {
        snprintf(d->restore_uri, sizeof d->restore_uri, "%s", j->restore_uri);
        snprintf(d->restore_job, sizeof d->restore_job, "%s", j->restore_job);
    }
    d->max_parallelism = j->graph.max_parallelism;
    d->guarantee = j->guarantee;
    d->checkpoint_full_every = c->opts->checkpoint_full_every;
    d->n_stages = j->graph.n_stages;
    d->stages = j->placement;
    uint32_t n_workers = coord_usable_workers(c);
    eddy_worker_endpoint_t *eps = calloc(n_workers + 1, sizeof *eps);
    eddy_source_position_t *pos = calloc(coord_job_count_positions(j) + 1, sizeof *pos);
    free(j->deploy_awaiting);
    j->deploy_awaiting = calloc(n_workers + 1, sizeof *j->deploy_awaiting);
    if (!eps || !pos || !j->deploy_awaiting) {
        free(eps);
        free(pos);
        coord_fail_job(c, j, "out of memory");
        return;
    }
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (coord_worker_usable(w, now)) {
            eps[d->n_workers].id = w->id;
            snprintf(eps[d->n_workers].endpoint, sizeof eps[d->n_workers].endpoint, "%s", w->endpoint);
            d->n_workers++;
        }
    d->workers = eps;
    uint32_t k = 0;
    bool have_positions = j->deploy_positions && j->n_deploy_positions == coord_job_count_positions(j);
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        if (j->graph.stages[s].source)
            for (uint32_t i = 0; i < j->placement[s].parallelism; i++, k++)
                pos[k] = have_positions /* states borrowed for the encoding */
                             ? (eddy_source_position_t){s, i, j->deploy_positions[k].position,
                                                        j->deploy_positions[k].state,
                                                        j->deploy_positions[k].state_len}
                             : (eddy_source_position_t){s, i, -1, NULL, 0};
    d->n_positions = k;
    d->positions = pos;
    d->n_finished = j->n_deploy_finished; /* borrowed for the encoding */
    d->finished = j->deploy_finished;
    if (j->deploy_mode == EDDY_DEPLOY_RESCALE)
        d->renames = coord_fluid_renames(j, &d->n_renames); /* a fluid migration's end */
    j->deploys_pending = 0;
    j->deploy_started_ms = now;
    for (coord_worker_t *w = c->workers; w; w = w->next) {
        if (!coord_worker_usable(w, now))
            continue;
        coord_send_worker(c, w, &m);
        j->deploy_awaiting[j->deploys_pending++] = w->id;
    }
    j->n_deploy_targets = j->deploys_pending;
    free(eps);
    free(pos);
    free(d->renames);
    if (j->deploy_checkpoint)
        eddy_info("job %s: deploying epoch %u (%s, from checkpoint %" PRIu64 ") on %u workers", j->id,
                  j->epoch, mode_names[j->deploy_mode], j->deploy_checkpoint, j->deploys_pending);
    else
        eddy_info("job %s: deploying epoch %u (%s) on %u workers", j->id, j->epoch,
                  mode_names[j->deploy_mode], j->deploys_pending);
}

static void on_epoch_persisted(void *arg, const eddy_meta_result_t *res)
{
    coord_ticket_t *t = arg;
    coord_t *c = t->c;
    coord_job_t *j = coord_ticket_job(t);
    coord_ticket_release(t);
    if (!j || coord_job_ended(j) || !j->deploy_persisting)
        return; /* restored (a newer epoch) or ended meanwhile */
    j->deploy_persisting = false;
    if (res->rc < 0) { /* only when the store is being shut down */
        coord_fail_job(c, j, "cannot record the job's epoch in the metadata store");
        return;
    }
    send_deploy(c, j);
}

/* at-most-once (recovery.c): the positions sources reach in the new epoch
 * start from where they start (or from what was reported before, if the
 * source count is unchanged), so a later restore never moves one back. */
static int track_reported_positions(coord_job_t *j, uint32_t n)
{
    if (j->guarantee != EDDY_GUARANTEE_AT_MOST_ONCE)
        return 0;
    int64_t *r = malloc((n + 1) * sizeof *r);
    if (!r)
        return -1;
    for (uint32_t k = 0; k < n; k++) {
        r[k] = j->n_reported_positions == n ? j->reported_positions[k] : -1;
        if (j->deploy_positions && j->deploy_positions[k].position > r[k])
            r[k] = j->deploy_positions[k].position;
    }
    free(j->reported_positions);
    j->reported_positions = r;
    j->n_reported_positions = n;
    return 0;
}

typedef struct keep_arg {
    coord_t *c;
    const coord_job_t *j;
} keep_arg_t;

/* A rescale keeps a task whose instance stays on the same process. */
static bool task_kept(void *arg, uint32_t stage, uint32_t instance, const char *worker)
{
    keep_arg_t *k = arg;
    const eddy_stage_placement_t *pl = &k->j->placement[stage];
    if (instance >= pl->parallelism || !pl->worker_of)
        return false;
    coord_worker_t *w = coord_find_worker(k->c, pl->worker_of[instance]);
    if (!w || !w->alive)
        return false;
    char key[COORD_COUNTER_WORKER_MAX];
    coord_counters_worker_key(key, sizeof key, w->endpoint, w->pid);
    return !strcmp(key, worker);
}

void coord_deploy(coord_t *c, coord_job_t *j, eddy_deploy_mode_t mode, uint64_t checkpoint,
                  const coord_source_progress_t *positions)
{
    j->epoch++;
    if (mode != EDDY_DEPLOY_RESCALE) {
        j->placed_ms = eddy_mono_ms();
    }
    keep_arg_t keep = {c, j};
    coord_counters_begin_epoch(j->counters, j->epoch, mode == EDDY_DEPLOY_RESCALE ? task_kept : NULL,
                               &keep);
    j->deploys_pending = 0;
    j->deploy_bytes = j->deploy_groups = 0;
    j->deploy_local_bytes = j->deploy_local_groups = 0;
    j->tasks_done = 0;
    j->any_done = false;
    j->finishing = false;
    j->final_acks_pending = 0;
    j->tasks_total = coord_job_total_tasks(j);
    if (coord_senders_begin_epoch(j) < 0) {
        coord_fail_job(c, j, "out of memory");
        return;
    }
    j->deploy_mode = mode;
    j->deploy_checkpoint = checkpoint;
    if (mode != EDDY_DEPLOY_RESTORE) /* only a restore starts tasks finished */
        coord_finished_for_deploy(j, NULL);
    uint32_t n = coord_job_count_positions(j);
    coord_source_progress_t *copy = positions ? coord_progress_dup(positions, n) : NULL;
    coord_progress_free(&j->deploy_positions, j->n_deploy_positions);
    j->n_deploy_positions = copy ? n : 0;
    j->deploy_positions = copy;
    if (positions && !copy) {
        coord_fail_job(c, j, "out of memory");
        return;
    }
    if (track_reported_positions(j, n) < 0) {
        coord_fail_job(c, j, "out of memory");
        return;
    }
    /* the epoch must never repeat, even across coordinator restarts */
    coord_ticket_t *t = coord_ticket_new(c, j, 0);
    if (!t) {
        coord_fail_job(c, j, "out of memory");
        return;
    }
    j->deploy_persisting = true;
    coord_job_store_save(c, j, EDDY_META_RETRY_FOREVER, on_epoch_persisted, t);
}

void coord_job_on_deployed(coord_t *c, coord_worker_t *w, const eddy_msg_t *m)
{
    coord_job_t *j = coord_job_by_num(c, m->u.deployed.job);
    if (!j || m->u.deployed.epoch != j->epoch || j->deploys_pending == 0 || coord_job_ended(j))
        return;
    uint32_t k = 0;
    while (k < j->deploys_pending && j->deploy_awaiting[k] != w->id)
        k++;
    if (k == j->deploys_pending) {
        coord_reject(&c->rejects, COORD_REJECT_DUPLICATE,
                     "job %s: a DEPLOYED of epoch %u from worker %u, which is not awaited (a "
                     "second one, or the DEPLOY did not go there)", j->id, j->epoch, w->id);
        return;
    }
    if (m->u.deployed.error[0]) {
        if (j->state == JOB_DEPLOYING && !j->last_checkpoint) {
            coord_fail_job(c, j, m->u.deployed.error);
        } else if (j->deploy_mode == EDDY_DEPLOY_RESTORE) {
            coord_recovery_on_deploy_error(c, j, m->u.deployed.error);
        } else {
            char why[EDDY_ERROR_MAX + 64];
            snprintf(why, sizeof why, "worker %u could not deploy: %.400s", w->id, m->u.deployed.error);
            coord_restore_job(c, j, why, true);
        }
        return;
    }
    j->deploy_awaiting[k] = j->deploy_awaiting[--j->deploys_pending];
    j->deploy_bytes += m->u.deployed.bytes_loaded;
    j->deploy_groups += m->u.deployed.groups_loaded;
    j->deploy_local_bytes += m->u.deployed.bytes_local;
    j->deploy_local_groups += m->u.deployed.groups_local;
    if (j->deploys_pending > 0)
        return;
    if (j->state == JOB_RESCALING && j->fluid) {
        uint32_t epoch = j->epoch;
        coord_fluid_before_start(c, j);
        if (j->epoch != epoch || j->deploys_pending || j->state != JOB_RESCALING)
            return; /* its plan failed: the job restores */
    }
    eddy_msg_t start = {.type = EDDY_MSG_START};
    start.u.start.job = j->num;
    start.u.start.epoch = j->epoch;
    coord_broadcast(c, &start);
    if (j->state == JOB_RESCALING)
        coord_rescale_done(c, j);
    else if (j->state == JOB_RESTORING) {
        uint64_t ms = eddy_mono_ms() - j->deploy_started_ms;
        /* a worker cannot claim more from its copies than it loaded */
        if (j->deploy_local_groups > j->deploy_groups)
            j->deploy_local_groups = j->deploy_groups;
        if (j->deploy_local_bytes > j->deploy_bytes)
            j->deploy_local_bytes = j->deploy_bytes;
        j->last_restore.groups = j->deploy_groups;
        j->last_restore.bytes = j->deploy_bytes;
        j->last_restore.local_groups = j->deploy_local_groups;
        j->last_restore.local_bytes = j->deploy_local_bytes;
        j->last_restore.restored_ms = ms ? ms : 1;
        eddy_info("job %s: restored in %" PRIu64 " ms, running again; %" PRIu64 " key groups (%"
                  PRIu64 " bytes) loaded from workers' local copies, %" PRIu64 " (%" PRIu64
                  " bytes) from checkpoint storage", j->id, ms, j->deploy_local_groups,
                  j->deploy_local_bytes, j->deploy_groups - j->deploy_local_groups,
                  j->deploy_bytes - j->deploy_local_bytes);
    }
    coord_job_set_state(c, j, JOB_RUNNING);
    j->last_trigger_ms = eddy_mono_ms();
}

void coord_deploy_tick(coord_t *c, coord_job_t *j, uint64_t now_ms)
{
    if (!j->deploys_pending || now_ms <= j->deploy_started_ms + c->opts->deploy_timeout_ms)
        return;
    /* When no worker answered, the cause is more likely general slowness
     * (or this side) than bad peers: retry, with backoff, quarantining none,
     * so a slow machine does not lose all its workers at once. */
    if (j->deploys_pending == j->n_deploy_targets) {
        char why[160];
        snprintf(why, sizeof why, "no worker confirmed the deployment of epoch %u within %u ms",
                 j->epoch, c->opts->deploy_timeout_ms);
        coord_restore_job(c, j, why, true);
        return;
    }
    /* Quarantining a worker restores every job it takes part in (this one
     * included), which clears deploys_pending: copy the ids first. */
    uint32_t n = j->deploys_pending;
    uint32_t ids[n];
    memcpy(ids, j->deploy_awaiting, n * sizeof *ids);
    uint32_t num = j->num, epoch = j->epoch;
    for (uint32_t k = 0; k < n; k++) {
        coord_worker_t *w = coord_find_worker(c, ids[k]);
        if (!w || !w->alive)
            continue;
        char why[160];
        snprintf(why, sizeof why, "did not confirm the deployment of job %s epoch %u within %u ms",
                 j->id, epoch, c->opts->deploy_timeout_ms);
        coord_quarantine_worker(c, w, why);
    }
    coord_job_t *still = coord_job_by_num(c, num);
    if (still && still->epoch == epoch && still->deploys_pending && !coord_job_ended(still))
        coord_restore_job(c, still, "workers did not confirm the deployment in time", true);
}
