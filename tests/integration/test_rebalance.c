/* test_rebalance.c - a worker that joins a running job gets work by
 * rebalancing (coordinator/migrate.c), and the output stays exact.
 *
 * Real processes: `eddy coordinator` (directory metastore), two `eddy
 * worker`s, a rate-limited wordcount submitted with --parallelism 4 (so
 * workers 1 and 2 carry 5 and 4 instances). Once the job runs and has a
 * completed checkpoint, a third worker starts. With rebalancing the
 * coordinator migrates count instances onto it: `eddy status --json` shows
 * instances placed on it and its heartbeats report tasks, the job's
 * rescale history has a "migration" naming the worker, done fluidly (issue
 * 25: key groups moved in steps while the sources ran; the log says
 * "(fluid)"), /metrics counts it in eddy_migrations_total, and the final
 * --output equals the reference
 * (nothing lost or counted twice by the move). With --no-rebalance the
 * third worker stays empty for the rest of the job (sampled until the job
 * ends, which must be seconds after the join), and the output is exact too.
 *
 * After a restore (issue 15): three workers run the job at parallelism 3,
 * worker-1 is SIGKILLed (a new worker-4 joins once the job runs again) or
 * SIGSTOPped until it is declared dead (then SIGCONTed: it registers again
 * under a new id, still holding its tasks of the epoch before the restore).
 * count instances migrate onto the joiner at once, and the output is exact:
 * the stopped worker's stale count task must not keep its old state.
 *
 * A fresh wordcount on three workers (issue 23) is placed on all three
 * (2/2/1, no rebalancing needed), and `eddy status` prints that spread.
 * Four workers and two jobs of three instances each: the fourth worker,
 * which joined before both jobs and idles, gets instances by a migration;
 * that test runs --migration sudden, so the paused path stays covered (the
 * others use the default, fluid).
 *
 * Every wait is a poll with a deadline on status, the log or process exit. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tests/support/cluster.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"

#define LINES 80000
#define RATE "8000" /* lines/s over all 4 source instances: ~10 s undisturbed */

static eddy_test_cluster_t *cl;
static char *input, *output;
static int ports[2]; /* control, HTTP */

static void setup(void)
{
    eddy_err_t err = {{0}};
    static const char *const coord_args[] = {"--rebalance-interval-ms", "500", NULL};
    static const char *const worker_args[] = {"--register-timeout-ms", "30000", NULL};
    /* started by the tests; eddy's own heartbeat timeout */
    eddy_test_cluster_opts_t o = {.tag = "rebalance", .checkpoint_interval = "500",
                                  .heartbeat_ms = "200", .heartbeat_timeout_ms = "",
                                  .coord_args = coord_args, .worker_args = worker_args};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    cr_assert(eddy_gen_lines(input, LINES, 11, &err) == 0, "%s", err.msg);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

/* The coordinator's log, then the workers'. */
static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

/* The logs contain the text `needle`. */
static bool log_says(void *needle)
{
    char *l = log_text();
    bool ok = l && strstr(l, needle);
    free(l);
    return ok;
}

static void start_coordinator_as(bool rebalance, const char *migration)
{
    eddy_err_t err = {{0}};
    const char *no[] = {"--no-rebalance", "--migration", migration, NULL};
    cr_assert(eddy_test_cluster_start_coordinator_with(cl, 0, rebalance ? no + 1 : no, &err) == 0,
              "%s", err.msg);
}

/* --migration fluid, the default */
static void start_coordinator(bool rebalance)
{
    start_coordinator_as(rebalance, "fluid");
}

static void start_worker(void)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_worker(cl, &err) >= 0, "%s", err.msg);
}

/* worker pid of worker-(i + 1) */
static pid_t worker_pid(int i)
{
    return eddy_test_cluster_worker(cl, i)->pid;
}

