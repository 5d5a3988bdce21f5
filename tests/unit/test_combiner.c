/* Local-global aggregation: the combiner chained before an aggregate's
 * shuffle where that is exact, and partial accumulators merging to the
 * same result as the raw records. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/jobs.h"
#include "operators/operators.h"
#include "plan/registry.h"
#include "state/keyed_state.h"
#include "state/keygroup.h"

static bool registered;

static void setup(void)
{
    if (registered)
        return;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_jobs_register_builtin(eddy_registry_default(), &err), 0, "%s", err.msg);
    registered = true;
}

TestSuite(combiner, .init = setup);

/* The kinds chained in stage `name` of wordcount built with args. */
static bool stage_has_combiner(char **args, int argc, const char *name)
{
    eddy_job_graph_t g;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_job_build(&g, "wordcount", argc, args, &err), 0, "%s", err.msg);
    int s = eddy_graph_find_stage(&g, name);
    cr_assert_geq(s, 0, "no stage %s", name);
    bool found = false;
    for (uint32_t i = 0; i < g.stages[s].n_ops; i++)
        if (g.stages[s].ops[i].ops == &eddy_combiner_ops) {
            found = true;
            cr_assert_not_null(g.stages[s].ops[i].key_fn, "a combiner keys like the keyed step");
            cr_assert_eq(i, g.stages[s].n_ops - 1, "the combiner comes last in its chain");
        }
    eddy_graph_clear(&g);
    return found;
}

Test(combiner, chained_before_the_shuffle_only_where_exact)
{
    char *final_args[] = {"--input", "/nonexistent", "--output", "/tmp/x"};
    cr_assert(stage_has_combiner(final_args, 4, "source"), "final counts pre-aggregate");
    char *changelog_args[] = {"--input", "/nonexistent"};
    cr_assert_not(stage_has_combiner(changelog_args, 2, "source"),
                  "a changelog would lose intermediate updates");
    char *off_args[] = {"--input", "/nonexistent", "--output", "/tmp/x", "--no-local-aggregation"};
    cr_assert_not(stage_has_combiner(off_args, 5, "source"));
    char *cost_args[] = {"--input", "/nonexistent", "--output", "/tmp/x", "--cost-us", "5"};
    cr_assert_not(stage_has_combiner(cost_args, 6, "source"), "a simulated cost is per record");
}

typedef struct capture {
    eddy_collector_t base;
    eddy_record_t recs[64];
    char data[64][16];
    int n;
} capture_t;

static void capture_emit(eddy_collector_t *c, const eddy_record_t *rec)
{
    capture_t *cap = (capture_t *)c;
    cr_assert_lt(cap->n, 64);
    memcpy(cap->data[cap->n], rec->data, rec->len);
    cap->recs[cap->n] = *rec;
    cap->recs[cap->n].data = cap->data[cap->n];
    cap->n++;
}

static uint32_t whole(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len;
}

Test(combiner, partials_merge_to_the_raw_result)
{
    eddy_aggregate_config_t cfg;
    eddy_aggregate_sum_config(&cfg, EDDY_EMIT_FINAL);
    eddy_err_t err = {{0}};
    eddy_op_context_t cctx = {.config = &cfg, .key_fn = whole, .max_parallelism = 128};
    void *comb = eddy_combiner_ops.open(&cctx, &err);
    cr_assert_not_null(comb, "%s", err.msg);
    capture_t partials = {.base.emit = capture_emit};
    const char *words[] = {"a", "b", "a", "c", "a", "b"};
    for (int i = 0; i < 6; i++) {
        eddy_record_t r = eddy_record_make(words[i], 1, 1);
        cr_assert_eq(eddy_combiner_ops.process(comb, &r, &partials.base, &err), 0);
    }
    cr_assert_eq(partials.n, 0, "nothing leaves before a flush");
    cr_assert_eq(eddy_combiner_ops.flush(comb, &partials.base, &err), 0);
    cr_assert_eq(partials.n, 3, "one partial per key");
    /* A retraction passes as it is; flushing twice sends nothing new. */
    eddy_record_t retract = {"a", 1, EDDY_UPDATE_BEFORE, 1, 0};
    cr_assert_eq(eddy_combiner_ops.process(comb, &retract, &partials.base, &err), 0);
    cr_assert_eq(partials.n, 4);
    cr_assert_eq(eddy_combiner_ops.flush(comb, &partials.base, &err), 0);
    cr_assert_eq(partials.n, 4);
    eddy_combiner_ops.close(comb);

    eddy_keyed_state_t *state = eddy_keyed_state_new(128, sizeof(int64_t));
    eddy_op_context_t actx = {.config = &cfg, .key_fn = whole, .keyed_state = state,
                              .max_parallelism = 128};
    void *agg = eddy_aggregate_ops.open(&actx, &err);
    cr_assert_not_null(agg, "%s", err.msg);
    capture_t out = {.base.emit = capture_emit};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(partials.recs[i].kind, EDDY_PARTIAL);
        cr_assert_eq(eddy_aggregate_ops.process(agg, &partials.recs[i], &out.base, &err), 0);
    }
    eddy_record_t more = eddy_record_make("a", 1, 1);
    cr_assert_eq(eddy_aggregate_ops.process(agg, &more, &out.base, &err), 0);
    cr_assert_eq(eddy_aggregate_ops.finish(agg, &out.base, &err), 0);
    int64_t a = 0, b = 0, c = 0;
    for (int i = 0; i < out.n; i++) {
        int64_t *dst = out.recs[i].data[0] == 'a' ? &a : out.recs[i].data[0] == 'b' ? &b : &c;
        *dst = out.recs[i].value;
    }
    cr_assert_eq(a, 4);
    cr_assert_eq(b, 2);
    cr_assert_eq(c, 1);
    eddy_aggregate_ops.close(agg);
    eddy_keyed_state_destroy(&state);
}
