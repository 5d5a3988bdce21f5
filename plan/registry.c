/* registry.c - the process's kinds and jobs, and plan instantiation (see
 * registry.h).
 *
 * Owns: the lists of registered kinds (pointers to the registrants' static
 * structs) and, per instantiated graph, the objects the kinds' configure()
 * made, released with the graph. */
#include "plan/registry.h"

#include <stdlib.h>
#include <string.h>

#include "plan/builder.h"

typedef struct kind_list {
    const void **items;
    const char **names;
    uint32_t count, cap;
} kind_list_t;

struct eddy_registry {
    kind_list_t operators, sources, keys, jobs;
};

eddy_registry_t *eddy_registry_new(void)
{
    return calloc(1, sizeof(eddy_registry_t));
}

static void list_free(kind_list_t *l)
{
    free(l->items);
    free(l->names);
}

void eddy_registry_destroy(eddy_registry_t **self_p)
{
    eddy_registry_t *r = *self_p;
    if (!r)
        return;
    list_free(&r->operators);
    list_free(&r->sources);
    list_free(&r->keys);
    list_free(&r->jobs);
    free(r);
    *self_p = NULL;
}

eddy_registry_t *eddy_registry_default(void)
{
    static eddy_registry_t *process_registry;
    if (!process_registry)
        process_registry = eddy_registry_new();
    return process_registry;
}

static const void *list_find(const kind_list_t *l, const char *name)
{
    for (uint32_t i = 0; name && i < l->count; i++)
        if (!strcmp(l->names[i], name))
            return l->items[i];
    return NULL;
}

static int list_add(kind_list_t *l, const char *what, const char *name, const void *item,
                    eddy_err_t *err)
{
    if (!name || !name[0] || strlen(name) >= EDDY_NAME_MAX)
        return eddy_err_set(err, "a %s kind needs a name of 1..%d bytes", what, EDDY_NAME_MAX - 1);
    if (list_find(l, name))
        return eddy_err_set(err, "a %s named '%s' is already registered", what, name);
    if (l->count == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 16;
        const void **items = realloc(l->items, cap * sizeof *items);
        if (!items)
            return eddy_err_set(err, "out of memory");
        l->items = items;
        const char **names = realloc(l->names, cap * sizeof *names);
        if (!names)
            return eddy_err_set(err, "out of memory");
        l->names = names;
        l->cap = cap;
    }
    l->items[l->count] = item;
    l->names[l->count] = name;
    l->count++;
    return 0;
}

int eddy_register_operator(eddy_registry_t *r, const eddy_operator_kind_t *kind, eddy_err_t *err)
{
    if (!kind || !kind->ops || !kind->ops->open || !kind->ops->process)
        return eddy_err_set(err, "an operator kind needs ops with open() and process()");
    return list_add(&r->operators, "operator", kind->name, kind, err);
}

int eddy_register_source(eddy_registry_t *r, const eddy_source_kind_t *kind, eddy_err_t *err)
{
    if (!kind || !kind->ops || !kind->ops->open || !kind->ops->poll || !kind->ops->position)
        return eddy_err_set(err, "a source kind needs ops with open(), poll() and position()");
    return list_add(&r->sources, "source", kind->name, kind, err);
}

int eddy_register_key(eddy_registry_t *r, const eddy_key_kind_t *kind, eddy_err_t *err)
{
    if (!kind || !kind->key)
        return eddy_err_set(err, "a key kind needs a key function");
    return list_add(&r->keys, "key selector", kind->name, kind, err);
}

int eddy_register_job(eddy_registry_t *r, const eddy_job_kind_t *kind, eddy_err_t *err)
{
    if (!kind || !kind->build)
        return eddy_err_set(err, "a job needs a build function");
    return list_add(&r->jobs, "job", kind->name, kind, err);
}

static int list_check_merge(const kind_list_t *dst, const kind_list_t *src, const char *what,
                            eddy_err_t *err)
{
    for (uint32_t i = 0; i < src->count; i++)
        if (list_find(dst, src->names[i]))
            return eddy_err_set(err, "a %s named '%s' is already registered", what, src->names[i]);
    return 0;
}

static int list_merge(kind_list_t *dst, const kind_list_t *src, const char *what, eddy_err_t *err)
{
    for (uint32_t i = 0; i < src->count; i++)
        if (list_add(dst, what, src->names[i], src->items[i], err) < 0)
            return -1;
    return 0;
}

int eddy_registry_merge(eddy_registry_t *self, const eddy_registry_t *from, eddy_err_t *err)
{
    if (list_check_merge(&self->operators, &from->operators, "operator", err) < 0 ||
        list_check_merge(&self->sources, &from->sources, "source", err) < 0 ||
        list_check_merge(&self->keys, &from->keys, "key selector", err) < 0 ||
        list_check_merge(&self->jobs, &from->jobs, "job", err) < 0)
        return -1;
    if (list_merge(&self->operators, &from->operators, "operator", err) < 0 ||
        list_merge(&self->sources, &from->sources, "source", err) < 0 ||
        list_merge(&self->keys, &from->keys, "key selector", err) < 0 ||
        list_merge(&self->jobs, &from->jobs, "job", err) < 0)
        return -1; /* only out of memory can get here */
    return 0;
}

const eddy_operator_kind_t *eddy_registry_operator(const eddy_registry_t *self, const char *name)
{
    return list_find(&self->operators, name);
}

const eddy_source_kind_t *eddy_registry_source(const eddy_registry_t *self, const char *name)
{
    return list_find(&self->sources, name);
}

const eddy_key_kind_t *eddy_registry_key(const eddy_registry_t *self, const char *name)
{
    return list_find(&self->keys, name);
}

