/* test_pool_policy.c - the worker pool's policy (controller/pool.h) driven
 * through simulated time: a little cluster of named workers, some started
 * by the pool, with the instances each runs. */
#include <criterion/criterion.h>
#include <string.h>

#include "controller/pool.h"

typedef struct cluster {
    eddy_pool_worker_t workers[16];
    size_t n_workers;
    char owned[16][EDDY_POOL_NAME_MAX];
    size_t n_owned;
} cluster_t;

static void add_worker(cluster_t *c, const char *name, uint32_t tasks, bool owned)
{
    c->workers[c->n_workers++] = (eddy_pool_worker_t){.name = name, .tasks = tasks};
    if (owned)
        snprintf(c->owned[c->n_owned++], EDDY_POOL_NAME_MAX, "%s", name);
}

static void start_owned(cluster_t *c, const char *name)
{
    snprintf(c->owned[c->n_owned++], EDDY_POOL_NAME_MAX, "%s", name);
}

static void set_tasks(cluster_t *c, const char *name, uint32_t tasks)
{
    for (size_t i = 0; i < c->n_workers; i++)
        if (!strcmp(c->workers[i].name, name))
            c->workers[i].tasks = tasks;
}

static void remove_worker(cluster_t *c, const char *name)
{
    for (size_t i = 0; i < c->n_workers; i++)
        if (!strcmp(c->workers[i].name, name))
            c->workers[i] = c->workers[--c->n_workers];
    for (size_t i = 0; i < c->n_owned; i++)
        if (!strcmp(c->owned[i], name))
            memcpy(c->owned[i], c->owned[--c->n_owned], EDDY_POOL_NAME_MAX);
}

static eddy_pool_demand_t demand(uint32_t slots)
{
    eddy_pool_demand_t d = {.known = true, .slots = slots};
    snprintf(d.job, sizeof d.job, "wc");
    snprintf(d.operator_name, sizeof d.operator_name, "count");
    return d;
}

static eddy_pool_config_t config(void)
{
    eddy_pool_config_t c = eddy_pool_config_default();
    c.min_workers = 1;
    c.max_workers = 3;
    c.cooldown_ms = 5000;
    c.idle_grace_ms = 10000;
    c.start_timeout_ms = 30000;
    c.start_wait_ms = 0; /* the start wait has tests of its own */
    return c;
}

static void decide(eddy_pool_policy_t *p, int64_t now, const eddy_pool_demand_t *d, cluster_t *c,
                   eddy_pool_decision_t *out)
{
    eddy_pool_policy_decide(p, now, d, c->workers, c->n_workers,
                            (const char(*)[EDDY_POOL_NAME_MAX])c->owned, c->n_owned, out);
}

Test(pool_policy, config_is_checked)
{
    eddy_err_t err = {{0}};
    eddy_pool_config_t c = config();
    c.min_workers = 4;
    cr_assert_null(eddy_pool_policy_new(&c, &err));
    cr_assert(strstr(err.msg, "--min-workers"), "%s", err.msg);
    c = config();
    c.max_workers = 0;
    cr_assert_null(eddy_pool_policy_new(&c, &err));
    c = config();
    c.slots_per_worker = 0;
    cr_assert_null(eddy_pool_policy_new(&c, &err));
}

