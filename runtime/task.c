/* task.c - execution of one stage instance (see task.h, task_internal.h).
 *
 * Owns the task's lifecycle (open, rewire hooks, destroy), the operator
 * chain and its collectors, and the record loop: scheduling, time slices,
 * sources (rate, watermarks, idleness), consuming input messages, and the
 * end of input. Input and output channels, barrier alignment, key-group
 * state and metrics live in the task_*.c files next to this one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "state/keyed_state.h"
#include "state/keygroup.h"
#include "runtime/task_internal.h"

/* ---- output side ------------------------------------------------------- */

void task_set_fault(eddy_task_t *t, const char *what)
{
    if (t->fault)
        return;
    t->fault = true;
    eddy_err_set(&t->fault_err, "%s[%u]: %s", t->def->name, t->instance, what);
}

/* The first fault of the task, as the step's error. */
int task_take_fault(eddy_task_t *t, eddy_err_t *err)
{
    if (err)
        *err = t->fault_err;
    return -1;
}

/* ---- operator chain ---------------------------------------------------- */

void task_chain_emit(eddy_collector_t *c, const eddy_record_t *rec)
{
    chain_link_t *link = (chain_link_t *)c;
    eddy_task_t *t = link->task;
    eddy_record_t stamped;
    if (link->next_op == 0 && t->source) {
        t->records_in++; /* a source's input is what it reads from outside */
        t->tokens -= 1.0;
        const eddy_event_time_t *et = &t->def->event_time;
        if (et->enabled) {
            stamped = *rec;
            if (et->timestamp)
                stamped.timestamp = et->timestamp(rec);
            if (stamped.timestamp > t->max_timestamp)
                t->max_timestamp = stamped.timestamp;
            t->idle_out = false; /* the record itself wakes the channel downstream */
            rec = &stamped;
        }
    }
    uint32_t next = link->next_op;
    /* A late record is not data: it passes every operator that does not
     * ask for late records, unchanged (the one place of this rule, see
     * api/operator.h). */
    if (rec->kind == EDDY_LATE) {
        while (next < t->def->n_ops && !t->def->ops[next].ops->sees_late)
            next++;
        if (next >= t->def->n_ops && t->n_groups == 0)
            return; /* past a sink: nowhere to go, and not an output record */
    }
    if (next >= t->def->n_ops) {
        task_route(t, rec);
        return;
    }
    const eddy_operator_ops_t *ops = t->def->ops[next].ops;
    if (t->fault) /* the task fails at the end of this step: nothing more counts */
        return;
    if (ops->process(t->ops[next], rec, &t->links[next + 1].base, &t->fault_err) < 0)
        t->fault = true;
}

/* The task's watermark moved to wm: each chained operator fires what it
 * must (its output feeding the next one), then wm goes downstream. */
void task_advance_watermark(eddy_task_t *t, int64_t wm)
{
    if (wm <= t->watermark)
        return;
    if (t->wm_held) {
        /* Groups are arriving whose held records must not be late, or
         * leaving whose windows must not fire without the records already
         * sent to their new owner: the clock waits for them, even at the
         * end of input (task_migrate.c). */
        if (wm > t->wm_pending)
            t->wm_pending = wm;
        return;
    }
    t->watermark = wm;
    for (uint32_t i = 0; i < t->def->n_ops && !t->fault; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (ops->watermark &&
            ops->watermark(t->ops[i], wm, &t->links[i + 1].base, &t->fault_err) < 0)
            t->fault = true;
    }
    if (!t->fault)
        task_broadcast_watermark(t, wm, false);
    t->idle_out = false;
}


/* The idle status goes downstream behind everything emitted before it,
 * also what a pre-aggregation held back: downstream stops waiting for this
 * channel, so held records sent later would be judged late there. */
static void broadcast_idle(eddy_task_t *t)
{
    task_flush_chain(t);
    t->idle_out = true;
    task_broadcast_watermark(t, t->watermark, true);
}

/* Sources: the bounded-out-of-orderness watermark, every interval, and the
 * idle status after idle_ms without a record. */
