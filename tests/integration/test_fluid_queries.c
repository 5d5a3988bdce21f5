/* test_fluid_queries.c - event-time queries through `--migration fluid`
 * rescales (issue 25): windows, timers and the watermark hold must move
 * with their key groups, worker to worker, while the sources run.
 *
 * - Nexmark q5 (sliding windows, two keyed steps) and q11 (session windows
 *   per bidder): the keyed window operator is rescaled 2 -> 3 -> 1 -> 2
 *   (up, down and back) mid-run, each step's transfer held 200 ms by the
 *   test hook EDDY_TEST_FLUID_HOLD_MS (windows come due meanwhile, at the
 *   old owner and the new); every rescale says it was fluid, the key
 *   groups tile [0, 128) at each new parallelism, nothing restores, and the
 *   output equals the reference (tests/support/nexmark_ref.c) byte for
 *   byte;
 * - the same for a YAML pipeline with a session window
 *   (examples/pipelines/q11.yaml);
 * - a checkpoint in flight during a step: checkpoints every 100 ms while
 *   the test hook EDDY_TEST_FLUID_HOLD_MS holds each step's transfer back
 *   (one step at a time: --migration-steps-in-flight 1),
 *   so checkpoints come due while steps are held; the coordinator defers
 *   them (no deadlock, nothing restores), checkpoints complete between the
 *   steps and after the migration, and the output is exact;
 * - a kill -9 of the worker of the new owner, of the old owner or of an
 *   upstream sender after such a checkpoint, mid migration: the job
 *   restores from the checkpoint taken between two steps (groups then held
 *   by their owners of the moment, the routing not uniform) and its q5
 *   output is still exact.
 *
 * Kills mid-step and the wordcount are test_fluid_rescale.c's. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tests/support/cluster.h"
#include "tests/support/nexmark_ref.h"
#include "tests/support/proc.h"

#define EVENTS "60000" /* 60 s of event time: 30 sliding windows, ~1000 sessions */

static eddy_test_cluster_t *cl;
static char *events_path, *output;
static int port;
static eddy_proc_t *job;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "fluidq", .workers = 2, .checkpoint_interval = "300",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    events_path = eddy_test_cluster_path(cl, "events.csv");
    output = eddy_test_cluster_path(cl, "out.tsv");
    port = eddy_test_cluster_port(cl, 0);
    job = eddy_test_cluster_local(cl);
    cr_assert(eddy_test_nexmark_generate(events_path, EVENTS, "0", &err) == 0, "%s", err.msg);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(fluid_queries, .init = setup, .fini = teardown, .timeout = 240);

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

/* eddy local with fluid migration in steps of `step` key groups, the
 * source capped at `rate` events/s; hold_ms (may be NULL) is the test
 * hook's hold of each step's transfer; flags end with NULL. */
static void start(const char *step, const char *rate, const char *hold_ms,
                  const char *const *flags)
{
    const char *argv[48] = {"--migration", "fluid", "--migration-step-key-groups", step,
                            "--input", events_path, "--output", output, "--rate", rate};
    size_t n = 10;
    for (size_t i = 0; flags[i] && n < 46; i++)
        argv[n++] = flags[i];
    argv[n] = NULL;
    if (hold_ms)
        setenv("EDDY_TEST_FLUID_HOLD_MS", hold_ms, 1); /* the workers inherit it */
    eddy_err_t err = {{0}};
    int rc = eddy_test_cluster_start_local(cl, argv, &err);
    unsetenv("EDDY_TEST_FLUID_HOLD_MS");
    cr_assert(rc == 0, "%s", err.msg);
}

static void wait_running(const char *job_id)
{
    if (!eddy_test_wait_job_state(port, job_id, "running", 30000, job))
        cr_assert_fail("%s never (again) reached state running; log:\n%s", job_id, log_text());
}

