/* pipeline_agg.h - a pipeline's windows and aggregates (docs/pipelines.md):
 * the window kinds (pipeline_window*) that run a spec's window + aggregate
 * (or max_by), and the event-time assigners of csv sources.
 *
 * Three window kinds run it, one per store (plan/pipeline_window.h
 * eddy_pipeline_state_t, chosen from the spec when it is parsed):
 *   pipeline_window          rows: an element-list window with a
 *                            config-aware process function that folds the
 *                            rows when the window fires (max_by; min, max,
 *                            first, last, whose values may be strings of any
 *                            length; sum, avg, quantile, top_k in sessions);
 *   pipeline_window_fixed    a fixed-size accumulator (api/window.h
 *                            eddy_window_accumulator_t) with merge: count
 *                            and count_distinct only (sessions, combiner);
 *   pipeline_window_ordered  the same accumulator without merge: rows are
 *                            folded in arrival order, as the rows store
 *                            would fold them (sum, avg, quantile, top_k).
 * Either way the state is keyed state: checkpointed, rescaled, merged by
 * the window operator like any window's. Their config, besides the window
 * keys of api/window.h:
 *   columns   the rows' columns, comma-separated (rows start with the key
 *             field a key_by wrote: operators/pipeline_chain.h)
 *   mode      "aggregate" | "max_by" (max_by: rows store only)
 *   windowed  aggregate: write window_start, window_end after the key
 *   aggs      how many aggregates; agg.I is "FUNC(EXPR)"
 *             (plan/pipeline_window.h)
 *   max_by    max_by's expression: the rows whose value is the largest
 *             are emitted unchanged (ties: all of them)
 * Aggregate rows are the key field, [start, end,] the values.
 *
 * Event time: the runtime's timestamp assigners take no config, so
 * "pipeline_csv_time_N" (N < EDDY_PIPELINE_TIME_COLUMNS) reads field N of a
 * csv line as epoch ms (0 when it is not an integer). */
#ifndef EDDY_OPERATORS_PIPELINE_AGG_H
#define EDDY_OPERATORS_PIPELINE_AGG_H

#include "api/plugin.h"

#define EDDY_PIPELINE_WINDOW_KIND "pipeline_window"
#define EDDY_PIPELINE_WINDOW_MAX_BY_KIND "pipeline_window_max_by"
#define EDDY_PIPELINE_WINDOW_FIXED_KIND "pipeline_window_fixed"
#define EDDY_PIPELINE_WINDOW_ORDERED_KIND "pipeline_window_ordered"
#define EDDY_PIPELINE_CSV_TIME_PREFIX "pipeline_csv_time_"

int eddy_pipeline_agg_register(eddy_registry_t *r, eddy_err_t *err);

#endif
