/* builder.c - the stream builder (api/stream.h) recording an eddy_plan_t.
 *
 * Owns: the plan being built and the builder's sticky first error. A
 * partitioning call (key_by, rebalance, global) makes no step of its own:
 * it sets the edge by which the next step reads its input. */
#include "plan/builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct eddy_job_builder {
    eddy_plan_t *plan;
    bool failed;
    eddy_err_t err;
};

/* A stream handle's node encodes a pending partitioning for the next step
 * in its high bits, so handles stay plain values. */
#define EDGE_SHIFT 24
#define NODE_MASK ((1 << EDGE_SHIFT) - 1)

eddy_job_builder_t *eddy_job_builder_new(const char *job)
{
    eddy_job_builder_t *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->plan = eddy_plan_new(job);
    if (!b->plan) {
        free(b);
        return NULL;
    }
    return b;
}

void eddy_job_builder_destroy(eddy_job_builder_t **self_p)
{
    eddy_job_builder_t *b = *self_p;
    if (!b)
        return;
    eddy_plan_destroy(&b->plan);
    free(b);
    *self_p = NULL;
}

eddy_plan_t *eddy_job_builder_finish(eddy_job_builder_t *self, eddy_err_t *err)
{
    if (self->failed) {
        *err = self->err;
        return NULL;
    }
    if (eddy_plan_validate(self->plan, err) < 0)
        return NULL;
    eddy_plan_t *p = self->plan;
    self->plan = NULL;
    return p;
}

int eddy_builder_fail(eddy_job_builder_t *b, const char *fmt, ...)
{
    if (!b || b->failed)
        return -1;
    b->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err.msg, sizeof b->err.msg, fmt, ap);
    va_end(ap);
    return -1;
}

const char *eddy_builder_error(const eddy_job_builder_t *b)
{
    return b && b->failed ? b->err.msg : NULL;
}

static eddy_stream_t failed_stream(eddy_job_builder_t *b)
{
    return (eddy_stream_t){b, -1};
}

static eddy_stream_t add_step(eddy_job_builder_t *b, int from, const char *uid, const char *kind,
                              eddy_node_role_t role, const char *key_kind, eddy_config_t *config)
{
    if (!b || b->failed || (role != EDDY_NODE_SOURCE && from < 0)) {
        eddy_config_destroy(&config);
        return failed_stream(b);
    }
    int input = -1;
    eddy_edge_t edge = EDDY_EDGE_NONE;
    if (role != EDDY_NODE_SOURCE) {
        input = from & NODE_MASK;
        edge = (eddy_edge_t)(from >> EDGE_SHIFT);
        if (edge == EDDY_EDGE_NONE)
            edge = EDDY_EDGE_FORWARD;
    }
    int idx = eddy_plan_add(b->plan, uid, kind, role, input, edge, key_kind, config, &b->err);
    if (idx < 0) {
        b->failed = true;
        return failed_stream(b);
    }
    return (eddy_stream_t){b, idx};
}

static eddy_stream_t partition(eddy_stream_t in, eddy_edge_t edge)
{
    if (in.node < 0)
        return in;
    return (eddy_stream_t){in.builder, (in.node & NODE_MASK) | ((int)edge << EDGE_SHIFT)};
}

eddy_stream_t eddy_source(eddy_job_builder_t *b, const char *uid, const char *kind,
                          eddy_config_t *config)
{
    return add_step(b, -1, uid, kind, EDDY_NODE_SOURCE, NULL, config);
}

eddy_stream_t eddy_map(eddy_stream_t in, const char *uid, const char *kind, eddy_config_t *config)
{
    return add_step(in.builder, in.node, uid, kind, EDDY_NODE_MAP, NULL, config);
}

eddy_stream_t eddy_flat_map(eddy_stream_t in, const char *uid, const char *kind,
                            eddy_config_t *config)
{
    return add_step(in.builder, in.node, uid, kind, EDDY_NODE_FLAT_MAP, NULL, config);
}

eddy_stream_t eddy_filter(eddy_stream_t in, const char *uid, const char *kind,
                          eddy_config_t *config)
{
    return add_step(in.builder, in.node, uid, kind, EDDY_NODE_FILTER, NULL, config);
}

eddy_stream_t eddy_late_records(eddy_stream_t in, const char *uid)
{
    /* Round robin unless partitioned: `in` has another reader, so a
     * forward edge would not chain, and an unchained forward edge breaks
     * once the two steps' parallelism differs (a rescale). */
    if (in.node >= 0 && (eddy_edge_t)(in.node >> EDGE_SHIFT) == EDDY_EDGE_NONE)
        in = partition(in, EDDY_EDGE_REBALANCE);
    return add_step(in.builder, in.node, uid, EDDY_LATE_RECORDS_KIND, EDDY_NODE_FILTER, NULL,
                    NULL);
}

eddy_keyed_stream_t eddy_key_by(eddy_stream_t in, const char *key_kind)
{
    if (in.node >= 0 && (!key_kind || !key_kind[0])) {
        eddy_builder_fail(in.builder, "key_by needs a key selector");
        in.node = -1;
    }
    eddy_stream_t s = partition(in, EDDY_EDGE_HASH);
    return (eddy_keyed_stream_t){s.builder, s.node, key_kind};
}

eddy_stream_t eddy_rebalance(eddy_stream_t in)
{
    return partition(in, EDDY_EDGE_REBALANCE);
}

eddy_stream_t eddy_global(eddy_stream_t in)
{
    return partition(in, EDDY_EDGE_GLOBAL);
}

