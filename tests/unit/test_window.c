/* test_window.c - the keyed window operator (operators/window.c), driven
 * directly as a task would: records, watermarks, ticks, finish, and the
 * per-key-group write/read/drop of its state for restores and rescales.
 * Records are "key" or "key:payload" with the key before the ':'; outputs
 * are compared as text "key=value@timestamp" (a leading '!' marks a record
 * sent on as EDDY_LATE). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/window.h"
#include "plan/registry.h"
#include "state/keygroup.h"
#include "tests/unit/leak_check.h"

TestSuite(window, .fini = eddy_test_leak_check);

#define K 128

typedef struct out {
    eddy_collector_t base;
    char text[8192];
} out_t;

static void collect(eddy_collector_t *c, const eddy_record_t *rec)
{
    out_t *o = (out_t *)c;
    size_t n = strlen(o->text);
    snprintf(o->text + n, sizeof o->text - n, "%s%s%.*s=%lld@%lld", n ? " " : "",
             rec->kind == EDDY_LATE ? "!" : "", (int)rec->len, rec->data, (long long)rec->value,
             (long long)rec->timestamp);
}

static uint32_t key_before_colon(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    const char *c = memchr(rec->data, ':', rec->len);
    return c ? (uint32_t)(c - rec->data) : rec->len;
}

/* ---- user functions ---- */

static int64_t add(int64_t a, int64_t b) { return a + b; }

typedef struct avg {
    int64_t sum, count;
} avg_t;
static int merges;
static void avg_add(void *acc, const eddy_record_t *rec)
{
    avg_t *a = acc;
    a->sum += rec->value;
    a->count++;
}
static void avg_merge(void *acc, const void *other)
{
    avg_t *a = acc;
    const avg_t *b = other;
    a->sum += b->sum;
    a->count += b->count;
    merges++;
}
static int64_t avg_result(const void *acc)
{
    const avg_t *a = acc;
    return a->count ? a->sum / a->count : 0;
}

/* All elements: emits "key[start,end):payloads" = element count. */
static void list_all(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                     eddy_collector_t *out)
{
    char buf[256];
    int n = snprintf(buf, sizeof buf, "%.*s[%lld,%lld):", (int)ctx->key_len, ctx->key,
                     (long long)ctx->window.start, (long long)ctx->window.end);
    for (size_t i = 0; i < elements->count; i++) {
        eddy_record_t r = eddy_window_element(elements, i);
        const char *c = memchr(r.data, ':', r.len);
        const char *p = c ? c + 1 : r.data + r.len;
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%.*s", i ? "," : "",
                      (int)(r.data + r.len - p), p);
    }
    eddy_record_t o = {buf, (uint32_t)n, EDDY_INSERT, (int64_t)elements->count, 0};
    eddy_emit(out, &o);
}

/* With an aggregate: one element, the result; emits "key[start,end)" = result. */
static void with_result(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                        eddy_collector_t *out)
{
    cr_assert_eq(elements->count, 1);
    eddy_record_t r = eddy_window_element(elements, 0);
    cr_assert_eq(r.timestamp, ctx->window.end - 1);
    char buf[128];
    int n = snprintf(buf, sizeof buf, "%.*s[%lld,%lld)", (int)ctx->key_len, ctx->key,
                     (long long)ctx->window.start, (long long)ctx->window.end);
    eddy_record_t o = {buf, (uint32_t)n, EDDY_INSERT, r.value, 0};
    eddy_emit(out, &o);
}

static const eddy_window_udf_t sum_udf = {.reduce = add};
static const eddy_window_udf_t avg_udf = {
    .aggregate = {.acc_size = sizeof(avg_t), .add = avg_add, .merge = avg_merge, .result = avg_result}};
static const eddy_window_udf_t avg_nomerge_udf = {
    .aggregate = {.acc_size = sizeof(avg_t), .add = avg_add, .result = avg_result}};
static const eddy_window_udf_t list_udf = {.process = list_all};
static const eddy_window_udf_t list_max_udf = {.process = list_all,
                                               .max_by = {.rank = eddy_window_rank_value}};
static const eddy_window_udf_t avg_process_udf = {
    .aggregate = {.acc_size = sizeof(avg_t), .add = avg_add, .merge = avg_merge, .result = avg_result},
    .process = with_result};

/* ---- harness ---- */

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

static eddy_registry_t *registry(void)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_register_window(r, "sum", &sum_udf, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "avg", &avg_udf, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "avg_nomerge", &avg_nomerge_udf, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "list", &list_udf, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "list_max", &list_max_udf, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "avg_process", &avg_process_udf, &err), 0, "%s", err.msg);
    return r;
}

/* cfg: "assigner=tumbling size_ms=10 ..." (numbers become ints). */
static eddy_config_t *config(const char *spec)
{
    eddy_config_t *c = eddy_config_new();
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        cr_assert(eq);
        *eq = 0;
        char *end;
        long long v = strtoll(eq + 1, &end, 10);
        if (*end == 0 && end != eq + 1)
            eddy_config_set_int(c, tok, v);
        else if (!strcmp(eq + 1, "true") || !strcmp(eq + 1, "false"))
            eddy_config_set_bool(c, tok, eq[1] == 't');
        else
            eddy_config_set_str(c, tok, eq + 1);
    }
    return c;
}

static void win_open(win_t *w, const char *kind, const char *spec)
{
    memset(w, 0, sizeof *w);
    w->reg = registry();
    w->kind = eddy_registry_operator(w->reg, kind);
    cr_assert(w->kind);
    w->cfg = config(spec);
    eddy_err_t err = {{0}};
    w->conf = w->kind->configure(w->cfg, w->kind->arg, &err);
    cr_assert(w->conf, "%s", err.msg);
    w->out.base.emit = collect;
    w->ctx = (eddy_op_context_t){.job_id = "t", .stage_name = "w", .parallelism = 1,
                                 .max_parallelism = K, .key_groups = {0, K},
                                 .key_fn = key_before_colon, .config = w->conf,
                                 .late_records = &w->late};
    w->op = w->kind->ops->open(&w->ctx, &err);
    cr_assert(w->op, "%s", err.msg);
}

/* A second instance of the same step (restore / rescale target). */
static void win_open_twin(win_t *twin, const win_t *w)
{
    *twin = *w;
    twin->reg = NULL;
    twin->cfg = NULL;
    twin->conf = NULL;
    twin->late = 0;
    twin->out.text[0] = 0;
    twin->ctx.late_records = &twin->late;
    eddy_err_t err = {{0}};
    twin->op = w->kind->ops->open(&twin->ctx, &err);
    cr_assert(twin->op, "%s", err.msg);
}

static void win_close(win_t *w)
{
    w->kind->ops->close(w->op);
    if (w->reg) {
        w->kind->release(w->conf);
        eddy_config_destroy(&w->cfg);
        eddy_registry_destroy(&w->reg);
    }
}

static void rec(win_t *w, const char *data, int64_t value, int64_t ts)
{
    eddy_err_t err = {{0}};
    eddy_record_t r = {data, (uint32_t)strlen(data), EDDY_INSERT, value, ts};
    cr_assert_eq(w->kind->ops->process(w->op, &r, &w->out.base, &err), 0, "%s", err.msg);
}

