/* test_keyed_state.c - the heap keyed-state backend (state/keyed_state.c).
 *
 * Covers the map operations (upsert/get/remove/foreach/drop_group), growth
 * to a million keys, value alignment, and the per-key-group serialisation:
 * round trips for many groups, and a reader that must reject - without
 * crashing, reading out of bounds or keeping partial data - wrong key
 * groups, wrong value sizes, every truncation of a valid buffer, flipped
 * bytes and hostile msgpack headers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/keyed_state.h"
#include "state/keygroup.h"

#define K 128u

static int make_key(char *buf, size_t size, const char *prefix, long i)
{
    return snprintf(buf, size, "%s-%ld", prefix, i);
}

static int64_t *count_word(eddy_keyed_state_t *st, const char *key, size_t len, bool *created)
{
    uint64_t h = eddy_key_hash(key, len);
    return eddy_keyed_state_upsert(st, eddy_key_group_of_hash(h, K), h, key, (uint32_t)len,
                                   created);
}

static int64_t *lookup(eddy_keyed_state_t *st, const char *key, size_t len)
{
    uint64_t h = eddy_key_hash(key, len);
    return eddy_keyed_state_get(st, eddy_key_group_of_hash(h, K), h, key, (uint32_t)len);
}

static bool forget(eddy_keyed_state_t *st, const char *key, size_t len)
{
    uint64_t h = eddy_key_hash(key, len);
    return eddy_keyed_state_remove(st, eddy_key_group_of_hash(h, K), h, key, (uint32_t)len);
}

Test(keyed_state, new_destroy_nulls_pointer)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, sizeof(int64_t));
    cr_assert_not_null(st);
    cr_assert_eq(eddy_keyed_state_value_size(st), sizeof(int64_t));
    cr_assert_eq(eddy_keyed_state_keys(st), 0);
    cr_assert_gt(eddy_keyed_state_bytes(st), 0);
    eddy_keyed_state_destroy(&st);
    cr_assert_null(st);
    eddy_keyed_state_destroy(&st); /* harmless twice */
    eddy_keyed_state_destroy(NULL);
}

Test(keyed_state, rejects_invalid_arguments)
{
    cr_assert_null(eddy_keyed_state_new(0, 8));
    cr_assert_null(eddy_keyed_state_new(EDDY_MAX_KEY_GROUPS + 1, 8));
    eddy_keyed_state_t *st = eddy_keyed_state_new(4, 8);
    bool created = true;
    cr_assert_null(eddy_keyed_state_upsert(st, 4, 1, "a", 1, &created));
    cr_assert_not(created);
    cr_assert_null(eddy_keyed_state_get(st, 4, 1, "a", 1));
    cr_assert_not(eddy_keyed_state_remove(st, 99, 1, "a", 1));
    cr_assert_eq(eddy_keyed_state_group_keys(st, 4), 0);
    eddy_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_keyed_state_write_group(st, 4, &buf, &len, &err), -1);
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_read_group(st, 4, "\x90", 1, &err), -1);
    eddy_keyed_state_destroy(&st);
}

Test(keyed_state, upsert_get_remove)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, sizeof(int64_t));
    bool created = false;
    int64_t *v = count_word(st, "hello", 5, &created);
    cr_assert_not_null(v);
    cr_assert(created);
    cr_assert_eq(*v, 0, "new values are zeroed");
    *v += 1;
    int64_t *again = count_word(st, "hello", 5, &created);
    cr_assert_not(created);
    cr_assert_eq(again, v);
    *again += 41;
    cr_assert_eq(*lookup(st, "hello", 5), 42);
    cr_assert_null(lookup(st, "hell", 4));
    cr_assert_null(lookup(st, "hello!", 6));
    cr_assert_eq(eddy_keyed_state_keys(st), 1);

    /* created may be NULL; the empty key is a key like any other. */
    int64_t *empty = count_word(st, "", 0, NULL);
    cr_assert_not_null(empty);
    *empty = 7;
    cr_assert_eq(*lookup(st, "", 0), 7);
    cr_assert_eq(eddy_keyed_state_keys(st), 2);

    cr_assert(forget(st, "hello", 5));
    cr_assert_not(forget(st, "hello", 5));
    cr_assert_null(lookup(st, "hello", 5));
    cr_assert_eq(*lookup(st, "", 0), 7);
    cr_assert_eq(eddy_keyed_state_keys(st), 1);
    v = count_word(st, "hello", 5, &created);
    cr_assert(created);
    cr_assert_eq(*v, 0, "a re-inserted key starts from zero");
    eddy_keyed_state_destroy(&st);
}

