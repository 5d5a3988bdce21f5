/* test_controller.c - the controller's snapshot -> window -> decision step.
 *
 * eddy_controller_observe() is the only place where the coordinator's
 * cumulative per-operator counters become DS2 windows, so mistakes there
 * (a wrong delta, a window spanning a restart, a source rate in the wrong
 * unit, rescaling an operator the coordinator cannot rescale) would make the
 * autoscaler act on nonsense while the DS2 and policy tests still pass.
 * These tests feed hand-built "metrics JOB" documents (json_pack) for
 * source -> count (keyed) -> sink through simulated time and check:
 *   - the first snapshot is only a baseline;
 *   - two consistent snapshots give the scale-up DS2 computes by hand,
 *     including the source's offered_rate x records_out/records_in scaling;
 *   - windows whose counters cannot be compared (counter backwards,
 *     parallelism or epoch change, operator set change) are skipped and the
 *     next window is measured from the new baseline;
 *   - non-keyed operators are pinned, keyed ones honour the job-wide bounds;
 *   - a job that is not "running" yields no decision;
 *   - the warm-up after the job's first snapshot is honoured.
 * The policy knobs are shortened (interval 0, no warm-up or cooldown unless
 * a test says otherwise) so that every comparable window is evaluated. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "controller/controller.h"
#include "leak_check.h"

TestSuite(controller, .fini = eddy_test_leak_check);

#define SRC 0
#define COUNT 1
#define SINK 2
#define OPS 3

/* Cumulative counters of one operator, as the coordinator reports them. */
typedef struct op_counters {
    uint32_t parallelism;
    json_int_t records_in, records_out, busy_ns;
} op_counters_t;

typedef struct job_doc {
    const char *state;
    json_int_t epoch;
    double offered_rate; /* the source's, in records it reads per second */
    bool sink_keyed;     /* default false */
    bool count_keyed;    /* default true (set by job_init) */
    json_t *count_hot;   /* count's hot key fields, merged in when set (owned) */
    op_counters_t ops[OPS];
} job_doc_t;

static void job_init(job_doc_t *j)
{
    memset(j, 0, sizeof *j);
    j->state = "running";
    j->epoch = 1;
    j->offered_rate = 0;
    j->count_keyed = true;
    for (size_t i = 0; i < OPS; i++)
        j->ops[i].parallelism = 1;
}

static json_t *op_json(const char *name, const op_counters_t *c, bool keyed, bool source,
                       const char *input, double offered_rate)
{
    json_t *o = json_pack("{s:s, s:I, s:b, s:b, s:s?, s:I, s:I, s:I, s:i, s:i}", "name", name,
                          "parallelism", (json_int_t)c->parallelism, "keyed", keyed, "source",
                          source, "input", input, "records_in", c->records_in, "records_out",
                          c->records_out, "busy_ns", c->busy_ns, "min_parallelism", 1,
                          "max_parallelism", 32);
    cr_assert_not_null(o, "json_pack of operator %s", name);
    if (source)
        cr_assert_eq(json_object_set_new(o, "offered_rate", json_real(offered_rate)), 0);
    return o;
}

static json_t *job_json(const job_doc_t *j)
{
    json_t *doc = json_pack(
        "{s:s, s:I, s:[o, o, o]}", "state", j->state, "epoch", j->epoch, "operators",
        op_json("source", &j->ops[SRC], false, true, NULL, j->offered_rate),
        op_json("count", &j->ops[COUNT], j->count_keyed, false, "source", 0),
        op_json("sink", &j->ops[SINK], j->sink_keyed, false, "count", 0));
    cr_assert_not_null(doc, "json_pack of the job document");
    if (j->count_hot)
        json_object_update(json_array_get(json_object_get(doc, "operators"), COUNT), j->count_hot);
    return doc;
}

/* Observes j at now_ms; the step must succeed. */
static void observe(eddy_controller_t *ctl, const job_doc_t *j, int64_t now_ms,
                    eddy_controller_step_t *step)
{
    json_t *doc = job_json(j);
    eddy_err_t err = {{0}};
    int rc = eddy_controller_observe(ctl, doc, now_ms, step, &err);
    json_decref(doc);
    cr_assert_eq(rc, 0, "observe at %lld ms: %s", (long long)now_ms, err.msg);
}

