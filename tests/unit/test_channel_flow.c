/* test_channel_flow.c - the time-bounded in-flight budget of one channel
 * (runtime/channel_flow.c), driven with made-up clocks: a fast receiver grows
 * the budget to the credit limit with full batches (throughput unchanged), a
 * slow one shrinks it to about EDDY_FLOW_TARGET_NS of its rate, with batches
 * no smaller than the minimum. */
#include <criterion/criterion.h>

#include "runtime/channel_flow.h"

#define MS (1000ull * 1000ull)
#define CREDITS 16u
#define BATCH (32u * 1024u)

/* Sends batches while the budget allows (up to the credits), then the
 * receiver consumes everything in flight at `rate` bytes/s and credits it
 * back 1 ms later: one round of a saturated channel. Returns the new clock. */
static uint64_t round_trip(eddy_channel_flow_t *f, uint64_t now, double rate)
{
    uint32_t sent = 0;
    uint64_t bytes = 0;
    while (sent < CREDITS && eddy_channel_flow_may_send(f, eddy_channel_flow_batch_bytes(f))) {
        uint32_t b = eddy_channel_flow_batch_bytes(f);
        eddy_channel_flow_sent(f, b, now);
        bytes += b;
        sent++;
    }
    now += (uint64_t)((double)bytes / rate * 1e9) + 1 * MS;
    eddy_channel_flow_acked(f, sent, now);
    return now;
}

Test(channel_flow, starts_small_and_never_blocks_an_empty_channel)
{
    eddy_channel_flow_t f;
    eddy_channel_flow_init(&f, CREDITS, BATCH, 0);
    cr_assert_eq(f.budget_bytes, EDDY_FLOW_INITIAL_BYTES);
    cr_assert_lt(eddy_channel_flow_batch_bytes(&f), BATCH);
    cr_assert(eddy_channel_flow_may_send(&f, 1000000)); /* even larger than the budget */
    eddy_channel_flow_sent(&f, 1000000, 0);
    cr_assert_not(eddy_channel_flow_may_send(&f, 1));
    eddy_channel_flow_acked(&f, 1, 1 * MS);
    cr_assert(eddy_channel_flow_may_send(&f, 1));
    eddy_channel_flow_sent(&f, EDDY_FLOW_INITIAL_BYTES / 2, 2 * MS);
    cr_assert(eddy_channel_flow_may_send(&f, EDDY_FLOW_INITIAL_BYTES / 2));
    cr_assert_not(eddy_channel_flow_may_send(&f, EDDY_FLOW_INITIAL_BYTES / 2 + 1));
}

Test(channel_flow, fast_receiver_reaches_full_batches_and_all_credits)
{
    eddy_channel_flow_t f;
    eddy_channel_flow_init(&f, CREDITS, BATCH, 0);
    uint64_t now = 0;
    while (now < 200 * MS && f.budget_bytes < (uint64_t)CREDITS * BATCH)
        now = round_trip(&f, now, 200e6); /* 200 MB/s */
    cr_assert_lt(now, 200 * MS, "ramp-up took %llu ms", (unsigned long long)(now / MS));
    cr_assert_eq(eddy_channel_flow_batch_bytes(&f), BATCH);
    cr_assert_eq(f.budget_bytes, (uint64_t)CREDITS * BATCH);
}

Test(channel_flow, slow_receiver_keeps_about_the_target_time_in_flight)
{
    eddy_channel_flow_t f;
    eddy_channel_flow_init(&f, CREDITS, BATCH, 0);
    uint64_t now = 0;
    const double rate = 50e3; /* 50 KB/s: a full credit window would be 10 s */
    for (int i = 0; i < 40; i++)
        now = round_trip(&f, now, rate);
    double inflight_s = (double)f.budget_bytes / rate;
    double target_s = (double)EDDY_FLOW_TARGET_NS / 1e9;
    cr_assert(inflight_s > 0.5 * target_s && inflight_s < 2 * target_s,
              "budget %llu bytes = %.3f s at the receiver's rate, target %.3f s",
              (unsigned long long)f.budget_bytes, inflight_s, target_s);
    cr_assert_geq(eddy_channel_flow_batch_bytes(&f), EDDY_FLOW_MIN_BATCH_BYTES);
    cr_assert_lt(eddy_channel_flow_batch_bytes(&f), BATCH);
}

Test(channel_flow, budget_follows_a_receiver_that_slows_down)
{
    eddy_channel_flow_t f;
    eddy_channel_flow_init(&f, CREDITS, BATCH, 0);
    uint64_t now = 0;
    for (int i = 0; i < 200; i++)
        now = round_trip(&f, now, 100e6);
    cr_assert_eq(f.budget_bytes, (uint64_t)CREDITS * BATCH);
    for (int i = 0; i < 20; i++)
        now = round_trip(&f, now, 20e3); /* 20 KB/s */
    cr_assert_leq(f.budget_bytes, 2 * (uint64_t)(20e3 * (double)EDDY_FLOW_TARGET_NS / 1e9) + 1,
                  "budget %llu bytes", (unsigned long long)f.budget_bytes);
    cr_assert_geq(f.budget_bytes, 2u * EDDY_FLOW_MIN_BATCH_BYTES);
}