eddy_stream_t eddy_reduce(eddy_keyed_stream_t in, const char *uid, const char *kind,
                          eddy_config_t *config)
{
    return add_step(in.builder, in.node, uid, kind, EDDY_NODE_REDUCE, in.key_kind, config);
}

eddy_stream_t eddy_aggregate(eddy_keyed_stream_t in, const char *uid, const char *kind,
                             eddy_config_t *config)
{
    return add_step(in.builder, in.node, uid, kind, EDDY_NODE_AGGREGATE, in.key_kind, config);
}

eddy_stream_t eddy_window(eddy_keyed_stream_t in, const char *uid, const char *kind,
                          eddy_config_t *config)
{
    return add_step(in.builder, in.node, uid, kind, EDDY_NODE_WINDOW, in.key_kind, config);
}

eddy_stream_t eddy_process(eddy_keyed_stream_t in, const char *uid, const char *kind,
                           eddy_config_t *config)
{
    return add_step(in.builder, in.node, uid, kind, EDDY_NODE_PROCESS, in.key_kind, config);
}

eddy_stream_t eddy_process2(eddy_keyed_stream_t left, eddy_keyed_stream_t right, const char *uid,
                            const char *kind, eddy_config_t *config)
{
    eddy_job_builder_t *b = left.builder;
    if (b && !b->failed && right.builder != b) {
        eddy_builder_fail(b, "step '%s': its two inputs come from different jobs (their key "
                          "groups differ)", uid ? uid : "");
        left.node = -1;
    }
    if (b && !b->failed && left.node >= 0 && right.node < 0)
        left.node = -1; /* the right input failed: its error is the builder's */
    eddy_stream_t s = add_step(b, left.node, uid, kind, EDDY_NODE_PROCESS, left.key_kind, config);
    if (s.node < 0)
        return s;
    if (eddy_plan_set_second_input(b->plan, s.node, right.node & NODE_MASK,
                                   (eddy_edge_t)(right.node >> EDGE_SHIFT), right.key_kind,
                                   &b->err) < 0) {
        b->failed = true;
        return failed_stream(b);
    }
    return s;
}

eddy_stream_t eddy_sink(eddy_stream_t in, const char *uid, const char *kind, eddy_config_t *config)
{
    return add_step(in.builder, in.node, uid, kind, EDDY_NODE_SINK, NULL, config);
}

static eddy_plan_node_t *node_of(eddy_stream_t s)
{
    if (!s.builder || s.builder->failed || s.node < 0)
        return NULL;
    return &s.builder->plan->nodes[s.node & NODE_MASK];
}

eddy_stream_t eddy_event_time(eddy_stream_t source, const eddy_event_time_spec_t *spec)
{
    eddy_plan_node_t *n = node_of(source);
    if (!n)
        return source;
    if (n->role != EDDY_NODE_SOURCE) {
        eddy_builder_fail(source.builder, "step '%s': event time is assigned at a source", n->uid);
        return failed_stream(source.builder);
    }
    if (!spec || !spec->timestamps || !spec->timestamps[0] || spec->max_delay_ms < 0 ||
        spec->interval_ms < 0 || spec->idle_timeout_ms < 0) {
        eddy_builder_fail(source.builder, "step '%s': event time needs a timestamp assigner and "
                          "delays, interval and idle timeout >= 0", n->uid);
        return failed_stream(source.builder);
    }
    int64_t interval = spec->interval_ms ? spec->interval_ms : EDDY_WATERMARK_INTERVAL_MS;
    if (eddy_config_set_str(n->config, EDDY_EVENT_TIME_TIMESTAMPS, spec->timestamps) < 0 ||
        eddy_config_set_int(n->config, EDDY_EVENT_TIME_MAX_DELAY, spec->max_delay_ms) < 0 ||
        eddy_config_set_int(n->config, EDDY_EVENT_TIME_INTERVAL, interval) < 0 ||
        eddy_config_set_int(n->config, EDDY_EVENT_TIME_IDLE, spec->idle_timeout_ms) < 0) {
        eddy_builder_fail(source.builder, "step '%s': cannot record its event time", n->uid);
        return failed_stream(source.builder);
    }
    return source;
}

eddy_stream_t eddy_set_name(eddy_stream_t s, const char *name)
{
    eddy_plan_node_t *n = node_of(s);
    if (!n)
        return s;
    if (!name || !name[0] || strlen(name) >= EDDY_NAME_MAX) {
        eddy_builder_fail(s.builder, "step '%s': a name must be 1..%d bytes", n->uid, EDDY_NAME_MAX - 1);
        return failed_stream(s.builder);
    }
    snprintf(n->name, sizeof n->name, "%s", name);
    return s;
}

eddy_stream_t eddy_set_parallelism(eddy_stream_t s, uint32_t parallelism)
{
    eddy_plan_node_t *n = node_of(s);
    if (!n)
        return s;
    if (parallelism < 1) {
        eddy_builder_fail(s.builder, "step '%s': parallelism must be at least 1", n->uid);
        return failed_stream(s.builder);
    }
    n->parallelism = parallelism;
    return s;
}

void eddy_builder_set_max_parallelism(eddy_job_builder_t *b, uint32_t max_parallelism)
{
    if (b && !b->failed)
        b->plan->max_parallelism = max_parallelism;
}

void eddy_builder_set_default_parallelism(eddy_job_builder_t *b, uint32_t parallelism)
{
    if (b && !b->failed)
        b->plan->default_parallelism = parallelism;
}