static eddy_scaling_policy_config_t short_config(void)
{
    eddy_scaling_policy_config_t c = eddy_scaling_policy_config_default();
    c.job = "wordcount";
    c.interval_ms = 0;
    c.warmup_ms = 0;
    c.cooldown_ms = 0;
    return c;
}

static eddy_controller_t *controller_new(const eddy_scaling_policy_config_t *c)
{
    eddy_err_t err = {{0}};
    eddy_controller_t *ctl = eddy_controller_new(c, &err);
    cr_assert_not_null(ctl, "eddy_controller_new: %s", err.msg);
    return ctl;
}

static const eddy_scaling_decision_t *decision_for(const eddy_controller_step_t *step,
                                                   const char *name)
{
    for (size_t i = 0; i < step->count; i++)
        if (!strcmp(step->decisions[i].operator_name, name))
            return &step->decisions[i];
    cr_assert_fail("no decision for %s", name);
    return NULL;
}

/* Adds one 10 s window's worth of work to the cumulative counters:
 *   source  reads 10000 lines, emits 50000 words (chained splitter), busy 1 s
 *   count   processes 50000 words, emits 50000 updates, busy busy_count_ns
 *           summed over its instances
 *   sink    processes 50000 updates, busy 1 s
 * With offered_rate 3000 lines/s the source stage's offered output is
 * 3000 * 50000/10000 = 15000 words/s. */
static void add_window(job_doc_t *j, json_int_t busy_count_ns)
{
    j->ops[SRC].records_in += 10000;
    j->ops[SRC].records_out += 50000;
    j->ops[SRC].busy_ns += 1000000000;
    j->ops[COUNT].records_in += 50000;
    j->ops[COUNT].records_out += 50000;
    j->ops[COUNT].busy_ns += busy_count_ns;
    j->ops[SINK].records_in += 50000;
    j->ops[SINK].busy_ns += 1000000000;
}

/* The base document: count at parallelism 2, 3000 lines/s offered, some
 * counters already accumulated since the tasks started. */
static void job_base(job_doc_t *j)
{
    job_init(j);
    j->offered_rate = 3000;
    j->ops[COUNT].parallelism = 2;
    j->ops[SRC].records_in = 7000;
    j->ops[SRC].records_out = 35000;
    j->ops[SRC].busy_ns = 500000000;
    j->ops[COUNT].records_in = 35000;
    j->ops[COUNT].records_out = 35000;
    j->ops[COUNT].busy_ns = 7000000000;
    j->ops[SINK].records_in = 35000;
    j->ops[SINK].busy_ns = 700000000;
}

Test(controller, first_snapshot_is_only_a_baseline)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    cr_assert_not(step.evaluated, "first snapshot evaluated");
    cr_assert_eq(step.count, 0);
    cr_assert_not(step.job_ended);
    cr_assert_str_eq(step.state, "running");
    cr_assert_not_null(strstr(step.note, "first snapshot"), "note: %s", step.note);
    eddy_controller_destroy(&ctl);
    cr_assert_null(ctl);
}

/* Window: 10 s. count: 50000 words in 10 s of busy time over 2 instances, so
 * true rate 5000 words/s per instance, selectivity 1. Target input rate =
 * the source stage's offered output = 3000 lines/s * 50000/10000 = 15000
 * words/s. DS2: ceil(15000 / (5000 * 0.8)) = ceil(3.75) = 4.
 * (Without the records_out/records_in scaling the target would be 3000 and
 * DS2 would want ceil(0.75) = 1, not a scale-up.) The sink is fast:
 * 50000 rec/s per instance, ceil(15000 / 40000) = 1. */
