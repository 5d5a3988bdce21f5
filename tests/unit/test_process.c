/* test_process.c - keyed process functions (api/process.h, operators/process.c).
 *
 * The operators are made the way a worker makes them: a kind registered
 * with eddy_register_process, looked up, configured and opened with an
 * eddy_op_context_t, then driven directly (process, watermark, tick,
 * write_group/read_group/drop_group). The main function is an incremental
 * two-sided join: records "P|id|x" and "A|id|y" keyed by id, each side
 * buffered in list state, every arrival joined with the other side's
 * buffer, an arrival count in the value state and an event-time timer per
 * key that expires the buffers ttl ms after the key's first record. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/process.h"
#include "plan/registry.h"
#include "state/keygroup.h"
#include "tests/unit/leak_check.h"

TestSuite(process, .fini = eddy_test_leak_check);

#define K 8u
#define MAX_ROWS 256

/* ---- a collector -------------------------------------------------------- */

typedef struct rows {
    eddy_collector_t base;
    char row[MAX_ROWS][64];
    int64_t ts[MAX_ROWS];
    int n;
} rows_t;

static void collect(eddy_collector_t *c, const eddy_record_t *rec)
{
    rows_t *self = (rows_t *)c;
    cr_assert_lt(self->n, MAX_ROWS);
    snprintf(self->row[self->n], sizeof self->row[0], "%.*s", (int)rec->len, rec->data);
    self->ts[self->n++] = rec->timestamp;
}

