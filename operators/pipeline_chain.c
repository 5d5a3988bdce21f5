/* pipeline_chain.c - a pipeline's fused stateless steps (see
 * pipeline_chain.h). Expressions are parsed in open() against the columns
 * each step sees; the plan was checked when the job was built, so an
 * error here means a config that did not come from jobs/pipeline.c. Per
 * record: the input is split into values once, every step works on
 * values, and the row is written once at the end. Strings a map makes live
 * in its expressions' scratch, which stays valid until that expression
 * runs again, i.e. for the rest of this record. */
#include "operators/pipeline_chain.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "operators/etl_record.h"
#include "operators/filter_eddy.h"
#include "operators/pipeline_row.h"
#include "plan/expr.h"

#define MAX_STEPS 256
#define MAX_COLUMNS 1024

typedef enum input_format { IN_ROW, IN_CSV, IN_JSON, IN_TEXT } input_format_t;

typedef struct chain_step {
    eddy_expr_t *filter;  /* a filter, or */
    eddy_expr_t **exprs;  /* a map: one per output column */
    uint32_t n_out;
    /* The first filter of a run of two or more adjacent filters routes the
     * run through them in an order its eddy keeps re-deciding. */
    eddy_filter_eddy_t *eddy;
    uint32_t run;         /* filters in that run */
} chain_step_t;

typedef struct chain_op {
    input_format_t input;
    bool ragged;           /* csv: missing trailing fields are nulls */
    eddy_strv_t in_columns;
    chain_step_t *steps;
    uint32_t n_steps;
    uint32_t width;        /* widest row any step sees */
    /* key_by (jobs/pipeline.c): input rows may start with a key field
     * (keyed_input), which is dropped or, with keep_key, written back in
     * front; key computes a new one over the output columns. The key goes
     * first so that the runtime's config-less "tab_prefix" key selector
     * reads it: exact, and no per-step key function is needed. */
    bool keyed_input, keep_key;
    eddy_expr_t *key;
    eddy_val_t *row, *next;
    eddy_buf_t scratch, out, json_text;
    eddy_csv_span_t *csv_fields; /* csv: one per input column */
    uint64_t *rejected;
    uint64_t n_rejected;
    const char *stage;
    uint32_t instance;
    eddy_log_limit_t limit;
    eddy_op_report_t *report; /* the eddies' orders and figures (may be NULL) */
    uint64_t records_seen;    /* the report is refreshed every EDDY_FILTER_EDDY_PERIOD */
} chain_op_t;

static void chain_close(void *self)
{
    chain_op_t *op = self;
    if (!op)
        return;
    for (uint32_t i = 0; i < op->n_steps; i++) {
        eddy_filter_eddy_destroy(&op->steps[i].eddy);
        eddy_expr_destroy(&op->steps[i].filter);
        for (uint32_t j = 0; j < op->steps[i].n_out; j++)
            eddy_expr_destroy(&op->steps[i].exprs[j]);
        free(op->steps[i].exprs);
    }
    if (op->n_rejected)
        eddy_info("pipeline %s[%u]: %" PRIu64 " input records rejected (malformed)", op->stage,
                  op->instance, op->n_rejected);
    free(op->steps);
    eddy_expr_destroy(&op->key);
    free(op->row);
    free(op->next);
    eddy_strv_clear(&op->in_columns);
    free(op->csv_fields);
    eddy_buf_free(&op->scratch);
    eddy_buf_free(&op->out);
    eddy_buf_free(&op->json_text);
    free(op);
}

