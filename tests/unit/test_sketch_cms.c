/* test_sketch_cms.c - count-min sketch with heavy hitters
 * (state/sketch_cms.c): estimates never below the truth and within the
 * e/width bound, the heavy hitters of a skewed stream found, merge of halves
 * equals the whole, long keys counted but not listed, the validate
 * function against corrupt buffers, and what top_k (operators/pipeline_agg.c)
 * relies on: exact heavy hitters of a few distinct values from partial
 * sketches merged, a byte round trip, truncated bytes refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "state/sketch_cms.h"
#include "tests/support/fuzz_bytes.h"
#include "tests/support/proc.h"

enum { N_KEYS = 5000 };

static size_t key_of(char *buf, size_t size, unsigned k)
{
    return (size_t)snprintf(buf, size, "host-%u.example.org", k);
}

/* Key k < 10 is heavy (1000 (k + 1) occurrences, gaps far above the
 * e/width error); the rest appear 1-3 times. */
static uint64_t true_count(unsigned k)
{
    return k < 10 ? 1000 * (k + 1) : 1 + k % 3;
}

static void feed(eddy_cms_t *a, eddy_cms_t *b, uint64_t seed)
{
    uint64_t s = seed;
    for (unsigned k = 0; k < N_KEYS; k++) {
        char key[64];
        size_t len = key_of(key, sizeof key, k);
        uint64_t left = true_count(k);
        while (left) {
            uint64_t n = 1 + eddy_test_rand(&s) % (left < 50 ? left : 50);
            eddy_cms_add(b && eddy_test_rand(&s) % 2 ? b : a, key, len, n);
            left -= n;
        }
    }
}

Test(sketch_cms, estimates_bounded)
{
    static eddy_cms_t cms;
    eddy_cms_init(&cms);
    feed(&cms, NULL, 1);
    uint64_t total = 0;
    for (unsigned k = 0; k < N_KEYS; k++)
        total += true_count(k);
    cr_assert_eq(cms.total, total);
    double bound = 2.718281828 / EDDY_CMS_WIDTH * (double)total;
    unsigned over = 0;
    for (unsigned k = 0; k < N_KEYS; k++) {
        char key[64];
        size_t len = key_of(key, sizeof key, k);
        uint64_t e = eddy_cms_estimate(&cms, key, len);
        cr_assert_geq(e, true_count(k), "key %u estimated %llu below its count", k,
                      (unsigned long long)e);
        if ((double)(e - true_count(k)) > bound)
            over++;
    }
    /* The bound holds with probability 1 - e^-4 (98%) per key. */
    cr_assert_leq(over, N_KEYS / 20, "%u of %u keys above the e/w bound", over, N_KEYS);
    cr_assert_eq(eddy_cms_estimate(&cms, "never-seen", 10) <= bound, 1);
}

Test(sketch_cms, finds_heavy_hitters)
{
    static eddy_cms_t cms;
    eddy_cms_init(&cms);
    feed(&cms, NULL, 2);
    eddy_cms_entry_t top[EDDY_CMS_TOP_K];
    size_t n = eddy_cms_top(&cms, top, EDDY_CMS_TOP_K);
    cr_assert_eq(n, EDDY_CMS_TOP_K);
    /* The ten heavy keys come first, heaviest (key 9) first. */
    for (unsigned i = 0; i < 10; i++) {
        char key[64];
        size_t len = key_of(key, sizeof key, 9 - i);
        cr_assert_eq(top[i].len, len);
        cr_assert_eq(memcmp(top[i].key, key, len), 0, "rank %u is %.*s, expected %s", i,
                     (int)top[i].len, (const char *)top[i].key, key);
        cr_assert_geq(top[i].count, true_count(9 - i));
    }
    eddy_cms_entry_t three[3];
    cr_assert_eq(eddy_cms_top(&cms, three, 3), 3);
    cr_assert_eq(memcmp(three, top, sizeof three), 0);
}

Test(sketch_cms, merge_of_halves_equals_whole)
{
    static eddy_cms_t whole, a, b;
    eddy_cms_init(&whole);
    eddy_cms_init(&a);
    eddy_cms_init(&b);
    feed(&whole, NULL, 3);
    feed(&a, &b, 3);
    eddy_cms_merge(&a, &b);
    cr_assert_eq(a.total, whole.total);
    cr_assert_eq(memcmp(a.cells, whole.cells, sizeof a.cells), 0, "merged counters differ");
    eddy_cms_entry_t ta[EDDY_CMS_TOP_K], tw[EDDY_CMS_TOP_K];
    size_t na = eddy_cms_top(&a, ta, EDDY_CMS_TOP_K);
    size_t nw = eddy_cms_top(&whole, tw, EDDY_CMS_TOP_K);
    cr_assert_eq(na, nw);
    /* The heavy keys are in both tables, with the same (merged) estimates. */
    cr_assert_eq(memcmp(ta, tw, 10 * sizeof ta[0]), 0, "heavy hitters differ after merge");
    cr_assert_eq(eddy_cms_validate(&a, sizeof a, NULL), 0);
}