static void rows_init(rows_t *r)
{
    memset(r, 0, sizeof *r);
    r->base.emit = collect;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void rows_sort(rows_t *r)
{
    qsort(r->row, (size_t)r->n, sizeof r->row[0], str_cmp);
}

/* ---- the join ------------------------------------------------------------ */

/* "S|id|payload": the key is id. */
static uint32_t by_id(const eddy_record_t *rec, const char **key)
{
    const char *p = memchr(rec->data, '|', rec->len);
    if (!p) {
        *key = rec->data;
        return 0;
    }
    p++;
    const char *end = rec->data + rec->len;
    const char *q = memchr(p, '|', (size_t)(end - p));
    *key = p;
    return (uint32_t)((q ? q : end) - p);
}

static const char *payload(const eddy_record_t *rec, int *len)
{
    const char *p = rec->data + rec->len;
    while (p > rec->data && p[-1] != '|')
        p--;
    *len = (int)(rec->data + rec->len - p);
    return p;
}

typedef struct join_value {
    int64_t arrivals;
    int64_t expires_at; /* 0: no timer yet */
} join_value_t;

static int join_process(eddy_process_context_t *ctx, const eddy_record_t *rec,
                        eddy_collector_t *out, eddy_err_t *err)
{
    if (rec->len < 2 || (rec->data[0] != 'P' && rec->data[0] != 'A'))
        return eddy_err_set(err, "bad record '%.*s'", (int)rec->len, rec->data);
    const char side = rec->data[0], other = side == 'P' ? 'A' : 'P';
    const char *key;
    uint32_t key_len = eddy_process_key(ctx, &key);
    int mine_len, theirs_len;
    const char *mine = payload(rec, &mine_len);
    size_t n = eddy_process_list_size(ctx, &other, 1);
    for (size_t i = 0; i < n; i++) {
        eddy_record_t o;
        cr_assert(eddy_process_list_at(ctx, &other, 1, i, &o));
        const char *theirs = payload(&o, &theirs_len);
        char buf[64];
        int len = side == 'P'
                      ? snprintf(buf, sizeof buf, "%.*s:%.*s+%.*s", (int)key_len, key, mine_len,
                                 mine, theirs_len, theirs)
                      : snprintf(buf, sizeof buf, "%.*s:%.*s+%.*s", (int)key_len, key,
                                 theirs_len, theirs, mine_len, mine);
        eddy_record_t joined = eddy_record_make(buf, (uint32_t)len, 1);
        joined.timestamp = rec->timestamp > o.timestamp ? rec->timestamp : o.timestamp;
        eddy_emit(out, &joined);
    }
    if (eddy_process_list_add(ctx, &side, 1, rec) < 0)
        return eddy_err_set(err, "out of memory");
    bool created;
    join_value_t *v = eddy_process_value(ctx, &created);
    cr_assert_not_null(v);
    v->arrivals++;
    if (v->expires_at == 0) {
        int64_t ttl = eddy_config_int(eddy_process_config(ctx), "ttl", 10);
        v->expires_at = rec->timestamp + ttl;
        if (eddy_process_timer_register(ctx, EDDY_EVENT_TIME, v->expires_at, "ttl", 3) < 0)
            return eddy_err_set(err, "out of memory");
    }
    return 0;
}

/* Emits "expired:id:arrivals@watermark" and forgets the key. */
static int join_on_timer(eddy_process_context_t *ctx, eddy_time_domain_t domain, int64_t time,
                         const void *ns, uint32_t ns_len, eddy_collector_t *out, eddy_err_t *err)
{
    (void)err;
    cr_assert_eq(domain, EDDY_EVENT_TIME);
    cr_assert_eq(ns_len, 3);
    cr_assert_eq(memcmp(ns, "ttl", 3), 0);
    cr_assert_leq(time, eddy_process_watermark(ctx));
    const char *key;
    uint32_t key_len = eddy_process_key(ctx, &key);
    join_value_t *v = eddy_process_value_get(ctx);
    cr_assert_not_null(v, "the key's value exists when its timer fires");
    cr_assert_eq(v->expires_at, time);
    char buf[64];
    int len = snprintf(buf, sizeof buf, "expired:%.*s:%lld@%lld", (int)key_len, key,
                       (long long)v->arrivals, (long long)eddy_process_watermark(ctx));
    eddy_record_t rec = eddy_record_make(buf, (uint32_t)len, v->arrivals);
    rec.timestamp = time;
    eddy_emit(out, &rec);
    eddy_process_list_clear(ctx, "P", 1);
    eddy_process_list_clear(ctx, "A", 1);
    cr_assert(eddy_process_value_clear(ctx));
    cr_assert_null(eddy_process_value_get(ctx));
    return 0;
}

static const eddy_process_udf_t join_udf = {.value_size = sizeof(join_value_t),
                                            .process = join_process,
                                            .on_timer = join_on_timer};

/* ---- making operators as a worker does ---------------------------------- */

typedef struct fixture {
    eddy_registry_t *registry;
    const eddy_operator_kind_t *kind;
    eddy_config_t *config;
    void *configured;
} fixture_t;

static void fixture_init(fixture_t *f, const char *name, const eddy_process_udf_t *udf,
                         int64_t ttl)
{
    eddy_err_t err = {{0}};
    f->registry = eddy_registry_new();
    cr_assert_eq(eddy_register_process(f->registry, name, udf, &err), 0, "%s", err.msg);
    f->kind = eddy_registry_operator(f->registry, name);
    cr_assert_not_null(f->kind);
    f->config = eddy_config_new();
    eddy_config_set_int(f->config, "ttl", ttl);
    f->configured = f->kind->configure(f->config, f->kind->arg, &err);
    cr_assert_not_null(f->configured, "%s", err.msg);
}

static void fixture_fini(fixture_t *f)
{
    f->kind->release(f->configured);
    eddy_config_destroy(&f->config);
    eddy_registry_destroy(&f->registry);
}

static void *open_instance(fixture_t *f, uint32_t instance, uint32_t parallelism)
{
    eddy_op_context_t ctx = {.job_id = "t", .stage_name = "join", .instance = instance,
                             .parallelism = parallelism, .max_parallelism = K,
                             .key_groups = eddy_kg_range_for(instance, parallelism, K),
                             .key_fn = by_id, .config = f->configured};
    eddy_err_t err = {{0}};
    void *op = f->kind->ops->open(&ctx, &err);
    cr_assert_not_null(op, "%s", err.msg);
    return op;
}

static void feed(fixture_t *f, void *op, const char *line, int64_t ts, rows_t *out)
{
    eddy_record_t rec = eddy_record_make(line, (uint32_t)strlen(line), 0);
    rec.timestamp = ts;
    eddy_err_t err = {{0}};
    cr_assert_eq(f->kind->ops->process(op, &rec, &out->base, &err), 0, "%s", err.msg);
}

static void watermark(fixture_t *f, void *op, int64_t wm, rows_t *out)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(f->kind->ops->watermark(op, wm, &out->base, &err), 0, "%s", err.msg);
}