static void wm(win_t *w, int64_t t)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(w->kind->ops->watermark(w->op, t, &w->out.base, &err), 0, "%s", err.msg);
}

static void tick(win_t *w, int64_t t)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(w->kind->ops->tick(w->op, t, &w->out.base, &err), 0, "%s", err.msg);
}

static void finish(win_t *w)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(w->kind->ops->finish(w->op, &w->out.base, &err), 0, "%s", err.msg);
}

/* Asserts the output since the last check, then forgets it. */
#define EXPECT(w, want)                                                                        \
    do {                                                                                       \
        cr_assert_str_eq((w)->out.text, (want));                                               \
        (w)->out.text[0] = 0;                                                                  \
    } while (0)

static uint32_t kg_of(const char *key) { return eddy_key_group_of(key, strlen(key), K); }

/* Moves key group kg from one instance to another (write, read, drop). */
static void move_group(win_t *from, win_t *to, uint32_t kg)
{
    eddy_err_t err = {{0}};
    char *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(from->kind->ops->write_group(from->op, kg, &bytes, &len, &err), 0, "%s", err.msg);
    cr_assert_eq(to->kind->ops->read_group(to->op, kg, bytes, len, &err), 0, "%s", err.msg);
    from->kind->ops->drop_group(from->op, kg);
    free(bytes);
}

static void copy_all_groups(win_t *from, win_t *to)
{
    eddy_err_t err = {{0}};
    for (uint32_t kg = 0; kg < K; kg++) {
        char *bytes = NULL;
        size_t len = 0;
        cr_assert_eq(from->kind->ops->write_group(from->op, kg, &bytes, &len, &err), 0, "%s", err.msg);
        cr_assert_eq(to->kind->ops->read_group(to->op, kg, bytes, len, &err), 0, "%s", err.msg);
        free(bytes);
    }
}

static void assert_no_state(win_t *w)
{
    eddy_err_t err = {{0}};
    for (uint32_t kg = 0; kg < K; kg++) {
        char *bytes = NULL;
        size_t len = 0;
        cr_assert_eq(w->kind->ops->write_group(w->op, kg, &bytes, &len, &err), 0, "%s", err.msg);
        cr_assert_eq(len, 0, "key group %u still holds window state", kg);
        free(bytes);
    }
}

/* ---- assigners ---- */

Test(window, tumbling_fires_exactly_at_end_minus_one)
{
    win_t w;
    win_open(&w, "sum", "assigner=tumbling size_ms=10");
    rec(&w, "a", 1, 1);
    rec(&w, "a", 2, 5);
    rec(&w, "b", 4, 3);
    rec(&w, "a", 8, 12);
    wm(&w, 8);
    EXPECT(&w, "");
    wm(&w, 9);
    EXPECT(&w, "a=3@9 b=4@9");
    wm(&w, 18);
    EXPECT(&w, "");
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=8@19");
    assert_no_state(&w);
    cr_assert_eq(w.late, 0);
    win_close(&w);
}

Test(window, tumbling_out_of_order_negative_times_and_offset)
{
    win_t w;
    win_open(&w, "sum", "assigner=tumbling size_ms=10");
    rec(&w, "a", 1, 15);
    rec(&w, "a", 2, 3);
    rec(&w, "a", 4, -1);  /* [-10, 0) */
    rec(&w, "a", 8, -10); /* [-10, 0) */
    rec(&w, "a", 16, -11); /* [-20, -10) */
    rec(&w, "a", 32, 9);
    wm(&w, -2);
    EXPECT(&w, "a=16@-11");
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=12@-1 a=34@9 a=1@19");
    win_close(&w);

    win_open(&w, "sum", "assigner=tumbling size_ms=10 offset_ms=3");
    rec(&w, "a", 1, 2);  /* [-7, 3) */
    rec(&w, "a", 2, 3);  /* [3, 13) */
    rec(&w, "a", 4, -8); /* [-17, -7) */
    wm(&w, 2);
    EXPECT(&w, "a=4@-8 a=1@2");
    wm(&w, 12);
    EXPECT(&w, "a=2@12");
    win_close(&w);

    win_open(&w, "sum", "assigner=tumbling size_ms=10 offset_ms=-3");
    rec(&w, "a", 1, 6); /* [-3, 7) */
    rec(&w, "a", 2, 7); /* [7, 17) */
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=1@6 a=2@16");
    win_close(&w);
}

Test(window, sliding_every_window_that_contains_the_record)
{
    win_t w;
    win_open(&w, "sum", "assigner=sliding size_ms=10 slide_ms=5");
    rec(&w, "a", 1, 7);  /* [5,15) [0,10) */
    rec(&w, "a", 2, 12); /* [10,20) [5,15) */
    rec(&w, "a", 4, 2);  /* [0,10) [-5,5), out of order */
    wm(&w, 3);
    EXPECT(&w, "");
    wm(&w, 4);
    EXPECT(&w, "a=4@4");
    wm(&w, 9);
    EXPECT(&w, "a=5@9");
    wm(&w, 14);
    EXPECT(&w, "a=3@14");
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=2@19");
    assert_no_state(&w);
    win_close(&w);

    /* slide > size: records between windows belong to none. */
    win_open(&w, "sum", "assigner=sliding size_ms=5 slide_ms=10 offset_ms=2");
    rec(&w, "a", 1, 2);  /* [2,7) */
    rec(&w, "a", 2, 8);  /* none */
    rec(&w, "a", 4, 12); /* [12,17) */
    rec(&w, "a", 8, -3); /* between [-8,-3) and [2,7): none */
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=1@6 a=4@16");
    cr_assert_eq(w.late, 0);
    win_close(&w);
}

Test(window, cumulate_every_window_of_its_max_window_that_holds_the_record)
{
    win_t w;
    /* max windows of 12 ms, a window ending every 4 ms: [0,4) [0,8) [0,12) */
    win_open(&w, "sum", "assigner=cumulate size_ms=12 slide_ms=4");
    rec(&w, "a", 1, 1);  /* [0,4) [0,8) [0,12) */
    rec(&w, "a", 2, 5);  /* [0,8) [0,12) */
    rec(&w, "a", 4, 11); /* [0,12) */
    rec(&w, "a", 8, 12); /* [12,16) [12,20) [12,24) */
    rec(&w, "a", 16, 3); /* out of order: [0,4) [0,8) [0,12) */
    wm(&w, 3);
    EXPECT(&w, "a=17@3");
    wm(&w, 11);
    EXPECT(&w, "a=19@7 a=23@11");
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=8@15 a=8@19 a=8@23");
    assert_no_state(&w);
    cr_assert_eq(w.late, 0);
    /* a record whose every window ended is late; one with a window left is not */
    rec(&w, "a", 1, 13);
    cr_assert_eq(w.late, 1);
    win_close(&w);

    win_open(&w, "sum", "assigner=cumulate size_ms=12 slide_ms=4");
    rec(&w, "a", 1, 1);
    wm(&w, 5); /* [0,4) fired */
    EXPECT(&w, "a=1@3");
    rec(&w, "a", 2, 2); /* [0,4) ended: into [0,8) and [0,12) only */
    cr_assert_eq(w.late, 0);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=3@7 a=3@11");
    win_close(&w);
}

