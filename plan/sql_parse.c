/* sql_parse.c - recursive descent over the tokens of plan/sql_lex.h into
 * the tree of plan/sql_ast.h (see sql_parse.h).
 *
 * Every function returns 0 or -1 with the error set at the token it
 * failed on; a node is linked into its parent as soon as it exists, so on
 * an error freeing the root frees everything. Nesting is capped (MAX_DEPTH)
 * so a hostile script cannot exhaust the stack. */
#include "plan/sql_parse.h"

#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DEPTH 200
#define MAX_LIST 4096

typedef struct parser {
    const eddy_sql_src_t *src;
    eddy_sql_toks_t t;
    uint32_t i;
    uint32_t depth;
    eddy_err_t *err;
} parser_t;

/* Words that end an expression or a FROM item where an alias could be. */
static const char *const reserved[] = {
    "FROM", "WHERE", "GROUP", "HAVING", "UNION", "JOIN", "INNER", "LEFT", "RIGHT", "FULL",
    "CROSS", "ON", "AS", "ORDER", "LIMIT", "SELECT", "AND", "OR", "NOT", "IS", "IN", "LIKE",
    "BETWEEN", "WHEN", "THEN", "ELSE", "END", "CASE", "OVER", "WINDOW", "OUTER", "LATERAL",
    "NATURAL", "USING", "EXCEPT", "INTERSECT", "WITH", NULL};

static const eddy_sql_tok_t *tok(const parser_t *p)
{
    return &p->t.v[p->i];
}

static const eddy_sql_tok_t *peek(const parser_t *p, uint32_t k)
{
    return p->i + k < p->t.n ? &p->t.v[p->i + k] : &p->t.v[p->t.n - 1];
}

static bool is(const parser_t *p, const char *kw)
{
    return eddy_sql_tok_is(tok(p), kw);
}

static bool accept(parser_t *p, const char *kw)
{
    if (!is(p, kw))
        return false;
    if (p->i + 1 < p->t.n)
        p->i++;
    return true;
}

static int fail_here(parser_t *p, const char *expected)
{
    const eddy_sql_tok_t *t = tok(p);
    if (t->kind == EDDY_SQL_TOK_END)
        return eddy_sql_fail(p->src, t->pos, p->err, "expected %s, found the end of the input",
                             expected);
    return eddy_sql_fail(p->src, t->pos, p->err, "expected %s, found %s%.60s%s", expected,
                         t->kind == EDDY_SQL_TOK_STRING ? "'" : "'", t->text, "'");
}

static int unsupported(parser_t *p, uint32_t pos, const char *what)
{
    /* "ORDER BY ... is", "LIMIT, FETCH and OFFSET are", "named arguments (...) are" */
    bool plural = what[strlen(what) - 1] == 's' || strstr(what, " and ") || strstr(what, "s (");
    return eddy_sql_fail(p->src, pos, p->err, "%s %s not supported", what, plural ? "are" : "is");
}

static int expect(parser_t *p, const char *kw)
{
    if (accept(p, kw))
        return 0;
    char what[64];
    snprintf(what, sizeof what, "'%s'", kw);
    return fail_here(p, what);
}

static bool is_reserved(const eddy_sql_tok_t *t)
{
    for (const char *const *r = reserved; *r; r++)
        if (eddy_sql_tok_is(t, *r))
            return true;
    return false;
}

static int oom(parser_t *p)
{
    return eddy_err_set(p->err, "out of memory");
}

/* A name (not a reserved word unless quoted) into *out. */
static int name(parser_t *p, const char *what, char **out, uint32_t *pos)
{
    const eddy_sql_tok_t *t = tok(p);
    if (t->kind != EDDY_SQL_TOK_IDENT || (!t->quoted && is_reserved(t)))
        return fail_here(p, what);
    if (pos)
        *pos = t->pos;
    if (!(*out = strdup(t->text)))
        return oom(p);
    p->i++;
    return 0;
}

/* Appends x to a growing array *v of *n items. */
static int append(parser_t *p, void ***v, uint32_t *n, void *x)
{
    if (*n >= MAX_LIST)
        return eddy_sql_fail(p->src, tok(p)->pos, p->err, "more than %u items in a list", MAX_LIST);
    void **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return oom(p);
    nv[(*n)++] = x;
    *v = nv;
    return 0;
}

static eddy_sql_expr_t *node(parser_t *p, eddy_sql_expr_kind_t kind, uint32_t pos)
{
    eddy_sql_expr_t *x = calloc(1, sizeof *x);
    if (!x) {
        oom(p);
        return NULL;
    }
    x->kind = kind;
    x->pos = pos;
    return x;
}

static int add_arg(parser_t *p, eddy_sql_expr_t *x, eddy_sql_expr_t *arg)
{
    if (append(p, (void ***)&x->args, &x->n_args, arg) < 0) {
        eddy_sql_expr_free(arg);
        return -1;
    }
    return 0;
}

static int parse_expr(parser_t *p, eddy_sql_expr_t **out);
static int parse_select(parser_t *p, eddy_sql_select_t **out);

/* Parses a child of x with fn and links it; a half-built child is freed. */
static int child(parser_t *p, eddy_sql_expr_t *x, int (*fn)(parser_t *, eddy_sql_expr_t **))
{
    eddy_sql_expr_t *a = NULL;
    if (fn(p, &a) < 0) {
        eddy_sql_expr_free(a);
        return -1;
    }
    return add_arg(p, x, a);
}

static int enter(parser_t *p)
{
    if (++p->depth > MAX_DEPTH)
        return eddy_sql_fail(p->src, tok(p)->pos, p->err, "nested too deeply (more than %u levels)",
                             MAX_DEPTH);
    return 0;
}

