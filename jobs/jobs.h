/* jobs.h - registration of eddy's built-in kinds (operators/, connectors/)
 * and jobs (wordcount, etl) into a registry (jobs/registry.c). */
#ifndef EDDY_JOBS_JOBS_H
#define EDDY_JOBS_JOBS_H

#include "api/plugin.h"

int eddy_jobs_register_builtin(eddy_registry_t *r, eddy_err_t *err);

#endif
