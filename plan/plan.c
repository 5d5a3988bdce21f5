/* plan.c - the logical plan: steps, validation, chaining into stages, and
 * the serialised form with its fingerprint (see plan.h).
 *
 * The encoding is one msgpack array: [version, job, max_parallelism,
 * default_parallelism, [node...]] with node = [uid, name, kind, role,
 * parallelism, input, edge, key_kind, config bytes], and for a two-input
 * step three more: [..., second_input, second_edge, second_key_kind]. A
 * one-input step encodes as before, so plans (and fingerprints) of jobs
 * without two-input steps are unchanged; an eddy that predates them refuses
 * a 12-element step as malformed. Decoding trusts nothing: every length and
 * index is bounded and the result is validated. */
#include "plan/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "net/mpcodec.h"
#include "state/keygroup.h"

static const char *role_names[] = {"source", "map",  "flat_map", "filter", "reduce",
                                   "aggregate", "sink", "window", "process"};
static const char *edge_names[] = {"none", "forward", "hash", "global", "rebalance"};

const char *eddy_node_role_name(eddy_node_role_t role)
{
    return (unsigned)role < EDDY_NODE_ROLE_COUNT ? role_names[role] : "?";
}

const char *eddy_edge_name(eddy_edge_t edge)
{
    return (unsigned)edge <= EDDY_EDGE_REBALANCE ? edge_names[edge] : "?";
}

eddy_plan_t *eddy_plan_new(const char *job)
{
    eddy_plan_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->job, sizeof p->job, "%s", job ? job : "");
    p->max_parallelism = EDDY_DEFAULT_MAX_PARALLELISM;
    p->default_parallelism = 1;
    return p;
}

void eddy_plan_destroy(eddy_plan_t **self_p)
{
    eddy_plan_t *p = *self_p;
    if (!p)
        return;
    for (uint32_t i = 0; i < p->n_nodes; i++)
        eddy_config_destroy(&p->nodes[i].config);
    free(p->nodes);
    free(p);
    *self_p = NULL;
}

static int copy_name(char *dst, const char *src, const char *what, eddy_err_t *err)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= EDDY_NAME_MAX)
        return eddy_err_set(err, "%s '%.40s...' is longer than %d bytes", what, src, EDDY_NAME_MAX - 1);
    memcpy(dst, src ? src : "", n + 1);
    return 0;
}

int eddy_plan_add(eddy_plan_t *self, const char *uid, const char *kind, eddy_node_role_t role,
                  int input, eddy_edge_t edge, const char *key_kind, eddy_config_t *config,
                  eddy_err_t *err)
{
    if (self->n_nodes >= EDDY_PLAN_MAX_NODES) {
        eddy_config_destroy(&config);
        return eddy_err_set(err, "a plan has at most %u steps", EDDY_PLAN_MAX_NODES);
    }
    if (self->n_nodes == self->cap) {
        uint32_t cap = self->cap ? self->cap * 2 : 8;
        eddy_plan_node_t *grown = realloc(self->nodes, cap * sizeof *grown);
        if (!grown) {
            eddy_config_destroy(&config);
            return eddy_err_set(err, "out of memory");
        }
        self->nodes = grown;
        self->cap = cap;
    }
    eddy_plan_node_t *n = &self->nodes[self->n_nodes];
    memset(n, 0, sizeof *n);
    if (copy_name(n->uid, uid, "uid", err) < 0 || copy_name(n->name, uid, "name", err) < 0 ||
        copy_name(n->kind, kind, "kind", err) < 0 ||
        copy_name(n->key_kind, key_kind, "key kind", err) < 0) {
        eddy_config_destroy(&config);
        return -1;
    }
    n->config = config ? config : eddy_config_new();
    if (!n->config)
        return eddy_err_set(err, "out of memory");
    n->role = role;
    n->input = input;
    n->edge = edge;
    n->second_input = -1;
    n->second_edge = EDDY_EDGE_NONE;
    return (int)self->n_nodes++;
}

int eddy_plan_set_second_input(eddy_plan_t *self, int i, int input, eddy_edge_t edge,
                               const char *key_kind, eddy_err_t *err)
{
    if (i < 0 || (uint32_t)i >= self->n_nodes)
        return eddy_err_set(err, "no step %d to give a second input", i);
    eddy_plan_node_t *n = &self->nodes[i];
    if (copy_name(n->second_key_kind, key_kind, "key kind", err) < 0)
        return -1;
    n->second_input = input;
    n->second_edge = edge;
    return 0;
}