static uint32_t kg_of_id(const char *id)
{
    return eddy_key_group_of(id, strlen(id), K);
}

/* ---- tests --------------------------------------------------------------- */

static const char *join_input[] = {
    "P|1|p1", "A|1|a1",                      /* one pair */
    "A|2|a2", "P|2|p2",                      /* the other order */
    "P|3|p3a", "P|3|p3b", "A|3|a3a", "A|3|a3b", /* 2 x 2 */
    "P|4|p4",                                /* no partner */
    "A|5|a5", "A|5|a5b",                     /* no partner */
    "A|6|a6", "P|6|p6a", "A|6|a6b", "P|6|p6b", /* interleaved 2 x 2 */
};
static const char *join_expected[] = {
    "1:p1+a1",   "2:p2+a2",   "3:p3a+a3a", "3:p3a+a3b", "3:p3b+a3a", "3:p3b+a3b",
    "6:p6a+a6",  "6:p6a+a6b", "6:p6b+a6",  "6:p6b+a6b",
};
#define N_INPUT (sizeof join_input / sizeof join_input[0])
#define N_EXPECTED (sizeof join_expected / sizeof join_expected[0])

static void run_join(bool reversed, rows_t *out)
{
    fixture_t f;
    fixture_init(&f, "join", &join_udf, 1000);
    void *op = open_instance(&f, 0, 1);
    rows_init(out);
    for (size_t i = 0; i < N_INPUT; i++)
        feed(&f, op, join_input[reversed ? N_INPUT - 1 - i : i], (int64_t)i, out);
    f.kind->ops->close(op);
    fixture_fini(&f);
    rows_sort(out);
}

Test(process, join_pairs_each_match_once_in_either_arrival_order)
{
    rows_t fwd, rev;
    run_join(false, &fwd);
    run_join(true, &rev);
    cr_assert_eq(fwd.n, (int)N_EXPECTED);
    cr_assert_eq(rev.n, (int)N_EXPECTED);
    for (size_t i = 0; i < N_EXPECTED; i++) {
        cr_assert_str_eq(fwd.row[i], join_expected[i]);
        cr_assert_str_eq(rev.row[i], join_expected[i]);
    }
}

Test(process, event_timers_fire_once_in_order_at_the_watermark)
{
    fixture_t f;
    fixture_init(&f, "join", &join_udf, 10);
    void *op = open_instance(&f, 0, 1);
    rows_t out;
    rows_init(&out);
    feed(&f, op, "P|b|x", 5, &out);  /* expires 15 */
    feed(&f, op, "P|a|x", 5, &out);  /* expires 15: same time, a before b */
    feed(&f, op, "A|a|y", 7, &out);  /* joins; a's timer stays at 15 */
    feed(&f, op, "P|c|x", 20, &out); /* expires 30 */
    cr_assert_eq(out.n, 1);
    cr_assert_str_eq(out.row[0], "a:x+y");
    cr_assert_eq(out.ts[0], 7);

    watermark(&f, op, 14, &out);
    cr_assert_eq(out.n, 1, "nothing is due at 14");
    watermark(&f, op, 15, &out);
    cr_assert_eq(out.n, 3);
    cr_assert_str_eq(out.row[1], "expired:a:2@15");
    cr_assert_str_eq(out.row[2], "expired:b:1@15");
    cr_assert_eq(out.ts[1], 15);
    watermark(&f, op, 15, &out);
    watermark(&f, op, 29, &out);
    cr_assert_eq(out.n, 3, "each timer fires once");

    /* a's state is gone: a new A for a joins with nothing and starts over. */
    feed(&f, op, "A|a|z", 25, &out);
    cr_assert_eq(out.n, 3);
    watermark(&f, op, EDDY_WATERMARK_MAX, &out);
    cr_assert_eq(out.n, 5);
    cr_assert_str_eq(out.row[3], "expired:c:1@9223372036854775807");
    cr_assert_str_eq(out.row[4], "expired:a:1@9223372036854775807");
    eddy_err_t err = {{0}};
    cr_assert_eq(f.kind->ops->finish(op, &out.base, &err), 0);
    cr_assert_eq(out.n, 5, "finish emits nothing more");
    f.kind->ops->close(op);
    fixture_fini(&f);
}

