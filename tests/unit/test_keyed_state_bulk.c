/* test_keyed_state_bulk.c - the bulk serialised form of a key group
 * (state/keyed_state.h, format version 2) and its loader.
 *
 * Round trips (also of odd value sizes and long keys), a group loaded in
 * bulk that then goes on changing (its entries live in one slab: removed,
 * overwritten under a view, dropped), every truncation, a corrupt checksum,
 * trailing bytes, an unknown version, a buffer whose checksum matches but
 * whose entries do not (a forged duplicate key): each refused with a clear
 * error and nothing of the group loaded, the other groups untouched. The
 * version 1 (msgpack) form that older snapshots hold still loads. */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "leak_check.h"
#include "state/keyed_state.h"
#include "state/keygroup.h"

#define K 128u

TestSuite(keyed_state_bulk, .fini = eddy_test_leak_check);

static int64_t *put(eddy_keyed_state_t *st, const char *key, size_t len)
{
    uint64_t h = eddy_key_hash(key, len);
    return eddy_keyed_state_upsert(st, eddy_key_group_of_hash(h, K), h, key, (uint32_t)len, NULL);
}

static int64_t *get(eddy_keyed_state_t *st, const char *key, size_t len)
{
    uint64_t h = eddy_key_hash(key, len);
    return eddy_keyed_state_get(st, eddy_key_group_of_hash(h, K), h, key, (uint32_t)len);
}

static eddy_keyed_state_t *filled(long n)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, sizeof(int64_t));
    char key[32];
    for (long i = 0; i < n; i++) {
        int len = snprintf(key, sizeof key, "k%ld", i);
        *put(st, key, (size_t)len) = i * 7;
    }
    return st;
}

/* A group with entries, and its bytes. */
static uint32_t busy_group(eddy_keyed_state_t *st, char **buf, size_t *len)
{
    uint32_t kg = 5;
    cr_assert_gt(eddy_keyed_state_group_keys(st, kg), 20);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_keyed_state_write_group(st, kg, buf, len, &err), 0, "%s", err.msg);
    return kg;
}

static void expect_refused(eddy_keyed_state_t *dst, uint32_t kg, const void *data, size_t len,
                           const char *needle)
{
    size_t others = eddy_keyed_state_keys(dst) - eddy_keyed_state_group_keys(dst, kg);
    void *copy = malloc(len ? len : 1); /* exactly len bytes: ASan sees any overread */
    memcpy(copy, data, len);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_keyed_state_read_group(dst, kg, copy, len, &err), -1);
    cr_assert_neq(err.msg[0], '\0');
    if (needle)
        cr_assert(strstr(err.msg, needle), "expected \"%s\" in \"%s\"", needle, err.msg);
    cr_assert_eq(eddy_keyed_state_group_keys(dst, kg), 0, "a refused group is never half-loaded");
    cr_assert_eq(eddy_keyed_state_keys(dst), others, "other groups are untouched");
    free(copy);
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Rewrites the trailer so that the checksum matches the (edited) bytes. */
static void reseal(unsigned char *buf, size_t len)
{
    put_le64(buf + len - 8, XXH64(buf, len - 8, 0));
}

