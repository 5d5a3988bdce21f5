/* test_window_combiner.c - local-global aggregation for windows
 * (operators/window.c "local pre-aggregation"): where the window offers a
 * combiner, records folded per (key, pane) before the shuffle and merged as
 * EDDY_PARTIAL records give the window operator exactly the output and the
 * late count it gives for the raw records, with watermarks in between,
 * out-of-order and late records, barrier flushes, and a window operator
 * whose watermark is ahead of the combiner's. Where it would not be exact,
 * the window offers none. The same runs are also checked through nexmark's
 * plan: q5 gets the combiner, --no-local-aggregation takes it away. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/window.h"
#include "jobs/jobs.h"
#include "net/partial.h"
#include "plan/registry.h"
#include "tests/unit/leak_check.h"

TestSuite(window_combiner, .fini = eddy_test_leak_check);

#define K 128

/* ---- user functions ---- */

static int64_t add(int64_t a, int64_t b) { return a + b; }

typedef struct avg {
    int64_t sum, count;
} avg_t;
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
}
static int64_t avg_result(const void *acc)
{
    const avg_t *a = acc;
    return a->count ? a->sum * 1000 / a->count : 0;
}

/* With an aggregate: "key[start,end)" = result, plus the count in the text. */
static void with_result(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                        eddy_collector_t *out)
{
    eddy_record_t r = eddy_window_element(elements, 0);
    char buf[128];
    int n = snprintf(buf, sizeof buf, "%.*s[%lld,%lld)", (int)ctx->key_len, ctx->key,
                     (long long)ctx->window.start, (long long)ctx->window.end);
    eddy_record_t o = {buf, (uint32_t)n, EDDY_INSERT, r.value, 0};
    eddy_emit(out, &o);
}

static void list_all(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                     eddy_collector_t *out)
{
    (void)ctx;
    eddy_record_t o = {"n", 1, EDDY_INSERT, (int64_t)elements->count, 0};
    eddy_emit(out, &o);
}

static const eddy_window_udf_t sum_udf = {.reduce = add};
static const eddy_window_udf_t avg_process_udf = {
    .aggregate = {.acc_size = sizeof(avg_t), .add = avg_add, .merge = avg_merge, .result = avg_result},
    .process = with_result};
static const eddy_window_udf_t avg_nomerge_udf = {
    .aggregate = {.acc_size = sizeof(avg_t), .add = avg_add, .result = avg_result}};
static const eddy_window_udf_t list_udf = {.process = list_all};

/* ---- harness ---- */

typedef struct lines {
    eddy_collector_t base;
    char **v;
    size_t n, cap;
} lines_t;

static void lines_emit(eddy_collector_t *c, const eddy_record_t *rec)
{
    lines_t *l = (lines_t *)c;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        cr_assert(l->v);
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s%.*s=%lld@%lld", rec->kind == EDDY_LATE ? "!" : "", (int)rec->len,
             rec->data, (long long)rec->value, (long long)rec->timestamp);
    l->v[l->n++] = strdup(buf);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void lines_free(lines_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static uint32_t key_before_colon(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    const char *c = memchr(rec->data, ':', rec->len);
    return c ? (uint32_t)(c - rec->data) : rec->len;
}

static eddy_registry_t *registry(void)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_register_window(r, "sum", &sum_udf, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "avg_process", &avg_process_udf, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "avg_nomerge", &avg_nomerge_udf, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_window(r, "list", &list_udf, &err), 0, "%s", err.msg);
    return r;
}

/* "assigner=tumbling size_ms=10 ..." (numbers become ints, combine=no a false bool). */
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
        if (!strcmp(tok, "combine"))
            eddy_config_set_bool(c, tok, strcmp(eq + 1, "no") != 0);
        else if (*end == 0 && end != eq + 1)
            eddy_config_set_int(c, tok, v);
        else
            eddy_config_set_str(c, tok, eq + 1);
    }
    return c;
}

typedef struct step {
    eddy_registry_t *reg;
    const eddy_operator_kind_t *kind;
    eddy_config_t *cfg;
    void *conf;
    const eddy_operator_ops_t *combiner_ops; /* NULL: the window offers none */
} step_t;

