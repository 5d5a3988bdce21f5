/* pipeline_agg.c - a pipeline's window + aggregate / max_by step and its
 * csv event-time assigners (see pipeline_agg.h).
 *
 * A firing parses the step's expressions from ctx->config (the process
 * function has no per-instance state to keep them in), reads every row of
 * the window once, and emits one row (aggregate) or the window's largest
 * rows (max_by). Numbers, and strings that are numbers, compare by value;
 * other strings bytewise (so a csv price of "9" is less than "10").
 * count_distinct, quantile and top_k fold the window's rows into the
 * sketches of state/sketch_hll.h (HyperLogLog, 1.6% standard error),
 * state/sketch_quantile.h (1% relative error) and state/sketch_cms.h
 * (count-min with a heavy-hitter table), so their answers are the ones
 * those sketches give, but the window's state is its rows: the sketches
 * bound the answer's cost, not the state's size (docs/pipelines.md). */
#include "operators/pipeline_agg.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/window.h"
#include "common/log.h"
#include "operators/etl_record.h"
#include "operators/pipeline_row.h"
#include "plan/expr.h"
#include "plan/pipeline_window.h"
#include "state/sketch_cms.h"
#include "state/sketch_hll.h"
#include "state/sketch_quantile.h"

#define MAX_AGGS 64
#define MAX_COLUMNS 1024

typedef struct agg_state {
    eddy_agg_t spec;
    eddy_expr_t *arg;
    int64_t n;           /* count: rows; sum/avg: numbers */
    int64_t isum;
    double fsum;
    bool is_float;       /* a float was added or the integer sum overflowed */
    bool have;           /* min, max, first, last: best holds a value */
    eddy_val_t best;
    int64_t best_ts;
    eddy_buf_t best_buf; /* best's string bytes; top_k: its result */
    eddy_hll_t *hll;     /* count_distinct */
    eddy_quantile_t *quantile;
    eddy_cms_t *cms;     /* top_k */
} agg_state_t;

typedef struct firing {
    eddy_strv_t cols;
    agg_state_t *aggs;
    uint32_t n_aggs;
    eddy_expr_t *max_by;
    agg_state_t top;     /* max_by: the largest value */
    eddy_val_t *row;
    eddy_buf_t scratch, out;
} firing_t;

static eddy_log_limit_t config_limit;

static void firing_clear(firing_t *f)
{
    for (uint32_t i = 0; i < f->n_aggs; i++) {
        eddy_expr_destroy(&f->aggs[i].arg);
        eddy_pipeline_agg_clear(&f->aggs[i].spec);
        eddy_buf_free(&f->aggs[i].best_buf);
        free(f->aggs[i].hll);
        free(f->aggs[i].quantile);
        free(f->aggs[i].cms);
    }
    free(f->aggs);
    eddy_expr_destroy(&f->max_by);
    eddy_buf_free(&f->top.best_buf);
    free(f->row);
    eddy_strv_clear(&f->cols);
    eddy_buf_free(&f->scratch);
    eddy_buf_free(&f->out);
}

static int firing_open(firing_t *f, const eddy_config_t *cfg, eddy_err_t *err)
{
    memset(f, 0, sizeof *f);
    if (eddy_strv_split_list(&f->cols, eddy_config_str(cfg, "columns", ""), err) < 0)
        return -1;
    if (f->cols.n == 0 || f->cols.n > MAX_COLUMNS)
        return eddy_err_set(err, "%zu columns", f->cols.n);
    const char *const *names = (const char *const *)f->cols.v;
    uint32_t n = (uint32_t)f->cols.n;
    if (!(f->row = calloc(n, sizeof *f->row)))
        return eddy_err_set(err, "out of memory");
    if (!strcmp(eddy_config_str(cfg, "mode", ""), "max_by")) {
        f->max_by = eddy_expr_new(eddy_config_str(cfg, "max_by", ""), names, n, err);
        return f->max_by ? 0 : -1;
    }
    int64_t n_aggs = eddy_config_int(cfg, "aggs", 0);
    if (n_aggs < 1 || n_aggs > MAX_AGGS)
        return eddy_err_set(err, "%" PRId64 " aggregates", n_aggs);
    if (!(f->aggs = calloc((size_t)n_aggs, sizeof *f->aggs)))
        return eddy_err_set(err, "out of memory");
    for (int64_t i = 0; i < n_aggs; i++) {
        char key[32];
        snprintf(key, sizeof key, "agg.%" PRId64, i);
        agg_state_t *a = &f->aggs[f->n_aggs++];
        if (eddy_pipeline_agg_parse(eddy_config_str(cfg, key, ""), &a->spec, err) < 0)
            return -1;
        if (a->spec.arg && !(a->arg = eddy_expr_new(a->spec.arg, names, n, err)))
            return -1;
        if (a->spec.fn == EDDY_AGG_COUNT_DISTINCT && (a->hll = malloc(sizeof *a->hll)))
            eddy_hll_init(a->hll);
        if (a->spec.fn == EDDY_AGG_QUANTILE && (a->quantile = malloc(sizeof *a->quantile)))
            eddy_quantile_init(a->quantile);
        if (a->spec.fn == EDDY_AGG_TOP_K && (a->cms = malloc(sizeof *a->cms)))
            eddy_cms_init(a->cms);
        if ((a->spec.fn == EDDY_AGG_COUNT_DISTINCT && !a->hll) ||
            (a->spec.fn == EDDY_AGG_QUANTILE && !a->quantile) ||
            (a->spec.fn == EDDY_AGG_TOP_K && !a->cms))
            return eddy_err_set(err, "out of memory");
    }
    return 0;
}

