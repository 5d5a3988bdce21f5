/* registry.c - the process's kinds and jobs, and plan instantiation (see
 * registry.h).
 *
 * Owns: the lists of registered kinds (pointers to the registrants' static
 * structs) and, per instantiated graph, the objects the kinds' configure()
 * made, released with the graph. */
#include "plan/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/builder.h"

/* Entries are copies of what was registered, each on the heap so pointers
 * handed out stay valid as lists grow. owned_arg, when set, is the kind's
 * arg, allocated by an adapter (operators/udf.c) and freed with the entry. */
typedef struct entry {
    char *name;
    union {
        eddy_operator_kind_t op;
        eddy_source_kind_t source;
        eddy_key_kind_t key;
        eddy_timestamp_kind_t timestamp;
        eddy_job_kind_t job;
    } kind;
    void *owned_arg;
    char origin[EDDY_PLUGIN_ORIGIN_MAX]; /* the content hash of the plugin that registered it, or "" */
} entry_t;

typedef struct kind_list {
    entry_t **items;
    uint32_t count, cap;
} kind_list_t;

struct eddy_registry {
    kind_list_t operators, sources, keys, timestamps, jobs;
};

eddy_registry_t *eddy_registry_new(void)
{
    return calloc(1, sizeof(eddy_registry_t));
}

static void entry_free(entry_t *e)
{
    free(e->name);
    free(e->owned_arg);
    free(e);
}

static void list_free(kind_list_t *l)
{
    for (uint32_t i = 0; i < l->count; i++)
        entry_free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof *l);
}

