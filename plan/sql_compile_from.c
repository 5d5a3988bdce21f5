/* sql_compile_from.c - FROM items (plan/sql_compile_int.h): a table's
 * rows from the one source (the Nexmark tables as filters of one event
 * stream), a view or subquery compiled in place, and window TVFs (TUMBLE,
 * HOP, CUMULATE, SESSION) with their window_start, window_end and
 * window_time columns. The pipeline is linear with one source, so a second
 * source is refused by name. */
#include "plan/sql_compile_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan/pipeline_spec_parse.h"

int sqlc_requalify(comp_t *c, rel_t *r, const char *qual)
{
    for (uint32_t i = 0; i < r->r.n; i++) {
        free(r->r.cols[i].qual);
        r->r.cols[i].qual = qual ? strdup(qual) : NULL;
        if (qual && !r->r.cols[i].qual)
            return sqlc_oom(c);
    }
    return 0;
}

static int use_source(comp_t *c, const eddy_sql_table_t *t, uint32_t pos)
{
    if (t->connector == EDDY_SQL_CONN_PRINT || t->connector == EDDY_SQL_CONN_BLACKHOLE)
        return sqlc_fail(c, pos, "table '%s' (connector '%s') is a sink: it cannot be read", t->name,
                    t->connector == EDDY_SQL_CONN_PRINT ? "print" : "blackhole");
    if (!c->source) {
        c->source = t;
        return 0;
    }
    if (c->source == t || (c->source->connector == EDDY_SQL_CONN_NEXMARK_CSV &&
                           t->connector == EDDY_SQL_CONN_NEXMARK_CSV))
        return 0;
    return sqlc_fail(c, pos, "reading table '%s' besides '%s' is not supported: an eddy SQL job reads "
                "one source (the Nexmark tables share one)", t->name, c->source->name);
}

/* The rows of table (or view) name: its steps into steps, its columns
 * (fields not among avoid's) into out. */
int sqlc_scan(comp_t *c, const char *name, uint32_t pos, const char *alias, eddy_ynode_t *steps,
              const eddy_sql_rel_t *avoid, rel_t *out)
{
    const eddy_sql_table_t *t = eddy_sql_catalog_find(&c->cat, name);
    if (!t)
        return eddy_sql_catalog_unknown(c->src, &c->cat, name, pos, c->err);
    const char *qual = alias ? alias : name;
    if (t->connector == EDDY_SQL_CONN_VIEW) {
        if (++c->depth > MAX_VIEW_DEPTH)
            return sqlc_fail(c, pos, "view '%s' refers to itself (or views nest more than %u deep)",
                        name, MAX_VIEW_DEPTH);
        if (sqlc_compile_query(c, t->stmt->query, steps, avoid, out) < 0)
            return -1;
        c->depth--;
        if (out->top.pending)
            return sqlc_fail(c, out->top.pos, "OVER windows other than a top-1 by RANK() filtered in "
                        "the query that reads them are not supported");
        return sqlc_requalify(c, out, qual);
    }
    if (use_source(c, t, pos) < 0)
        return -1;
    if (t->connector == EDDY_SQL_CONN_NEXMARK_CSV) {
        const char *names[32], *exprs[32];
        if (sqlc_add_filter(c, steps, sqlc_fmt(c, "event == '%c'", t->event), pos) < 0)
            return -1;
        for (uint32_t i = 0; i < t->n_columns; i++) {
            names[i] = sqlc_fresh(c, t->names[i], avoid, names, i);
            exprs[i] = t->fields[i][0] ? t->fields[i] : "''";
            if (!names[i] || eddy_sql_rel_add(&out->r, qual, t->names[i], names[i], t->types[i],
                                              (int)i == t->watermark) < 0)
                return sqlc_oom(c);
        }
        return sqlc_add_map(c, steps, names, exprs, t->n_columns, pos);
    }
    /* filesystem: the source's columns are the table's */
    bool clash = false;
    for (uint32_t i = 0; i < t->n_columns; i++) {
        if (!eddy_pspec_is_identifier(t->names[i]))
            return sqlc_fail(c, t->stmt->columns[i].pos, "column name '%s' is not supported: eddy's "
                        "are letters, digits and _", t->names[i]);
        clash |= sqlc_taken(t->names[i], avoid, NULL, 0);
    }
    const char *names[1024];
    for (uint32_t i = 0; i < t->n_columns && i < 1024; i++) {
        names[i] = clash ? sqlc_fresh(c, t->names[i], avoid, names, i) : t->names[i];
        if (!names[i] || eddy_sql_rel_add(&out->r, qual, t->names[i], names[i], t->types[i],
                                          (int)i == t->watermark) < 0)
            return sqlc_oom(c);
    }
    return clash ? sqlc_add_map(c, steps, names, (const char *const *)t->names, t->n_columns, pos) : 0;
}

