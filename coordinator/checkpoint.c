/* checkpoint.c - the checkpoint protocol and the pending checkpoint.
 *
 *  trigger   TRIGGER(n) to the workers; a coord_pending_checkpoint_t
 *            tracks which tasks must ACK. One checkpoint at a time.
 *  ack       every task ACKs once after its aligned snapshot; duplicate
 *            and unknown ACKs are logged and ignored.
 *  commit    when every task acknowledged, the checkpoint's metadata is
 *            written to the metadata store (retried with backoff). That
 *            write is the commit point: only when it is durable is the
 *            checkpoint complete, COMPLETE broadcast (sinks publish) and
 *            checkpoints beyond the newest --checkpoints-retained deleted
 *            (metadata first, then files, so no metadata names deleted
 *            files).
 *  abort     an ACK with an error, a timeout or a failed commit abandons
 *            the checkpoint; --tolerable-checkpoint-failures in a row
 *            restore the job from its last complete checkpoint. A commit
 *            whose outcome is unknown deletes its metadata key before its
 *            files (the store runs calls in order).
 * A rescale's pausing barrier is a migration snapshot, handed to rescale.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"

#define COMMIT_RETRIES 4 /* 100+200+400+800 ms of backoff between tries */

/* ---- source progress --------------------------------------------------------- */

coord_source_progress_t *coord_progress_new(uint32_t n)
{
    coord_source_progress_t *p = calloc(n + 1, sizeof *p);
    for (uint32_t k = 0; p && k < n; k++)
        p[k].position = -1;
    return p;
}

coord_source_progress_t *coord_progress_dup(const coord_source_progress_t *p, uint32_t n)
{
    coord_source_progress_t *out = calloc(n + 1, sizeof *out);
    for (uint32_t k = 0; out && k < n; k++) {
        out[k].position = p[k].position;
        if (p[k].state && p[k].state_len) {
            out[k].state = malloc(p[k].state_len);
            if (!out[k].state) {
                coord_progress_free(&out, n);
                return NULL;
            }
            memcpy(out[k].state, p[k].state, p[k].state_len);
            out[k].state_len = p[k].state_len;
        }
    }
    return out;
}

void coord_progress_free(coord_source_progress_t **p, uint32_t n)
{
    if (!p || !*p)
        return;
    for (uint32_t k = 0; k < n; k++)
        free((*p)[k].state);
    free(*p);
    *p = NULL;
}

/* ---- the pending checkpoint (pure) --------------------------------------- */

coord_pending_checkpoint_t *coord_pending_checkpoint_new(uint64_t id, uint32_t epoch,
                                                         uint32_t n_stages,
                                                         const uint32_t *parallelism,
                                                         const bool *source, uint64_t now_ms)
{
    if (n_stages == 0 || n_stages > EDDY_MAX_STAGES)
        return NULL;
    coord_pending_checkpoint_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->id = id;
    self->epoch = epoch;
    self->started_ms = now_ms;
    self->n_stages = n_stages;
    for (uint32_t s = 0; s < n_stages; s++) {
        self->parallelism[s] = parallelism[s];
        self->source[s] = source[s];
        self->n_tasks += parallelism[s];
        if (source[s])
            self->n_positions += parallelism[s];
    }
    self->acked = calloc(self->n_tasks + 1, sizeof *self->acked);
    self->finished = calloc(self->n_tasks + 1, sizeof *self->finished);
    self->positions = coord_progress_new(self->n_positions);
    if (!self->acked || !self->finished || !self->positions) {
        coord_pending_checkpoint_destroy(&self);
        return NULL;
    }
    return self;
}

void coord_pending_checkpoint_destroy(coord_pending_checkpoint_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->acked);
    free((*self_p)->finished);
    coord_progress_free(&(*self_p)->positions, (*self_p)->n_positions);
    free(*self_p);
    *self_p = NULL;
}

