/* test_part_file_sink.c - the exactly-once part file sink (operators/operators.c),
 * driven directly through its operator API, no tasks or processes.
 *
 * Checks the two-phase-commit protocol on disk: records go to an in-progress
 * file; prepare(n) makes them a pending file tagged n; commit(n) publishes
 * pending files with id <= n as DIR/part-<instance>-<n>.txt; a reopen with
 * restored_checkpoint R publishes pending <= R (a completed checkpoint whose
 * COMPLETE was lost) and deletes pending > R and the in-progress files of
 * every attempt (that data will be replayed), which are named by attempt so
 * a stale instance never touches the current one's; the final id EDDY_FINAL_CHECKPOINT works like any
 * other. Given a sync list, prepare and commit leave their fsyncs to the
 * worker's snapshot writer, whose ACK follows them and carries their
 * failure. Each test uses its own temporary directory. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/etcd.h"
#include "tests/support/proc.h"
#include "tests/unit/leak_check.h"
#include "operators/operators.h"
#include "state/snapshot_writer.h"

static char *dir;
static eddy_part_file_config_t cfg;

static void setup(void)
{
    eddy_err_t err = {{0}};
    dir = eddy_test_mkdtemp("partsink", &err);
    cr_assert(dir, "%s", err.msg);
    snprintf(cfg.directory, sizeof cfg.directory, "%s/out/nested", dir);
}

static void teardown(void)
{
    if (dir)
        eddy_test_rm_rf(dir);
    free(dir);
    dir = NULL;
    eddy_test_leak_check();
}

TestSuite(part_file_sink, .init = setup, .fini = teardown);

static void *open_sink_in(uint32_t instance, uint64_t restored, uint32_t epoch)
{
    eddy_op_context_t ctx = {.job_id = "etl", .stage_name = "sink", .stage = 1,
                             .instance = instance, .parallelism = 2, .max_parallelism = 128,
                             .config = &cfg, .restored_checkpoint = restored, .epoch = epoch};
    eddy_err_t err = {{0}};
    void *s = eddy_part_file_sink_ops.open(&ctx, &err);
    cr_assert(s, "open: %s", err.msg);
    return s;
}

static void *open_sink(uint32_t instance, uint64_t restored)
{
    return open_sink_in(instance, restored, 1);
}

static void put(void *s, const char *line)
{
    eddy_record_t rec = eddy_record_make(line, (uint32_t)strlen(line), 1);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_part_file_sink_ops.process(s, &rec, NULL, &err), 0, "%s", err.msg);
}

static void prepare(void *s, uint64_t ckpt)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_part_file_sink_ops.prepare(s, ckpt, NULL, &err), 0, "%s", err.msg);
}

static char *committed(uint32_t instance, uint64_t ckpt)
{
    char path[5000];
    snprintf(path, sizeof path, "%s/part-%u-%020" PRIu64 ".txt", cfg.directory, instance, ckpt);
    return eddy_read_file(path, NULL);
}

static bool pending_exists(uint32_t instance, uint64_t ckpt)
{
    char path[5000];
    snprintf(path, sizeof path, "%s/.pending/part-1-%u-%020" PRIu64, cfg.directory, instance, ckpt);
    return access(path, F_OK) == 0;
}

/* Names in dir (not starting with '.'), sorted, joined by ' '. */
static char *listing(const char *path)
{
    DIR *d = opendir(path);
    cr_assert(d, "cannot open %s", path);
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && strcmp(names[b - 1], names[b]) > 0; b--) {
            char *t = names[b];
            names[b] = names[b - 1];
            names[b - 1] = t;
        }
    char *out = calloc(1, 4096);
    for (int i = 0; i < n; i++) {
        strcat(out, i ? " " : "");
        strcat(out, names[i]);
        free(names[i]);
    }
    return out;
}

