/* test_group_freeze.c - the lazily serialised per-key-group view
 * (state/group_freeze.c): bytes as at the freeze whoever serialises a
 * group (the owner's touch or the reader), errors reach the reader,
 * groups outside the view and taken twice are refused, and both
 * references go in either order (ASan finds a leak or a double free). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/group_freeze.h"
#include "tests/unit/leak_check.h"

TestSuite(group_freeze, .fini = eddy_test_leak_check);

#define K 64

typedef struct fake {
    long value[K]; /* the "live state" of each group */
    int fail_kg;   /* a group whose serialisation fails, -1: none */
    int writes;
} fake_t;

static int fake_write(void *arg, uint32_t kg, char **out, size_t *len, eddy_err_t *err)
{
    fake_t *f = arg;
    __atomic_add_fetch(&f->writes, 1, __ATOMIC_RELAXED);
    if ((int)kg == f->fail_kg)
        return eddy_err_set(err, "group %u cannot be written", kg);
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%u=%ld", kg, f->value[kg]);
    *out = strdup(buf);
    *len = (size_t)n;
    return 0;
}

static void expect_group(eddy_group_freeze_t *v, uint32_t kg, long value)
{
    char *out = NULL, want[32];
    size_t len = 0;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_group_freeze_write_group(v, kg, &out, &len, &err), 0, "%s", err.msg);
    snprintf(want, sizeof want, "%u=%ld", kg, value);
    cr_assert_eq(len, strlen(want));
    cr_assert_eq(memcmp(out, want, len), 0);
    free(out);
}

Test(group_freeze, touched_and_untouched_groups_read_as_at_the_freeze)
{
    fake_t f = {.fail_kg = -1};
    for (uint32_t kg = 0; kg < K; kg++)
        f.value[kg] = kg * 10;
    uint32_t groups[] = {1, 2, 3, 5};
    eddy_group_freeze_t *owner = eddy_group_freeze_new(K, groups, 4, fake_write, &f, NULL);
    cr_assert(owner);
    eddy_group_freeze_t *reader = owner;
    cr_assert_eq(eddy_group_freeze_pending(owner), 4);
    eddy_group_freeze_touch(owner, 2); /* the owner copies 2 before it changes it */
    f.value[2] = -1;
    eddy_group_freeze_touch(owner, 2); /* once only */
    eddy_group_freeze_touch(owner, 9); /* not in the view: nothing */
    f.value[9] = -1;
    cr_assert_eq(f.writes, 1);
    cr_assert_eq(eddy_group_freeze_pending(owner), 3);
    expect_group(reader, 1, 10);
    expect_group(reader, 2, 20);
    eddy_group_freeze_detach(&owner); /* serialises 3 and 5 */
    cr_assert_null(owner);
    cr_assert_eq(eddy_group_freeze_pending(reader), 0);
    f.value[3] = f.value[5] = -1;
    expect_group(reader, 3, 30);
    expect_group(reader, 5, 50);
    cr_assert_eq(f.writes, 4);
    char *out = NULL;
    size_t len = 0;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_group_freeze_write_group(reader, 5, &out, &len, &err), -1);
    cr_assert(strstr(err.msg, "taken already"), "%s", err.msg);
    cr_assert_eq(eddy_group_freeze_write_group(reader, 9, &out, &len, &err), -1);
    cr_assert(strstr(err.msg, "not in the snapshot's view"), "%s", err.msg);
    eddy_group_freeze_release(&reader);
}

Test(group_freeze, a_failed_serialisation_reaches_the_reader_and_the_reader_may_go_first)
{
    fake_t f = {.fail_kg = 4};
    uint32_t groups[] = {4, 6};
    eddy_group_freeze_t *owner = eddy_group_freeze_new(K, groups, 2, fake_write, &f, NULL);
    eddy_group_freeze_t *reader = owner;
    eddy_group_freeze_touch(owner, 4); /* fails on the owner's side */
    char *out = NULL;
    size_t len = 0;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_group_freeze_write_group(reader, 4, &out, &len, &err), -1);
    cr_assert(strstr(err.msg, "group 4 cannot be written"), "%s", err.msg);
    eddy_group_freeze_touch(owner, 6);
    eddy_group_freeze_release(&reader); /* never read 6: freed with the view */
    eddy_group_freeze_detach(&owner);
}

typedef struct race {
    eddy_group_freeze_t *reader;
    long got[K];
} race_t;

static void *read_all(void *arg)
{
    race_t *r = arg;
    for (uint32_t kg = 0; kg < K; kg++)
        r->got[kg] = -2;
    for (uint32_t kg = 0; kg < K; kg++) {
        char *out = NULL;
        size_t len = 0;
        eddy_err_t err = {{0}};
        if (eddy_group_freeze_write_group(r->reader, (kg * 7) % K, &out, &len, &err) == 0) {
            r->got[(kg * 7) % K] = strtol(strchr(out, '=') + 1, NULL, 10);
            free(out);
        }
    }
    return NULL;
}

Test(group_freeze, owner_and_reader_race_for_every_group)
{
    uint32_t groups[K];
    for (uint32_t kg = 0; kg < K; kg++)
        groups[kg] = kg;
    for (int round = 0; round < 50; round++) {
        fake_t f = {.fail_kg = -1};
        for (uint32_t kg = 0; kg < K; kg++)
            f.value[kg] = round * 1000 + kg;
        race_t r = {0};
        eddy_group_freeze_t *owner = eddy_group_freeze_new(K, groups, K, fake_write, &f, NULL);
        r.reader = owner;
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, read_all, &r), 0);
        for (uint32_t kg = 0; kg < K; kg++) {
            eddy_group_freeze_touch(owner, kg);
            f.value[kg] = -1;
        }
        pthread_join(t, NULL);
        for (uint32_t kg = 0; kg < K; kg++)
            cr_assert_eq(r.got[kg], round * 1000 + kg, "round %d group %u", round, kg);
        cr_assert_eq(f.writes, K, "every group serialised once");
        if (round % 2)
            eddy_group_freeze_detach(&owner), eddy_group_freeze_release(&r.reader);
        else
            eddy_group_freeze_release(&r.reader), eddy_group_freeze_detach(&owner);
    }
}
