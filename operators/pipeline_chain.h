/* pipeline_chain.h - the operator that runs a pipeline's stateless steps
 * (parse, filter, map) over one row, fused into one call per record
 * (docs/pipelines.md). Its config (an eddy_config_t, built by
 * jobs/pipeline.c from the optimised plan):
 *   input    "row" (a pipeline row, operators/pipeline_row.h) | "csv" |
 *            "json" | "text" (the whole line is one field)
 *   columns  the input's field names, comma-separated
 *   ragged   csv: a line with fewer fields has nulls for the rest
 *   adaptive adjacent filters run in the order an eddy keeps re-deciding
 *            from their observed cost and selectivity (default true;
 *            operators/filter_eddy.h)
 *   steps    how many steps; then for step I either
 *   step.I.filter  an expression (plan/expr.h): the row passes when true
 *   step.I.map     the output columns, comma-separated, and
 *   step.I.map.J   the expression of output column J
 *   keyed_input    input rows start with a key field (a key_by's), dropped
 *   keep_key       ... or kept in front of the output row
 *   key            an expression over the output columns: its value is
 *                  written first, as the key field the next step's
 *                  "tab_prefix" key selector reads (key_by)
 * Output: pipeline rows of the last map's columns (or the input's). Input
 * that does not parse is dropped and counted (eddy_rejected_records_total,
 * a rate-limited warning). */
#ifndef EDDY_OPERATORS_PIPELINE_CHAIN_H
#define EDDY_OPERATORS_PIPELINE_CHAIN_H

#include "api/plugin.h"

#define EDDY_PIPELINE_CHAIN_KIND "pipeline_chain"

int eddy_pipeline_chain_register(eddy_registry_t *r, eddy_err_t *err);

#endif