coord_ack_verdict_t coord_pending_checkpoint_ack(coord_pending_checkpoint_t *self, uint32_t stage,
                                                 uint32_t instance, int64_t position,
                                                 const char *state, uint32_t state_len,
                                                 const coord_checkpoint_cost_t *cost)
{
    if (stage >= self->n_stages || instance >= self->parallelism[stage])
        return COORD_ACK_UNKNOWN_TASK;
    uint32_t task = 0, pos = 0;
    for (uint32_t s = 0; s < stage; s++) {
        task += self->parallelism[s];
        if (self->source[s])
            pos += self->parallelism[s];
    }
    if (self->finished[task + instance])
        return COORD_ACK_UNKNOWN_TASK; /* finished before the checkpoint: it takes no part */
    if (self->acked[task + instance])
        return COORD_ACK_DUPLICATE;
    char *copy = NULL;
    if (self->source[stage] && state && state_len) {
        copy = malloc(state_len);
        if (!copy)
            return COORD_ACK_NO_MEMORY;
        memcpy(copy, state, state_len);
    }
    self->acked[task + instance] = true;
    self->n_acked++;
    if (self->source[stage])
        self->positions[pos + instance] =
            (coord_source_progress_t){position, copy, copy ? state_len : 0};
    if (cost) {
        self->cost.bytes += cost->bytes;
        self->cost.files += cost->files;
        self->cost.referenced += cost->referenced;
        self->cost.sync_us = cost->sync_us > self->cost.sync_us ? cost->sync_us : self->cost.sync_us;
        self->cost.async_us = cost->async_us > self->cost.async_us ? cost->async_us : self->cost.async_us;
        self->cost.align_us = cost->align_us > self->cost.align_us ? cost->align_us : self->cost.align_us;
    }
    return COORD_ACK_ACCEPTED;
}

bool coord_pending_checkpoint_all_acked(const coord_pending_checkpoint_t *self)
{
    return self->n_acked + self->n_finished == self->n_tasks;
}

/* Task (stage, instance)'s stage-major index, or false for no such task. */
static bool task_of(uint32_t n_stages, const uint32_t *parallelism, uint32_t stage,
                    uint32_t instance, uint32_t *k)
{
    if (stage >= n_stages || instance >= parallelism[stage])
        return false;
    *k = instance;
    for (uint32_t s = 0; s < stage; s++)
        *k += parallelism[s];
    return true;
}

coord_ack_verdict_t coord_pending_checkpoint_finish_task(coord_pending_checkpoint_t *self,
                                                         uint32_t stage, uint32_t instance)
{
    uint32_t k;
    if (!task_of(self->n_stages, self->parallelism, stage, instance, &k))
        return COORD_ACK_UNKNOWN_TASK;
    if (self->finished[k] || self->acked[k])
        return COORD_ACK_DUPLICATE;
    self->finished[k] = true;
    self->n_finished++;
    return COORD_ACK_ACCEPTED;
}

bool coord_pending_checkpoint_acked(const coord_pending_checkpoint_t *self, uint32_t stage,
                                    uint32_t instance)
{
    uint32_t k;
    return task_of(self->n_stages, self->parallelism, stage, instance, &k) && self->acked[k];
}

eddy_task_ref_t *coord_pending_checkpoint_finished(const coord_pending_checkpoint_t *self,
                                                   uint32_t *n)
{
    *n = self->n_finished;
    if (!self->n_finished)
        return NULL;
    eddy_task_ref_t *out = malloc(self->n_finished * sizeof *out);
    uint32_t k = 0, m = 0;
    for (uint32_t s = 0; out && s < self->n_stages; s++)
        for (uint32_t i = 0; i < self->parallelism[s]; i++, k++)
            if (self->finished[k])
                out[m++] = (eddy_task_ref_t){s, i};
    return out;
}