/* `eddy rescale JOB OP P`: must succeed and say it was fluid. */
static void rescale(const char *job_id, const char *op, const char *p)
{
    char *argv[] = {EDDY_BINARY, "rescale", (char *)job_id, (char *)op, (char *)p, "--coordinator",
                    eddy_test_cluster_url(cl, 0), NULL};
    char *out = NULL, *errout = NULL;
    uint64_t t0 = eddy_mono_ms();
    int rc = eddy_proc_run(argv, 90000, &out, &errout);
    cr_assert_eq(rc, 0, "eddy rescale %s %s %s exited %d: %s\nlog:\n%s", job_id, op, p, rc,
                 errout ? errout : "", log_text());
    cr_assert(out && strstr(out, "(fluid)"), "not a fluid rescale: %s", out ? out : "");
    cr_log_info("rescale %s %s -> %s in %llu ms: %s", job_id, op, p,
                (unsigned long long)(eddy_mono_ms() - t0), out);
    free(out);
    free(errout);
}

/* op's parallelism is p and its instances' key groups tile [0, 128). */
static void expect_parallelism(const char *job_id, const char *op_name, int p)
{
    json_t *st = eddy_test_status(port);
    cr_assert(st, "eddy status --json failed");
    json_t *j = eddy_test_status_job(st, job_id);
    cr_assert(j, "no job %s in status", job_id);
    json_t *op = NULL, *o;
    size_t i;
    json_array_foreach(json_object_get(j, "operators"), i, o)
    {
        if (!strcmp(json_string_value(json_object_get(o, "name")), op_name))
            op = o;
    }
    cr_assert(op, "no operator %s in status", op_name);
    cr_assert_eq(json_integer_value(json_object_get(op, "parallelism")), p);
    json_int_t next = 0;
    json_array_foreach(json_object_get(op, "instances"), i, o)
    {
        json_t *kg = json_object_get(o, "key_groups");
        cr_assert_eq(json_integer_value(json_array_get(kg, 0)), next, "%s[%zu] starts at %lld",
                     op_name, i, (long long)json_integer_value(json_array_get(kg, 0)));
        next = json_integer_value(json_array_get(kg, 1));
    }
    cr_assert_eq(next, 128);
    json_decref(st);
}

/* Every rescale of the job was fluid, moved groups in steps, and the job
 * never restored; it still runs (the rescales were mid-run). */
static void expect_fluid_history(const char *job_id, size_t n)
{
    json_t *st = eddy_test_status(port);
    cr_assert(st);
    json_t *j = eddy_test_status_job(st, job_id);
    cr_assert(j);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "running",
                     "the job ended before its rescales were through: they were not mid-run");
    cr_assert_eq(json_integer_value(json_object_get(j, "restarts")), 0,
                 "the job restored during fluid rescales; log:\n%s", log_text());
    json_t *rs = json_object_get(j, "rescales");
    cr_assert_eq(json_array_size(rs), n);
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(rs, i);
        cr_assert_str_eq(json_string_value(json_object_get(r, "migration")), "fluid");
        cr_assert_gt(json_integer_value(json_object_get(r, "steps")), 0);
        cr_assert_gt(json_integer_value(json_object_get(r, "key_groups_moved")), 0);
    }
    json_decref(st);
}

/* eddy local ends by itself and its output is the reference's. */
static void expect_reference(const char *query)
{
    int rc = eddy_proc_wait(job, 120000);
    cr_assert_eq(rc, 0, "eddy local (%s) exited %d; log:\n%s", query, rc, log_text());
    eddy_ref_lines_t ref;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_nexmark_reference(query, events_path, &ref, &err), 0, "%s", err.msg);
    size_t el, gl;
    char *expected = eddy_ref_lines_join(&ref, &el);
    char *got = eddy_read_file(output, &gl);
    cr_assert(got, "%s wrote no output; log:\n%s", query, log_text());
    cr_assert(ref.count > 0, "%s: the reference has no rows: the test proves nothing", query);
    if (gl != el || memcmp(got, expected, el) != 0) {
        char path[700];
        snprintf(path, sizeof path, "/tmp/eddy-fluid-%s.expected", query);
        eddy_write_file(path, expected, el);
        snprintf(path, sizeof path, "/tmp/eddy-fluid-%s.got", query);
        eddy_write_file(path, got, gl);
        cr_assert_fail("%s: output after fluid rescales (%zu bytes) differs from the reference "
                       "(%zu bytes, %zu rows; both in /tmp/eddy-fluid-%s.*)",
                       query, gl, el, ref.count, query);
    }
    free(expected);
    free(got);
    eddy_ref_lines_free(&ref);
}

