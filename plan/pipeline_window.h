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

#include <stddef.h>
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

/* What an aggregate or max_by step keeps per key and window (its store,
 * decided from the spec when it is parsed; docs/pipelines.md):
 * - FIXED: one fixed-size accumulator that merges exactly (count,
 *   count_distinct only): sessions merge it, the combiner pre-aggregates it;
 * - ORDERED: one fixed-size accumulator folded in row order, as the rows
 *   would be (sum and avg, whose float sums depend on the order, quantile,
 *   whose sketch may collapse, top_k, whose candidate table does): no merge,
 *   so not for sessions and without a combiner;
 * - ROWS: every row, folded when the window fires: max_by, min, max,
 *   first, last (their values may be strings of any length, kept with
 *   their bytes), ORDERED aggregates in a session, or an accumulator above
 *   EDDY_WINDOW_MAX_ACC. */
typedef enum eddy_pipeline_state {
    EDDY_PIPELINE_STATE_ROWS,
    EDDY_PIPELINE_STATE_FIXED,
    EDDY_PIPELINE_STATE_ORDERED,
} eddy_pipeline_state_t;

/* sum and avg's fixed slot. */
typedef struct eddy_pipeline_sum_slot {
    int64_t n; /* numbers added */
    int64_t isum;
    double fsum;
    int64_t is_float; /* a float was added or the integer sum overflowed */
} eddy_pipeline_sum_slot_t;

/* Bytes of fn's fixed slot (a multiple of 8), 0 when fn keeps rows. */
size_t eddy_pipeline_agg_slot_size(eddy_agg_fn_t fn);
/* The store of aggregate step st (AGGREGATE or MAX_BY); session: its window
 * is a session window. */
eddy_pipeline_state_t eddy_pipeline_agg_state(const eddy_pstep_t *st, bool session);
/* "rows", "fixed" or "ordered" (`eddy plan`). */
const char *eddy_pipeline_state_name(eddy_pipeline_state_t state);

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
