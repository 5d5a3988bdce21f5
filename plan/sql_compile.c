/* sql_compile.c - SQL into a pipeline spec (sql_compile.h).
 *
 * A query is planned bottom-up: each FROM item appends the steps that make
 * its rows to the pipeline's step list (or, for a join's right side, to
 * that join's own list) and returns the relation they carry (which
 * pipeline field holds which SQL column, its type, whether it is the
 * source's event time). The pipeline is linear with one source, so what it
 * cannot express is refused by name: a second source, a join whose right
 * side is not a table, windows other than tumbling/hopping/session, a top-N
 * other than top-1 by RANK().
 *
 * Strings made while planning are kept in the compiler (keep()) and freed
 * at its end, so the many error paths need no cleanup of their own. */
#include "plan/sql_compile.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan/pipeline_spec_parse.h"
#include "plan/pipeline_window.h"
#include "plan/sql_catalog.h"
#include "plan/sql_expr.h"
#include "plan/sql_parse.h"
#include "plan/sql_tree.h"

#define MAX_VIEW_DEPTH 16

typedef enum { WIN_NONE, WIN_TVF, WIN_AGG } win_kind_t;

/* What a relation knows of windows: a window TVF's rows (window_start and
 * window_end not yet computed unless materialized), or a windowed
 * aggregate's result rows. */
typedef struct win {
    win_kind_t kind;
    const char *type; /* tumbling | sliding | session */
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
    char **kept;
    uint32_t n_kept;
    bool oom;
} comp_t;

static uint32_t line_of(const comp_t *c, uint32_t pos)
{
    uint32_t line = 1;
    for (uint32_t i = 0; i < pos && i < c->src->len; i++)
        line += c->src->text[i] == '\n';
    return line;
}

static int oom(comp_t *c)
{
    return eddy_err_set(c->err, "out of memory");
}

/* s kept until the end of compilation; NULL (and oom) when s is NULL. */
static const char *keep(comp_t *c, char *s)
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

static const char *fmt(comp_t *c, const char *f, ...) __attribute__((format(printf, 2, 3)));
static const char *fmt(comp_t *c, const char *f, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    if (n < 0 || (size_t)n < sizeof buf)
        return keep(c, strdup(n < 0 ? "" : buf));
    char *s = malloc((size_t)n + 1);
    if (s) {
        va_start(ap, f);
        vsnprintf(s, (size_t)n + 1, f, ap);
        va_end(ap);
    }
    return keep(c, s);
}

static int fail(comp_t *c, uint32_t pos, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fail(comp_t *c, uint32_t pos, const char *f, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, f);
    vsnprintf(msg, sizeof msg, f, ap);
    va_end(ap);
    return eddy_sql_fail(c->src, pos, c->err, "%s", msg);
}

static void rel_clear(rel_t *r)
{
    eddy_sql_rel_clear(&r->r);
    *r = (rel_t){0};
    r->w.ws = r->w.we = r->w.wt = r->w.rowtime = -1;
}

static void rel_init(rel_t *r)
{
    *r = (rel_t){0};
    r->w.ws = r->w.we = r->w.wt = r->w.rowtime = -1;
}

static bool taken(const char *name, const eddy_sql_rel_t *a, const char *const *more, uint32_t n)
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
static const char *fresh(comp_t *c, const char *base, const eddy_sql_rel_t *a,
                         const char *const *more, uint32_t n)
{
    char clean[80];
    size_t k = 0;
    if (!isalpha((unsigned char)base[0]) && base[0] != '_')
        clean[k++] = '_';
    for (const char *p = base; *p && k < 60; p++)
        clean[k++] = isalnum((unsigned char)*p) || *p == '_' ? *p : '_';
    clean[k] = '\0';
    if (!taken(clean, a, more, n))
        return fmt(c, "%s", clean);
    for (uint32_t i = 2;; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s_%u", clean, i);
        if (!taken(name, a, more, n))
            return fmt(c, "%s", name);
    }
}

/* ---- steps ------------------------------------------------------------- */

static int add_filter(comp_t *c, eddy_ynode_t *steps, const char *text, uint32_t pos)
{
    eddy_ynode_t *st = eddy_sql_ymap(line_of(c, pos));
    if (eddy_sql_yput_str(st, "filter", text, line_of(c, pos)) < 0 || eddy_sql_ypush(steps, st) < 0)
        return oom(c);
    return 0;
}

static int add_map(comp_t *c, eddy_ynode_t *steps, const char *const *names,
                   const char *const *exprs, uint32_t n, uint32_t pos)
{
    uint32_t line = line_of(c, pos);
    eddy_ynode_t *st = eddy_sql_ymap(line), *m = eddy_sql_ymap(line);
    for (uint32_t i = 0; i < n; i++)
        if (eddy_sql_yput_str(m, names[i], exprs[i], line) < 0) {
            eddy_ynode_free(st);
            return oom(c);
        }
    if (eddy_sql_yput(st, "map", m) < 0 || eddy_sql_ypush(steps, st) < 0)
        return oom(c);
    return 0;
}

/* A step {kind: text} (key_by, max_by). */
static int add_simple(comp_t *c, eddy_ynode_t *steps, const char *kind, const char *text,
                      uint32_t pos)
{
    eddy_ynode_t *st = eddy_sql_ymap(line_of(c, pos));
    if (eddy_sql_yput_str(st, kind, text, line_of(c, pos)) < 0 || eddy_sql_ypush(steps, st) < 0)
        return oom(c);
    return 0;
}

/* The window step of w; the first event-time window names the source's
 * time column and the watermark delay. */
static int add_window(comp_t *c, eddy_ynode_t *steps, const win_t *w, uint32_t pos)
{
    uint32_t line = line_of(c, pos);
    eddy_ynode_t *st = eddy_sql_ymap(line), *m = eddy_sql_ymap(line);
    int rc = eddy_sql_yput_str(m, "type", w->type, line);
    if (!strcmp(w->type, "session")) {
        rc |= eddy_sql_yput_str(m, "gap", fmt(c, "%lldms", (long long)w->gap), line);
    } else {
        rc |= eddy_sql_yput_str(m, "size", fmt(c, "%lldms", (long long)w->size), line);
        if (!strcmp(w->type, "sliding"))
            rc |= eddy_sql_yput_str(m, "slide", fmt(c, "%lldms", (long long)w->slide), line);
    }
    if (!c->time_used) {
        const eddy_sql_table_t *t = c->source;
        const char *col = t->connector == EDDY_SQL_CONN_NEXMARK_CSV ? EDDY_SQL_NEXMARK_TIME_COLUMN
                          : t->watermark >= 0                        ? t->names[t->watermark]
                                                                     : NULL;
        if (!col) {
            eddy_ynode_free(st);
            eddy_ynode_free(m);
            return fail(c, pos, "table '%s' has no WATERMARK: windows need event time", t->name);
        }
        rc |= eddy_sql_yput_str(m, "timestamp", col, line);
        rc |= eddy_sql_yput_str(m, "watermark_delay",
                                fmt(c, "%lldms", (long long)t->watermark_delay_ms), line);
        c->time_used = true;
    }
    rc |= eddy_sql_yput(st, "window", m);
    rc |= eddy_sql_ypush(steps, st);
    return rc || c->oom ? oom(c) : 0;
}