/* Polls until the sources read at least n events (the job running). */
static void wait_source_in(const char *job_id, int64_t n)
{
    eddy_test_job_want_t want = {.state = "running", .min_source_in = n};
    eddy_test_job_view_t last = {0};
    if (!eddy_test_job_wait(port, job_id, &want, job, 60000, &last, NULL))
        cr_assert_fail("%s: the sources never read %lld events while running (state %s, %lld "
                       "read); log:\n%s",
                       job_id, (long long)n, last.state, (long long)last.source_in, log_text());
}

/* 2 -> 3 -> 1 -> 2 of op while the source runs, each after another fifth
 * of the events (windows open, fire and carry timers across each), then
 * the reference. */
static void up_down_back(const char *job_id, const char *op, const char *query)
{
    static const char *const steps[] = {"3", "1", "2"};
    int64_t events = atoll(EVENTS);
    for (size_t i = 0; i < 3; i++) {
        wait_source_in(job_id, events * (int64_t)(i + 1) / 5);
        rescale(job_id, op, steps[i]);
        wait_running(job_id);
        expect_parallelism(job_id, op, atoi(steps[i]));
    }
    expect_fluid_history(job_id, 3);
    expect_reference(query);
}

Test(fluid_queries, q5_sliding_windows_through_up_down_and_back)
{
    start("16", "3000", "200", (const char *[]){"--job", "nexmark", "--query", "q5", NULL});
    up_down_back("nexmark", "bids_per_auction", "q5");
}

Test(fluid_queries, q11_sessions_through_up_down_and_back)
{
    start("16", "3000", "200", (const char *[]){"--job", "nexmark", "--query", "q11", NULL});
    up_down_back("nexmark", "sessions", "q11");
}

Test(fluid_queries, pipeline_session_window_through_up_down_and_back)
{
    char spec[700];
    snprintf(spec, sizeof spec, "%s/examples/pipelines/q11.yaml", EDDY_SOURCE_DIR);
    start("16", "3000", "200", (const char *[]){"--pipeline", spec, NULL});
    up_down_back("pipeline", "step3_aggregate", "q11");
}

/* ---- a checkpoint in flight during a step ---------------------------------- */

static eddy_test_job_view_t view(const char *job_id)
{
    eddy_test_job_view_t v = eddy_test_job_view(port, job_id);
    cr_assert(v.ok, "no job %s in status; log:\n%s", job_id, log_text());
    return v;
}

/* Checkpoints every 100 ms; each step's transfer is held 1 s by the test
 * hook once the old owner could send it, so checkpoints come due while a
 * step is held: the coordinator defers them (a task that meets one
 * declines it), and takes them between steps, not only after the whole
 * migration. q5's windows fire all the while. */