uint32_t eddy_plan_parallelism(const eddy_plan_t *self, uint32_t i)
{
    const eddy_plan_node_t *n = &self->nodes[i];
    if (n->edge == EDDY_EDGE_GLOBAL)
        return 1;
    return n->parallelism ? n->parallelism : self->default_parallelism;
}

static uint32_t consumers(const eddy_plan_t *self, uint32_t i)
{
    uint32_t c = 0;
    for (uint32_t k = 0; k < self->n_nodes; k++)
        c += (self->nodes[k].input == (int)i) + (self->nodes[k].second_input == (int)i);
    return c;
}

/* A two-input step: a process step whose inputs are two different earlier
 * steps, both keyed, so records of either input reach the instance that
 * owns their key group. */
static int validate_second_input(const eddy_plan_t *self, uint32_t i, eddy_err_t *err)
{
    const eddy_plan_node_t *n = &self->nodes[i];
    if (n->second_input < 0) {
        if (n->second_input != -1 || n->second_edge != EDDY_EDGE_NONE || n->second_key_kind[0])
            return eddy_err_set(err, "step '%s' has a second edge or key but no second input", n->uid);
        return 0;
    }
    if (n->role != EDDY_NODE_PROCESS)
        return eddy_err_set(err, "step '%s': only a process step takes two inputs, not a %s",
                            n->uid, eddy_node_role_name(n->role));
    if ((uint32_t)n->second_input >= i)
        return eddy_err_set(err, "step '%s' reads from a later step", n->uid);
    if (n->second_input == n->input)
        return eddy_err_set(err, "step '%s' reads step '%s' as both of its inputs", n->uid,
                            self->nodes[n->input].uid);
    if (self->nodes[n->second_input].role == EDDY_NODE_SINK)
        return eddy_err_set(err, "step '%s' reads from sink '%s'", n->uid,
                            self->nodes[n->second_input].uid);
    if (n->edge != EDDY_EDGE_HASH || !n->key_kind[0] || n->second_edge != EDDY_EDGE_HASH ||
        !n->second_key_kind[0])
        return eddy_err_set(err, "step '%s': both inputs of a two-input step must be keyed "
                            "(key_by each, so they share the job's key groups); input %d is not",
                            n->uid, n->edge == EDDY_EDGE_HASH && n->key_kind[0] ? 2 : 1);
    return 0;
}

int eddy_plan_validate(const eddy_plan_t *self, eddy_err_t *err)
{
    if (!self->job[0])
        return eddy_err_set(err, "the plan has no job name");
    if (self->max_parallelism < 1 || self->max_parallelism > EDDY_MAX_KEY_GROUPS)
        return eddy_err_set(err, "max parallelism %u is out of range 1..%u", self->max_parallelism,
                            EDDY_MAX_KEY_GROUPS);
    if (self->default_parallelism < 1 || self->default_parallelism > self->max_parallelism)
        return eddy_err_set(err, "default parallelism %u is out of range 1..%u",
                            self->default_parallelism, self->max_parallelism);
    if (self->n_nodes == 0)
        return eddy_err_set(err, "job %s has no steps", self->job);
    for (uint32_t i = 0; i < self->n_nodes; i++) {
        const eddy_plan_node_t *n = &self->nodes[i];
        if (!n->uid[0] || !n->name[0] || !n->kind[0])
            return eddy_err_set(err, "step %u has an empty uid, name or kind", i);
        for (uint32_t k = 0; k < i; k++) {
            if (!strcmp(self->nodes[k].uid, n->uid))
                return eddy_err_set(err, "two steps have the uid '%s'", n->uid);
            if (!strcmp(self->nodes[k].name, n->name))
                return eddy_err_set(err, "two steps have the name '%s'", n->name);
        }
        if ((unsigned)n->role >= EDDY_NODE_ROLE_COUNT || (unsigned)n->edge > EDDY_EDGE_REBALANCE)
            return eddy_err_set(err, "step '%s' has an unknown role or edge", n->uid);
        bool source = n->role == EDDY_NODE_SOURCE;
        if (source != (n->input < 0) || source != (n->edge == EDDY_EDGE_NONE))
            return eddy_err_set(err, "step '%s': %s", n->uid,
                                source ? "a source takes no input" : "needs an input step");
        if (!source && n->input >= (int)i)
            return eddy_err_set(err, "step '%s' reads from a later step", n->uid);
        if (!source && self->nodes[n->input].role == EDDY_NODE_SINK)
            return eddy_err_set(err, "step '%s' reads from sink '%s'", n->uid,
                                self->nodes[n->input].uid);
        if (validate_second_input(self, i, err) < 0)
            return -1;
        if ((n->edge == EDDY_EDGE_HASH) != (n->key_kind[0] != 0))
            return eddy_err_set(err, "step '%s': %s", n->uid,
                                n->key_kind[0] ? "a key needs a keyed (HASH) input"
                                               : "a keyed input needs a key selector");
        if ((n->role == EDDY_NODE_REDUCE || n->role == EDDY_NODE_AGGREGATE ||
             n->role == EDDY_NODE_WINDOW || n->role == EDDY_NODE_PROCESS) &&
            n->edge != EDDY_EDGE_HASH)
            return eddy_err_set(err, "step '%s': %s needs a keyed stream (key_by first)", n->uid,
                                eddy_node_role_name(n->role));
        uint32_t p = eddy_plan_parallelism(self, i);
        if (p < 1 || p > self->max_parallelism)
            return eddy_err_set(err, "step '%s': parallelism %u is out of range 1..%u", n->uid, p,
                                self->max_parallelism);
        if (!n->config)
            return eddy_err_set(err, "step '%s' has no configuration", n->uid);
    }
    return 0;
}