/* ---- types and intervals ---------------------------------------------- */

static int uint_arg(parser_t *p, uint32_t *out)
{
    const eddy_sql_tok_t *t = tok(p);
    if (t->kind != EDDY_SQL_TOK_INT || strlen(t->text) > 9)
        return fail_here(p, "a number");
    *out = (uint32_t)strtoul(t->text, NULL, 10);
    p->i++;
    return 0;
}

static int parse_type(parser_t *p, eddy_sql_type_t *type, uint32_t *prec, uint32_t *scale)
{
    const eddy_sql_tok_t *t = tok(p);
    uint32_t pos = t->pos;
    *prec = *scale = 0;
    static const struct { const char *name; eddy_sql_type_t type; } names[] = {
        {"BOOLEAN", EDDY_SQL_T_BOOLEAN}, {"INT", EDDY_SQL_T_INT}, {"INTEGER", EDDY_SQL_T_INT},
        {"TINYINT", EDDY_SQL_T_INT}, {"SMALLINT", EDDY_SQL_T_INT}, {"BIGINT", EDDY_SQL_T_BIGINT},
        {"DOUBLE", EDDY_SQL_T_DOUBLE}, {"FLOAT", EDDY_SQL_T_DOUBLE}, {"DECIMAL", EDDY_SQL_T_DECIMAL},
        {"NUMERIC", EDDY_SQL_T_DECIMAL}, {"DEC", EDDY_SQL_T_DECIMAL}, {"VARCHAR", EDDY_SQL_T_STRING},
        {"STRING", EDDY_SQL_T_STRING}, {"CHAR", EDDY_SQL_T_STRING}, {"TIMESTAMP", EDDY_SQL_T_TIMESTAMP},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        if (!eddy_sql_tok_is(t, names[k].name))
            continue;
        p->i++;
        *type = names[k].type;
        if (*type == EDDY_SQL_T_DOUBLE)
            accept(p, "PRECISION");
        if (*type == EDDY_SQL_T_TIMESTAMP)
            *prec = 6; /* SQL's default precision */
        if (accept(p, "(")) {
            if (uint_arg(p, prec) < 0)
                return -1;
            if (*type == EDDY_SQL_T_DECIMAL && accept(p, ",") && uint_arg(p, scale) < 0)
                return -1;
            if (expect(p, ")") < 0)
                return -1;
        }
        if (*type == EDDY_SQL_T_TIMESTAMP && (is(p, "WITH") || is(p, "WITHOUT")))
            return unsupported(p, tok(p)->pos, "TIMESTAMP WITH/WITHOUT TIME ZONE");
        if (*type == EDDY_SQL_T_TIMESTAMP && *prec != 3)
            return eddy_sql_fail(p->src, pos, p->err, "TIMESTAMP(%u) is not supported: "
                                 "eddy's timestamps are TIMESTAMP(3) (milliseconds)", *prec);
        if (*type == EDDY_SQL_T_DECIMAL && *prec > 38)
            return eddy_sql_fail(p->src, pos, p->err, "DECIMAL precision %u is above 38", *prec);
        return 0;
    }
    if (t->kind == EDDY_SQL_TOK_IDENT && !t->quoted) {
        static const char *const other[] = {"TIMESTAMP_LTZ", "DATE", "TIME", "ARRAY", "MAP",
                                            "ROW", "MULTISET", "BYTES", "BINARY", "VARBINARY",
                                            "REAL", NULL};
        for (const char *const *o = other; *o; o++)
            if (eddy_sql_tok_is(t, *o)) {
                char what[64];
                snprintf(what, sizeof what, "type %s", *o);
                return unsupported(p, pos, what);
            }
    }
    return fail_here(p, "a type (BOOLEAN, INT, BIGINT, DOUBLE, DECIMAL(p, s), STRING, "
                     "VARCHAR, TIMESTAMP(3))");
}

/* INTERVAL 'n' UNIT (the INTERVAL keyword read) into *ms. */
static int interval(parser_t *p, uint32_t pos, int64_t *ms)
{
    const eddy_sql_tok_t *t = tok(p);
    if (t->kind != EDDY_SQL_TOK_STRING && t->kind != EDDY_SQL_TOK_INT)
        return fail_here(p, "the interval's value, as in INTERVAL '10' SECOND");
    char *end = NULL;
    errno = 0;
    double v = strtod(t->text, &end);
    if (end == t->text || *end || errno || !isfinite(v) || v < 0 || v > 1e12)
        return eddy_sql_fail(p->src, t->pos, p->err, "'%.40s' is not a number of units "
                             "(eddy's intervals are like INTERVAL '10' SECOND)", t->text);
    p->i++;
    static const struct { const char *unit; double ms; } units[] = {
        {"MILLISECOND", 1}, {"MILLISECONDS", 1}, {"SECOND", 1000}, {"SECONDS", 1000},
        {"MINUTE", 60000}, {"MINUTES", 60000}, {"HOUR", 3600000}, {"HOURS", 3600000},
        {"DAY", 86400000}, {"DAYS", 86400000},
    };
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
        if (accept(p, units[k].unit)) {
            uint32_t precision;
            /* SECOND(3): the precision does not change the value */
            if (accept(p, "(") && (uint_arg(p, &precision) < 0 || expect(p, ")") < 0))
                return -1;
            if (is(p, "TO"))
                return unsupported(p, pos, "INTERVAL ... TO ... ranges");
            *ms = (int64_t)llround(v * units[k].ms);
            return 0;
        }
    if (is(p, "MONTH") || is(p, "YEAR") || is(p, "MONTHS") || is(p, "YEARS"))
        return unsupported(p, tok(p)->pos, "year-month intervals");
    return fail_here(p, "an interval unit (MILLISECOND, SECOND, MINUTE, HOUR, DAY)");
}