static int interval_arg(comp_t *c, const eddy_sql_expr_t *x, const char *what, int64_t *ms)
{
    if (x->kind != EDDY_SQL_X_INTERVAL || x->i <= 0)
        return sqlc_fail(c, x->pos, "the %s must be a positive INTERVAL literal (INTERVAL '10' SECOND)",
                    what);
    *ms = x->i;
    return 0;
}

/* HOP(slide, size) and CUMULATE(step, size) (name): a window of type
 * whose slide (or step) divides its size; a tumbling one when they are
 * equal. */
static int slide_and_size(comp_t *c, const char *name, uint32_t pos, eddy_sql_expr_t *const *iv,
                          uint32_t n, const char *type, const char *slide, win_t *w)
{
    if (n != 2)
        return n > 2 ? sqlc_fail(c, pos, "%s with an offset is not supported", name)
                     : sqlc_fail(c, pos, "%s needs its %s and size", name, slide);
    w->type = type;
    if (interval_arg(c, iv[0], slide, &w->slide) < 0 ||
        interval_arg(c, iv[1], "window size", &w->size) < 0)
        return -1;
    if (w->size % w->slide)
        return sqlc_fail(c, pos, "%s windows whose size is not a multiple of their %s are not "
                         "supported", name, slide);
    if (w->size / w->slide > 1000)
        return sqlc_fail(c, pos, "%s windows of more than 1000 times their %s are not supported",
                         name, slide);
    if (w->size == w->slide)
        w->type = "tumbling";
    return 0;
}

/* A window from its function name and arguments (a TVF's or a legacy GROUP
 * BY TUMBLE(...)'s intervals). */
int sqlc_window_of(comp_t *c, const char *fn, uint32_t pos, eddy_sql_expr_t *const *iv,
                   uint32_t n, win_t *w)
{
    if (!strcasecmp(fn, "TUMBLE")) {
        if (n != 1)
            return sqlc_fail(c, pos, n > 1 ? "TUMBLE with an offset is not supported"
                                      : "TUMBLE needs its size (INTERVAL '10' SECOND)");
        w->type = "tumbling";
        return interval_arg(c, iv[0], "window size", &w->size);
    }
    if (!strcasecmp(fn, "HOP"))
        return slide_and_size(c, "HOP", pos, iv, n, "sliding", "slide", w);
    if (!strcasecmp(fn, "SESSION")) {
        if (n != 1)
            return sqlc_fail(c, pos, "SESSION needs its gap (INTERVAL '10' SECOND)");
        w->type = "session";
        return interval_arg(c, iv[0], "session gap", &w->gap);
    }
    if (!strcasecmp(fn, "CUMULATE"))
        return slide_and_size(c, "CUMULATE", pos, iv, n, "cumulate", "step", w);
    return sqlc_fail(c, pos, "unknown window function '%s' (TUMBLE, HOP, CUMULATE, SESSION)", fn);
}

