/* test_timers.c - the timer service (state/timers.c).
 *
 * Covers firing order ((time, key, ns), per domain), dedupe, delete,
 * callbacks that register or delete timers (including ones that fire in
 * the same advance), stopping an advance, next(), the per-key-group
 * serialisation (round trip into a fresh object, drop_group, kg out of
 * range, every truncation and hostile bytes rejected with the group left
 * empty) and a 200k-timer run advanced in small watermark steps. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"
#include "state/keygroup.h"
#include "state/timers.h"
#include "tests/unit/leak_check.h"

TestSuite(timers, .fini = eddy_test_leak_check);

#define K 16u

typedef struct fired {
    int n;
    char rows[64][48];
    int64_t times[64];
} fired_t;

static int record_fire(void *ctx, const eddy_timer_t *t, eddy_err_t *err)
{
    (void)err;
    fired_t *f = ctx;
    cr_assert_lt(f->n, 64);
    snprintf(f->rows[f->n], sizeof f->rows[0], "%c%lld:%.*s/%.*s",
             t->domain == EDDY_EVENT_TIME ? 'e' : 'p', (long long)t->time, (int)t->key_len,
             (const char *)t->key, (int)t->ns_len, (const char *)t->ns);
    f->times[f->n++] = t->time;
    return 0;
}

static int reg(eddy_timers_t *tm, eddy_time_domain_t d, int64_t time, const char *key,
               const char *ns)
{
    return eddy_timers_register(tm, d, time, eddy_key_group_of(key, strlen(key), K), key,
                                (uint32_t)strlen(key), ns, (uint32_t)strlen(ns));
}

static bool del(eddy_timers_t *tm, eddy_time_domain_t d, int64_t time, const char *key,
                const char *ns)
{
    return eddy_timers_delete(tm, d, time, eddy_key_group_of(key, strlen(key), K), key,
                              (uint32_t)strlen(key), ns, (uint32_t)strlen(ns));
}

Test(timers, new_destroy_and_bad_arguments)
{
    cr_assert_null(eddy_timers_new(0));
    cr_assert_null(eddy_timers_new(EDDY_MAX_KEY_GROUPS + 1));
    eddy_timers_t *tm = eddy_timers_new(K);
    cr_assert_not_null(tm);
    cr_assert_eq(eddy_timers_next(tm, EDDY_EVENT_TIME), INT64_MAX);
    cr_assert_eq(eddy_timers_next(tm, EDDY_PROCESSING_TIME), INT64_MAX);
    cr_assert_eq(eddy_timers_register(tm, EDDY_EVENT_TIME, 1, K, "a", 1, "", 0), -1);
    cr_assert_not(eddy_timers_delete(tm, EDDY_EVENT_TIME, 1, K, "a", 1, "", 0));
    cr_assert_eq(eddy_timers_count(tm), 0);
    eddy_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_timers_write_group(tm, K, &buf, &len, &err), -1);
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);
    cr_assert_eq(eddy_timers_read_group(tm, K, "\x93\x01\x10\x00", 4, &err), -1);
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);
    eddy_timers_drop_group(tm, K); /* harmless */
    eddy_timers_destroy(&tm);
    cr_assert_null(tm);
    eddy_timers_destroy(&tm);
    eddy_timers_destroy(NULL);
}