Test(keyed_state_bulk, round_trip_of_every_group_and_the_state_goes_on)
{
    eddy_keyed_state_t *src = filled(60000);
    eddy_keyed_state_t *dst = eddy_keyed_state_new(K, sizeof(int64_t));
    eddy_err_t err = {{0}};
    for (uint32_t kg = 0; kg < K; kg++) {
        char *buf;
        size_t len;
        cr_assert_eq(eddy_keyed_state_write_group(src, kg, &buf, &len, &err), 0, "%s", err.msg);
        cr_assert(len >= 48 && !memcmp(buf, "EKS\x02", 4));
        cr_assert_eq(eddy_keyed_state_read_group(dst, kg, buf, len, &err), 0, "%s", err.msg);
        /* The loaded group serialises to as many bytes (the order of the
         * entries follows the table's capacity, which may differ). */
        char *again;
        size_t again_len;
        cr_assert_eq(eddy_keyed_state_write_group(dst, kg, &again, &again_len, &err), 0);
        cr_assert_eq(again_len, len);
        free(again);
        free(buf);
    }
    cr_assert_eq(eddy_keyed_state_keys(dst), 60000);
    char key[32];
    for (long i = 0; i < 60000; i += 7) {
        int len = snprintf(key, sizeof key, "k%ld", i);
        int64_t *v = get(dst, key, (size_t)len);
        cr_assert(v && *v == i * 7, "k%ld", i);
    }
    /* Entries of a bulk load are removed, updated and added to one by one. */
    for (long i = 0; i < 60000; i += 2) {
        int len = snprintf(key, sizeof key, "k%ld", i);
        uint64_t h = eddy_key_hash(key, (size_t)len);
        cr_assert(eddy_keyed_state_remove(dst, eddy_key_group_of_hash(h, K), h, key,
                                          (uint32_t)len));
    }
    for (long i = 1; i < 60000; i += 2) {
        int len = snprintf(key, sizeof key, "k%ld", i);
        *put(dst, key, (size_t)len) += 1;
    }
    for (long i = 60000; i < 61000; i++) {
        int len = snprintf(key, sizeof key, "k%ld", i);
        *put(dst, key, (size_t)len) = -1;
    }
    cr_assert_eq(eddy_keyed_state_keys(dst), 31000);
    for (long i = 1; i < 60000; i += 500) {
        int len = snprintf(key, sizeof key, "k%ld", i);
        int64_t *v = get(dst, key, (size_t)len);
        cr_assert(v && *v == i * 7 + 1);
    }
    eddy_keyed_state_destroy(&src);
    eddy_keyed_state_destroy(&dst);
}

Test(keyed_state_bulk, odd_value_sizes_and_long_keys)
{
    const size_t sizes[] = {0, 3, 40};
    static char big[70000];
    memset(big, 'x', sizeof big);
    const uint32_t lens[] = {0, 1, 127, 128, 16383, 16384, 65536, sizeof big};
    for (size_t s = 0; s < 3; s++) {
        eddy_keyed_state_t *a = eddy_keyed_state_new(2, sizes[s]);
        eddy_keyed_state_t *b = eddy_keyed_state_new(2, sizes[s]);
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            big[0] = (char)('a' + i);
            unsigned char *v = eddy_keyed_state_upsert(a, 1, eddy_key_hash(big, lens[i]), big,
                                                       lens[i], NULL);
            for (size_t j = 0; j < sizes[s]; j++)
                v[j] = (unsigned char)(i * 31 + j);
        }
        char *buf;
        size_t len;
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_keyed_state_write_group(a, 1, &buf, &len, &err), 0);
        cr_assert_eq(eddy_keyed_state_read_group(b, 1, buf, len, &err), 0, "%s", err.msg);
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            big[0] = (char)('a' + i);
            unsigned char *v = eddy_keyed_state_get(b, 1, eddy_key_hash(big, lens[i]), big, lens[i]);
            cr_assert_not_null(v);
            for (size_t j = 0; j < sizes[s]; j++)
                cr_assert_eq(v[j], (unsigned char)(i * 31 + j));
        }
        free(buf);
        eddy_keyed_state_destroy(&a);
        eddy_keyed_state_destroy(&b);
    }
}

Test(keyed_state_bulk, every_truncation_is_refused, .timeout = 60)
{
    eddy_keyed_state_t *src = filled(3000);
    eddy_keyed_state_t *dst = filled(3000);
    char *buf;
    size_t len;
    uint32_t kg = busy_group(src, &buf, &len);
    for (size_t cut = 0; cut < len; cut++)
        expect_refused(dst, kg, buf, cut, NULL);
    expect_refused(dst, kg, buf, len - 1, "truncated");
    expect_refused(dst, kg, buf, 47, "truncated");
    free(buf);
    eddy_keyed_state_destroy(&src);
    eddy_keyed_state_destroy(&dst);
}

