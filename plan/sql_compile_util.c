/* sql_compile_util.c - the SQL compiler's small tools
 * (plan/sql_compile_int.h): kept strings and errors at a SQL position,
 * fresh pipeline field names, the steps that are one mapping (filter, map,
 * key_by, max_by, window), and SQL expressions translated or split into
 * conjuncts. Every other compiler file builds on these. */
#include "plan/sql_compile_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/sql_tree.h"

uint32_t sqlc_line_of(const comp_t *c, uint32_t pos)
{
    uint32_t line = 1;
    for (uint32_t i = 0; i < pos && i < c->src->len; i++)
        line += c->src->text[i] == '\n';
    return line;
}

int sqlc_oom(comp_t *c)
{
    return eddy_err_set(c->err, "out of memory");
}

/* s kept until the end of compilation; NULL (and oom) when s is NULL. */
const char *sqlc_keep(comp_t *c, char *s)
{
    char **v = s ? realloc(c->kept, (c->n_kept + 1) * sizeof *v) : NULL;
    if (!v) {
        free(s);
        c->oom = true;
        return NULL;
    }
    c->kept = v;
    v[c->n_kept++] = s;
    return s;
}

const char *sqlc_fmt(comp_t *c, const char *f, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    if (n < 0 || (size_t)n < sizeof buf)
        return sqlc_keep(c, strdup(n < 0 ? "" : buf));
    char *s = malloc((size_t)n + 1);
    if (s) {
        va_start(ap, f);
        vsnprintf(s, (size_t)n + 1, f, ap);
        va_end(ap);
    }
    return sqlc_keep(c, s);
}

int sqlc_fail(comp_t *c, uint32_t pos, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int rc = eddy_sql_vfail(c->src, pos, c->err, f, ap);
    va_end(ap);
    return rc;
}

void sqlc_rel_clear(rel_t *r)
{
    eddy_sql_rel_clear(&r->r);
    *r = (rel_t){0};
    r->w.ws = r->w.we = r->w.wt = r->w.rowtime = -1;
}

void sqlc_rel_init(rel_t *r)
{
    *r = (rel_t){0};
    r->w.ws = r->w.we = r->w.wt = r->w.rowtime = -1;
}

bool sqlc_taken(const char *name, const eddy_sql_rel_t *a, const char *const *more, uint32_t n)
{
    for (uint32_t i = 0; a && i < a->n; i++)
        if (!strcmp(a->cols[i].field, name))
            return true;
    for (uint32_t i = 0; i < n; i++)
        if (more[i] && !strcmp(more[i], name))
            return true;
    static const char *const words[] = {"and", "or", "not", "true", "false", "null", "if", NULL};
    for (const char *const *w = words; *w; w++)
        if (!strcmp(*w, name))
            return true;
    return false;
}

/* A pipeline field name for SQL name base, not among a's fields nor more. */
const char *sqlc_fresh(comp_t *c, const char *base, const eddy_sql_rel_t *a,
                       const char *const *more, uint32_t n)
{
    char clean[80];
    size_t k = 0;
    if (!isalpha((unsigned char)base[0]) && base[0] != '_')
        clean[k++] = '_';
    for (const char *p = base; *p && k < 60; p++)
        clean[k++] = isalnum((unsigned char)*p) || *p == '_' ? *p : '_';
    clean[k] = '\0';
    if (!sqlc_taken(clean, a, more, n))
        return sqlc_fmt(c, "%s", clean);
    for (uint32_t i = 2;; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s_%u", clean, i);
        if (!sqlc_taken(name, a, more, n))
            return sqlc_fmt(c, "%s", name);
    }
}

int sqlc_add_filter(comp_t *c, eddy_ynode_t *steps, const char *text, uint32_t pos)
{
    eddy_ynode_t *st = eddy_sql_ymap(sqlc_line_of(c, pos));
    if (eddy_sql_yput_str(st, "filter", text, sqlc_line_of(c, pos)) < 0 || eddy_sql_ypush(steps, st) < 0)
        return sqlc_oom(c);
    return 0;
}

int sqlc_add_map(comp_t *c, eddy_ynode_t *steps, const char *const *names,
                 const char *const *exprs, uint32_t n, uint32_t pos)
{
    uint32_t line = sqlc_line_of(c, pos);
    eddy_ynode_t *st = eddy_sql_ymap(line), *m = eddy_sql_ymap(line);
    for (uint32_t i = 0; i < n; i++)
        if (eddy_sql_yput_str(m, names[i], exprs[i], line) < 0) {
            eddy_ynode_free(st);
            return sqlc_oom(c);
        }
    if (eddy_sql_yput(st, "map", m) < 0 || eddy_sql_ypush(steps, st) < 0)
        return sqlc_oom(c);
    return 0;
}

/* A step {kind: text} (key_by, max_by). */
int sqlc_add_simple(comp_t *c, eddy_ynode_t *steps, const char *kind, const char *text,
                    uint32_t pos)
{
    eddy_ynode_t *st = eddy_sql_ymap(sqlc_line_of(c, pos));
    if (eddy_sql_yput_str(st, kind, text, sqlc_line_of(c, pos)) < 0 || eddy_sql_ypush(steps, st) < 0)
        return sqlc_oom(c);
    return 0;
}

