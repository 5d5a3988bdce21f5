/* worker.c - the worker process loop (see worker.h).
 *
 * Owns: the ZeroMQ sockets of one worker, the jobs it runs (each with the
 * graph rebuilt from the job's name and flags, the current epoch and its
 * tasks), the dispatch of data-plane messages to tasks, the application of
 * DEPLOY (fresh start, rescale keeping state, restore from a checkpoint) and
 * the heartbeat. Everything runs on one thread, so tasks need no locks; the
 * one other thread, runtime/liveness.h, only says that the process lives
 * (on its own socket) and shares nothing with the tasks. */
#include "runtime/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/client.h"
#include "net/curve.h"
#include "net/dataplane.h"
#include "net/loopback.h"
#include "net/proto.h"
#include "net/zrecv.h"
#include "state/keygroup.h"
#include "state/snapshot_store.h"
#include "plan/plugin.h"
#include "plan/registry.h"
#include "runtime/liveness.h"
#include "runtime/local_recovery.h"
#include "runtime/peers.h"
#include "runtime/task.h"

#define INBOX_BURST 256
/* Messages a peer's socket could not take yet are retried this often. */
#define PEER_RETRY_NS (1000u * 1000u)

/* A task already reported failed because its data could not be sent. */
typedef struct send_failure {
    uint32_t job, epoch, stage, instance;
} send_failure_t;

typedef struct wjob {
    uint32_t num;
    char job_id[EDDY_NAME_MAX];
    eddy_job_graph_t graph;
    uint64_t plan_fingerprint;
    uint32_t epoch;
    eddy_task_t **tasks;
    uint32_t n_tasks;
    eddy_snapshot_store_t *store;
    eddy_task_env_t env;
    uint64_t started_ns;
    /* A protocol violation is reported once per epoch: the report makes the
     * coordinator restore the job, which starts a new epoch. */
    bool violation_reported;
    uint32_t violation_epoch;
    struct wjob *next;
} wjob_t;

typedef struct deferred_deploy {
    char hash[EDDY_PLUGIN_HASH_MAX];
    char *encoded;
    size_t len;
    struct deferred_deploy *next;
} deferred_deploy_t;

/* A DEPLOY that restores from a remote (s3://) store waits here while the
 * snapshot writer thread reads the key groups it will load (read units,
 * state/snapshot_writer.h); it is then applied with those groups preloaded
 * into the job's store (eddy_snapshot_store_preload), so the restore on
 * the loop does no network I/O and heartbeats go on meanwhile. A newer
 * DEPLOY or a RELEASE of the job supersedes it (encoded NULL): it is
 * dropped once its units are back. */
typedef struct pending_restore {
    struct pending_restore *next;
    uint32_t job, epoch;
    char job_id[EDDY_NAME_MAX];
    uint64_t checkpoint;
    char *encoded; /* the DEPLOY; NULL once superseded */
    size_t len;
    uint32_t units_out, groups;
    eddy_snapshot_unit_t *done; /* the units back, chained by next */
    uint64_t started_ns;
    eddy_local_restore_stats_t local; /* groups taken from local copies */
} pending_restore_t;

typedef struct worker {
    const eddy_worker_options_t *opts;
    void *zctx, *ctrl, *inbox;
    eddy_zap_t *zap; /* with keys: admits peer workers to inbox */
    uint32_t id;
    uint32_t heartbeat_ms;
    eddy_peers_t *peers;
    send_failure_t *send_failures;
    uint32_t n_send_failures;
    wjob_t *jobs;
    char endpoint[EDDY_ENDPOINT_MAX];
    eddy_snapshot_writer_t *snapshots;
    uint64_t next_heartbeat_ms;
    uint32_t start_heartbeats;    /* quick heartbeats still due after a START */
    /* Rate limits for lines about bad input (see eddy_log_limited). */
    eddy_log_limit_t malformed_ctrl_log, malformed_data_log, undecodable_data_log,
        violation_log;
    /* Plugins: fetched from the coordinator into a private cache
     * (plan/plugin.h); DEPLOYs that wait for one are kept encoded until it
     * arrives. */
    eddy_plugin_dir_t *plugins;
    deferred_deploy_t *deferred;
    pending_restore_t *restores;
    pending_restore_t *applying; /* the one whose DEPLOY is being applied */
    /* The loop's poll set: control, data, the snapshot writer's eventfd,
     * then the descriptor of each source task waiting for input (tasks of
     * item i in waiting[i - FIXED_ITEMS]). Rebuilt every iteration. */
    zmq_pollitem_t *items;
    eddy_task_t **waiting;
    uint32_t items_cap;
    /* Coordinators (--coordinator a list): the DEALER is connected to one,
     * coords[cur]; it moves on when that one says it is not the leader or
     * stops answering heartbeats. */
    char coords[EDDY_MAX_COORDINATORS][EDDY_ENDPOINT_MAX];
    int n_coords, cur;
    uint64_t last_ctrl_ms;        /* when the coordinator last said anything */
    uint64_t leader_epoch;        /* the highest seen: lower ones are ignored */
    uint64_t last_register_ms;
    /* Seeking the leader (see on_not_leader): after a switch the worker asks
     * the candidates in turn, again at seek_next_ms, until one answers as
     * leader. `suspect` (-1: none) is the coordinator it left because it
     * went silent: a standby naming it as leader before suspect_until_ms is
     * not believed (its view predates the election under way). */
    bool seeking, seek_answered; /* answered: the current candidate said anything */
    uint64_t seek_next_ms;
    uint32_t seek_backoff_ms;
    int suspect;
    uint64_t suspect_until_ms;
    eddy_log_limit_t fenced_log;
    char fatal[EDDY_ERROR_MAX + 64]; /* a final refusal: the worker exits with it */
    /* Local recovery (runtime/local_recovery.h): copies of what this
     * worker's tasks wrote for their last checkpoints; NULL when off
     * (--no-local-recovery). restore_local counts what the DEPLOY being
     * applied took from them. */
    eddy_local_copies_t *local;
    bool local_corrupt; /* test hook EDDY_TEST_LOCAL_COPY_CORRUPT=1 */
    eddy_local_restore_stats_t restore_local;
    /* The liveness thread (runtime/liveness.h) and the token of the
     * current registration it sends (0: none, it sends nothing). */
    eddy_liveness_t *liveness;
    uint64_t liveness_token;
    uint64_t last_turn_ms; /* when the loop last turned */
    /* Test hook EDDY_TEST_STALL_LOOP_MS=N: the loop blocks once for N ms,
     * right after the first completed checkpoint (mid-job), as a loop
     * writing a large output would. 0: off; stall_armed: the time came. */
    uint32_t stall_ms;
    bool stall_armed;
} worker_t;

#define FIXED_ITEMS 3

static void send_heartbeat(worker_t *w);

/* After START, heartbeats come every WORKER_START_HEARTBEAT_MS, this many
 * times: the coordinator (status, at-most-once positions) learns within a
 * tenth of a second that records flow in the new epoch, not a whole
 * heartbeat interval later. */
#define WORKER_START_HEARTBEAT_MS 100
#define WORKER_START_HEARTBEATS 5

/* Long steps (loading many key groups) must not look like a dead worker. */
static void maybe_heartbeat(worker_t *w)
{
    uint64_t now = eddy_mono_ms();
    if (now >= w->next_heartbeat_ms) {
        send_heartbeat(w);
        uint32_t interval = w->heartbeat_ms;
        if (w->start_heartbeats > 0 && interval > WORKER_START_HEARTBEAT_MS) {
            w->start_heartbeats--;
            interval = WORKER_START_HEARTBEAT_MS;
        }
        w->next_heartbeat_ms = now + interval;
    }
}

/* ---- sending ------------------------------------------------------------ */

static int send_ctrl(worker_t *w, const eddy_msg_t *msg)
{
    /* The coordinator keeps a job's counters from heartbeats: the task's
     * final counts go ahead of its end (same socket, so in order). */
    if (msg->type == EDDY_MSG_TASK_DONE)
        send_heartbeat(w);
    size_t len;
    /* the highest leader epoch seen: a deposed coordinator learns it is */
    eddy_msg_t stamped = *msg;
    stamped.leader_epoch = w->leader_epoch;
    char *data = eddy_msg_encode(&stamped, &len);
    if (!data)
        return -1;
    int rc = zmq_send(w->ctrl, data, len, ZMQ_DONTWAIT);
    free(data);
    return rc < 0 ? -1 : 0;
}


static bool dispatch_data(worker_t *w, char *data, size_t len, zmq_msg_t *zmsg);

/* Data for another worker that cannot be sent fails the task that sent it
 * (its channel's sender; for a CREDIT, the consumer returning it), once per
 * epoch: the coordinator restores the job from its last checkpoint. */
static void send_failed(void *host, uint32_t worker_id, const void *data, size_t len,
                        const char *error)
{
    worker_t *w = host;
    eddy_data_msg_t msg;
    eddy_err_t derr;
    if (eddy_data_decode(data, len, &msg, &derr) < 0) {
        eddy_error("send to worker %u failed (%s) for an undecodable message: %s", worker_id,
                   error, derr.msg);
        return;
    }
    eddy_channel_id_t ch = msg.channel;
    bool credit = msg.type == EDDY_DATA_CREDIT;
    eddy_data_msg_close(&msg);
    send_failure_t f = {ch.job, ch.epoch, credit ? ch.dst_stage : ch.src_stage,
                        credit ? ch.dst_instance : ch.src_instance};
    for (uint32_t i = 0; i < w->n_send_failures; i++)
        if (!memcmp(&w->send_failures[i], &f, sizeof f))
            return;
    send_failure_t *grown = realloc(w->send_failures, (w->n_send_failures + 1) * sizeof *grown);
    if (grown) {
        w->send_failures = grown;
        w->send_failures[w->n_send_failures++] = f;
    }
    eddy_msg_t m = {.type = EDDY_MSG_TASK_FAILED};
    m.u.task_failed.job = f.job;
    m.u.task_failed.epoch = f.epoch;
    m.u.task_failed.stage = f.stage;
    m.u.task_failed.instance = f.instance;
    snprintf(m.u.task_failed.error, sizeof m.u.task_failed.error,
             "cannot send data of channel %u[%u]->%u[%u] to worker %u: %s", ch.src_stage,
             ch.src_instance, ch.dst_stage, ch.dst_instance, worker_id, error);
    eddy_error("task %u/%u[%u]: %s", f.job, f.stage, f.instance, m.u.task_failed.error);
    send_ctrl(w, &m);
}

/* Forgets reported send failures of a job that is deployed anew. */
static void forget_send_failures(worker_t *w, uint32_t job)
{
    for (uint32_t i = 0; i < w->n_send_failures;)
        if (w->send_failures[i].job == job)
            w->send_failures[i] = w->send_failures[--w->n_send_failures];
        else
            i++;
}

