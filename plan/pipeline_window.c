/* pipeline_window.c - the stateful steps of a pipeline spec (see
 * pipeline_window.h): their YAML, their place in the step list, and the
 * aggregate functions' text. Kept apart from pipeline_spec.c, which only
 * dispatches here, so the two grow independently. */
#include "plan/pipeline_window.h"

#include <ctype.h>
#include <inttypes.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/window.h"
#include "plan/expr.h"
#include "plan/pipeline_spec_parse.h"
#include "state/sketch_hll.h"
#include "state/sketch_quantile.h"

#define MAX_AGGS 64

static const char *const fn_names[] = {"count", "sum", "min", "max", "avg", "first", "last",
                                       "count_distinct", "quantile", "top_k"};

void eddy_pipeline_agg_clear(eddy_agg_t *agg)
{
    free(agg->arg);
    agg->arg = NULL;
}

/* The last comma of text outside quotes and parentheses, or NULL. */
static const char *last_top_comma(const char *text)
{
    const char *last = NULL;
    int depth = 0;
    char quote = 0;
    for (const char *p = text; *p; p++) {
        if (quote) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == quote)
                quote = 0;
        } else if (*p == '\'' || *p == '"') {
            quote = *p;
        } else if (*p == '(') {
            depth++;
        } else if (*p == ')') {
            depth--;
        } else if (*p == ',' && depth == 0) {
            last = p;
        }
    }
    return last;
}

static bool blank(const char *p, const char *end)
{
    for (; p < end; p++)
        if (!isspace((unsigned char)*p))
            return false;
    return true;
}

static const char *const usage = "(count, sum, min, max, avg, first, last, count_distinct, "
                                 "quantile, top_k)";

/* The constant second argument of quantile(EXPR, Q) or top_k(EXPR, K),
 * which [in, in_end) holds; *cut is where EXPR ends. */
static int constant_arg(eddy_agg_t *out, const char *in, const char *in_end, const char **cut,
                        eddy_err_t *err)
{
    bool top_k = out->fn == EDDY_AGG_TOP_K;
    char *inner = strndup(in, (size_t)(in_end - in));
    if (!inner)
        return eddy_err_set(err, "out of memory");
    const char *comma = last_top_comma(inner);
    size_t at = comma ? (size_t)(comma - inner) : 0;
    if (comma)
        inner[at] = '\0'; /* inner is EXPR now; the constant follows */
    bool two = comma && !blank(inner, inner + at) && !last_top_comma(inner);
    char *num_end = NULL;
    bool ok = false;
    if (two) {
        const char *num = inner + at + 1, *num_stop = num + strlen(num);
        while (isspace((unsigned char)*num))
            num++;
        errno = 0;
        if (top_k) {
            long long k = isdigit((unsigned char)*num) ? strtoll(num, &num_end, 10) : 0;
            ok = num_end && num_end != num && blank(num_end, num_stop) && !errno && k >= 1 &&
                 k <= EDDY_PIPELINE_TOP_K_MAX;
            out->k = ok ? (uint32_t)k : 0;
        } else {
            double q = strtod(num, &num_end);
            ok = num_end != num && blank(num_end, num_stop) && !errno && q >= 0 && q <= 1;
            out->q = q;
        }
    }
    if (ok)
        *cut = in + at;
    free(inner);
    if (ok)
        return 0;
    if (!two)
        return eddy_err_set(err, "%s takes 2 arguments, (EXPR, %s)", top_k ? "top_k" : "quantile",
                            top_k ? "K" : "Q");
    if (top_k)
        return eddy_err_set(err, "top_k's K must be an integer constant in 1..%d",
                            EDDY_PIPELINE_TOP_K_MAX);
    return eddy_err_set(err, "quantile's Q must be a number constant in 0..1");
}

