/* jobs.c - the job lifecycle and the protocols that drive it.
 *
 *  deploy     every alive worker gets DEPLOY(epoch, full placement); once all
 *             answered DEPLOYED the sources get START. Used for a fresh
 *             start, a rescale (tasks keep state) and a restore.
 *  checkpoint TRIGGER to the sources; every task ACKs after its aligned
 *             snapshot; when all did, the checkpoint's metadata goes to the
 *             metadata store and workers get COMPLETE. One at a time.
 *  rescale    a checkpoint whose barrier also pauses the sources; then a
 *             deploy in RESCALE mode with the new parallelism and key-group
 *             ranges, restoring only the key groups that changed owner.
 *  recovery   a dead worker or a failed task: deploy in RESTORE mode from the
 *             last complete checkpoint (sources rewind to its positions).
 *  finish     when every task is done: COMPLETE(EDDY_FINAL_CHECKPOINT) so
 *             two-phase-commit sinks publish their last data; the job is
 *             finished (and RELEASEd) once every task ACKed that commit.
 * Once any task reached end of input, no further checkpoint or rescale is
 * started: a restore then replays from the last checkpoint before it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"

#define MAX_RESTARTS 10
#define DEPLOY_TIMEOUT_MS 30000

static const char *state_names[] = {"waiting", "deploying", "running", "rescaling",
                                    "restoring", "finished", "failed", "cancelled"};

const char *coord_job_state_name(job_state_t s)
{
    return state_names[s];
}

static bool job_ended(const coord_job_t *j)
{
    return j->state == JOB_FINISHED || j->state == JOB_FAILED || j->state == JOB_CANCELLED;
}

coord_job_t *coord_job_find(coord_t *c, const char *id)
{
    for (coord_job_t *j = c->jobs; j; j = j->next)
        if (!strcmp(j->id, id))
            return j;
    return NULL;
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
        if (!job_ended(j))
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
    free(j->inflight_positions);
    free(j->last_positions);
    free(j);
}

static uint32_t total_tasks(const coord_job_t *j)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        n += j->placement[s].parallelism;
    return n;
}

/* ---- metadata store ----------------------------------------------------- */

static json_t *parallelism_json(const coord_job_t *j)
{
    json_t *p = json_object();
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        json_object_set_new(p, j->graph.stages[s].name, json_integer(j->placement[s].parallelism
                                                                          ? j->placement[s].parallelism
                                                                          : j->graph.stages[s].parallelism));
    return p;
}

static void persist_job(coord_t *c, coord_job_t *j)
{
    json_t *args = json_array();
    for (uint32_t i = 0; i < j->argc; i++)
        json_array_append_new(args, json_string(j->argv[i]));
    json_t *plugins = json_array();
    for (uint32_t i = 0; i < j->n_plugins; i++)
        json_array_append_new(plugins, json_string(j->plugins[i]));
    json_t *doc = json_pack("{s:s, s:s, s:o, s:o, s:s, s:o, s:I, s:I, s:i}", "id", j->id, "job", j->name,
                            "plugins", plugins,
                            "args", args, "state", coord_job_state_name(j->state), "parallelism",
                            parallelism_json(j), "last_checkpoint", (json_int_t)j->last_checkpoint,
                            "submitted_ms", (json_int_t)j->submitted_wall_ms, "epoch", j->epoch);
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    char key[160];
    snprintf(key, sizeof key, "/eddy/jobs/%s", j->id);
    eddy_err_t err;
    if (text && eddy_metastore_put(c->meta, key, text, strlen(text), &err) < 0)
        eddy_warn("job %s: cannot persist to the metadata store: %s", j->id, err.msg);
    free(text);
}

static void set_state(coord_t *c, coord_job_t *j, job_state_t s)
{
    if (j->state == s)
        return;
    j->state = s;
    persist_job(c, j);
}

static void fail_job(coord_t *c, coord_job_t *j, const char *why)
{
    snprintf(j->error, sizeof j->error, "%s", why);
    eddy_error("job %s failed: %s", j->id, why);
    j->ended_ms = eddy_mono_ms();
    c->any_failed = true;
    set_state(c, j, JOB_FAILED);
    eddy_msg_t rel = {.type = EDDY_MSG_RELEASE};
    rel.u.release.job = j->num;
    coord_broadcast(c, &rel);
    if (j->rescale_client.waiting) {
        coord_reply(c, j->rescale_client.identity, j->rescale_client.identity_len, 1, why);
        j->rescale_client.waiting = false;
    }
}