Test(timers, fire_in_time_key_ns_order_each_once_per_domain)
{
    eddy_timers_t *tm = eddy_timers_new(K);
    reg(tm, EDDY_EVENT_TIME, 30, "b", "");
    reg(tm, EDDY_EVENT_TIME, 10, "z", "w1");
    reg(tm, EDDY_EVENT_TIME, 20, "a", "");
    reg(tm, EDDY_EVENT_TIME, 10, "a", "w2");
    reg(tm, EDDY_EVENT_TIME, 10, "a", "w1");
    reg(tm, EDDY_EVENT_TIME, 10, "ab", "");
    reg(tm, EDDY_EVENT_TIME, -5, "neg", "");
    reg(tm, EDDY_PROCESSING_TIME, 1, "p", "");
    cr_assert_eq(eddy_timers_count(tm), 8);
    cr_assert_eq(eddy_timers_next(tm, EDDY_EVENT_TIME), -5);
    cr_assert_eq(eddy_timers_next(tm, EDDY_PROCESSING_TIME), 1);

    fired_t f = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_timers_advance(tm, EDDY_EVENT_TIME, 9, record_fire, &f, &err), 0);
    cr_assert_eq(f.n, 1);
    cr_assert_str_eq(f.rows[0], "e-5:neg/");
    cr_assert_eq(eddy_timers_advance(tm, EDDY_EVENT_TIME, 20, record_fire, &f, &err), 0);
    const char *want[] = {"e-5:neg/", "e10:a/w1", "e10:a/w2", "e10:ab/", "e10:z/w1", "e20:a/"};
    cr_assert_eq(f.n, 6);
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(f.rows[i], want[i]);
    /* Advancing again to the same point fires nothing: each fires once. */
    cr_assert_eq(eddy_timers_advance(tm, EDDY_EVENT_TIME, 20, record_fire, &f, &err), 0);
    cr_assert_eq(f.n, 6);
    cr_assert_eq(eddy_timers_next(tm, EDDY_EVENT_TIME), 30);
    /* The processing-time timer is untouched by event time. */
    cr_assert_eq(eddy_timers_count(tm), 2);
    cr_assert_eq(eddy_timers_advance(tm, EDDY_PROCESSING_TIME, 100, record_fire, &f, &err), 0);
    cr_assert_str_eq(f.rows[6], "p1:p/");
    cr_assert_eq(eddy_timers_advance(tm, EDDY_EVENT_TIME, INT64_MAX, record_fire, &f, &err), 0);
    cr_assert_str_eq(f.rows[7], "e30:b/");
    cr_assert_eq(eddy_timers_count(tm), 0);
    eddy_timers_destroy(&tm);
}

Test(timers, register_twice_keeps_one_and_delete_removes)
{
    eddy_timers_t *tm = eddy_timers_new(K);
    cr_assert_eq(reg(tm, EDDY_EVENT_TIME, 5, "k", "n"), 0);
    cr_assert_eq(reg(tm, EDDY_EVENT_TIME, 5, "k", "n"), 0);
    cr_assert_eq(eddy_timers_count(tm), 1);
    /* Same key and time in the other domain, or another ns, are other timers. */
    reg(tm, EDDY_PROCESSING_TIME, 5, "k", "n");
    reg(tm, EDDY_EVENT_TIME, 5, "k", "m");
    reg(tm, EDDY_EVENT_TIME, 5, "k", "");
    cr_assert_eq(eddy_timers_count(tm), 4);

    cr_assert(del(tm, EDDY_EVENT_TIME, 5, "k", "n"));
    cr_assert_not(del(tm, EDDY_EVENT_TIME, 5, "k", "n"));
    cr_assert_not(del(tm, EDDY_EVENT_TIME, 6, "k", "m"));
    cr_assert_eq(eddy_timers_count(tm), 3);
    fired_t f = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_timers_advance(tm, EDDY_EVENT_TIME, 100, record_fire, &f, &err), 0);
    cr_assert_eq(f.n, 2);
    cr_assert_str_eq(f.rows[0], "e5:k/");
    cr_assert_str_eq(f.rows[1], "e5:k/m");
    cr_assert(del(tm, EDDY_PROCESSING_TIME, 5, "k", "n"));
    cr_assert_eq(eddy_timers_next(tm, EDDY_PROCESSING_TIME), INT64_MAX);
    eddy_timers_destroy(&tm);
}

Test(timers, delete_keeps_heap_order)
{
    /* Delete from the middle of a large heap and check the rest still fire sorted. */
    eddy_timers_t *tm = eddy_timers_new(K);
    char key[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        reg(tm, EDDY_EVENT_TIME, (i * 7919) % 1000, key, "");
    }
    for (int i = 0; i < 1000; i += 3) {
        snprintf(key, sizeof key, "k%d", i);
        cr_assert(del(tm, EDDY_EVENT_TIME, (i * 7919) % 1000, key, ""));
    }
    int64_t last = INT64_MIN;
    size_t n = 0;
    while (eddy_timers_count(tm)) {
        int64_t t = eddy_timers_next(tm, EDDY_EVENT_TIME);
        cr_assert_geq(t, last);
        last = t;
        cr_assert_eq(eddy_timers_advance(tm, EDDY_EVENT_TIME, t, NULL, NULL, NULL), 0);
        n++;
    }
    cr_assert_eq(n, 666);
    eddy_timers_destroy(&tm);
}

typedef struct chain {
    eddy_timers_t *tm;
    fired_t f;
} chain_t;

/* At t=10 registers t=15 (fires now when advancing to 20) and t=50 (later),
 * re-registers itself (a new timer: it fired, so it is gone) at t=10 only
 * once, and deletes the pending t=12 timer. */