/* ---- expressions -------------------------------------------------------- */

static int parse_list(parser_t *p, eddy_sql_expr_t ***v, uint32_t *n)
{
    do {
        eddy_sql_expr_t *x = NULL;
        if (parse_expr(p, &x) < 0) {
            eddy_sql_expr_free(x);
            return -1;
        }
        if (append(p, (void ***)v, n, x) < 0) {
            eddy_sql_expr_free(x);
            return -1;
        }
    } while (accept(p, ","));
    return 0;
}

static int parse_over(parser_t *p, eddy_sql_expr_t *x)
{
    x->kind = EDDY_SQL_X_OVER;
    if (expect(p, "(") < 0)
        return -1;
    if (accept(p, "PARTITION") && (expect(p, "BY") < 0 ||
                                   parse_list(p, &x->partition, &x->n_partition) < 0))
        return -1;
    if (accept(p, "ORDER")) {
        if (expect(p, "BY") < 0)
            return -1;
        do {
            eddy_sql_expr_t *o = NULL;
            if (parse_expr(p, &o) < 0) {
                eddy_sql_expr_free(o);
                return -1;
            }
            if (append(p, (void ***)&x->order, &x->n_order, o) < 0) {
                eddy_sql_expr_free(o);
                return -1;
            }
            bool *d = realloc(x->order_desc, x->n_order * sizeof *d);
            if (!d)
                return oom(p);
            x->order_desc = d;
            d[x->n_order - 1] = accept(p, "DESC");
            if (!d[x->n_order - 1])
                accept(p, "ASC");
        } while (accept(p, ","));
    }
    if (is(p, "ROWS") || is(p, "RANGE"))
        return unsupported(p, tok(p)->pos, "OVER window frames (ROWS/RANGE)");
    return expect(p, ")");
}

/* name( ... ) with the name read. */
static int parse_call(parser_t *p, eddy_sql_expr_t *x)
{
    x->kind = EDDY_SQL_X_CALL;
    p->i++; /* ( */
    if (accept(p, "*")) {
        x->star = true;
    } else if (!is(p, ")")) {
        if (accept(p, "DISTINCT"))
            x->distinct = true;
        else
            accept(p, "ALL");
        if (parse_list(p, &x->args, &x->n_args) < 0)
            return -1;
    }
    if (expect(p, ")") < 0)
        return -1;
    if (is(p, "FILTER"))
        return unsupported(p, tok(p)->pos, "aggregate FILTER clauses");
    if (accept(p, "OVER"))
        return parse_over(p, x);
    return 0;
}

static int parse_case(parser_t *p, eddy_sql_expr_t *x)
{
    if (!is(p, "WHEN") && parse_expr(p, &x->operand) < 0)
        return -1;
    if (!is(p, "WHEN"))
        return fail_here(p, "WHEN");
    while (accept(p, "WHEN")) {
        if (child(p, x, parse_expr) < 0 || expect(p, "THEN") < 0 ||
            child(p, x, parse_expr) < 0)
            return -1;
    }
    if (accept(p, "ELSE")) {
        if (child(p, x, parse_expr) < 0)
            return -1;
        x->has_else = true;
    }
    return expect(p, "END");
}

static int parse_primary(parser_t *p, eddy_sql_expr_t **out)
{
    const eddy_sql_tok_t *t = tok(p);
    uint32_t pos = t->pos;
    eddy_sql_expr_t *x = NULL;
    if (t->kind == EDDY_SQL_TOK_INT || t->kind == EDDY_SQL_TOK_FLOAT) {
        if (!(*out = x = node(p, t->kind == EDDY_SQL_TOK_INT ? EDDY_SQL_X_INT : EDDY_SQL_X_FLOAT, pos)))
            return -1;
        if (t->kind == EDDY_SQL_TOK_INT) {
            errno = 0;
            x->i = strtoll(t->text, NULL, 10);
            if (errno)
                return eddy_sql_fail(p->src, pos, p->err, "integer out of range (64 bits)");
        }
        if (!(x->text = strdup(t->text)))
            return oom(p);
        p->i++;
        return 0;
    }
    if (t->kind == EDDY_SQL_TOK_STRING) {
        if (!(*out = x = node(p, EDDY_SQL_X_STRING, pos)) || !(x->text = strdup(t->text)))
            return x ? oom(p) : -1;
        p->i++;
        return 0;
    }
    if (accept(p, "(")) {
        if (is(p, "SELECT"))
            return unsupported(p, tok(p)->pos, "scalar subqueries");
        if (parse_expr(p, out) < 0)
            return -1;
        return expect(p, ")");
    }
    if (t->kind != EDDY_SQL_TOK_IDENT)
        return fail_here(p, "an expression");
    if (!t->quoted) {
        if (accept(p, "NULL"))
            return (*out = node(p, EDDY_SQL_X_NULL, pos)) ? 0 : -1;
        if (is(p, "TRUE") || is(p, "FALSE")) {
            if (!(*out = x = node(p, EDDY_SQL_X_BOOL, pos)))
                return -1;
            x->i = is(p, "TRUE");
            p->i++;
            return 0;
        }
        if (accept(p, "INTERVAL")) {
            if (!(*out = x = node(p, EDDY_SQL_X_INTERVAL, pos)))
                return -1;
            return interval(p, pos, &x->i);
        }
        if (accept(p, "CASE")) {
            if (!(*out = x = node(p, EDDY_SQL_X_CASE, pos)))
                return -1;
            return parse_case(p, x);
        }
        if (accept(p, "CAST") || accept(p, "TRY_CAST")) {
            if (!(*out = x = node(p, EDDY_SQL_X_CAST, pos)))
                return -1;
            uint32_t prec, scale;
            if (expect(p, "(") < 0 || child(p, x, parse_expr) < 0 ||
                expect(p, "AS") < 0 || parse_type(p, &x->cast_type, &prec, &scale) < 0)
                return -1;
            return expect(p, ")");
        }
        if (accept(p, "EXISTS")) {
            if (!(*out = x = node(p, EDDY_SQL_X_EXISTS, pos)))
                return -1;
            if (expect(p, "(") < 0 || parse_select(p, &x->sub) < 0)
                return -1;
            return expect(p, ")");
        }
        if (is(p, "TIMESTAMP") || is(p, "DATE") || is(p, "TIME")) {
            if (peek(p, 1)->kind == EDDY_SQL_TOK_STRING)
                return unsupported(p, pos, "TIMESTAMP/DATE/TIME literals");
        }
        if (is_reserved(t))
            return fail_here(p, "an expression");
    }
    if (!(*out = x = node(p, EDDY_SQL_X_COLUMN, pos)))
        return -1;
    if (name(p, "a name", &x->name, NULL) < 0)
        return -1;
    if (is(p, "("))
        return parse_call(p, x);
    if (accept(p, ".")) {
        x->qual = x->name;
        x->name = NULL;
        if (accept(p, "*")) {
            x->kind = EDDY_SQL_X_STAR;
            return 0;
        }
        if (name(p, "a column name", &x->name, NULL) < 0)
            return -1;
        if (is(p, "."))
            return unsupported(p, tok(p)->pos, "names with more than two parts");
    }
    return 0;
}

