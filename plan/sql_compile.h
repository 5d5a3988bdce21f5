/* sql_compile.h - a streaming SQL script (docs/sql.md) compiled into a
 * pipeline spec (plan/pipeline_spec.h), so that a SQL job is the built-in
 * job `pipeline`: optimised, elastic, checkpointed and rescalable like a
 * YAML pipeline.
 *
 * The script is parsed (plan/sql_parse.h), its tables checked
 * (plan/sql_catalog.h), and its INSERT (or bare SELECT) planned onto
 * pipeline steps: WHERE -> filter, SELECT -> map, GROUP BY -> key_by
 * [+ window] + aggregate (SELECT DISTINCT too), window TVFs and legacy
 * group windows -> window, a top-1 by RANK() -> key_by + window + max_by,
 * joins -> join, UNION ALL -> union. The steps
 * are built as a document tree and loaded by eddy_pipeline_spec_from_tree,
 * so every check of pipelines applies. */
#ifndef EDDY_PLAN_SQL_COMPILE_H
#define EDDY_PLAN_SQL_COMPILE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "plan/pipeline_spec.h"

typedef struct eddy_sql_compile_opts {
    bool has_output; /* the job has --output (a blackhole sink then still writes it) */
} eddy_sql_compile_opts_t;

/* Compiles the script text (file names it in errors); NULL with err
 * "FILE:LINE:COLUMN: message" and the line with a caret. */
eddy_pipeline_spec_t *eddy_sql_compile(const char *file, const char *text, size_t len,
                                       const eddy_sql_compile_opts_t *opts, eddy_err_t *err);

/* The script (when it parses) has an EXPLAIN statement: it is run by
 * printing the plan its statement compiles to (eddy plan --sql), not by
 * running it; eddy_sql_compile compiles it as that statement. */
bool eddy_sql_explains(const char *text, size_t len);

#endif
