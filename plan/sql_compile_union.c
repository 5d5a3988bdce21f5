/* sql_compile_union.c - a query: a SELECT, or SELECTs joined by UNION ALL
 * (plan/sql_compile_int.h). The first SELECT is planned onto the steps as
 * any; each later one onto the other side of a pipelines' `union` step,
 * which re-reads the source through that side's own filter and map steps.
 * So a later SELECT that groups, windows, joins or ranks is refused by
 * name, and the columns of every SELECT must match the first's in number
 * and type (numbers of any kind mix, as in Flink's least restrictive
 * type). The result has the first SELECT's column names. */
#include "plan/sql_compile_int.h"

#include <string.h>

/* a and b mix in one column; the column's type into *t. */
static bool union_type(eddy_sql_type_t a, eddy_sql_type_t b, eddy_sql_type_t *t)
{
    *t = a == EDDY_SQL_T_ANY ? b : a;
    if (a == b || a == EDDY_SQL_T_ANY || b == EDDY_SQL_T_ANY)
        return true;
    if (!eddy_sql_type_numeric(a) || !eddy_sql_type_numeric(b))
        return false;
    bool wide = a == EDDY_SQL_T_DOUBLE || a == EDDY_SQL_T_DECIMAL || b == EDDY_SQL_T_DOUBLE ||
                b == EDDY_SQL_T_DECIMAL;
    *t = wide ? EDDY_SQL_T_DOUBLE : EDDY_SQL_T_BIGINT;
    return true;
}

/* Where column i of s shows: its select item, or s itself under a star. */
static uint32_t item_pos(const eddy_sql_select_t *s, uint32_t i)
{
    for (uint32_t k = 0; k < s->n_items; k++)
        if (s->items[k]->kind == EDDY_SQL_X_STAR)
            return s->pos;
    return i < s->n_items ? s->items[i]->pos : s->pos;
}

/* Checks b's columns r against the union's so far (out) and makes the
 * union's column types. */
static int match_columns(comp_t *c, const eddy_sql_select_t *first, const eddy_sql_select_t *b,
                         uint32_t pos, rel_t *out, const rel_t *r)
{
    if (r->r.n != out->r.n)
        return sqlc_fail(c, pos, "UNION ALL of SELECTs with %u and %u columns: each SELECT "
                         "needs as many columns as the first", out->r.n, r->r.n);
    for (uint32_t i = 0; i < r->r.n; i++) {
        eddy_sql_col_t *l = &out->r.cols[i];
        const eddy_sql_col_t *rc = &r->r.cols[i];
        eddy_sql_type_t t;
        if (!union_type(l->type, rc->type, &t))
            return sqlc_fail(c, item_pos(b, i), "type mismatch: UNION ALL column %u ('%s') is "
                             "%s in the first SELECT (line %u) and %s here", i + 1, l->name,
                             eddy_sql_type_name(l->type), sqlc_line_of(c, first->pos),
                             eddy_sql_type_name(rc->type));
        l->type = t;
        l->rowtime = l->rowtime && rc->rowtime;
    }
    return 0;
}

/* The step {union: {with: {steps: rsteps}}} (taking rsteps). */
static int add_union(comp_t *c, eddy_ynode_t *steps, uint32_t pos, eddy_ynode_t *rsteps)
{
    uint32_t line = sqlc_line_of(c, pos);
    eddy_ynode_t *st = eddy_sql_ymap(line), *u = eddy_sql_ymap(line), *with = eddy_sql_ymap(line);
    int e = eddy_sql_yput(with, "steps", rsteps);
    e |= eddy_sql_yput(u, "with", with);
    e |= eddy_sql_yput(st, "union", u);
    e |= eddy_sql_ypush(steps, st);
    return e ? sqlc_oom(c) : 0;
}

/* A later SELECT b of a UNION ALL (at pos) onto a union step after the
 * rows so far (out). */
static int compile_branch(comp_t *c, const eddy_sql_select_t *first, const eddy_sql_select_t *b,
                          uint32_t pos, eddy_ynode_t *steps, rel_t *out)
{
    if (out->top.pending)
        return sqlc_fail(c, out->top.pos, "a top-N in a SELECT of a UNION ALL is not supported");
    rel_t r;
    sqlc_rel_init(&r);
    eddy_ynode_t *rsteps = eddy_sql_yseq(sqlc_line_of(c, b->pos));
    int rc = rsteps ? sqlc_compile_select(c, b, rsteps, NULL, &r) : sqlc_oom(c);
    if (rc == 0 && r.top.pending)
        rc = sqlc_fail(c, r.top.pos, "a top-N in a SELECT of a UNION ALL is not supported");
    for (uint32_t i = 0; rc == 0 && i < rsteps->n; i++) {
        const char *kind = rsteps->items[i]->keys[0];
        if (strcmp(kind, "filter") && strcmp(kind, "map"))
            rc = sqlc_fail(c, b->pos, "a SELECT after the first of a UNION ALL that groups, "
                           "windows, joins or ranks is not supported (a union re-reads the source "
                           "through filters and maps: put that SELECT first)");
    }
    if (rc == 0)
        rc = match_columns(c, first, b, pos, out, &r);
    if (rc == 0) {
        rc = add_union(c, steps, pos, rsteps);
        rsteps = NULL;
    }
    /* the union's rows are no window's */
    out->w.kind = WIN_NONE;
    out->w.ws = out->w.we = out->w.wt = out->w.rowtime = -1;
    eddy_ynode_free(rsteps);
    sqlc_rel_clear(&r);
    return rc;
}

int sqlc_compile_query(comp_t *c, const eddy_sql_select_t *s, eddy_ynode_t *steps,
                       const eddy_sql_rel_t *avoid, rel_t *out)
{
    if (s->union_all && c->other_side)
        return sqlc_fail(c, s->union_pos, "UNION ALL inside a join's right side (a view) is not "
                         "supported (put that view on the left)");
    if (sqlc_compile_select(c, s, steps, avoid, out) < 0)
        return -1;
    for (const eddy_sql_select_t *a = s; a->union_all; a = a->union_all)
        if (compile_branch(c, s, a->union_all, a->union_pos, steps, out) < 0)
            return -1;
    return 0;
}