Test(window, sessions_merge_in_and_out_of_order)
{
    win_t w;
    win_open(&w, "sum", "assigner=session gap_ms=10");
    rec(&w, "a", 1, 0);  /* [0,10) */
    rec(&w, "a", 2, 5);  /* -> [0,15) */
    rec(&w, "a", 4, 30); /* [30,40) */
    rec(&w, "b", 8, 3);  /* [3,13) */
    wm(&w, 12);
    EXPECT(&w, "b=8@12");
    wm(&w, 14);
    EXPECT(&w, "a=3@14");
    rec(&w, "a", 16, 22); /* [22,32) merges with [30,40) -> [22,40) */
    wm(&w, 38);
    EXPECT(&w, "");
    wm(&w, 39);
    EXPECT(&w, "a=20@39");
    assert_no_state(&w);
    win_close(&w);
}

Test(window, session_bridging_record_merges_accumulators)
{
    win_t w;
    merges = 0;
    win_open(&w, "avg", "assigner=session gap_ms=10");
    rec(&w, "a", 10, 0);   /* [0,10) */
    rec(&w, "a", 20, 15);  /* [15,25) */
    rec(&w, "a", 60, 100); /* [100,110) */
    cr_assert_eq(merges, 0);
    rec(&w, "a", 30, 8);   /* [8,18) bridges both: [0,25) */
    cr_assert_eq(merges, 1, "one state merged into the other");
    rec(&w, "a", 40, 25);  /* [25,35) touches [0,25): merged, as in Flink */
    wm(&w, 33);
    EXPECT(&w, "");
    wm(&w, 34);
    EXPECT(&w, "a=25@34");
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=60@109");
    assert_no_state(&w);
    win_close(&w);

    /* The same with element lists: lists are concatenated. */
    win_open(&w, "list", "assigner=session gap_ms=10");
    rec(&w, "a:x", 0, 0);
    rec(&w, "a:y", 0, 15);
    rec(&w, "a:z", 0, 8);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a[0,25):x,y,z=3@24");
    assert_no_state(&w);
    win_close(&w);
}

/* ---- functions ---- */

Test(window, process_sees_every_element_and_aggregate_plus_process_one_result)
{
    win_t w;
    win_open(&w, "list", "assigner=tumbling size_ms=10");
    rec(&w, "a:p", 0, 1);
    rec(&w, "b:q", 0, 2);
    rec(&w, "a:r", 0, 3);
    rec(&w, "a:s", 0, 13);
    wm(&w, 9);
    EXPECT(&w, "a[0,10):p,r=2@9 b[0,10):q=1@9");
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a[10,20):s=1@19");
    assert_no_state(&w);
    win_close(&w);

    win_open(&w, "avg_process", "assigner=tumbling size_ms=10");
    rec(&w, "a", 2, 1);
    rec(&w, "a", 4, 2);
    rec(&w, "b", 9, 5);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a[0,10)=3@9 b[0,10)=9@9");
    win_close(&w);

    win_open(&w, "avg", "assigner=tumbling size_ms=10");
    rec(&w, "a", 2, 1);
    rec(&w, "a", 5, 2);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=3@9");
    win_close(&w);
}

/* ---- lateness ---- */

Test(window, late_records_are_dropped_and_counted)
{
    win_t w;
    win_open(&w, "sum", "assigner=tumbling size_ms=10");
    rec(&w, "a", 1, 5);
    wm(&w, 9);
    EXPECT(&w, "a=1@9");
    rec(&w, "a", 2, 9);  /* [0,10) is gone: late */
    rec(&w, "a", 4, 10); /* [10,20): fine */
    EXPECT(&w, "");
    cr_assert_eq(w.late, 1);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=4@19");
    win_close(&w);

    win_open(&w, "sum", "assigner=tumbling size_ms=10 late=emit");
    wm(&w, 100);
    rec(&w, "a:x", 7, 42);
    EXPECT(&w, "!a:x=7@42");
    cr_assert_eq(w.late, 1);
    assert_no_state(&w);
    win_close(&w);

    /* Sessions: a record whose own session is late but that merges into a
     * live one is not late. */
    win_open(&w, "sum", "assigner=session gap_ms=10 lateness_ms=0");
    rec(&w, "a", 1, 20); /* [20,30) */
    wm(&w, 15);
    rec(&w, "a", 2, 11); /* [11,21) is not late (20 > 15) and merges: [11,30) */
    rec(&w, "a", 4, 0);  /* [0,10): late (9 <= 15), alone */
    cr_assert_eq(w.late, 1);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=3@29");
    win_close(&w);
}

Test(window, allowed_lateness_fires_again_then_cleans_up)
{
    win_t w;
    win_open(&w, "sum", "assigner=tumbling size_ms=10 lateness_ms=5");
    rec(&w, "a", 1, 1);
    wm(&w, 9);
    EXPECT(&w, "a=1@9");
    rec(&w, "a", 2, 2); /* after the firing, within lateness: fires again */
    EXPECT(&w, "a=3@9");
    rec(&w, "b", 4, 4); /* a new window within lateness fires at once */
    EXPECT(&w, "b=4@9");
    wm(&w, 13);
    rec(&w, "a", 8, 3);
    EXPECT(&w, "a=11@9");
    cr_assert_eq(w.late, 0);
    wm(&w, 14); /* cleanup: end - 1 + lateness */
    EXPECT(&w, "");
    assert_no_state(&w);
    rec(&w, "a", 16, 5);
    cr_assert_eq(w.late, 1);
    EXPECT(&w, "");
    win_close(&w);

    /* Sessions with lateness: a late record merges into a fired session. */
    win_open(&w, "avg", "assigner=session gap_ms=10 lateness_ms=20");
    rec(&w, "a", 10, 0);
    wm(&w, 9);
    EXPECT(&w, "a=10@9");
    rec(&w, "a", 30, 5); /* [5,15) extends [0,10) to [0,15): not yet due */
    EXPECT(&w, "");
    wm(&w, 14);
    EXPECT(&w, "a=20@14");
    rec(&w, "a", 50, 12); /* [12,22) -> [0,22): end - 1 > 14, a new timer */
    EXPECT(&w, "");
    wm(&w, 21);
    EXPECT(&w, "a=30@21");
    wm(&w, 40);
    EXPECT(&w, "");
    wm(&w, 41); /* cleanup of [0,22) */
    assert_no_state(&w);
    win_close(&w);
}

/* ---- processing time ---- */