/* Moves every key group of `from` into the instance of `to` that owns it
 * (parallelism n_to), as a restore or rescale does, and drops it from `from`. */
static void move_groups(fixture_t *f, void *from, void **to, uint32_t n_to)
{
    for (uint32_t kg = 0; kg < K; kg++) {
        char *buf = NULL;
        size_t len = 0;
        eddy_err_t err = {{0}};
        cr_assert_eq(f->kind->ops->write_group(from, kg, &buf, &len, &err), 0, "%s", err.msg);
        void *dst = to[eddy_kg_owner(kg, n_to, K)];
        cr_assert_eq(f->kind->ops->read_group(dst, kg, buf, len, &err), 0, "%s", err.msg);
        free(buf);
        f->kind->ops->drop_group(from, kg);
    }
}

Test(process, state_and_timers_survive_a_rescale_into_new_instances)
{
    fixture_t f;
    fixture_init(&f, "join", &join_udf, 10);
    void *old = open_instance(&f, 0, 1);
    rows_t out;
    rows_init(&out);
    const char *ids[] = {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"};
    for (int i = 0; i < 12; i++) {
        char line[32];
        snprintf(line, sizeof line, "P|%s|p%s", ids[i], ids[i]);
        feed(&f, old, line, 100 + i, &out); /* expires 110 + i */
    }
    watermark(&f, old, 105, &out);
    cr_assert_eq(out.n, 0);

    /* Rescale 1 -> 3: every group to the instance that now owns it. */
    void *next[3] = {open_instance(&f, 0, 3), open_instance(&f, 1, 3), open_instance(&f, 2, 3)};
    move_groups(&f, old, next, 3);
    /* The old instance forgot everything: no join, no timer. */
    feed(&f, old, "A|1|late", 106, &out);
    cr_assert_eq(out.n, 0);
    watermark(&f, old, 1000, &out);
    cr_assert_eq(out.n, 1, "only the new key's own timer: %s", out.row[0]);
    cr_assert_str_eq(out.row[0], "expired:1:1@1000");
    f.kind->ops->close(old);
    rows_init(&out);

    /* The moved buffers join on the instances that own the keys now. */
    for (int i = 0; i < 12; i++) {
        char line[32];
        snprintf(line, sizeof line, "A|%s|a%s", ids[i], ids[i]);
        uint32_t owner = eddy_kg_owner(kg_of_id(ids[i]), 3, K);
        feed(&f, next[owner], line, 106, &out);
    }
    cr_assert_eq(out.n, 12);
    rows_sort(&out);
    cr_assert_str_eq(out.row[0], "10:p10+a10");
    cr_assert_str_eq(out.row[3], "1:p1+a1");

    /* The moved timers fire at the watermark on their new owners, once each. */
    rows_init(&out);
    int fired[3] = {0};
    for (uint32_t i = 0; i < 3; i++) {
        int before = out.n;
        watermark(&f, next[i], 115, &out);
        watermark(&f, next[i], 115, &out);
        fired[i] = out.n - before;
    }
    cr_assert_eq(out.n, 6, "ids 1..6 expire at 110..115");
    for (uint32_t i = 0; i < 3; i++) {
        int want = 0;
        for (int j = 0; j < 6; j++)
            want += eddy_kg_owner(kg_of_id(ids[j]), 3, K) == i;
        cr_assert_eq(fired[i], want, "instance %u", i);
    }
    rows_sort(&out);
    cr_assert_str_eq(out.row[0], "expired:1:2@115");
    for (uint32_t i = 0; i < 3; i++)
        watermark(&f, next[i], EDDY_WATERMARK_MAX, &out);
    cr_assert_eq(out.n, 12);

    /* And back to one instance: nothing left to move, everything expired. */
    void *one = open_instance(&f, 0, 1);
    for (uint32_t i = 0; i < 3; i++)
        move_groups(&f, next[i], &one, 1);
    rows_init(&out);
    feed(&f, one, "A|1|again", 2000, &out);
    cr_assert_eq(out.n, 0);
    for (uint32_t i = 0; i < 3; i++)
        f.kind->ops->close(next[i]);
    f.kind->ops->close(one);
    fixture_fini(&f);
}

Test(process, restore_into_a_fresh_instance_keeps_watermark_semantics)
{
    /* A restore (same parallelism) mid-stream: buffers and a pending timer
     * come back; empty groups may be written as nothing and read from 0 bytes. */
    fixture_t f;
    fixture_init(&f, "join", &join_udf, 10);
    void *a = open_instance(&f, 0, 1);
    rows_t out;
    rows_init(&out);
    feed(&f, a, "P|k|p", 50, &out);
    void *b = open_instance(&f, 0, 1);
    move_groups(&f, a, &b, 1);
    eddy_err_t err = {{0}};
    for (uint32_t kg = 0; kg < K; kg++)
        cr_assert_eq(f.kind->ops->read_group(a, kg, NULL, 0, &err), 0);
    f.kind->ops->close(a);
    feed(&f, b, "A|k|a", 55, &out);
    cr_assert_eq(out.n, 1);
    cr_assert_str_eq(out.row[0], "k:p+a");
    watermark(&f, b, 60, &out);
    cr_assert_eq(out.n, 2);
    cr_assert_str_eq(out.row[1], "expired:k:2@60");
    f.kind->ops->close(b);
    fixture_fini(&f);
}

Test(process, drop_group_forgets_values_lists_and_timers)
{
    fixture_t f;
    fixture_init(&f, "join", &join_udf, 10);
    void *op = open_instance(&f, 0, 1);
    rows_t out;
    rows_init(&out);
    feed(&f, op, "P|x|p", 1, &out);
    feed(&f, op, "P|y|p", 1, &out);
    uint32_t kx = kg_of_id("x"), ky = kg_of_id("y");
    cr_assert_neq(kx, ky, "x and y must sit in different groups for this test");
    f.kind->ops->drop_group(op, kx);
    feed(&f, op, "A|x|a", 2, &out);
    feed(&f, op, "A|y|a", 2, &out);
    cr_assert_eq(out.n, 1);
    cr_assert_str_eq(out.row[0], "y:p+a");
    watermark(&f, op, 11, &out);
    /* x's first timer (11, from its P) went with the group; its A set a new
     * one at 12. y's fires with 2 arrivals. */
    cr_assert_eq(out.n, 2);
    cr_assert_str_eq(out.row[1], "expired:y:2@11");
    watermark(&f, op, 12, &out);
    cr_assert_eq(out.n, 3);
    cr_assert_str_eq(out.row[2], "expired:x:1@12");
    f.kind->ops->close(op);
    fixture_fini(&f);
}

Test(process, malformed_group_bytes_are_rejected_and_leave_the_group_empty)
{
    fixture_t f;
    fixture_init(&f, "join", &join_udf, 10);
    void *a = open_instance(&f, 0, 1);
    rows_t out;
    rows_init(&out);
    feed(&f, a, "P|k|p", 1, &out);
    uint32_t kg = kg_of_id("k");
    char *buf = NULL;
    size_t len = 0;
    eddy_err_t err = {{0}};
    cr_assert_eq(f.kind->ops->write_group(a, kg, &buf, &len, &err), 0, "%s", err.msg);
    cr_assert_eq(f.kind->ops->write_group(a, K, &buf, &len, &err), -1);
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);

    void *b = open_instance(&f, 0, 1);
    for (size_t cut = 1; cut < len; cut++) {
        feed(&f, b, "P|k|q", 1, &out);
        cr_assert_eq(f.kind->ops->read_group(b, kg, buf, cut, &err), -1, "cut %zu", cut);
        cr_assert_neq(err.msg[0], '\0');
    }
    /* Nothing of k is left in b: an A joins with nothing, one timer fires. */
    feed(&f, b, "A|k|a", 1, &out);
    cr_assert_eq(out.n, 0);
    watermark(&f, b, 100, &out);
    cr_assert_eq(out.n, 1);
    cr_assert_str_eq(out.row[0], "expired:k:1@100");

    /* For another group, or into a different function shape. */
    cr_assert_eq(f.kind->ops->read_group(b, (kg + 1) % K, buf, len, &err), -1);
    cr_assert(strstr(err.msg, "data is for key group"), "%s", err.msg);
    cr_assert_eq(f.kind->ops->read_group(b, K, buf, len, &err), -1);
    f.kind->ops->close(a);
    f.kind->ops->close(b);

    fixture_t g;
    const eddy_process_udf_t no_value = {.process = join_process, .on_timer = join_on_timer,
                                         .value_size = 8};
    fixture_init(&g, "other", &no_value, 10);
    void *c = open_instance(&g, 0, 1);
    cr_assert_eq(g.kind->ops->read_group(c, kg, buf, len, &err), -1);
    cr_assert(strstr(err.msg, "value"), "%s", err.msg);
    g.kind->ops->close(c);
    fixture_fini(&g);
    free(buf);
    fixture_fini(&f);
}