int eddy_plan_stages(const eddy_plan_t *self, uint32_t *stage_of, eddy_err_t *err)
{
    uint32_t n_stages = 0;
    for (uint32_t i = 0; i < self->n_nodes; i++) {
        const eddy_plan_node_t *n = &self->nodes[i];
        bool chained = n->input >= 0 && n->edge == EDDY_EDGE_FORWARD &&
                       eddy_plan_parallelism(self, (uint32_t)n->input) == eddy_plan_parallelism(self, i) &&
                       consumers(self, (uint32_t)n->input) == 1;
        if (chained) {
            stage_of[i] = stage_of[n->input];
            continue;
        }
        if (n_stages >= EDDY_MAX_STAGES)
            return eddy_err_set(err, "job %s needs more than %d stages", self->job, EDDY_MAX_STAGES);
        stage_of[i] = n_stages++;
    }
    return (int)n_stages;
}

/* ---- serialised form ---------------------------------------------------- */

char *eddy_plan_encode(const eddy_plan_t *self, size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 5);
    eddy_mpw_u64(&w, EDDY_PLAN_VERSION);
    eddy_mpw_str(&w, self->job);
    eddy_mpw_u64(&w, self->max_parallelism);
    eddy_mpw_u64(&w, self->default_parallelism);
    eddy_mpw_array(&w, self->n_nodes);
    for (uint32_t i = 0; i < self->n_nodes; i++) {
        const eddy_plan_node_t *n = &self->nodes[i];
        size_t clen = 0;
        char *cfg = eddy_config_encode(n->config, &clen);
        if (!cfg) {
            eddy_mpw_free(&w);
            return NULL;
        }
        bool two = n->second_input >= 0;
        eddy_mpw_array(&w, two ? 12 : 9);
        eddy_mpw_str(&w, n->uid);
        eddy_mpw_str(&w, n->name);
        eddy_mpw_str(&w, n->kind);
        eddy_mpw_u64(&w, (uint64_t)n->role);
        eddy_mpw_u64(&w, n->parallelism);
        eddy_mpw_i64(&w, n->input);
        eddy_mpw_u64(&w, (uint64_t)n->edge);
        eddy_mpw_str(&w, n->key_kind);
        eddy_mpw_bin(&w, cfg, clen);
        free(cfg);
        if (two) {
            eddy_mpw_i64(&w, n->second_input);
            eddy_mpw_u64(&w, (uint64_t)n->second_edge);
            eddy_mpw_str(&w, n->second_key_kind);
        }
    }
    return eddy_mpw_release(&w, len);
}

