/* test_pool_local.c - the elastic worker pool's local backend end to end:
 * `eddy local --workers 1 --pool --max-workers 3 --autoscale` runs the
 * load of test_autoscale.c (count costs 1 ms of sleep per word; 1600
 * words/s want 3 count instances), so the controller needs 3 slots where
 * one worker offers 1: the pool starts two `eddy worker` processes, the
 * scale-up waits for them and puts the new instances there. When the rate
 * drops, count scales down, the pool's workers run nothing, and after the
 * idle grace the pool stops them: back to --workers. The test watches
 * `eddy status --json` and the decision log (`eddy scaling --json`, where
 * pool changes are decisions of operator "pool"), and checks the output
 * is exact.
 *
 * Timeline (quiet machine): the pool grows at ~2-3 s, count goes to 3 at
 * ~5 s, the rate drops at 12 s, count goes back to 1 at ~15 s, the pool
 * releases its two workers by ~23 s, the input ends at ~37 s. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/cluster.h"
#include "tests/support/ctl_proc.h"
#include "tests/support/proc.h"

#define WORDS 4

typedef struct pool_run {
    eddy_test_cluster_t *cl;
    char *input, *output, *log;
    json_t *decisions;
    uint32_t max_alive, last_alive;
    bool pool_worker_ran_instances;
    bool saw_left;          /* status showed a worker that left (said LEAVE) */
    bool kill_one;          /* SIGKILL a pool worker once it runs an instance */
    const char *workers;    /* eddy local --workers (NULL: 1) */
    bool pool_worker_seen;  /* a worker named eddy-pool-N was alive */
    char killed[64];
    int exit_status;
} pool_run_t;

static void poll_status(void *arg)
{
    pool_run_t *r = arg;
    json_t *doc = eddy_test_cluster_status(r->cl);
    size_t i;
    json_t *w;
    uint32_t alive = 0;
    json_array_foreach(json_object_get(doc, "workers"), i, w)
    {
        const char *state = json_string_value(json_object_get(w, "state"));
        if (state && !strcmp(state, "left"))
            r->saw_left = true;
        if (!json_is_true(json_object_get(w, "alive")))
            continue;
        alive++;
        const char *name = json_string_value(json_object_get(w, "name"));
        if (name && !strncmp(name, "eddy-pool-", 10))
            r->pool_worker_seen = true;
        if (name && !strncmp(name, "eddy-pool-", 10) &&
            json_integer_value(json_object_get(w, "tasks")) > 0) {
            r->pool_worker_ran_instances = true;
            pid_t pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
            if (r->kill_one && !r->killed[0] && pid > 0) {
                /* a worker of the pool's (a grandchild of this test) */
                cr_assert_eq(kill(pid, SIGKILL), 0);
                snprintf(r->killed, sizeof r->killed, "%s", name);
            }
        }
    }
    if (doc) {
        r->last_alive = alive;
        if (alive > r->max_alive)
            r->max_alive = alive;
    }
    json_decref(doc);
    ctl_keep_decisions(eddy_test_cluster_url(r->cl, 0), &r->decisions);
}

static void run(pool_run_t *r, uint64_t lines, const char *rate, const char *cost_us,
                const char *cost_mode, const char *controller_flags)
{
    eddy_err_t err = {{0}};
    /* eddy's own checkpoint and heartbeat timing */
    eddy_test_cluster_opts_t o = {.tag = "pool-local", .workers = r->workers ? atoi(r->workers) : 1,
                                  .checkpoint_interval = "", .heartbeat_ms = "",
                                  .heartbeat_timeout_ms = ""};
    r->cl = eddy_test_cluster_new(&o, &err);
    cr_assert_not_null(r->cl, "%s", err.msg);
    r->input = eddy_test_cluster_path(r->cl, "input.txt");
    r->output = eddy_test_cluster_path(r->cl, "counts.tsv");
    r->log = eddy_test_cluster_path(r->cl, "local.log");
    ctl_write_generated_input(r->input, lines, WORDS);
    char lines_s[32], words_s[8];
    snprintf(lines_s, sizeof lines_s, "%llu", (unsigned long long)lines);
    snprintf(words_s, sizeof words_s, "%d", WORDS);
    const char *argv[] = {"--pool", "--max-workers", r->workers ? "5" : "3", "--job", "wordcount",
                          "--generate", "--lines", lines_s, "--words-per-line", words_s, "--rate",
                          rate, "--cost-us", cost_us, cost_mode, "--parallelism", "1",
                          "--controller-flags", controller_flags, "--output", r->output,
                          "--quiet", NULL};
    r->decisions = json_array();
    cr_assert(eddy_test_cluster_start_local(r->cl, argv, &err) == 0, "%s", err.msg);
    r->exit_status = eddy_test_cluster_wait_local(r->cl, 100000, 300, poll_status, r);
    cr_assert(r->exit_status >= 0, "eddy local did not finish within 100 s (log: %s)", r->log);
}

