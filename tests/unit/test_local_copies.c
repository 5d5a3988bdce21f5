/* test_local_copies.c - a worker's local copies for local recovery
 * (state/local_copies.c): a copy serves a restore only from a checkpoint
 * that named it and completed here; references extend a copy to later
 * checkpoints; a completed checkpoint drops what only older ones name;
 * a new epoch forgets checkpoints that never completed (their ids may be
 * taken again); a copy that fails its checksum is dropped and reported;
 * a job's copies go with it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "state/local_copies.h"

static void keep(eddy_local_copies_t *lc, const char *job, uint64_t ck, uint32_t kg,
                 const char *text)
{
    eddy_err_t err = {{0}};
    char *d = strdup(text);
    cr_assert(d);
    cr_assert_eq(eddy_local_copies_keep(lc, job, "count", ck, kg, d, strlen(text),
                                        XXH64(d, strlen(text), 0), &err), 0, "%s", err.msg);
}

/* The copy of kg for a restore from ck: its text (static), "" when none,
 * "!" when it failed its checksum. */
static const char *get(eddy_local_copies_t *lc, const char *job, uint64_t ck, uint32_t kg)
{
    static char buf[64];
    char *data = NULL;
    size_t len = 0;
    eddy_err_t err = {{0}};
    int rc = eddy_local_copies_get(lc, job, "count", ck, kg, &data, &len, &err);
    if (rc < 0) {
        cr_assert(strstr(err.msg, "checksum"), "%s", err.msg);
        return "!";
    }
    if (rc == 0)
        return "";
    cr_assert(len < sizeof buf);
    memcpy(buf, data, len);
    buf[len] = '\0';
    free(data);
    return buf;
}

Test(local_copies, serves_only_completed_checkpoints_that_named_it)
{
    eddy_local_copies_t *lc = eddy_local_copies_new();
    keep(lc, "wc", 1, 0, "a1");
    keep(lc, "wc", 1, 1, "b1");
    cr_assert_str_eq(get(lc, "wc", 1, 0), "", "not complete yet");
    eddy_local_copies_complete(lc, "wc", 1);
    cr_assert_str_eq(get(lc, "wc", 1, 0), "a1");
    cr_assert_str_eq(get(lc, "wc", 1, 1), "b1");
    cr_assert_str_eq(get(lc, "wc", 1, 2), "", "never kept");
    cr_assert_str_eq(get(lc, "other", 1, 0), "", "another job");
    /* checkpoint 2 rewrites group 0 and refers group 1 to 1 */
    keep(lc, "wc", 2, 0, "a2");
    eddy_local_copies_refer(lc, "wc", "count", 2, 1, 1);
    cr_assert_str_eq(get(lc, "wc", 2, 0), "", "2 is not complete");
    cr_assert_str_eq(get(lc, "wc", 1, 0), "a1", "1 still serves");
    eddy_local_copies_complete(lc, "wc", 2);
    cr_assert_str_eq(get(lc, "wc", 2, 0), "a2");
    cr_assert_str_eq(get(lc, "wc", 2, 1), "b1", "referred to checkpoint 1");
    cr_assert_str_eq(get(lc, "wc", 1, 0), "", "superseded: dropped");
    uint64_t copies, bytes;
    eddy_local_copies_usage(lc, &copies, &bytes);
    cr_assert_eq(copies, 2);
    cr_assert_eq(bytes, 4);
    eddy_local_copies_destroy(&lc);
    cr_assert_null(lc);
}

Test(local_copies, new_epoch_forgets_checkpoints_in_flight)
{
    eddy_local_copies_t *lc = eddy_local_copies_new();
    keep(lc, "wc", 1, 0, "a1");
    eddy_local_copies_complete(lc, "wc", 1);
    keep(lc, "wc", 2, 0, "old2"); /* in flight when the epoch ended */
    eddy_local_copies_new_epoch(lc, "wc");
    /* the new epoch takes id 2 again and completes it without this worker's copy */
    eddy_local_copies_complete(lc, "wc", 2);
    cr_assert_str_eq(get(lc, "wc", 2, 0), "", "a copy of the old epoch's 2 must not serve");
    keep(lc, "wc", 3, 0, "a3");
    eddy_local_copies_complete(lc, "wc", 3);
    cr_assert_str_eq(get(lc, "wc", 3, 0), "a3");
    eddy_local_copies_destroy(&lc);
}

Test(local_copies, corrupt_copy_is_dropped_and_reported)
{
    eddy_local_copies_t *lc = eddy_local_copies_new();
    keep(lc, "wc", 1, 0, "abcdef");
    eddy_local_copies_complete(lc, "wc", 1);
    eddy_local_copies_corrupt(lc, "wc");
    cr_assert_str_eq(get(lc, "wc", 1, 0), "!");
    cr_assert_str_eq(get(lc, "wc", 1, 0), "", "dropped after the failed check");
    eddy_local_copies_destroy(&lc);
}

Test(local_copies, job_end_drops_its_copies)
{
    eddy_local_copies_t *lc = eddy_local_copies_new();
    keep(lc, "wc", 1, 0, "a1");
    keep(lc, "other", 1, 0, "x1");
    eddy_local_copies_complete(lc, "wc", 1);
    eddy_local_copies_complete(lc, "other", 1);
    eddy_local_copies_drop_job(lc, "wc");
    cr_assert_str_eq(get(lc, "wc", 1, 0), "");
    cr_assert_str_eq(get(lc, "other", 1, 0), "x1");
    eddy_local_copies_destroy(&lc);
}