static int env_send_remote(void *host, uint32_t worker_id, char *data, size_t len)
{
    worker_t *w = host;
    eddy_peers_send(w->peers, worker_id, data, len);
    return 0;
}

static void env_send_local(void *host, char *data, size_t len)
{
    (void)dispatch_data(host, data, len, NULL);
}

static void env_notify(void *host, const eddy_msg_t *msg)
{
    send_ctrl(host, msg);
}

static wjob_t *find_job(worker_t *w, uint32_t num);

/* A checkpoint's groups bound for the job's own checkpoint storage (not a
 * savepoint's location, not a migration snapshot) are kept as local copies
 * once durable. */
static void env_submit_snapshot(void *host, eddy_snapshot_unit_t *unit)
{
    worker_t *w = host;
    if (w->local && unit->durable && unit->ack.type == EDDY_MSG_ACK && !unit->read &&
        !unit->sync_only) {
        wjob_t *j = find_job(w, unit->ack.u.ack.job);
        unit->keep_local = j && !strcmp(unit->root, eddy_snapshot_store_root(j->store));
    }
    eddy_snapshot_writer_submit(w->snapshots, unit);
}

/* Whether a job with this id is still deployed on this worker. */
static bool job_is_here(const worker_t *w, const char *job_id)
{
    for (const wjob_t *j = w->jobs; j; j = j->next)
        if (!strcmp(j->job_id, job_id))
            return true;
    return false;
}

static void restore_unit_back(worker_t *w, eddy_snapshot_unit_t *u);

/* Messages whose data became durable since the last call: checkpoint ACKs
 * (failures are in the ACK), TASK_DONE after a final prepare (a failure
 * turns it into TASK_FAILED), the final ACK after the last commit. */
static void send_durable_acks(worker_t *w)
{
    eddy_snapshot_unit_t *u;
    while ((u = eddy_snapshot_writer_poll(w->snapshots))) {
        if (u->read) {
            restore_unit_back(w, u);
            continue;
        }
        eddy_msg_t *m = &u->ack;
        if (m->type == EDDY_MSG_ACK) {
            m->u.ack.sync_us = u->barrier_ns / 1000;
            m->u.ack.async_us = (eddy_mono_ns() - u->submitted_ns) / 1000;
        }
        /* Only key-group units name their job; a sync-only unit's error
         * (a sink's pre-commit) must always reach the coordinator. */
        if (u->error[0] && u->job[0] && !job_is_here(w, u->job)) {
            /* The job ended (or was cancelled) while its last checkpoint was
             * being written, and the coordinator deleted that checkpoint's
             * directory: nothing is lost, the result no longer matters. */
            eddy_info("checkpoint %llu of %s/%s abandoned: the job was released before its "
                      "snapshot was written", (unsigned long long)u->checkpoint, u->job, u->op);
            eddy_snapshot_unit_free(u);
            continue;
        }
        if (u->error[0])
            eddy_error("checkpoint %llu of %s/%s: %s", (unsigned long long)u->checkpoint, u->job,
                       u->op, u->error);
        else if (u->n_groups)
            eddy_debug("checkpoint %llu of %s/%s: %u groups, %s; barrier %.3f ms, serialise "
                       "%.3f ms, write %.3f ms", (unsigned long long)u->checkpoint, u->job, u->op,
                       u->n_groups, u->serialise ? "async" : "sync", u->barrier_ns / 1e6,
                       u->serialise_ns / 1e6, u->write_ns / 1e6);
        if (!u->error[0] && u->keep_local && m->type == EDDY_MSG_ACK && !m->u.ack.error[0]) {
            /* only the current epoch's: an older one's checkpoint ids may
             * be taken again (local_copies.h) */
            wjob_t *j = find_job(w, m->u.ack.job);
            if (j && j->epoch == m->u.ack.epoch && !strcmp(j->job_id, u->job))
                eddy_local_recovery_keep(w->local, u);
        }
        if (u->error[0] && m->type == EDDY_MSG_TASK_DONE) {
            eddy_msg_t f = {.type = EDDY_MSG_TASK_FAILED};
            f.u.task_failed.job = m->u.task_done.job;
            f.u.task_failed.epoch = m->u.task_done.epoch;
            f.u.task_failed.stage = m->u.task_done.stage;
            f.u.task_failed.instance = m->u.task_done.instance;
            snprintf(f.u.task_failed.error, sizeof f.u.task_failed.error, "%s", u->error);
            send_ctrl(w, &f);
        } else if (m->type) {
            send_ctrl(w, m);
        }
        eddy_snapshot_unit_free(u);
    }
}

/* Hands fsyncs a commit left in sync (taken) and then msg (type 0: none)
 * to the snapshot writer, behind the task's earlier durability work. */
static void submit_sync(worker_t *w, eddy_sync_list_t **sync, const eddy_msg_t *msg)
{
    bool nothing_to_sync = !*sync || eddy_sync_list_empty(*sync);
    if (nothing_to_sync && !msg->type) {
        eddy_sync_list_destroy(sync);
        return;
    }
    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(0);
    if (!u) { /* out of memory: do it here */
        eddy_err_t err = {{0}};
        eddy_msg_t m = *msg;
        if (*sync && eddy_sync_list_run(*sync, &err) < 0 && m.type == EDDY_MSG_ACK)
            snprintf(m.u.ack.error, sizeof m.u.ack.error, "%s", err.msg);
        eddy_sync_list_destroy(sync);
        if (m.type)
            send_ctrl(w, &m);
        return;
    }
    u->sync_only = true;
    u->sync = *sync;
    *sync = NULL;
    u->ack = *msg;
    eddy_snapshot_writer_submit(w->snapshots, u);
}

/* ---- jobs --------------------------------------------------------------- */

static wjob_t *find_job(worker_t *w, uint32_t num)
{
    for (wjob_t *j = w->jobs; j; j = j->next)
        if (j->num == num)
            return j;
    return NULL;
}

static eddy_task_t *find_task(wjob_t *j, uint32_t stage, uint32_t instance)
{
    for (uint32_t i = 0; i < j->n_tasks; i++)
        if (eddy_task_stage(j->tasks[i]) == stage && eddy_task_instance(j->tasks[i]) == instance)
            return j->tasks[i];
    return NULL;
}

/* The task that becomes instance k of stage s here under DEPLOY d: one
 * that a rename gives that number (a fluid migration's end), else the
 * task of that number. */
static eddy_task_t *placed_task(wjob_t *j, const eddy_deploy_t *d, uint32_t s, uint32_t k)
{
    for (uint32_t i = 0; i < d->n_renames; i++)
        if (d->renames[i].stage == s && d->renames[i].to == k) {
            eddy_task_t *t = find_task(j, s, d->renames[i].from);
            if (t)
                return t;
        }
    return find_task(j, s, k);
}

/* A fluid migration's end: each renamed task placed here takes its new
 * number; the task that had it (emptied by the migration's steps) goes. */
static void apply_renames(worker_t *w, wjob_t *j, const eddy_deploy_t *d)
{
    for (uint32_t r = 0; r < d->n_renames; r++) {
        const eddy_task_rename_t *rn = &d->renames[r];
        eddy_task_t *t = find_task(j, rn->stage, rn->from);
        if (!t || d->stages[rn->stage].worker_of[rn->to] != w->id)
            continue;
        for (uint32_t i = 0; i < j->n_tasks; i++)
            if (eddy_task_stage(j->tasks[i]) == rn->stage && eddy_task_instance(j->tasks[i]) == rn->to) {
                eddy_task_destroy(&j->tasks[i]);
                j->tasks[i] = j->tasks[--j->n_tasks];
                break;
            }
        eddy_info("job %s epoch %u: task %s[%u] becomes %s[%u] (fluid migration)", d->job_id,
                  d->epoch, j->graph.stages[rn->stage].name, rn->from,
                  j->graph.stages[rn->stage].name, rn->to);
        eddy_task_renumber(t, rn->to);
    }
}