static void step_open(step_t *s, const char *kind, const char *spec)
{
    memset(s, 0, sizeof *s);
    s->reg = registry();
    s->kind = eddy_registry_operator(s->reg, kind);
    cr_assert(s->kind);
    s->cfg = config(spec);
    eddy_err_t err = {{0}};
    s->conf = s->kind->configure(s->cfg, s->kind->arg, &err);
    cr_assert(s->conf, "%s", err.msg);
    cr_assert(s->kind->ops->combiner);
    s->combiner_ops = s->kind->ops->combiner(s->conf);
}

static void step_close(step_t *s)
{
    s->kind->release(s->conf);
    eddy_config_destroy(&s->cfg);
    eddy_registry_destroy(&s->reg);
}

/* A window operator and, when combined, its combiner feeding it (the
 * shuffle between them reduced to a direct call). */
typedef struct pipe {
    const step_t *s;
    void *win, *comb;
    uint64_t late;
    uint64_t window_inputs; /* records the window operator got */
    lines_t out;
    eddy_collector_t to_window;
    eddy_op_context_t wctx, cctx;
} pipe_t;

static void to_window(eddy_collector_t *c, const eddy_record_t *rec)
{
    pipe_t *p = (pipe_t *)((char *)c - offsetof(pipe_t, to_window));
    eddy_err_t err = {{0}};
    p->window_inputs++;
    cr_assert_eq(p->s->kind->ops->process(p->win, rec, &p->out.base, &err), 0, "%s", err.msg);
}

static void pipe_open(pipe_t *p, const step_t *s, bool combined)
{
    memset(p, 0, sizeof *p);
    p->s = s;
    p->out.base.emit = lines_emit;
    p->to_window.emit = to_window;
    p->wctx = (eddy_op_context_t){.job_id = "t", .stage_name = "w", .parallelism = 1,
                                  .max_parallelism = K, .key_groups = {0, K},
                                  .key_fn = key_before_colon, .config = s->conf,
                                  .late_records = &p->late};
    eddy_err_t err = {{0}};
    p->win = s->kind->ops->open(&p->wctx, &err);
    cr_assert(p->win, "%s", err.msg);
    if (combined) {
        cr_assert(s->combiner_ops, "the window offers a combiner here");
        p->cctx = (eddy_op_context_t){.job_id = "t", .stage_name = "src", .parallelism = 1,
                                      .max_parallelism = K, .key_fn = key_before_colon,
                                      .config = s->conf};
        p->comb = s->combiner_ops->open(&p->cctx, &err);
        cr_assert(p->comb, "%s", err.msg);
    }
}

static void pipe_close(pipe_t *p)
{
    p->s->kind->ops->close(p->win);
    if (p->comb)
        p->s->combiner_ops->close(p->comb);
    lines_free(&p->out);
}

static void pipe_rec(pipe_t *p, const char *data, int64_t value, int64_t ts)
{
    eddy_record_t r = {data, (uint32_t)strlen(data), EDDY_INSERT, value, ts};
    eddy_err_t err = {{0}};
    if (p->comb)
        cr_assert_eq(p->s->combiner_ops->process(p->comb, &r, &p->to_window, &err), 0, "%s", err.msg);
    else
        to_window(&p->to_window, &r);
}

/* A watermark through the task: the combiner first (it flushes), then the window. */
static void pipe_wm(pipe_t *p, int64_t wm)
{
    eddy_err_t err = {{0}};
    if (p->comb)
        cr_assert_eq(p->s->combiner_ops->watermark(p->comb, wm, &p->to_window, &err), 0, "%s",
                     err.msg);
    cr_assert_eq(p->s->kind->ops->watermark(p->win, wm, &p->out.base, &err), 0, "%s", err.msg);
}

/* A barrier: the combiner flushes before it goes downstream. */
static void pipe_barrier(pipe_t *p)
{
    eddy_err_t err = {{0}};
    if (p->comb)
        cr_assert_eq(p->s->combiner_ops->flush(p->comb, &p->to_window, &err), 0, "%s", err.msg);
}