static int parse_unary(parser_t *p, eddy_sql_expr_t **out)
{
    uint32_t pos = tok(p)->pos;
    if (accept(p, "-")) {
        eddy_sql_expr_t *x = node(p, EDDY_SQL_X_NEG, pos);
        *out = x;
        if (!x || enter(p) < 0 || child(p, x, parse_unary) < 0)
            return -1;
        p->depth--;
        return 0;
    }
    if (accept(p, "+"))
        return enter(p) < 0 ? -1 : (parse_unary(p, out) < 0 ? -1 : (p->depth--, 0));
    return parse_primary(p, out);
}

static eddy_sql_expr_t *binary(parser_t *p, eddy_sql_op_t op, uint32_t pos, eddy_sql_expr_t *l)
{
    /* errors about the whole expression point at its start */
    eddy_sql_expr_t *x = node(p, EDDY_SQL_X_BINARY, l ? l->pos : pos);
    if (!x || add_arg(p, x, l) < 0) {
        if (!x)
            eddy_sql_expr_free(l);
        eddy_sql_expr_free(x);
        return NULL;
    }
    x->op = op;
    return x;
}

static int parse_product(parser_t *p, eddy_sql_expr_t **out)
{
    if (parse_unary(p, out) < 0)
        return -1;
    for (;;) {
        eddy_sql_op_t op;
        uint32_t pos = tok(p)->pos;
        if (accept(p, "*"))
            op = EDDY_SQL_OP_MUL;
        else if (accept(p, "/"))
            op = EDDY_SQL_OP_DIV;
        else if (accept(p, "%"))
            op = EDDY_SQL_OP_MOD;
        else
            return 0;
        if (!(*out = binary(p, op, pos, *out)) || child(p, *out, parse_unary) < 0)
            return -1;
    }
}

static int parse_sum(parser_t *p, eddy_sql_expr_t **out)
{
    if (parse_product(p, out) < 0)
        return -1;
    for (;;) {
        eddy_sql_op_t op;
        uint32_t pos = tok(p)->pos;
        if (accept(p, "+"))
            op = EDDY_SQL_OP_ADD;
        else if (accept(p, "-"))
            op = EDDY_SQL_OP_SUB;
        else if (accept(p, "||"))
            op = EDDY_SQL_OP_CONCAT;
        else
            return 0;
        if (!(*out = binary(p, op, pos, *out)) || child(p, *out, parse_product) < 0)
            return -1;
    }
}