/* ---- expressions -------------------------------------------------------- */

static int translate(comp_t *c, const eddy_sql_rel_t *r, const eddy_sql_group_t *g,
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
    *text = keep(c, eddy_sql_buf_take(&b));
    return *text ? 0 : oom(c);
}

/* Appends x's conjuncts (split at AND) to *v. */
static int conjuncts(comp_t *c, const eddy_sql_expr_t *x, const eddy_sql_expr_t ***v, uint32_t *n)
{
    if (!x)
        return 0;
    if (x->kind == EDDY_SQL_X_BINARY && x->op == EDDY_SQL_OP_AND)
        return conjuncts(c, x->args[0], v, n) < 0 ? -1 : conjuncts(c, x->args[1], v, n);
    const eddy_sql_expr_t **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return oom(c);
    nv[(*n)++] = x;
    *v = nv;
    return 0;
}

/* Which of r's columns [0, split) (bit 1) and [split, n) (bit 2) x reads;
 * -1 on an unknown column (with its error). */
static int sides(comp_t *c, const eddy_sql_rel_t *r, uint32_t split, const eddy_sql_expr_t *x)
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
        return fail(c, x->pos, "subqueries in a join condition are not supported");
    for (uint32_t i = 0; i < x->n_args; i++) {
        int s = sides(c, r, split, x->args[i]);
        if (s < 0)
            return -1;
        m |= s;
    }
    int s = sides(c, r, split, x->operand);
    return s < 0 ? -1 : m | s;
}

/* True when x names a window column (window_start, window_end, window_time). */
static bool reads_window(const rel_t *in, const eddy_sql_expr_t *x)
{
    if (!x)
        return false;
    if (x->kind == EDDY_SQL_X_COLUMN || x->kind == EDDY_SQL_X_STAR)
        return x->kind == EDDY_SQL_X_STAR || !strcmp(x->name, "window_start") ||
               !strcmp(x->name, "window_end") || !strcmp(x->name, "window_time");
    for (uint32_t i = 0; i < x->n_args; i++)
        if (reads_window(in, x->args[i]))
            return true;
    return reads_window(in, x->operand);
}

/* ---- FROM ---------------------------------------------------------------- */

static int compile_select(comp_t *c, const eddy_sql_select_t *s, eddy_ynode_t *steps,
                          const eddy_sql_rel_t *avoid, rel_t *out);

static int requalify(comp_t *c, rel_t *r, const char *qual)
{
    for (uint32_t i = 0; i < r->r.n; i++) {
        free(r->r.cols[i].qual);
        r->r.cols[i].qual = qual ? strdup(qual) : NULL;
        if (qual && !r->r.cols[i].qual)
            return oom(c);
    }
    return 0;
}

static int use_source(comp_t *c, const eddy_sql_table_t *t, uint32_t pos)
{
    if (t->connector == EDDY_SQL_CONN_PRINT || t->connector == EDDY_SQL_CONN_BLACKHOLE)
        return fail(c, pos, "table '%s' (connector '%s') is a sink: it cannot be read", t->name,
                    t->connector == EDDY_SQL_CONN_PRINT ? "print" : "blackhole");
    if (!c->source) {
        c->source = t;
        return 0;
    }
    if (c->source == t || (c->source->connector == EDDY_SQL_CONN_NEXMARK_CSV &&
                           t->connector == EDDY_SQL_CONN_NEXMARK_CSV))
        return 0;
    return fail(c, pos, "reading table '%s' besides '%s' is not supported: an eddy SQL job reads "
                "one source (the Nexmark tables share one)", t->name, c->source->name);
}

/* The rows of table (or view) name: its steps into steps, its columns
 * (fields not among avoid's) into out. */
static int scan(comp_t *c, const char *name, uint32_t pos, const char *alias, eddy_ynode_t *steps,
                const eddy_sql_rel_t *avoid, rel_t *out)
{
    const eddy_sql_table_t *t = eddy_sql_catalog_find(&c->cat, name);
    if (!t)
        return eddy_sql_catalog_unknown(c->src, &c->cat, name, pos, c->err);
    const char *qual = alias ? alias : name;
    if (t->connector == EDDY_SQL_CONN_VIEW) {
        if (++c->depth > MAX_VIEW_DEPTH)
            return fail(c, pos, "view '%s' refers to itself (or views nest more than %u deep)",
                        name, MAX_VIEW_DEPTH);
        if (compile_select(c, t->stmt->query, steps, avoid, out) < 0)
            return -1;
        c->depth--;
        if (out->top.pending)
            return fail(c, out->top.pos, "OVER windows other than a top-1 by RANK() filtered in "
                        "the query that reads them are not supported");
        return requalify(c, out, qual);
    }
    if (use_source(c, t, pos) < 0)
        return -1;
    if (t->connector == EDDY_SQL_CONN_NEXMARK_CSV) {
        const char *names[32], *exprs[32];
        if (add_filter(c, steps, fmt(c, "event == '%c'", t->event), pos) < 0)
            return -1;
        for (uint32_t i = 0; i < t->n_columns; i++) {
            names[i] = fresh(c, t->names[i], avoid, names, i);
            exprs[i] = t->fields[i][0] ? t->fields[i] : "''";
            if (!names[i] || eddy_sql_rel_add(&out->r, qual, t->names[i], names[i], t->types[i],
                                              (int)i == t->watermark) < 0)
                return oom(c);
        }
        return add_map(c, steps, names, exprs, t->n_columns, pos);
    }
    /* filesystem: the source's columns are the table's */
    bool clash = false;
    for (uint32_t i = 0; i < t->n_columns; i++) {
        if (!eddy_pspec_is_identifier(t->names[i]))
            return fail(c, t->stmt->columns[i].pos, "column name '%s' is not supported: eddy's "
                        "are letters, digits and _", t->names[i]);
        clash |= taken(t->names[i], avoid, NULL, 0);
    }
    const char *names[1024];
    for (uint32_t i = 0; i < t->n_columns && i < 1024; i++) {
        names[i] = clash ? fresh(c, t->names[i], avoid, names, i) : t->names[i];
        if (!names[i] || eddy_sql_rel_add(&out->r, qual, t->names[i], names[i], t->types[i],
                                          (int)i == t->watermark) < 0)
            return oom(c);
    }
    return clash ? add_map(c, steps, names, (const char *const *)t->names, t->n_columns, pos) : 0;
}

static int interval_arg(comp_t *c, const eddy_sql_expr_t *x, const char *what, int64_t *ms)
{
    if (x->kind != EDDY_SQL_X_INTERVAL || x->i <= 0)
        return fail(c, x->pos, "the %s must be a positive INTERVAL literal (INTERVAL '10' SECOND)",
                    what);
    *ms = x->i;
    return 0;
}

/* A window from its function name and arguments (a TVF's or a legacy GROUP
 * BY TUMBLE(...)'s intervals). */