coord_ended_verdict_t coord_ended_inputs_verdict(uint32_t n_stages, const uint32_t *parallelism,
                                                 const uint8_t *seen, uint32_t n_seen,
                                                 uint8_t done_flag, const eddy_task_ref_t *ended,
                                                 uint32_t n_ended, eddy_task_ref_t *bad)
{
    for (uint32_t e = 0; e < n_ended; e++) {
        uint32_t k;
        *bad = ended[e];
        if (!task_of(n_stages, parallelism, ended[e].stage, ended[e].instance, &k))
            return COORD_ENDED_UNKNOWN_TASK;
        if (!seen || k >= n_seen || !(seen[k] & done_flag))
            return COORD_ENDED_NOT_DONE;
    }
    return COORD_ENDED_ACCEPT;
}

uint32_t coord_pending_checkpoint_missing_text(const coord_pending_checkpoint_t *self,
                                              const char *(*stage_name)(const void *arg,
                                                                        uint32_t stage),
                                              const void *arg, char *buf, size_t size)
{
    enum { SHOWN = 8 };
    uint32_t task = 0, missing = 0;
    size_t used = 0;
    if (size)
        buf[0] = '\0';
    for (uint32_t s = 0; s < self->n_stages; s++)
        for (uint32_t i = 0; i < self->parallelism[s]; i++, task++) {
            if (self->acked[task] || self->finished[task])
                continue;
            if (missing++ < SHOWN && used < size) {
                int n = snprintf(buf + used, size - used, "%s%s[%u]", missing > 1 ? ", " : "",
                                 stage_name(arg, s), i);
                used = n < 0 ? size : used + (size_t)n;
            }
        }
    if (missing > SHOWN && used < size)
        snprintf(buf + used, size - used, " and %u more", missing - SHOWN);
    return missing;
}

/* ---- retained checkpoints ------------------------------------------------- */

static void retained_free(coord_retained_t *r)
{
    coord_progress_free(&r->positions, r->n_positions);
    free(r->finished);
    r->finished = NULL;
    r->n_finished = 0;
}

void coord_retained_push(coord_job_t *j, uint64_t id, coord_source_progress_t *positions,
                         uint32_t n_positions, eddy_task_ref_t *finished, uint32_t n_finished)
{
    if (j->n_retained == COORD_MAX_RETAINED) {
        retained_free(&j->retained[0]);
        memmove(j->retained, j->retained + 1, (COORD_MAX_RETAINED - 1) * sizeof j->retained[0]);
        j->n_retained--;
    }
    j->retained[j->n_retained++] =
        (coord_retained_t){id, n_positions, positions, finished ? n_finished : 0, finished};
    j->last_checkpoint = id;
}

void coord_checkpoint_forget(coord_t *c, coord_job_t *j, uint64_t id)
{
    char key[COORD_KEY_MAX];
    coord_checkpoint_key(key, sizeof key, j->id, id);
    eddy_metastore_async_delete(c->meta_async, key, EDDY_META_RETRY_FOREVER, NULL, NULL);
}

void coord_retained_drop_newest(coord_job_t *j)
{
    if (j->n_retained == 0)
        return;
    j->n_retained--;
    retained_free(&j->retained[j->n_retained]);
    j->last_checkpoint = j->n_retained ? j->retained[j->n_retained - 1].id : 0;
}

void coord_retained_clear(coord_job_t *j)
{
    while (j->n_retained)
        coord_retained_drop_newest(j);
}