static void source_watermark(eddy_task_t *t, uint64_t now_ns)
{
    const eddy_event_time_t *et = &t->def->event_time;
    if (!et->enabled || t->finished)
        return;
    if (now_ns - t->last_wm_ns >= (uint64_t)et->interval_ms * 1000000u) {
        t->last_wm_ns = now_ns;
        if (t->max_timestamp != EDDY_WATERMARK_MIN) {
            int64_t wm = t->max_timestamp < EDDY_WATERMARK_MIN + et->max_delay_ms + 1
                             ? EDDY_WATERMARK_MIN
                             : t->max_timestamp - et->max_delay_ms - 1;
            task_advance_watermark(t, wm);
        }
    }
    if (et->idle_ms > 0 && !t->idle_out &&
        now_ns - t->last_record_ns >= (uint64_t)et->idle_ms * 1000000u)
        broadcast_idle(t);
}

static int run_finish_chain(eddy_task_t *t, eddy_err_t *err)
{
    for (uint32_t i = 0; i < t->def->n_ops; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (ops->finish && ops->finish(t->ops[i], &t->links[i + 1].base, err) < 0)
            return -1;
        if (t->fault)
            return task_take_fault(t, err);
    }
    return 0;
}

static void report_done(eddy_task_t *t)
{
    eddy_msg_t m = {.type = EDDY_MSG_TASK_DONE};
    m.u.task_done.job = t->job;
    m.u.task_done.epoch = t->epoch;
    m.u.task_done.stage = t->stage;
    m.u.task_done.instance = t->instance;
    t->env->notify(t->env->host, &m);
}


static int finish_task(eddy_task_t *t, eddy_err_t *err)
{
    /* End of input: every window fires (Flink's MAX_WATERMARK). A finish
     * waits for any fluid step in flight, so nothing holds the clock now. */
    t->wm_held = false;
    task_advance_watermark(t, EDDY_WATERMARK_MAX);
    if (t->fault)
        return task_take_fault(t, err);
    if (run_finish_chain(t, err) < 0)
        return -1;
    /* What is left is published only when the whole job is done (the
     * coordinator's COMPLETE(EDDY_FINAL_CHECKPOINT)): a restore before that
     * replays it, so publishing now could duplicate it. */
    eddy_sync_list_t *sync = eddy_sync_list_new();
    if (task_prepare_chain(t, EDDY_FINAL_CHECKPOINT, sync, err) < 0) {
        eddy_sync_list_destroy(&sync);
        return -1;
    }
    task_broadcast_small(t, 0, true);
    if (t->fault)
        return task_take_fault(t, err);
    t->finished = true;
    /* TASK_DONE only once what was prepared is durable. */
    eddy_msg_t done = {.type = EDDY_MSG_TASK_DONE};
    done.u.task_done.job = t->job;
    done.u.task_done.epoch = t->epoch;
    done.u.task_done.stage = t->stage;
    done.u.task_done.instance = t->instance;
    eddy_err_t serr = {{0}};
    eddy_snapshot_unit_t *unit = task_sync_unit(&sync, &done, &serr);
    if (unit)
        t->env->submit_snapshot(t->env->host, unit);
    else if (serr.msg[0])
        return eddy_err_set(err, "%s", serr.msg);
    else
        report_done(t);
    return 0;
}

/* A task restored as finished (FLIP-147): it ended before the checkpoint
 * it was restored from, whose other tasks hold everything it sent, so it
 * starts at its end: end of stream downstream, nothing read, replayed or
 * run through its operators, and TASK_DONE again for this epoch. */
static int finish_restored(eddy_task_t *t, eddy_err_t *err)
{
    t->start_finished = false;
    task_broadcast_small(t, 0, true);
    if (t->fault)
        return task_take_fault(t, err);
    t->finished = true;
    report_done(t);
    return 0;
}

/* ---- lifecycle --------------------------------------------------------- */