/* The pool's decisions: how many grew and shrank, and the last shrink's
 * worker count. */
static void pool_decisions(const pool_run_t *r, int *ups, int *downs, int64_t *last_down_to,
                           char *seen, size_t size)
{
    *ups = *downs = 0;
    *last_down_to = -1;
    size_t used = 0, i;
    seen[0] = '\0';
    json_t *d;
    json_array_foreach(r->decisions, i, d)
    {
        if (strcmp(json_string_value(json_object_get(d, "operator")) ?: "", "pool"))
            continue;
        const char *action = json_string_value(json_object_get(d, "action"));
        if (action && !strcmp(action, "scale_up"))
            (*ups)++;
        if (action && !strcmp(action, "scale_down")) {
            (*downs)++;
            *last_down_to = json_integer_value(json_object_get(d, "new_parallelism"));
        }
        if (used < size)
            used += (size_t)snprintf(seen + used, size - used, "[%s] ",
                                     json_string_value(json_object_get(d, "reason")));
    }
}

static void assert_exact(const pool_run_t *r)
{
    cr_assert_eq(r->exit_status, 0, "eddy local exited %d (log: %s)", r->exit_status, r->log);
    char why[1024];
    cr_assert(ctl_compare_counts(r->input, r->output, why, sizeof why) == 0, "%s", why);
}

static void finish(pool_run_t *r)
{
    json_decref(r->decisions);
    eddy_test_cluster_destroy(&r->cl);
}

Test(pool_local, grows_with_the_load_and_shrinks_when_it_drops, .timeout = 150)
{
    pool_run_t r = {0};
    /* 400 lines/s (1600 words/s: 3 instances) for 12 s, then 50 lines/s
     * (one instance is plenty) for 35 s: time for both releases (each after
     * 4 s idle, 2 s apart) also when a loaded machine delays decisions */
    run(&r, 4800 + 1750, "0:400,12:50", "1000", "--cost-sleep",
        "--interval-ms 1000 --warmup-ms 2000 --cooldown-ms 3000 --target-utilisation 0.8 "
        "--scale-down-confirmations 2 --allow-oversubscribe --pool-idle-ms 4000 "
        "--pool-cooldown-ms 2000");
    int ups, downs;
    int64_t down_to;
    char seen[4096];
    pool_decisions(&r, &ups, &downs, &down_to, seen, sizeof seen);
    cr_assert_eq(r.max_alive, 3, "the pool never had 3 live workers (max %u); pool decisions: %s (log %s)",
                 r.max_alive, seen, r.log);
    cr_assert(r.pool_worker_ran_instances, "no instance ever ran on a pool worker (log %s)", r.log);
    cr_assert_geq(ups, 1, "no pool growth recorded: %s (log %s)", seen, r.log);
    cr_assert(strstr(seen, "pool: +2 workers (count needs 3 slots, 1 live worker x 1 slot)") ||
                  strstr(seen, "pool: +1 worker (count needs 3 slots"),
              "the growth does not say why: %s", seen);
    /* Both pool workers go once count is back at one instance; under the
     * sanitizers the input can end before the controller's confirmations
     * bring it there, so one release is what every run must show. */
    cr_assert_geq(downs, 1, "the pool released no worker when the load dropped: %s (log %s)", seen,
                  r.log);
    cr_assert_lt(down_to, 3, "the pool did not shrink: %s (log %s)", seen, r.log);
    /* a released worker says it leaves: shown as such, not as dead */
    cr_assert(r.saw_left, "status never showed a released pool worker as left (log %s)", r.log);
    assert_exact(&r);
    finish(&r);
}

/* The CPU-bound case of issue 15 (test_autoscale.c's last test) with the
 * pool: count cannot get more instances than the machine's cores, and the
 * decision says the target is infeasible; the pool adds workers instead
 * (on one machine they bring no cores, so count stays within them). */