/* n workers are alive (or fail with the logs). */
static void expect_alive(int n)
{
    cr_assert(eddy_test_cluster_wait_workers(cl, n, false, 20000), "%d workers never registered:\n%s",
              n, log_text());
}

/* The id of the alive worker named `name` in status, 0 if none. */
static json_int_t worker_id(json_t *st, const char *name)
{
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        const char *n = json_string_value(json_object_get(w, "name"));
        if (n && !strcmp(n, name) && json_is_true(json_object_get(w, "alive")))
            return json_integer_value(json_object_get(w, "id"));
    }
    return 0;
}

static json_int_t worker_tasks(json_t *st, json_int_t id)
{
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (json_integer_value(json_object_get(w, "id")) == id)
            return json_integer_value(json_object_get(w, "tasks"));
    }
    return 0;
}

/* Instances of the wordcount job placed on worker id. */
static int instances_on(json_t *st, json_int_t id)
{
    json_t *job = eddy_test_status_job(st, "wordcount");
    int n = 0;
    size_t i, k;
    json_t *op, *inst;
    json_array_foreach(json_object_get(job, "operators"), i, op)
    {
        json_array_foreach(json_object_get(op, "instances"), k, inst)
        {
            n += json_integer_value(json_object_get(inst, "worker")) == id;
        }
    }
    return n;
}

/* Running, with a completed checkpoint; with *arg, also restored since it
 * was submitted. */
static bool running(void *arg)
{
    bool restored = arg && *(const bool *)arg;
    json_t *st = eddy_test_status(ports[0]);
    json_t *job = st ? eddy_test_status_job(st, "wordcount") : NULL;
    const char *state = job ? json_string_value(json_object_get(job, "state")) : NULL;
    bool ok = state && !strcmp(state, "running") &&
              json_integer_value(json_object_get(json_object_get(job, "last_checkpoint"), "id")) > 0 &&
              (!restored || json_integer_value(json_object_get(job, "restarts")) >= 1);
    json_decref(st);
    return ok;
}

static const char *job_state(json_t *st)
{
    json_t *job = st ? eddy_test_status_job(st, "wordcount") : NULL;
    return job ? json_string_value(json_object_get(job, "state")) : NULL;
}

static void submit_to(const char *out, const char *parallelism, const char *rate)
{
    const char *argv[] = {"--job", "wordcount", "--input", input, "--output", out,
                          "--parallelism", parallelism, "--rate", rate, NULL};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_test_cluster_submit(cl, argv, NULL, &err), 0, "%s", err.msg);
}

static void submit(const char *parallelism)
{
    submit_to(output, parallelism, RATE);
}

/* A coordinator with coord_args (NULL: none), two workers (hold_ms, may be
 * NULL: the test hook's hold of each fluid step's state), the job running
 * at `rate` lines/s with a checkpoint, then the third worker. */
static void run_until_third_joined_with(const char *const *coord_args, const char *hold_ms,
                                        const char *rate)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_coordinator_with(cl, 0, coord_args, &err) == 0, "%s", err.msg);
    if (hold_ms)
        setenv("EDDY_TEST_FLUID_HOLD_MS", hold_ms, 1); /* the workers inherit it */
    start_worker();
    start_worker();
    expect_alive(2);
    submit_to(output, "4", rate);
    if (!eddy_poll_until(running, NULL, 30000))
        cr_assert_fail("the job never ran with a completed checkpoint:\n%s", log_text());
    json_t *st = eddy_test_status(ports[0]);
    cr_assert(st);
    cr_assert_eq(instances_on(st, worker_id(st, "worker-1")) + instances_on(st, worker_id(st, "worker-2")),
                 9, "4 sources + 4 counts + 1 sink on the two workers");
    json_decref(st);
    start_worker();
    unsetenv("EDDY_TEST_FLUID_HOLD_MS");
}

static void run_until_third_joined(bool rebalance)
{
    const char *no[] = {"--no-rebalance", NULL};
    run_until_third_joined_with(rebalance ? NULL : no, NULL, RATE);
}

