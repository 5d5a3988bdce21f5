/* task.c - execution of one stage instance (see task.h).
 *
 * Owns: the operator chain and its collectors, the keyed state of keyed
 * stages, input channels with their queues and barrier alignment, output
 * channels with batch writers, pending queues and credits, and the task's
 * metrics. Aligned barriers follow Flink's asynchronous barrier snapshots:
 * a channel that delivered barrier n is blocked until every other live input
 * delivered it too; then state is written, the coordinator gets an ACK and
 * the barrier goes on to every output channel, behind all earlier batches.
 * Under --guarantee at-least-once (Flink's AT_LEAST_ONCE checkpointing
 * mode) barriers are not aligned: a channel that delivered its barrier
 * keeps flowing, the snapshot is taken when the last one arrives and so may
 * hold effects of records after the barrier, which a restore replays
 * (duplicates, never losses); no channel waits for a slow one. A rescale's
 * migration snapshot is always aligned (its sources pause at the barrier,
 * so nothing follows it anyway). */
#include "runtime/task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/histogram.h"
#include "net/partial.h"
#include "state/group_envelope.h"
#include "state/keygroup.h"
#include "state/source_time.h"
#include "runtime/channel_flow.h"
#include "runtime/watermark_valve.h"

_Static_assert(EDDY_MAX_CHAIN <= EDDY_GROUP_MAX_OPS, "a key group snapshot holds every chained operator");

typedef struct in_entry {
    struct in_entry *next;
    eddy_data_msg_t msg;
    zmq_msg_t zmsg;
    bool has_zmsg;
    char *heap;
} in_entry_t;

typedef struct input_channel {
    uint32_t src_stage;
    uint32_t input;        /* 0, or 1 for a two-input stage's second input */
    uint32_t src_instance;
    uint32_t src_worker;
    in_entry_t *head, *tail;
    uint32_t queued;
    bool eos;
    bool eos_received;     /* ended by an EOS message, not unused by the edge */
    uint64_t barrier;      /* checkpoint whose barrier blocks this channel, 0: none */
    uint32_t credit_owed;  /* batches consumed and not yet returned */
} input_channel_t;

typedef struct out_entry {
    struct out_entry *next;
    char *data;
    size_t len;
    bool is_batch;
} out_entry_t;

typedef struct output_channel {
    eddy_channel_id_t id;
    uint32_t dst_worker;
    eddy_batch_writer_t writer;
    bool writer_open;
    uint32_t credits;
    eddy_channel_flow_t flow;   /* in-flight data bounded by time */
    out_entry_t *head, *tail;
    uint32_t pending_batches;   /* batches in head..tail */
} output_channel_t;

typedef struct output_group {
    uint32_t dst_stage;
    eddy_edge_t edge;
    eddy_key_fn key_fn;
    uint32_t parallelism;
    uint16_t *owner_of_kg;   /* HASH: key group -> instance */
    uint64_t *kg_sent;       /* HASH: records per key group in the load window */
    uint32_t round_robin;
    output_channel_t *channels;
} output_group_t;

typedef struct chain_link {
    eddy_collector_t base;
    eddy_task_t *task;
    uint32_t next_op;        /* index of the operator this collector feeds */
} chain_link_t;

struct eddy_task {
    eddy_task_env_t *env;
    uint32_t job, epoch;
    char job_id[EDDY_NAME_MAX];
    const eddy_job_graph_t *graph;
    const eddy_stage_def_t *def;
    uint32_t stage, instance, parallelism;

    eddy_op_context_t ctx;
    void *ops[EDDY_MAX_CHAIN];
    chain_link_t links[EDDY_MAX_CHAIN + 1];
    eddy_keyed_state_t *state;
    uint8_t *held;           /* [max_parallelism] key groups present in state */

    /* event time: the task's watermark (last one handed to the chain and
     * forwarded), the valve over the inputs, whether downstream was told
     * this task is idle, and operators' late records */
    int64_t watermark;
    eddy_wm_valve_t *valve;
    bool idle_out;
    bool time_ops;           /* some chained operator has watermark() or tick() */
    uint64_t late_records;
    uint64_t rejected_records;
    eddy_op_report_t report; /* the operators' own figures (ctx.report) */
    int64_t source_lag;   /* sources: set through ctx.source_lag, -1 unknown */
    uint64_t next_tick_ns;

    /* source */
    void *source;
    bool running, source_done;
    uint64_t source_idle_until_ns; /* nothing to read before then */
    uint64_t trigger_checkpoint;
    bool trigger_pause;
    double clock_offset_s;
    uint64_t created_ns, last_refill_ns;
    double tokens;
    double offered_rate;
    int64_t max_timestamp;   /* event time: the largest timestamp read */
    uint64_t last_wm_ns, last_record_ns;

    /* inputs: the first input's channels (one per upstream instance), then
     * a two-input stage's second input's; barriers align and the watermark
     * is the minimum across all of them */
    uint32_t n_inputs;
    input_channel_t *inputs;
    uint32_t next_input;
    uint32_t first_input_channels;  /* inputs[0..this) come from def->input */
    uint32_t current_input;         /* input of the batch being consumed (ctx.input) */

    /* outputs */
    uint32_t n_groups;
    output_group_t *groups;
    /* Key load of the keyed outputs: counted per key group at the
     * partitioner over a window, summarised when the window ends. */
    uint64_t load_window_start_ns;
    uint32_t n_key_loads;
    eddy_key_load_t key_loads[EDDY_KEY_LOADS_MAX];

    /* A failure inside the chain (an operator's process(), an output that
     * could not be queued) where no error can be returned: the step that
     * notices it fails the task. Per task, so it never leaks into another. */
    bool fault;
    eddy_err_t fault_err;

    bool finished, failed;
    uint64_t records_in, records_out;
    uint64_t busy_ns, idle_ns, blocked_ns, last_account_ns;

    /* Record latency: when the input now being processed was read by its
     * source (wall clock us, 0 unknown); output batches carry the oldest
     * such time of their records. */
    int64_t cur_ingest_us;
    eddy_histogram_t latency, event_lag;
    /* A source that has nothing to read now may name a descriptor that
     * becomes readable when it has (ctx.wait_fd): the task then waits on it
     * in the worker's poll set instead of resting for a fixed time. */
    int wait_fd;
    bool waiting_fd;
};

