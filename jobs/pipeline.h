/* pipeline.h - the built-in job "pipeline": a declarative pipeline from a
 * YAML spec (docs/pipelines.md), and the loading `eddy plan --pipeline`
 * shares with it. */
#ifndef EDDY_JOBS_PIPELINE_H
#define EDDY_JOBS_PIPELINE_H

#include "api/plugin.h"
#include "plan/pipeline_opt.h"
#include "plan/pipeline_spec.h"

int eddy_pipeline_register(eddy_registry_t *r, eddy_err_t *err);

/* The job's flags (--spec, --spec-file, --no-optimize, ...) into a checked
 * spec and its optimised plan (caller frees both). */
int eddy_pipeline_load(int argc, char **argv, eddy_pipeline_spec_t **spec, eddy_pipeline_opt_t *opt,
                       eddy_err_t *err);

#endif
