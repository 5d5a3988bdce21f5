/* test_catch_up_target.c - the controller's backlog-aware targets and its latency
 * objective (issue 29 items 2 and 3), computed by hand.
 *
 * - eddy_catch_up_target (controller/catch_up.h): arrival = read/window +
 *   backlog growth/window (never below 0), target = arrival + backlog /
 *   catch-up seconds; a configured rate is the arrival; no lag, no change
 *   from before (the configured rate, or unknown).
 * - The controller turns a source's "source_lag" into that target in the
 *   source stage's output units, and the policy sizes count for it, names
 *   the backlog in the reason, and scales back in once the backlog is gone.
 * - The latency objective: a p99 above it adds one instance to an operator
 *   that is busy or whose upstream is blocked, and none to an idle one
 *   (whose reason says the latency is elsewhere). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "controller/catch_up.h"
#include "controller/controller.h"
#include "controller/policy.h"
#include "leak_check.h"

TestSuite(catch_up, .fini = eddy_test_leak_check);

#define EPS 1e-9

/* ---- the arithmetic ---------------------------------------------------------- */

Test(catch_up, target_is_arrival_plus_backlog_over_catch_up_time)
{
    /* Read 10000 in 10 s while the backlog fell from 30000 to 20000: 1000/s
     * read, -1000/s of backlog growth, so nothing new arrived; 20000 left to
     * drain in 5 s: 4000/s. */
    eddy_catch_up_input_t in = {.offered_rate = 0, .read = 10000, .window_s = 10,
                                .lag_before = 30000, .lag_now = 20000, .catch_up_s = 5};
    eddy_catch_up_t t = eddy_catch_up_target(&in);
    cr_assert_float_eq(t.arrival_rate, 0.0, EPS);
    cr_assert_float_eq(t.backlog, 20000.0, EPS);
    cr_assert_float_eq(t.catch_up_rate, 4000.0, EPS);
    cr_assert_float_eq(t.target_rate, 4000.0, EPS);

    /* Backlog growing by 200/s while reading 1000/s: 1200/s arrive. */
    in.lag_before = 18000;
    t = eddy_catch_up_target(&in);
    cr_assert_float_eq(t.arrival_rate, 1200.0, EPS);
    cr_assert_float_eq(t.target_rate, 1200.0 + 4000.0, EPS);

    /* No earlier lag: arrival is what was read. */
    in.lag_before = -1;
    t = eddy_catch_up_target(&in);
    cr_assert_float_eq(t.arrival_rate, 1000.0, EPS);
    cr_assert_float_eq(t.target_rate, 5000.0, EPS);
}

Test(catch_up, drained_backlog_leaves_the_arrival_rate)
{
    eddy_catch_up_input_t in = {.read = 500, .window_s = 1, .lag_before = 0, .lag_now = 0,
                                .catch_up_s = 30};
    eddy_catch_up_t t = eddy_catch_up_target(&in);
    cr_assert_float_eq(t.arrival_rate, 500.0, EPS);
    cr_assert_float_eq(t.catch_up_rate, 0.0, EPS);
    cr_assert_float_eq(t.target_rate, 500.0, EPS);
}

Test(catch_up, arrival_never_negative_and_catch_up_off)
{
    /* A stale lag reading can make the backlog look as if it fell faster
     * than the source read: arrival is 0, not negative. */
    eddy_catch_up_input_t in = {.read = 100, .window_s = 1, .lag_before = 5000, .lag_now = 3000,
                                .catch_up_s = 0};
    eddy_catch_up_t t = eddy_catch_up_target(&in);
    cr_assert_float_eq(t.arrival_rate, 0.0, EPS);
    cr_assert_float_eq(t.catch_up_rate, 0.0, EPS, "--catch-up-s 0 ignores the backlog");
    cr_assert_float_eq(t.backlog, 3000.0, EPS);
    cr_assert_float_eq(t.target_rate, 0.0, EPS);
}