Test(fluid_queries, checkpoints_due_while_a_step_is_held_are_deferred_not_lost)
{
    eddy_test_cluster_opts(cl)->checkpoint_interval = "100";
    /* 2000 events/s: both rescales (steps held 1 s each) fit in the 30 s of
     * input even on a slow (ASan, loaded) machine; at 3000/s the input once
     * ran out in the middle of the second one. */
    /* one step at a time: with several in flight a checkpoint waits for
     * them all, and the steps here (held 1 s each) would leave none between */
    start("32", "2000", "1000", (const char *[]){"--migration-steps-in-flight", "1", "--job",
                                                 "nexmark", "--query", "q5", NULL});
    static const char *const steps[] = {"3", "2"};
    int64_t events = atoll(EVENTS);
    for (size_t i = 0; i < 2; i++) {
        wait_source_in("nexmark", events * (int64_t)(i + 1) / 5);
        /* a checkpoint to compare with */
        eddy_test_job_want_t want = {.state = "running", .min_completed = 1};
        cr_assert(eddy_test_job_wait(port, "nexmark", &want, job, 30000, NULL, NULL),
                  "no checkpoint completed; log:\n%s", log_text());
        eddy_test_job_view_t before = view("nexmark");
        rescale("nexmark", "bids_per_auction", steps[i]);
        eddy_test_job_view_t after = view("nexmark");
        cr_log_info("checkpoints completed during the rescale to %s: %lld (failed %lld)", steps[i],
                    (long long)(after.ck_completed - before.ck_completed),
                    (long long)(after.ck_failed - before.ck_failed));
        cr_assert_gt(after.ck_completed, before.ck_completed,
                     "no checkpoint completed during the migration's held steps (%lld before, "
                     "%lld after): checkpoints wait for the whole migration; log:\n%s",
                     (long long)before.ck_completed, (long long)after.ck_completed, log_text());
        expect_parallelism("nexmark", "bids_per_auction", atoi(steps[i]));
    }
    /* after the migration, checkpoints go on */
    eddy_test_job_view_t done = view("nexmark");
    eddy_test_job_want_t more = {.state = "running", .min_completed = done.ck_completed + 2};
    eddy_test_job_view_t last = {0};
    cr_assert(eddy_test_job_wait(port, "nexmark", &more, job, 30000, &last, NULL),
              "checkpoints stopped after the migration (%lld completed, then %lld; state %s); "
              "log:\n%s",
              (long long)done.ck_completed, (long long)last.ck_completed, last.state, log_text());
    expect_fluid_history("nexmark", 2);
    expect_reference("q5");
}

/* ---- a kill after a checkpoint between two steps ----------------------------- */

static bool log_has(void *needle)
{
    return eddy_test_cluster_log_count(cl, "local.log", needle) > 0;
}

/* The pid of the worker running op[instance]. */
static pid_t worker_of(const char *job_id, const char *name, int instance)
{
    json_t *st = eddy_test_status(port);
    cr_assert(st);
    pid_t pid = eddy_test_status_instance_pid(st, job_id, name, instance);
    json_decref(st);
    return pid;
}

/* q5 on 3 workers, bids_per_auction 2 -> 3 in steps of 32 key groups
 * (43..63 from instance 0 to 1, then 86..117 and 118..127 from 1 to 2),
 * each held 1 s: once a checkpoint completed during the migration (after
 * the first step), the worker of op[instance] is killed: the new owner
 * bids_per_auction[2], the old owner bids_per_auction[1], or an upstream
 * sender source[1]. The rescale is refused, the job restores from that
 * checkpoint or a later one, and the output is exact. */
