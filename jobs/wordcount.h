/* wordcount.h - the wordcount job definition. */
#ifndef EDDY_JOBS_WORDCOUNT_H
#define EDDY_JOBS_WORDCOUNT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "plan/graph.h"

extern const eddy_job_def_t eddy_wordcount_job;

#endif