Test(keyed_state, same_hash_different_keys)
{
    /* Colliding hashes must still be told apart by the key bytes. */
    eddy_keyed_state_t *st = eddy_keyed_state_new(1, sizeof(int64_t));
    char key[32];
    for (long i = 0; i < 1000; i++) {
        int n = make_key(key, sizeof key, "c", i);
        int64_t *v = eddy_keyed_state_upsert(st, 0, 12345, key, (uint32_t)n, NULL);
        *v = i;
    }
    cr_assert_eq(eddy_keyed_state_keys(st), 1000);
    for (long i = 0; i < 1000; i += 2) {
        int n = make_key(key, sizeof key, "c", i);
        cr_assert(eddy_keyed_state_remove(st, 0, 12345, key, (uint32_t)n));
    }
    for (long i = 0; i < 1000; i++) {
        int n = make_key(key, sizeof key, "c", i);
        int64_t *v = eddy_keyed_state_get(st, 0, 12345, key, (uint32_t)n);
        if (i % 2)
            cr_assert(v && *v == i);
        else
            cr_assert_null(v);
    }
    eddy_keyed_state_destroy(&st);
}

Test(keyed_state, values_are_aligned)
{
    const size_t sizes[] = {0, 1, 3, 8, 12, 16, 24, 100};
    char key[64];
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        eddy_keyed_state_t *st = eddy_keyed_state_new(8, sizes[s]);
        for (int len = 0; len < 40; len++) {
            memset(key, 'a' + len % 26, (size_t)len);
            void *v = eddy_keyed_state_upsert(st, (uint32_t)len % 8, (uint64_t)len * 7919, key,
                                              (uint32_t)len, NULL);
            cr_assert_not_null(v);
            cr_assert_eq((uintptr_t)v % 8, 0, "value_size %zu key_len %d misaligned", sizes[s],
                         len);
            if (sizes[s] >= sizeof(double))
                *(double *)v = 1.5; /* UBSan would flag a misaligned store */
        }
        eddy_keyed_state_destroy(&st);
    }
}

Test(keyed_state, grows_to_a_million_keys, .timeout = 60)
{
    const long n = 1000000;
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, sizeof(int64_t));
    char key[32];
    size_t bytes0 = eddy_keyed_state_bytes(st);
    for (long i = 0; i < n; i++) {
        int len = make_key(key, sizeof key, "key", i);
        bool created;
        int64_t *v = count_word(st, key, (size_t)len, &created);
        cr_assert(v && created);
        *v = i;
    }
    cr_assert_eq(eddy_keyed_state_keys(st), (size_t)n);
    cr_assert_gt(eddy_keyed_state_bytes(st), bytes0 + (size_t)n * 16);
    size_t sum = 0;
    for (uint32_t kg = 0; kg < K; kg++)
        sum += eddy_keyed_state_group_keys(st, kg);
    cr_assert_eq(sum, (size_t)n);
    for (long i = 0; i < n; i++) {
        int len = make_key(key, sizeof key, "key", i);
        int64_t *v = lookup(st, key, (size_t)len);
        cr_assert(v && *v == i, "key %ld lost", i);
    }
    for (long i = 0; i < n; i += 2) {
        int len = make_key(key, sizeof key, "key", i);
        cr_assert(forget(st, key, (size_t)len));
    }
    cr_assert_eq(eddy_keyed_state_keys(st), (size_t)n / 2);
    for (long i = 0; i < n; i++) {
        int len = make_key(key, sizeof key, "key", i);
        int64_t *v = lookup(st, key, (size_t)len);
        if (i % 2)
            cr_assert(v && *v == i, "key %ld lost after removals", i);
        else
            cr_assert_null(v, "key %ld still present", i);
    }
    eddy_keyed_state_destroy(&st);
}