static int window_of(comp_t *c, const char *fn, uint32_t pos, eddy_sql_expr_t *const *iv,
                     uint32_t n, win_t *w)
{
    if (!strcasecmp(fn, "TUMBLE")) {
        if (n != 1)
            return fail(c, pos, n > 1 ? "TUMBLE with an offset is not supported"
                                      : "TUMBLE needs its size (INTERVAL '10' SECOND)");
        w->type = "tumbling";
        return interval_arg(c, iv[0], "window size", &w->size);
    }
    if (!strcasecmp(fn, "HOP")) {
        if (n != 2)
            return fail(c, pos, n > 2 ? "HOP with an offset is not supported"
                                      : "HOP needs its slide and size");
        w->type = "sliding";
        if (interval_arg(c, iv[0], "slide", &w->slide) < 0 ||
            interval_arg(c, iv[1], "window size", &w->size) < 0)
            return -1;
        if (w->size % w->slide)
            return fail(c, pos, "HOP windows whose size is not a multiple of their slide are not "
                        "supported");
        if (w->size == w->slide)
            w->type = "tumbling";
        return 0;
    }
    if (!strcasecmp(fn, "SESSION")) {
        if (n != 1)
            return fail(c, pos, "SESSION needs its gap (INTERVAL '10' SECOND)");
        w->type = "session";
        return interval_arg(c, iv[0], "session gap", &w->gap);
    }
    if (!strcasecmp(fn, "CUMULATE"))
        return fail(c, pos, "CUMULATE windows are not supported (eddy's windows are tumbling, "
                    "hopping and session)");
    return fail(c, pos, "unknown window function '%s' (TUMBLE, HOP, SESSION)", fn);
}

static int compile_tvf(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps,
                       const eddy_sql_rel_t *avoid, rel_t *out)
{
    if (scan(c, f->input, f->input_pos, NULL, steps, avoid, out) < 0)
        return -1;
    if (window_of(c, f->name, f->pos, f->intervals, f->n_intervals, &out->w) < 0)
        return -1;
    if (f->n_partition && strcmp(out->w.type, "session"))
        return fail(c, f->partition[0]->pos, "PARTITION BY belongs to SESSION windows only");
    eddy_sql_expr_t col = {.kind = EDDY_SQL_X_COLUMN, .pos = f->descriptor_pos,
                           .name = f->descriptor};
    eddy_sql_xctx_t xc = {c->src, c->err, &out->r, NULL, false};
    int i = eddy_sql_resolve(&xc, &col);
    if (i < 0)
        return -1;
    if (!out->r.cols[i].rowtime)
        return fail(c, f->descriptor_pos, "DESCRIPTOR(%s): not a time attribute (windows run on "
                    "the source's event time, the WATERMARK column)", f->descriptor);
    out->w.kind = WIN_TVF;
    out->w.rowtime = i;
    out->w.pos = f->pos;
    static const char *const wcols[] = {"window_start", "window_end", "window_time"};
    for (int k = 0; k < 3; k++) {
        const char *field = fresh(c, wcols[k], &out->r, NULL, 0);
        if (!field || eddy_sql_rel_add(&out->r, f->input, wcols[k], field, EDDY_SQL_T_TIMESTAMP,
                                       false) < 0)
            return oom(c);
    }
    out->w.ws = (int)out->r.n - 3;
    out->w.we = (int)out->r.n - 2;
    out->w.wt = (int)out->r.n - 1;
    return 0;
}

/* A window TVF's rows with window_start, window_end and window_time
 * computed (tumbling windows only: each row is in one window). */
