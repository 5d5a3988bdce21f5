/* test_scaling_policy.c - the scaling policy driven through simulated time.
 *
 * A tiny simulator stands in for the job: source -> map -> sink, where the
 * map is the operator that needs scaling (10000 rec/s per instance unless a
 * test says otherwise) and the source and sink are fast. Each interval it
 * produces the metrics a real job would report: the throughput is the
 * offered rate capped by the slowest operator's capacity (backpressure), and
 * each operator's useful time is what that throughput costs it. Decisions
 * the policy marks as applied are carried out before the next interval. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "controller/policy.h"

#define INTERVAL_MS 10000
#define SOURCE 0
#define MAP 1
#define SINK 2
#define OPS 3

typedef struct sim {
    eddy_ds2_operator_t ops[OPS];
    double true_rate[OPS]; /* per instance */
    double offered;
} sim_t;

static const size_t FROM_SOURCE[] = {SOURCE};
static const size_t FROM_MAP[] = {MAP};

static void sim_init(sim_t *sim, uint32_t map_parallelism, double offered)
{
    memset(sim, 0, sizeof *sim);
    static const char *names[OPS] = {"source", "map", "sink"};
    for (size_t i = 0; i < OPS; i++) {
        sim->ops[i].name = names[i];
        sim->ops[i].parallelism = 1;
        sim->ops[i].min_parallelism = 1;
        sim->ops[i].max_parallelism = 32;
    }
    sim->ops[MAP].parallelism = map_parallelism;
    sim->ops[MAP].upstreams = FROM_SOURCE;
    sim->ops[MAP].upstream_count = 1;
    sim->ops[SINK].upstreams = FROM_MAP;
    sim->ops[SINK].upstream_count = 1;
    sim->true_rate[SOURCE] = 1e6;
    sim->true_rate[MAP] = 10000.0;
    sim->true_rate[SINK] = 1e6;
    sim->offered = offered;
}

/* Fills one window of metrics; offered_factor and map_rate_factor perturb
 * this window only (1.0 for none). */
static void sim_measure(sim_t *sim, double offered_factor, double map_rate_factor)
{
    double window_s = INTERVAL_MS / 1000.0;
    double rate[OPS];
    double throughput = sim->offered * offered_factor;
    for (size_t i = 0; i < OPS; i++) {
        rate[i] = sim->true_rate[i] * (i == MAP ? map_rate_factor : 1.0);
        double capacity = rate[i] * sim->ops[i].parallelism;
        if (capacity < throughput)
            throughput = capacity;
    }
    for (size_t i = 0; i < OPS; i++) {
        eddy_ds2_metrics_t *m = &sim->ops[i].metrics;
        uint64_t records = (uint64_t)llround(throughput * window_s);
        m->records_in = i == SOURCE ? 0 : records;
        m->records_out = i == SINK ? 0 : records;
        m->useful_ns = (uint64_t)llround((double)records / rate[i] * 1e9);
        m->window_ns = (uint64_t)INTERVAL_MS * 1000000ull;
        m->offered_rate = i == SOURCE ? sim->offered * offered_factor : NAN;
    }
}

/* Runs one interval at now_ms and applies what the policy applied. Returns
 * the number of applied decisions. */
static int sim_step(sim_t *sim, eddy_scaling_policy_t *policy, int64_t now_ms,
                    eddy_scaling_decision_t decisions[OPS])
{
    eddy_err_t err = {{0}};
    int rc = eddy_scaling_policy_decide(policy, now_ms, sim->ops, OPS, decisions, &err);
    cr_assert_eq(rc, 1, "decide at %lld ms returned %d: %s", (long long)now_ms, rc, err.msg);
    int applied = 0;
    for (size_t i = 0; i < OPS; i++) {
        cr_assert_str_eq(decisions[i].operator_name, sim->ops[i].name);
        cr_assert_eq(decisions[i].old_parallelism, sim->ops[i].parallelism);
        if (decisions[i].applied) {
            sim->ops[i].parallelism = decisions[i].new_parallelism;
            applied++;
        }
    }
    return applied;
}

static eddy_scaling_policy_t *new_policy(const eddy_scaling_policy_config_t *config)
{
    eddy_err_t err = {{0}};
    eddy_scaling_policy_t *policy = eddy_scaling_policy_new(config, &err);
    cr_assert_not_null(policy, "eddy_scaling_policy_new: %s", err.msg);
    return policy;
}

static eddy_scaling_policy_config_t test_config(void)
{
    eddy_scaling_policy_config_t config = eddy_scaling_policy_config_default();
    config.job = "wordcount";
    return config;
}