/* Numbers (and strings that are numbers) by value, else eddy_val_compare. */
static int compare(const eddy_val_t *a, const eddy_val_t *b)
{
    bool ai, bi;
    int64_t ia, ib;
    double fa, fb;
    if (!eddy_val_number(a, &ai, &ia, &fa) || !eddy_val_number(b, &bi, &ib, &fb))
        return eddy_val_compare(a, b);
    if (ai && bi)
        return ia < ib ? -1 : ia > ib;
    double x = ai ? (double)ia : fa, y = bi ? (double)ib : fb;
    return x < y ? -1 : x > y;
}

/* best = v, its string copied (row values live only until the next row). */
static int keep(agg_state_t *a, const eddy_val_t *v, int64_t ts)
{
    a->best = *v;
    a->best_ts = ts;
    a->have = true;
    if (v->type != EDDY_VAL_STR)
        return 0;
    a->best_buf.len = 0;
    if (eddy_buf_add(&a->best_buf, v->u.s.ptr, v->u.s.len) < 0)
        return -1;
    a->best.u.s.ptr = a->best_buf.p ? a->best_buf.p : "";
    return 0;
}

/* A value by its text, so the csv string "5" and the number 5 are one
 * value to count_distinct and top_k; false for null. text holds a
 * formatted non-string (64 bytes: a number's text fits). */
static bool value_text(const eddy_val_t *v, char text[64], const char **p, size_t *len)
{
    if (v->type == EDDY_VAL_NULL)
        return false;
    if (v->type == EDDY_VAL_STR) {
        *p = v->u.s.ptr;
        *len = v->u.s.len;
        return true;
    }
    size_t n = eddy_val_format(v, text, 64);
    *p = text;
    *len = n < 64 ? n : 63;
    return true;
}

static int add_value(agg_state_t *a, const eddy_val_t *v, int64_t ts)
{
    char text[64];
    const char *p;
    size_t len;
    bool is_int;
    int64_t i;
    double d;
    switch (a->spec.fn) {
    case EDDY_AGG_COUNT:
        a->n += !a->arg || v->type != EDDY_VAL_NULL;
        return 0;
    case EDDY_AGG_SUM:
    case EDDY_AGG_AVG:
        if (!eddy_val_number(v, &is_int, &i, &d))
            return 0;
        a->n++;
        a->fsum += is_int ? (double)i : d;
        if (!is_int || __builtin_add_overflow(a->isum, i, &a->isum))
            a->is_float = true;
        return 0;
    case EDDY_AGG_MIN:
    case EDDY_AGG_MAX:
        if (v->type == EDDY_VAL_NULL)
            return 0;
        if (!a->have || (a->spec.fn == EDDY_AGG_MIN ? compare(v, &a->best) < 0
                                                    : compare(v, &a->best) > 0))
            return keep(a, v, ts);
        return 0;
    case EDDY_AGG_FIRST:
        return !a->have || ts < a->best_ts ? keep(a, v, ts) : 0;
    case EDDY_AGG_LAST:
        return !a->have || ts >= a->best_ts ? keep(a, v, ts) : 0;
    case EDDY_AGG_COUNT_DISTINCT:
        if (value_text(v, text, &p, &len))
            eddy_hll_add(a->hll, p, len);
        return 0;
    case EDDY_AGG_TOP_K:
        if (value_text(v, text, &p, &len))
            eddy_cms_add(a->cms, p, len, 1);
        return 0;
    case EDDY_AGG_QUANTILE:
        if (eddy_val_number(v, &is_int, &i, &d))
            eddy_quantile_add(a->quantile, is_int ? (double)i : d);
        return 0;
    }
    return 0;
}