Test(controller, consistent_window_scales_up_keyed_operator_to_ds2_value)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    observe(ctl, &j, 11000, &step);
    cr_assert(step.evaluated, "not evaluated: %s", step.note);
    cr_assert_eq(step.count, OPS);

    const eddy_scaling_decision_t *d = decision_for(&step, "count");
    cr_assert_eq(d->action, EDDY_SCALING_SCALE_UP, "count: %s (%s)",
                 eddy_scaling_action_name(d->action), d->reason);
    cr_assert_eq(d->old_parallelism, 2);
    cr_assert_eq(d->new_parallelism, 4, "count -> %u (%s)", d->new_parallelism, d->reason);
    cr_assert(d->applied, "not applied: %s", d->reason);
    cr_assert_float_eq(d->rates.target_input_rate, 15000.0, 1e-6);
    cr_assert_float_eq(d->rates.true_rate_per_instance, 5000.0, 1e-6);
    cr_assert_float_eq(d->rates.observed_input_rate, 5000.0, 1e-6);
    cr_assert_float_eq(d->rates.selectivity, 1.0, 1e-9);
    cr_assert_float_eq(d->rates.utilisation, 0.5, 1e-9);
    cr_assert_str_eq(d->job, "wordcount");
    cr_assert_eq(d->time_ms, 11000);

    const eddy_scaling_decision_t *s = decision_for(&step, "sink");
    cr_assert_eq(s->action, EDDY_SCALING_NO_CHANGE, "sink: %s", s->reason);
    cr_assert_eq(s->new_parallelism, 1);
    cr_assert_float_eq(s->rates.target_input_rate, 15000.0, 1e-6);
    const eddy_scaling_decision_t *src = decision_for(&step, "source");
    cr_assert_eq(src->action, EDDY_SCALING_NO_CHANGE, "source: %s", src->reason);
    cr_assert_not(src->applied);
    eddy_controller_destroy(&ctl);
}

/* A source with offered_rate 0 (unlimited) gives no target: nothing moves. */
Test(controller, unlimited_source_gives_no_target)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    j.offered_rate = 0;
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    observe(ctl, &j, 11000, &step);
    cr_assert(step.evaluated, "not evaluated: %s", step.note);
    for (size_t i = 0; i < step.count; i++) {
        cr_assert_eq(step.decisions[i].action, EDDY_SCALING_NO_CHANGE, "%s: %s",
                     step.decisions[i].operator_name, step.decisions[i].reason);
        cr_assert_not(step.decisions[i].applied);
    }
    eddy_controller_destroy(&ctl);
}

/* Checks that the step after a skipped window is measured from the skipped
 * snapshot: it is fed one clean window (count scaled to 4 as above). */
static void expect_clean_window_after(eddy_controller_t *ctl, job_doc_t *j, int64_t now_ms)
{
    eddy_controller_step_t step;
    /* 10 s of busy time summed over the instances: 5000 words/s per
     * instance whatever the parallelism. */
    add_window(j, 10000000000);
    observe(ctl, j, now_ms, &step);
    cr_assert(step.evaluated, "window after the skip not evaluated: %s", step.note);
    const eddy_scaling_decision_t *d = decision_for(&step, "count");
    cr_assert_float_eq(d->rates.target_input_rate, 15000.0, 1e-6, "%s", d->reason);
    cr_assert_float_eq(d->rates.true_rate_per_instance, 5000.0, 1e-6, "%s", d->reason);
    cr_assert_eq(d->new_parallelism, 4, "count -> %u (%s)", d->new_parallelism, d->reason);
}

Test(controller, counter_going_backwards_skips_the_window)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    /* count's tasks restarted without an epoch change: its counters fall
     * back to small values. A naive delta would be a huge unsigned number. */
    add_window(&j, 10000000000);
    j.ops[COUNT].records_in = 100; /* only this counter: each is checked */
    observe(ctl, &j, 11000, &step);
    cr_assert_not(step.evaluated, "window with a counter going backwards evaluated");
    cr_assert_eq(step.count, 0);
    cr_assert_not_null(strstr(step.note, "backwards"), "note: %s", step.note);
    cr_assert_not_null(strstr(step.note, "count"), "note: %s", step.note);
    expect_clean_window_after(ctl, &j, 21000);
    eddy_controller_destroy(&ctl);
}

