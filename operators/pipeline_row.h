/* pipeline_row.h - a pipeline's row on the wire: its fields as one line in
 * PostgreSQL's COPY text format (tab-separated; \N is null; backslash,
 * tab, newline and carriage return escaped as \\ \t \n \r), so rows stay
 * readable in a changelog and written as they are by the file sinks, and
 * null stays apart from the empty string. Fields are typed only inside a
 * step (plan/expr.h coerces numeric text where numbers are needed). */
#ifndef EDDY_OPERATORS_PIPELINE_ROW_H
#define EDDY_OPERATORS_PIPELINE_ROW_H

#include <stddef.h>
#include <stdint.h>

#include "operators/etl_record.h"
#include "plan/expr.h"

/* Splits line[len] into exactly n fields (a different count is an error
 * naming both). Unescaped text goes to scratch, which is grown to len + 1
 * first so the values' pointers stay valid until scratch changes. */
int eddy_row_split(const char *line, size_t len, eddy_val_t *vals, uint32_t n, eddy_buf_t *scratch,
                   eddy_err_t *err);

/* Appends vals[0..n) as one row (no newline) to out. */
int eddy_row_join(const eddy_val_t *vals, uint32_t n, eddy_buf_t *out);

#endif