static int open_steps(chain_op_t *op, const eddy_config_t *cfg, eddy_err_t *err)
{
    int64_t n = eddy_config_int(cfg, "steps", 0);
    if (n < 0 || n > MAX_STEPS)
        return eddy_err_set(err, "pipeline: %" PRId64 " steps (at most %u)", n, MAX_STEPS);
    op->steps = calloc(n ? (size_t)n : 1, sizeof *op->steps);
    if (!op->steps)
        return eddy_err_set(err, "out of memory");
    /* The columns the current step sees: names borrowed from in_columns or
     * from the previous map's list. */
    eddy_strv_t maps[2] = {{0}};
    const eddy_strv_t *cols = &op->in_columns;
    int rc = 0;
    op->width = (uint32_t)op->in_columns.n;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        chain_step_t *s = &op->steps[op->n_steps++];
        char key[64];
        snprintf(key, sizeof key, "step.%" PRId64 ".filter", i);
        const char *filter = eddy_config_str(cfg, key, NULL);
        if (filter) {
            s->filter = eddy_expr_new(filter, (const char *const *)cols->v, (uint32_t)cols->n, err);
            if (!s->filter)
                rc = eddy_err_wrap(err, "pipeline step %" PRId64 " filter", i);
            continue;
        }
        snprintf(key, sizeof key, "step.%" PRId64 ".map", i);
        const char *list = eddy_config_str(cfg, key, NULL);
        /* The slot cols does not use (cols may still be a map's list). */
        eddy_strv_t *out = cols == &maps[0] ? &maps[1] : &maps[0];
        eddy_strv_clear(out);
        if (!list || eddy_strv_split_list(out, list, err) < 0 || out->n > MAX_COLUMNS) {
            rc = list ? eddy_err_wrap(err, "pipeline step %" PRId64, i)
                      : eddy_err_set(err, "pipeline step %" PRId64 " is neither filter nor map", i);
            break;
        }
        s->exprs = calloc(out->n, sizeof *s->exprs);
        if (!s->exprs) {
            rc = eddy_err_set(err, "out of memory");
            break;
        }
        s->n_out = (uint32_t)out->n;
        for (uint32_t j = 0; rc == 0 && j < s->n_out; j++) {
            char ekey[96];
            snprintf(ekey, sizeof ekey, "step.%" PRId64 ".map.%u", i, j);
            const char *text = eddy_config_str(cfg, ekey, "");
            s->exprs[j] = eddy_expr_new(text, (const char *const *)cols->v, (uint32_t)cols->n, err);
            if (!s->exprs[j])
                rc = eddy_err_wrap(err, "pipeline step %" PRId64 " column %s", i, out->v[j]);
        }
        if (s->n_out > op->width)
            op->width = s->n_out;
        cols = out;
    }
    /* The chain's output columns are known to the plan; nothing here needs
     * the names after parsing. */
    const char *key = eddy_config_str(cfg, "key", NULL);
    if (rc == 0 && key &&
        !(op->key = eddy_expr_new(key, (const char *const *)cols->v, (uint32_t)cols->n, err)))
        rc = eddy_err_wrap(err, "pipeline key");
    for (int k = 0; k < 2; k++)
        eddy_strv_clear(&maps[k]);
    return rc;
}

static void *chain_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    const eddy_config_t *cfg = ctx->config;
    chain_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    op->stage = ctx->stage_name;
    op->instance = ctx->instance;
    op->report = ctx->report;
    op->rejected = ctx->rejected_records;
    const char *in = eddy_config_str(cfg, "input", "row");
    op->input = !strcmp(in, "csv") ? IN_CSV : !strcmp(in, "json") ? IN_JSON
              : !strcmp(in, "text") ? IN_TEXT : IN_ROW;
    op->ragged = eddy_config_bool(cfg, "ragged", false);
    op->keyed_input = eddy_config_bool(cfg, "keyed_input", false);
    op->keep_key = op->keyed_input && eddy_config_bool(cfg, "keep_key", false);
    if (strcmp(in, "row") && op->input == IN_ROW) {
        eddy_err_set(err, "pipeline: unknown input format '%s'", in);
        goto fail;
    }
    if (eddy_strv_split_list(&op->in_columns, eddy_config_str(cfg, "columns", ""), err) < 0 ||
        op->in_columns.n > MAX_COLUMNS) {
        eddy_err_wrap(err, "pipeline columns");
        goto fail;
    }
    if (op->input == IN_TEXT && op->in_columns.n != 1) {
        eddy_err_set(err, "pipeline: text input has one column, not %zu", op->in_columns.n);
        goto fail;
    }
    if (open_steps(op, cfg, err) < 0)
        goto fail;
    for (uint32_t i = 0; eddy_config_bool(cfg, "adaptive", true) && i < op->n_steps;) {
        uint32_t end = i;
        while (end < op->n_steps && op->steps[end].filter)
            end++;
        if (end - i >= 2) {
            op->steps[i].run = end - i;
            if (!(op->steps[i].eddy = eddy_filter_eddy_new(end - i))) {
                eddy_err_set(err, "out of memory");
                goto fail;
            }
        }
        i = end > i ? end : i + 1;
    }
    op->csv_fields = calloc(op->in_columns.n ? op->in_columns.n : 1, sizeof *op->csv_fields);
    op->row = calloc(op->width ? op->width : 1, sizeof *op->row);
    op->next = calloc(op->width ? op->width : 1, sizeof *op->next);
    if (!op->row || !op->next || !op->csv_fields) {
        eddy_err_set(err, "out of memory");
        goto fail;
    }
    return op;
fail:
    chain_close(op);
    return NULL;
}

static void reject(chain_op_t *op, const char *why)
{
    op->n_rejected++;
    if (op->rejected)
        (*op->rejected)++;
    eddy_log_limited(&op->limit, EDDY_LOG_WARN, "pipeline %s[%u]: input record dropped: %s (%" PRIu64
                     " so far)", op->stage, op->instance, why, op->n_rejected);
}

