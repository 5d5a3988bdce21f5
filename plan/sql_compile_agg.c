/* sql_compile_agg.c - GROUP BY (plan/sql_compile_int.h): the group key
 * (one expression, or several as one unambiguous string), the window (a
 * window TVF's or a legacy GROUP BY TUMBLE/HOP/SESSION), the aggregate
 * functions onto the aggregate step's outputs (AVG of integers as sum /
 * count, as Flink truncates), and HAVING and the SELECT list after it. */
#include "plan/sql_compile_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan/pipeline_spec_parse.h"
#include "plan/pipeline_window.h"

typedef struct agg_ctx {
    comp_t *c;
    const eddy_sql_rel_t *in;
    const char **names, **funcs; /* the aggregate step's outputs */
    uint32_t n;
    int rc;
} agg_ctx_t;

/* An aggregate output named for fn(arg), or the existing one. */
static const char *agg_field(agg_ctx_t *a, const char *func)
{
    for (uint32_t i = 0; i < a->n; i++)
        if (!strcmp(a->funcs[i], func))
            return a->names[i];
    const char **nn = realloc(a->names, (a->n + 1) * sizeof *nn);
    if (nn)
        a->names = nn;
    const char **nf = nn ? realloc(a->funcs, (a->n + 1) * sizeof *nf) : NULL;
    if (nf)
        a->funcs = nf;
    const char *name = sqlc_fmt(a->c, "agg_%u", a->n);
    if (!nn || !nf || !name)
        return NULL;
    a->names[a->n] = name;
    a->funcs[a->n++] = func;
    return name;
}

