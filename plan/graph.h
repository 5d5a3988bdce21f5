/* graph.h - a job as a graph of stages: the physical form of a plan
 * (plan/plan.h) that tasks run, made by eddy_plan_instantiate.
 *
 * A stage is a chain of operators that run in one task per instance (like a
 * Flink operator chain): a source or one input edge (two HASH edges for a
 * two-input keyed stage, eddy_process2), then operators called in order. Edges: FORWARD (instance i feeds instance i, same parallelism),
 * HASH (by key group of the record's key: the stage is keyed and can be
 * rescaled), GLOBAL (everything to instance 0), REBALANCE (round robin).
 *
 * Stages point at operator ops and configs resolved from registered kinds
 * (plan/registry.h), never at anything that travelled on the wire. */
#ifndef EDDY_PLAN_GRAPH_H
#define EDDY_PLAN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "net/proto.h"
#include "api/operator.h"

#define EDDY_MAX_CHAIN 8
#define EDDY_MAX_RATE_STEPS 32

typedef enum eddy_edge {
    EDDY_EDGE_NONE = 0, /* source stage */
    EDDY_EDGE_FORWARD,
    EDDY_EDGE_HASH,
    EDDY_EDGE_GLOBAL,
    EDDY_EDGE_REBALANCE,
} eddy_edge_t;

/* Offered source rate over time: rate[i] records/s from at_s[i] seconds after
 * the job starts. One step with rate 0 means unlimited. */
typedef struct eddy_rate_schedule {
    uint32_t steps;
    double at_s[EDDY_MAX_RATE_STEPS];
    double rate[EDDY_MAX_RATE_STEPS];
} eddy_rate_schedule_t;

typedef struct eddy_chained_op {
    const eddy_operator_ops_t *ops;
    const void *config;
    eddy_key_fn key_fn; /* a combiner's: the keyed step's selector (else NULL) */
} eddy_chained_op_t;

/* A source stage's event time (eddy_event_time in api/stream.h). */
typedef struct eddy_event_time {
    bool enabled;
    int64_t (*timestamp)(const eddy_record_t *rec); /* NULL: the source's own */
    int64_t max_delay_ms, interval_ms, idle_ms;
} eddy_event_time_t;

typedef struct eddy_stage_def {
    char name[EDDY_NAME_MAX];
    uint32_t parallelism;
    uint32_t min_parallelism, max_parallelism_limit; /* for the controller */
    int input;            /* upstream stage index, -1 for a source */
    eddy_edge_t edge;
    eddy_key_fn key_fn;   /* HASH edges */
    /* A two-input keyed stage's second input (-1: none), always HASH. Its
     * channels follow the first input's in the task; its records reach the
     * first operator with ctx->input set to 1. */
    int second_input;
    eddy_edge_t second_edge;
    eddy_key_fn second_key_fn;
    const eddy_source_ops_t *source;
    const void *source_config;
    eddy_rate_schedule_t rate; /* sources */
    eddy_event_time_t event_time; /* sources */
    uint32_t n_ops;
    eddy_chained_op_t ops[EDDY_MAX_CHAIN];
} eddy_stage_def_t;

typedef struct eddy_job_graph {
    char job_name[EDDY_NAME_MAX];
    uint32_t max_parallelism;
    uint32_t n_stages;
    eddy_stage_def_t stages[EDDY_MAX_STAGES];
    void *config;                 /* parsed job flags, owned */
    void (*free_config)(void *config);
} eddy_job_graph_t;

void eddy_graph_init(eddy_job_graph_t *g, const char *job_name);
void eddy_graph_clear(eddy_job_graph_t *g);
/* Adds a stage and returns its index (or -1 with err when the graph is full). */
int eddy_graph_add_source(eddy_job_graph_t *g, const char *name, uint32_t parallelism,
                          const eddy_source_ops_t *source, const void *config, eddy_err_t *err);
int eddy_graph_add_stage(eddy_job_graph_t *g, const char *name, uint32_t parallelism, int input,
                         eddy_edge_t edge, eddy_key_fn key_fn, eddy_err_t *err);
/* Gives stage a second input (a two-input keyed stage). */
int eddy_graph_set_second_input(eddy_job_graph_t *g, int stage, int input, eddy_edge_t edge,
                                eddy_key_fn key_fn, eddy_err_t *err);
int eddy_graph_chain(eddy_job_graph_t *g, int stage, const eddy_operator_ops_t *ops,
                     const void *config, eddy_err_t *err);
/* Chains each keyed stage's combiner (eddy_operator_ops_t.combiner) to the
 * stage feeding it, where that stage feeds nothing else and has room. */
void eddy_graph_add_combiners(eddy_job_graph_t *g);
/* Checks names, edges, parallelism (FORWARD needs equal parallelism). */
int eddy_graph_validate(const eddy_job_graph_t *g, eddy_err_t *err);
int eddy_graph_find_stage(const eddy_job_graph_t *g, const char *name);
static inline bool eddy_stage_is_keyed(const eddy_stage_def_t *s) { return s->edge == EDDY_EDGE_HASH; }
/* Whether stage s reads from stage `up` (through either input). */
static inline bool eddy_stage_reads(const eddy_stage_def_t *s, uint32_t up)
{
    return s->input == (int)up || s->second_input == (int)up;
}
/* The edge and key selector by which stage s reads from stage `up`. */
static inline eddy_edge_t eddy_stage_edge_from(const eddy_stage_def_t *s, uint32_t up)
{
    return s->second_input == (int)up ? s->second_edge : s->edge;
}
static inline eddy_key_fn eddy_stage_key_from(const eddy_stage_def_t *s, uint32_t up)
{
    return s->second_input == (int)up ? s->second_key_fn : s->key_fn;
}
/* Offered rate at t seconds after start (0 = unlimited). */
double eddy_rate_at(const eddy_rate_schedule_t *r, double t_s);
/* Parses "R" or "T:R,T:R,..." (seconds:records per second). */
int eddy_rate_parse(eddy_rate_schedule_t *r, const char *text, eddy_err_t *err);

#endif