/* ---- output side ------------------------------------------------------- */

static void set_fault(eddy_task_t *t, const char *what)
{
    if (t->fault)
        return;
    t->fault = true;
    eddy_err_set(&t->fault_err, "%s[%u]: %s", t->def->name, t->instance, what);
}

/* The first fault of the task, as the step's error. */
static int take_fault(eddy_task_t *t, eddy_err_t *err)
{
    if (err)
        *err = t->fault_err;
    return -1;
}

/* Losing a batch would silently lose records, so a failed allocation fails
 * the task instead (the job then restores from its last checkpoint). */
static void out_enqueue(eddy_task_t *t, output_channel_t *ch, char *data, size_t len,
                        bool is_batch)
{
    out_entry_t *e = data ? malloc(sizeof *e) : NULL;
    if (!e) {
        free(data);
        set_fault(t, "out of memory queueing output");
        return;
    }
    e->next = NULL;
    e->data = data;
    e->len = len;
    e->is_batch = is_batch;
    ch->pending_batches += is_batch;
    if (ch->tail)
        ch->tail->next = e;
    else
        ch->head = e;
    ch->tail = e;
}

static void send_message(eddy_task_t *t, uint32_t worker, char *data, size_t len)
{
    if (worker == t->env->self_worker_id)
        t->env->send_local(t->env->host, data, len);
    else
        t->env->send_remote(t->env->host, worker, data, len);
}

static void drain_pending(eddy_task_t *t, output_channel_t *ch)
{
    while (ch->head) {
        out_entry_t *e = ch->head;
        if (e->is_batch) {
            if (ch->credits == 0 || !eddy_channel_flow_may_send(&ch->flow, e->len))
                return;
            ch->credits--;
            ch->pending_batches--;
            eddy_channel_flow_sent(&ch->flow, e->len, eddy_mono_ns());
        }
        ch->head = e->next;
        if (!ch->head)
            ch->tail = NULL;
        send_message(t, ch->dst_worker, e->data, e->len);
        free(e);
    }
}

static void flush_channel(eddy_task_t *t, output_channel_t *ch)
{
    if (!ch->writer_open)
        return;
    size_t len;
    char *data = eddy_batch_writer_finish(&ch->writer, &len);
    ch->writer_open = false;
    out_enqueue(t, ch, data, len, true);
    drain_pending(t, ch);
}

static void append_record(eddy_task_t *t, output_channel_t *ch, const eddy_record_t *rec)
{
    if (!ch->writer_open) {
        eddy_batch_writer_begin(&ch->writer, &ch->id);
        ch->writer_open = true;
    }
    eddy_batch_writer_add(&ch->writer, rec);
    if (t->cur_ingest_us && (!ch->writer.ingest_us || t->cur_ingest_us < ch->writer.ingest_us))
        ch->writer.ingest_us = t->cur_ingest_us;
    if (eddy_batch_writer_bytes(&ch->writer) >= eddy_channel_flow_batch_bytes(&ch->flow))
        flush_channel(t, ch);
}

/* A FORWARD receiver listens to channel `instance` of its upstream only
 * (build_inputs), so data, watermarks, barriers and end of stream all go to
 * this one channel. */
static uint32_t forward_target(const eddy_task_t *t, const output_group_t *grp)
{
    return t->instance < grp->parallelism ? t->instance : 0;
}

static void route(eddy_task_t *t, const eddy_record_t *rec)
{
    t->records_out++;
    for (uint32_t g = 0; g < t->n_groups; g++) {
        output_group_t *grp = &t->groups[g];
        uint32_t target = 0;
        switch (grp->edge) {
        case EDDY_EDGE_HASH: {
            /* A combiner's partial carries its key (net/partial.h). */
            const char *key;
            uint32_t klen = rec->kind == EDDY_PARTIAL ? eddy_partial_key(rec, &key)
                                                      : grp->key_fn(rec, &key);
            uint32_t kg = eddy_key_group_of(key, klen, t->graph->max_parallelism);
            target = grp->owner_of_kg[kg];
            grp->kg_sent[kg]++;
            break;
        }
        case EDDY_EDGE_FORWARD:
            target = forward_target(t, grp);
            break;
        case EDDY_EDGE_REBALANCE:
            target = grp->round_robin++ % grp->parallelism;
            break;
        default:
            target = 0;
        }
        append_record(t, &grp->channels[target], rec);
    }
}

/* Whether a control message (barrier, end of stream, watermark) for group
 * grp goes on its channel i: every channel, except on a FORWARD edge, whose
 * receivers other than forward_target do not listen to this task (they
 * count its channel as ended, so anything on it would be a protocol
 * violation). */
static bool control_goes_to(const eddy_task_t *t, const output_group_t *grp, uint32_t i)
{
    return grp->edge != EDDY_EDGE_FORWARD || i == forward_target(t, grp);
}

static void broadcast_small(eddy_task_t *t, uint64_t barrier, bool eos)
{
    for (uint32_t g = 0; g < t->n_groups; g++) {
        for (uint32_t i = 0; i < t->groups[g].parallelism; i++) {
            if (!control_goes_to(t, &t->groups[g], i))
                continue;
            output_channel_t *ch = &t->groups[g].channels[i];
            flush_channel(t, ch);
            size_t len;
            char *data = eos ? eddy_eos_encode(&ch->id, &len)
                             : eddy_barrier_encode(&ch->id, barrier, &len);
            out_enqueue(t, ch, data, len, false);
            drain_pending(t, ch);
        }
    }
}

/* A watermark (or the idle status) goes to every output channel, behind
 * the records before it. */
static void broadcast_watermark(eddy_task_t *t, int64_t wm, bool idle)
{
    for (uint32_t g = 0; g < t->n_groups; g++) {
        for (uint32_t i = 0; i < t->groups[g].parallelism; i++) {
            if (!control_goes_to(t, &t->groups[g], i))
                continue;
            output_channel_t *ch = &t->groups[g].channels[i];
            flush_channel(t, ch);
            size_t len;
            char *data = eddy_watermark_encode(&ch->id, wm, idle, &len);
            out_enqueue(t, ch, data, len, false);
            drain_pending(t, ch);
        }
    }
}