/* Deletes a checkpoint's metadata key and then, once that is done, its files. */
static void on_key_deleted(void *arg, const eddy_meta_result_t *res)
{
    coord_ticket_t *t = arg;
    /* by reference: a retained (incremental) checkpoint may still need
     * objects of this one; the job's retained list, whatever its epoch now */
    coord_job_t *j = coord_job_by_num(t->c, t->job);
    if (res->rc == 0 && j && j->n_retained && t->checkpoint > j->retained[j->n_retained - 1].id) {
        /* abandoned while committing: never complete, nothing refers to it */
        coord_reaper_remove(t->c->reaper, t->job_id, t->checkpoint);
    } else if (res->rc == 0 && j) {
        uint64_t keep[COORD_MAX_RETAINED];
        for (uint32_t i = 0; i < j->n_retained; i++)
            keep[i] = j->retained[i].id;
        coord_reaper_collect(t->c->reaper, t->job_id, t->checkpoint, keep, j->n_retained);
    } else if (res->rc == 0) {
        eddy_debug("job %s has ended: the files of its checkpoint %" PRIu64 " are kept",
                   t->job_id, t->checkpoint);
    } else {
        eddy_warn("job %s: cannot delete the metadata of checkpoint %" PRIu64 ": %s; its files are kept",
                  t->job_id, t->checkpoint, res->err.msg);
    }
    coord_ticket_release(t);
}

static void delete_checkpoint(coord_t *c, const coord_job_t *j, uint64_t id)
{
    char key[COORD_KEY_MAX];
    coord_checkpoint_key(key, sizeof key, j->id, id);
    coord_ticket_t *t = coord_ticket_new(c, j, id);
    if (t)
        eddy_metastore_async_delete(c->meta_async, key, EDDY_META_RETRY_FOREVER, on_key_deleted, t);
}

/* Keeps the newest --checkpoints-retained complete checkpoints and deletes
 * every older id not yet deleted (including abandoned ones). */
static void apply_retention(coord_t *c, coord_job_t *j)
{
    uint32_t keep = c->opts->checkpoints_retained ? c->opts->checkpoints_retained : 1;
    while (j->n_retained > keep) {
        retained_free(&j->retained[0]);
        memmove(j->retained, j->retained + 1, (j->n_retained - 1) * sizeof j->retained[0]);
        j->n_retained--;
    }
    uint64_t oldest = j->retained[0].id;
    /* a long gap (nothing known below) is not worth a store call per id */
    if (oldest > 64 && j->cleaned_below < oldest - 64)
        j->cleaned_below = oldest - 64;
    for (uint64_t id = j->cleaned_below ? j->cleaned_below : 1; id < oldest; id++)
        delete_checkpoint(c, j, id);
    if (oldest > j->cleaned_below)
        j->cleaned_below = oldest;
}

/* ---- trigger and abort ------------------------------------------------------ */

void coord_checkpoint_trigger(coord_t *c, coord_job_t *j, bool pause)
{
    uint32_t p[EDDY_MAX_STAGES];
    bool source[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++) {
        p[s] = j->placement[s].parallelism;
        source[s] = j->graph.stages[s].source;
    }
    uint64_t now = eddy_mono_ms();
    coord_pending_checkpoint_t *pc =
        coord_pending_checkpoint_new(j->next_checkpoint, j->epoch, j->graph.n_stages, p, source, now);
    if (!pc) {
        eddy_warn("job %s: cannot start checkpoint %" PRIu64 ": out of memory", j->id, j->next_checkpoint);
        return;
    }
    j->next_checkpoint++;
    pc->pause = pause;
    j->pending = pc;
    const char *savepoint = pause ? NULL : coord_savepoint_on_trigger(j, pc);
    pause = pc->pause;
    coord_finished_mark(j);
    j->last_trigger_ms = now;
    if (pause)
        j->pause_started_ns = eddy_mono_ns(); /* sources stop at this barrier */
    eddy_msg_t m = {.type = EDDY_MSG_TRIGGER};
    m.u.trigger.job = j->num;
    m.u.trigger.epoch = j->epoch;
    m.u.trigger.checkpoint = pc->id;
    m.u.trigger.pause_after = pause;
    /* A rescale's barrier is a migration snapshot, not a recovery point. */
    m.u.trigger.migrate_stage = pause && j->rescale_stage >= 0 ? (uint32_t)j->rescale_stage : EDDY_NO_STAGE;
    /* A fluid rescale's or migration's barrier moves no state (0): the
     * groups stay with their owners and move in steps (fluid.c). */
    m.u.trigger.migrate_parallelism = !pause || j->rescale_stage < 0 || j->fluid ? 0 : j->rescale_to;
    m.u.trigger.moving = pause && !savepoint && !j->fluid ? coord_migration_moving(j, &m.u.trigger.n_moving)
                                                          : NULL;
    if (savepoint)
        snprintf(m.u.trigger.savepoint_uri, sizeof m.u.trigger.savepoint_uri, "%s", savepoint);
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (!coord_send_worker(c, w, &m) && w->alive && !pc->undelivered[0] && coord_job_on_worker(j, w->id))
            /* its tasks would never see the barrier: the tick gives it up at
             * once instead of after --checkpoint-timeout-ms */
            snprintf(pc->undelivered, sizeof pc->undelivered,
                     "its TRIGGER could not be sent to worker %u (%s), which runs tasks of the job "
                     "(its control connection is gone or its queue is full)",
                     w->id, w->name);
    free(m.u.trigger.moving);
}

