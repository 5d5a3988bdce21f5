/* sql_compile_topn.c - top-N (plan/sql_compile_int.h): a RANK() OVER
 * (PARTITION BY ... ORDER BY x DESC) found in a SELECT list waits, as the
 * relation's pending top-N, for the outer WHERE rk <= 1 that makes it
 * key_by + [window] + max_by. Other N are refused by name. */
#include "plan/sql_compile_int.h"

#include <string.h>

/* The outer WHERE's rk <= 1 (or rk = 1, rk < 2) on in's pending top-N:
 * key_by + [window] + max_by; the conjunct is taken out of *cs. */
int sqlc_compile_topn(comp_t *c, eddy_ynode_t *steps, rel_t *in, const eddy_sql_expr_t **cs,
                      uint32_t n_cs)
{
    for (uint32_t k = 0; k < n_cs; k++) {
        const eddy_sql_expr_t *x = cs[k];
        if (!x || x->kind != EDDY_SQL_X_BINARY || x->args[0]->kind != EDDY_SQL_X_COLUMN ||
            x->args[1]->kind != EDDY_SQL_X_INT)
            continue;
        eddy_sql_xctx_t xc = {c->src, c->err, &in->r, NULL, true};
        if (eddy_sql_resolve(&xc, x->args[0]) != in->top.rank_col)
            continue;
        int64_t v = x->args[1]->i;
        bool one = (x->op == EDDY_SQL_OP_LE && v == 1) || (x->op == EDDY_SQL_OP_EQ && v == 1) ||
                   (x->op == EDDY_SQL_OP_LT && v == 2);
        if (!one)
            return sqlc_fail(c, x->pos, "top-N with N other than 1 is not supported (eddy keeps the "
                        "rows ranked 1, every tie)");
        cs[k] = NULL;
        if (sqlc_add_simple(c, steps, "key_by", in->top.key, in->top.pos) < 0)
            return -1;
        if (in->top.w.kind != WIN_NONE) {
            win_t w = in->top.w;
            /* a window after a window: the rows' time is their window's end - 1 */
            if (w.kind == WIN_AGG) {
                /* sliding and cumulate windows end every slide (step) */
                w.size = strcmp(w.type, "tumbling") ? w.slide : w.size;
                w.type = "tumbling";
            }
            if (sqlc_add_window(c, steps, &w, in->top.pos) < 0)
                return -1;
        }
        in->top.pending = false;
        return sqlc_add_simple(c, steps, "max_by", in->top.order, in->top.pos);
    }
    return sqlc_fail(c, in->top.pos, "OVER windows other than a top-1 by RANK() (an outer WHERE rk <= 1) "
                "are not supported");
}