static int materialize(comp_t *c, eddy_ynode_t *steps, rel_t *in)
{
    if (in->w.kind != WIN_TVF || in->w.materialized)
        return 0;
    if (strcmp(in->w.type, "tumbling"))
        return fail(c, in->w.pos, "rows of a %s window TVF are supported only grouped by "
                    "window_start and window_end", in->w.type);
    uint32_t n = 0;
    const char **names = calloc(in->r.n, sizeof *names), **exprs = calloc(in->r.n, sizeof *exprs);
    if (!names || !exprs) {
        free(names);
        free(exprs);
        return oom(c);
    }
    const char *ts = in->r.cols[in->w.rowtime].field;
    long long size = (long long)in->w.size;
    for (uint32_t i = 0; i < in->r.n; i++) {
        names[n] = in->r.cols[i].field;
        if ((int)i == in->w.ws)
            exprs[n] = fmt(c, "tumble_start(%s, %lld)", ts, size);
        else if ((int)i == in->w.we)
            exprs[n] = fmt(c, "tumble_start(%s, %lld) + %lld", ts, size, size);
        else if ((int)i == in->w.wt)
            exprs[n] = fmt(c, "tumble_start(%s, %lld) + %lld", ts, size, size - 1);
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
    int rc = add_map(c, steps, names, exprs, n, in->w.pos);
    free(names);
    free(exprs);
    in->w.materialized = true;
    return rc;
}

/* The join step {join: {with: {steps: rsteps}, left_key, right_key, [type:
 * semi], [window: tumbling l's size, each side's event time]}} (taking
 * rsteps); l is NULL for a join without a window. */
static int add_join(comp_t *c, eddy_ynode_t *steps, uint32_t pos, eddy_ynode_t *rsteps,
                    const char *lkey, const char *rkey, bool semi, const rel_t *l, const rel_t *r)
{
    uint32_t line = line_of(c, pos);
    eddy_ynode_t *st = eddy_sql_ymap(line), *j = eddy_sql_ymap(line), *with = eddy_sql_ymap(line);
    int e = eddy_sql_yput(with, "steps", rsteps);
    e |= eddy_sql_yput(j, "with", with);
    e |= eddy_sql_yput_str(j, "left_key", lkey, line);
    e |= eddy_sql_yput_str(j, "right_key", rkey, line);
    if (semi)
        e |= eddy_sql_yput_str(j, "type", "semi", line);
    if (l) {
        eddy_ynode_t *w = eddy_sql_ymap(line);
        e |= eddy_sql_yput_str(w, "size", fmt(c, "%lldms", (long long)l->w.size), line);
        e |= eddy_sql_yput_str(w, "left_time", l->r.cols[l->w.rowtime].field, line);
        e |= eddy_sql_yput_str(w, "right_time", r->r.cols[r->w.rowtime].field, line);
        e |= eddy_sql_yput(j, "window", w);
    }
    e |= eddy_sql_yput(st, "join", j);
    e |= eddy_sql_ypush(steps, st);
    return e || c->oom ? oom(c) : 0;
}

static int compile_from(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps,
                        const eddy_sql_rel_t *avoid, rel_t *out, const eddy_sql_expr_t **where);

/* left JOIN right ON cond (and an inner join's WHERE, taken from *where):
 * conditions on one side filter it before the join, the first equality of
 * a column of each side is the join key, window_start = window_start of
 * two tumbling TVFs makes it a window join, the rest filters the result. */
static int compile_join(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps, rel_t *out,
                        const eddy_sql_expr_t **where)
{
    if (f->join_type == EDDY_SQL_JOIN_LEFT || f->join_type == EDDY_SQL_JOIN_RIGHT ||
        f->join_type == EDDY_SQL_JOIN_FULL)
        return fail(c, f->pos, "LEFT, RIGHT and FULL joins are not supported (eddy's joins are "
                    "inner)");
    const eddy_sql_from_t *rf = f->right;
    if (rf->kind != EDDY_SQL_FROM_TABLE && rf->kind != EDDY_SQL_FROM_TVF)
        return fail(c, rf->pos, "a join's right side other than a table or a window TVF over "
                    "one is not supported (put the subquery on the left)");
    rel_t r;
    rel_init(&r);
    eddy_ynode_t *rsteps = eddy_sql_yseq(line_of(c, rf->pos));
    const eddy_sql_expr_t **cs = NULL;
    uint32_t n_cs = 0;
    int rc = rsteps ? 0 : oom(c);
    if (rc == 0)
        rc = compile_from(c, f->left, steps, NULL, out, NULL);
    if (rc == 0 && rf->kind == EDDY_SQL_FROM_TABLE)
        rc = scan(c, rf->name, rf->pos, rf->alias, rsteps, &out->r, &r);
    if (rc == 0 && rf->kind == EDDY_SQL_FROM_TVF) {
        rc = compile_tvf(c, rf, rsteps, &out->r, &r);
        if (rc == 0 && rf->alias)
            rc = requalify(c, &r, rf->alias);
    }
    if (rc == 0 && r.top.pending)
        rc = fail(c, rf->pos, "a top-N on a join's side is not supported");
    /* the combined relation: left's columns, then right's */
    uint32_t split = out->r.n;
    for (uint32_t i = 0; rc == 0 && i < r.r.n; i++) {
        const eddy_sql_col_t *col = &r.r.cols[i];
        if (eddy_sql_rel_add(&out->r, col->qual, col->name, col->field, col->type, false) < 0)
            rc = oom(c);
    }
    if (rc == 0)
        rc = conjuncts(c, f->on, &cs, &n_cs);
    if (rc == 0 && where && *where) {
        rc = conjuncts(c, *where, &cs, &n_cs);
        *where = NULL;
    }
    const char *lkey = NULL, *rkey = NULL;
    bool window_eq = false;
    eddy_sql_buf_t post = {0};
    eddy_sql_rel_t lonly = {out->r.cols, split};
    for (uint32_t k = 0; rc == 0 && k < n_cs; k++) {
        const eddy_sql_expr_t *x = cs[k];
        int m = sides(c, &out->r, split, x);
        const char *text = NULL;
        if (m < 0) {
            rc = -1;
        } else if (m == 1) {
            bool win = out->w.kind == WIN_TVF && reads_window(out, x);
            rc = win ? fail(c, x->pos, "a condition on a window column before a join is not "
                            "supported") : translate(c, &lonly, NULL, x, &text, NULL);
            if (rc == 0)
                rc = add_filter(c, steps, text, x->pos);
        } else if (m == 2) {
            rc = translate(c, &r.r, NULL, x, &text, NULL);
            if (rc == 0)
                rc = add_filter(c, rsteps, text, x->pos);
        } else if (m == 3 && x->kind == EDDY_SQL_X_BINARY && x->op == EDDY_SQL_OP_EQ &&
                   sides(c, &out->r, split, x->args[0]) + sides(c, &out->r, split, x->args[1]) == 3) {
            const eddy_sql_expr_t *lx = x->args[0], *rx = x->args[1];
            if (sides(c, &out->r, split, lx) == 2) {
                lx = x->args[1];
                rx = x->args[0];
            }
            bool lw = lx->kind == EDDY_SQL_X_COLUMN && out->w.kind == WIN_TVF && reads_window(out, lx);
            bool rw = rx->kind == EDDY_SQL_X_COLUMN && r.w.kind == WIN_TVF && reads_window(&r, rx);
            if (lw || rw) {
                if (!(lw && rw) || strcmp(lx->name, rx->name))
                    rc = fail(c, x->pos, "a join on window columns other than window_start = "
                              "window_start (and window_end = window_end) of two window TVFs is "
                              "not supported");
                window_eq = true;
            } else if (!lkey) {
                eddy_sql_type_t lt, rt;
                rc = translate(c, &lonly, NULL, lx, &lkey, &lt);
                if (rc == 0)
                    rc = translate(c, &r.r, NULL, rx, &rkey, &rt);
            } else {
                rc = translate(c, &out->r, NULL, x, &text, NULL);
                eddy_sql_buf_printf(&post, "%s%s", post.n ? " and " : "", text ? text : "");
            }
        } else {
            rc = translate(c, &out->r, NULL, x, &text, NULL);
            eddy_sql_buf_printf(&post, "%s%s", post.n ? " and " : "", text ? text : "");
        }
    }
    if (rc == 0 && !lkey)
        rc = fail(c, f->pos, "a join without an equality of a column of each side is not "
                  "supported (eddy's joins are equi-joins)");
    bool windowed = out->w.kind == WIN_TVF && r.w.kind == WIN_TVF;
    if (rc == 0 && (out->w.kind == WIN_TVF || r.w.kind == WIN_TVF) && !(windowed && window_eq))
        rc = fail(c, f->pos, "a join of window TVFs needs both sides windowed and "
                  "L.window_start = R.window_start (a window join); other joins of windowed rows "
                  "are not supported");
    if (rc == 0 && windowed && (strcmp(out->w.type, "tumbling") || strcmp(r.w.type, "tumbling") ||
                                out->w.size != r.w.size))
        rc = fail(c, f->pos, "window joins of other than tumbling windows of the same size are not "
                  "supported");
    if (rc == 0) {
        rc = add_join(c, steps, f->pos, rsteps, lkey, rkey, false, windowed ? out : NULL, &r);
        rsteps = NULL;
        /* the right's window columns are the left's */
        for (int k = 0; rc == 0 && windowed && k < 3; k++) {
            int ri = (int)split + (k == 0 ? r.w.ws : k == 1 ? r.w.we : r.w.wt);
            int li = k == 0 ? out->w.ws : k == 1 ? out->w.we : out->w.wt;
            free(out->r.cols[ri].field);
            out->r.cols[ri].field = strdup(out->r.cols[li].field);
            rc = out->r.cols[ri].field ? 0 : oom(c);
        }
        if (!windowed)
            out->w.kind = WIN_NONE; /* an equi-join's rows are not a window's */
        for (uint32_t i = split; i < out->r.n; i++)
            out->r.cols[i].rowtime = false; /* the join's rows carry the left's time */
    }
    if (rc == 0 && post.n)
        rc = add_filter(c, steps, keep(c, eddy_sql_buf_take(&post)), f->pos);
    eddy_sql_buf_clear(&post);
    eddy_ynode_free(rsteps);
    free(cs);
    rel_clear(&r);
    return rc;
}

static int compile_from(comp_t *c, const eddy_sql_from_t *f, eddy_ynode_t *steps,
                        const eddy_sql_rel_t *avoid, rel_t *out, const eddy_sql_expr_t **where)
{
    switch (f->kind) {
    case EDDY_SQL_FROM_TABLE:
        return scan(c, f->name, f->pos, f->alias, steps, avoid, out);
    case EDDY_SQL_FROM_TVF:
        if (compile_tvf(c, f, steps, avoid, out) < 0)
            return -1;
        return f->alias ? requalify(c, out, f->alias) : 0;
    case EDDY_SQL_FROM_SUBQUERY:
        if (compile_select(c, f->sub, steps, avoid, out) < 0)
            return -1;
        return requalify(c, out, f->alias);
    case EDDY_SQL_FROM_JOIN:
        return compile_join(c, f, steps, out, where);
    }
    return fail(c, f->pos, "unsupported FROM item");
}

/* WHERE x IN (SELECT y FROM t [WHERE ...]): a semi-join, each row of in
 * once when t has a row whose y equals its x; the subquery's conditions on
 * its own columns filter t, and L.window_start = R.window_start (with
 * window_end) of two tumbling window TVFs makes it a window semi-join
 * (Flink's form). */
static int compile_semi(comp_t *c, eddy_ynode_t *steps, rel_t *in, const eddy_sql_expr_t *x)
{
    const eddy_sql_select_t *sub = x->sub;
    if (x->negated)
        return fail(c, x->pos, "NOT IN (SELECT ...) (an anti-join) is not supported");
    if (sub->n_items != 1 || sub->items[0]->kind == EDDY_SQL_X_STAR || sub->n_group_by ||
        sub->having || sub->distinct || sub->union_all ||
        (sub->from->kind != EDDY_SQL_FROM_TABLE && sub->from->kind != EDDY_SQL_FROM_TVF))
        return fail(c, sub->pos, "IN (SELECT ...) other than one column of a table or window TVF "
                    "with a WHERE is not supported");
    rel_t r, all;
    rel_init(&r);
    rel_init(&all);
    eddy_ynode_t *rsteps = eddy_sql_yseq(line_of(c, sub->pos));
    const eddy_sql_expr_t **cs = NULL;
    uint32_t n_cs = 0;
    int rc = rsteps ? 0 : oom(c);
    const eddy_sql_from_t *rf = sub->from;
    if (rc == 0 && rf->kind == EDDY_SQL_FROM_TABLE)
        rc = scan(c, rf->name, rf->pos, rf->alias, rsteps, &in->r, &r);
    if (rc == 0 && rf->kind == EDDY_SQL_FROM_TVF) {
        rc = compile_tvf(c, rf, rsteps, &in->r, &r);
        if (rc == 0 && rf->alias)
            rc = requalify(c, &r, rf->alias);
    }
    /* the subquery sees its own columns and, qualified, the outer's */
    for (uint32_t i = 0; rc == 0 && i < in->r.n + r.r.n; i++) {
        const eddy_sql_col_t *col = i < in->r.n ? &in->r.cols[i] : &r.r.cols[i - in->r.n];
        if (eddy_sql_rel_add(&all.r, col->qual, col->name, col->field, col->type, false) < 0)
            rc = oom(c);
    }
    const char *lkey = NULL, *rkey = NULL;
    bool window_eq = false;
    if (rc == 0)
        rc = translate(c, &in->r, NULL, x->args[0], &lkey, NULL);
    if (rc == 0)
        rc = translate(c, &r.r, NULL, sub->items[0], &rkey, NULL);
    if (rc == 0)
        rc = conjuncts(c, sub->where, &cs, &n_cs);
    for (uint32_t k = 0; rc == 0 && k < n_cs; k++) {
        const eddy_sql_expr_t *e = cs[k];
        int m = sides(c, &all.r, in->r.n, e);
        const char *text;
        if (m < 0) {
            rc = -1;
        } else if (m == 2 && !(r.w.kind == WIN_TVF && reads_window(&r, e))) {
            rc = translate(c, &r.r, NULL, e, &text, NULL);
            if (rc == 0)
                rc = add_filter(c, rsteps, text, e->pos);
        } else if (m == 3 && e->kind == EDDY_SQL_X_BINARY && e->op == EDDY_SQL_OP_EQ &&
                   e->args[0]->kind == EDDY_SQL_X_COLUMN && e->args[1]->kind == EDDY_SQL_X_COLUMN &&
                   !strcmp(e->args[0]->name, e->args[1]->name) &&
                   (!strcmp(e->args[0]->name, "window_start") || !strcmp(e->args[0]->name, "window_end")) &&
                   in->w.kind == WIN_TVF && r.w.kind == WIN_TVF) {
            window_eq = true;
        } else {
            rc = fail(c, e->pos, "in IN (SELECT ...), conditions other than on the subquery's "
                      "columns and L.window_start = R.window_start are not supported");
        }
    }
    bool windowed = in->w.kind == WIN_TVF && r.w.kind == WIN_TVF;
    if (rc == 0 && (in->w.kind == WIN_TVF || r.w.kind == WIN_TVF) && !(windowed && window_eq))
        rc = fail(c, sub->pos, "a semi-join of window TVFs needs both sides windowed and "
                  "L.window_start = R.window_start in the subquery's WHERE");
    if (rc == 0 && windowed && (strcmp(in->w.type, "tumbling") || strcmp(r.w.type, "tumbling") ||
                                in->w.size != r.w.size))
        rc = fail(c, sub->pos, "window semi-joins of other than tumbling windows of the same size "
                  "are not supported");
    if (rc == 0) {
        rc = add_join(c, steps, x->pos, rsteps, lkey, rkey, true, windowed ? in : NULL, &r);
        rsteps = NULL;
    }
    eddy_ynode_free(rsteps);
    free(cs);
    rel_clear(&r);
    rel_clear(&all);
    return rc;
}

/* ---- top-N -------------------------------------------------------------- */

/* The outer WHERE's rk <= 1 (or rk = 1, rk < 2) on in's pending top-N:
 * key_by + [window] + max_by; the conjunct is taken out of *cs. */
static int compile_topn(comp_t *c, eddy_ynode_t *steps, rel_t *in, const eddy_sql_expr_t **cs,
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
            return fail(c, x->pos, "top-N with N other than 1 is not supported (eddy keeps the "
                        "rows ranked 1, every tie)");
        cs[k] = NULL;
        if (add_simple(c, steps, "key_by", in->top.key, in->top.pos) < 0)
            return -1;
        if (in->top.w.kind != WIN_NONE) {
            win_t w = in->top.w;
            /* a window after a window: the rows' time is their window's end - 1 */
            if (w.kind == WIN_AGG) {
                w.size = !strcmp(w.type, "sliding") ? w.slide : w.size;
                w.type = "tumbling";
            }
            if (add_window(c, steps, &w, in->top.pos) < 0)
                return -1;
        }
        in->top.pending = false;
        return add_simple(c, steps, "max_by", in->top.order, in->top.pos);
    }
    return fail(c, in->top.pos, "OVER windows other than a top-1 by RANK() (an outer WHERE rk <= 1) "
                "are not supported");
}