static void expect_finished_exactly(void)
{
    uint64_t deadline = eddy_mono_ms() + 120000;
    for (;;) {
        json_t *st = eddy_test_status(ports[0]);
        const char *s = job_state(st);
        bool done = s && (!strcmp(s, "finished") || !strcmp(s, "failed") || !strcmp(s, "cancelled"));
        bool finished = s && !strcmp(s, "finished");
        json_decref(st);
        if (done) {
            cr_assert(finished, "the job ended but did not finish:\n%s", log_text());
            break;
        }
        cr_assert_lt(eddy_mono_ms(), deadline, "the job did not finish in time:\n%s", log_text());
        eddy_nap_ms(200);
    }
    size_t gl, el;
    int same = eddy_test_same_wordcount(input, output, &gl, &el);
    cr_assert(same >= 0, "no output:\n%s", log_text());
    cr_assert(same, "output differs from the reference (%zu vs %zu bytes):\n%s", gl, el,
              log_text());
}

struct third {
    json_int_t id;
    int instances;
    json_int_t tasks;
    bool migrated;
};

/* The job's first migration record, or NULL (borrowed from st). */
static json_t *first_migration(json_t *st)
{
    json_t *rescales = json_object_get(eddy_test_status_job(st, "wordcount"), "rescales");
    json_t *r;
    size_t i;
    json_array_foreach(rescales, i, r)
    {
        const char *kind = json_string_value(json_object_get(r, "kind"));
        if (kind && !strcmp(kind, "migration"))
            return r;
    }
    return NULL;
}

/* The third worker has instances placed on it and runs tasks, and the
 * migration that moved them is recorded: the record is written when the
 * migration is done, which can be after worker-3's heartbeat already counts
 * the tasks it was given. */
static bool third_has_work(void *arg)
{
    struct third *t = arg;
    json_t *st = eddy_test_status(ports[0]);
    if (!st)
        return false;
    t->id = worker_id(st, "worker-3");
    t->instances = t->id ? instances_on(st, t->id) : 0;
    t->tasks = t->id ? worker_tasks(st, t->id) : 0;
    t->migrated = first_migration(st) != NULL;
    json_decref(st);
    return t->instances > 0 && t->tasks > 0 && t->migrated;
}

static bool migration_counted(void *arg)
{
    (void)arg;
    return eddy_test_scrape_sum(ports[1], "eddy_migrations_total{job=\"wordcount\"") >= 1 &&
           eddy_test_scrape_sum(ports[1], "eddy_migration_bytes_total{job=\"wordcount\"") > 0;
}