int sqlc_compile_tvf(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps,
                     const eddy_sql_rel_t *avoid, rel_t *out)
{
    if (sqlc_scan(c, f->input, f->input_pos, NULL, steps, avoid, out) < 0)
        return -1;
    if (sqlc_window_of(c, f->name, f->pos, f->intervals, f->n_intervals, &out->w) < 0)
        return -1;
    if (f->n_partition && strcmp(out->w.type, "session"))
        return sqlc_fail(c, f->partition[0]->pos, "PARTITION BY belongs to SESSION windows only");
    eddy_sql_expr_t col = {.kind = EDDY_SQL_X_COLUMN, .pos = f->descriptor_pos,
                           .name = f->descriptor};
    eddy_sql_xctx_t xc = {c->src, c->err, &out->r, NULL, false};
    int i = eddy_sql_resolve(&xc, &col);
    if (i < 0)
        return -1;
    if (!out->r.cols[i].rowtime)
        return sqlc_fail(c, f->descriptor_pos, "DESCRIPTOR(%s): not a time attribute (windows run on "
                    "the source's event time, the WATERMARK column)", f->descriptor);
    out->w.kind = WIN_TVF;
    out->w.rowtime = i;
    out->w.pos = f->pos;
    static const char *const wcols[] = {"window_start", "window_end", "window_time"};
    for (int k = 0; k < 3; k++) {
        const char *field = sqlc_fresh(c, wcols[k], &out->r, NULL, 0);
        if (!field || eddy_sql_rel_add(&out->r, f->input, wcols[k], field, EDDY_SQL_T_TIMESTAMP,
                                       false) < 0)
            return sqlc_oom(c);
    }
    out->w.ws = (int)out->r.n - 3;
    out->w.we = (int)out->r.n - 2;
    out->w.wt = (int)out->r.n - 1;
    return 0;
}

/* A window TVF's rows with window_start, window_end and window_time
 * computed (tumbling windows only: each row is in one window). */
int sqlc_materialize(comp_t *c, eddy_ynode_t *steps, rel_t *in)
{
    if (in->w.kind != WIN_TVF || in->w.materialized)
        return 0;
    if (strcmp(in->w.type, "tumbling"))
        return sqlc_fail(c, in->w.pos, "rows of a %s window TVF are supported only grouped by "
                    "window_start and window_end", in->w.type);
    uint32_t n = 0;
    const char **names = calloc(in->r.n, sizeof *names), **exprs = calloc(in->r.n, sizeof *exprs);
    if (!names || !exprs) {
        free(names);
        free(exprs);
        return sqlc_oom(c);
    }
    const char *ts = in->r.cols[in->w.rowtime].field;
    long long size = (long long)in->w.size;
    for (uint32_t i = 0; i < in->r.n; i++) {
        names[n] = in->r.cols[i].field;
        if ((int)i == in->w.ws)
            exprs[n] = sqlc_fmt(c, "tumble_start(%s, %lld)", ts, size);
        else if ((int)i == in->w.we)
            exprs[n] = sqlc_fmt(c, "tumble_start(%s, %lld) + %lld", ts, size, size);
        else if ((int)i == in->w.wt)
            exprs[n] = sqlc_fmt(c, "tumble_start(%s, %lld) + %lld", ts, size, size - 1);
        else if (!strcmp(in->r.cols[i].field, names[0]) && i > 0)
            continue; /* an alias of a field already listed (a window join's right side) */
        else
            exprs[n] = in->r.cols[i].field;
        bool dup = false;
        for (uint32_t k = 0; k < n; k++)
            dup |= !strcmp(names[k], names[n]);
        if (!dup)
            n++;
    }
    int rc = sqlc_add_map(c, steps, names, exprs, n, in->w.pos);
    free(names);
    free(exprs);
    in->w.materialized = true;
    return rc;
}

int sqlc_compile_from(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps,
                      const eddy_sql_rel_t *avoid, rel_t *out, const eddy_sql_expr_t **where)
{
    switch (f->kind) {
    case EDDY_SQL_FROM_TABLE:
        return sqlc_scan(c, f->name, f->pos, f->alias, steps, avoid, out);
    case EDDY_SQL_FROM_TVF:
        if (sqlc_compile_tvf(c, f, steps, avoid, out) < 0)
            return -1;
        return f->alias ? sqlc_requalify(c, out, f->alias) : 0;
    case EDDY_SQL_FROM_SUBQUERY:
        if (sqlc_compile_query(c, f->sub, steps, avoid, out) < 0)
            return -1;
        return sqlc_requalify(c, out, f->alias);
    case EDDY_SQL_FROM_JOIN:
        return sqlc_compile_join(c, f, steps, out, where);
    }
    return sqlc_fail(c, f->pos, "unsupported FROM item");
}
