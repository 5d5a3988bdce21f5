/* pipeline_spec.c - YAML spec into eddy_pipeline_spec_t (see
 * pipeline_spec.h). The document is loaded whole (plan/yaml_doc.h) and
 * walked; unknown keys are errors (a misspelt key silently ignored is the
 * worst kind of configuration bug). Expressions are parsed here once, to
 * check them, and again by the operator that runs them. */
#include "plan/pipeline_spec.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/expr.h"
#include "plan/pipeline_join.h"
#include "plan/pipeline_spec_parse.h"
#include "plan/pipeline_window.h"
#include "plan/yaml_doc.h"

#define MAX_COLUMNS 1024
#define MAX_STEPS 256
#define MAX_PARALLELISM EDDY_PSPEC_MAX_PARALLELISM

typedef eddy_pspec_ctx_t ctx_t;

static int fail(const ctx_t *c, const eddy_ynode_t *at, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(const ctx_t *c, const eddy_ynode_t *at, const char *field, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return eddy_pspec_error(c->err, c->file, at ? at->line : 1, field, msg);
}

int eddy_pspec_error(eddy_err_t *err, const char *file, uint32_t line, const char *field,
                     const char *msg)
{
    return eddy_err_set(err, "%s:%u: %s%s%s", file, line, field ? field : "", field ? ": " : "", msg);
}

static bool is_identifier(const char *s)
{
    if (!s[0] || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return false;
    return strlen(s) <= 128;
}

/* Only these keys in a mapping. */
static int check_keys(const ctx_t *c, const eddy_ynode_t *map, const char *field,
                      const char *const *allowed)
{
    for (uint32_t i = 0; i < map->n; i++) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok |= !strcmp(map->keys[i], *a);
        if (!ok) {
            char list[200] = "";
            for (const char *const *a = allowed; *a; a++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                         a == allowed ? "" : ", ", *a);
            return fail(c, map->items[i], field, "unknown key '%.60s' (expected %s)", map->keys[i],
                        list);
        }
    }
    return 0;
}

static int scalar(const ctx_t *c, const eddy_ynode_t *n, const char *field, char **out)
{
    if (n->kind != EDDY_YNODE_SCALAR)
        return fail(c, n, field, "expected a value, not a %s",
                    n->kind == EDDY_YNODE_MAP ? "mapping" : "list");
    *out = strdup(n->scalar);
    return *out ? 0 : eddy_err_set(c->err, "out of memory");
}

static int uint_value(const ctx_t *c, const eddy_ynode_t *n, const char *field, uint32_t min,
                      uint32_t max, uint32_t *out)
{
    if (n->kind != EDDY_YNODE_SCALAR || n->quoted)
        return fail(c, n, field, "expected a number");
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(n->scalar, &end, 10);
    if (errno || end == n->scalar || *end || n->scalar[0] == '-' || v < min || v > max)
        return fail(c, n, field, "'%.40s' is not a number in %u..%u", n->scalar, min, max);
    *out = (uint32_t)v;
    return 0;
}

static int parse_columns(const ctx_t *c, const eddy_ynode_t *n, eddy_pipeline_spec_t *s)
{
    if (n->kind != EDDY_YNODE_SEQ || n->n == 0)
        return fail(c, n, "source.columns", "expected a list of column names");
    if (n->n > MAX_COLUMNS)
        return fail(c, n, "source.columns", "more than %u columns", MAX_COLUMNS);
    s->columns = calloc(n->n, sizeof *s->columns);
    if (!s->columns)
        return eddy_err_set(c->err, "out of memory");
    for (uint32_t i = 0; i < n->n; i++) {
        char field[48];
        snprintf(field, sizeof field, "source.columns[%u]", i);
        if (scalar(c, n->items[i], field, &s->columns[i]) < 0)
            return -1;
        s->n_columns = i + 1;
        if (!is_identifier(s->columns[i]))
            return fail(c, n->items[i], field,
                        "'%.60s' is not a column name (letters, digits, _; not first a digit)",
                        s->columns[i]);
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(s->columns[j], s->columns[i]))
                return fail(c, n->items[i], field, "column '%s' named twice", s->columns[i]);
    }
    return 0;
}

