/* registry.c - registers the built-in jobs (see jobs.h). */
#include "jobs/etl.h"
#include "jobs/jobs.h"
#include "jobs/wordcount.h"

void eddy_jobs_register_builtin(void)
{
    eddy_job_register(&eddy_wordcount_job);
    eddy_job_register(&eddy_etl_job);
}
