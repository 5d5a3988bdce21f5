/* task_barrier.c - barrier alignment and checkpoints (see task_internal.h).
 *
 * Aligned barriers follow Flink's asynchronous barrier snapshots: a channel
 * that delivered barrier n is blocked until every other live input
 * delivered it too; then state is written, the coordinator gets an ACK and
 * the barrier goes on to every output channel, behind all earlier batches.
 * Under --guarantee at-least-once (Flink's AT_LEAST_ONCE checkpointing
 * mode) barriers are not aligned: a channel that delivered its barrier
 * keeps flowing, the snapshot is taken when the last one arrives and so may
 * hold effects of records after the barrier, which a restore replays
 * (duplicates, never losses); no channel waits for a slow one. A sudden
 * rescale's migration snapshot is always aligned (its sources pause at the
 * barrier, so nothing follows it anyway). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "state/keyed_state.h"
#include "state/keygroup.h"
#include "state/source_time.h"
#include "runtime/task_internal.h"

/* Pre-commit of every two-phase-commit operator in the chain; the fsyncs
 * they leave in sync run on the snapshot writer before the ACK. */
int task_prepare_chain(eddy_task_t *t, uint64_t checkpoint, eddy_sync_list_t *sync,
                         eddy_err_t *err)
{
    for (uint32_t i = 0; i < t->def->n_ops; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (ops->prepare && ops->prepare(t->ops[i], checkpoint, sync, err) < 0)
            return eddy_err_wrap(err, "%s[%u]: %s: prepare of checkpoint %llu", t->def->name,
                                 t->instance, ops->kind, (unsigned long long)checkpoint);
    }
    return 0;
}

/* A unit for the snapshot writer that only runs sync (taken) and then
 * sends msg; NULL when sync is empty. On allocation failure the fsyncs run
 * here, on the loop, and msg is left for the caller (error filled). */
eddy_snapshot_unit_t *task_sync_unit(eddy_sync_list_t **sync, const eddy_msg_t *msg,
                                       eddy_err_t *err)
{
    if (!*sync || eddy_sync_list_empty(*sync)) {
        eddy_sync_list_destroy(sync);
        return NULL;
    }
    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(0);
    if (!u) {
        eddy_sync_list_run(*sync, err);
        eddy_sync_list_destroy(sync);
        return NULL;
    }
    u->sync_only = true;
    u->sync = *sync;
    *sync = NULL;
    u->ack = *msg;
    return u;
}

/* A source's event-time progress as a one-group unit (state/source_time.h):
 * written and made durable by the snapshot writer before the ACK goes, so a
 * completed checkpoint always has it. Migration snapshots get it too (no
 * fsync, like their key groups): a task restored from one resumes from it. */