static int parse_source(const ctx_t *c, const eddy_ynode_t *n, eddy_pipeline_spec_t *s)
{
    static const char *const keys[] = {"input", "format", "columns", "ragged", "parallelism", NULL};
    if (!n)
        return fail(c, NULL, "source", "missing: a pipeline reads a source: {format: csv|json|text, "
                    "columns: [...]}");
    if (!n || n->kind != EDDY_YNODE_MAP)
        return fail(c, n, "source", "expected a mapping with format and columns");
    if (check_keys(c, n, "source", keys) < 0)
        return -1;
    const eddy_ynode_t *v;
    if ((v = eddy_ynode_get(n, "input")) && scalar(c, v, "source.input", &s->input) < 0)
        return -1;
    v = eddy_ynode_get(n, "format");
    if (v && scalar(c, v, "source.format", &s->format) < 0)
        return -1;
    if (!v && !(s->format = strdup("text")))
        return eddy_err_set(c->err, "out of memory");
    if (strcmp(s->format, "csv") && strcmp(s->format, "json") && strcmp(s->format, "text"))
        return fail(c, v, "source.format", "'%.40s' is not csv, json or text", s->format);
    if ((v = eddy_ynode_get(n, "ragged"))) {
        if (v->kind != EDDY_YNODE_SCALAR || (strcmp(v->scalar, "true") && strcmp(v->scalar, "false")))
            return fail(c, v, "source.ragged", "expected true or false");
        s->ragged = !strcmp(v->scalar, "true");
        if (s->ragged && strcmp(s->format, "csv"))
            return fail(c, v, "source.ragged", "applies to csv only");
    }
    if ((v = eddy_ynode_get(n, "parallelism")) &&
        uint_value(c, v, "source.parallelism", 1, MAX_PARALLELISM, &s->parallelism) < 0)
        return -1;
    v = eddy_ynode_get(n, "columns");
    if (!v && strcmp(s->format, "text"))
        return fail(c, n, "source", "%s input needs columns", s->format);
    if (v && parse_columns(c, v, s) < 0)
        return -1;
    if (!v) {
        s->columns = calloc(1, sizeof *s->columns);
        if (!s->columns || !(s->columns[0] = strdup("line")))
            return eddy_err_set(c->err, "out of memory");
        s->n_columns = 1;
    }
    if (!strcmp(s->format, "text") && s->n_columns != 1)
        return fail(c, v, "source.columns", "text input has one column (the line)");
    return 0;
}

/* Checks text as an expression over cols. */
static int check_expr(const ctx_t *c, const eddy_ynode_t *at, const char *field, const char *text,
                      char **cols, uint32_t n)
{
    eddy_err_t e = {{0}};
    eddy_expr_t *x = eddy_expr_new(text, (const char *const *)cols, n, &e);
    if (!x)
        return fail(c, at, field, "%s", e.msg);
    eddy_expr_destroy(&x);
    return 0;
}

static const char *type_name(eddy_val_type_t t)
{
    return t == EDDY_VAL_BOOL ? "a boolean" : t == EDDY_VAL_STR ? "a string" : "a number";
}

/* Type mismatch: text's value, where its form tells, is not of type want
 * (EDDY_VAL_BOOL, or EDDY_VAL_FLOAT for a number). */
static int check_type(const ctx_t *c, const eddy_ynode_t *at, const char *field, const char *text,
                      char **cols, uint32_t n, eddy_val_type_t want)
{
    eddy_err_t e = {{0}};
    eddy_expr_t *x = eddy_expr_new(text, (const char *const *)cols, n, &e);
    if (!x)
        return fail(c, at, field, "%s", e.msg);
    eddy_val_type_t t = eddy_expr_static_type(x);
    eddy_expr_destroy(&x);
    if (t == EDDY_VAL_NULL || t == want)
        return 0;
    return fail(c, at, field, "type mismatch: '%.80s' is %s, %s is needed here", text, type_name(t),
                type_name(want));
}