static int chain_fire(void *ctx, const eddy_timer_t *t, eddy_err_t *err)
{
    chain_t *c = ctx;
    record_fire(&c->f, t, err);
    if (t->time == 10 && t->ns_len == 0) {
        cr_assert_eq(reg(c->tm, EDDY_EVENT_TIME, 15, "x", ""), 0);
        cr_assert_eq(reg(c->tm, EDDY_EVENT_TIME, 50, "x", ""), 0);
        cr_assert_eq(reg(c->tm, EDDY_EVENT_TIME, 10, "x", "again"), 0);
        cr_assert(del(c->tm, EDDY_EVENT_TIME, 12, "y", ""));
    }
    return 0;
}

Test(timers, callback_registers_and_deletes)
{
    chain_t c = {.tm = eddy_timers_new(K)};
    reg(c.tm, EDDY_EVENT_TIME, 10, "x", "");
    reg(c.tm, EDDY_EVENT_TIME, 12, "y", "");
    reg(c.tm, EDDY_EVENT_TIME, 20, "z", "");
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_timers_advance(c.tm, EDDY_EVENT_TIME, 20, chain_fire, &c, &err), 0);
    const char *want[] = {"e10:x/", "e10:x/again", "e15:x/", "e20:z/"};
    cr_assert_eq(c.f.n, 4);
    for (int i = 0; i < 4; i++)
        cr_assert_str_eq(c.f.rows[i], want[i]);
    cr_assert_eq(eddy_timers_count(c.tm), 1);
    cr_assert_eq(eddy_timers_next(c.tm, EDDY_EVENT_TIME), 50);
    eddy_timers_destroy(&c.tm);
}

static int stop_at_second(void *ctx, const eddy_timer_t *t, eddy_err_t *err)
{
    fired_t *f = ctx;
    record_fire(f, t, err);
    return f->n == 2 ? eddy_err_set(err, "stop") : 0;
}

Test(timers, callback_error_stops_and_consumes_the_timer)
{
    eddy_timers_t *tm = eddy_timers_new(K);
    for (int i = 1; i <= 4; i++)
        reg(tm, EDDY_PROCESSING_TIME, i, "k", "");
    fired_t f = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_timers_advance(tm, EDDY_PROCESSING_TIME, 10, stop_at_second, &f, &err), -1);
    cr_assert_str_eq(err.msg, "stop");
    cr_assert_eq(eddy_timers_count(tm), 2);
    cr_assert_eq(eddy_timers_next(tm, EDDY_PROCESSING_TIME), 3);
    eddy_timers_destroy(&tm);
}

/* --- serialisation ------------------------------------------------------ */

static void fill(eddy_timers_t *tm, int n)
{
    char key[16], ns[16];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key%d", i % 37);
        snprintf(ns, sizeof ns, i % 3 ? "w%d" : "", i % 5);
        reg(tm, i % 4 ? EDDY_EVENT_TIME : EDDY_PROCESSING_TIME, (i * 31) % 500 - 100, key, ns);
    }
}

typedef struct trace {
    char *buf;
    size_t len, cap;
} trace_t;

static int trace_fire(void *ctx, const eddy_timer_t *t, eddy_err_t *err)
{
    (void)err;
    trace_t *tr = ctx;
    char line[128];
    int n = snprintf(line, sizeof line, "%d %lld %u %.*s/%.*s\n", (int)t->domain,
                     (long long)t->time, t->kg, (int)t->key_len, (const char *)t->key,
                     (int)t->ns_len, (const char *)t->ns);
    if (tr->len + (size_t)n + 1 > tr->cap) {
        tr->cap = (tr->cap + (size_t)n + 1) * 2;
        tr->buf = realloc(tr->buf, tr->cap);
    }
    memcpy(tr->buf + tr->len, line, (size_t)n + 1);
    tr->len += (size_t)n;
    return 0;
}

static char *drain(eddy_timers_t *tm)
{
    trace_t tr = {calloc(1, 1), 0, 1}; /* "" so far */
    eddy_timers_advance(tm, EDDY_EVENT_TIME, INT64_MAX, trace_fire, &tr, NULL);
    eddy_timers_advance(tm, EDDY_PROCESSING_TIME, INT64_MAX, trace_fire, &tr, NULL);
    return tr.buf;
}

