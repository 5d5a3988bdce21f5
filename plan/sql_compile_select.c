/* sql_compile_select.c - one SELECT (plan/sql_compile_int.h): its FROM,
 * then its WHERE (a pending top-N's rk <= 1, IN (SELECT ...) semi-joins,
 * filters), then either its GROUP BY (sql_compile_agg.c; SELECT DISTINCT is
 * a GROUP BY of its items) or its SELECT list as one map, where a RANK()
 * OVER item becomes hidden key and order fields for the top-N. */
#include "plan/sql_compile_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan/pipeline_window.h"

/* The SELECT list as one map over in (or over an aggregate's output, g). */
int sqlc_select_items(comp_t *c, const eddy_sql_select_t *s, const rel_t *in,
                      const eddy_sql_group_t *g, eddy_ynode_t *steps, rel_t *out)
{
    const char **names = NULL, **exprs = NULL;
    uint32_t n = 0, cap = 0;
    int rc = 0;
    out->w.ws = out->w.we = -1;
#define PUSH(nm, ex)                                                                   \
    do {                                                                               \
        if (n == cap) {                                                                \
            cap = cap ? cap * 2 : 16;                                                  \
            const char **a_ = realloc(names, cap * sizeof *a_);                        \
            if (a_)                                                                    \
                names = a_;                                                            \
            const char **b_ = a_ ? realloc(exprs, cap * sizeof *b_) : NULL;            \
            if (b_)                                                                    \
                exprs = b_;                                                            \
            if (!a_ || !b_) {                                                          \
                rc = sqlc_oom(c);                                                           \
                break;                                                                 \
            }                                                                          \
        }                                                                              \
        names[n] = (nm);                                                               \
        exprs[n++] = (ex);                                                             \
    } while (0)
    for (uint32_t i = 0; rc == 0 && i < s->n_items; i++) {
        const eddy_sql_expr_t *x = s->items[i];
        const char *alias = s->aliases[i];
        if (x->kind == EDDY_SQL_X_STAR) {
            if (g)
                rc = sqlc_fail(c, x->pos, "SELECT * in a query that aggregates is not supported");
            bool any = false;
            for (uint32_t k = 0; rc == 0 && k < in->r.n; k++) {
                const eddy_sql_col_t *col = &in->r.cols[k];
                if (x->qual && (!col->qual || strcmp(col->qual, x->qual)))
                    continue;
                bool dup = false; /* a window join's right window columns are the left's */
                for (uint32_t j = 0; j < k; j++)
                    dup |= !strcmp(in->r.cols[j].name, col->name) &&
                           !strcmp(in->r.cols[j].field, col->field);
                if (dup)
                    continue;
                any = true;
                const char *f = sqlc_fresh(c, col->name, &out->r, NULL, 0);
                if (!f || eddy_sql_rel_add(&out->r, NULL, col->name, f, col->type, col->rowtime) < 0) {
                    rc = sqlc_oom(c);
                    break;
                }
                if ((int)k == in->w.ws)
                    out->w.ws = (int)out->r.n - 1;
                if ((int)k == in->w.we)
                    out->w.we = (int)out->r.n - 1;
                PUSH(f, col->field);
            }
            if (rc == 0 && !any)
                rc = sqlc_fail(c, x->pos, "unknown table or alias '%s' in '%s.*'", x->qual, x->qual);
            continue;
        }
        if (x->kind == EDDY_SQL_X_OVER) {
            if (g)
                rc = sqlc_fail(c, x->pos, "OVER in a query that aggregates is not supported");
            else if (!strcasecmp(x->name, "ROW_NUMBER") || !strcasecmp(x->name, "DENSE_RANK"))
                rc = sqlc_fail(c, x->pos, "%s() OVER is not supported: eddy's top-N is RANK() ... <= 1 "
                          "(the rows ranked first, every tie)", x->name);
            else if (strcasecmp(x->name, "RANK") || x->n_args || x->star)
                rc = sqlc_fail(c, x->pos, "OVER windows other than a top-1 by RANK() are not supported");
            else if (x->n_order != 1 || !x->order_desc[0])
                rc = sqlc_fail(c, x->pos, "RANK() OVER (... ORDER BY x DESC) with one DESC key is "
                          "supported, not other orders");
            else if (out->top.pending)
                rc = sqlc_fail(c, x->pos, "a second RANK() in one SELECT");
            if (rc < 0)
                break;
            /* the partition: a window's start and end, or keys */
            topn_t *t = &out->top;
            t->pending = true;
            t->pos = x->pos;
            t->w.kind = WIN_NONE;
            bool ws = false, we = false;
            const char *part[16];
            uint32_t np = 0;
            for (uint32_t k = 0; rc == 0 && k < x->n_partition; k++) {
                eddy_sql_xctx_t xc = {c->src, c->err, &in->r, NULL, true};
                int ci = x->partition[k]->kind == EDDY_SQL_X_COLUMN ? eddy_sql_resolve(&xc, x->partition[k]) : -1;
                if (ci >= 0 && in->w.kind != WIN_NONE && (ci == in->w.ws || ci == in->w.we)) {
                    ws |= ci == in->w.ws;
                    we |= ci == in->w.we;
                    continue;
                }
                if (np == 16)
                    rc = sqlc_fail(c, x->partition[k]->pos, "more than 16 PARTITION BY expressions");
                else
                    rc = sqlc_translate(c, &in->r, NULL, x->partition[k], &part[np++], NULL);
            }
            if (rc < 0)
                break;
            if (ws || we) {
                if (!(ws && we) || np)
                    rc = sqlc_fail(c, x->pos, "a top-N partitioned by a window's columns and others "
                              "is not supported (PARTITION BY window_start, window_end only)");
                else if (in->w.kind == WIN_AGG && !strcmp(in->w.type, "session"))
                    rc = sqlc_fail(c, x->pos, "a top-N over session windows is not supported");
                if (rc < 0)
                    break;
                t->w = in->w;
                t->key = in->r.cols[in->w.kind == WIN_AGG ? in->w.we : in->w.ws].field;
            } else if (np == 0) {
                t->key = "0";
            } else {
                eddy_sql_buf_t b = {0};
                eddy_sql_buf_printf(&b, np == 1 ? "%s" : "concat(string(%s)", part[0]);
                for (uint32_t k = 1; k < np; k++)
                    eddy_sql_buf_printf(&b, ", '|', string(%s)", part[k]);
                eddy_sql_buf_printf(&b, "%s", np == 1 ? "" : ")");
                t->key = sqlc_keep(c, eddy_sql_buf_take(&b));
            }
            const char *order;
            eddy_sql_type_t ot;
            if (sqlc_translate(c, &in->r, NULL, x->order[0], &order, &ot) < 0) {
                rc = -1;
                break;
            }
            /* the partition key and the order as hidden fields of the map */
            const char *hk = sqlc_fresh(c, "rank_key", &out->r, names, n);
            PUSH(hk, t->key);
            const char *ho = rc ? NULL : sqlc_fresh(c, "rank_order", &out->r, names, n);
            PUSH(ho, order);
            t->key = hk;
            t->order = ho;
            const char *rn = alias ? alias : sqlc_fmt(c, "EXPR$%u", i);
            const char *f = sqlc_fresh(c, rn, &out->r, names, n);
            if (!f || eddy_sql_rel_add(&out->r, NULL, rn, f, EDDY_SQL_T_BIGINT, false) < 0) {
                rc = sqlc_oom(c);
                break;
            }
            t->rank_col = (int)out->r.n - 1;
            PUSH(f, "1");
            continue;
        }
        const char *text;
        eddy_sql_type_t type;
        if (sqlc_translate(c, &in->r, g, x, &text, &type) < 0) {
            rc = -1;
            break;
        }
        const char *name = alias ? alias : x->kind == EDDY_SQL_X_COLUMN ? x->name
                                                                         : sqlc_fmt(c, "EXPR$%u", i);
        const char *f = sqlc_fresh(c, name ? name : "EXPR", &out->r, names, n);
        bool rowtime = false;
        int ci = -1;
        if (x->kind == EDDY_SQL_X_COLUMN && !g) {
            eddy_sql_xctx_t xc = {c->src, c->err, &in->r, NULL, true};
            ci = eddy_sql_resolve(&xc, x);
            rowtime = ci >= 0 && in->r.cols[ci].rowtime;
        }
        if (!f || eddy_sql_rel_add(&out->r, NULL, name, f, type, rowtime) < 0) {
            rc = sqlc_oom(c);
            break;
        }
        if (g && (!strcmp(text, EDDY_PIPELINE_WINDOW_START) || !strcmp(text, EDDY_PIPELINE_WINDOW_END)))
            *(!strcmp(text, EDDY_PIPELINE_WINDOW_START) ? &out->w.ws : &out->w.we) = (int)out->r.n - 1;
        if (!g && ci >= 0 && (ci == in->w.ws || ci == in->w.we))
            *(ci == in->w.ws ? &out->w.ws : &out->w.we) = (int)out->r.n - 1;
        PUSH(f, text);
    }
#undef PUSH
    if (rc == 0) {
        if (!g && in->w.kind != WIN_NONE && out->w.ws >= 0 && out->w.we >= 0) {
            int ws = out->w.ws, we = out->w.we;
            out->w = in->w;
            out->w.ws = ws;
            out->w.we = we;
            out->w.wt = -1;
            out->w.rowtime = -1;
            if (out->w.kind == WIN_TVF) /* its window columns are fields now */
                out->w.materialized = true;
        }
        rc = sqlc_add_map(c, steps, names, exprs, n, s->pos);
    }
    free(names);
    free(exprs);
    return rc;
}