Test(part_file_sink, prepare_then_commit_publishes)
{
    void *s = open_sink(0, 0);
    put(s, "a\tx\t2");
    put(s, "b\ty\t4");
    prepare(s, 1);
    cr_assert(pending_exists(0, 1));
    char *none = listing(cfg.directory);
    cr_assert_str_eq(none, "", "nothing is visible before commit");
    free(none);
    eddy_part_file_sink_ops.commit(s, 1, NULL);
    cr_assert(!pending_exists(0, 1));
    char *got = committed(0, 1);
    cr_assert_str_eq(got, "a\tx\t2\nb\ty\t4\n");
    free(got);
    /* An empty interval prepares nothing; a repeated COMPLETE is harmless. */
    prepare(s, 2);
    cr_assert(!pending_exists(0, 2));
    eddy_part_file_sink_ops.commit(s, 2, NULL);
    eddy_part_file_sink_ops.commit(s, 1, NULL);
    char *names = listing(cfg.directory);
    cr_assert_str_eq(names, "part-0-00000000000000000001.txt");
    free(names);
    eddy_part_file_sink_ops.close(s);
}

Test(part_file_sink, commit_publishes_only_up_to_its_checkpoint)
{
    void *s = open_sink(0, 0);
    put(s, "one");
    prepare(s, 3);
    put(s, "two");
    prepare(s, 5);
    eddy_part_file_sink_ops.commit(s, 4, NULL);
    char *a = committed(0, 3);
    cr_assert_str_eq(a, "one\n");
    free(a);
    cr_assert_null(committed(0, 5));
    cr_assert(pending_exists(0, 5));
    eddy_part_file_sink_ops.commit(s, 5, NULL);
    char *b = committed(0, 5);
    cr_assert_str_eq(b, "two\n");
    free(b);
    eddy_part_file_sink_ops.close(s);
}

Test(part_file_sink, reopen_discards_work_after_the_restored_checkpoint)
{
    void *s = open_sink(0, 0);
    put(s, "first");
    prepare(s, 1);
    eddy_part_file_sink_ops.commit(s, 1, NULL);
    put(s, "second");
    prepare(s, 2); /* checkpoint 2 never completes */
    put(s, "third"); /* in progress at the failure */
    cr_assert(pending_exists(0, 2));
    /* Simulate a crash: the instance is gone without close (files stay). The
     * leak checker would see the handle, so close it after copying files. */
    eddy_part_file_sink_ops.close(s);
    /* close() of a live instance drops the in-progress file; a SIGKILL does
     * not: leave one behind like a killed worker would. */
    char inprog[5000];
    snprintf(inprog, sizeof inprog, "%s/.pending/.inprogress-1-0", cfg.directory);
    cr_assert_eq(eddy_write_file(inprog, "third\n", 6), 0);

    void *r = open_sink(0, 1);
    cr_assert(!pending_exists(0, 2), "pending 2 is after the restored checkpoint 1");
    cr_assert(access(inprog, F_OK) != 0, "the in-progress file is discarded");
    char *names = listing(cfg.directory);
    cr_assert_str_eq(names, "part-0-00000000000000000001.txt");
    free(names);
    /* The replay writes second and third again, now in checkpoint 3. */
    put(r, "second");
    put(r, "third");
    prepare(r, 3);
    eddy_part_file_sink_ops.commit(r, 3, NULL);
    char *c = committed(0, 3);
    cr_assert_str_eq(c, "second\nthird\n");
    free(c);
    cr_assert_null(committed(0, 2));
    eddy_part_file_sink_ops.close(r);
}

Test(part_file_sink, reopen_publishes_a_completed_checkpoint_whose_complete_was_lost)
{
    void *s = open_sink(1, 0);
    put(s, "x");
    prepare(s, 1);
    eddy_part_file_sink_ops.commit(s, 1, NULL);
    put(s, "y");
    prepare(s, 2); /* checkpoint 2 completes, but COMPLETE(2) never arrives */
    eddy_part_file_sink_ops.close(s);
    cr_assert(pending_exists(1, 2));

    void *r = open_sink(1, 2);
    cr_assert(!pending_exists(1, 2));
    char *got = committed(1, 2);
    cr_assert_str_eq(got, "y\n");
    free(got);
    eddy_part_file_sink_ops.close(r);
}