/* End of input: the watermark goes to the end, then finish() in chain order. */
static void pipe_finish(pipe_t *p)
{
    eddy_err_t err = {{0}};
    pipe_wm(p, EDDY_WATERMARK_MAX);
    if (p->comb)
        cr_assert_eq(p->s->combiner_ops->finish(p->comb, &p->to_window, &err), 0, "%s", err.msg);
    cr_assert_eq(p->s->kind->ops->finish(p->win, &p->out.base, &err), 0, "%s", err.msg);
}

/* Asserts both pipes emitted the same records (as a multiset: timers of
 * one time may fire in another order) and counted the same late records. */
static void assert_same(pipe_t *raw, pipe_t *comb)
{
    qsort(raw->out.v, raw->out.n, sizeof *raw->out.v, cmp_str);
    qsort(comb->out.v, comb->out.n, sizeof *comb->out.v, cmp_str);
    cr_assert_eq(raw->out.n, comb->out.n, "raw emitted %zu records, combined %zu", raw->out.n,
                 comb->out.n);
    for (size_t i = 0; i < raw->out.n; i++)
        cr_assert_str_eq(raw->out.v[i], comb->out.v[i]);
    cr_assert_eq(raw->late, comb->late, "late: raw %llu, combined %llu",
                 (unsigned long long)raw->late, (unsigned long long)comb->late);
}

/* ---- tests ---- */

