/* task_output.c - a task's output side (see task_internal.h).
 *
 * Owns the output channels of a task: batch writers, credits and the
 * time-bounded in-flight budget (runtime/channel_flow.h), the queue of what
 * may not go yet, and where each record and control message goes (keyed
 * exchanges by key group, forward, rebalance). */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "net/partial.h"
#include "state/keygroup.h"
#include "runtime/task_internal.h"

/* Losing a batch would silently lose records, so a failed allocation fails
 * the task instead (the job then restores from its last checkpoint). */
static void out_enqueue(eddy_task_t *t, output_channel_t *ch, char *data, size_t len,
                        bool is_batch)
{
    out_entry_t *e = data ? malloc(sizeof *e) : NULL;
    if (!e) {
        free(data);
        task_set_fault(t, "out of memory queueing output");
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

void task_send_message(eddy_task_t *t, uint32_t worker, char *data, size_t len)
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
        task_send_message(t, ch->dst_worker, e->data, e->len);
        free(e);
    }
}

void task_flush_channel(eddy_task_t *t, output_channel_t *ch)
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
        task_flush_channel(t, ch);
}

void task_send_control(eddy_task_t *t, output_channel_t *ch, char *data, size_t len)
{
    task_flush_channel(t, ch);
    out_enqueue(t, ch, data, len, false);
    drain_pending(t, ch);
}

/* A FORWARD receiver listens to channel `instance` of its upstream only
 * (build_inputs), so data, watermarks, barriers and end of stream all go to
 * this one channel. */
static uint32_t forward_target(const eddy_task_t *t, const output_group_t *grp)
{
    return t->instance < grp->parallelism ? t->instance : 0;
}

void task_route(eddy_task_t *t, const eddy_record_t *rec)
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
            target = eddy_route_table_owner(&grp->routes, kg);
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

void task_broadcast_small(eddy_task_t *t, uint64_t barrier, bool eos)
{
    for (uint32_t g = 0; g < t->n_groups; g++) {
        for (uint32_t i = 0; i < t->groups[g].parallelism; i++) {
            if (!control_goes_to(t, &t->groups[g], i))
                continue;
            output_channel_t *ch = &t->groups[g].channels[i];
            task_flush_channel(t, ch);
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
void task_broadcast_watermark(eddy_task_t *t, int64_t wm, bool idle)
{
    for (uint32_t g = 0; g < t->n_groups; g++) {
        for (uint32_t i = 0; i < t->groups[g].parallelism; i++) {
            if (!control_goes_to(t, &t->groups[g], i))
                continue;
            output_channel_t *ch = &t->groups[g].channels[i];
            task_flush_channel(t, ch);
            size_t len;
            char *data = eddy_watermark_encode(&ch->id, wm, idle, &len);
            out_enqueue(t, ch, data, len, false);
            drain_pending(t, ch);
        }
    }
}

bool task_outputs_backlogged(const eddy_task_t *t)
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
bool task_outputs_piling_up(const eddy_task_t *t)
{
    for (uint32_t g = 0; g < t->n_groups; g++)
        for (uint32_t i = 0; i < t->groups[g].parallelism; i++)
            if (t->groups[g].channels[i].pending_batches > 1)
                return true;
    return false;
}

void task_free_groups(eddy_task_t *t)
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
        eddy_route_table_free(&grp->routes);
        free(grp->kg_sent);
    }
    free(t->groups);
    t->groups = NULL;
    t->n_groups = 0;
}

int task_build_groups(eddy_task_t *t, eddy_placement_view_t pl, eddy_err_t *err)
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
            uint32_t as_p = pl.stages[s].route_parallelism; /* fluid: 0 or below */
            if (eddy_route_table_init_as(&grp->routes, k, grp->parallelism,
                                         as_p ? as_p : grp->parallelism, err) < 0)
                return -1;
            grp->kg_sent = calloc(k, sizeof *grp->kg_sent);
            if (!grp->kg_sent)
                return eddy_err_set(err, "out of memory");
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

void eddy_task_flush(eddy_task_t *self)
{
    for (uint32_t g = 0; g < self->n_groups; g++)
        for (uint32_t i = 0; i < self->groups[g].parallelism; i++)
            task_flush_channel(self, &self->groups[g].channels[i]);
    for (uint32_t i = 0; i < self->n_inputs; i++)
        task_return_credit(self, &self->inputs[i], true);
}
