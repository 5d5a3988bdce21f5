/* sql_expr.h - SQL expressions (plan/sql_ast.h) checked against the
 * columns a query sees and written as pipeline expressions (plan/expr.h):
 * `price * 908 / 1000`, `state IN ('OR', 'ID')` -> `(state == 'OR' or
 * state == 'ID')`, `name LIKE 'A%'` -> `matches(name, '^A.*$')`, CASE ->
 * nested if(), CAST -> int()/float()/string().
 *
 * The relation (eddy_sql_rel_t) is what a FROM clause produced: each
 * column's SQL name, the table alias that may qualify it, the pipeline
 * field that holds it, its type, and whether it is the source's event time
 * (a time attribute windows can use). Inside a job a TIMESTAMP(3) is epoch
 * milliseconds; only the final output writes it as text.
 *
 * Errors (unknown column with the closest name, ambiguous column, type
 * mismatch, unknown function, unsupported construct) point at the node. */
#ifndef EDDY_PLAN_SQL_EXPR_H
#define EDDY_PLAN_SQL_EXPR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "plan/sql_ast.h"
#include "plan/sql_lex.h"

/* A growing string; on out of memory it stays empty and oom is set. */
typedef struct eddy_sql_buf {
    char *p;
    size_t n, cap;
    bool oom;
} eddy_sql_buf_t;

void eddy_sql_buf_printf(eddy_sql_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text (owned by b; "" when empty). */
const char *eddy_sql_buf_str(const eddy_sql_buf_t *b);
/* Hands the text to the caller (NULL on out of memory) and empties b. */
char *eddy_sql_buf_take(eddy_sql_buf_t *b);
void eddy_sql_buf_clear(eddy_sql_buf_t *b);

typedef struct eddy_sql_col {
    char *qual;     /* the alias (or table name) that qualifies it, or NULL */
    char *name;     /* its SQL name */
    char *field;    /* the pipeline field holding it */
    eddy_sql_type_t type;
    bool rowtime;   /* the source's event time, unchanged */
} eddy_sql_col_t;

typedef struct eddy_sql_rel {
    eddy_sql_col_t *cols;
    uint32_t n;
} eddy_sql_rel_t;

/* Adds a column (copies the strings); -1 on out of memory. */
int eddy_sql_rel_add(eddy_sql_rel_t *r, const char *qual, const char *name, const char *field,
                     eddy_sql_type_t type, bool rowtime);
void eddy_sql_rel_clear(eddy_sql_rel_t *r);

/* How an aggregating query's expressions are read: a subexpression equal
 * to a GROUP BY expression is that group's output field, an aggregate call
 * is whatever agg() makes of it (it adds an aggregate and names its field);
 * any other column is an error. */
typedef struct eddy_sql_group {
    char **texts;              /* each GROUP BY expression, translated against the input */
    char **fields;             /* the aggregate's output field of each */
    eddy_sql_type_t *types;
    uint32_t n;
    int (*agg)(void *arg, const eddy_sql_expr_t *call, char **field, eddy_sql_type_t *type);
    void *arg;
} eddy_sql_group_t;

typedef struct eddy_sql_xctx {
    const eddy_sql_src_t *src;
    eddy_err_t *err;
    const eddy_sql_rel_t *rel;     /* the columns the expression reads */
    const eddy_sql_group_t *group; /* an aggregating query's groups, or NULL */
    bool quiet;                    /* no error message (a trial translation) */
} eddy_sql_xctx_t;

/* Writes x as a pipeline expression into out and its type into *type. */
int eddy_sql_translate(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *out,
                       eddy_sql_type_t *type);

/* The column x (a COLUMN node) names in rel: its index, or -1 with "unknown
 * column 'x' (did you mean 'y'?)" or "ambiguous column". */
int eddy_sql_resolve(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x);

/* True for COUNT, SUM, MIN, MAX, AVG. */
bool eddy_sql_is_aggregate(const char *name);
/* True when x contains an aggregate call (not under an OVER). */
bool eddy_sql_has_aggregate(const eddy_sql_expr_t *x);

/* The candidate closest to name by edit distance, or NULL when none is
 * close enough to suggest. */
const char *eddy_sql_closest(const char *name, const char *const *cands, uint32_t n);

bool eddy_sql_type_numeric(eddy_sql_type_t t);

#endif