/* ---- processing time ----------------------------------------------------- */

/* An idle timeout: every record pushes the key's processing-time deadline
 * to now + 100 (deleting the old timer); on_timer emits "idle:key@now". */
static int idle_process(eddy_process_context_t *ctx, const eddy_record_t *rec,
                        eddy_collector_t *out, eddy_err_t *err)
{
    (void)rec;
    (void)out;
    int64_t *deadline = eddy_process_value(ctx, NULL);
    if (*deadline)
        cr_assert(eddy_process_timer_delete(ctx, EDDY_PROCESSING_TIME, *deadline, "", 0));
    *deadline = eddy_process_time(ctx) + 100;
    if (eddy_process_timer_register(ctx, EDDY_PROCESSING_TIME, *deadline, "", 0) < 0)
        return eddy_err_set(err, "out of memory");
    return 0;
}

static int idle_on_timer(eddy_process_context_t *ctx, eddy_time_domain_t domain, int64_t time,
                         const void *ns, uint32_t ns_len, eddy_collector_t *out, eddy_err_t *err)
{
    (void)ns;
    (void)ns_len;
    (void)err;
    cr_assert_eq(domain, EDDY_PROCESSING_TIME);
    cr_assert_leq(time, eddy_process_time(ctx));
    const char *key;
    uint32_t key_len = eddy_process_key(ctx, &key);
    char buf[64];
    int len = snprintf(buf, sizeof buf, "idle:%.*s@%lld", (int)key_len, key,
                       (long long)eddy_process_time(ctx));
    eddy_record_t rec = eddy_record_make(buf, (uint32_t)len, 0);
    rec.timestamp = time;
    eddy_emit(out, &rec);
    eddy_process_value_clear(ctx);
    return 0;
}

