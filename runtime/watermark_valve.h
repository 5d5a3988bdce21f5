/* watermark_valve.h - a task's event-time clock from its input channels
 * (Flink's StatusWatermarkValve).
 *
 * The task's watermark is the minimum of its channels' watermarks, counting
 * only channels that are active, aligned and not ended; it never decreases
 * and never falls below the floor it starts at (a restored task's
 * checkpointed watermark). A channel that declares itself idle leaves the
 * minimum; when it becomes active again it rejoins only once its watermark
 * has caught up with the task's (until then its records may be late, but
 * the task's clock never goes back). Channels that ended count as +infinity,
 * so when every channel ended the watermark is EDDY_WATERMARK_MAX. Every
 * call that may move the watermark returns true and sets *out when it
 * advanced. */
#ifndef EDDY_RUNTIME_WATERMARK_VALVE_H
#define EDDY_RUNTIME_WATERMARK_VALVE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct eddy_wm_valve eddy_wm_valve_t;

/* NULL on allocation failure. n_channels may be 0 (a source). */
eddy_wm_valve_t *eddy_wm_valve_new(uint32_t n_channels, int64_t floor);
void eddy_wm_valve_destroy(eddy_wm_valve_t **self_p);

/* A WATERMARK from channel ch (a lower one than the channel's is ignored);
 * it also makes an idle channel active. */
bool eddy_wm_valve_watermark(eddy_wm_valve_t *self, uint32_t ch, int64_t wm, int64_t *out);
/* A record from channel ch: an idle channel becomes active again. */
void eddy_wm_valve_activity(eddy_wm_valve_t *self, uint32_t ch);
bool eddy_wm_valve_idle(eddy_wm_valve_t *self, uint32_t ch, int64_t *out);
bool eddy_wm_valve_ended(eddy_wm_valve_t *self, uint32_t ch, int64_t *out);

int64_t eddy_wm_valve_current(const eddy_wm_valve_t *self);
/* Every channel that has not ended is idle (and at least one is). */
bool eddy_wm_valve_all_idle(const eddy_wm_valve_t *self);

#endif