static void kill_between_steps(const char *op, int instance)
{
    eddy_test_cluster_opts(cl)->checkpoint_interval = "100";
    eddy_test_cluster_opts(cl)->workers = 3;
    /* one step at a time, so that a checkpoint comes between two of them */
    start("32", "3000", "1000", (const char *[]){"--migration-steps-in-flight", "1", "--job",
                                                 "nexmark", "--query", "q5", NULL});
    wait_source_in("nexmark", atoll(EVENTS) / 5);
    eddy_test_job_want_t one = {.state = "running", .min_completed = 1};
    cr_assert(eddy_test_job_wait(port, "nexmark", &one, job, 30000, NULL, NULL),
              "no checkpoint completed; log:\n%s", log_text());
    char *argv[] = {EDDY_BINARY, "rescale", "nexmark", "bids_per_auction", "3", "--coordinator",
                    eddy_test_cluster_url(cl, 0), NULL};
    eddy_proc_t client;
    eddy_err_t err = {{0}};
    cr_assert(eddy_proc_start(&client, argv, eddy_test_cluster_path(cl, "rescale.out"), NULL, &err) == 0,
              "%s", err.msg);
    cr_assert(eddy_poll_until(log_has, "fluid rescale of bids_per_auction 2 -> 3", 30000),
              "the steps never started; log:\n%s", log_text());
    eddy_test_job_view_t at_steps = view("nexmark");
    eddy_test_job_want_t between = {.min_completed = at_steps.ck_completed + 1};
    eddy_test_job_view_t mid = {0};
    cr_assert(eddy_test_job_wait(port, "nexmark", &between, job, 30000, &mid, NULL),
              "no checkpoint completed between the steps; log:\n%s", log_text());
    cr_assert(eddy_proc_alive(&client), "the rescale was through before the kill");
    pid_t victim = worker_of("nexmark", op, instance);
    cr_assert_gt(victim, 0);
    cr_log_info("checkpoint %lld completed mid-migration; killing worker %d (of %s[%d])",
                (long long)mid.ck_id, (int)victim, op, instance);
    cr_assert_eq(kill(victim, SIGKILL), 0);
    int rc = eddy_proc_wait(&client, 60000);
    cr_assert_neq(rc, 0, "the interrupted rescale reported success; log:\n%s", log_text());
    wait_running("nexmark");
    /* restored from the checkpoint taken between two steps, or a later one */
    char *log = eddy_read_file(eddy_test_cluster_path(cl, "local.log"), NULL);
    const char *at = log ? strstr(log, "restoring from checkpoint ") : NULL;
    cr_assert(at, "the job did not restore from a checkpoint; log:\n%s", log_text());
    long long from = atoll(at + strlen("restoring from checkpoint "));
    free(log);
    cr_assert_geq(from, mid.ck_id, "restored from checkpoint %lld, before the mid-migration one %lld",
                  from, (long long)mid.ck_id);
    expect_reference("q5");
}

Test(fluid_queries, a_kill_of_the_new_owner_after_a_checkpoint_between_steps_restores_exactly)
{
    kill_between_steps("bids_per_auction", 2);
}

Test(fluid_queries, a_kill_of_the_old_owner_after_a_checkpoint_between_steps_restores_exactly)
{
    kill_between_steps("bids_per_auction", 1);
}

Test(fluid_queries, a_kill_of_an_upstream_sender_after_a_checkpoint_between_steps_restores_exactly)
{
    kill_between_steps("source", 1);
}

/* The bounded input runs out while a fluid rescale's first step is held
 * (5 s; the rescale starts with about 4 s of input left): the job
 * finishes, and `eddy rescale` is answered that the rescale did not
 * complete (it used to wait for a reply that never came, until its own
 * timeout). The output is still exact. */
Test(fluid_queries, a_job_that_finishes_during_the_steps_answers_the_rescale)
{
    /* one step at a time: with all three in flight the tasks finish only
     * after the steps (a task waits for a step in flight), and the rescale
     * then completes before the job ends */
    start("32", "3000", "5000", (const char *[]){"--migration-steps-in-flight", "1", "--job",
                                                 "nexmark", "--query", "q5", NULL});
    wait_source_in("nexmark", atoll(EVENTS) * 8 / 10);
    char *argv[] = {EDDY_BINARY, "rescale", "nexmark", "bids_per_auction", "3", "--coordinator",
                    eddy_test_cluster_url(cl, 0), NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 90000, &out, &errout);
    cr_assert_eq(rc, 1, "eddy rescale exited %d (%s%s); log:\n%s", rc, out ? out : "",
                 errout ? errout : "", log_text());
    cr_assert(errout && strstr(errout, "finished during the rescale"), "stderr: %s\nlog:\n%s",
              errout ? errout : "", log_text());
    free(out);
    free(errout);
    expect_reference("q5"); /* eddy local ends with the job: exit 0, exact output */
}
