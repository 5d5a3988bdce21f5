/* test_udf.c - operators made from a user's functions (operators/udf.c):
 * a flat_map, a filter and an aggregate registered by function, put in a
 * plan, instantiated and driven through the built-in operators they wrap,
 * with a keyed state backend for the aggregate. The functions see the
 * step's configuration; the aggregate emits a changelog per update. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "plan/registry.h"
#include "state/keyed_state.h"
#include "state/keygroup.h"
#include "tests/unit/leak_check.h"

TestSuite(udf, .fini = eddy_test_leak_check);

typedef struct collected {
    eddy_collector_t base;
    char rows[32][64];
    int64_t values[32];
    int n;
} collected_t;

static void collect(eddy_collector_t *c, const eddy_record_t *rec)
{
    collected_t *self = (collected_t *)c;
    cr_assert_lt(self->n, 32);
    snprintf(self->rows[self->n], sizeof self->rows[0], "%c%.*s", "IBAD"[rec->kind], (int)rec->len,
             rec->data);
    self->values[self->n++] = rec->value;
}

/* "a,b,c" -> a, b, c; a separator from the config. */
static void split(const eddy_record_t *in, eddy_collector_t *out, const eddy_config_t *config)
{
    char sep = eddy_config_str(config, "sep", ",")[0];
    const char *p = in->data, *end = in->data + in->len;
    while (p <= end) {
        const char *q = memchr(p, sep, (size_t)(end - p));
        if (!q)
            q = end;
        eddy_record_t r = eddy_record_make(p, (uint32_t)(q - p), 1);
        eddy_emit(out, &r);
        p = q + 1;
    }
}

static bool longer_than(const eddy_record_t *in, const eddy_config_t *config)
{
    return in->len > (uint32_t)eddy_config_int(config, "min", 0);
}

typedef struct maxlen {
    int64_t longest;
} maxlen_t;
static void maxlen_add(void *acc, const eddy_record_t *rec)
{
    maxlen_t *m = acc;
    if ((int64_t)rec->len > m->longest)
        m->longest = rec->len;
}
static int64_t maxlen_result(const void *acc)
{
    return ((const maxlen_t *)acc)->longest;
}
static const eddy_aggregate_udf_t maxlen = {.acc_size = sizeof(maxlen_t), .add = maxlen_add,
                                            .result = maxlen_result};

static uint32_t first_char(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len ? 1 : 0;
}

Test(udf, functions_become_operators_that_see_their_config)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_register_flat_map(r, "split", split, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_filter(r, "longer", longer_than, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_aggregate(r, "maxlen", &maxlen, &err), 0, "%s", err.msg);
    const eddy_key_kind_t key = {.name = "first_char", .key = first_char};
    cr_assert_eq(eddy_register_key(r, &key, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_register_filter(r, "longer", longer_than, &err), -1, "names stay unique");
    const eddy_aggregate_udf_t bad = {.acc_size = 0};
    cr_assert_eq(eddy_register_aggregate(r, "bad", &bad, &err), -1);

    /* The operators through the kinds' configure(), as a worker opens them. */
    eddy_config_t *split_cfg = eddy_config_new(), *min_cfg = eddy_config_new();
    eddy_config_set_str(split_cfg, "sep", ";");
    eddy_config_set_int(min_cfg, "min", 2);
    const eddy_operator_kind_t *ks = eddy_registry_operator(r, "split");
    const eddy_operator_kind_t *kf = eddy_registry_operator(r, "longer");
    const eddy_operator_kind_t *ka = eddy_registry_operator(r, "maxlen");
    void *split_conf = ks->configure(split_cfg, ks->arg, &err);
    void *filter_conf = kf->configure(min_cfg, kf->arg, &err);
    void *agg_conf = ka->configure(min_cfg, ka->arg, &err);
    cr_assert(split_conf && filter_conf && agg_conf, "%s", err.msg);

    eddy_keyed_state_t *state = eddy_keyed_state_new(128, ka->ops->state_value_size(agg_conf));
    eddy_op_context_t ctx = {.job_id = "t", .stage_name = "s", .parallelism = 1,
                             .max_parallelism = 128, .key_groups = {0, 128},
                             .keyed_state = state, .key_fn = first_char};
    ctx.config = split_conf;
    void *op_split = ks->ops->open(&ctx, &err);
    ctx.config = filter_conf;
    void *op_filter = kf->ops->open(&ctx, &err);
    ctx.config = agg_conf;
    void *op_agg = ka->ops->open(&ctx, &err);
    cr_assert(op_split && op_filter && op_agg, "%s", err.msg);

    collected_t words = {.base.emit = collect}, kept = {.base.emit = collect},
                out = {.base.emit = collect};
    const char *line = "apple;ax;avocado;b;banana";
    eddy_record_t rec = eddy_record_make(line, (uint32_t)strlen(line), 0);
    cr_assert_eq(ks->ops->process(op_split, &rec, &words.base, &err), 0);
    cr_assert_eq(words.n, 5);
    for (int i = 0; i < words.n; i++) {
        eddy_record_t w = eddy_record_make(words.rows[i] + 1, (uint32_t)strlen(words.rows[i] + 1), 1);
        cr_assert_eq(kf->ops->process(op_filter, &w, &kept.base, &err), 0);
    }
    cr_assert_eq(kept.n, 3, "apple, avocado, banana are longer than 2");
    for (int i = 0; i < kept.n; i++) {
        eddy_record_t w = eddy_record_make(kept.rows[i] + 1, (uint32_t)strlen(kept.rows[i] + 1), 1);
        cr_assert_eq(ka->ops->process(op_agg, &w, &out.base, &err), 0, "%s", err.msg);
    }
    /* a: +I 5 (apple), then -U 5 / +U 7 (avocado); b: +I 6 (banana) */
    cr_assert_eq(out.n, 4);
    cr_assert_eq(out.values[0], 5);
    cr_assert_eq(out.values[2], 7);
    cr_assert_eq(out.values[3], 6);

    ks->ops->close(op_split);
    kf->ops->close(op_filter);
    ka->ops->close(op_agg);
    ks->release(split_conf);
    kf->release(filter_conf);
    ka->release(agg_conf);
    eddy_keyed_state_destroy(&state);
    eddy_config_destroy(&split_cfg);
    eddy_config_destroy(&min_cfg);
    eddy_registry_destroy(&r);
}
