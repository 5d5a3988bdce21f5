/* sql_compile_int.h - the SQL compiler's state and helpers, shared by the
 * files that plan a script onto pipeline steps (not a public API;
 * plan/sql_compile.h is).
 *
 * One job per file:
 *   sql_compile.c         the statements: which INSERT or query runs, its
 *                         sink, the source node, the final output map
 *   sql_compile_util.c    compiler state (kept strings, errors), field
 *                         names, the simple steps, expressions and
 *                         conjuncts
 *   sql_compile_from.c    FROM items: tables, views, subqueries, window
 *                         TVFs (TUMBLE, HOP, CUMULATE, SESSION) and their
 *                         window columns
 *   sql_compile_join.c    joins, window joins and IN (SELECT ...) semi-joins
 *   sql_compile_topn.c    a top-1 by RANK() and its outer WHERE rk <= 1
 *   sql_compile_agg.c     GROUP BY (keys, windows, legacy group windows),
 *                         aggregates and HAVING
 *   sql_compile_select.c  a SELECT: its WHERE, then its aggregate or its
 *                         SELECT list
 *   sql_compile_union.c   a query: SELECTs joined by UNION ALL
 *
 * A query is planned bottom-up: each FROM item appends the steps that make
 * its rows to a step list (the pipeline's, or a join's right side's) and
 * returns the relation they carry (which pipeline field holds which SQL
 * column, its type, whether it is the source's event time). Strings made
 * while planning are kept in the compiler (sqlc_keep()) and freed at its
 * end, so the many error paths need no cleanup of their own. */
#ifndef EDDY_PLAN_SQL_COMPILE_INT_H
#define EDDY_PLAN_SQL_COMPILE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "plan/sql_ast.h"
#include "plan/sql_catalog.h"
#include "plan/sql_expr.h"
#include "plan/sql_tree.h"

#define MAX_VIEW_DEPTH 16

typedef enum { WIN_NONE, WIN_TVF, WIN_AGG } win_kind_t;

/* What a relation knows of windows: a window TVF's rows (window_start and
 * window_end not yet computed unless materialized), or a windowed
 * aggregate's result rows. */
typedef struct win {
    win_kind_t kind;
    const char *type; /* tumbling | sliding | session | cumulate (slide: its step) */
    int64_t size, slide, gap;
    int ws, we, wt;   /* columns window_start, window_end, window_time (-1 none) */
    int rowtime;      /* TVF: the descriptor column */
    bool materialized;
    uint32_t pos;
} win_t;

/* A RANK() OVER (...) select item waiting for its outer WHERE rk <= 1. */
typedef struct topn {
    bool pending;
    int rank_col;
    uint32_t pos;
    const char *key;   /* the partition's field (a window's end or start, or a key) */
    const char *order; /* the field to keep the largest of */
    win_t w;           /* the window partitioned by, or kind WIN_NONE */
} topn_t;

typedef struct rel {
    eddy_sql_rel_t r;
    win_t w;
    topn_t top;
} rel_t;

typedef struct comp {
    const eddy_sql_src_t *src;
    eddy_err_t *err;
    eddy_sql_catalog_t cat;
    const eddy_sql_table_t *source; /* the one source table (any built-in one for Nexmark) */
    bool time_used;                 /* the first event-time window has its timestamp */
    uint32_t depth;
    uint32_t other_side;            /* compiling a join's right side (no joins or unions there) */
    char **kept;
    uint32_t n_kept;
    bool oom;
} comp_t;

/* ---- sql_compile_util.c ---- */
/* The SQL line of byte offset pos. */
uint32_t sqlc_line_of(const comp_t *c, uint32_t pos);
/* Sets "out of memory"; -1. */
int sqlc_oom(comp_t *c);
/* s kept until the end of compilation; NULL (and oom) when s is NULL. */
const char *sqlc_keep(comp_t *c, char *s);
/* A kept formatted string. */
const char *sqlc_fmt(comp_t *c, const char *f, ...) __attribute__((format(printf, 2, 3)));
/* The error "FILE:LINE:COLUMN: message" at pos with its caret line; -1. */
int sqlc_fail(comp_t *c, uint32_t pos, const char *f, ...) __attribute__((format(printf, 3, 4)));
void sqlc_rel_init(rel_t *r);
/* Frees r's columns and makes it empty again. */
void sqlc_rel_clear(rel_t *r);
/* name is one of a's fields, of more[0..n), or an expression keyword. */
bool sqlc_taken(const char *name, const eddy_sql_rel_t *a, const char *const *more, uint32_t n);
/* A pipeline field name for SQL name base, not among a's fields nor more. */
const char *sqlc_fresh(comp_t *c, const char *base, const eddy_sql_rel_t *a,
                       const char *const *more, uint32_t n);
/* Steps appended to steps: {filter: text}, {map: {names[i]: exprs[i]}},
 * {kind: text} (key_by, max_by), and w's window step (the first event-time
 * window names the source's time column and watermark delay). */