Test(scaling_policy, scales_to_four_in_one_decision_then_holds)
{
    eddy_scaling_policy_config_t config = test_config();
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 25000.0);
    eddy_scaling_decision_t d[OPS];

    /* 25000 / (10000 * 0.8) = 3.125 -> 4, straight from 1. */
    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
    cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_UP);
    cr_assert_eq(d[MAP].old_parallelism, 1);
    cr_assert_eq(d[MAP].new_parallelism, 4);
    cr_assert(d[MAP].applied);
    cr_assert_str_eq(d[MAP].job, "wordcount");
    cr_assert_eq(d[MAP].time_ms, 0);
    cr_assert_float_eq(d[MAP].rates.target_input_rate, 25000.0, 1e-6);
    cr_assert_float_eq(d[MAP].rates.true_rate_per_instance, 10000.0, 1e-6);
    cr_assert_float_eq(d[MAP].rates.observed_input_rate, 10000.0, 1e-6); /* backpressured */
    cr_assert_float_eq(d[MAP].rates.selectivity, 1.0, 1e-9);
    cr_assert_float_eq(d[MAP].rates.utilisation, 1.0, 1e-6);
    cr_assert_float_eq(d[MAP].rates.target_utilisation, 0.8, 1e-9);
    cr_assert_float_eq(d[MAP].rates.projected_utilisation, 0.625, 1e-9);
    cr_assert(strstr(d[MAP].reason,
                     "target 25000 rec/s / (10000 rec/s per instance x 0.80) = 3.12 -> 4"),
              "reason: %s", d[MAP].reason);
    cr_assert_eq(d[SOURCE].action, EDDY_SCALING_NO_CHANGE);
    cr_assert_eq(d[SINK].action, EDDY_SCALING_NO_CHANGE);
    cr_assert_eq(sim.ops[MAP].parallelism, 4);

    /* Consistent measurements afterwards: only no_change, for 20 intervals. */
    for (int i = 1; i <= 20; i++) {
        sim_measure(&sim, 1.0, 1.0);
        cr_assert_eq(sim_step(&sim, policy, (int64_t)i * INTERVAL_MS, d), 0);
        for (size_t op = 0; op < OPS; op++) {
            cr_assert_eq(d[op].action, EDDY_SCALING_NO_CHANGE, "interval %d, %s: %s", i,
                         d[op].operator_name, d[op].reason);
            cr_assert_eq(d[op].new_parallelism, d[op].old_parallelism);
        }
    }
    cr_assert_eq(sim.ops[MAP].parallelism, 4);
    eddy_scaling_policy_destroy(&policy);
    cr_assert_null(policy);
}

