/* sql_expr.c - SQL expressions into pipeline expressions (sql_expr.h).
 *
 * Every operator is written fully parenthesised, so the pipeline parser's
 * precedence never matters. Types follow Flink's where they decide the
 * result (INT / INT is integer division, as the pipeline's is on integers)
 * and are checked where a mismatch would silently give null at run time
 * (pipeline expressions never fail on data): comparing a STRING with a
 * number, arithmetic on a string, a non-boolean condition. */
#include "plan/sql_expr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- buffer ------------------------------------------------------------- */

void eddy_sql_buf_printf(eddy_sql_buf_t *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || b->n + (size_t)n + 1 > b->cap) {
        size_t cap = (b->n + (size_t)(n < 0 ? 0 : n) + 1) * 2;
        char *p = n < 0 ? NULL : realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

const char *eddy_sql_buf_str(const eddy_sql_buf_t *b)
{
    return b->p && !b->oom ? b->p : "";
}

char *eddy_sql_buf_take(eddy_sql_buf_t *b)
{
    char *s = b->oom ? NULL : b->p ? b->p : strdup("");
    if (b->oom)
        free(b->p);
    *b = (eddy_sql_buf_t){0};
    return s;
}

void eddy_sql_buf_clear(eddy_sql_buf_t *b)
{
    free(b->p);
    *b = (eddy_sql_buf_t){0};
}

/* ---- relations ---------------------------------------------------------- */

int eddy_sql_rel_add(eddy_sql_rel_t *r, const char *qual, const char *name, const char *field,
                     eddy_sql_type_t type, bool rowtime)
{
    eddy_sql_col_t *v = realloc(r->cols, (r->n + 1) * sizeof *v);
    if (!v)
        return -1;
    r->cols = v;
    eddy_sql_col_t *c = &v[r->n];
    *c = (eddy_sql_col_t){qual ? strdup(qual) : NULL, strdup(name), strdup(field), type, rowtime};
    if (!c->name || !c->field || (qual && !c->qual)) {
        free(c->qual);
        free(c->name);
        free(c->field);
        return -1;
    }
    r->n++;
    return 0;
}

void eddy_sql_rel_clear(eddy_sql_rel_t *r)
{
    for (uint32_t i = 0; i < r->n; i++) {
        free(r->cols[i].qual);
        free(r->cols[i].name);
        free(r->cols[i].field);
    }
    free(r->cols);
    *r = (eddy_sql_rel_t){0};
}

/* ---- names -------------------------------------------------------------- */

static uint32_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 1000;
    uint32_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (uint32_t)j;
    for (size_t i = 1; i <= la; i++) {
        uint32_t prev = row[0];
        row[0] = (uint32_t)i;
        for (size_t j = 1; j <= lb; j++) {
            uint32_t cur = row[j];
            char ca = (char)(a[i - 1] | 0x20), cb = (char)(b[j - 1] | 0x20); /* case-blind */
            uint32_t best = prev + (ca != cb);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

const char *eddy_sql_closest(const char *name, const char *const *cands, uint32_t n)
{
    const char *best = NULL;
    uint32_t best_d = (uint32_t)strlen(name) / 3 + 2;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t d = distance(name, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    return best;
}

static int fail(const eddy_sql_xctx_t *c, uint32_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(const eddy_sql_xctx_t *c, uint32_t pos, const char *fmt, ...)
{
    if (c->quiet)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int rc = eddy_sql_vfail(c->src, pos, c->err, fmt, ap);
    va_end(ap);
    return rc;
}

int eddy_sql_resolve(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x)
{
    const eddy_sql_rel_t *r = c->rel;
    int found = -1;
    bool qual_known = !x->qual;
    for (uint32_t i = 0; i < r->n; i++) {
        const eddy_sql_col_t *col = &r->cols[i];
        if (x->qual && (!col->qual || strcmp(col->qual, x->qual)))
            continue;
        qual_known = true;
        if (strcmp(col->name, x->name))
            continue;
        if (found >= 0)
            return fail(c, x->pos, "ambiguous column '%s' (qualify it: %s.%s or %s.%s)", x->name,
                        r->cols[found].qual ? r->cols[found].qual : "?", x->name,
                        col->qual ? col->qual : "?", x->name);
        found = (int)i;
    }
    if (found >= 0)
        return found;
    if (!qual_known)
        return fail(c, x->pos, "unknown table or alias '%s' in '%s.%s'", x->qual, x->qual, x->name);
    const char **cands = calloc(r->n ? r->n : 1, sizeof *cands);
    uint32_t n = 0;
    for (uint32_t i = 0; cands && i < r->n; i++)
        if (!x->qual || (r->cols[i].qual && !strcmp(r->cols[i].qual, x->qual)))
            cands[n++] = r->cols[i].name;
    const char *near = cands ? eddy_sql_closest(x->name, cands, n) : NULL;
    char hint[200] = "";
    if (near)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    free(cands);
    return fail(c, x->pos, "unknown column '%s'%s", x->name, hint);
}

/* ---- types -------------------------------------------------------------- */

bool eddy_sql_type_numeric(eddy_sql_type_t t)
{
    return t == EDDY_SQL_T_INT || t == EDDY_SQL_T_BIGINT || t == EDDY_SQL_T_DOUBLE ||
           t == EDDY_SQL_T_DECIMAL;
}

static int rank(eddy_sql_type_t t)
{
    return t == EDDY_SQL_T_INT ? 1 : t == EDDY_SQL_T_BIGINT ? 2 : t == EDDY_SQL_T_DECIMAL ? 3 : 4;
}

/* Values of a and b can be compared (or be the branches of one CASE). */
static bool comparable(eddy_sql_type_t a, eddy_sql_type_t b)
{
    if (a == EDDY_SQL_T_ANY || b == EDDY_SQL_T_ANY || a == b)
        return true;
    return eddy_sql_type_numeric(a) && eddy_sql_type_numeric(b);
}

bool eddy_sql_is_aggregate(const char *name)
{
    static const char *const aggs[] = {"COUNT", "SUM", "MIN", "MAX", "AVG", NULL};
    for (const char *const *a = aggs; *a; a++)
        if (!strcasecmp(name, *a))
            return true;
    return false;
}

bool eddy_sql_has_aggregate(const eddy_sql_expr_t *x)
{
    if (!x || x->kind == EDDY_SQL_X_OVER)
        return false;
    if (x->kind == EDDY_SQL_X_CALL && eddy_sql_is_aggregate(x->name))
        return true;
    for (uint32_t i = 0; i < x->n_args; i++)
        if (eddy_sql_has_aggregate(x->args[i]))
            return true;
    return eddy_sql_has_aggregate(x->operand);
}

/* ---- translation -------------------------------------------------------- */

static int tr(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *o,
              eddy_sql_type_t *t);

static void string_lit(eddy_sql_buf_t *o, const char *s)
{
    eddy_sql_buf_printf(o, "'");
    for (; *s; s++) {
        if (*s == '\'' || *s == '\\')
            eddy_sql_buf_printf(o, "\\%c", *s);
        else if (*s == '\n')
            eddy_sql_buf_printf(o, "\\n");
        else if (*s == '\t')
            eddy_sql_buf_printf(o, "\\t");
        else
            eddy_sql_buf_printf(o, "%c", *s);
    }
    eddy_sql_buf_printf(o, "'");
}

static int need_bool(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_type_t t)
{
    if (t == EDDY_SQL_T_ANY || t == EDDY_SQL_T_BOOLEAN)
        return 0;
    return fail(c, x->pos, "type mismatch: %s where a BOOLEAN is needed", eddy_sql_type_name(t));
}

static int binary(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *o,
                  eddy_sql_type_t *t)
{
    static const char *const ops[] = {"+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=",
                                      "and", "or", "||"};
    static const char *const sql_ops[] = {"+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=",
                                          "AND", "OR", "||"};
    eddy_sql_buf_t a = {0}, b = {0};
    eddy_sql_type_t ta, tb;
    int rc = tr(c, x->args[0], &a, &ta) < 0 || tr(c, x->args[1], &b, &tb) < 0 ? -1 : 0;
    eddy_sql_op_t op = x->op;
    if (rc == 0 && (op == EDDY_SQL_OP_AND || op == EDDY_SQL_OP_OR)) {
        rc = need_bool(c, x->args[0], ta) < 0 || need_bool(c, x->args[1], tb) < 0 ? -1 : 0;
        *t = EDDY_SQL_T_BOOLEAN;
    } else if (rc == 0 && op >= EDDY_SQL_OP_EQ && op <= EDDY_SQL_OP_GE) {
        if (!comparable(ta, tb))
            rc = fail(c, x->pos, "type mismatch: %s %s %s cannot be compared", eddy_sql_type_name(ta),
                      sql_ops[op], eddy_sql_type_name(tb));
        *t = EDDY_SQL_T_BOOLEAN;
    } else if (rc == 0 && op == EDDY_SQL_OP_CONCAT) {
        *t = EDDY_SQL_T_STRING;
        eddy_sql_buf_printf(o, "concat(%s, %s)", eddy_sql_buf_str(&a), eddy_sql_buf_str(&b));
        eddy_sql_buf_clear(&a);
        eddy_sql_buf_clear(&b);
        return 0;
    } else if (rc == 0) {
        bool ts_interval = (ta == EDDY_SQL_T_TIMESTAMP || tb == EDDY_SQL_T_TIMESTAMP) &&
                           (ta == EDDY_SQL_T_INTERVAL || tb == EDDY_SQL_T_INTERVAL);
        if (ts_interval && (op == EDDY_SQL_OP_ADD || (op == EDDY_SQL_OP_SUB && tb == EDDY_SQL_T_INTERVAL))) {
            *t = EDDY_SQL_T_TIMESTAMP;
        } else if (ta == EDDY_SQL_T_INTERVAL && tb == EDDY_SQL_T_INTERVAL &&
                   (op == EDDY_SQL_OP_ADD || op == EDDY_SQL_OP_SUB)) {
            *t = EDDY_SQL_T_INTERVAL;
        } else if ((eddy_sql_type_numeric(ta) || ta == EDDY_SQL_T_ANY) &&
                   (eddy_sql_type_numeric(tb) || tb == EDDY_SQL_T_ANY)) {
            *t = ta == EDDY_SQL_T_ANY ? tb : tb == EDDY_SQL_T_ANY ? ta : rank(ta) > rank(tb) ? ta : tb;
        } else {
            rc = fail(c, x->pos, "type mismatch: %s %s %s", eddy_sql_type_name(ta), sql_ops[op],
                      eddy_sql_type_name(tb));
        }
    }
    if (rc == 0)
        eddy_sql_buf_printf(o, "(%s %s %s)", eddy_sql_buf_str(&a), ops[op], eddy_sql_buf_str(&b));
    eddy_sql_buf_clear(&a);
    eddy_sql_buf_clear(&b);
    return rc;
}

/* LIKE's pattern as an anchored POSIX extended regular expression, in a
 * pipeline string literal. */
static void like_regex(eddy_sql_buf_t *o, const char *pat)
{
    eddy_sql_buf_t re = {0};
    eddy_sql_buf_printf(&re, "^");
    for (const char *p = pat; *p; p++) {
        if (*p == '%')
            eddy_sql_buf_printf(&re, ".*");
        else if (*p == '_')
            eddy_sql_buf_printf(&re, ".");
        else if (strchr(".[]()*+?{}|^$\\", *p))
            eddy_sql_buf_printf(&re, "\\%c", *p);
        else
            eddy_sql_buf_printf(&re, "%c", *p);
    }
    eddy_sql_buf_printf(&re, "$");
    string_lit(o, eddy_sql_buf_str(&re));
    o->oom |= re.oom;
    eddy_sql_buf_clear(&re);
}

/* args as "a, b, c" into o; their types (all comparable) into *t. */
static int arg_list(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, uint32_t from,
                    eddy_sql_buf_t *o, eddy_sql_type_t *t)
{
    *t = EDDY_SQL_T_ANY;
    for (uint32_t i = from; i < x->n_args; i++) {
        eddy_sql_type_t ti;
        if (i > from)
            eddy_sql_buf_printf(o, ", ");
        if (tr(c, x->args[i], o, &ti) < 0)
            return -1;
        if (!comparable(*t, ti))
            return fail(c, x->args[i]->pos, "type mismatch: %s and %s in one list",
                        eddy_sql_type_name(*t), eddy_sql_type_name(ti));
        if (*t == EDDY_SQL_T_ANY || (eddy_sql_type_numeric(ti) && rank(ti) > rank(*t)))
            *t = ti;
    }
    return 0;
}

typedef struct fn {
    const char *sql, *pipe;
    uint32_t min, max;
    eddy_sql_type_t result; /* ANY: the arguments' */
} fn_t;

static const fn_t fns[] = {
    {"UPPER", "upper", 1, 1, EDDY_SQL_T_STRING},     {"LOWER", "lower", 1, 1, EDDY_SQL_T_STRING},
    {"TRIM", "trim", 1, 1, EDDY_SQL_T_STRING},       {"CHAR_LENGTH", "length", 1, 1, EDDY_SQL_T_INT},
    {"CHARACTER_LENGTH", "length", 1, 1, EDDY_SQL_T_INT},
    {"CONCAT", "concat", 1, 16, EDDY_SQL_T_STRING},  {"COALESCE", "coalesce", 1, 16, EDDY_SQL_T_ANY},
    {"ABS", "abs", 1, 1, EDDY_SQL_T_ANY},            {"MOD", NULL, 2, 2, EDDY_SQL_T_ANY},
    {"SUBSTRING", NULL, 2, 3, EDDY_SQL_T_STRING},    {"SUBSTR", NULL, 2, 3, EDDY_SQL_T_STRING},
    {"IF", NULL, 3, 3, EDDY_SQL_T_ANY},              {"HOUR", "hour", 1, 1, EDDY_SQL_T_BIGINT},
};

static int call(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *o,
                eddy_sql_type_t *t)
{
    if (eddy_sql_is_aggregate(x->name))
        return fail(c, x->pos, "aggregate %s is not allowed here (only in a SELECT list or HAVING "
                    "of a query that aggregates)", x->name);
    const fn_t *f = NULL;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!strcasecmp(fns[i].sql, x->name))
            f = &fns[i];
    if (!f) {
        const char *names[sizeof fns / sizeof fns[0]];
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
            names[i] = fns[i].sql;
        char up[64];
        snprintf(up, sizeof up, "%s", x->name);
        const char *near = eddy_sql_closest(up, names, sizeof fns / sizeof fns[0]);
        return fail(c, x->pos, "unknown function '%s'%s%s%s (docs/sql.md lists eddy's)", x->name,
                    near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
    }
    if (x->star || x->distinct)
        return fail(c, x->pos, "%s(%s...) is not supported", f->sql, x->star ? "*" : "DISTINCT ");
    if (x->n_args < f->min || x->n_args > f->max)
        return fail(c, x->pos, "%s takes %u%s%s argument%s, not %u", f->sql, f->min,
                    f->max > f->min ? " to " : "", f->max > f->min ? (f->max == 16 ? "16" : "3") : "",
                    f->max == 1 ? "" : "s", x->n_args);
    eddy_sql_type_t ta;
    if (!strcasecmp(f->sql, "MOD")) {
        eddy_sql_expr_t m = *x;
        m.kind = EDDY_SQL_X_BINARY;
        m.op = EDDY_SQL_OP_MOD;
        return binary(c, &m, o, t);
    }
    if (!strcasecmp(f->sql, "IF")) {
        eddy_sql_type_t tc;
        eddy_sql_buf_printf(o, "if(");
        if (tr(c, x->args[0], o, &tc) < 0 || need_bool(c, x->args[0], tc) < 0)
            return -1;
        eddy_sql_buf_printf(o, ", ");
        if (arg_list(c, x, 1, o, t) < 0)
            return -1;
        eddy_sql_buf_printf(o, ")");
        return 0;
    }
    if (f->pipe == NULL) { /* SUBSTRING(s, start [, len]): 1-based, substr is 0-based */
        eddy_sql_type_t t1;
        eddy_sql_buf_printf(o, "substr(");
        if (tr(c, x->args[0], o, &ta) < 0)
            return -1;
        eddy_sql_buf_printf(o, ", (");
        if (tr(c, x->args[1], o, &t1) < 0)
            return -1;
        eddy_sql_buf_printf(o, ") - 1");
        if (x->n_args == 3) {
            eddy_sql_buf_printf(o, ", ");
            if (tr(c, x->args[2], o, &t1) < 0)
                return -1;
        }
        eddy_sql_buf_printf(o, ")");
        *t = EDDY_SQL_T_STRING;
        return 0;
    }
    eddy_sql_buf_printf(o, "%s(", f->pipe);
    if (arg_list(c, x, 0, o, &ta) < 0)
        return -1;
    eddy_sql_buf_printf(o, ")");
    *t = f->result == EDDY_SQL_T_ANY ? ta : f->result;
    return 0;
}

static int cast(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *o,
                eddy_sql_type_t *t)
{
    eddy_sql_buf_t a = {0};
    eddy_sql_type_t ta;
    if (tr(c, x->args[0], &a, &ta) < 0) {
        eddy_sql_buf_clear(&a);
        return -1;
    }
    const char *fn = NULL;
    switch (x->cast_type) {
    case EDDY_SQL_T_INT:
    case EDDY_SQL_T_BIGINT: fn = "int"; break;
    case EDDY_SQL_T_DOUBLE:
    case EDDY_SQL_T_DECIMAL: fn = "float"; break;
    case EDDY_SQL_T_STRING: fn = ta == EDDY_SQL_T_TIMESTAMP ? NULL : "string"; break;
    case EDDY_SQL_T_TIMESTAMP: fn = eddy_sql_type_numeric(ta) || ta == EDDY_SQL_T_TIMESTAMP ? "int" : NULL; break;
    default: break;
    }
    int rc = 0;
    if (!fn)
        rc = fail(c, x->pos, "CAST of %s AS %s is not supported", eddy_sql_type_name(ta),
                  eddy_sql_type_name(x->cast_type));
    else
        eddy_sql_buf_printf(o, "%s(%s)", fn, eddy_sql_buf_str(&a));
    eddy_sql_buf_clear(&a);
    *t = x->cast_type;
    return rc;
}

static int case_expr(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *o,
                     eddy_sql_type_t *t)
{
    uint32_t pairs = (x->n_args - (x->has_else ? 1 : 0)) / 2;
    eddy_sql_buf_t op = {0};
    eddy_sql_type_t top = EDDY_SQL_T_ANY;
    if (x->operand && tr(c, x->operand, &op, &top) < 0) {
        eddy_sql_buf_clear(&op);
        return -1;
    }
    *t = EDDY_SQL_T_ANY;
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < pairs; i++) {
        eddy_sql_type_t tw, tt;
        eddy_sql_buf_printf(o, "if(");
        if (x->operand)
            eddy_sql_buf_printf(o, "(%s == ", eddy_sql_buf_str(&op));
        rc = tr(c, x->args[2 * i], o, &tw);
        if (rc == 0 && x->operand && !comparable(top, tw))
            rc = fail(c, x->args[2 * i]->pos, "type mismatch: CASE %s WHEN %s",
                      eddy_sql_type_name(top), eddy_sql_type_name(tw));
        if (rc == 0 && !x->operand)
            rc = need_bool(c, x->args[2 * i], tw);
        eddy_sql_buf_printf(o, "%s, ", x->operand ? ")" : "");
        if (rc == 0)
            rc = tr(c, x->args[2 * i + 1], o, &tt);
        if (rc == 0 && !comparable(*t, tt))
            rc = fail(c, x->args[2 * i + 1]->pos, "type mismatch: CASE branches of %s and %s",
                      eddy_sql_type_name(*t), eddy_sql_type_name(tt));
        if (*t == EDDY_SQL_T_ANY)
            *t = tt;
        eddy_sql_buf_printf(o, ", ");
    }
    if (rc == 0 && x->has_else) {
        eddy_sql_type_t te;
        rc = tr(c, x->args[x->n_args - 1], o, &te);
        if (rc == 0 && !comparable(*t, te))
            rc = fail(c, x->args[x->n_args - 1]->pos, "type mismatch: CASE branches of %s and %s",
                      eddy_sql_type_name(*t), eddy_sql_type_name(te));
    } else {
        eddy_sql_buf_printf(o, "null");
    }
    for (uint32_t i = 0; i < pairs; i++)
        eddy_sql_buf_printf(o, ")");
    eddy_sql_buf_clear(&op);
    return rc;
}

/* IN (list), BETWEEN, LIKE, IS NULL. */
static int predicate(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *o,
                     eddy_sql_type_t *t)
{
    eddy_sql_buf_t a = {0};
    eddy_sql_type_t ta, tb;
    int rc = tr(c, x->args[0], &a, &ta);
    const char *s = eddy_sql_buf_str(&a);
    *t = EDDY_SQL_T_BOOLEAN;
    eddy_sql_buf_printf(o, "%s(", x->negated ? "not " : "");
    if (rc == 0 && x->kind == EDDY_SQL_X_IS_NULL) {
        eddy_sql_buf_printf(o, "is_null(%s)", s);
    } else if (rc == 0 && x->kind == EDDY_SQL_X_LIKE) {
        if (x->args[1]->kind != EDDY_SQL_X_STRING)
            rc = fail(c, x->args[1]->pos, "LIKE with a pattern other than a string literal is "
                      "not supported");
        else if (ta != EDDY_SQL_T_STRING && ta != EDDY_SQL_T_ANY)
            rc = fail(c, x->pos, "type mismatch: %s LIKE STRING", eddy_sql_type_name(ta));
        eddy_sql_buf_printf(o, "matches(%s, ", s);
        if (rc == 0)
            like_regex(o, x->args[1]->text);
        eddy_sql_buf_printf(o, ")");
    } else if (rc == 0 && x->kind == EDDY_SQL_X_BETWEEN) {
        for (uint32_t i = 1; rc == 0 && i < 3; i++) {
            eddy_sql_buf_printf(o, "%s(%s %s ", i == 1 ? "" : " and ", s, i == 1 ? ">=" : "<=");
            rc = tr(c, x->args[i], o, &tb);
            if (rc == 0 && !comparable(ta, tb))
                rc = fail(c, x->args[i]->pos, "type mismatch: %s BETWEEN %s", eddy_sql_type_name(ta),
                          eddy_sql_type_name(tb));
            eddy_sql_buf_printf(o, ")");
        }
    } else if (rc == 0 && x->sub) {
        rc = fail(c, x->pos, "IN (SELECT ...) is supported only as a window semi-join (docs/sql.md)");
    } else if (rc == 0) {
        for (uint32_t i = 1; rc == 0 && i < x->n_args; i++) {
            eddy_sql_buf_printf(o, "%s(%s == ", i == 1 ? "" : " or ", s);
            rc = tr(c, x->args[i], o, &tb);
            if (rc == 0 && !comparable(ta, tb))
                rc = fail(c, x->args[i]->pos, "type mismatch: %s IN (..., %s, ...)",
                          eddy_sql_type_name(ta), eddy_sql_type_name(tb));
            eddy_sql_buf_printf(o, ")");
        }
    }
    eddy_sql_buf_printf(o, ")");
    eddy_sql_buf_clear(&a);
    return rc;
}

/* In an aggregating query: x as a GROUP BY expression's field, if it is one
 * (1), not (0), or an error (-1). */
static int group_field(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *o,
                       eddy_sql_type_t *t)
{
    eddy_sql_xctx_t q = *c;
    q.group = NULL;
    q.quiet = true;
    eddy_sql_buf_t b = {0};
    eddy_sql_type_t tb;
    int found = 0;
    if (tr(&q, x, &b, &tb) == 0)
        for (uint32_t i = 0; i < c->group->n && !found; i++)
            if (!strcmp(c->group->texts[i], eddy_sql_buf_str(&b))) {
                eddy_sql_buf_printf(o, "%s", c->group->fields[i]);
                *t = c->group->types[i];
                found = 1;
            }
    eddy_sql_buf_clear(&b);
    return found;
}

static int tr(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *o,
              eddy_sql_type_t *t)
{
    if (c->group && x->kind != EDDY_SQL_X_INT && x->kind != EDDY_SQL_X_STRING) {
        if (x->kind == EDDY_SQL_X_CALL && c->group->agg) {
            char *field = NULL;
            int r = c->group->agg(c->group->arg, x, &field, t);
            if (r < 0)
                return -1;
            if (r > 0) {
                eddy_sql_buf_printf(o, "%s", field);
                free(field);
                return 0;
            }
        }
        int g = group_field(c, x, o, t);
        if (g != 0)
            return g < 0 ? -1 : 0;
        if (x->kind == EDDY_SQL_X_COLUMN) {
            if (eddy_sql_resolve(c, x) < 0)
                return -1;
            return fail(c, x->pos, "column '%s' is neither in GROUP BY nor in an aggregate", x->name);
        }
    }
    switch (x->kind) {
    case EDDY_SQL_X_COLUMN: {
        int i = eddy_sql_resolve(c, x);
        if (i < 0)
            return -1;
        eddy_sql_buf_printf(o, "%s", c->rel->cols[i].field);
        *t = c->rel->cols[i].type;
        return 0;
    }
    case EDDY_SQL_X_INT:
        eddy_sql_buf_printf(o, "%lld", (long long)x->i);
        *t = x->i >= INT32_MIN && x->i <= INT32_MAX ? EDDY_SQL_T_INT : EDDY_SQL_T_BIGINT;
        return 0;
    case EDDY_SQL_X_FLOAT:
        eddy_sql_buf_printf(o, "%s", x->text);
        *t = EDDY_SQL_T_DOUBLE;
        return 0;
    case EDDY_SQL_X_STRING:
        string_lit(o, x->text);
        *t = EDDY_SQL_T_STRING;
        return 0;
    case EDDY_SQL_X_BOOL:
        eddy_sql_buf_printf(o, "%s", x->i ? "true" : "false");
        *t = EDDY_SQL_T_BOOLEAN;
        return 0;
    case EDDY_SQL_X_NULL:
        eddy_sql_buf_printf(o, "null");
        *t = EDDY_SQL_T_ANY;
        return 0;
    case EDDY_SQL_X_INTERVAL:
        eddy_sql_buf_printf(o, "%lld", (long long)x->i);
        *t = EDDY_SQL_T_INTERVAL;
        return 0;
    case EDDY_SQL_X_BINARY:
        return binary(c, x, o, t);
    case EDDY_SQL_X_NOT: {
        eddy_sql_type_t ta;
        eddy_sql_buf_printf(o, "(not ");
        if (tr(c, x->args[0], o, &ta) < 0 || need_bool(c, x->args[0], ta) < 0)
            return -1;
        eddy_sql_buf_printf(o, ")");
        *t = EDDY_SQL_T_BOOLEAN;
        return 0;
    }
    case EDDY_SQL_X_NEG: {
        eddy_sql_buf_printf(o, "(-");
        if (tr(c, x->args[0], o, t) < 0)
            return -1;
        eddy_sql_buf_printf(o, ")");
        if (!eddy_sql_type_numeric(*t) && *t != EDDY_SQL_T_ANY && *t != EDDY_SQL_T_INTERVAL)
            return fail(c, x->pos, "type mismatch: -%s", eddy_sql_type_name(*t));
        return 0;
    }
    case EDDY_SQL_X_IS_NULL:
    case EDDY_SQL_X_BETWEEN:
    case EDDY_SQL_X_IN:
    case EDDY_SQL_X_LIKE:
        return predicate(c, x, o, t);
    case EDDY_SQL_X_CASE:
        return case_expr(c, x, o, t);
    case EDDY_SQL_X_CAST:
        return cast(c, x, o, t);
    case EDDY_SQL_X_CALL:
        return call(c, x, o, t);
    case EDDY_SQL_X_STAR:
        return fail(c, x->pos, "* is allowed only as a SELECT item or in COUNT(*)");
    case EDDY_SQL_X_OVER:
        return fail(c, x->pos, "OVER windows other than a top-1 by RANK() (docs/sql.md) are not "
                    "supported");
    case EDDY_SQL_X_EXISTS:
        return fail(c, x->pos, "EXISTS is not supported");
    }
    return fail(c, x->pos, "unsupported expression");
}

int eddy_sql_translate(const eddy_sql_xctx_t *c, const eddy_sql_expr_t *x, eddy_sql_buf_t *out,
                       eddy_sql_type_t *type)
{
    eddy_sql_type_t t = EDDY_SQL_T_ANY;
    if (tr(c, x, out, &t) < 0)
        return -1;
    if (out->oom)
        return eddy_err_set(c->err, "out of memory");
    *type = t;
    return 0;
}
