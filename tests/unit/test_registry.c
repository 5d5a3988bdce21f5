/* test_registry.c - kinds, jobs and plan instantiation (plan/registry.c).
 *
 * A registry of a few test kinds: a job built through it becomes a plan,
 * and the plan a job graph whose stages, chains, edges, key selectors,
 * source rates and configured objects are what the plan says; unknown
 * kinds, duplicate names and refused configurations are clear errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/builder.h"
#include "plan/registry.h"
#include "tests/unit/leak_check.h"

TestSuite(registry, .fini = eddy_test_leak_check);

static void *nop_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)ctx;
    (void)err;
    return malloc(1);
}
static int nop_process(void *self, const eddy_record_t *rec, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self;
    (void)err;
    eddy_emit(out, rec);
    return 0;
}
static const eddy_operator_ops_t nop_ops = {.kind = "nop", .open = nop_open, .process = nop_process, .close = free};

static void *src_open(const eddy_op_context_t *ctx, int64_t start, eddy_err_t *err)
{
    (void)ctx;
    (void)start;
    (void)err;
    return malloc(1);
}
static int src_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    (void)self;
    (void)out;
    (void)max;
    (void)err;
    return 0;
}
static int64_t src_position(void *self)
{
    (void)self;
    return 0;
}
static const eddy_source_ops_t src_ops = {.kind = "src", .open = src_open, .poll = src_poll,
                                          .position = src_position, .close = free};

/* A configure() that checks its config and makes an object the graph owns. */
typedef struct threshold {
    int64_t min;
} threshold_t;
static void *threshold_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    int64_t min = eddy_config_int(cfg, "min", -1);
    if (min < 0) {
        eddy_err_set(err, "'min' must be >= 0");
        return NULL;
    }
    threshold_t *t = malloc(sizeof *t);
    t->min = min;
    return t;
}

static uint32_t key_all(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len;
}

static const eddy_operator_kind_t nop_kind = {.name = "nop", .ops = &nop_ops};
static const eddy_operator_kind_t threshold_kind = {
    .name = "threshold",
    .ops = &nop_ops,
    .configure = threshold_configure,
    .release = free,
};
static const eddy_source_kind_t src_kind = {.name = "lines", .ops = &src_ops};
static const eddy_key_kind_t key_kind = {.name = "all", .key = key_all};

static int build_demo(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    (void)err;
    int64_t min = argc > 0 ? atoll(argv[0]) : 5;
    eddy_builder_set_default_parallelism(b, 2);
    eddy_config_t *src = eddy_config_new();
    eddy_config_set_str(src, "rate", "100");
    eddy_stream_t s = eddy_source(b, "source", "lines", src);
    eddy_config_t *th = eddy_config_new();
    eddy_config_set_int(th, "min", min);
    s = eddy_filter(s, "keep", "threshold", th);
    s = eddy_reduce(eddy_key_by(s, "all"), "count", "nop", NULL);
    s = eddy_set_parallelism(s, 3);
    eddy_sink(eddy_global(s), "sink", "nop", NULL);
    return 0;
}
static const eddy_job_kind_t demo_job = {
    .name = "demo",
    .summary = "a test job",
    .usage = "",
    .build = build_demo,
};