/* A JSON object line into row values by column name (missing: null). */
static int split_json(chain_op_t *op, const char *line, size_t len, eddy_err_t *err)
{
    json_error_t jerr;
    json_t *obj = json_loadb(line, len, 0, &jerr);
    if (!obj || !json_is_object(obj)) {
        json_decref(obj);
        return eddy_err_set(err, "not a JSON object: %s", obj ? "another JSON value" : jerr.text);
    }
    op->json_text.len = 0;
    /* Offsets first: json_text grows while values are added. */
    size_t offs[MAX_COLUMNS], lens[MAX_COLUMNS];
    bool null[MAX_COLUMNS];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < op->in_columns.n; i++) {
        json_t *v = json_object_get(obj, op->in_columns.v[i]);
        null[i] = !v || json_is_null(v);
        offs[i] = op->json_text.len;
        lens[i] = 0;
        if (null[i])
            continue;
        if (json_is_string(v)) {
            rc = eddy_buf_add(&op->json_text, json_string_value(v), json_string_length(v));
        } else {
            char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            rc = text ? eddy_buf_add(&op->json_text, text, strlen(text)) : -1;
            free(text);
        }
        lens[i] = op->json_text.len - offs[i];
    }
    json_decref(obj);
    if (rc < 0)
        return eddy_err_set(err, "out of memory");
    for (size_t i = 0; i < op->in_columns.n; i++)
        op->row[i] = null[i] ? eddy_val_null()
                             : eddy_val_str(op->json_text.p ? op->json_text.p + offs[i] : "", lens[i]);
    return 0;
}

static int split_input(chain_op_t *op, const eddy_record_t *in, eddy_err_t *err)
{
    uint32_t n = (uint32_t)op->in_columns.n;
    switch (op->input) {
    case IN_TEXT:
        op->row[0] = eddy_val_str(in->data, in->len);
        return 0;
    case IN_ROW:
        return eddy_row_split(in->data, in->len, op->row, n, &op->scratch, err);
    case IN_JSON:
        return split_json(op, in->data, in->len, err);
    case IN_CSV: {
        size_t got;
        if (eddy_etl_csv_spans(in->data, in->len, op->csv_fields, n, &got, &op->scratch, err) < 0)
            return -1;
        if (got > n || (got < n && !op->ragged))
            return eddy_err_set(err, "expected %u fields, got %zu", n, got);
        for (uint32_t i = 0; i < n; i++) {
            if (i >= got) {
                op->row[i] = eddy_val_null();
                continue;
            }
            /* A field ends at a NUL byte, as it did when fields were C strings. */
            const char *p = op->csv_fields[i].p;
            size_t flen = op->csv_fields[i].len;
            const char *nul = flen ? memchr(p, '\0', flen) : NULL;
            op->row[i] = eddy_val_str(p, nul ? (size_t)(nul - p) : flen);
        }
        return 0;
    }
    }
    return 0;
}

/* Every eddy's current order and figures into the task's report: the
 * gauges eddy_pipeline_filter_{position,selectivity,cost_seconds}{filter}
 * (position 1 runs first, within its run of filters), the counter
 * eddy_pipeline_reorders_total, and one line for eddy status. */
static void report_figures(chain_op_t *op)
{
    bool any = false;
    for (uint32_t i = 0; i < op->n_steps && !any; i++)
        any = op->steps[i].eddy != NULL;
    if (!op->report || !any)
        return;
    eddy_op_report_t *r = op->report;
    eddy_op_report_clear(r);
    char text[EDDY_OP_REPORT_TEXT] = "";
    size_t used = 0;
    uint64_t reorders = 0;
    for (uint32_t i = 0; i < op->n_steps; i++) {
        const eddy_filter_eddy_t *e = op->steps[i].eddy;
        if (!e)
            continue;
        const uint32_t *order = eddy_filter_eddy_order(e);
        reorders += eddy_filter_eddy_changes(e);
        for (uint32_t k = 0; k < op->steps[i].run; k++) {
            uint32_t f = order[k];
            const char *expr = eddy_expr_text(op->steps[i + f].filter);
            double sel = eddy_filter_eddy_selectivity(e, f), ns = eddy_filter_eddy_cost_ns(e, f);
            /* Full: the text still names every filter, within its length. */
            (void)eddy_op_report_gauge(r, "pipeline_filter_position", "filter", expr, k + 1, false);
            (void)eddy_op_report_gauge(r, "pipeline_filter_selectivity", "filter", expr, sel, false);
            (void)eddy_op_report_gauge(r, "pipeline_filter_cost_seconds", "filter", expr, ns / 1e9,
                                       false);
            if (used < sizeof text) {
                int n = snprintf(text + used, sizeof text - used, "%s'%.60s' %.0f%% %.0fns",
                                 used ? (k ? " > " : "; ") : "filters ", expr, 100 * sel, ns);
                used += n > 0 ? (size_t)n : 0;
            }
        }
    }
    (void)eddy_op_report_gauge(r, "pipeline_reorders_total", NULL, NULL, (double)reorders, true);
    eddy_op_report_text(r, "%s (reorders %" PRIu64 ")", text, reorders);
}