Test(controller, busy_time_going_backwards_skips_the_window)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    j.ops[SINK].busy_ns = 1; /* only busy_ns, of a non-scaled operator */
    observe(ctl, &j, 11000, &step);
    cr_assert_not(step.evaluated, "window with busy_ns going backwards evaluated");
    cr_assert_not_null(strstr(step.note, "sink"), "note: %s", step.note);
    expect_clean_window_after(ctl, &j, 21000);
    eddy_controller_destroy(&ctl);
}

Test(controller, records_out_going_backwards_skips_the_window)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    j.ops[SRC].records_out = 10; /* only records_out, of the source */
    observe(ctl, &j, 11000, &step);
    cr_assert_not(step.evaluated, "window with records_out going backwards evaluated");
    cr_assert_not_null(strstr(step.note, "source"), "note: %s", step.note);
    expect_clean_window_after(ctl, &j, 21000);
    eddy_controller_destroy(&ctl);
}

Test(controller, parallelism_change_skips_the_window)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    /* count was rescaled 2 -> 3 between the snapshots; its counters are a
     * mix of old and new tasks, so the window must not be used. */
    add_window(&j, 10000000000);
    j.ops[COUNT].parallelism = 3;
    observe(ctl, &j, 11000, &step);
    cr_assert_not(step.evaluated, "window across a parallelism change evaluated");
    cr_assert_not_null(strstr(step.note, "parallelism"), "note: %s", step.note);
    /* Next clean window: count at 3, 5000 words/s per instance, wants 4. */
    expect_clean_window_after(ctl, &j, 21000);
    eddy_controller_destroy(&ctl);
}

/* The parallelism change is reported to the policy as a rescale of the
 * operator, so a cooldown runs from it. */
Test(controller, parallelism_change_starts_the_cooldown)
{
    eddy_scaling_policy_config_t c = short_config();
    c.cooldown_ms = 60000;
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    j.ops[COUNT].parallelism = 3;
    observe(ctl, &j, 11000, &step);
    cr_assert_not(step.evaluated);
    add_window(&j, 10000000000);
    observe(ctl, &j, 21000, &step);
    cr_assert(step.evaluated, "%s", step.note);
    const eddy_scaling_decision_t *d = decision_for(&step, "count");
    cr_assert_eq(d->action, EDDY_SCALING_SCALE_UP, "%s", d->reason);
    cr_assert_eq(d->new_parallelism, 4, "%s", d->reason);
    cr_assert_not(d->applied, "applied during the cooldown: %s", d->reason);
    eddy_controller_destroy(&ctl);
}

Test(controller, epoch_change_skips_the_window)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    /* Recovery recreated the tasks (new epoch) and their counters restarted
     * from zero, then grew past the old values: no counter goes backwards,
     * only the epoch says the window is not comparable. */
    add_window(&j, 10000000000);
    add_window(&j, 10000000000);
    j.epoch = 2;
    observe(ctl, &j, 11000, &step);
    cr_assert_not(step.evaluated, "window across an epoch change evaluated");
    cr_assert_not_null(strstr(step.note, "epoch"), "note: %s", step.note);
    expect_clean_window_after(ctl, &j, 21000);
    eddy_controller_destroy(&ctl);
}

Test(controller, operator_set_change_skips_the_window)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    json_t *doc = job_json(&j);
    json_t *ops = json_object_get(doc, "operators");
    cr_assert_eq(json_object_set_new(json_array_get(ops, COUNT), "name", json_string("count2")),
                 0);
    cr_assert_eq(json_object_set_new(json_array_get(ops, SINK), "input", json_string("count2")),
                 0);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_controller_observe(ctl, doc, 11000, &step, &err), 0, "%s", err.msg);
    json_decref(doc);
    cr_assert_not(step.evaluated, "window across an operator change evaluated");
    cr_assert_not_null(strstr(step.note, "operators changed"), "note: %s", step.note);
    eddy_controller_destroy(&ctl);
}

/* Every operator slow enough that DS2 wants 4 instances of each; only the
 * keyed one may move. */