/* ---- aggregates ------------------------------------------------------- */

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
    const char *name = fmt(a->c, "agg_%u", a->n);
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
            return *field ? 1 : oom(c);
        }
    if (!eddy_sql_is_aggregate(x->name))
        return 0;
    const char *arg_text = NULL;
    eddy_sql_type_t t = EDDY_SQL_T_BIGINT;
    if (x->star) {
        if (strcasecmp(x->name, "COUNT"))
            return fail(c, x->pos, "%s(*) is not SQL: only COUNT(*)", x->name);
    } else if (x->n_args != 1) {
        return fail(c, x->pos, "%s takes one argument", x->name);
    } else {
        if (eddy_sql_has_aggregate(x->args[0]))
            return fail(c, x->args[0]->pos, "aggregates inside aggregates are not SQL");
        if (translate(c, a->in, NULL, x->args[0], &arg_text, &t) < 0)
            return -1;
    }
    const char *fn = NULL, *text;
    if (!strcasecmp(x->name, "COUNT")) {
        if (x->distinct)
            fn = fmt(c, "count_distinct(%s)", arg_text);
        else
            fn = x->star ? "count()" : fmt(c, "count(%s)", arg_text);
        t = EDDY_SQL_T_BIGINT;
    } else if (x->distinct) {
        return fail(c, x->pos, "%s(DISTINCT ...) is not supported (only COUNT(DISTINCT ...))", x->name);
    } else if (!strcasecmp(x->name, "AVG")) {
        if (!eddy_sql_type_numeric(t) && t != EDDY_SQL_T_ANY)
            return fail(c, x->pos, "type mismatch: AVG of %s", eddy_sql_type_name(t));
        if (t == EDDY_SQL_T_INT || t == EDDY_SQL_T_BIGINT) {
            /* Flink: AVG of integers is an integer (truncated) */
            const char *s = agg_field(a, fmt(c, "sum(%s)", arg_text));
            const char *n = agg_field(a, fmt(c, "count(%s)", arg_text));
            if (!s || !n)
                return oom(c);
            *field = strdup(fmt(c, "(%s / %s)", s, n));
            *type = t;
            return *field ? 1 : oom(c);
        }
        fn = fmt(c, "avg(%s)", arg_text);
    } else {
        if (strcasecmp(x->name, "SUM") == 0 && !eddy_sql_type_numeric(t) && t != EDDY_SQL_T_ANY)
            return fail(c, x->pos, "type mismatch: SUM of %s", eddy_sql_type_name(t));
        char lower[8];
        snprintf(lower, sizeof lower, "%s", x->name);
        for (char *p = lower; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        fn = fmt(c, "%s(%s)", lower, arg_text);
    }
    if (!fn || !(text = agg_field(a, fn)))
        return oom(c);
    *field = strdup(text);
    *type = t;
    return *field ? 1 : oom(c);
}