Test(rebalance, a_joining_worker_gets_instances_and_output_stays_exact, .init = setup,
     .fini = teardown, .timeout = 180)
{
    run_until_third_joined(true);
    uint64_t joined = eddy_mono_ms();
    struct third t = {0};
    if (!eddy_poll_until(third_has_work, &t, 30000))
        cr_assert_fail("worker-3 (id %lld) never got work: %d instances, %lld tasks, migration %s:\n%s",
                       (long long)t.id, t.instances, (long long)t.tasks,
                       t.migrated ? "recorded" : "not recorded", log_text());
    cr_log_info("worker-3 ran %lld tasks %llu ms after it was started", (long long)t.tasks,
                (unsigned long long)(eddy_mono_ms() - joined));

    json_t *st = eddy_test_status(ports[0]);
    json_t *mig = first_migration(st);
    cr_assert(mig, "no migration in the job's rescales");
    cr_assert_str_eq(json_string_value(json_object_get(mig, "operator")), "count");
    cr_assert_eq(json_integer_value(json_object_get(mig, "old_parallelism")), 4);
    cr_assert_eq(json_integer_value(json_object_get(mig, "new_parallelism")), 4);
    cr_assert_gt(json_integer_value(json_object_get(mig, "instances_moved")), 0);
    cr_assert_gt(json_integer_value(json_object_get(mig, "key_groups_moved")), 0,
                 "a moved instance carries its key groups");
    /* issue 25: moved in steps while the sources ran */
    cr_assert_str_eq(json_string_value(json_object_get(mig, "migration")), "fluid");
    cr_assert_gt(json_integer_value(json_object_get(mig, "steps")), 0);
    char want[64];
    snprintf(want, sizeof want, "worker %lld (worker-3) joined", (long long)t.id);
    const char *reason = json_string_value(json_object_get(mig, "reason"));
    cr_assert(reason && strstr(reason, want), "reason '%s' does not say '%s'", reason, want);
    json_decref(st);

    /* job counters are shown as last saved (every second) */
    cr_assert(eddy_poll_until(migration_counted, NULL, 10000),
              "/metrics counts no migration (or no eddy_migration_bytes_total)");
    /* issue 23: a migration is not a rescale in either of its counters */
    cr_assert_eq(eddy_test_scrape_sum(ports[1], "eddy_rescales_total{job=\"wordcount\""), 0);
    cr_assert_eq(eddy_test_scrape_sum(ports[1], "eddy_rescale_bytes_total{job=\"wordcount\""), 0,
                 "eddy_rescale_bytes_total counts a migration's bytes");
    char *l = log_text();
    cr_assert(strstr(l, "job wordcount: migrating count["), "no migration line in the log:\n%s", l);
    cr_assert(strstr(l, "of wordcount/count (fluid): "), "no fluid migration in the log:\n%s", l);
    for (const char *p = strstr(l, "job wordcount: migrating"); p; p = NULL) /* for the record */
        cr_log_info("%.*s", (int)strcspn(p, "\n"), p);
    for (const char *p = strstr(l, "migrated "); p; p = NULL)
        cr_log_info("%.*s", (int)strcspn(p, "\n"), p);
    free(l);
    expect_finished_exactly();
}

Test(rebalance, no_rebalance_leaves_the_joining_worker_empty, .init = setup, .fini = teardown,
     .timeout = 180)
{
    run_until_third_joined(false);
    /* sample until the job ends: the third worker never gets an instance */
    uint64_t joined_ms = 0, deadline = eddy_mono_ms() + 120000, last_running = 0;
    int samples = 0;
    for (;;) {
        json_t *st = eddy_test_status(ports[0]);
        const char *s = job_state(st);
        if (st && !joined_ms && worker_id(st, "worker-3"))
            joined_ms = eddy_mono_ms();
        if (joined_ms && s && !strcmp(s, "running")) {
            last_running = eddy_mono_ms();
            samples++;
            json_int_t id = worker_id(st, "worker-3");
            cr_assert_eq(instances_on(st, id), 0, "worker-3 got instances with --no-rebalance:\n%s",
                         log_text());
        }
        bool ended = s && strcmp(s, "running") && strcmp(s, "rescaling") && strcmp(s, "deploying") &&
                     strcmp(s, "restoring") && strcmp(s, "waiting");
        json_decref(st);
        if (ended)
            break;
        cr_assert_lt(eddy_mono_ms(), deadline, "the job did not end in time:\n%s", log_text());
        eddy_nap_ms(150);
    }
    cr_assert(joined_ms, "worker-3 never registered:\n%s", log_text());
    /* with rebalancing, worker-3 has work within ~1 s of joining (the
     * other test); here the job ran on for longer, so the flag was tested */
    cr_assert_gt(last_running, joined_ms + 2000,
                 "the job ended %llu ms after worker-3 joined: too soon to tell",
                 (unsigned long long)(last_running - joined_ms));
    cr_assert_gt(samples, 5);
    char *l = log_text();
    cr_assert(!strstr(l, "migrating"), "a migration with --no-rebalance:\n%s", l);
    free(l);
    expect_finished_exactly();
}