int sqlc_add_filter(comp_t *c, eddy_ynode_t *steps, const char *text, uint32_t pos);
int sqlc_add_map(comp_t *c, eddy_ynode_t *steps, const char *const *names,
                 const char *const *exprs, uint32_t n, uint32_t pos);
int sqlc_add_simple(comp_t *c, eddy_ynode_t *steps, const char *kind, const char *text,
                    uint32_t pos);
int sqlc_add_window(comp_t *c, eddy_ynode_t *steps, const win_t *w, uint32_t pos);
/* x as a kept pipeline expression over r (or g's aggregate outputs), with
 * its type when type is not NULL. */
int sqlc_translate(comp_t *c, const eddy_sql_rel_t *r, const eddy_sql_group_t *g,
                   const eddy_sql_expr_t *x, const char **text, eddy_sql_type_t *type);
/* Appends x's conjuncts (split at AND) to *v. */
int sqlc_conjuncts(comp_t *c, const eddy_sql_expr_t *x, const eddy_sql_expr_t ***v, uint32_t *n);
/* Which of r's columns [0, split) (bit 1) and [split, n) (bit 2) x reads;
 * -1 on an unknown column (with its error). */
int sqlc_sides(comp_t *c, const eddy_sql_rel_t *r, uint32_t split, const eddy_sql_expr_t *x);
/* True when x names a window column (window_start, window_end, window_time). */
bool sqlc_reads_window(const rel_t *in, const eddy_sql_expr_t *x);

/* ---- sql_compile_from.c ---- */
/* Every column of r qualified by qual (or by nothing). */
int sqlc_requalify(comp_t *c, rel_t *r, const char *qual);
/* The rows of table (or view) name: its steps into steps, its columns
 * (fields not among avoid's) into out. */
int sqlc_scan(comp_t *c, const char *name, uint32_t pos, const char *alias, eddy_ynode_t *steps,
              const eddy_sql_rel_t *avoid, rel_t *out);
/* A window from its function name and arguments (a TVF's or a legacy GROUP
 * BY TUMBLE(...)'s intervals). */
int sqlc_window_of(comp_t *c, const char *fn, uint32_t pos, eddy_sql_expr_t *const *iv,
                   uint32_t n, win_t *w);
/* A window TVF's rows: its table's, with window_start, window_end and
 * window_time columns (not yet computed). */
int sqlc_compile_tvf(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps,
                     const eddy_sql_rel_t *avoid, rel_t *out);
/* A window TVF's rows with their window columns computed (tumbling only). */
int sqlc_materialize(comp_t *c, eddy_ynode_t *steps, rel_t *in);
/* Any FROM item; a join may take the query's WHERE (*where set to NULL). */
int sqlc_compile_from(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps,
                      const eddy_sql_rel_t *avoid, rel_t *out, const eddy_sql_expr_t **where);

/* ---- sql_compile_join.c ---- */
int sqlc_compile_join(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps, rel_t *out,
                      const eddy_sql_expr_t **where);
/* WHERE x IN (SELECT ...) on in's rows: a semi-join. */
int sqlc_compile_semi(comp_t *c, eddy_ynode_t *steps, rel_t *in, const eddy_sql_expr_t *x);

/* ---- sql_compile_topn.c ---- */
/* in's pending top-N from the outer WHERE's conjuncts cs (the rk one is
 * set to NULL). */
int sqlc_compile_topn(comp_t *c, eddy_ynode_t *steps, rel_t *in, const eddy_sql_expr_t **cs,
                      uint32_t n_cs);

/* ---- sql_compile_agg.c ---- */
/* s's GROUP BY, aggregates, HAVING and SELECT list over in. */
int sqlc_compile_aggregate(comp_t *c, const eddy_sql_select_t *s, eddy_ynode_t *steps,
                           rel_t *in, rel_t *out);

/* ---- sql_compile_select.c ---- */
/* The SELECT list as one map over in (or over an aggregate's output, g). */
int sqlc_select_items(comp_t *c, const eddy_sql_select_t *s, const rel_t *in,
                      const eddy_sql_group_t *g, eddy_ynode_t *steps, rel_t *out);
/* A SELECT's steps into steps and its columns into out (its UNION ALL
 * ignored: sqlc_compile_query plans that). */
int sqlc_compile_select(comp_t *c, const eddy_sql_select_t *s, eddy_ynode_t *steps,
                        const eddy_sql_rel_t *avoid, rel_t *out);

/* ---- sql_compile_union.c ---- */
/* A query (a SELECT and the SELECTs UNION ALL adds to it) into steps. */
int sqlc_compile_query(comp_t *c, const eddy_sql_select_t *s, eddy_ynode_t *steps,
                       const eddy_sql_rel_t *avoid, rel_t *out);

#endif