static const eddy_process_udf_t idle_udf = {.value_size = sizeof(int64_t),
                                            .process = idle_process,
                                            .on_timer = idle_on_timer};

static void tick(fixture_t *f, void *op, int64_t now, rows_t *out)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(f->kind->ops->tick(op, now, &out->base, &err), 0, "%s", err.msg);
}

Test(process, processing_timers_fire_on_tick)
{
    fixture_t f;
    fixture_init(&f, "idle", &idle_udf, 0);
    void *op = open_instance(&f, 0, 1);
    rows_t out;
    rows_init(&out);
    tick(&f, op, 1000, &out);
    feed(&f, op, "P|u|x", 0, &out); /* deadline 1100 */
    feed(&f, op, "P|v|x", 0, &out); /* deadline 1100 */
    tick(&f, op, 1050, &out);
    feed(&f, op, "P|u|x", 0, &out); /* u pushed to 1150 */
    tick(&f, op, 1099, &out);
    cr_assert_eq(out.n, 0);
    /* Event time does not fire processing timers. */
    watermark(&f, op, EDDY_WATERMARK_MAX, &out);
    cr_assert_eq(out.n, 0);
    tick(&f, op, 1100, &out);
    cr_assert_eq(out.n, 1);
    cr_assert_str_eq(out.row[0], "idle:v@1100");
    tick(&f, op, 1000, &out); /* a wall clock stepped back: time holds */
    tick(&f, op, 1149, &out);
    cr_assert_eq(out.n, 1);
    tick(&f, op, 5000, &out);
    cr_assert_eq(out.n, 2);
    cr_assert_str_eq(out.row[1], "idle:u@5000");
    cr_assert_eq(out.ts[1], 1150);

    /* Processing timers move with their group too. */
    feed(&f, op, "P|w|x", 0, &out); /* deadline 5100 */
    void *b = open_instance(&f, 0, 1);
    move_groups(&f, op, &b, 1);
    tick(&f, b, 5100, &out);
    cr_assert_eq(out.n, 3);
    cr_assert_str_eq(out.row[2], "idle:w@5100");
    f.kind->ops->close(op);
    f.kind->ops->close(b);
    fixture_fini(&f);
}