/* The window step of w; the first event-time window names the source's
 * time column and the watermark delay. */
int sqlc_add_window(comp_t *c, eddy_ynode_t *steps, const win_t *w, uint32_t pos)
{
    uint32_t line = sqlc_line_of(c, pos);
    eddy_ynode_t *st = eddy_sql_ymap(line), *m = eddy_sql_ymap(line);
    int rc = eddy_sql_yput_str(m, "type", w->type, line);
    if (!strcmp(w->type, "session")) {
        rc |= eddy_sql_yput_str(m, "gap", sqlc_fmt(c, "%lldms", (long long)w->gap), line);
    } else {
        rc |= eddy_sql_yput_str(m, "size", sqlc_fmt(c, "%lldms", (long long)w->size), line);
        if (!strcmp(w->type, "sliding") || !strcmp(w->type, "cumulate"))
            rc |= eddy_sql_yput_str(m, strcmp(w->type, "cumulate") ? "slide" : "step",
                                    sqlc_fmt(c, "%lldms", (long long)w->slide), line);
    }
    if (!c->time_used) {
        const eddy_sql_table_t *t = c->source;
        const char *col = t->connector == EDDY_SQL_CONN_NEXMARK_CSV ? EDDY_SQL_NEXMARK_TIME_COLUMN
                          : t->watermark >= 0                        ? t->names[t->watermark]
                                                                     : NULL;
        if (!col) {
            eddy_ynode_free(st);
            eddy_ynode_free(m);
            return sqlc_fail(c, pos, "table '%s' has no WATERMARK: windows need event time", t->name);
        }
        rc |= eddy_sql_yput_str(m, "timestamp", col, line);
        rc |= eddy_sql_yput_str(m, "watermark_delay",
                                sqlc_fmt(c, "%lldms", (long long)t->watermark_delay_ms), line);
        c->time_used = true;
    }
    rc |= eddy_sql_yput(st, "window", m);
    rc |= eddy_sql_ypush(steps, st);
    return rc || c->oom ? sqlc_oom(c) : 0;
}

int sqlc_translate(comp_t *c, const eddy_sql_rel_t *r, const eddy_sql_group_t *g,
                   const eddy_sql_expr_t *x, const char **text, eddy_sql_type_t *type)
{
    eddy_sql_xctx_t xc = {c->src, c->err, r, g, false};
    eddy_sql_buf_t b = {0};
    eddy_sql_type_t t;
    if (eddy_sql_translate(&xc, x, &b, &t) < 0) {
        eddy_sql_buf_clear(&b);
        return -1;
    }
    if (type)
        *type = t;
    *text = sqlc_keep(c, eddy_sql_buf_take(&b));
    return *text ? 0 : sqlc_oom(c);
}

/* Appends x's conjuncts (split at AND) to *v. */
int sqlc_conjuncts(comp_t *c, const eddy_sql_expr_t *x, const eddy_sql_expr_t ***v, uint32_t *n)
{
    if (!x)
        return 0;
    if (x->kind == EDDY_SQL_X_BINARY && x->op == EDDY_SQL_OP_AND)
        return sqlc_conjuncts(c, x->args[0], v, n) < 0 ? -1 : sqlc_conjuncts(c, x->args[1], v, n);
    const eddy_sql_expr_t **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return sqlc_oom(c);
    nv[(*n)++] = x;
    *v = nv;
    return 0;
}

/* Which of r's columns [0, split) (bit 1) and [split, n) (bit 2) x reads;
 * -1 on an unknown column (with its error). */
int sqlc_sides(comp_t *c, const eddy_sql_rel_t *r, uint32_t split, const eddy_sql_expr_t *x)
{
    if (!x)
        return 0;
    int m = 0;
    if (x->kind == EDDY_SQL_X_COLUMN) {
        eddy_sql_xctx_t xc = {c->src, c->err, r, NULL, false};
        int i = eddy_sql_resolve(&xc, x);
        return i < 0 ? -1 : (uint32_t)i < split ? 1 : 2;
    }
    if (x->sub)
        return sqlc_fail(c, x->pos, "subqueries in a join condition are not supported");
    for (uint32_t i = 0; i < x->n_args; i++) {
        int s = sqlc_sides(c, r, split, x->args[i]);
        if (s < 0)
            return -1;
        m |= s;
    }
    int s = sqlc_sides(c, r, split, x->operand);
    return s < 0 ? -1 : m | s;
}

/* True when x names a window column (window_start, window_end, window_time). */
bool sqlc_reads_window(const rel_t *in, const eddy_sql_expr_t *x)
{
    if (!x)
        return false;
    if (x->kind == EDDY_SQL_X_COLUMN || x->kind == EDDY_SQL_X_STAR)
        return x->kind == EDDY_SQL_X_STAR || !strcmp(x->name, "window_start") ||
               !strcmp(x->name, "window_end") || !strcmp(x->name, "window_time");
    for (uint32_t i = 0; i < x->n_args; i++)
        if (sqlc_reads_window(in, x->args[i]))
            return true;
    return sqlc_reads_window(in, x->operand);
}