static eddy_snapshot_unit_t *source_time_unit(eddy_task_t *t, uint64_t checkpoint, bool migration,
                                              eddy_err_t *err)
{
    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(1);
    eddy_source_time_t st = {t->watermark, t->max_timestamp};
    if (u)
        u->data[0] = eddy_source_time_encode(&st, &u->lens[0]);
    if (!u || !u->data[0]) {
        if (u)
            eddy_snapshot_unit_free(u);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(u->root, sizeof u->root, "%s", eddy_snapshot_store_root(t->env->store));
    snprintf(u->job, sizeof u->job, "%s", t->job_id);
    snprintf(u->op, sizeof u->op, "%s", t->def->name);
    u->checkpoint = checkpoint;
    u->durable = !migration;
    u->groups[0] = t->instance;
    u->n_groups = 1;
    return u;
}

/* A source resuming from a checkpoint resumes its event time too: its
 * watermark never goes below one it emitted before (Flink keeps the
 * watermark in the source's checkpointed state for the same reason). */
int task_restore_source_time(eddy_task_t *t, uint64_t checkpoint, eddy_err_t *err)
{
    char *data;
    size_t len;
    if (eddy_snapshot_store_read_group(task_restore_store(t, checkpoint), task_restore_job(t, checkpoint), checkpoint,
                                       t->def->name, t->instance, &data, &len, err) < 0)
        return eddy_err_wrap(err, "source %s[%u]: event time of checkpoint %llu", t->def->name,
                             t->instance, (unsigned long long)checkpoint);
    eddy_source_time_t st;
    int rc = eddy_source_time_decode(data, len, &st, err);
    free(data);
    if (rc < 0)
        return eddy_err_wrap(err, "source %s[%u]: checkpoint %llu", t->def->name, t->instance,
                             (unsigned long long)checkpoint);
    t->watermark = st.watermark;
    t->max_timestamp = st.max_timestamp;
    return 0;
}

/* Operators that hold back output emit it, so it travels ahead of the
 * barrier and no checkpoint depends on what they held. */
void task_flush_chain(eddy_task_t *t)
{
    for (uint32_t i = 0; i < t->def->n_ops && !t->fault; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (ops->flush && ops->flush(t->ops[i], &t->links[i + 1].base, &t->fault_err) < 0)
            t->fault = true;
    }
}

/* The source's progress as bytes (write_state), taken with its position.
 * A failure or an oversized state fails the task and the checkpoint. */
static void source_state_into_ack(eddy_task_t *t, eddy_msg_t *ack)
{
    const eddy_source_ops_t *src = t->def->source;
    if (!t->source || !src->write_state)
        return;
    char *bytes = NULL;
    size_t len = 0;
    eddy_err_t err = {{0}};
    if (src->write_state(t->source, &bytes, &len, &err) < 0) {
        free(bytes);
        eddy_err_wrap(&err, "%s: write_state", src->kind);
        task_set_fault(t, err.msg);
    } else if (len > EDDY_SOURCE_STATE_MAX) {
        free(bytes);
        snprintf(err.msg, sizeof err.msg, "%s: source state of %zu bytes exceeds the limit of %u bytes",
                 src->kind, len, EDDY_SOURCE_STATE_MAX);
        task_set_fault(t, err.msg);
    } else {
        if (len == 0) {
            free(bytes);
            bytes = NULL;
        }
        ack->u.ack.source_state = bytes;
        ack->u.ack.source_state_len = (uint32_t)len;
        return;
    }
    snprintf(ack->u.ack.error, sizeof ack->u.ack.error, "%s", t->fault_err.msg);
}

/* This task's ACK of checkpoint, its fields beyond the task's to fill. */
static eddy_msg_t ack_of(const eddy_task_t *t, uint64_t checkpoint)
{
    eddy_msg_t ack = {.type = EDDY_MSG_ACK};
    ack.u.ack.job = t->job;
    ack.u.ack.epoch = t->epoch;
    ack.u.ack.checkpoint = checkpoint;
    ack.u.ack.stage = t->stage;
    ack.u.ack.instance = t->instance;
    ack.u.ack.position = -1;
    return ack;
}

/* The inputs whose upstream sent its end of stream before the barrier, in
 * the ACK: the coordinator accepts it only if each of those upstream tasks
 * reported TASK_DONE (a forged end of stream must not let this task
 * snapshot without the records its real upstream sent before the barrier). */
static void ended_inputs_into_ack(const eddy_task_t *t, eddy_msg_t *ack)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->n_inputs; i++)
        n += t->inputs[i].eos_received;
    if (n == 0)
        return;
    if (n > EDDY_TASK_REFS_MAX || !(ack->u.ack.ended = calloc(n, sizeof *ack->u.ack.ended))) {
        snprintf(ack->u.ack.error, sizeof ack->u.ack.error,
                 "%s[%u]: cannot name its %u ended inputs", t->def->name, t->instance, n);
        return;
    }
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (t->inputs[i].eos_received)
            ack->u.ack.ended[ack->u.ack.n_ended++] =
                (eddy_task_ref_t){t->inputs[i].src_stage, t->inputs[i].src_instance};
}

void task_take_checkpoint(eddy_task_t *t, uint64_t checkpoint)
{
    uint64_t t0 = eddy_mono_ns();
    task_flush_chain(t);
    eddy_msg_t ack = ack_of(t, checkpoint);
    ack.u.ack.position = t->source ? t->def->source->position(t->source) : -1;
    ended_inputs_into_ack(t, &ack);
    if (!ack.u.ack.error[0])
        source_state_into_ack(t, &ack);
    eddy_snapshot_unit_t *unit = NULL;
    bool migration = checkpoint == t->env->migration_checkpoint;
    bool savepoint = checkpoint == t->env->savepoint_checkpoint;
    eddy_err_t perr = {{0}};
    eddy_sync_list_t *sync = eddy_sync_list_new();
    if (!ack.u.ack.error[0] && task_prepare_chain(t, checkpoint, sync, &perr) < 0)
        snprintf(ack.u.ack.error, sizeof ack.u.ack.error, "%s", perr.msg);
    /* In a migration snapshot only the rescaled stage moves state. */
    if (t->state && !ack.u.ack.error[0] && (!migration || t->stage == t->env->migrate_stage)) {
        eddy_err_t err = {{0}};
        uint32_t referenced = 0;
        if (!migration) /* which groups are written, which referred to */
            task_chain_plan(t, checkpoint, savepoint, &referenced);
        /* Asynchronous: a view now, bytes (and bytes_written) on the writer. */
        unit = !migration && t->env->snapshot_async ? task_view_state(t, checkpoint, &err)
                                                    : task_serialise_state(t, checkpoint, migration, &err);
        if (unit && !migration && !savepoint && task_chain_manifest(t, unit, &err) < 0) {
            eddy_snapshot_unit_free(unit);
            unit = NULL;
        }
        if (!unit)
            snprintf(ack.u.ack.error, sizeof ack.u.ack.error, "%s", err.msg);
        ack.u.ack.state_keys = eddy_keyed_state_keys(t->state);
        for (uint32_t i = 0; unit && i < unit->n_groups; i++)
            ack.u.ack.bytes_written += unit->lens[i];
        ack.u.ack.bytes_written += unit ? unit->manifest_len : 0;
        ack.u.ack.files_written = unit ? unit->n_groups + (unit->manifest != NULL) : 0;
        ack.u.ack.files_referenced = unit ? referenced : 0;
    }
    if (t->source && t->def->event_time.enabled && t->env->store && !ack.u.ack.error[0]) {
        eddy_err_t err = {{0}};
        unit = source_time_unit(t, checkpoint, migration, &err);
        if (!unit)
            snprintf(ack.u.ack.error, sizeof ack.u.ack.error, "%s", err.msg);
    }
    /* A savepoint's state goes to its own location, self-contained. */
    if (unit && savepoint)
        snprintf(unit->root, sizeof unit->root, "%s", t->env->savepoint_root);
    /* The barrier goes downstream behind everything emitted before it. */
    task_broadcast_small(t, checkpoint, false);
    if (unit) {
        unit->sync = sync;
        sync = NULL;
    } else {
        eddy_err_t serr = {{0}};
        unit = task_sync_unit(&sync, &ack, &serr);
        if (serr.msg[0] && !ack.u.ack.error[0])
            snprintf(ack.u.ack.error, sizeof ack.u.ack.error, "%s", serr.msg);
    }
    eddy_sync_list_destroy(&sync);
    ack.u.ack.align_us = t->align_started_ns ? (t0 - t->align_started_ns) / 1000 : 0;
    t->align_started_ns = 0;
    if (unit) {
        unit->ack = ack;
        unit->barrier_ns = eddy_mono_ns() - t0; /* the worker puts it in the ACK */
        t->env->submit_snapshot(t->env->host, unit);
    } else {
        ack.u.ack.sync_us = (eddy_mono_ns() - t0) / 1000;
        t->env->notify(t->env->host, &ack);
        eddy_msg_clear(&ack); /* its source state and ended inputs */
    }
}