static int parse_map(const ctx_t *c, const eddy_ynode_t *v, const char *field, eddy_pstep_t *st,
                     char **cols, uint32_t n_cols)
{
    if (v->kind != EDDY_YNODE_MAP || v->n == 0)
        return fail(c, v, field, "expected a mapping of output column: expression");
    if (v->n > MAX_COLUMNS)
        return fail(c, v, field, "more than %u columns", MAX_COLUMNS);
    st->columns = calloc(v->n, sizeof *st->columns);
    st->exprs = calloc(v->n, sizeof *st->exprs);
    if (!st->columns || !st->exprs)
        return eddy_err_set(c->err, "out of memory");
    for (uint32_t i = 0; i < v->n; i++) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s.%.60s", field, v->keys[i]);
        if (!is_identifier(v->keys[i]))
            return fail(c, v->items[i], sub, "'%.60s' is not a column name", v->keys[i]);
        st->columns[i] = strdup(v->keys[i]);
        st->n = i + 1;
        if (!st->columns[i] || scalar(c, v->items[i], sub, &st->exprs[i]) < 0)
            return st->columns[i] ? -1 : eddy_err_set(c->err, "out of memory");
        if (check_expr(c, v->items[i], sub, st->exprs[i], cols, n_cols) < 0)
            return -1;
    }
    return 0;
}

/* A step's parallelism and max_parallelism (key groups: keyed steps only). */
static int parse_step_parallelism(const ctx_t *c, const eddy_ynode_t *m, const char *field,
                                  eddy_pstep_t *st)
{
    char sub[160];
    const eddy_ynode_t *v;
    snprintf(sub, sizeof sub, "%s.parallelism", field);
    if ((v = eddy_ynode_get(m, "parallelism")) &&
        uint_value(c, v, sub, 1, MAX_PARALLELISM, &st->parallelism) < 0)
        return -1;
    snprintf(sub, sizeof sub, "%s.max_parallelism", field);
    if (!(v = eddy_ynode_get(m, "max_parallelism")))
        return 0;
    if (!eddy_pstep_keyed(st))
        return fail(c, v, sub, "only keyed steps (join, key_by, window, aggregate, max_by) have "
                    "key groups");
    if (uint_value(c, v, sub, 1, MAX_PARALLELISM, &st->max_parallelism) < 0)
        return -1;
    if (st->parallelism > st->max_parallelism)
        return fail(c, v, sub, "%u is below the step's parallelism %u", st->max_parallelism,
                    st->parallelism);
    return 0;
}

/* A step's `uid:`: a stable operator id ([A-Za-z0-9_.-], at most 48
 * characters), unique among the spec's steps. */
static int parse_step_uid(const ctx_t *c, const eddy_ynode_t *m, const char *field,
                          const eddy_pipeline_spec_t *s, eddy_pstep_t *st)
{
    const eddy_ynode_t *v = eddy_ynode_get(m, "uid");
    if (!v)
        return 0;
    char sub[160];
    snprintf(sub, sizeof sub, "%s.uid", field);
    if (scalar(c, v, sub, &st->uid) < 0)
        return -1;
    size_t n = strlen(st->uid);
    if (n == 0 || n > 48 || strspn(st->uid, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                            "0123456789_.-") != n)
        return fail(c, v, sub, "expected 1 to 48 letters, digits, '_', '.' or '-'");
    for (uint32_t i = 0; i + 1 < s->n_steps; i++)
        if (s->steps[i].uid && !strcmp(s->steps[i].uid, st->uid))
            return fail(c, v, sub, "steps[%u] has the uid '%s' too", s->steps[i].index, st->uid);
    return 0;
}

