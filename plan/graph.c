/* graph.c - building and validating job graphs (the stages tasks run). */
#include "plan/graph.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void eddy_graph_init(eddy_job_graph_t *g, const char *job_name)
{
    memset(g, 0, sizeof *g);
    snprintf(g->job_name, sizeof g->job_name, "%s", job_name);
    g->max_parallelism = EDDY_DEFAULT_MAX_PARALLELISM;
}

void eddy_graph_clear(eddy_job_graph_t *g)
{
    if (g->config && g->free_config)
        g->free_config(g->config);
    g->config = NULL;
    g->n_stages = 0;
}

static int valid_name(const char *name)
{
    if (!name || !*name || strlen(name) >= EDDY_NAME_MAX)
        return 0;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
            return 0;
    return 1;
}

static eddy_stage_def_t *new_stage(eddy_job_graph_t *g, const char *name, uint32_t parallelism,
                                   eddy_err_t *err)
{
    if (g->n_stages >= EDDY_MAX_STAGES) {
        eddy_err_set(err, "job graph has more than %d stages", EDDY_MAX_STAGES);
        return NULL;
    }
    if (!valid_name(name)) {
        eddy_err_set(err, "invalid stage name '%s' (use letters, digits, '_', '-', '.')", name);
        return NULL;
    }
    eddy_stage_def_t *s = &g->stages[g->n_stages];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->parallelism = parallelism;
    s->min_parallelism = 1;
    s->max_parallelism_limit = g->max_parallelism;
    s->input = -1;
    s->second_input = -1;
    return s;
}

int eddy_graph_add_source(eddy_job_graph_t *g, const char *name, uint32_t parallelism,
                          const eddy_source_ops_t *source, const void *config, eddy_err_t *err)
{
    eddy_stage_def_t *s = new_stage(g, name, parallelism, err);
    if (!s)
        return -1;
    s->source = source;
    s->source_config = config;
    s->edge = EDDY_EDGE_NONE;
    return (int)g->n_stages++;
}

int eddy_graph_add_stage(eddy_job_graph_t *g, const char *name, uint32_t parallelism, int input,
                         eddy_edge_t edge, eddy_key_fn key_fn, eddy_err_t *err)
{
    if (input < 0 || (uint32_t)input >= g->n_stages)
        return eddy_err_set(err, "stage '%s' names a missing input stage", name);
    eddy_stage_def_t *s = new_stage(g, name, parallelism, err);
    if (!s)
        return -1;
    s->input = input;
    s->edge = edge;
    s->key_fn = key_fn;
    return (int)g->n_stages++;
}

int eddy_graph_set_second_input(eddy_job_graph_t *g, int stage, int input, eddy_edge_t edge,
                                eddy_key_fn key_fn, eddy_err_t *err)
{
    if (stage < 0 || (uint32_t)stage >= g->n_stages)
        return eddy_err_set(err, "no stage %d to give a second input", stage);
    eddy_stage_def_t *s = &g->stages[stage];
    if (input < 0 || input >= stage)
        return eddy_err_set(err, "stage '%s' names a missing second input stage", s->name);
    s->second_input = input;
    s->second_edge = edge;
    s->second_key_fn = key_fn;
    return 0;
}

int eddy_graph_chain(eddy_job_graph_t *g, int stage, const eddy_operator_ops_t *ops,
                     const void *config, eddy_err_t *err)
{
    if (stage < 0 || (uint32_t)stage >= g->n_stages)
        return eddy_err_set(err, "no stage %d to chain an operator to", stage);
    eddy_stage_def_t *s = &g->stages[stage];
    if (s->n_ops >= EDDY_MAX_CHAIN)
        return eddy_err_set(err, "stage '%s' chains more than %d operators", s->name, EDDY_MAX_CHAIN);
    s->ops[s->n_ops].ops = ops;
    s->ops[s->n_ops].config = config;
    s->n_ops++;
    return 0;
}

void eddy_graph_add_combiners(eddy_job_graph_t *g)
{
    for (uint32_t i = 0; i < g->n_stages; i++) {
        eddy_stage_def_t *s = &g->stages[i];
        if (s->edge != EDDY_EDGE_HASH || s->second_input >= 0 || s->n_ops == 0 ||
            !s->ops[0].ops->combiner)
            continue;
        const eddy_operator_ops_t *combiner = s->ops[0].ops->combiner(s->ops[0].config);
        eddy_stage_def_t *up = &g->stages[s->input];
        uint32_t consumers = 0;
        for (uint32_t j = 0; j < g->n_stages; j++)
            consumers += eddy_stage_reads(&g->stages[j], (uint32_t)s->input);
        if (!combiner || consumers != 1 || up->n_ops >= EDDY_MAX_CHAIN)
            continue;
        up->ops[up->n_ops++] = (eddy_chained_op_t){combiner, s->ops[0].config, s->key_fn};
    }
}