/* Comparisons and the SQL predicates (IS NULL, BETWEEN, IN, LIKE). */
static int parse_predicate(parser_t *p, eddy_sql_expr_t **out)
{
    if (parse_sum(p, out) < 0)
        return -1;
    static const struct { const char *tok; eddy_sql_op_t op; } cmps[] = {
        {"=", EDDY_SQL_OP_EQ}, {"<>", EDDY_SQL_OP_NE}, {"!=", EDDY_SQL_OP_NE},
        {"<=", EDDY_SQL_OP_LE}, {">=", EDDY_SQL_OP_GE}, {"<", EDDY_SQL_OP_LT}, {">", EDDY_SQL_OP_GT},
    };
    uint32_t pos = tok(p)->pos;
    for (size_t k = 0; k < sizeof cmps / sizeof cmps[0]; k++)
        if (accept(p, cmps[k].tok)) {
            if (is(p, "ANY") || is(p, "ALL") || is(p, "SOME"))
                return unsupported(p, tok(p)->pos, "quantified comparisons (ANY, ALL, SOME)");
            if (!(*out = binary(p, cmps[k].op, pos, *out)) || child(p, *out, parse_sum) < 0)
                return -1;
            return 0;
        }
    if (accept(p, "IS")) {
        eddy_sql_expr_t *x = node(p, EDDY_SQL_X_IS_NULL, pos);
        if (!x || add_arg(p, x, *out) < 0) {
            if (!x)
                eddy_sql_expr_free(*out);
            eddy_sql_expr_free(x);
            *out = NULL;
            return -1;
        }
        *out = x;
        x->negated = accept(p, "NOT");
        if (is(p, "TRUE") || is(p, "FALSE") || is(p, "DISTINCT"))
            return unsupported(p, tok(p)->pos, "IS TRUE/FALSE/DISTINCT FROM");
        return expect(p, "NULL");
    }
    bool negated = false;
    if (is(p, "NOT") && (eddy_sql_tok_is(peek(p, 1), "BETWEEN") || eddy_sql_tok_is(peek(p, 1), "IN") ||
                         eddy_sql_tok_is(peek(p, 1), "LIKE"))) {
        negated = true;
        p->i++;
    }
    eddy_sql_expr_kind_t kind;
    if (accept(p, "BETWEEN"))
        kind = EDDY_SQL_X_BETWEEN;
    else if (accept(p, "IN"))
        kind = EDDY_SQL_X_IN;
    else if (accept(p, "LIKE"))
        kind = EDDY_SQL_X_LIKE;
    else
        return 0;
    eddy_sql_expr_t *x = node(p, kind, pos);
    if (!x || add_arg(p, x, *out) < 0) {
        if (!x)
            eddy_sql_expr_free(*out);
        eddy_sql_expr_free(x);
        *out = NULL;
        return -1;
    }
    *out = x;
    x->negated = negated;
    if (kind == EDDY_SQL_X_BETWEEN) {
        if (accept(p, "SYMMETRIC") || accept(p, "ASYMMETRIC"))
            return unsupported(p, tok(p)->pos, "BETWEEN SYMMETRIC");
        return child(p, x, parse_sum) < 0 || expect(p, "AND") < 0 ||
               child(p, x, parse_sum) < 0 ? -1 : 0;
    }
    if (kind == EDDY_SQL_X_LIKE) {
        if (child(p, x, parse_sum) < 0)
            return -1;
        if (is(p, "ESCAPE"))
            return unsupported(p, tok(p)->pos, "LIKE ... ESCAPE");
        return 0;
    }
    if (expect(p, "(") < 0)
        return -1;
    if (is(p, "SELECT")) {
        if (parse_select(p, &x->sub) < 0)
            return -1;
    } else {
        do {
            if (child(p, x, parse_expr) < 0)
                return -1;
        } while (accept(p, ","));
    }
    return expect(p, ")");
}

static int parse_not(parser_t *p, eddy_sql_expr_t **out)
{
    uint32_t pos = tok(p)->pos;
    if (accept(p, "NOT")) {
        eddy_sql_expr_t *x = node(p, EDDY_SQL_X_NOT, pos);
        *out = x;
        if (!x || enter(p) < 0 || child(p, x, parse_not) < 0)
            return -1;
        p->depth--;
        return 0;
    }
    return parse_predicate(p, out);
}

static int parse_and(parser_t *p, eddy_sql_expr_t **out)
{
    if (parse_not(p, out) < 0)
        return -1;
    for (uint32_t pos = tok(p)->pos; accept(p, "AND"); pos = tok(p)->pos) {
        if (!(*out = binary(p, EDDY_SQL_OP_AND, pos, *out)) || child(p, *out, parse_not) < 0)
            return -1;
    }
    return 0;
}

static int parse_expr(parser_t *p, eddy_sql_expr_t **out)
{
    if (enter(p) < 0)
        return -1;
    if (parse_and(p, out) < 0)
        return -1;
    for (uint32_t pos = tok(p)->pos; accept(p, "OR"); pos = tok(p)->pos) {
        if (!(*out = binary(p, EDDY_SQL_OP_OR, pos, *out)) || child(p, *out, parse_and) < 0)
            return -1;
    }
    p->depth--;
    return 0;
}

/* ---- FROM ------------------------------------------------------------- */

static int alias(parser_t *p, char **out)
{
    if (accept(p, "AS"))
        return name(p, "an alias", out, NULL);
    const eddy_sql_tok_t *t = tok(p);
    if (t->kind == EDDY_SQL_TOK_IDENT && (t->quoted || !is_reserved(t)))
        return name(p, "an alias", out, NULL);
    return 0;
}

/* TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL ...)), TABLE( read. */
static int parse_tvf(parser_t *p, eddy_sql_from_t *f)
{
    f->kind = EDDY_SQL_FROM_TVF;
    if (name(p, "a window function (TUMBLE, HOP, CUMULATE, SESSION)", &f->name, &f->pos) < 0)
        return -1;
    if (expect(p, "(") < 0)
        return -1;
    if (eddy_sql_tok_is(peek(p, 1), "=>"))
        return unsupported(p, tok(p)->pos, "named arguments (NAME => value)");
    if (expect(p, "TABLE") < 0 || name(p, "a table name", &f->input, &f->input_pos) < 0)
        return -1;
    if (accept(p, "PARTITION") &&
        (expect(p, "BY") < 0 || parse_list(p, &f->partition, &f->n_partition) < 0))
        return -1;
    if (expect(p, ",") < 0 || expect(p, "DESCRIPTOR") < 0 || expect(p, "(") < 0 ||
        name(p, "a column name", &f->descriptor, &f->descriptor_pos) < 0 || expect(p, ")") < 0)
        return -1;
    while (accept(p, ",")) {
        if (f->n_intervals == EDDY_SQL_TVF_MAX_INTERVALS)
            return fail_here(p, "')'");
        if (parse_expr(p, &f->intervals[f->n_intervals++]) < 0)
            return -1;
    }
    return expect(p, ")") < 0 || expect(p, ")") < 0 ? -1 : alias(p, &f->alias);
}

