/* savepoint.c - savepoints (docs/savepoints.md): `eddy savepoint JOB
 * [--stop] [--dir URI]` and jobs started `--from-savepoint`.
 *
 * Taking one: the request waits for no checkpoint in flight, then the next
 * checkpoint is triggered as a savepoint (TRIGGER's savepoint_uri): every
 * task writes all its key groups, without references or manifests, under
 * the savepoint's location instead of the checkpoint storage (the
 * coordinator reads no state file). When every task acknowledged, a thread
 * of this file lists the files and writes the manifest
 * (state/savepoint.h); the tick then answers the client. A savepoint is not
 * a recovery point of the running job: its checkpoint is neither recorded
 * nor completed, so retention and collection never see it. With --stop the
 * sources pause behind its barrier, COMPLETE goes out (two-phase-commit
 * sinks commit exactly up to it) and the job ends `stopped`.
 *
 * Starting from one: coord_savepoint_restore checks the manifest (decoded
 * and verified by the CLI, which reads the files) against the new job's
 * graph and makes it the job's newest retained checkpoint, with the
 * savepoint's location and job name, which DEPLOY carries (restore_uri):
 * the first deploy is a restore from it, and so is every restore until the
 * job completes a checkpoint of its own. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "coordinator/internal.h"
#include "state/savepoint.h"

struct coord_savepoint {
    char location[EDDY_STORAGE_URI_MAX];
    bool stop;
    uint64_t checkpoint; /* 0: not triggered yet */
    pending_client_t client;
    eddy_savepoint_manifest_t manifest;
    pthread_t thread;
    bool thread_started;
    atomic_int done; /* 0 running, 1 written, -1 failed (err) */
    eddy_err_t err;
};

static void savepoint_free(coord_savepoint_t **sp_p)
{
    coord_savepoint_t *sp = *sp_p;
    if (!sp)
        return;
    if (sp->thread_started)
        pthread_join(sp->thread, NULL); /* a listing and one write */
    eddy_savepoint_manifest_clear(&sp->manifest);
    free(sp);
    *sp_p = NULL;
}

static void answer(coord_t *c, coord_savepoint_t *sp, int64_t status, const char *body)
{
    if (c && sp->client.waiting)
        coord_reply(c, sp->client.identity, sp->client.identity_len, status, body);
    sp->client.waiting = false;
}

/* Where a savepoint goes without --dir: --savepoint-dir, else "savepoints"
 * beside a directory checkpoint storage. */
static int default_dir(const coord_t *c, char *out, size_t cap, eddy_err_t *err)
{
    if (c->opts->savepoint_dir)
        return eddy_savepoint_location(c->opts->savepoint_dir, out, cap, err);
    const char *storage = coord_storage(c->opts);
    if (!storage || !strncmp(storage, "s3://", 5))
        return eddy_err_set(err, "no savepoint directory: give --dir URI (or the coordinator "
                            "--savepoint-dir)");
    if (!strncmp(storage, "file://", 7))
        storage += 7;
    char parent[EDDY_STORAGE_URI_MAX];
    snprintf(parent, sizeof parent, "%s", storage);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/')
        parent[--n] = '\0';
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent)
        *slash = '\0';
    char dir[EDDY_STORAGE_URI_MAX + 16];
    snprintf(dir, sizeof dir, "%s/savepoints", parent);
    return eddy_savepoint_location(dir, out, cap, err); /* absolute */
}

int coord_savepoint_request(coord_t *c, const char *job_id, const char *dir, bool stop,
                            const unsigned char *identity, size_t identity_len, eddy_err_t *err)
{
    coord_job_t *j = coord_job_find(c, job_id);
    if (!j)
        return eddy_err_set(err, "no job '%s'", job_id);
    if (j->state != JOB_RUNNING)
        return eddy_err_set(err, "job %s is %s; a savepoint needs it running", j->id,
                            coord_job_state_name(j->state));
    if (j->savepoint)
        return eddy_err_set(err, "job %s: a savepoint is already in progress", j->id);
    uint32_t fs, fi;
    if (coord_finished_blocks_checkpoints(j, &fs, &fi) || j->tasks_done)
        return eddy_err_set(err, "job %s: some of its tasks finished; a savepoint needs them all running",
                            j->id);
    char base[EDDY_STORAGE_URI_MAX];
    if (dir ? eddy_savepoint_location(dir, base, sizeof base, err) : default_dir(c, base, sizeof base, err))
        return -1;
    coord_savepoint_t *sp = calloc(1, sizeof *sp);
    if (!sp)
        return eddy_err_set(err, "out of memory");
    sp->stop = stop;
    /* the checkpoint id is known once triggered; the name takes the time */
    int n = snprintf(sp->location, sizeof sp->location, "%s/savepoint-%s-%" PRId64, base, j->id,
                     eddy_wall_ms());
    if (n < 0 || (size_t)n >= sizeof sp->location) {
        free(sp);
        return eddy_err_set(err, "savepoint location too long");
    }
    sp->client.waiting = identity_len > 0 && identity_len <= sizeof sp->client.identity;
    if (sp->client.waiting)
        memcpy(sp->client.identity, identity, identity_len);
    sp->client.identity_len = identity_len;
    j->savepoint = sp;
    eddy_info("job %s: savepoint%s requested at %s", j->id, stop ? " with stop" : "", sp->location);
    return 0;
}

