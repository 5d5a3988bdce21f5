/* pipeline_join.c - the `join` step of a pipeline spec (see
 * pipeline_join.h): its other side (a nested list of steps over the
 * pipeline source's columns), keys, type and window, each checked against
 * the columns its side has, and the output columns it makes. */
#include "plan/pipeline_join.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/pipeline_spec_parse.h"
#include "plan/pipeline_window.h"

#define MAX_WINDOW_MS (365LL * 24 * 3600 * 1000)

static char **strs_dup(char **v, uint32_t n)
{
    char **out = calloc(n ? n : 1, sizeof *out);
    for (uint32_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(v[i]))) {
            for (uint32_t k = 0; k < i; k++)
                free(out[k]);
            free(out);
            return NULL;
        }
    return out;
}

/* "10s", "500ms", "2m", "1h" or plain milliseconds (eddy_pipeline_duration,
 * as windows read them), 1 ms to a year. */
static int duration_ms(const eddy_pspec_ctx_t *c, const eddy_ynode_t *n, const char *field,
                       int64_t *out)
{
    if (n->kind != EDDY_YNODE_SCALAR)
        return eddy_pspec_fail(c, n, field, "expected a duration (10s, 500ms, 2m, 1h)");
    int64_t ms = 0;
    if (eddy_pipeline_duration(n->scalar, &ms) < 0 || ms <= 0 || ms > MAX_WINDOW_MS)
        return eddy_pspec_fail(c, n, field, "'%.40s' is not a duration of 1 ms to a year "
                               "(10s, 500ms, 2m, 1h)", n->scalar);
    *out = ms;
    return 0;
}

/* An expression under key of map (if there), checked over cols (and to be
 * a number when number: event times, epoch ms), into *out. */
static int expr_at(const eddy_pspec_ctx_t *c, const eddy_ynode_t *map, const char *key,
                   const char *field, char **cols, uint32_t n_cols, bool number, char **out)
{
    const eddy_ynode_t *v = eddy_ynode_get(map, key);
    char sub[200];
    snprintf(sub, sizeof sub, "%s.%s", field, key);
    if (!v)
        return 0;
    if (eddy_pspec_scalar(c, v, sub, out) < 0)
        return -1;
    if (eddy_pspec_check_expr(c, v, sub, *out, cols, n_cols) < 0)
        return -1;
    return number ? eddy_pspec_check_type(c, v, sub, *out, cols, n_cols, EDDY_VAL_FLOAT) : 0;
}

/* One expression per side: names[0] for both (a column both have), or
 * names[1] for the left and names[2] for the right; one way is needed. */
static int side_exprs(const eddy_pspec_ctx_t *c, const eddy_ynode_t *map, const char *field,
                      const char *const names[3], char **lcols, uint32_t nl, char **rcols,
                      uint32_t nr, bool number, char **left, char **right)
{
    const eddy_ynode_t *both = eddy_ynode_get(map, names[0]);
    if (both && (eddy_ynode_get(map, names[1]) || eddy_ynode_get(map, names[2])))
        return eddy_pspec_fail(c, both, field, "give %s, or %s and %s, not both", names[0],
                               names[1], names[2]);
    if (expr_at(c, map, both ? names[0] : names[1], field, lcols, nl, number, left) < 0 ||
        expr_at(c, map, both ? names[0] : names[2], field, rcols, nr, number, right) < 0)
        return -1;
    if (!*left || !*right)
        return eddy_pspec_fail(c, map, field, "needs %s: COLUMN, or %s: EXPR and %s: EXPR%s",
                               names[0], names[1], names[2],
                               number ? " (each side's event time, epoch ms)" : " (the keys)");
    return 0;
}

static int parse_right(const eddy_pspec_ctx_t *c, const eddy_ynode_t *with, const char *field,
                       const eddy_pipeline_spec_t *left, eddy_pipeline_join_t *j)
{
    static const char *const keys[] = {"input", "steps", NULL};
    char sub[200];
    snprintf(sub, sizeof sub, "%s.with", field);
    if (with->kind != EDDY_YNODE_MAP)
        return eddy_pspec_fail(c, with, sub, "expected a mapping (input, steps)");
    if (eddy_pspec_check_keys(c, with, sub, keys) < 0)
        return -1;
    eddy_pipeline_spec_t *r = j->right = calloc(1, sizeof *r);
    if (!r || !(r->format = strdup(left->format)) ||
        !(r->columns = strs_dup(left->columns, left->n_columns)))
        return eddy_err_set(c->err, "out of memory");
    r->n_columns = left->n_columns;
    r->ragged = left->ragged;
    const eddy_ynode_t *v;
    char f2[220];
    snprintf(f2, sizeof f2, "%s.input", sub);
    if ((v = eddy_ynode_get(with, "input")) && eddy_pspec_scalar(c, v, f2, &r->input) < 0)
        return -1;
    if (!(v = eddy_ynode_get(with, "steps")))
        return 0;
    snprintf(f2, sizeof f2, "%s.", sub);
    eddy_pspec_ctx_t nested = {c->file, c->err, f2};
    return eddy_pspec_parse_steps(&nested, v, r);
}