eddy_task_t *eddy_task_new(eddy_task_env_t *env, const eddy_task_config_t *cfg, eddy_err_t *err)
{
    eddy_task_t *t = calloc(1, sizeof *t);
    if (!t) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    t->env = env;
    t->job = cfg->job;
    t->epoch = cfg->epoch;
    snprintf(t->job_id, sizeof t->job_id, "%s", cfg->job_id);
    t->graph = cfg->graph;
    t->stage = cfg->stage;
    t->instance = cfg->instance;
    t->def = &cfg->graph->stages[cfg->stage];
    t->parallelism = cfg->placement.stages[cfg->stage].parallelism;
    t->created_ns = t->last_refill_ns = t->last_account_ns = eddy_mono_ns();
    t->clock_offset_s = cfg->start_time_s;

    t->ctx.job_id = t->job_id;
    t->ctx.stage_name = t->def->name;
    t->ctx.stage = t->stage;
    t->ctx.instance = t->instance;
    t->ctx.parallelism = t->parallelism;
    t->ctx.max_parallelism = t->graph->max_parallelism;
    t->ctx.job_config = t->graph->config;
    t->ctx.key_fn = t->def->key_fn;
    if (t->def->second_input >= 0) {
        t->ctx.second_key_fn = t->def->second_key_fn;
        t->ctx.input = &t->current_input;
    }
    t->start_finished = cfg->start_finished;
    /* A finished task restores nothing: the checkpoint has none of its state. */
    uint64_t restore = cfg->start_finished ? 0 : cfg->restore_checkpoint;
    t->ctx.restored_checkpoint = restore;
    t->ctx.late_records = &t->late_records;
    t->ctx.rejected_records = &t->rejected_records;
    t->ctx.report = &t->report;
    t->source_lag = -1;
    t->ctx.source_lag = &t->source_lag;
    t->wait_fd = -1;
    t->ctx.wait_fd = &t->wait_fd;
    t->ctx.epoch = t->epoch;
    t->watermark = EDDY_WATERMARK_MIN;
    t->max_timestamp = EDDY_WATERMARK_MIN;
    t->last_wm_ns = t->last_record_ns = t->created_ns;
    for (uint32_t i = 0; i < t->def->n_ops; i++)
        if (t->def->ops[i].ops->watermark || t->def->ops[i].ops->tick)
            t->time_ops = true;
    if (eddy_stage_is_keyed(t->def)) {
        t->ctx.key_groups = task_owned_range(t, cfg->placement);
        size_t value_size = 8;
        for (uint32_t i = 0; i < t->def->n_ops; i++)
            if (t->def->ops[i].ops->state_value_size)
                value_size = t->def->ops[i].ops->state_value_size(t->def->ops[i].config);
        t->state = eddy_keyed_state_new(t->graph->max_parallelism, value_size);
        if (!t->state) {
            eddy_err_set(err, "out of memory");
            goto fail;
        }
        t->ctx.keyed_state = t->state;
        t->held = calloc(t->graph->max_parallelism, 1);
        if (!t->held) {
            eddy_err_set(err, "out of memory");
            goto fail;
        }
        if (task_chain_open(t, err) < 0)
            goto fail;
        /* Without a checkpoint to restore, the owned groups start empty. */
        if (restore == 0)
            for (uint32_t kg = t->ctx.key_groups.start; kg < t->ctx.key_groups.end; kg++)
                t->held[kg] = 1;
    }

    for (uint32_t i = 0; i <= EDDY_MAX_CHAIN; i++) {
        t->links[i].base.emit = task_chain_emit;
        t->links[i].task = t;
        t->links[i].next_op = i;
    }
    if (task_build_inputs(t, cfg->placement, err) < 0 || task_build_groups(t, cfg->placement, err) < 0 ||
        task_build_peers(t, cfg->placement, err) < 0)
        goto fail;
    for (uint32_t i = 0; i < t->def->n_ops; i++) {
        eddy_op_context_t ctx = t->ctx;
        ctx.config = t->def->ops[i].config;
        if (t->def->ops[i].key_fn)
            ctx.key_fn = t->def->ops[i].key_fn;
        t->ops[i] = t->def->ops[i].ops->open(&ctx, err);
        if (!t->ops[i]) {
            eddy_err_wrap(err, "stage %s[%u]: %s", t->def->name, t->instance, t->def->ops[i].ops->kind);
            goto fail;
        }
    }
    /* A source restored as finished is not opened: it reads nothing (and a
     * queue's reader must not claim entries it would never emit). */
    if (t->def->source && !cfg->start_finished) {
        eddy_op_context_t ctx = t->ctx;
        ctx.config = t->def->source_config;
        ctx.source_state = cfg->source_state_len ? cfg->source_state : NULL;
        ctx.source_state_len = cfg->source_state ? cfg->source_state_len : 0;
        t->source = t->def->source->open(&ctx, cfg->start_position, err);
        if (!t->source) {
            eddy_err_wrap(err, "source %s[%u]", t->def->name, t->instance);
            goto fail;
        }
        if (t->def->event_time.enabled && t->env->store && restore &&
            cfg->start_position >= 0 && task_restore_source_time(t, restore, err) < 0)
            goto fail;
    }
    return t;
fail:
    eddy_task_destroy(&t);
    return NULL;
}

