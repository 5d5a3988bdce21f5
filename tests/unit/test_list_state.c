/* test_list_state.c - keyed list state (state/list_state.c).
 *
 * Covers insertion order and the record fields, lists separated by key and
 * namespace, clear, move (into an empty and a non-empty list), foreach,
 * the entry/byte counters, and the per-key-group serialisation: round trip
 * into a fresh object, drop_group, kg out of range, every truncation and
 * hostile bytes rejected with the group left empty. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"
#include "state/keygroup.h"
#include "state/list_state.h"
#include "tests/unit/leak_check.h"

TestSuite(list_state, .fini = eddy_test_leak_check);

#define K 16u

static uint32_t kg_of(const char *key)
{
    return eddy_key_group_of(key, strlen(key), K);
}

static int add(eddy_list_state_t *ls, const char *key, const char *ns, const char *data,
               int64_t value, int64_t ts)
{
    eddy_record_t rec = eddy_record_make(data, (uint32_t)strlen(data), value);
    rec.timestamp = ts;
    return eddy_list_state_add(ls, kg_of(key), key, (uint32_t)strlen(key), ns,
                               (uint32_t)strlen(ns), &rec);
}

static size_t size(eddy_list_state_t *ls, const char *key, const char *ns)
{
    return eddy_list_state_size(ls, kg_of(key), key, (uint32_t)strlen(key), ns,
                                (uint32_t)strlen(ns));
}

/* Entry i's data as a string (static buffer), or NULL. */
static const char *at(eddy_list_state_t *ls, const char *key, const char *ns, size_t i,
                      eddy_record_t *out)
{
    static char buf[256];
    eddy_record_t rec;
    if (!eddy_list_state_at(ls, kg_of(key), key, (uint32_t)strlen(key), ns, (uint32_t)strlen(ns),
                            i, &rec))
        return NULL;
    snprintf(buf, sizeof buf, "%.*s", (int)rec.len, rec.data);
    if (out)
        *out = rec;
    return buf;
}

static bool clear(eddy_list_state_t *ls, const char *key, const char *ns)
{
    return eddy_list_state_clear(ls, kg_of(key), key, (uint32_t)strlen(key), ns,
                                 (uint32_t)strlen(ns));
}

Test(list_state, new_destroy_and_bad_arguments)
{
    cr_assert_null(eddy_list_state_new(0));
    cr_assert_null(eddy_list_state_new(EDDY_MAX_KEY_GROUPS + 1));
    eddy_list_state_t *ls = eddy_list_state_new(K);
    cr_assert_not_null(ls);
    eddy_record_t rec = eddy_record_make("x", 1, 0);
    cr_assert_eq(eddy_list_state_add(ls, K, "k", 1, "", 0, &rec), -1);
    cr_assert_eq(eddy_list_state_size(ls, K, "k", 1, "", 0), 0);
    cr_assert_not(eddy_list_state_at(ls, K, "k", 1, "", 0, 0, &rec));
    cr_assert_not(eddy_list_state_clear(ls, K, "k", 1, "", 0));
    cr_assert_eq(eddy_list_state_move(ls, K, "k", 1, "a", 1, "b", 1), -1);
    eddy_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_list_state_write_group(ls, K, &buf, &len, &err), -1);
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);
    cr_assert_eq(eddy_list_state_read_group(ls, K, "\x93\x01\x10\x00", 4, &err), -1);
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);
    eddy_list_state_drop_group(ls, K);
    cr_assert_eq(eddy_list_state_entries(ls), 0);
    eddy_list_state_destroy(&ls);
    cr_assert_null(ls);
    eddy_list_state_destroy(&ls);
    eddy_list_state_destroy(NULL);
}

