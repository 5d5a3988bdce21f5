/* pipeline_plugin_step.c - the `plugin: NAME` step of a pipeline spec: an
 * operator kind registered by a plugin (or built in), by name, with its
 * config (a flat mapping of scalars) and the columns of the rows it emits
 * (default: those it gets). Whether the kind exists is checked when the job
 * is built, where the registry (with --plugin's kinds) is known. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/pipeline_spec_parse.h"

#define MAX_CONFIG 256

static int parse_config(const eddy_pspec_ctx_t *c, const eddy_ynode_t *v, const char *field,
                        eddy_pstep_t *st)
{
    if (v->kind != EDDY_YNODE_MAP)
        return eddy_pspec_fail(c, v, field, "expected a mapping of KEY: VALUE");
    if (v->n > MAX_CONFIG)
        return eddy_pspec_fail(c, v, field, "more than %u keys", MAX_CONFIG);
    uint32_t n = v->n ? v->n : 1;
    st->config_keys = calloc(n, sizeof *st->config_keys);
    st->config_values = calloc(n, sizeof *st->config_values);
    st->config_quoted = calloc(n, sizeof *st->config_quoted);
    if (!st->config_keys || !st->config_values || !st->config_quoted)
        return eddy_err_set(c->err, "out of memory");
    for (uint32_t i = 0; i < v->n; i++) {
        char sub[400];
        snprintf(sub, sizeof sub, "%s.%.60s", field, v->keys[i]);
        if (!(st->config_keys[i] = strdup(v->keys[i])))
            return eddy_err_set(c->err, "out of memory");
        st->n_config = i + 1;
        if (eddy_pspec_scalar(c, v->items[i], sub, &st->config_values[i]) < 0)
            return -1;
        st->config_quoted[i] = v->items[i]->quoted;
    }
    return 0;
}

static int parse_columns(const eddy_pspec_ctx_t *c, const eddy_ynode_t *v, const char *field,
                         eddy_pstep_t *st)
{
    if (v->kind != EDDY_YNODE_SEQ || v->n == 0)
        return eddy_pspec_fail(c, v, field, "expected a list of column names");
    st->columns = calloc(v->n, sizeof *st->columns);
    if (!st->columns)
        return eddy_err_set(c->err, "out of memory");
    for (uint32_t i = 0; i < v->n; i++) {
        char sub[400];
        snprintf(sub, sizeof sub, "%s[%u]", field, i);
        if (eddy_pspec_scalar(c, v->items[i], sub, &st->columns[i]) < 0)
            return -1;
        st->n = i + 1;
        if (!eddy_pspec_is_identifier(st->columns[i]))
            return eddy_pspec_fail(c, v->items[i], sub, "'%.60s' is not a column name",
                                   st->columns[i]);
        for (uint32_t k = 0; k < i; k++)
            if (!strcmp(st->columns[k], st->columns[i]))
                return eddy_pspec_fail(c, v->items[i], sub, "column '%s' named twice",
                                       st->columns[i]);
    }
    return 0;
}

int eddy_pipeline_plugin_step_parse(const eddy_pspec_ctx_t *c, const eddy_ynode_t *m,
                                    const char *field, char **cols, uint32_t n_cols,
                                    eddy_pstep_t *st)
{
    char sub[260];
    snprintf(sub, sizeof sub, "%s.plugin", field);
    const eddy_ynode_t *v = eddy_ynode_get(m, "plugin");
    if (eddy_pspec_scalar(c, v, sub, &st->plugin) < 0)
        return -1;
    if (!st->plugin[0] || strlen(st->plugin) > 120)
        return eddy_pspec_fail(c, v, sub, "expected an operator kind's name");
    snprintf(sub, sizeof sub, "%s.config", field);
    if ((v = eddy_ynode_get(m, "config")) && parse_config(c, v, sub, st) < 0)
        return -1;
    snprintf(sub, sizeof sub, "%s.columns", field);
    if ((v = eddy_ynode_get(m, "columns")))
        return parse_columns(c, v, sub, st);
    st->columns = calloc(n_cols ? n_cols : 1, sizeof *st->columns);
    if (!st->columns)
        return eddy_err_set(c->err, "out of memory");
    for (uint32_t i = 0; i < n_cols; i++) {
        if (!(st->columns[i] = strdup(cols[i])))
            return eddy_err_set(c->err, "out of memory");
        st->n = i + 1;
    }
    return 0;
}
