/* task_input.c - a task's input side (see task_internal.h).
 *
 * Owns the input channels of a task (one per upstream instance and input),
 * their queues of delivered messages, the watermark valve over them and the
 * credits returned upstream as batches are consumed. */
#include <stdlib.h>
#include <string.h>

#include "runtime/task_internal.h"

void task_free_entry(in_entry_t *e)
{
    eddy_data_msg_close(&e->msg);
    if (e->has_zmsg)
        zmq_msg_close(&e->zmsg);
    free(e->heap);
    free(e);
}

void task_free_inputs(eddy_task_t *t)
{
    for (uint32_t i = 0; i < t->n_inputs; i++) {
        while (t->inputs[i].head) {
            in_entry_t *e = t->inputs[i].head;
            t->inputs[i].head = e->next;
            task_free_entry(e);
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
int task_build_valve(eddy_task_t *t, eddy_err_t *err)
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

int task_build_inputs(eddy_task_t *t, eddy_placement_view_t pl, eddy_err_t *err)
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
    return task_build_valve(t, err);
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

void task_return_credit(eddy_task_t *t, input_channel_t *in, bool force)
{
    if (in->credit_owed == 0 || (!force && in->credit_owed < EDDY_CHANNEL_CREDITS / 4))
        return;
    eddy_channel_id_t id = {t->job, t->epoch, in->src_stage, in->src_instance, t->stage,
                            t->instance};
    size_t len;
    char *data = eddy_credit_encode(&id, in->credit_owed, &len);
    in->credit_owed = 0;
    task_send_message(t, in->src_worker, data, len);
}

static const char *data_type_name(eddy_data_type_t type)
{
    switch (type) {
    case EDDY_DATA_BATCH: return "data batch";
    case EDDY_DATA_BARRIER: return "barrier";
    case EDDY_DATA_EOS: return "end of stream";
    case EDDY_DATA_CREDIT: return "credit";
    case EDDY_DATA_WATERMARK: return "watermark";
    case EDDY_DATA_HANDOFF: return "handoff";
    case EDDY_DATA_STATE_CHUNK: return "state chunk";
    }
    return "message";
}

/* Rejections are protocol violations (the caller reports the task failed,
 * so the job is restored rather than wedged by a lost message). */
int eddy_task_deliver(eddy_task_t *self, eddy_data_msg_t *msg, zmq_msg_t *zmsg, char *heap,
                      eddy_err_t *err)
{
    uint32_t src = msg->channel.src_instance;
    if (msg->type == EDDY_DATA_STATE_CHUNK) {
        /* Out of band, from the old owner of moved key groups. */
        int rc = msg->channel.src_stage == self->stage ? task_on_state_chunk(self, msg, err)
                 : eddy_err_set(err, "protocol violation: state chunk for %s[%u] from stage %u",
                                self->def->name, self->instance, msg->channel.src_stage);
        if (rc < 0)
            task_set_fault(self, err->msg);
        eddy_data_msg_close(msg);
        free(heap);
        if (zmsg)
            zmq_msg_close(zmsg);
        return rc;
    }
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

bool task_all_inputs_ended(const eddy_task_t *t)
{
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (!t->inputs[i].eos || t->inputs[i].head)
            return false;
    return true;
}

input_channel_t *task_next_ready_input(eddy_task_t *t)
{
    for (uint32_t k = 0; k < t->n_inputs; k++) {
        uint32_t i = (t->next_input + k) % t->n_inputs;
        input_channel_t *in = &t->inputs[i];
        if (in->head && !in->hold_full && !task_channel_blocked(t, in)) {
            t->next_input = (i + 1) % t->n_inputs;
            return in;
        }
    }
    return NULL;
}

bool task_has_ready_input(const eddy_task_t *t)
{
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (t->inputs[i].head && !t->inputs[i].hold_full && !task_channel_blocked(t, &t->inputs[i]))
            return true;
    return false;
}
