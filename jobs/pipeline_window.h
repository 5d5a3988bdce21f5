/* pipeline_window.h - how jobs/pipeline.c turns a spec's key_by, window,
 * aggregate and max_by steps into job steps: a key_by is a key field
 * written first in each row by the chain before it (read by the
 * "tab_prefix" key selector) and a shuffle; a window with its aggregate
 * or max_by is one pipeline_window step (operators/pipeline_agg.h). */
#ifndef EDDY_JOBS_PIPELINE_WINDOW_H
#define EDDY_JOBS_PIPELINE_WINDOW_H

#include <stdbool.h>

#include "api/stream.h"
#include "plan/pipeline_opt.h"
#include "plan/pipeline_spec.h"

/* "a,b,c": column names for a step's config (malloc'd; NULL: no memory). */
char *eddy_pipeline_join_columns(char **v, uint32_t n);

/* Adds the pipeline_chain step uid with config c (taken) after rows.
 * *keyed: rows carry a key field (updated for the output); has_steps: the
 * chain runs steps (a keyed section's run after the shuffle, keeping the
 * key); key_by: the chain writes this key_by's key first. */
eddy_stream_t eddy_pipeline_add_chain(eddy_stream_t rows, const char *uid, eddy_config_t *c,
                                      bool *keyed, bool has_steps, const eddy_pstep_t *key_by);

/* Adds the aggregate or max_by at position pos of o (window: the window
 * step before it, or NULL: over the whole input, per key, at its end). */
eddy_stream_t eddy_pipeline_add_window(eddy_stream_t rows, const eddy_pipeline_spec_t *s,
                                       const eddy_pipeline_opt_t *o, uint32_t pos,
                                       const eddy_pstep_t *window);

#endif