/* ---- the registry -------------------------------------------------------- */

static int config_echo(eddy_process_context_t *ctx, const eddy_record_t *rec,
                       eddy_collector_t *out, eddy_err_t *err)
{
    (void)err;
    cr_assert_null(eddy_process_value(ctx, NULL), "no value without value_size");
    cr_assert_null(eddy_process_value_get(ctx));
    cr_assert_not(eddy_process_value_clear(ctx));
    const char *word = eddy_config_str(eddy_process_config(ctx), "word", "?");
    char buf[64];
    int len = snprintf(buf, sizeof buf, "%s:%.*s", word, (int)rec->len, rec->data);
    eddy_record_t r = eddy_record_make(buf, (uint32_t)len, 0);
    eddy_emit(out, &r);
    return 0;
}

Test(process, register_look_up_configure_open)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    const eddy_process_udf_t echo = {.process = config_echo};
    cr_assert_eq(eddy_register_process(r, "echo", &echo, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_process(r, "echo", &echo, &err), -1, "names stay unique");
    const eddy_process_udf_t no_fn = {.value_size = 8};
    cr_assert_eq(eddy_register_process(r, "no_fn", &no_fn, &err), -1);
    cr_assert(strstr(err.msg, "process()"), "%s", err.msg);
    const eddy_process_udf_t too_big = {.process = config_echo,
                                        .value_size = EDDY_PROCESS_MAX_VALUE + 1};
    cr_assert_eq(eddy_register_process(r, "too_big", &too_big, &err), -1);
    cr_assert_eq(eddy_register_process(r, "null", NULL, &err), -1);
    cr_assert_null(eddy_registry_operator(r, "no_fn"));

    const eddy_operator_kind_t *kind = eddy_registry_operator(r, "echo");
    cr_assert_not_null(kind);
    cr_assert_not_null(kind->ops->watermark);
    cr_assert_not_null(kind->ops->tick);
    cr_assert_not_null(kind->ops->write_group);
    cr_assert_not_null(kind->ops->read_group);
    cr_assert_not_null(kind->ops->drop_group);
    eddy_config_t *cfg = eddy_config_new();
    eddy_config_set_str(cfg, "word", "hello");
    void *conf = kind->configure(cfg, kind->arg, &err);
    cr_assert_not_null(conf, "%s", err.msg);

    /* Not keyed: refused with a clear error. */
    eddy_op_context_t ctx = {.job_id = "t", .stage_name = "s", .parallelism = 1,
                             .max_parallelism = K, .key_groups = {0, K}, .config = conf};
    cr_assert_null(kind->ops->open(&ctx, &err));
    cr_assert(strstr(err.msg, "keyed"), "%s", err.msg);
    ctx.key_fn = by_id;
    void *op = kind->ops->open(&ctx, &err);
    cr_assert_not_null(op, "%s", err.msg);
    rows_t out;
    rows_init(&out);
    eddy_record_t rec = eddy_record_make("P|1|x", 5, 0);
    cr_assert_eq(kind->ops->process(op, &rec, &out.base, &err), 0);
    cr_assert_eq(out.n, 1);
    cr_assert_str_eq(out.row[0], "hello:P|1|x");
    /* A function without a value still writes and reads its groups. */
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(kind->ops->write_group(op, 0, &buf, &len, &err), 0, "%s", err.msg);
    cr_assert_eq(kind->ops->read_group(op, 0, buf, len, &err), 0, "%s", err.msg);
    free(buf);
    kind->ops->close(op);
    kind->release(conf);
    eddy_config_destroy(&cfg);
    eddy_registry_destroy(&r);
}