static int parse_steps(const ctx_t *c, const eddy_ynode_t *n, eddy_pipeline_spec_t *s)
{
    static const char *const kinds[] = {"filter", "map", "key_by", "window", "aggregate",
                                        "max_by", "join", "union", "plugin", NULL};
    static const char *const common[] = {"parallelism", "max_parallelism", "uid", NULL};
    static const char *const plugin_keys[] = {"plugin", "config", "columns", "parallelism",
                                              "max_parallelism", "uid", NULL};
    const char *prefix = c->prefix ? c->prefix : "";
    if (n->kind != EDDY_YNODE_SEQ)
        return fail(c, n, "steps", "expected a list of steps");
    if (n->n > MAX_STEPS)
        return fail(c, n, "steps", "more than %u steps", MAX_STEPS);
    s->steps = calloc(n->n ? n->n : 1, sizeof *s->steps);
    if (!s->steps)
        return eddy_err_set(c->err, "out of memory");
    char **cols = s->columns;
    uint32_t n_cols = s->n_columns;
    for (uint32_t i = 0; i < n->n; i++) {
        const eddy_ynode_t *m = n->items[i];
        char field[128];
        snprintf(field, sizeof field, "%ssteps[%u]", prefix, i);
        const char *kind = NULL;
        const eddy_ynode_t *body = NULL;
        for (uint32_t k = 0; m->kind == EDDY_YNODE_MAP && k < m->n; k++)
            for (const char *const *a = kinds; *a; a++)
                if (!strcmp(m->keys[k], *a) && !kind) {
                    kind = *a;
                    body = m->items[k];
                }
        if (m->kind != EDDY_YNODE_MAP || !kind) {
            if (m->kind == EDDY_YNODE_MAP && m->n > 0)
                return check_keys(c, m, field, kinds);
            return fail(c, m, field, "expected one of: filter: EXPR, map: {COLUMN: EXPR, ...}, "
                        "key_by: EXPR, window: {...}, aggregate: {COLUMN: FUNC(EXPR), ...}, "
                        "max_by: EXPR, join: {...}, union: {...}, plugin: NAME");
        }
        const char *allowed[8] = {kind, common[0], common[1], common[2], NULL};
        if (check_keys(c, m, field, !strcmp(kind, "plugin") ? plugin_keys : allowed) < 0)
            return -1;
        eddy_pstep_t *st = &s->steps[s->n_steps++];
        st->line = m->line;
        st->index = i;
        char base[128];
        snprintf(base, sizeof base, "%s", field);
        snprintf(field + strlen(field), sizeof field - strlen(field), ".%s", kind);
        if (!strcmp(kind, "filter")) {
            st->kind = EDDY_PSTEP_FILTER;
            if (scalar(c, body, field, &st->filter) < 0 ||
                check_expr(c, body, field, st->filter, cols, n_cols) < 0 ||
                check_type(c, body, field, st->filter, cols, n_cols, EDDY_VAL_BOOL) < 0)
                return -1;
        } else if (!strcmp(kind, "map")) {
            st->kind = EDDY_PSTEP_MAP;
            if (parse_map(c, body, field, st, cols, n_cols) < 0)
                return -1;
        } else if (!strcmp(kind, "join")) {
            st->kind = EDDY_PSTEP_JOIN;
            if (c->prefix)
                return fail(c, m, field, "a join's other side cannot itself join");
            if (eddy_pipeline_join_parse(c, body, field, s, cols, n_cols, st) < 0)
                return -1;
        } else if (!strcmp(kind, "union")) {
            st->kind = EDDY_PSTEP_JOIN; /* a join without keys or state */
            if (c->prefix)
                return fail(c, m, field, "a join's other side cannot itself union");
            if (eddy_pipeline_union_parse(c, body, field, s, cols, n_cols, st) < 0)
                return -1;
        } else if (strcmp(kind, "plugin")) {
            /* key_by, window, aggregate, max_by (plan/pipeline_window.h) */
            if (c->prefix)
                return fail(c, m, field, "a join's other side has no keyed steps (key_by, window, "
                            "aggregate, max_by): key the rows after the join");
            if (eddy_pipeline_parse_stateful(c->file, m, kind, body, field, s, &cols, &n_cols,
                                             c->err) < 0)
                return -1;
        } else {
            st->kind = EDDY_PSTEP_PLUGIN;
            if (eddy_pipeline_plugin_step_parse(c, m, base, cols, n_cols, st) < 0)
                return -1;
        }
        if (parse_step_parallelism(c, m, base, st) < 0 || parse_step_uid(c, m, base, s, st) < 0)
            return -1;
        if (eddy_pstep_sets_columns(st)) {
            cols = st->columns;
            n_cols = st->n;
        }
    }
    return eddy_pipeline_check_stateful(c->file, s, c->err);
}

