/* test_keygroup.c - key hashing and key-group range assignment (state/keygroup.c).
 *
 * The assignment is what makes rescaling move whole key groups, so it is
 * checked exhaustively for K = 128 and every parallelism, and on a spread of
 * parallelisms for K = 4096: every group has exactly one owner, each
 * instance's range is contiguous, ranges tile [0, K) in instance order, and
 * eddy_kg_owner agrees with eddy_kg_range_for. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "state/keygroup.h"

static void check_assignment(uint32_t k, uint32_t p)
{
    uint32_t next = 0;
    for (uint32_t i = 0; i < p; i++) {
        eddy_kg_range_t r = eddy_kg_range_for(i, p, k);
        cr_assert_eq(r.start, next, "K=%u p=%u instance %u starts at %u, expected %u", k, p, i,
                     r.start, next);
        cr_assert_leq(r.start, r.end, "K=%u p=%u instance %u range reversed", k, p, i);
        cr_assert_leq(r.end, k);
        /* p <= K: nobody is left without work, and sizes differ by at most one. */
        uint32_t size = r.end - r.start;
        cr_assert(size == k / p || size == k / p + 1, "K=%u p=%u instance %u owns %u groups", k,
                  p, i, size);
        for (uint32_t kg = r.start; kg < r.end; kg++) {
            cr_assert_eq(eddy_kg_owner(kg, p, k), i, "K=%u p=%u kg=%u owner %u, range says %u", k,
                         p, kg, eddy_kg_owner(kg, p, k), i);
            cr_assert(eddy_kg_range_contains(r, kg));
        }
        next = r.end;
    }
    cr_assert_eq(next, k, "K=%u p=%u ranges end at %u", k, p, next);

    /* Exactly one owner per key group, counted independently of the ranges. */
    for (uint32_t kg = 0; kg < k; kg++) {
        int owners = 0;
        for (uint32_t i = 0; i < p; i++)
            owners += eddy_kg_range_contains(eddy_kg_range_for(i, p, k), kg);
        cr_assert_eq(owners, 1, "K=%u p=%u kg=%u has %d owners", k, p, kg, owners);
        cr_assert_lt(eddy_kg_owner(kg, p, k), p);
    }
}

Test(keygroup, every_parallelism_k128)
{
    for (uint32_t p = 1; p <= 128; p++)
        check_assignment(128, p);
}

Test(keygroup, spot_checks_k4096)
{
    const uint32_t ps[] = {1, 2, 3, 5, 7, 10, 64, 100, 127, 128, 129, 1000, 2047, 4095, 4096};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        check_assignment(4096, ps[i]);
}

Test(keygroup, flink_ranges)
{
    /* K = 128, p = 3: [0,43) [43,86) [86,128), as Flink assigns them. */
    eddy_kg_range_t r0 = eddy_kg_range_for(0, 3, 128);
    eddy_kg_range_t r1 = eddy_kg_range_for(1, 3, 128);
    eddy_kg_range_t r2 = eddy_kg_range_for(2, 3, 128);
    cr_assert(r0.start == 0 && r0.end == 43);
    cr_assert(r1.start == 43 && r1.end == 86);
    cr_assert(r2.start == 86 && r2.end == 128);
    cr_assert_eq(eddy_kg_owner(42, 3, 128), 0);
    cr_assert_eq(eddy_kg_owner(43, 3, 128), 1);
    cr_assert_eq(eddy_kg_owner(127, 3, 128), 2);
}

Test(keygroup, max_key_groups_bounds)
{
    check_assignment(EDDY_MAX_KEY_GROUPS, 1);
    check_assignment(EDDY_MAX_KEY_GROUPS, 7);
    check_assignment(EDDY_MAX_KEY_GROUPS, 1000);
}

Test(keygroup, hashing)
{
    /* XXH64 of the empty input with seed 0 is a published constant. */
    cr_assert_eq(eddy_key_hash("", 0), 0xEF46DB3751D8E999ull);
    const char *words[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t len = strlen(words[i]);
        uint64_t h = eddy_key_hash(words[i], len);
        cr_assert_eq(h, XXH64(words[i], len, 0));
        cr_assert_eq(eddy_key_group_of_hash(h, 128), h % 128);
        cr_assert_eq(eddy_key_group_of(words[i], len, 128), (uint32_t)(h % 128));
        cr_assert_lt(eddy_key_group_of(words[i], len, 4096), 4096);
    }
}

Test(keygroup, hash_spreads_over_groups)
{
    /* 128k distinct keys over 128 groups: no group empty or badly overloaded. */
    static unsigned counts[128];
    char key[32];
    for (int i = 0; i < 128 * 1024; i++) {
        int n = snprintf(key, sizeof key, "key-%d", i);
        counts[eddy_key_group_of(key, (size_t)n, 128)]++;
    }
    for (int kg = 0; kg < 128; kg++)
        cr_assert(counts[kg] > 800 && counts[kg] < 1300, "kg %d got %u keys", kg, counts[kg]);
}
