/* test_fluid_rescale.c - `--migration fluid` rescales of a running
 * wordcount, through the real binary, real workers and the real control
 * and data planes (coordinator/fluid.c, runtime/task_migrate.c).
 *
 * - up, down and back (count 3 -> 4 -> 2 -> 3, steps of 4 key groups): the
 *   output equals the reference, every rescale says it was fluid, and the
 *   key groups tile [0, 128) at each new parallelism;
 * - kill -9 of the old owner in the middle of a step: the test hook
 *   EDDY_TEST_FLUID_HOLD_MS makes every old owner hold its state back, the
 *   worker running count[0] (the first step's old owner for 3 -> 4) is
 *   killed while it does; the rescale is refused, the job restores from its
 *   last checkpoint, a second fluid rescale completes, and the output is
 *   still exact. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/etcd.h"
#include "tests/support/proc.h"

#define LINES 400000
#define SOURCE_RATE "30000"

static char *dir;
static char input[600], output[600], logp[600];
static int ports[2];
static char coord[64];
static eddy_proc_t job;

static void start(const char *hold_ms)
{
    eddy_err_t err = {{0}};
    dir = eddy_test_mkdtemp("fluid", &err);
    cr_assert(dir, "%s", err.msg);
    snprintf(input, sizeof input, "%s/input.txt", dir);
    snprintf(output, sizeof output, "%s/counts.tsv", dir);
    snprintf(logp, sizeof logp, "%s/local.log", dir);
    cr_assert(eddy_gen_lines(input, LINES, 11, &err) == 0, "%s", err.msg);
    cr_assert(eddy_test_free_ports(2, ports, &err) == 0, "%s", err.msg);
    snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", ports[0]);
    char cp[16], hp[16];
    snprintf(cp, sizeof cp, "%d", ports[0]);
    snprintf(hp, sizeof hp, "%d", ports[1]);
    if (hold_ms)
        setenv("EDDY_TEST_FLUID_HOLD_MS", hold_ms, 1); /* the workers inherit it */
    char *argv[] = {EDDY_BINARY, "local", "--workers", "3", "--control-port", cp, "--http-port", hp,
                    "--checkpoint-interval", "500", "--migration", "fluid",
                    "--migration-step-key-groups", "4", "--job", "wordcount", "--input", input,
                    "--output", output, "--parallelism", "3", "--rate", SOURCE_RATE, NULL};
    cr_assert(eddy_proc_start(&job, argv, NULL, logp, &err) == 0, "%s", err.msg);
    unsetenv("EDDY_TEST_FLUID_HOLD_MS");
}

static void teardown(void)
{
    eddy_proc_kill(&job, 3000);
    if (dir)
        eddy_test_rm_rf(dir);
    free(dir);
}

static char *log_text(void)
{
    char *s = eddy_read_file(logp, NULL);
    return s ? s : strdup("(no log)");
}

static void wait_running(void)
{
    if (!eddy_test_wait_job_state(ports[0], "wordcount", "running", 30000, &job))
        cr_assert_fail("job never (again) reached state running; log:\n%s", log_text());
}

static int rescale(const char *p, char **out, char **err)
{
    char *argv[] = {EDDY_BINARY, "rescale", "wordcount", "count", (char *)p, "--coordinator", coord,
                    NULL};
    return eddy_proc_run(argv, 90000, out, err);
}

static void expect_correct_output(void)
{
    int rc = eddy_proc_wait(&job, 120000);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log_text());
    size_t tl, el, gl;
    char *text = eddy_read_file(input, &tl);
    char *expected = eddy_reference_wordcount(text, tl, &el);
    char *got = eddy_read_file(output, &gl);
    cr_assert(got, "no output; log:\n%s", log_text());
    cr_assert(gl == el && memcmp(got, expected, el) == 0,
              "output after fluid rescales differs from the reference (%zu vs %zu bytes)", gl, el);
    free(text);
    free(expected);
    free(got);
}