/* ---- deploy ------------------------------------------------------------- */

static uint32_t count_positions(const coord_job_t *j)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        if (j->graph.stages[s].source)
            n += j->placement[s].parallelism;
    return n;
}

static void deploy(coord_t *c, coord_job_t *j, eddy_deploy_mode_t mode, uint64_t checkpoint,
                   const int64_t *positions)
{
    j->epoch++;
    j->deploys_pending = 0;
    j->deploy_bytes = j->deploy_groups = 0;
    j->deploy_started_ms = eddy_mono_ms();
    j->tasks_done = 0;
    j->any_done = false;
    j->finishing = false;
    j->final_acks_pending = 0;
    j->tasks_total = total_tasks(j);
    persist_job(c, j); /* the epoch must never repeat, even across coordinator restarts */

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
    d->mode = mode;
    d->restore_checkpoint = checkpoint;
    snprintf(d->snapshot_dir, sizeof d->snapshot_dir, "%s", c->opts->snapshot_dir);
    d->max_parallelism = j->graph.max_parallelism;
    d->n_stages = j->graph.n_stages;
    d->stages = j->placement;
    eddy_worker_endpoint_t *eps = calloc(coord_alive_workers(c) + 1, sizeof *eps);
    eddy_source_position_t *pos = calloc(count_positions(j) + 1, sizeof *pos);
    if (!eps || !pos) {
        free(eps);
        free(pos);
        fail_job(c, j, "out of memory");
        return;
    }
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (w->alive) {
            eps[d->n_workers].id = w->id;
            snprintf(eps[d->n_workers].endpoint, sizeof eps[d->n_workers].endpoint, "%s", w->endpoint);
            d->n_workers++;
        }
    d->workers = eps;
    uint32_t k = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        if (j->graph.stages[s].source)
            for (uint32_t i = 0; i < j->placement[s].parallelism; i++, k++)
                pos[k] = (eddy_source_position_t){s, i, positions ? positions[k] : -1};
    d->n_positions = k;
    d->positions = pos;
    for (coord_worker_t *w = c->workers; w; w = w->next) {
        if (!w->alive)
            continue;
        coord_send_worker(c, w, &m);
        j->deploys_pending++;
    }
    free(eps);
    free(pos);
    static const char *modes[] = {"fresh", "rescale", "restore"};
    if (checkpoint)
        eddy_info("job %s: deploying epoch %u (%s, from checkpoint %" PRIu64 ") on %u workers", j->id,
                  j->epoch, modes[mode], checkpoint, j->deploys_pending);
    else
        eddy_info("job %s: deploying epoch %u (%s) on %u workers", j->id, j->epoch, modes[mode],
                  j->deploys_pending);
}

static uint32_t current_parallelism(const coord_job_t *j, uint32_t s)
{
    return j->placement[s].parallelism ? j->placement[s].parallelism : j->graph.stages[s].parallelism;
}

/* Restores the job from its last complete checkpoint (or from the start).
 * after_failure counts the restore against MAX_RESTARTS; a job that only
 * waited for workers is not failing. */