Test(scaling_policy, every_operator_that_needs_it_changes_in_one_step)
{
    eddy_scaling_policy_config_t config = test_config();
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 25000.0);
    sim.true_rate[SINK] = 5000.0; /* 25000 / (5000 * 0.8) = 6.25 -> 7 */
    eddy_scaling_decision_t d[OPS];

    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 0, d), 2);
    cr_assert_eq(d[MAP].new_parallelism, 4);
    cr_assert_eq(d[SINK].new_parallelism, 7);
    cr_assert(d[MAP].applied && d[SINK].applied);
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, evaluates_once_per_interval)
{
    eddy_scaling_policy_config_t config = test_config();
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 4, 25000.0);
    sim_measure(&sim, 1.0, 1.0);
    eddy_scaling_decision_t d[OPS];
    eddy_err_t err = {{0}};

    cr_assert_eq(eddy_scaling_policy_decide(policy, 1000, sim.ops, OPS, d, &err), 1);
    int64_t too_soon = 1000 + INTERVAL_MS - 1;
    cr_assert_eq(eddy_scaling_policy_decide(policy, too_soon, sim.ops, OPS, d, &err), 0);
    cr_assert_eq(eddy_scaling_policy_decide(policy, 1000 + INTERVAL_MS, sim.ops, OPS, d, &err), 1);
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, warm_up_suppresses_decisions)
{
    eddy_scaling_policy_config_t config = test_config(); /* warm-up 30 s */
    eddy_scaling_policy_t *policy = new_policy(&config);
    eddy_err_t err = {{0}};
    sim_t sim;
    sim_init(&sim, 1, 25000.0);
    eddy_scaling_decision_t d[OPS];

    /* The job just started: treat it like a rescale. */
    cr_assert_eq(eddy_scaling_policy_note_rescale(policy, NULL, 0, &err), 0, "%s", err.msg);
    for (int64_t t = 0; t < 30000; t += INTERVAL_MS) {
        sim_measure(&sim, 1.0, 1.0); /* clearly under-provisioned */
        cr_assert_eq(sim_step(&sim, policy, t, d), 0);
        for (size_t op = 0; op < OPS; op++) {
            cr_assert_eq(d[op].action, EDDY_SCALING_NO_CHANGE);
            cr_assert(strstr(d[op].reason, "warm-up"), "reason: %s", d[op].reason);
        }
    }
    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 30000, d), 1);
    cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_UP);
    cr_assert_eq(d[MAP].new_parallelism, 4);

    /* The policy's own rescale starts another warm-up, even if the metrics
     * of the disturbed windows look alarming. */
    sim.offered = 80000.0;
    for (int64_t t = 40000; t < 60000; t += INTERVAL_MS) {
        sim_measure(&sim, 1.0, 1.0);
        cr_assert_eq(sim_step(&sim, policy, t, d), 0);
        cr_assert_eq(d[MAP].action, EDDY_SCALING_NO_CHANGE);
        cr_assert(strstr(d[MAP].reason, "metrics ignored until 60.0 s"), "reason: %s",
                  d[MAP].reason);
    }
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, cooldown_respected)
{
    eddy_scaling_policy_config_t config = test_config();
    config.warmup_ms = 10000;
    config.cooldown_ms = 60000;
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 25000.0);
    eddy_scaling_decision_t d[OPS];

    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
    cr_assert_eq(sim.ops[MAP].parallelism, 4);

    /* Load doubles: 50000 / 8000 = 6.25 -> 7, but not before 60 s. */
    sim.offered = 50000.0;
    for (int64_t t = 10000; t < 60000; t += INTERVAL_MS) {
        sim_measure(&sim, 1.0, 1.0);
        cr_assert_eq(sim_step(&sim, policy, t, d), 0);
        cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_UP, "at %lld: %s", (long long)t,
                     d[MAP].reason);
        cr_assert_eq(d[MAP].new_parallelism, 7);
        cr_assert_not(d[MAP].applied);
        cr_assert(strstr(d[MAP].reason, "cooldown until 60.0 s"), "reason: %s", d[MAP].reason);
    }
    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 60000, d), 1);
    cr_assert(d[MAP].applied);
    cr_assert_eq(sim.ops[MAP].parallelism, 7);
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, cooldown_is_per_operator)
{
    eddy_scaling_policy_config_t config = test_config();
    config.warmup_ms = 0;
    eddy_scaling_policy_t *policy = new_policy(&config);
    eddy_err_t err = {{0}};
    sim_t sim;
    sim_init(&sim, 1, 25000.0);
    sim.true_rate[SINK] = 5000.0;
    eddy_scaling_decision_t d[OPS];

    /* Someone rescaled the sink by hand: only the sink waits. */
    cr_assert_eq(eddy_scaling_policy_note_rescale(policy, "sink", 0, &err), 0, "%s", err.msg);
    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 10000, d), 1);
    cr_assert(d[MAP].applied);
    cr_assert_eq(d[SINK].action, EDDY_SCALING_SCALE_UP);
    cr_assert_not(d[SINK].applied);
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, scales_down_after_cooldown_when_rate_drops)
{
    eddy_scaling_policy_config_t config = test_config();
    config.warmup_ms = 10000;
    config.cooldown_ms = 60000;
    eddy_scaling_policy_t *policy = new_policy(&config);
    eddy_err_t err = {{0}};
    sim_t sim;
    sim_init(&sim, 4, 12000.0);
    eddy_scaling_decision_t d[OPS];

    cr_assert_eq(eddy_scaling_policy_note_rescale(policy, "map", 0, &err), 0, "%s", err.msg);
    /* 12000 / (10000 * 0.7) = 1.71 -> 2 < 4: agreement at 10, 20, 30 s,
     * blocked by the cooldown until 60 s. */
    for (int64_t t = 10000; t < 60000; t += INTERVAL_MS) {
        sim_measure(&sim, 1.0, 1.0);
        cr_assert_eq(sim_step(&sim, policy, t, d), 0);
        cr_assert_not(d[MAP].applied);
        if (t < 30000) {
            cr_assert_eq(d[MAP].action, EDDY_SCALING_NO_CHANGE, "at %lld: %s", (long long)t,
                         d[MAP].reason);
            cr_assert(strstr(d[MAP].reason, "waiting before scaling down"), "reason: %s",
                      d[MAP].reason);
        } else {
            cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_DOWN, "at %lld: %s", (long long)t,
                         d[MAP].reason);
            cr_assert_eq(d[MAP].new_parallelism, 2);
            cr_assert(strstr(d[MAP].reason, "cooldown"), "reason: %s", d[MAP].reason);
        }
    }
    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 60000, d), 1);
    cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_DOWN);
    cr_assert(d[MAP].applied);
    cr_assert_eq(sim.ops[MAP].parallelism, 2);
    cr_assert_float_eq(d[MAP].rates.projected_utilisation, 0.6, 1e-9);

    /* And it stays there: 12000 / 8000 = 1.5 -> 2. */
    for (int64_t t = 70000; t <= 300000; t += INTERVAL_MS) {
        sim_measure(&sim, 1.0, 1.0);
        cr_assert_eq(sim_step(&sim, policy, t, d), 0, "at %lld: %s", (long long)t,
                     d[MAP].reason);
    }
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, one_quiet_interval_does_not_scale_down)
{
    eddy_scaling_policy_config_t config = test_config();
    config.warmup_ms = 0;
    config.cooldown_ms = 0;
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 4, 25000.0);
    eddy_scaling_decision_t d[OPS];

    /* dip, dip, normal, dip, dip: never three in a row */
    const double load[] = {0.4, 0.4, 1.0, 0.4, 0.4, 1.0};
    for (size_t i = 0; i < sizeof load / sizeof load[0]; i++) {
        sim_measure(&sim, load[i], 1.0);
        cr_assert_eq(sim_step(&sim, policy, (int64_t)i * INTERVAL_MS, d), 0, "interval %zu: %s",
                     i, d[MAP].reason);
    }
    /* three in a row: now it goes; the largest proposal of the streak wins */
    const double falling[] = {0.4, 0.3, 0.2};
    for (size_t i = 0; i < 3; i++) {
        sim_measure(&sim, falling[i], 1.0);
        sim_step(&sim, policy, (int64_t)(10 + i) * INTERVAL_MS, d);
    }
    cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_DOWN, "%s", d[MAP].reason);
    /* 25000 * 0.4 = 10000; 10000 / 7000 = 1.43 -> 2 (the later dips want 2 and 1) */
    cr_assert_eq(d[MAP].new_parallelism, 2);
    cr_assert(d[MAP].applied);
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, scale_down_agreement_restarts_when_parallelism_changed_elsewhere)
{
    eddy_scaling_policy_config_t config = test_config();
    config.warmup_ms = 0;
    config.cooldown_ms = 0;
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 4, 18000.0); /* 18000 / 7000 = 2.57 -> 3 < 4 */
    eddy_scaling_decision_t d[OPS];

    for (int i = 0; i < 2; i++) {
        sim_measure(&sim, 1.0, 1.0);
        cr_assert_eq(sim_step(&sim, policy, (int64_t)i * INTERVAL_MS, d), 0);
    }
    /* Someone else set 3 and did not tell the policy; load falls further
     * (12000 / 7000 -> 2). The old streak, proposing 3, must not carry over
     * into a "scale down" from 3 to 3. */
    sim.ops[MAP].parallelism = 3;
    sim.offered = 12000.0;
    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 2 * INTERVAL_MS, d), 0);
    cr_assert_eq(d[MAP].action, EDDY_SCALING_NO_CHANGE, "%s", d[MAP].reason);
    cr_assert(strstr(d[MAP].reason, "below 3 for 1/3 intervals"), "reason: %s", d[MAP].reason);
    for (int i = 3; i < 5; i++) {
        sim_measure(&sim, 1.0, 1.0);
        sim_step(&sim, policy, (int64_t)i * INTERVAL_MS, d);
    }
    cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_DOWN, "%s", d[MAP].reason);
    cr_assert_eq(d[MAP].old_parallelism, 3);
    cr_assert_eq(d[MAP].new_parallelism, 2);
    eddy_scaling_policy_destroy(&policy);
}