static eddy_registry_t *make_registry(void)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_register_operator(r, &nop_kind, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_operator(r, &threshold_kind, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_source(r, &src_kind, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_key(r, &key_kind, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_job(r, &demo_job, &err), 0, "%s", err.msg);
    return r;
}

Test(registry, a_job_becomes_a_plan_and_the_plan_a_graph)
{
    eddy_registry_t *r = make_registry();
    eddy_err_t err = {{0}};
    char *args[] = {"7"};
    eddy_plan_t *plan = eddy_registry_build_plan(r, "demo", 1, args, &err);
    cr_assert(plan, "%s", err.msg);
    eddy_job_graph_t g;
    cr_assert_eq(eddy_plan_instantiate(plan, r, &g, &err), 0, "%s", err.msg);
    cr_assert_eq(g.n_stages, 3);
    cr_assert_str_eq(g.stages[0].name, "source");
    cr_assert_eq(g.stages[0].n_ops, 1, "the filter chains with its source");
    cr_assert_eq(g.stages[0].source, &src_ops);
    cr_assert_float_eq(eddy_rate_at(&g.stages[0].rate, 0), 100.0, 1e-9);
    const threshold_t *t = g.stages[0].ops[0].config;
    cr_assert_eq(t->min, 7);
    cr_assert_str_eq(g.stages[1].name, "count");
    cr_assert_eq(g.stages[1].edge, EDDY_EDGE_HASH);
    cr_assert_eq(g.stages[1].key_fn, key_all);
    cr_assert_eq(g.stages[1].parallelism, 3);
    cr_assert_eq(g.stages[2].edge, EDDY_EDGE_GLOBAL);
    cr_assert_eq(g.stages[2].parallelism, 1);
    eddy_graph_clear(&g);
    eddy_plan_destroy(&plan);
    eddy_registry_destroy(&r);
}

static uint32_t key_first_byte(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len ? 1 : 0;
}

/* A two-input step becomes one keyed stage reading both upstream stages,
 * each by its own key selector; an unknown second selector names the step. */
Test(registry, a_two_input_step_becomes_a_stage_with_two_keyed_inputs)
{
    eddy_registry_t *r = make_registry();
    eddy_err_t err = {{0}};
    static const eddy_key_kind_t first_byte = {.name = "first_byte", .key = key_first_byte};
    cr_assert_eq(eddy_register_key(r, &first_byte, &err), 0, "%s", err.msg);
    for (int known = 1; known >= 0; known--) {
        eddy_job_builder_t *b = eddy_job_builder_new("demo");
        eddy_stream_t s = eddy_source(b, "source", "lines", NULL);
        eddy_stream_t left = eddy_map(s, "left", "nop", NULL);
        eddy_stream_t right = eddy_map(s, "right", "nop", NULL);
        eddy_stream_t j = eddy_process2(eddy_key_by(left, "all"),
                                        eddy_key_by(right, known ? "first_byte" : "nope"), "join",
                                        "nop", NULL);
        eddy_sink(eddy_global(j), "sink", "nop", NULL);
        eddy_plan_t *plan = eddy_job_builder_finish(b, &err);
        cr_assert(plan, "%s", err.msg);
        eddy_job_builder_destroy(&b);
        eddy_job_graph_t g;
        if (!known) {
            cr_assert_eq(eddy_plan_instantiate(plan, r, &g, &err), -1);
            cr_assert(strstr(err.msg, "step 'join': unknown key selector 'nope'"), "%s", err.msg);
            eddy_plan_destroy(&plan);
            continue;
        }
        cr_assert_eq(eddy_plan_instantiate(plan, r, &g, &err), 0, "%s", err.msg);
        int js = eddy_graph_find_stage(&g, "join");
        cr_assert_geq(js, 0);
        const eddy_stage_def_t *d = &g.stages[js];
        cr_assert_eq(d->input, eddy_graph_find_stage(&g, "left"));
        cr_assert_eq(d->second_input, eddy_graph_find_stage(&g, "right"));
        cr_assert_eq(d->edge, EDDY_EDGE_HASH);
        cr_assert_eq(d->second_edge, EDDY_EDGE_HASH);
        cr_assert_eq(d->key_fn, key_all);
        cr_assert_eq(d->second_key_fn, key_first_byte);
        cr_assert(eddy_stage_is_keyed(d));
        cr_assert(eddy_stage_reads(d, (uint32_t)d->second_input));
        cr_assert_eq(eddy_stage_key_from(d, (uint32_t)d->second_input), key_first_byte);
        cr_assert_eq(g.stages[eddy_graph_find_stage(&g, "sink")].second_input, -1);
        eddy_graph_clear(&g);
        eddy_plan_destroy(&plan);
    }
    eddy_registry_destroy(&r);
}

Test(registry, unknown_kinds_and_refused_configs_name_the_step)
{
    eddy_registry_t *r = make_registry();
    eddy_err_t err = {{0}};
    char *bad[] = {"-1"};
    eddy_plan_t *plan = eddy_registry_build_plan(r, "demo", 1, bad, &err);
    cr_assert(plan, "%s", err.msg);
    eddy_job_graph_t g;
    cr_assert_eq(eddy_plan_instantiate(plan, r, &g, &err), -1);
    cr_assert(strstr(err.msg, "step 'keep'") && strstr(err.msg, "'min' must be >= 0"), "%s", err.msg);
    eddy_config_set_int(plan->nodes[1].config, "min", 1);
    snprintf(plan->nodes[2].kind, sizeof plan->nodes[2].kind, "nosuch");
    cr_assert_eq(eddy_plan_instantiate(plan, r, &g, &err), -1);
    cr_assert(strstr(err.msg, "unknown operator kind 'nosuch'"), "%s", err.msg);
    eddy_plan_destroy(&plan);

    cr_assert_null(eddy_registry_build_plan(r, "nojob", 0, NULL, &err));
    cr_assert(strstr(err.msg, "unknown job 'nojob'"), "%s", err.msg);
    eddy_registry_destroy(&r);
}

Test(registry, names_are_unique_and_kinds_complete)
{
    eddy_registry_t *r = make_registry();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_register_operator(r, &nop_kind, &err), -1);
    cr_assert(strstr(err.msg, "already registered"), "%s", err.msg);
    static const eddy_operator_ops_t half = {.kind = "half"};
    static const eddy_operator_kind_t half_kind = {.name = "half", .ops = &half};
    cr_assert_eq(eddy_register_operator(r, &half_kind, &err), -1);
    cr_assert_eq(eddy_registry_job_count(r), 1);
    cr_assert_str_eq(eddy_registry_job_at(r, 0)->name, "demo");
    cr_assert_eq(eddy_registry_job_at(r, 0)->build, demo_job.build);
    eddy_registry_destroy(&r);
}