/* The run of filters starting at step first, in its eddy's order. */
static bool run_filters(chain_op_t *op, uint32_t first)
{
    chain_step_t *head = &op->steps[first];
    eddy_filter_eddy_t *e = head->eddy;
    const uint32_t *order = eddy_filter_eddy_order(e);
    bool timed = eddy_filter_eddy_timed(e), pass = true;
    for (uint32_t k = 0; pass && k < head->run; k++) {
        uint32_t f = order[k];
        uint64_t t0 = timed ? eddy_mono_ns() : 0;
        eddy_val_t v = eddy_expr_eval(op->steps[first + f].filter, op->row);
        pass = eddy_val_is_true(&v);
        eddy_filter_eddy_observe(e, f, pass, timed ? eddy_mono_ns() - t0 : 0, timed);
    }
    if (eddy_filter_eddy_tick(e)) {
        char figures[600] = "";
        for (uint32_t k = 0; k < head->run && strlen(figures) < sizeof figures - 120; k++) {
            uint32_t f = order[k];
            snprintf(figures + strlen(figures), sizeof figures - strlen(figures),
                     "%s'%.40s' (passes %.0f%%, %.0f ns)", k ? ", " : "",
                     eddy_expr_text(op->steps[first + f].filter),
                     100 * eddy_filter_eddy_selectivity(e, f), eddy_filter_eddy_cost_ns(e, f));
        }
        eddy_info("pipeline %s[%u]: filters now run as %s", op->stage, op->instance, figures);
        report_figures(op);
    }
    return pass;
}

static int chain_process(void *self, const eddy_record_t *in, eddy_collector_t *out, eddy_err_t *err)
{
    chain_op_t *op = self;
    eddy_err_t why = {{0}};
    eddy_record_t body = *in;
    const char *key_field = NULL;
    uint32_t key_len = 0;
    if (op->keyed_input) {
        const char *tab = memchr(in->data, '\t', in->len);
        key_field = in->data;
        key_len = tab ? (uint32_t)(tab - in->data) : in->len;
        body.data = tab ? tab + 1 : in->data + in->len;
        body.len = in->len - key_len - (tab ? 1 : 0);
    }
    if (split_input(op, &body, &why) < 0) {
        reject(op, why.msg);
        return 0;
    }
    uint32_t width = (uint32_t)op->in_columns.n;
    if (op->records_seen++ % EDDY_FILTER_EDDY_PERIOD == 0)
        report_figures(op);
    for (uint32_t i = 0; i < op->n_steps; i++) {
        chain_step_t *s = &op->steps[i];
        if (s->eddy) {
            bool pass = run_filters(op, i);
            i += s->run - 1;
            if (!pass)
                return 0;
            continue;
        }
        if (s->filter) {
            eddy_val_t v = eddy_expr_eval(s->filter, op->row);
            if (!eddy_val_is_true(&v))
                return 0;
            continue;
        }
        for (uint32_t j = 0; j < s->n_out; j++)
            op->next[j] = eddy_expr_eval(s->exprs[j], op->row);
        eddy_val_t *t = op->row;
        op->row = op->next;
        op->next = t;
        width = s->n_out;
    }
    op->out.len = 0;
    int rc = 0;
    if (op->key) {
        eddy_val_t k = eddy_expr_eval(op->key, op->row);
        rc |= eddy_row_join(&k, 1, &op->out);
        rc |= eddy_buf_add(&op->out, "\t", 1);
    } else if (op->keep_key) {
        rc |= eddy_buf_add(&op->out, key_field, key_len);
        rc |= eddy_buf_add(&op->out, "\t", 1);
    }
    if (rc < 0 || eddy_row_join(op->row, width, &op->out) < 0 || op->out.len > UINT32_MAX)
        return eddy_err_set(err, "out of memory");
    eddy_record_t rec = *in;
    rec.data = op->out.p ? op->out.p : "";
    rec.len = (uint32_t)op->out.len;
    eddy_emit(out, &rec);
    return 0;
}

static const eddy_operator_ops_t chain_ops = {
    .kind = EDDY_PIPELINE_CHAIN_KIND, .open = chain_open, .process = chain_process, .close = chain_close};
static const eddy_operator_kind_t chain_kind = {.name = EDDY_PIPELINE_CHAIN_KIND, .ops = &chain_ops};

int eddy_pipeline_chain_register(eddy_registry_t *r, eddy_err_t *err)
{
    return eddy_register_operator(r, &chain_kind, err);
}