/* Deterministic noise in [-amplitude, +amplitude]. */
static double noise(uint32_t *state, double amplitude)
{
    *state = *state * 1664525u + 1013904223u;
    return ((double)(*state >> 8) / (double)(1u << 24) * 2.0 - 1.0) * amplitude;
}

/* Runs 60 noisy intervals around exactly 3 instances' worth of load and
 * returns how often the map's parallelism changed. */
static int count_rescales_on_noise(const eddy_scaling_policy_config_t *config,
                                   int *scale_downs)
{
    eddy_scaling_policy_t *policy = new_policy(config);
    sim_t sim;
    sim_init(&sim, 3, 24000.0); /* 24000 / (10000 * 0.8) = 3.0 */
    eddy_scaling_decision_t d[OPS];
    uint32_t rng = 42;
    int rescales = 0;
    *scale_downs = 0;
    for (int i = 0; i < 60; i++) {
        sim_measure(&sim, 1.0 + noise(&rng, 0.05), 1.0 + noise(&rng, 0.05));
        uint32_t before = sim.ops[MAP].parallelism;
        sim_step(&sim, policy, (int64_t)i * INTERVAL_MS, d);
        if (sim.ops[MAP].parallelism != before) {
            rescales++;
            if (sim.ops[MAP].parallelism < before)
                (*scale_downs)++;
        }
        cr_assert_geq(sim.ops[MAP].parallelism, 3);
        cr_assert_leq(sim.ops[MAP].parallelism, 4);
    }
    eddy_scaling_policy_destroy(&policy);
    return rescales;
}

Test(scaling_policy, hysteresis_prevents_flapping_between_three_and_four)
{
    int scale_downs = 0;
    eddy_scaling_policy_config_t config = test_config();
    int rescales = count_rescales_on_noise(&config, &scale_downs);
    cr_assert_leq(rescales, 1, "%d rescales on +-5%% noise", rescales);
    cr_assert_eq(scale_downs, 0);

    /* The same noise without hysteresis, warm-up or cooldown does flap, so
     * the assertion above is not vacuous. */
    config.scale_down_utilisation = config.target_utilisation;
    config.scale_down_confirmations = 1;
    config.warmup_ms = 0;
    config.cooldown_ms = 0;
    rescales = count_rescales_on_noise(&config, &scale_downs);
    cr_assert_geq(rescales, 4, "only %d rescales without hysteresis", rescales);
    cr_assert_geq(scale_downs, 2);
}