int eddy_graph_validate(const eddy_job_graph_t *g, eddy_err_t *err)
{
    if (g->n_stages == 0)
        return eddy_err_set(err, "job '%s' has no stages", g->job_name);
    if (g->max_parallelism < 1 || g->max_parallelism > EDDY_MAX_KEY_GROUPS)
        return eddy_err_set(err, "max parallelism %u is out of range 1..%u", g->max_parallelism,
                            EDDY_MAX_KEY_GROUPS);
    for (uint32_t i = 0; i < g->n_stages; i++) {
        const eddy_stage_def_t *s = &g->stages[i];
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(g->stages[j].name, s->name))
                return eddy_err_set(err, "two stages are named '%s'", s->name);
        if (s->parallelism < 1 || s->parallelism > g->max_parallelism)
            return eddy_err_set(err, "stage '%s': parallelism %u is out of range 1..%u", s->name,
                                s->parallelism, g->max_parallelism);
        if (s->source) {
            if (s->input != -1)
                return eddy_err_set(err, "source stage '%s' cannot have an input", s->name);
            continue;
        }
        if (s->input < 0 || (uint32_t)s->input >= i)
            return eddy_err_set(err, "stage '%s' must read from an earlier stage", s->name);
        if (s->edge == EDDY_EDGE_FORWARD && g->stages[s->input].parallelism != s->parallelism)
            return eddy_err_set(err, "stage '%s': a forward edge needs the parallelism of '%s'",
                                s->name, g->stages[s->input].name);
        if (s->edge == EDDY_EDGE_HASH && !s->key_fn)
            return eddy_err_set(err, "stage '%s' is keyed but has no key selector", s->name);
        if (s->edge == EDDY_EDGE_GLOBAL && s->parallelism != 1)
            return eddy_err_set(err, "stage '%s': a global edge needs parallelism 1", s->name);
        if (s->second_input >= 0 &&
            ((uint32_t)s->second_input >= i || s->second_input == s->input ||
             s->edge != EDDY_EDGE_HASH || s->second_edge != EDDY_EDGE_HASH || !s->second_key_fn))
            return eddy_err_set(err, "stage '%s': a two-input stage reads two different earlier "
                                "stages, both by key", s->name);
        if (s->n_ops == 0)
            return eddy_err_set(err, "stage '%s' has no operators", s->name);
    }
    return 0;
}

int eddy_graph_find_stage(const eddy_job_graph_t *g, const char *name)
{
    for (uint32_t i = 0; i < g->n_stages; i++)
        if (!strcmp(g->stages[i].name, name))
            return (int)i;
    return -1;
}

double eddy_rate_at(const eddy_rate_schedule_t *r, double t_s)
{
    double rate = 0;
    for (uint32_t i = 0; i < r->steps; i++)
        if (t_s >= r->at_s[i])
            rate = r->rate[i];
    return rate;
}

static int parse_number(const char *s, char **end, double *out)
{
    errno = 0;
    double v = strtod(s, end);
    if (*end == s || errno || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

int eddy_rate_parse(eddy_rate_schedule_t *r, const char *text, eddy_err_t *err)
{
    memset(r, 0, sizeof *r);
    const char *p = text;
    if (!strchr(text, ':')) {
        char *end;
        double v;
        if (parse_number(p, &end, &v) < 0 || *end)
            return eddy_err_set(err, "invalid rate '%s' (records per second, e.g. 5000)", text);
        r->steps = 1;
        r->rate[0] = v;
        return 0;
    }
    while (*p) {
        if (r->steps >= EDDY_MAX_RATE_STEPS)
            return eddy_err_set(err, "rate schedule '%s' has more than %d steps", text,
                                EDDY_MAX_RATE_STEPS);
        char *end;
        double at, rate;
        if (parse_number(p, &end, &at) < 0 || *end != ':')
            return eddy_err_set(err, "invalid rate schedule '%s' (expected SECONDS:RATE,...)", text);
        p = end + 1;
        if (parse_number(p, &end, &rate) < 0 || (*end && *end != ','))
            return eddy_err_set(err, "invalid rate schedule '%s' (expected SECONDS:RATE,...)", text);
        if (r->steps && at <= r->at_s[r->steps - 1])
            return eddy_err_set(err, "rate schedule '%s': times must increase", text);
        r->at_s[r->steps] = at;
        r->rate[r->steps] = rate;
        r->steps++;
        p = *end ? end + 1 : end;
    }
    return 0;
}