const eddy_job_kind_t *eddy_registry_job(const eddy_registry_t *self, const char *name)
{
    return list_find(&self->jobs, name);
}

uint32_t eddy_registry_job_count(const eddy_registry_t *self)
{
    return self->jobs.count;
}

const eddy_job_kind_t *eddy_registry_job_at(const eddy_registry_t *self, uint32_t i)
{
    return i < self->jobs.count ? self->jobs.items[i] : NULL;
}

eddy_plan_t *eddy_registry_build_plan(const eddy_registry_t *self, const char *name, int argc,
                                      char **argv, eddy_err_t *err)
{
    const eddy_job_kind_t *job = eddy_registry_job(self, name);
    if (!job) {
        eddy_err_set(err, "unknown job '%s' (see `eddy jobs`)", name ? name : "");
        return NULL;
    }
    eddy_job_builder_t *b = eddy_job_builder_new(job->name);
    if (!b) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    eddy_err_t berr = {{0}};
    if (job->build(b, argc, argv, &berr) < 0 && !eddy_builder_error(b))
        eddy_builder_fail(b, "%s", berr.msg[0] ? berr.msg : "the job's build failed");
    eddy_plan_t *plan = eddy_job_builder_finish(b, err);
    eddy_job_builder_destroy(&b);
    return plan;
}

/* ---- instantiation ------------------------------------------------------ */

typedef struct configured {
    void *object;
    void (*release)(void *object);
} configured_t;

typedef struct graph_owned {
    configured_t *items;
    uint32_t count;
} graph_owned_t;

static void free_owned(void *p)
{
    graph_owned_t *owned = p;
    for (uint32_t i = 0; i < owned->count; i++)
        if (owned->items[i].release)
            owned->items[i].release(owned->items[i].object);
    free(owned->items);
    free(owned);
}

/* What the kind's ops get as ctx->config for step n. */
static int configure(graph_owned_t *owned, const eddy_plan_node_t *n,
                     void *(*fn)(const eddy_config_t *, eddy_err_t *), void (*release)(void *),
                     const void **out, eddy_err_t *err)
{
    if (!fn) {
        *out = n->config; /* the plan outlives the graph's use of it */
        return 0;
    }
    void *obj = fn(n->config, err);
    if (!obj)
        return eddy_err_wrap(err, "step '%s' (%s)", n->uid, n->kind);
    owned->items[owned->count++] = (configured_t){obj, release};
    *out = obj;
    return 0;
}

int eddy_plan_instantiate(const eddy_plan_t *plan, const eddy_registry_t *registry,
                          eddy_job_graph_t *g, eddy_err_t *err)
{
    uint32_t stage_of[EDDY_PLAN_MAX_NODES];
    int n_stages = eddy_plan_stages(plan, stage_of, err);
    if (n_stages < 0)
        return -1;
    eddy_graph_init(g, plan->job);
    g->max_parallelism = plan->max_parallelism;
    graph_owned_t *owned = calloc(1, sizeof *owned);
    if (owned)
        owned->items = calloc(plan->n_nodes ? plan->n_nodes : 1, sizeof *owned->items);
    if (!owned || !owned->items) {
        free(owned);
        return eddy_err_set(err, "out of memory");
    }
    g->config = owned;
    g->free_config = free_owned;

    for (uint32_t i = 0; i < plan->n_nodes; i++) {
        const eddy_plan_node_t *n = &plan->nodes[i];
        uint32_t p = eddy_plan_parallelism(plan, i);
        const void *cfg = NULL;
        if (n->role == EDDY_NODE_SOURCE) {
            const eddy_source_kind_t *k = eddy_registry_source(registry, n->kind);
            if (!k)
                goto unknown;
            if (configure(owned, n, k->configure, k->release, &cfg, err) < 0 ||
                eddy_graph_add_source(g, n->name, p, k->ops, cfg, err) < 0)
                goto fail;
            const char *rate = eddy_config_str(n->config, "rate", NULL);
            if (rate && eddy_rate_parse(&g->stages[g->n_stages - 1].rate, rate, err) < 0) {
                eddy_err_wrap(err, "step '%s': rate", n->uid);
                goto fail;
            }
            continue;
        }
        const eddy_operator_kind_t *k = eddy_registry_operator(registry, n->kind);
        if (!k)
            goto unknown;
        if (configure(owned, n, k->configure, k->release, &cfg, err) < 0)
            goto fail;
        if (stage_of[i] != stage_of[n->input]) { /* the first step of a new stage */
            eddy_key_fn key = NULL;
            if (n->edge == EDDY_EDGE_HASH) {
                const eddy_key_kind_t *kk = eddy_registry_key(registry, n->key_kind);
                if (!kk) {
                    eddy_err_set(err, "step '%s': unknown key selector '%s'", n->uid, n->key_kind);
                    goto fail;
                }
                key = kk->key;
            }
            /* Forward between different parallelisms spreads round robin, as Flink does. */
            eddy_edge_t edge = n->edge;
            if (edge == EDDY_EDGE_FORWARD && p != eddy_plan_parallelism(plan, (uint32_t)n->input))
                edge = EDDY_EDGE_REBALANCE;
            if (eddy_graph_add_stage(g, n->name, p, (int)stage_of[n->input], edge, key, err) < 0)
                goto fail;
        }
        if (eddy_graph_chain(g, (int)stage_of[i], k->ops, cfg, err) < 0)
            goto fail;
        continue;
    unknown:
        eddy_err_set(err, "step '%s': unknown %s kind '%s'", n->uid,
                     n->role == EDDY_NODE_SOURCE ? "source" : "operator", n->kind);
        goto fail;
    }
    if (eddy_graph_validate(g, err) < 0)
        goto fail;
    return 0;
fail:
    eddy_graph_clear(g);
    return -1;
}