static bool outputs_backlogged(const eddy_task_t *t)
{
    for (uint32_t g = 0; g < t->n_groups; g++)
        for (uint32_t i = 0; i < t->groups[g].parallelism; i++)
            if (t->groups[g].channels[i].head)
                return true;
    return false;
}

/* A step stops once a channel has a second batch waiting: one waiting batch
 * is normal while credit is on its way back, more would only queue ahead of
 * the next barrier. */
static bool outputs_piling_up(const eddy_task_t *t)
{
    for (uint32_t g = 0; g < t->n_groups; g++)
        for (uint32_t i = 0; i < t->groups[g].parallelism; i++)
            if (t->groups[g].channels[i].pending_batches > 1)
                return true;
    return false;
}

static void free_groups(eddy_task_t *t)
{
    for (uint32_t g = 0; g < t->n_groups; g++) {
        output_group_t *grp = &t->groups[g];
        for (uint32_t i = 0; i < grp->parallelism; i++) {
            output_channel_t *ch = &grp->channels[i];
            eddy_batch_writer_free(&ch->writer);
            while (ch->head) {
                out_entry_t *e = ch->head;
                ch->head = e->next;
                free(e->data);
                free(e);
            }
        }
        free(grp->channels);
        free(grp->owner_of_kg);
        free(grp->kg_sent);
    }
    free(t->groups);
    t->groups = NULL;
    t->n_groups = 0;
}

static int build_groups(eddy_task_t *t, eddy_placement_view_t pl, eddy_err_t *err)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < t->graph->n_stages; s++)
        if (eddy_stage_reads(&t->graph->stages[s], t->stage))
            n++;
    t->groups = calloc(n ? n : 1, sizeof *t->groups);
    if (!t->groups)
        return eddy_err_set(err, "out of memory");
    t->load_window_start_ns = eddy_mono_ns(); /* the counts start afresh */
    for (uint32_t s = 0; s < t->graph->n_stages; s++) {
        const eddy_stage_def_t *d = &t->graph->stages[s];
        if (!eddy_stage_reads(d, t->stage))
            continue;
        if (s >= pl.n_stages || pl.stages[s].parallelism == 0)
            return eddy_err_set(err, "placement misses stage '%s'", d->name);
        output_group_t *grp = &t->groups[t->n_groups++];
        grp->dst_stage = s;
        grp->edge = eddy_stage_edge_from(d, t->stage);
        grp->key_fn = eddy_stage_key_from(d, t->stage);
        grp->parallelism = pl.stages[s].parallelism;
        grp->channels = calloc(grp->parallelism, sizeof *grp->channels);
        if (!grp->channels)
            return eddy_err_set(err, "out of memory");
        if (grp->edge == EDDY_EDGE_HASH) {
            uint32_t k = t->graph->max_parallelism;
            grp->owner_of_kg = calloc(k, sizeof *grp->owner_of_kg);
            grp->kg_sent = calloc(k, sizeof *grp->kg_sent);
            if (!grp->owner_of_kg || !grp->kg_sent)
                return eddy_err_set(err, "out of memory");
            for (uint32_t kg = 0; kg < k; kg++)
                grp->owner_of_kg[kg] = (uint16_t)eddy_kg_owner(kg, grp->parallelism, k);
        }
        for (uint32_t i = 0; i < grp->parallelism; i++) {
            output_channel_t *ch = &grp->channels[i];
            ch->id = (eddy_channel_id_t){t->job, t->epoch, t->stage, t->instance, s, i};
            ch->dst_worker = pl.stages[s].worker_of[i];
            ch->credits = EDDY_CHANNEL_CREDITS;
            eddy_channel_flow_init(&ch->flow, EDDY_CHANNEL_CREDITS, EDDY_BATCH_BYTES,
                                   eddy_mono_ns());
            eddy_batch_writer_init(&ch->writer);
        }
    }
    return 0;
}

/* ---- input side -------------------------------------------------------- */

static void free_entry(in_entry_t *e)
{
    eddy_data_msg_close(&e->msg);
    if (e->has_zmsg)
        zmq_msg_close(&e->zmsg);
    free(e->heap);
    free(e);
}

static void free_inputs(eddy_task_t *t)
{
    for (uint32_t i = 0; i < t->n_inputs; i++) {
        while (t->inputs[i].head) {
            in_entry_t *e = t->inputs[i].head;
            t->inputs[i].head = e->next;
            free_entry(e);
        }
    }
    free(t->inputs);
    t->inputs = NULL;
    t->n_inputs = 0;
    t->first_input_channels = 0;
    eddy_wm_valve_destroy(&t->valve);
}

/* The valve starts at the task's watermark: a rewired or restored task's
 * clock never goes back. Forward edges' unused channels count as ended. */
static int build_valve(eddy_task_t *t, eddy_err_t *err)
{
    eddy_wm_valve_destroy(&t->valve);
    t->valve = eddy_wm_valve_new(t->n_inputs, t->watermark);
    if (!t->valve)
        return eddy_err_set(err, "out of memory");
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (t->inputs[i].eos)
            eddy_wm_valve_ended(t->valve, i, NULL);
    return 0;
}

/* The channels of one input: one per instance of upstream stage `up`. */
static int add_input_channels(eddy_task_t *t, eddy_placement_view_t pl, int up, eddy_edge_t edge,
                              uint32_t input, eddy_err_t *err)
{
    if (up < 0 || (uint32_t)up >= pl.n_stages)
        return eddy_err_set(err, "placement misses stage %d", up);
    uint32_t p = pl.stages[up].parallelism;
    input_channel_t *grown = realloc(t->inputs, (t->n_inputs + p + 1) * sizeof *grown);
    if (!grown)
        return eddy_err_set(err, "out of memory");
    t->inputs = grown;
    for (uint32_t i = 0; i < p; i++) {
        input_channel_t *in = &t->inputs[t->n_inputs++];
        memset(in, 0, sizeof *in);
        in->src_stage = (uint32_t)up;
        in->input = input;
        in->src_instance = i;
        in->src_worker = pl.stages[up].worker_of[i];
        /* A forward edge connects instance i to instance i only. */
        if (edge == EDDY_EDGE_FORWARD && i != t->instance)
            in->eos = true;
    }
    return 0;
}

