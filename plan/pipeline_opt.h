/* pipeline_opt.h - the static optimizer of a pipeline's steps (after
 * Hirzel et al., "A catalog of stream processing optimizations", ACM CSUR
 * 2014). Rules, each applied only where its safety condition holds:
 *  - filter before map: a filter reading only columns a map passes through
 *    unchanged (COLUMN: COLUMN) moves before it (both stateless; the
 *    filter sees the same values either way, and fewer rows reach the map);
 *  - filter order: adjacent filters (stateless, commutative: a conjunction)
 *    run cheapest first, by estimated cost (expression size, regexes and
 *    string scans weigh more);
 *  - fusion: adjacent stateless steps run as one operator (one call per
 *    record, no row written between them).
 * Every rewrite is logged with the rule and why it was safe, for `eddy
 * plan --pipeline`. */
#ifndef EDDY_PLAN_PIPELINE_OPT_H
#define EDDY_PLAN_PIPELINE_OPT_H

#include <stdbool.h>
#include <stdio.h>

#include "plan/pipeline_spec.h"

typedef struct eddy_pipeline_opt {
    uint32_t *order;     /* steps in run order (indices into spec->steps) */
    uint32_t n;
    uint32_t *group_end; /* fused operators: steps [group_end[g-1], group_end[g]) */
    uint32_t n_groups;
    char **log;          /* one line per rewrite */
    uint32_t n_log;
} eddy_pipeline_opt_t;

/* Plans spec's steps; optimize = false keeps the written order and one
 * operator per step. -1 only when out of memory. */
int eddy_pipeline_optimize(const eddy_pipeline_spec_t *spec, bool optimize, eddy_pipeline_opt_t *out,
                           eddy_err_t *err);
void eddy_pipeline_opt_clear(eddy_pipeline_opt_t *self);

/* Estimated cost of evaluating an expression once (relative units). */
double eddy_pipeline_expr_cost(const char *text);

#endif
