/* expr.c - the pipeline expression language (see expr.h): a recursive-
 * descent parser into a flat array of nodes, and a tree-walking evaluator.
 *
 * Grammar, loosest binding first:
 *   or      := and (("or" | "||") and)*
 *   and     := not (("and" | "&&") not)*
 *   not     := ("not" | "!") not | compare
 *   compare := sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)?
 *   sum     := product (("+" | "-") product)*
 *   product := unary (("*" | "/" | "%") unary)*
 *   unary   := "-" unary | primary
 *   primary := INT | FLOAT | STRING | true | false | null | FIELD
 *            | NAME "(" [or ("," or)*] ")" | "(" or ")"
 * Nesting is bounded (MAX_DEPTH) so a hostile spec cannot overflow the
 * stack, and so is the node count.
 *
 * Logic is SQL's three-valued one: false and null = false, true or null =
 * true, anything else with a null is null. Strings a function makes go to
 * a scratch arena of fixed blocks that eval resets, so a pointer handed
 * out stays valid until the next eval. */
#include "plan/expr.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEPTH 64
#define MAX_NODES 4096
#define MAX_ARGS 16
#define SCRATCH_BLOCK 4096

typedef enum node_kind {
    N_LIT,
    N_FIELD,
    N_NEG,
    N_NOT,
    N_AND,
    N_OR,
    N_BIN,
    N_CALL,
} node_kind_t;

typedef enum bin_op {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE,
} bin_op_t;

typedef enum fn_id {
    F_LOWER, F_UPPER, F_TRIM, F_LENGTH, F_CONCAT, F_SUBSTR, F_CONTAINS, F_STARTS_WITH,
    F_ENDS_WITH, F_MATCHES, F_IS_NULL, F_COALESCE, F_IF, F_INT, F_FLOAT, F_STRING, F_ABS,
    F_TUMBLE_START, F_DATE, F_DATETIME, F_HOUR,
} fn_id_t;

static const struct fn_def {
    const char *name;
    fn_id_t id;
    uint32_t min_args, max_args;
} fns[] = {
    {"lower", F_LOWER, 1, 1},          {"upper", F_UPPER, 1, 1},
    {"trim", F_TRIM, 1, 1},            {"length", F_LENGTH, 1, 1},
    {"concat", F_CONCAT, 1, MAX_ARGS}, {"substr", F_SUBSTR, 2, 3},
    {"contains", F_CONTAINS, 2, 2},    {"starts_with", F_STARTS_WITH, 2, 2},
    {"ends_with", F_ENDS_WITH, 2, 2},  {"matches", F_MATCHES, 2, 2},
    {"is_null", F_IS_NULL, 1, 1},      {"coalesce", F_COALESCE, 1, MAX_ARGS},
    {"if", F_IF, 3, 3},                {"int", F_INT, 1, 1},
    {"float", F_FLOAT, 1, 1},          {"string", F_STRING, 1, 1},
    {"abs", F_ABS, 1, 1},              {"tumble_start", F_TUMBLE_START, 2, 2},
    {"date", F_DATE, 1, 1},            {"datetime", F_DATETIME, 1, 1},
    {"hour", F_HOUR, 1, 1},
};

typedef struct node {
    node_kind_t kind;
    union {
        eddy_val_t lit;  /* N_LIT (strings point into expr->strings) */
        uint32_t field;  /* N_FIELD */
        bin_op_t op;     /* N_BIN */
        fn_id_t fn;      /* N_CALL */
    } u;
    uint32_t args[MAX_ARGS]; /* children, node indices */
    uint32_t n_args;
    regex_t *regex;          /* matches() with a literal pattern */
} node_t;

typedef struct scratch_block {
    struct scratch_block *next;
    size_t used, cap;
    char data[];
} scratch_block_t;

struct eddy_expr {
    char *text;
    node_t *nodes;
    uint32_t n_nodes, cap_nodes, root;
    uint64_t reads;
    char **strings; /* literal strings, owned */
    uint32_t n_strings;
    scratch_block_t *scratch;
};

/* ---- parser ---------------------------------------------------------------- */

typedef struct parser {
    eddy_expr_t *e;
    const char *s;      /* whole text */
    size_t pos;
    const char *const *fields;
    uint32_t n_fields;
    uint32_t depth;
    eddy_err_t *err;
    bool failed;
} parser_t;

static int fail(parser_t *p, const char *fmt, const char *what)
{
    if (!p->failed)
        eddy_err_set(p->err, "column %zu: %s%s", p->pos + 1, fmt, what ? what : "");
    p->failed = true;
    return -1;
}

static void skip_space(parser_t *p)
{
    while (p->s[p->pos] && isspace((unsigned char)p->s[p->pos]))
        p->pos++;
}