static int parse_from_item(parser_t *p, eddy_sql_from_t **out)
{
    eddy_sql_from_t *f = calloc(1, sizeof *f);
    if (!(*out = f))
        return oom(p);
    f->pos = tok(p)->pos;
    if (is(p, "LATERAL") || is(p, "UNNEST"))
        return unsupported(p, f->pos, "LATERAL and UNNEST");
    if (is(p, "TABLE") && eddy_sql_tok_is(peek(p, 1), "(")) {
        p->i += 2;
        return parse_tvf(p, f);
    }
    if (accept(p, "(")) {
        f->kind = EDDY_SQL_FROM_SUBQUERY;
        if (enter(p) < 0 || parse_select(p, &f->sub) < 0 || expect(p, ")") < 0)
            return -1;
        p->depth--;
        return alias(p, &f->alias);
    }
    f->kind = EDDY_SQL_FROM_TABLE;
    if (name(p, "a table name", &f->name, NULL) < 0)
        return -1;
    if (is(p, "."))
        return unsupported(p, tok(p)->pos, "catalog- or database-qualified table names");
    if (is(p, "FOR"))
        return unsupported(p, tok(p)->pos, "FOR SYSTEM_TIME AS OF (temporal joins)");
    if (is(p, "("))
        return unsupported(p, f->pos, "table functions outside TABLE(...)");
    return alias(p, &f->alias);
}

static int parse_from(parser_t *p, eddy_sql_from_t **out)
{
    if (parse_from_item(p, out) < 0)
        return -1;
    for (;;) {
        uint32_t pos = tok(p)->pos;
        eddy_sql_join_type_t type;
        if (accept(p, ",")) {
            type = EDDY_SQL_JOIN_CROSS;
        } else if (accept(p, "JOIN")) {
            type = EDDY_SQL_JOIN_INNER;
        } else if (accept(p, "INNER")) {
            if (expect(p, "JOIN") < 0)
                return -1;
            type = EDDY_SQL_JOIN_INNER;
        } else if (is(p, "LEFT") || is(p, "RIGHT") || is(p, "FULL")) {
            type = is(p, "LEFT") ? EDDY_SQL_JOIN_LEFT : is(p, "RIGHT") ? EDDY_SQL_JOIN_RIGHT
                                                                        : EDDY_SQL_JOIN_FULL;
            p->i++;
            accept(p, "OUTER");
            if (expect(p, "JOIN") < 0)
                return -1;
        } else if (accept(p, "CROSS")) {
            if (expect(p, "JOIN") < 0)
                return -1;
            type = EDDY_SQL_JOIN_CROSS;
        } else if (is(p, "NATURAL")) {
            return unsupported(p, pos, "NATURAL joins");
        } else {
            return 0;
        }
        eddy_sql_from_t *j = calloc(1, sizeof *j);
        if (!j)
            return oom(p);
        j->kind = EDDY_SQL_FROM_JOIN;
        j->pos = pos;
        j->join_type = type;
        j->left = *out;
        *out = j;
        if (parse_from_item(p, &j->right) < 0)
            return -1;
        if (type != EDDY_SQL_JOIN_CROSS) {
            if (is(p, "USING"))
                return unsupported(p, tok(p)->pos, "JOIN ... USING");
            if (expect(p, "ON") < 0 || parse_expr(p, &j->on) < 0)
                return -1;
        }
    }
}

/* ---- SELECT ---------------------------------------------------------- */

static int parse_one_select(parser_t *p, eddy_sql_select_t *s)
{
    s->pos = tok(p)->pos;
    if (is(p, "WITH"))
        return unsupported(p, s->pos, "WITH (common table expressions; use CREATE VIEW)");
    if (is(p, "VALUES"))
        return unsupported(p, s->pos, "VALUES");
    if (expect(p, "SELECT") < 0)
        return -1;
    s->distinct = accept(p, "DISTINCT");
    if (!s->distinct)
        accept(p, "ALL");
    do {
        eddy_sql_expr_t *x = NULL;
        char *a = NULL;
        uint32_t pos = tok(p)->pos;
        if (accept(p, "*")) {
            if (!(x = node(p, EDDY_SQL_X_STAR, pos)))
                return -1;
        } else if (parse_expr(p, &x) < 0) {
            eddy_sql_expr_free(x);
            return -1;
        }
        if (append(p, (void ***)&s->items, &s->n_items, x) < 0) {
            eddy_sql_expr_free(x);
            return -1;
        }
        char **na = realloc(s->aliases, s->n_items * sizeof *na);
        if (!na)
            return oom(p);
        s->aliases = na;
        na[s->n_items - 1] = NULL;
        if (alias(p, &a) < 0)
            return -1;
        na[s->n_items - 1] = a;
    } while (accept(p, ","));
    if (expect(p, "FROM") < 0 || parse_from(p, &s->from) < 0)
        return -1;
    if (accept(p, "WHERE") && parse_expr(p, &s->where) < 0)
        return -1;
    if (accept(p, "GROUP")) {
        if (expect(p, "BY") < 0)
            return -1;
        if (is(p, "GROUPING") || is(p, "ROLLUP") || is(p, "CUBE"))
            return unsupported(p, tok(p)->pos, "GROUPING SETS, ROLLUP and CUBE");
        if (parse_list(p, &s->group_by, &s->n_group_by) < 0)
            return -1;
    }
    if (accept(p, "HAVING") && parse_expr(p, &s->having) < 0)
        return -1;
    if (is(p, "WINDOW") || is(p, "QUALIFY"))
        return unsupported(p, tok(p)->pos, "WINDOW and QUALIFY clauses");
    return 0;
}