Test(keyed_state_bulk, corrupt_checksum_trailing_bytes_and_version)
{
    eddy_keyed_state_t *src = filled(3000);
    eddy_keyed_state_t *dst = filled(3000);
    char *buf;
    size_t len;
    uint32_t kg = busy_group(src, &buf, &len);
    unsigned char *copy = malloc(len + 1);
    /* Any flipped bit of the header, an entry or the checksum itself. */
    const size_t at[] = {4, 17, 40, 41, len / 2, len - 9, len - 1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        memcpy(copy, buf, len);
        copy[at[i]] ^= 0x10;
        expect_refused(dst, kg, copy, len, "checksum");
    }
    memcpy(copy, buf, len);
    copy[len] = 0;
    expect_refused(dst, kg, copy, len + 1, "trailing");
    memcpy(copy, buf, len);
    copy[3] = 3;
    expect_refused(dst, kg, copy, len, "version 3");
    /* Right checksum, wrong group or value size. */
    memcpy(copy, buf, len);
    copy[4] = (unsigned char)(kg + 1);
    reseal(copy, len);
    expect_refused(dst, kg, copy, len, "data is for key group");
    eddy_keyed_state_t *wide = eddy_keyed_state_new(K, 16);
    expect_refused(wide, kg, buf, len, "value size");
    /* Intact, it loads. */
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_keyed_state_read_group(dst, kg, buf, len, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_group_keys(dst, kg), eddy_keyed_state_group_keys(src, kg));
    free(copy);
    free(buf);
    eddy_keyed_state_destroy(&wide);
    eddy_keyed_state_destroy(&src);
    eddy_keyed_state_destroy(&dst);
}

/* Entries that pass the checksum but not the loader: nothing stays loaded. */
Test(keyed_state_bulk, forged_entries_leave_nothing_half_loaded)
{
    eddy_keyed_state_t *dst = filled(2000);
    /* Header + two entries "ab" (value 1) and "ab" (value 2) + checksum. */
    unsigned char g[40 + 2 * (1 + 8 + 2) + 8] = {'E', 'K', 'S', 2, 3, 0, 0, 0, 8};
    put_le64(g + 16, 2);
    put_le64(g + 24, 4);
    put_le64(g + 32, 2 * (1 + 8 + 2));
    unsigned char *p = g + 40;
    for (int i = 0; i < 2; i++) {
        *p++ = 2;
        put_le64(p, (uint64_t)i + 1);
        p += 8;
        *p++ = 'a';
        *p++ = 'b';
    }
    reseal(g, sizeof g);
    expect_refused(dst, 3, g, sizeof g, "duplicate key");
    /* Distinct keys load. */
    g[40 + 11 + 10] = 'c';
    reseal(g, sizeof g);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_keyed_state_read_group(dst, 3, g, sizeof g, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_group_keys(dst, 3), 2);
    int64_t *v = eddy_keyed_state_get(dst, 3, eddy_key_hash("ac", 2), "ac", 2);
    cr_assert(v && *v == 2);
    /* A key length running past the body, an entry count the body cannot
     * hold, key lengths that do not add up: each refused. */
    g[40 + 11] = 200;
    reseal(g, sizeof g);
    expect_refused(dst, 3, g, sizeof g, NULL);
    g[40 + 11] = 2;
    put_le64(g + 16, 1000);
    reseal(g, sizeof g);
    expect_refused(dst, 3, g, sizeof g, "cannot fit");
    put_le64(g + 16, 2);
    put_le64(g + 24, 3);
    reseal(g, sizeof g);
    expect_refused(dst, 3, g, sizeof g, "add up");
    eddy_keyed_state_destroy(&dst);
}

/* Copy-on-write over a bulk-loaded group: a view keeps the loaded bytes
 * while the live side overwrites, removes and drops; no entry is freed
 * twice or lost (ASan/LSan builds check that). */
Test(keyed_state_bulk, views_over_a_loaded_group)
{
    eddy_keyed_state_t *src = filled(5000);
    eddy_keyed_state_t *dst = eddy_keyed_state_new(K, sizeof(int64_t));
    char *buf;
    size_t len;
    uint32_t kg = busy_group(src, &buf, &len);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_keyed_state_read_group(dst, kg, buf, len, &err), 0, "%s", err.msg);
    free(buf);
    cr_assert_eq(eddy_keyed_state_write_group(dst, kg, &buf, &len, &err), 0);
    eddy_keyed_state_view_t *v1 = eddy_keyed_state_view_new(dst);
    char key[32];
    for (long i = 0; i < 5000; i++) {
        int n = snprintf(key, sizeof key, "k%ld", i);
        uint64_t h = eddy_key_hash(key, (size_t)n);
        if (eddy_key_group_of_hash(h, K) != kg)
            continue;
        if (i % 3 == 0)
            eddy_keyed_state_remove(dst, kg, h, key, (uint32_t)n);
        else
            *(int64_t *)eddy_keyed_state_get(dst, kg, h, key, (uint32_t)n) += 1;
    }
    eddy_keyed_state_view_t *v2 = eddy_keyed_state_view_new(dst);
    char *seen;
    size_t seen_len;
    cr_assert_eq(eddy_keyed_state_view_write_group(v1, kg, &seen, &seen_len, &err), 0);
    cr_assert_eq(seen_len, len);
    cr_assert_arr_eq(seen, buf, len, "the view still gives the loaded bytes");
    free(seen);
    eddy_keyed_state_drop_group(dst, kg);
    eddy_keyed_state_view_destroy(&v1);
    cr_assert_eq(eddy_keyed_state_read_group(dst, kg, buf, len, &err), 0, "%s", err.msg);
    eddy_keyed_state_destroy(&dst); /* v2 outlives its state */
    eddy_keyed_state_view_destroy(&v2);
    free(buf);
    eddy_keyed_state_destroy(&src);
}