Test(catch_up, configured_rate_and_no_lag)
{
    /* A generator at 2000/s, 600 records behind its schedule, 3 s. */
    eddy_catch_up_input_t in = {.offered_rate = 2000, .read = 1500, .window_s = 1,
                                .lag_before = 100, .lag_now = 600, .catch_up_s = 3};
    eddy_catch_up_t t = eddy_catch_up_target(&in);
    cr_assert_float_eq(t.arrival_rate, 2000.0, EPS);
    cr_assert_float_eq(t.target_rate, 2200.0, EPS);
    /* Without a lag: the configured rate, as before; unlimited is unknown. */
    in.lag_now = -1;
    t = eddy_catch_up_target(&in);
    cr_assert_float_eq(t.target_rate, 2000.0, EPS);
    cr_assert(isnan(t.backlog));
    in.offered_rate = 0;
    t = eddy_catch_up_target(&in);
    cr_assert(isnan(t.target_rate));
}

/* ---- through the controller ---------------------------------------------------- */

/* source -> count (keyed) -> sink. Per window of `ms`: the source reads
 * `lines` and emits 4 words per line; count (1 ms of busy time per word,
 * 1000 words/s per instance) and the sink process them. */
typedef struct doc {
    uint32_t count_p;
    json_int_t read, words, count_busy_ns, sink_busy_ns;
    json_int_t lag; /* -1: not reported */
} doc_t;

static json_t *doc_json(const doc_t *d)
{
    json_t *src = json_pack("{s:s, s:i, s:b, s:b, s:n, s:I, s:I, s:I, s:f, s:i, s:i}", "name",
                            "source", "parallelism", 1, "keyed", 0, "source", 1, "input",
                            "records_in", d->read, "records_out", d->words, "busy_ns",
                            (json_int_t)1000, "offered_rate", 0.0, "min_parallelism", 1,
                            "max_parallelism", 32);
    if (d->lag >= 0)
        json_object_set_new(src, "source_lag", json_integer(d->lag));
    json_t *count = json_pack("{s:s, s:i, s:b, s:b, s:s, s:I, s:I, s:I, s:i, s:i}", "name",
                              "count", "parallelism", d->count_p, "keyed", 1, "source", 0,
                              "input", "source", "records_in", d->words, "records_out", d->words,
                              "busy_ns", d->count_busy_ns, "min_parallelism", 1,
                              "max_parallelism", 32);
    json_t *sink = json_pack("{s:s, s:i, s:b, s:b, s:s, s:I, s:I, s:I, s:i, s:i}", "name",
                             "sink", "parallelism", 1, "keyed", 0, "source", 0, "input", "count",
                             "records_in", d->words, "records_out", (json_int_t)0, "busy_ns",
                             d->sink_busy_ns, "min_parallelism", 1, "max_parallelism", 32);
    cr_assert(src && count && sink);
    return json_pack("{s:s, s:i, s:[o, o, o]}", "state", "running", "epoch", 1, "operators", src,
                     count, sink);
}

/* One window: lines read, the backlog after it. */
static void window(doc_t *d, json_int_t lines, json_int_t lag)
{
    d->read += lines;
    d->words += 4 * lines;
    d->count_busy_ns += 4 * lines * 1000000; /* 1 ms per word */
    d->sink_busy_ns += 4 * lines * 1000;
    d->lag = lag;
}

static const eddy_scaling_decision_t *observe_count(eddy_controller_t *ctl, const doc_t *d,
                                                    int64_t now_ms)
{
    eddy_err_t err = {{0}};
    eddy_controller_step_t step;
    json_t *doc = doc_json(d);
    cr_assert_eq(eddy_controller_observe(ctl, doc, now_ms, &step, &err), 0, "%s", err.msg);
    json_decref(doc);
    if (!step.evaluated)
        return NULL;
    cr_assert_eq(step.count, 3);
    cr_assert_str_eq(step.decisions[1].operator_name, "count");
    return &step.decisions[1];
}

static eddy_scaling_policy_config_t short_config(double catch_up_s)
{
    eddy_scaling_policy_config_t c = eddy_scaling_policy_config_default();
    c.job = "wc";
    c.interval_ms = 0;
    c.warmup_ms = 0;
    c.cooldown_ms = 0;
    c.scale_down_confirmations = 2;
    c.max_parallelism = 8;
    c.catch_up_s = catch_up_s;
    return c;
}

/* count at 1 instance reads 250 lines (1000 words) per second while 20000
 * lines wait; with --catch-up-s 10 the source must read 0 arriving + 2000
 * lines/s = 8000 words/s: ceil(8000 / (1000 x 0.8)) = 10 -> the max, 8. */