static int parse_sink(const ctx_t *c, const eddy_ynode_t *n, eddy_pipeline_spec_t *s)
{
    static const char *const keys[] = {"output", NULL};
    if (n->kind != EDDY_YNODE_MAP)
        return fail(c, n, "sink", "expected a mapping (output: FILE)");
    if (check_keys(c, n, "sink", keys) < 0)
        return -1;
    const eddy_ynode_t *v = eddy_ynode_get(n, "output");
    return v ? scalar(c, v, "sink.output", &s->output) : 0;
}

/* Key groups are job-wide in eddy: keyed steps that set max_parallelism
 * must agree with each other and with the pipeline's. */
static int key_groups(const ctx_t *c, eddy_pipeline_spec_t *s)
{
    const eddy_pstep_t *first = NULL;
    for (uint32_t i = 0; i < s->n_steps; i++) {
        const eddy_pstep_t *st = &s->steps[i];
        if (!st->max_parallelism)
            continue;
        if (s->max_parallelism && st->max_parallelism != s->max_parallelism) {
            char field[64];
            snprintf(field, sizeof field, "steps[%u].max_parallelism", st->index);
            eddy_ynode_t at = {.line = st->line};
            return fail(c, &at, field, "%u, but %s %u: key groups are the same for every keyed "
                        "step of a job", st->max_parallelism,
                        first ? "an earlier keyed step says" : "the pipeline's max_parallelism is",
                        s->max_parallelism);
        }
        s->max_parallelism = st->max_parallelism;
        first = st;
    }
    for (uint32_t i = 0; i < s->n_steps; i++)
        if (s->steps[i].parallelism > (s->max_parallelism ? s->max_parallelism : MAX_PARALLELISM) &&
            eddy_pstep_keyed(&s->steps[i])) {
            char field[64];
            snprintf(field, sizeof field, "steps[%u].parallelism", s->steps[i].index);
            eddy_ynode_t at = {.line = s->steps[i].line};
            return fail(c, &at, field, "%u is above the key groups (max_parallelism %u)",
                        s->steps[i].parallelism, s->max_parallelism);
        }
    return 0;
}

/* The spec of document root (see eddy_pipeline_spec_from_tree). */
static eddy_pipeline_spec_t *from_tree(const ctx_t *cp, const eddy_ynode_t *root)
{
    static const char *const keys[] = {"name", "source", "steps", "sink", "parallelism",
                                       "max_parallelism", NULL};
    ctx_t c = *cp;
    eddy_err_t *err = c.err;
    eddy_pipeline_spec_t *s = calloc(1, sizeof *s);
    if (s)
        s->time_column = -1;
    const eddy_ynode_t *v;
    int rc = s ? 0 : eddy_err_set(err, "out of memory");
    if (rc == 0 && (!root || root->kind != EDDY_YNODE_MAP))
        rc = fail(&c, root, NULL, "a pipeline is a mapping with source, steps and sink");
    if (rc == 0)
        rc = check_keys(&c, root, NULL, keys);
    if (rc == 0 && (v = eddy_ynode_get(root, "name")))
        rc = scalar(&c, v, "name", &s->name);
    if (rc == 0)
        rc = parse_source(&c, eddy_ynode_get(root, "source"), s);
    if (rc == 0 && (v = eddy_ynode_get(root, "parallelism")) && !s->parallelism)
        rc = uint_value(&c, v, "parallelism", 1, MAX_PARALLELISM, &s->parallelism);
    if (rc == 0 && (v = eddy_ynode_get(root, "max_parallelism")))
        rc = uint_value(&c, v, "max_parallelism", 1, MAX_PARALLELISM, &s->max_parallelism);
    if (rc == 0 && (v = eddy_ynode_get(root, "steps")))
        rc = parse_steps(&c, v, s);
    if (rc == 0 && (v = eddy_ynode_get(root, "sink")))
        rc = parse_sink(&c, v, s);
    if (rc == 0)
        rc = key_groups(&c, s);
    if (rc < 0)
        eddy_pipeline_spec_destroy(&s);
    return s;
}

