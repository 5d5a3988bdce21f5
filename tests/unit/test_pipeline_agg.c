/* test_pipeline_agg.c - a pipeline's window + aggregate step
 * (operators/pipeline_agg.c) on the window operator, driven directly as a
 * task would: the accumulator stores (pipeline_window_fixed, _ordered) give
 * byte for byte the rows store's output (pipeline_window) for the same
 * rows; their state per key and window stays the same size however many
 * rows it holds; sessions merge accumulators as the rows store concatenates
 * rows; a restore and a rescale (1 -> 2 instances) of count_distinct,
 * quantile and top_k continue exactly; count and count_distinct
 * pre-aggregated by the combiner are exact; a restore into another store,
 * or of a corrupt sketch, fails clearly. Rows are "key\tbidder\tprice"; outputs are the records' text in
 * order, separated by " | ". */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "api/window.h"
#include "operators/pipeline_agg.h"
#include "plan/registry.h"
#include "state/keygroup.h"
#include "state/sketch_hll.h"
#include "tests/unit/leak_check.h"

TestSuite(pipeline_agg, .fini = eddy_test_leak_check);

#define K 64
#define FIXED EDDY_PIPELINE_WINDOW_FIXED_KIND
#define ORDERED EDDY_PIPELINE_WINDOW_ORDERED_KIND
#define ROWS EDDY_PIPELINE_WINDOW_KIND
#define MAX_BY EDDY_PIPELINE_WINDOW_MAX_BY_KIND

typedef struct out {
    eddy_collector_t base;
    char *text;
    size_t len, cap;
} out_t;

static void collect(eddy_collector_t *c, const eddy_record_t *rec)
{
    out_t *o = (out_t *)c;
    size_t need = o->len + rec->len + 40;
    if (need > o->cap) {
        o->cap = need * 2;
        o->text = realloc(o->text, o->cap);
        cr_assert(o->text);
    }
    o->len += (size_t)snprintf(o->text + o->len, o->cap - o->len, "%s%.*s@%lld", o->len ? " | " : "",
                               (int)rec->len, rec->data, (long long)rec->timestamp);
}

static uint32_t key_before_tab(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    const char *t = memchr(rec->data, '\t', rec->len);
    return t ? (uint32_t)(t - rec->data) : rec->len;
}

typedef struct win {
    eddy_registry_t *reg;
    const eddy_operator_kind_t *kind;
    eddy_config_t *cfg;
    void *conf;
    void *op;
    uint64_t late;
    out_t out;
    eddy_op_context_t ctx;
} win_t;

/* window: "tumbling 100", "sliding 100 20", "session 10"; aggs: "|"-separated,
 * or "max_by:EXPR" for a max_by step. */
static void win_open(win_t *w, const char *kind, const char *window, const char *aggs)
{
    memset(w, 0, sizeof *w);
    w->reg = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_pipeline_agg_register(w->reg, &err), 0, "%s", err.msg);
    w->kind = eddy_registry_operator(w->reg, kind);
    cr_assert(w->kind);
    w->cfg = eddy_config_new();
    char type[16];
    long long a = 0, b = 0;
    cr_assert(sscanf(window, "%15s %lld %lld", type, &a, &b) >= 2);
    eddy_config_set_str(w->cfg, "assigner", type);
    eddy_config_set_int(w->cfg, !strcmp(type, "session") ? "gap_ms" : "size_ms", a);
    if (!strcmp(type, "sliding"))
        eddy_config_set_int(w->cfg, "slide_ms", b);
    eddy_config_set_str(w->cfg, "columns", "bidder,price");
    bool max_by = !strncmp(aggs, "max_by:", 7);
    eddy_config_set_str(w->cfg, "mode", max_by ? "max_by" : "aggregate");
    if (max_by)
        eddy_config_set_str(w->cfg, "max_by", aggs + 7);
    eddy_config_set_bool(w->cfg, "windowed", true);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", max_by ? "" : aggs);
    int64_t n = 0;
    for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|")) {
        char key[32];
        snprintf(key, sizeof key, "agg.%lld", (long long)n++);
        eddy_config_set_str(w->cfg, key, tok);
    }
    if (!max_by)
        eddy_config_set_int(w->cfg, "aggs", n);
    w->conf = w->kind->configure(w->cfg, w->kind->arg, &err);
    cr_assert(w->conf, "%s", err.msg);
    w->out.base.emit = collect;
    w->ctx = (eddy_op_context_t){.job_id = "t", .stage_name = "w", .parallelism = 1,
                                 .max_parallelism = K, .key_groups = {0, K},
                                 .key_fn = key_before_tab, .config = w->conf,
                                 .late_records = &w->late};
    w->op = w->kind->ops->open(&w->ctx, &err);
    cr_assert(w->op, "%s", err.msg);
}