/* ---- late records --------------------------------------------------------- */

typedef struct kinds_seen {
    eddy_collector_t base;
    uint8_t kind[8];
    char row[8][16];
    int64_t value[8], ts[8];
    int n;
} kinds_seen_t;

static void collect_kind(eddy_collector_t *c, const eddy_record_t *rec)
{
    kinds_seen_t *self = (kinds_seen_t *)c;
    cr_assert_lt(self->n, 8);
    self->kind[self->n] = rec->kind;
    snprintf(self->row[self->n], sizeof self->row[0], "%.*s", (int)rec->len, rec->data);
    self->value[self->n] = rec->value;
    self->ts[self->n++] = rec->timestamp;
}

/* Every record at or below the watermark is late for this function. */
static int late_below_watermark(eddy_process_context_t *ctx, const eddy_record_t *rec,
                                eddy_collector_t *out, eddy_err_t *err)
{
    (void)err;
    if (rec->timestamp <= eddy_process_watermark(ctx))
        eddy_process_late(ctx, rec, out);
    else
        eddy_emit(out, rec);
    return 0;
}

/* late = "emit" sends the record on unchanged but as EDDY_LATE, "drop" (the
 * default) drops it; both count it in the task's late counter; any other
 * value is refused when the step is configured. */
Test(process, late_records_are_counted_and_sent_on_or_dropped)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    const eddy_process_udf_t udf = {.process = late_below_watermark};
    cr_assert_eq(eddy_register_process(r, "late", &udf, &err), 0, "%s", err.msg);
    const eddy_operator_kind_t *kind = eddy_registry_operator(r, "late");
    cr_assert_not_null(kind);

    eddy_config_t *bad = eddy_config_new();
    eddy_config_set_str(bad, "late", "keep");
    cr_assert_null(kind->configure(bad, kind->arg, &err));
    cr_assert(strstr(err.msg, "'late' is 'keep'"), "%s", err.msg);
    eddy_config_destroy(&bad);

    const char *modes[] = {"emit", NULL, "drop"};
    for (int m = 0; m < 3; m++) {
        eddy_config_t *cfg = eddy_config_new();
        if (modes[m])
            eddy_config_set_str(cfg, "late", modes[m]);
        void *conf = kind->configure(cfg, kind->arg, &err);
        cr_assert_not_null(conf, "%s", err.msg);
        uint64_t late_count = 0;
        eddy_op_context_t ctx = {.job_id = "t", .stage_name = "s", .parallelism = 1,
                                 .max_parallelism = K, .key_groups = {0, K}, .key_fn = by_id,
                                 .config = conf, .late_records = &late_count};
        void *op = kind->ops->open(&ctx, &err);
        cr_assert_not_null(op, "%s", err.msg);
        kinds_seen_t out = {.base.emit = collect_kind};
        cr_assert_eq(kind->ops->watermark(op, 100, &out.base, &err), 0);
        eddy_record_t on_time = eddy_record_make("P|1|a", 5, 7), late = eddy_record_make("P|1|b", 5, 9);
        on_time.timestamp = 101;
        late.timestamp = 100;
        cr_assert_eq(kind->ops->process(op, &on_time, &out.base, &err), 0);
        cr_assert_eq(kind->ops->process(op, &late, &out.base, &err), 0);
        cr_assert_eq(late_count, 1, "mode %s", modes[m] ? modes[m] : "(default)");
        cr_assert_eq(out.kind[0], EDDY_INSERT);
        if (m == 0) {
            cr_assert_eq(out.n, 2);
            cr_assert_eq(out.kind[1], EDDY_LATE);
            cr_assert_str_eq(out.row[1], "P|1|b");
            cr_assert_eq(out.value[1], 9);
            cr_assert_eq(out.ts[1], 100);
        } else {
            cr_assert_eq(out.n, 1, "mode %s sent the late record on", modes[m] ? modes[m] : "(default)");
        }
        kind->ops->close(op);
        kind->release(conf);
        eddy_config_destroy(&cfg);
    }
    eddy_registry_destroy(&r);
}