static void restore_job(coord_t *c, coord_job_t *j, const char *why, bool after_failure)
{
    if (j->inflight) {
        eddy_err_t err;
        eddy_snapshot_store_remove_checkpoint(c->store, j->id, j->inflight, &err);
        j->inflight = 0;
        j->checkpoints_failed++;
    }
    if (j->rescale_client.waiting) {
        char msg[EDDY_ERROR_MAX + 64];
        snprintf(msg, sizeof msg, "rescale interrupted (%s); the job is restored from checkpoint %" PRIu64,
                 why, j->last_checkpoint);
        coord_reply(c, j->rescale_client.identity, j->rescale_client.identity_len, 1, msg);
        j->rescale_client.waiting = false;
    }
    j->rescale_stage = -1;
    if (j->migration) { /* a rescale's moved key groups, no longer needed */
        eddy_err_t err;
        eddy_snapshot_store_remove_checkpoint(c->store, j->id, j->migration, &err);
        j->migration = 0;
    }
    if (after_failure && ++j->restarts > MAX_RESTARTS) {
        fail_job(c, j, "too many restarts");
        return;
    }
    if (coord_alive_workers(c) == 0) {
        eddy_warn("job %s: %s; waiting for a worker to register", j->id, why);
        set_state(c, j, JOB_WAITING);
        return;
    }
    uint32_t p[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        p[s] = current_parallelism(j, s);
    eddy_err_t err;
    if (coord_place(c, j, p, &err) < 0) {
        set_state(c, j, JOB_WAITING);
        return;
    }
    if (j->last_checkpoint)
        eddy_warn("job %s: %s; restoring from checkpoint %" PRIu64, j->id, why, j->last_checkpoint);
    else
        eddy_warn("job %s: %s; restarting from the beginning (no checkpoint yet)", j->id, why);
    set_state(c, j, JOB_RESTORING);
    deploy(c, j, EDDY_DEPLOY_RESTORE, j->last_checkpoint, j->last_checkpoint ? j->last_positions : NULL);
}

coord_job_t *coord_job_submit(coord_t *c, const char *job_name, int argc, char **argv,
                              eddy_err_t *err)
{
    coord_job_t *j = calloc(1, sizeof *j);
    if (!j) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    if (eddy_job_build(&j->graph, job_name, argc, argv, err) < 0) {
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
    j->num = ++c->next_job_num;
    /* The job id is the job's name, made unique among live jobs; an ended
     * job of the same name gives its id to the new one. */
    coord_job_t *ended = coord_job_find(c, job_name);
    if (ended && job_ended(ended)) {
        for (coord_job_t **pp = &c->jobs; *pp; pp = &(*pp)->next)
            if (*pp == ended) {
                *pp = ended->next;
                break;
            }
        coord_job_free(ended);
    }
    snprintf(j->id, sizeof j->id, "%s", job_name);
    for (uint32_t n = 2; coord_job_find(c, j->id); n++)
        snprintf(j->id, sizeof j->id, "%.40s-%u", job_name, n);
    snprintf(j->name, sizeof j->name, "%s", job_name);
    j->argc = (uint32_t)argc;
    j->argv = eddy_strv_dup((uint32_t)argc, argv);
    j->submitted_wall_ms = eddy_wall_ms();
    j->started_ms = eddy_mono_ms();
    j->next_checkpoint = 1;
    j->rescale_stage = -1;
    j->state = JOB_WAITING;
    j->next = c->jobs;
    c->jobs = j;
    persist_job(c, j);
    eddy_info("job %s submitted (%s, %u stages)", j->id, job_name, j->graph.n_stages);
    coord_jobs_on_worker_joined(c);
    return j;
}

void coord_jobs_on_worker_joined(coord_t *c)
{
    /* After a coordinator restart, give the workers one heartbeat timeout to
     * register again before resumed jobs are placed. */
    if (c->resumed_jobs && eddy_mono_ms() < c->started_ms + c->opts->heartbeat_timeout_ms)
        return;
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        if (j->state != JOB_WAITING || coord_alive_workers(c) == 0)
            continue;
        if (j->epoch == 0 && !j->last_checkpoint) {
            uint32_t p[EDDY_MAX_STAGES];
            for (uint32_t s = 0; s < j->graph.n_stages; s++)
                p[s] = current_parallelism(j, s);
            eddy_err_t err;
            if (coord_place(c, j, p, &err) < 0)
                continue;
            set_state(c, j, JOB_DEPLOYING);
            deploy(c, j, EDDY_DEPLOY_FRESH, 0, NULL);
        } else {
            restore_job(c, j, "workers available again", false); /* waiting is not a failure */
        }
    }
}

static void record_rescale(coord_t *c, coord_job_t *j)
{
    double pause_ms = (double)(eddy_mono_ns() - j->pause_started_ns) / 1e6;
    rescale_record_t *r = &j->rescales[j->n_rescales % COORD_MAX_RESCALES];
    j->n_rescales++;
    r->time_ms = eddy_wall_ms();
    memcpy(r->stage, j->graph.stages[j->rescale_stage].name, sizeof r->stage);
    r->old_p = j->rescale_from;
    r->new_p = j->rescale_to;
    r->pause_ms = pause_ms;
    r->bytes_moved = j->deploy_bytes;
    r->groups_moved = j->deploy_groups;
    r->checkpoint = j->migration;
    eddy_err_t err;
    eddy_snapshot_store_remove_checkpoint(c->store, j->id, j->migration, &err);
    j->migration = 0;
    char msg[256];
    snprintf(msg, sizeof msg,
             "rescaled %s/%s %u -> %u: paused %.1f ms, moved %" PRIu64 " key groups (%" PRIu64 " bytes)",
             j->id, r->stage, r->old_p, r->new_p, pause_ms, r->groups_moved, r->bytes_moved);
    eddy_info("%s", msg);
    if (j->rescale_client.waiting) {
        coord_reply(c, j->rescale_client.identity, j->rescale_client.identity_len, 0, msg);
        j->rescale_client.waiting = false;
    }
    j->rescale_stage = -1;
    persist_job(c, j);
}

void coord_job_on_deployed(coord_t *c, const eddy_msg_t *m)
{
    coord_job_t *j = coord_job_by_num(c, m->u.deployed.job);
    if (!j || m->u.deployed.epoch != j->epoch || j->deploys_pending == 0 || job_ended(j))
        return;
    if (m->u.deployed.error[0]) {
        if (j->state == JOB_DEPLOYING && !j->last_checkpoint)
            fail_job(c, j, m->u.deployed.error);
        else
            restore_job(c, j, m->u.deployed.error, true);
        return;
    }
    j->deploy_bytes += m->u.deployed.bytes_loaded;
    j->deploy_groups += m->u.deployed.groups_loaded;
    if (--j->deploys_pending > 0)
        return;
    eddy_msg_t start = {.type = EDDY_MSG_START};
    start.u.start.job = j->num;
    start.u.start.epoch = j->epoch;
    coord_broadcast(c, &start);
    if (j->state == JOB_RESCALING)
        record_rescale(c, j);
    else if (j->state == JOB_RESTORING)
        eddy_info("job %s: restored in %" PRIu64 " ms, running again", j->id,
                  eddy_mono_ms() - j->deploy_started_ms);
    set_state(c, j, JOB_RUNNING);
    j->last_trigger_ms = eddy_mono_ms();
}

/* ---- checkpoints -------------------------------------------------------- */

static void trigger_checkpoint(coord_t *c, coord_job_t *j, bool pause)
{
    j->inflight = j->next_checkpoint++;
    j->inflight_pause = pause;
    j->acks_pending = total_tasks(j);
    j->inflight_started_ms = eddy_mono_ms();
    j->inflight_bytes = j->inflight_files = 0;
    free(j->inflight_positions);
    j->inflight_positions = calloc(count_positions(j) + 1, sizeof(int64_t));
    j->last_trigger_ms = j->inflight_started_ms;
    if (pause)
        j->pause_started_ns = eddy_mono_ns(); /* sources stop at this barrier */
    eddy_msg_t m = {.type = EDDY_MSG_TRIGGER};
    m.u.trigger.job = j->num;
    m.u.trigger.epoch = j->epoch;
    m.u.trigger.checkpoint = j->inflight;
    m.u.trigger.pause_after = pause;
    /* A rescale's barrier is a migration snapshot, not a recovery point. */
    m.u.trigger.migrate_stage = pause && j->rescale_stage >= 0 ? (uint32_t)j->rescale_stage : EDDY_NO_STAGE;
    m.u.trigger.migrate_parallelism = pause && j->rescale_stage >= 0 ? j->rescale_to : 0;
    coord_broadcast(c, &m);
}

static void abort_checkpoint(coord_t *c, coord_job_t *j, const char *why)
{
    eddy_warn("job %s: checkpoint %" PRIu64 " abandoned: %s", j->id, j->inflight, why);
    eddy_err_t err;
    eddy_snapshot_store_remove_checkpoint(c->store, j->id, j->inflight, &err);
    j->checkpoints_failed++;
    bool paused = j->inflight_pause;
    j->inflight = 0;
    if (paused) {
        /* the sources stopped behind the barrier: let them go on */
        eddy_msg_t start = {.type = EDDY_MSG_START};
        start.u.start.job = j->num;
        start.u.start.epoch = j->epoch;
        coord_broadcast(c, &start);
        if (j->rescale_client.waiting) {
            char msg[EDDY_ERROR_MAX + 32];
            snprintf(msg, sizeof msg, "rescale abandoned: %s", why);
            coord_reply(c, j->rescale_client.identity, j->rescale_client.identity_len, 1, msg);
            j->rescale_client.waiting = false;
        }
        j->rescale_stage = -1;
        set_state(c, j, JOB_RUNNING);
    }
}

static void persist_checkpoint(coord_t *c, coord_job_t *j, double duration_ms)
{
    json_t *positions = json_array();
    uint32_t k = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        if (j->graph.stages[s].source)
            for (uint32_t i = 0; i < j->placement[s].parallelism; i++, k++)
                json_array_append_new(positions, json_pack("{s:s, s:i, s:I}", "stage",
                                                           j->graph.stages[s].name, "instance", i,
                                                           "position", (json_int_t)j->inflight_positions[k]));
    json_t *doc = json_pack("{s:I, s:I, s:i, s:f, s:I, s:I, s:o, s:o, s:s}", "id",
                            (json_int_t)j->inflight, "time_ms", (json_int_t)eddy_wall_ms(), "epoch",
                            j->epoch, "duration_ms", duration_ms, "bytes", (json_int_t)j->inflight_bytes,
                            "files", (json_int_t)j->inflight_files, "positions", positions,
                            "parallelism", parallelism_json(j), "snapshot_dir", c->opts->snapshot_dir);
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    char key[200];
    snprintf(key, sizeof key, "/eddy/jobs/%s/checkpoints/%020" PRIu64, j->id, j->inflight);
    eddy_err_t err;
    if (!text || eddy_metastore_put(c->meta, key, text, strlen(text), &err) < 0)
        eddy_warn("job %s: cannot record checkpoint %" PRIu64 ": %s", j->id, j->inflight,
                  text ? err.msg : "out of memory");
    free(text);
}

/* The rescale's migration snapshot is complete: every task has passed the
 * pausing barrier and the key groups that change owner are in the snapshot
 * store. Deploy the new parallelism; tasks load only those groups. */
static void complete_migration(coord_t *c, coord_job_t *j)
{
    j->migration = j->inflight;
    j->migration_bytes = j->inflight_bytes;
    j->inflight = 0;
    uint32_t p[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        p[s] = current_parallelism(j, s);
    p[j->rescale_stage] = j->rescale_to;
    eddy_err_t err;
    if (coord_place(c, j, p, &err) < 0) {
        restore_job(c, j, err.msg, true);
        return;
    }
    deploy(c, j, EDDY_DEPLOY_RESCALE, j->migration, j->inflight_positions);
}

static void complete_checkpoint(coord_t *c, coord_job_t *j)
{
    if (j->inflight_pause && j->rescale_stage >= 0) {
        complete_migration(c, j);
        return;
    }
    double duration = (double)(eddy_mono_ms() - j->inflight_started_ms);
    persist_checkpoint(c, j, duration);
    uint64_t previous = j->last_checkpoint;
    j->last_checkpoint = j->inflight;
    free(j->last_positions);
    j->last_positions = j->inflight_positions;
    j->inflight_positions = NULL;
    j->last_checkpoint_wall_ms = (uint64_t)eddy_wall_ms();
    j->last_checkpoint_ms = duration;
    j->last_checkpoint_bytes = j->inflight_bytes;
    j->checkpoints_completed++;
    j->inflight = 0;
    persist_job(c, j);
    eddy_msg_t m = {.type = EDDY_MSG_COMPLETE};
    m.u.complete.job = j->num;
    m.u.complete.checkpoint = j->last_checkpoint;
    coord_broadcast(c, &m);
    eddy_debug("job %s: checkpoint %" PRIu64 " complete in %.0f ms, %" PRIu64 " bytes", j->id,
               j->last_checkpoint, duration, j->last_checkpoint_bytes);
    if (previous) {
        eddy_err_t err;
        char key[200];
        snprintf(key, sizeof key, "/eddy/jobs/%s/checkpoints/%020" PRIu64, j->id, previous);
        eddy_metastore_delete(c->meta, key, &err);
        eddy_snapshot_store_remove_checkpoint(c->store, j->id, previous, &err);
    }
}

static void finish_job(coord_t *c, coord_job_t *j)
{
    j->finishing = false;
    j->ended_ms = eddy_mono_ms();
    eddy_info("job %s finished in %.2f s", j->id, (double)(j->ended_ms - j->started_ms) / 1000.0);
    set_state(c, j, JOB_FINISHED);
    eddy_msg_t rel = {.type = EDDY_MSG_RELEASE};
    rel.u.release.job = j->num;
    coord_broadcast(c, &rel);
}

void coord_job_on_ack(coord_t *c, const eddy_msg_t *m)
{
    coord_job_t *j = coord_job_by_num(c, m->u.ack.job);
    if (j && m->u.ack.checkpoint == EDDY_FINAL_CHECKPOINT) {
        /* a task's final commit (see coord_job_on_task_done) */
        if (j->finishing && m->u.ack.epoch == j->epoch && !job_ended(j) &&
            --j->final_acks_pending == 0)
            finish_job(c, j);
        return;
    }
    if (!j || !j->inflight || m->u.ack.checkpoint != j->inflight || m->u.ack.epoch != j->epoch)
        return;
    if (m->u.ack.error[0]) {
        abort_checkpoint(c, j, m->u.ack.error);
        return;
    }
    if (m->u.ack.stage < j->graph.n_stages && j->graph.stages[m->u.ack.stage].source) {
        uint32_t k = 0;
        for (uint32_t s = 0; s < m->u.ack.stage; s++)
            if (j->graph.stages[s].source)
                k += j->placement[s].parallelism;
        if (m->u.ack.instance < j->placement[m->u.ack.stage].parallelism)
            j->inflight_positions[k + m->u.ack.instance] = m->u.ack.position;
    }
    j->inflight_bytes += m->u.ack.bytes_written;
    j->inflight_files += m->u.ack.files_written;
    if (--j->acks_pending == 0)
        complete_checkpoint(c, j);
}

/* ---- task completion and failure ---------------------------------------- */

void coord_job_on_task_done(coord_t *c, const eddy_msg_t *m)
{
    coord_job_t *j = coord_job_by_num(c, m->u.task_done.job);
    if (!j || m->u.task_done.epoch != j->epoch || job_ended(j))
        return;
    j->any_done = true;
    if (j->inflight)
        abort_checkpoint(c, j, "input ended while it was in flight");
    if (++j->tasks_done < j->tasks_total)
        return;
    /* Every task is done: publish what two-phase-commit sinks prepared at end
     * of input (COMPLETE of the final checkpoint), and finish once each task
     * confirmed its commit, so no worker is released or stopped before. */
    j->finishing = true;
    j->final_acks_pending = j->tasks_total;
    j->finishing_started_ms = eddy_mono_ms();
    eddy_msg_t m2 = {.type = EDDY_MSG_COMPLETE};
    m2.u.complete.job = j->num;
    m2.u.complete.checkpoint = EDDY_FINAL_CHECKPOINT;
    coord_broadcast(c, &m2);
}

void coord_job_on_task_failed(coord_t *c, const eddy_msg_t *m)
{
    coord_job_t *j = coord_job_by_num(c, m->u.task_failed.job);
    if (!j || m->u.task_failed.epoch != j->epoch || job_ended(j))
        return;
    char why[EDDY_ERROR_MAX + 64];
    snprintf(why, sizeof why, "task %s[%u] failed: %.400s",
             m->u.task_failed.stage < j->graph.n_stages ? j->graph.stages[m->u.task_failed.stage].name : "?",
             m->u.task_failed.instance, m->u.task_failed.error);
    if (!j->last_checkpoint && !j->any_done && j->restarts >= 2)
        fail_job(c, j, why);
    else
        restore_job(c, j, why, true);
}

void coord_jobs_on_worker_lost(coord_t *c, coord_worker_t *w)
{
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        if (job_ended(j) || j->state == JOB_WAITING)
            continue;
        bool involved = j->deploys_pending > 0;
        for (uint32_t s = 0; s < j->graph.n_stages && !involved; s++)
            for (uint32_t i = 0; i < j->placement[s].parallelism; i++)
                if (j->placement[s].worker_of[i] == w->id)
                    involved = true;
        if (involved && j->finishing) {
            /* Every task finished, some sinks may have published already: a
             * restore would replay and duplicate. What the lost worker's
             * sinks prepared stays unpublished (their .pending files). */
            char why[160];
            snprintf(why, sizeof why, "worker %u (%s) was lost during the final commit", w->id,
                     w->name);
            fail_job(c, j, why);
        } else if (involved) {
            char why[128];
            snprintf(why, sizeof why, "worker %u (%s) was lost", w->id, w->name);
            restore_job(c, j, why, true);
        }
    }
}

/* ---- rescale and cancel ------------------------------------------------- */

int coord_job_rescale(coord_t *c, const char *job_id, const char *stage, uint32_t parallelism,
                      const unsigned char *identity, size_t identity_len, eddy_err_t *err)
{
    coord_job_t *j = coord_job_find(c, job_id);
    if (!j)
        return eddy_err_set(err, "no job '%s'", job_id);
    int s = eddy_graph_find_stage(&j->graph, stage);
    if (s < 0)
        return eddy_err_set(err, "job %s has no operator '%s'", job_id, stage);
    if (!eddy_stage_is_keyed(&j->graph.stages[s]))
        return eddy_err_set(err, "operator '%s' is not keyed; only keyed operators can be rescaled",
                            stage);
    if (parallelism < 1 || parallelism > j->graph.max_parallelism)
        return eddy_err_set(err, "parallelism %u is out of range 1..%u (the job's max parallelism)",
                            parallelism, j->graph.max_parallelism);
    if (j->state != JOB_RUNNING || j->rescale_stage >= 0)
        return eddy_err_set(err, "job %s is %s; try again when it is running", job_id,
                            j->rescale_stage >= 0 ? "already rescaling" : coord_job_state_name(j->state));
    if (j->any_done)
        return eddy_err_set(err, "job %s has reached the end of its input; not rescaling", job_id);
    uint32_t old = j->placement[s].parallelism;
    if (old == parallelism) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s/%s already has parallelism %u", job_id, stage, parallelism);
        coord_reply(c, identity, identity_len, 0, msg);
        return 0;
    }
    j->rescale_stage = s;
    j->rescale_from = old;
    j->rescale_to = parallelism;
    j->pause_started_ns = eddy_mono_ns();
    j->rescale_client.waiting = identity_len > 0;
    memcpy(j->rescale_client.identity, identity, identity_len);
    j->rescale_client.identity_len = identity_len;
    eddy_info("job %s: rescaling %s %u -> %u", job_id, stage, old, parallelism);
    set_state(c, j, JOB_RESCALING);
    if (!j->inflight)
        trigger_checkpoint(c, j, true);
    /* else: the rescale's own checkpoint starts when the running one ends */
    return 0;
}