/* Consumes tok (an operator, or a keyword not followed by a name char). */
static bool accept(parser_t *p, const char *tok)
{
    skip_space(p);
    size_t n = strlen(tok);
    if (strncmp(p->s + p->pos, tok, n))
        return false;
    if (isalpha((unsigned char)tok[0])) {
        char next = p->s[p->pos + n];
        if (isalnum((unsigned char)next) || next == '_')
            return false;
    }
    /* "<" must not take the first half of "<=" and so on. */
    if ((!strcmp(tok, "<") || !strcmp(tok, ">") || !strcmp(tok, "!")) && p->s[p->pos + 1] == '=')
        return false;
    p->pos += n;
    return true;
}

static int add_node(parser_t *p, node_kind_t kind, uint32_t *out)
{
    eddy_expr_t *e = p->e;
    if (e->n_nodes == MAX_NODES)
        return fail(p, "expression too long", NULL);
    if (e->n_nodes == e->cap_nodes) {
        uint32_t cap = e->cap_nodes ? e->cap_nodes * 2 : 16;
        node_t *n = realloc(e->nodes, cap * sizeof *n);
        if (!n)
            return fail(p, "out of memory", NULL);
        e->nodes = n;
        e->cap_nodes = cap;
    }
    node_t *n = &e->nodes[e->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    *out = e->n_nodes++;
    return 0;
}

static int parse_or(parser_t *p, uint32_t *out);

static int binary(parser_t *p, node_kind_t kind, bin_op_t op, uint32_t left, uint32_t right,
                  uint32_t *out)
{
    if (add_node(p, kind, out) < 0)
        return -1;
    node_t *n = &p->e->nodes[*out];
    n->u.op = op;
    n->args[0] = left;
    n->args[1] = right;
    n->n_args = 2;
    return 0;
}

static int keep_string(parser_t *p, char *s, eddy_val_t *v)
{
    eddy_expr_t *e = p->e;
    char **ns = realloc(e->strings, (e->n_strings + 1) * sizeof *ns);
    if (!ns) {
        free(s);
        return fail(p, "out of memory", NULL);
    }
    e->strings = ns;
    e->strings[e->n_strings++] = s;
    *v = eddy_val_str(s, strlen(s));
    return 0;
}

static int parse_string(parser_t *p, eddy_val_t *v)
{
    char quote = p->s[p->pos++];
    size_t start = p->pos, cap = strlen(p->s + start) + 1, n = 0;
    char *out = malloc(cap);
    if (!out)
        return fail(p, "out of memory", NULL);
    for (;;) {
        char c = p->s[p->pos];
        if (!c) {
            free(out);
            p->pos = start - 1;
            return fail(p, "unterminated string", NULL);
        }
        p->pos++;
        if (c == quote)
            break;
        if (c == '\\') {
            char esc = p->s[p->pos];
            if (!esc)
                continue;
            p->pos++;
            c = esc == 'n' ? '\n' : esc == 't' ? '\t' : esc;
            /* Other escapes keep their backslash: regex patterns need them. */
            if (esc != 'n' && esc != 't' && esc != '\\' && esc != '\'' && esc != '"')
                out[n++] = '\\';
        }
        out[n++] = c;
    }
    out[n] = '\0';
    return keep_string(p, out, v);
}

static int parse_number(parser_t *p, eddy_val_t *v)
{
    const char *start = p->s + p->pos;
    size_t len = strspn(start, "0123456789");
    bool is_float = start[len] == '.' || start[len] == 'e' || start[len] == 'E';
    char *end = NULL;
    errno = 0;
    if (is_float) {
        double f = strtod(start, &end);
        if (errno || !isfinite(f))
            return fail(p, "number out of range", NULL);
        *v = eddy_val_float(f);
    } else {
        long long i = strtoll(start, &end, 10);
        if (errno)
            return fail(p, "integer out of range (64 bits)", NULL);
        *v = eddy_val_int(i);
    }
    if (isalpha((unsigned char)*end) || *end == '_')
        return fail(p, "malformed number", NULL);
    p->pos += (size_t)(end - start);
    return 0;
}

static const struct fn_def *find_fn(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (strlen(fns[i].name) == len && !strncmp(fns[i].name, name, len))
            return &fns[i];
    return NULL;
}

static int parse_call(parser_t *p, const char *name, size_t len, size_t name_pos, uint32_t *out)
{
    const struct fn_def *fn = find_fn(name, len);
    if (!fn) {
        char buf[80];
        snprintf(buf, sizeof buf, "'%.*s'", (int)(len < 60 ? len : 60), name);
        p->pos = name_pos;
        return fail(p, "unknown function ", buf);
    }
    uint32_t args[MAX_ARGS], n = 0;
    if (!accept(p, ")")) {
        do {
            if (n == MAX_ARGS)
                return fail(p, "too many arguments", NULL);
            if (parse_or(p, &args[n++]) < 0)
                return -1;
        } while (accept(p, ","));
        if (!accept(p, ")"))
            return fail(p, "expected ',' or ')'", NULL);
    }
    if (n < fn->min_args || n > fn->max_args) {
        char buf[120];
        if (fn->min_args == fn->max_args)
            snprintf(buf, sizeof buf, "%s() takes %u argument%s, not %u", fn->name, fn->min_args,
                     fn->min_args == 1 ? "" : "s", n);
        else
            snprintf(buf, sizeof buf, "%s() takes %u to %u arguments, not %u", fn->name,
                     fn->min_args, fn->max_args, n);
        p->pos = name_pos;
        return fail(p, buf, NULL);
    }
    if (add_node(p, N_CALL, out) < 0)
        return -1;
    node_t *node = &p->e->nodes[*out];
    node->u.fn = fn->id;
    memcpy(node->args, args, n * sizeof *args);
    node->n_args = n;
    if (fn->id == F_MATCHES) {
        const node_t *pat = &p->e->nodes[args[1]];
        if (pat->kind != N_LIT || pat->u.lit.type != EDDY_VAL_STR) {
            p->pos = name_pos;
            return fail(p, "matches() needs a string literal as its pattern", NULL);
        }
        regex_t *re = malloc(sizeof *re);
        if (!re)
            return fail(p, "out of memory", NULL);
        int rc = regcomp(re, pat->u.lit.u.s.ptr, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[200];
            regerror(rc, re, msg, sizeof msg);
            free(re);
            p->pos = name_pos;
            return fail(p, "bad regular expression: ", msg);
        }
        p->e->nodes[*out].regex = re;
    }
    return 0;
}

static int parse_primary(parser_t *p, uint32_t *out)
{
    skip_space(p);
    char c = p->s[p->pos];
    if (accept(p, "(")) {
        if (parse_or(p, out) < 0)
            return -1;
        if (!accept(p, ")"))
            return fail(p, "expected ')'", NULL);
        return 0;
    }
    eddy_val_t lit;
    if (c == '\'' || c == '"') {
        if (parse_string(p, &lit) < 0)
            return -1;
    } else if (isdigit((unsigned char)c)) {
        if (parse_number(p, &lit) < 0)
            return -1;
    } else if (isalpha((unsigned char)c) || c == '_') {
        size_t start = p->pos, len = 0;
        while (isalnum((unsigned char)p->s[start + len]) || p->s[start + len] == '_')
            len++;
        const char *name = p->s + start;
        p->pos += len;
        if (accept(p, "("))
            return parse_call(p, name, len, start, out);
        if (len == 4 && !strncmp(name, "true", 4))
            lit = eddy_val_bool(true);
        else if (len == 5 && !strncmp(name, "false", 5))
            lit = eddy_val_bool(false);
        else if (len == 4 && !strncmp(name, "null", 4))
            lit = eddy_val_null();
        else {
            for (uint32_t i = 0; i < p->n_fields; i++) {
                if (strlen(p->fields[i]) == len && !strncmp(p->fields[i], name, len)) {
                    if (add_node(p, N_FIELD, out) < 0)
                        return -1;
                    p->e->nodes[*out].u.field = i;
                    p->e->reads |= 1ull << (i < 63 ? i : 63);
                    return 0;
                }
            }
            char buf[80];
            snprintf(buf, sizeof buf, "'%.*s'", (int)(len < 60 ? len : 60), name);
            p->pos = start;
            return fail(p, "unknown field ", buf);
        }
    } else if (!c) {
        return fail(p, "unexpected end of expression", NULL);
    } else {
        char buf[8] = {'\'', c, '\'', 0};
        return fail(p, "unexpected ", buf);
    }
    if (add_node(p, N_LIT, out) < 0)
        return -1;
    p->e->nodes[*out].u.lit = lit;
    return 0;
}

static int parse_unary(parser_t *p, uint32_t *out)
{
    if (++p->depth > MAX_DEPTH)
        return fail(p, "expression nested too deeply", NULL);
    int rc;
    if (accept(p, "-")) {
        uint32_t child;
        rc = parse_unary(p, &child);
        if (rc == 0 && (rc = add_node(p, N_NEG, out)) == 0) {
            p->e->nodes[*out].args[0] = child;
            p->e->nodes[*out].n_args = 1;
        }
    } else {
        rc = parse_primary(p, out);
    }
    p->depth--;
    return rc;
}

static int parse_product(parser_t *p, uint32_t *out)
{
    if (parse_unary(p, out) < 0)
        return -1;
    for (;;) {
        bin_op_t op;
        if (accept(p, "*"))
            op = OP_MUL;
        else if (accept(p, "/"))
            op = OP_DIV;
        else if (accept(p, "%"))
            op = OP_MOD;
        else
            return 0;
        uint32_t right;
        if (parse_unary(p, &right) < 0 || binary(p, N_BIN, op, *out, right, out) < 0)
            return -1;
    }
}

static int parse_sum(parser_t *p, uint32_t *out)
{
    if (parse_product(p, out) < 0)
        return -1;
    for (;;) {
        bin_op_t op;
        if (accept(p, "+"))
            op = OP_ADD;
        else if (accept(p, "-"))
            op = OP_SUB;
        else
            return 0;
        uint32_t right;
        if (parse_product(p, &right) < 0 || binary(p, N_BIN, op, *out, right, out) < 0)
            return -1;
    }
}

static int parse_compare(parser_t *p, uint32_t *out)
{
    if (parse_sum(p, out) < 0)
        return -1;
    static const struct {
        const char *tok;
        bin_op_t op;
    } ops[] = {{"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE}, {">=", OP_GE}, {"<", OP_LT}, {">", OP_GT}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (accept(p, ops[i].tok)) {
            uint32_t right;
            if (parse_sum(p, &right) < 0)
                return -1;
            return binary(p, N_BIN, ops[i].op, *out, right, out);
        }
    }
    skip_space(p);
    if (p->s[p->pos] == '=' )
        return fail(p, "'=' is not a comparison: use '=='", NULL);
    return 0;
}

static int parse_not(parser_t *p, uint32_t *out)
{
    if (++p->depth > MAX_DEPTH)
        return fail(p, "expression nested too deeply", NULL);
    int rc;
    if (accept(p, "not") || accept(p, "!")) {
        uint32_t child;
        rc = parse_not(p, &child);
        if (rc == 0 && (rc = add_node(p, N_NOT, out)) == 0) {
            p->e->nodes[*out].args[0] = child;
            p->e->nodes[*out].n_args = 1;
        }
    } else {
        rc = parse_compare(p, out);
    }
    p->depth--;
    return rc;
}

static int parse_and(parser_t *p, uint32_t *out)
{
    if (parse_not(p, out) < 0)
        return -1;
    while (accept(p, "and") || accept(p, "&&")) {
        uint32_t right;
        if (parse_not(p, &right) < 0 || binary(p, N_AND, OP_EQ, *out, right, out) < 0)
            return -1;
    }
    return 0;
}

static int parse_or(parser_t *p, uint32_t *out)
{
    if (++p->depth > MAX_DEPTH)
        return fail(p, "expression nested too deeply", NULL);
    int rc = parse_and(p, out);
    while (rc == 0 && (accept(p, "or") || accept(p, "||"))) {
        uint32_t right;
        rc = parse_and(p, &right);
        if (rc == 0)
            rc = binary(p, N_OR, OP_EQ, *out, right, out);
    }
    p->depth--;
    return rc;
}

eddy_expr_t *eddy_expr_new(const char *text, const char *const *fields, uint32_t n_fields,
                           eddy_err_t *err)
{
    eddy_expr_t *e = calloc(1, sizeof *e);
    if (!e || !(e->text = strdup(text ? text : ""))) {
        free(e);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    parser_t p = {.e = e, .s = e->text, .fields = fields, .n_fields = n_fields, .err = err};
    skip_space(&p);
    if (!p.s[p.pos])
        fail(&p, "empty expression", NULL);
    else if (parse_or(&p, &e->root) == 0) {
        skip_space(&p);
        if (p.s[p.pos]) {
            char buf[8] = {'\'', p.s[p.pos], '\'', 0};
            fail(&p, "unexpected ", buf);
        }
    }
    if (p.failed) {
        eddy_expr_destroy(&e);
        return NULL;
    }
    return e;
}

void eddy_expr_destroy(eddy_expr_t **self_p)
{
    eddy_expr_t *e = self_p ? *self_p : NULL;
    if (!e)
        return;
    for (uint32_t i = 0; i < e->n_nodes; i++) {
        if (e->nodes[i].regex) {
            regfree(e->nodes[i].regex);
            free(e->nodes[i].regex);
        }
    }
    for (uint32_t i = 0; i < e->n_strings; i++)
        free(e->strings[i]);
    while (e->scratch) {
        scratch_block_t *next = e->scratch->next;
        free(e->scratch);
        e->scratch = next;
    }
    free(e->strings);
    free(e->nodes);
    free(e->text);
    free(e);
    *self_p = NULL;
}

uint64_t eddy_expr_reads(const eddy_expr_t *self)
{
    return self->reads;
}

const char *eddy_expr_text(const eddy_expr_t *self)
{
    return self->text;
}

/* ---- values ----------------------------------------------------------------- */

bool eddy_val_is_true(const eddy_val_t *v)
{
    return v->type == EDDY_VAL_BOOL && v->u.b;
}

/* An optional sign and 1 to 18 decimal digits (no overflow possible): most
 * numbers in CSV fields, read without strtoll's copy and locale. What is not
 * this form goes the general way, which gives the same value for it. */
static bool plain_int(const char *s, size_t len, int64_t *out)
{
    size_t k = len && (s[0] == '-' || s[0] == '+');
    if (len == k || len - k > 18)
        return false;
    int64_t acc = 0;
    for (size_t j = k; j < len; j++) {
        if (s[j] < '0' || s[j] > '9')
            return false;
        acc = acc * 10 + (s[j] - '0');
    }
    *out = s[0] == '-' ? -acc : acc;
    return true;
}

bool eddy_val_number(const eddy_val_t *v, bool *is_int, int64_t *i, double *f)
{
    switch (v->type) {
    case EDDY_VAL_INT:
        *is_int = true;
        *i = v->u.i;
        *f = (double)v->u.i;
        return true;
    case EDDY_VAL_FLOAT:
        *is_int = false;
        *f = v->u.f;
        return true;
    case EDDY_VAL_STR: {
        if (plain_int(v->u.s.ptr, v->u.s.len, i)) {
            *is_int = true;
            *f = (double)*i;
            return true;
        }
        char buf[64];
        size_t len = v->u.s.len;
        if (len == 0 || len >= sizeof buf)
            return false;
        memcpy(buf, v->u.s.ptr, len);
        buf[len] = '\0';
        if (isspace((unsigned char)buf[0]))
            return false;
        char *end = NULL;
        errno = 0;
        long long ll = strtoll(buf, &end, 10);
        if (!errno && *end == '\0') {
            *is_int = true;
            *i = ll;
            *f = (double)ll;
            return true;
        }
        errno = 0;
        double d = strtod(buf, &end);
        if (errno || *end != '\0' || !isfinite(d))
            return false;
        *is_int = false;
        *f = d;
        return true;
    }
    default:
        return false;
    }
}

size_t eddy_val_format(const eddy_val_t *v, char *out, size_t size)
{
    int n = 0;
    switch (v->type) {
    case EDDY_VAL_NULL:
        n = snprintf(out, size, "%s", "");
        break;
    case EDDY_VAL_BOOL:
        n = snprintf(out, size, "%s", v->u.b ? "true" : "false");
        break;
    case EDDY_VAL_INT: {
        /* By hand: rows format an int per field and snprintf dominated. */
        char digits[24];
        size_t d = sizeof digits;
        uint64_t u = v->u.i < 0 ? 0 - (uint64_t)v->u.i : (uint64_t)v->u.i;
        do {
            digits[--d] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (v->u.i < 0)
            digits[--d] = '-';
        size_t len = sizeof digits - d;
        if (size) {
            size_t copy = len < size ? len : size - 1;
            memcpy(out, digits + d, copy);
            out[copy] = '\0';
        }
        return len;
    }
    case EDDY_VAL_FLOAT:
        /* Whole numbers without an exponent (1000, not 1e+03). */
        if (v->u.f == floor(v->u.f) && fabs(v->u.f) < 1e15) {
            n = snprintf(out, size, "%.0f", v->u.f);
            break;
        }
        for (int prec = 1; prec <= 17; prec++) {
            char buf[40];
            snprintf(buf, sizeof buf, "%.*g", prec, v->u.f);
            if (strtod(buf, NULL) == v->u.f || prec == 17) {
                n = snprintf(out, size, "%s", buf);
                break;
            }
        }
        break;
    case EDDY_VAL_STR:
        if (size)
            snprintf(out, size, "%.*s", (int)(v->u.s.len < size ? v->u.s.len : size - 1), v->u.s.ptr);
        return v->u.s.len;
    }
    return n < 0 ? 0 : (size_t)n;
}

static int type_rank(const eddy_val_t *v)
{
    switch (v->type) {
    case EDDY_VAL_NULL: return 0;
    case EDDY_VAL_BOOL: return 1;
    case EDDY_VAL_INT:
    case EDDY_VAL_FLOAT: return 2;
    default: return 3;
    }
}

static int cmp_numbers(bool ai, int64_t ii, double af, bool bi, int64_t ji, double bf)
{
    if (ai && bi)
        return ii < ji ? -1 : ii > ji;
    return af < bf ? -1 : af > bf;
}

static int cmp_strings(const eddy_val_t *a, const eddy_val_t *b)
{
    size_t n = a->u.s.len < b->u.s.len ? a->u.s.len : b->u.s.len;
    int c = n ? memcmp(a->u.s.ptr, b->u.s.ptr, n) : 0;
    if (c)
        return c < 0 ? -1 : 1;
    return a->u.s.len < b->u.s.len ? -1 : a->u.s.len > b->u.s.len;
}

int eddy_val_compare(const eddy_val_t *a, const eddy_val_t *b)
{
    int ra = type_rank(a), rb = type_rank(b);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    switch (ra) {
    case 0:
        return 0;
    case 1:
        return (int)a->u.b - (int)b->u.b;
    case 2: {
        bool ai = false, bi = false;
        int64_t ii = 0, ji = 0;
        double af = 0, bf = 0;
        eddy_val_number(a, &ai, &ii, &af);
        eddy_val_number(b, &bi, &ji, &bf);
        return cmp_numbers(ai, ii, af, bi, ji, bf);
    }
    default:
        return cmp_strings(a, b);
    }
}

/* ---- evaluation --------------------------------------------------------------- */

static char *scratch_alloc(eddy_expr_t *e, size_t n)
{
    scratch_block_t *b = e->scratch;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > SCRATCH_BLOCK ? n : SCRATCH_BLOCK;
        scratch_block_t *nb = malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->next = e->scratch;
        nb->used = 0;
        nb->cap = cap;
        e->scratch = b = nb;
    }
    char *p = b->data + b->used;
    b->used += n;
    return p;
}

/* Keeps one block (the newest) for the next row. */
static void scratch_reset(eddy_expr_t *e)
{
    scratch_block_t *b = e->scratch;
    if (!b)
        return;
    while (b->next) {
        scratch_block_t *next = b->next;
        b->next = next->next;
        free(next);
    }
    b->used = 0;
}

static eddy_val_t make_str(eddy_expr_t *e, const char *p, size_t n)
{
    char *out = scratch_alloc(e, n ? n : 1);
    if (!out)
        return eddy_val_null();
    if (n)
        memcpy(out, p, n);
    return eddy_val_str(out, n);
}

/* v as text: strings as they are, others formatted into scratch. */
static eddy_val_t as_text(eddy_expr_t *e, const eddy_val_t *v)
{
    if (v->type == EDDY_VAL_STR || v->type == EDDY_VAL_NULL)
        return *v;
    char buf[64];
    size_t n = eddy_val_format(v, buf, sizeof buf);
    return make_str(e, buf, n < sizeof buf ? n : sizeof buf - 1);
}

static eddy_val_t eval(eddy_expr_t *e, uint32_t idx, const eddy_val_t *row);

static eddy_val_t arith(bin_op_t op, const eddy_val_t *a, const eddy_val_t *b)
{
    bool ai = false, bi = false;
    int64_t x = 0, y = 0;
    double xf = 0, yf = 0;
    if (!eddy_val_number(a, &ai, &x, &xf) || !eddy_val_number(b, &bi, &y, &yf))
        return eddy_val_null();
    if (ai && bi) {
        int64_t r;
        switch (op) {
        case OP_ADD:
            return __builtin_add_overflow(x, y, &r) ? eddy_val_null() : eddy_val_int(r);
        case OP_SUB:
            return __builtin_sub_overflow(x, y, &r) ? eddy_val_null() : eddy_val_int(r);
        case OP_MUL:
            return __builtin_mul_overflow(x, y, &r) ? eddy_val_null() : eddy_val_int(r);
        case OP_DIV:
            if (y == 0 || (x == INT64_MIN && y == -1))
                return eddy_val_null();
            return eddy_val_int(x / y);
        default:
            if (y == 0 || (x == INT64_MIN && y == -1))
                return eddy_val_null();
            return eddy_val_int(x % y);
        }
    }
    double r;
    switch (op) {
    case OP_ADD: r = xf + yf; break;
    case OP_SUB: r = xf - yf; break;
    case OP_MUL: r = xf * yf; break;
    case OP_DIV:
        if (yf == 0)
            return eddy_val_null();
        r = xf / yf;
        break;
    default:
        if (yf == 0)
            return eddy_val_null();
        r = fmod(xf, yf);
        break;
    }
    return isfinite(r) ? eddy_val_float(r) : eddy_val_null();
}

static eddy_val_t compare(bin_op_t op, const eddy_val_t *a, const eddy_val_t *b)
{
    if (a->type == EDDY_VAL_NULL || b->type == EDDY_VAL_NULL)
        return eddy_val_null();
    int c;
    bool ai = false, bi = false;
    int64_t x = 0, y = 0;
    double xf = 0, yf = 0;
    bool an = a->type == EDDY_VAL_INT || a->type == EDDY_VAL_FLOAT;
    bool bn = b->type == EDDY_VAL_INT || b->type == EDDY_VAL_FLOAT;
    if ((an || bn) && eddy_val_number(a, &ai, &x, &xf) && eddy_val_number(b, &bi, &y, &yf))
        c = cmp_numbers(ai, x, xf, bi, y, yf);
    else if (a->type == EDDY_VAL_STR && b->type == EDDY_VAL_STR)
        c = cmp_strings(a, b);
    else if (a->type == EDDY_VAL_BOOL && b->type == EDDY_VAL_BOOL)
        c = (int)a->u.b - (int)b->u.b;
    else if (op == OP_EQ || op == OP_NE)
        return eddy_val_bool(op == OP_NE); /* different kinds are never equal */
    else
        return eddy_val_null();
    switch (op) {
    case OP_EQ: return eddy_val_bool(c == 0);
    case OP_NE: return eddy_val_bool(c != 0);
    case OP_LT: return eddy_val_bool(c < 0);
    case OP_LE: return eddy_val_bool(c <= 0);
    case OP_GT: return eddy_val_bool(c > 0);
    default: return eddy_val_bool(c >= 0);
    }
}

/* An int argument (a number or a numeric string, floats truncated). */
static bool int_arg(const eddy_val_t *v, int64_t *out)
{
    bool is_int;
    int64_t i = 0;
    double f = 0;
    if (!eddy_val_number(v, &is_int, &i, &f))
        return false;
    if (!is_int) {
        if (!(f > -9.2e18 && f < 9.2e18))
            return false;
        i = (int64_t)f;
    }
    *out = i;
    return true;
}

static eddy_val_t time_text(eddy_expr_t *e, const eddy_val_t *v, bool with_time)
{
    int64_t ms;
    if (!int_arg(v, &ms))
        return eddy_val_null();
    int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    int64_t frac = ms - secs * 1000;
    time_t t = (time_t)secs;
    struct tm tm;
    if (!gmtime_r(&t, &tm))
        return eddy_val_null();
    char buf[64];
    int n = with_time ? snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03" PRId64 "Z",
                                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                                 tm.tm_min, tm.tm_sec, frac)
                      : snprintf(buf, sizeof buf, "%04d-%02d-%02d", tm.tm_year + 1900,
                                 tm.tm_mon + 1, tm.tm_mday);
    if (n < 0 || (size_t)n >= sizeof buf)
        return eddy_val_null();
    return make_str(e, buf, (size_t)n);
}

static eddy_val_t call(eddy_expr_t *e, const node_t *n, const eddy_val_t *row)
{
    eddy_val_t a[MAX_ARGS];
    /* if() and coalesce() evaluate lazily; everything else takes values. */
    if (n->u.fn == F_IF) {
        eddy_val_t c = eval(e, n->args[0], row);
        return eval(e, n->args[eddy_val_is_true(&c) ? 1 : 2], row);
    }
    if (n->u.fn == F_COALESCE) {
        for (uint32_t i = 0; i < n->n_args; i++) {
            eddy_val_t v = eval(e, n->args[i], row);
            if (v.type != EDDY_VAL_NULL)
                return v;
        }
        return eddy_val_null();
    }
    for (uint32_t i = 0; i < n->n_args; i++)
        a[i] = eval(e, n->args[i], row);
    switch (n->u.fn) {
    case F_IS_NULL:
        return eddy_val_bool(a[0].type == EDDY_VAL_NULL);
    case F_CONCAT: {
        size_t total = 0;
        for (uint32_t i = 0; i < n->n_args; i++) {
            a[i] = as_text(e, &a[i]);
            total += a[i].type == EDDY_VAL_STR ? a[i].u.s.len : 0;
        }
        char *out = scratch_alloc(e, total ? total : 1);
        if (!out)
            return eddy_val_null();
        size_t off = 0;
        for (uint32_t i = 0; i < n->n_args; i++) {
            if (a[i].type == EDDY_VAL_STR && a[i].u.s.len) {
                memcpy(out + off, a[i].u.s.ptr, a[i].u.s.len);
                off += a[i].u.s.len;
            }
        }
        return eddy_val_str(out, total);
    }
    case F_INT: {
        int64_t i;
        return int_arg(&a[0], &i) ? eddy_val_int(i) : eddy_val_null();
    }
    case F_FLOAT: {
        bool is_int;
        int64_t i = 0;
        double f = 0;
        return eddy_val_number(&a[0], &is_int, &i, &f) ? eddy_val_float(f) : eddy_val_null();
    }
    case F_STRING:
        return as_text(e, &a[0]);
    case F_ABS: {
        bool is_int;
        int64_t i = 0;
        double f = 0;
        if (!eddy_val_number(&a[0], &is_int, &i, &f))
            return eddy_val_null();
        if (is_int)
            return i == INT64_MIN ? eddy_val_null() : eddy_val_int(i < 0 ? -i : i);
        return eddy_val_float(fabs(f));
    }
    case F_TUMBLE_START: {
        int64_t ts, size;
        if (!int_arg(&a[0], &ts) || !int_arg(&a[1], &size) || size <= 0)
            return eddy_val_null();
        int64_t r = ts % size;
        return eddy_val_int(ts - (r < 0 ? r + size : r));
    }
    case F_DATE:
        return time_text(e, &a[0], false);
    case F_DATETIME:
        return time_text(e, &a[0], true);
    case F_HOUR: {
        int64_t ms;
        if (!int_arg(&a[0], &ms))
            return eddy_val_null();
        int64_t h = (ms / 3600000) % 24;
        return eddy_val_int(h < 0 ? h + 24 : h);
    }
    default:
        break;
    }
    /* The rest work on text. */
    for (uint32_t i = 0; i < n->n_args; i++) {
        if (a[i].type == EDDY_VAL_NULL)
            return eddy_val_null();
    }
    eddy_val_t s = as_text(e, &a[0]);
    const char *p = s.u.s.ptr;
    size_t len = s.u.s.len;
    switch (n->u.fn) {
    case F_LOWER:
    case F_UPPER: {
        eddy_val_t out = make_str(e, p, len);
        char *w = (char *)out.u.s.ptr;
        for (size_t i = 0; out.type == EDDY_VAL_STR && i < len; i++)
            w[i] = (char)(n->u.fn == F_LOWER ? tolower((unsigned char)w[i]) : toupper((unsigned char)w[i]));
        return out;
    }
    case F_TRIM: {
        while (len && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        return eddy_val_str(p, len);
    }
    case F_LENGTH:
        return eddy_val_int((int64_t)len);
    case F_SUBSTR: {
        int64_t start, count = INT64_MAX;
        if (!int_arg(&a[1], &start) || (n->n_args == 3 && !int_arg(&a[2], &count)))
            return eddy_val_null();
        if (start < 0)
            start = 0;
        if (count < 0)
            count = 0;
        if ((uint64_t)start >= len)
            return eddy_val_str(p, 0);
        size_t rest = len - (size_t)start;
        return eddy_val_str(p + start, (uint64_t)count < rest ? (size_t)count : rest);
    }
    case F_CONTAINS:
    case F_STARTS_WITH:
    case F_ENDS_WITH: {
        eddy_val_t t = as_text(e, &a[1]);
        size_t tl = t.u.s.len;
        if (tl > len)
            return eddy_val_bool(false);
        if (n->u.fn == F_STARTS_WITH)
            return eddy_val_bool(!memcmp(p, t.u.s.ptr, tl));
        if (n->u.fn == F_ENDS_WITH)
            return eddy_val_bool(!memcmp(p + len - tl, t.u.s.ptr, tl));
        if (!tl)
            return eddy_val_bool(true);
        return eddy_val_bool(memmem(p, len, t.u.s.ptr, tl) != NULL);
    }
    case F_MATCHES: {
        /* regexec needs a NUL-terminated subject. */
        char *z = scratch_alloc(e, len + 1);
        if (!z)
            return eddy_val_null();
        memcpy(z, p, len);
        z[len] = '\0';
        if (memchr(z, '\0', len))
            return eddy_val_bool(false);
        return eddy_val_bool(regexec(n->regex, z, 0, NULL, 0) == 0);
    }
    default:
        return eddy_val_null();
    }
}

static eddy_val_t eval(eddy_expr_t *e, uint32_t idx, const eddy_val_t *row)
{
    const node_t *n = &e->nodes[idx];
    switch (n->kind) {
    case N_LIT:
        return n->u.lit;
    case N_FIELD:
        return row[n->u.field];
    case N_NEG: {
        eddy_val_t v = eval(e, n->args[0], row), zero = eddy_val_int(0);
        return arith(OP_SUB, &zero, &v);
    }
    case N_NOT: {
        eddy_val_t v = eval(e, n->args[0], row);
        return v.type == EDDY_VAL_BOOL ? eddy_val_bool(!v.u.b) : eddy_val_null();
    }
    case N_AND:
    case N_OR: {
        bool is_and = n->kind == N_AND;
        eddy_val_t l = eval(e, n->args[0], row);
        if (l.type == EDDY_VAL_BOOL && l.u.b != is_and)
            return l; /* false and .. / true or .. */
        eddy_val_t r = eval(e, n->args[1], row);
        if (r.type == EDDY_VAL_BOOL && r.u.b != is_and)
            return r;
        if (l.type == EDDY_VAL_BOOL && r.type == EDDY_VAL_BOOL)
            return eddy_val_bool(is_and);
        return eddy_val_null();
    }
    case N_BIN: {
        eddy_val_t l = eval(e, n->args[0], row), r = eval(e, n->args[1], row);
        if (n->u.op <= OP_MOD)
            return arith(n->u.op, &l, &r);
        return compare(n->u.op, &l, &r);
    }
    case N_CALL:
        return call(e, n, row);
    }
    return eddy_val_null();
}

eddy_val_t eddy_expr_eval(eddy_expr_t *self, const eddy_val_t *row)
{
    scratch_reset(self);
    return eval(self, self->root, row);
}

eddy_val_type_t eddy_expr_static_type(const eddy_expr_t *self)
{
    const node_t *n = &self->nodes[self->root];
    switch (n->kind) {
    case N_LIT:
        return n->u.lit.type == EDDY_VAL_INT ? EDDY_VAL_FLOAT : n->u.lit.type;
    case N_FIELD:
        return EDDY_VAL_NULL;
    case N_NEG:
        return EDDY_VAL_FLOAT;
    case N_NOT:
    case N_AND:
    case N_OR:
        return EDDY_VAL_BOOL;
    case N_BIN:
        return n->u.op >= OP_EQ ? EDDY_VAL_BOOL : EDDY_VAL_FLOAT;
    case N_CALL:
        switch (n->u.fn) {
        case F_CONTAINS: case F_STARTS_WITH: case F_ENDS_WITH: case F_MATCHES: case F_IS_NULL:
            return EDDY_VAL_BOOL;
        case F_LENGTH: case F_INT: case F_FLOAT: case F_ABS: case F_TUMBLE_START: case F_HOUR:
            return EDDY_VAL_FLOAT;
        case F_COALESCE: case F_IF:
            return EDDY_VAL_NULL;
        default:
            return EDDY_VAL_STR;
        }
    }
    return EDDY_VAL_NULL;
}