Test(catch_up, controller_sizes_count_for_the_backlog_then_scales_back_in)
{
    eddy_err_t err = {{0}};
    eddy_scaling_policy_config_t c = short_config(10);
    eddy_controller_t *ctl = eddy_controller_new(&c, &err);
    cr_assert(ctl, "%s", err.msg);
    doc_t d = {.count_p = 1, .lag = 20250};
    cr_assert_null(observe_count(ctl, &d, 1000)); /* baseline */
    window(&d, 250, 20000);
    const eddy_scaling_decision_t *dc = observe_count(ctl, &d, 2000);
    cr_assert(dc);
    cr_assert_eq(dc->action, EDDY_SCALING_SCALE_UP, "%s", dc->reason);
    cr_assert_eq(dc->new_parallelism, 8, "%s", dc->reason);
    cr_assert_float_eq(dc->rates.target_input_rate, 8000.0, 1e-6, "%s", dc->reason);
    cr_assert_float_eq(dc->rates.backlog, 20000.0, 1e-6);
    cr_assert(strstr(dc->reason, "backlog: source is 20000 records behind"), "%s", dc->reason);
    cr_assert(strstr(dc->reason, "adds 8000 rec/s"), "%s", dc->reason);
    /* applied: carried out */
    d.count_p = 8;
    d.lag = 0; /* drained meanwhile */
    cr_assert_null(observe_count(ctl, &d, 3000)); /* parallelism changed: new baseline */

    /* The backlog is gone: 100 lines/s arrive and are read; count needs
     * ceil(400 / (1000 x 0.7)) = 1 at the scale-down utilisation, after two
     * agreeing windows. */
    window(&d, 100, 0);
    dc = observe_count(ctl, &d, 4000);
    cr_assert(dc);
    cr_assert_eq(dc->action, EDDY_SCALING_NO_CHANGE, "%s", dc->reason);
    cr_assert(isnan(dc->rates.backlog));
    cr_assert_null(strstr(dc->reason, "backlog"), "%s", dc->reason);
    window(&d, 100, 0);
    dc = observe_count(ctl, &d, 5000);
    cr_assert(dc);
    cr_assert_eq(dc->action, EDDY_SCALING_SCALE_DOWN, "%s", dc->reason);
    cr_assert_eq(dc->new_parallelism, 1, "%s", dc->reason);
    cr_assert(dc->applied);
    eddy_controller_destroy(&ctl);
}

/* No lag reported: an unlimited source has no target, as before. */
Test(catch_up, without_a_lag_an_unlimited_source_has_no_target)
{
    eddy_err_t err = {{0}};
    eddy_scaling_policy_config_t c = short_config(10);
    eddy_controller_t *ctl = eddy_controller_new(&c, &err);
    cr_assert(ctl, "%s", err.msg);
    doc_t d = {.count_p = 1, .lag = -1};
    cr_assert_null(observe_count(ctl, &d, 1000));
    window(&d, 250, -1);
    const eddy_scaling_decision_t *dc = observe_count(ctl, &d, 2000);
    cr_assert(dc);
    cr_assert_eq(dc->action, EDDY_SCALING_NO_CHANGE, "%s", dc->reason);
    cr_assert(strstr(dc->reason, "target input rate unknown"), "%s", dc->reason);
    eddy_controller_destroy(&ctl);
}

/* ---- the latency objective --------------------------------------------------------- */

/* source -> count -> sink, one window of 1 s; count's rates meet a 1000
 * rec/s target at its current parallelism, so only the objective can ask
 * for more. */
static const size_t FROM_0[] = {0};
static const size_t FROM_1[] = {1};