/* Version 1, what snapshots written before the bulk format hold. */
Test(keyed_state_bulk, version_1_still_loads)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 4 + 2 * 3);
    msgpack_pack_uint32(&pk, 1);
    msgpack_pack_uint32(&pk, 7);
    msgpack_pack_uint64(&pk, 8);
    msgpack_pack_uint64(&pk, 3);
    const char *keys[] = {"one", "two", "three"};
    for (int64_t i = 0; i < 3; i++) {
        msgpack_pack_bin(&pk, strlen(keys[i]));
        msgpack_pack_bin_body(&pk, keys[i], strlen(keys[i]));
        msgpack_pack_bin(&pk, 8);
        int64_t v = i + 100;
        msgpack_pack_bin_body(&pk, &v, 8);
    }
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, sizeof(int64_t));
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_keyed_state_read_group(st, 7, sb.data, sb.size, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_group_keys(st, 7), 3);
    int64_t *v = eddy_keyed_state_get(st, 7, eddy_key_hash("three", 5), "three", 5);
    cr_assert(v && *v == 102);
    /* and is written back in the bulk form */
    char *buf;
    size_t len;
    cr_assert_eq(eddy_keyed_state_write_group(st, 7, &buf, &len, &err), 0);
    cr_assert(!memcmp(buf, "EKS\x02", 4));
    free(buf);
    msgpack_sbuffer_destroy(&sb);
    eddy_keyed_state_destroy(&st);
}

/* A group dropped "later" is gone from the map at once; its entries are
 * freed by reap slices (or by destroy); with a live view it is a plain
 * drop, so the view keeps what it pinned. */
Test(keyed_state_bulk, drop_group_later_and_reap)
{
    eddy_keyed_state_t *st = filled(20000);
    char *buf;
    size_t len;
    uint32_t kg = busy_group(st, &buf, &len);
    size_t total = eddy_keyed_state_keys(st), in_kg = eddy_keyed_state_group_keys(st, kg);
    eddy_keyed_state_drop_group_later(st, kg);
    cr_assert_eq(eddy_keyed_state_group_keys(st, kg), 0);
    cr_assert_eq(eddy_keyed_state_keys(st), total - in_kg);
    cr_assert_eq(eddy_keyed_state_reap_pending(st), in_kg);
    eddy_err_t err = {{0}};
    /* Loaded again (a step back) while the old entries still wait. */
    cr_assert_eq(eddy_keyed_state_read_group(st, kg, buf, len, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_keyed_state_reap(st, 10), in_kg - 10);
    cr_assert_eq(eddy_keyed_state_reap(st, SIZE_MAX), 0);
    cr_assert_eq(eddy_keyed_state_reap_pending(st), 0);
    cr_assert_eq(eddy_keyed_state_keys(st), total);
    /* The loaded (slab) entries dropped later, then destroyed unreaped. */
    eddy_keyed_state_drop_group_later(st, kg);
    cr_assert_gt(eddy_keyed_state_reap_pending(st), 0);
    /* With a view: a plain drop, the view still has the group. */
    uint32_t other = kg + 1;
    eddy_keyed_state_view_t *v = eddy_keyed_state_view_new(st);
    size_t n_other = eddy_keyed_state_group_keys(st, other);
    eddy_keyed_state_drop_group_later(st, other);
    cr_assert_eq(eddy_keyed_state_group_keys(st, other), 0);
    cr_assert_eq(eddy_keyed_state_view_group_keys(v, other), n_other);
    char *seen;
    size_t seen_len;
    cr_assert_eq(eddy_keyed_state_view_write_group(v, other, &seen, &seen_len, &err), 0);
    free(seen);
    eddy_keyed_state_view_destroy(&v);
    free(buf);
    eddy_keyed_state_destroy(&st);
}
