/* pipeline_agg.c - a pipeline's window + aggregate / max_by step and its
 * csv event-time assigners (see pipeline_agg.h).
 *
 * One aggregate's state is a fixed slot of an accumulator (count: int64;
 * sum, avg: eddy_pipeline_sum_slot_t; count_distinct: the HyperLogLog of
 * state/sketch_hll.h, 1.6% standard error; quantile: the DDSketch of
 * state/sketch_quantile.h, 1% relative error; top_k: the count-min sketch
 * with heavy hitters of state/sketch_cms.h) or, for min, max, first and
 * last, a value with its bytes. A step whose aggregates all have slots is
 * an accumulator window (api/window.h eddy_window_accumulator_t): each
 * row is folded into its windows' accumulators as it arrives and the
 * window's state is those fixed bytes (kinds "pipeline_window_fixed",
 * with merge, and "pipeline_window_ordered", without: the plan chooses,
 * plan/pipeline_window.h eddy_pipeline_agg_state). Every other step keeps
 * its rows ("pipeline_window", a process function) and folds them into the
 * same slots when the window fires, in row order ("pipeline_window_max_by"
 * for a max_by step: its rows, but only those that rank highest so far,
 * api/window.h max_by). Both paths share
 * add_value and result, so a spec's output is the same under either store.
 * Numbers, and strings that are numbers, compare by value; other strings
 * bytewise (so a csv price of "9" is less than "10"). */
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
    size_t off;          /* the fixed slot's offset in an accumulator */
    bool fixed;          /* has a fixed slot; else min, max, first, last: */
    bool have;           /* best holds a value (top_k: the result does) */
    eddy_val_t best;
    int64_t best_ts;
    eddy_buf_t best_buf; /* best's string bytes; top_k: its result */
} agg_state_t;

/* A step's parsed config: an accumulator's prepared handle, or one
 * firing's state with the rows store. */
typedef struct pagg {
    eddy_strv_t cols;
    agg_state_t *aggs;
    uint32_t n_aggs;
    bool windowed;
    size_t size;         /* bytes of the fixed slots */
    eddy_expr_t *max_by;
    agg_state_t top;     /* max_by: the largest value */
    eddy_val_t *row;
    eddy_buf_t scratch, out;
} pagg_t;

static eddy_log_limit_t config_limit;

static void pagg_destroy(pagg_t **pp)
{
    pagg_t *p = *pp;
    if (!p)
        return;
    for (uint32_t i = 0; i < p->n_aggs; i++) {
        eddy_expr_destroy(&p->aggs[i].arg);
        eddy_pipeline_agg_clear(&p->aggs[i].spec);
        eddy_buf_free(&p->aggs[i].best_buf);
    }
    free(p->aggs);
    eddy_expr_destroy(&p->max_by);
    eddy_buf_free(&p->top.best_buf);
    free(p->row);
    eddy_strv_clear(&p->cols);
    eddy_buf_free(&p->scratch);
    eddy_buf_free(&p->out);
    free(p);
    *pp = NULL;
}

static int pagg_parse(pagg_t *p, const eddy_config_t *cfg, eddy_err_t *err)
{
    if (eddy_strv_split_list(&p->cols, eddy_config_str(cfg, "columns", ""), err) < 0)
        return -1;
    if (p->cols.n == 0 || p->cols.n > MAX_COLUMNS)
        return eddy_err_set(err, "%zu columns", p->cols.n);
    const char *const *names = (const char *const *)p->cols.v;
    uint32_t n = (uint32_t)p->cols.n;
    if (!(p->row = calloc(n, sizeof *p->row)))
        return eddy_err_set(err, "out of memory");
    p->windowed = eddy_config_bool(cfg, "windowed", true);
    if (!strcmp(eddy_config_str(cfg, "mode", ""), "max_by")) {
        p->max_by = eddy_expr_new(eddy_config_str(cfg, "max_by", ""), names, n, err);
        return p->max_by ? 0 : -1;
    }
    int64_t n_aggs = eddy_config_int(cfg, "aggs", 0);
    if (n_aggs < 1 || n_aggs > MAX_AGGS)
        return eddy_err_set(err, "%" PRId64 " aggregates", n_aggs);
    if (!(p->aggs = calloc((size_t)n_aggs, sizeof *p->aggs)))
        return eddy_err_set(err, "out of memory");
    for (int64_t i = 0; i < n_aggs; i++) {
        char key[32];
        snprintf(key, sizeof key, "agg.%" PRId64, i);
        agg_state_t *a = &p->aggs[p->n_aggs++];
        if (eddy_pipeline_agg_parse(eddy_config_str(cfg, key, ""), &a->spec, err) < 0)
            return -1;
        if (a->spec.arg && !(a->arg = eddy_expr_new(a->spec.arg, names, n, err)))
            return -1;
        size_t slot = eddy_pipeline_agg_slot_size(a->spec.fn);
        a->fixed = slot > 0;
        a->off = p->size;
        p->size += slot;
    }
    return 0;
}