int eddy_pipeline_agg_parse(const char *text, eddy_agg_t *out, eddy_err_t *err)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    const char *name = p;
    while (isalnum((unsigned char)*p) || *p == '_')
        p++;
    size_t name_len = (size_t)(p - name);
    while (isspace((unsigned char)*p))
        p++;
    const char *end = text + strlen(text);
    while (end > p && isspace((unsigned char)end[-1]))
        end--;
    if (name_len == 0 || *p != '(' || end <= p + 1 || end[-1] != ')')
        return eddy_err_set(err, "'%.60s' is not an aggregate FUNC(EXPR) %s", text, usage);
    size_t nf = sizeof fn_names / sizeof fn_names[0], f = 0;
    while (f < nf && (strlen(fn_names[f]) != name_len || strncmp(fn_names[f], name, name_len)))
        f++;
    if (f == nf)
        return eddy_err_set(err, "unknown aggregate '%.*s' %s", (int)(name_len > 40 ? 40 : name_len),
                            name, usage);
    out->fn = (eddy_agg_fn_t)f;
    const char *in = p + 1, *in_end = end - 1;
    if (out->fn == EDDY_AGG_QUANTILE || out->fn == EDDY_AGG_TOP_K) {
        const char *cut = in_end;
        if (constant_arg(out, in, in_end, &cut, err) < 0)
            return -1;
        in_end = cut;
    }
    if (blank(in, in_end)) {
        if (out->fn != EDDY_AGG_COUNT)
            return eddy_err_set(err, "%s needs an argument", fn_names[f]);
        return 0;
    }
    out->arg = strndup(in, (size_t)(in_end - in));
    return out->arg ? 0 : eddy_err_set(err, "out of memory");
}

int eddy_pipeline_duration(const char *text, int64_t *ms)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || v < 0 || text[0] == '-' || text[0] == '+')
        return -1;
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].unit)) {
            if (v > INT64_MAX / 4 / units[i].ms)
                return -1;
            *ms = v * units[i].ms;
            return 0;
        }
    return -1;
}

static int check_expr(const eddy_pspec_ctx_t *c, const eddy_ynode_t *at, const char *field, const char *text,
                      char **cols, uint32_t n)
{
    eddy_err_t e = {{0}};
    eddy_expr_t *x = eddy_expr_new(text, (const char *const *)cols, n, &e);
    if (!x)
        return eddy_pspec_fail(c, at, field, "%s", e.msg);
    eddy_expr_destroy(&x);
    return 0;
}

static int scalar_copy(const eddy_pspec_ctx_t *c, const eddy_ynode_t *n, const char *field, char **out)
{
    if (n->kind != EDDY_YNODE_SCALAR)
        return eddy_pspec_fail(c, n, field, "expected a value, not a %s",
                     n->kind == EDDY_YNODE_MAP ? "mapping" : "list");
    *out = strdup(n->scalar);
    return *out ? 0 : eddy_err_set(c->err, "out of memory");
}

/* The key_by that the step at index pos belongs to (one not yet closed by
 * an aggregate or max_by), or NULL. */
static const eddy_pstep_t *open_key_by(const eddy_pipeline_spec_t *s, uint32_t pos)
{
    for (uint32_t i = pos; i-- > 0;) {
        const eddy_pstep_t *st = &s->steps[i];
        if (st->kind == EDDY_PSTEP_AGGREGATE || st->kind == EDDY_PSTEP_MAX_BY)
            return NULL;
        if (st->kind == EDDY_PSTEP_KEY_BY)
            return st;
    }
    return NULL;
}

static int duration_key(const eddy_pspec_ctx_t *c, const eddy_ynode_t *w, const char *field, const char *key,
                        int64_t *ms)
{
    const eddy_ynode_t *v = eddy_ynode_get(w, key);
    if (!v)
        return 0;
    char sub[120];
    snprintf(sub, sizeof sub, "%s.%s", field, key);
    if (v->kind != EDDY_YNODE_SCALAR || eddy_pipeline_duration(v->scalar, ms) < 0)
        return eddy_pspec_fail(c, v, sub, "'%.40s' is not a duration (like 10s, 500ms, 2m, 1h; a bare "
                     "number is ms)", v->kind == EDDY_YNODE_SCALAR ? v->scalar : "");
    return 1;
}

