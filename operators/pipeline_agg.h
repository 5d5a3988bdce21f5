/* pipeline_agg.h - a pipeline's windows and aggregates (docs/pipelines.md):
 * the window kind "pipeline_window" that runs a spec's window + aggregate
 * (or max_by), and the event-time assigners of csv sources.
 *
 * pipeline_window is an element-list window (api/window.h) with a
 * config-aware process function: the aggregate functions a spec names are
 * only known from the step's config, and an aggregate udf's add() and
 * merge() see no config, while a process function does (ctx->config).
 * So a window keeps its rows (keyed state: checkpointed, rescaled, merged
 * by the window operator like any window's) and computes the aggregates
 * when it fires. Its config, besides the window keys of api/window.h:
 *   columns   the rows' columns, comma-separated (rows start with the key
 *             field a key_by wrote: operators/pipeline_chain.h)
 *   mode      "aggregate" | "max_by"
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
#define EDDY_PIPELINE_CSV_TIME_PREFIX "pipeline_csv_time_"

int eddy_pipeline_agg_register(eddy_registry_t *r, eddy_err_t *err);

#endif