Test(controller, non_keyed_operators_are_never_scaled)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    j.ops[COUNT].parallelism = 1;
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    /* sink: 50000 records in 10 s busy -> 5000/s, wants ceil(15000/4000) = 4 */
    j.ops[SINK].busy_ns += 9000000000;
    /* source: 50000 emitted in 10 s busy -> 5000/s, wants 4 too */
    j.ops[SRC].busy_ns += 9000000000;
    observe(ctl, &j, 11000, &step);
    cr_assert(step.evaluated, "%s", step.note);
    const eddy_scaling_decision_t *d = decision_for(&step, "count");
    cr_assert_eq(d->action, EDDY_SCALING_SCALE_UP, "%s", d->reason);
    cr_assert_eq(d->new_parallelism, 4, "count -> %u (%s)", d->new_parallelism, d->reason);
    static const char *pinned[] = {"source", "sink"};
    for (size_t i = 0; i < 2; i++) {
        const eddy_scaling_decision_t *p = decision_for(&step, pinned[i]);
        cr_assert_eq(p->action, EDDY_SCALING_NO_CHANGE, "%s: %s", pinned[i], p->reason);
        cr_assert_eq(p->new_parallelism, 1, "%s -> %u", pinned[i], p->new_parallelism);
        cr_assert_not(p->applied, "%s applied", pinned[i]);
    }

    /* The same with count not keyed: nothing at all is scaled. */
    eddy_controller_t *ctl2 = controller_new(&c);
    job_base(&j);
    j.ops[COUNT].parallelism = 1;
    j.count_keyed = false;
    observe(ctl2, &j, 1000, &step);
    add_window(&j, 10000000000);
    observe(ctl2, &j, 11000, &step);
    cr_assert(step.evaluated, "%s", step.note);
    for (size_t i = 0; i < step.count; i++) {
        cr_assert_eq(step.decisions[i].action, EDDY_SCALING_NO_CHANGE, "%s: %s",
                     step.decisions[i].operator_name, step.decisions[i].reason);
        cr_assert_eq(step.decisions[i].new_parallelism, step.decisions[i].old_parallelism);
        cr_assert_not(step.decisions[i].applied);
    }
    eddy_controller_destroy(&ctl2);
    eddy_controller_destroy(&ctl);
}

/* The job-wide max applies to keyed operators (and does not conflict with
 * pinned ones above it). */
Test(controller, job_wide_bounds_apply_to_keyed_operators)
{
    eddy_scaling_policy_config_t c = short_config();
    c.max_parallelism = 3;
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    j.ops[SINK].parallelism = 5; /* non-keyed, above the job-wide max */
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    observe(ctl, &j, 11000, &step);
    cr_assert(step.evaluated, "%s", step.note);
    const eddy_scaling_decision_t *d = decision_for(&step, "count");
    cr_assert_eq(d->action, EDDY_SCALING_SCALE_UP, "%s", d->reason);
    cr_assert_eq(d->new_parallelism, 3, "count -> %u (%s)", d->new_parallelism, d->reason);
    const eddy_scaling_decision_t *s = decision_for(&step, "sink");
    cr_assert_eq(s->action, EDDY_SCALING_NO_CHANGE, "%s", s->reason);
    cr_assert_eq(s->new_parallelism, 5);
    eddy_controller_destroy(&ctl);
}

Test(controller, job_not_running_gives_no_decision)
{
    static const char *states[] = {"deploying", "rescaling", "recovering"};
    for (size_t k = 0; k < sizeof states / sizeof *states; k++) {
        eddy_scaling_policy_config_t c = short_config();
        eddy_controller_t *ctl = controller_new(&c);
        job_doc_t j;
        job_base(&j);
        eddy_controller_step_t step;
        observe(ctl, &j, 1000, &step);
        add_window(&j, 10000000000);
        j.state = states[k];
        observe(ctl, &j, 11000, &step);
        cr_assert_not(step.evaluated, "%s: evaluated", states[k]);
        cr_assert_eq(step.count, 0, "%s", states[k]);
        cr_assert_not(step.job_ended, "%s", states[k]);
        cr_assert_str_eq(step.state, states[k]);
        /* Back to running: the window starts at the non-running snapshot. */
        j.state = "running";
        expect_clean_window_after(ctl, &j, 21000);
        eddy_controller_destroy(&ctl);
    }
}