Test(list_state, add_keeps_order_and_fields_per_key_and_namespace)
{
    eddy_list_state_t *ls = eddy_list_state_new(K);
    size_t empty_bytes = eddy_list_state_bytes(ls);
    for (int i = 0; i < 100; i++) {
        char row[32];
        snprintf(row, sizeof row, "row-%d", i);
        cr_assert_eq(add(ls, "alice", "w1", row, i, 1000 + i), 0);
    }
    add(ls, "alice", "w2", "other-window", 7, 1);
    add(ls, "bob", "w1", "other-key", 8, 2);
    add(ls, "", "", "", -1, -2); /* empty key, ns and data are fine */
    cr_assert_eq(size(ls, "alice", "w1"), 100);
    cr_assert_eq(size(ls, "alice", "w2"), 1);
    cr_assert_eq(size(ls, "bob", "w1"), 1);
    cr_assert_eq(size(ls, "bob", "w2"), 0);
    cr_assert_eq(size(ls, "", ""), 1);
    cr_assert_eq(eddy_list_state_entries(ls), 103);
    cr_assert_gt(eddy_list_state_bytes(ls), empty_bytes);

    eddy_record_t rec;
    for (int i = 0; i < 100; i++) {
        char row[32];
        snprintf(row, sizeof row, "row-%d", i);
        cr_assert_str_eq(at(ls, "alice", "w1", (size_t)i, &rec), row);
        cr_assert_eq(rec.value, i);
        cr_assert_eq(rec.timestamp, 1000 + i);
        cr_assert_eq(rec.kind, EDDY_INSERT);
    }
    cr_assert_null(at(ls, "alice", "w1", 100, NULL));
    cr_assert_str_eq(at(ls, "", "", 0, &rec), "");
    cr_assert_eq(rec.len, 0);
    cr_assert_eq(rec.value, -1);

    eddy_record_t late = eddy_record_make("late", 4, 3);
    late.kind = EDDY_LATE;
    cr_assert_eq(eddy_list_state_add(ls, kg_of("bob"), "bob", 3, "w1", 2, &late), 0);
    cr_assert_str_eq(at(ls, "bob", "w1", 1, &rec), "late");
    cr_assert_eq(rec.kind, EDDY_LATE);

    cr_assert(clear(ls, "alice", "w1"));
    cr_assert_not(clear(ls, "alice", "w1"));
    cr_assert_eq(size(ls, "alice", "w1"), 0);
    cr_assert_eq(size(ls, "alice", "w2"), 1);
    cr_assert_eq(eddy_list_state_entries(ls), 4);
    cr_assert(clear(ls, "alice", "w2"));
    cr_assert(clear(ls, "bob", "w1"));
    cr_assert(clear(ls, "", ""));
    cr_assert_eq(eddy_list_state_entries(ls), 0);
    cr_assert_eq(eddy_list_state_bytes(ls) > empty_bytes, true); /* tables stay allocated */
    eddy_list_state_destroy(&ls);
}

static int move(eddy_list_state_t *ls, const char *key, const char *from, const char *to)
{
    return eddy_list_state_move(ls, kg_of(key), key, (uint32_t)strlen(key), from,
                                (uint32_t)strlen(from), to, (uint32_t)strlen(to));
}

Test(list_state, move_appends_and_removes_the_source)
{
    eddy_list_state_t *ls = eddy_list_state_new(K);
    add(ls, "k", "a", "a0", 0, 0);
    add(ls, "k", "a", "a1", 1, 0);
    add(ls, "k", "b", "b0", 2, 0);
    /* Into a non-empty list: appended after its entries. */
    cr_assert_eq(move(ls, "k", "a", "b"), 0);
    cr_assert_eq(size(ls, "k", "a"), 0);
    cr_assert_eq(size(ls, "k", "b"), 3);
    cr_assert_str_eq(at(ls, "k", "b", 0, NULL), "b0");
    cr_assert_str_eq(at(ls, "k", "b", 1, NULL), "a0");
    cr_assert_str_eq(at(ls, "k", "b", 2, NULL), "a1");
    /* Into a new list. */
    cr_assert_eq(move(ls, "k", "b", "c"), 0);
    cr_assert_eq(size(ls, "k", "b"), 0);
    cr_assert_eq(size(ls, "k", "c"), 3);
    cr_assert_str_eq(at(ls, "k", "c", 2, NULL), "a1");
    /* From nothing, and onto itself: no change. */
    cr_assert_eq(move(ls, "k", "zz", "c"), 0);
    cr_assert_eq(move(ls, "k", "c", "c"), 0);
    cr_assert_eq(size(ls, "k", "c"), 3);
    cr_assert_eq(eddy_list_state_entries(ls), 3);
    /* The moved list is usable afterwards. */
    add(ls, "k", "c", "c3", 3, 0);
    cr_assert_str_eq(at(ls, "k", "c", 3, NULL), "c3");
    eddy_list_state_destroy(&ls);
}