Test(part_file_sink, instances_do_not_touch_each_other)
{
    void *a = open_sink(0, 0);
    void *b = open_sink(1, 0);
    put(a, "a1");
    put(b, "b1");
    prepare(a, 1);
    prepare(b, 1);
    eddy_part_file_sink_ops.close(a);
    /* instance 0 restarts from scratch: only its own pending file goes */
    void *a2 = open_sink(0, 0);
    cr_assert(!pending_exists(0, 1));
    cr_assert(pending_exists(1, 1));
    eddy_part_file_sink_ops.commit(b, 1, NULL);
    char *got = committed(1, 1);
    cr_assert_str_eq(got, "b1\n");
    free(got);
    eddy_part_file_sink_ops.close(a2);
    eddy_part_file_sink_ops.close(b);
}

/* A worker declared dead that was not still runs its instance of an earlier
 * attempt while the restored one runs elsewhere on the same directory: the
 * stale one neither writes into nor removes the current one's file. */
Test(part_file_sink, a_stale_instance_of_an_earlier_attempt_leaves_the_current_one_alone)
{
    void *stale = open_sink_in(0, 0, 1);
    put(stale, "stale-before");
    void *current = open_sink_in(0, 0, 2);
    put(current, "current");
    put(stale, "stale-after");
    eddy_part_file_sink_ops.close(stale);
    put(current, "current-2");
    prepare(current, 1);
    eddy_part_file_sink_ops.commit(current, 1, NULL);
    char *got = committed(0, 1);
    cr_assert_str_eq(got, "current\ncurrent-2\n");
    free(got);
    eddy_part_file_sink_ops.close(current);
}

Test(part_file_sink, final_commit_publishes_everything_left)
{
    void *s = open_sink(0, 0);
    put(s, "p");
    prepare(s, 7); /* e.g. a checkpoint abandoned because input ended */
    put(s, "q");
    put(s, "r");
    prepare(s, EDDY_FINAL_CHECKPOINT);
    cr_assert(pending_exists(0, EDDY_FINAL_CHECKPOINT));
    eddy_part_file_sink_ops.commit(s, 6, NULL);
    cr_assert(pending_exists(0, 7));
    eddy_part_file_sink_ops.commit(s, EDDY_FINAL_CHECKPOINT, NULL);
    char *names = listing(cfg.directory);
    cr_assert_str_eq(names, "part-0-00000000000000000007.txt part-0-18446744073709551615.txt");
    free(names);
    char *last = committed(0, EDDY_FINAL_CHECKPOINT);
    cr_assert_str_eq(last, "q\nr\n");
    free(last);
    char pdir[5000];
    snprintf(pdir, sizeof pdir, "%s/.pending", cfg.directory);
    char *left = listing(pdir);
    cr_assert_str_eq(left, "");
    free(left);
    eddy_part_file_sink_ops.close(s);
}

Test(part_file_sink, final_prepare_is_discarded_by_a_restore)
{
    void *s = open_sink(0, 0);
    put(s, "late");
    prepare(s, EDDY_FINAL_CHECKPOINT); /* this instance finished, another task failed */
    eddy_part_file_sink_ops.close(s);
    void *r = open_sink(0, 4);
    cr_assert(!pending_exists(0, EDDY_FINAL_CHECKPOINT));
    char *names = listing(cfg.directory);
    cr_assert_str_eq(names, "");
    free(names);
    eddy_part_file_sink_ops.close(r);
}

Test(part_file_sink, open_fails_cleanly_on_an_unusable_directory)
{
    char file[1000];
    snprintf(file, sizeof file, "%.900s/plainfile", dir);
    cr_assert_eq(eddy_write_file(file, "x", 1), 0);
    eddy_part_file_config_t bad;
    snprintf(bad.directory, sizeof bad.directory, "%s/sub", file);
    eddy_op_context_t ctx = {.stage = 1, .config = &bad};
    eddy_err_t err = {{0}};
    cr_assert_null(eddy_part_file_sink_ops.open(&ctx, &err));
    cr_assert(strstr(err.msg, "cannot create"), "%s", err.msg);
}