/* A checkpoint whose barrier met a fluid migration step in flight cannot
 * hold the moving key groups soundly (one between two owners would be in
 * no snapshot, or in two). The barrier still goes downstream, so no task
 * there waits for it; the ACK declines. (An input that ended no longer
 * declines: the checkpoint is taken and its ACK names the ended inputs,
 * see ended_inputs_into_ack.) */
static void decline_checkpoint(eddy_task_t *t, uint64_t checkpoint)
{
    task_flush_chain(t);
    task_broadcast_small(t, checkpoint, false);
    eddy_msg_t ack = ack_of(t, checkpoint);
    ack.u.ack.declined = true;
    snprintf(ack.u.ack.error, sizeof ack.u.ack.error,
             "task %s[%u] declined it: a fluid migration step was in flight at the barrier",
             t->def->name, t->instance);
    t->env->notify(t->env->host, &ack);
}

void task_check_alignment(eddy_task_t *t)
{
    uint64_t checkpoint = 0;
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (t->inputs[i].barrier) {
            checkpoint = t->inputs[i].barrier;
            break;
        }
    if (!checkpoint)
        return;
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (!t->inputs[i].eos && t->inputs[i].barrier != checkpoint)
            return;
    if (task_migration_in_flight(t))
        decline_checkpoint(t, checkpoint);
    else
        task_take_checkpoint(t, checkpoint);
    for (uint32_t i = 0; i < t->n_inputs; i++)
        t->inputs[i].barrier = 0;
}

/* Whether checkpoint's barrier holds back the channels that delivered it:
 * always, except under at-least-once (see the top of this file). */
static bool barriers_align(const eddy_task_t *t, uint64_t checkpoint)
{
    return t->env->guarantee != EDDY_GUARANTEE_AT_LEAST_ONCE ||
           checkpoint == t->env->migration_checkpoint;
}

bool task_channel_blocked(const eddy_task_t *t, const input_channel_t *in)
{
    return in->barrier && barriers_align(t, in->barrier);
}


/* The first barrier of a checkpoint starts its alignment (the ACK's
 * align_us): no channel holds one yet. */
static void note_alignment_start(eddy_task_t *t)
{
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (t->inputs[i].barrier)
            return;
    t->align_started_ns = eddy_mono_ns();
}

/* A channel delivered checkpoint's barrier. An aligned channel is blocked,
 * so it cannot deliver another before the checkpoint is taken. An unaligned
 * one can, once a checkpoint was given up (timed out at the coordinator)
 * while a slow channel still had its barrier on the way: the newer barrier
 * supersedes the older one (which can no longer complete) and a stale
 * barrier arriving after a newer one is ignored, as Flink's
 * CheckpointBarrierTracker does. */
void task_note_barrier(eddy_task_t *t, input_channel_t *in, uint64_t checkpoint)
{
    if (!barriers_align(t, checkpoint)) {
        for (uint32_t i = 0; i < t->n_inputs; i++) {
            if (t->inputs[i].barrier > checkpoint)
                return; /* stale */
            if (t->inputs[i].barrier && t->inputs[i].barrier < checkpoint)
                t->inputs[i].barrier = 0;
        }
    }
    note_alignment_start(t);
    in->barrier = checkpoint;
}