void coord_checkpoint_discard(coord_t *c, coord_job_t *j)
{
    coord_pending_checkpoint_t *pc = j->pending;
    if (!pc)
        return;
    if (pc->savepoint) /* its client hears why; a savepoint is no checkpoint to count */
        coord_savepoint_fail(c, j, "its checkpoint was abandoned");
    else
        j->checkpoints_failed++;
    if (pc->committing) {
        /* its metadata put may still land: delete the key, then the files */
        delete_checkpoint(c, j, pc->id);
    } else {
        coord_reaper_remove(c->reaper, j->id, pc->id);
    }
    coord_pending_checkpoint_destroy(&j->pending);
}

void coord_checkpoint_abort(coord_t *c, coord_job_t *j, const char *why, bool counts)
{
    if (!j->pending)
        return;
    uint64_t id = j->pending->id;
    bool paused = j->pending->pause;
    bool savepoint = j->pending->savepoint;
    eddy_warn("job %s: checkpoint %" PRIu64 " abandoned: %s", j->id, id, why);
    if (savepoint)
        coord_savepoint_fail(c, j, why);
    coord_checkpoint_discard(c, j);
    if (paused && savepoint) {
        /* a stop-with-savepoint that failed: the sources go on */
        eddy_msg_t start = {.type = EDDY_MSG_START};
        start.u.start.job = j->num;
        start.u.start.epoch = j->epoch;
        coord_broadcast(c, &start);
    } else if (paused) {
        /* the sources stopped behind the barrier: let them go on */
        eddy_msg_t start = {.type = EDDY_MSG_START};
        start.u.start.job = j->num;
        start.u.start.epoch = j->epoch;
        coord_broadcast(c, &start);
        char msg[EDDY_ERROR_MAX + 32];
        snprintf(msg, sizeof msg, "rescale abandoned: %s", why);
        coord_rescale_abandon(c, j, msg);
        coord_job_set_state(c, j, JOB_RUNNING);
    }
    if (!counts)
        return;
    j->consecutive_checkpoint_failures++;
    uint32_t tolerable = c->opts->tolerable_checkpoint_failures;
    if (j->consecutive_checkpoint_failures >= tolerable) {
        char cause[EDDY_ERROR_MAX + 96];
        snprintf(cause, sizeof cause, "%u checkpoints in a row failed (the last, %" PRIu64 ": %.400s)",
                 j->consecutive_checkpoint_failures, id, why);
        j->consecutive_checkpoint_failures = 0;
        coord_restore_job(c, j, cause, true);
    }
}

/* ---- commit ---------------------------------------------------------------- */