static void destroy_job(worker_t *w, wjob_t *j)
{
    for (wjob_t **pp = &w->jobs; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    for (uint32_t i = 0; i < j->n_tasks; i++)
        eddy_task_destroy(&j->tasks[i]);
    free(j->tasks);
    eddy_snapshot_store_destroy(&j->store);
    eddy_snapshot_store_destroy(&j->env.restore_store);
    eddy_graph_clear(&j->graph);
    free(j->env.migrate_moving);
    free(j);
}

static bool restored_finished(const eddy_deploy_t *d, uint32_t stage, uint32_t instance)
{
    for (uint32_t i = 0; i < d->n_finished; i++)
        if (d->finished[i].stage == stage && d->finished[i].instance == instance)
            return true;
    return false;
}

static const eddy_source_position_t *position_of(const eddy_deploy_t *d, uint32_t stage,
                                                 uint32_t instance)
{
    for (uint32_t i = 0; i < d->n_positions; i++)
        if (d->positions[i].stage == stage && d->positions[i].instance == instance)
            return &d->positions[i];
    return NULL;
}

/* Where a DEPLOY's checkpoints are: the worker's own storage, else the
 * coordinator's URI, else its directory, else the worker's directory. */
static const char *storage_of(const worker_t *w, const eddy_deploy_t *d)
{
    return w->opts->checkpoint_storage ? w->opts->checkpoint_storage
           : d->storage_uri[0]         ? d->storage_uri
           : d->snapshot_dir[0]        ? d->snapshot_dir
                                       : w->opts->snapshot_dir;
}

/* A new job for a DEPLOY, with its graph built and the DEPLOY checked
 * against it; not yet linked into the worker. */
static wjob_t *new_job(worker_t *w, const eddy_deploy_t *d, eddy_err_t *err)
{
    wjob_t *j = calloc(1, sizeof *j);
    if (!j) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    j->num = d->job;
    snprintf(j->job_id, sizeof j->job_id, "%s", d->job_id);
    if (eddy_job_build_from_plan(&j->graph, d->plan, d->plan_len, d->plan_fingerprint, err) < 0) {
        eddy_err_wrap(err, "job %s: its plan", d->job_id);
        free(j);
        return NULL;
    }
    j->plan_fingerprint = d->plan_fingerprint;
    if (eddy_deploy_check(d, j->graph.n_stages, j->graph.max_parallelism, err) < 0) {
        eddy_graph_clear(&j->graph);
        free(j);
        return NULL;
    }
    j->store = eddy_snapshot_store_new(storage_of(w, d), err);
    if (!j->store) {
        eddy_graph_clear(&j->graph);
        free(j);
        return NULL;
    }
    j->env = (eddy_task_env_t){.host = w, .send_remote = env_send_remote,
                               .send_local = env_send_local, .notify = env_notify,
                               .submit_snapshot = env_submit_snapshot, .store = j->store,
                               .self_worker_id = w->id, .guarantee = d->guarantee};
    /* A restore from a savepoint reads its groups there (docs/savepoints.md). */
    if (d->restore_uri[0] && d->restore_checkpoint) {
        j->env.restore_store = eddy_snapshot_store_new(d->restore_uri, err);
        if (!j->env.restore_store) {
            eddy_snapshot_store_destroy(&j->store);
            eddy_graph_clear(&j->graph);
            free(j);
            return NULL;
        }
        snprintf(j->env.restore_job, sizeof j->env.restore_job, "%s",
                 d->restore_job[0] ? d->restore_job : d->job_id);
        j->env.restore_savepoint = d->restore_checkpoint;
    }
    const char *mode = getenv("EDDY_SNAPSHOT_MODE"); /* sync|keyed|async (runtime/task.h) */
    j->env.snapshot_async = !mode || strcmp(mode, "sync") != 0;
    j->env.snapshot_ops_sync = mode && strcmp(mode, "keyed") == 0;
    j->env.checkpoint_full_every = d->checkpoint_full_every;
    const char *hold = getenv("EDDY_TEST_FLUID_HOLD_MS"); /* a test hook (runtime/task.h) */
    j->env.fluid_hold_ms = hold ? (uint32_t)strtoul(hold, NULL, 10) : 0;
    const char *corrupt = getenv("EDDY_TEST_FLUID_CORRUPT");
    j->env.fluid_corrupt = corrupt && !strcmp(corrupt, "1");
    j->started_ns = eddy_mono_ns();
    return j;
}

/* The groups read units got (read ahead from storage, or taken from local
 * copies), handed to the job's store (moved out of the units). One that
 * cannot be handed over is read again, on the loop. */
static void preload_units(eddy_snapshot_unit_t *units, eddy_snapshot_store_t *store)
{
    for (eddy_snapshot_unit_t *u = units; u; u = u->next)
        for (uint32_t i = 0; i < u->n_groups; i++) {
            eddy_err_t err = {{0}};
            if (u->data[i] && eddy_snapshot_store_preload(store, u->job, u->checkpoint, u->op,
                                                          u->groups[i], u->data[i], u->lens[i],
                                                          &err) == 0)
                u->data[i] = NULL;
        }
}

/* The groups of stage s (of graph g) that this worker loads for a DEPLOY
 * restoring from a checkpoint, at most cap of them, into kgs: a keyed
 * stage's owned ranges (task_owned_range) minus what tasks j keeps hold,
 * and a source's event time (group = instance) when event time is on;
 * nothing for tasks restored as finished. j NULL: no task is kept. */
static uint32_t groups_to_load(const worker_t *w, const eddy_deploy_t *d,
                               const eddy_job_graph_t *g, wjob_t *j, uint32_t s, uint32_t *kgs,
                               size_t cap)
{
    const eddy_stage_def_t *def = &g->stages[s];
    bool keyed = eddy_stage_is_keyed(def);
    bool source_time = def->source && def->event_time.enabled;
    const eddy_stage_placement_t *pl = &d->stages[s];
    uint32_t n = 0;
    for (uint32_t k = 0; (keyed || source_time) && k < pl->parallelism; k++) {
        if (pl->worker_of[k] != w->id || restored_finished(d, s, k))
            continue;
        eddy_task_t *t = j ? placed_task(j, d, s, k) : NULL;
        if (keyed) {
            uint32_t p = pl->parallelism, as_p = pl->route_parallelism;
            eddy_kg_range_t r = !as_p || as_p >= p ? eddy_kg_range_for(k, p, g->max_parallelism)
                                : k >= as_p ? (eddy_kg_range_t){0, 0}
                                            : eddy_kg_range_for(k, as_p, g->max_parallelism);
            for (uint32_t kg = r.start; kg < r.end && n < cap; kg++)
                if (!t || !eddy_task_holds_group(t, kg))
                    kgs[n++] = kg;
        }
        const eddy_source_position_t *from = position_of(d, s, k);
        if (source_time && !t && from && from->position >= 0 && n < cap)
            kgs[n++] = k;
    }
    return n;
}

/* Whether a DEPLOY restores from the job's own checkpoint storage, where
 * local copies may serve it (a savepoint's groups are read where it is). */
static bool local_copies_serve(worker_t *w, const eddy_deploy_t *d)
{
    if (!w->local || !d->restore_checkpoint || d->restore_uri[0])
        return false;
    if (w->local_corrupt) /* the test hook: every copy fails its checksum */
        eddy_local_copies_corrupt(w->local, d->job_id);
    return true;
}

/* Stage s's groups kgs[0..*n) that have local copies for the DEPLOY's
 * checkpoint: chained onto *units (as read units), counted in stats; kgs
 * keeps the others. */
static void take_local(worker_t *w, const eddy_deploy_t *d, const char *op, uint32_t *kgs,
                       uint32_t *n, eddy_snapshot_unit_t **units,
                       eddy_local_restore_stats_t *stats)
{
    eddy_snapshot_unit_t *u =
        eddy_local_recovery_take(w->local, d->job_id, d->restore_checkpoint, op, kgs, n, stats);
    if (u) {
        u->next = *units;
        *units = u;
    }
}

/* A restore applied at once (a directory store): the groups with local
 * copies are preloaded into the job's store, the restore reads the rest. */
static void preload_local(worker_t *w, const eddy_deploy_t *d, wjob_t *j)
{
    if (!local_copies_serve(w, d))
        return;
    size_t cap = (size_t)j->graph.max_parallelism + EDDY_MAX_PARALLELISM;
    uint32_t *kgs = malloc(cap * sizeof *kgs);
    eddy_snapshot_unit_t *units = NULL;
    for (uint32_t s = 0; kgs && s < d->n_stages && s < j->graph.n_stages; s++) {
        uint32_t n = groups_to_load(w, d, &j->graph, j, s, kgs, cap);
        if (n)
            take_local(w, d, j->graph.stages[s].name, kgs, &n, &units, &w->restore_local);
    }
    free(kgs);
    preload_units(units, j->store);
    while (units) {
        eddy_snapshot_unit_t *u = units;
        units = u->next;
        eddy_snapshot_unit_free(u);
    }
}

static int apply_deploy(worker_t *w, const eddy_deploy_t *d, uint64_t *bytes, uint64_t *groups,
                        eddy_err_t *err)
{
    /* A DEPLOY is checked before it changes anything: a bad one leaves the
     * job as it was and is answered with the error. */
    wjob_t *j = find_job(w, d->job);
    /* A rescale keeps the tasks that took part in its migration snapshot
     * (their state is what the snapshot left out). A job here that did not
     * (its TRIGGER's epoch was not this job's: tasks left from before this
     * worker was declared dead, restored elsewhere meanwhile) is stale, and
     * is rebuilt like a fresh one: its tasks load from the snapshot. */
    if (j && d->mode == EDDY_DEPLOY_RESCALE && j->env.migration_checkpoint != d->restore_checkpoint) {
        eddy_warn("job %s: epoch %u here did not take part in the migration snapshot %llu of "
                  "epoch %u; dropping its tasks", d->job_id, j->epoch,
                  (unsigned long long)d->restore_checkpoint, d->epoch);
        j = NULL; /* replaced below */
    }
    if (j && d->mode == EDDY_DEPLOY_RESCALE) {
        /* Tasks that stay keep running the plan they were built from. */
        if (d->plan_fingerprint != j->plan_fingerprint)
            return eddy_err_set(err, "job %s runs plan %016llx here, the rescale carries plan %016llx",
                                d->job_id, (unsigned long long)j->plan_fingerprint,
                                (unsigned long long)d->plan_fingerprint);
        if (eddy_deploy_check(d, j->graph.n_stages, j->graph.max_parallelism, err) < 0)
            return -1;
    } else {
        wjob_t *fresh = new_job(w, d, err);
        if (!fresh)
            return -1;
        if ((j = find_job(w, d->job)))
            destroy_job(w, j);
        j = fresh;
        j->next = w->jobs;
        w->jobs = j;
    }
    /* checkpoint ids that never completed may be taken again now */
    if (w->local)
        eddy_local_copies_new_epoch(w->local, d->job_id);
    if (w->applying)
        preload_units(w->applying->done, j->store);
    else
        preload_local(w, d, j);
    forget_send_failures(w, d->job);
    for (uint32_t i = 0; i < d->n_workers; i++)
        if (d->workers[i].id != w->id &&
            eddy_peers_set(w->peers, d->workers[i].id, d->workers[i].endpoint, err) < 0)
            return -1;
    if (d->mode == EDDY_DEPLOY_RESCALE)
        apply_renames(w, j, d); /* a job rebuilt fresh has no tasks to renumber */
    j->epoch = d->epoch;
    eddy_placement_view_t view = {d->n_stages, d->stages};

    /* Drop tasks that are no longer placed here. */
    for (uint32_t i = 0; i < j->n_tasks;) {
        uint32_t s = eddy_task_stage(j->tasks[i]), k = eddy_task_instance(j->tasks[i]);
        if (k >= d->stages[s].parallelism || d->stages[s].worker_of[k] != w->id) {
            eddy_task_destroy(&j->tasks[i]);
            j->tasks[i] = j->tasks[--j->n_tasks];
        } else {
            i++;
        }
    }
    for (uint32_t s = 0; s < d->n_stages; s++) {
        for (uint32_t k = 0; k < d->stages[s].parallelism; k++) {
            if (d->stages[s].worker_of[k] != w->id)
                continue;
            eddy_task_t *t = find_task(j, s, k);
            if (t) {
                if (eddy_task_rewire(t, d->epoch, view, err) < 0)
                    return -1;
            } else {
                const eddy_source_position_t *from = position_of(d, s, k);
                eddy_task_config_t cfg = {
                    .job = d->job, .epoch = d->epoch, .job_id = d->job_id, .graph = &j->graph,
                    .stage = s, .instance = k, .placement = view,
                    .start_position = from ? from->position : -1,
                    .source_state = from ? from->state : NULL,
                    .source_state_len = from ? from->state_len : 0,
                    .restore_checkpoint = d->restore_checkpoint,
                    .start_time_s = (double)(eddy_mono_ns() - j->started_ns) / 1e9,
                    .start_finished = restored_finished(d, s, k)};
                if (cfg.start_finished)
                    eddy_info("job %s epoch %u: task %s[%u] was finished at checkpoint %llu: it "
                              "starts at its end and replays nothing", d->job_id, d->epoch,
                              j->graph.stages[s].name, k, (unsigned long long)d->restore_checkpoint);
                t = eddy_task_new(&j->env, &cfg, err);
                if (!t)
                    return -1;
                eddy_task_t **tasks = realloc(j->tasks, (j->n_tasks + 1) * sizeof *tasks);
                if (!tasks) {
                    eddy_task_destroy(&t);
                    return eddy_err_set(err, "out of memory");
                }
                j->tasks = tasks;
                j->tasks[j->n_tasks++] = t;
            }
            if (eddy_task_restore_groups(t, d->restore_checkpoint, bytes, groups, err) < 0)
                return -1;
            maybe_heartbeat(w);
        }
    }
    return 0;
}

/* ---- message handling -------------------------------------------------- */

/* Data that the protocol cannot produce (after the end of a channel, on a
 * channel the task does not have, for a task of the current epoch that does
 * not run here) means a peer is broken or hostile; dropping it silently
 * would wedge the job (a lost batch or barrier never comes back), so the
 * task is reported failed and the coordinator restores the job from its
 * last checkpoint. */
static void report_violation(worker_t *w, wjob_t *j, uint32_t stage, uint32_t instance,
                             const char *what)
{
    if (j->violation_reported && j->violation_epoch == j->epoch) {
        eddy_log_limited(&w->violation_log, EDDY_LOG_WARN,
                         "job %s epoch %u: another protocol violation dropped (%s)", j->job_id,
                         j->epoch, what);
        return;
    }
    j->violation_reported = true;
    j->violation_epoch = j->epoch;
    eddy_error("job %s epoch %u: task %u[%u]: %s; reporting it failed", j->job_id, j->epoch,
               stage, instance, what);
    eddy_msg_t f = {.type = EDDY_MSG_TASK_FAILED};
    f.u.task_failed.job = j->num;
    f.u.task_failed.epoch = j->epoch;
    f.u.task_failed.stage = stage;
    f.u.task_failed.instance = instance;
    snprintf(f.u.task_failed.error, sizeof f.u.task_failed.error, "%s", what);
    send_ctrl(w, &f);
}

/* A fluid migration step: every task here that sends to the stage by key
 * group routes the step's groups to their new owner, behind a HANDOFF
 * (runtime/task_migrate.c). A task that refuses it is reported failed: the
 * job restores from its last checkpoint and the migration is abandoned. */
static void on_route_step(worker_t *w, const eddy_msg_t *m)
{
    wjob_t *j = find_job(w, m->u.route_step.job);
    if (!j || j->epoch != m->u.route_step.epoch)
        return;
    for (uint32_t i = 0; i < j->n_tasks; i++) {
        eddy_task_t *t = j->tasks[i];
        if (eddy_task_finished(t) || !eddy_task_routes_to(t, m->u.route_step.stage))
            continue;
        eddy_err_t err = {{0}};
        if (eddy_task_route_step(t, m->u.route_step.stage, m->u.route_step.version,
                                 m->u.route_step.kgs, m->u.route_step.n_kgs, m->u.route_step.to,
                                 &err) < 0)
            report_violation(w, j, eddy_task_stage(t), eddy_task_instance(t), err.msg);
    }
}

/* Delivers one data-plane message. True when it was a moved key group's
 * state (installed now, which takes milliseconds): the inbox burst then
 * ends, so the tasks run before the next group is loaded. */
static bool dispatch_data(worker_t *w, char *heap, size_t len, zmq_msg_t *zmsg)
{
    /* Small ZeroMQ messages keep their bytes inside the zmq_msg_t itself, so
     * the decoded records would point into memory that moves with it: copy
     * those to the heap before decoding. Large ones own a stable buffer. */
    if (zmsg && zmq_msg_size(zmsg) < 1024) {
        len = zmq_msg_size(zmsg);
        heap = malloc(len ? len : 1);
        if (!heap) {
            zmq_msg_close(zmsg);
            return false;
        }
        memcpy(heap, zmq_msg_data(zmsg), len);
        zmq_msg_close(zmsg);
        zmsg = NULL;
    }
    const void *data = zmsg ? zmq_msg_data(zmsg) : heap;
    if (zmsg)
        len = zmq_msg_size(zmsg);
    eddy_data_msg_t msg;
    eddy_err_t err;
    if (eddy_data_decode(data, len, &msg, &err) < 0) {
        /* No channel to blame: a well-behaved peer never sends this. */
        eddy_log_limited(&w->undecodable_data_log, EDDY_LOG_WARN,
                         "dropping data-plane message: %s", err.msg);
        goto drop;
    }
    wjob_t *j = find_job(w, msg.channel.job);
    if (!j || msg.channel.epoch != j->epoch) {
        eddy_data_msg_close(&msg);
        goto drop; /* stale: from before a rescale or restore, or a released job */
    }
    if (msg.type == EDDY_DATA_CREDIT) {
        eddy_task_t *t = find_task(j, msg.channel.src_stage, msg.channel.src_instance);
        if (t)
            eddy_task_credit(t, &msg.channel, msg.credit);
        eddy_data_msg_close(&msg);
        goto drop;
    }
    eddy_task_t *t = find_task(j, msg.channel.dst_stage, msg.channel.dst_instance);
    if (!t) {
        char what[160];
        snprintf(what, sizeof what,
                 "protocol violation: data for %u[%u], which does not run on this worker",
                 msg.channel.dst_stage, msg.channel.dst_instance);
        report_violation(w, j, msg.channel.dst_stage, msg.channel.dst_instance, what);
        eddy_data_msg_close(&msg);
        goto drop;
    }
    bool state = msg.type == EDDY_DATA_STATE_CHUNK;
    if (eddy_task_deliver(t, &msg, zmsg, zmsg ? NULL : heap, &err) < 0)
        report_violation(w, j, eddy_task_stage(t), eddy_task_instance(t), err.msg);
    return state;
drop:
    if (zmsg)
        zmq_msg_close(zmsg);
    else
        free(heap);
    return false;
}

static void send_register(worker_t *w)
{
    w->last_register_ms = eddy_mono_ms();
    eddy_msg_t reg = {.type = EDDY_MSG_REGISTER};
    snprintf(reg.u.reg.name, sizeof reg.u.reg.name, "%s", w->opts->name);
    snprintf(reg.u.reg.data_endpoint, sizeof reg.u.reg.data_endpoint, "%s", w->endpoint);
    reg.u.reg.pid = getpid();
    reg.u.reg.protocol_version = EDDY_PROTOCOL_VERSION;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    reg.u.reg.cores = cores > 0 ? (uint32_t)cores : 0;
    gethostname(reg.u.reg.host, sizeof reg.u.reg.host - 1);
    send_ctrl(w, &reg);
}

static uint64_t coordinator_silence_ms(const worker_t *w);

/* How long a candidate that says nothing at all is waited for while seeking. */
#define SEEK_ANSWER_MS 1000u

static bool is_suspect(const worker_t *w, int i, uint64_t now)
{
    return i == w->suspect && now < w->suspect_until_ms;
}

/* Moves the control DEALER to endpoint (NULL or unknown: the next listed
 * coordinator that did not just go silent) and registers there; the worker
 * seeks the leader until one answers as such. */
static void switch_coordinator(worker_t *w, const char *endpoint, const char *why)
{
    uint64_t now = eddy_mono_ms();
    if (!strcmp(why, "silent")) {
        w->suspect = w->cur;
        w->suspect_until_ms = now + coordinator_silence_ms(w);
    }
    int next = -1;
    for (int i = 0; endpoint && endpoint[0] && i < w->n_coords; i++)
        if (!strcmp(w->coords[i], endpoint))
            next = i;
    for (int k = 1; next < 0 && k <= w->n_coords; k++) {
        int i = (w->cur + k) % w->n_coords;
        if (!is_suspect(w, i, now) || k == w->n_coords)
            next = i;
    }
    /* the coordinator left must stop hearing this process: no liveness
     * until a registration here gives a new token */
    w->liveness_token = 0;
    eddy_liveness_target(w->liveness, NULL, w->id, 0, w->heartbeat_ms);
    if (next != w->cur) {
        eddy_info("coordinator %s: %s; trying %s", w->coords[w->cur], why, w->coords[next]);
        zmq_disconnect(w->ctrl, w->coords[w->cur]);
        w->cur = next;
        zmq_connect(w->ctrl, w->coords[w->cur]);
    }
    w->last_ctrl_ms = now;
    if (!w->seeking)
        w->seek_backoff_ms = EDDY_LEADER_SEEK_MIN_MS;
    w->seeking = true;
    w->seek_answered = false;
    w->seek_next_ms = now + SEEK_ANSWER_MS;
    send_register(w);
}

/* A coordinator answered "not the leader". Named leader that is believable:
 * go there at once. Otherwise (no leader elected yet, or it names the one
 * that just went silent: an election is under way) ask the candidates
 * again soon, with a short doubling backoff, so that a worker is back
 * within moments of the election instead of waiting on a dead one. */
static void on_not_leader(worker_t *w, const char *leader)
{
    uint64_t now = eddy_mono_ms();
    int named = -1;
    for (int i = 0; leader[0] && i < w->n_coords; i++)
        if (!strcmp(w->coords[i], leader))
            named = i;
    if (leader[0] && named < 0) { /* not in our list: try it anyway as before */
        switch_coordinator(w, leader, "not the leader");
        return;
    }
    if (named >= 0 && named != w->cur && !is_suspect(w, named, now)) {
        switch_coordinator(w, leader, "not the leader");
        return;
    }
    if (w->seeking && w->seek_answered)
        return; /* a retry is scheduled already (heartbeats get answers too) */
    if (!w->seeking)
        w->seek_backoff_ms = EDDY_LEADER_SEEK_MIN_MS;
    w->seek_answered = true;
    if (!w->seeking || w->seek_backoff_ms == EDDY_LEADER_SEEK_MIN_MS)
        eddy_info("coordinator %s: not the leader (%s); asking the candidates again every %u..%u ms",
                  w->coords[w->cur], named >= 0 ? "it names the one that went silent" : "no leader elected yet",
                  EDDY_LEADER_SEEK_MIN_MS, EDDY_LEADER_SEEK_MAX_MS);
    w->seeking = true;
    w->seek_next_ms = now + w->seek_backoff_ms;
    w->seek_backoff_ms = w->seek_backoff_ms * 2 > EDDY_LEADER_SEEK_MAX_MS ? EDDY_LEADER_SEEK_MAX_MS
                                                                        : w->seek_backoff_ms * 2;
}

/* Seeking: the time to ask again came; the next candidate that did not go
 * silent (with one standby that is the same one: it will lead soon). */
static void seek_tick(worker_t *w)
{
    uint64_t now = eddy_mono_ms();
    if (!w->seeking || now < w->seek_next_ms)
        return;
    uint32_t backoff = w->seek_backoff_ms;
    if (!w->seek_answered) {
        /* no word within SEEK_ANSWER_MS: as silent as a dead leader (a
         * standby naming it is not followed there again for a while) */
        w->suspect = w->cur;
        w->suspect_until_ms = now + coordinator_silence_ms(w);
    }
    switch_coordinator(w, NULL, w->seek_answered ? "seeking the leader" : "no answer");
    w->seek_backoff_ms = backoff;
}

/* A coordinator answered as leader: seeking is over. */
static void found_leader(worker_t *w)
{
    w->seeking = false;
    w->suspect = -1;
    w->seek_backoff_ms = EDDY_LEADER_SEEK_MIN_MS;
}

/* A command from a lower leader epoch than one already seen comes from a
 * deposed coordinator: ignored. Returns true when m may be acted on. */
static bool accept_epoch(worker_t *w, const eddy_msg_t *m)
{
    /* a standby's pointer to the leader is no command (a standby has no epoch) */
    if (m->type == EDDY_MSG_REGISTERED && m->u.registered.not_leader)
        return true;
    if (m->leader_epoch < w->leader_epoch) {
        eddy_log_limited(&w->fenced_log, EDDY_LOG_WARN,
                         "ignoring %s of leader epoch %llu: leader epoch %llu is newer",
                         eddy_msg_type_name(m->type), (unsigned long long)m->leader_epoch,
                         (unsigned long long)w->leader_epoch);
        return false;
    }
    if (m->leader_epoch > w->leader_epoch && w->leader_epoch)
        eddy_info("following leader epoch %llu (was %llu)", (unsigned long long)m->leader_epoch,
                  (unsigned long long)w->leader_epoch);
    w->leader_epoch = m->leader_epoch;
    return true;
}

/* ---- restores read ahead --------------------------------------------- */

static void handle_ctrl(worker_t *w, const eddy_msg_t *m);

static void free_restore(pending_restore_t *pr)
{
    while (pr->done) {
        eddy_snapshot_unit_t *u = pr->done;
        pr->done = u->next;
        eddy_snapshot_unit_free(u);
    }
    free(pr->encoded);
    free(pr);
}

/* A newer DEPLOY or a RELEASE of job: a read-ahead under way for it is not
 * applied any more. */
static void supersede_restores(worker_t *w, uint32_t job)
{
    for (pending_restore_t *pr = w->restores; pr; pr = pr->next)
        if (pr->job == job && pr->encoded) {
            eddy_info("job %s: the restore of epoch %u read ahead is superseded", pr->job_id,
                      pr->epoch);
            free(pr->encoded);
            pr->encoded = NULL;
        }
}

/* One read unit of stage s's groups (n of them, taken) for pr. */
static int submit_read(worker_t *w, pending_restore_t *pr, const eddy_deploy_t *d,
                       const char *root, const char *op, const uint32_t *kgs, uint32_t n)
{
    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(n);
    if (!u)
        return -1;
    u->read = true;
    u->owner = pr;
    snprintf(u->root, sizeof u->root, "%s", root);
    snprintf(u->job, sizeof u->job, "%s", d->job_id);
    snprintf(u->op, sizeof u->op, "%s", op);
    u->checkpoint = d->restore_checkpoint;
    memcpy(u->groups, kgs, n * sizeof *kgs);
    u->n_groups = n;
    eddy_snapshot_writer_submit(w->snapshots, u);
    pr->units_out++;
    pr->groups += n;
    return 0;
}

/* A DEPLOY that restores from a remote store: its groups are read on the
 * snapshot writer thread first (see pending_restore_t); true when it was
 * deferred for that. Anything unexpected (a plan that does not build, no
 * memory) leaves it to apply_deploy, which reads on the loop or fails. */
static bool defer_for_restore(worker_t *w, const eddy_msg_t *m)
{
    const eddy_deploy_t *d = &m->u.deploy;
    const char *root = storage_of(w, d);
    /* a savepoint's groups are read where it is, on the loop */
    if (w->applying || !d->restore_checkpoint || !eddy_snapshot_store_root_is_remote(root) ||
        d->restore_uri[0])
        return false;
    /* The graph: the running one if this is a rescale that keeps its tasks
     * (apply_deploy's test), else the DEPLOY's plan. */
    wjob_t *j = find_job(w, d->job);
    bool keep = j && d->mode == EDDY_DEPLOY_RESCALE &&
                j->env.migration_checkpoint == d->restore_checkpoint &&
                d->plan_fingerprint == j->plan_fingerprint;
    eddy_job_graph_t *own = NULL;
    const eddy_job_graph_t *g = keep ? &j->graph : NULL;
    eddy_err_t err = {{0}};
    if (!g) {
        own = calloc(1, sizeof *own);
        if (!own || eddy_job_build_from_plan(own, d->plan, d->plan_len, d->plan_fingerprint,
                                             &err) < 0) {
            free(own);
            return false;
        }
        g = own;
    }
    pending_restore_t *pr = NULL;
    /* one stage's groups: its owned ranges are disjoint (at most
     * max_parallelism), plus one source-time group per instance */
    size_t cap = (size_t)g->max_parallelism + EDDY_MAX_PARALLELISM;
    uint32_t *kgs = NULL;
    bool deferred = false;
    if (d->n_stages != g->n_stages || !(pr = calloc(1, sizeof *pr)) ||
        !(pr->encoded = eddy_msg_encode(m, &pr->len)) ||
        !(kgs = malloc(cap * sizeof *kgs)))
        goto out;
    pr->job = d->job;
    pr->epoch = d->epoch;
    pr->checkpoint = d->restore_checkpoint;
    snprintf(pr->job_id, sizeof pr->job_id, "%s", d->job_id);
    bool local = local_copies_serve(w, d);
    for (uint32_t s = 0; s < d->n_stages; s++) {
        uint32_t n = groups_to_load(w, d, g, keep ? j : NULL, s, kgs, cap);
        if (n && local)
            take_local(w, d, g->stages[s].name, kgs, &n, &pr->done, &pr->local);
        if (n && submit_read(w, pr, d, root, g->stages[s].name, kgs, n) < 0)
            break; /* the rest is read on the loop */
    }
    if (pr->units_out || pr->done) {
        pr->started_ns = eddy_mono_ns();
        pr->next = w->restores;
        w->restores = pr;
        eddy_info("job %s epoch %u: reading %u key groups of checkpoint %llu ahead, off the loop "
                  "(%llu from local copies)", d->job_id, d->epoch, pr->groups,
                  (unsigned long long)d->restore_checkpoint,
                  (unsigned long long)pr->local.groups);
        pr = NULL;
        deferred = true;
    }
out:
    if (pr)
        free_restore(pr);
    free(kgs);
    if (own) {
        eddy_graph_clear(own);
        free(own);
    }
    return deferred;
}

/* A read unit back from the writer thread. */
static void restore_unit_back(worker_t *w, eddy_snapshot_unit_t *u)
{
    for (pending_restore_t *pr = w->restores; pr; pr = pr->next)
        if (pr == u->owner) {
            u->next = pr->done;
            pr->done = u;
            pr->units_out--;
            return;
        }
    eddy_snapshot_unit_free(u);
}

/* DEPLOYs whose groups have all been read: applied now (or dropped when
 * superseded). */
static void apply_read_ahead(worker_t *w)
{
    for (pending_restore_t **pp = &w->restores; *pp;) {
        pending_restore_t *pr = *pp;
        if (pr->units_out) {
            pp = &pr->next;
            continue;
        }
        *pp = pr->next;
        uint32_t got = 0, missed = 0;
        char why[EDDY_ERROR_MAX] = "";
        for (eddy_snapshot_unit_t *u = pr->done; u; u = u->next) {
            for (uint32_t i = 0; i < u->n_groups; i++)
                u->data[i] ? got++ : missed++;
            if (u->error[0] && !why[0])
                snprintf(why, sizeof why, "%s", u->error);
        }
        eddy_msg_t deploy;
        eddy_err_t derr;
        if (pr->encoded && eddy_msg_decode(pr->encoded, pr->len, &deploy, &derr) == 0) {
            eddy_info("job %s epoch %u: read %u key groups of checkpoint %llu ahead in %.1f ms%s%.300s",
                      pr->job_id, pr->epoch, got, (unsigned long long)pr->checkpoint,
                      (double)(eddy_mono_ns() - pr->started_ns) / 1e6,
                      missed ? "; reading the others on the loop: " : "", missed ? why : "");
            w->applying = pr;
            handle_ctrl(w, &deploy);
            w->applying = NULL;
            eddy_msg_clear(&deploy);
        }
        free_restore(pr);
    }
}

/* ---- plugins ------------------------------------------------------------ */

static void handle_ctrl(worker_t *w, const eddy_msg_t *m);

/* A DEPLOY whose plan needs a plugin this worker has not loaded waits for
 * it: from the local cache if a former run fetched it, else fetched from
 * the coordinator (PLUGIN); true when the DEPLOY was deferred. */
static bool defer_for_plugins(worker_t *w, const eddy_msg_t *m)
{
    const eddy_deploy_t *d = &m->u.deploy;
    eddy_registry_t *r = eddy_registry_default();
    for (uint32_t i = 0; i < d->n_plugins; i++) {
        const char *hash = d->plugins[i];
        if (eddy_plugin_loaded(r, hash))
            continue;
        eddy_err_t err = {{0}};
        int cached = eddy_plugin_dir_load(w->plugins, hash, r, &err);
        if (cached == 1)
            continue;
        if (cached < 0) /* refused (a mismatching file is removed): fetch it */
            eddy_warn("cached plugin: %s", err.msg);
        deferred_deploy_t *dd = calloc(1, sizeof *dd);
        if (!dd || !(dd->encoded = eddy_msg_encode(m, &dd->len))) {
            free(dd);
            return false; /* the DEPLOY then fails naming the missing kind */
        }
        snprintf(dd->hash, sizeof dd->hash, "%s", hash);
        bool asked = false;
        for (deferred_deploy_t *o = w->deferred; o; o = o->next)
            asked |= !strcmp(o->hash, hash);
        dd->next = w->deferred;
        w->deferred = dd;
        if (!asked) {
            eddy_msg_t fetch = {.type = EDDY_MSG_PLUGIN};
            snprintf(fetch.u.plugin.hash, sizeof fetch.u.plugin.hash, "%s", hash);
            send_ctrl(w, &fetch);
            eddy_info("job %s needs plugin %s: fetching it from the coordinator", d->job_id, hash);
        }
        return true;
    }
    return false;
}

/* The coordinator's answer to a fetch: load it (or fail the DEPLOYs that
 * waited for it, with the reason), then handle those DEPLOYs. */
static void on_plugin(worker_t *w, const eddy_msg_t *m)
{
    eddy_err_t err = {{0}};
    int rc = -1;
    if (m->u.plugin.error[0])
        eddy_err_set(&err, "%s", m->u.plugin.error);
    else
        rc = eddy_plugin_dir_load_bytes(w->plugins, m->u.plugin.data, m->u.plugin.len,
                                        m->u.plugin.hash, eddy_registry_default(), NULL, &err);
    if (rc == 0)
        eddy_info("plugin %s loaded (%u bytes)", m->u.plugin.hash, m->u.plugin.len);
    else
        eddy_error("plugin %s: %s", m->u.plugin.hash, err.msg);
    deferred_deploy_t *waiting = NULL;
    for (deferred_deploy_t **pp = &w->deferred; *pp;) {
        deferred_deploy_t *dd = *pp;
        if (strcmp(dd->hash, m->u.plugin.hash)) {
            pp = &dd->next;
            continue;
        }
        *pp = dd->next;
        dd->next = waiting;
        waiting = dd;
    }
    while (waiting) {
        deferred_deploy_t *dd = waiting;
        waiting = dd->next;
        eddy_msg_t deploy;
        eddy_err_t derr;
        if (eddy_msg_decode(dd->encoded, dd->len, &deploy, &derr) == 0) {
            if (rc == 0) {
                handle_ctrl(w, &deploy);
            } else {
                eddy_msg_t reply = {.type = EDDY_MSG_DEPLOYED};
                reply.u.deployed.job = deploy.u.deploy.job;
                reply.u.deployed.epoch = deploy.u.deploy.epoch;
                snprintf(reply.u.deployed.error, sizeof reply.u.deployed.error,
                         "cannot load plugin %s: %.400s", m->u.plugin.hash, err.msg);
                send_ctrl(w, &reply);
            }
            eddy_msg_clear(&deploy);
        }
        free(dd->encoded);
        free(dd);
    }
}

/* A registration's (or a heartbeat answer's) token: the liveness thread
 * speaks for this registration to the coordinator followed now. */
static void follow_liveness(worker_t *w, uint64_t token)
{
    if (token == w->liveness_token)
        return;
    w->liveness_token = token;
    eddy_liveness_target(w->liveness, w->coords[w->cur], w->id, token, w->heartbeat_ms);
}

static void handle_ctrl(worker_t *w, const eddy_msg_t *m)
{
    switch (m->type) {
    case EDDY_MSG_REGISTERED:
        if (!m->u.registered.not_leader && !m->u.registered.fatal)
            found_leader(w);
        if (m->u.registered.fatal) {
            snprintf(w->fatal, sizeof w->fatal, "coordinator refused registration: %s",
                     m->u.registered.error);
        } else if (m->u.registered.not_leader) {
            if (w->n_coords > 1 || m->u.registered.leader[0])
                on_not_leader(w, m->u.registered.leader);
        } else if (m->u.registered.error[0]) {
            /* The coordinator restarted (or declared us dead): join it again,
             * at most every 200 ms (one answer per queued heartbeat may come). */
            uint64_t now = eddy_mono_ms();
            if (now - w->last_register_ms >= 200) {
                eddy_warn("coordinator: %s; registering again", m->u.registered.error);
                send_register(w);
            }
        } else {
            if (m->u.registered.worker_id != w->id) {
                eddy_info("registered again as worker %u", m->u.registered.worker_id);
                w->id = m->u.registered.worker_id;
                for (wjob_t *j = w->jobs; j; j = j->next)
                    j->env.self_worker_id = w->id;
            }
            follow_liveness(w, m->u.registered.liveness_token);
        }
        break;
    case EDDY_MSG_DEPLOY: {
        if (!w->applying)
            supersede_restores(w, m->u.deploy.job);
        if (defer_for_plugins(w, m) || defer_for_restore(w, m))
            break;
        if (w->applying)
            w->restore_local = w->applying->local;
        else
            memset(&w->restore_local, 0, sizeof w->restore_local);
        eddy_msg_t reply = {.type = EDDY_MSG_DEPLOYED};
        reply.u.deployed.job = m->u.deploy.job;
        reply.u.deployed.epoch = m->u.deploy.epoch;
        eddy_err_t err = {{0}};
        uint64_t t0 = eddy_mono_ns();
        if (apply_deploy(w, &m->u.deploy, &reply.u.deployed.bytes_loaded,
                         &reply.u.deployed.groups_loaded, &err) < 0) {
            eddy_error("deploy of job %s epoch %u failed: %s", m->u.deploy.job_id,
                       m->u.deploy.epoch, err.msg);
            wjob_t *j = find_job(w, m->u.deploy.job);
            if (j)
                eddy_snapshot_store_preload_clear(j->store);
            snprintf(reply.u.deployed.error, sizeof reply.u.deployed.error, "%s", err.msg);
        } else {
            wjob_t *j = find_job(w, m->u.deploy.job);
            if (j)
                eddy_snapshot_store_preload_clear(j->store); /* what no task read */
            const eddy_local_restore_stats_t *lr = &w->restore_local;
            uint64_t gs = reply.u.deployed.groups_loaded, bs = reply.u.deployed.bytes_loaded;
            char from[160] = "";
            if (gs)
                snprintf(from, sizeof from, ": %llu groups (%llu bytes) from local copies, %llu "
                         "(%llu bytes) from checkpoint storage", (unsigned long long)lr->groups,
                         (unsigned long long)lr->bytes,
                         (unsigned long long)(gs > lr->groups ? gs - lr->groups : 0),
                         (unsigned long long)(bs > lr->bytes ? bs - lr->bytes : 0));
            eddy_info("job %s epoch %u: %u tasks here, loaded %llu key groups (%llu bytes) in "
                      "%.1f ms%s [leader epoch %llu]",
                      m->u.deploy.job_id, m->u.deploy.epoch, j ? j->n_tasks : 0,
                      (unsigned long long)gs, (unsigned long long)bs,
                      (double)(eddy_mono_ns() - t0) / 1e6, from,
                      (unsigned long long)m->leader_epoch);
            if (lr->corrupt)
                eddy_warn("job %s epoch %u: %llu local copies were not used (%s); read from "
                          "checkpoint storage instead", m->u.deploy.job_id, m->u.deploy.epoch,
                          (unsigned long long)lr->corrupt, lr->why);
            reply.u.deployed.groups_local = lr->groups;
            reply.u.deployed.bytes_local = lr->bytes;
        }
        send_ctrl(w, &reply);
        break;
    }
    case EDDY_MSG_PLUGIN:
        on_plugin(w, m);
        break;
    case EDDY_MSG_START: {
        wjob_t *j = find_job(w, m->u.start.job);
        if (j && j->epoch == m->u.start.epoch) {
            for (uint32_t i = 0; i < j->n_tasks; i++)
                eddy_task_set_running(j->tasks[i], true);
            uint64_t soon = eddy_mono_ms() + WORKER_START_HEARTBEAT_MS;
            if (soon < w->next_heartbeat_ms)
                w->next_heartbeat_ms = soon;
            w->start_heartbeats = WORKER_START_HEARTBEATS;
        }
        break;
    }
    case EDDY_MSG_TRIGGER: {
        wjob_t *j = find_job(w, m->u.trigger.job);
        if (j && j->epoch == m->u.trigger.epoch && m->u.trigger.migrate_stage != EDDY_NO_STAGE) {
            j->env.migration_checkpoint = m->u.trigger.checkpoint;
            j->env.migrate_stage = m->u.trigger.migrate_stage;
            j->env.migrate_parallelism = m->u.trigger.migrate_parallelism;
            free(j->env.migrate_moving);
            j->env.migrate_moving = NULL;
            j->env.n_migrate_moving = 0;
            size_t bytes = m->u.trigger.n_moving * sizeof *j->env.migrate_moving;
            if (bytes && (j->env.migrate_moving = malloc(bytes))) {
                memcpy(j->env.migrate_moving, m->u.trigger.moving, bytes);
                j->env.n_migrate_moving = m->u.trigger.n_moving;
            }
        }
        if (j && j->epoch == m->u.trigger.epoch && m->u.trigger.savepoint_uri[0]) {
            j->env.savepoint_checkpoint = m->u.trigger.checkpoint;
            snprintf(j->env.savepoint_root, sizeof j->env.savepoint_root, "%s",
                     m->u.trigger.savepoint_uri);
        }
        if (j && j->epoch == m->u.trigger.epoch)
            for (uint32_t i = 0; i < j->n_tasks; i++)
                eddy_task_trigger(j->tasks[i], m->u.trigger.checkpoint, m->u.trigger.pause_after);
        break;
    }
    case EDDY_MSG_ROUTE_STEP:
        on_route_step(w, m);
        break;
    case EDDY_MSG_COMPLETE: {
        /* Two-phase-commit operators publish what they prepared up to this
         * checkpoint. Finished tasks stay until RELEASE, so they get it too. */
        wjob_t *j = find_job(w, m->u.complete.job);
        if (!j)
            break;
        if (w->local && m->u.complete.checkpoint != EDDY_FINAL_CHECKPOINT)
            eddy_local_copies_complete(w->local, j->job_id, m->u.complete.checkpoint);
        if (w->stall_ms && m->u.complete.checkpoint != EDDY_FINAL_CHECKPOINT)
            w->stall_armed = true;
        for (uint32_t i = 0; i < j->n_tasks; i++) {
            /* The commits' directory fsyncs run off the loop. */
            eddy_sync_list_t *sync = eddy_sync_list_new();
            eddy_task_commit(j->tasks[i], m->u.complete.checkpoint, sync);
            if (m->u.complete.checkpoint != EDDY_FINAL_CHECKPOINT) {
                submit_sync(w, &sync, &(eddy_msg_t){0});
                continue;
            }
            /* The job's final commit: the coordinator waits for one ACK per
             * task before it declares the job finished and releases it, so
             * the ACK follows the published names' fsync. */
            eddy_msg_t ack = {.type = EDDY_MSG_ACK};
            ack.u.ack.job = j->num;
            ack.u.ack.epoch = j->epoch;
            ack.u.ack.checkpoint = EDDY_FINAL_CHECKPOINT;
            ack.u.ack.stage = eddy_task_stage(j->tasks[i]);
            ack.u.ack.instance = eddy_task_instance(j->tasks[i]);
            ack.u.ack.position = -1;
            submit_sync(w, &sync, &ack);
        }
        break;
    }
    case EDDY_MSG_RELEASE: {
        supersede_restores(w, m->u.release.job);
        wjob_t *j = find_job(w, m->u.release.job);
        if (!j) {
            send_heartbeat(w); /* the acknowledgement (below) */
            break;
        }
        uint32_t reason = m->u.release.reason;
        eddy_info("job %s released (%s) [leader epoch %llu]", j->job_id,
                  eddy_release_reason_name(reason), (unsigned long long)m->leader_epoch);
        /* No attempt follows a cancel or a failure: transactional sinks
         * roll back what they prepared, here, before the tasks close. */
        if (reason == EDDY_RELEASE_CANCELLED || reason == EDDY_RELEASE_FAILED)
            for (uint32_t i = 0; i < j->n_tasks; i++)
                eddy_task_abort(j->tasks[i]);
        /* the job ended: nothing will restore from its copies */
        if (w->local && reason != EDDY_RELEASE_RESTORE)
            eddy_local_copies_drop_job(w->local, j->job_id);
        destroy_job(w, j);
        /* The acknowledgement: a heartbeat without the job's tasks. eddy
         * local waits for it before it stops the workers. */
        send_heartbeat(w);
        break;
    }
    default:
        eddy_warn("unexpected %s message from the coordinator", eddy_msg_type_name(m->type));
    }
}

static void send_heartbeat(worker_t *w)
{
    uint32_t n = 0;
    for (wjob_t *j = w->jobs; j; j = j->next)
        n += j->n_tasks;
    eddy_task_metrics_t *tasks = calloc(n ? n : 1, sizeof *tasks);
    if (!tasks)
        return;
    uint32_t k = 0;
    for (wjob_t *j = w->jobs; j; j = j->next)
        for (uint32_t i = 0; i < j->n_tasks; i++) {
            eddy_task_roll_key_loads(j->tasks[i], eddy_mono_ns());
            eddy_task_metrics(j->tasks[i], &tasks[k++]);
        }
    eddy_msg_t hb = {.type = EDDY_MSG_HEARTBEAT};
    hb.u.heartbeat.worker_id = w->id;
    hb.u.heartbeat.n_tasks = n;
    hb.u.heartbeat.tasks = tasks;
    send_ctrl(w, &hb);
    free(tasks);
}

/* 1 and *m filled, 0 when nothing is waiting, -1 (err) when the next
 * message was malformed or undecodable (it is consumed). Never blocks. */
static int recv_ctrl(worker_t *w, eddy_msg_t *m, eddy_err_t *err)
{
    zmq_msg_t z;
    eddy_zrecv_result_t got =
        eddy_zrecv(w->ctrl, &z, EDDY_ZRECV_FRAMES_PLAIN, EDDY_ZRECV_MAX_CONTROL, err);
    if (got != EDDY_ZRECV_OK)
        return got == EDDY_ZRECV_NONE ? 0 : -1;
    int rc = eddy_msg_decode(zmq_msg_data(&z), zmq_msg_size(&z), m, err);
    zmq_msg_close(&z);
    return rc < 0 ? -1 : 1;
}

/* How long a coordinator may say nothing (it answers every heartbeat)
 * before the worker looks for the leader elsewhere (net/proto.h). */
static uint64_t coordinator_silence_ms(const worker_t *w)
{
    return eddy_coordinator_silence_ms(w->heartbeat_ms);
}

static void follow_liveness(worker_t *w, uint64_t token);

static int register_with_coordinator(worker_t *w, eddy_err_t *err)
{
    uint64_t deadline = eddy_mono_ms() + w->opts->register_timeout_ms;
    uint64_t next_send = 0;
    bool said_retry = false, answered = false;
    while (eddy_mono_ms() < deadline) {
        if (eddy_mono_ms() >= next_send) {
            if (w->seeking)
                seek_tick(w); /* asks the next candidate (also registers) */
            else if (next_send && w->n_coords > 1 && !answered)
                switch_coordinator(w, NULL, "no answer"); /* also registers */
            else
                send_register(w);
            next_send = w->seeking ? w->seek_next_ms : eddy_mono_ms() + 1000;
            answered = false;
        }
        zmq_pollitem_t item = {w->ctrl, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 100) < 0 && errno == EINTR)
            return eddy_err_set(err, "interrupted while registering");
        eddy_msg_t m;
        eddy_err_t derr;
        int rc = recv_ctrl(w, &m, &derr);
        if (rc < 0)
            return eddy_err_set(err, "bad reply from coordinator %s: %s", w->coords[w->cur], derr.msg);
        if (rc == 0)
            continue;
        if (m.type != EDDY_MSG_REGISTERED || !accept_epoch(w, &m)) {
            eddy_msg_clear(&m);
            continue;
        }
        if (m.u.registered.not_leader) {
            /* a standby: go to the leader it names (or the next one) */
            if (w->n_coords > 1 || m.u.registered.leader[0]) {
                on_not_leader(w, m.u.registered.leader);
                next_send = w->seeking ? w->seek_next_ms : eddy_mono_ms() + 1000;
            }
            eddy_msg_clear(&m);
            continue;
        }
        answered = true;
        found_leader(w);
        if (m.u.registered.error[0] && !m.u.registered.fatal) {
            /* e.g. the worker this one replaces is not declared dead yet */
            if (!said_retry)
                eddy_warn("coordinator: %s; retrying", m.u.registered.error);
            said_retry = true;
            eddy_msg_clear(&m);
            continue;
        }
        if (m.u.registered.error[0]) {
            eddy_err_set(err, "coordinator refused registration: %s", m.u.registered.error);
            eddy_msg_clear(&m);
            return -1;
        }
        w->id = m.u.registered.worker_id;
        w->heartbeat_ms = m.u.registered.heartbeat_ms ? m.u.registered.heartbeat_ms : 500;
        follow_liveness(w, m.u.registered.liveness_token);
        eddy_msg_clear(&m);
        return 0;
    }
    return eddy_err_set(err, "cannot reach %s at %s (no reply within %u ms)",
                        w->n_coords > 1 ? "a leading coordinator" : "coordinator",
                        w->opts->coordinator, w->opts->register_timeout_ms);
}

