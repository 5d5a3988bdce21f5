/* test_local_recovery.c - local recovery (runtime/local_recovery.c): after
 * a kill -9 of one worker, the surviving workers load the key groups they
 * held from their own local copies of the last completed checkpoint and
 * only the lost worker's groups come from checkpoint storage; a corrupt
 * local copy falls back to storage. Both with exact output.
 *
 * eddy local, 3 workers, a rate-limited wordcount of a generated text
 * (parallelism 3, checkpoints every 300 ms); the victim is the worker of
 * count[0]. What the restore loaded and from where is read from the
 * coordinator's "restored in" line (the sums of the workers' DEPLOYED
 * answers, as in `last_restore` of /api/v1/jobs, which is gone with eddy
 * local once the job ended) and the workers' deploy lines. Every wait is a
 * poll with a deadline. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define TEXT_BYTES (1u * 1024 * 1024)
/* --rate is chosen so an undisturbed run takes this long: the kill must
 * land before the end, after two checkpoints */
#if defined(__SANITIZE_ADDRESS__)
#define RUN_SECONDS 6
#else
#define RUN_SECONDS 5
#endif

static eddy_test_cluster_t *cl;
static char *input, *output;
static char rate[32];

static void setup(void)
{
    eddy_err_t err = {{0}};
    /* the cluster's heartbeat timeout: 2 s, 5 s under ASan */
    eddy_test_cluster_opts_t o = {.tag = "lr", .workers = 3, .checkpoint_interval = "300"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    eddy_test_wc_input_t in;
    cr_assert(eddy_test_wc_input(input, TEXT_BYTES, 2626, &in, &err) == 0, "%s", err.msg);
    snprintf(rate, sizeof rate, "%zu", in.lines / RUN_SECONDS);
    eddy_test_wc_input_free(&in);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(local_recovery, .init = setup, .fini = teardown, .timeout = 120);

/* Key groups of keyed operators placed on worker id in a status document. */
static long groups_on(json_t *st, json_int_t id)
{
    long n = 0;
    size_t i, k;
    json_t *op, *inst;
    json_t *job = json_array_get(json_object_get(st, "jobs"), 0);
    json_array_foreach(json_object_get(job, "operators"), i, op)
    {
        if (!json_is_true(json_object_get(op, "keyed")))
            continue;
        json_array_foreach(json_object_get(op, "instances"), k, inst)
        {
            json_t *r = json_object_get(inst, "key_groups");
            if (json_integer_value(json_object_get(inst, "worker")) == id)
                n += (long)(json_integer_value(json_array_get(r, 1)) -
                            json_integer_value(json_array_get(r, 0)));
        }
    }
    return n;
}

/* The worker id of pid in a status document (-1: none). */
static json_int_t worker_id_of(json_t *st, pid_t pid)
{
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if ((pid_t)json_integer_value(json_object_get(w, "pid")) == pid)
            return json_integer_value(json_object_get(w, "id"));
    }
    return -1;
}

typedef struct restore_view {
    long groups, local;
} restore_view_t;

/* The last restore's loads, from the coordinator's "restored in N ms,
 * running again; L key groups (..) loaded from workers' local copies, S
 * (..) from checkpoint storage" line in eddy local's log (groups -1: no
 * such line). */
static restore_view_t last_restore(void)
{
    restore_view_t v = {-1, -1};
    char *log = eddy_read_file(eddy_test_cluster_path(cl, "local.log"), NULL);
    const char *needle = "running again; ";
    for (const char *p = log ? strstr(log, needle) : NULL; p; p = strstr(p + 1, needle)) {
        long local, storage;
        if (sscanf(p + strlen(needle), "%ld key groups (%*[0-9] bytes) loaded from workers' local "
                   "copies, %ld", &local, &storage) == 2) {
            v.groups = local + storage;
            v.local = local;
        }
    }
    free(log);
    return v;
}

/* Runs the job, kills count[0]'s worker once two checkpoints completed,
 * waits for the end (exact output): the restore's loads, the victim's
 * keyed groups in *lost, all keyed groups in *all. */
static restore_view_t run_with_kill(long *lost, long *all)
{
    eddy_err_t err = {{0}};
    /* no --quiet: the test reads the workers' INFO lines */
    const char *job[] = {"--job", "wordcount", "--input", input, "--output", output,
                         "--parallelism", "3", "--rate", rate, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
    eddy_test_job_want_t want = {.state = "running", .min_completed = 2};
    eddy_test_job_view_t last;
    bool gone;
    if (!eddy_test_cluster_wait_job(cl, "wordcount", &want, 30000, &last, &gone)) {
        char *l = eddy_test_cluster_log_text(cl);
        cr_assert_fail("no 2 checkpoints (state %s)%s; logs:\n%s", last.state,
                       gone ? ", eddy local exited" : "", l);
    }
    json_t *st = eddy_test_cluster_status(cl);
    cr_assert(st);
    pid_t victim = eddy_test_status_instance_pid(st, "wordcount", "count", 0);
    cr_assert(victim > 0, "count[0] is on no worker");
    *lost = groups_on(st, worker_id_of(st, victim));
    json_t *op = eddy_test_status_operator(st, "wordcount", "count");
    cr_assert(op);
    *all = 0;
    size_t k;
    json_t *inst;
    json_array_foreach(json_object_get(op, "instances"), k, inst)
    {
        json_t *r = json_object_get(inst, "key_groups");
        *all += (long)(json_integer_value(json_array_get(r, 1)) -
                       json_integer_value(json_array_get(r, 0)));
    }
    json_decref(st);
    cr_assert(*lost > 0 && *lost < *all, "victim holds %ld of %ld groups", *lost, *all);
    kill(victim, SIGKILL);
    int rc = eddy_test_cluster_wait_local(cl, 60000, 0, NULL, NULL);
    if (rc != 0) {
        char *l = eddy_test_cluster_log_text(cl);
        cr_assert_fail("eddy local ended with %d; logs:\n%s", rc, l);
    }
    restore_view_t v = last_restore();
    size_t got = 0, want_len = 0;
    int same = eddy_test_same_wordcount(input, output, &got, &want_len);
    if (same != 1) {
        char *l = eddy_test_cluster_log_text(cl);
        cr_assert_fail("output differs from the reference (%zu bytes, want %zu); logs:\n%s", got,
                       want_len, l);
    }
    return v;
}

Test(local_recovery, survivors_load_their_groups_from_local_copies)
{
    long lost, all;
    restore_view_t v = run_with_kill(&lost, &all);
    char *l = eddy_test_cluster_log_text(cl);
    /* every keyed group was loaded: the survivors' own from their copies,
     * the lost worker's from checkpoint storage */
    cr_assert_eq(v.groups, all, "restore loaded %ld groups of %ld; logs:\n%s", v.groups, all, l);
    cr_assert_eq(v.local, all - lost,
                 "%ld groups from local copies, want %ld (victim had %ld); logs:\n%s", v.local,
                 all - lost, lost, l);
    cr_assert(strstr(l, "groups (") && strstr(l, "from local copies"), "%s", l);
    cr_assert(strstr(l, "loaded from workers' local copies"), "%s", l);
    free(l);
}

Test(local_recovery, corrupt_copies_fall_back_to_storage)
{
    setenv("EDDY_TEST_LOCAL_COPY_CORRUPT", "1", 1); /* inherited by the workers */
    long lost, all;
    restore_view_t v = run_with_kill(&lost, &all);
    char *l = eddy_test_cluster_log_text(cl);
    cr_assert_eq(v.groups, all, "restore loaded %ld groups of %ld; logs:\n%s", v.groups, all, l);
    cr_assert_eq(v.local, 0, "%ld groups from corrupt local copies; logs:\n%s", v.local, l);
    cr_assert(strstr(l, "fails its checksum") && strstr(l, "read from checkpoint storage instead"),
              "no warning about the corrupt copies; logs:\n%s", l);
    free(l);
}