void eddy_task_abort(eddy_task_t *self)
{
    for (uint32_t i = 0; i < self->def->n_ops; i++)
        if (self->ops[i] && self->def->ops[i].ops->abort)
            self->def->ops[i].ops->abort(self->ops[i]);
}

void eddy_task_destroy(eddy_task_t **self_p)
{
    eddy_task_t *t = *self_p;
    if (!t)
        return;
    for (uint32_t i = 0; i < t->def->n_ops; i++)
        if (t->ops[i] && t->def->ops[i].ops->close)
            t->def->ops[i].ops->close(t->ops[i]);
    if (t->source && t->def->source->close)
        t->def->source->close(t->source);
    task_free_inputs(t);
    task_free_groups(t);
    task_free_migration(t);
    eddy_keyed_state_destroy(&t->state);
    task_chain_close(t);
    free(t->held);
    free(t);
    *self_p = NULL;
}

uint32_t eddy_task_stage(const eddy_task_t *self) { return self->stage; }
uint32_t eddy_task_instance(const eddy_task_t *self) { return self->instance; }
bool eddy_task_is_source(const eddy_task_t *self) { return self->source != NULL; }
bool eddy_task_finished(const eddy_task_t *self) { return self->finished; }
bool eddy_task_failed(const eddy_task_t *self) { return self->failed; }

void eddy_task_commit(eddy_task_t *self, uint64_t checkpoint, eddy_sync_list_t *sync)
{
    /* What it wrote in checkpoint is a base for later ones now. */
    if (self->chain && checkpoint != EDDY_FINAL_CHECKPOINT)
        eddy_snapshot_chain_completed(self->chain, checkpoint);
    for (uint32_t i = 0; i < self->def->n_ops; i++)
        if (self->ops[i] && self->def->ops[i].ops->commit)
            self->def->ops[i].ops->commit(self->ops[i], checkpoint, sync);
    if (self->source && self->def->source->commit)
        self->def->source->commit(self->source, checkpoint);
}

void eddy_task_set_running(eddy_task_t *self, bool running)
{
    if (running && !self->running)
        self->last_refill_ns = eddy_mono_ns();
    self->running = running;
}

void eddy_task_trigger(eddy_task_t *self, uint64_t checkpoint, bool pause_after)
{
    if (!self->source || self->finished)
        return;
    self->trigger_checkpoint = checkpoint;
    self->trigger_pause = pause_after;
}

/* ---- scheduling -------------------------------------------------------- */

#define EDDY_SOURCE_REST_NS ((uint64_t)EDDY_SOURCE_REST_MS * 1000000u)

static double source_allowance(eddy_task_t *t, uint64_t now_ns)
{
    double elapsed = t->clock_offset_s + (double)(now_ns - t->created_ns) / 1e9;
    /* --rate is the stage's total; each instance takes its share. */
    double rate = eddy_rate_at(&t->def->rate, elapsed) / (t->parallelism ? t->parallelism : 1);
    t->offered_rate = rate;
    if (rate <= 0) {
        t->tokens = 0;
        t->last_refill_ns = now_ns;
        return EDDY_SOURCE_STEP_RECORDS;
    }
    double dt = now_ns > t->last_refill_ns ? (double)(now_ns - t->last_refill_ns) / 1e9 : 0;
    t->last_refill_ns = now_ns;
    t->tokens += dt * rate;
    double cap = rate * 0.05 > EDDY_SOURCE_STEP_RECORDS ? rate * 0.05 : EDDY_SOURCE_STEP_RECORDS;
    if (t->tokens > cap)
        t->tokens = cap;
    return t->tokens;
}


bool eddy_task_runnable(eddy_task_t *self, uint64_t now_ns)
{
    if (self->finished)
        return false;
    if (self->start_finished) /* after START, so every peer has its tasks */
        return self->running;
    if (self->fault) /* the next step reports it */
        return true;
    if (task_fluid_wake(self) <= now_ns) /* a held transfer may go */
        return true;
    if (!self->source && self->n_inputs && task_all_inputs_ended(self) &&
        !task_migration_in_flight(self)) /* its finish waited for a fluid step */
        return true;
    if (task_outputs_backlogged(self))
        return false;
    if (self->source) {
        if (self->trigger_checkpoint)
            return true;
        if (!self->running || self->source_done || self->waiting_fd ||
            now_ns < self->source_idle_until_ns)
            return false;
        return source_allowance(self, now_ns) >= 1.0;
    }
    for (uint32_t i = 0; i < self->n_inputs; i++)
        if (self->inputs[i].head && !self->inputs[i].hold_full &&
            !task_channel_blocked(self, &self->inputs[i]))
            return true;
    return false;
}