Test(sketch_cms, long_keys_counted_not_listed)
{
    static eddy_cms_t cms;
    eddy_cms_init(&cms);
    char long_key[EDDY_CMS_KEY_MAX + 10];
    memset(long_key, 'x', sizeof long_key);
    eddy_cms_add(&cms, long_key, sizeof long_key, 500);
    eddy_cms_add(&cms, "short", 5, 3);
    eddy_cms_add(&cms, "zero", 4, 0);
    cr_assert_eq(eddy_cms_estimate(&cms, long_key, sizeof long_key), 500);
    eddy_cms_entry_t top[EDDY_CMS_TOP_K];
    cr_assert_eq(eddy_cms_top(&cms, top, EDDY_CMS_TOP_K), 1);
    cr_assert_eq(top[0].count, 3);
    cr_assert_eq(cms.total, 503);
    cr_assert_eq(eddy_cms_validate(&cms, sizeof cms, NULL), 0);
}

Test(sketch_cms, refuses_other_layouts)
{
    static eddy_cms_t cms;
    eddy_cms_init(&cms);
    eddy_cms_add(&cms, "a", 1, 5);
    eddy_err_t err = {{0}};
    cms.header.version = 0;
    cr_assert_eq(eddy_cms_validate(&cms, sizeof cms, &err), -1);
    cr_assert(strstr(err.msg, "version"), "%s", err.msg);
    cms.header.version = EDDY_CMS_VERSION;
    cms.cells[2][7]++;
    cr_assert_eq(eddy_cms_validate(&cms, sizeof cms, &err), -1);
    cr_assert(strstr(err.msg, "row 2"), "%s", err.msg);
    cms.cells[2][7]--;
    cms.top[0].count = 6;
    cr_assert_eq(eddy_cms_validate(&cms, sizeof cms, &err), -1);
    cms.top[0].count = 5;
    cms.n_top = EDDY_CMS_TOP_K + 1;
    cr_assert_eq(eddy_cms_validate(&cms, sizeof cms, &err), -1);
    cms.n_top = 1;
    cr_assert_eq(eddy_cms_validate(&cms, sizeof cms, &err), 0, "%s", err.msg);
}

static void use_cms(const void *buf)
{
    static eddy_cms_t cms, other;
    memcpy(&cms, buf, sizeof cms);
    eddy_cms_entry_t top[EDDY_CMS_TOP_K];
    size_t n = eddy_cms_top(&cms, top, EDDY_CMS_TOP_K);
    cr_assert_leq(n, EDDY_CMS_TOP_K);
    eddy_cms_init(&other);
    eddy_cms_add(&other, "k", 1, 2);
    eddy_cms_merge(&other, &cms);
    cr_assert_eq(eddy_cms_validate(&other, sizeof other, NULL), 0);
}

Test(sketch_cms, validate_on_random_bytes)
{
    static eddy_cms_t cms;
    eddy_cms_init(&cms);
    feed(&cms, NULL, 4);
    eddy_fuzz_result_t r = eddy_fuzz_validate(eddy_cms_validate, use_cms, &cms, sizeof cms, 14, 1000);
    cr_assert_eq(r.valid_rejected, 0);
    cr_assert_eq(r.accepted_random, 0);
    cr_assert_eq(r.accepted_truncated, 0);
    cr_assert_eq(r.silent_rejections, 0);
    cr_assert_gt(r.rejected, 1000);
}

/* A window of top_k with few distinct values: value v < 12 occurs 3 v + 1
 * times, in a shuffled order, split over two partial sketches. */