Test(pool_policy, grows_by_the_slots_needed_and_says_why)
{
    eddy_pool_config_t cfg = config();
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "worker-1", 2, false);
    add_worker(&c, "worker-2", 1, false);
    eddy_pool_demand_t d = demand(3);
    eddy_pool_decision_t out;
    decide(p, 1000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_GROW);
    cr_assert_eq(out.grow, 1);
    cr_assert_str_eq(out.reason, "pool: +1 worker (count needs 3 slots, 2 live workers x 1 slot)");
    cr_assert_str_eq(out.job, "wc");
    /* started, not registered yet: no second request */
    start_owned(&c, "pool-1");
    decide(p, 2000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "%s", out.reason);
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, never_past_max_workers)
{
    eddy_pool_config_t cfg = config();
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "worker-1", 1, false);
    eddy_pool_demand_t d = demand(8);
    eddy_pool_decision_t out;
    decide(p, 0, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_GROW);
    cr_assert_eq(out.grow, 2, "max 3 workers, 1 live: +2, got +%u", out.grow);
    cr_assert(strstr(out.reason, "capped by --max-workers"), "%s", out.reason);
    add_worker(&c, "pool-1", 0, true);
    add_worker(&c, "pool-2", 0, true);
    decide(p, 1000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE);
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, slots_per_worker_divide_the_need)
{
    eddy_pool_config_t cfg = config();
    cfg.slots_per_worker = 2;
    cfg.max_workers = 8;
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "worker-1", 2, false);
    eddy_pool_demand_t d = demand(5);
    eddy_pool_decision_t out;
    decide(p, 0, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_GROW);
    cr_assert_eq(out.grow, 2, "5 slots at 2 per worker = 3 workers");
    cr_assert(strstr(out.reason, "1 live worker x 2 slots"), "%s", out.reason);
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, replaces_a_dead_worker_below_min_at_once)
{
    eddy_pool_config_t cfg = config();
    cfg.min_workers = 2;
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "pool-1", 1, true);
    add_worker(&c, "pool-2", 1, true);
    eddy_pool_decision_t out;
    decide(p, 0, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "%s", out.reason);
    remove_worker(&c, "pool-2"); /* killed: gone from the coordinator and the backend */
    decide(p, 1000, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_GROW);
    cr_assert_eq(out.grow, 1);
    cr_assert(strstr(out.reason, "--min-workers 2"), "%s", out.reason);
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, releases_only_idle_pool_workers_after_the_grace)
{
    eddy_pool_config_t cfg = config();
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "worker-1", 1, false);
    add_worker(&c, "pool-1", 1, true);
    add_worker(&c, "pool-2", 1, true);
    eddy_pool_demand_t d = demand(3);
    eddy_pool_decision_t out;
    decide(p, 0, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE);
    /* scaled down to 1: pool-2 empties at once, pool-1 later */
    d = demand(1);
    set_tasks(&c, "pool-2", 0);
    decide(p, 1000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "the surplus is new: %s", out.reason);
    decide(p, 10999, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "grace not over: %s", out.reason);
    decide(p, 11000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_SHRINK, "%s", out.reason);
    cr_assert_str_eq(out.release, "pool-2");
    cr_assert(strstr(out.reason, "pool: -1 worker (pool-2 idle for 10 s"), "%s", out.reason);
    remove_worker(&c, "pool-2");
    /* pool-1 still runs an instance: it stays, and worker-1 is not the pool's */
    set_tasks(&c, "worker-1", 0);
    decide(p, 30000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "%s", out.reason);
    set_tasks(&c, "pool-1", 0);
    decide(p, 31000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "pool-1 just emptied: %s", out.reason);
    decide(p, 41000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_SHRINK, "%s", out.reason);
    cr_assert_str_eq(out.release, "pool-1");
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, a_busy_worker_is_never_released_and_min_holds)
{
    eddy_pool_config_t cfg = config();
    cfg.min_workers = 2;
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "pool-1", 0, true);
    add_worker(&c, "pool-2", 0, true);
    eddy_pool_demand_t d = demand(1);
    eddy_pool_decision_t out;
    for (int64_t t = 0; t < 100000; t += 1000) {
        decide(p, t, &d, &c, &out);
        cr_assert_eq(out.action, EDDY_POOL_NONE, "at min 2: %s", out.reason);
    }
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, cooldown_after_a_release_holds_growth_back)
{
    eddy_pool_config_t cfg = config();
    cfg.idle_grace_ms = 0;
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "worker-1", 1, false);
    add_worker(&c, "pool-1", 0, true);
    eddy_pool_demand_t d = demand(1);
    eddy_pool_decision_t out;
    decide(p, 0, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_SHRINK, "%s", out.reason);
    remove_worker(&c, "pool-1");
    d = demand(2);
    decide(p, 4999, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE);
    cr_assert(strstr(out.reason, "cooldown"), "%s", out.reason);
    decide(p, 5000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_GROW, "%s", out.reason);
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, a_worker_that_never_registers_is_stopped)
{
    eddy_pool_config_t cfg = config();
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "worker-1", 1, false);
    start_owned(&c, "pool-1");
    eddy_pool_demand_t d = demand(2);
    eddy_pool_decision_t out;
    decide(p, 0, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "%s", out.reason);
    decide(p, 30000, &d, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_SHRINK);
    cr_assert_str_eq(out.release, "pool-1");
    cr_assert(strstr(out.reason, "did not register"), "%s", out.reason);
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, without_demand_only_the_bounds_count)
{
    eddy_pool_config_t cfg = config();
    cfg.idle_grace_ms = 0;
    cfg.cooldown_ms = 0;
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "worker-1", 0, false);
    add_worker(&c, "pool-1", 0, true);
    eddy_pool_decision_t out;
    decide(p, 0, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "no demand measured: keep what runs: %s", out.reason);
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, names_are_unique)
{
    eddy_pool_config_t cfg = config();
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    char a[32], b[32];
    eddy_pool_policy_next_name(p, "pool", a, sizeof a);
    eddy_pool_policy_next_name(p, "pool", b, sizeof b);
    cr_assert_str_eq(a, "pool-1");
    cr_assert_str_eq(b, "pool-2");
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, decision_json_is_a_log_entry)
{
    eddy_pool_decision_t d = {.action = EDDY_POOL_GROW, .live = 2, .grow = 1, .target = 3};
    snprintf(d.job, sizeof d.job, "wc");
    snprintf(d.reason, sizeof d.reason, "pool: +1 worker (count needs 3 slots, 2 live workers x 1 slot)");
    json_t *doc = eddy_pool_decision_to_json(&d, 1700000000000);
    cr_assert_not_null(doc);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "operator")), "pool");
    cr_assert_str_eq(json_string_value(json_object_get(doc, "kind")), "pool");
    cr_assert_str_eq(json_string_value(json_object_get(doc, "action")), "scale_up");
    cr_assert_eq(json_integer_value(json_object_get(doc, "old_parallelism")), 2);
    cr_assert_eq(json_integer_value(json_object_get(doc, "new_parallelism")), 3);
    cr_assert(json_is_true(json_object_get(doc, "applied")));
    cr_assert(json_is_null(json_object_get(json_object_get(doc, "rates"), "target_input_rate")));
    json_decref(doc);
}