static int parse_event_time(const eddy_pspec_ctx_t *c, const eddy_ynode_t *w, const char *field,
                            eddy_pipeline_spec_t *s, uint32_t pos)
{
    const eddy_ynode_t *ts = eddy_ynode_get(w, "timestamp");
    bool earlier = false;
    for (uint32_t i = 0; i < pos; i++)
        if (s->steps[i].kind == EDDY_PSTEP_WINDOW) {
            earlier = true;
            if (s->steps[i].window.processing)
                return eddy_pspec_fail(c, w, field, "an event-time window after a processing-time one has "
                             "no event times to use");
        }
    char sub[120];
    snprintf(sub, sizeof sub, "%s.timestamp", field);
    if (earlier) {
        /* Rows out of a window carry its end - 1 as their time; the
         * source's watermark already follows the first window's times. */
        if (ts || eddy_ynode_get(w, "watermark_delay"))
            return eddy_pspec_fail(c, ts ? ts : w, ts ? sub : field,
                         "a window after a window runs on the first one's result times (its "
                         "window_end - 1); timestamp and watermark_delay belong to the first");
        return 0;
    }
    if (!ts)
        return eddy_pspec_fail(c, w, field, "an event-time window needs timestamp: COLUMN (epoch ms)");
    /* Event time is assigned where the watermark is made, at the source,
     * by a timestamp function that takes no config: so it reads a column of
     * the raw csv line by position (operators/pipeline_agg.h). */
    if (ts->kind != EDDY_YNODE_SCALAR || strcmp(s->format, "csv"))
        return eddy_pspec_fail(c, ts, sub, "event time reads a column of a csv source (timestamp: COLUMN)");
    int32_t col = -1;
    for (uint32_t i = 0; i < s->n_columns; i++)
        if (!strcmp(s->columns[i], ts->scalar))
            col = (int32_t)i;
    if (col < 0)
        return eddy_pspec_fail(c, ts, sub, "'%.60s' is not a source column (event time is read from the "
                     "source line)", ts->scalar);
    if (col >= EDDY_PIPELINE_TIME_COLUMNS)
        return eddy_pspec_fail(c, ts, sub, "event time must be one of the first %d source columns",
                     EDDY_PIPELINE_TIME_COLUMNS);
    s->time_column = col;
    int64_t delay = 0;
    if (duration_key(c, w, field, "watermark_delay", &delay) < 0)
        return -1;
    s->watermark_delay_ms = delay;
    return 0;
}

static int parse_window(const eddy_pspec_ctx_t *c, const eddy_ynode_t *w, const char *field,
                        eddy_pipeline_spec_t *s, eddy_pstep_t *st, uint32_t pos)
{
    static const char *const keys[] = {"type", "size", "slide", "step", "gap", "time", "timestamp",
                                       "watermark_delay", "lateness", NULL};
    if (w->kind != EDDY_YNODE_MAP)
        return eddy_pspec_fail(c, w, field, "expected a mapping {type: tumbling|sliding|session|cumulate, "
                               "size, ...}");
    for (uint32_t i = 0; i < w->n; i++) {
        bool ok = false;
        for (const char *const *k = keys; *k; k++)
            ok |= !strcmp(w->keys[i], *k);
        if (!ok)
            return eddy_pspec_fail(c, w->items[i], field, "unknown key '%.60s' (expected type, size, slide, "
                         "step, gap, time, timestamp, watermark_delay, lateness)", w->keys[i]);
    }
    if (!open_key_by(s, pos) || s->steps[pos - 1].kind == EDDY_PSTEP_WINDOW)
        return eddy_pspec_fail(c, w, field, "a window groups keyed rows: it needs a key_by before it");
    eddy_pwindow_t *win = &st->window;
    const eddy_ynode_t *type = eddy_ynode_get(w, "type");
    char sub[120];
    snprintf(sub, sizeof sub, "%s.type", field);
    if (!type || type->kind != EDDY_YNODE_SCALAR ||
        (strcmp(type->scalar, "tumbling") && strcmp(type->scalar, "sliding") &&
         strcmp(type->scalar, "session") && strcmp(type->scalar, "cumulate")))
        return eddy_pspec_fail(c, type ? type : w, sub, "expected tumbling, sliding, session or "
                               "cumulate");
    snprintf(win->type, sizeof win->type, "%s", type->scalar);
    bool session = !strcmp(win->type, "session"), sliding = !strcmp(win->type, "sliding");
    int has_size = duration_key(c, w, field, "size", &win->size_ms);
    int has_slide = duration_key(c, w, field, "slide", &win->slide_ms);
    int has_gap = duration_key(c, w, field, "gap", &win->gap_ms);
    int has_late = duration_key(c, w, field, "lateness", &win->lateness_ms);
    if (has_size < 0 || has_slide < 0 || has_gap < 0 || has_late < 0)
        return -1;
    if (session ? (!has_gap || win->gap_ms == 0 || has_size || has_slide)
                : (!has_size || win->size_ms == 0 || has_gap))
        return eddy_pspec_fail(c, w, field, session ? "a session window takes gap (> 0), not size or slide"
                                          : "a %s window takes size (> 0), not gap", win->type);
    if (sliding != (has_slide > 0) || (sliding && win->slide_ms == 0))
        return eddy_pspec_fail(c, w, field, sliding ? "a sliding window needs slide (> 0)"
                                          : "slide is for sliding windows");
    if (sliding && win->size_ms / win->slide_ms > 1000)
        return eddy_pspec_fail(c, w, field, "size / slide puts a row in more than 1000 windows");
    /* cumulate: the step is kept as slide_ms (its windows end every step) */
    bool cumulate = !strcmp(win->type, "cumulate");
    int64_t step = 0;
    int has_step = duration_key(c, w, field, "step", &step);
    if (has_step < 0)
        return -1;
    if (cumulate != (has_step > 0) || (cumulate && (step == 0 || win->size_ms % step)))
        return eddy_pspec_fail(c, w, field, cumulate ? "a cumulate window needs step (> 0, dividing "
                                                       "size)" : "step is for cumulate windows");
    if (cumulate && win->size_ms / step > 1000)
        return eddy_pspec_fail(c, w, field, "size / step puts a row in more than 1000 windows");
    if (cumulate)
        win->slide_ms = step;
    const eddy_ynode_t *time = eddy_ynode_get(w, "time");
    snprintf(sub, sizeof sub, "%s.time", field);
    if (time && (time->kind != EDDY_YNODE_SCALAR ||
                 (strcmp(time->scalar, "event") && strcmp(time->scalar, "processing"))))
        return eddy_pspec_fail(c, time, sub, "expected event or processing");
    win->processing = time && !strcmp(time->scalar, "processing");
    if (win->processing) {
        if (has_late || eddy_ynode_get(w, "timestamp") || eddy_ynode_get(w, "watermark_delay"))
            return eddy_pspec_fail(c, w, field, "timestamp, watermark_delay and lateness are for event time");
        return 0;
    }
    return parse_event_time(c, w, field, s, pos);
}