Test(window, processing_time_windows_fire_on_ticks_and_at_finish)
{
    win_t w;
    win_open(&w, "sum", "assigner=tumbling size_ms=10 time=processing");
    tick(&w, 1000);
    rec(&w, "a", 1, 5); /* event time is ignored */
    rec(&w, "a", 2, 99999);
    tick(&w, 1008);
    EXPECT(&w, "");
    rec(&w, "b", 4, 0);
    tick(&w, 1009);
    EXPECT(&w, "a=3@1009 b=4@1009");
    tick(&w, 1012);
    rec(&w, "a", 8, 0);
    wm(&w, EDDY_WATERMARK_MAX); /* no effect on processing time */
    EXPECT(&w, "");
    finish(&w);
    EXPECT(&w, "a=8@1019");
    assert_no_state(&w);
    win_close(&w);

    win_open(&w, "list", "assigner=session gap_ms=10 time=processing");
    tick(&w, 100);
    rec(&w, "a:x", 0, 0);
    tick(&w, 105);
    rec(&w, "a:y", 0, 0); /* [105,115) merges with [100,110) */
    tick(&w, 110);
    EXPECT(&w, "");
    tick(&w, 114);
    EXPECT(&w, "a[100,115):x,y=2@114");
    win_close(&w);
}

/* ---- snapshots: restore and rescale ---- */

/* Drives the same input into w; part 0 before the snapshot, 1 after. */
static void script(win_t *w, int part)
{
    if (part == 0) {
        rec(w, "a:1", 1, 0);
        rec(w, "b:2", 2, 3);
        rec(w, "c:3", 4, 12);
        rec(w, "a:4", 8, 25);
        wm(w, 9);
        rec(w, "b:5", 16, 6); /* within lateness */
        rec(w, "a:6", 32, 17);
        return;
    }
    rec(w, "c:7", 64, 14);
    rec(w, "b:8", 128, 1);
    wm(w, 24);
    rec(w, "a:9", 256, 40);
    rec(w, "d:10", 512, 2); /* late */
    wm(w, 26);
    rec(w, "a:11", 1024, 33);
    wm(w, EDDY_WATERMARK_MAX);
}

static void restore_continues_identically(const char *kind, const char *spec)
{
    win_t a, b;
    win_open(&a, kind, spec);
    script(&a, 0);
    a.out.text[0] = 0;
    win_open_twin(&b, &a);
    copy_all_groups(&a, &b);
    uint64_t late_before = a.late;
    script(&a, 1);
    script(&b, 1);
    cr_assert_gt(strlen(a.out.text), 0);
    cr_assert_str_eq(b.out.text, a.out.text, "%s %s", kind, spec);
    cr_assert_eq(b.late, a.late - late_before);
    cr_assert_gt(b.late, 0);
    assert_no_state(&a);
    assert_no_state(&b);
    win_close(&b);
    win_close(&a);
}

Test(window, restore_into_a_new_instance_continues_identically)
{
    restore_continues_identically("sum", "assigner=tumbling size_ms=10 lateness_ms=8");
    restore_continues_identically("avg", "assigner=sliding size_ms=10 slide_ms=5 lateness_ms=4");
    restore_continues_identically("avg", "assigner=session gap_ms=5 lateness_ms=6");
    restore_continues_identically("list", "assigner=session gap_ms=5 lateness_ms=6");
    restore_continues_identically("list", "assigner=tumbling size_ms=10 late=emit");
    restore_continues_identically("avg_process", "assigner=session gap_ms=7");
}

Test(window, rescale_moves_a_session_that_merges_after_the_move)
{
    const char *kinds[] = {"avg", "list"};
    for (int i = 0; i < 2; i++) {
        win_t a, b;
        win_open(&a, kinds[i], "assigner=session gap_ms=10");
        rec(&a, "k:x", 10, 0);  /* [0,10) */
        rec(&a, "k:y", 20, 15); /* [15,25) */
        rec(&a, "j:z", 5, 1);
        win_open_twin(&b, &a);
        move_group(&a, &b, kg_of("k"));
        cr_assert_neq(kg_of("k"), kg_of("j"));
        rec(&b, "k:w", 30, 8); /* bridges the two sessions built on a */
        wm(&a, EDDY_WATERMARK_MAX);
        wm(&b, EDDY_WATERMARK_MAX);
        EXPECT(&a, i == 0 ? "j=5@10" : "j[1,11):z=1@10");
        EXPECT(&b, i == 0 ? "k=20@24" : "k[0,25):x,y,w=3@24");
        assert_no_state(&a);
        assert_no_state(&b);
        win_close(&b);
        win_close(&a);
    }
}

/* b's clock (4) is behind a's (22) when a's group of k moves to b: b goes
 * on by its own clock, so a record of its own group j in [0,10) is not
 * late there (this used to take a's clock over and drop it), and k's
 * window fires at b. */
Test(window, a_group_moved_into_a_running_instance_keeps_its_clock)
{
    const char *kinds[] = {"sum", "list"};
    const char *want[] = {"j=5@9 k=1@29", "j[0,10):y,z=2@9 k[20,30):x=1@29"};
    for (int i = 0; i < 2; i++) {
        win_t a, b;
        win_open(&a, kinds[i], "assigner=tumbling size_ms=10");
        win_open_twin(&b, &a);
        cr_assert_neq(kg_of("k"), kg_of("j"));
        rec(&a, "k:x", 1, 25);
        wm(&a, 22);
        rec(&b, "j:y", 2, 5);
        wm(&b, 4);
        move_group(&a, &b, kg_of("k"));
        rec(&b, "j:z", 3, 8);
        wm(&b, EDDY_WATERMARK_MAX);
        EXPECT(&a, "");
        EXPECT(&b, want[i]);
        cr_assert_eq(b.late, 0, "a record of b's own group was judged late by a's clock");
        assert_no_state(&b);
        win_close(&b);
        win_close(&a);
    }
}

Test(window, malformed_state_is_a_clear_error)
{
    win_t w;
    win_open(&w, "avg", "assigner=session gap_ms=10");
    rec(&w, "a", 1, 0);
    uint32_t kg = kg_of("a");
    eddy_err_t err = {{0}};
    char *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(w.kind->ops->write_group(w.op, kg, &bytes, &len, &err), 0);
    cr_assert_gt(len, 0);
    /* another key group */
    cr_assert_eq(w.kind->ops->read_group(w.op, (kg + 1) % K, bytes, len, &err), -1);
    cr_assert(strstr(err.msg, "key group"), "%s", err.msg);
    /* every truncation */
    for (size_t n = 1; n < len; n++) {
        cr_assert_eq(w.kind->ops->read_group(w.op, kg, bytes, n, &err), -1, "%zu bytes", n);
        cr_assert(strstr(err.msg, "window state"), "%s", err.msg);
    }
    /* garbage */
    cr_assert_eq(w.kind->ops->read_group(w.op, kg, "\xdd\xff\xff\xff\xff", 5, &err), -1);
    /* flipped bytes must fail cleanly or load something well-formed */
    for (size_t i = 0; i < len; i++) {
        char *copy = malloc(len);
        memcpy(copy, bytes, len);
        copy[i] ^= 0x5a;
        w.kind->ops->read_group(w.op, kg, copy, len, &err);
        free(copy);
    }
    /* a tumbling window refuses a session window's state */
    win_t t;
    win_open(&t, "avg", "assigner=tumbling size_ms=10");
    cr_assert_eq(t.kind->ops->read_group(t.op, kg, bytes, len, &err), -1);
    cr_assert(strstr(err.msg, "session"), "%s", err.msg);
    win_close(&t);
    win_open(&t, "sum", "assigner=session gap_ms=10");
    cr_assert_eq(t.kind->ops->read_group(t.op, kg, bytes, len, &err), -1);
    cr_assert(strstr(err.msg, "accumulators"), "%s", err.msg);
    win_close(&t);
    /* the good bytes still load, and an empty group reads as empty */
    cr_assert_eq(w.kind->ops->read_group(w.op, kg, bytes, len, &err), 0, "%s", err.msg);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=1@9");
    cr_assert_eq(w.kind->ops->read_group(w.op, kg, NULL, 0, &err), 0);
    free(bytes);
    win_close(&w);
}

