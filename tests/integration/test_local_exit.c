/* test_local_exit.c - `eddy local` as a supervisor, and its exit codes.
 *
 * Contract (eddy local --help): 0 the job finished, 1 it failed (the last
 * line on stderr says why), 3 it was cancelled with `eddy cancel`; a worker
 * process it started that dies is restarted, and the job still finishes
 * with exact output. Everything runs through the real binary: `eddy local`,
 * `eddy cancel` from another process, kill -9 of the workers found through
 * `eddy status --json` (workers[].pid).
 *
 * Why: before, `eddy local` waited forever for workers it had started once
 * they had all died, exited 0 after a cancel, and ended a failed run with
 * whatever log line came last. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"
#include "tests/unit/leak_check.h"

#define RUN_TIMEOUT_MS 120000
#define STATE_TIMEOUT_MS 60000

TestSuite(local_exit, .fini = eddy_test_leak_check);

static eddy_test_cluster_t *cl;
static char *dir;

/* eddy local, 2 workers, short heartbeats so lost workers are noticed
 * quickly. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "local-exit", .workers = 2, .checkpoint_interval = "300",
                                  .heartbeat_ms = "100", .heartbeat_timeout_ms = "1000"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

/* The last non-empty line of s (in place: s is modified). */
static const char *last_line(char *s)
{
    size_t n = strlen(s);
    while (n && s[n - 1] == '\n')
        s[--n] = '\0';
    char *nl = strrchr(s, '\n');
    return nl ? nl + 1 : s;
}

typedef struct local_run {
    eddy_proc_t *proc;
    int control_port;
} local_run_t;

/* Starts `eddy local ... --job JOB [job args]` (INFO lines read). */
static void start_local(local_run_t *run, char *const job_args[])
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_local(cl, (const char *const *)job_args, &err) == 0, "%s",
              err.msg);
    run->proc = eddy_test_cluster_local(cl);
    run->control_port = eddy_test_cluster_port(cl, 0);
}

static char *read_log(local_run_t *run)
{
    (void)run;
    char *log = eddy_read_file(eddy_test_cluster_path(cl, "local.log"), NULL);
    return log ? log : strdup("");
}

Test(local_exit, finished_job_exits_0, .init = setup, .fini = teardown, .timeout = 150)
{
    char input[700], out[700];
    snprintf(input, sizeof input, "%s/input.txt", dir);
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    eddy_err_t err = {{0}};
    cr_assert(eddy_gen_text(input, 200 * 1024, 7, &err) == 0, "%s", err.msg);
    local_run_t run;
    char *job[] = {"--job", "wordcount", "--input", input, "--output", out, NULL};
    start_local(&run, job);
    int rc = eddy_proc_wait(run.proc, RUN_TIMEOUT_MS);
    eddy_proc_kill(run.proc, 2000);
    char *log = read_log(&run);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log);
    size_t text_len, expected_len, got_len = 0;
    char *text = eddy_read_file(input, &text_len);
    char *expected = eddy_reference_wordcount(text, text_len, &expected_len);
    char *got = eddy_read_file(out, &got_len);
    cr_assert(got, "no output file");
    cr_assert(got_len == expected_len && memcmp(got, expected, got_len) == 0,
              "output differs from the reference");
    free(got);
    free(expected);
    free(text);
    free(log);
}

Test(local_exit, cancel_exits_3, .init = setup, .fini = teardown, .timeout = 150)
{
    local_run_t run;
    char *job[] = {"--job", "wordcount", "--generate", "--lines", "0", "--rate", "500", NULL};
    start_local(&run, job);
    cr_assert(eddy_test_wait_job_state(run.control_port, "wordcount", "running", STATE_TIMEOUT_MS,
                                       run.proc),
              "job never ran");
    char coord[64];
    snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", run.control_port);
    char *cancel[] = {EDDY_BINARY, "cancel", "--coordinator", coord, "wordcount", NULL};
    char *cout = NULL, *cerr = NULL;
    int crc = eddy_proc_run(cancel, 20000, &cout, &cerr);
    cr_assert_eq(crc, 0, "eddy cancel exited %d: %s", crc, cerr ? cerr : "");
    int rc = eddy_proc_wait(run.proc, RUN_TIMEOUT_MS);
    eddy_proc_kill(run.proc, 2000);
    char *log = read_log(&run);
    cr_assert_eq(rc, 3, "eddy local exited %d after a cancel (want 3); log:\n%s", rc, log);
    cr_assert(strstr(last_line(log), "cancelled"), "last line: %s", last_line(log));
    free(cout);
    free(cerr);
    free(log);
}

/* Alive worker pids from `eddy status --json`; returns how many. */
static int alive_worker_pids(int control_port, long long *pids, int max)
{
    json_t *st = eddy_test_status(control_port);
    if (!st)
        return -1;
    int n = 0;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (json_is_true(json_object_get(w, "alive")) && n < max)
            pids[n++] = json_integer_value(json_object_get(w, "pid"));
    }
    json_decref(st);
    return n;
}