/* Output columns: the left's, then (inner) the right's, renamed right_NAME
 * where the left has NAME. */
static int output_columns(const eddy_pspec_ctx_t *c, const eddy_ynode_t *at, const char *field,
                          char **lcols, uint32_t nl, char **rcols, uint32_t nr, bool semi,
                          eddy_pstep_t *st)
{
    uint32_t n = nl + (semi ? 0 : nr);
    st->columns = calloc(n, sizeof *st->columns);
    if (!st->columns)
        return eddy_err_set(c->err, "out of memory");
    for (uint32_t i = 0; i < nl; i++) {
        if (!(st->columns[i] = strdup(lcols[i])))
            return eddy_err_set(c->err, "out of memory");
        st->n = i + 1;
    }
    for (uint32_t i = 0; i < n - nl; i++) {
        char name[200];
        bool clash = false;
        for (uint32_t k = 0; k < nl; k++)
            clash |= !strcmp(lcols[k], rcols[i]);
        snprintf(name, sizeof name, "%s%s", clash ? "right_" : "", rcols[i]);
        for (uint32_t k = 0; k < st->n; k++)
            if (!strcmp(st->columns[k], name))
                return eddy_pspec_fail(c, at, field, "the output would have two columns '%s'; "
                                       "rename one side's with a map", name);
        if (!(st->columns[st->n] = strdup(name)))
            return eddy_err_set(c->err, "out of memory");
        st->n++;
    }
    return 0;
}

/* window: {size: DURATION, time: COLUMN | left_time: EXPR, right_time: EXPR}. */
static int parse_tumbling(const eddy_pspec_ctx_t *c, const eddy_ynode_t *w, const char *field,
                          char **lcols, uint32_t nl, char **rcols, uint32_t nr,
                          eddy_pipeline_join_t *j)
{
    const eddy_ynode_t *size = eddy_ynode_get(w, "size");
    char f2[220];
    snprintf(f2, sizeof f2, "%s.size", field);
    if (!size)
        return eddy_pspec_fail(c, w, field, "needs size (a tumbling window: 10s, 500ms, ...), or "
                               "from and to (an interval window)");
    if (duration_ms(c, size, f2, &j->window_ms) < 0)
        return -1;
    const char *const time_names[] = {"time", "left_time", "right_time"};
    return side_exprs(c, w, field, time_names, lcols, nl, rcols, nr, true, &j->left_time,
                      &j->right_time);
}

/* window: {from: EXPR, to: EXPR, time: EXPR | right_time: EXPR}: an
 * interval join. from and to bound each left row (its columns), time is
 * the right row's; all epoch ms. */
static int parse_interval(const eddy_pspec_ctx_t *c, const eddy_ynode_t *w, const char *field,
                          char **lcols, uint32_t nl, char **rcols, uint32_t nr,
                          eddy_pipeline_join_t *j)
{
    const eddy_ynode_t *v;
    if ((v = eddy_ynode_get(w, "size")))
        return eddy_pspec_fail(c, v, field, "size is a tumbling window's; an interval window is "
                               "bounded by from and to");
    if ((v = eddy_ynode_get(w, "left_time")))
        return eddy_pspec_fail(c, v, field, "an interval window bounds the left row by from and "
                               "to: no left_time (time or right_time is the right row's)");
    if ((v = eddy_ynode_get(w, "time")) && eddy_ynode_get(w, "right_time"))
        return eddy_pspec_fail(c, v, field, "give time or right_time, not both");
    if (!eddy_ynode_get(w, "from") || !eddy_ynode_get(w, "to"))
        return eddy_pspec_fail(c, w, field, "an interval window needs both from and to (the left "
                               "row's bounds, epoch ms)");
    if (expr_at(c, w, "from", field, lcols, nl, true, &j->left_from) < 0 ||
        expr_at(c, w, "to", field, lcols, nl, true, &j->left_to) < 0 ||
        expr_at(c, w, eddy_ynode_get(w, "time") ? "time" : "right_time", field, rcols, nr, true,
                &j->right_time) < 0)
        return -1;
    if (!j->right_time)
        return eddy_pspec_fail(c, w, field, "an interval window needs time: EXPR (the right "
                               "row's event time, epoch ms)");
    if (j->semi)
        return eddy_pspec_fail(c, w, field, "an interval window joins inner only (type: semi "
                               "takes no window or a tumbling one)");
    return 0;
}

/* st's join with its other side (body's `with`), for a join or a union. */
static int join_with(const eddy_pspec_ctx_t *c, const eddy_ynode_t *body, const char *field,
                     const eddy_pipeline_spec_t *left, eddy_pstep_t *st)
{
    eddy_pipeline_join_t *j = st->join = calloc(1, sizeof *j);
    if (!j)
        return eddy_err_set(c->err, "out of memory");
    if (!eddy_ynode_get(body, "with"))
        return eddy_pspec_fail(c, body, field, "needs with: {steps: [...]} (the other side)");
    return parse_right(c, eddy_ynode_get(body, "with"), field, left, j);
}