void eddy_registry_destroy(eddy_registry_t **self_p)
{
    eddy_registry_t *r = *self_p;
    if (!r)
        return;
    list_free(&r->operators);
    list_free(&r->sources);
    list_free(&r->keys);
    list_free(&r->timestamps);
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

static entry_t *list_find(const kind_list_t *l, const char *name)
{
    for (uint32_t i = 0; name && i < l->count; i++)
        if (!strcmp(l->items[i]->name, name))
            return l->items[i];
    return NULL;
}

static int list_push(kind_list_t *l, entry_t *e, eddy_err_t *err)
{
    if (l->count == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 16;
        entry_t **items = realloc(l->items, cap * sizeof *items);
        if (!items)
            return eddy_err_set(err, "out of memory");
        l->items = items;
        l->cap = cap;
    }
    l->items[l->count++] = e;
    return 0;
}

/* A new entry named name, or NULL with err for a bad or taken name. */
static entry_t *list_new_entry(const kind_list_t *l, const char *what, const char *name,
                               eddy_err_t *err)
{
    if (!name || !name[0] || strlen(name) >= EDDY_NAME_MAX) {
        eddy_err_set(err, "a %s kind needs a name of 1..%d bytes", what, EDDY_NAME_MAX - 1);
        return NULL;
    }
    if (list_find(l, name)) {
        eddy_err_set(err, "a %s named '%s' is already registered", what, name);
        return NULL;
    }
    entry_t *e = calloc(1, sizeof *e);
    if (!e || !(e->name = strdup(name))) {
        free(e);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    return e;
}

static int list_add(kind_list_t *l, entry_t *e, eddy_err_t *err)
{
    if (list_push(l, e, err) < 0) {
        entry_free(e);
        return -1;
    }
    return 0;
}

int eddy_registry_add_operator_owned(eddy_registry_t *r, const eddy_operator_kind_t *kind,
                                     void *owned_arg, eddy_err_t *err)
{
    if (!kind || !kind->ops || !kind->ops->open || !kind->ops->process) {
        free(owned_arg);
        return eddy_err_set(err, "an operator kind needs ops with open() and process()");
    }
    entry_t *e = list_new_entry(&r->operators, "operator", kind->name, err);
    if (!e) {
        free(owned_arg);
        return -1;
    }
    e->kind.op = *kind;
    e->kind.op.name = e->name;
    e->owned_arg = owned_arg;
    return list_add(&r->operators, e, err);
}

int eddy_register_operator(eddy_registry_t *r, const eddy_operator_kind_t *kind, eddy_err_t *err)
{
    return eddy_registry_add_operator_owned(r, kind, NULL, err);
}

int eddy_register_source(eddy_registry_t *r, const eddy_source_kind_t *kind, eddy_err_t *err)
{
    if (!kind || !kind->ops || !kind->ops->open || !kind->ops->poll || !kind->ops->position)
        return eddy_err_set(err, "a source kind needs ops with open(), poll() and position()");
    entry_t *e = list_new_entry(&r->sources, "source", kind->name, err);
    if (!e)
        return -1;
    e->kind.source = *kind;
    e->kind.source.name = e->name;
    return list_add(&r->sources, e, err);
}

int eddy_register_key(eddy_registry_t *r, const eddy_key_kind_t *kind, eddy_err_t *err)
{
    if (!kind || !kind->key)
        return eddy_err_set(err, "a key kind needs a key function");
    entry_t *e = list_new_entry(&r->keys, "key selector", kind->name, err);
    if (!e)
        return -1;
    e->kind.key = *kind;
    e->kind.key.name = e->name;
    return list_add(&r->keys, e, err);
}

int eddy_register_timestamp(eddy_registry_t *r, const eddy_timestamp_kind_t *kind, eddy_err_t *err)
{
    if (!kind || !kind->timestamp)
        return eddy_err_set(err, "a timestamp kind needs a timestamp function");
    entry_t *e = list_new_entry(&r->timestamps, "timestamp assigner", kind->name, err);
    if (!e)
        return -1;
    e->kind.timestamp = *kind;
    e->kind.timestamp.name = e->name;
    return list_add(&r->timestamps, e, err);
}

int eddy_register_job(eddy_registry_t *r, const eddy_job_kind_t *kind, eddy_err_t *err)
{
    if (!kind || !kind->build)
        return eddy_err_set(err, "a job needs a build function");
    entry_t *e = list_new_entry(&r->jobs, "job", kind->name, err);
    if (!e)
        return -1;
    e->kind.job = *kind;
    e->kind.job.name = e->name;
    return list_add(&r->jobs, e, err);
}

static int list_check_merge(const kind_list_t *dst, const kind_list_t *src, const char *what,
                            eddy_err_t *err)
{
    for (uint32_t i = 0; i < src->count; i++)
        if (list_find(dst, src->items[i]->name))
            return eddy_err_set(err, "a %s named '%s' is already registered", what,
                                src->items[i]->name);
    return 0;
}

static int list_move(kind_list_t *dst, kind_list_t *src, eddy_err_t *err)
{
    while (src->count > 0) {
        if (list_push(dst, src->items[0], err) < 0)
            return -1;
        memmove(src->items, src->items + 1, (src->count - 1) * sizeof *src->items);
        src->count--;
    }
    return 0;
}

static void list_set_origin(kind_list_t *l, const char *origin)
{
    for (uint32_t i = 0; i < l->count; i++)
        snprintf(l->items[i]->origin, sizeof l->items[i]->origin, "%s", origin);
}

void eddy_registry_set_origin(eddy_registry_t *self, const char *origin)
{
    list_set_origin(&self->operators, origin);
    list_set_origin(&self->sources, origin);
    list_set_origin(&self->keys, origin);
    list_set_origin(&self->timestamps, origin);
    list_set_origin(&self->jobs, origin);
}

static int add_origin(char ***hashes, uint32_t *n, const entry_t *e)
{
    if (!e || !e->origin[0])
        return 0;
    for (uint32_t i = 0; i < *n; i++)
        if (!strcmp((*hashes)[i], e->origin))
            return 0;
    char **grown = realloc(*hashes, (*n + 2) * sizeof *grown);
    if (!grown)
        return -1;
    *hashes = grown;
    if (!(grown[*n] = strdup(e->origin)))
        return -1;
    grown[++*n] = NULL;
    return 0;
}

int eddy_registry_plan_plugins(const eddy_registry_t *self, const eddy_plan_t *plan, char ***hashes,
                               uint32_t *n, eddy_err_t *err)
{
    *hashes = calloc(1, sizeof **hashes);
    *n = 0;
    int rc = *hashes ? add_origin(hashes, n, list_find(&self->jobs, plan->job)) : -1;
    for (uint32_t i = 0; rc == 0 && i < plan->n_nodes; i++) {
        const eddy_plan_node_t *node = &plan->nodes[i];
        const kind_list_t *l = node->role == EDDY_NODE_SOURCE ? &self->sources : &self->operators;
        rc = add_origin(hashes, n, list_find(l, node->kind));
        if (rc == 0 && node->key_kind[0])
            rc = add_origin(hashes, n, list_find(&self->keys, node->key_kind));
        if (rc == 0 && node->second_key_kind[0])
            rc = add_origin(hashes, n, list_find(&self->keys, node->second_key_kind));
        const char *ts = eddy_config_str(node->config, EDDY_EVENT_TIME_TIMESTAMPS, NULL);
        if (rc == 0 && ts)
            rc = add_origin(hashes, n, list_find(&self->timestamps, ts));
    }
    if (rc < 0)
        return eddy_err_set(err, "out of memory");
    return 0;
}

int eddy_registry_merge(eddy_registry_t *self, eddy_registry_t *from, eddy_err_t *err)
{
    if (list_check_merge(&self->operators, &from->operators, "operator", err) < 0 ||
        list_check_merge(&self->sources, &from->sources, "source", err) < 0 ||
        list_check_merge(&self->keys, &from->keys, "key selector", err) < 0 ||
        list_check_merge(&self->timestamps, &from->timestamps, "timestamp assigner", err) < 0 ||
        list_check_merge(&self->jobs, &from->jobs, "job", err) < 0)
        return -1;
    if (list_move(&self->operators, &from->operators, err) < 0 ||
        list_move(&self->sources, &from->sources, err) < 0 ||
        list_move(&self->keys, &from->keys, err) < 0 ||
        list_move(&self->timestamps, &from->timestamps, err) < 0 ||
        list_move(&self->jobs, &from->jobs, err) < 0)
        return -1; /* only out of memory can get here */
    return 0;
}

const eddy_operator_kind_t *eddy_registry_operator(const eddy_registry_t *self, const char *name)
{
    entry_t *e = list_find(&self->operators, name);
    return e ? &e->kind.op : NULL;
}

const eddy_source_kind_t *eddy_registry_source(const eddy_registry_t *self, const char *name)
{
    entry_t *e = list_find(&self->sources, name);
    return e ? &e->kind.source : NULL;
}

const eddy_key_kind_t *eddy_registry_key(const eddy_registry_t *self, const char *name)
{
    entry_t *e = list_find(&self->keys, name);
    return e ? &e->kind.key : NULL;
}

const eddy_timestamp_kind_t *eddy_registry_timestamp(const eddy_registry_t *self, const char *name)
{
    entry_t *e = list_find(&self->timestamps, name);
    return e ? &e->kind.timestamp : NULL;
}

const eddy_job_kind_t *eddy_registry_job(const eddy_registry_t *self, const char *name)
{
    entry_t *e = list_find(&self->jobs, name);
    return e ? &e->kind.job : NULL;
}

uint32_t eddy_registry_job_count(const eddy_registry_t *self)
{
    return self->jobs.count;
}

const eddy_job_kind_t *eddy_registry_job_at(const eddy_registry_t *self, uint32_t i)
{
    return i < self->jobs.count ? &self->jobs.items[i]->kind.job : NULL;
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
    eddy_plan_t *plan; /* when the graph owns its plan (eddy_job_build) */
} graph_owned_t;

static void free_owned(void *p)
{
    graph_owned_t *owned = p;
    eddy_plan_destroy(&owned->plan);
    for (uint32_t i = 0; i < owned->count; i++)
        if (owned->items[i].release)
            owned->items[i].release(owned->items[i].object);
    free(owned->items);
    free(owned);
}

/* What the kind's ops get as ctx->config for step n. */
static int configure(graph_owned_t *owned, const eddy_plan_node_t *n, eddy_configure_fn fn,
                     const void *arg, void (*release)(void *), const void **out, eddy_err_t *err)
{
    if (!fn) {
        *out = n->config; /* the plan outlives the graph's use of it */
        return 0;
    }
    void *obj = fn(n->config, arg, err);
    if (!obj)
        return eddy_err_wrap(err, "step '%s' (%s)", n->uid, n->kind);
    owned->items[owned->count++] = (configured_t){obj, release};
    *out = obj;
    return 0;
}

/* A source step's event time, from its config (eddy_event_time). */
static int event_time_of(const eddy_registry_t *registry, const eddy_plan_node_t *n,
                         eddy_event_time_t *et, eddy_err_t *err)
{
    memset(et, 0, sizeof *et);
    const char *ts = eddy_config_str(n->config, EDDY_EVENT_TIME_TIMESTAMPS, NULL);
    if (!ts)
        return 0;
    if (strcmp(ts, EDDY_TIMESTAMPS_FROM_SOURCE) != 0) {
        const eddy_timestamp_kind_t *k = eddy_registry_timestamp(registry, ts);
        if (!k)
            return eddy_err_set(err, "step '%s': unknown timestamp assigner '%s'", n->uid, ts);
        et->timestamp = k->timestamp;
    }
    et->enabled = true;
    et->max_delay_ms = eddy_config_int(n->config, EDDY_EVENT_TIME_MAX_DELAY, 0);
    et->interval_ms = eddy_config_int(n->config, EDDY_EVENT_TIME_INTERVAL, EDDY_WATERMARK_INTERVAL_MS);
    et->idle_ms = eddy_config_int(n->config, EDDY_EVENT_TIME_IDLE, 0);
    if (et->max_delay_ms < 0 || et->interval_ms < 1 || et->idle_ms < 0)
        return eddy_err_set(err, "step '%s': watermark delay and idle timeout must be >= 0 and the "
                            "interval >= 1 ms", n->uid);
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
            if (configure(owned, n, k->configure, k->arg, k->release, &cfg, err) < 0 ||
                eddy_graph_add_source(g, n->name, p, k->ops, cfg, err) < 0)
                goto fail;
            const char *rate = eddy_config_str(n->config, "rate", NULL);
            if (rate && eddy_rate_parse(&g->stages[g->n_stages - 1].rate, rate, err) < 0) {
                eddy_err_wrap(err, "step '%s': rate", n->uid);
                goto fail;
            }
            if (event_time_of(registry, n, &g->stages[g->n_stages - 1].event_time, err) < 0)
                goto fail;
            continue;
        }
        const eddy_operator_kind_t *k = eddy_registry_operator(registry, n->kind);
        if (!k)
            goto unknown;
        if (configure(owned, n, k->configure, k->arg, k->release, &cfg, err) < 0)
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
            if (n->second_input >= 0) {
                const eddy_key_kind_t *k2 = eddy_registry_key(registry, n->second_key_kind);
                if (!k2) {
                    eddy_err_set(err, "step '%s': unknown key selector '%s' (second input)",
                                 n->uid, n->second_key_kind);
                    goto fail;
                }
                if (eddy_graph_set_second_input(g, (int)stage_of[i],
                                                (int)stage_of[n->second_input], n->second_edge,
                                                k2->key, err) < 0)
                    goto fail;
            }
        }
        if (eddy_graph_chain(g, (int)stage_of[i], k->ops, cfg, err) < 0)
            goto fail;
        continue;
    unknown:
        eddy_err_set(err, "step '%s': unknown %s kind '%s' (neither built in nor registered by a loaded plugin)",
                     n->uid, n->role == EDDY_NODE_SOURCE ? "source" : "operator", n->kind);
        goto fail;
    }
    if (eddy_graph_validate(g, err) < 0)
        goto fail;
    eddy_graph_add_combiners(g);
    return 0;