/* top_k's result, "v1:c1,v2:c2,...", into a->best_buf: the k values with
 * the largest estimated counts, count descending, then value bytewise
 * (eddy_cms_top's order); null when no value was counted. */
static int format_top_k(agg_state_t *a)
{
    eddy_cms_entry_t top[EDDY_CMS_TOP_K];
    size_t n = eddy_cms_top(a->cms, top, a->spec.k);
    a->best_buf.len = 0;
    a->have = n > 0;
    for (size_t i = 0; i < n; i++) {
        char count[32];
        int len = snprintf(count, sizeof count, ":%" PRIu64, top[i].count);
        if ((i && eddy_buf_add(&a->best_buf, ",", 1) < 0) ||
            eddy_buf_add(&a->best_buf, (const char *)top[i].key, top[i].len) < 0 ||
            eddy_buf_add(&a->best_buf, count, (size_t)len) < 0)
            return -1;
    }
    return 0;
}

static eddy_val_t result(const agg_state_t *a)
{
    switch (a->spec.fn) {
    case EDDY_AGG_COUNT:
        return eddy_val_int(a->n);
    case EDDY_AGG_SUM:
        return !a->n ? eddy_val_null() : a->is_float ? eddy_val_float(a->fsum) : eddy_val_int(a->isum);
    case EDDY_AGG_AVG:
        return !a->n ? eddy_val_null()
                     : eddy_val_float((a->is_float ? a->fsum : (double)a->isum) / (double)a->n);
    case EDDY_AGG_COUNT_DISTINCT:
        return eddy_val_int((int64_t)llround(eddy_hll_estimate(a->hll)));
    case EDDY_AGG_QUANTILE:
        return a->quantile->count ? eddy_val_float(eddy_quantile_quantile(a->quantile, a->spec.q))
                                  : eddy_val_null();
    case EDDY_AGG_TOP_K:
        return a->have ? eddy_val_str(a->best_buf.p, a->best_buf.len) : eddy_val_null();
    default:
        return a->have ? a->best : eddy_val_null();
    }
}

/* The row of an element without the key field in front; false when it
 * does not split into the columns (not from this pipeline's plan). */
static bool element_row(firing_t *f, const eddy_record_t *rec, eddy_record_t *body)
{
    const char *tab = memchr(rec->data, '\t', rec->len);
    *body = *rec;
    body->data = tab ? tab + 1 : rec->data + rec->len;
    body->len = tab ? rec->len - (uint32_t)(tab + 1 - rec->data) : 0;
    eddy_err_t err = {{0}};
    return eddy_row_split(body->data, body->len, f->row, (uint32_t)f->cols.n, &f->scratch, &err) == 0;
}

static void emit_aggregate(firing_t *f, const eddy_window_context_t *ctx, eddy_collector_t *out)
{
    eddy_val_t vals[MAX_AGGS + 2];
    uint32_t n = 0;
    if (eddy_config_bool(ctx->config, "windowed", true)) {
        vals[n++] = eddy_val_int(ctx->window.start);
        vals[n++] = eddy_val_int(ctx->window.end);
    }
    for (uint32_t i = 0; i < f->n_aggs; i++) {
        if (f->aggs[i].spec.fn == EDDY_AGG_TOP_K && format_top_k(&f->aggs[i]) < 0)
            return;
        vals[n++] = result(&f->aggs[i]);
    }
    f->out.len = 0;
    if (eddy_buf_add(&f->out, ctx->key, ctx->key_len) < 0 || eddy_buf_add(&f->out, "\t", 1) < 0 ||
        eddy_row_join(vals, n, &f->out) < 0 || f->out.len > UINT32_MAX)
        return;
    eddy_record_t rec = {f->out.p, (uint32_t)f->out.len, EDDY_INSERT, 1, 0};
    eddy_emit(out, &rec);
}