static void complete(coord_t *c, coord_job_t *j)
{
    coord_pending_checkpoint_t *pc = j->pending;
    uint32_t n_finished;
    eddy_task_ref_t *finished = coord_pending_checkpoint_finished(pc, &n_finished);
    if (n_finished && !finished) {
        /* its record names them; a restore from memory must too */
        coord_checkpoint_abort(c, j, "out of memory", true);
        return;
    }
    j->pending = NULL;
    double duration = (double)(eddy_mono_ms() - pc->started_ms);
    coord_retained_push(j, pc->id, pc->positions, pc->n_positions, finished, n_finished);
    pc->positions = NULL;
    j->last_checkpoint_wall_ms = (uint64_t)eddy_wall_ms();
    j->last_checkpoint_ms = duration;
    j->last_checkpoint_cost = pc->cost;
    j->checkpoints_completed++;
    j->consecutive_checkpoint_failures = 0;
    j->consecutive_restarts = 0; /* the job makes progress again */
    coord_pending_checkpoint_destroy(&pc);
    eddy_msg_t m = {.type = EDDY_MSG_COMPLETE};
    m.u.complete.job = j->num;
    m.u.complete.checkpoint = j->last_checkpoint;
    coord_broadcast(c, &m);
    eddy_debug("job %s: checkpoint %" PRIu64 " complete in %.0f ms, %" PRIu64 " bytes in %" PRIu64
               " files (%" PRIu64 " key groups referred to earlier checkpoints); slowest task: sync %.3f ms, async %.3f ms, alignment %.3f ms", j->id,
               j->last_checkpoint, duration, j->last_checkpoint_cost.bytes, j->last_checkpoint_cost.files,
               j->last_checkpoint_cost.referenced,
               j->last_checkpoint_cost.sync_us / 1e3, j->last_checkpoint_cost.async_us / 1e3,
               j->last_checkpoint_cost.align_us / 1e3);
    coord_job_store_save(c, j, 3, NULL, NULL);
    apply_retention(c, j);
}

static void on_metadata_written(void *arg, const eddy_meta_result_t *res)
{
    coord_ticket_t *t = arg;
    coord_t *c = t->c;
    coord_job_t *j = coord_ticket_job(t);
    uint64_t id = t->checkpoint;
    bool current = j && !coord_job_ended(j) && j->pending && j->pending->id == id &&
                   j->pending->committing;
    if (!current) {
        /* restored, ended or timed out meanwhile: discard deleted the key */
        coord_ticket_release(t);
        return;
    }
    coord_ticket_release(t);
    if (res->rc == 0) {
        complete(c, j);
        return;
    }
    char why[EDDY_ERROR_MAX + 64];
    snprintf(why, sizeof why, "cannot record it in the metadata store after %u attempts: %.400s",
             res->attempts, res->err.msg);
    coord_checkpoint_abort(c, j, why, true);
}