static int setup_sockets(worker_t *w, eddy_err_t *err)
{
    w->zctx = zmq_ctx_new();
    /* One PUSH socket per peer: ZeroMQ's default cap (1023 sockets) would
     * fail a DEPLOY on a larger cluster. */
    if (w->zctx)
        zmq_ctx_set(w->zctx, ZMQ_MAX_SOCKETS, EDDY_MAX_WORKERS + 16);
    w->ctrl = zmq_socket(w->zctx, ZMQ_DEALER);
    w->inbox = zmq_socket(w->zctx, ZMQ_PULL);
    int zero = 0, linger = 0;
    zmq_setsockopt(w->inbox, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(w->ctrl, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(w->inbox, ZMQ_LINGER, &linger, sizeof linger);
    if (eddy_zsock_limit_size(w->inbox, EDDY_ZRECV_MAX_DATA, err) < 0)
        return -1;
    if (w->opts->keys) {
        /* workers connect with the server pair: authorized_keys lists it
         * as a worker */
        if (eddy_curve_client(w->ctrl, w->opts->keys, err) < 0)
            return -1;
        w->zap = eddy_zap_start(w->zctx, w->opts->keys, w->inbox, EDDY_ZAP_DATA, err);
        if (!w->zap)
            return -1;
    }
    w->n_coords = eddy_client_split(w->opts->coordinator, w->coords, EDDY_MAX_COORDINATORS);
    if (w->n_coords == 0)
        return eddy_err_set(err, "invalid coordinator address '%s'", w->opts->coordinator);
    for (int i = 0; i < w->n_coords; i++) {
        /* check every listed address now, not at the first failover */
        if (zmq_connect(w->ctrl, w->coords[i]) != 0)
            return eddy_err_set(err, "invalid coordinator address '%s': %s", w->coords[i],
                                zmq_strerror(errno));
        if (i != w->cur)
            zmq_disconnect(w->ctrl, w->coords[i]);
    }
    char bind[300];
    const char *host = w->opts->bind_host ? w->opts->bind_host : "127.0.0.1";
    if (w->opts->data_port)
        snprintf(bind, sizeof bind, "tcp://%s:%u", host, w->opts->data_port);
    else
        snprintf(bind, sizeof bind, "tcp://%s:*", host);
    w->peers = eddy_peers_new(w->zctx, 0 /* credits bound the queues */, send_failed, w, err);
    if (!w->peers)
        return -1;
    eddy_peers_set_keys(w->peers, w->opts->keys);
    if (zmq_bind(w->inbox, bind) != 0)
        return eddy_err_set(err, "cannot bind data socket %s: %s", bind, zmq_strerror(errno));
    char last[EDDY_ENDPOINT_MAX];
    size_t size = sizeof last;
    zmq_getsockopt(w->inbox, ZMQ_LAST_ENDPOINT, last, &size);
    const char *port = strrchr(last, ':');
    const char *adv = w->opts->advertise_host;
    if (!adv) {
        bool wildcard = !strcmp(host, "0.0.0.0") || !strcmp(host, "*");
        adv = wildcard ? "127.0.0.1" : host;
        if (wildcard)
            eddy_warn("data socket bound to %s without --advertise-host: advertising 127.0.0.1, "
                      "which workers on other hosts or containers cannot reach", host);
    }
    snprintf(w->endpoint, sizeof w->endpoint, "tcp://%s%s", adv, port ? port : ":0");
    if (!w->opts->keys && !eddy_endpoint_is_loopback(last))
        eddy_warn("the data socket %s is reachable beyond this host without --keys: anyone who "
                  "can connect can inject records (see eddy keygen)", last);
    return 0;
}

static void teardown(worker_t *w)
{
    while (w->deferred) {
        deferred_deploy_t *dd = w->deferred;
        w->deferred = dd->next;
        free(dd->encoded);
        free(dd);
    }
    eddy_snapshot_writer_destroy(&w->snapshots);
    eddy_local_copies_destroy(&w->local);
    while (w->restores) {
        pending_restore_t *pr = w->restores;
        w->restores = pr->next;
        free_restore(pr);
    }
    while (w->jobs)
        destroy_job(w, w->jobs);
    eddy_peers_destroy(&w->peers);
    free(w->send_failures);
    eddy_plugin_dir_destroy(&w->plugins);
    free(w->items);
    free(w->waiting);
    eddy_liveness_destroy(&w->liveness); /* closes its socket, before the context */
    if (w->ctrl)
        zmq_close(w->ctrl);
    if (w->inbox)
        zmq_close(w->inbox);
    eddy_zap_destroy(&w->zap);
    if (w->zctx)
        zmq_ctx_term(w->zctx);
}

/* The poll set for this iteration (see worker_t.items); its length. */
static uint32_t build_poll_set(worker_t *w)
{
    uint32_t n = FIXED_ITEMS;
    for (wjob_t *j = w->jobs; j; j = j->next)
        for (uint32_t i = 0; i < j->n_tasks; i++) {
            int fd = eddy_task_wait_fd(j->tasks[i]);
            if (fd < 0)
                continue;
            if (n == w->items_cap) {
                uint32_t cap = w->items_cap * 2;
                zmq_pollitem_t *items = realloc(w->items, cap * sizeof *items);
                if (items)
                    w->items = items;
                eddy_task_t **waiting = items ? realloc(w->waiting, cap * sizeof *waiting) : NULL;
                if (!waiting) /* out of memory: that source is polled after a rest */
                    return n;
                w->waiting = waiting;
                w->items_cap = cap;
            }
            w->items[n] = (zmq_pollitem_t){NULL, fd, ZMQ_POLLIN, 0};
            w->waiting[n - FIXED_ITEMS] = j->tasks[i];
            n++;
        }
    return n;
}

/* How long the loop may wait for a message or descriptor: until the next
 * heartbeat, tick, source rest or rate allowance (ms, rounded up). */
static long wait_ms(worker_t *w)
{
    uint64_t now = eddy_mono_ns();
    uint64_t deadline = w->next_heartbeat_ms * 1000000u;
    for (wjob_t *j = w->jobs; j; j = j->next)
        for (uint32_t i = 0; i < j->n_tasks; i++) {
            uint64_t at = eddy_task_next_wake(j->tasks[i], now);
            if (at < deadline)
                deadline = at;
        }
    if (eddy_peers_queued(w->peers) && now + PEER_RETRY_NS < deadline)
        deadline = now + PEER_RETRY_NS;
    if (deadline <= now)
        return 0;
    uint64_t ms = (deadline - now + 999999u) / 1000000u;
    return ms > w->heartbeat_ms ? (long)w->heartbeat_ms : (long)ms;
}

/* Every loop turn: the liveness thread reports the time since. A turn
 * after a block of half the coordinator's silence timeout or more also
 * restarts that silence count: its answers could not be read meanwhile
 * (an idle turn lasts at most a heartbeat interval). */
static void note_turn(worker_t *w)
{
    if (w->stall_armed) { /* the test hook, once */
        w->stall_armed = false;
        uint32_t ms = w->stall_ms;
        w->stall_ms = 0;
        eddy_warn("test hook EDDY_TEST_STALL_LOOP_MS: blocking the loop for %u ms", ms);
        eddy_sleep_ms(ms);
    }
    uint64_t now = eddy_mono_ms();
    if (now - w->last_turn_ms > coordinator_silence_ms(w) / 2)
        w->last_ctrl_ms = now;
    w->last_turn_ms = now;
    eddy_liveness_loop_turned(w->liveness, now);
}

static bool run_tasks(worker_t *w, uint64_t now)
{
    bool any = false;
    for (wjob_t *j = w->jobs; j; j = j->next) {
        for (uint32_t i = 0; i < j->n_tasks; i++) {
            eddy_task_t *t = j->tasks[i];
            if (!eddy_task_runnable(t, now)) {
#ifndef EDDY_NO_TASK_TIMING
                eddy_task_account(t, now);
#endif
                continue;
            }
            any = true;
            eddy_err_t err = {{0}};
            if (eddy_task_step(t, now, &err) < 0) {
                eddy_error("task %s/%u[%u] failed: %s", j->job_id, eddy_task_stage(t),
                           eddy_task_instance(t), err.msg);
                eddy_msg_t f = {.type = EDDY_MSG_TASK_FAILED};
                f.u.task_failed.job = j->num;
                f.u.task_failed.epoch = j->epoch;
                f.u.task_failed.stage = eddy_task_stage(t);
                f.u.task_failed.instance = eddy_task_instance(t);
                snprintf(f.u.task_failed.error, sizeof f.u.task_failed.error, "%s", err.msg);
                send_ctrl(w, &f);
            }
            /* A step is one time slice (EDDY_TASK_SLICE_NS), so many tasks
             * on one worker still leave room for the heartbeat. */
            maybe_heartbeat(w);
            now = eddy_mono_ns();
        }
    }
    return any;
}

/* A worker asked to stop says so, so its coordinator logs it as having left
 * rather than dead. It waits for the answer (up to --leave-wait-ms: the
 * coordinator may be gone already), because the coordinator notices a
 * closed connection before it reads what came on it. */
static void say_leaving(worker_t *w)
{
    if (!w->opts->leave_wait_ms)
        return;
    eddy_msg_t leave = {.type = EDDY_MSG_LEAVE};
    snprintf(leave.u.leave.reason, sizeof leave.u.leave.reason,
             "it was asked to stop (SIGTERM or SIGINT)");
    if (send_ctrl(w, &leave) < 0)
        return;
    uint64_t deadline = eddy_mono_ms() + w->opts->leave_wait_ms;
    for (uint64_t now = eddy_mono_ms(); now < deadline; now = eddy_mono_ms()) {
        zmq_pollitem_t item = {w->ctrl, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, (long)(deadline - now)) <= 0)
            continue;
        eddy_msg_t m;
        eddy_err_t err;
        int got = recv_ctrl(w, &m, &err);
        bool answered = got > 0 && m.type == EDDY_MSG_REGISTERED;
        if (got > 0)
            eddy_msg_clear(&m);
        if (answered)
            return;
    }
}

int eddy_worker_run(const eddy_worker_options_t *opts, volatile sig_atomic_t *stop, eddy_err_t *err)
{
    worker_t *w = calloc(1, sizeof *w);
    if (!w)
        return eddy_err_set(err, "out of memory");
    w->suspect = -1; /* no coordinator went silent yet */
    w->opts = opts;
    /* Plugins are content-addressed, so workers of one user may share a
     * cache: --plugin-cache, else $XDG_RUNTIME_DIR/eddy-plugins (private to
     * the user by definition), else a fresh directory of this process. */
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    char cache[4096];
    if (opts->plugin_cache && *opts->plugin_cache)
        snprintf(cache, sizeof cache, "%s", opts->plugin_cache);
    else if (xdg && *xdg == '/')
        snprintf(cache, sizeof cache, "%s/eddy-plugins", xdg);
    else
        cache[0] = '\0';
    w->plugins = cache[0] ? eddy_plugin_dir_open(cache, err) : eddy_plugin_dir_temp(err);
    if (!w->plugins) {
        free(w);
        return -1;
    }
    int rc = -1;
    if (opts->checkpoint_storage) { /* its own: a wrong one fails at start, by name */
        eddy_snapshot_store_t *own = eddy_snapshot_store_new(opts->checkpoint_storage, err);
        int ok = own && eddy_snapshot_store_probe(own, err) == 0;
        eddy_snapshot_store_destroy(&own);
        if (!ok) {
            eddy_err_wrap(err, "--checkpoint-storage");
            goto out;
        }
    }
    w->snapshots = eddy_snapshot_writer_new(err);
    if (!w->snapshots)
        goto out;
    if (!opts->no_local_recovery && !(w->local = eddy_local_copies_new())) {
        eddy_err_set(err, "out of memory");
        goto out;
    }
    const char *corrupt = getenv("EDDY_TEST_LOCAL_COPY_CORRUPT"); /* a test hook */
    w->local_corrupt = corrupt && !strcmp(corrupt, "1");
    const char *stall = getenv("EDDY_TEST_STALL_LOOP_MS"); /* a test hook (worker_t) */
    w->stall_ms = stall ? (uint32_t)strtoul(stall, NULL, 10) : 0;
    if (setup_sockets(w, err) < 0 || !(w->liveness = eddy_liveness_new(w->zctx, opts->keys, err)) ||
        register_with_coordinator(w, err) < 0)
        goto out;
    eddy_info("registered as worker %u with %s, data at %s", w->id, w->coords[w->cur], w->endpoint);
    w->last_ctrl_ms = eddy_mono_ms();
    w->items_cap = FIXED_ITEMS + 8;
    w->items = calloc(w->items_cap, sizeof *w->items);
    w->waiting = calloc(w->items_cap, sizeof *w->waiting);
    if (!w->items || !w->waiting) {
        eddy_err_set(err, "out of memory");
        goto out;
    }
    w->items[0] = (zmq_pollitem_t){w->ctrl, 0, ZMQ_POLLIN, 0};
    w->items[1] = (zmq_pollitem_t){w->inbox, 0, ZMQ_POLLIN, 0};
    w->items[2] = (zmq_pollitem_t){NULL, eddy_snapshot_writer_fd(w->snapshots), ZMQ_POLLIN, 0};
    bool busy = false;
    w->last_turn_ms = eddy_mono_ms();
    while (!*stop) {
        note_turn(w);
        /* No timed wake-ups for records: the loop sleeps until a message, a
         * source's descriptor or a deadline (heartbeat, tick, rate) needs it. */
        uint32_t n_items = build_poll_set(w);
        if (zmq_poll(w->items, (int)n_items, busy ? 0 : wait_ms(w)) < 0 && errno != EINTR) {
            eddy_err_set(err, "poll failed: %s", zmq_strerror(errno));
            goto out;
        }
        for (uint32_t i = FIXED_ITEMS; i < n_items; i++)
            if (w->items[i].revents)
                eddy_task_fd_ready(w->waiting[i - FIXED_ITEMS]);
        for (;;) {
            eddy_msg_t m;
            eddy_err_t derr;
            int got = recv_ctrl(w, &m, &derr);
            if (got == 0)
                break;
            if (got < 0) {
                eddy_log_limited(&w->malformed_ctrl_log, EDDY_LOG_WARN,
                                 "dropping control message: %s", derr.msg);
                continue;
            }
            w->last_ctrl_ms = eddy_mono_ms();
            if (accept_epoch(w, &m))
                handle_ctrl(w, &m);
            eddy_msg_clear(&m);
        }
        if (w->fatal[0]) {
            eddy_err_set(err, "%s", w->fatal);
            goto out;
        }
        /* the coordinator answers every heartbeat; silence means it is gone
         * (or paused): with several listed, find the leader among them */
        if (w->seeking)
            seek_tick(w);
        else if (w->n_coords > 1 && eddy_mono_ms() - w->last_ctrl_ms > coordinator_silence_ms(w))
            switch_coordinator(w, NULL, "silent");
        for (int i = 0; i < INBOX_BURST; i++) {
            zmq_msg_t z;
            eddy_err_t rerr;
            eddy_zrecv_result_t got =
                eddy_zrecv(w->inbox, &z, EDDY_ZRECV_FRAMES_PLAIN, EDDY_ZRECV_MAX_DATA, &rerr);
            if (got == EDDY_ZRECV_NONE)
                break;
            if (got == EDDY_ZRECV_MALFORMED) {
                eddy_log_limited(&w->malformed_data_log, EDDY_LOG_WARN,
                                 "dropping data-plane message: %s", rerr.msg);
                continue;
            }
            if (dispatch_data(w, NULL, 0, &z))
                break;
        }
        uint64_t now = eddy_mono_ns();
        busy = run_tasks(w, now);
        now = eddy_mono_ns();
        for (wjob_t *j = w->jobs; j; j = j->next)
            for (uint32_t i = 0; i < j->n_tasks; i++)
                eddy_task_tick(j->tasks[i], now);
        /* Tasks flush when they run dry (eddy_task_step); this catches
         * the rest, e.g. a blocked task's last batch, once nothing runs. */
        if (!busy)
            for (wjob_t *j = w->jobs; j; j = j->next)
                for (uint32_t i = 0; i < j->n_tasks; i++)
                    eddy_task_flush(j->tasks[i]);
        eddy_peers_retry(w->peers);
        send_durable_acks(w);
        apply_read_ahead(w);
        maybe_heartbeat(w);
    }
    say_leaving(w);
    rc = 0;
out:
    teardown(w);
    free(w);
    return rc;
}