static int parse_select(parser_t *p, eddy_sql_select_t **out)
{
    if (enter(p) < 0)
        return -1;
    eddy_sql_select_t **at = out;
    for (;;) {
        if (!(*at = calloc(1, sizeof **at)))
            return oom(p);
        if (parse_one_select(p, *at) < 0)
            return -1;
        uint32_t pos = tok(p)->pos;
        if (is(p, "ORDER"))
            return unsupported(p, pos, "ORDER BY (other than in ROW_NUMBER() OVER)");
        if (is(p, "LIMIT") || is(p, "FETCH") || is(p, "OFFSET"))
            return unsupported(p, pos, "LIMIT, FETCH and OFFSET");
        if (is(p, "EXCEPT") || is(p, "INTERSECT") || is(p, "MINUS"))
            return unsupported(p, pos, "EXCEPT and INTERSECT");
        if (!accept(p, "UNION"))
            break;
        if (!accept(p, "ALL"))
            return unsupported(p, pos, "UNION without ALL (use UNION ALL)");
        (*at)->union_pos = pos;
        at = &(*at)->union_all;
    }
    p->depth--;
    return 0;
}

/* ---- statements ------------------------------------------------------ */

static int parse_options(parser_t *p, eddy_sql_stmt_t *st)
{
    if (expect(p, "(") < 0)
        return -1;
    do {
        const eddy_sql_tok_t *k = tok(p);
        if (k->kind != EDDY_SQL_TOK_STRING)
            return fail_here(p, "an option 'key'");
        eddy_sql_option_t *v = realloc(st->options, (st->n_options + 1) * sizeof *v);
        if (!v)
            return oom(p);
        st->options = v;
        eddy_sql_option_t *o = &v[st->n_options++];
        *o = (eddy_sql_option_t){strdup(k->text), NULL, k->pos};
        p->i++;
        if (!o->key || expect(p, "=") < 0)
            return o->key ? -1 : oom(p);
        const eddy_sql_tok_t *val = tok(p);
        if (val->kind != EDDY_SQL_TOK_STRING)
            return fail_here(p, "an option 'value' (a string)");
        if (!(o->value = strdup(val->text)))
            return oom(p);
        p->i++;
    } while (accept(p, ","));
    return expect(p, ")");
}

static int parse_table_body(parser_t *p, eddy_sql_stmt_t *st)
{
    if (expect(p, "(") < 0)
        return -1;
    do {
        uint32_t pos = tok(p)->pos;
        if (accept(p, "WATERMARK")) {
            if (st->watermark)
                return eddy_sql_fail(p->src, pos, p->err, "a second WATERMARK");
            if (expect(p, "FOR") < 0 || name(p, "a column name", &st->watermark, &st->watermark_pos) < 0 ||
                expect(p, "AS") < 0)
                return -1;
            uint32_t at = tok(p)->pos;
            char *col = NULL;
            if (name(p, "the column, as in dateTime - INTERVAL '4' SECOND", &col, NULL) < 0)
                return -1;
            bool same = !strcmp(col, st->watermark);
            free(col);
            if (!same)
                return unsupported(p, at, "watermarks other than COLUMN - INTERVAL on the WATERMARK FOR column");
            if (accept(p, "-")) {
                if (expect(p, "INTERVAL") < 0 || interval(p, at, &st->watermark_delay_ms) < 0)
                    return -1;
            }
            if (!is(p, ",") && !is(p, ")"))
                return unsupported(p, tok(p)->pos, "watermarks other than COLUMN - INTERVAL on the WATERMARK FOR column");
            continue;
        }
        if (accept(p, "PRIMARY")) {
            if (st->primary_key)
                return eddy_sql_fail(p->src, pos, p->err, "a second PRIMARY KEY");
            if (expect(p, "KEY") < 0 || expect(p, "(") < 0)
                return -1;
            do {
                char *k = NULL;
                if (name(p, "a column name", &k, NULL) < 0)
                    return -1;
                if (append(p, (void ***)&st->primary_key, &st->n_primary_key, k) < 0) {
                    free(k);
                    return -1;
                }
            } while (accept(p, ","));
            if (expect(p, ")") < 0)
                return -1;
            if (!(accept(p, "NOT") && accept(p, "ENFORCED")))
                return fail_here(p, "NOT ENFORCED (eddy, like Flink, does not check keys)");
            continue;
        }
        if (is(p, "CONSTRAINT"))
            return unsupported(p, pos, "named constraints");
        eddy_sql_column_t *v = realloc(st->columns, (st->n_columns + 1) * sizeof *v);
        if (!v)
            return oom(p);
        st->columns = v;
        eddy_sql_column_t *c = &v[st->n_columns++];
        *c = (eddy_sql_column_t){0};
        if (name(p, "a column name, WATERMARK or PRIMARY KEY", &c->name, &c->pos) < 0)
            return -1;
        if (is(p, "AS"))
            return unsupported(p, tok(p)->pos, "computed columns");
        if (parse_type(p, &c->type, &c->precision, &c->scale) < 0)
            return -1;
        if (is(p, "METADATA"))
            return unsupported(p, tok(p)->pos, "METADATA columns");
        if (accept(p, "NOT") && expect(p, "NULL") < 0)
            return -1;
        accept(p, "NULL");
        if (is(p, "PRIMARY"))
            return unsupported(p, tok(p)->pos, "PRIMARY KEY on a column (write PRIMARY KEY (col) NOT ENFORCED)");
    } while (accept(p, ","));
    if (expect(p, ")") < 0)
        return -1;
    if (is(p, "PARTITIONED") || is(p, "COMMENT") || is(p, "LIKE"))
        return unsupported(p, tok(p)->pos, "PARTITIONED BY, COMMENT and LIKE in CREATE TABLE");
    if (!accept(p, "WITH"))
        return fail_here(p, "WITH ('connector' = ...)");
    return parse_options(p, st);
}