Test(timers, write_read_round_trip_into_fresh_object)
{
    eddy_timers_t *a = eddy_timers_new(K);
    eddy_timers_t *b = eddy_timers_new(K);
    fill(a, 400);
    size_t total = eddy_timers_count(a);
    eddy_err_t err = {{0}};
    for (uint32_t kg = 0; kg < K; kg++) {
        char *buf = NULL;
        size_t len = 0;
        cr_assert_eq(eddy_timers_write_group(a, kg, &buf, &len, &err), 0, "%s", err.msg);
        cr_assert_eq(eddy_timers_read_group(b, kg, buf, len, &err), 0, "%s", err.msg);
        /* Equal state gives equal bytes. */
        char *again = NULL;
        size_t again_len = 0;
        cr_assert_eq(eddy_timers_write_group(b, kg, &again, &again_len, &err), 0);
        cr_assert_eq(again_len, len);
        cr_assert_eq(memcmp(again, buf, len), 0);
        free(again);
        free(buf);
    }
    cr_assert_eq(eddy_timers_count(b), total);
    char *ta = drain(a), *tb = drain(b);
    cr_assert_str_eq(ta, tb);
    free(ta);
    free(tb);
    eddy_timers_destroy(&a);
    eddy_timers_destroy(&b);
}

static size_t group_count(eddy_timers_t *tm, uint32_t kg)
{
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_timers_write_group(tm, kg, &buf, &len, NULL), 0);
    eddy_mpr_t r;
    cr_assert_eq(eddy_mpr_open(&r, buf, len, NULL), 0);
    size_t n = (eddy_mpr_remaining(&r) - 3) / 4;
    eddy_mpr_close(&r);
    free(buf);
    return n;
}

Test(timers, drop_group_forgets_only_that_group)
{
    eddy_timers_t *tm = eddy_timers_new(K);
    fill(tm, 400);
    size_t total = eddy_timers_count(tm);
    uint32_t kg = eddy_key_group_of("key5", 4, K);
    size_t in_group = group_count(tm, kg);
    cr_assert_gt(in_group, 0);
    eddy_timers_drop_group(tm, kg);
    cr_assert_eq(eddy_timers_count(tm), total - in_group);
    cr_assert_eq(group_count(tm, kg), 0);
    /* The heaps no longer hold them: nothing of that group fires. */
    trace_t tr = {calloc(1, 1), 0, 1};
    eddy_timers_advance(tm, EDDY_EVENT_TIME, INT64_MAX, trace_fire, &tr, NULL);
    eddy_timers_advance(tm, EDDY_PROCESSING_TIME, INT64_MAX, trace_fire, &tr, NULL);
    char needle[24];
    snprintf(needle, sizeof needle, " %u key", kg);
    cr_assert_null(strstr(tr.buf, needle));
    free(tr.buf);
    cr_assert_eq(eddy_timers_count(tm), 0);
    eddy_timers_destroy(&tm);
}

Test(timers, read_group_empty_bytes_empties_the_group)
{
    eddy_timers_t *tm = eddy_timers_new(K);
    fill(tm, 100);
    uint32_t kg = eddy_key_group_of("key1", 4, K);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_timers_read_group(tm, kg, NULL, 0, &err), 0);
    cr_assert_eq(group_count(tm, kg), 0);
    eddy_timers_destroy(&tm);
}

Test(timers, every_truncation_is_rejected_and_leaves_the_group_empty)
{
    eddy_timers_t *a = eddy_timers_new(K);
    fill(a, 200);
    uint32_t kg = eddy_key_group_of("key3", 4, K);
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_timers_write_group(a, kg, &buf, &len, NULL), 0);
    eddy_timers_t *b = eddy_timers_new(K);
    for (size_t cut = 1; cut < len; cut++) {
        fill(b, 50); /* something for the failed read to clear */
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_timers_read_group(b, kg, buf, cut, &err), -1, "cut %zu", cut);
        cr_assert_neq(err.msg[0], '\0');
        cr_assert_eq(group_count(b, kg), 0, "cut %zu", cut);
    }
    free(buf);
    eddy_timers_destroy(&a);
    eddy_timers_destroy(&b);
}

/* Builds [version, kg, n, fields...] with the given raw tail. */
static char *build(uint64_t version, uint64_t kg, uint64_t n, int extra, size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, (uint32_t)(3 + 4 * (extra / 4) + (extra % 4)));
    eddy_mpw_u64(&w, version);
    eddy_mpw_u64(&w, kg);
    eddy_mpw_u64(&w, n);
    for (int i = 0; i < extra; i++) {
        switch (i % 4) {
        case 0: eddy_mpw_u64(&w, 0); break;
        case 1: eddy_mpw_i64(&w, 7); break;
        case 2: eddy_mpw_bin(&w, "k", 1); break;
        default: eddy_mpw_bin(&w, "", 0); break;
        }
    }
    return eddy_mpw_release(&w, len);
}