/* Three workers run the job at parallelism 3; worker-1 is lost (SIGKILL,
 * or SIGSTOP until it is declared dead), the job is restored on the two
 * others, then a worker joins (a new one, or worker-1 resumed, which
 * registers again under a new id and is told to drop its stale tasks) and
 * count instances migrate onto it. */
static void restore_then_join(bool stop)
{
    start_coordinator(true);
    start_worker();
    start_worker();
    start_worker();
    expect_alive(3);
    submit("3");
    if (!eddy_poll_until(running, NULL, 30000))
        cr_assert_fail("the job never ran with a completed checkpoint:\n%s", log_text());
    json_t *st = eddy_test_status(ports[0]);
    json_int_t victim = worker_id(st, "worker-1");
    cr_assert_gt(instances_on(st, victim), 0, "worker-1 runs nothing to lose");
    json_decref(st);
    cr_assert(kill(worker_pid(0), stop ? SIGSTOP : SIGKILL) == 0);
    bool restored = true;
    if (!eddy_poll_until(running, &restored, 30000))
        cr_assert_fail("the job was never restored and running:\n%s", log_text());
    if (stop)
        cr_assert(kill(worker_pid(0), SIGCONT) == 0);
    else
        start_worker();
    if (!eddy_poll_until(migration_counted, NULL, 30000))
        cr_assert_fail("no migration after the restore:\n%s", log_text());
    char *l = log_text();
    /* the migration went to the worker that joined after the restore */
    cr_assert(strstr(l, stop ? "(worker-1) joined" : "(worker-4) joined"),
              "the migration did not go to the joining worker:\n%s", l);
    if (stop) {
        cr_assert(strstr(l, "registered again as worker"), "worker-1 did not register again:\n%s", l);
        /* its stale tasks (of the attempt before the restore) stop at once */
        cr_assert(strstr(l, "was declared dead before: releasing the tasks"),
                  "the coordinator did not release worker-1's stale tasks:\n%s", l);
        cr_assert(strstr(l, "job wordcount released (restore)"),
                  "worker-1 did not drop its stale tasks:\n%s", l);
    }
    const char *marks[] = {"declared dead", "restoring from", "registered again", "releasing the tasks",
                           "released (restore)", "migrating", "migrated"};
    for (size_t k = 0; k < sizeof marks / sizeof *marks; k++) /* for the record */
        for (const char *p = strstr(l, marks[k]); p; p = NULL) {
            const char *bol = p;
            while (bol > l && bol[-1] != '\n')
                bol--;
            cr_log_info("%.*s", (int)strcspn(bol, "\n"), bol);
        }
    free(l);
    expect_finished_exactly();
}

/* A new worker joins after the restore (issue 15: such a migration once
 * lost records). */
Test(rebalance, a_migration_after_a_restore_keeps_the_output_exact, .init = setup, .fini = teardown,
     .timeout = 180)
{
    restore_then_join(false);
}

/* The lost worker was only paused: it comes back with the tasks of the
 * epoch before the restore and registers again under a new id. */
Test(rebalance, a_migration_onto_a_worker_declared_dead_keeps_the_output_exact, .init = setup,
     .fini = teardown, .timeout = 180)
{
    restore_then_join(true);
}

/* Instances of the wordcount job on worker-1..3 (0 for one not alive). */
struct spread {
    int on[3];
    json_int_t tasks[3];
};

static bool placed_on_three(void *arg)
{
    struct spread *sp = arg;
    json_t *st = eddy_test_status(ports[0]);
    const char *s = job_state(st);
    bool ok = s && !strcmp(s, "running");
    for (int i = 0; st && i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "worker-%d", i + 1);
        json_int_t id = worker_id(st, name);
        sp->on[i] = id ? instances_on(st, id) : 0;
        sp->tasks[i] = id ? worker_tasks(st, id) : 0;
        ok = ok && sp->on[i] > 0 && sp->tasks[i] > 0;
    }
    json_decref(st);
    return ok;
}