/* Issue 23: compose's three workers were still registering when the pool
 * made its first decision; it saw one live worker and started two more
 * where --min-workers was 3. It now waits for them. */
Test(pool_policy, at_start_waits_for_the_cluster_workers_to_register)
{
    eddy_pool_config_t cfg = config();
    cfg.min_workers = 3;
    cfg.max_workers = 6;
    cfg.start_wait_ms = 15000;
    cfg.expect_workers = 3;
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "worker-1", 0, false);
    eddy_pool_decision_t out;
    decide(p, 100000, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "grew with 1 of 3 expected workers: %s", out.reason);
    cr_assert(strstr(out.reason, "3 expected workers"), "%s", out.reason);
    add_worker(&c, "worker-2", 0, false);
    decide(p, 102000, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "%s", out.reason);
    add_worker(&c, "worker-3", 0, false);
    decide(p, 103000, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "3 live, --min-workers 3: %s", out.reason);
    /* the wait is over for good: a worker lost later is replaced at once */
    remove_worker(&c, "worker-3");
    decide(p, 104000, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_GROW, "%s", out.reason);
    cr_assert_eq(out.grow, 1);
    eddy_pool_policy_destroy(&p);
}

Test(pool_policy, the_start_wait_ends_after_its_window)
{
    eddy_pool_config_t cfg = config();
    cfg.min_workers = 3;
    cfg.max_workers = 6;
    cfg.start_wait_ms = 15000; /* no expected count: the whole window */
    eddy_pool_policy_t *p = eddy_pool_policy_new(&cfg, NULL);
    cluster_t c = {0};
    add_worker(&c, "worker-1", 0, false);
    eddy_pool_decision_t out;
    decide(p, 0, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "%s", out.reason);
    decide(p, 14999, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_NONE, "%s", out.reason);
    decide(p, 15000, NULL, &c, &out);
    cr_assert_eq(out.action, EDDY_POOL_GROW, "%s", out.reason);
    cr_assert_eq(out.grow, 2, "1 live, --min-workers 3");
    eddy_pool_policy_destroy(&p);
}