static int build_inputs(eddy_task_t *t, eddy_placement_view_t pl, eddy_err_t *err)
{
    if (t->def->input < 0)
        return 0;
    if (add_input_channels(t, pl, t->def->input, t->def->edge, 0, err) < 0)
        return -1;
    t->first_input_channels = t->n_inputs;
    if (t->def->second_input >= 0 &&
        add_input_channels(t, pl, t->def->second_input, t->def->second_edge, 1, err) < 0)
        return -1;
    t->next_input = 0;
    return build_valve(t, err);
}

/* The input channel of a message from src_stage[src_instance], or NULL. */
static input_channel_t *input_of(eddy_task_t *t, uint32_t src_stage, uint32_t src_instance)
{
    if (t->def->input < 0)
        return NULL;
    if (src_stage == (uint32_t)t->def->input) {
        if (src_instance < t->first_input_channels)
            return &t->inputs[src_instance];
    } else if (t->def->second_input >= 0 && src_stage == (uint32_t)t->def->second_input) {
        if (src_instance < t->n_inputs - t->first_input_channels)
            return &t->inputs[t->first_input_channels + src_instance];
    }
    return NULL;
}

static void return_credit(eddy_task_t *t, input_channel_t *in, bool force)
{
    if (in->credit_owed == 0 || (!force && in->credit_owed < EDDY_CHANNEL_CREDITS / 4))
        return;
    eddy_channel_id_t id = {t->job, t->epoch, in->src_stage, in->src_instance, t->stage,
                            t->instance};
    size_t len;
    char *data = eddy_credit_encode(&id, in->credit_owed, &len);
    in->credit_owed = 0;
    send_message(t, in->src_worker, data, len);
}

/* ---- operator chain ---------------------------------------------------- */

static void chain_emit(eddy_collector_t *c, const eddy_record_t *rec)
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
        route(t, rec);
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
static void advance_watermark(eddy_task_t *t, int64_t wm)
{
    if (wm <= t->watermark)
        return;
    t->watermark = wm;
    for (uint32_t i = 0; i < t->def->n_ops && !t->fault; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (ops->watermark &&
            ops->watermark(t->ops[i], wm, &t->links[i + 1].base, &t->fault_err) < 0)
            t->fault = true;
    }
    if (!t->fault)
        broadcast_watermark(t, wm, false);
    t->idle_out = false;
}

static void flush_chain(eddy_task_t *t);

/* The idle status goes downstream behind everything emitted before it,
 * also what a pre-aggregation held back: downstream stops waiting for this
 * channel, so held records sent later would be judged late there. */
