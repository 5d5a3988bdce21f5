/* test_snapshot_writer.c - the snapshot writer thread (state/snapshot_writer.c)
 * with asynchronous units: it serialises each group from the unit's view of
 * a keyed state (while the owner keeps writing that state), writes the
 * files, fills the ACK's bytes_written and hands the unit back; freeing the
 * unit releases the view. The files hold what the state held when the view
 * was taken, byte for byte what the synchronous path writes. */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/keygroup.h"
#include "state/keyed_state.h"
#include "state/snapshot_store.h"
#include "state/snapshot_writer.h"
#include "tests/support/etcd.h" /* eddy_test_rm_rf */

#define K 8u

static int released;

static int serialise(void *view, uint32_t kg, char **out, size_t *len, eddy_err_t *err)
{
    return eddy_keyed_state_view_write_group(view, kg, out, len, err);
}

static void release(void *view)
{
    eddy_keyed_state_view_t *v = view;
    eddy_keyed_state_view_destroy(&v);
    released++;
}

static int64_t *slot(eddy_keyed_state_t *st, int i)
{
    char key[32];
    int n = snprintf(key, sizeof key, "w%d", i);
    uint64_t h = eddy_key_hash(key, (uint32_t)n);
    return eddy_keyed_state_upsert(st, eddy_key_group_of_hash(h, K), h, key, (uint32_t)n, NULL);
}

Test(snapshot_writer, async_unit_is_serialised_on_the_writer_thread)
{
    char dir[] = "/tmp/eddy-writer-test-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    eddy_err_t err = {{0}};
    eddy_snapshot_writer_t *w = eddy_snapshot_writer_new(&err);
    cr_assert_not_null(w, "%s", err.msg);
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, 8);
    for (int i = 0; i < 3000; i++)
        *slot(st, i) = i;
    char *expect[K];
    size_t expect_len[K];
    for (uint32_t kg = 0; kg < K; kg++)
        cr_assert_eq(eddy_keyed_state_write_group(st, kg, &expect[kg], &expect_len[kg], NULL), 0);

    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(K);
    snprintf(u->root, sizeof u->root, "%s", dir);
    snprintf(u->job, sizeof u->job, "job");
    snprintf(u->op, sizeof u->op, "count");
    u->checkpoint = 7;
    u->durable = true;
    for (uint32_t kg = 0; kg < K; kg++)
        u->groups[u->n_groups++] = kg;
    u->view = eddy_keyed_state_view_new(st);
    cr_assert_not_null(u->view);
    u->serialise = serialise;
    u->release = release;
    u->ack.type = EDDY_MSG_ACK;
    eddy_snapshot_writer_submit(w, u);
    for (int i = 0; i < 3000; i++) /* the owner goes on writing */
        *slot(st, i + 1500) += 1000;

    eddy_snapshot_unit_t *done = NULL;
    while (!done) {
        struct pollfd p = {eddy_snapshot_writer_fd(w), POLLIN, 0};
        poll(&p, 1, 1000);
        done = eddy_snapshot_writer_poll(w);
    }
    cr_assert_eq(done, u);
    cr_assert_str_empty(done->error, "%s", done->error);
    uint64_t total = 0;
    for (uint32_t kg = 0; kg < K; kg++)
        total += expect_len[kg];
    cr_assert_eq(done->ack.u.ack.bytes_written, total);
    cr_assert_eq(released, 0);
    eddy_snapshot_unit_free(done);
    cr_assert_eq(released, 1, "freeing the unit releases the view");

    eddy_snapshot_store_t *store = eddy_snapshot_store_new(dir, &err);
    for (uint32_t kg = 0; kg < K; kg++) {
        char *data;
        size_t len;
        cr_assert_eq(eddy_snapshot_store_read_group(store, "job", 7, "count", kg, &data, &len, &err),
                     0, "%s", err.msg);
        cr_assert_eq(len, expect_len[kg]);
        cr_assert(memcmp(data, expect[kg], len) == 0, "key group %u differs", kg);
        free(data);
        free(expect[kg]);
    }
    eddy_snapshot_store_destroy(&store);
    eddy_snapshot_writer_destroy(&w);
    eddy_keyed_state_destroy(&st);
    eddy_test_rm_rf(dir);
}