const char *coord_savepoint_on_trigger(coord_job_t *j, coord_pending_checkpoint_t *pc)
{
    coord_savepoint_t *sp = j->savepoint;
    if (!sp || sp->checkpoint)
        return NULL;
    sp->checkpoint = pc->id;
    pc->savepoint = true;
    pc->pause = sp->stop; /* the sources stop behind its barrier */
    return sp->location;
}

static void *seal(void *arg)
{
    coord_savepoint_t *sp = arg;
    int rc = eddy_savepoint_seal(sp->location, &sp->manifest, &sp->err);
    atomic_store(&sp->done, rc == 0 ? 1 : -1);
    return NULL;
}

/* The named states (api/state.h) the stage's operators declare, with
 * their schema versions (as many as the manifest holds). */
static void record_states(const eddy_stage_def_t *st, eddy_savepoint_operator_t *o)
{
    for (uint32_t i = 0; i < st->n_ops; i++) {
        const eddy_state_desc_t *d = NULL;
        uint32_t n = st->ops[i].ops->states ? st->ops[i].ops->states(st->ops[i].config, &d) : 0;
        for (uint32_t k = 0; d && k < n && o->n_states < EDDY_SAVEPOINT_MAX_STATES; k++) {
            snprintf(o->states[o->n_states].name, EDDY_SAVEPOINT_NAME_MAX, "%s", d[k].name);
            o->states[o->n_states++].version = d[k].version;
        }
    }
}

/* The manifest of what the pending checkpoint covers, without its files. */
static int build_manifest(const coord_job_t *j, const coord_pending_checkpoint_t *pc,
                          eddy_savepoint_manifest_t *m)
{
    *m = (eddy_savepoint_manifest_t){.format_version = EDDY_SAVEPOINT_FORMAT_VERSION,
                                     .checkpoint = pc->id, .plan_fingerprint = j->plan_fingerprint,
                                     .max_parallelism = j->graph.max_parallelism,
                                     .created_ms = eddy_wall_ms(), .stopped = pc->pause,
                                     .sinks_committed = pc->pause ? pc->id : 0};
    snprintf(m->job, sizeof m->job, "%s", j->id);
    m->operators = calloc(j->graph.n_stages + 1, sizeof *m->operators);
    m->positions = calloc(pc->n_positions + 1, sizeof *m->positions);
    if (!m->operators || !m->positions)
        return -1;
    uint32_t k = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++) {
        const eddy_stage_def_t *st = &j->graph.stages[s];
        eddy_savepoint_operator_t *o = &m->operators[m->n_operators++];
        snprintf(o->uid, sizeof o->uid, "%s", st->name);
        o->keyed = st->edge == EDDY_EDGE_HASH;
        o->source = st->source != NULL;
        o->parallelism = j->placement[s].parallelism;
        for (uint32_t i = 0; i < st->n_ops && i < EDDY_SAVEPOINT_MAX_KINDS; i++)
            snprintf(o->kinds[o->n_kinds++], EDDY_SAVEPOINT_NAME_MAX, "%s", st->ops[i].ops->kind);
        record_states(st, o);
        for (uint32_t i = 0; o->source && i < pc->parallelism[s] && k < pc->n_positions; i++, k++) {
            eddy_savepoint_position_t *p = &m->positions[m->n_positions++];
            snprintf(p->op, sizeof p->op, "%s", st->name);
            p->instance = i;
            p->position = pc->positions[k].position;
            if (pc->positions[k].state_len) {
                if (!(p->state = malloc(pc->positions[k].state_len)))
                    return -1;
                memcpy(p->state, pc->positions[k].state, pc->positions[k].state_len);
                p->state_len = pc->positions[k].state_len;
            }
        }
    }
    return 0;
}