Test(scaling_policy, dry_run_never_applies)
{
    eddy_scaling_policy_config_t config = test_config();
    config.dry_run = true;
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 25000.0);
    eddy_scaling_decision_t d[OPS];

    for (int i = 0; i < 10; i++) {
        sim_measure(&sim, 1.0, 1.0);
        cr_assert_eq(sim_step(&sim, policy, (int64_t)i * INTERVAL_MS, d), 0);
        /* Nothing was applied, so no warm-up hides the advice. */
        cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_UP, "interval %d: %s", i, d[MAP].reason);
        cr_assert_eq(d[MAP].new_parallelism, 4);
        cr_assert(strstr(d[MAP].reason, "dry run"), "reason: %s", d[MAP].reason);
    }
    sim.ops[MAP].parallelism = 8;
    sim.offered = 5000.0;
    for (int i = 10; i < 20; i++) {
        sim_measure(&sim, 1.0, 1.0);
        cr_assert_eq(sim_step(&sim, policy, (int64_t)i * INTERVAL_MS, d), 0);
    }
    cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_DOWN, "%s", d[MAP].reason);
    cr_assert_not(d[MAP].applied);
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, job_bounds_narrow_operator_bounds)
{
    eddy_scaling_policy_config_t config = test_config();
    config.max_parallelism = 3;
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 25000.0);
    eddy_scaling_decision_t d[OPS];

    sim_measure(&sim, 1.0, 1.0);
    sim_step(&sim, policy, 0, d);
    cr_assert_eq(d[MAP].new_parallelism, 3);
    cr_assert(strstr(d[MAP].reason, "clamped to 3 by bounds [1, 3]"), "reason: %s",
              d[MAP].reason);
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, operator_without_data_keeps_parallelism)
{
    eddy_scaling_policy_config_t config = test_config();
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 2, 25000.0);
    eddy_scaling_decision_t d[OPS];

    sim_measure(&sim, 1.0, 1.0);
    memset(&sim.ops[MAP].metrics, 0, sizeof sim.ops[MAP].metrics);
    sim_step(&sim, policy, 0, d);
    cr_assert_eq(d[MAP].action, EDDY_SCALING_NO_CHANGE);
    cr_assert_eq(d[MAP].new_parallelism, 2);
    cr_assert(strstr(d[MAP].reason, "no useful-time measurement"), "reason: %s", d[MAP].reason);
    cr_assert(isnan(d[MAP].rates.true_rate_per_instance));
    cr_assert_eq(d[SINK].action, EDDY_SCALING_NO_CHANGE);
    cr_assert(strstr(d[SINK].reason, "target input rate unknown"), "reason: %s", d[SINK].reason);
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, rejects_bad_config_and_input)
{
    eddy_err_t err = {{0}};
    eddy_scaling_policy_config_t config = test_config();
    config.scale_down_utilisation = 0.9; /* above the target */
    cr_assert_null(eddy_scaling_policy_new(&config, &err));
    cr_assert(strstr(err.msg, "scale-down utilisation"), "message: %s", err.msg);
    config = test_config();
    config.scale_down_confirmations = 0;
    cr_assert_null(eddy_scaling_policy_new(&config, &err));
    config = test_config();
    config.min_parallelism = 0;
    cr_assert_null(eddy_scaling_policy_new(&config, &err));
    config = test_config();
    config.cooldown_ms = -1;
    cr_assert_null(eddy_scaling_policy_new(&config, &err));
    cr_assert_null(eddy_scaling_policy_new(NULL, &err));

    config = test_config();
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 25000.0);
    sim_measure(&sim, 1.0, 1.0);
    eddy_scaling_decision_t d[OPS];
    sim.ops[SINK].name = "map";
    cr_assert_eq(eddy_scaling_policy_decide(policy, 0, sim.ops, OPS, d, &err), -1);
    cr_assert(strstr(err.msg, "appears twice"), "message: %s", err.msg);
    sim.ops[SINK].name = "sink";
    sim.ops[MAP].min_parallelism = 200; /* above the job's 128 */
    sim.ops[MAP].max_parallelism = 300;
    cr_assert_eq(eddy_scaling_policy_decide(policy, 0, sim.ops, OPS, d, &err), -1);
    /* A failed call does not count as an evaluation. */
    sim.ops[MAP].min_parallelism = 1;
    sim.ops[MAP].max_parallelism = 32;
    cr_assert_eq(eddy_scaling_policy_decide(policy, 0, sim.ops, OPS, d, &err), 1);
    eddy_scaling_policy_destroy(&policy);
    eddy_scaling_policy_destroy(&policy); /* NULL is fine */
}

Test(scaling_policy, action_names_round_trip)
{
    eddy_scaling_action_t action;
    cr_assert_eq(eddy_scaling_action_parse("scale_up", &action), 0);
    cr_assert_eq(action, EDDY_SCALING_SCALE_UP);
    cr_assert_eq(eddy_scaling_action_parse("scale_down", &action), 0);
    cr_assert_eq(action, EDDY_SCALING_SCALE_DOWN);
    cr_assert_eq(eddy_scaling_action_parse("no_change", &action), 0);
    cr_assert_eq(action, EDDY_SCALING_NO_CHANGE);
    cr_assert_eq(eddy_scaling_action_parse("sideways", &action), -1);
    cr_assert_eq(eddy_scaling_action_parse(NULL, &action), -1);
}

/* ---- limits: cores, hot keys, ineffective scale-ups (policy.h "limits") ---- */

/* Instances of the map share `cores` cores: alone one does 10000 rec/s,
 * p of them each do 10000 * min(1, cores / p) when busy. */
static void sim_measure_on_cores(sim_t *sim, uint32_t cores)
{
    uint32_t p = sim->ops[MAP].parallelism;
    sim->true_rate[MAP] = 10000.0 * (p > cores ? (double)cores / p : 1.0);
    sim_measure(sim, 1.0, 1.0);
}