static int on_agg(void *arg, const eddy_sql_expr_t *x, char **field, eddy_sql_type_t *type)
{
    agg_ctx_t *a = arg;
    comp_t *c = a->c;
    static const char *const aux[] = {"TUMBLE_START", "TUMBLE_END", "HOP_START", "HOP_END",
                                      "SESSION_START", "SESSION_END", NULL};
    for (const char *const *w = aux; *w; w++)
        if (!strcasecmp(x->name, *w)) {
            *field = strdup(strstr(*w, "START") ? "window_start" : "window_end");
            *type = EDDY_SQL_T_TIMESTAMP;
            return *field ? 1 : sqlc_oom(c);
        }
    if (!eddy_sql_is_aggregate(x->name))
        return 0;
    const char *arg_text = NULL;
    eddy_sql_type_t t = EDDY_SQL_T_BIGINT;
    if (x->star) {
        if (strcasecmp(x->name, "COUNT"))
            return sqlc_fail(c, x->pos, "%s(*) is not SQL: only COUNT(*)", x->name);
    } else if (x->n_args != 1) {
        return sqlc_fail(c, x->pos, "%s takes one argument", x->name);
    } else {
        if (eddy_sql_has_aggregate(x->args[0]))
            return sqlc_fail(c, x->args[0]->pos, "aggregates inside aggregates are not SQL");
        if (sqlc_translate(c, a->in, NULL, x->args[0], &arg_text, &t) < 0)
            return -1;
    }
    const char *fn = NULL, *text;
    if (!strcasecmp(x->name, "COUNT")) {
        if (x->distinct)
            fn = sqlc_fmt(c, "count_distinct(%s)", arg_text);
        else
            fn = x->star ? "count()" : sqlc_fmt(c, "count(%s)", arg_text);
        t = EDDY_SQL_T_BIGINT;
    } else if (x->distinct) {
        return sqlc_fail(c, x->pos, "%s(DISTINCT ...) is not supported (only COUNT(DISTINCT ...))", x->name);
    } else if (!strcasecmp(x->name, "AVG")) {
        if (!eddy_sql_type_numeric(t) && t != EDDY_SQL_T_ANY)
            return sqlc_fail(c, x->pos, "type mismatch: AVG of %s", eddy_sql_type_name(t));
        if (t == EDDY_SQL_T_INT || t == EDDY_SQL_T_BIGINT) {
            /* Flink: AVG of integers is an integer (truncated) */
            const char *s = agg_field(a, sqlc_fmt(c, "sum(%s)", arg_text));
            const char *n = agg_field(a, sqlc_fmt(c, "count(%s)", arg_text));
            if (!s || !n)
                return sqlc_oom(c);
            *field = strdup(sqlc_fmt(c, "(%s / %s)", s, n));
            *type = t;
            return *field ? 1 : sqlc_oom(c);
        }
        fn = sqlc_fmt(c, "avg(%s)", arg_text);
    } else {
        if (strcasecmp(x->name, "SUM") == 0 && !eddy_sql_type_numeric(t) && t != EDDY_SQL_T_ANY)
            return sqlc_fail(c, x->pos, "type mismatch: SUM of %s", eddy_sql_type_name(t));
        char lower[8];
        snprintf(lower, sizeof lower, "%s", x->name);
        for (char *p = lower; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        fn = sqlc_fmt(c, "%s(%s)", lower, arg_text);
    }
    if (!fn || !(text = agg_field(a, fn)))
        return sqlc_oom(c);
    *field = strdup(text);
    *type = t;
    return *field ? 1 : sqlc_oom(c);
}

static bool is_window_call(const eddy_sql_expr_t *x)
{
    return x->kind == EDDY_SQL_X_CALL &&
           (!strcasecmp(x->name, "TUMBLE") || !strcasecmp(x->name, "HOP") ||
            !strcasecmp(x->name, "SESSION") || !strcasecmp(x->name, "CUMULATE"));
}

int sqlc_compile_aggregate(comp_t *c, const eddy_sql_select_t *s, eddy_ynode_t *steps,
                           rel_t *in, rel_t *out)
{
    win_t w = {.kind = WIN_NONE, .ws = -1, .we = -1, .wt = -1, .rowtime = -1};
    bool has_ws = false, has_we = false;
    const eddy_sql_expr_t *keys[64];
    uint32_t n_keys = 0;
    for (uint32_t i = 0; i < s->n_group_by; i++) {
        const eddy_sql_expr_t *x = s->group_by[i];
        if (is_window_call(x)) {
            if (!strcasecmp(x->name, "CUMULATE"))
                return sqlc_fail(c, x->pos, "GROUP BY CUMULATE(...) is not SQL: CUMULATE is a window "
                                 "TVF, TABLE(CUMULATE(TABLE t, DESCRIPTOR(time), step, size))");
            if (w.kind != WIN_NONE || in->w.kind == WIN_TVF)
                return sqlc_fail(c, x->pos, "a second window in one GROUP BY");
            if (x->n_args < 2 || x->args[0]->kind != EDDY_SQL_X_COLUMN)
                return sqlc_fail(c, x->pos, "%s(time column, INTERVAL ...) needs its time column and "
                            "interval", x->name);
            eddy_sql_xctx_t xc = {c->src, c->err, &in->r, NULL, false};
            int ti = eddy_sql_resolve(&xc, x->args[0]);
            if (ti < 0)
                return -1;
            if (!in->r.cols[ti].rowtime)
                return sqlc_fail(c, x->args[0]->pos, "%s(%s, ...): not a time attribute (windows run "
                            "on the source's event time, the WATERMARK column)", x->name,
                            x->args[0]->name);
            if (sqlc_window_of(c, x->name, x->pos, x->args + 1, x->n_args - 1, &w) < 0)
                return -1;
            w.kind = WIN_AGG;
            continue;
        }
        if (x->kind == EDDY_SQL_X_COLUMN && in->w.kind == WIN_TVF) {
            eddy_sql_xctx_t xc = {c->src, c->err, &in->r, NULL, false};
            int ci = eddy_sql_resolve(&xc, x);
            if (ci < 0)
                return -1;
            if (ci == in->w.ws || ci == in->w.we) {
                has_ws |= ci == in->w.ws;
                has_we |= ci == in->w.we;
                continue;
            }
        }
        if (n_keys == 64)
            return sqlc_fail(c, x->pos, "more than 64 GROUP BY expressions");
        keys[n_keys++] = x;
    }
    if (in->w.kind == WIN_TVF) {
        if (!has_ws || !has_we)
            return sqlc_fail(c, s->pos, "a query over a window TVF that aggregates must GROUP BY "
                        "window_start and window_end (other aggregates of windowed rows are not "
                        "supported)");
        w = in->w;
        w.kind = WIN_AGG;
    }
    /* the key: one expression as it is, several as one string that keeps
     * them apart (length-prefixed), with their values carried by max() */
    const char *key_texts[64];
    eddy_sql_type_t key_types[64];
    for (uint32_t i = 0; i < n_keys; i++)
        if (sqlc_translate(c, &in->r, NULL, keys[i], &key_texts[i], &key_types[i]) < 0)
            return -1;
    const char *key_expr, *key_field = "key";
    if (n_keys == 0) {
        key_expr = "0";
    } else if (n_keys == 1) {
        key_expr = key_texts[0];
        if (eddy_pspec_is_identifier(key_expr))
            key_field = key_expr;
    } else {
        eddy_sql_buf_t b = {0};
        eddy_sql_buf_printf(&b, "concat(");
        for (uint32_t i = 0; i < n_keys; i++)
            eddy_sql_buf_printf(&b, "%sstring(length(coalesce(string(%s), ''))), "
                                "if(is_null(%s), 'n', ':'), coalesce(string(%s), '')",
                                i ? ", " : "", key_texts[i], key_texts[i], key_texts[i]);
        eddy_sql_buf_printf(&b, ")");
        key_expr = sqlc_keep(c, eddy_sql_buf_take(&b));
    }
    agg_ctx_t a = {c, &in->r, NULL, NULL, 0, 0};
    char *texts[66], *fields[66];
    eddy_sql_type_t types[66];
    eddy_sql_group_t g = {texts, fields, types, 0, on_agg, &a};
    for (uint32_t i = 0; i < n_keys; i++) {
        texts[g.n] = (char *)key_texts[i];
        types[g.n] = key_types[i];
        fields[g.n++] = (char *)(n_keys == 1 ? key_field
                                             : agg_field(&a, sqlc_fmt(c, "max(%s)", key_texts[i])));
    }
    if (in->w.kind == WIN_TVF) {
        texts[g.n] = in->r.cols[in->w.ws].field;
        types[g.n] = EDDY_SQL_T_TIMESTAMP;
        fields[g.n++] = EDDY_PIPELINE_WINDOW_START;
        texts[g.n] = in->r.cols[in->w.we].field;
        types[g.n] = EDDY_SQL_T_TIMESTAMP;
        fields[g.n++] = EDDY_PIPELINE_WINDOW_END;
    }
    /* the steps after the aggregate, made first: they decide the aggregates */
    eddy_ynode_t *after = eddy_sql_yseq(sqlc_line_of(c, s->pos));
    int rc = after ? 0 : sqlc_oom(c);
    if (rc == 0 && s->having) {
        const char *text;
        eddy_sql_type_t t;
        rc = sqlc_translate(c, &in->r, &g, s->having, &text, &t);
        if (rc == 0 && t != EDDY_SQL_T_BOOLEAN && t != EDDY_SQL_T_ANY)
            rc = sqlc_fail(c, s->having->pos, "type mismatch: HAVING needs a BOOLEAN, not %s",
                      eddy_sql_type_name(t));
        if (rc == 0)
            rc = sqlc_add_filter(c, after, text, s->having->pos);
    }
    if (rc == 0)
        rc = sqlc_select_items(c, s, in, &g, after, out);
    if (rc == 0 && a.n == 0)
        agg_field(&a, "count()"); /* an aggregate step has at least one output */
    uint32_t line = sqlc_line_of(c, s->pos);
    if (rc == 0)
        rc = sqlc_add_simple(c, steps, "key_by", key_expr, s->pos);
    if (rc == 0 && w.kind == WIN_AGG)
        rc = sqlc_add_window(c, steps, &w, s->pos);
    if (rc == 0) {
        eddy_ynode_t *st = eddy_sql_ymap(line), *m = eddy_sql_ymap(line);
        int e = 0;
        for (uint32_t i = 0; i < a.n; i++)
            e |= eddy_sql_yput_str(m, a.names[i], a.funcs[i], line);
        e |= eddy_sql_yput(st, "aggregate", m);
        e |= eddy_sql_ypush(steps, st);
        rc = e ? sqlc_oom(c) : 0;
    }
    for (uint32_t i = 0; rc == 0 && after && i < after->n; i++) {
        rc = eddy_sql_ypush(steps, after->items[i]) < 0 ? sqlc_oom(c) : 0;
        after->items[i] = NULL;
    }
    eddy_ynode_free(after);
    free(a.names);
    free(a.funcs);
    if (rc == 0 && w.kind == WIN_AGG) {
        out->w.kind = WIN_AGG;
        out->w.type = w.type;
        out->w.size = w.size;
        out->w.slide = w.slide;
        out->w.gap = w.gap;
    }
    return rc;
}