void coord_savepoint_on_acked(coord_t *c, coord_job_t *j)
{
    coord_savepoint_t *sp = j->savepoint;
    coord_pending_checkpoint_t *pc = j->pending;
    pc->committing = true; /* no more ACKs; the timeout still applies */
    if (build_manifest(j, pc, &sp->manifest) < 0) {
        coord_checkpoint_abort(c, j, "savepoint: out of memory", false);
        return;
    }
    if (pthread_create(&sp->thread, NULL, seal, sp) != 0) {
        coord_checkpoint_abort(c, j, "savepoint: cannot start a thread", false);
        return;
    }
    sp->thread_started = true;
}

/* The job stops at the savepoint: sinks commit up to it, tasks go. */
static void stop_job(coord_t *c, coord_job_t *j, uint64_t id)
{
    eddy_msg_t m = {.type = EDDY_MSG_COMPLETE};
    m.u.complete.job = j->num;
    m.u.complete.checkpoint = id;
    coord_broadcast(c, &m);
    j->ended_ms = eddy_mono_ms();
    coord_job_set_state(c, j, JOB_STOPPED);
    coord_job_release(c, j);
    eddy_info("job %s stopped with savepoint %s", j->id, j->savepoint_last);
}

void coord_savepoint_tick(coord_t *c, coord_job_t *j)
{
    coord_savepoint_t *sp = j->savepoint;
    if (!sp || !sp->thread_started || atomic_load(&sp->done) == 0)
        return;
    if (atomic_load(&sp->done) < 0) {
        char why[EDDY_ERROR_MAX];
        snprintf(why, sizeof why, "savepoint: %.480s", sp->err.msg);
        coord_checkpoint_abort(c, j, why, false); /* answers the client */
        return;
    }
    uint64_t id = sp->checkpoint;
    snprintf(j->savepoint_last, sizeof j->savepoint_last, "%s", sp->location);
    answer(c, sp, 0, sp->location);
    j->savepoint = NULL;
    bool stop = sp->stop;
    savepoint_free(&sp);
    coord_pending_checkpoint_destroy(&j->pending);
    eddy_info("job %s: savepoint %" PRIu64 " written to %s", j->id, id, j->savepoint_last);
    if (stop)
        stop_job(c, j, id);
    coord_job_store_save(c, j, 3, NULL, NULL);
}

void coord_savepoint_fail(coord_t *c, coord_job_t *j, const char *why)
{
    coord_savepoint_t *sp = j->savepoint;
    if (!sp)
        return;
    char msg[EDDY_ERROR_MAX + 64];
    snprintf(msg, sizeof msg, "savepoint of job %s failed: %.480s", j->id, why);
    answer(c, sp, 1, msg);
    j->savepoint = NULL;
    savepoint_free(&sp);
}

/* ---- from a savepoint ------------------------------------------------------ */

/* Whether the saved operator o has a place in the graph: a stage of its
 * uid that holds the same kind of state (keyed groups, a source's positions). */
static bool claimed(const eddy_job_graph_t *g, const eddy_savepoint_operator_t *o)
{
    int s = eddy_graph_find_stage(g, o->uid);
    if (s < 0)
        return false;
    const eddy_stage_def_t *st = &g->stages[s];
    return o->keyed ? st->edge == EDDY_EDGE_HASH : !o->source || st->source != NULL;
}

/* Saved state only keyed stages and sources have: others restore nothing. */
static bool holds_state(const eddy_savepoint_operator_t *o)
{
    return o->keyed || o->source;
}

/* The named states of stage st against what the savepoint saved for its
 * operator o: a state saved with a newer schema version, or an older one
 * the operator has no migrate callback for, is refused. */