/* SELECT DISTINCT items as GROUP BY items (*g, a shallow copy of s): each
 * distinct row once, when its group ends (per window over a window TVF's
 * window_start and window_end; otherwise at the end of the input). */
static int distinct_as_group_by(comp_t *c, const eddy_sql_select_t *s, eddy_sql_select_t *g)
{
    if (s->n_group_by || s->having)
        return sqlc_fail(c, s->pos, "SELECT DISTINCT with GROUP BY or HAVING is not supported");
    for (uint32_t i = 0; i < s->n_items; i++) {
        const eddy_sql_expr_t *x = s->items[i];
        if (x->kind == EDDY_SQL_X_STAR)
            return sqlc_fail(c, x->pos, "SELECT DISTINCT * is not supported (name the columns)");
        if (x->kind == EDDY_SQL_X_OVER || eddy_sql_has_aggregate(x))
            return sqlc_fail(c, x->pos, "SELECT DISTINCT with an aggregate or OVER is not "
                             "supported");
    }
    *g = *s;
    g->distinct = false;
    g->group_by = s->items;
    g->n_group_by = s->n_items;
    g->union_all = NULL;
    return 0;
}

int sqlc_compile_select(comp_t *c, const eddy_sql_select_t *s, eddy_ynode_t *steps,
                        const eddy_sql_rel_t *avoid, rel_t *out)
{
    (void)avoid;
    eddy_sql_select_t grouped;
    if (s->distinct) {
        if (distinct_as_group_by(c, s, &grouped) < 0)
            return -1;
        s = &grouped;
    }
    rel_t in;
    sqlc_rel_init(&in);
    sqlc_rel_init(out);
    const eddy_sql_expr_t *where = s->where;
    const eddy_sql_expr_t **cs = NULL;
    uint32_t n_cs = 0;
    int rc = sqlc_compile_from(c, s->from, steps, NULL, &in, &where);
    if (rc == 0)
        rc = sqlc_conjuncts(c, where, &cs, &n_cs);
    if (rc == 0 && in.top.pending)
        rc = sqlc_compile_topn(c, steps, &in, cs, n_cs);
    bool agg = s->n_group_by > 0 || s->having;
    for (uint32_t i = 0; i < s->n_items; i++)
        agg |= eddy_sql_has_aggregate(s->items[i]);
    for (uint32_t k = 0; rc == 0 && k < n_cs; k++) {
        if (!cs[k])
            continue;
        if (cs[k]->kind == EDDY_SQL_X_IN && cs[k]->sub) {
            rc = sqlc_compile_semi(c, steps, &in, cs[k]);
            continue;
        }
        if (in.w.kind == WIN_TVF && sqlc_reads_window(&in, cs[k]))
            rc = sqlc_materialize(c, steps, &in);
        const char *text;
        eddy_sql_type_t t;
        if (rc == 0)
            rc = sqlc_translate(c, &in.r, NULL, cs[k], &text, &t);
        if (rc == 0 && t != EDDY_SQL_T_BOOLEAN && t != EDDY_SQL_T_ANY)
            rc = sqlc_fail(c, cs[k]->pos, "type mismatch: WHERE needs a BOOLEAN, not %s",
                      eddy_sql_type_name(t));
        if (rc == 0)
            rc = sqlc_add_filter(c, steps, text, cs[k]->pos);
    }
    if (rc == 0 && agg) {
        rc = sqlc_compile_aggregate(c, s, steps, &in, out);
    } else if (rc == 0) {
        bool win = false;
        for (uint32_t i = 0; i < s->n_items; i++)
            win |= sqlc_reads_window(&in, s->items[i]) || s->items[i]->kind == EDDY_SQL_X_OVER;
        if (win && in.w.kind == WIN_TVF)
            rc = sqlc_materialize(c, steps, &in);
        if (rc == 0)
            rc = sqlc_select_items(c, s, &in, NULL, steps, out);
    }
    free(cs);
    sqlc_rel_clear(&in);
    return rc;
}