/* Another instance of w's step (a restore or rescale target). */
static void win_open_twin(win_t *twin, const win_t *w)
{
    *twin = *w;
    twin->reg = NULL;
    twin->cfg = NULL;
    twin->conf = NULL;
    memset(&twin->out, 0, sizeof twin->out);
    twin->out.base.emit = collect;
    twin->ctx.late_records = &twin->late;
    eddy_err_t err = {{0}};
    twin->op = w->kind->ops->open(&twin->ctx, &err);
    cr_assert(twin->op, "%s", err.msg);
}

static void win_close(win_t *w)
{
    w->kind->ops->close(w->op);
    free(w->out.text);
    if (w->reg) {
        w->kind->release(w->conf);
        eddy_config_destroy(&w->cfg);
        eddy_registry_destroy(&w->reg);
    }
}

static void row(win_t *w, const char *key, const char *bidder, const char *price, int64_t ts)
{
    char data[128];
    int n = snprintf(data, sizeof data, "%s\t%s\t%s", key, bidder, price);
    eddy_err_t err = {{0}};
    eddy_record_t r = {data, (uint32_t)n, EDDY_INSERT, 1, ts};
    cr_assert_eq(w->kind->ops->process(w->op, &r, &w->out.base, &err), 0, "%s", err.msg);
}

static void wm(win_t *w, int64_t t)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(w->kind->ops->watermark(w->op, t, &w->out.base, &err), 0, "%s", err.msg);
}

static const char *text(const win_t *w) { return w->out.text ? w->out.text : ""; }

/* The i-th row of a fixed pseudo-random stream: key, bidder, price, time. */
static void nth_row(uint32_t i, char key[8], char bidder[16], char price[24], int64_t *ts)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + 7;
    x ^= x >> 29;
    snprintf(key, 8, "k%u", (unsigned)(x % 7));
    snprintf(bidder, 16, "b%u", (unsigned)((x >> 8) % 97));
    if ((x >> 20) % 5 == 0)
        snprintf(price, 24, "%u.%02u", (unsigned)((x >> 24) % 1000), (unsigned)((x >> 40) % 100));
    else
        snprintf(price, 24, "%u", (unsigned)((x >> 24) % 100000));
    *ts = (int64_t)(i * 3 + (x >> 50) % 40); /* a little out of order */
}

static void feed(win_t *w, uint32_t from, uint32_t to, int64_t *max_ts)
{
    for (uint32_t i = from; i < to; i++) {
        char key[8], bidder[16], price[24];
        int64_t ts;
        nth_row(i, key, bidder, price, &ts);
        row(w, key, bidder, price, ts);
        if (ts > *max_ts)
            *max_ts = ts;
    }
}

/* Window state of key group kg, as a checkpoint writes it. */
static size_t group_bytes(win_t *w, uint32_t kg)
{
    eddy_err_t err = {{0}};
    char *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(w->kind->ops->write_group(w->op, kg, &bytes, &len, &err), 0, "%s", err.msg);
    free(bytes);
    return len;
}

static const char *const ORDERED_AGGS =
    "count()|sum(price)|avg(price)|count_distinct(bidder)|quantile(price, 0.9)|top_k(bidder, 3)";
static const char *const FIXED_AGGS = "count()|count(price)|count_distinct(bidder)";

static void same_as_rows(const char *kind, const char *window, const char *aggs, uint32_t n,
                         int64_t wm_step)
{
    win_t acc, rows;
    win_open(&acc, kind, window, aggs);
    win_open(&rows, ROWS, window, aggs);
    int64_t max_ts = 0;
    for (uint32_t i = 0; i < n; i += 50) {
        feed(&acc, i, i + 50, &max_ts);
        int64_t sink = 0;
        feed(&rows, i, i + 50, &sink);
        wm(&acc, max_ts - wm_step);
        wm(&rows, max_ts - wm_step);
    }
    wm(&acc, EDDY_WATERMARK_MAX);
    wm(&rows, EDDY_WATERMARK_MAX);
    cr_assert_gt(acc.out.len, 100);
    cr_assert_str_eq(text(&acc), text(&rows));
    cr_assert_eq(acc.late, rows.late);
    win_close(&acc);
    win_close(&rows);
}