fail:
    eddy_graph_clear(g);
    return -1;
}

int eddy_job_build(eddy_job_graph_t *g, const char *name, int argc, char **argv, eddy_err_t *err)
{
    const eddy_registry_t *r = eddy_registry_default();
    eddy_plan_t *plan = eddy_registry_build_plan(r, name, argc, argv, err);
    if (!plan)
        return -1;
    if (eddy_plan_instantiate(plan, r, g, err) < 0) {
        eddy_plan_destroy(&plan);
        return -1;
    }
    ((graph_owned_t *)g->config)->plan = plan;
    return 0;
}

int eddy_job_build_from_plan(eddy_job_graph_t *g, const void *bytes, size_t len,
                             uint64_t fingerprint, eddy_err_t *err)
{
    eddy_plan_t *plan = eddy_plan_decode(bytes, len, err);
    if (!plan)
        return -1;
    uint64_t actual = eddy_plan_fingerprint(plan);
    if (fingerprint && actual != fingerprint) {
        eddy_plan_destroy(&plan);
        return eddy_err_set(err, "the plan's fingerprint is %016llx, the DEPLOY says %016llx",
                            (unsigned long long)actual, (unsigned long long)fingerprint);
    }
    if (eddy_plan_instantiate(plan, eddy_registry_default(), g, err) < 0) {
        eddy_plan_destroy(&plan);
        return -1;
    }
    ((graph_owned_t *)g->config)->plan = plan;
    return 0;
}

const eddy_plan_t *eddy_graph_plan(const eddy_job_graph_t *g)
{
    return g->config && g->free_config == free_owned ? ((const graph_owned_t *)g->config)->plan : NULL;
}