/* Issue 23: a wordcount (source and count at parallelism 2, one sink) on
 * three workers was placed 3/2/0, the third worker idle until a fourth
 * joined. Placement alone (no rebalancing) now gives each worker instances,
 * and `eddy status` shows the spread. */
Test(rebalance, a_fresh_job_gives_each_of_three_workers_instances, .init = setup, .fini = teardown,
     .timeout = 180)
{
    start_coordinator(false);
    for (int i = 0; i < 3; i++)
        start_worker();
    expect_alive(3);
    submit("2");
    struct spread sp;
    memset(&sp, 0, sizeof sp);
    if (!eddy_poll_until(placed_on_three, &sp, 30000))
        cr_assert_fail("not every worker runs the job: instances %d/%d/%d, tasks %lld/%lld/%lld:\n%s",
                       sp.on[0], sp.on[1], sp.on[2], (long long)sp.tasks[0], (long long)sp.tasks[1],
                       (long long)sp.tasks[2], log_text());
    cr_assert_eq(sp.on[0] + sp.on[1] + sp.on[2], 5, "2 sources + 2 counts + 1 sink");
    const char *argv[] = {"status", NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_test_cluster_ctl(cl, argv, 20000, &out, &err);
    cr_assert_eq(rc, 0, "eddy status exited %d: %s%s", rc, out, err);
    cr_assert(strstr(out, "spread over workers 1/2/3: 2/2/1 instances"),
              "eddy status does not show the spread 2/2/1:\n%s", out);
    cr_log_info("placed %d/%d/%d", sp.on[0], sp.on[1], sp.on[2]);
    free(out);
    free(err);
    expect_finished_exactly();
}

/* Instances of job `job` on worker id. */
static int job_instances_on(json_t *st, const char *job, json_int_t id)
{
    int n = 0;
    size_t i, k;
    json_t *op, *inst;
    json_array_foreach(json_object_get(eddy_test_status_job(st, job), "operators"), i, op)
    {
        json_array_foreach(json_object_get(op, "instances"), k, inst)
        {
            n += json_integer_value(json_object_get(inst, "worker")) == id;
        }
    }
    return n;
}

/* Every one of the four workers holds an instance of one of the jobs
 * (*idle: how many hold none). */
static bool all_four_have_work(void *arg)
{
    int *idle = arg;
    json_t *st = eddy_test_status(ports[0]);
    *idle = 4;
    for (int i = 1; st && i <= 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "worker-%d", i);
        json_int_t id = worker_id(st, name);
        *idle -= id && job_instances_on(st, "wordcount", id) + job_instances_on(st, "wordcount-2", id) > 0;
    }
    json_decref(st);
    return *idle == 0;
}

static bool both_running(void *arg)
{
    (void)arg;
    json_t *st = eddy_test_status(ports[0]);
    bool ok = true;
    const char *ids[] = {"wordcount", "wordcount-2"};
    for (int i = 0; i < 2; i++) {
        json_t *job = st ? eddy_test_status_job(st, ids[i]) : NULL;
        const char *s = job ? json_string_value(json_object_get(job, "state")) : NULL;
        ok = ok && s && !strcmp(s, "running");
    }
    json_decref(st);
    return ok;
}

/* Issue 23: rebalancing covers a worker that joined before the job. Four
 * workers, two jobs of 3 instances each (parallelism 1): each is placed on
 * the workers with ids 1-3, and the fourth, registered before both, ran
 * nothing (only a worker that joined after a job's placement counted). Now
 * the idle worker gets instances by a migration, and the output stays
 * exact. */
