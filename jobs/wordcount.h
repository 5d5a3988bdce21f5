/* wordcount.h - the wordcount job definition. */
#ifndef EDDY_JOBS_WORDCOUNT_H
#define EDDY_JOBS_WORDCOUNT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "api/plugin.h"

/* Registers the job and its split_words flat_map. */
int eddy_wordcount_register(eddy_registry_t *r, eddy_err_t *err);

#endif
