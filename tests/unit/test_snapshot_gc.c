/* test_snapshot_gc.c - deletion by reference (state/snapshot_gc.c) on a
 * directory store: objects a retained checkpoint's manifest names survive,
 * the rest of older checkpoints goes (whole when nothing is named, also a
 * checkpoint that never completed), checkpoints above the bound and the
 * kept ones are untouched, restore still reads every group afterwards, and
 * an unreadable kept manifest stops the collection before any delete. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/snapshot_gc.h"
#include "state/snapshot_manifest.h"
#include "state/snapshot_store.h"
#include "tests/support/etcd.h" /* eddy_test_rm_rf */

static char tmpdir[64];
static eddy_snapshot_store_t *store;

static void setup(void)
{
    strcpy(tmpdir, "/tmp/eddy-gc-test-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    eddy_err_t err = {{0}};
    store = eddy_snapshot_store_new(tmpdir, &err);
    cr_assert_not_null(store, "%s", err.msg);
}

static void teardown(void)
{
    eddy_snapshot_store_destroy(&store);
    eddy_test_rm_rf(tmpdir);
}

TestSuite(snapshot_gc, .init = setup, .fini = teardown);

static void group(uint64_t id, uint32_t kg)
{
    char data[32];
    int n = snprintf(data, sizeof data, "chk%llu-kg%u", (unsigned long long)id, kg);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_snapshot_store_write_group(store, "job", id, "count", kg, data, (size_t)n, &err),
                 0, "%s", err.msg);
}

/* holders[kg] for kg in [first, first + n) of instance inst */
static void manifest(uint64_t id, uint32_t inst, uint32_t first, uint32_t n, const uint64_t *holders)
{
    eddy_manifest_entry_t e[16];
    for (uint32_t i = 0; i < n; i++)
        e[i] = (eddy_manifest_entry_t){first + i, holders[i]};
    size_t len;
    char *p = eddy_manifest_encode(id, e, n, &len);
    cr_assert_not_null(p);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_snapshot_store_write_manifest(store, "job", id, "count", inst, p, len, &err), 0,
                 "%s", err.msg);
    free(p);
}

static bool exists(uint64_t id, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/job/chk-%llu/%s", tmpdir, (unsigned long long)id, name);
    return access(path, F_OK) == 0;
}

static void expect_group(uint64_t id, uint32_t kg, const char *want)
{
    eddy_snapshot_store_t *fresh; /* no cached manifests */
    eddy_err_t err = {{0}};
    fresh = eddy_snapshot_store_new(tmpdir, &err);
    char *data = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_snapshot_store_read_group(fresh, "job", id, "count", kg, &data, &len, &err), 0,
                 "kg %u: %s", kg, err.msg);
    cr_assert_eq(len, strlen(want));
    cr_assert(!memcmp(data, want, len), "kg %u: %.*s, want %s", kg, (int)len, data, want);
    free(data);
    eddy_snapshot_store_destroy(&fresh);
}

/* 1: full (kg 0-3); 2: kg 1 changed; 3: abandoned (kg 0, no manifest);
 * 4: kg 2 changed, two instances at another parallelism. */
static void chain(void)
{
    for (uint32_t kg = 0; kg < 4; kg++)
        group(1, kg);
    manifest(1, 0, 0, 4, (uint64_t[]){1, 1, 1, 1});
    group(2, 1);
    manifest(2, 0, 0, 4, (uint64_t[]){1, 2, 1, 1});
    group(3, 0);
    group(4, 2);
    manifest(4, 0, 0, 2, (uint64_t[]){1, 2});
    manifest(4, 1, 2, 2, (uint64_t[]){4, 1});
    cr_assert_eq(eddy_snapshot_store_write_blob(store, "job", 1, "sources", "x", 1, NULL), 0);
}

Test(snapshot_gc, restore_follows_references)
{
    chain();
    expect_group(4, 0, "chk1-kg0");
    expect_group(4, 1, "chk2-kg1");
    expect_group(4, 2, "chk4-kg2");
    expect_group(4, 3, "chk1-kg3");
    expect_group(2, 1, "chk2-kg1");
    expect_group(3, 0, "chk3-kg0"); /* no manifest: the checkpoint itself */
}

