/* pipeline_spec.h - a declarative pipeline (docs/pipelines.md) read from
 * YAML into a checked model: its source, its steps in order, its sink.
 *
 * Every expression is parsed against the columns its step sees, so a spec
 * that loads is one that runs; errors name the file, line and field
 * ("q2.yaml:7: steps[1].filter: column 9: unknown field 'prise'"). The
 * optimizer (plan/pipeline_opt.h) rewrites the step list; jobs/pipeline.c
 * turns it into a job graph. */
#ifndef EDDY_PLAN_PIPELINE_SPEC_H
#define EDDY_PLAN_PIPELINE_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

typedef enum eddy_pstep_kind {
    EDDY_PSTEP_FILTER,
    EDDY_PSTEP_MAP,
    EDDY_PSTEP_JOIN,   /* plan/pipeline_join.h */
    EDDY_PSTEP_PLUGIN, /* a registered operator kind by name, with its config */
    /* Stateful steps (plan/pipeline_window.h parses them). */
    EDDY_PSTEP_KEY_BY,    /* expr: the key; the row keeps its columns */
    EDDY_PSTEP_WINDOW,    /* window: how the next step groups rows in time */
    EDDY_PSTEP_AGGREGATE, /* columns: key, [window_start, window_end,] outputs;
                           * exprs: FUNC(EXPR) of each output (NULL for the others) */
    EDDY_PSTEP_MAX_BY,    /* expr: keep the rows whose expr is the largest */
} eddy_pstep_kind_t;

typedef struct eddy_pwindow {
    char type[16];       /* tumbling | sliding | session */
    int64_t size_ms, slide_ms, gap_ms, lateness_ms;
    bool processing;     /* time: processing (else event) */
} eddy_pwindow_t;

struct eddy_pipeline_join;

typedef struct eddy_pstep {
    eddy_pstep_kind_t kind;
    uint32_t line;
    uint32_t index;      /* its position in the spec's steps (steps[index]) */
    char *uid;           /* `uid:` - the stable operator id its state is saved under
                          * (savepoints, docs/savepoints.md); NULL: derived from index */
    char *filter;        /* FILTER: the predicate */
    char **columns;      /* MAP: output columns and their expressions; JOIN, PLUGIN: output columns */
    char **exprs;
    uint32_t n;
    char *expr;          /* KEY_BY, MAX_BY */
    char *key_column;    /* KEY_BY: the key's column in an aggregate's output */
    eddy_pwindow_t window; /* WINDOW */
    bool windowed;       /* AGGREGATE, MAX_BY: per window (a window step before) */
    int state;           /* AGGREGATE, MAX_BY: eddy_pipeline_state_t (pipeline_window.h) */
    struct eddy_pipeline_join *join; /* JOIN */
    char *plugin;        /* PLUGIN: the operator kind */
    char **config_keys;  /* PLUGIN: its config, values as written (numbers and */
    char **config_values; /* true/false become ints and bools unless quoted) */
    bool *config_quoted;
    uint32_t n_config;
    uint32_t parallelism;     /* 0: the pipeline's */
    uint32_t max_parallelism; /* key groups of a keyed step (0: the job's) */
} eddy_pstep_t;

typedef struct eddy_pipeline_spec {
    char *name;
    /* source */
    char *input;         /* a path or URI (NULL: the job's --input) */
    char *format;        /* csv | json | text */
    bool ragged;         /* csv: fewer fields than columns read as nulls */
    char **columns;
    uint32_t n_columns;
    uint32_t parallelism; /* 0: the job's default */
    uint32_t max_parallelism; /* key groups of keyed steps (0: the job's default) */
    /* steps */
    eddy_pstep_t *steps;
    uint32_t n_steps;
    /* event time (the first event-time window's timestamp and delay) */
    int32_t time_column; /* the csv source column of event time, -1: none */
    int64_t watermark_delay_ms;
    /* sink */
    char *output;        /* a file for the byte-sorted result (NULL: stdout) */
} eddy_pipeline_spec_t;

static inline bool eddy_pstep_stateless(const eddy_pstep_t *st)
{
    return st->kind == EDDY_PSTEP_FILTER || st->kind == EDDY_PSTEP_MAP;
}

/* Steps that keep state per key (a join, a key_by's section): they may set
 * max_parallelism, which all of a job's keyed steps share. */
static inline bool eddy_pstep_keyed(const eddy_pstep_t *st)
{
    return st->kind == EDDY_PSTEP_JOIN || st->kind == EDDY_PSTEP_KEY_BY ||
           st->kind == EDDY_PSTEP_WINDOW || st->kind == EDDY_PSTEP_AGGREGATE ||
           st->kind == EDDY_PSTEP_MAX_BY;
}

/* Steps whose output columns (columns[0..n)) differ from their input's;
 * the others (filter, key_by, window, max_by) pass the columns through. */
static inline bool eddy_pstep_sets_columns(const eddy_pstep_t *st)
{
    return st->kind == EDDY_PSTEP_MAP || st->kind == EDDY_PSTEP_AGGREGATE ||
           st->kind == EDDY_PSTEP_JOIN || st->kind == EDDY_PSTEP_PLUGIN;
}

/* Parses and checks a spec; file names it in errors. */
eddy_pipeline_spec_t *eddy_pipeline_spec_parse(const char *file, const char *text, size_t len,
                                               eddy_err_t *err);
/* The same from a document tree built in memory (plan/sql_compile.c builds
 * one from SQL: the same checks, the same derived fields); its nodes'
 * lines are the lines errors name. */
struct eddy_ynode;
eddy_pipeline_spec_t *eddy_pipeline_spec_from_tree(const char *file, const struct eddy_ynode *root,
                                                   eddy_err_t *err);
void eddy_pipeline_spec_destroy(eddy_pipeline_spec_t **self_p);

/* The columns the step at position pos of order sees (pos = n_steps: the
 * output's); order lists step indices as they run (NULL: as written).
 * Their count in *n. */
char **eddy_pipeline_spec_columns_at(const eddy_pipeline_spec_t *self, const uint32_t *order,
                                     uint32_t pos, uint32_t *n);

/* "FILE:LINE: FIELD: msg" into err (for the step parsers); returns -1. */
int eddy_pspec_error(eddy_err_t *err, const char *file, uint32_t line, const char *field,
                     const char *msg);

#endif