static void commit(coord_t *c, coord_job_t *j)
{
    coord_pending_checkpoint_t *pc = j->pending;
    coord_checkpoint_record_t r = {.id = pc->id, .epoch = j->epoch, .time_ms = eddy_wall_ms(),
                                   .duration_ms = (double)(eddy_mono_ms() - pc->started_ms),
                                   .bytes = pc->cost.bytes, .files = pc->cost.files};
    coord_position_record_t *pos = calloc(pc->n_positions + 1, sizeof *pos);
    if (!pos) {
        coord_checkpoint_abort(c, j, "out of memory", true);
        return;
    }
    uint32_t k = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++) {
        snprintf(r.stage[s], sizeof r.stage[s], "%s", j->graph.stages[s].name);
        r.parallelism[s] = j->placement[s].parallelism;
        if (j->graph.stages[s].source)
            for (uint32_t i = 0; i < pc->parallelism[s] && k < pc->n_positions; i++, k++) {
                snprintf(pos[k].stage, sizeof pos[k].stage, "%s", j->graph.stages[s].name);
                pos[k].instance = i;
                pos[k].position = pc->positions[k].position;
                pos[k].state = pc->positions[k].state; /* borrowed for the encoding */
                pos[k].state_len = pc->positions[k].state_len;
            }
    }
    r.n_stages = j->graph.n_stages;
    r.n_positions = k;
    r.positions = pos;
    eddy_task_ref_t *finished = coord_pending_checkpoint_finished(pc, &r.n_finished);
    r.finished = r.n_finished ? calloc(r.n_finished, sizeof *r.finished) : NULL;
    if (r.n_finished && (!finished || !r.finished)) {
        free(finished);
        free(r.finished);
        free(pos);
        coord_checkpoint_abort(c, j, "out of memory", true);
        return;
    }
    for (uint32_t f = 0; f < r.n_finished; f++) {
        snprintf(r.finished[f].stage, sizeof r.finished[f].stage, "%s",
                 j->graph.stages[finished[f].stage].name);
        r.finished[f].instance = finished[f].instance;
    }
    free(finished);
    snprintf(r.snapshot_dir, sizeof r.snapshot_dir, "%.*s", (int)sizeof r.snapshot_dir - 1,
             coord_storage(c->opts));
    char *text = coord_checkpoint_record_encode(&r);
    free(pos);
    free(r.finished);
    coord_ticket_t *t = text ? coord_ticket_new(c, j, pc->id) : NULL;
    if (!t) {
        free(text);
        coord_checkpoint_abort(c, j, "out of memory", true);
        return;
    }
    pc->committing = true;
    char key[COORD_KEY_MAX];
    coord_checkpoint_key(key, sizeof key, j->id, pc->id);
    eddy_metastore_async_put(c->meta_async, key, text, strlen(text), COMMIT_RETRIES, on_metadata_written, t);
    free(text);
}

void coord_job_on_ack(coord_t *c, const eddy_msg_t *m)
{
    coord_job_t *j = coord_job_by_num(c, m->u.ack.job);
    if (j && m->u.ack.checkpoint == EDDY_FINAL_CHECKPOINT) {
        /* a task's final commit (see coord_job_on_task_done) */
        if (j->finishing && m->u.ack.epoch == j->epoch && !coord_job_ended(j) &&
            m->u.ack.error[0]) {
            /* e.g. a sink's final merge of its output failed */
            char why[EDDY_ERROR_MAX + 64];
            snprintf(why, sizeof why, "the final commit of task %u[%u] failed: %s",
                     m->u.ack.stage, m->u.ack.instance, m->u.ack.error);
            coord_fail_job(c, j, why);
            return;
        }
        if (j->finishing && m->u.ack.epoch == j->epoch && !coord_job_ended(j) &&
            --j->final_acks_pending == 0) {
            j->finishing = false;
            j->ended_ms = eddy_mono_ms();
            eddy_info("job %s finished in %.2f s", j->id, (double)(j->ended_ms - j->started_ms) / 1000.0);
            coord_job_set_state(c, j, JOB_FINISHED);
            coord_job_release(c, j);
        }
        return;
    }
    coord_pending_checkpoint_t *pc = j ? j->pending : NULL;
    if (!pc || m->u.ack.checkpoint != pc->id || m->u.ack.epoch != j->epoch || pc->committing)
        return; /* stale: an older checkpoint or epoch */
    if (m->u.ack.error[0]) {
        /* a declined checkpoint (an input ended) could never complete: not
         * a failure that brings the job nearer a restore */
        coord_checkpoint_abort(c, j, m->u.ack.error, !m->u.ack.declined);
        return;
    }
    if (m->u.ack.n_ended && !coord_finished_ack_ok(c, j, m))
        return; /* declined */
    coord_ack_verdict_t v = coord_pending_checkpoint_ack(pc, m->u.ack.stage, m->u.ack.instance,
                                                         m->u.ack.position, m->u.ack.source_state,
                                                         m->u.ack.source_state_len,
                                                         &(coord_checkpoint_cost_t){
                                                             .bytes = m->u.ack.bytes_written,
                                                             .files = m->u.ack.files_written,
                                                             .referenced = m->u.ack.files_referenced,
                                                             .sync_us = m->u.ack.sync_us,
                                                             .async_us = m->u.ack.async_us,
                                                             .align_us = m->u.ack.align_us});
    if (v == COORD_ACK_NO_MEMORY) {
        coord_checkpoint_abort(c, j, "out of memory keeping a source's state", true);
        return;
    }
    if (v != COORD_ACK_ACCEPTED) {
        coord_reject(&c->rejects,
                     v == COORD_ACK_DUPLICATE ? COORD_REJECT_DUPLICATE : COORD_REJECT_UNKNOWN_TASK,
                     "job %s: a %s ACK of checkpoint %" PRIu64 " from task %u[%u]", j->id,
                     v == COORD_ACK_DUPLICATE ? "duplicate" : "unknown task's", pc->id,
                     m->u.ack.stage, m->u.ack.instance);
        return;
    }
    if (!coord_pending_checkpoint_all_acked(pc))
        return;
    if (pc->savepoint)
        coord_savepoint_on_acked(c, j);
    else if (pc->pause && j->rescale_stage >= 0)
        coord_rescale_on_snapshot(c, j);
    else
        commit(c, j);
}