Test(controller, ended_job_gives_no_decision)
{
    static const char *states[] = {"finished", "failed", "cancelled"};
    for (size_t k = 0; k < sizeof states / sizeof *states; k++) {
        eddy_scaling_policy_config_t c = short_config();
        eddy_controller_t *ctl = controller_new(&c);
        job_doc_t j;
        job_base(&j);
        eddy_controller_step_t step;
        observe(ctl, &j, 1000, &step);
        add_window(&j, 10000000000);
        j.state = states[k];
        observe(ctl, &j, 11000, &step);
        cr_assert(step.job_ended, "%s: not ended", states[k]);
        cr_assert_not(step.evaluated, "%s: evaluated", states[k]);
        cr_assert_eq(step.count, 0, "%s", states[k]);
        cr_assert_str_eq(step.state, states[k]);
        eddy_controller_destroy(&ctl);
    }
}

/* The first snapshot starts the job's warm-up: a window ending inside it is
 * evaluated but changes nothing; the next one scales. */
Test(controller, warmup_after_first_snapshot)
{
    eddy_scaling_policy_config_t c = short_config();
    c.warmup_ms = 15000;
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    observe(ctl, &j, 11000, &step);
    cr_assert(step.evaluated, "%s", step.note);
    const eddy_scaling_decision_t *d = decision_for(&step, "count");
    cr_assert_eq(d->action, EDDY_SCALING_NO_CHANGE, "%s", d->reason);
    cr_assert_not(d->applied);
    cr_assert_not_null(strstr(d->reason, "warm-up"), "reason: %s", d->reason);
    add_window(&j, 10000000000);
    observe(ctl, &j, 21000, &step);
    cr_assert(step.evaluated, "%s", step.note);
    d = decision_for(&step, "count");
    cr_assert_eq(d->action, EDDY_SCALING_SCALE_UP, "%s", d->reason);
    cr_assert_eq(d->new_parallelism, 4, "%s", d->reason);
    cr_assert(d->applied, "%s", d->reason);
    eddy_controller_destroy(&ctl);
}

/* With an interval, an early call extends the window instead of using it. */
Test(controller, early_call_extends_the_window)
{
    eddy_scaling_policy_config_t c = short_config();
    c.interval_ms = 10000;
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    observe(ctl, &j, 11000, &step); /* first evaluation */
    cr_assert(step.evaluated, "%s", step.note);
    /* 5 s later: half a window, interval not elapsed. */
    add_window(&j, 10000000000);
    observe(ctl, &j, 16000, &step);
    cr_assert_not(step.evaluated);
    cr_assert_not_null(strstr(step.note, "interval"), "note: %s", step.note);
    /* At 21000 ms the window is 11000..21000 and holds both increments:
     * 100000 words in 20 s busy over 2 instances -> still 5000/s per
     * instance; the source stage offers 15000 words/s. */
    add_window(&j, 10000000000);
    observe(ctl, &j, 21000, &step);
    cr_assert(step.evaluated, "%s", step.note);
    const eddy_scaling_decision_t *d = decision_for(&step, "count");
    cr_assert_float_eq(d->rates.true_rate_per_instance, 5000.0, 1e-6, "%s", d->reason);
    cr_assert_float_eq(d->rates.observed_input_rate, 10000.0, 1e-6, "%s", d->reason);
    eddy_controller_destroy(&ctl);
}