Test(scaling_policy, ineffective_scale_up_records_the_limit_and_stops)
{
    eddy_scaling_policy_config_t config = test_config();
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 50000.0);
    eddy_scaling_decision_t d[OPS];

    /* 50000 / (10000 x 0.8) = 6.25 -> 7: DS2 cannot know they share 2 cores */
    sim_measure_on_cores(&sim, 2);
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
    cr_assert_eq(d[MAP].new_parallelism, 7);
    cr_assert_not(d[MAP].infeasible);

    /* 7 instances bring 20000 rec/s, not the 50000 predicted; the true rate
     * per instance fell to 2857, so DS2 alone would now ask for 22 */
    int64_t now = INTERVAL_MS;
    bool reported = false;
    for (int i = 0; i < 30; i++, now += INTERVAL_MS) {
        sim_measure_on_cores(&sim, 2);
        cr_assert_eq(sim_step(&sim, policy, now, d), 0, "interval %d: %s", i, d[MAP].reason);
        cr_assert_eq(sim.ops[MAP].parallelism, 7);
        if (d[MAP].infeasible) {
            reported = true;
            cr_assert_eq(d[MAP].action, EDDY_SCALING_NO_CHANGE);
            cr_assert(strstr(d[MAP].reason, "infeasible: target 50000 rec/s, achieved 20000 rec/s at parallelism 7, limited by contention"),
                      "reason: %s", d[MAP].reason);
            cr_assert(strstr(d[MAP].reason, "was 10000"), "reason: %s", d[MAP].reason);
        }
    }
    cr_assert(reported, "the limit was never reported");
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, never_more_instances_than_cores_unless_oversubscribing)
{
    eddy_scaling_policy_config_t config = test_config();
    config.core_limit = 2;
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 50000.0);
    eddy_scaling_decision_t d[OPS];
    sim_measure_on_cores(&sim, 2);
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
    cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_UP);
    cr_assert_eq(d[MAP].new_parallelism, 2);
    cr_assert(d[MAP].infeasible);
    cr_assert(strstr(d[MAP].reason, "infeasible: target 50000 rec/s, achieved 10000 rec/s at parallelism 1, limited by the workers' 2 cores"),
              "reason: %s", d[MAP].reason);
    /* and it stays there, saying why */
    for (int i = 1; i <= 20; i++) {
        sim_measure_on_cores(&sim, 2);
        sim_step(&sim, policy, (int64_t)i * INTERVAL_MS, d);
        cr_assert_leq(sim.ops[MAP].parallelism, 2, "interval %d: %s", i, d[MAP].reason);
    }
    eddy_scaling_policy_destroy(&policy);

    config.allow_oversubscribe = true;
    policy = new_policy(&config);
    sim_init(&sim, 1, 50000.0);
    sim_measure_on_cores(&sim, 2);
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
    cr_assert_eq(d[MAP].new_parallelism, 7);
    cr_assert_not(d[MAP].infeasible);
    eddy_scaling_policy_destroy(&policy);
}

Test(scaling_policy, hot_key_group_is_named_instead_of_scaling)
{
    eddy_scaling_policy_config_t config = test_config();
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 50000.0);
    eddy_scaling_decision_t d[OPS];
    /* key group 17 carries 30%: its instance must take 15000 rec/s, more
     * than one does; past ceil(1 / 0.3) = 4 instances nothing improves */
    sim_measure(&sim, 1.0, 1.0);
    sim.ops[MAP].metrics.hot_key_share = 0.3;
    sim.ops[MAP].metrics.hot_key_group = 17;
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
    cr_assert_eq(d[MAP].new_parallelism, 4);
    cr_assert(d[MAP].infeasible);
    cr_assert(strstr(d[MAP].reason, "limited by hot key group 17 (30% of the records"),
              "reason: %s", d[MAP].reason);
    for (int i = 1; i <= 20; i++) {
        sim_measure(&sim, 1.0, 1.0);
        sim.ops[MAP].metrics.hot_key_share = 0.3;
        sim.ops[MAP].metrics.hot_key_group = 17;
        sim_step(&sim, policy, (int64_t)i * INTERVAL_MS, d);
        cr_assert_eq(sim.ops[MAP].parallelism, 4, "interval %d: %s", i, d[MAP].reason);
    }
    cr_assert(d[MAP].infeasible);
    cr_assert(strstr(d[MAP].reason, "hot key group 17"), "reason: %s", d[MAP].reason);
    eddy_scaling_policy_destroy(&policy);
}

/* State budget: the map's keyed state grows by 1 MB/s; with a budget of 64
 * MB per instance, the policy scales out while the state per instance is
 * still under the budget (it projects one interval plus a warm-up ahead),
 * never lets an instance cross it, applies that even in the cooldown, and
 * does not scale down below what the state needs although the load alone
 * would. */
