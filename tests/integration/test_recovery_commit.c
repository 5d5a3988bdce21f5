/* test_recovery_commit.c - recovery never crosses a commit (docs/architecture.md,
 * "Recovery").
 *
 * A job with keyed state (a count per word) and an appending two-phase-
 * commit sink (part files: every count update is one line, published per
 * completed checkpoint; tests/plugins/plugin_count_parts.c) runs on a real
 * `eddy coordinator` and three `eddy worker`s. A worker that runs no sink
 * instance is stopped, so no further checkpoint completes; the sink
 * publishes the newest checkpoint N (its committed part file appears); a
 * key-group file of N is truncated and the stopped worker killed. The
 * restore from N fails on the truncated file. Before the fix the
 * coordinator fell back to checkpoint N-1 and replayed what the sink had
 * already published for N: the job finished with repeated lines. Now the
 * job fails, naming the checkpoint, the file and the sink, and the
 * published output holds no line twice.
 *
 * The same when the coordinator restarts (SIGKILLed, then started again)
 * and finds checkpoint N's metadata unreadable: before the fix it resumed
 * from N-1 and published the replay again; now the job fails as it
 * resumes. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "state/metastore.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define JOB "test_count_parts"
#define PLUGIN EDDY_TEST_PLUGIN_DIR "/libtest_plugin_count_parts.so"
#define WORKERS 3
#define LINES 300000
#define RATE "3000" /* lines/s: far longer than the test needs */

static eddy_test_cluster_t *cl;
static char *input, *out_dir, *snap_dir, *coord_logp, *coord_url;
static int ports[2];
static eddy_proc_t *coord;

static char *text_of(const char *path)
{
    char *s = eddy_read_file(path, NULL);
    return s ? s : strdup("(none)");
}

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "reccommit", .checkpoint_interval = "300",
                                  .heartbeat_timeout_ms = "3000"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    out_dir = eddy_test_cluster_path(cl, "out");
    snap_dir = eddy_test_cluster_path(cl, "snapshots");
    coord_logp = eddy_test_cluster_coordinator_log(cl, 0);
    coord_url = eddy_test_cluster_url(cl, 0);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    coord = eddy_test_cluster_coordinator(cl, 0);
    cr_assert(eddy_gen_lines(input, LINES, 5, &err) == 0, "%s", err.msg);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

static void start_coordinator(void)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_coordinator(cl, 0, &err) == 0, "%s", err.msg);
}

static void start_cluster(void)
{
    eddy_err_t err = {{0}};
    start_coordinator();
    /* the restore must read the truncated file: no survivor may serve its
     * groups from its local copies */
    const char *const no_local[] = {"--no-local-recovery", NULL};
    for (int i = 0; i < WORKERS; i++)
        cr_assert(eddy_test_cluster_start_worker_as(cl, NULL, no_local, &err) >= 0, "%s", err.msg);
}

static void submit(void)
{
    eddy_err_t err = {{0}};
    const char *job[] = {"--plugin", PLUGIN, "--job", JOB, "--input", input, "--output-dir",
                         out_dir, "--rate", RATE, "--parallelism", "3", NULL};
    cr_assert(eddy_test_cluster_submit(cl, job, NULL, &err) == 0, "%s", err.msg);
}

/* The job's newest completed checkpoint and the id of the worker running
 * its sink (from `eddy status`); false when the status has neither. */
static bool job_facts(int64_t *checkpoint, int64_t *sink_worker)
{
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, JOB) : NULL;
    bool ok = false;
    if (j) {
        *checkpoint = json_integer_value(json_object_get(json_object_get(j, "last_checkpoint"), "id"));
        /* the last stage: format and part_file chained */
        json_t *ops = json_object_get(j, "operators");
        json_t *o = json_array_get(ops, json_array_size(ops) - 1);
        json_t *inst = json_array_get(json_object_get(o, "instances"), 0);
        *sink_worker = json_integer_value(json_object_get(inst, "worker"));
        ok = *sink_worker > 0;
    }
    json_decref(st);
    return ok;
}