Test(keyed_state, one_group_growth)
{
    /* All keys in a single group (K = 1): exercises table doubling alone. */
    eddy_keyed_state_t *st = eddy_keyed_state_new(1, sizeof(int64_t));
    char key[32];
    for (long i = 0; i < 200000; i++) {
        int len = make_key(key, sizeof key, "w", i);
        int64_t *v = eddy_keyed_state_upsert(st, 0, eddy_key_hash(key, (size_t)len), key,
                                             (uint32_t)len, NULL);
        *v = -i;
    }
    cr_assert_eq(eddy_keyed_state_group_keys(st, 0), 200000);
    for (long i = 0; i < 200000; i += 1000) {
        int len = make_key(key, sizeof key, "w", i);
        int64_t *v = eddy_keyed_state_get(st, 0, eddy_key_hash(key, (size_t)len), key,
                                          (uint32_t)len);
        cr_assert(v && *v == -i);
    }
    eddy_keyed_state_destroy(&st);
}

Test(keyed_state, random_ops_match_a_model)
{
    /* Random upsert/remove/get against a plain array, with a real hash and
     * with a degenerate one (7 distinct values) that builds long probe runs,
     * to exercise backward-shift deletion. */
    enum { NKEYS = 3000, OPS = 300000 };
    static int64_t model[NKEYS];
    static bool present[NKEYS];
    for (int mode = 0; mode < 2; mode++) {
        memset(present, 0, sizeof present);
        eddy_keyed_state_t *st = eddy_keyed_state_new(1, sizeof(int64_t));
        size_t live = 0;
        srand(42 + mode);
        char key[32];
        for (int op = 0; op < OPS; op++) {
            int k = rand() % NKEYS;
            int len = make_key(key, sizeof key, "m", k);
            uint64_t h = mode ? (uint64_t)(k % 7) : eddy_key_hash(key, (size_t)len);
            int what = rand() % 3;
            if (what == 0) {
                bool created;
                int64_t *v = eddy_keyed_state_upsert(st, 0, h, key, (uint32_t)len, &created);
                cr_assert_not_null(v);
                cr_assert_eq(created, !present[k]);
                if (created) {
                    present[k] = true;
                    model[k] = 0;
                    live++;
                }
                cr_assert_eq(*v, model[k]);
                *v = model[k] = op;
            } else if (what == 1) {
                cr_assert_eq(eddy_keyed_state_remove(st, 0, h, key, (uint32_t)len), present[k]);
                if (present[k]) {
                    present[k] = false;
                    live--;
                }
            } else {
                int64_t *v = eddy_keyed_state_get(st, 0, h, key, (uint32_t)len);
                cr_assert_eq(v != NULL, present[k], "op %d key %d", op, k);
                if (v)
                    cr_assert_eq(*v, model[k]);
            }
            cr_assert_eq(eddy_keyed_state_keys(st), live);
        }
        eddy_keyed_state_destroy(&st);
    }
}

typedef struct visit_ctx {
    eddy_keyed_state_t *st;
    uint32_t kg;
    size_t visits;
    int64_t sum;
} visit_ctx_t;

static void visit(void *arg, const void *key, uint32_t key_len, void *value)
{
    visit_ctx_t *c = arg;
    c->visits++;
    c->sum += *(int64_t *)value;
    uint64_t h = eddy_key_hash(key, key_len);
    cr_assert_eq(eddy_key_group_of_hash(h, K), c->kg, "foreach visited a key of another group");
    cr_assert_eq(eddy_keyed_state_get(c->st, c->kg, h, key, key_len), value);
    *(int64_t *)value += 1000; /* visitors may modify values */
}