static int check_states(const eddy_stage_def_t *st, const eddy_savepoint_operator_t *o,
                        const char *location, eddy_err_t *err)
{
    for (uint32_t i = 0; i < st->n_ops; i++) {
        const eddy_state_desc_t *d = NULL;
        uint32_t n = st->ops[i].ops->states ? st->ops[i].ops->states(st->ops[i].config, &d) : 0;
        for (uint32_t k = 0; d && k < n; k++)
            for (uint32_t s = 0; s < o->n_states; s++) {
                uint32_t saved = o->states[s].version;
                if (strcmp(o->states[s].name, d[k].name) || saved == d[k].version ||
                    (saved < d[k].version && d[k].migrate))
                    continue;
                return eddy_err_set(err, "%s: operator %s, state %s: schema version %u in the "
                                    "savepoint, %u in the job (%s)", location, o->uid, d[k].name,
                                    saved, d[k].version,
                                    saved > d[k].version ? "the savepoint is newer than the code"
                                                         : "no migrate callback for it");
            }
    }
    return 0;
}

int eddy_savepoint_check_graph(const eddy_job_graph_t *g, const char *location,
                               const eddy_savepoint_manifest_t *m, bool allow_non_restored,
                               eddy_err_t *err)
{
    if (m->max_parallelism != g->max_parallelism)
        return eddy_err_set(err, "%s: max parallelism %u, the job has %u (key groups cannot be "
                            "redistributed across a different max parallelism)", location,
                            m->max_parallelism, g->max_parallelism);
    for (uint32_t i = 0; i < m->n_operators; i++)
        if (holds_state(&m->operators[i]) && !claimed(g, &m->operators[i]) && !allow_non_restored)
            return eddy_err_set(err, "%s: the state of operator %s is claimed by no operator of the "
                                "job (--allow-non-restored-state drops it)", location,
                                m->operators[i].uid);
    for (uint32_t s = 0; s < g->n_stages; s++) {
        const eddy_savepoint_operator_t *o = eddy_savepoint_manifest_operator(m, g->stages[s].name);
        if (g->stages[s].source && o && o->source && o->parallelism != g->stages[s].parallelism)
            return eddy_err_set(err, "%s: source %s had parallelism %u, the job has %u (a source "
                                "resumes instance by instance)", location, o->uid, o->parallelism,
                                g->stages[s].parallelism);
        if (o && check_states(&g->stages[s], o, location, err) < 0)
            return -1;
    }
    return 0;
}

int coord_savepoint_restore(coord_job_t *j, const coord_savepoint_from_t *from, eddy_err_t *err)
{
    const eddy_savepoint_manifest_t *m = from->manifest;
    const eddy_job_graph_t *g = &j->graph;
    if (eddy_savepoint_check_graph(g, from->location, m, from->allow_non_restored, err) < 0)
        return -1;
    /* the sources' positions, in the job's order (stages, then instances) */
    uint32_t n = 0;
    for (uint32_t s = 0; s < g->n_stages; s++)
        n += g->stages[s].source ? coord_job_parallelism(j, s) : 0;
    coord_source_progress_t *pos = coord_progress_new(n);
    if (!pos)
        return eddy_err_set(err, "out of memory");
    uint32_t k = 0;
    for (uint32_t s = 0; s < g->n_stages; s++) {
        if (!g->stages[s].source)
            continue;
        const eddy_savepoint_operator_t *o = eddy_savepoint_manifest_operator(m, g->stages[s].name);
        uint32_t p = coord_job_parallelism(j, s);
        if (o && o->source && o->parallelism != p) {
            coord_progress_free(&pos, n);
            return eddy_err_set(err, "%s: source %s had parallelism %u, the job has %u (a source "
                                "resumes instance by instance)", from->location, o->uid,
                                o->parallelism, p);
        }
        for (uint32_t i = 0; i < p; i++, k++)
            for (uint32_t e = 0; e < m->n_positions; e++) {
                const eddy_savepoint_position_t *sp = &m->positions[e];
                if (strcmp(sp->op, g->stages[s].name) || sp->instance != i)
                    continue;
                pos[k].position = sp->position;
                if (sp->state_len && (pos[k].state = malloc(sp->state_len))) {
                    memcpy(pos[k].state, sp->state, sp->state_len);
                    pos[k].state_len = sp->state_len;
                }
            }
    }
    snprintf(j->restore_uri, sizeof j->restore_uri, "%s", from->location);
    snprintf(j->restore_job, sizeof j->restore_job, "%s", m->job);
    j->restore_savepoint = m->checkpoint;
    coord_retained_push(j, m->checkpoint, pos, n, NULL, 0);
    if (j->next_checkpoint <= m->checkpoint)
        j->next_checkpoint = m->checkpoint + 1;
    j->cleaned_below = m->checkpoint; /* nothing of this job below it */
    return 0;
}
