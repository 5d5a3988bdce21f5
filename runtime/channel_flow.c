/* channel_flow.c - time-bounded in-flight data of one channel (see
 * channel_flow.h).
 *
 * The rate is measured only over time when something was in flight: an idle
 * channel (slow producer) is not a slow receiver, and a channel throttled by
 * its own budget still measures budget / round trip, which grows the budget
 * by TARGET / round trip per window until the credits are the limit. */
#include "runtime/channel_flow.h"

#include <string.h>

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void set_budget(eddy_channel_flow_t *f, uint64_t budget)
{
    f->budget_bytes = clamp_u64(budget, 2u * EDDY_FLOW_MIN_BATCH_BYTES, f->max_budget_bytes);
    f->batch_bytes = (uint32_t)clamp_u64(f->budget_bytes / 4, EDDY_FLOW_MIN_BATCH_BYTES,
                                         f->max_batch_bytes);
}

void eddy_channel_flow_init(eddy_channel_flow_t *f, uint32_t max_batches,
                            uint32_t max_batch_bytes, uint64_t now_ns)
{
    memset(f, 0, sizeof *f);
    if (max_batches > EDDY_FLOW_MAX_BATCHES)
        max_batches = EDDY_FLOW_MAX_BATCHES;
    f->max_batch_bytes = max_batch_bytes > EDDY_FLOW_MIN_BATCH_BYTES ? max_batch_bytes
                                                                    : EDDY_FLOW_MIN_BATCH_BYTES;
    f->max_budget_bytes = (uint64_t)max_batches * f->max_batch_bytes;
    f->last_ns = now_ns;
    set_budget(f, EDDY_FLOW_INITIAL_BYTES);
}

bool eddy_channel_flow_may_send(const eddy_channel_flow_t *f, size_t bytes)
{
    /* At the full budget the credits alone limit the channel (batches run
     * a record over their nominal size, which must not cost a credit). */
    return f->n_inflight == 0 || f->budget_bytes >= f->max_budget_bytes ||
           f->inflight_bytes + bytes <= f->budget_bytes;
}

/* Time since the last event counts toward the window while data was in flight. */
static void advance(eddy_channel_flow_t *f, uint64_t now_ns)
{
    if (now_ns > f->last_ns && f->n_inflight > 0)
        f->window_ns += now_ns - f->last_ns;
    if (now_ns > f->last_ns)
        f->last_ns = now_ns;
}

void eddy_channel_flow_sent(eddy_channel_flow_t *f, size_t bytes, uint64_t now_ns)
{
    advance(f, now_ns);
    if (f->n_inflight == EDDY_FLOW_MAX_BATCHES) /* more than the credits: not tracked */
        return;
    uint32_t slot = (f->first + f->n_inflight) % EDDY_FLOW_MAX_BATCHES;
    f->sizes[slot] = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
    f->n_inflight++;
    f->inflight_bytes += f->sizes[slot];
}

void eddy_channel_flow_acked(eddy_channel_flow_t *f, uint32_t batches, uint64_t now_ns)
{
    advance(f, now_ns);
    for (; batches > 0 && f->n_inflight > 0; batches--) {
        uint32_t size = f->sizes[f->first];
        f->first = (f->first + 1) % EDDY_FLOW_MAX_BATCHES;
        f->n_inflight--;
        f->inflight_bytes -= size;
        f->window_bytes += size;
    }
    if (f->window_ns < EDDY_FLOW_WINDOW_NS || f->window_bytes == 0)
        return;
    double sample = (double)f->window_bytes * 1e9 / (double)f->window_ns;
    f->rate = f->rate > 0 ? 0.5 * f->rate + 0.5 * sample : sample;
    f->window_ns = f->window_bytes = 0;
    set_budget(f, (uint64_t)(f->rate * (double)EDDY_FLOW_TARGET_NS / 1e9));
}