typedef struct visited {
    int lists;
    size_t entries;
} visited_t;

static void visit(void *ctx, const void *key, uint32_t key_len, const void *ns, uint32_t ns_len,
                  size_t n)
{
    (void)ns;
    (void)ns_len;
    visited_t *v = ctx;
    cr_assert_eq(key_len, 5);
    cr_assert_eq(memcmp(key, "alice", 5), 0);
    v->lists++;
    v->entries += n;
}

Test(list_state, foreach_visits_the_group_lists)
{
    eddy_list_state_t *ls = eddy_list_state_new(K);
    add(ls, "alice", "w1", "x", 0, 0);
    add(ls, "alice", "w1", "y", 0, 0);
    add(ls, "alice", "w2", "z", 0, 0);
    visited_t v = {0};
    eddy_list_state_foreach(ls, kg_of("alice"), visit, &v);
    cr_assert_eq(v.lists, 2);
    cr_assert_eq(v.entries, 3);
    eddy_list_state_destroy(&ls);
}

/* --- serialisation ------------------------------------------------------ */

static void fill(eddy_list_state_t *ls, int n)
{
    char key[16], ns[16], row[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key%d", i % 23);
        snprintf(ns, sizeof ns, i % 2 ? "w%d" : "", i % 3);
        snprintf(row, sizeof row, i % 5 ? "row-%d" : "", i);
        eddy_record_t rec = eddy_record_make(row, (uint32_t)strlen(row), i * 3);
        rec.timestamp = -i;
        rec.kind = (uint8_t)(i % 5);
        cr_assert_eq(eddy_list_state_add(ls, kg_of(key), key, (uint32_t)strlen(key), ns,
                                         (uint32_t)strlen(ns), &rec),
                     0);
    }
}

/* Compares two states list by list through the public calls. */
static void assert_same(eddy_list_state_t *a, eddy_list_state_t *b, int n)
{
    cr_assert_eq(eddy_list_state_entries(a), eddy_list_state_entries(b));
    char key[16], ns[16];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key%d", i % 23);
        snprintf(ns, sizeof ns, i % 2 ? "w%d" : "", i % 3);
        size_t sa = size(a, key, ns);
        cr_assert_eq(sa, size(b, key, ns));
        for (size_t j = 0; j < sa; j++) {
            eddy_record_t ra, rb;
            cr_assert(eddy_list_state_at(a, kg_of(key), key, (uint32_t)strlen(key), ns,
                                         (uint32_t)strlen(ns), j, &ra));
            cr_assert(eddy_list_state_at(b, kg_of(key), key, (uint32_t)strlen(key), ns,
                                         (uint32_t)strlen(ns), j, &rb));
            cr_assert_eq(ra.len, rb.len);
            cr_assert_eq(memcmp(ra.data, rb.data, ra.len), 0);
            cr_assert_eq(ra.kind, rb.kind);
            cr_assert_eq(ra.value, rb.value);
            cr_assert_eq(ra.timestamp, rb.timestamp);
        }
    }
}

