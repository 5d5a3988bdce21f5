/* jobs.h - registration of the built-in jobs (wordcount, etl; jobs/registry.c). */
#ifndef EDDY_JOBS_JOBS_H
#define EDDY_JOBS_JOBS_H

void eddy_jobs_register_builtin(void);

#endif
