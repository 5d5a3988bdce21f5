/* pipeline_window.h - a pipeline spec's stateful steps (docs/pipelines.md):
 * key_by, window, aggregate and max_by, parsed and checked into
 * eddy_pstep_t (plan/pipeline_spec.h), and the aggregate functions they
 * name, parsed the same way here for the spec and for the operator that
 * runs them (operators/pipeline_agg.h).
 *
 * Shape: `key_by: EXPR` opens a keyed section; stateless steps may follow
 * (they run after the shuffle); then optionally `window: {...}`, which must
 * be followed by `aggregate:` or `max_by:`; an aggregate or max_by closes
 * the section (its output rows are not keyed). */
#ifndef EDDY_PLAN_PIPELINE_WINDOW_H
#define EDDY_PLAN_PIPELINE_WINDOW_H

#include <stdint.h>

#include "common/err.h"
#include "plan/pipeline_spec.h"
#include "plan/yaml_doc.h"
#include "state/sketch_cms.h"

/* Event time is read from one of the first this many csv source columns
 * (operators/pipeline_agg.h registers a timestamp assigner for each). */
#define EDDY_PIPELINE_TIME_COLUMNS 16

/* The output columns a windowed aggregate adds after the key. */
#define EDDY_PIPELINE_WINDOW_START "window_start"
#define EDDY_PIPELINE_WINDOW_END "window_end"

typedef enum eddy_agg_fn {
    EDDY_AGG_COUNT,
    EDDY_AGG_SUM,
    EDDY_AGG_MIN,
    EDDY_AGG_MAX,
    EDDY_AGG_AVG,
    EDDY_AGG_FIRST,
    EDDY_AGG_LAST,
    EDDY_AGG_COUNT_DISTINCT,
    EDDY_AGG_QUANTILE,
    EDDY_AGG_TOP_K,
} eddy_agg_fn_t;

/* top_k(x, K): K at most the count-min sketch's heavy-hitter table
 * (state/sketch_cms.h), which keeps that many candidates. */
#define EDDY_PIPELINE_TOP_K_MAX EDDY_CMS_TOP_K

typedef struct eddy_agg {
    eddy_agg_fn_t fn;
    char *arg; /* the argument expression (malloc'd), NULL for count() */
    double q;  /* quantile */
    uint32_t k; /* top_k */
} eddy_agg_t;

/* Parses "FUNC(EXPR)" (count(), quantile(EXPR, Q) and top_k(EXPR, K) too);
 * the argument is not checked against columns here. */
int eddy_pipeline_agg_parse(const char *text, eddy_agg_t *out, eddy_err_t *err);
void eddy_pipeline_agg_clear(eddy_agg_t *agg);

/* "10s", "500ms", "2m", "1h", or a bare number of ms; -1 when not one. */
int eddy_pipeline_duration(const char *text, int64_t *ms);

/* Parses step m (what: key_by, window, aggregate or max_by, its value v;
 * m's other keys, parallelism and max_parallelism, are the caller's) into
 * the spec's last step; *cols and *n_cols are the columns it sees and
 * become those after it. Errors "FILE:LINE: FIELD: what". */
int eddy_pipeline_parse_stateful(const char *file, const eddy_ynode_t *m, const char *what,
                                 const eddy_ynode_t *v, const char *field, eddy_pipeline_spec_t *s,
                                 char ***cols, uint32_t *n_cols, eddy_err_t *err);

/* One line for `eddy plan`: "key_by auction", "window sliding size 10000
 * ms slide 2000 ms (event time)", "aggregate bids: count()" and so on. */
void eddy_pipeline_stateful_describe(const eddy_pstep_t *st, char *out, size_t size);

/* Whole-spec checks after every step parsed: a window is followed by
 * aggregate or max_by; no join or plugin step runs inside a key_by's
 * section (its rows carry the key field). */
int eddy_pipeline_check_stateful(const char *file, const eddy_pipeline_spec_t *s, eddy_err_t *err);

#endif
