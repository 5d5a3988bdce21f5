/* nexmark.h - the built-in nexmark job (jobs/nexmark.c) and the process
 * functions of its join queries (jobs/nexmark_joins.c). */
#ifndef EDDY_JOBS_NEXMARK_H
#define EDDY_JOBS_NEXMARK_H

#include "api/plugin.h"

/* Registers the job with its operators, window and process functions. */
int eddy_nexmark_register(eddy_registry_t *r, eddy_err_t *err);
/* Registers nexmark_q3_join, nexmark_q8_join and nexmark_q4_winning. */
int eddy_nexmark_register_joins(eddy_registry_t *r, eddy_err_t *err);

#endif