eddy_pipeline_spec_t *eddy_pipeline_spec_parse(const char *file, const char *text, size_t len,
                                               eddy_err_t *err)
{
    ctx_t c = {file ? file : "pipeline", err, NULL};
    eddy_err_t yerr = {{0}};
    eddy_ydoc_t *doc = eddy_ydoc_parse(text, len, &yerr);
    if (!doc) {
        eddy_err_set(err, "%s:%s", c.file, yerr.msg);
        return NULL;
    }
    eddy_pipeline_spec_t *s = from_tree(&c, eddy_ydoc_root(doc));
    eddy_ydoc_destroy(&doc);
    return s;
}

eddy_pipeline_spec_t *eddy_pipeline_spec_from_tree(const char *file, const eddy_ynode_t *root,
                                                   eddy_err_t *err)
{
    ctx_t c = {file ? file : "pipeline", err, NULL};
    return from_tree(&c, root);
}

static void strs_free(char **v, uint32_t n)
{
    for (uint32_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void eddy_pipeline_spec_destroy(eddy_pipeline_spec_t **self_p)
{
    eddy_pipeline_spec_t *s = self_p ? *self_p : NULL;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n_steps; i++) {
        free(s->steps[i].filter);
        free(s->steps[i].uid);
        strs_free(s->steps[i].columns, s->steps[i].n);
        strs_free(s->steps[i].exprs, s->steps[i].n);
        free(s->steps[i].expr);
        free(s->steps[i].key_column);
        eddy_pipeline_join_destroy(&s->steps[i].join);
        free(s->steps[i].plugin);
        strs_free(s->steps[i].config_keys, s->steps[i].n_config);
        strs_free(s->steps[i].config_values, s->steps[i].n_config);
        free(s->steps[i].config_quoted);
    }
    free(s->steps);
    strs_free(s->columns, s->n_columns);
    free(s->name);
    free(s->input);
    free(s->format);
    free(s->output);
    free(s);
    *self_p = NULL;
}

char **eddy_pipeline_spec_columns_at(const eddy_pipeline_spec_t *self, const uint32_t *order,
                                     uint32_t pos, uint32_t *n)
{
    char **cols = self->columns;
    *n = self->n_columns;
    for (uint32_t k = 0; k < pos && k < self->n_steps; k++) {
        const eddy_pstep_t *st = &self->steps[order ? order[k] : k];
        if (eddy_pstep_sets_columns(st)) {
            cols = st->columns;
            *n = st->n;
        }
    }
    return cols;
}

/* ---- for step kinds parsed in their own files (pipeline_spec_parse.h) ---- */

int eddy_pspec_fail(const ctx_t *c, const eddy_ynode_t *at, const char *field, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(c, at, field, "%s", msg);
}

int eddy_pspec_check_keys(const ctx_t *c, const eddy_ynode_t *map, const char *field,
                          const char *const *allowed)
{
    return check_keys(c, map, field, allowed);
}

int eddy_pspec_scalar(const ctx_t *c, const eddy_ynode_t *n, const char *field, char **out)
{
    return scalar(c, n, field, out);
}

int eddy_pspec_uint(const ctx_t *c, const eddy_ynode_t *n, const char *field, uint32_t min,
                    uint32_t max, uint32_t *out)
{
    return uint_value(c, n, field, min, max, out);
}

int eddy_pspec_check_expr(const ctx_t *c, const eddy_ynode_t *at, const char *field,
                          const char *text, char **cols, uint32_t n)
{
    return check_expr(c, at, field, text, cols, n);
}

int eddy_pspec_check_type(const ctx_t *c, const eddy_ynode_t *at, const char *field,
                          const char *text, char **cols, uint32_t n, eddy_val_type_t want)
{
    return check_type(c, at, field, text, cols, n, want);
}

bool eddy_pspec_is_identifier(const char *s)
{
    return is_identifier(s);
}

int eddy_pspec_parse_steps(const ctx_t *c, const eddy_ynode_t *n, eddy_pipeline_spec_t *s)
{
    return parse_steps(c, n, s);
}
