/* pipeline_join.h - the keyed two-input step that runs a pipeline's `join`
 * (plan/pipeline_join.h; docs/pipelines.md). Rows come keyed by their first
 * field (key_by "tab_prefix"): each side's last chain writes
 * "KEY<TAB>[TIME<TAB>]COLUMNS..." (pipeline rows, operators/pipeline_row.h;
 * TIME, an integer epoch ms, only when windowed). Config:
 *   type       "inner" (default) | "semi" | "union"
 *   window_ms  > 0: tumbling event-time windows of this size (default 0: none)
 * Inner: every pair of a left and a right row with the same key (and
 * window) is emitted once, when its second row arrives, as the left's
 * columns then the right's. Semi: each left row is emitted once, when it
 * and a right row with its key (and window) have both arrived; right rows
 * beyond the first are not kept. Union: every row of either side is emitted
 * as it came (its columns, at its time), with no state. Without a window
 * both sides are kept in keyed state for good (an unbounded join); with
 * one, a window's rows are dropped when the watermark passes its end, and a
 * row whose window has ended is late (eddy_process_late).
 *
 * EDDY_PIPELINE_INTERVAL_JOIN_KIND is the interval join (an inner join;
 * config ignored): left rows come as "KEY<TAB>FROM<TAB>TO<TAB>COLUMNS...",
 * right rows as "KEY<TAB>TIME<TAB>COLUMNS...", and a right row joins a left
 * row of its key when FROM <= TIME <= TO, emitted (at TIME) when the second
 * of the two arrives. A left row is kept until the watermark reaches its
 * TO, a right row until the watermark reaches its TIME (a left row that is
 * not late comes before the watermark passes its FROM <= TIME); a left row
 * whose TO is behind the watermark, and a right row behind it that joins
 * no kept left row, are late. One event-time timer per key, at the
 * earliest end among its rows, drops what ended.
 *
 * All of it is keyed state: checkpointed and moved with its key groups on
 * a rescale. */
#ifndef EDDY_OPERATORS_PIPELINE_JOIN_H
#define EDDY_OPERATORS_PIPELINE_JOIN_H

#include "api/plugin.h"

#define EDDY_PIPELINE_JOIN_KIND "pipeline_join"
#define EDDY_PIPELINE_INTERVAL_JOIN_KIND "pipeline_interval_join"

int eddy_pipeline_join_register(eddy_registry_t *r, eddy_err_t *err);

#endif
