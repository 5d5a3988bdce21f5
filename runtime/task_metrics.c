/* task_metrics.c - a task's figures (see task_internal.h).
 *
 * Owns the busy/idle/blocked accounting (DS2's useful time), the key load
 * windows of keyed outputs, and the snapshot of figures a heartbeat sends. */
#include <string.h>

#include "runtime/task_internal.h"
#include "state/keyed_state.h"

void eddy_task_account(eddy_task_t *self, uint64_t now_ns)
{
    if (now_ns <= self->last_account_ns)
        return;
    uint64_t delta = now_ns - self->last_account_ns;
    if (task_outputs_backlogged(self))
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