Test(pipeline_agg, accumulators_give_the_rows_stores_output_byte_for_byte)
{
    same_as_rows(ORDERED, "tumbling 100", ORDERED_AGGS, 2000, 50);
    same_as_rows(ORDERED, "sliding 100 20", ORDERED_AGGS, 1000, 30);
    same_as_rows(FIXED, "sliding 100 20", FIXED_AGGS, 2000, 30);
    same_as_rows(FIXED, "tumbling 60", FIXED_AGGS, 2000, 10);
    /* Sessions merge accumulators (count, count_distinct merge exactly). */
    same_as_rows(FIXED, "session 5", FIXED_AGGS, 3000, 45);
}

/* A max_by step keeps only the rows that rank highest so far (ties in
 * arrival order) and emits what the rows store emits from all of them. */
Test(pipeline_agg, max_by_keeps_the_best_rows_and_gives_the_rows_stores_output)
{
    same_as_rows(MAX_BY, "tumbling 100", "max_by:price", 2000, 50);
    same_as_rows(MAX_BY, "sliding 100 20", "max_by:price", 1000, 30);
    same_as_rows(MAX_BY, "tumbling 300", "max_by:bidder", 2000, 50); /* many ties */
    same_as_rows(MAX_BY, "session 5", "max_by:bidder", 3000, 45);
    /* the rows kept: one of a window's 40-odd rows per key and price */
    win_t m, r;
    win_open(&m, MAX_BY, "tumbling 1000000", "max_by:price");
    win_open(&r, ROWS, "tumbling 1000000", "max_by:price");
    int64_t max_ts = 0, sink = 0;
    feed(&m, 0, 300, &max_ts);
    feed(&r, 0, 300, &sink);
    size_t kept = 0, all = 0;
    for (uint32_t kg = 0; kg < K; kg++) {
        kept += group_bytes(&m, kg);
        all += group_bytes(&r, kg);
    }
    cr_assert_lt(kept * 5, all, "max_by kept %zu bytes of state, the rows store %zu", kept, all);
    win_close(&m);
    win_close(&r);
}

Test(pipeline_agg, state_per_key_and_window_does_not_grow_with_rows)
{
    const char *kinds[] = {FIXED, ORDERED, ROWS};
    const char *aggs[] = {FIXED_AGGS, ORDERED_AGGS, ORDERED_AGGS};
    size_t after10[3], after10k[3];
    uint32_t kg = eddy_key_group_of("a", 1, K);
    for (int k = 0; k < 3; k++) {
        win_t w;
        win_open(&w, kinds[k], "tumbling 1000000", aggs[k]);
        for (uint32_t i = 0; i < 10000; i++) {
            char bidder[16], price[16];
            snprintf(bidder, sizeof bidder, "b%u", i % 5000);
            snprintf(price, sizeof price, "%u", i * 7 % 1000);
            row(&w, "a", bidder, price, i);
            if (i == 9)
                after10[k] = group_bytes(&w, kg);
        }
        after10k[k] = group_bytes(&w, kg);
        win_close(&w);
    }
    cr_assert_eq(after10[0], after10k[0], "fixed: %zu bytes after 10 rows, %zu after 10000",
                 after10[0], after10k[0]);
    cr_assert_eq(after10[1], after10k[1], "ordered: %zu bytes after 10 rows, %zu after 10000",
                 after10[1], after10k[1]);
    cr_assert_gt(after10k[2], 10 * after10[2], "the rows store grows: %zu -> %zu", after10[2],
                 after10k[2]);
}

/* count_distinct, quantile and top_k checkpointed halfway, restored into
 * two instances that split the key groups, continue as one run would. */
