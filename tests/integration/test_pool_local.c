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

#include "tests/support/ctl_proc.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"

#define WORDS 4

typedef struct pool_run {
    char dir[4096], input[4200], output[4200], log[4200], coordinator[64];
    json_t *decisions;
    uint32_t max_alive, last_alive;
    bool pool_worker_ran_instances;
    bool saw_left;          /* status showed a worker that left (said LEAVE) */
    bool kill_one;          /* SIGKILL a pool worker once it runs an instance */
    char killed[64];
    int exit_status;
} pool_run_t;

static void poll_status(void *arg)
{
    pool_run_t *r = arg;
    char *argv[] = {EDDY_BINARY, "status", "--json", "--coordinator", r->coordinator, NULL};
    char *out = NULL;
    if (ctl_run_capture(argv, 5000, &out) == 0) {
        json_t *doc = json_loads(out, 0, NULL);
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
    }
    free(out);
    json_t *d = ctl_scaling_decisions(r->coordinator);
    if (d && json_array_size(d) >= json_array_size(r->decisions)) {
        json_decref(r->decisions);
        r->decisions = d;
    } else {
        json_decref(d);
    }
}

static void run(pool_run_t *r, uint64_t lines, const char *rate, const char *cost_us,
                const char *cost_mode, const char *controller_flags)
{
    eddy_err_t err = {{0}};
    char *dir = eddy_test_mkdtemp("pool-local", &err);
    cr_assert_not_null(dir, "%s", err.msg);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    free(dir);
    snprintf(r->input, sizeof r->input, "%s/input.txt", r->dir);
    snprintf(r->output, sizeof r->output, "%s/counts.tsv", r->dir);
    snprintf(r->log, sizeof r->log, "%s/local.log", r->dir);
    ctl_write_generated_input(r->input, lines, WORDS);
    int cport = eddy_test_free_port(&err);
    cr_assert(cport > 0, "%s", err.msg);
    snprintf(r->coordinator, sizeof r->coordinator, "tcp://127.0.0.1:%d", cport);
    char lines_s[32], cport_s[16], words_s[8];
    snprintf(lines_s, sizeof lines_s, "%llu", (unsigned long long)lines);
    snprintf(cport_s, sizeof cport_s, "%d", cport);
    snprintf(words_s, sizeof words_s, "%d", WORDS);
    char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--pool", "--max-workers", "3",
                    "--job", "wordcount", "--generate", "--lines", lines_s, "--words-per-line",
                    words_s, "--rate", (char *)rate, "--cost-us", (char *)cost_us,
                    (char *)cost_mode, "--parallelism", "1", "--controller-flags",
                    (char *)controller_flags, "--control-port", cport_s, "--http-port", "0",
                    "--output", r->output, "--quiet", NULL};
    r->decisions = json_array();
    pid_t pid = ctl_spawn(argv, r->log);
    cr_assert(pid > 0);
    int status = -1;
    bool exited = ctl_wait_polling(pid, 100000, 300, poll_status, r, &status);
    r->exit_status = status;
    cr_assert(exited, "eddy local did not finish within 100 s (log: %s)", r->log);
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
    if (!getenv("EDDY_TEST_KEEP"))
        eddy_test_rm_rf(r->dir);
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