Test(keyed_state, foreach_and_drop_group)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, sizeof(int64_t));
    char key[32];
    int64_t expect_sum[K] = {0};
    size_t expect_n[K] = {0};
    for (long i = 0; i < 20000; i++) {
        int len = make_key(key, sizeof key, "f", i);
        uint32_t kg = eddy_key_group_of(key, (size_t)len, K);
        *count_word(st, key, (size_t)len, NULL) = i;
        expect_sum[kg] += i;
        expect_n[kg]++;
    }
    for (uint32_t kg = 0; kg < K; kg++) {
        visit_ctx_t c = {st, kg, 0, 0};
        eddy_keyed_state_foreach(st, kg, visit, &c);
        cr_assert_eq(c.visits, expect_n[kg]);
        cr_assert_eq(c.visits, eddy_keyed_state_group_keys(st, kg));
        cr_assert_eq(c.sum, expect_sum[kg]);
    }
    int len = make_key(key, sizeof key, "f", 7);
    cr_assert_eq(*lookup(st, key, (size_t)len), 1007);

    size_t before = eddy_keyed_state_keys(st), bytes_before = eddy_keyed_state_bytes(st);
    eddy_keyed_state_drop_group(st, 5);
    cr_assert_eq(eddy_keyed_state_group_keys(st, 5), 0);
    cr_assert_eq(eddy_keyed_state_keys(st), before - expect_n[5]);
    cr_assert_lt(eddy_keyed_state_bytes(st), bytes_before);
    visit_ctx_t c = {st, 5, 0, 0};
    eddy_keyed_state_foreach(st, 5, visit, &c);
    cr_assert_eq(c.visits, 0);
    eddy_keyed_state_drop_group(st, 5); /* dropping an empty group is fine */
    /* The dropped group is usable again. */
    for (long i = 0; i < 20000; i++) {
        len = make_key(key, sizeof key, "f", i);
        if (eddy_key_group_of(key, (size_t)len, K) == 5)
            cr_assert_null(lookup(st, key, (size_t)len));
    }
    eddy_keyed_state_destroy(&st);
}

/* --- serialisation ------------------------------------------------------- */

static eddy_keyed_state_t *filled_state(long n, const char *prefix)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, sizeof(int64_t));
    char key[32];
    for (long i = 0; i < n; i++) {
        int len = make_key(key, sizeof key, prefix, i);
        *count_word(st, key, (size_t)len, NULL) = i * 3 + 1;
    }
    return st;
}

typedef struct cmp_ctx {
    eddy_keyed_state_t *other;
    uint32_t kg;
    size_t seen;
} cmp_ctx_t;

static void compare_visit(void *arg, const void *key, uint32_t key_len, void *value)
{
    cmp_ctx_t *c = arg;
    uint64_t h = eddy_key_hash(key, key_len);
    int64_t *v = eddy_keyed_state_get(c->other, c->kg, h, key, key_len);
    cr_assert_not_null(v, "key %.*s missing after round trip", (int)key_len, (const char *)key);
    cr_assert_eq(*v, *(int64_t *)value);
    c->seen++;
}

Test(keyed_state, round_trip_every_group)
{
    eddy_keyed_state_t *src = filled_state(50000, "rt");
    eddy_keyed_state_t *dst = eddy_keyed_state_new(K, sizeof(int64_t));
    eddy_err_t err = {{0}};
    for (uint32_t kg = 0; kg < K; kg++) {
        char *buf = NULL;
        size_t len = 0;
        cr_assert_eq(eddy_keyed_state_write_group(src, kg, &buf, &len, &err), 0, "%s", err.msg);
        cr_assert_not_null(buf);
        cr_assert_eq(eddy_keyed_state_read_group(dst, kg, buf, len, &err), 0, "kg %u: %s", kg,
                     err.msg);
        cr_assert_eq(eddy_keyed_state_group_keys(dst, kg), eddy_keyed_state_group_keys(src, kg));
        cmp_ctx_t c = {dst, kg, 0};
        eddy_keyed_state_foreach(src, kg, compare_visit, &c);
        cr_assert_eq(c.seen, eddy_keyed_state_group_keys(src, kg));
        free(buf);
    }
    cr_assert_eq(eddy_keyed_state_keys(dst), 50000);
    /* The restored state keeps working as a map. */
    char key[32];
    int len = make_key(key, sizeof key, "rt", 123);
    bool created;
    int64_t *v = count_word(dst, key, (size_t)len, &created);
    cr_assert(!created && *v == 123 * 3 + 1);
    eddy_keyed_state_destroy(&src);
    eddy_keyed_state_destroy(&dst);
}

