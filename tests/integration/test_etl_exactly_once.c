/* test_etl_exactly_once.c - the etl job's part file sink is exactly once,
 * through the real binary, with a worker SIGKILLed mid-run.
 *
 * A generated CSV (user,item,amount lines, repeated lines, a header and a
 * few malformed lines) runs through `eddy local --workers 3 --job etl` with
 * a rate cap (so the run lasts several seconds), checkpoints every 300 ms
 * and a 1 s heartbeat timeout. In the failure test one worker (its pid from
 * `eddy status --json`) gets SIGKILL after some checkpoints completed and
 * part files were published; the job restores from its last checkpoint and
 * finishes. Either way, the committed part files (DIR/part-*.txt),
 * concatenated and sorted, must equal the expected transformed lines,
 * sorted, computed here independently of eddy: nothing lost, nothing
 * doubled. Nothing may be left in DIR/.pending. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/lines.h"
#include "tests/support/proc.h"

#define LINES 300000
#define RATE "60000" /* lines/s in total: about 5 s */
#define MIN_AMOUNT 300

static eddy_test_cluster_t *cl;
static char *input, *outdir;
static char *expected; /* sorted lines joined by '\n' */
static size_t expected_len;

/* The input and, independently of eddy's transform, the expected output. */
static void make_input(void)
{
    eddy_err_t err = {{0}};
    eddy_test_etl_input_t in = {.lines = LINES, .seed = 11, .users = 5000, .items = 300,
                                .min_amount = MIN_AMOUNT, .repeat_every = 13, .malformed = true};
    size_t count;
    cr_assert(eddy_test_write_etl_input(input, &in, &expected, &expected_len, &count, &err) == 0,
              "%s", err.msg);
    cr_assert_gt(count, LINES / 2);
}

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "etl", .workers = 3, .checkpoint_interval = "300",
                                  .heartbeat_timeout_ms = "1000"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.csv");
    outdir = eddy_test_cluster_path(cl, "out");
    make_input();
}

static void teardown(void)
{
    free(expected);
    eddy_test_cluster_destroy(&cl);
}

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

/* eddy local running the etl job; its control port in *port. */
static eddy_proc_t *start_job(int *port, const char *p, const char *sp)
{
    eddy_err_t err = {{0}};
    char min[16];
    snprintf(min, sizeof min, "%d", MIN_AMOUNT);
    const char *job[] = {/* no --quiet: INFO lines read */
                         "--job", "etl", "--input", input, "--output-dir", outdir, "--min-amount",
                         min, "--parallelism", p, "--sink-parallelism", sp, "--rate", RATE, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
    *port = eddy_test_cluster_port(cl, 0);
    return eddy_test_cluster_local(cl);
}

/* Concatenation of DIR/part-*.txt in name order; counts files. */
static char *committed_output(size_t *len, int *files)
{
    eddy_err_t err = {{0}};
    char *all = eddy_test_read_parts(outdir, len, files, &err);
    cr_assert(all, "%s", err.msg);
    return all;
}

static int pending_left(void)
{
    char pdir[700];
    snprintf(pdir, sizeof pdir, "%s/.pending", outdir);
    DIR *d = opendir(pdir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void check_output(void)
{
    size_t len;
    int files;
    char *got = committed_output(&len, &files);
    size_t sorted_len, count;
    char *sorted = eddy_test_sort_lines(got, len, &sorted_len, &count);
    free(got);
    if (sorted_len != expected_len || memcmp(sorted, expected, sorted_len) != 0) {
        /* the first differing line, for a readable failure */
        size_t i = 0, start = 0;
        while (i < sorted_len && i < expected_len && sorted[i] == expected[i])
            if (sorted[i++] == '\n')
                start = i;
        char *log = log_text();
        cr_assert_fail("committed output differs from the expectation (%zu vs %zu bytes, %zu "
                       "lines, %d files): expected '%.40s' got '%.40s'; log:\n%s",
                       sorted_len, expected_len, count, files, expected + start, sorted + start,
                       log);
    }
    free(sorted);
    cr_assert_eq(pending_left(), 0, "files left in %s/.pending", outdir);
}

/* Number of part files of completed checkpoints (not the final one). */
static bool published_some(void *arg)
{
    (void)arg;
    DIR *d = opendir(outdir);
    if (!d)
        return false;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "part-", 5) && !strstr(e->d_name, "18446744073709551615"))
            n++;
    closedir(d);
    return n >= 3;
}

Test(etl, exactly_once_without_failure, .init = setup, .fini = teardown, .timeout = 180)
{
    int port;
    eddy_proc_t *proc = start_job(&port, "3", "3");
    int rc = eddy_proc_wait(proc, 120000);
    eddy_proc_kill(proc, 2000);
    char *log = log_text();
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log);
    cr_assert(strstr(log, "job etl finished"), "log:\n%s", log);
    free(log);
    check_output();
}

