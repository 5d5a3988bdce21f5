/* The task's watermark: minimum over live channels, idleness, end of input,
 * a restored floor, and never backwards. */
#include <criterion/criterion.h>

#include "api/operator.h"
#include "runtime/watermark_valve.h"

Test(watermark_valve, minimum_over_channels_and_monotonic)
{
    eddy_wm_valve_t *v = eddy_wm_valve_new(3, EDDY_WATERMARK_MIN);
    int64_t out = 0;
    cr_assert_not(eddy_wm_valve_watermark(v, 0, 100, &out), "two channels still at -inf");
    cr_assert_not(eddy_wm_valve_watermark(v, 1, 50, &out));
    cr_assert(eddy_wm_valve_watermark(v, 2, 70, &out));
    cr_assert_eq(out, 50);
    cr_assert_not(eddy_wm_valve_watermark(v, 1, 40, &out), "a channel never goes back");
    cr_assert(eddy_wm_valve_watermark(v, 1, 200, &out));
    cr_assert_eq(out, 70);
    cr_assert_eq(eddy_wm_valve_current(v), 70);
    eddy_wm_valve_destroy(&v);
    cr_assert_null(v);
}

Test(watermark_valve, ended_channels_leave_and_all_ended_is_max)
{
    eddy_wm_valve_t *v = eddy_wm_valve_new(2, EDDY_WATERMARK_MIN);
    int64_t out = 0;
    eddy_wm_valve_watermark(v, 0, 10, &out);
    cr_assert(eddy_wm_valve_ended(v, 1, &out));
    cr_assert_eq(out, 10);
    cr_assert(eddy_wm_valve_ended(v, 0, &out));
    cr_assert_eq(out, EDDY_WATERMARK_MAX);
    cr_assert_not(eddy_wm_valve_watermark(v, 0, 20, &out), "an ended channel says nothing");
    eddy_wm_valve_destroy(&v);
}

Test(watermark_valve, idle_channel_is_excluded_and_rejoins_when_caught_up)
{
    eddy_wm_valve_t *v = eddy_wm_valve_new(2, EDDY_WATERMARK_MIN);
    int64_t out = 0;
    eddy_wm_valve_watermark(v, 0, 100, &out);
    cr_assert(eddy_wm_valve_idle(v, 1, &out), "the idle channel held the minimum at -inf");
    cr_assert_eq(out, 100);
    cr_assert(eddy_wm_valve_watermark(v, 0, 300, &out));
    cr_assert_eq(out, 300);
    /* Channel 1 wakes up behind: it does not pull the clock back. */
    eddy_wm_valve_activity(v, 1);
    cr_assert(eddy_wm_valve_watermark(v, 0, 400, &out));
    cr_assert_eq(out, 400, "channel 1 is not aligned yet");
    cr_assert_not(eddy_wm_valve_watermark(v, 1, 350, &out));
    cr_assert_eq(eddy_wm_valve_current(v), 400);
    /* Once caught up it holds the minimum again. */
    cr_assert_not(eddy_wm_valve_watermark(v, 1, 450, &out));
    cr_assert(eddy_wm_valve_watermark(v, 0, 900, &out));
    cr_assert_eq(out, 450);
    eddy_wm_valve_destroy(&v);
}

Test(watermark_valve, all_idle_holds_the_clock)
{
    eddy_wm_valve_t *v = eddy_wm_valve_new(2, EDDY_WATERMARK_MIN);
    int64_t out = 0;
    eddy_wm_valve_watermark(v, 0, 5, &out);
    eddy_wm_valve_watermark(v, 1, 7, &out);
    cr_assert_eq(eddy_wm_valve_current(v), 5);
    cr_assert(eddy_wm_valve_idle(v, 0, &out));
    cr_assert_eq(out, 7);
    cr_assert_not(eddy_wm_valve_idle(v, 1, &out));
    cr_assert(eddy_wm_valve_all_idle(v));
    cr_assert_eq(eddy_wm_valve_current(v), 7);
    cr_assert(eddy_wm_valve_watermark(v, 1, 9, &out), "a watermark makes the channel active");
    cr_assert_eq(out, 9);
    cr_assert_not(eddy_wm_valve_all_idle(v));
    eddy_wm_valve_destroy(&v);
}

Test(watermark_valve, restored_floor_is_never_undercut)
{
    eddy_wm_valve_t *v = eddy_wm_valve_new(2, 1000);
    int64_t out = 0;
    cr_assert_eq(eddy_wm_valve_current(v), 1000);
    cr_assert_not(eddy_wm_valve_watermark(v, 0, 10, &out));
    cr_assert_not(eddy_wm_valve_watermark(v, 1, 20, &out));
    cr_assert_eq(eddy_wm_valve_current(v), 1000);
    cr_assert_not(eddy_wm_valve_watermark(v, 0, 1500, &out));
    cr_assert(eddy_wm_valve_watermark(v, 1, 1200, &out));
    cr_assert_eq(out, 1200);
    eddy_wm_valve_destroy(&v);
}

Test(watermark_valve, out_of_range_channels_are_ignored)
{
    eddy_wm_valve_t *v = eddy_wm_valve_new(0, EDDY_WATERMARK_MIN);
    int64_t out = 0;
    cr_assert_not(eddy_wm_valve_watermark(v, 0, 1, &out));
    cr_assert_not(eddy_wm_valve_idle(v, 3, &out));
    cr_assert_not(eddy_wm_valve_ended(v, 3, &out));
    cr_assert_not(eddy_wm_valve_all_idle(v));
    eddy_wm_valve_destroy(&v);
}
