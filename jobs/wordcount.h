/* wordcount.h - the wordcount job definition and a helper it shares. */
#ifndef EDDY_JOBS_WORDCOUNT_H
#define EDDY_JOBS_WORDCOUNT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "worker/graph.h"

extern const eddy_job_def_t eddy_wordcount_job;
int eddy_parse_host_port(const char *text, char *host, size_t host_size, uint16_t *port,
                         eddy_err_t *err);

#endif