/* count's parallelism is p and its instances' key groups tile [0,128). */
static void expect_status_parallelism(int p)
{
    json_t *st = eddy_test_status(ports[0]);
    cr_assert(st, "eddy status --json failed");
    json_t *j = eddy_test_status_job(st, "wordcount");
    cr_assert(j);
    json_t *op = NULL, *o;
    size_t i;
    json_array_foreach(json_object_get(j, "operators"), i, o)
    {
        if (!strcmp(json_string_value(json_object_get(o, "name")), "count"))
            op = o;
    }
    cr_assert(op);
    cr_assert_eq(json_integer_value(json_object_get(op, "parallelism")), p);
    json_int_t next = 0;
    json_array_foreach(json_object_get(op, "instances"), i, o)
    {
        json_t *kg = json_object_get(o, "key_groups");
        cr_assert_eq(json_integer_value(json_array_get(kg, 0)), next);
        next = json_integer_value(json_array_get(kg, 1));
    }
    cr_assert_eq(next, 128);
    json_decref(st);
}

Test(fluid, up_down_back_keeps_exact_counts, .fini = teardown, .timeout = 240)
{
    start(NULL);
    static const char *steps[] = {"4", "2", "3"};
    for (int s = 0; s < 3; s++) {
        wait_running();
        char *out = NULL, *err = NULL;
        int rc = rescale(steps[s], &out, &err);
        cr_assert_eq(rc, 0, "eddy rescale wordcount count %s exited %d: %s\nlog:\n%s", steps[s], rc,
                     err, log_text());
        cr_assert(out && strstr(out, "(fluid)"), "not a fluid rescale: %s", out ? out : "");
        free(out);
        free(err);
        wait_running();
        expect_status_parallelism(atoi(steps[s]));
    }
    char *log = log_text();
    cr_assert(!strstr(log, "restor"), "a fluid rescale restored the job:\n%s", log);
    free(log);
    expect_correct_output();
}

static bool steps_started(void *arg)
{
    (void)arg;
    char *s = eddy_read_file(logp, NULL);
    bool yes = s && strstr(s, "fluid rescale of count 3 -> 4");
    free(s);
    return yes;
}

/* The pid of the worker running count[instance]. */
static pid_t worker_of_count(int instance)
{
    json_t *st = eddy_test_status(ports[0]);
    cr_assert(st);
    json_t *j = eddy_test_status_job(st, "wordcount"), *o, *w;
    json_int_t wid = -1;
    size_t i;
    json_array_foreach(json_object_get(j, "operators"), i, o)
    {
        if (!strcmp(json_string_value(json_object_get(o, "name")), "count"))
            wid = json_integer_value(
                json_object_get(json_array_get(json_object_get(o, "instances"), instance), "worker"));
    }
    pid_t pid = 0;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (json_integer_value(json_object_get(w, "id")) == wid)
            pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
    }
    json_decref(st);
    return pid;
}

Test(fluid, kill_of_the_old_owner_mid_step_restores_exactly, .fini = teardown, .timeout = 240)
{
    start("1500");
    wait_running();
    /* wait for a completed checkpoint to restore from */
    cr_assert(eddy_test_wait_job_progress(ports[0], "wordcount", "running", 1, 0, 30000, &job),
              "no checkpoint completed; log:\n%s", log_text());
    char *argv[] = {EDDY_BINARY, "rescale", "wordcount", "count", "4", "--coordinator", coord, NULL};
    eddy_proc_t client;
    eddy_err_t err = {{0}};
    char client_log[700];
    snprintf(client_log, sizeof client_log, "%s/rescale.out", dir);
    cr_assert(eddy_proc_start(&client, argv, client_log, NULL, &err) == 0, "%s", err.msg);
    cr_assert(eddy_poll_until(steps_started, NULL, 30000), "the steps never started; log:\n%s",
              log_text());
    /* count[0] gives the first step's groups away, and holds them 1.5 s */
    eddy_nap_ms(300);
    pid_t victim = worker_of_count(0);
    cr_assert_gt(victim, 0);
    cr_assert_eq(kill(victim, SIGKILL), 0);
    int rc = eddy_proc_wait(&client, 60000);
    cr_assert_neq(rc, 0, "the interrupted rescale reported success; log:\n%s", log_text());
    wait_running();
    /* the job restored; a fluid rescale now goes through */
    char *out = NULL, *errout = NULL;
    rc = rescale("4", &out, &errout);
    cr_assert_eq(rc, 0, "second rescale exited %d: %s\nlog:\n%s", rc, errout, log_text());
    free(out);
    free(errout);
    expect_correct_output();
}
