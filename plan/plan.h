/* plan.h - the logical plan of a job: what the stream builder (api/stream.h)
 * records, validated, serialised with a fingerprint, and turned into stages.
 *
 * A plan is data only: every step names a registered kind and carries its
 * configuration as an eddy_config_t, so the submitting side builds it once
 * and ships the bytes; workers instantiate operators from the kinds. Steps
 * are stored in the order they were added; a step's input is an earlier
 * step, so the plan is a forest of trees rooted at its sources.
 *
 * Chaining (like Flink's operator chains): a step joins its input's stage
 * when it is FORWARD-connected, has the same parallelism, and is its
 * input's only consumer; sources, keyed (HASH), REBALANCE and GLOBAL steps
 * start a stage. A stage is named after its first step. A two-input step
 * (eddy_process2) is keyed, so it starts a stage with two input edges. */
#ifndef EDDY_PLAN_PLAN_H
#define EDDY_PLAN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/config.h"
#include "common/err.h"
#include "plan/graph.h"

/* Bumped when the plan's encoding or meaning changes: a worker refuses a
 * plan of another version. */
#define EDDY_PLAN_VERSION 1u
#define EDDY_PLAN_MAX_NODES 256u
#define EDDY_PLAN_MAX_BYTES (16u << 20)

typedef enum eddy_node_role {
    EDDY_NODE_SOURCE = 0,
    EDDY_NODE_MAP,
    EDDY_NODE_FLAT_MAP,
    EDDY_NODE_FILTER,
    EDDY_NODE_REDUCE,
    EDDY_NODE_AGGREGATE,
    EDDY_NODE_SINK,
    EDDY_NODE_WINDOW,   /* keyed: a window operator (api/window.h) */
    EDDY_NODE_PROCESS,  /* keyed: a process function with timers and state (api/process.h) */
    EDDY_NODE_ROLE_COUNT
} eddy_node_role_t;

typedef struct eddy_plan_node {
    char uid[EDDY_NAME_MAX];
    char name[EDDY_NAME_MAX];
    char kind[EDDY_NAME_MAX];
    eddy_node_role_t role;
    eddy_config_t *config;       /* owned; never NULL in a built plan */
    uint32_t parallelism;        /* 0: the plan's default */
    int input;                   /* index of the upstream step, -1 for a source */
    eddy_edge_t edge;            /* how records reach it from input */
    char key_kind[EDDY_NAME_MAX];/* HASH: the registered key selector */
    /* A two-input step (eddy_process2): its second input, -1 for none; both
     * inputs are keyed (HASH) with their own key selectors. */
    int second_input;
    eddy_edge_t second_edge;
    char second_key_kind[EDDY_NAME_MAX];
} eddy_plan_node_t;

typedef struct eddy_plan {
    char job[EDDY_NAME_MAX];
    uint32_t max_parallelism;
    uint32_t default_parallelism;
    uint32_t n_nodes, cap;
    eddy_plan_node_t *nodes;
} eddy_plan_t;

eddy_plan_t *eddy_plan_new(const char *job);
void eddy_plan_destroy(eddy_plan_t **self_p);

/* Appends a step; takes config (NULL: an empty one). Its index, or -1 with err. */
int eddy_plan_add(eddy_plan_t *self, const char *uid, const char *kind, eddy_node_role_t role,
                  int input, eddy_edge_t edge, const char *key_kind, eddy_config_t *config,
                  eddy_err_t *err);

/* Makes step i a two-input step reading `input` by `edge` with key
 * selector key_kind as its second input. 0, or -1 with err. */
int eddy_plan_set_second_input(eddy_plan_t *self, int i, int input, eddy_edge_t edge,
                               const char *key_kind, eddy_err_t *err);

/* Effective parallelism of step i (GLOBAL: 1; unset: the default). */
uint32_t eddy_plan_parallelism(const eddy_plan_t *self, uint32_t i);
/* Structure only (kinds are checked when instantiated): unique non-empty
 * uids and names, inputs earlier in the plan, sources without input and
 * every other step with one, sinks without consumers, HASH with a key kind,
 * parallelism 1..max_parallelism, max_parallelism 1..EDDY_MAX_KEY_GROUPS;
 * a second input only on a process step, from another earlier step, with
 * both inputs keyed (HASH with a key selector). */
int eddy_plan_validate(const eddy_plan_t *self, eddy_err_t *err);

/* Stage of every step (stage_of[n_nodes]) by the chaining rule above;
 * returns the number of stages, or -1 with err when there are too many. */
int eddy_plan_stages(const eddy_plan_t *self, uint32_t *stage_of, eddy_err_t *err);

/* Serialised form (msgpack, canonical) and its fingerprint (xxhash64 of it).
 * decode validates the structure and the plan (eddy_plan_validate). */
char *eddy_plan_encode(const eddy_plan_t *self, size_t *len);
eddy_plan_t *eddy_plan_decode(const void *data, size_t len, eddy_err_t *err);
uint64_t eddy_plan_fingerprint(const eddy_plan_t *self);

const char *eddy_node_role_name(eddy_node_role_t role);
const char *eddy_edge_name(eddy_edge_t edge);

#endif