int coord_job_cancel(coord_t *c, const char *job_id, eddy_err_t *err)
{
    coord_job_t *j = coord_job_find(c, job_id);
    if (!j)
        return eddy_err_set(err, "no job '%s'", job_id);
    if (job_ended(j))
        return eddy_err_set(err, "job %s has already ended (%s)", job_id, coord_job_state_name(j->state));
    j->ended_ms = eddy_mono_ms();
    c->any_cancelled = true;
    set_state(c, j, JOB_CANCELLED);
    eddy_msg_t rel = {.type = EDDY_MSG_RELEASE};
    rel.u.release.job = j->num;
    coord_broadcast(c, &rel);
    eddy_info("job %s cancelled", job_id);
    return 0;
}

/* ---- timers ------------------------------------------------------------- */

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
    if (c->resumed_jobs && coord_alive_workers(c) > 0)
        coord_jobs_on_worker_joined(c);
    bool progress = c->opts->progress && now_ms - c->last_progress_ms >= 1000;
    if (progress)
        c->last_progress_ms = now_ms;
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        if (job_ended(j))
            continue;
        if (progress && j->state != JOB_WAITING)
            print_progress(c, j, now_ms);
        if (j->deploys_pending && now_ms > j->deploy_started_ms + DEPLOY_TIMEOUT_MS) {
            restore_job(c, j, "workers did not confirm the deployment in time", true);
            continue;
        }
        if (j->finishing) {
            if (now_ms > j->finishing_started_ms + c->opts->checkpoint_timeout_ms)
                fail_job(c, j, "the final commit was not confirmed in time");
            continue;
        }
        if (j->inflight && now_ms > j->inflight_started_ms + c->opts->checkpoint_timeout_ms) {
            abort_checkpoint(c, j, "timed out");
            continue;
        }
        if (j->state == JOB_RESCALING && !j->inflight && !j->deploys_pending && j->rescale_stage >= 0) {
            trigger_checkpoint(c, j, true); /* a periodic checkpoint was in the way */
            continue;
        }
        if (j->state == JOB_RUNNING && !j->inflight && !j->any_done && c->opts->checkpoint_interval_ms &&
            now_ms >= j->last_trigger_ms + c->opts->checkpoint_interval_ms)
            trigger_checkpoint(c, j, false);
    }
}