Test(pool_local, cpu_bound_operator_gets_workers_instead_of_instances, .timeout = 150)
{
    pool_run_t r = {0};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_gt(cores, 0);
    run(&r, 6000, "5000", "200", "--quiet",
        "--interval-ms 1000 --warmup-ms 2000 --cooldown-ms 3000 --target-utilisation 0.8 "
        "--pool-idle-ms 4000 --pool-cooldown-ms 2000");
    int ups, downs;
    int64_t down_to;
    char seen[4096];
    pool_decisions(&r, &ups, &downs, &down_to, seen, sizeof seen);
    bool infeasible = false;
    size_t i;
    json_t *d;
    json_array_foreach(r.decisions, i, d)
    {
        const char *op = json_string_value(json_object_get(d, "operator"));
        const char *reason = json_string_value(json_object_get(d, "reason"));
        if (!op || strcmp(op, "count"))
            continue;
        if (json_is_true(json_object_get(d, "applied")))
            cr_assert_leq(json_integer_value(json_object_get(d, "new_parallelism")), cores,
                          "count got more instances than the %ld cores: %s", cores, reason);
        if (json_is_true(json_object_get(d, "infeasible")) && reason && strstr(reason, "infeasible: target "))
            infeasible = true;
    }
    cr_assert(infeasible, "no decision said the target is infeasible (log %s)", r.log);
    cr_assert_geq(ups, 1, "the pool added no worker: %s (log %s)", seen, r.log);
    cr_assert(strstr(seen, "pool: +") && strstr(seen, "count needs"), "%s", seen);
    cr_assert_eq(r.max_alive, 3, "max %u live workers; pool: %s (log %s)", r.max_alive, seen, r.log);
    assert_exact(&r);
    finish(&r);
}

/* A pool worker killed while the job needs it is replaced by the pool;
 * the job recovers and its output is exact. */
Test(pool_local, a_killed_pool_worker_is_replaced, .timeout = 150)
{
    pool_run_t r = {.kill_one = true};
    run(&r, 5000, "400", "1000", "--cost-sleep",
        "--interval-ms 1000 --warmup-ms 2000 --cooldown-ms 3000 --target-utilisation 0.8 "
        "--allow-oversubscribe --pool-idle-ms 4000 --pool-cooldown-ms 2000");
    int ups, downs;
    int64_t down_to;
    char seen[4096];
    pool_decisions(&r, &ups, &downs, &down_to, seen, sizeof seen);
    cr_assert(r.killed[0], "no pool worker ever ran an instance to kill (log %s)", r.log);
    cr_assert_geq(ups, 2, "no replacement after %s was killed: %s (log %s)", r.killed, seen, r.log);
    cr_assert(strstr(seen, "pool: +1 worker (count needs 3 slots, 2 live workers x 1 slot)"),
              "the replacement does not say why: %s (log %s)", seen, r.log);
    assert_exact(&r);
    finish(&r);
}

/* Issue 23: the pool must not start workers while the cluster's own are
 * still registering. Three workers and --min-workers 3: the pool starts
 * none (eddy local gives the controller --pool-expect-workers 3; its start
 * wait ends once they are alive), not even in the first round, where it
 * used to count the one or two registered so far. */
Test(pool_local, min_workers_met_by_the_cluster_workers_starts_none, .timeout = 150)
{
    pool_run_t r = {.workers = "3"};
    run(&r, 3000, "500", "0", "--quiet",
        "--interval-ms 500 --warmup-ms 2000 --cooldown-ms 3000 --min-workers 3");
    int ups, downs;
    int64_t down_to;
    char seen[4096];
    pool_decisions(&r, &ups, &downs, &down_to, seen, sizeof seen);
    cr_assert_eq(ups, 0, "the pool grew with 3 workers and --min-workers 3: %s (log %s)", seen, r.log);
    cr_assert(!r.pool_worker_seen, "a pool worker registered (log %s)", r.log);
    cr_assert_eq(r.max_alive, 3, "max %u live workers (log %s)", r.max_alive, r.log);
    assert_exact(&r);
    finish(&r);
}

/* The compose order of issue 23, where the workers register after the
 * pool's first round: a coordinator, then `eddy controller --pool local
 * --min-workers 3 --pool-expect-workers 3`, then (once the pool has made a
 * first decision, seen in its debug log) three workers. The pool used to
 * count what had registered so far and start workers at once; now it
 * waits for the three and starts none. The wait is over for good then: a
 * worker killed afterwards is replaced. */
typedef struct late_cluster {
    eddy_test_cluster_t *cl;
    char *ctl_log;
    int port;
} late_cluster_t;

static bool log_has(const char *path, const char *needle)
{
    size_t n;
    char *text = eddy_read_file(path, &n);
    bool yes = text && strstr(text, needle);
    free(text);
    return yes;
}

