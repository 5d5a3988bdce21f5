/* channel_flow.h - how much data one output channel may have in flight, and
 * how large its batches are: bounded by time, not only by credits.
 *
 * Credits alone bound a channel to EDDY_CHANNEL_CREDITS full batches, which
 * is seconds of work for a slow receiver, and a checkpoint or rescale barrier
 * waits behind all of it. Like Flink's buffer debloating, the sender measures
 * how fast the receiver consumes (bytes of batches credited back per second
 * while something was in flight) and keeps about EDDY_FLOW_TARGET_NS of that
 * in flight, in batches of a quarter of it. Fast channels reach the credit
 * limit with full batches, so high-rate throughput is unchanged; a new
 * channel starts small and grows within a few round trips.
 *
 * Contract: the owner calls sent() for each batch it sends (after checking
 * may_send() and its credits) and acked() for each CREDIT, in order; batch
 * sizes come back from the credits FIFO. Not thread-safe (one task). */
#ifndef EDDY_RUNTIME_CHANNEL_FLOW_H
#define EDDY_RUNTIME_CHANNEL_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Data in flight per channel, in time at the receiver's measured rate. */
#define EDDY_FLOW_TARGET_NS (200ull * 1000u * 1000u)
/* Smallest batch: keeps per-batch costs negligible even for slow channels. */
#define EDDY_FLOW_MIN_BATCH_BYTES 512u
/* Budget of a channel that has not been measured yet (slow start). */
#define EDDY_FLOW_INITIAL_BYTES (8u * 1024u)
/* A rate sample covers at least this much time with data in flight. */
#define EDDY_FLOW_WINDOW_NS (20ull * 1000u * 1000u)
/* Most batches a channel can have in flight (its credits) this tracks. */
#define EDDY_FLOW_MAX_BATCHES 64u

typedef struct eddy_channel_flow {
    uint32_t max_batch_bytes;
    uint64_t max_budget_bytes;
    uint64_t budget_bytes;       /* may send while less than this is in flight */
    uint32_t batch_bytes;        /* batches are flushed at this size */
    uint32_t sizes[EDDY_FLOW_MAX_BATCHES]; /* in-flight batches, oldest first (ring) */
    uint32_t first, n_inflight;
    uint64_t inflight_bytes;
    uint64_t last_ns;            /* last sent()/acked() */
    uint64_t window_ns, window_bytes;
    double rate;                 /* bytes/s consumed; 0 until measured */
} eddy_channel_flow_t;

/* max_batches: the channel's credits (<= EDDY_FLOW_MAX_BATCHES). */
void eddy_channel_flow_init(eddy_channel_flow_t *f, uint32_t max_batches,
                            uint32_t max_batch_bytes, uint64_t now_ns);
/* True if a batch of `bytes` keeps the in-flight bytes within the budget;
 * always when nothing is in flight (a batch larger than the budget goes alone). */
bool eddy_channel_flow_may_send(const eddy_channel_flow_t *f, size_t bytes);
void eddy_channel_flow_sent(eddy_channel_flow_t *f, size_t bytes, uint64_t now_ns);
/* The receiver consumed the `batches` oldest in-flight batches. */
void eddy_channel_flow_acked(eddy_channel_flow_t *f, uint32_t batches, uint64_t now_ns);
static inline uint32_t eddy_channel_flow_batch_bytes(const eddy_channel_flow_t *f)
{
    return f->batch_bytes;
}

#endif