/* ---- timers ------------------------------------------------------------------ */

static const char *graph_stage_name(const void *graph, uint32_t stage)
{
    return ((const eddy_job_graph_t *)graph)->stages[stage].name;
}

void coord_checkpoint_tick(coord_t *c, coord_job_t *j, uint64_t now_ms)
{
    if (j->pending) {
        if (j->pending->undelivered[0] && !j->pending->committing) {
            char why[sizeof j->pending->undelivered];
            snprintf(why, sizeof why, "%s", j->pending->undelivered);
            coord_checkpoint_abort(c, j, why, true);
        } else if (now_ms > j->pending->started_ms + c->opts->checkpoint_timeout_ms) {
            char why[EDDY_ERROR_MAX], missing[320];
            if (!j->pending->committing &&
                coord_pending_checkpoint_missing_text(j->pending, graph_stage_name, &j->graph,
                                                      missing, sizeof missing) > 0)
                snprintf(why, sizeof why, "timed out (%u of %u tasks acknowledged; none from %s)",
                         j->pending->n_acked, j->pending->n_tasks, missing);
            else
                snprintf(why, sizeof why, "timed out while its metadata was being recorded");
            coord_checkpoint_abort(c, j, why, true);
        }
        coord_savepoint_tick(c, j);
        return;
    }
    if (j->savepoint && j->state == JOB_RUNNING && !coord_fluid_step_in_flight(j) &&
        !j->deploys_pending && !j->deploy_persisting) {
        coord_checkpoint_trigger(c, j, false); /* the savepoint requested */
        return;
    }
    if (j->state == JOB_RESCALING && !j->deploys_pending && !j->deploy_persisting && j->rescale_stage >= 0) {
        coord_checkpoint_trigger(c, j, true); /* a periodic checkpoint was in the way */
        return;
    }
    coord_fluid_tick(c, j, now_ms);
    if (coord_checkpoint_due(c, j, now_ms))
        coord_checkpoint_trigger(c, j, false);
}

bool coord_checkpoint_due(const coord_t *c, const coord_job_t *j, uint64_t now_ms)
{
    uint32_t fs, fi;
    return !j->pending && j->state == JOB_RUNNING && !coord_finished_blocks_checkpoints(j, &fs, &fi) &&
           c->opts->checkpoint_interval_ms &&
           !coord_fluid_step_in_flight(j) && !j->deploys_pending && !j->deploy_persisting &&
           now_ms >= j->last_trigger_ms + c->opts->checkpoint_interval_ms;
}
