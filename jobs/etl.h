/* etl.h - the etl job definition and its line transform (shared with tests). */
#ifndef EDDY_JOBS_ETL_H
#define EDDY_JOBS_ETL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/plugin.h"

/* Registers the job, its CSV generator and its transform. */
int eddy_etl_register(eddy_registry_t *r, eddy_err_t *err);

/* The etl transform of one line (without '\n'): "user,item,amount" with an
 * integer amount >= min_amount becomes "user\titem\t<2*amount>" in out
 * (NUL-terminated); returns its length, or -1 when the line is dropped
 * (filtered out, or malformed: not exactly three fields, an empty user or
 * item, an amount that is not a decimal integer or whose double overflows).
 * A trailing '\r' is ignored. */
int eddy_etl_transform(const char *line, size_t len, int64_t min_amount, char *out, size_t size);

#endif