Test(list_state, write_read_round_trip_into_fresh_object)
{
    eddy_list_state_t *a = eddy_list_state_new(K);
    eddy_list_state_t *b = eddy_list_state_new(K);
    fill(a, 300);
    eddy_err_t err = {{0}};
    for (uint32_t kg = 0; kg < K; kg++) {
        char *buf = NULL;
        size_t len = 0;
        cr_assert_eq(eddy_list_state_write_group(a, kg, &buf, &len, &err), 0, "%s", err.msg);
        cr_assert_eq(eddy_list_state_read_group(b, kg, buf, len, &err), 0, "%s", err.msg);
        char *again = NULL;
        size_t again_len = 0;
        cr_assert_eq(eddy_list_state_write_group(b, kg, &again, &again_len, &err), 0);
        cr_assert_eq(again_len, len);
        cr_assert_eq(memcmp(again, buf, len), 0);
        free(again);
        free(buf);
    }
    assert_same(a, b, 300);
    eddy_list_state_destroy(&a);
    eddy_list_state_destroy(&b);
}

Test(list_state, drop_group_and_empty_read)
{
    eddy_list_state_t *ls = eddy_list_state_new(K);
    fill(ls, 300);
    size_t total = eddy_list_state_entries(ls);
    size_t in_group = 0;
    for (int i = 0; i < 300; i++)
        if (i % 23 == 4)
            in_group++;
    uint32_t kg = kg_of("key4");
    size_t others = 0; /* entries of other keys that share key4's group */
    for (int k = 0; k < 23; k++) {
        char key[16];
        snprintf(key, sizeof key, "key%d", k);
        if (k != 4 && kg_of(key) == kg)
            for (int i = 0; i < 300; i++)
                others += i % 23 == k;
    }
    eddy_list_state_drop_group(ls, kg);
    cr_assert_eq(eddy_list_state_entries(ls), total - in_group - others);
    cr_assert_eq(size(ls, "key4", ""), 0);
    cr_assert_eq(size(ls, "key4", "w1"), 0);
    fill(ls, 300);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_list_state_read_group(ls, kg, NULL, 0, &err), 0);
    cr_assert_eq(size(ls, "key4", ""), 0);
    eddy_list_state_destroy(&ls);
}

Test(list_state, every_truncation_is_rejected_and_leaves_the_group_empty)
{
    eddy_list_state_t *a = eddy_list_state_new(K);
    fill(a, 120);
    uint32_t kg = kg_of("key2");
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_list_state_write_group(a, kg, &buf, &len, NULL), 0);
    eddy_list_state_t *b = eddy_list_state_new(K);
    for (size_t cut = 1; cut < len; cut++) {
        add(b, "key2", "", "x", 0, 0);
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_list_state_read_group(b, kg, buf, cut, &err), -1, "cut %zu", cut);
        cr_assert_neq(err.msg[0], '\0');
        cr_assert_eq(size(b, "key2", ""), 0, "cut %zu", cut);
    }
    /* One flipped byte anywhere either reads or fails cleanly. */
    for (size_t i = 0; i < len; i++) {
        char *copy = malloc(len);
        memcpy(copy, buf, len);
        copy[i] ^= 0x5a;
        eddy_list_state_read_group(b, kg, copy, len, NULL);
        free(copy);
    }
    free(buf);
    eddy_list_state_destroy(&a);
    eddy_list_state_destroy(&b);
}

static void expect_reject(eddy_mpw_t *w, uint32_t kg, const char *what)
{
    size_t len;
    char *buf = eddy_mpw_release(w, &len);
    eddy_list_state_t *ls = eddy_list_state_new(K);
    add(ls, "k", "", "x", 0, 0);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_list_state_read_group(ls, kg, buf, len, &err), -1, "%s accepted", what);
    cr_assert(strstr(err.msg, "list state"), "%s: %s", what, err.msg);
    if (kg == kg_of("k"))
        cr_assert_eq(eddy_list_state_entries(ls), 0, "%s left entries", what);
    eddy_list_state_destroy(&ls);
    free(buf);
}