/* The step's config parsed (expressions compiled, slots laid out). */
static pagg_t *pagg_new(const eddy_config_t *cfg, eddy_err_t *err)
{
    pagg_t *p = calloc(1, sizeof *p);
    if (!p) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    if (pagg_parse(p, cfg, err) < 0)
        pagg_destroy(&p);
    return p;
}

/* Starts the fixed slots of a zeroed accumulator (counts and sums start
 * at zero bytes, the sketches need their headers). */
static void slots_init(const pagg_t *p, unsigned char *acc)
{
    for (uint32_t i = 0; i < p->n_aggs; i++) {
        void *slot = acc + p->aggs[i].off;
        switch (p->aggs[i].spec.fn) {
        case EDDY_AGG_COUNT_DISTINCT:
            eddy_hll_init(slot);
            break;
        case EDDY_AGG_QUANTILE:
            eddy_quantile_init(slot);
            break;
        case EDDY_AGG_TOP_K:
            eddy_cms_init(slot);
            break;
        default:
            break;
        }
    }
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

/* Folds v (of a row at time ts) into aggregate a: its slot in acc, or its
 * value so far. */
static int add_value(agg_state_t *a, unsigned char *acc, const eddy_val_t *v, int64_t ts)
{
    char text[64];
    const char *p;
    size_t len;
    bool is_int;
    int64_t i;
    double d;
    void *slot = acc + a->off;
    eddy_pipeline_sum_slot_t *sum = slot;
    switch (a->spec.fn) {
    case EDDY_AGG_COUNT:
        *(int64_t *)slot += !a->arg || v->type != EDDY_VAL_NULL;
        return 0;
    case EDDY_AGG_SUM:
    case EDDY_AGG_AVG:
        if (!eddy_val_number(v, &is_int, &i, &d))
            return 0;
        sum->n++;
        sum->fsum += is_int ? (double)i : d;
        if (!is_int || __builtin_add_overflow(sum->isum, i, &sum->isum))
            sum->is_float = 1;
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
            eddy_hll_add(slot, p, len);
        return 0;
    case EDDY_AGG_TOP_K:
        if (value_text(v, text, &p, &len))
            eddy_cms_add(slot, p, len, 1);
        return 0;
    case EDDY_AGG_QUANTILE:
        if (eddy_val_number(v, &is_int, &i, &d))
            eddy_quantile_add(slot, is_int ? (double)i : d);
        return 0;
    }
    return 0;
}

/* into = into merged with from, slot by slot (fixed slots only). */
static void slots_merge(const pagg_t *p, unsigned char *into, const unsigned char *from)
{
    for (uint32_t k = 0; k < p->n_aggs; k++) {
        size_t off = p->aggs[k].off;
        eddy_pipeline_sum_slot_t *a = (void *)(into + off);
        const eddy_pipeline_sum_slot_t *b = (const void *)(from + off);
        switch (p->aggs[k].spec.fn) {
        case EDDY_AGG_COUNT:
            *(int64_t *)(into + off) += *(const int64_t *)(from + off);
            break;
        case EDDY_AGG_SUM:
        case EDDY_AGG_AVG:
            a->n += b->n;
            a->fsum += b->fsum;
            if (b->is_float || __builtin_add_overflow(a->isum, b->isum, &a->isum))
                a->is_float = 1;
            break;
        case EDDY_AGG_COUNT_DISTINCT:
            eddy_hll_merge((void *)(into + off), (const void *)(from + off));
            break;
        case EDDY_AGG_QUANTILE:
            eddy_quantile_merge((void *)(into + off), (const void *)(from + off));
            break;
        case EDDY_AGG_TOP_K:
            eddy_cms_merge((void *)(into + off), (const void *)(from + off));
            break;
        default:
            break;
        }
    }
}

/* top_k's result, "v1:c1,v2:c2,...", into a->best_buf: the k values with
 * the largest estimated counts, count descending, then value bytewise
 * (eddy_cms_top's order); null when no value was counted. */
static int format_top_k(agg_state_t *a, const eddy_cms_t *cms)
{
    eddy_cms_entry_t top[EDDY_CMS_TOP_K];
    size_t n = eddy_cms_top(cms, top, a->spec.k);
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

static eddy_val_t result(const agg_state_t *a, const unsigned char *acc)
{
    const void *slot = acc + a->off;
    const eddy_pipeline_sum_slot_t *sum = slot;
    switch (a->spec.fn) {
    case EDDY_AGG_COUNT:
        return eddy_val_int(*(const int64_t *)slot);
    case EDDY_AGG_SUM:
        return !sum->n ? eddy_val_null()
               : sum->is_float ? eddy_val_float(sum->fsum)
                               : eddy_val_int(sum->isum);
    case EDDY_AGG_AVG:
        return !sum->n ? eddy_val_null()
                       : eddy_val_float((sum->is_float ? sum->fsum : (double)sum->isum) /
                                        (double)sum->n);
    case EDDY_AGG_COUNT_DISTINCT:
        return eddy_val_int((int64_t)llround(eddy_hll_estimate(slot)));
    case EDDY_AGG_QUANTILE: {
        const eddy_quantile_t *q = slot;
        return q->count ? eddy_val_float(eddy_quantile_quantile(q, a->spec.q)) : eddy_val_null();
    }
    case EDDY_AGG_TOP_K:
        return a->have ? eddy_val_str(a->best_buf.p, a->best_buf.len) : eddy_val_null();
    default:
        return a->have ? a->best : eddy_val_null();
    }
}

/* The row of an element without the key field in front; false when it
 * does not split into the columns (not from this pipeline's plan). */
static bool element_row(pagg_t *p, const eddy_record_t *rec, eddy_record_t *body)
{
    const char *tab = memchr(rec->data, '\t', rec->len);
    *body = *rec;
    body->data = tab ? tab + 1 : rec->data + rec->len;
    body->len = tab ? rec->len - (uint32_t)(tab + 1 - rec->data) : 0;
    eddy_err_t err = {{0}};
    return eddy_row_split(body->data, body->len, p->row, (uint32_t)p->cols.n, &p->scratch, &err) == 0;
}

/* Folds one element (a keyed row) into every aggregate. */
static void add_row(pagg_t *p, unsigned char *acc, const eddy_record_t *rec)
{
    eddy_record_t body;
    if (!element_row(p, rec, &body))
        return;
    for (uint32_t a = 0; a < p->n_aggs; a++) {
        agg_state_t *s = &p->aggs[a];
        eddy_val_t v = s->arg ? eddy_expr_eval(s->arg, p->row) : eddy_val_null();
        add_value(s, acc, &v, rec->timestamp);
    }
}

/* The aggregate row: the key, [start, end,] every aggregate's result. */
static void emit_aggregate(pagg_t *p, const eddy_window_context_t *ctx, const unsigned char *acc,
                           eddy_collector_t *out)
{
    eddy_val_t vals[MAX_AGGS + 2];
    uint32_t n = 0;
    if (p->windowed) {
        vals[n++] = eddy_val_int(ctx->window.start);
        vals[n++] = eddy_val_int(ctx->window.end);
    }
    for (uint32_t i = 0; i < p->n_aggs; i++) {
        agg_state_t *a = &p->aggs[i];
        if (a->spec.fn == EDDY_AGG_TOP_K &&
            format_top_k(a, (const eddy_cms_t *)(const void *)(acc + a->off)) < 0)
            return;
        vals[n++] = result(a, acc);
    }
    p->out.len = 0;
    if (eddy_buf_add(&p->out, ctx->key, ctx->key_len) < 0 || eddy_buf_add(&p->out, "\t", 1) < 0 ||
        eddy_row_join(vals, n, &p->out) < 0 || p->out.len > UINT32_MAX)
        return;
    eddy_record_t rec = {p->out.p, (uint32_t)p->out.len, EDDY_INSERT, 1, 0};
    eddy_emit(out, &rec);
}

/* ---- the rows store --------------------------------------------------- */

/* max_by: the window's rows whose value is the largest, unchanged. */
static void fire_max_by(pagg_t *p, const eddy_window_elements_t *elements, eddy_collector_t *out)
{
    for (size_t i = 0; i < elements->count; i++) {
        eddy_record_t rec = eddy_window_element(elements, i), body;
        if (!element_row(p, &rec, &body))
            continue;
        eddy_val_t v = eddy_expr_eval(p->max_by, p->row);
        if (v.type != EDDY_VAL_NULL && (!p->top.have || compare(&v, &p->top.best) > 0))
            keep(&p->top, &v, rec.timestamp);
    }
    for (size_t i = 0; p->top.have && i < elements->count; i++) {
        eddy_record_t rec = eddy_window_element(elements, i), body;
        if (!element_row(p, &rec, &body))
            continue;
        eddy_val_t v = eddy_expr_eval(p->max_by, p->row);
        if (v.type == EDDY_VAL_NULL || compare(&v, &p->top.best) != 0)
            continue;
        body.kind = EDDY_INSERT;
        body.value = 1;
        eddy_emit(out, &body);
    }
}

/* max_by's rank (api/window.h), so that its window keeps only the rows
 * fire_max_by would emit: a and b by their max_by values, compared as
 * there; a null value, or a row that does not split, ranks below every
 * value (fire_max_by skips it). A column that mixes numbers with strings
 * that sort below digits does not rank in a total order; there, rows tied
 * with an earlier best that a later best replaced are not all kept. */
static int rank_open(const eddy_config_t *config, void **prepared, eddy_err_t *err)
{
    pagg_t *p = pagg_new(config, err);
    if (p && !p->max_by) {
        pagg_destroy(&p);
        eddy_err_set(err, "pipeline window: a max_by rank without max_by");
    }
    *prepared = p;
    return p ? 0 : -1;
}

static void rank_close(void *prepared)
{
    pagg_t *p = prepared;
    pagg_destroy(&p);
}

static int rank_rows(void *prepared, const eddy_record_t *a, const eddy_record_t *b)
{
    pagg_t *p = prepared;
    eddy_record_t body;
    eddy_val_t v = {.type = EDDY_VAL_NULL};
    if (element_row(p, a, &body))
        v = eddy_expr_eval(p->max_by, p->row);
    bool ha = v.type != EDDY_VAL_NULL;
    if (ha && keep(&p->top, &v, 0) < 0)
        return 0; /* out of memory: keep both */
    v.type = EDDY_VAL_NULL;
    if (element_row(p, b, &body))
        v = eddy_expr_eval(p->max_by, p->row);
    bool hb = v.type != EDDY_VAL_NULL;
    if (!ha || !hb)
        return (int)ha - (int)hb;
    return compare(&p->top.best, &v);
}

/* A firing of a rows-store step: the step's config is parsed per firing
 * (a process function keeps no per-instance state), the rows folded in
 * order into one accumulator and the min/max/first/last values. */
static void fire(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                 eddy_collector_t *out)
{
    eddy_err_t err = {{0}};
    pagg_t *p = pagg_new(ctx->config, &err);
    unsigned char *acc = p ? calloc(1, p->size ? p->size : 1) : NULL;
    if (!acc) {
        /* The plan was checked when the job was built: a config that does
         * not parse did not come from jobs/pipeline.c. */
        eddy_log_limited(&config_limit, EDDY_LOG_WARN, "pipeline window: %s",
                         p ? "out of memory" : err.msg);
        pagg_destroy(&p);
        return;
    }
    if (p->max_by) {
        fire_max_by(p, elements, out);
    } else {
        slots_init(p, acc);
        for (size_t i = 0; i < elements->count; i++) {
            eddy_record_t rec = eddy_window_element(elements, i);
            add_row(p, acc, &rec);
        }
        emit_aggregate(p, ctx, acc, out);
    }
    free(acc);
    pagg_destroy(&p);
}

/* ---- the accumulator store ------------------------------------------- */

static int acc_open(const eddy_config_t *config, void **prepared, eddy_err_t *err)
{
    pagg_t *p = pagg_new(config, err);
    if (!p)
        return -1;
    for (uint32_t i = 0; i < p->n_aggs; i++)
        if (!p->aggs[i].fixed) {
            char key[32];
            snprintf(key, sizeof key, "agg.%u", i);
            eddy_err_set(err, "pipeline window: aggregate '%s' keeps rows, not an accumulator",
                         eddy_config_str(config, key, ""));
            pagg_destroy(&p);
            return -1;
        }
    if (p->max_by || p->size == 0) {
        pagg_destroy(&p);
        return eddy_err_set(err, "pipeline window: max_by keeps rows, not an accumulator");
    }
    *prepared = p;
    return 0;
}

static void acc_close(void *prepared)
{
    pagg_t *p = prepared;
    pagg_destroy(&p);
}

static size_t acc_size(const void *prepared) { return ((const pagg_t *)prepared)->size; }

static void acc_create(void *prepared, void *acc) { slots_init(prepared, acc); }

static void acc_add(void *prepared, void *acc, const eddy_record_t *rec)
{
    add_row(prepared, acc, rec);
}

static void acc_merge(void *prepared, void *acc, const void *other)
{
    slots_merge(prepared, acc, other);
}

static void acc_emit(void *prepared, const eddy_window_context_t *ctx, const void *acc,
                     eddy_collector_t *out)
{
    emit_aggregate(prepared, ctx, acc, out);
}

/* A snapshot's accumulator: every sketch valid, counts not negative. */
static int acc_check(void *prepared, const void *acc, eddy_err_t *err)
{
    const pagg_t *p = prepared;
    for (uint32_t i = 0; i < p->n_aggs; i++) {
        const unsigned char *slot = (const unsigned char *)acc + p->aggs[i].off;
        const eddy_pipeline_sum_slot_t *sum = (const void *)slot;
        int rc = 0;
        switch (p->aggs[i].spec.fn) {
        case EDDY_AGG_COUNT:
            rc = *(const int64_t *)(const void *)slot < 0 ? eddy_err_set(err, "a negative count") : 0;
            break;
        case EDDY_AGG_SUM:
        case EDDY_AGG_AVG:
            rc = sum->n < 0 || (sum->is_float != 0 && sum->is_float != 1)
                     ? eddy_err_set(err, "a malformed sum")
                     : 0;
            break;
        case EDDY_AGG_COUNT_DISTINCT:
            rc = eddy_hll_validate(slot, EDDY_HLL_SIZE, err);
            break;
        case EDDY_AGG_QUANTILE:
            rc = eddy_quantile_validate(slot, EDDY_QUANTILE_SIZE, err);
            break;
        case EDDY_AGG_TOP_K:
            rc = eddy_cms_validate(slot, EDDY_CMS_SIZE, err);
            break;
        default:
            break;
        }
        if (rc < 0)
            return eddy_err_wrap(err, "aggregate %u", i);
    }
    return 0;
}

static const eddy_window_udf_t rows_udf = {.process = fire};
static const eddy_window_udf_t max_by_udf = {
    .process = fire, .max_by = {.open = rank_open, .close = rank_close, .rank = rank_rows}};
static const eddy_window_udf_t fixed_udf = {
    .accumulator = {.open = acc_open, .close = acc_close, .size = acc_size, .create = acc_create,
                    .add = acc_add, .merge = acc_merge, .emit = acc_emit, .check = acc_check}};
static const eddy_window_udf_t ordered_udf = {
    .accumulator = {.open = acc_open, .close = acc_close, .size = acc_size, .create = acc_create,
                    .add = acc_add, .emit = acc_emit, .check = acc_check}};

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
    if (eddy_register_window(r, EDDY_PIPELINE_WINDOW_KIND, &rows_udf, err) < 0 ||
        eddy_register_window(r, EDDY_PIPELINE_WINDOW_MAX_BY_KIND, &max_by_udf, err) < 0 ||
        eddy_register_window(r, EDDY_PIPELINE_WINDOW_FIXED_KIND, &fixed_udf, err) < 0 ||
        eddy_register_window(r, EDDY_PIPELINE_WINDOW_ORDERED_KIND, &ordered_udf, err) < 0)
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