static void fire(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                 eddy_collector_t *out)
{
    firing_t f;
    eddy_err_t err = {{0}};
    if (firing_open(&f, ctx->config, &err) < 0) {
        /* The plan was checked when the job was built: a config that does
         * not parse did not come from jobs/pipeline.c. */
        eddy_log_limited(&config_limit, EDDY_LOG_WARN, "pipeline window: bad config: %s", err.msg);
        firing_clear(&f);
        return;
    }
    for (size_t i = 0; i < elements->count; i++) {
        eddy_record_t rec = eddy_window_element(elements, i), body;
        if (!element_row(&f, &rec, &body))
            continue;
        if (f.max_by) {
            eddy_val_t v = eddy_expr_eval(f.max_by, f.row);
            if (v.type != EDDY_VAL_NULL && (!f.top.have || compare(&v, &f.top.best) > 0))
                keep(&f.top, &v, rec.timestamp);
            continue;
        }
        for (uint32_t a = 0; a < f.n_aggs; a++) {
            agg_state_t *s = &f.aggs[a];
            eddy_val_t v = s->arg ? eddy_expr_eval(s->arg, f.row) : eddy_val_null();
            add_value(s, &v, rec.timestamp);
        }
    }
    if (!f.max_by) {
        emit_aggregate(&f, ctx, out);
    } else if (f.top.have) {
        for (size_t i = 0; i < elements->count; i++) {
            eddy_record_t rec = eddy_window_element(elements, i), body;
            if (!element_row(&f, &rec, &body))
                continue;
            eddy_val_t v = eddy_expr_eval(f.max_by, f.row);
            if (v.type == EDDY_VAL_NULL || compare(&v, &f.top.best) != 0)
                continue;
            body.kind = EDDY_INSERT;
            body.value = 1;
            eddy_emit(out, &body);
        }
    }
    firing_clear(&f);
}

static const eddy_window_udf_t window_udf = {.process = fire};

/* ---- csv event time ----------------------------------------------------- */

/* Field col of a csv line as an integer (epoch ms); 0 when it is none. */
static int64_t csv_time(const eddy_record_t *rec, uint32_t col)
{
    const char *p = rec->data, *end = rec->data + rec->len;
    bool quoted = false;
    for (uint32_t field = 0; field < col; p++) {
        if (p == end)
            return 0;
        if (*p == '"')
            quoted = !quoted;
        else if (*p == ',' && !quoted)
            field++;
    }
    if (p < end && *p == '"')
        p++;
    bool neg = p < end && *p == '-';
    p += neg;
    int64_t v = 0;
    bool digits = false;
    for (; p < end && *p >= '0' && *p <= '9'; p++, digits = true) {
        if (v > (INT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (*p - '0');
    }
    return digits ? (neg ? -v : v) : 0;
}

/* One assigner per column: the runtime calls them with the record only. */
static int64_t csv_time_0(const eddy_record_t *r) { return csv_time(r, 0); }
static int64_t csv_time_1(const eddy_record_t *r) { return csv_time(r, 1); }
static int64_t csv_time_2(const eddy_record_t *r) { return csv_time(r, 2); }
static int64_t csv_time_3(const eddy_record_t *r) { return csv_time(r, 3); }
static int64_t csv_time_4(const eddy_record_t *r) { return csv_time(r, 4); }
static int64_t csv_time_5(const eddy_record_t *r) { return csv_time(r, 5); }
static int64_t csv_time_6(const eddy_record_t *r) { return csv_time(r, 6); }
static int64_t csv_time_7(const eddy_record_t *r) { return csv_time(r, 7); }
static int64_t csv_time_8(const eddy_record_t *r) { return csv_time(r, 8); }
static int64_t csv_time_9(const eddy_record_t *r) { return csv_time(r, 9); }
static int64_t csv_time_10(const eddy_record_t *r) { return csv_time(r, 10); }
static int64_t csv_time_11(const eddy_record_t *r) { return csv_time(r, 11); }
static int64_t csv_time_12(const eddy_record_t *r) { return csv_time(r, 12); }
static int64_t csv_time_13(const eddy_record_t *r) { return csv_time(r, 13); }
static int64_t csv_time_14(const eddy_record_t *r) { return csv_time(r, 14); }
static int64_t csv_time_15(const eddy_record_t *r) { return csv_time(r, 15); }

static int64_t (*const csv_times[EDDY_PIPELINE_TIME_COLUMNS])(const eddy_record_t *) = {
    csv_time_0,  csv_time_1,  csv_time_2,  csv_time_3,  csv_time_4,  csv_time_5,
    csv_time_6,  csv_time_7,  csv_time_8,  csv_time_9,  csv_time_10, csv_time_11,
    csv_time_12, csv_time_13, csv_time_14, csv_time_15,
};

int eddy_pipeline_agg_register(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_register_window(r, EDDY_PIPELINE_WINDOW_KIND, &window_udf, err) < 0)
        return -1;
    for (uint32_t i = 0; i < EDDY_PIPELINE_TIME_COLUMNS; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s%u", EDDY_PIPELINE_CSV_TIME_PREFIX, i);
        eddy_timestamp_kind_t k = {.name = name, .timestamp = csv_times[i]};
        if (eddy_register_timestamp(r, &k, err) < 0)
            return -1;
    }
    return 0;
}