/* A step ends when its time slice is used up or an output channel piles up
 * batches (its downstream could not take more anyway). The clock is read
 * after 1, 2, 4, ... units, then every SLICE_CHECK_MAX: a costly record is
 * noticed at once, and cheap ones pay one clock read per SLICE_CHECK_MAX. */
#define SLICE_CHECK_MAX 64u

typedef struct slice {
    uint64_t deadline_ns;
    uint32_t done, next_check;
} slice_t;

static void slice_begin(slice_t *s, uint64_t now_ns)
{
    s->deadline_ns = now_ns + EDDY_TASK_SLICE_NS;
    s->done = 0;
    s->next_check = 1;
}

static bool slice_ended(const eddy_task_t *t, const slice_t *s)
{
    return eddy_mono_ns() >= s->deadline_ns || task_outputs_piling_up(t);
}

/* slice_ended, checked on the schedule above as `units` more are done. */
static bool slice_over(const eddy_task_t *t, slice_t *s, uint32_t units)
{
    s->done += units;
    if (s->done < s->next_check)
        return false;
    s->next_check = s->done + (s->done < SLICE_CHECK_MAX ? s->done : SLICE_CHECK_MAX);
    return slice_ended(t, s);
}

/* Polls the source in growing chunks (so a costly chain is stopped at the
 * slice) up to its step and rate allowance. */
static int step_source(eddy_task_t *t, uint64_t now_ns, eddy_err_t *err)
{
    if (t->trigger_checkpoint) {
        uint64_t checkpoint = t->trigger_checkpoint;
        t->trigger_checkpoint = 0;
        task_take_checkpoint(t, checkpoint);
        if (t->trigger_pause)
            t->running = false;
        return t->fault ? task_take_fault(t, err) : 0;
    }
    double allowance = source_allowance(t, now_ns);
    uint32_t max = allowance >= EDDY_SOURCE_STEP_RECORDS ? EDDY_SOURCE_STEP_RECORDS : (uint32_t)allowance;
    slice_t slice;
    slice_begin(&slice, now_ns);
    for (uint32_t done = 0, chunk = 1; done < max; chunk *= 2) {
        uint32_t ask = chunk < max - done ? chunk : max - done;
        uint64_t before = t->records_in;
        /* What this poll reads is ingested now (one clock read per chunk). */
        t->cur_ingest_us = eddy_wall_us();
        int rc = t->def->source->poll(t->source, &t->links[0].base, ask, err);
        t->cur_ingest_us = 0;
        if (t->fault)
            return task_take_fault(t, err);
        if (rc < 0)
            return -1;
        if (rc == EDDY_SOURCE_IDLE) {
            /* Nothing to read now: wait for the source's descriptor in the
             * worker's poll set, or rest when it has none. */
            if (t->wait_fd >= 0)
                t->waiting_fd = true;
            else
                t->source_idle_until_ns = now_ns + EDDY_SOURCE_REST_NS;
            break;
        }
        if (rc == 0) {
            t->source_done = true;
            return finish_task(t, err);
        }
        uint32_t got = (uint32_t)(t->records_in - before);
        if (got)
            t->last_record_ns = now_ns;
        done += got;
        if (got < ask || slice_ended(t, &slice))
            break; /* nothing more to read now, or the slice is used up */
    }
    source_watermark(t, now_ns);
    return t->fault ? task_take_fault(t, err) : 0;
}

/* Consumes records of the next ready channel's head message until the slice
 * is used up; a partly read batch stays at the head (its reader is a cursor)
 * and goes on at the next step. Its credit returns once it is read through. */