Test(window_combiner, offered_only_where_exact)
{
    static const struct {
        const char *kind, *spec;
        bool offered;
    } cases[] = {
        {"sum", "assigner=tumbling size_ms=10", true},
        {"sum", "assigner=sliding size_ms=10 slide_ms=4 offset_ms=1", true},
        {"avg_process", "assigner=tumbling size_ms=10", true},
        {"avg_process", "assigner=sliding size_ms=10 slide_ms=5", true},
        {"sum", "assigner=tumbling size_ms=10 combine=no", false},
        {"sum", "assigner=tumbling size_ms=10 time=processing", false},
        {"sum", "assigner=tumbling size_ms=10 lateness_ms=5", false},
        {"sum", "assigner=tumbling size_ms=10 late=emit", false},
        {"avg_process", "assigner=session gap_ms=10", false},
        {"avg_nomerge", "assigner=tumbling size_ms=10", false},
        {"list", "assigner=tumbling size_ms=10", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        step_t s;
        step_open(&s, cases[i].kind, cases[i].spec);
        cr_assert_eq(s.combiner_ops != NULL, cases[i].offered, "%s %s", cases[i].kind,
                     cases[i].spec);
        step_close(&s);
    }
}

Test(window_combiner, tumbling_same_results_and_late_count)
{
    step_t s;
    step_open(&s, "sum", "assigner=tumbling size_ms=10");
    pipe_t raw, comb;
    pipe_open(&raw, &s, false);
    pipe_open(&comb, &s, true);
    pipe_t *both[2] = {&raw, &comb};
    for (int i = 0; i < 2; i++) {
        pipe_t *p = both[i];
        /* out of order within [0,10) and [10,20), a hot key */
        pipe_rec(p, "a:1", 1, 3);
        pipe_rec(p, "a:2", 2, 12);
        pipe_rec(p, "a:3", 4, 1);
        pipe_rec(p, "b:1", 8, 9);
        pipe_rec(p, "a:4", 16, 0);
        pipe_wm(p, 9); /* [0,10) fires */
        pipe_rec(p, "a:late", 100, 5);  /* late: dropped and counted */
        pipe_rec(p, "b:late", 100, 9);  /* late */
        pipe_rec(p, "a:5", 32, 10);
        pipe_barrier(p);
        pipe_rec(p, "a:6", 64, 19);
        pipe_rec(p, "c:1", 1, 25);
        pipe_finish(p);
    }
    assert_same(&raw, &comb);
    cr_assert_eq(raw.late, 2);
    cr_assert_eq(raw.out.n, 4); /* a[0,10) b[0,10) a[10,20) c[20,30) */
    cr_assert_lt(comb.window_inputs, raw.window_inputs, "the combiner shuffles fewer records");
    pipe_close(&raw);
    pipe_close(&comb);
    step_close(&s);
}

/* The window operator's watermark may be ahead of the combiner's (another
 * input channel, a restored key group): the partial is judged at the
 * window's watermark, like its records would have been. */
Test(window_combiner, judged_at_the_window_operators_watermark)
{
    step_t s;
    step_open(&s, "avg_process", "assigner=sliding size_ms=10 slide_ms=4");
    pipe_t raw, comb;
    pipe_open(&raw, &s, false);
    pipe_open(&comb, &s, true);
    eddy_err_t err = {{0}};
    /* combined: records held, the window's watermark moves on, then the flush */
    pipe_rec(&comb, "a:1", 10, 2);
    pipe_rec(&comb, "a:2", 20, 7);
    pipe_rec(&comb, "a:3", 30, 13);
    pipe_rec(&comb, "b:1", 40, 1);
    cr_assert_eq(comb.window_inputs, 0, "nothing leaves the combiner before a flush");
    cr_assert_eq(s.kind->ops->watermark(comb.win, 12, &comb.out.base, &err), 0, "%s", err.msg);
    pipe_barrier(&comb);
    /* raw: the same records arrive after the window's watermark moved */
    cr_assert_eq(s.kind->ops->watermark(raw.win, 12, &raw.out.base, &err), 0, "%s", err.msg);
    pipe_rec(&raw, "a:1", 10, 2);
    pipe_rec(&raw, "a:2", 20, 7);
    pipe_rec(&raw, "a:3", 30, 13);
    pipe_rec(&raw, "b:1", 40, 1);
    pipe_finish(&raw);
    pipe_finish(&comb);
    assert_same(&raw, &comb);
    cr_assert_eq(raw.late, 2, "ts 1 and 2 (not 7) are late for all their windows at watermark 12");
    pipe_close(&raw);
    pipe_close(&comb);
    step_close(&s);
}

/* Random streams: keys, out-of-order timestamps, watermarks and barriers
 * at random points, for assigners with panes finer than the slide, an
 * offset, and gaps between windows (slide > size: records in a gap pass). */
Test(window_combiner, random_streams_equal_raw_processing)
{
    static const struct {
        const char *kind, *spec;
    } steps[] = {
        {"sum", "assigner=tumbling size_ms=10"},
        {"avg_process", "assigner=tumbling size_ms=7 offset_ms=-3"},
        {"avg_process", "assigner=sliding size_ms=10 slide_ms=4 offset_ms=1"},
        {"sum", "assigner=sliding size_ms=12 slide_ms=3"},
        {"sum", "assigner=sliding size_ms=3 slide_ms=5"},
    };
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        step_t s;
        step_open(&s, steps[k].kind, steps[k].spec);
        for (unsigned seed = 1; seed <= 20; seed++) {
            pipe_t raw, comb;
            pipe_open(&raw, &s, false);
            pipe_open(&comb, &s, true);
            pipe_t *both[2] = {&raw, &comb};
            for (int i = 0; i < 2; i++) {
                unsigned r = seed;
                int64_t wm = -100, max_ts = -50;
                for (int n = 0; n < 400; n++) {
                    unsigned x = (unsigned)rand_r(&r);
                    if (x % 23 == 0) {
                        int64_t w = max_ts - (int64_t)(x / 23 % 8);
                        if (w > wm)
                            pipe_wm(both[i], wm = w);
                    } else if (x % 29 == 0) {
                        pipe_barrier(both[i]);
                    } else {
                        char data[16];
                        snprintf(data, sizeof data, "%c:%d", 'a' + (int)(x / 7 % 4), n);
                        int64_t ts = max_ts - 6 + (int64_t)(x / 31 % 9); /* out of order, some late */
                        if (ts > max_ts)
                            max_ts = ts;
                        pipe_rec(both[i], data, (int64_t)(x / 101 % 50) - 10, ts);
                    }
                }
                pipe_finish(both[i]);
            }
            assert_same(&raw, &comb);
            cr_assert_lt(comb.window_inputs, raw.window_inputs, "%s seed %u", steps[k].spec, seed);
            pipe_close(&raw);
            pipe_close(&comb);
        }
        step_close(&s);
    }
}