Test(snapshot_gc, collects_only_unreferenced)
{
    chain();
    eddy_snapshot_gc_stats_t st;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_snapshot_gc_collect(store, "job", 3, (uint64_t[]){4}, 1, &st, &err), 0, "%s",
                 err.msg);
    cr_assert(exists(1, "count/kg-0.snap"));
    cr_assert(exists(1, "count/kg-3.snap"));
    cr_assert_not(exists(1, "count/kg-1.snap"));
    cr_assert_not(exists(1, "count/kg-2.snap"));
    cr_assert_not(exists(1, "count/refs-0.ref"));
    cr_assert_not(exists(1, "sources.blob"));
    cr_assert(exists(2, "count/kg-1.snap"));
    cr_assert_not(exists(2, "count/refs-0.ref"));
    cr_assert_not(exists(3, ""), "the abandoned checkpoint goes whole");
    cr_assert(exists(4, "count/refs-1.ref"));
    cr_assert_eq(st.checkpoints_removed, 1);
    cr_assert_eq(st.objects_kept, 3);
    for (uint32_t kg = 0; kg < 4; kg++)
        expect_group(4, kg, kg == 0 ? "chk1-kg0" : kg == 1 ? "chk2-kg1" : kg == 2 ? "chk4-kg2" : "chk1-kg3");
    /* 4 goes out of retention, 5 is full: everything older goes */
    for (uint32_t kg = 0; kg < 4; kg++)
        group(5, kg);
    manifest(5, 0, 0, 4, (uint64_t[]){5, 5, 5, 5});
    cr_assert_eq(eddy_snapshot_gc_collect(store, "job", 4, (uint64_t[]){5}, 1, &st, &err), 0, "%s",
                 err.msg);
    cr_assert_not(exists(1, ""));
    cr_assert_not(exists(2, ""));
    cr_assert_not(exists(4, ""));
    cr_assert(exists(5, "count/kg-3.snap"));
}

Test(snapshot_gc, leaves_checkpoints_above_the_bound)
{
    chain();
    eddy_err_t err = {{0}};
    /* 4 in flight (not retained yet), 2 retained */
    cr_assert_eq(eddy_snapshot_gc_collect(store, "job", 1, (uint64_t[]){2}, 1, NULL, &err), 0, "%s",
                 err.msg);
    cr_assert(exists(1, "count/kg-0.snap"));
    cr_assert_not(exists(1, "count/kg-1.snap"));
    cr_assert(exists(3, "count/kg-0.snap"));
    cr_assert(exists(4, "count/kg-2.snap"));
}

Test(snapshot_gc, bad_kept_manifest_deletes_nothing)
{
    chain();
    char path[512];
    snprintf(path, sizeof path, "%s/job/chk-4/count/refs-1.ref", tmpdir);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fseek(f, 30, SEEK_SET);
    fputc('!', f);
    fclose(f);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_snapshot_gc_collect(store, "job", 3, (uint64_t[]){4}, 1, NULL, &err), -1);
    cr_assert(strstr(err.msg, "refs-1.ref"), "%s", err.msg);
    cr_assert(exists(3, "count/kg-0.snap"));
    cr_assert(exists(1, "count/kg-1.snap"));
}

Test(snapshot_gc, missing_referenced_object_is_named)
{
    chain();
    char path[512];
    snprintf(path, sizeof path, "%s/job/chk-1/count/kg-3.snap", tmpdir);
    cr_assert_eq(unlink(path), 0);
    eddy_err_t err = {{0}};
    char *data = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_snapshot_store_read_group(store, "job", 4, "count", 3, &data, &len, &err), -1);
    cr_assert(strstr(err.msg, "chk-1/count/kg-3.snap"), "%s", err.msg);
    cr_assert(strstr(err.msg, "held by checkpoint 1"), "%s", err.msg);
}

Test(snapshot_gc, duplicate_group_in_manifests_is_an_error)
{
    chain();
    manifest(4, 2, 3, 1, (uint64_t[]){4});
    eddy_err_t err = {{0}};
    char *data = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_snapshot_store_read_group(store, "job", 4, "count", 0, &data, &len, &err), -1);
    cr_assert(strstr(err.msg, "key group 3"), "%s", err.msg);
}