static int parse_stmt(parser_t *p, eddy_sql_stmt_t *st)
{
    st->pos = tok(p)->pos;
    if (accept(p, "CREATE")) {
        st->temporary = accept(p, "TEMPORARY");
        if (is(p, "OR"))
            return unsupported(p, tok(p)->pos, "CREATE OR REPLACE");
        bool table = accept(p, "TABLE");
        if (!table && !accept(p, "VIEW")) {
            if (is(p, "FUNCTION") || is(p, "CATALOG") || is(p, "DATABASE"))
                return unsupported(p, tok(p)->pos, "CREATE FUNCTION/CATALOG/DATABASE");
            return fail_here(p, "TABLE or VIEW");
        }
        if (accept(p, "IF")) {
            if (expect(p, "NOT") < 0 || expect(p, "EXISTS") < 0)
                return -1;
        }
        if (name(p, "a name", &st->name, &st->name_pos) < 0)
            return -1;
        if (is(p, "."))
            return unsupported(p, tok(p)->pos, "catalog- or database-qualified table names");
        if (table) {
            st->kind = EDDY_SQL_CREATE_TABLE;
            return parse_table_body(p, st);
        }
        st->kind = EDDY_SQL_CREATE_VIEW;
        if (is(p, "("))
            return unsupported(p, tok(p)->pos, "a view's column list (alias the SELECT's columns)");
        return expect(p, "AS") < 0 ? -1 : parse_select(p, &st->query);
    }
    if (accept(p, "INSERT")) {
        st->kind = EDDY_SQL_INSERT;
        if (is(p, "OVERWRITE"))
            return unsupported(p, tok(p)->pos, "INSERT OVERWRITE");
        if (expect(p, "INTO") < 0 || name(p, "a table name", &st->name, &st->name_pos) < 0)
            return -1;
        if (is(p, "("))
            return unsupported(p, tok(p)->pos, "an INSERT's column list (select the columns in the table's order)");
        if (is(p, "PARTITION"))
            return unsupported(p, tok(p)->pos, "INSERT ... PARTITION");
        return parse_select(p, &st->query);
    }
    if (is(p, "SELECT") || is(p, "WITH") || is(p, "VALUES")) {
        st->kind = EDDY_SQL_QUERY;
        return parse_select(p, &st->query);
    }
    if (accept(p, "EXPLAIN")) {
        if (accept(p, "PLAN") && expect(p, "FOR") < 0)
            return -1;
        if (!is(p, "INSERT") && !is(p, "SELECT"))
            return unsupported(p, tok(p)->pos, "EXPLAIN other than EXPLAIN [PLAN FOR] INSERT or "
                               "SELECT (details such as CHANGELOG_MODE, other statements)");
        uint32_t pos = st->pos;
        int rc = parse_stmt(p, st);
        st->pos = pos;
        st->explain = true;
        return rc;
    }
    static const char *const other[] = {"SET", "RESET", "USE", "SHOW", "DROP", "ALTER",
                                        "DESCRIBE", "DESC", "EXECUTE", "BEGIN", "END", "LOAD",
                                        "UNLOAD", "ADD", "REMOVE", "DELETE", "UPDATE", "TRUNCATE",
                                        "ANALYZE", "CALL", NULL};
    for (const char *const *o = other; *o; o++)
        if (is(p, *o)) {
            char what[64];
            snprintf(what, sizeof what, "%s statements", *o);
            return unsupported(p, st->pos, what);
        }
    return fail_here(p, "a statement (CREATE TABLE, CREATE VIEW, INSERT INTO, SELECT)");
}

eddy_sql_script_t *eddy_sql_parse(const eddy_sql_src_t *src, eddy_err_t *err)
{
    eddy_err_t local = {{0}};
    if (!err)
        err = &local;
    err->msg[0] = '\0';
    parser_t p = {.src = src, .err = err};
    if (eddy_sql_lex(src, &p.t, err) < 0)
        return NULL;
    eddy_sql_script_t *s = calloc(1, sizeof *s);
    int rc = s ? 0 : oom(&p);
    while (rc == 0 && tok(&p)->kind != EDDY_SQL_TOK_END) {
        if (accept(&p, ";"))
            continue;
        eddy_sql_stmt_t *v = realloc(s->stmts, (s->n + 1) * sizeof *v);
        if (!v) {
            rc = oom(&p);
            break;
        }
        s->stmts = v;
        v[s->n] = (eddy_sql_stmt_t){0};
        rc = parse_stmt(&p, &v[s->n++]);
        if (rc == 0 && !is(&p, ";") && tok(&p)->kind != EDDY_SQL_TOK_END)
            rc = fail_here(&p, "';' or the end of the statement");
    }
    if (rc == 0 && s->n == 0)
        rc = eddy_sql_fail(src, 0, err, "no statements (expected CREATE TABLE, CREATE VIEW, "
                           "INSERT INTO or SELECT)");
    eddy_sql_toks_clear(&p.t);
    if (rc < 0)
        eddy_sql_script_destroy(&s);
    return s;
}
