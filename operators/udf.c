/* udf.c - operator kinds made from a user's functions (api/plugin.h):
 * eddy_register_flat_map, _filter and _aggregate wrap the built-in flat_map,
 * filter and keyed aggregate operators. The kind's arg (owned by the
 * registry) holds the user's functions; configure() makes the built-in
 * operator's config, whose trampoline hands the step's eddy_config_t on. */
#include <stdlib.h>
#include <string.h>

#include "operators/operators.h"
#include "plan/registry.h"

typedef struct udf_fns {
    eddy_flat_map_udf flat_map;
    eddy_filter_udf filter;
    eddy_aggregate_udf_t aggregate;
} udf_fns_t;

/* What a flat_map/filter step's task sees as its config: the built-in
 * operator's config first, pointing back at this. */
typedef struct udf_step {
    union {
        eddy_flat_map_config_t flat_map;
        eddy_filter_config_t filter;
    } base;
    const udf_fns_t *fns;
    const eddy_config_t *config;
} udf_step_t;

static void flat_map_trampoline(const eddy_record_t *in, eddy_collector_t *out, const void *arg)
{
    const udf_step_t *step = arg;
    step->fns->flat_map(in, out, step->config);
}

static bool filter_trampoline(const eddy_record_t *in, const void *arg)
{
    const udf_step_t *step = arg;
    return step->fns->filter(in, step->config);
}

static void *flat_map_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    udf_step_t *step = calloc(1, sizeof *step);
    if (!step) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    step->fns = arg;
    step->config = cfg;
    step->base.flat_map.fn = flat_map_trampoline;
    step->base.flat_map.arg = step;
    return step;
}

static void *filter_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    udf_step_t *step = calloc(1, sizeof *step);
    if (!step) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    step->fns = arg;
    step->config = cfg;
    step->base.filter.keep = filter_trampoline;
    step->base.filter.arg = step;
    return step;
}

static void *aggregate_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    const udf_fns_t *fns = arg;
    const char *emit = eddy_config_str(cfg, "emit", "changelog");
    eddy_emit_mode_t mode;
    if (!strcmp(emit, "changelog")) {
        mode = EDDY_EMIT_CHANGELOG;
    } else if (!strcmp(emit, "final")) {
        mode = EDDY_EMIT_FINAL;
    } else {
        eddy_err_set(err, "'emit' is '%s'; expected changelog or final", emit);
        return NULL;
    }
    eddy_aggregate_config_t *c = calloc(1, sizeof *c);
    if (!c) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    c->acc_size = fns->aggregate.acc_size;
    c->init = fns->aggregate.create;
    c->add = fns->aggregate.add;
    c->merge = fns->aggregate.merge;
    c->result = fns->aggregate.result;
    c->emit = mode;
    c->combine = eddy_config_bool(cfg, "combine", true);
    return c;
}

static int add_kind(eddy_registry_t *r, const char *name, const eddy_operator_ops_t *ops,
                    eddy_configure_fn configure, udf_fns_t *fns, eddy_err_t *err)
{
    eddy_operator_kind_t kind = {name, ops, configure, free, fns};
    return eddy_registry_add_operator_owned(r, &kind, fns, err);
}

int eddy_register_flat_map(eddy_registry_t *r, const char *name, eddy_flat_map_udf fn,
                           eddy_err_t *err)
{
    if (!fn)
        return eddy_err_set(err, "flat_map '%s' needs a function", name ? name : "");
    udf_fns_t *fns = calloc(1, sizeof *fns);
    if (!fns)
        return eddy_err_set(err, "out of memory");
    fns->flat_map = fn;
    return add_kind(r, name, &eddy_flat_map_ops, flat_map_configure, fns, err);
}

int eddy_register_filter(eddy_registry_t *r, const char *name, eddy_filter_udf fn, eddy_err_t *err)
{
    if (!fn)
        return eddy_err_set(err, "filter '%s' needs a function", name ? name : "");
    udf_fns_t *fns = calloc(1, sizeof *fns);
    if (!fns)
        return eddy_err_set(err, "out of memory");
    fns->filter = fn;
    return add_kind(r, name, &eddy_filter_ops, filter_configure, fns, err);
}

int eddy_register_aggregate(eddy_registry_t *r, const char *name, const eddy_aggregate_udf_t *udf,
                            eddy_err_t *err)
{
    if (!udf || !udf->add || !udf->result || udf->acc_size == 0 || udf->acc_size > 4096)
        return eddy_err_set(err, "aggregate '%s' needs add(), result() and an accumulator of 1..4096 bytes",
                            name ? name : "");
    udf_fns_t *fns = calloc(1, sizeof *fns);
    if (!fns)
        return eddy_err_set(err, "out of memory");
    fns->aggregate = *udf;
    return add_kind(r, name, &eddy_aggregate_ops, aggregate_configure, fns, err);
}
