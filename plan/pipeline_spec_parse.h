/* pipeline_spec_parse.h - the spec reader's helpers, for step kinds parsed
 * in their own files (plan/pipeline_join.c, plan/pipeline_plugin_step.c):
 * errors as "FILE:LINE: FIELD: what", checked keys, values, expressions,
 * and a nested list of steps (a join's other side). Internal to plan/. */
#ifndef EDDY_PLAN_PIPELINE_SPEC_PARSE_H
#define EDDY_PLAN_PIPELINE_SPEC_PARSE_H

#include "plan/expr.h"
#include "plan/pipeline_spec.h"
#include "plan/yaml_doc.h"

typedef struct eddy_pspec_ctx {
    const char *file;
    eddy_err_t *err;
    const char *prefix; /* before "steps[I]" in field names (a nested list), or NULL */
} eddy_pspec_ctx_t;

#define EDDY_PSPEC_MAX_PARALLELISM 32768

int eddy_pspec_fail(const eddy_pspec_ctx_t *c, const eddy_ynode_t *at, const char *field,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Only the keys in allowed (NULL-terminated) in map. */
int eddy_pspec_check_keys(const eddy_pspec_ctx_t *c, const eddy_ynode_t *map, const char *field,
                          const char *const *allowed);
int eddy_pspec_scalar(const eddy_pspec_ctx_t *c, const eddy_ynode_t *n, const char *field, char **out);
int eddy_pspec_uint(const eddy_pspec_ctx_t *c, const eddy_ynode_t *n, const char *field,
                    uint32_t min, uint32_t max, uint32_t *out);
/* text parses as an expression over cols[0..n). */
int eddy_pspec_check_expr(const eddy_pspec_ctx_t *c, const eddy_ynode_t *at, const char *field,
                          const char *text, char **cols, uint32_t n);
/* Type mismatch: text's value, where its form tells (eddy_expr_static_type),
 * is not of type want (EDDY_VAL_BOOL, or EDDY_VAL_FLOAT for a number). */
int eddy_pspec_check_type(const eddy_pspec_ctx_t *c, const eddy_ynode_t *at, const char *field,
                          const char *text, char **cols, uint32_t n, eddy_val_type_t want);
bool eddy_pspec_is_identifier(const char *s);
/* Parses the list n into s's steps, starting from s's source columns. */
int eddy_pspec_parse_steps(const eddy_pspec_ctx_t *c, const eddy_ynode_t *n,
                           eddy_pipeline_spec_t *s);

/* plan/pipeline_plugin_step.c: a `plugin: NAME` step m (its keys plugin,
 * config, columns): the operator kind, its config, and its output columns
 * (default: cols). */
int eddy_pipeline_plugin_step_parse(const eddy_pspec_ctx_t *c, const eddy_ynode_t *m,
                                    const char *field, char **cols, uint32_t n_cols,
                                    eddy_pstep_t *st);

#endif