static void slo_ops(eddy_ds2_operator_t ops[3], double count_busy, double blocked, double p99)
{
    memset(ops, 0, 3 * sizeof *ops);
    const char *names[] = {"source", "count", "sink"};
    for (size_t i = 0; i < 3; i++) {
        ops[i].name = names[i];
        ops[i].parallelism = i == 1 ? 2 : 1;
        ops[i].min_parallelism = i == 1 ? 1 : ops[i].parallelism;
        ops[i].max_parallelism = i == 1 ? 8 : ops[i].parallelism;
        ops[i].metrics.window_ns = 1000000000ull;
        ops[i].metrics.records_in = i ? 1000 : 0;
        ops[i].metrics.records_out = i < 2 ? 1000 : 0;
        ops[i].metrics.useful_ns = 10000000ull;
        ops[i].metrics.offered_rate = i ? NAN : 1000.0;
    }
    ops[1].upstreams = FROM_0;
    ops[1].upstream_count = 1;
    ops[2].upstreams = FROM_1;
    ops[2].upstream_count = 1;
    /* count: busy count_busy of its 2 instances' time */
    ops[1].metrics.useful_ns = (uint64_t)(count_busy * 2e9);
    ops[1].metrics.upstream_blocked = blocked;
    ops[2].metrics.latency_p99_ms = p99; /* the sink's: end to end */
    ops[1].metrics.latency_p99_ms = p99 / 2;
}

static eddy_scaling_decision_t slo_decide(double count_busy, double blocked, double p99,
                                          double slo_ms)
{
    eddy_err_t err = {{0}};
    eddy_scaling_policy_config_t c = short_config(30);
    c.latency_slo_ms = slo_ms;
    eddy_scaling_policy_t *p = eddy_scaling_policy_new(&c, &err);
    cr_assert(p, "%s", err.msg);
    eddy_ds2_operator_t ops[3];
    slo_ops(ops, count_busy, blocked, p99);
    eddy_scaling_decision_t d[3];
    cr_assert_eq(eddy_scaling_policy_decide(p, 1000, ops, 3, d, &err), 1, "%s", err.msg);
    eddy_scaling_policy_destroy(&p);
    return d[1];
}

/* Busy 0.45 x 2 instances for 1000 rec/s: true rate 1111/s per instance,
 * DS2 wants ceil(1000 / (1111 x 0.8)) = 2: no change by rates. */
Test(catch_up, slo_adds_an_instance_to_a_backpressured_operator)
{
    eddy_scaling_decision_t d = slo_decide(0.45, 0.3, 900, 200);
    cr_assert_eq(d.action, EDDY_SCALING_SCALE_UP, "%s", d.reason);
    cr_assert_eq(d.new_parallelism, 3, "%s", d.reason);
    cr_assert(d.applied);
    cr_assert_float_eq(d.rates.latency_p99_ms, 900.0, 1e-9);
    cr_assert(strstr(d.reason, "p99 latency 900 ms is above the 200 ms objective and count is "
                               "queueing (upstream blocked 30% of the time): one more instance, 3"),
              "%s", d.reason);
}

Test(catch_up, slo_adds_an_instance_to_a_busy_operator)
{
    /* busy 0.85 >= 0.8, DS2: 1000 / (588 x 0.8) = 2.1 -> 3 already; the
     * objective adds nothing more. At 0.79 busy DS2 wants 2 and the
     * objective does not apply (neither busy nor blocked). */
    eddy_scaling_decision_t d = slo_decide(0.85, 0.0, 900, 200);
    cr_assert_eq(d.action, EDDY_SCALING_SCALE_UP, "%s", d.reason);
    cr_assert_eq(d.new_parallelism, 3, "%s", d.reason);
    cr_assert(strstr(d.reason, "count is queueing (busy 0.85 >= 0.80): already scaling out"),
              "%s", d.reason);
}

Test(catch_up, slo_leaves_an_idle_operator_alone)
{
    eddy_scaling_decision_t d = slo_decide(0.2, 0.0, 900, 200);
    cr_assert_neq(d.action, EDDY_SCALING_SCALE_UP, "%s", d.reason);
    cr_assert(strstr(d.reason, "count is not queueing (busy 0.20, upstream blocked 0% of the "
                               "time): the latency is the sink's or the network's"),
              "%s", d.reason);
}

Test(catch_up, slo_met_or_off_changes_nothing)
{
    eddy_scaling_decision_t d = slo_decide(0.45, 0.3, 150, 200);
    cr_assert_eq(d.action, EDDY_SCALING_NO_CHANGE, "%s", d.reason);
    cr_assert_null(strstr(d.reason, "objective"), "%s", d.reason);
    cr_assert_float_eq(d.rates.latency_p99_ms, 150.0, 1e-9);
    d = slo_decide(0.45, 0.3, 900, 0);
    cr_assert_eq(d.action, EDDY_SCALING_NO_CHANGE, "%s", d.reason);
    cr_assert(isnan(d.rates.latency_p99_ms));
}
