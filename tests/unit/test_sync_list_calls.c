/* test_sync_list_calls.c - call entries of the sync list (state/sync_list.h):
 * they run after the fsyncs, in order, their first error is returned while
 * the others still run, and release() runs exactly once whether the list
 * ran or was destroyed without running. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "state/sync_list.h"
#include "tests/support/etcd.h"

typedef struct probe {
    int ran, released;
    int order; /* when it ran, among all probes */
    bool fail;
} probe_t;

static int clock_tick;

static int call(void *arg, eddy_err_t *err)
{
    probe_t *p = arg;
    p->ran++;
    p->order = ++clock_tick;
    return p->fail ? eddy_err_set(err, "probe failed at %d", p->order) : 0;
}

static void release(void *arg)
{
    ((probe_t *)arg)->released++;
}

Test(sync_list_calls, run_in_order_after_fsyncs_first_error_wins)
{
    clock_tick = 0;
    eddy_err_t err = {{0}};
    char *dir = eddy_test_mkdtemp("synccall", &err);
    cr_assert(dir, "%s", err.msg);
    eddy_sync_list_t *l = eddy_sync_list_new();
    cr_assert(l && eddy_sync_list_empty(l));
    probe_t a = {0}, b = {.fail = true}, c = {.fail = true};
    cr_assert_eq(eddy_sync_list_add_call(l, call, &a, release, &err), 0);
    cr_assert(!eddy_sync_list_empty(l), "a list with a call is not empty");
    cr_assert_eq(eddy_sync_list_add_dir(l, dir, &err), 0);
    cr_assert_eq(eddy_sync_list_add_call(l, call, &b, release, &err), 0);
    cr_assert_eq(eddy_sync_list_add_call(l, call, &c, NULL, &err), 0);
    cr_assert_eq(eddy_sync_list_run(l, &err), -1);
    cr_assert_str_eq(err.msg, "probe failed at 2");
    cr_assert(a.ran == 1 && b.ran == 1 && c.ran == 1, "every call runs despite an error");
    cr_assert(a.order < b.order && b.order < c.order);
    cr_assert(a.released == 1 && b.released == 1 && c.released == 0);
    eddy_sync_list_destroy(&l);
    cr_assert_eq(a.released, 1, "released once only");
    eddy_test_rm_rf(dir);
    free(dir);
}

Test(sync_list_calls, destroyed_without_running_releases)
{
    eddy_err_t err = {{0}};
    eddy_sync_list_t *l = eddy_sync_list_new();
    probe_t a = {0};
    cr_assert_eq(eddy_sync_list_add_call(l, call, &a, release, &err), 0);
    eddy_sync_list_destroy(&l);
    cr_assert_null(l);
    cr_assert_eq(a.ran, 0);
    cr_assert_eq(a.released, 1);
}