Test(keyed_state, round_trip_odd_shapes)
{
    /* value_size 0 (a set), a non-multiple-of-8 value, empty and long keys. */
    const size_t sizes[] = {0, 3, 40};
    eddy_err_t err = {{0}};
    for (size_t s = 0; s < 3; s++) {
        size_t vs = sizes[s];
        eddy_keyed_state_t *a = eddy_keyed_state_new(2, vs);
        eddy_keyed_state_t *b = eddy_keyed_state_new(2, vs);
        static char big[70000];
        memset(big, 'x', sizeof big);
        const uint32_t lens[] = {0, 1, 31, 255, 256, 65535, 65536, sizeof big};
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            big[0] = (char)('a' + i);
            unsigned char *v = eddy_keyed_state_upsert(a, 1, eddy_key_hash(big, lens[i]), big,
                                                       lens[i], NULL);
            for (size_t j = 0; j < vs; j++)
                v[j] = (unsigned char)(i * 31 + j);
        }
        char *buf = NULL;
        size_t len = 0;
        cr_assert_eq(eddy_keyed_state_write_group(a, 1, &buf, &len, &err), 0);
        cr_assert_eq(eddy_keyed_state_read_group(b, 1, buf, len, &err), 0, "%s", err.msg);
        cr_assert_eq(eddy_keyed_state_group_keys(b, 1), sizeof lens / sizeof lens[0]);
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            big[0] = (char)('a' + i);
            unsigned char *v = eddy_keyed_state_get(b, 1, eddy_key_hash(big, lens[i]), big,
                                                    lens[i]);
            cr_assert_not_null(v);
            for (size_t j = 0; j < vs; j++)
                cr_assert_eq(v[j], (unsigned char)(i * 31 + j));
        }
        free(buf);
        eddy_keyed_state_destroy(&a);
        eddy_keyed_state_destroy(&b);
    }
}