int eddy_pipeline_join_parse(const eddy_pspec_ctx_t *c, const eddy_ynode_t *body, const char *field,
                             const eddy_pipeline_spec_t *left, char **cols, uint32_t n_cols,
                             eddy_pstep_t *st)
{
    static const char *const keys[] = {"with", "on", "left_key", "right_key", "type", "window", NULL};
    static const char *const wkeys[] = {"size", "time", "left_time", "right_time", "from", "to",
                                        NULL};
    if (body->kind != EDDY_YNODE_MAP)
        return eddy_pspec_fail(c, body, field, "expected a mapping (with, on or left_key and "
                               "right_key, type, window)");
    if (eddy_pspec_check_keys(c, body, field, keys) < 0)
        return -1;
    if (join_with(c, body, field, left, st) < 0)
        return -1;
    eddy_pipeline_join_t *j = st->join;
    uint32_t nr;
    char **rcols = eddy_pipeline_spec_columns_at(j->right, NULL, j->right->n_steps, &nr);
    j->n_left = n_cols;
    j->n_right = nr;
    const eddy_ynode_t *v;
    if ((v = eddy_ynode_get(body, "type"))) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s.type", field);
        if (v->kind != EDDY_YNODE_SCALAR ||
            (strcmp(v->scalar, "inner") && strcmp(v->scalar, "semi") && strcmp(v->scalar, "left")))
            return eddy_pspec_fail(c, v, sub, "expected inner, semi or left");
        j->semi = !strcmp(v->scalar, "semi");
        j->left_outer = !strcmp(v->scalar, "left");
    }
    /* Keys: on: COLUMN (both sides), or left_key and right_key. */
    const char *const key_names[] = {"on", "left_key", "right_key"};
    if (side_exprs(c, body, field, key_names, cols, n_cols, rcols, nr, false, &j->left_key,
                   &j->right_key) < 0)
        return -1;
    if ((v = eddy_ynode_get(body, "window"))) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s.window", field);
        if (v->kind != EDDY_YNODE_MAP)
            return eddy_pspec_fail(c, v, sub, "expected a mapping (size, time or left_time and "
                                   "right_time; or from, to and time)");
        if (eddy_pspec_check_keys(c, v, sub, wkeys) < 0)
            return -1;
        int rc = eddy_ynode_get(v, "from") || eddy_ynode_get(v, "to")
                     ? parse_interval(c, v, sub, cols, n_cols, rcols, nr, j)
                     : parse_tumbling(c, v, sub, cols, n_cols, rcols, nr, j);
        if (rc < 0)
            return -1;
    }
    /* Without a window's end nothing says a left row will never match: an
     * append-only result cannot take its null row back. */
    if (j->left_outer && (!j->window_ms || j->left_from))
        return eddy_pspec_fail(c, eddy_ynode_get(body, "type"), field,
                               "type: left needs a tumbling window (window: {size, time}): a left "
                               "row without a match comes out when its window ends");
    return output_columns(c, body, field, cols, n_cols, rcols, nr, j->semi, st);
}

/* A union side's key: its first column's text (never null: a null key
 * would drop the row, as a join's does). */
static char *union_key(const char *col)
{
    size_t n = strlen(col) + 32;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "coalesce(string(%s), '')", col);
    return k;
}

int eddy_pipeline_union_parse(const eddy_pspec_ctx_t *c, const eddy_ynode_t *body,
                              const char *field, const eddy_pipeline_spec_t *left, char **cols,
                              uint32_t n_cols, eddy_pstep_t *st)
{
    static const char *const keys[] = {"with", NULL};
    if (body->kind != EDDY_YNODE_MAP)
        return eddy_pspec_fail(c, body, field, "expected a mapping (with)");
    if (eddy_pspec_check_keys(c, body, field, keys) < 0)
        return -1;
    if (join_with(c, body, field, left, st) < 0)
        return -1;
    eddy_pipeline_join_t *j = st->join;
    j->union_all = true;
    uint32_t nr;
    char **rcols = eddy_pipeline_spec_columns_at(j->right, NULL, j->right->n_steps, &nr);
    if (nr != n_cols)
        return eddy_pspec_fail(c, body, field, "the other side has %u columns, the rows so far "
                               "%u: a union takes them by position, so as many are needed", nr,
                               n_cols);
    j->n_left = j->n_right = n_cols;
    if (!(j->left_key = union_key(cols[0])) || !(j->right_key = union_key(rcols[0])))
        return eddy_err_set(c->err, "out of memory");
    return output_columns(c, body, field, cols, n_cols, rcols, nr, true, st);
}

const char *eddy_pipeline_join_type(const eddy_pipeline_join_t *j)
{
    return j->union_all ? "union" : j->semi ? "semi" : j->left_outer ? "left" : "inner";
}

void eddy_pipeline_join_destroy(eddy_pipeline_join_t **self_p)
{
    eddy_pipeline_join_t *j = self_p ? *self_p : NULL;
    if (!j)
        return;
    eddy_pipeline_spec_destroy(&j->right);
    free(j->left_key);
    free(j->right_key);
    free(j->left_time);
    free(j->right_time);
    free(j->left_from);
    free(j->left_to);
    free(j);
    *self_p = NULL;
}