Test(controller, malformed_document_is_rejected_and_not_a_baseline)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    json_t *doc = job_json(&j);
    json_object_del(json_array_get(json_object_get(doc, "operators"), COUNT), "busy_ns");
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_controller_observe(ctl, doc, 11000, &step, &err), -1);
    cr_assert_not_null(strstr(err.msg, "busy_ns"), "%s", err.msg);
    json_decref(doc);
    /* The baseline is still the 1000 ms snapshot: a 20 s window follows. */
    add_window(&j, 10000000000);
    observe(ctl, &j, 21000, &step);
    cr_assert(step.evaluated, "%s", step.note);
    const eddy_scaling_decision_t *d = decision_for(&step, "count");
    cr_assert_float_eq(d->rates.observed_input_rate, 5000.0, 1e-6, "%s", d->reason);
    cr_assert_float_eq(d->rates.true_rate_per_instance, 5000.0, 1e-6, "%s", d->reason);
    eddy_controller_destroy(&ctl);
}

/* A two-input operator (eddy_process2) lists its second upstream as
 * "second_input": DS2's target input rate is the sum of both upstreams'
 * target output rates. source (1000 events/s offered, selectivity 1) feeds
 * persons (keeps 1 in 10) and auctions (3 in 10); join reads both: 100 +
 * 300 = 400 records/s. */
static json_t *join_doc(json_int_t windows)
{
    json_int_t n = windows;
    json_t *ops = json_pack(
        "[{s:s, s:i, s:b, s:b, s:n, s:I, s:I, s:I, s:i, s:i, s:f},"
        " {s:s, s:i, s:b, s:b, s:s, s:I, s:I, s:I, s:i, s:i},"
        " {s:s, s:i, s:b, s:b, s:s, s:I, s:I, s:I, s:i, s:i},"
        " {s:s, s:i, s:b, s:b, s:s, s:s, s:I, s:I, s:I, s:i, s:i}]",
        "name", "source", "parallelism", 1, "keyed", 0, "source", 1, "input", "records_in",
        n * 10000, "records_out", n * 10000, "busy_ns", n * 100000000, "min_parallelism", 1,
        "max_parallelism", 32, "offered_rate", 1000.0,
        "name", "persons", "parallelism", 1, "keyed", 0, "source", 0, "input", "source",
        "records_in", n * 10000, "records_out", n * 1000, "busy_ns", n * 100000000,
        "min_parallelism", 1, "max_parallelism", 32,
        "name", "auctions", "parallelism", 1, "keyed", 0, "source", 0, "input", "source",
        "records_in", n * 10000, "records_out", n * 3000, "busy_ns", n * 100000000,
        "min_parallelism", 1, "max_parallelism", 32,
        "name", "join", "parallelism", 2, "keyed", 1, "source", 0, "input", "persons",
        "second_input", "auctions", "records_in", n * 4000, "records_out", n * 400, "busy_ns",
        n * 1000000000, "min_parallelism", 1, "max_parallelism", 32);
    cr_assert_not_null(ops);
    return json_pack("{s:s, s:i, s:o}", "state", "running", "epoch", 1, "operators", ops);
}

Test(controller, a_two_input_operator_sums_both_upstreams)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    eddy_controller_step_t step;
    eddy_err_t err = {{0}};
    json_t *doc = join_doc(1);
    cr_assert_eq(eddy_controller_observe(ctl, doc, 1000, &step, &err), 0, "%s", err.msg);
    json_decref(doc);
    doc = join_doc(2);
    cr_assert_eq(eddy_controller_observe(ctl, doc, 11000, &step, &err), 0, "%s", err.msg);
    json_decref(doc);
    cr_assert(step.evaluated, "not evaluated: %s", step.note);
    const eddy_scaling_decision_t *d = decision_for(&step, "join");
    cr_assert_float_eq(d->rates.target_input_rate, 400.0, 1e-6);

    /* A second input that names no earlier operator is refused. */
    doc = join_doc(3);
    json_t *join = json_array_get(json_object_get(doc, "operators"), 3);
    json_object_set_new(join, "second_input", json_string("nowhere"));
    cr_assert_eq(eddy_controller_observe(ctl, doc, 21000, &step, &err), -1);
    cr_assert(strstr(err.msg, "'nowhere'"), "%s", err.msg);
    json_decref(doc);
    eddy_controller_destroy(&ctl);
}