Test(rebalance, an_idle_worker_that_joined_before_the_jobs_gets_work, .init = setup, .fini = teardown,
     .timeout = 180)
{
    start_coordinator_as(true, "sudden"); /* the other tests' migrations are fluid */
    for (int i = 0; i < 4; i++)
        start_worker();
    expect_alive(4);
    char *output2 = eddy_test_cluster_path(cl, "counts-2.tsv");
    for (int k = 0; k < 2; k++)
        submit_to(k ? output2 : output, "1", "4000");
    cr_assert(eddy_poll_until(both_running, NULL, 30000), "the jobs never ran:\n%s", log_text());
    int idle = 0;
    if (!eddy_poll_until(all_four_have_work, &idle, 30000))
        cr_assert_fail("%d worker(s) never got an instance:\n%s", idle, log_text());
    char *l = log_text();
    const char *m = strstr(l, ": migrating ");
    cr_assert(m, "no migration in the log:\n%s", l);
    cr_log_info("%.*s", (int)strcspn(m, "\n"), m);
    free(l);
    /* --migration sudden keeps rebalancing on the paused path */
    cr_assert(eddy_poll_until(log_says, "migrated ", 30000), "no migration ended:\n%s", log_text());
    l = log_text();
    const char *done = strstr(l, "migrated ");
    cr_assert(done && strstr(done, ": paused ") && !strstr(l, "(fluid)"),
              "not a sudden migration:\n%s", l);
    free(l);
    expect_finished_exactly();
}

/* The parallelism of wordcount's count in status, -1 if unknown. */
static json_int_t count_parallelism(json_t *st)
{
    size_t i;
    json_t *op;
    json_array_foreach(json_object_get(eddy_test_status_job(st, "wordcount"), "operators"), i, op)
    {
        const char *name = json_string_value(json_object_get(op, "name"));
        if (name && !strcmp(name, "count"))
            return json_integer_value(json_object_get(op, "parallelism"));
    }
    return -1;
}

/* Issue 25: a fluid migration that fails half-way restores the job from its
 * last complete checkpoint, at the stage's own parallelism (the instances
 * the migration added go), and the output stays exact. Every old owner
 * holds a step's state back 1.5 s (EDDY_TEST_FLUID_HOLD_MS, read by the
 * workers), steps of 32 key groups (one per moved instance), and the
 * worker that joined, where the new instances run, is killed (-9) in the
 * middle of the first step. */
Test(rebalance, a_fluid_migration_cut_short_by_a_kill_restores_exactly, .init = setup,
     .fini = teardown, .timeout = 180)
{
    const char *args[] = {"--migration-step-key-groups", "32", NULL};
    /* ~13 s of input: the migration starts and is cut short long before
     * its end, also on a loaded machine under ASan */
    run_until_third_joined_with(args, "1500", "6000");
    if (!eddy_poll_until(log_says, "fluid migration of ", 30000))
        cr_assert_fail("no fluid migration started:\n%s", log_text());
    eddy_nap_ms(300); /* into the first step's hold */
    cr_assert(kill(worker_pid(2), SIGKILL) == 0);
    bool restored = true;
    if (!eddy_poll_until(running, &restored, 30000))
        cr_assert_fail("the job was never restored and running:\n%s", log_text());
    json_t *st = eddy_test_status(ports[0]);
    cr_assert_eq(count_parallelism(st), 4, "count does not have its own parallelism:\n%s",
                 log_text());
    cr_assert_null(first_migration(st), "the interrupted migration was recorded as done");
    json_decref(st);
    char *l = log_text();
    cr_assert(!strstr(l, "migrated "), "the interrupted migration completed:\n%s", l);
    const char *marks[] = {"migrating count[", "fluid migration of ", "restoring from checkpoint"};
    for (size_t k = 0; k < sizeof marks / sizeof *marks; k++) { /* for the record */
        const char *p = strstr(l, marks[k]);
        cr_assert(p, "no '%s' in the log:\n%s", marks[k], l);
        cr_log_info("%.*s", (int)strcspn(p, "\n"), p);
    }
    free(l);
    expect_finished_exactly();
}