/* ---- coordinator restart ------------------------------------------------ */

void coord_jobs_restore_from_store(coord_t *c)
{
    eddy_kv_list_t list = {0};
    eddy_err_t err;
    if (eddy_metastore_list(c->meta, "/eddy/jobs/", &list, &err) < 0) {
        eddy_warn("cannot read jobs from the metadata store: %s", err.msg);
        return;
    }
    for (size_t i = 0; i < list.count; i++) {
        const char *rest = list.items[i].key + strlen("/eddy/jobs/");
        if (strchr(rest, '/'))
            continue; /* checkpoints and other sub-keys */
        json_error_t jerr;
        json_t *doc = json_loads(list.items[i].value, 0, &jerr);
        const char *id = NULL, *name = NULL, *state = NULL;
        json_t *args = NULL, *par = NULL;
        json_int_t last = 0;
        if (!doc || json_unpack(doc, "{s:s, s:s, s:o, s:s, s:o, s:I}", "id", &id, "job", &name, "args",
                                &args, "state", &state, "parallelism", &par, "last_checkpoint", &last) < 0 ||
            !json_is_array(args)) {
            eddy_warn("ignoring malformed job record %s", list.items[i].key);
            json_decref(doc);
            continue;
        }
        if (!strcmp(state, "finished") || !strcmp(state, "failed") || !strcmp(state, "cancelled")) {
            json_decref(doc);
            continue;
        }
        json_t *plugins = json_object_get(doc, "plugins");
        bool plugins_ok = true;
        for (size_t p = 0; json_is_array(plugins) && p < json_array_size(plugins); p++) {
            const char *hash = json_string_value(json_array_get(plugins, p));
            if (!hash || coord_plugins_ensure(c, hash, &err) < 0) {
                eddy_warn("cannot resume job %s: its plugin: %s", id, hash ? err.msg : "malformed");
                plugins_ok = false;
                break;
            }
        }
        if (!plugins_ok) {
            json_decref(doc);
            continue;
        }
        uint32_t argc = (uint32_t)json_array_size(args);
        char **argv = calloc(argc + 1, sizeof *argv);
        for (uint32_t a = 0; argv && a < argc; a++)
            argv[a] = (char *)json_string_value(json_array_get(args, a));
        coord_job_t *j = argv ? coord_job_submit(c, name, (int)argc, argv, &err) : NULL;
        free(argv);
        if (!j) {
            eddy_warn("cannot resume job %s: %s", id, err.msg);
            json_decref(doc);
            continue;
        }
        if (strlen(id) < sizeof j->id)
            memmove(j->id, id, strlen(id) + 1);
        for (uint32_t s = 0; s < j->graph.n_stages; s++) {
            json_t *v = json_object_get(par, j->graph.stages[s].name);
            if (json_is_integer(v) && json_integer_value(v) >= 1 &&
                json_integer_value(v) <= (json_int_t)j->graph.max_parallelism)
                j->graph.stages[s].parallelism = (uint32_t)json_integer_value(v);
        }
        if (last > 0) {
            char key[200];
            snprintf(key, sizeof key, "/eddy/jobs/%s/checkpoints/%020" PRIu64, id, (uint64_t)last);
            char *text = NULL;
            size_t len;
            json_t *ck = NULL;
            if (eddy_metastore_get(c->meta, key, &text, &len, &err) == 1)
                ck = json_loads(text, 0, &jerr);
            free(text);
            json_t *positions = ck ? json_object_get(ck, "positions") : NULL;
            uint32_t n = 0;
            for (uint32_t s = 0; s < j->graph.n_stages; s++)
                if (j->graph.stages[s].source)
                    n += j->graph.stages[s].parallelism;
            if (json_is_array(positions) && json_array_size(positions) == n) {
                j->last_positions = calloc(n + 1, sizeof(int64_t));
                for (uint32_t k = 0; j->last_positions && k < n; k++)
                    j->last_positions[k] = json_integer_value(json_object_get(json_array_get(positions, k), "position"));
                j->last_checkpoint = (uint64_t)last;
                j->next_checkpoint = (uint64_t)last + 1;
                /* a placement is needed to restore; the parallelism comes from the record */
                for (uint32_t s = 0; s < j->graph.n_stages; s++)
                    j->placement[s].parallelism = j->graph.stages[s].parallelism;
            } else {
                eddy_warn("job %s: checkpoint %lld is unreadable; restarting from the beginning", id, (long long)last);
            }
            json_decref(ck);
        }
        c->resumed_jobs = true;
        /* Not a fresh start: restore when workers are back, in an epoch above
         * any the previous coordinator used, so its tasks' messages are stale. */
        json_t *epoch = json_object_get(doc, "epoch");
        j->epoch = (json_is_integer(epoch) ? (uint32_t)json_integer_value(epoch) : 0) + 1;
        eddy_info("resumed job %s from the metadata store (last checkpoint %" PRIu64 ")", j->id,
                  j->last_checkpoint);
        json_decref(doc);
    }
    eddy_kv_list_clear(&list);
}