typedef struct replaced {
    int control_port;
    long long old[8];
    int n_old;
} replaced_t;

/* Two alive workers, none of them one of the killed ones. */
static bool workers_replaced(void *arg)
{
    replaced_t *r = arg;
    long long pids[8];
    int n = alive_worker_pids(r->control_port, pids, 8);
    if (n < 2)
        return false;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < r->n_old; k++)
            if (pids[i] == r->old[k])
                return false;
    return true;
}

typedef struct progress {
    int control_port;
} progress_t;

/* The job runs and its source has read some records. */
static bool source_started(void *arg)
{
    progress_t *p = arg;
    json_t *st = eddy_test_status(p->control_port);
    json_t *j = st ? eddy_test_status_job(st, "wordcount") : NULL;
    bool ok = false;
    const char *state = j ? json_string_value(json_object_get(j, "state")) : NULL;
    if (state && !strcmp(state, "running")) {
        json_t *op = json_array_get(json_object_get(j, "operators"), 0);
        ok = json_integer_value(json_object_get(op, "records_out")) > 0;
    }
    json_decref(st);
    return ok;
}

Test(local_exit, killed_workers_are_restarted_and_the_job_finishes_exactly, .init = setup,
     .fini = teardown, .timeout = 200)
{
    char input[700], out[700], rate[32];
    snprintf(input, sizeof input, "%s/input.txt", dir);
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    eddy_err_t err = {{0}};
    cr_assert(eddy_gen_text(input, 1024 * 1024, 11, &err) == 0, "%s", err.msg);
    size_t text_len;
    char *text = eddy_read_file(input, &text_len);
    cr_assert(text);
    size_t lines = 0;
    for (size_t i = 0; i < text_len; i++)
        lines += text[i] == '\n';
    /* about 8 s of input: long enough to kill the workers mid-run */
    snprintf(rate, sizeof rate, "%zu", lines / 8 + 1);
    local_run_t run;
    char *job[] = {"--job", "wordcount", "--input", input, "--output", out, "--rate", rate, NULL};
    start_local(&run, job);

    progress_t prog = {run.control_port};
    cr_assert(eddy_poll_until(source_started, &prog, STATE_TIMEOUT_MS), "job never started");
    replaced_t rep = {.control_port = run.control_port};
    rep.n_old = alive_worker_pids(run.control_port, rep.old, 8);
    cr_assert_eq(rep.n_old, 2, "want 2 alive workers, got %d", rep.n_old);
    for (int i = 0; i < rep.n_old; i++)
        cr_assert_eq(kill((pid_t)rep.old[i], SIGKILL), 0, "kill %lld", rep.old[i]);

    bool replaced = eddy_poll_until(workers_replaced, &rep, STATE_TIMEOUT_MS);
    int rc = replaced ? eddy_proc_wait(run.proc, RUN_TIMEOUT_MS) : -1;
    eddy_proc_kill(run.proc, 2000);
    char *log = read_log(&run);
    cr_assert(replaced, "the killed workers were not replaced; log:\n%s", log);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log);
    cr_assert(strstr(log, "was killed by signal 9") && strstr(log, "restarted worker-"),
              "the log should say how the workers died and that they were restarted:\n%s", log);

    size_t expected_len, got_len = 0;
    char *expected = eddy_reference_wordcount(text, text_len, &expected_len);
    char *got = eddy_read_file(out, &got_len);
    cr_assert(got, "no output file; log:\n%s", log);
    cr_assert(got_len == expected_len && memcmp(got, expected, got_len) == 0,
              "output differs from the reference (%zu vs %zu bytes)", got_len, expected_len);
    free(got);
    free(expected);
    free(text);
    free(log);
}

/* The part-file sink's directory cannot be created (a regular file stands
 * where a parent directory should be): the client accepts the flags, the
 * sink fails in the workers, the job fails. */
Test(local_exit, failure_exits_1_with_the_cause_last, .init = setup, .fini = teardown,
     .timeout = 150)
{
    char blocker[700], outdir[760];
    snprintf(blocker, sizeof blocker, "%s/not-a-directory", dir);
    snprintf(outdir, sizeof outdir, "%s/parts", blocker);
    cr_assert(eddy_write_file(blocker, "x\n", 2) == 0);
    local_run_t run;
    char *job[] = {"--job", "etl", "--generate", "--lines", "1000", "--output-dir", outdir, NULL};
    start_local(&run, job);
    int rc = eddy_proc_wait(run.proc, RUN_TIMEOUT_MS);
    eddy_proc_kill(run.proc, 2000);
    char *log = read_log(&run);
    cr_assert_eq(rc, 1, "eddy local exited %d (want 1); log:\n%s", rc, log);
    const char *last = last_line(log);
    cr_assert(!strncmp(last, "eddy local: failed", 18) && strstr(last, "not-a-directory"),
              "the last line should say it failed and why: %s", last);
    free(log);
}
