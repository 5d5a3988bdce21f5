/* pipeline_join.h - a pipeline's `join` step (docs/pipelines.md): an inner
 * equi-join (or a semi-join) of the rows so far (the left side) with
 * another stream of rows (the right side: the pipeline's source, or another
 * input, through steps of its own), by key, for good or within tumbling
 * event-time windows:
 *
 *   - join:
 *       with:                  # the right side
 *         input: other.csv     # optional: default the pipeline's input
 *         steps: [...]         # filter / map steps of its own
 *       left_key: seller       # or on: COLUMN, when both sides have it
 *       right_key: id
 *       type: inner            # inner | semi
 *       window: {size: 10s, time: date_time}   # or left_time / right_time
 *       # or an interval join: right rows join a left row when
 *       # from <= time <= to (from, to over the left's columns, time the right's)
 *       window: {from: date_time, to: expires, time: date_time}
 *
 * Output columns: inner, the left's then the right's (a right column whose
 * name the left has too is called right_NAME); semi, the left's.
 *
 * A `union` step (`- union: {with: {steps: [...]}}`, SQL's UNION ALL) is
 * the same two-input step without keys or state: every row of either side
 * goes on, the other side's columns by position under the left's names. The right
 * side reads the pipeline source's format and columns. Runs as a keyed
 * two-input step (operators/pipeline_join.h). */
#ifndef EDDY_PLAN_PIPELINE_JOIN_H
#define EDDY_PLAN_PIPELINE_JOIN_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/pipeline_spec.h"

typedef struct eddy_pipeline_join {
    /* The right side: input (NULL: the pipeline's), format and columns (the
     * pipeline source's), and its steps. */
    eddy_pipeline_spec_t *right;
    char *left_key, *right_key;   /* expressions over each side's columns */
    bool semi;                    /* emit each left row once, when it has a match */
    bool left_outer;              /* type: left (windowed only): a left row without a match
                                   * in its window comes out once, the right's columns null */
    bool union_all;               /* a `union` step: every row of either side, as it is */
    int64_t window_ms;            /* 0: no window (state kept for good) */
    char *left_time, *right_time; /* window: each side's event time (epoch ms) */
    /* An interval window (then window_ms is 0 and left_time NULL): a right
     * row joins a left row when left_from <= right_time <= left_to. */
    char *left_from, *left_to;
    uint32_t n_left, n_right;     /* each side's columns at the join */
} eddy_pipeline_join_t;

struct eddy_pspec_ctx;
struct eddy_ynode;

/* Parses body (the mapping under `join:`) of step st; left is the pipeline
 * (its source's format and columns are the right side's), cols[0..n_cols)
 * the left side's columns. Sets st->join and st->columns/n (the output). */
int eddy_pipeline_join_parse(const struct eddy_pspec_ctx *c, const struct eddy_ynode *body,
                             const char *field, const eddy_pipeline_spec_t *left, char **cols,
                             uint32_t n_cols, eddy_pstep_t *st);
/* Parses body (the mapping under `union:`, {with: {input, steps}}) of step
 * st: the rows so far and the other side's, whose columns are taken by
 * position (as many as cols[0..n_cols), whose names the output keeps). It
 * runs as a join without state (union_all), keyed by each side's first
 * column so that its rows spread over its instances. */
int eddy_pipeline_union_parse(const struct eddy_pspec_ctx *c, const struct eddy_ynode *body,
                              const char *field, const eddy_pipeline_spec_t *left, char **cols,
                              uint32_t n_cols, eddy_pstep_t *st);
/* The join's type as the operator's config and `eddy plan` name it:
 * "union", "semi", "left" or "inner". */
const char *eddy_pipeline_join_type(const eddy_pipeline_join_t *j);
void eddy_pipeline_join_destroy(eddy_pipeline_join_t **self_p);

#endif