/* The coordinator's hot key of count (hot_key.c) reaches the policy: DS2
 * wants 4 instances (see consistent_window_...), but key group 9 carries
 * half of count's records, so past ceil(1 / 0.5) = 2 instances nothing
 * improves: the decision stays at 2 and names the group. */
/* A baseline and one 10 s window (count busy 10 s over its 2 instances):
 * count's decision. */
static const eddy_scaling_decision_t *count_after_one_window(eddy_controller_t *ctl, job_doc_t *j,
                                                             eddy_controller_step_t *step)
{
    observe(ctl, j, 1000, step);
    add_window(j, 10000000000);
    observe(ctl, j, 11000, step);
    cr_assert(step->evaluated, "not evaluated: %s", step->note);
    return decision_for(step, "count");
}

Test(controller, hot_key_group_of_the_metrics_caps_the_scale_up)
{
    eddy_scaling_policy_config_t c = short_config();
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    j.count_hot = json_pack("{s:f, s:i}", "hot_key_share", 0.5, "hot_key_group", 9);
    eddy_controller_step_t step;
    const eddy_scaling_decision_t *d = count_after_one_window(ctl, &j, &step);
    cr_assert_eq(d->action, EDDY_SCALING_NO_CHANGE, "count: %s", d->reason);
    cr_assert(d->infeasible);
    cr_assert_not_null(strstr(d->reason, "limited by hot key group 9 (50% of the records"), "%s",
                       d->reason);
    json_decref(j.count_hot);
    eddy_controller_destroy(&ctl);

    /* a share that is not one (or no group) is ignored: DS2 alone */
    const char *bad[] = {"{\"hot_key_share\": 1.5, \"hot_key_group\": 9}",
                         "{\"hot_key_share\": 0.5}",
                         "{\"hot_key_share\": \"half\", \"hot_key_group\": 9}",
                         "{\"hot_key_share\": 0.5, \"hot_key_group\": -1}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ctl = controller_new(&c);
        job_base(&j);
        j.count_hot = json_loads(bad[i], 0, NULL);
        cr_assert_not_null(j.count_hot);
        d = count_after_one_window(ctl, &j, &step);
        cr_assert_eq(d->new_parallelism, 4, "%s: %s", bad[i], d->reason);
        cr_assert_not(d->infeasible, "%s: %s", bad[i], d->reason);
        json_decref(j.count_hot);
        eddy_controller_destroy(&ctl);
    }
}

/* The flink policy reads the busiest instance (the instances' busy_ns):
 * count's 10 s of busy time in the window all on instance 0 (share 1.0)
 * makes its true rate 50000 words / 10 s / (1.0 x 2) = 2500 per instance,
 * so 15000 words/s need ceil(15000 / (2500 x 0.7)) = 9 -> 16 (the next
 * divisor of 128 key groups); by the average (5000) it would be 5 -> 8. */
Test(controller, flink_policy_takes_the_busiest_instance)
{
    eddy_scaling_policy_config_t c = short_config();
    c.kind = EDDY_POLICY_FLINK;
    eddy_controller_t *ctl = controller_new(&c);
    job_doc_t j;
    job_base(&j);
    j.count_hot = json_pack("{s:[{s:I}, {s:I}]}", "instances", "busy_ns", (json_int_t)3500000000,
                            "busy_ns", (json_int_t)3500000000);
    eddy_controller_step_t step;
    observe(ctl, &j, 1000, &step);
    add_window(&j, 10000000000);
    json_decref(j.count_hot);
    j.count_hot = json_pack("{s:[{s:I}, {s:I}]}", "instances", "busy_ns", (json_int_t)13500000000,
                            "busy_ns", (json_int_t)3500000000);
    observe(ctl, &j, 11000, &step);
    cr_assert(step.evaluated, "%s", step.note);
    const eddy_scaling_decision_t *d = decision_for(&step, "count");
    cr_assert_eq(d->new_parallelism, 16, "%s", d->reason);
    cr_assert_str_eq(d->policy, "flink");
    cr_assert_not_null(strstr(d->reason, "max busy"), "%s", d->reason);
    json_decref(j.count_hot);
    eddy_controller_destroy(&ctl);
}
