/* sql_compile_join.c - joins (plan/sql_compile_int.h): inner equi-joins,
 * interval joins (a right time column between bounds over the left's
 * columns), inner and LEFT window joins of two tumbling TVFs, and WHERE x
 * IN (SELECT ...) as a (window) semi-join, each onto the pipelines' join
 * step, whose right side re-reads the source through its own steps. Other
 * joins are refused by name. */
#include "plan/sql_compile_int.h"

#include <stdlib.h>
#include <string.h>

/* An interval join's bounds, pipeline expressions: a right row joins a
 * left row when from <= time <= to (docs/pipelines.md), from and to over
 * the left's columns, time over the right's. Each bound keeps the
 * conjunct it came from, for the joined rows' filter when the pair is not
 * complete. */
typedef struct interval {
    const char *from, *to, *time;
    const eddy_sql_expr_t *from_x, *to_x;
} interval_t;

/* The join step {join: {with: {steps: rsteps}, left_key, right_key, [type:
 * semi or left], [window: tumbling l's size, each side's event time, or
 * iv's interval]}} (taking rsteps); l is NULL for a join without a
 * tumbling window. */
static int add_join(comp_t *c, eddy_ynode_t *steps, uint32_t pos, eddy_ynode_t *rsteps,
                    const char *lkey, const char *rkey, const char *type, const rel_t *l,
                    const rel_t *r, const interval_t *iv)
{
    uint32_t line = sqlc_line_of(c, pos);
    eddy_ynode_t *st = eddy_sql_ymap(line), *j = eddy_sql_ymap(line), *with = eddy_sql_ymap(line);
    int e = eddy_sql_yput(with, "steps", rsteps);
    e |= eddy_sql_yput(j, "with", with);
    e |= eddy_sql_yput_str(j, "left_key", lkey, line);
    e |= eddy_sql_yput_str(j, "right_key", rkey, line);
    if (type)
        e |= eddy_sql_yput_str(j, "type", type, line);
    if (l) {
        eddy_ynode_t *w = eddy_sql_ymap(line);
        e |= eddy_sql_yput_str(w, "size", sqlc_fmt(c, "%lldms", (long long)l->w.size), line);
        e |= eddy_sql_yput_str(w, "left_time", l->r.cols[l->w.rowtime].field, line);
        e |= eddy_sql_yput_str(w, "right_time", r->r.cols[r->w.rowtime].field, line);
        e |= eddy_sql_yput(j, "window", w);
    } else if (iv) {
        eddy_ynode_t *w = eddy_sql_ymap(line);
        e |= eddy_sql_yput_str(w, "from", iv->from, line);
        e |= eddy_sql_yput_str(w, "to", iv->to, line);
        e |= eddy_sql_yput_str(w, "time", iv->time, line);
        e |= eddy_sql_yput(j, "window", w);
    }
    e |= eddy_sql_yput(st, "join", j);
    e |= eddy_sql_ypush(steps, st);
    return e || c->oom ? sqlc_oom(c) : 0;
}

/* A join's other side, a table (or view) or a window TVF over one, into
 * rsteps and r (fields not among avoid's); what it compiles knows it is on
 * the other side (c->other_side), where pipelines have no joins or unions. */
static int other_side(comp_t *c, const eddy_sql_from_t *rf, eddy_ynode_t *rsteps,
                      const eddy_sql_rel_t *avoid, rel_t *r)
{
    c->other_side++;
    int rc = rf->kind == EDDY_SQL_FROM_TABLE
                 ? sqlc_scan(c, rf->name, rf->pos, rf->alias, rsteps, avoid, r)
                 : sqlc_compile_tvf(c, rf, rsteps, avoid, r);
    if (rc == 0 && rf->kind == EDDY_SQL_FROM_TVF && rf->alias)
        rc = sqlc_requalify(c, r, rf->alias);
    c->other_side--;
    return rc;
}

/* Appends condition x, over rel's columns, to the joined rows' filter. */
static int add_post_condition(comp_t *c, const eddy_sql_rel_t *rel, const eddy_sql_expr_t *x,
                              eddy_sql_buf_t *post)
{
    const char *text;
    if (sqlc_translate(c, rel, NULL, x, &text, NULL) < 0)
        return -1;
    eddy_sql_buf_printf(post, "%s%s", post->n ? " and " : "", text);
    return 0;
}