/* Our process running worker `id` (by its pid in the status), or NULL. */
static eddy_proc_t *proc_of_worker(int64_t id)
{
    json_t *st = eddy_test_status(ports[0]);
    size_t i;
    json_t *w;
    pid_t pid = 0;
    json_array_foreach(json_object_get(st, "workers"), i, w) {
        if (json_integer_value(json_object_get(w, "id")) == id)
            pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
    }
    json_decref(st);
    for (int k = 0; k < WORKERS; k++)
        if (pid && eddy_test_cluster_worker(cl, k)->pid == pid)
            return eddy_test_cluster_worker(cl, k);
    return NULL;
}

static void committed_path(int64_t checkpoint, char *path, size_t size)
{
    snprintf(path, size, "%s/part-0-%020lld.txt", out_dir, (long long)checkpoint);
}

static bool committed(void *arg)
{
    char path[700];
    committed_path(*(int64_t *)arg, path, sizeof path);
    return access(path, F_OK) == 0;
}

/* Truncates one key-group file of the count operator in checkpoint n. */
static bool truncate_one_file(int64_t n, char *path, size_t size)
{
    char op_dir[900];
    snprintf(op_dir, sizeof op_dir, "%s/%s/chk-%lld/count", snap_dir, JOB, (long long)n);
    DIR *d = opendir(op_dir);
    if (!d)
        return false;
    struct dirent *e;
    bool done = false;
    while (!done && (e = readdir(d)))
        if (!strncmp(e->d_name, "kg-", 3)) {
            snprintf(path, size, "%s/%s", op_dir, e->d_name);
            done = truncate(path, 10) == 0;
        }
    closedir(d);
    return done;
}

static bool ended(void *arg)
{
    char *state = arg;
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, JOB) : NULL;
    const char *s = j ? json_string_value(json_object_get(j, "state")) : NULL;
    bool done = s && (!strcmp(s, "failed") || !strcmp(s, "finished") || !strcmp(s, "cancelled"));
    if (done)
        snprintf(state, 32, "%s", s);
    json_decref(st);
    return done;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lines published (committed part files, any order) that occur more than
 * once; *total the lines. The first repeated one in *example. */
static size_t repeated_lines(size_t *total, char *example, size_t size)
{
    DIR *d = opendir(out_dir);
    cr_assert(d, "no output directory %s", out_dir);
    char **lines = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "part-", 5) || !strstr(e->d_name, ".txt"))
            continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", out_dir, e->d_name);
        char *text = eddy_read_file(path, NULL);
        cr_assert(text, "cannot read %s", path);
        for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            if (n == cap) {
                cap = cap ? cap * 2 : 4096;
                lines = realloc(lines, cap * sizeof *lines);
                cr_assert(lines);
            }
            lines[n++] = strdup(l);
        }
        free(text);
    }
    closedir(d);
    qsort(lines, n, sizeof *lines, cmp_str);
    size_t dups = 0;
    example[0] = '\0';
    for (size_t i = 1; i < n; i++)
        if (!strcmp(lines[i], lines[i - 1])) {
            if (!dups)
                snprintf(example, size, "%s", lines[i]);
            dups++;
        }
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    *total = n;
    return dups;
}

/* Runs the job until 3 checkpoints completed, stops a worker without the
 * sink (no checkpoint completes any more) and waits until the sink
 * published the newest checkpoint: its id; the stopped worker in *victim_p. */
static int64_t run_until_published(eddy_proc_t **victim_p)
{
    start_cluster();
    cr_assert(eddy_test_cluster_wait_workers(cl, WORKERS, false, 30000), "the workers did not register; log:\n%s",
              text_of(coord_logp));
    submit();
    cr_assert(eddy_test_wait_job_progress(ports[0], JOB, "running", 3, 0, 90000, NULL),
              "the job never ran with 3 checkpoints; log:\n%s", text_of(coord_logp));

    /* Stop a worker without the sink: no checkpoint completes any more. */
    int64_t ck = 0, sink_worker = 0;
    cr_assert(job_facts(&ck, &sink_worker), "no sink instance in the status");
    eddy_proc_t *victim = NULL;
    for (int64_t id = 1; id <= 64 && !victim; id++)
        if (id != sink_worker)
            victim = proc_of_worker(id);
    cr_assert(victim, "no worker without the sink");
    cr_assert(kill(victim->pid, SIGSTOP) == 0);

    /* The newest checkpoint is published by the sink, and stays the newest. */
    int64_t newest = 0, again = 0, w2 = 0;
    cr_assert(job_facts(&newest, &w2));
    cr_assert(eddy_poll_until(committed, &newest, 20000), "the sink did not publish checkpoint %lld",
              (long long)newest);
    cr_assert(job_facts(&again, &w2));
    cr_assert_eq(newest, again, "a checkpoint completed while a worker was stopped");
    *victim_p = victim;
    return newest;
}