/* ---- configuration ---- */

static void config_error(const char *kind, const char *spec, const char *needle)
{
    eddy_registry_t *r = registry();
    const eddy_operator_kind_t *k = eddy_registry_operator(r, kind);
    eddy_config_t *c = config(spec);
    eddy_err_t err = {{0}};
    void *conf = k->configure(c, k->arg, &err);
    cr_assert_null(conf, "'%s' was accepted", spec);
    cr_assert(strstr(err.msg, needle), "'%s': %s", spec, err.msg);
    eddy_config_destroy(&c);
    eddy_registry_destroy(&r);
}

Test(window, config_errors_name_the_key)
{
    config_error("sum", "size_ms=10", "'assigner' is required");
    config_error("sum", "assigner=hopping size_ms=10", "'assigner' is 'hopping'");
    config_error("sum", "assigner=tumbling", "'size_ms' must be > 0");
    config_error("sum", "assigner=tumbling size_ms=0", "'size_ms' must be > 0");
    config_error("sum", "assigner=tumbling size_ms=ten", "'size_ms' must be an integer");
    config_error("sum", "assigner=tumbling size_ms=10 slide_ms=5", "'slide_ms' does not apply");
    config_error("sum", "assigner=tumbling size_ms=10 offset_ms=10", "'offset_ms'");
    config_error("sum", "assigner=tumbling size_ms=10 offset_ms=-10", "'offset_ms'");
    config_error("sum", "assigner=sliding size_ms=10", "'slide_ms' must be > 0");
    config_error("sum", "assigner=sliding size_ms=10 slide_ms=5 offset_ms=5", "'offset_ms'");
    config_error("sum", "assigner=sliding size_ms=1000000 slide_ms=1", "windows");
    config_error("sum", "assigner=sliding size_ms=10 slide_ms=5 gap_ms=3", "'gap_ms' does not apply");
    config_error("sum", "assigner=cumulate size_ms=10", "'slide_ms' (the step) must be > 0 and divide");
    config_error("sum", "assigner=cumulate size_ms=10 slide_ms=4", "'slide_ms' (the step) must be > 0 and divide");
    config_error("sum", "assigner=cumulate size_ms=10 slide_ms=5 gap_ms=3", "'gap_ms' does not apply");
    config_error("sum", "assigner=session", "'gap_ms' must be > 0");
    config_error("sum", "assigner=session gap_ms=5 size_ms=10", "'size_ms' does not apply");
    config_error("sum", "assigner=tumbling size_ms=10 time=ingestion", "'time' is 'ingestion'");
    config_error("sum", "assigner=tumbling size_ms=10 lateness_ms=-1", "'lateness_ms' must be >= 0");
    config_error("sum", "assigner=tumbling size_ms=10 time=processing lateness_ms=5", "'lateness_ms'");
    config_error("sum", "assigner=tumbling size_ms=10 late=keep", "'late' is 'keep'");
    config_error("sum", "assigner=tumbling size_ms=10 late=1", "'late' must be a string");
    config_error("avg_nomerge", "assigner=session gap_ms=5", "merge()");
    config_error("sum", "assigner=sliding size_ms=10 slide_ms=5 panes=yes", "'panes' must be a boolean");

    /* registration */
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    const eddy_window_udf_t none = {0};
    cr_assert_eq(eddy_register_window(r, "x", &none, &err), -1);
    cr_assert(strstr(err.msg, "needs reduce()"), "%s", err.msg);
    eddy_window_udf_t both = avg_udf;
    both.reduce = add;
    cr_assert_eq(eddy_register_window(r, "x", &both, &err), -1);
    const eddy_window_udf_t no_result = {.aggregate = {.acc_size = 8, .add = avg_add}};
    cr_assert_eq(eddy_register_window(r, "x", &no_result, &err), -1);
    eddy_window_udf_t max_by_sum = sum_udf;
    max_by_sum.max_by.rank = eddy_window_rank_value;
    cr_assert_eq(eddy_register_window(r, "x", &max_by_sum, &err), -1);
    cr_assert(strstr(err.msg, "max_by keeps elements"), "%s", err.msg);
    eddy_window_udf_t no_rank = list_udf;
    no_rank.max_by.close = free;
    cr_assert_eq(eddy_register_window(r, "x", &no_rank, &err), -1);
    cr_assert(strstr(err.msg, "needs rank()"), "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "x", NULL, &err), -1);
    cr_assert_eq(eddy_register_window(r, "x", &sum_udf, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "x", &sum_udf, &err), -1, "names stay unique");
    eddy_registry_destroy(&r);
}

/* ---- randomised: restore and rescale against an uninterrupted run ---- */

typedef struct big_out {
    eddy_collector_t base;
    char *rows[20000];
    int n;
} big_out_t;

static void big_collect(eddy_collector_t *c, const eddy_record_t *rec)
{
    big_out_t *o = (big_out_t *)c;
    cr_assert_lt(o->n, 20000);
    char buf[512];
    snprintf(buf, sizeof buf, "%d %.*s=%lld@%lld", rec->kind, (int)rec->len, rec->data,
             (long long)rec->value, (long long)rec->timestamp);
    o->rows[o->n++] = strdup(buf);
}

static int cmp_rows(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void big_free(big_out_t *o)
{
    for (int i = 0; i < o->n; i++)
        free(o->rows[i]);
    o->n = 0;
}

typedef struct event {
    char data[16];
    int64_t value, ts, wm; /* wm: a watermark after the record (INT64_MIN: none) */
} event_t;

static void drive(win_t *w, big_out_t *o, const event_t *e)
{
    eddy_err_t err = {{0}};
    eddy_record_t r = {e->data, (uint32_t)strlen(e->data), EDDY_INSERT, e->value, e->ts};
    cr_assert_eq(w->kind->ops->process(w->op, &r, &o->base, &err), 0, "%s", err.msg);
    if (e->wm != INT64_MIN)
        cr_assert_eq(w->kind->ops->watermark(w->op, e->wm, &o->base, &err), 0, "%s", err.msg);
}

/* n events of 40 keys, disordered by up to 60 ms, a watermark every 25. */
static void random_events(event_t *ev, int n, unsigned seed)
{
    srand(seed);
    int64_t wm = INT64_MIN;
    for (int i = 0; i < n; i++) {
        int key = rand() % 40;
        snprintf(ev[i].data, sizeof ev[i].data, "k%d:%d", key, i % 100);
        ev[i].value = rand() % 100;
        ev[i].ts = i * 3 + rand() % 120 - 60;
        ev[i].wm = INT64_MIN;
        if (i % 25 == 24 && i * 3 - 40 > wm)
            ev[i].wm = wm = i * 3 - 40;
    }
    ev[n - 1].wm = EDDY_WATERMARK_MAX;
}

static void random_run(const char *kind, const char *spec, unsigned seed)
{
    enum { N = 3000, SPLIT = 1500 };
    static event_t ev[N];
    random_events(ev, N, seed);

    /* uninterrupted */
    win_t a;
    big_out_t oa = {.base.emit = big_collect};
    win_open(&a, kind, spec);
    for (int i = 0; i < SPLIT; i++)
        drive(&a, &oa, &ev[i]);
    big_free(&oa);
    uint64_t late_at_split = a.late;

    /* restored into a new instance at the split */
    win_t b;
    big_out_t ob = {.base.emit = big_collect};
    win_open_twin(&b, &a);
    copy_all_groups(&a, &b);
    /* rescaled at the split: odd key groups move to a second instance */
    win_t c, d;
    big_out_t oc = {.base.emit = big_collect}, od = {.base.emit = big_collect};
    win_open_twin(&c, &a);
    win_open_twin(&d, &a);
    copy_all_groups(&a, &c);
    for (uint32_t kg = 1; kg < K; kg += 2)
        move_group(&c, &d, kg);

    for (int i = SPLIT; i < N; i++) {
        drive(&a, &oa, &ev[i]);
        drive(&b, &ob, &ev[i]);
        const char *key;
        eddy_record_t r = eddy_record_make(ev[i].data, (uint32_t)strlen(ev[i].data), 0);
        uint32_t klen = key_before_colon(&r, &key);
        uint32_t kg = eddy_key_group_of(key, klen, K);
        event_t only_record = ev[i];
        only_record.wm = INT64_MIN;
        drive(kg % 2 ? &d : &c, kg % 2 ? &od : &oc, &only_record);
        if (ev[i].wm != INT64_MIN) { /* watermarks reach every instance */
            eddy_err_t err = {{0}};
            cr_assert_eq(c.kind->ops->watermark(c.op, ev[i].wm, &oc.base, &err), 0);
            cr_assert_eq(d.kind->ops->watermark(d.op, ev[i].wm, &od.base, &err), 0);
        }
    }
    cr_assert_gt(oa.n, 50, "%s %s", kind, spec);
    cr_assert_eq(ob.n, oa.n, "%s %s", kind, spec);
    for (int i = 0; i < oa.n; i++)
        cr_assert_str_eq(ob.rows[i], oa.rows[i], "%s %s: row %d", kind, spec, i);
    cr_assert_eq(b.late, a.late - late_at_split);

    /* the rescaled pair gives the same rows (in another interleaving) */
    cr_assert_eq(oc.n + od.n, oa.n, "%s %s", kind, spec);
    for (int i = 0; i < od.n; i++)
        oc.rows[oc.n + i] = od.rows[i];
    int n = oc.n + od.n;
    qsort(oc.rows, (size_t)n, sizeof oc.rows[0], cmp_rows);
    qsort(oa.rows, (size_t)oa.n, sizeof oa.rows[0], cmp_rows);
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(oc.rows[i], oa.rows[i], "%s %s: sorted row %d", kind, spec, i);
    cr_assert_eq(c.late + d.late, a.late - late_at_split);
    oc.n = n;
    od.n = 0;

    assert_no_state(&a);
    assert_no_state(&b);
    assert_no_state(&c);
    assert_no_state(&d);
    big_free(&oa);
    big_free(&ob);
    big_free(&oc);
    win_close(&d);
    win_close(&c);
    win_close(&b);
    win_close(&a);
}

Test(window, random_streams_restore_and_rescale_like_an_uninterrupted_run)
{
    for (unsigned seed = 1; seed <= 3; seed++) {
        random_run("sum", "assigner=tumbling size_ms=50 lateness_ms=20", seed);
        random_run("avg", "assigner=sliding size_ms=60 slide_ms=20 lateness_ms=10 late=emit", seed);
        random_run("avg", "assigner=session gap_ms=15 lateness_ms=25", seed);
        random_run("list", "assigner=session gap_ms=15", seed);
        random_run("avg_process", "assigner=tumbling size_ms=40 offset_ms=7", seed);
        random_run("sum", "assigner=sliding size_ms=50 slide_ms=20 lateness_ms=15", seed);
        random_run("list_max", "assigner=session gap_ms=15", seed);
    }
}

/* ---- panes (sliding windows of an accumulator that merges) ---- */

/* The same random disordered stream into a window kept as panes and one
 * kept per window ('panes' false): the same rows in the same order and
 * the same late records, with a restore of both halfway. */
static void panes_like_per_window(const char *kind, const char *spec, unsigned seed)
{
    enum { N = 3000, SPLIT = 1300 };
    static event_t ev[N];
    srand(seed);
    int64_t wm = INT64_MIN;
    for (int i = 0; i < N; i++) {
        snprintf(ev[i].data, sizeof ev[i].data, "k%d", rand() % 30);
        ev[i].value = rand() % 100;
        ev[i].ts = i * 3 + rand() % 300 - 150;
        ev[i].wm = INT64_MIN;
        if (i % 20 == 19 && i * 3 - 30 > wm)
            ev[i].wm = wm = i * 3 - 30;
    }
    ev[N - 1].wm = EDDY_WATERMARK_MAX;
    char per_window[256];
    snprintf(per_window, sizeof per_window, "%s panes=false", spec);
    win_t p, w, p2, w2;
    big_out_t op = {.base.emit = big_collect}, ow = {.base.emit = big_collect};
    win_open(&p, kind, spec);
    win_open(&w, kind, per_window);
    for (int i = 0; i < SPLIT; i++) {
        drive(&p, &op, &ev[i]);
        drive(&w, &ow, &ev[i]);
    }
    win_open_twin(&p2, &p);
    win_open_twin(&w2, &w);
    copy_all_groups(&p, &p2);
    copy_all_groups(&w, &w2);
    for (int i = SPLIT; i < N; i++) {
        drive(&p2, &op, &ev[i]);
        drive(&w2, &ow, &ev[i]);
    }
    cr_assert_gt(ow.n, 100, "%s %s", kind, spec);
    cr_assert_eq(op.n, ow.n, "%s %s seed %u", kind, spec, seed);
    for (int i = 0; i < ow.n; i++)
        cr_assert_str_eq(op.rows[i], ow.rows[i], "%s %s seed %u: row %d", kind, spec, seed, i);
    cr_assert_eq(p.late, w.late);
    cr_assert_eq(p2.late, w2.late);
    cr_assert_gt(p.late + p2.late, 0, "%s %s: nothing was late", kind, spec);
    assert_no_state(&p2);
    assert_no_state(&w2);
    big_free(&op);
    big_free(&ow);
    win_close(&w2);
    win_close(&p2);
    win_close(&w);
    win_close(&p);
}

Test(window, panes_give_per_window_results_on_disordered_input_with_lateness)
{
    for (unsigned seed = 1; seed <= 3; seed++) {
        panes_like_per_window("sum", "assigner=sliding size_ms=60 slide_ms=20", seed);
        panes_like_per_window("sum", "assigner=sliding size_ms=50 slide_ms=20 lateness_ms=15", seed);
        panes_like_per_window("avg", "assigner=sliding size_ms=45 slide_ms=30 offset_ms=-7 lateness_ms=40 late=emit",
                              seed);
        panes_like_per_window("avg_process", "assigner=sliding size_ms=30 slide_ms=30 lateness_ms=9", seed);
        panes_like_per_window("avg", "assigner=sliding size_ms=100 slide_ms=10 lateness_ms=3", seed);
    }
}

Test(window, pane_boundaries_gcd_panes_and_panes_dropped_after_the_last_window)
{
    win_t w;
    /* size 10, slide 4: panes of gcd 2; ts 5 is in pane [4,6), whose
     * windows are [-4,6) [0,10) [4,14) */
    win_open(&w, "sum", "assigner=sliding size_ms=10 slide_ms=4");
    rec(&w, "a", 1, 5);
    rec(&w, "a", 2, 4);  /* the same pane */
    rec(&w, "a", 4, 6);  /* pane [6,8): windows [0,10) [4,14) */
    rec(&w, "a", 8, 3);  /* pane [2,4): [-4,6) [0,10) */
    rec(&w, "a", 16, 12); /* pane [12,14): [4,14) [8,18) [12,22) */
    wm(&w, 4);
    EXPECT(&w, "");
    wm(&w, 5);
    EXPECT(&w, "a=11@5");
    wm(&w, 9);
    EXPECT(&w, "a=15@9");
    wm(&w, 12);
    EXPECT(&w, "");
    char *bytes = NULL;
    size_t len = 0;
    eddy_err_t err = {{0}};
    cr_assert_eq(w.kind->ops->write_group(w.op, kg_of("a"), &bytes, &len, &err), 0);
    cr_assert_gt(len, 0, "panes of windows still to fire were dropped");
    free(bytes);
    wm(&w, 13);
    EXPECT(&w, "a=23@13");
    wm(&w, 17);
    EXPECT(&w, "a=16@17");
    wm(&w, 21);
    EXPECT(&w, "a=16@21");
    assert_no_state(&w); /* pane [12,14)'s last window fired: it is gone */
    rec(&w, "a", 32, 13); /* every window of its pane is gone: late */
    cr_assert_eq(w.late, 1);
    win_close(&w);

    /* size 9, slide 6, offset 2: panes of 3 aligned to 2; windows start
     * at 2 + 6k; ts 10 is in pane [8,11), in windows [2,11) and [8,17) */
    win_open(&w, "sum", "assigner=sliding size_ms=9 slide_ms=6 offset_ms=2");
    rec(&w, "a", 1, 10);
    rec(&w, "a", 2, 8);
    rec(&w, "a", 4, 11); /* pane [11,14): only [8,17) */
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a=3@10 a=7@16");
    assert_no_state(&w);
    win_close(&w);
}

Test(window, late_records_with_panes_fire_the_windows_within_lateness)
{
    win_t w;
    win_open(&w, "sum", "assigner=sliding size_ms=10 slide_ms=5 lateness_ms=5 late=emit");
    rec(&w, "a", 1, 7); /* [0,10) [5,15) */
    wm(&w, 9);
    EXPECT(&w, "a=1@9");
    rec(&w, "a", 2, 6); /* [0,10) within lateness: fires again; [5,15) waits */
    EXPECT(&w, "a=3@9");
    wm(&w, 14); /* [0,10) cleaned up; [5,15) fires */
    EXPECT(&w, "a=3@14");
    rec(&w, "a", 4, 3); /* [-5,5) and [0,10) are gone: late, sent on */
    EXPECT(&w, "!a=4@3");
    rec(&w, "a", 8, 8); /* [0,10) gone, [5,15) within lateness */
    EXPECT(&w, "a=11@14");
    cr_assert_eq(w.late, 1);
    wm(&w, 19);
    EXPECT(&w, "");
    assert_no_state(&w);
    win_close(&w);
}

Test(window, pane_state_round_trips_and_refuses_per_window_state_clearly)
{
    win_t p, w, t;
    win_open(&p, "avg", "assigner=sliding size_ms=10 slide_ms=5 lateness_ms=3");
    win_open(&w, "avg", "assigner=sliding size_ms=10 slide_ms=5 lateness_ms=3 panes=false");
    rec(&p, "a", 10, 7);
    rec(&p, "a", 20, 12);
    rec(&w, "a", 10, 7);
    uint32_t kg = kg_of("a");
    eddy_err_t err = {{0}};
    char *pb = NULL, *wb = NULL;
    size_t pl = 0, wl = 0;
    cr_assert_eq(p.kind->ops->write_group(p.op, kg, &pb, &pl, &err), 0);
    cr_assert_eq(w.kind->ops->write_group(w.op, kg, &wb, &wl, &err), 0);
    /* the round trip continues identically */
    win_open_twin(&t, &p);
    cr_assert_eq(t.kind->ops->read_group(t.op, kg, pb, pl, &err), 0, "%s", err.msg);
    wm(&p, EDDY_WATERMARK_MAX);
    wm(&t, EDDY_WATERMARK_MAX);
    cr_assert_str_eq(t.out.text, "a=10@9 a=15@14 a=20@19");
    cr_assert_str_eq(t.out.text, p.out.text);
    assert_no_state(&t);
    win_close(&t);
    /* every truncation is a clear error */
    for (size_t n = 1; n < pl; n++) {
        cr_assert_eq(p.kind->ops->read_group(p.op, kg, pb, n, &err), -1, "%zu bytes", n);
        cr_assert(strstr(err.msg, "window state"), "%s", err.msg);
    }
    /* per-window state into panes and back: each says which config reads it */
    cr_assert_eq(p.kind->ops->read_group(p.op, kg, wb, wl, &err), -1);
    cr_assert(strstr(err.msg, "'panes' false"), "%s", err.msg);
    cr_assert_eq(w.kind->ops->read_group(w.op, kg, pb, pl, &err), -1);
    cr_assert(strstr(err.msg, "keeps sliding windows as panes"), "%s", err.msg);
    free(pb);
    free(wb);
    win_close(&w);
    win_close(&p);
}

/* ---- max_by ---- */

Test(window, max_by_keeps_every_tie_in_arrival_order_and_nothing_else)
{
    win_t w;
    win_open(&w, "list_max", "assigner=tumbling size_ms=10");
    rec(&w, "a:p1", 3, 1);
    rec(&w, "a:p2", 5, 2);
    rec(&w, "a:p3", 5, 3);
    rec(&w, "a:p4", 2, 4);
    rec(&w, "a:p5", 5, 5);
    rec(&w, "b:q1", -1, 5);
    rec(&w, "b:q2", 7, 6);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a[0,10):p2,p3,p5=3@9 b[0,10):q2=1@9");
    win_close(&w);

    /* sessions: the higher side wins a merge, both on a tie */
    win_open(&w, "list_max", "assigner=session gap_ms=10");
    rec(&w, "a:x", 4, 0);
    rec(&w, "a:y", 9, 20);
    rec(&w, "a:z", 4, 10); /* bridges [0,10) and [20,30) */
    rec(&w, "c:x", 4, 0);
    rec(&w, "c:y", 4, 20);
    rec(&w, "c:z", 4, 10);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "a[0,30):y=1@29 c[0,30):x,y,z=3@29");
    win_close(&w);
}

Test(window, max_by_restores_lists_written_without_it_keeping_the_best)
{
    win_t l, m;
    win_open(&l, "list", "assigner=tumbling size_ms=10");
    win_open(&m, "list_max", "assigner=tumbling size_ms=10");
    rec(&l, "a:p1", 3, 1);
    rec(&l, "a:p2", 8, 2);
    rec(&l, "a:p3", 1, 3);
    rec(&l, "a:p4", 8, 4);
    copy_all_groups(&l, &m);
    rec(&m, "a:p5", 6, 5); /* below the restored best: not kept */
    rec(&m, "a:p6", 8, 6);
    wm(&m, EDDY_WATERMARK_MAX);
    EXPECT(&m, "a[0,10):p2,p4,p6=3@9");
    win_close(&m);
    win_close(&l);
}

/* ---- asynchronous snapshots (snapshot_view) ---- */

typedef struct view_reader {
    const eddy_operator_ops_t *ops; /* the kind's (the instance may be closed) */
    void *view;
    char *bytes[K];
    size_t lens[K];
    int rc[K];
} view_reader_t;

static void *read_view(void *arg)
{
    view_reader_t *vr = arg;
    for (uint32_t kg = 0; kg < K; kg++) {
        eddy_err_t err = {{0}};
        vr->rc[kg] = vr->ops->view_write_group(vr->view, kg, &vr->bytes[kg], &vr->lens[kg], &err);
    }
    return NULL;
}

/* A view taken at the split gives each group's bytes as write_group gave
 * them there, while the instance goes on (records, watermarks firing and
 * cleaning windows, a group dropped) on this thread and a second thread
 * reads the view - and after the instance closed. */
static void view_is_frozen(const char *kind, const char *spec, unsigned seed, bool close_first)
{
    enum { N = 3000, SPLIT = 1500 };
    static event_t ev[N];
    random_events(ev, N, seed);
    win_t w;
    big_out_t o = {.base.emit = big_collect};
    win_open(&w, kind, spec);
    for (int i = 0; i < SPLIT; i++)
        drive(&w, &o, &ev[i]);
    eddy_err_t err = {{0}};
    char *want[K];
    size_t want_len[K];
    uint32_t groups[K];
    for (uint32_t kg = 0; kg < K; kg++) {
        groups[kg] = kg;
        cr_assert_eq(w.kind->ops->write_group(w.op, kg, &want[kg], &want_len[kg], &err), 0, "%s",
                     err.msg);
    }
    const eddy_operator_ops_t *ops = w.kind->ops; /* static: outlives the registry */
    view_reader_t vr = {.ops = ops};
    vr.view = w.kind->ops->snapshot_view(w.op, groups, K, &err);
    cr_assert(vr.view, "%s", err.msg);
    pthread_t reader;
    if (!close_first)
        cr_assert_eq(pthread_create(&reader, NULL, read_view, &vr), 0);
    w.kind->ops->drop_group(w.op, kg_of("k7"));
    for (int i = SPLIT; i < N; i++)
        drive(&w, &o, &ev[i]);
    if (close_first) {
        win_close(&w);
        read_view(&vr);
    } else {
        cr_assert_eq(pthread_join(reader, NULL), 0);
    }
    size_t nonempty = 0;
    for (uint32_t kg = 0; kg < K; kg++) {
        cr_assert_eq(vr.rc[kg], 0, "%s %s: group %u", kind, spec, kg);
        cr_assert_eq(vr.lens[kg], want_len[kg], "%s %s: group %u", kind, spec, kg);
        cr_assert(!want_len[kg] || !memcmp(vr.bytes[kg], want[kg], want_len[kg]),
                  "%s %s: group %u differs from the barrier's bytes", kind, spec, kg);
        nonempty += want_len[kg] > 0;
        free(vr.bytes[kg]);
        free(want[kg]);
    }
    cr_assert_gt(nonempty, 10, "%s %s: the view held state", kind, spec);
    char *again = NULL;
    size_t again_len = 0;
    cr_assert_eq(ops->view_write_group(vr.view, 0, &again, &again_len, &err), -1,
                 "a group is taken once");
    ops->view_release(vr.view);
    if (!close_first) {
        assert_no_state(&w);
        win_close(&w);
    }
    big_free(&o);
}

Test(window, a_snapshot_view_keeps_the_barriers_bytes_while_the_instance_goes_on)
{
    for (unsigned seed = 1; seed <= 2; seed++)
        for (int close_first = 0; close_first <= 1; close_first++) {
            view_is_frozen("sum", "assigner=tumbling size_ms=50 lateness_ms=20", seed, close_first);
            view_is_frozen("avg", "assigner=sliding size_ms=60 slide_ms=20", seed, close_first);
            view_is_frozen("avg", "assigner=session gap_ms=15 lateness_ms=25", seed, close_first);
            view_is_frozen("list_max", "assigner=session gap_ms=15", seed, close_first);
        }
}

Test(window, a_second_view_or_a_restore_never_changes_an_earlier_views_bytes)
{
    win_t w;
    win_open(&w, "sum", "assigner=tumbling size_ms=10");
    rec(&w, "a", 1, 1);
    uint32_t kg = kg_of("a");
    eddy_err_t err = {{0}};
    char *at_first = NULL, *got = NULL;
    size_t at_first_len = 0, got_len = 0;
    cr_assert_eq(w.kind->ops->write_group(w.op, kg, &at_first, &at_first_len, &err), 0);
    void *first = w.kind->ops->snapshot_view(w.op, &kg, 1, &err);
    cr_assert(first);
    rec(&w, "a", 5, 2);
    void *second = w.kind->ops->snapshot_view(w.op, &kg, 1, &err); /* both stay frozen */
    cr_assert(second);
    w.kind->ops->read_group(w.op, kg, NULL, 0, &err); /* a restore empties the group */
    cr_assert_eq(w.kind->ops->view_write_group(first, kg, &got, &got_len, &err), 0, "%s", err.msg);
    cr_assert_eq(got_len, at_first_len);
    cr_assert_eq(memcmp(got, at_first, got_len), 0);
    free(got);
    got = NULL;
    cr_assert_eq(w.kind->ops->view_write_group(second, kg, &got, &got_len, &err), 0, "%s", err.msg);
    cr_assert_gt(got_len, 0, "the second view has the group as it was before the restore");
    free(got);
    uint32_t other = (kg + 1) % K;
    cr_assert_eq(w.kind->ops->view_write_group(second, other, &got, &got_len, &err), -1,
                 "a group outside the view");
    w.kind->ops->view_release(first);
    w.kind->ops->view_release(second);
    wm(&w, EDDY_WATERMARK_MAX);
    EXPECT(&w, "");
    free(at_first);
    win_close(&w);
}
