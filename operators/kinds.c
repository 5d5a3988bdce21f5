/* kinds.c - the built-in operators' plan kinds: configurations checked and
 * turned into each operator's own config struct (see kinds.h). */
#include "operators/kinds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "operators/operators.h"

static void *sum_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
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
    double cost_us = eddy_config_double(cfg, "cost_us", 0);
    if (!isfinite(cost_us) || cost_us < 0 || cost_us > 1e7) {
        eddy_err_set(err, "'cost_us' must be 0..10000000");
        return NULL;
    }
    eddy_aggregate_config_t *c = malloc(sizeof *c);
    if (!c) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    eddy_aggregate_sum_config(c, mode);
    c->cost_us = cost_us;
    c->cost_sleep = eddy_config_bool(cfg, "cost_sleep", false);
    c->combine = eddy_config_bool(cfg, "combine", true);
    return c;
}

static void *path_configure(const eddy_config_t *cfg, const char *key, char *dst, size_t size,
                            eddy_err_t *err)
{
    const char *v = eddy_config_str(cfg, key, NULL);
    if (!v || !v[0]) {
        eddy_err_set(err, "needs '%s'", key);
        return NULL;
    }
    if (strlen(v) >= size) {
        eddy_err_set(err, "'%s' is longer than %zu bytes", key, size - 1);
        return NULL;
    }
    memcpy(dst, v, strlen(v) + 1);
    return dst;
}

static void *table_file_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    eddy_table_file_config_t *c = calloc(1, sizeof *c);
    if (c && !path_configure(cfg, "path", c->path, sizeof c->path, err)) {
        free(c);
        return NULL;
    }
    if (!c) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    const char *format = eddy_config_str(cfg, "format", "table");
    if (strcmp(format, "table") != 0 && strcmp(format, "lines") != 0) {
        eddy_err_set(err, "'format' is '%s'; expected table or lines", format);
        free(c);
        return NULL;
    }
    c->lines = !strcmp(format, "lines");
    return c;
}

static void *part_file_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    eddy_part_file_config_t *c = calloc(1, sizeof *c);
    if (c && (!path_configure(cfg, "directory", c->directory, sizeof c->directory, err) ||
              (eddy_config_str(cfg, "merge_to", NULL) &&
               !path_configure(cfg, "merge_to", c->merge_to, sizeof c->merge_to, err)))) {
        free(c);
        return NULL;
    }
    if (!c)
        eddy_err_set(err, "out of memory");
    return c;
}

static uint32_t whole_record(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len;
}

static const eddy_operator_kind_t sum_kind = {
    .name = "sum",
    .ops = &eddy_aggregate_ops,
    .configure = sum_configure,
    .release = free,
};
static const eddy_operator_kind_t changelog_kind = {
    .name = "changelog",
    .ops = &eddy_changelog_sink_ops,
};
static const eddy_operator_kind_t table_file_kind = {
    .name = "table_file",
    .ops = &eddy_table_file_sink_ops,
    .configure = table_file_configure,
    .release = free,
};
static const eddy_operator_kind_t part_file_kind = {
    .name = "part_file",
    .ops = &eddy_part_file_sink_ops,
    .configure = part_file_configure,
    .release = free,
};
/* The record's data up to its first tab (all of it without one). */
static uint32_t tab_prefix(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    const char *tab = memchr(rec->data, '\t', rec->len);
    return tab ? (uint32_t)(tab - rec->data) : rec->len;
}

static const eddy_operator_kind_t late_records_kind = {
    .name = EDDY_LATE_RECORDS_KIND,
    .ops = &eddy_late_records_ops,
};
static const eddy_operator_kind_t print_kind = {
    .name = "print",
    .ops = &eddy_print_sink_ops,
};
static const eddy_key_kind_t whole_record_kind = {.name = "whole_record", .key = whole_record};
static const eddy_key_kind_t tab_prefix_kind = {.name = "tab_prefix", .key = tab_prefix};

int eddy_operators_register(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_register_operator(r, &sum_kind, err) < 0 ||
        eddy_register_operator(r, &changelog_kind, err) < 0 ||
        eddy_register_operator(r, &table_file_kind, err) < 0 ||
        eddy_register_operator(r, &part_file_kind, err) < 0 ||
        eddy_register_operator(r, &print_kind, err) < 0 ||
        eddy_register_operator(r, &late_records_kind, err) < 0 ||
        eddy_register_key(r, &whole_record_kind, err) < 0 ||
        eddy_register_key(r, &tab_prefix_kind, err) < 0)
        return -1;
    return 0;
}