static bool named(char **v, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] && !strcmp(v[i], name))
            return true;
    return false;
}

static int parse_aggregate(const eddy_pspec_ctx_t *c, const eddy_ynode_t *v, const char *field,
                           const eddy_pstep_t *key_by, eddy_pstep_t *st, char **cols, uint32_t n_cols)
{
    if (v->kind != EDDY_YNODE_MAP || v->n == 0)
        return eddy_pspec_fail(c, v, field, "expected a mapping of output column: FUNC(EXPR)");
    if (v->n > MAX_AGGS)
        return eddy_pspec_fail(c, v, field, "more than %u aggregates", MAX_AGGS);
    uint32_t fixed = st->windowed ? 3 : 1, total = fixed + v->n;
    st->columns = calloc(total, sizeof *st->columns);
    st->exprs = calloc(total, sizeof *st->exprs);
    if (!st->columns || !st->exprs)
        return eddy_err_set(c->err, "out of memory");
    st->n = total;
    st->columns[0] = strdup(key_by->key_column);
    if (st->windowed) {
        st->columns[1] = strdup(EDDY_PIPELINE_WINDOW_START);
        st->columns[2] = strdup(EDDY_PIPELINE_WINDOW_END);
    }
    for (uint32_t i = 0; i < fixed; i++)
        if (!st->columns[i])
            return eddy_err_set(c->err, "out of memory");
    for (uint32_t i = 0; i < v->n; i++) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s.%.60s", field, v->keys[i]);
        const char *name = v->keys[i];
        bool ident = isalpha((unsigned char)name[0]) || name[0] == '_';
        for (const char *p = name; ident && *p; p++)
            ident = isalnum((unsigned char)*p) || *p == '_';
        if (!ident || strlen(name) > 128)
            return eddy_pspec_fail(c, v->items[i], sub, "'%.60s' is not a column name", name);
        if (named(st->columns, fixed + i, name))
            return eddy_pspec_fail(c, v->items[i], sub, "column '%s' named twice (the output has %s%s)", name,
                         key_by->key_column, st->windowed ? ", window_start, window_end" : "");
        st->columns[fixed + i] = strdup(name);
        if (!st->columns[fixed + i] || scalar_copy(c, v->items[i], sub, &st->exprs[fixed + i]) < 0)
            return st->columns[fixed + i] ? -1 : eddy_err_set(c->err, "out of memory");
        eddy_agg_t agg;
        eddy_err_t e = {{0}};
        if (eddy_pipeline_agg_parse(st->exprs[fixed + i], &agg, &e) < 0)
            return eddy_pspec_fail(c, v->items[i], sub, "%s", e.msg);
        int rc = agg.arg ? check_expr(c, v->items[i], sub, agg.arg, cols, n_cols) : 0;
        eddy_pipeline_agg_clear(&agg);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int eddy_pipeline_parse_stateful(const char *file, const eddy_ynode_t *m, const char *what,
                                 const eddy_ynode_t *v, const char *field, eddy_pipeline_spec_t *s,
                                 char ***cols, uint32_t *n_cols, eddy_err_t *err)
{
    eddy_pspec_ctx_t c = {file, err, NULL};
    uint32_t pos = s->n_steps - 1;
    eddy_pstep_t *st = &s->steps[pos];
    if (!strcmp(what, "window")) {
        st->kind = EDDY_PSTEP_WINDOW;
        return parse_window(&c, v, field, s, st, pos);
    }
    if (!strcmp(what, "key_by")) {
        st->kind = EDDY_PSTEP_KEY_BY;
        if (scalar_copy(&c, v, field, &st->expr) < 0 ||
            check_expr(&c, v, field, st->expr, *cols, *n_cols) < 0)
            return -1;
        /* A key that is a column keeps its name in an aggregate's output. */
        const char *p = st->expr;
        while (*p == ' ')
            p++;
        size_t len = strlen(p);
        while (len && p[len - 1] == ' ')
            len--;
        bool column = false;
        for (uint32_t i = 0; i < *n_cols; i++)
            column |= strlen((*cols)[i]) == len && !strncmp((*cols)[i], p, len);
        st->key_column = column ? strndup(p, len) : strdup("key");
        return st->key_column ? 0 : eddy_err_set(err, "out of memory");
    }
    const eddy_pstep_t *key_by = open_key_by(s, pos);
    if (!key_by)
        return eddy_pspec_fail(&c, m, field, "%s works per key: it needs a key_by before it", what);
    st->windowed = s->steps[pos - 1].kind == EDDY_PSTEP_WINDOW;
    if (!strcmp(what, "max_by")) {
        st->kind = EDDY_PSTEP_MAX_BY;
        return scalar_copy(&c, v, field, &st->expr) < 0 ||
                       check_expr(&c, v, field, st->expr, *cols, *n_cols) < 0
                   ? -1
                   : 0;
    }
    st->kind = EDDY_PSTEP_AGGREGATE;
    if (parse_aggregate(&c, v, field, key_by, st, *cols, *n_cols) < 0)
        return -1;
    st->state = (int)eddy_pipeline_agg_state(
        st, st->windowed && !strcmp(s->steps[pos - 1].window.type, "session"));
    *cols = st->columns;
    *n_cols = st->n;
    return 0;
}

int eddy_pipeline_check_stateful(const char *file, const eddy_pipeline_spec_t *s, eddy_err_t *err)
{
    for (uint32_t i = 0; i < s->n_steps; i++) {
        const eddy_pstep_t *st = &s->steps[i];
        if ((st->kind == EDDY_PSTEP_JOIN || st->kind == EDDY_PSTEP_PLUGIN) && open_key_by(s, i)) {
            char field[48];
            snprintf(field, sizeof field, "steps[%u].%s", st->index,
                     st->kind == EDDY_PSTEP_JOIN ? "join" : "plugin");
            return eddy_pspec_error(err, file, st->line, field,
                                    "cannot run between a key_by and its aggregate or max_by");
        }
        if (st->kind != EDDY_PSTEP_WINDOW)
            continue;
        bool next_ok = i + 1 < s->n_steps && (s->steps[i + 1].kind == EDDY_PSTEP_AGGREGATE ||
                                              s->steps[i + 1].kind == EDDY_PSTEP_MAX_BY);
        if (!next_ok) {
            char field[48];
            snprintf(field, sizeof field, "steps[%u].window", s->steps[i].index);
            return eddy_pspec_error(err, file, s->steps[i].line, field,
                                    "a window must be followed by aggregate or max_by");
        }
    }
    return 0;
}

size_t eddy_pipeline_agg_slot_size(eddy_agg_fn_t fn)
{
    switch (fn) {
    case EDDY_AGG_COUNT:
        return sizeof(int64_t);
    case EDDY_AGG_SUM:
    case EDDY_AGG_AVG:
        return sizeof(eddy_pipeline_sum_slot_t);
    case EDDY_AGG_COUNT_DISTINCT:
        return (EDDY_HLL_SIZE + 7) / 8 * 8;
    case EDDY_AGG_QUANTILE:
        return (EDDY_QUANTILE_SIZE + 7) / 8 * 8;
    case EDDY_AGG_TOP_K:
        return (EDDY_CMS_SIZE + 7) / 8 * 8;
    default:
        return 0; /* min, max, first, last: a value of any length */
    }
}

eddy_pipeline_state_t eddy_pipeline_agg_state(const eddy_pstep_t *st, bool session)
{
    if (st->kind != EDDY_PSTEP_AGGREGATE)
        return EDDY_PIPELINE_STATE_ROWS;
    size_t total = 0;
    bool merges = true;
    for (uint32_t i = 0; i < st->n; i++) {
        eddy_agg_t agg;
        eddy_err_t err = {{0}};
        if (!st->exprs[i])
            continue; /* the key and window columns */
        if (eddy_pipeline_agg_parse(st->exprs[i], &agg, &err) < 0)
            return EDDY_PIPELINE_STATE_ROWS;
        size_t slot = eddy_pipeline_agg_slot_size(agg.fn);
        merges = merges && (agg.fn == EDDY_AGG_COUNT || agg.fn == EDDY_AGG_COUNT_DISTINCT);
        eddy_pipeline_agg_clear(&agg);
        if (slot == 0)
            return EDDY_PIPELINE_STATE_ROWS;
        total += slot;
    }
    if (total == 0 || total > EDDY_WINDOW_MAX_ACC || (session && !merges))
        return EDDY_PIPELINE_STATE_ROWS;
    return merges ? EDDY_PIPELINE_STATE_FIXED : EDDY_PIPELINE_STATE_ORDERED;
}

const char *eddy_pipeline_state_name(eddy_pipeline_state_t state)
{
    return state == EDDY_PIPELINE_STATE_FIXED     ? "fixed"
           : state == EDDY_PIPELINE_STATE_ORDERED ? "ordered"
                                                  : "rows";
}

void eddy_pipeline_stateful_describe(const eddy_pstep_t *st, char *out, size_t size)
{
    const eddy_pwindow_t *w = &st->window;
    size_t len = 0;
    switch (st->kind) {
    case EDDY_PSTEP_KEY_BY:
        snprintf(out, size, "key_by %s", st->expr);
        return;
    case EDDY_PSTEP_MAX_BY:
        snprintf(out, size, "max_by%s [state: rows] %s", st->windowed ? " (per window)" : " (whole input)",
                 st->expr);
        return;
    case EDDY_PSTEP_WINDOW:
        if (!strcmp(w->type, "session"))
            snprintf(out, size, "window session gap %" PRId64 " ms (%s time)", w->gap_ms,
                     w->processing ? "processing" : "event");
        else {
            char slide[48] = "";
            if (w->slide_ms)
                snprintf(slide, sizeof slide, " %s %" PRId64 " ms",
                         strcmp(w->type, "cumulate") ? "slide" : "step", w->slide_ms);
            snprintf(out, size, "window %s size %" PRId64 " ms%s (%s time)", w->type, w->size_ms,
                     slide, w->processing ? "processing" : "event");
        }
        return;
    case EDDY_PSTEP_AGGREGATE:
        /* The store first: a long list of aggregates may be cut. */
        len = (size_t)snprintf(out, size, "aggregate%s [state: %s]", st->windowed ? "" : " (whole input)",
                               eddy_pipeline_state_name((eddy_pipeline_state_t)st->state));
        for (uint32_t i = 0; i < st->n && len < size; i++)
            if (st->exprs[i])
                len += (size_t)snprintf(out + len, size - len, " %s: %s", st->columns[i], st->exprs[i]);
        return;
    default:
        snprintf(out, size, "?");
    }
}