Test(scaling_policy, state_budget_scales_out_before_it_is_crossed)
{
    const double mb = 1024.0 * 1024.0;
    eddy_scaling_policy_config_t config = test_config();
    config.warmup_ms = 10000;
    config.cooldown_ms = 60000;
    config.scale_down_confirmations = 1;
    config.state_budget_bytes = 64u * 1024u * 1024u;
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 2000.0); /* one instance carries the load at 0.2 busy */
    eddy_scaling_decision_t d[OPS];
    double state = 10.0 * mb, growth = 1.0 * mb;
    int64_t last_up = -1;
    for (int64_t t = 0; t <= 200000; t += INTERVAL_MS) {
        sim_measure(&sim, 1.0, 1.0);
        sim.ops[MAP].metrics.state_bytes = state;
        sim.ops[MAP].metrics.state_growth_per_s = growth;
        uint32_t before = sim.ops[MAP].parallelism;
        cr_assert_leq(state / before, 64.0 * mb, "at %lld ms an instance holds %.1f MB",
                      (long long)t, state / before / mb);
        sim_step(&sim, policy, t, d);
        cr_assert_neq(d[MAP].action, EDDY_SCALING_SCALE_DOWN, "at %lld: %s", (long long)t,
                      d[MAP].reason);
        if (d[MAP].applied) {
            cr_assert_eq(d[MAP].action, EDDY_SCALING_SCALE_UP);
            cr_assert(strstr(d[MAP].reason, "for memory"), "reason: %s", d[MAP].reason);
            cr_assert_geq(d[MAP].memory_parallelism, d[MAP].new_parallelism);
            last_up = t;
        }
        if (d[MAP].memory_parallelism)
            cr_assert_geq(sim.ops[MAP].parallelism, (uint32_t)ceil(state / (64.0 * mb)));
        state += growth * INTERVAL_MS / 1000.0;
    }
    cr_assert_geq(sim.ops[MAP].parallelism, 4, "210 MB need 4 instances of 64 MB");
    cr_assert_geq(last_up, 0);
    /* The state stops growing: the load (0.2 of one instance) would scale
     * down to 1, the state keeps what it needs. */
    growth = 0;
    for (int64_t t = 210000; t <= 300000; t += INTERVAL_MS) {
        sim_measure(&sim, 1.0, 1.0);
        sim.ops[MAP].metrics.state_bytes = state;
        sim.ops[MAP].metrics.state_growth_per_s = 0;
        sim_step(&sim, policy, t, d);
        cr_assert_geq(sim.ops[MAP].parallelism, (uint32_t)ceil(state / (64.0 * mb)), "at %lld: %s",
                      (long long)t, d[MAP].reason);
    }
    eddy_scaling_policy_destroy(&policy);
}

/* A state that cannot fit even at the operator's max parallelism is
 * reported infeasible, at the max; without a budget nothing changes. */
Test(scaling_policy, state_budget_beyond_max_parallelism_is_infeasible)
{
    eddy_scaling_policy_config_t config = test_config();
    config.warmup_ms = 0;
    config.state_budget_bytes = 1024u * 1024u;
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 2000.0);
    sim.ops[MAP].max_parallelism = 4;
    eddy_scaling_decision_t d[OPS];
    sim_measure(&sim, 1.0, 1.0);
    sim.ops[MAP].metrics.state_bytes = 10.0 * 1024 * 1024;
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
    cr_assert_eq(d[MAP].new_parallelism, 4);
    cr_assert(d[MAP].infeasible);
    cr_assert_eq(d[MAP].memory_parallelism, 4);
    cr_assert(strstr(d[MAP].reason, "limited by max parallelism 4"), "reason: %s", d[MAP].reason);
    eddy_scaling_policy_destroy(&policy);

    config.state_budget_bytes = 0;
    policy = new_policy(&config);
    sim_init(&sim, 1, 2000.0);
    sim_measure(&sim, 1.0, 1.0);
    sim.ops[MAP].metrics.state_bytes = 10.0 * 1024 * 1024;
    sim_step(&sim, policy, 0, d);
    cr_assert_eq(d[MAP].action, EDDY_SCALING_NO_CHANGE);
    cr_assert_eq(d[MAP].memory_parallelism, 0);
    eddy_scaling_policy_destroy(&policy);
}

/* 128 key groups over 15 instances: the busiest owns 9 against 8.53 on
 * average (5.5% more), and 16 divide them evenly: one instance more. Three
 * instances (43 against 42.7) stay three. */
Test(scaling_policy, uneven_key_groups_take_one_instance_more)
{
    eddy_scaling_policy_config_t config = test_config();
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 1, 116000.0); /* 116000 / 8000 = 14.5 -> 15 */
    eddy_scaling_decision_t d[OPS];
    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
    cr_assert_eq(d[MAP].new_parallelism, 16, "reason: %s", d[MAP].reason);
    cr_assert(strstr(d[MAP].reason, "16 instead of 15: 128 key groups divide evenly"),
              "reason: %s", d[MAP].reason);
    eddy_scaling_policy_destroy(&policy);

    policy = new_policy(&config);
    sim_init(&sim, 1, 20000.0); /* 2.5 -> 3 */
    sim_measure(&sim, 1.0, 1.0);
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
    cr_assert_eq(d[MAP].new_parallelism, 3, "reason: %s", d[MAP].reason);
    eddy_scaling_policy_destroy(&policy);
}

/* 2 GiB over 4 instances, 4 -> 2 moves 1 GiB: 10 s at 100 MiB/s, so the
 * lower load must hold 100 s (ten intervals), not only three. */