/* The worker running instance `instance` of operator `op`, from status. */
static int64_t worker_of(json_t *job, const char *op, int instance)
{
    json_t *ops = json_object_get(job, "operators");
    for (size_t i = 0; i < json_array_size(ops); i++) {
        json_t *o = json_array_get(ops, i);
        if (strcmp(json_string_value(json_object_get(o, "name")), op))
            continue;
        json_t *inst = json_array_get(json_object_get(o, "instances"), (size_t)instance);
        return inst ? json_integer_value(json_object_get(inst, "worker")) : -1;
    }
    return -1;
}

typedef struct kill_case {
    char parallelism[4], sink_parallelism[4];
    char op[8];      /* the victim is the worker running op[instance] */
    int instance;
    bool sink_only;  /* ... and it must run no source instance */
} kill_case_t;

ParameterizedTestParameters(etl, exactly_once_when_a_worker_is_killed)
{
    static kill_case_t cases[] = {
        /* a worker with a source and a sink instance */
        {"3", "3", "source", 1, false},
        /* a worker with only a sink: while it is not yet declared dead, the
         * next checkpoint reaches the other sinks, which prepare it and ACK,
         * but it never completes, so the restore must discard what they
         * prepared (and a sink publishing at prepare would duplicate it) */
        {"2", "3", "sink", 0, true}, /* sources on workers 1, 2; sink[0] on 3 (placement.h) */
    };
    return cr_make_param_array(kill_case_t, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(kill_case_t *c, etl, exactly_once_when_a_worker_is_killed, .init = setup,
                  .fini = teardown, .timeout = 240)
{
    int port;
    eddy_proc_t *proc = start_job(&port, c->parallelism, c->sink_parallelism);
    cr_assert(eddy_test_wait_job_state(port, "etl", "running", 30000, proc),
              "job never running; log:\n%s", log_text());
    /* Let checkpoints complete and publish part files, so the restore starts
     * from a checkpoint with output already committed. */
    cr_assert(eddy_poll_until(published_some, NULL, 30000),
              "no part files published; log:\n%s", log_text());
    json_t *st = eddy_test_status(port);
    cr_assert(st, "eddy status failed; log:\n%s", log_text());
    json_t *job = eddy_test_status_job(st, "etl");
    cr_assert(job && !strcmp(json_string_value(json_object_get(job, "state")), "running"),
              "the job ended before the kill (raise LINES or lower RATE)");
    int64_t victim = worker_of(job, c->op, c->instance);
    cr_assert_gt(victim, 0, "no worker for %s[%d]", c->op, c->instance);
    if (c->sink_only)
        for (int i = 0; i < atoi(c->parallelism); i++)
            cr_assert_neq(worker_of(job, "source", i), victim, "the victim runs source[%d]", i);
    pid_t pid = 0;
    json_t *workers = json_object_get(st, "workers");
    for (size_t i = 0; i < json_array_size(workers); i++) {
        json_t *w = json_array_get(workers, i);
        if (json_integer_value(json_object_get(w, "id")) == victim)
            pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
    }
    json_decref(st);
    cr_assert_gt(pid, 0, "no pid for worker %lld", (long long)victim);
    cr_assert_eq(kill(pid, SIGKILL), 0);

    int rc = eddy_proc_wait(proc, 150000);
    eddy_proc_kill(proc, 2000);
    char *log = log_text();
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log);
    cr_assert(strstr(log, "declared dead"), "the kill was not noticed; log:\n%s", log);
    cr_assert(strstr(log, "restoring from checkpoint"), "no restore from a checkpoint; log:\n%s",
              log);
    cr_assert(strstr(log, "job etl finished"), "log:\n%s", log);
    free(log);
    check_output();
}
