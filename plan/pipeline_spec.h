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
} eddy_pstep_kind_t;

struct eddy_pipeline_join;

typedef struct eddy_pstep {
    eddy_pstep_kind_t kind;
    uint32_t line;
    uint32_t index;      /* its position in the spec's steps (steps[index]) */
    char *filter;        /* FILTER: the predicate */
    char **columns;      /* MAP: output columns and their expressions; JOIN, PLUGIN: output columns */
    char **exprs;
    uint32_t n;
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
    /* sink */
    char *output;        /* a file for the byte-sorted result (NULL: stdout) */
} eddy_pipeline_spec_t;

/* Parses and checks a spec; file names it in errors. */
eddy_pipeline_spec_t *eddy_pipeline_spec_parse(const char *file, const char *text, size_t len,
                                               eddy_err_t *err);
void eddy_pipeline_spec_destroy(eddy_pipeline_spec_t **self_p);

/* The columns the step at position pos of order sees (pos = n_steps: the
 * output's); order lists step indices as they run (NULL: as written).
 * Their count in *n. */
char **eddy_pipeline_spec_columns_at(const eddy_pipeline_spec_t *self, const uint32_t *order,
                                     uint32_t pos, uint32_t *n);

#endif