static void broadcast_idle(eddy_task_t *t)
{
    flush_chain(t);
    t->idle_out = true;
    broadcast_watermark(t, t->watermark, true);
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
            advance_watermark(t, wm);
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
            return take_fault(t, err);
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

/* Pre-commit of every two-phase-commit operator in the chain; the fsyncs
 * they leave in sync run on the snapshot writer before the ACK. */
static int prepare_chain(eddy_task_t *t, uint64_t checkpoint, eddy_sync_list_t *sync,
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
static eddy_snapshot_unit_t *sync_unit(eddy_sync_list_t **sync, const eddy_msg_t *msg,
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

static int finish_task(eddy_task_t *t, eddy_err_t *err)
{
    /* End of input: every window fires (Flink's MAX_WATERMARK). */
    advance_watermark(t, EDDY_WATERMARK_MAX);
    if (t->fault)
        return take_fault(t, err);
    if (run_finish_chain(t, err) < 0)
        return -1;
    /* What is left is published only when the whole job is done (the
     * coordinator's COMPLETE(EDDY_FINAL_CHECKPOINT)): a restore before that
     * replays it, so publishing now could duplicate it. */
    eddy_sync_list_t *sync = eddy_sync_list_new();
    if (prepare_chain(t, EDDY_FINAL_CHECKPOINT, sync, err) < 0) {
        eddy_sync_list_destroy(&sync);
        return -1;
    }
    broadcast_small(t, 0, true);
    if (t->fault)
        return take_fault(t, err);
    t->finished = true;
    /* TASK_DONE only once what was prepared is durable. */
    eddy_msg_t done = {.type = EDDY_MSG_TASK_DONE};
    done.u.task_done.job = t->job;
    done.u.task_done.epoch = t->epoch;
    done.u.task_done.stage = t->stage;
    done.u.task_done.instance = t->instance;
    eddy_err_t serr = {{0}};
    eddy_snapshot_unit_t *unit = sync_unit(&sync, &done, &serr);
    if (unit)
        t->env->submit_snapshot(t->env->host, unit);
    else if (serr.msg[0])
        return eddy_err_set(err, "%s", serr.msg);
    else
        report_done(t);
    return 0;
}

/* ---- checkpoints ------------------------------------------------------- */

/* One key group's snapshot: the task's watermark, the per-key values and
 * each chained operator's own state of the group (state/group_envelope.h). */
static int write_group(eddy_task_t *t, uint32_t kg, char **out, size_t *len, eddy_err_t *err)
{
    eddy_group_envelope_t env = {.watermark = t->watermark, .n_ops = t->def->n_ops};
    char *keyed = NULL;
    char *parts[EDDY_GROUP_MAX_OPS] = {0};
    int rc = -1;
    if (eddy_keyed_state_write_group(t->state, kg, &keyed, &env.keyed_len, err) < 0)
        goto out;
    env.keyed = keyed;
    for (uint32_t i = 0; i < t->def->n_ops; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (ops->write_group && ops->write_group(t->ops[i], kg, &parts[i], &env.op_lens[i], err) < 0) {
            eddy_err_wrap(err, "%s[%u]: %s: key group %u", t->def->name, t->instance, ops->kind, kg);
            goto out;
        }
        env.ops[i] = parts[i];
    }
    *out = eddy_group_envelope_encode(&env, len);
    rc = *out ? 0 : eddy_err_set(err, "out of memory");
out:
    free(keyed);
    for (uint32_t i = 0; i < EDDY_GROUP_MAX_OPS; i++)
        free(parts[i]);
    return rc;
}

/* Serialises the owned key groups into a unit for the snapshot writer; the
 * barrier can go on as soon as this returns, durability follows. */
static eddy_snapshot_unit_t *serialise_state(eddy_task_t *t, uint64_t checkpoint, bool migration,
                                             eddy_err_t *err)
{
    eddy_kg_range_t r = t->ctx.key_groups;
    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(r.end - r.start);
    if (!u) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(u->root, sizeof u->root, "%s", eddy_snapshot_store_root(t->env->store));
    snprintf(u->job, sizeof u->job, "%s", t->job_id);
    snprintf(u->op, sizeof u->op, "%s", t->def->name);
    u->checkpoint = checkpoint;
    u->durable = !migration;
    bool moving = false; /* to another worker: every group it owns goes along */
    for (uint32_t i = 0; migration && i < t->env->n_migrate_moving; i++)
        moving |= t->env->migrate_moving[i] == t->instance;
    for (uint32_t kg = r.start; kg < r.end; kg++) {
        /* A migration snapshot carries only the groups that change owner. */
        if (migration && !moving &&
            eddy_kg_owner(kg, t->env->migrate_parallelism, t->graph->max_parallelism) == t->instance)
            continue;
        uint32_t i = u->n_groups;
        if (write_group(t, kg, &u->data[i], &u->lens[i], err) < 0) {
            eddy_snapshot_unit_free(u);
            return NULL;
        }
        u->groups[i] = kg;
        u->n_groups++;
    }
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
static int restore_source_time(eddy_task_t *t, uint64_t checkpoint, eddy_err_t *err)
{
    char *data;
    size_t len;
    if (eddy_snapshot_store_read_group(t->env->store, t->job_id, checkpoint, t->def->name,
                                       t->instance, &data, &len, err) < 0)
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
static void flush_chain(eddy_task_t *t)
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
        set_fault(t, err.msg);
    } else if (len > EDDY_SOURCE_STATE_MAX) {
        free(bytes);
        snprintf(err.msg, sizeof err.msg, "%s: source state of %zu bytes exceeds the limit of %u bytes",
                 src->kind, len, EDDY_SOURCE_STATE_MAX);
        set_fault(t, err.msg);
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

static void take_checkpoint(eddy_task_t *t, uint64_t checkpoint)
{
    flush_chain(t);
    eddy_msg_t ack = ack_of(t, checkpoint);
    ack.u.ack.position = t->source ? t->def->source->position(t->source) : -1;
    source_state_into_ack(t, &ack);
    eddy_snapshot_unit_t *unit = NULL;
    bool migration = checkpoint == t->env->migration_checkpoint;
    eddy_err_t perr = {{0}};
    eddy_sync_list_t *sync = eddy_sync_list_new();
    if (!ack.u.ack.error[0] && prepare_chain(t, checkpoint, sync, &perr) < 0)
        snprintf(ack.u.ack.error, sizeof ack.u.ack.error, "%s", perr.msg);
    /* In a migration snapshot only the rescaled stage moves state. */
    if (t->state && !ack.u.ack.error[0] && (!migration || t->stage == t->env->migrate_stage)) {
        eddy_err_t err = {{0}};
        unit = serialise_state(t, checkpoint, migration, &err);
        if (!unit)
            snprintf(ack.u.ack.error, sizeof ack.u.ack.error, "%s", err.msg);
        ack.u.ack.state_keys = eddy_keyed_state_keys(t->state);
        for (uint32_t i = 0; unit && i < unit->n_groups; i++)
            ack.u.ack.bytes_written += unit->lens[i];
        ack.u.ack.files_written = unit ? unit->n_groups : 0;
    }
    if (t->source && t->def->event_time.enabled && t->env->store && !ack.u.ack.error[0]) {
        eddy_err_t err = {{0}};
        unit = source_time_unit(t, checkpoint, migration, &err);
        if (!unit)
            snprintf(ack.u.ack.error, sizeof ack.u.ack.error, "%s", err.msg);
    }
    /* The barrier goes downstream behind everything emitted before it. */
    broadcast_small(t, checkpoint, false);
    if (unit) {
        unit->sync = sync;
        sync = NULL;
    } else {
        eddy_err_t serr = {{0}};
        unit = sync_unit(&sync, &ack, &serr);
        if (serr.msg[0] && !ack.u.ack.error[0])
            snprintf(ack.u.ack.error, sizeof ack.u.ack.error, "%s", serr.msg);
    }
    eddy_sync_list_destroy(&sync);
    if (unit) {
        unit->ack = ack;
        t->env->submit_snapshot(t->env->host, unit);
    } else {
        t->env->notify(t->env->host, &ack);
        free(ack.u.ack.source_state);
    }
}

/* An input whose upstream sent its end of stream. */
static const input_channel_t *ended_input(const eddy_task_t *t)
{
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (t->inputs[i].eos_received)
            return &t->inputs[i];
    return NULL;
}

/* A checkpoint whose barriers came from every input but one that ended
 * cannot complete: the ended upstream task is done and does not ACK it
 * (and a forged end of stream must not let this task snapshot without the
 * records its upstream sent before the barrier). The barrier still goes
 * downstream, so no task there waits for it; the ACK declines. */
static void decline_checkpoint(eddy_task_t *t, uint64_t checkpoint, const input_channel_t *ended)
{
    flush_chain(t);
    broadcast_small(t, checkpoint, false);
    eddy_msg_t ack = ack_of(t, checkpoint);
    ack.u.ack.declined = true;
    snprintf(ack.u.ack.error, sizeof ack.u.ack.error,
             "task %s[%u] declined it: its input from %u[%u] ended before the barrier",
             t->def->name, t->instance, ended->src_stage, ended->src_instance);
    t->env->notify(t->env->host, &ack);
}

static void check_alignment(eddy_task_t *t)
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
    const input_channel_t *ended = ended_input(t);
    if (ended)
        decline_checkpoint(t, checkpoint, ended);
    else
        take_checkpoint(t, checkpoint);
    for (uint32_t i = 0; i < t->n_inputs; i++)
        t->inputs[i].barrier = 0;
}

/* A channel delivered checkpoint's barrier. An aligned channel is blocked,
 * so it cannot deliver another before the checkpoint is taken. An unaligned
 * one can, once a checkpoint was given up (timed out at the coordinator)
 * while a slow channel still had its barrier on the way: the newer barrier
 * supersedes the older one (which can no longer complete) and a stale
 * barrier arriving after a newer one is ignored, as Flink's
 * CheckpointBarrierTracker does. */
static bool barriers_align(const eddy_task_t *t, uint64_t checkpoint);

static void note_barrier(eddy_task_t *t, input_channel_t *in, uint64_t checkpoint)
{
    if (barriers_align(t, checkpoint)) {
        in->barrier = checkpoint;
        return;
    }
    for (uint32_t i = 0; i < t->n_inputs; i++) {
        if (t->inputs[i].barrier > checkpoint)
            return; /* stale */
        if (t->inputs[i].barrier && t->inputs[i].barrier < checkpoint)
            t->inputs[i].barrier = 0;
    }
    in->barrier = checkpoint;
}

static bool all_inputs_ended(const eddy_task_t *t)
{
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (!t->inputs[i].eos || t->inputs[i].head)
            return false;
    return true;
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
    t->ctx.restored_checkpoint = cfg->restore_checkpoint;
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
        t->ctx.key_groups = eddy_kg_range_for(t->instance, t->parallelism, t->graph->max_parallelism);
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
        /* Without a checkpoint to restore, the owned groups start empty. */
        if (cfg->restore_checkpoint == 0)
            for (uint32_t kg = t->ctx.key_groups.start; kg < t->ctx.key_groups.end; kg++)
                t->held[kg] = 1;
    }

    for (uint32_t i = 0; i <= EDDY_MAX_CHAIN; i++) {
        t->links[i].base.emit = chain_emit;
        t->links[i].task = t;
        t->links[i].next_op = i;
    }
    if (build_inputs(t, cfg->placement, err) < 0 || build_groups(t, cfg->placement, err) < 0)
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
    if (t->def->source) {
        eddy_op_context_t ctx = t->ctx;
        ctx.config = t->def->source_config;
        ctx.source_state = cfg->source_state_len ? cfg->source_state : NULL;
        ctx.source_state_len = cfg->source_state ? cfg->source_state_len : 0;
        t->source = t->def->source->open(&ctx, cfg->start_position, err);
        if (!t->source) {
            eddy_err_wrap(err, "source %s[%u]", t->def->name, t->instance);
            goto fail;
        }
        if (t->def->event_time.enabled && t->env->store && cfg->restore_checkpoint &&
            cfg->start_position >= 0 && restore_source_time(t, cfg->restore_checkpoint, err) < 0)
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
    free_inputs(t);
    free_groups(t);
    eddy_keyed_state_destroy(&t->state);
    free(t->held);
    free(t);
    *self_p = NULL;
}

int eddy_task_rewire(eddy_task_t *self, uint32_t epoch, eddy_placement_view_t placement,
                     eddy_err_t *err)
{
    free_inputs(self);
    free_groups(self);
    self->epoch = epoch;
    self->parallelism = placement.stages[self->stage].parallelism;
    self->ctx.parallelism = self->parallelism;
    if (self->state) {
        eddy_kg_range_t old = self->ctx.key_groups;
        eddy_kg_range_t now = eddy_kg_range_for(self->instance, self->parallelism,
                                                self->graph->max_parallelism);
        for (uint32_t kg = old.start; kg < old.end; kg++)
            if (!eddy_kg_range_contains(now, kg)) {
                eddy_keyed_state_drop_group(self->state, kg);
                for (uint32_t i = 0; i < self->def->n_ops; i++)
                    if (self->def->ops[i].ops->drop_group)
                        self->def->ops[i].ops->drop_group(self->ops[i], kg);
                self->held[kg] = 0;
            }
        self->ctx.key_groups = now;
    }
    if (build_inputs(self, placement, err) < 0 || build_groups(self, placement, err) < 0)
        return -1;
    return 0;
}

static int read_group(eddy_task_t *t, uint32_t kg, const char *data, size_t len, int64_t *wm,
                      eddy_err_t *err)
{
    eddy_group_envelope_t env;
    if (eddy_group_envelope_decode(data, len, &env, err) < 0)
        return -1;
    if (env.n_ops != 0 && env.n_ops != t->def->n_ops)
        return eddy_err_set(err, "the snapshot holds state of %u operators, the stage chains %u",
                            env.n_ops, t->def->n_ops);
    if (eddy_keyed_state_read_group(t->state, kg, env.keyed, env.keyed_len, err) < 0)
        return -1;
    for (uint32_t i = 0; i < t->def->n_ops; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (!ops->read_group)
            continue;
        if (ops->read_group(t->ops[i], kg, i < env.n_ops ? env.ops[i] : NULL,
                            i < env.n_ops ? env.op_lens[i] : 0, err) < 0)
            return eddy_err_wrap(err, "%s", ops->kind);
    }
    *wm = env.watermark;
    return 0;
}

int eddy_task_restore_groups(eddy_task_t *self, uint64_t checkpoint, uint64_t *bytes,
                             uint64_t *groups, eddy_err_t *err)
{
    if (!self->state)
        return 0;
    int64_t floor = EDDY_WATERMARK_MIN;
    bool floor_set = false;
    for (uint32_t kg = self->ctx.key_groups.start; kg < self->ctx.key_groups.end; kg++) {
        if (self->held[kg])
            continue;
        if (!checkpoint)
            return eddy_err_set(err, "%s[%u]: key group %u has no checkpoint to load from",
                                self->def->name, self->instance, kg);
        char *data;
        size_t len;
        if (eddy_snapshot_store_read_group(self->env->store, self->job_id, checkpoint,
                                           self->def->name, kg, &data, &len, err) < 0)
            return -1;
        int64_t group_wm = EDDY_GROUP_NO_WATERMARK;
        int rc = read_group(self, kg, data, len, &group_wm, err);
        free(data);
        if (rc < 0)
            return eddy_err_wrap(err, "%s[%u]: key group %u of checkpoint %llu", self->def->name,
                                 self->instance, kg, (unsigned long long)checkpoint);
        if (group_wm != EDDY_GROUP_NO_WATERMARK && (!floor_set || group_wm < floor)) {
            floor = group_wm;
            floor_set = true;
        }
        self->held[kg] = 1;
        *bytes += len;
        *groups += 1;
    }
    /* The restored groups' clock: the lowest watermark among them. */
    if (floor_set && floor > self->watermark) {
        self->watermark = floor;
        if (self->def->input >= 0 && build_valve(self, err) < 0)
            return -1;
    }
    return 0;
}

uint32_t eddy_task_stage(const eddy_task_t *self) { return self->stage; }
uint32_t eddy_task_instance(const eddy_task_t *self) { return self->instance; }
bool eddy_task_is_source(const eddy_task_t *self) { return self->source != NULL; }
bool eddy_task_finished(const eddy_task_t *self) { return self->finished; }
bool eddy_task_failed(const eddy_task_t *self) { return self->failed; }

void eddy_task_commit(eddy_task_t *self, uint64_t checkpoint, eddy_sync_list_t *sync)
{
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

static const char *data_type_name(eddy_data_type_t type)
{
    switch (type) {
    case EDDY_DATA_BATCH: return "data batch";
    case EDDY_DATA_BARRIER: return "barrier";
    case EDDY_DATA_EOS: return "end of stream";
    case EDDY_DATA_CREDIT: return "credit";
    case EDDY_DATA_WATERMARK: return "watermark";
    }
    return "message";
}

/* Rejections are protocol violations (the caller reports the task failed,
 * so the job is restored rather than wedged by a lost message). */
int eddy_task_deliver(eddy_task_t *self, eddy_data_msg_t *msg, zmq_msg_t *zmsg, char *heap,
                      eddy_err_t *err)
{
    uint32_t src = msg->channel.src_instance;
    input_channel_t *in = input_of(self, msg->channel.src_stage, src);
    if (!in) {
        eddy_err_set(err, "protocol violation: %s for %s[%u] on unknown channel from %u[%u]",
                     data_type_name(msg->type), self->def->name, self->instance,
                     msg->channel.src_stage, src);
        goto reject;
    }
    /* An end of stream still queued counts: nothing may follow it. */
    if (in->eos || (in->tail && in->tail->msg.type == EDDY_DATA_EOS)) {
        eddy_err_set(err, "protocol violation: %s for %s[%u] after end of stream from %u[%u]",
                     data_type_name(msg->type), self->def->name, self->instance,
                     msg->channel.src_stage, src);
        goto reject;
    }
    in_entry_t *e = calloc(1, sizeof *e);
    if (!e) {
        eddy_err_set(err, "out of memory");
        goto reject;
    }
    e->msg = *msg;
    memset(msg, 0, sizeof *msg);
    if (zmsg) {
        zmq_msg_init(&e->zmsg);
        zmq_msg_move(&e->zmsg, zmsg);
        e->has_zmsg = true;
    }
    e->heap = heap;
    if (in->tail)
        in->tail->next = e;
    else
        in->head = e;
    in->tail = e;
    in->queued++;
    return 0;
reject:
    eddy_data_msg_close(msg);
    free(heap);
    return -1;
}

void eddy_task_credit(eddy_task_t *self, const eddy_channel_id_t *ch, uint32_t batches)
{
    for (uint32_t g = 0; g < self->n_groups; g++) {
        output_group_t *grp = &self->groups[g];
        if (grp->dst_stage != ch->dst_stage || ch->dst_instance >= grp->parallelism)
            continue;
        output_channel_t *out = &grp->channels[ch->dst_instance];
        out->credits += batches;
        if (out->credits > EDDY_CHANNEL_CREDITS)
            out->credits = EDDY_CHANNEL_CREDITS; /* never more than the receiver can hold */
        eddy_channel_flow_acked(&out->flow, batches, eddy_mono_ns());
        drain_pending(self, out);
    }
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

/* Whether checkpoint's barrier holds back the channels that delivered it:
 * always, except under at-least-once (see the top of this file). */
static bool barriers_align(const eddy_task_t *t, uint64_t checkpoint)
{
    return t->env->guarantee != EDDY_GUARANTEE_AT_LEAST_ONCE ||
           checkpoint == t->env->migration_checkpoint;
}

static bool channel_blocked(const eddy_task_t *t, const input_channel_t *in)
{
    return in->barrier && barriers_align(t, in->barrier);
}

static input_channel_t *next_ready_input(eddy_task_t *t)
{
    for (uint32_t k = 0; k < t->n_inputs; k++) {
        uint32_t i = (t->next_input + k) % t->n_inputs;
        input_channel_t *in = &t->inputs[i];
        if (in->head && !channel_blocked(t, in)) {
            t->next_input = (i + 1) % t->n_inputs;
            return in;
        }
    }
    return NULL;
}

bool eddy_task_runnable(eddy_task_t *self, uint64_t now_ns)
{
    if (self->finished)
        return false;
    if (self->fault) /* the next step reports it */
        return true;
    if (outputs_backlogged(self))
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
        if (self->inputs[i].head && !channel_blocked(self, &self->inputs[i]))
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
    return eddy_mono_ns() >= s->deadline_ns || outputs_piling_up(t);
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
        take_checkpoint(t, checkpoint);
        if (t->trigger_pause)
            t->running = false;
        return t->fault ? take_fault(t, err) : 0;
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
            return take_fault(t, err);
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
    return t->fault ? take_fault(t, err) : 0;
}

/* Consumes records of the next ready channel's head message until the slice
 * is used up; a partly read batch stays at the head (its reader is a cursor)
 * and goes on at the next step. Its credit returns once it is read through. */
static int step_input(eddy_task_t *t, uint64_t now_ns, eddy_err_t *err)
{
    input_channel_t *in = next_ready_input(t);
    if (!in)
        return 0;
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
        while ((more = eddy_data_next_record(&e->msg, &rec, err)) == 1) {
            t->records_in++;
            chain_emit(&t->links[0].base, &rec);
            if (t->fault) {
                rc = take_fault(t, err);
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
        return_credit(t, in, false);
        break;
    }
    case EDDY_DATA_BARRIER:
        note_barrier(t, in, e->msg.checkpoint);
        check_alignment(t);
        break;
    case EDDY_DATA_EOS:
        in->eos = true;
        in->eos_received = true;
        if (eddy_wm_valve_ended(t->valve, ch, &wm))
            advance_watermark(t, wm);
        check_alignment(t);
        break;
    case EDDY_DATA_WATERMARK:
        if (e->msg.idle) {
            if (eddy_wm_valve_idle(t->valve, ch, &wm))
                advance_watermark(t, wm);
            if (eddy_wm_valve_all_idle(t->valve) && !t->idle_out)
                broadcast_idle(t);
        } else if (eddy_wm_valve_watermark(t->valve, ch, e->msg.watermark, &wm)) {
            advance_watermark(t, wm);
        }
        break;
    default:
        break;
    }
    in->head = e->next;
    if (!in->head)
        in->tail = NULL;
    in->queued--;
    free_entry(e);
    if (rc == 0 && t->fault)
        rc = take_fault(t, err);
    if (rc == 0 && all_inputs_ended(t))
        rc = finish_task(t, err);
    return rc;
}

static bool has_ready_input(const eddy_task_t *t)
{
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (t->inputs[i].head && !channel_blocked(t, &t->inputs[i]))
            return true;
    return false;
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
    return !has_ready_input(t);
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
        flush_chain(t);
    for (uint32_t g = 0; g < t->n_groups; g++)
        for (uint32_t i = 0; i < t->groups[g].parallelism; i++)
            flush_channel(t, &t->groups[g].channels[i]);
    /* All owed credits go back: the sender's in-flight budget counts
     * unreturned batches, and a busy worker may not be idle again soon. */
    for (uint32_t i = 0; i < t->n_inputs; i++)
        return_credit(t, &t->inputs[i], true);
}

int eddy_task_step(eddy_task_t *self, uint64_t now_ns, eddy_err_t *err)
{
#ifndef EDDY_NO_TASK_TIMING
    eddy_task_account(self, now_ns);
#endif
    int rc = self->fault            ? take_fault(self, err)
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
            rc = take_fault(self, err);
            self->failed = true;
            self->finished = true;
        }
    }
    return rc;
}

void eddy_task_tick(eddy_task_t *self, uint64_t now_ns)
{
    if (self->finished || self->fault || now_ns < self->next_tick_ns)
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

void eddy_task_flush(eddy_task_t *self)
{
    for (uint32_t g = 0; g < self->n_groups; g++)
        for (uint32_t i = 0; i < self->groups[g].parallelism; i++)
            flush_channel(self, &self->groups[g].channels[i]);
    for (uint32_t i = 0; i < self->n_inputs; i++)
        return_credit(self, &self->inputs[i], true);
}

void eddy_task_account(eddy_task_t *self, uint64_t now_ns)
{
    if (now_ns <= self->last_account_ns)
        return;
    uint64_t delta = now_ns - self->last_account_ns;
    if (outputs_backlogged(self))
        self->blocked_ns += delta;
    else
        self->idle_ns += delta;
    self->last_account_ns = now_ns;
}

/* A load window lasts at least a second and, unless it is ten seconds
 * old, holds at least a thousand records: from fewer, the busiest of 128
 * key groups looks hotter than it is. */
#define KEY_LOAD_WINDOW_MIN_NS 1000000000ull
#define KEY_LOAD_WINDOW_MAX_NS 10000000000ull
#define KEY_LOAD_MIN_RECORDS 1000u

void eddy_task_roll_key_loads(eddy_task_t *self, uint64_t now_ns)
{
    uint64_t elapsed = now_ns > self->load_window_start_ns ? now_ns - self->load_window_start_ns : 0;
    if (elapsed < KEY_LOAD_WINDOW_MIN_NS)
        return;
    uint32_t k = self->graph->max_parallelism;
    uint64_t most = 0;
    for (uint32_t g = 0; g < self->n_groups; g++) {
        const output_group_t *grp = &self->groups[g];
        if (!grp->kg_sent)
            continue;
        uint64_t all = 0;
        for (uint32_t kg = 0; kg < k; kg++)
            all += grp->kg_sent[kg];
        most = all > most ? all : most;
    }
    if (most < KEY_LOAD_MIN_RECORDS && elapsed < KEY_LOAD_WINDOW_MAX_NS)
        return;
    uint64_t window_ms = elapsed / 1000000u;
    self->n_key_loads = 0;
    for (uint32_t g = 0; g < self->n_groups; g++) {
        output_group_t *grp = &self->groups[g];
        if (!grp->kg_sent)
            continue;
        eddy_key_load_t load = {.dst_stage = grp->dst_stage,
                                .window_ms = window_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)window_ms};
        for (uint32_t kg = 0; kg < k; kg++) {
            load.records += grp->kg_sent[kg];
            if (grp->kg_sent[kg] > load.key_group_records) {
                load.key_group_records = grp->kg_sent[kg];
                load.key_group = kg;
            }
        }
        memset(grp->kg_sent, 0, k * sizeof *grp->kg_sent);
        if (load.records && self->n_key_loads < EDDY_KEY_LOADS_MAX)
            self->key_loads[self->n_key_loads++] = load;
    }
    self->load_window_start_ns = now_ns;
}

void eddy_task_metrics(const eddy_task_t *self, eddy_task_metrics_t *out)
{
    memset(out, 0, sizeof *out);
    out->job = self->job;
    out->epoch = self->epoch;
    out->stage = self->stage;
    out->instance = self->instance;
    out->records_in = self->records_in;
    out->records_out = self->records_out;
    out->busy_ns = self->busy_ns;
    out->idle_ns = self->idle_ns;
    out->blocked_ns = self->blocked_ns;
    if (self->state) {
        out->state_keys = eddy_keyed_state_keys(self->state);
        out->state_bytes = eddy_keyed_state_bytes(self->state);
    }
    out->position = self->source ? self->def->source->position(self->source) : -1;
    out->watermark = self->watermark;
    out->late_records = self->late_records;
    out->rejected_records = self->rejected_records;
    out->source_lag = self->source ? self->source_lag : -1;
    out->offered_rate = self->offered_rate;
    out->latency = self->latency;
    out->event_lag = self->event_lag;
    out->n_key_loads = self->n_key_loads;
    memcpy(out->key_loads, self->key_loads, sizeof out->key_loads);
    out->report = self->report;
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
    uint64_t wake = needs_ticks(self) ? self->next_tick_ns : UINT64_MAX;
    if (!self->source || !self->running || self->source_done || self->waiting_fd ||
        outputs_backlogged(self))
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