Test(keyed_state, empty_group_round_trip_and_replace)
{
    eddy_keyed_state_t *st = filled_state(1000, "e");
    eddy_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    /* An empty group serialises to the bulk header (version 2, kg 9, value
     * size 8, no entries, no key bytes, empty body) and its checksum. */
    eddy_keyed_state_t *empty = eddy_keyed_state_new(K, sizeof(int64_t));
    cr_assert_eq(eddy_keyed_state_write_group(empty, 9, &buf, &len, &err), 0);
    const unsigned char expect[40] = {'E', 'K', 'S', 2, 9, 0, 0, 0, 8};
    cr_assert_eq(len, sizeof expect + 8);
    cr_assert_arr_eq(buf, expect, sizeof expect);
    /* Reading replaces whatever the group held. */
    cr_assert_gt(eddy_keyed_state_group_keys(st, 9), 0);
    size_t total = eddy_keyed_state_keys(st) - eddy_keyed_state_group_keys(st, 9);
    cr_assert_eq(eddy_keyed_state_read_group(st, 9, buf, len, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_group_keys(st, 9), 0);
    cr_assert_eq(eddy_keyed_state_keys(st), total);
    free(buf);
    eddy_keyed_state_destroy(&st);
    eddy_keyed_state_destroy(&empty);
}

Test(keyed_state, rejects_wrong_kg_and_value_size)
{
    eddy_keyed_state_t *st = filled_state(2000, "w");
    eddy_keyed_state_t *dst = filled_state(2000, "w");
    eddy_keyed_state_t *wide = eddy_keyed_state_new(K, 16);
    eddy_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_keyed_state_write_group(st, 3, &buf, &len, &err), 0);

    cr_assert_gt(eddy_keyed_state_group_keys(dst, 4), 0);
    cr_assert_eq(eddy_keyed_state_read_group(dst, 4, buf, len, &err), -1);
    cr_assert(strstr(err.msg, "key group 4") && strstr(err.msg, "key group 3"), "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_group_keys(dst, 4), 0, "failed read must leave the group empty");

    cr_assert_eq(eddy_keyed_state_read_group(wide, 3, buf, len, &err), -1);
    cr_assert(strstr(err.msg, "value size"), "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_group_keys(wide, 3), 0);
    cr_assert_eq(eddy_keyed_state_keys(wide), 0);

    free(buf);
    eddy_keyed_state_destroy(&st);
    eddy_keyed_state_destroy(&dst);
    eddy_keyed_state_destroy(&wide);
}

Test(keyed_state, every_truncation_fails, .timeout = 60)
{
    eddy_keyed_state_t *st = filled_state(3000, "t");
    eddy_keyed_state_t *dst = eddy_keyed_state_new(K, sizeof(int64_t));
    eddy_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_keyed_state_write_group(st, 17, &buf, &len, &err), 0);
    cr_assert_gt(eddy_keyed_state_group_keys(st, 17), 10);
    for (size_t cut = 0; cut < len; cut++) {
        /* A private copy of exactly `cut` bytes, so ASan catches any overread. */
        char *copy = malloc(cut ? cut : 1);
        memcpy(copy, buf, cut);
        err.msg[0] = '\0';
        cr_assert_eq(eddy_keyed_state_read_group(dst, 17, copy, cut, &err), -1,
                     "truncation to %zu of %zu bytes accepted", cut, len);
        cr_assert_neq(err.msg[0], '\0');
        cr_assert_eq(eddy_keyed_state_group_keys(dst, 17), 0);
        free(copy);
    }
    /* Extra bytes after a valid group are rejected too. */
    char *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    cr_assert_eq(eddy_keyed_state_read_group(dst, 17, longer, len + 1, &err), -1);
    cr_assert(strstr(err.msg, "trailing"), "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_read_group(dst, 17, buf, len, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_keys(dst), eddy_keyed_state_group_keys(st, 17));
    free(longer);
    free(buf);
    eddy_keyed_state_destroy(&st);
    eddy_keyed_state_destroy(&dst);
}

Test(keyed_state, flipped_bytes_never_crash, .timeout = 120)
{
    eddy_keyed_state_t *st = filled_state(600, "x");
    eddy_keyed_state_t *dst = eddy_keyed_state_new(K, sizeof(int64_t));
    eddy_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_keyed_state_write_group(st, 1, &buf, &len, &err), 0);
    size_t n = eddy_keyed_state_group_keys(st, 1);
    const unsigned char masks[] = {0x01, 0x80, 0xff, 0x10};
    char *copy = malloc(len);
    size_t rejected = 0;
    for (size_t i = 0; i < len; i++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(copy, buf, len);
            copy[i] = (char)(copy[i] ^ masks[m]);
            int rc = eddy_keyed_state_read_group(dst, 1, copy, len, &err);
            if (rc == 0) {
                /* A flip inside key or value bytes yields other valid data. */
                cr_assert_eq(eddy_keyed_state_group_keys(dst, 1), n);
            } else {
                cr_assert_eq(eddy_keyed_state_group_keys(dst, 1), 0);
                rejected++;
            }
        }
    }
    cr_assert_gt(rejected, 0);
    cr_assert_eq(eddy_keyed_state_keys(dst), eddy_keyed_state_group_keys(dst, 1));
    free(copy);
    free(buf);
    eddy_keyed_state_destroy(&st);
    eddy_keyed_state_destroy(&dst);
}

static void expect_reject(eddy_keyed_state_t *st, uint32_t kg, const void *data, size_t len,
                          const char *needle)
{
    eddy_err_t err = {{0}};
    void *copy = malloc(len ? len : 1);
    memcpy(copy, data, len);
    cr_assert_eq(eddy_keyed_state_read_group(st, kg, copy, len, &err), -1);
    cr_assert_eq(eddy_keyed_state_group_keys(st, kg), 0);
    if (needle)
        cr_assert(strstr(err.msg, needle), "expected \"%s\" in \"%s\"", needle, err.msg);
    free(copy);
}