Test(pipeline_agg, restore_and_rescale_continue_exactly)
{
    const char *aggs = "count_distinct(bidder)|quantile(price, 0.5)|top_k(bidder, 2)|count()";
    win_t whole, first, left, right;
    win_open(&whole, ORDERED, "tumbling 200", aggs);
    win_open_twin(&first, &whole);
    win_open_twin(&left, &whole);
    win_open_twin(&right, &whole);
    int64_t max_ts = 0, sink = 0;
    feed(&whole, 0, 3000, &max_ts);
    wm(&whole, EDDY_WATERMARK_MAX);
    feed(&first, 0, 1500, &sink);
    eddy_err_t err = {{0}};
    for (uint32_t kg = 0; kg < K; kg++) {
        char *bytes = NULL;
        size_t len = 0;
        cr_assert_eq(first.kind->ops->write_group(first.op, kg, &bytes, &len, &err), 0, "%s", err.msg);
        win_t *to = kg < K / 2 ? &left : &right;
        cr_assert_eq(to->kind->ops->read_group(to->op, kg, bytes, len, &err), 0, "%s", err.msg);
        free(bytes);
    }
    for (uint32_t i = 1500; i < 3000; i++) {
        char key[8], bidder[16], price[24];
        int64_t ts;
        nth_row(i, key, bidder, price, &ts);
        row(eddy_key_group_of(key, (uint32_t)strlen(key), K) < K / 2 ? &left : &right, key, bidder,
            price, ts);
    }
    wm(&left, EDDY_WATERMARK_MAX);
    wm(&right, EDDY_WATERMARK_MAX);
    /* Each output record once, whichever instance wrote it. */
    size_t found = 0;
    for (char *tok = strtok(whole.out.text, "|"); tok; tok = strtok(NULL, "|"), found++) {
        while (*tok == ' ')
            tok++;
        size_t n = strlen(tok);
        while (n && tok[n - 1] == ' ')
            tok[--n] = 0;
        cr_assert(strstr(text(&left), tok) || strstr(text(&right), tok), "lost: %s", tok);
    }
    cr_assert_gt(found, 50);
    size_t pieces = 2;
    for (const char *p = text(&left); (p = strstr(p, " | ")); p++)
        pieces++;
    for (const char *p = text(&right); (p = strstr(p, " | ")); p++)
        pieces++;
    cr_assert_eq(pieces, found, "%zu records after the rescale, %zu in one run", pieces, found);
    win_close(&first);
    win_close(&left);
    win_close(&right);
    win_close(&whole);
}

Test(pipeline_agg, a_restore_into_another_store_is_a_clear_error)
{
    win_t rows, fixed, other;
    win_open(&rows, ROWS, "tumbling 100", FIXED_AGGS);
    win_open(&fixed, FIXED, "tumbling 100", FIXED_AGGS);
    win_open(&other, FIXED, "tumbling 100", "count()");
    row(&rows, "a", "b1", "1", 5);
    row(&fixed, "a", "b1", "1", 5);
    uint32_t kg = eddy_key_group_of("a", 1, K);
    eddy_err_t err = {{0}};
    char *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(fixed.kind->ops->write_group(fixed.op, kg, &bytes, &len, &err), 0);
    cr_assert_gt(len, 4096);
    cr_assert_lt(other.kind->ops->read_group(other.op, kg, bytes, len, &err), 0);
    cr_assert(strstr(err.msg, "holds accumulators of"), "%s", err.msg);
    cr_assert(strstr(err.msg, "this window's are 8 bytes"), "%s", err.msg);
    free(bytes);
    cr_assert_eq(rows.kind->ops->write_group(rows.op, kg, &bytes, &len, &err), 0);
    cr_assert_lt(fixed.kind->ops->read_group(fixed.op, kg, bytes, len, &err), 0);
    cr_assert(strstr(err.msg, "holds element lists, this window keeps accumulators"), "%s", err.msg);
    free(bytes);
    win_close(&rows);
    win_close(&fixed);
    win_close(&other);
}

Test(pipeline_agg, an_accumulator_refuses_aggregates_that_keep_rows)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_pipeline_agg_register(r, &err), 0, "%s", err.msg);
    const eddy_operator_kind_t *kind = eddy_registry_operator(r, FIXED);
    eddy_config_t *cfg = eddy_config_new();
    eddy_config_set_str(cfg, "assigner", "tumbling");
    eddy_config_set_int(cfg, "size_ms", 10);
    eddy_config_set_str(cfg, "columns", "bidder,price");
    eddy_config_set_str(cfg, "mode", "aggregate");
    eddy_config_set_str(cfg, "agg.0", "count()");
    eddy_config_set_str(cfg, "agg.1", "max(price)");
    eddy_config_set_int(cfg, "aggs", 2);
    cr_assert_null(kind->configure(cfg, kind->arg, &err));
    cr_assert(strstr(err.msg, "aggregate 'max(price)' keeps rows"), "%s", err.msg);
    eddy_config_destroy(&cfg);
    eddy_registry_destroy(&r);
}

/* Partials forwarded into a window operator, as the shuffle would. */
typedef struct forward {
    eddy_collector_t base;
    win_t *to;
} forward_t;

static void forward(eddy_collector_t *c, const eddy_record_t *rec)
{
    forward_t *f = (forward_t *)c;
    eddy_err_t err = {{0}};
    cr_assert_eq(f->to->kind->ops->process(f->to->op, rec, &f->to->out.base, &err), 0, "%s", err.msg);
}

/* count and count_distinct pre-aggregated before the shuffle (the
 * combiner) give the rows store's output; ordered folds get no combiner. */