static void feed_few(eddy_cms_t *a, eddy_cms_t *b, uint64_t seed)
{
    char vals[256]; /* 3 * 66 + 12 = 210 values */
    size_t n = 0;
    for (unsigned v = 0; v < 12; v++)
        for (unsigned i = 0; i < 3 * v + 1; i++)
            vals[n++] = (char)('a' + v);
    uint64_t s = seed;
    for (size_t i = n; i > 1; i--) {
        size_t j = eddy_test_rand(&s) % i;
        char t = vals[i - 1];
        vals[i - 1] = vals[j];
        vals[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        eddy_cms_add(b && i % 3 == 0 ? b : a, &vals[i], 1, 1);
}

Test(sketch_cms, top_of_merged_partials_is_exact_for_few_values)
{
    static eddy_cms_t whole, a, b;
    eddy_cms_init(&whole);
    eddy_cms_init(&a);
    eddy_cms_init(&b);
    feed_few(&whole, NULL, 5);
    feed_few(&a, &b, 6);
    eddy_cms_merge(&a, &b);
    eddy_cms_entry_t ta[EDDY_CMS_TOP_K], tw[EDDY_CMS_TOP_K];
    cr_assert_eq(eddy_cms_top(&whole, tw, 4), 4);
    cr_assert_eq(eddy_cms_top(&a, ta, 4), 4);
    for (unsigned i = 0; i < 4; i++) {
        unsigned v = 11 - i;
        cr_assert(tw[i].len == 1 && tw[i].key[0] == 'a' + v && tw[i].count == 3 * v + 1,
                  "entry %u: %.*s:%llu, want %c:%u", i, tw[i].len, (const char *)tw[i].key,
                  (unsigned long long)tw[i].count, 'a' + v, 3 * v + 1);
    }
    cr_assert_eq(memcmp(ta, tw, sizeof ta[0] * 4), 0, "merged partials' top differs from the whole's");
    cr_assert_eq(a.total, whole.total);
}

Test(sketch_cms, bytes_round_trip_and_truncation_refused)
{
    static eddy_cms_t cms, back;
    eddy_cms_init(&cms);
    feed_few(&cms, NULL, 7);
    static unsigned char bytes[EDDY_CMS_SIZE + 1];
    memcpy(bytes + 1, &cms, EDDY_CMS_SIZE); /* unaligned, as in a snapshot */
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_cms_validate(bytes + 1, EDDY_CMS_SIZE, &err), 0, "%s", err.msg);
    memcpy(&back, bytes + 1, EDDY_CMS_SIZE);
    eddy_cms_entry_t t1[EDDY_CMS_TOP_K], t2[EDDY_CMS_TOP_K];
    size_t n1 = eddy_cms_top(&cms, t1, EDDY_CMS_TOP_K), n2 = eddy_cms_top(&back, t2, EDDY_CMS_TOP_K);
    cr_assert(n1 == 12 && n1 == n2 && memcmp(t1, t2, n1 * sizeof t1[0]) == 0);
    static const size_t cut[] = {0, 3, sizeof(eddy_sketch_header_t), 100, EDDY_CMS_SIZE - 1};
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        err.msg[0] = 0;
        cr_assert_eq(eddy_cms_validate(bytes + 1, cut[i], &err), -1, "%zu bytes accepted", cut[i]);
        cr_assert(strstr(err.msg, "count-min sketch: ") &&
                      (strstr(err.msg, "truncated") || strstr(err.msg, "expected")),
                  "%zu bytes: '%s'", cut[i], err.msg);
    }
}

/* Forty keys seen once each fill the sixteen-entry table by ties only: the
 * same keys and result whatever the order they arrive in (a rescaled or
 * restored window sees another order; its output must not change). */
Test(sketch_cms, ties_keep_the_same_keys_in_any_order)
{
    enum { KEYS = 40 };
    eddy_cms_t *orders[3];
    uint64_t s = 7;
    for (int o = 0; o < 3; o++) {
        orders[o] = malloc(sizeof *orders[o]);
        cr_assert(orders[o]);
        eddy_cms_init(orders[o]);
        unsigned perm[KEYS];
        for (unsigned k = 0; k < KEYS; k++)
            perm[k] = o == 1 ? KEYS - 1 - k : k;
        if (o == 2) /* a shuffle */
            for (unsigned k = KEYS - 1; k > 0; k--) {
                unsigned r = (unsigned)(eddy_test_rand(&s) % (k + 1)), t = perm[k];
                perm[k] = perm[r];
                perm[r] = t;
            }
        for (unsigned k = 0; k < KEYS; k++) {
            char key[16];
            int len = snprintf(key, sizeof key, "%u", 1000 + perm[k]);
            eddy_cms_add(orders[o], key, (size_t)len, 1);
        }
    }
    eddy_cms_entry_t first[EDDY_CMS_TOP_K], other[EDDY_CMS_TOP_K];
    size_t n = eddy_cms_top(orders[0], first, 5);
    cr_assert_eq(n, 5);
    cr_assert_eq(first[0].len, 4);
    cr_assert(!memcmp(first[0].key, "1000", 4), "the byte-smallest key leads the ties");
    for (int o = 1; o < 3; o++) {
        cr_assert_eq(eddy_cms_top(orders[o], other, 5), n);
        for (size_t i = 0; i < n; i++)
            cr_assert(first[i].count == other[i].count && first[i].len == other[i].len &&
                          !memcmp(first[i].key, other[i].key, first[i].len),
                      "order %d differs at %zu", o, i);
    }
    for (int o = 0; o < 3; o++)
        free(orders[o]);
}