/* Whether x bounds a right time column by left expressions: R.t BETWEEN
 * L.a AND L.b, or R.t >= L.a, R.t <= L.b (either way round; > and < on
 * epoch milliseconds become >= a + 1 and <= b - 1). Fills iv's bounds it
 * gives; 1 when it is one, 0 when not, -1 on an error (set in c). */
static int interval_bound(comp_t *c, const eddy_sql_rel_t *all, uint32_t split,
                          const eddy_sql_rel_t *lonly, const eddy_sql_rel_t *ronly,
                          const eddy_sql_expr_t *x, interval_t *iv)
{
    const eddy_sql_expr_t *t, *lo = NULL, *hi = NULL;
    bool lo_strict = false, hi_strict = false;
    if (x->kind == EDDY_SQL_X_BETWEEN && !x->negated) {
        t = x->args[0];
        lo = x->args[1];
        hi = x->args[2];
    } else if (x->kind == EDDY_SQL_X_BINARY &&
               (x->op == EDDY_SQL_OP_GE || x->op == EDDY_SQL_OP_GT || x->op == EDDY_SQL_OP_LE ||
                x->op == EDDY_SQL_OP_LT)) {
        bool right_first = sqlc_sides(c, all, split, x->args[0]) == 2;
        t = right_first ? x->args[0] : x->args[1];
        const eddy_sql_expr_t *b = right_first ? x->args[1] : x->args[0];
        /* as "t OP b" */
        bool lower = right_first ? (x->op == EDDY_SQL_OP_GE || x->op == EDDY_SQL_OP_GT)
                                 : (x->op == EDDY_SQL_OP_LE || x->op == EDDY_SQL_OP_LT);
        bool strict = x->op == EDDY_SQL_OP_GT || x->op == EDDY_SQL_OP_LT;
        if (lower) {
            lo = b;
            lo_strict = strict;
        } else {
            hi = b;
            hi_strict = strict;
        }
    } else {
        return 0;
    }
    if (t->kind != EDDY_SQL_X_COLUMN || sqlc_sides(c, all, split, t) != 2 ||
        (lo && sqlc_sides(c, all, split, lo) != 1) || (hi && sqlc_sides(c, all, split, hi) != 1))
        return 0;
    const char *time = NULL, *from = NULL, *to = NULL;
    eddy_sql_type_t tt, bt;
    if (sqlc_translate(c, ronly, NULL, t, &time, &tt) < 0)
        return -1;
    if (tt != EDDY_SQL_T_TIMESTAMP && tt != EDDY_SQL_T_BIGINT && tt != EDDY_SQL_T_INT)
        return 0;
    if (lo && sqlc_translate(c, lonly, NULL, lo, &from, &bt) < 0)
        return -1;
    if (hi && sqlc_translate(c, lonly, NULL, hi, &to, &bt) < 0)
        return -1;
    if ((iv->time && strcmp(iv->time, time)) || (from && iv->from) || (to && iv->to))
        return 0; /* a second time column or bound: an ordinary condition */
    iv->time = time;
    if (from) {
        iv->from = lo_strict ? sqlc_fmt(c, "(%s) + 1", from) : from;
        iv->from_x = x;
    }
    if (to) {
        iv->to = hi_strict ? sqlc_fmt(c, "(%s) - 1", to) : to;
        iv->to_x = x;
    }
    return c->oom ? sqlc_oom(c) : 1;
}

/* left JOIN right ON cond (and an inner join's WHERE, taken from *where):
 * conditions on one side filter it before the join, the first equality of
 * a column of each side is the join key, window_start = window_start of
 * two tumbling TVFs makes it a window join, the rest filters the result. */