/* [1, kg, nlists, "k", "", n, then n entries], with the array length given. */
static void header(eddy_mpw_t *w, uint32_t fields, uint64_t version, uint64_t kg,
                   uint64_t nlists)
{
    eddy_mpw_init(w);
    eddy_mpw_array(w, fields);
    eddy_mpw_u64(w, version);
    eddy_mpw_u64(w, kg);
    eddy_mpw_u64(w, nlists);
}

static void entry(eddy_mpw_t *w)
{
    eddy_mpw_bin(w, "row", 3);
    eddy_mpw_u64(w, 0);
    eddy_mpw_i64(w, 1);
    eddy_mpw_i64(w, 2);
}

Test(list_state, malformed_bytes_are_rejected)
{
    uint32_t kg = kg_of("k");
    eddy_mpw_t w;
    /* The valid baseline. */
    header(&w, 10, 1, kg, 1);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 1), entry(&w);
    size_t len;
    char *ok = eddy_mpw_release(&w, &len);
    eddy_list_state_t *ls = eddy_list_state_new(K);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_list_state_read_group(ls, kg, ok, len, &err), 0, "%s", err.msg);
    cr_assert_eq(size(ls, "k", ""), 1);
    eddy_list_state_destroy(&ls);
    free(ok);

    header(&w, 10, 2, kg, 1);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 1), entry(&w);
    expect_reject(&w, kg, "version 2");

    header(&w, 10, 1, kg + 1, 1);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 1), entry(&w);
    expect_reject(&w, kg, "other kg");

    header(&w, 10, 1, kg, 2);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 1), entry(&w);
    expect_reject(&w, kg, "two lists announced, one present");

    header(&w, 10, 1, kg, 1);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 2), entry(&w);
    expect_reject(&w, kg, "two entries announced, one present");

    header(&w, 14, 1, kg, 1);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 1), entry(&w);
    entry(&w);
    expect_reject(&w, kg, "trailing entry");

    header(&w, 6, 1, kg, 1);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 0);
    expect_reject(&w, kg, "empty list");

    header(&w, 17, 1, kg, 2);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 1), entry(&w);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 1), entry(&w);
    expect_reject(&w, kg, "duplicate list");

    header(&w, 10, 1, kg, 1);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 1);
    eddy_mpw_bin(&w, "row", 3), eddy_mpw_u64(&w, 256), eddy_mpw_i64(&w, 1), eddy_mpw_i64(&w, 2);
    expect_reject(&w, kg, "kind 256");

    header(&w, 10, 1, kg, 1);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, 1);
    eddy_mpw_u64(&w, 5), eddy_mpw_u64(&w, 0), eddy_mpw_i64(&w, 1), eddy_mpw_i64(&w, 2);
    expect_reject(&w, kg, "integer data");

    header(&w, 6, 1, kg, UINT32_MAX);
    eddy_mpw_bin(&w, "k", 1), eddy_mpw_bin(&w, "", 0), eddy_mpw_u64(&w, UINT32_MAX);
    expect_reject(&w, kg, "huge counts");

    eddy_mpw_init(&w);
    msgpack_pack_array(&w.pk, 3);
    msgpack_pack_map(&w.pk, 0);
    eddy_mpw_u64(&w, kg), eddy_mpw_u64(&w, 0);
    expect_reject(&w, kg, "map version");

    const char *hostile[] = {"\xdd\xff\xff\xff\xff\x01", "\x81\x01\x02", "\xc1", "\x93\x01"};
    size_t hostile_len[] = {6, 3, 1, 2};
    for (int i = 0; i < 4; i++) {
        eddy_list_state_t *h = eddy_list_state_new(K);
        add(h, "k", "", "x", 0, 0);
        cr_assert_eq(eddy_list_state_read_group(h, kg, hostile[i], hostile_len[i], &err), -1);
        cr_assert_eq(eddy_list_state_entries(h), 0);
        eddy_list_state_destroy(&h);
    }
}