Test(window_combiner, flush_leaves_nothing_behind)
{
    step_t s;
    step_open(&s, "sum", "assigner=tumbling size_ms=10");
    pipe_t comb;
    pipe_open(&comb, &s, true);
    pipe_rec(&comb, "a:1", 1, 1);
    pipe_rec(&comb, "a:2", 1, 2);
    pipe_rec(&comb, "a:3", 1, 15);
    pipe_barrier(&comb);
    cr_assert_eq(comb.window_inputs, 2, "one partial per (key, pane)");
    pipe_barrier(&comb);
    cr_assert_eq(comb.window_inputs, 2, "a second flush sends nothing");
    pipe_finish(&comb);
    cr_assert_eq(comb.out.n, 2);
    pipe_close(&comb);
    step_close(&s);
}

Test(window_combiner, malformed_partials_are_clear_errors)
{
    step_t s;
    step_open(&s, "avg_process", "assigner=tumbling size_ms=10");
    pipe_t p;
    pipe_open(&p, &s, false);
    char frame[64];
    avg_t acc = {1, 1};
    eddy_err_t err = {{0}};
    uint32_t len = eddy_partial_encode(frame, "a", 1, &acc, sizeof acc - 1);
    eddy_record_t r = {frame, len, EDDY_PARTIAL, 1, 0};
    cr_assert_eq(s.kind->ops->process(p.win, &r, &p.out.base, &err), -1);
    cr_assert(strstr(err.msg, "malformed partial"), "%s", err.msg);
    eddy_record_t shorty = {frame, 3, EDDY_PARTIAL, 1, 0};
    cr_assert_eq(s.kind->ops->process(p.win, &shorty, &p.out.base, &err), -1);
    pipe_close(&p);
    step_close(&s);

    step_t l;
    step_open(&l, "list", "assigner=tumbling size_ms=10");
    pipe_open(&p, &l, false);
    len = eddy_partial_encode(frame, "a", 1, NULL, 0);
    eddy_record_t lr = {frame, len, EDDY_PARTIAL, 1, 0};
    cr_assert_eq(l.kind->ops->process(p.win, &lr, &p.out.base, &err), -1);
    cr_assert(strstr(err.msg, "takes none"), "%s", err.msg);
    pipe_close(&p);
    step_close(&l);
}

/* nexmark q5 (sliding counts) gets the combiner after its projection;
 * --no-local-aggregation and --late-output (late records must go on as
 * they are) take it away; q11 (sessions) never has one. */
static bool job_has_window_combiner(const char *query, const char *extra)
{
    static bool registered;
    eddy_err_t err = {{0}};
    if (!registered) {
        cr_assert_eq(eddy_jobs_register_builtin(eddy_registry_default(), &err), 0, "%s", err.msg);
        registered = true;
    }
    char *args[8] = {"--query", (char *)query, "--events", "10"};
    int argc = 4;
    if (extra)
        args[argc++] = (char *)extra;
    if (extra && !strcmp(extra, "--late-output"))
        args[argc++] = "/tmp/late";
    eddy_job_graph_t g;
    cr_assert_eq(eddy_job_build(&g, "nexmark", argc, args, &err), 0, "%s", err.msg);
    bool found = false;
    for (uint32_t i = 0; i < g.n_stages; i++)
        for (uint32_t j = 0; j < g.stages[i].n_ops; j++)
            found |= !strcmp(g.stages[i].ops[j].ops->kind, "window_combiner");
    eddy_graph_clear(&g);
    return found;
}

Test(window_combiner, nexmark_plans)
{
    cr_assert(job_has_window_combiner("q5", NULL));
    cr_assert_not(job_has_window_combiner("q5", "--no-local-aggregation"));
    cr_assert_not(job_has_window_combiner("q5", "--late-output"));
    cr_assert_not(job_has_window_combiner("q11", NULL));
    cr_assert_not(job_has_window_combiner("q12", NULL));
}