static int step_input(eddy_task_t *t, uint64_t now_ns, eddy_err_t *err)
{
    input_channel_t *in = task_next_ready_input(t);
    if (!in) /* a finish that waited for moving key groups (task_migrate.c) */
        return task_all_inputs_ended(t) && !task_migration_in_flight(t) ? finish_task(t, err) : 0;
    in_entry_t *e = in->head;
    uint32_t ch = (uint32_t)(in - t->inputs);
    int64_t wm;
    int rc = 0;
    switch (e->msg.type) {
    case EDDY_DATA_BATCH: {
        eddy_wm_valve_activity(t->valve, ch);
        t->current_input = in->input;
        t->cur_ingest_us = e->msg.ingest_us;
        slice_t slice;
        slice_begin(&slice, now_ns);
        eddy_record_t rec;
        int more;
        while (true) {
            const unsigned char *at = e->msg.cursor;
            uint32_t left = e->msg.records_left;
            if ((more = eddy_data_next_record(&e->msg, &rec, err)) != 1)
                break;
            int held = task_hold_record(t, in, &rec);
            if (held < 0) { /* no room: this record waits, and the channel with it */
                e->msg.cursor = at;
                e->msg.records_left = left;
                t->cur_ingest_us = 0;
                return 0;
            }
            if (held > 0) {
                if (t->fault) {
                    rc = task_take_fault(t, err);
                    break;
                }
                continue;
            }
            t->records_in++;
            task_chain_emit(&t->links[0].base, &rec);
            if (t->fault) {
                rc = task_take_fault(t, err);
                break;
            }
            if (slice_over(t, &slice, 1)) {
                t->cur_ingest_us = 0;
                return 0;
            }
        }
        t->cur_ingest_us = 0;
        if (more < 0)
            rc = -1;
        /* The batch is through this task: its oldest record's latency from
         * its source to here (at a sink: end to end). */
        if (rc == 0 && e->msg.ingest_us)
            eddy_hist_observe(&t->latency, eddy_wall_us() - e->msg.ingest_us);
        in->credit_owed++;
        task_return_credit(t, in, false);
        break;
    }
    case EDDY_DATA_BARRIER:
        task_note_barrier(t, in, e->msg.checkpoint);
        task_check_alignment(t);
        break;
    case EDDY_DATA_EOS:
        in->eos = true;
        in->eos_received = true;
        task_fluid_input_ended(t); /* an ended input has no HANDOFF to wait for */
        if (eddy_wm_valve_ended(t->valve, ch, &wm))
            task_advance_watermark(t, wm);
        task_check_alignment(t);
        break;
    case EDDY_DATA_HANDOFF:
        task_on_handoff(t, in, &e->msg);
        break;
    case EDDY_DATA_WATERMARK:
        if (e->msg.idle) {
            if (eddy_wm_valve_idle(t->valve, ch, &wm))
                task_advance_watermark(t, wm);
            if (eddy_wm_valve_all_idle(t->valve) && !t->idle_out)
                broadcast_idle(t);
        } else if (eddy_wm_valve_watermark(t->valve, ch, e->msg.watermark, &wm)) {
            task_advance_watermark(t, wm);
        }
        break;
    default:
        break;
    }
    in->head = e->next;
    if (!in->head)
        in->tail = NULL;
    in->queued--;
    task_free_entry(e);
    if (rc == 0 && t->fault)
        rc = task_take_fault(t, err);
    /* A fluid step in flight finishes first: the old owner's groups leave,
     * the new owner's arrive and their held records run. */
    if (rc == 0 && task_all_inputs_ended(t) && !task_migration_in_flight(t))
        rc = finish_task(t, err);
    return rc;
}



/* Whether the task has nothing more to do now: no input it may read, or
 * (a source) nothing to read or no rate allowance left. */
static bool nothing_to_do(eddy_task_t *t, uint64_t now_ns)
{
    if (t->finished || t->fault)
        return false;
    if (t->source)
        return !t->trigger_checkpoint &&
               (!t->running || t->source_done || t->waiting_fd || now_ns < t->source_idle_until_ns ||
                source_allowance(t, now_ns) < 1.0);
    return !task_has_ready_input(t);
}

/* A task with nothing more to do sends what it has now rather than wait
 * for more (no timed flush: at low load a record goes out at once, at high
 * load batches fill before the task runs dry): partly filled output
 * batches, the credits it owes upstream and, in a sink's task (no
 * outputs), whatever its operators buffer (stdout, a pipe). */