eddy_plan_t *eddy_plan_decode(const void *data, size_t len, eddy_err_t *err)
{
    if (len > EDDY_PLAN_MAX_BYTES) {
        eddy_err_set(err, "plan of %zu bytes is larger than %u", len, EDDY_PLAN_MAX_BYTES);
        return NULL;
    }
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) < 0) {
        eddy_err_wrap(err, "plan");
        return NULL;
    }
    eddy_plan_t *p = eddy_plan_new("");
    if (!p) {
        eddy_mpr_close(&r);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    uint64_t version = eddy_mpr_u64(&r, UINT32_MAX);
    if (r.ok && version != EDDY_PLAN_VERSION) {
        eddy_mpr_close(&r);
        eddy_plan_destroy(&p);
        eddy_err_set(err, "plan version %llu, this eddy reads version %u",
                     (unsigned long long)version, EDDY_PLAN_VERSION);
        return NULL;
    }
    eddy_mpr_strcpy(&r, p->job, sizeof p->job);
    p->max_parallelism = (uint32_t)eddy_mpr_u64(&r, EDDY_MAX_KEY_GROUPS);
    p->default_parallelism = (uint32_t)eddy_mpr_u64(&r, EDDY_MAX_KEY_GROUPS);
    const msgpack_object *items;
    uint32_t count, next;
    uint32_t n = eddy_mpr_enter(&r, EDDY_PLAN_MAX_NODES, &items, &count, &next);
    for (uint32_t i = 0; r.ok && i < n; i++) {
        const msgpack_object *nitems;
        uint32_t ncount, nnext;
        uint32_t fields = eddy_mpr_enter(&r, 12, &nitems, &ncount, &nnext);
        if (fields != 9 && fields != 12) {
            eddy_mpr_fail(&r, "plan step is not a 9-element (one input) or 12-element (two "
                          "inputs) array");
            break;
        }
        char uid[EDDY_NAME_MAX], name[EDDY_NAME_MAX], kind[EDDY_NAME_MAX], key[EDDY_NAME_MAX];
        eddy_mpr_strcpy(&r, uid, sizeof uid);
        eddy_mpr_strcpy(&r, name, sizeof name);
        eddy_mpr_strcpy(&r, kind, sizeof kind);
        uint64_t role = eddy_mpr_u64(&r, EDDY_NODE_ROLE_COUNT - 1);
        uint64_t parallelism = eddy_mpr_u64(&r, EDDY_MAX_KEY_GROUPS);
        int64_t input = eddy_mpr_i64(&r);
        uint64_t edge = eddy_mpr_u64(&r, EDDY_EDGE_REBALANCE);
        eddy_mpr_strcpy(&r, key, sizeof key);
        uint32_t clen = 0;
        const char *cbytes = eddy_mpr_bytes(&r, EDDY_PLAN_MAX_BYTES, &clen);
        int64_t input2 = -1;
        uint64_t edge2 = EDDY_EDGE_NONE;
        char key2[EDDY_NAME_MAX] = "";
        if (fields == 12) {
            input2 = eddy_mpr_i64(&r);
            edge2 = eddy_mpr_u64(&r, EDDY_EDGE_REBALANCE);
            eddy_mpr_strcpy(&r, key2, sizeof key2);
        }
        eddy_mpr_leave(&r, nitems, ncount, nnext);
        if (!r.ok)
            break;
        if (input < -1 || input >= (int64_t)i) {
            eddy_mpr_fail(&r, "plan step input out of range");
            break;
        }
        if (fields == 12 && (input2 < 0 || input2 >= (int64_t)i)) {
            eddy_mpr_fail(&r, "plan step second input out of range");
            break;
        }
        eddy_err_t cerr;
        eddy_config_t *cfg = eddy_config_decode(cbytes, clen, &cerr);
        if (!cfg) {
            eddy_mpr_fail(&r, "plan step configuration is malformed");
            break;
        }
        eddy_err_t aerr;
        int idx = eddy_plan_add(p, uid, kind, (eddy_node_role_t)role, (int)input, (eddy_edge_t)edge,
                                key, cfg, &aerr);
        if (idx < 0) {
            eddy_mpr_fail(&r, "plan step is invalid");
            break;
        }
        memcpy(p->nodes[idx].name, name, sizeof name);
        p->nodes[idx].parallelism = (uint32_t)parallelism;
        if (fields == 12 &&
            eddy_plan_set_second_input(p, idx, (int)input2, (eddy_edge_t)edge2, key2, &aerr) < 0) {
            eddy_mpr_fail(&r, "plan step is invalid");
            break;
        }
    }
    eddy_mpr_leave(&r, items, count, next);
    int rc = eddy_mpr_finish(&r, "plan", err);
    eddy_mpr_close(&r);
    if (rc < 0 || eddy_plan_validate(p, err) < 0) {
        eddy_plan_destroy(&p);
        return NULL;
    }
    return p;
}

uint64_t eddy_plan_fingerprint(const eddy_plan_t *self)
{
    size_t len = 0;
    char *bytes = eddy_plan_encode(self, &len);
    uint64_t fp = bytes ? XXH64(bytes, len, EDDY_PLAN_VERSION) : 0;
    free(bytes);
    return fp;
}