/* What the sink published holds each line once, whatever the job did. */
static void expect_no_repeats(int64_t newest, const char *state)
{
    size_t total = 0;
    char example[256];
    size_t dups = repeated_lines(&total, example, sizeof example);
    cr_assert_gt(total, 0, "nothing was published");
    cr_assert_eq(dups, 0,
                 "%zu of %zu published lines are repeats (e.g. '%s'): the restore crossed the commit of "
                 "checkpoint %lld (job %s)",
                 dups, total, example, (long long)newest, state);
}

Test(recovery_commit, unusable_newest_checkpoint_after_its_commit_fails_the_job, .init = setup,
     .fini = teardown, .timeout = 300)
{
    eddy_proc_t *victim = NULL;
    int64_t newest = run_until_published(&victim);

    char bad[1200];
    cr_assert(truncate_one_file(newest, bad, sizeof bad), "no key-group file in checkpoint %lld",
              (long long)newest);
    cr_assert(kill(victim->pid, SIGKILL) == 0);

    char state[32] = "";
    cr_assert(eddy_poll_until(ended, state, 120000), "the job did not end; log:\n%s", text_of(coord_logp));

    expect_no_repeats(newest, state);

    /* The job failed, saying why, in its status and the log. */
    cr_assert_str_eq(state, "failed", "the job %s instead of failing", state);
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = eddy_test_status_job(st, JOB);
    const char *why = json_string_value(json_object_get(j, "error"));
    char want[96];
    snprintf(want, sizeof want, "checkpoint %lld cannot be restored", (long long)newest);
    cr_assert(why && strstr(why, want) && strstr(why, "sink") && strstr(why, strrchr(bad, '/') + 1),
              "the job's error should name the checkpoint, the file and the sink: %s", why ? why : "(none)");
    json_decref(st);
    char *log = text_of(coord_logp);
    cr_assert(strstr(log, want), "the log does not say '%s':\n%s", want, log);
    cr_assert(!strstr(log, "falling back to checkpoint"), "the coordinator fell back:\n%s", log);
    free(log);
}

Test(recovery_commit, unreadable_newest_checkpoint_at_coordinator_restart_fails_the_job, .init = setup,
     .fini = teardown, .timeout = 300)
{
    eddy_proc_t *victim = NULL;
    int64_t newest = run_until_published(&victim);
    kill(-coord->pid, SIGKILL);
    cr_assert_eq(eddy_proc_wait(coord, 10000), 128 + SIGKILL);
    cr_assert(kill(victim->pid, SIGKILL) == 0);

    /* The newest checkpoint's metadata, as a new coordinator reads it: garbage. */
    eddy_err_t err = {{0}};
    eddy_metastore_t *ms = eddy_metastore_open(eddy_test_cluster_metastore(cl), &err);
    cr_assert(ms, "%s", err.msg);
    char key[200];
    snprintf(key, sizeof key, "/eddy/jobs/%s/checkpoints/%020lld", JOB, (long long)newest);
    char *old = NULL;
    size_t old_len = 0;
    cr_assert_eq(eddy_metastore_get(ms, key, &old, &old_len, &err), 1, "no metadata for checkpoint %lld: %s",
                 (long long)newest, err.msg);
    free(old);
    cr_assert(eddy_metastore_put(ms, key, "{\"garbage\":", 11, &err) == 0, "%s", err.msg);
    eddy_metastore_destroy(&ms);

    start_coordinator();
    char state[32] = "";
    cr_assert(eddy_poll_until(ended, state, 120000), "the job did not end; log:\n%s", text_of(coord_logp));
    expect_no_repeats(newest, state);
    cr_assert_str_eq(state, "failed", "the job %s instead of failing", state);
    json_t *st = eddy_test_status(ports[0]);
    const char *why = json_string_value(json_object_get(eddy_test_status_job(st, JOB), "error"));
    char want[96];
    snprintf(want, sizeof want, "checkpoint %lld cannot be restored", (long long)newest);
    cr_assert(why && strstr(why, want) && strstr(why, "sink"), "the job's error: %s", why ? why : "(none)");
    json_decref(st);
}