int sqlc_compile_join(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps, rel_t *out,
                      const eddy_sql_expr_t **where)
{
    if (f->join_type == EDDY_SQL_JOIN_RIGHT || f->join_type == EDDY_SQL_JOIN_FULL)
        return sqlc_fail(c, f->pos, "RIGHT and FULL joins are not supported (write the RIGHT JOIN as "
                    "a LEFT JOIN of the other order; a LEFT JOIN must be a window join)");
    bool outer = f->join_type == EDDY_SQL_JOIN_LEFT;
    const eddy_sql_from_t *rf = f->right;
    if (c->other_side)
        return sqlc_fail(c, f->pos, "a join inside a join's right side (a view that joins) is not "
                         "supported (put that view on the left)");
    if (rf->kind != EDDY_SQL_FROM_TABLE && rf->kind != EDDY_SQL_FROM_TVF)
        return sqlc_fail(c, rf->pos, "a join's right side other than a table or a window TVF over "
                    "one is not supported (put the subquery on the left)");
    rel_t r;
    sqlc_rel_init(&r);
    eddy_ynode_t *rsteps = eddy_sql_yseq(sqlc_line_of(c, rf->pos));
    const eddy_sql_expr_t **cs = NULL;
    uint32_t n_cs = 0;
    int rc = rsteps ? 0 : sqlc_oom(c);
    if (rc == 0)
        rc = sqlc_compile_from(c, f->left, steps, NULL, out, NULL);
    if (rc == 0)
        rc = other_side(c, rf, rsteps, &out->r, &r);
    if (rc == 0 && r.top.pending)
        rc = sqlc_fail(c, rf->pos, "a top-N on a join's side is not supported");
    /* the combined relation: left's columns, then right's */
    uint32_t split = out->r.n;
    for (uint32_t i = 0; rc == 0 && i < r.r.n; i++) {
        const eddy_sql_col_t *col = &r.r.cols[i];
        if (eddy_sql_rel_add(&out->r, col->qual, col->name, col->field, col->type, false) < 0)
            rc = sqlc_oom(c);
    }
    if (rc == 0)
        rc = sqlc_conjuncts(c, f->on, &cs, &n_cs);
    if (rc == 0 && where && *where && !outer) { /* after a LEFT JOIN the WHERE filters its rows */
        rc = sqlc_conjuncts(c, *where, &cs, &n_cs);
        *where = NULL;
    }
    const char *lkey = NULL, *rkey = NULL;
    bool window_eq = false;
    bool tvf = out->w.kind == WIN_TVF || r.w.kind == WIN_TVF;
    interval_t iv = {0};
    eddy_sql_buf_t post = {0};
    eddy_sql_rel_t lonly = {out->r.cols, split};
    for (uint32_t k = 0; rc == 0 && k < n_cs; k++) {
        const eddy_sql_expr_t *x = cs[k];
        int m = sqlc_sides(c, &out->r, split, x);
        const char *text = NULL;
        if (m < 0) {
            rc = -1;
        } else if (m == 1 && outer) {
            rc = sqlc_fail(c, x->pos, "a condition on the left side alone in a LEFT JOIN's ON is not "
                      "supported (it keeps the row, unmatched; filter in WHERE or a subquery)");
        } else if (m == 1) {
            bool win = out->w.kind == WIN_TVF && sqlc_reads_window(out, x);
            rc = win ? sqlc_fail(c, x->pos, "a condition on a window column before a join is not "
                            "supported") : sqlc_translate(c, &lonly, NULL, x, &text, NULL);
            if (rc == 0)
                rc = sqlc_add_filter(c, steps, text, x->pos);
        } else if (m == 2) {
            rc = sqlc_translate(c, &r.r, NULL, x, &text, NULL);
            if (rc == 0)
                rc = sqlc_add_filter(c, rsteps, text, x->pos);
        } else if (m == 3 && x->kind == EDDY_SQL_X_BINARY && x->op == EDDY_SQL_OP_EQ &&
                   sqlc_sides(c, &out->r, split, x->args[0]) + sqlc_sides(c, &out->r, split, x->args[1]) == 3) {
            const eddy_sql_expr_t *lx = x->args[0], *rx = x->args[1];
            if (sqlc_sides(c, &out->r, split, lx) == 2) {
                lx = x->args[1];
                rx = x->args[0];
            }
            bool lw = lx->kind == EDDY_SQL_X_COLUMN && out->w.kind == WIN_TVF && sqlc_reads_window(out, lx);
            bool rw = rx->kind == EDDY_SQL_X_COLUMN && r.w.kind == WIN_TVF && sqlc_reads_window(&r, rx);
            if (lw || rw) {
                if (!(lw && rw) || strcmp(lx->name, rx->name))
                    rc = sqlc_fail(c, x->pos, "a join on window columns other than window_start = "
                              "window_start (and window_end = window_end) of two window TVFs is "
                              "not supported");
                window_eq = true;
            } else if (!lkey) {
                eddy_sql_type_t lt, rt;
                rc = sqlc_translate(c, &lonly, NULL, lx, &lkey, &lt);
                if (rc == 0)
                    rc = sqlc_translate(c, &r.r, NULL, rx, &rkey, &rt);
            } else {
                rc = add_post_condition(c, &out->r, x, &post);
            }
        } else {
            int ib = m == 3 && !tvf ? interval_bound(c, &out->r, split, &lonly, &r.r, x, &iv) : 0;
            rc = ib < 0 ? -1 : ib == 0 ? add_post_condition(c, &out->r, x, &post) : 0;
        }
    }
    /* half an interval is an ordinary condition on the joined rows */
    bool interval = iv.from && iv.to;
    if (rc == 0 && !interval && iv.from_x)
        rc = add_post_condition(c, &out->r, iv.from_x, &post);
    if (rc == 0 && !interval && iv.to_x && iv.to_x != iv.from_x)
        rc = add_post_condition(c, &out->r, iv.to_x, &post);
    if (rc == 0 && outer && post.n)
        rc = sqlc_fail(c, f->pos, "a LEFT JOIN's ON takes the key, the window equalities and "
                  "conditions on the right side only; other conditions on both sides are not supported");
    if (rc == 0 && !lkey)
        rc = sqlc_fail(c, f->pos, "a join without an equality of a column of each side is not "
                  "supported (eddy's joins are equi-joins)");
    bool windowed = out->w.kind == WIN_TVF && r.w.kind == WIN_TVF;
    if (rc == 0 && outer && !(windowed && window_eq))
        rc = sqlc_fail(c, f->pos, "a LEFT JOIN must be a window join (two TUMBLE TVFs and "
                  "L.window_start = R.window_start): only a window's end says a row found no match");
    if (rc == 0 && (out->w.kind == WIN_TVF || r.w.kind == WIN_TVF) && !(windowed && window_eq))
        rc = sqlc_fail(c, f->pos, "a join of window TVFs needs both sides windowed and "
                  "L.window_start = R.window_start (a window join); other joins of windowed rows "
                  "are not supported");
    if (rc == 0 && windowed && (strcmp(out->w.type, "tumbling") || strcmp(r.w.type, "tumbling") ||
                                out->w.size != r.w.size))
        rc = sqlc_fail(c, f->pos, "window joins of other than tumbling windows of the same size are not "
                  "supported");
    if (rc == 0) {
        rc = add_join(c, steps, f->pos, rsteps, lkey, rkey, outer ? "left" : NULL,
                      windowed ? out : NULL, &r, interval ? &iv : NULL);
        rsteps = NULL;
        /* the right's window columns are the left's */
        for (int k = 0; rc == 0 && windowed && k < 3; k++) {
            int ri = (int)split + (k == 0 ? r.w.ws : k == 1 ? r.w.we : r.w.wt);
            int li = k == 0 ? out->w.ws : k == 1 ? out->w.we : out->w.wt;
            free(out->r.cols[ri].field);
            out->r.cols[ri].field = strdup(out->r.cols[li].field);
            rc = out->r.cols[ri].field ? 0 : sqlc_oom(c);
        }
        if (!windowed)
            out->w.kind = WIN_NONE; /* an equi-join's rows are not a window's */
        for (uint32_t i = split; i < out->r.n; i++)
            out->r.cols[i].rowtime = false; /* the join's rows carry the left's time */
    }
    if (rc == 0 && post.n)
        rc = sqlc_add_filter(c, steps, sqlc_keep(c, eddy_sql_buf_take(&post)), f->pos);
    eddy_sql_buf_clear(&post);
    eddy_ynode_free(rsteps);
    free(cs);
    sqlc_rel_clear(&r);
    return rc;
}