Test(keyed_state, hostile_buffers)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, sizeof(int64_t));
    expect_reject(st, 0, "", 0, "empty");
    expect_reject(st, 0, "\xc0", 1, "not a msgpack array");
    expect_reject(st, 0, "\xdd", 1, "truncated");
    /* Array header claiming 4 billion elements over a few bytes. */
    expect_reject(st, 0, "\xdd\xff\xff\xff\xff\x01\x00\x08", 8, NULL);
    /* Fine header, entry count that cannot fit in the buffer. */
    expect_reject(st, 0, "\xdd\x7f\xff\xff\xfe\x01\x00\x08\xce\x3f\xff\xff\xff", 13, NULL);
    /* Nested huge array/map where a key should be (padded so the entry
     * count alone does not give the game away). */
    unsigned char pad[64] = {0x96, 0x01, 0x00, 0x08, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff};
    expect_reject(st, 0, pad, sizeof pad, "array or map");
    pad[5] = 0xdf;
    expect_reject(st, 0, pad, sizeof pad, "array or map");
    /* Bin claiming 4 GiB. */
    pad[5] = 0xc6;
    expect_reject(st, 0, pad, sizeof pad, "truncated inside key");
    /* Wrong version, odd array length, count mismatch. */
    expect_reject(st, 0, "\x94\x02\x00\x08\x00", 5, "version");
    expect_reject(st, 0, "\x95\x01\x00\x08\x00\x00", 6, "4 + 2n");
    expect_reject(st, 0, "\x96\x01\x00\x08\x02\xc4\x00\xc4\x08\x00\x00\x00\x00\x00\x00\x00\x00",
                  17, "does not match");
    /* Key as a string instead of bin; negative int as version. */
    expect_reject(st, 0, "\x96\x01\x00\x08\x01\xa1x\xc4\x08\x00\x00\x00\x00\x00\x00\x00\x00", 17,
                  "not msgpack bin");
    expect_reject(st, 0, "\x94\xff\x00\x08\x00", 5, "unsigned");
    /* Value of the wrong size. */
    expect_reject(st, 0, "\x96\x01\x00\x08\x01\xc4\x01x\xc4\x04\x00\x00\x00\x00\x00\x00\x00\x00",
                  18, "4 bytes");
    /* Duplicate keys. */
    const char dup[] = "\x98\x01\x00\x08\x02"
                       "\xc4\x01k\xc4\x08\x01\x00\x00\x00\x00\x00\x00\x00"
                       "\xc4\x01k\xc4\x08\x02\x00\x00\x00\x00\x00\x00\x00";
    expect_reject(st, 0, dup, sizeof dup - 1, "duplicate");
    /* And the same bytes with distinct keys are accepted. */
    char ok[sizeof dup];
    memcpy(ok, dup, sizeof dup);
    ok[sizeof dup - 1 - 11] = 'j';
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_keyed_state_read_group(st, 0, ok, sizeof dup - 1, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_group_keys(st, 0), 2);
    int64_t *v = eddy_keyed_state_get(st, 0, eddy_key_hash("j", 1), "j", 1);
    cr_assert(v && *v == 2);
    /* Random garbage. */
    srand(1);
    unsigned char junk[256];
    for (int round = 0; round < 20000; round++) {
        size_t len = (size_t)(rand() % (int)sizeof junk);
        for (size_t i = 0; i < len; i++)
            junk[i] = (unsigned char)rand();
        if (round % 2 && len > 0)
            junk[0] = (unsigned char)(0x90 + rand() % 16); /* plausible header */
        unsigned char *copy = malloc(len ? len : 1);
        memcpy(copy, junk, len);
        if (eddy_keyed_state_read_group(st, 0, copy, len, &err) != 0)
            cr_assert_eq(eddy_keyed_state_group_keys(st, 0), 0);
        free(copy);
    }
    eddy_keyed_state_destroy(&st);
}

/* Entries live in per-group slabs (and very long keys in a malloc of
 * their own): a group given up while its entries are reaped slice by slice
 * gets new entries meanwhile, removals leave holes in slabs, and every
 * value stays intact; ASan/LSan builds check that each slab is freed once,
 * with its last entry. */