/* ---- fsyncs off the worker loop ----------------------------------------- */

static bool unit_back(void *arg)
{
    void **slot = arg;
    eddy_snapshot_unit_t *u = eddy_snapshot_writer_poll(slot[0]);
    if (u)
        slot[1] = u;
    return u != NULL;
}

/* Submits sync with an ACK of checkpoint through a real snapshot writer and
 * returns the unit it hands back (the caller frees it). */
static eddy_snapshot_unit_t *run_through_writer(eddy_sync_list_t *sync, uint64_t checkpoint)
{
    eddy_err_t err = {{0}};
    eddy_snapshot_writer_t *w = eddy_snapshot_writer_new(&err);
    cr_assert(w, "%s", err.msg);
    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(0);
    cr_assert(u);
    u->sync_only = true;
    u->sync = sync;
    u->ack = (eddy_msg_t){.type = EDDY_MSG_ACK};
    u->ack.u.ack.checkpoint = checkpoint;
    eddy_snapshot_writer_submit(w, u);
    void *slot[2] = {w, NULL};
    cr_assert(eddy_poll_until(unit_back, slot, 10000), "the writer never handed the unit back");
    eddy_snapshot_writer_destroy(&w);
    return slot[1];
}

Test(part_file_sink, prepare_and_commit_leave_their_fsyncs_to_the_writer)
{
    void *s = open_sink(0, 0);
    put(s, "x");
    eddy_sync_list_t *sync = eddy_sync_list_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_part_file_sink_ops.prepare(s, 3, sync, &err), 0, "%s", err.msg);
    cr_assert(pending_exists(0, 3), "prepare renames on the loop");
    cr_assert(!eddy_sync_list_empty(sync), "prepare fsynced itself instead of handing it over");
    eddy_snapshot_unit_t *u = run_through_writer(sync, 3);
    cr_assert_eq(u->ack.type, EDDY_MSG_ACK);
    cr_assert_str_eq(u->ack.u.ack.error, "", "a durable prepare acknowledges cleanly");
    cr_assert_str_eq(u->error, "");
    eddy_snapshot_unit_free(u);

    sync = eddy_sync_list_new();
    eddy_part_file_sink_ops.commit(s, 3, sync);
    cr_assert(!eddy_sync_list_empty(sync), "commit fsynced the directory on the loop");
    char *got = committed(0, 3);
    cr_assert_str_eq(got, "x\n");
    free(got);
    u = run_through_writer(sync, EDDY_FINAL_CHECKPOINT);
    cr_assert_str_eq(u->ack.u.ack.error, "");
    eddy_snapshot_unit_free(u);
    /* Nothing prepared: nothing to sync. */
    sync = eddy_sync_list_new();
    cr_assert_eq(eddy_part_file_sink_ops.prepare(s, 4, sync, &err), 0, "%s", err.msg);
    cr_assert(eddy_sync_list_empty(sync));
    eddy_sync_list_destroy(&sync);
    eddy_part_file_sink_ops.close(s);
}

Test(part_file_sink, a_failed_fsync_reaches_the_ack)
{
    void *s = open_sink(1, 0);
    put(s, "y");
    eddy_sync_list_t *sync = eddy_sync_list_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_part_file_sink_ops.prepare(s, 5, sync, &err), 0, "%s", err.msg);
    /* The pending directory vanishes before the writer syncs it. */
    char pending[5000], moved[5100];
    snprintf(pending, sizeof pending, "%s/.pending", cfg.directory);
    snprintf(moved, sizeof moved, "%s/moved", cfg.directory);
    cr_assert_eq(rename(pending, moved), 0);
    eddy_snapshot_unit_t *u = run_through_writer(sync, 5);
    cr_assert(strstr(u->ack.u.ack.error, ".pending"), "ACK error '%s' does not name the directory",
              u->ack.u.ack.error);
    cr_assert_str_eq(u->error, u->ack.u.ack.error);
    eddy_snapshot_unit_free(u);
    eddy_part_file_sink_ops.close(s);
}