Test(scaling_policy, scale_down_of_big_state_waits_until_the_move_pays)
{
    const double mb = 1024.0 * 1024.0;
    eddy_scaling_policy_config_t config = test_config();
    config.warmup_ms = 0;
    config.cooldown_ms = 0;
    eddy_scaling_policy_t *policy = new_policy(&config);
    eddy_scaling_policy_set_move_rate(policy, 100.0 * mb);
    sim_t sim;
    sim_init(&sim, 4, 12000.0); /* 12000 / 7000 = 1.71 -> 2 */
    eddy_scaling_decision_t d[OPS];
    int64_t applied_at = -1;
    for (int64_t t = 0; t <= 150000 && applied_at < 0; t += INTERVAL_MS) {
        sim_measure(&sim, 1.0, 1.0);
        sim.ops[MAP].metrics.state_bytes = 2048.0 * mb;
        if (sim_step(&sim, policy, t, d)) {
            applied_at = t;
            cr_assert_eq(d[MAP].new_parallelism, 2);
        } else if (t >= 20000) {
            cr_assert(strstr(d[MAP].reason, "moving ~1024.0 MB (~10.2 s at 100 MB/s, measured) "
                                            "waits until the lower load has held 102 s"),
                      "at %lld: %s", (long long)t, d[MAP].reason);
        }
        cr_assert_float_eq(d[MAP].rates.state_bytes, 2048.0 * mb, 1.0);
    }
    /* the streak's 11th interval is the first to have held 110 s >= 102 s */
    cr_assert_eq(applied_at, 100000, "applied at %lld", (long long)applied_at);
    eddy_scaling_policy_destroy(&policy);

    /* Small state: the confirmations alone (the third interval). */
    policy = new_policy(&config);
    sim_init(&sim, 4, 12000.0);
    applied_at = -1;
    for (int64_t t = 0; t <= 150000 && applied_at < 0; t += INTERVAL_MS) {
        sim_measure(&sim, 1.0, 1.0);
        sim.ops[MAP].metrics.state_bytes = 10.0 * mb;
        if (sim_step(&sim, policy, t, d))
            applied_at = t;
    }
    cr_assert_eq(applied_at, 20000, "applied at %lld", (long long)applied_at);
    eddy_scaling_policy_destroy(&policy);
}

/* An operator that still keeps up (17000 rec/s on 2 x 10000, busy 0.85)
 * with 1 GiB of state waits one more interval before moving a third of
 * it; one that falls behind does not wait. */
Test(scaling_policy, scale_up_that_keeps_up_waits_one_interval_when_the_move_is_big)
{
    const double mb = 1024.0 * 1024.0;
    eddy_scaling_policy_config_t config = test_config();
    config.warmup_ms = 0;
    config.cooldown_ms = 0;
    eddy_scaling_policy_t *policy = new_policy(&config);
    sim_t sim;
    sim_init(&sim, 2, 17000.0);
    eddy_scaling_decision_t d[OPS];
    sim_measure(&sim, 1.0, 1.0);
    sim.ops[MAP].metrics.state_bytes = 1024.0 * mb;
    cr_assert_eq(sim_step(&sim, policy, 0, d), 0, "reason: %s", d[MAP].reason);
    cr_assert(strstr(d[MAP].reason, "it keeps up and moving ~341.3 MB takes ~6.8 s"),
              "reason: %s", d[MAP].reason);
    sim_measure(&sim, 1.0, 1.0);
    sim.ops[MAP].metrics.state_bytes = 1024.0 * mb;
    cr_assert_eq(sim_step(&sim, policy, INTERVAL_MS, d), 1, "reason: %s", d[MAP].reason);
    cr_assert_eq(d[MAP].new_parallelism, 3);
    eddy_scaling_policy_destroy(&policy);

    policy = new_policy(&config);
    sim_init(&sim, 2, 30000.0); /* capacity 20000: behind */
    sim_measure(&sim, 1.0, 1.0);
    sim.ops[MAP].metrics.state_bytes = 1024.0 * mb;
    cr_assert_eq(sim_step(&sim, policy, 0, d), 1, "reason: %s", d[MAP].reason);
    cr_assert_eq(d[MAP].new_parallelism, 4);
    eddy_scaling_policy_destroy(&policy);
}

/* The first evaluation past the warm-up says what the rescale brought,
 * once; every policy reports it. */
Test(scaling_policy, effect_of_a_rescale_is_reported_once_it_settled)
{
    eddy_scaling_policy_kind_t kinds[] = {EDDY_POLICY_EDDY, EDDY_POLICY_DS2};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        eddy_scaling_policy_config_t config = test_config();
        config.kind = kinds[k];
        eddy_scaling_policy_t *policy = new_policy(&config);
        sim_t sim;
        sim_init(&sim, 1, 25000.0);
        eddy_scaling_decision_t d[OPS];
        sim_measure(&sim, 1.0, 1.0);
        cr_assert_eq(sim_step(&sim, policy, 0, d), 1);
        cr_assert_not(d[MAP].effect.known);
        uint32_t to = sim.ops[MAP].parallelism;
        int reported = 0;
        for (int64_t t = INTERVAL_MS; t <= 80000; t += INTERVAL_MS) {
            sim_measure(&sim, 1.0, 1.0);
            sim_step(&sim, policy, t, d);
            if (!d[MAP].effect.known)
                continue;
            reported++;
            cr_assert_geq(t, config.warmup_ms, "reported in the warm-up");
            cr_assert_eq(d[MAP].effect.decided_ms, 0);
            cr_assert_eq(d[MAP].effect.from, 1);
            cr_assert_eq(d[MAP].effect.to, to);
            cr_assert_float_eq(d[MAP].effect.predicted_rate, 25000.0, 1e-6);
            cr_assert_float_eq(d[MAP].effect.observed_rate, 25000.0, 1e-6);
            cr_assert_float_eq(d[MAP].effect.observed_utilisation, 25000.0 / (to * 10000.0),
                               1e-6);
            cr_assert(strstr(d[MAP].reason, "effect of 1 -> "), "reason: %s", d[MAP].reason);
        }
        cr_assert_eq(reported, 1, "policy %s", eddy_scaling_policy_kind_name(kinds[k]));
        eddy_scaling_policy_destroy(&policy);
    }
}