Test(keyed_state, slabs_outlive_their_group)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, sizeof(int64_t));
    cr_assert_not_null(st);
    char key[8192];
    const long n = 50000;
    for (long i = 0; i < n; i++) {
        int len = make_key(key, sizeof key, "w", i);
        if (i % 997 == 0) { /* too long for a slab */
            memset(key + len, 'x', 6000);
            len += 6000;
        }
        int64_t *v = count_word(st, key, (size_t)len, NULL);
        cr_assert_not_null(v);
        *v = i;
    }
    for (long i = 0; i < n; i += 3) {
        int len = make_key(key, sizeof key, "w", i);
        if (i % 997 == 0) {
            memset(key + len, 'x', 6000);
            len += 6000;
        }
        cr_assert(forget(st, key, (size_t)len));
    }
    for (uint32_t kg = 0; kg < K; kg += 2)
        eddy_keyed_state_drop_group_later(st, kg);
    eddy_keyed_state_reap(st, 1000); /* part of it: the rest stays in the graves */
    for (long i = 0; i < n; i++) {
        int len = make_key(key, sizeof key, "w", i);
        if (i % 997 == 0) {
            memset(key + len, 'x', 6000);
            len += 6000;
        }
        uint64_t h = eddy_key_hash(key, (size_t)len);
        uint32_t kg = eddy_key_group_of_hash(h, K);
        int64_t *v = lookup(st, key, (size_t)len);
        if (kg % 2 == 0 || i % 3 == 0) {
            cr_assert_null(v, "key %ld should be gone", i);
            if (kg % 2 == 0) { /* the group comes back with new entries */
                v = count_word(st, key, (size_t)len, NULL);
                cr_assert_not_null(v);
                *v = -i;
            }
        } else {
            cr_assert_not_null(v, "key %ld lost", i);
            cr_assert_eq(*v, i);
        }
    }
    eddy_keyed_state_reap(st, SIZE_MAX);
    cr_assert_eq(eddy_keyed_state_reap_pending(st), 0);
    eddy_keyed_state_destroy(&st);
}

static void visit_nothing(void *ctx, const void *key, uint32_t key_len, void *value)
{
    (void)ctx;
    (void)key;
    (void)key_len;
    (void)value;
}

/* Every access that may write marks the group (incremental checkpoints). */
Test(keyed_state, change_marks)
{
    eddy_keyed_state_t *s = eddy_keyed_state_new(8, 8);
    cr_assert_not_null(s);
    for (uint32_t kg = 0; kg < 8; kg++)
        cr_assert_not(eddy_keyed_state_take_changed(s, kg));
    uint64_t h = 42;
    cr_assert_not_null(eddy_keyed_state_upsert(s, 1, h, "a", 1, NULL));
    cr_assert(eddy_keyed_state_take_changed(s, 1));
    cr_assert_not(eddy_keyed_state_take_changed(s, 1), "taken: cleared");
    cr_assert_not(eddy_keyed_state_take_changed(s, 2));
    cr_assert_null(eddy_keyed_state_get(s, 1, 7, "b", 1));
    cr_assert_not(eddy_keyed_state_take_changed(s, 1), "a get that finds nothing");
    cr_assert_not_null(eddy_keyed_state_get(s, 1, h, "a", 1));
    cr_assert(eddy_keyed_state_take_changed(s, 1));
    cr_assert_eq(eddy_keyed_state_foreach(s, 2, visit_nothing, NULL), 0);
    cr_assert_not(eddy_keyed_state_take_changed(s, 2), "foreach over an empty group");
    cr_assert_eq(eddy_keyed_state_foreach(s, 1, visit_nothing, NULL), 0);
    cr_assert(eddy_keyed_state_take_changed(s, 1));
    cr_assert_not(eddy_keyed_state_remove(s, 1, 7, "b", 1));
    cr_assert_not(eddy_keyed_state_take_changed(s, 1));
    cr_assert(eddy_keyed_state_remove(s, 1, h, "a", 1));
    cr_assert(eddy_keyed_state_take_changed(s, 1), "a delete");
    eddy_keyed_state_drop_group(s, 3);
    cr_assert(eddy_keyed_state_take_changed(s, 3));
    eddy_keyed_state_drop_group_later(s, 4);
    cr_assert(eddy_keyed_state_take_changed(s, 4));
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_keyed_state_read_group(s, 5, "junk", 4, &err), -1);
    cr_assert(eddy_keyed_state_take_changed(s, 5), "a load, even a failed one");
    cr_assert_not(eddy_keyed_state_take_changed(s, 99), "out of range");
    eddy_keyed_state_destroy(&s);
}