static bool is_window_call(const eddy_sql_expr_t *x)
{
    return x->kind == EDDY_SQL_X_CALL &&
           (!strcasecmp(x->name, "TUMBLE") || !strcasecmp(x->name, "HOP") ||
            !strcasecmp(x->name, "SESSION") || !strcasecmp(x->name, "CUMULATE"));
}

static int select_items(comp_t *c, const eddy_sql_select_t *s, const rel_t *in,
                        const eddy_sql_group_t *g, eddy_ynode_t *steps, rel_t *out);

static int compile_aggregate(comp_t *c, const eddy_sql_select_t *s, eddy_ynode_t *steps,
                             rel_t *in, rel_t *out)
{
    win_t w = {.kind = WIN_NONE, .ws = -1, .we = -1, .wt = -1, .rowtime = -1};
    bool has_ws = false, has_we = false;
    const eddy_sql_expr_t *keys[64];
    uint32_t n_keys = 0;
    for (uint32_t i = 0; i < s->n_group_by; i++) {
        const eddy_sql_expr_t *x = s->group_by[i];
        if (is_window_call(x)) {
            if (w.kind != WIN_NONE || in->w.kind == WIN_TVF)
                return fail(c, x->pos, "a second window in one GROUP BY");
            if (x->n_args < 2 || x->args[0]->kind != EDDY_SQL_X_COLUMN)
                return fail(c, x->pos, "%s(time column, INTERVAL ...) needs its time column and "
                            "interval", x->name);
            eddy_sql_xctx_t xc = {c->src, c->err, &in->r, NULL, false};
            int ti = eddy_sql_resolve(&xc, x->args[0]);
            if (ti < 0)
                return -1;
            if (!in->r.cols[ti].rowtime)
                return fail(c, x->args[0]->pos, "%s(%s, ...): not a time attribute (windows run "
                            "on the source's event time, the WATERMARK column)", x->name,
                            x->args[0]->name);
            if (window_of(c, x->name, x->pos, x->args + 1, x->n_args - 1, &w) < 0)
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
            return fail(c, x->pos, "more than 64 GROUP BY expressions");
        keys[n_keys++] = x;
    }
    if (in->w.kind == WIN_TVF) {
        if (!has_ws || !has_we)
            return fail(c, s->pos, "a query over a window TVF that aggregates must GROUP BY "
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
        if (translate(c, &in->r, NULL, keys[i], &key_texts[i], &key_types[i]) < 0)
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
        key_expr = keep(c, eddy_sql_buf_take(&b));
    }
    agg_ctx_t a = {c, &in->r, NULL, NULL, 0, 0};
    char *texts[66], *fields[66];
    eddy_sql_type_t types[66];
    eddy_sql_group_t g = {texts, fields, types, 0, on_agg, &a};
    for (uint32_t i = 0; i < n_keys; i++) {
        texts[g.n] = (char *)key_texts[i];
        types[g.n] = key_types[i];
        fields[g.n++] = (char *)(n_keys == 1 ? key_field
                                             : agg_field(&a, fmt(c, "max(%s)", key_texts[i])));
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
    eddy_ynode_t *after = eddy_sql_yseq(line_of(c, s->pos));
    int rc = after ? 0 : oom(c);
    if (rc == 0 && s->having) {
        const char *text;
        eddy_sql_type_t t;
        rc = translate(c, &in->r, &g, s->having, &text, &t);
        if (rc == 0 && t != EDDY_SQL_T_BOOLEAN && t != EDDY_SQL_T_ANY)
            rc = fail(c, s->having->pos, "type mismatch: HAVING needs a BOOLEAN, not %s",
                      eddy_sql_type_name(t));
        if (rc == 0)
            rc = add_filter(c, after, text, s->having->pos);
    }
    if (rc == 0)
        rc = select_items(c, s, in, &g, after, out);
    if (rc == 0 && a.n == 0)
        agg_field(&a, "count()"); /* an aggregate step has at least one output */
    uint32_t line = line_of(c, s->pos);
    if (rc == 0)
        rc = add_simple(c, steps, "key_by", key_expr, s->pos);
    if (rc == 0 && w.kind == WIN_AGG)
        rc = add_window(c, steps, &w, s->pos);
    if (rc == 0) {
        eddy_ynode_t *st = eddy_sql_ymap(line), *m = eddy_sql_ymap(line);
        int e = 0;
        for (uint32_t i = 0; i < a.n; i++)
            e |= eddy_sql_yput_str(m, a.names[i], a.funcs[i], line);
        e |= eddy_sql_yput(st, "aggregate", m);
        e |= eddy_sql_ypush(steps, st);
        rc = e ? oom(c) : 0;
    }
    for (uint32_t i = 0; rc == 0 && after && i < after->n; i++) {
        rc = eddy_sql_ypush(steps, after->items[i]) < 0 ? oom(c) : 0;
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

/* ---- SELECT ------------------------------------------------------------- */

/* The SELECT list as one map over in (or over an aggregate's output, g). */
static int select_items(comp_t *c, const eddy_sql_select_t *s, const rel_t *in,
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
                rc = oom(c);                                                           \
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
                rc = fail(c, x->pos, "SELECT * in a query that aggregates is not supported");
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
                const char *f = fresh(c, col->name, &out->r, NULL, 0);
                if (!f || eddy_sql_rel_add(&out->r, NULL, col->name, f, col->type, col->rowtime) < 0) {
                    rc = oom(c);
                    break;
                }
                if ((int)k == in->w.ws)
                    out->w.ws = (int)out->r.n - 1;
                if ((int)k == in->w.we)
                    out->w.we = (int)out->r.n - 1;
                PUSH(f, col->field);
            }
            if (rc == 0 && !any)
                rc = fail(c, x->pos, "unknown table or alias '%s' in '%s.*'", x->qual, x->qual);
            continue;
        }
        if (x->kind == EDDY_SQL_X_OVER) {
            if (g)
                rc = fail(c, x->pos, "OVER in a query that aggregates is not supported");
            else if (!strcasecmp(x->name, "ROW_NUMBER") || !strcasecmp(x->name, "DENSE_RANK"))
                rc = fail(c, x->pos, "%s() OVER is not supported: eddy's top-N is RANK() ... <= 1 "
                          "(the rows ranked first, every tie)", x->name);
            else if (strcasecmp(x->name, "RANK") || x->n_args || x->star)
                rc = fail(c, x->pos, "OVER windows other than a top-1 by RANK() are not supported");
            else if (x->n_order != 1 || !x->order_desc[0])
                rc = fail(c, x->pos, "RANK() OVER (... ORDER BY x DESC) with one DESC key is "
                          "supported, not other orders");
            else if (out->top.pending)
                rc = fail(c, x->pos, "a second RANK() in one SELECT");
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
                    rc = fail(c, x->partition[k]->pos, "more than 16 PARTITION BY expressions");
                else
                    rc = translate(c, &in->r, NULL, x->partition[k], &part[np++], NULL);
            }
            if (rc < 0)
                break;
            if (ws || we) {
                if (!(ws && we) || np)
                    rc = fail(c, x->pos, "a top-N partitioned by a window's columns and others "
                              "is not supported (PARTITION BY window_start, window_end only)");
                else if (in->w.kind == WIN_AGG && !strcmp(in->w.type, "session"))
                    rc = fail(c, x->pos, "a top-N over session windows is not supported");
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
                t->key = keep(c, eddy_sql_buf_take(&b));
            }
            const char *order;
            eddy_sql_type_t ot;
            if (translate(c, &in->r, NULL, x->order[0], &order, &ot) < 0) {
                rc = -1;
                break;
            }
            /* the partition key and the order as hidden fields of the map */
            const char *hk = fresh(c, "rank_key", &out->r, names, n);
            PUSH(hk, t->key);
            const char *ho = rc ? NULL : fresh(c, "rank_order", &out->r, names, n);
            PUSH(ho, order);
            t->key = hk;
            t->order = ho;
            const char *rn = alias ? alias : fmt(c, "EXPR$%u", i);
            const char *f = fresh(c, rn, &out->r, names, n);
            if (!f || eddy_sql_rel_add(&out->r, NULL, rn, f, EDDY_SQL_T_BIGINT, false) < 0) {
                rc = oom(c);
                break;
            }
            t->rank_col = (int)out->r.n - 1;
            PUSH(f, "1");
            continue;
        }
        const char *text;
        eddy_sql_type_t type;
        if (translate(c, &in->r, g, x, &text, &type) < 0) {
            rc = -1;
            break;
        }
        const char *name = alias ? alias : x->kind == EDDY_SQL_X_COLUMN ? x->name
                                                                         : fmt(c, "EXPR$%u", i);
        const char *f = fresh(c, name ? name : "EXPR", &out->r, names, n);
        bool rowtime = false;
        int ci = -1;
        if (x->kind == EDDY_SQL_X_COLUMN && !g) {
            eddy_sql_xctx_t xc = {c->src, c->err, &in->r, NULL, true};
            ci = eddy_sql_resolve(&xc, x);
            rowtime = ci >= 0 && in->r.cols[ci].rowtime;
        }
        if (!f || eddy_sql_rel_add(&out->r, NULL, name, f, type, rowtime) < 0) {
            rc = oom(c);
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
        rc = add_map(c, steps, names, exprs, n, s->pos);
    }
    free(names);
    free(exprs);
    return rc;
}

static int compile_select(comp_t *c, const eddy_sql_select_t *s, eddy_ynode_t *steps,
                          const eddy_sql_rel_t *avoid, rel_t *out)
{
    (void)avoid;
    if (s->union_all)
        return fail(c, s->union_pos, "UNION ALL is not supported");
    if (s->distinct)
        return fail(c, s->pos, "SELECT DISTINCT is not supported (GROUP BY the columns)");
    rel_t in;
    rel_init(&in);
    rel_init(out);
    const eddy_sql_expr_t *where = s->where;
    const eddy_sql_expr_t **cs = NULL;
    uint32_t n_cs = 0;
    int rc = compile_from(c, s->from, steps, NULL, &in, &where);
    if (rc == 0)
        rc = conjuncts(c, where, &cs, &n_cs);
    if (rc == 0 && in.top.pending)
        rc = compile_topn(c, steps, &in, cs, n_cs);
    bool agg = s->n_group_by > 0 || s->having;
    for (uint32_t i = 0; i < s->n_items; i++)
        agg |= eddy_sql_has_aggregate(s->items[i]);
    for (uint32_t k = 0; rc == 0 && k < n_cs; k++) {
        if (!cs[k])
            continue;
        if (cs[k]->kind == EDDY_SQL_X_IN && cs[k]->sub) {
            rc = compile_semi(c, steps, &in, cs[k]);
            continue;
        }
        if (in.w.kind == WIN_TVF && reads_window(&in, cs[k]))
            rc = materialize(c, steps, &in);
        const char *text;
        eddy_sql_type_t t;
        if (rc == 0)
            rc = translate(c, &in.r, NULL, cs[k], &text, &t);
        if (rc == 0 && t != EDDY_SQL_T_BOOLEAN && t != EDDY_SQL_T_ANY)
            rc = fail(c, cs[k]->pos, "type mismatch: WHERE needs a BOOLEAN, not %s",
                      eddy_sql_type_name(t));
        if (rc == 0)
            rc = add_filter(c, steps, text, cs[k]->pos);
    }
    if (rc == 0 && agg) {
        rc = compile_aggregate(c, s, steps, &in, out);
    } else if (rc == 0) {
        bool win = false;
        for (uint32_t i = 0; i < s->n_items; i++)
            win |= reads_window(&in, s->items[i]) || s->items[i]->kind == EDDY_SQL_X_OVER;
        if (win && in.w.kind == WIN_TVF)
            rc = materialize(c, steps, &in);
        if (rc == 0)
            rc = select_items(c, s, &in, NULL, steps, out);
    }
    free(cs);
    rel_clear(&in);
    return rc;
}

/* ---- statements ------------------------------------------------------- */

/* The final map: the sink's column names, TIMESTAMP(3) written as text. */
static int output_map(comp_t *c, eddy_ynode_t *steps, const rel_t *r, const eddy_sql_table_t *t,
                      uint32_t pos)
{
    const char **names = calloc(r->r.n, sizeof *names), **exprs = calloc(r->r.n, sizeof *exprs);
    int rc = names && exprs ? 0 : oom(c);
    for (uint32_t i = 0; rc == 0 && i < r->r.n; i++) {
        const eddy_sql_col_t *col = &r->r.cols[i];
        names[i] = fresh(c, t ? t->names[i] : col->name, NULL, names, i);
        bool ts = col->type == EDDY_SQL_T_TIMESTAMP || (t && t->types[i] == EDDY_SQL_T_TIMESTAMP);
        exprs[i] = ts ? fmt(c, "concat(date(%s), ' ', substr(datetime(%s), 11, 12))", col->field,
                            col->field)
                      : col->field;
        if (!names[i] || !exprs[i])
            rc = oom(c);
    }
    if (rc == 0)
        rc = add_map(c, steps, names, exprs, r->r.n, pos);
    free(names);
    free(exprs);
    return rc;
}

static eddy_ynode_t *source_node(comp_t *c)
{
    const eddy_sql_table_t *t = c->source;
    eddy_ynode_t *src = eddy_sql_ymap(1), *cols = eddy_sql_yseq(1);
    bool nexmark = t->connector == EDDY_SQL_CONN_NEXMARK_CSV;
    int e = 0;
    uint32_t n = nexmark ? EDDY_SQL_NEXMARK_N_COLUMNS : t->n_columns;
    for (uint32_t i = 0; i < n; i++)
        e |= eddy_sql_ypush(cols, eddy_sql_yscalar(nexmark ? eddy_sql_nexmark_columns[i] : t->names[i],
                                                   false, 1));
    if (!nexmark)
        e |= eddy_sql_yput_str(src, "input", t->path, 1);
    e |= eddy_sql_yput_str(src, "format", nexmark ? "csv" : t->format, 1);
    if (nexmark)
        e |= eddy_sql_yput_str(src, "ragged", "true", 1);
    e |= eddy_sql_yput(src, "columns", cols);
    if (e) {
        eddy_ynode_free(src);
        return NULL;
    }
    return src;
}

static eddy_pipeline_spec_t *compile(comp_t *c, const eddy_sql_script_t *script,
                                     const eddy_sql_compile_opts_t *opts)
{
    const eddy_sql_stmt_t *run = NULL;
    for (uint32_t i = 0; i < script->n; i++) {
        const eddy_sql_stmt_t *st = &script->stmts[i];
        if (st->kind != EDDY_SQL_INSERT && st->kind != EDDY_SQL_QUERY)
            continue;
        if (run) {
            fail(c, st->pos, "a second INSERT or query is not supported (an eddy SQL job has one "
                 "sink)");
            return NULL;
        }
        run = st;
    }
    if (!run) {
        fail(c, script->stmts[script->n - 1].pos, "nothing to run: no INSERT INTO ... SELECT or "
             "SELECT in the script");
        return NULL;
    }
    const eddy_sql_table_t *sink = NULL;
    if (run->kind == EDDY_SQL_INSERT) {
        sink = eddy_sql_catalog_find(&c->cat, run->name);
        if (!sink) {
            eddy_sql_catalog_unknown(c->src, &c->cat, run->name, run->name_pos, c->err);
            return NULL;
        }
        if (sink->connector == EDDY_SQL_CONN_VIEW || sink->connector == EDDY_SQL_CONN_NEXMARK_CSV) {
            fail(c, run->name_pos, "'%s' is a %s: INSERT INTO a table with a sink connector "
                 "(filesystem, print, blackhole)", run->name,
                 sink->connector == EDDY_SQL_CONN_VIEW ? "view" : "built-in source table");
            return NULL;
        }
    }
    eddy_ynode_t *root = eddy_sql_ymap(1), *steps = eddy_sql_yseq(line_of(c, run->pos));
    rel_t out;
    rel_init(&out);
    int rc = root && steps ? 0 : oom(c);
    if (rc == 0)
        rc = compile_select(c, run->query, steps, NULL, &out);
    if (rc == 0 && out.top.pending)
        rc = fail(c, out.top.pos, "OVER windows other than a top-1 by RANK() (an outer WHERE "
                  "rk <= 1) are not supported");
    if (rc == 0 && sink && sink->n_columns != out.r.n)
        rc = fail(c, run->query->pos, "the query has %u columns, table '%s' has %u", out.r.n,
                  sink->name, sink->n_columns);
    if (rc == 0)
        rc = output_map(c, steps, &out, sink, run->query->pos);
    if (rc == 0 && sink && sink->connector == EDDY_SQL_CONN_BLACKHOLE && !opts->has_output)
        rc = add_filter(c, steps, "false", run->pos);
    int e = 0;
    if (rc == 0) {
        e |= eddy_sql_yput_str(root, "name", "sql", 1);
        e |= eddy_sql_yput(root, "source", source_node(c));
        e |= eddy_sql_yput(root, "steps", steps);
        steps = NULL;
        if (sink && sink->connector == EDDY_SQL_CONN_FILESYSTEM) {
            eddy_ynode_t *sk = eddy_sql_ymap(1);
            e |= eddy_sql_yput_str(sk, "output", sink->path, 1);
            e |= eddy_sql_yput(root, "sink", sk);
        }
        if (e || c->oom)
            rc = oom(c);
    }
    eddy_pipeline_spec_t *spec = NULL;
    if (rc == 0) {
        eddy_err_t e2 = {{0}};
        spec = eddy_pipeline_spec_from_tree(c->src->file, root, &e2);
        if (!spec) /* a bug of this compiler: say what it made wrong */
            eddy_err_set(c->err, "%s: the SQL compiled into a pipeline that does not load: %s",
                         c->src->file, e2.msg);
    }
    eddy_ynode_free(steps);
    eddy_ynode_free(root);
    rel_clear(&out);
    return spec;
}

eddy_pipeline_spec_t *eddy_sql_compile(const char *file, const char *text, size_t len,
                                       const eddy_sql_compile_opts_t *opts, eddy_err_t *err)
{
    eddy_sql_src_t src = {file ? file : "sql", text, len};
    eddy_sql_compile_opts_t none = {0};
    if (memchr(text, '\0', len)) {
        eddy_err_set(err, "%s: not a text file (NUL byte)", src.file);
        return NULL;
    }
    eddy_sql_script_t *script = eddy_sql_parse(&src, err);
    if (!script)
        return NULL;
    comp_t c = {.src = &src, .err = err};
    eddy_pipeline_spec_t *spec = NULL;
    if (eddy_sql_catalog_build(&src, script, &c.cat, err) == 0)
        spec = compile(&c, script, opts ? opts : &none);
    for (uint32_t i = 0; i < c.n_kept; i++)
        free(c.kept[i]);
    free(c.kept);
    eddy_sql_catalog_clear(&c.cat);
    eddy_sql_script_destroy(&script);
    return spec;
}