static bool pool_decided(void *arg)
{
    return log_has(((late_cluster_t *)arg)->ctl_log, "pool: ");
}

/* Alive workers in status; *pool_alive: those named eddy-pool-N. */
static int alive_workers(int port, int *pool_alive)
{
    json_t *st = eddy_test_status(port);
    int n = 0;
    *pool_alive = 0;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (!json_is_true(json_object_get(w, "alive")))
            continue;
        n++;
        const char *name = json_string_value(json_object_get(w, "name"));
        *pool_alive += name && !strncmp(name, "eddy-pool-", 10);
    }
    json_decref(st);
    return st ? n : -1;
}

/* worker-1..3 (not the pool's) are alive */
static bool three_alive(void *arg)
{
    int pool_alive;
    return alive_workers(((late_cluster_t *)arg)->port, &pool_alive) - pool_alive == 3;
}

static bool pool_worker_alive(void *arg)
{
    int pool_alive;
    alive_workers(((late_cluster_t *)arg)->port, &pool_alive);
    return pool_alive >= 1;
}

Test(pool_local, workers_registering_after_the_pool_started_are_waited_for, .timeout = 120)
{
    eddy_err_t err = {{0}};
    /* eddy's own timing; the workers wait for their coordinator 30 s */
    static const char *const wargs[] = {"--register-timeout-ms", "30000", NULL};
    eddy_test_cluster_opts_t o = {.tag = "pool-late", .coordinators = 1, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = "",
                                  .worker_args = wargs};
    eddy_test_cluster_t *cl = eddy_test_cluster_new(&o, &err);
    cr_assert_not_null(cl, "%s", err.msg);
    late_cluster_t c = {cl, eddy_test_cluster_path(cl, "controller.log"),
                        eddy_test_cluster_port(cl, 0)};
    char *clog = eddy_test_cluster_coordinator_log(cl, 0);
    eddy_proc_t ctl = {0};
    /* the NONE decisions (waiting) are logged at debug level */
    setenv("EDDY_LOG_LEVEL", "debug", 1);
    const char *pargv[] = {"controller", "--interval-ms", "300", "--pool", "local",
                           "--min-workers", "3", "--max-workers", "5", "--pool-expect-workers",
                           "3", "--pool-snapshot-dir", eddy_test_cluster_path(cl, "snapshots"),
                           NULL};
    int rc = eddy_test_cluster_ctl_start(cl, pargv, &ctl, NULL, c.ctl_log, &err);
    unsetenv("EDDY_LOG_LEVEL");
    cr_assert(rc == 0, "%s", err.msg);
    bool decided = eddy_poll_until(pool_decided, &c, 20000);
    for (int i = 0; decided && i < 3; i++)
        cr_assert(eddy_test_cluster_start_worker(cl, &err) >= 0, "%s", err.msg);
    bool three = decided && eddy_poll_until(three_alive, &c, 30000);
    /* the pool decides every round: what it did before the three were
     * there is in its log by now */
    bool started_early = log_has(c.ctl_log, "pool: started worker");
    size_t n;
    char *text = eddy_read_file(c.ctl_log, &n);
    const char *first = text ? strstr(text, "pool: ") : NULL;
    char first_line[300] = "";
    if (first)
        snprintf(first_line, sizeof first_line, "%.*s", (int)strcspn(first, "\n"), first);
    free(text);
    /* once they are there, a lost one is replaced at once */
    bool replaced = false;
    if (three && !started_early) {
        eddy_proc_kill(eddy_test_cluster_worker(cl, 2), 0);
        replaced = eddy_poll_until(pool_worker_alive, &c, 40000);
    }
    for (int i = 0; i < eddy_test_cluster_n_workers(cl); i++)
        eddy_proc_kill(eddy_test_cluster_worker(cl, i), 2000);
    eddy_proc_kill(&ctl, 5000); /* stops the pool's workers */
    eddy_proc_kill(eddy_test_cluster_coordinator(cl, 0), 3000);
    cr_assert(decided, "the pool never decided anything (log %s)", c.ctl_log);
    cr_assert(three, "the three workers never registered (log %s)", clog);
    cr_assert(!started_early, "the pool started workers while the three registered; first: '%s' (log %s)",
              first_line, c.ctl_log);
    cr_assert(strstr(first_line, "expected workers"), "the first decision does not say it waits: '%s'",
              first_line);
    cr_assert(replaced, "a worker killed after the start wait was not replaced (log %s)", c.ctl_log);
    eddy_test_cluster_destroy(&cl);
}