static void expect_reject(const void *buf, size_t len, uint32_t kg, const char *what)
{
    eddy_timers_t *tm = eddy_timers_new(K);
    reg(tm, EDDY_EVENT_TIME, 1, "k", "");
    reg(tm, EDDY_EVENT_TIME, 2, "k", "");
    uint32_t kkg = eddy_key_group_of("k", 1, K);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_timers_read_group(tm, kg, buf, len, &err), -1, "%s accepted", what);
    cr_assert(strstr(err.msg, "timers"), "%s: %s", what, err.msg);
    if (kg == kkg)
        cr_assert_eq(eddy_timers_count(tm), 0, "%s left timers", what);
    eddy_timers_destroy(&tm);
}

Test(timers, malformed_bytes_are_rejected)
{
    uint32_t kg = eddy_key_group_of("k", 1, K);
    size_t len;
    char *ok = build(1, kg, 1, 4, &len);
    eddy_timers_t *tm = eddy_timers_new(K);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_timers_read_group(tm, kg, ok, len, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_timers_count(tm), 1);
    cr_assert_eq(eddy_timers_next(tm, EDDY_EVENT_TIME), 7);
    eddy_timers_destroy(&tm);
    free(ok);

    char *b;
    b = build(2, kg, 1, 4, &len), expect_reject(b, len, kg, "version 2"), free(b);
    b = build(1, kg + 1, 1, 4, &len), expect_reject(b, len, kg, "other kg"), free(b);
    b = build(1, kg, 2, 4, &len), expect_reject(b, len, kg, "count too big"), free(b);
    b = build(1, kg, 0, 4, &len), expect_reject(b, len, kg, "count too small"), free(b);
    b = build(1, kg, 1, 5, &len), expect_reject(b, len, kg, "extra field"), free(b);
    b = build(1, kg, 1, 3, &len), expect_reject(b, len, kg, "missing field"), free(b);
    b = build(1, kg, 2, 8, &len), expect_reject(b, len, kg, "duplicate"), free(b);
    b = build(1, kg, UINT32_MAX, 4, &len), expect_reject(b, len, kg, "huge count"), free(b);

    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 7);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_u64(&w, kg);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_u64(&w, 2); /* no such domain */
    eddy_mpw_i64(&w, 1);
    eddy_mpw_bin(&w, "k", 1);
    eddy_mpw_bin(&w, "", 0);
    b = eddy_mpw_release(&w, &len), expect_reject(b, len, kg, "domain 2"), free(b);

    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 7);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_u64(&w, kg);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_u64(&w, 0);
    eddy_mpw_str(&w, "time"); /* not an integer */
    eddy_mpw_bin(&w, "k", 1);
    eddy_mpw_bin(&w, "", 0);
    b = eddy_mpw_release(&w, &len), expect_reject(b, len, kg, "string time"), free(b);

    /* Hostile headers: a huge array announced in a few bytes; a map; garbage. */
    expect_reject("\xdd\xff\xff\xff\xff\x01", 6, kg, "huge array header");
    expect_reject("\x81\x01\x02", 3, kg, "map");
    expect_reject("\xc1", 1, kg, "reserved byte");
    expect_reject("\x93\x01", 2, kg, "short array");
}

static int count_fire(void *ctx, const eddy_timer_t *t, eddy_err_t *err)
{
    (void)t;
    (void)err;
    ++*(size_t *)ctx;
    return 0;
}

Test(timers, many_timers_advanced_in_small_steps)
{
    /* 200k timers over 20k distinct times, the watermark advancing by 1 each
     * step: quadratic scanning would take minutes, the heap takes ms. */
    eddy_timers_t *tm = eddy_timers_new(128);
    char key[16];
    for (int i = 0; i < 200000; i++) {
        int n = snprintf(key, sizeof key, "k%d", i);
        cr_assert_eq(eddy_timers_register(tm, EDDY_EVENT_TIME, (i * 7) % 20000,
                                          eddy_key_group_of(key, (size_t)n, 128), key,
                                          (uint32_t)n, "", 0),
                     0);
    }
    cr_assert_eq(eddy_timers_count(tm), 200000);
    size_t fired = 0;
    for (int64_t wm = 0; wm < 20000; wm++) {
        cr_assert_eq(eddy_timers_advance(tm, EDDY_EVENT_TIME, wm, count_fire, &fired, NULL), 0);
        cr_assert_gt(eddy_timers_next(tm, EDDY_EVENT_TIME), wm);
    }
    cr_assert_eq(fired, 200000);
    cr_assert_eq(eddy_timers_count(tm), 0);
    eddy_timers_destroy(&tm);
}
