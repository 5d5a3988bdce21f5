/* test_rescale_e2e.c - live rescaling of a running wordcount, through the
 * real binary and the real control protocol.
 *
 * A rate-limited wordcount (so it runs several seconds) on 3 workers with
 * checkpoints every 500 ms is rescaled with `eddy rescale` from another
 * process: count 3 -> 4 -> 1 -> 3, each waiting for the job to be running
 * again first. The final output must still equal the reference (nothing
 * lost or counted twice across the rescales), and `eddy status --json`
 * must show the new parallelism with key-group ranges that tile [0, 128).
 * A second test sends invalid requests (parallelism 0 and 129, unknown
 * operator, the non-keyed 'source', unknown job): each is refused with a
 * non-zero exit and a message, and the job still finishes correctly. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define LINES 400000
#define SOURCE_RATE "30000" /* lines/s over all 3 source instances: ~13 s, room for three rescales even under ASan */

static eddy_test_cluster_t *cl;
static eddy_proc_t *job;
static char *input, *output;

static void setup(void)
{
    eddy_err_t err = {{0}};
    /* eddy local's own heartbeat timing */
    eddy_test_cluster_opts_t o = {.tag = "rescale", .workers = 3, .checkpoint_interval = "500",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    cr_assert(eddy_gen_lines(input, LINES, 7, &err) == 0, "%s", err.msg);
    const char *argv[] = {"--quiet", "--job", "wordcount", "--input", input, "--output", output,
                          "--parallelism", "3", "--rate", SOURCE_RATE, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    job = eddy_test_cluster_local(cl);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void wait_running(void)
{
    static const eddy_test_job_want_t running = {.state = "running"};
    bool ok = eddy_test_cluster_wait_job(cl, "wordcount", &running, 30000, NULL, NULL);
    if (!ok)
        cr_assert_fail("job never (again) reached state running; log:\n%s", log_text());
}

static int rescale(const char *job_id, const char *op, const char *p, char **err)
{
    const char *argv[] = {"rescale", job_id, op, p, NULL};
    char *out = NULL;
    int rc = eddy_test_cluster_ctl(cl, argv, 90000, &out, err);
    free(out);
    return rc;
}

/* The job must finish (exit 0) and its output equal the reference. */
static void expect_correct_output(void)
{
    int rc = eddy_proc_wait(job, 120000);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log_text());
    size_t gl, el;
    int same = eddy_test_same_wordcount(input, output, &gl, &el);
    cr_assert(same >= 0, "no output; log:\n%s", log_text());
    cr_assert(same, "output after rescales differs from the reference (%zu vs %zu bytes)", gl, el);
}

/* count's parallelism is p and its instances' key groups tile [0,128). */
static void expect_status_parallelism(int p)
{
    json_t *st = eddy_test_cluster_status(cl);
    cr_assert(st, "eddy status --json failed");
    cr_assert(eddy_test_status_job(st, "wordcount"), "status lists no job 'wordcount'");
    json_t *op = eddy_test_status_operator(st, "wordcount", "count"), *o;
    size_t i;
    cr_assert(op, "status has no operator 'count'");
    cr_assert_eq(json_integer_value(json_object_get(op, "parallelism")), p);
    json_t *inst = json_object_get(op, "instances");
    cr_assert_eq(json_array_size(inst), (size_t)p);
    json_int_t next = 0;
    json_array_foreach(inst, i, o)
    {
        json_t *kg = json_object_get(o, "key_groups");
        cr_assert(json_is_array(kg), "instance %zu has no key_groups", i);
        cr_assert_eq(json_integer_value(json_array_get(kg, 0)), next,
                     "key groups of instance %zu start at %lld, want %lld", i,
                     (long long)json_integer_value(json_array_get(kg, 0)), (long long)next);
        next = json_integer_value(json_array_get(kg, 1));
        cr_assert_gt(next, json_integer_value(json_array_get(kg, 0)), "empty range");
    }
    cr_assert_eq(next, 128, "key groups end at %lld, want 128", (long long)next);
    json_decref(st);
}

Test(rescale, up_down_up_keeps_exact_counts, .init = setup, .fini = teardown, .timeout = 240)
{
    static const char *steps[] = {"4", "1", "3"};
    wait_running();
    expect_status_parallelism(3);
    for (int s = 0; s < 3; s++) {
        wait_running();
        char *err = NULL;
        int rc = rescale("wordcount", "count", steps[s], &err);
        cr_assert_eq(rc, 0, "eddy rescale wordcount count %s exited %d: %s\nlog:\n%s", steps[s], rc,
                     err, log_text());
        free(err);
        wait_running();
        expect_status_parallelism(atoi(steps[s]));
    }
    expect_correct_output();
}

Test(rescale, invalid_requests_refused_job_unharmed, .init = setup, .fini = teardown,
     .timeout = 240)
{
    static const struct {
        const char *job, *op, *p, *why;
    } bad[] = {
        {"wordcount", "count", "0", "0"},
        {"wordcount", "count", "129", "129"},
        {"wordcount", "nosuchop", "2", "nosuchop"},
        {"wordcount", "source", "2", "source"},
        {"nosuchjob", "count", "2", "nosuchjob"},
    };
    wait_running();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *err = NULL;
        int rc = rescale(bad[i].job, bad[i].op, bad[i].p, &err);
        cr_assert(rc > 0, "eddy rescale %s %s %s: exit %d, want refusal", bad[i].job, bad[i].op,
                  bad[i].p, rc);
        cr_assert(err && strstr(err, bad[i].why), "refusal of %s %s %s should mention '%s': %s",
                  bad[i].job, bad[i].op, bad[i].p, bad[i].why, err);
        free(err);
    }
    expect_status_parallelism(3);
    expect_correct_output();
}