Test(pipeline_agg, the_combiner_of_a_fixed_store_is_exact)
{
    win_t acc, rows, ordered;
    win_open(&acc, FIXED, "sliding 100 20", FIXED_AGGS);
    win_open(&rows, ROWS, "sliding 100 20", FIXED_AGGS);
    win_open(&ordered, ORDERED, "sliding 100 20", ORDERED_AGGS);
    cr_assert_null(ordered.kind->ops->combiner(ordered.conf));
    cr_assert_null(rows.kind->ops->combiner(rows.conf));
    const eddy_operator_ops_t *cops = acc.kind->ops->combiner(acc.conf);
    cr_assert(cops);
    eddy_err_t err = {{0}};
    void *cb = cops->open(&acc.ctx, &err);
    cr_assert(cb, "%s", err.msg);
    forward_t fw = {{forward}, &acc};
    int64_t max_ts = 0, sink = 0;
    for (uint32_t i = 0; i < 3000; i += 100) {
        for (uint32_t j = i; j < i + 100; j++) {
            char key[8], bidder[16], price[24], data[128];
            int64_t ts;
            nth_row(j, key, bidder, price, &ts);
            int n = snprintf(data, sizeof data, "%s\t%s\t%s", key, bidder, price);
            eddy_record_t r = {data, (uint32_t)n, EDDY_INSERT, 1, ts};
            cr_assert_eq(cops->process(cb, &r, &fw.base, &err), 0, "%s", err.msg);
            if (ts > max_ts)
                max_ts = ts;
        }
        feed(&rows, i, i + 100, &sink);
        cr_assert_eq(cops->watermark(cb, max_ts - 30, &fw.base, &err), 0, "%s", err.msg);
        wm(&acc, max_ts - 30);
        wm(&rows, max_ts - 30);
    }
    cr_assert_eq(cops->finish(cb, &fw.base, &err), 0, "%s", err.msg);
    wm(&acc, EDDY_WATERMARK_MAX);
    wm(&rows, EDDY_WATERMARK_MAX);
    cr_assert_gt(acc.out.len, 100);
    cr_assert_str_eq(text(&acc), text(&rows));
    cr_assert_eq(acc.late, rows.late);
    cops->close(cb);
    win_close(&acc);
    win_close(&rows);
    win_close(&ordered);
}

/* A snapshot whose HyperLogLog is corrupt is refused, naming the sketch. */
Test(pipeline_agg, a_corrupt_sketch_in_a_snapshot_is_refused)
{
    win_t w, twin;
    win_open(&w, FIXED, "tumbling 100", FIXED_AGGS);
    win_open_twin(&twin, &w);
    row(&w, "a", "b1", "1", 5);
    uint32_t kg = eddy_key_group_of("a", 1, K);
    eddy_err_t err = {{0}};
    char *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(w.kind->ops->write_group(w.op, kg, &bytes, &len, &err), 0);
    cr_assert_eq(twin.kind->ops->read_group(twin.op, kg, bytes, len, &err), 0, "%s", err.msg);
    eddy_hll_t fresh;
    eddy_hll_init(&fresh);
    char *hll = memmem(bytes, len, &fresh.header, sizeof fresh.header);
    cr_assert(hll);
    hll[sizeof fresh.header + 100] = (char)0xff; /* a register past its range */
    /* The accumulators are keyed state, whose bulk form is checksummed:
     * the flip is refused there first... */
    cr_assert_lt(twin.kind->ops->read_group(twin.op, kg, bytes, len, &err), 0);
    cr_assert(strstr(err.msg, "window state of key group"), "%s", err.msg);
    cr_assert(strstr(err.msg, "checksum"), "%s", err.msg);
    /* ...and with the checksum made to match, by the sketch's own check. */
    unsigned char *ks = memmem(bytes, len, "EKS\x02", 4);
    cr_assert(ks);
    uint64_t body = 0;
    for (int i = 7; i >= 0; i--)
        body = (body << 8) | ks[32 + i];
    uint64_t sum = XXH64(ks, 40 + body, 0);
    for (int i = 0; i < 8; i++)
        ks[40 + body + i] = (unsigned char)(sum >> (8 * i));
    cr_assert_lt(twin.kind->ops->read_group(twin.op, kg, bytes, len, &err), 0);
    cr_assert(strstr(err.msg, "window state of key group"), "%s", err.msg);
    cr_assert(strstr(err.msg, "aggregate 2"), "%s", err.msg);
    free(bytes);
    win_close(&twin);
    win_close(&w);
}
