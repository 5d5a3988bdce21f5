/* test_combiner_table.c - the combiner's table: every key once with its
 * accumulator, in first-upsert order; clear forgets everything and the
 * table is as good as new (many fill/clear rounds of different sizes,
 * colliding hashes, empty, short and long keys), checked against a plain
 * array. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "operators/combiner_table.h"

typedef struct seen {
    char keys[4096][40];
    int64_t accs[4096];
    uint32_t n;
} seen_t;

static void collect(void *ctx, const void *key, uint32_t key_len, int64_t acc)
{
    seen_t *s = ctx;
    cr_assert_lt(s->n, 4096);
    cr_assert_lt(key_len, 40);
    memcpy(s->keys[s->n], key, key_len);
    s->keys[s->n][key_len] = '\0';
    s->accs[s->n++] = acc;
}

Test(combiner_table, counts_keys_in_first_upsert_order_across_clears)
{
    eddy_combiner_table_t *t = eddy_combiner_table_new();
    cr_assert(t);
    static seen_t s;
    for (uint32_t round = 0; round < 6; round++) {
        uint32_t distinct = round % 2 ? 3000 : 7 + round; /* grow, shrink, grow again */
        for (uint32_t k = 0; k < distinct * 3; k++) {
            char key[40];
            uint32_t id = k % distinct;
            /* short keys live in their entry, long ones (odd ids) in the arena */
            int len = id == 0 ? 0 : snprintf(key, sizeof key, id % 2 ? "r%uk%u-a-longer-key" : "r%uk%u", round, id);
            bool created;
            /* hashes collide in fours: lookups must compare the bytes */
            int64_t *acc = eddy_combiner_table_upsert(t, id / 4, key, (uint32_t)len, &created);
            cr_assert(acc);
            cr_assert_eq(created, k < distinct, "key %u created=%d at pass %u", id, created, k / distinct);
            *acc += id + 1;
        }
        cr_assert_eq(eddy_combiner_table_count(t), distinct);
        s.n = 0;
        eddy_combiner_table_foreach(t, collect, &s);
        cr_assert_eq(s.n, distinct);
        for (uint32_t id = 0; id < distinct; id++) {
            char want[40] = "";
            if (id)
                snprintf(want, sizeof want, id % 2 ? "r%uk%u-a-longer-key" : "r%uk%u", round, id);
            cr_assert_str_eq(s.keys[id], want);
            cr_assert_eq(s.accs[id], 3 * (int64_t)(id + 1));
        }
        eddy_combiner_table_clear(t);
        cr_assert_eq(eddy_combiner_table_count(t), 0);
        s.n = 0;
        eddy_combiner_table_foreach(t, collect, &s);
        cr_assert_eq(s.n, 0);
    }
    eddy_combiner_table_destroy(&t);
    cr_assert_null(t);
    eddy_combiner_table_destroy(&t); /* idempotent */
}