/* WHERE x IN (SELECT y FROM t [WHERE ...]): a semi-join, each row of in
 * once when t has a row whose y equals its x; the subquery's conditions on
 * its own columns filter t, and L.window_start = R.window_start (with
 * window_end) of two tumbling window TVFs makes it a window semi-join
 * (Flink's form). */
int sqlc_compile_semi(comp_t *c, eddy_ynode_t *steps, rel_t *in, const eddy_sql_expr_t *x)
{
    const eddy_sql_select_t *sub = x->sub;
    if (x->negated)
        return sqlc_fail(c, x->pos, "NOT IN (SELECT ...) (an anti-join) is not supported");
    if (sub->n_items != 1 || sub->items[0]->kind == EDDY_SQL_X_STAR || sub->n_group_by ||
        sub->having || sub->distinct || sub->union_all ||
        (sub->from->kind != EDDY_SQL_FROM_TABLE && sub->from->kind != EDDY_SQL_FROM_TVF))
        return sqlc_fail(c, sub->pos, "IN (SELECT ...) other than one column of a table or window TVF "
                    "with a WHERE is not supported");
    rel_t r, all;
    sqlc_rel_init(&r);
    sqlc_rel_init(&all);
    eddy_ynode_t *rsteps = eddy_sql_yseq(sqlc_line_of(c, sub->pos));
    const eddy_sql_expr_t **cs = NULL;
    uint32_t n_cs = 0;
    int rc = rsteps ? 0 : sqlc_oom(c);
    const eddy_sql_from_t *rf = sub->from;
    if (rc == 0)
        rc = other_side(c, rf, rsteps, &in->r, &r);
    /* the subquery sees its own columns and, qualified, the outer's */
    for (uint32_t i = 0; rc == 0 && i < in->r.n + r.r.n; i++) {
        const eddy_sql_col_t *col = i < in->r.n ? &in->r.cols[i] : &r.r.cols[i - in->r.n];
        if (eddy_sql_rel_add(&all.r, col->qual, col->name, col->field, col->type, false) < 0)
            rc = sqlc_oom(c);
    }
    const char *lkey = NULL, *rkey = NULL;
    bool window_eq = false;
    if (rc == 0)
        rc = sqlc_translate(c, &in->r, NULL, x->args[0], &lkey, NULL);
    if (rc == 0)
        rc = sqlc_translate(c, &r.r, NULL, sub->items[0], &rkey, NULL);
    if (rc == 0)
        rc = sqlc_conjuncts(c, sub->where, &cs, &n_cs);
    for (uint32_t k = 0; rc == 0 && k < n_cs; k++) {
        const eddy_sql_expr_t *e = cs[k];
        int m = sqlc_sides(c, &all.r, in->r.n, e);
        const char *text;
        if (m < 0) {
            rc = -1;
        } else if (m == 2 && !(r.w.kind == WIN_TVF && sqlc_reads_window(&r, e))) {
            rc = sqlc_translate(c, &r.r, NULL, e, &text, NULL);
            if (rc == 0)
                rc = sqlc_add_filter(c, rsteps, text, e->pos);
        } else if (m == 3 && e->kind == EDDY_SQL_X_BINARY && e->op == EDDY_SQL_OP_EQ &&
                   e->args[0]->kind == EDDY_SQL_X_COLUMN && e->args[1]->kind == EDDY_SQL_X_COLUMN &&
                   !strcmp(e->args[0]->name, e->args[1]->name) &&
                   (!strcmp(e->args[0]->name, "window_start") || !strcmp(e->args[0]->name, "window_end")) &&
                   in->w.kind == WIN_TVF && r.w.kind == WIN_TVF) {
            window_eq = true;
        } else {
            rc = sqlc_fail(c, e->pos, "in IN (SELECT ...), conditions other than on the subquery's "
                      "columns and L.window_start = R.window_start are not supported");
        }
    }
    bool windowed = in->w.kind == WIN_TVF && r.w.kind == WIN_TVF;
    if (rc == 0 && (in->w.kind == WIN_TVF || r.w.kind == WIN_TVF) && !(windowed && window_eq))
        rc = sqlc_fail(c, sub->pos, "a semi-join of window TVFs needs both sides windowed and "
                  "L.window_start = R.window_start in the subquery's WHERE");
    if (rc == 0 && windowed && (strcmp(in->w.type, "tumbling") || strcmp(r.w.type, "tumbling") ||
                                in->w.size != r.w.size))
        rc = sqlc_fail(c, sub->pos, "window semi-joins of other than tumbling windows of the same size "
                  "are not supported");
    if (rc == 0) {
        rc = add_join(c, steps, x->pos, rsteps, lkey, rkey, "semi", windowed ? in : NULL, &r, NULL);
        rsteps = NULL;
    }
    eddy_ynode_free(rsteps);
    free(cs);
    sqlc_rel_clear(&r);
    sqlc_rel_clear(&all);
    return rc;
}