static void flush_if_idle(eddy_task_t *t, uint64_t now_ns)
{
    if (!nothing_to_do(t, now_ns))
        return;
    if (t->n_groups == 0)
        task_flush_chain(t);
    for (uint32_t g = 0; g < t->n_groups; g++)
        for (uint32_t i = 0; i < t->groups[g].parallelism; i++)
            task_flush_channel(t, &t->groups[g].channels[i]);
    /* All owed credits go back: the sender's in-flight budget counts
     * unreturned batches, and a busy worker may not be idle again soon. */
    for (uint32_t i = 0; i < t->n_inputs; i++)
        task_return_credit(t, &t->inputs[i], true);
}

int eddy_task_step(eddy_task_t *self, uint64_t now_ns, eddy_err_t *err)
{
#ifndef EDDY_NO_TASK_TIMING
    eddy_task_account(self, now_ns);
#endif
    task_fluid_poll(self, now_ns);
    int rc = self->fault            ? task_take_fault(self, err)
             : self->start_finished ? (self->running ? finish_restored(self, err) : 0)
             : self->source         ? step_source(self, now_ns, err)
                                    : step_input(self, now_ns, err);
#ifndef EDDY_NO_TASK_TIMING
    /* Busy/idle/blocked accounting (DS2's useful time): one clock read per
     * step. EDDY_NO_TASK_TIMING compiles it out, to measure its cost. */
    uint64_t end = eddy_mono_ns();
    self->busy_ns += end - now_ns;
    self->last_account_ns = end;
#endif
    if (rc < 0) {
        self->failed = true;
        self->finished = true;
    } else {
        flush_if_idle(self, eddy_mono_ns());
        if (self->fault) { /* a sink's flush failed */
            rc = task_take_fault(self, err);
            self->failed = true;
            self->finished = true;
        }
    }
    return rc;
}

void eddy_task_tick(eddy_task_t *self, uint64_t now_ns)
{
    if (self->finished || self->start_finished || self->fault || now_ns < self->next_tick_ns)
        return;
    self->next_tick_ns = now_ns + (uint64_t)EDDY_TICK_INTERVAL_MS * 1000000u;
    if (self->source && self->running)
        source_watermark(self, now_ns);
    /* Event-time lag, sampled once a tick while there is a watermark. */
    if (self->watermark != EDDY_WATERMARK_MIN && self->watermark != EDDY_WATERMARK_MAX) {
        int64_t lag_ms = eddy_wall_ms() - self->watermark;
        eddy_hist_observe(&self->event_lag, lag_ms > INT64_MAX / 1000 ? INT64_MAX : lag_ms * 1000);
    }
    if (!self->time_ops)
        return;
    int64_t now_ms = (int64_t)eddy_wall_ms();
    for (uint32_t i = 0; i < self->def->n_ops && !self->fault; i++) {
        const eddy_operator_ops_t *ops = self->def->ops[i].ops;
        if (ops->tick && ops->tick(self->ops[i], now_ms, &self->links[i + 1].base,
                                   &self->fault_err) < 0)
            self->fault = true;
    }
}


/* Whether ticks do anything for this task (else the worker need not wake
 * for them). */
static bool needs_ticks(const eddy_task_t *t)
{
    return t->time_ops || (t->source && t->def->event_time.enabled) ||
           (t->watermark != EDDY_WATERMARK_MIN && t->watermark != EDDY_WATERMARK_MAX);
}

uint64_t eddy_task_next_wake(eddy_task_t *self, uint64_t now_ns)
{
    if (self->finished)
        return UINT64_MAX;
    if (self->start_finished && self->running)
        return now_ns;
    uint64_t wake = needs_ticks(self) ? self->next_tick_ns : UINT64_MAX;
    if (task_fluid_wake(self) < wake)
        wake = task_fluid_wake(self);
    if (!self->source || !self->running || self->source_done || self->waiting_fd ||
        task_outputs_backlogged(self))
        return wake;
    if (now_ns < self->source_idle_until_ns)
        return self->source_idle_until_ns < wake ? self->source_idle_until_ns : wake;
    double allowance = source_allowance(self, now_ns);
    if (allowance >= 1.0)
        return now_ns;
    double rate = self->offered_rate;
    uint64_t at = rate > 0 ? now_ns + (uint64_t)((1.0 - allowance) / rate * 1e9) + 1 : UINT64_MAX;
    return at < wake ? at : wake;
}

int eddy_task_wait_fd(const eddy_task_t *self)
{
    return self->waiting_fd && !self->finished ? self->wait_fd : -1;
}

void eddy_task_fd_ready(eddy_task_t *self)
{
    self->waiting_fd = false;
}
