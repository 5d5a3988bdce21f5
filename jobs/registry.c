/* registry.c - registers eddy's built-in kinds and jobs (see jobs.h). */
#include "connectors/kinds.h"
#include "jobs/etl.h"
#include "jobs/jobs.h"
#include "jobs/nexmark.h"
#include "jobs/pipeline.h"
#include "jobs/wordcount.h"
#include "operators/kinds.h"

int eddy_jobs_register_builtin(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_operators_register(r, err) < 0 || eddy_connectors_register(r, err) < 0 ||
        eddy_wordcount_register(r, err) < 0 || eddy_etl_register(r, err) < 0 ||
        eddy_nexmark_register(r, err) < 0 || eddy_pipeline_register(r, err) < 0)
        return -1;
    return 0;
}
