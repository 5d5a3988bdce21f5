/* pipeline_opt.c - the pipeline optimizer's rules (see pipeline_opt.h).
 * Works on an order of step indices; the spec itself is never changed, so
 * the plan before and after can both be printed. Rules run to a fixed
 * point: filter pushdown first (it creates runs of adjacent filters), then
 * filter ordering within each run, then fusion. */
#include "plan/pipeline_opt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/expr.h"

static int log_line(eddy_pipeline_opt_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int log_line(eddy_pipeline_opt_t *o, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **l = realloc(o->log, (o->n_log + 1) * sizeof *l);
    if (!l)
        return -1;
    o->log = l;
    if (!(o->log[o->n_log] = strdup(buf)))
        return -1;
    o->n_log++;
    return 0;
}

double eddy_pipeline_expr_cost(const char *text)
{
    double cost = 1.0 + (double)strlen(text) / 16.0;
    static const struct {
        const char *fn;
        double weight;
    } heavy[] = {{"matches(", 20}, {"contains(", 4}, {"lower(", 3}, {"upper(", 3},
                 {"concat(", 3}, {"datetime(", 4}, {"date(", 4}, {"ends_with(", 2}};
    for (size_t i = 0; i < sizeof heavy / sizeof heavy[0]; i++)
        for (const char *p = strstr(text, heavy[i].fn); p; p = strstr(p + 1, heavy[i].fn))
            cost += heavy[i].weight;
    return cost;
}

/* The text is exactly the name of a column (an identity projection). */
static bool is_column(const char *expr, const char *name)
{
    while (*expr == ' ')
        expr++;
    size_t n = strlen(name);
    if (strncmp(expr, name, n))
        return false;
    for (expr += n; *expr == ' '; expr++)
        ;
    return *expr == '\0';
}

/* The filter reads only columns the map passes through under the same
 * name, each of which the map's input (map_in[0..n_in)) has. */
static bool passes_through(const eddy_pstep_t *map, const eddy_pstep_t *f, uint32_t n_in,
                           char **map_in)
{
    eddy_err_t err = {{0}};
    eddy_expr_t *e = eddy_expr_new(f->filter, (const char *const *)map->columns, map->n, &err);
    if (!e)
        return false;
    uint64_t reads = eddy_expr_reads(e);
    eddy_expr_destroy(&e);
    for (uint32_t c = 0; c < map->n; c++) {
        if (!(reads & (1ull << (c < 63 ? c : 63))))
            continue;
        if (c >= 63) /* bit 63 stands for every later column too */
            return false;
        bool in_input = false;
        for (uint32_t k = 0; k < n_in; k++)
            in_input |= !strcmp(map_in[k], map->columns[c]);
        if (!in_input || !is_column(map->exprs[c], map->columns[c]))
            return false;
    }
    return true;
}

static int push_filters(const eddy_pipeline_spec_t *s, eddy_pipeline_opt_t *o)
{
    for (bool moved = true; moved;) {
        moved = false;
        for (uint32_t i = 1; i < o->n; i++) {
            const eddy_pstep_t *a = &s->steps[o->order[i - 1]], *b = &s->steps[o->order[i]];
            if ((a->kind != EDDY_PSTEP_MAP && a->kind != EDDY_PSTEP_KEY_BY) ||
                b->kind != EDDY_PSTEP_FILTER)
                continue;
            /* A key_by passes every column through unchanged and only
             * routes rows: the filter commutes with it, and dropping rows
             * before the shuffle sends fewer. Windows, aggregates and
             * max_by are stateful and never cross a filter. */
            uint32_t n_in;
            char **in = eddy_pipeline_spec_columns_at(s, o->order, i - 1, &n_in);
            if (a->kind == EDDY_PSTEP_MAP && !passes_through(a, b, n_in, in))
                continue;
            uint32_t t = o->order[i - 1];
            o->order[i - 1] = o->order[i];
            o->order[i] = t;
            int rc = a->kind == EDDY_PSTEP_MAP
                ? log_line(o, "filter before map: steps[%u] (filter, line %u) now runs before steps[%u] "
                           "(map, line %u): it reads only columns the map passes through unchanged, "
                           "both are stateless", b->index, b->line, a->index, a->line)
                : log_line(o, "filter before shuffle: steps[%u] (filter, line %u) now runs before "
                           "steps[%u] (key_by, line %u): a key_by passes every column through and "
                           "only routes rows, the filter is stateless, fewer rows cross the network",
                           b->index, b->line, a->index, a->line);
            if (rc < 0)
                return -1;
            moved = true;
        }
    }
    return 0;
}

static int order_filters(const eddy_pipeline_spec_t *s, eddy_pipeline_opt_t *o)
{
    for (uint32_t start = 0; start < o->n;) {
        uint32_t end = start;
        while (end < o->n && s->steps[o->order[end]].kind == EDDY_PSTEP_FILTER)
            end++;
        if (end - start >= 2) {
            /* Insertion sort: stable, so equal costs keep the written order. */
            for (uint32_t i = start + 1; i < end; i++) {
                uint32_t cur = o->order[i], j = i;
                double c = eddy_pipeline_expr_cost(s->steps[cur].filter);
                while (j > start && eddy_pipeline_expr_cost(s->steps[o->order[j - 1]].filter) > c) {
                    const eddy_pstep_t *moved = &s->steps[o->order[j - 1]];
                    if (log_line(o, "filter order: steps[%u] (line %u, cost %.1f) now runs before "
                                 "steps[%u] (line %u, cost %.1f): adjacent stateless filters commute "
                                 "(a conjunction), the cheaper first",
                                 s->steps[cur].index, s->steps[cur].line, c, moved->index,
                                 moved->line, eddy_pipeline_expr_cost(moved->filter)) < 0)
                        return -1;
                    o->order[j] = o->order[j - 1];
                    j--;
                }
                o->order[j] = cur;
            }
        }
        start = end > start ? end : start + 1;
    }
    return 0;
}

static bool fusable(const eddy_pstep_t *st)
{
    return eddy_pstep_stateless(st);
}

static uint32_t parallelism_of(const eddy_pipeline_spec_t *s, const eddy_pstep_t *st)
{
    return st->parallelism ? st->parallelism : s->parallelism;
}

/* Whether next may join first's operator; logs why not when only their
 * parallelism differs. -1: out of memory. */
static int same_parallelism(const eddy_pipeline_spec_t *s, eddy_pipeline_opt_t *o,
                            const eddy_pstep_t *first, const eddy_pstep_t *next)
{
    if (parallelism_of(s, next) == parallelism_of(s, first))
        return 1;
    char pa[24] = "the job's", pb[24] = "the job's"; /* 0: --parallelism's */
    if (parallelism_of(s, first))
        snprintf(pa, sizeof pa, "%u", parallelism_of(s, first));
    if (parallelism_of(s, next))
        snprintf(pb, sizeof pb, "%u", parallelism_of(s, next));
    return log_line(o, "no fusion of steps[%u] (line %u) with steps[%u] (line %u): "
                    "parallelism %s and %s (a rebalance between them)", first->index,
                    first->line, next->index, next->line, pa, pb) < 0 ? -1 : 0;
}

/* Operators: a window runs with the aggregate or max_by after it (one
 * window operator); with fuse, each run of adjacent stateless steps of the
 * same parallelism is one operator (fusion), together with a key_by right
 * after it (of the same parallelism), whose key the run computes before
 * the shuffle; nothing is fused across a stateful or plugin step (a key_by
 * is a shuffle, a join is keyed, the others keep keyed state or are
 * opaque). */
static int group_steps(const eddy_pipeline_spec_t *spec, eddy_pipeline_opt_t *out, bool fuse)
{
    uint32_t n = out->n;
    for (uint32_t i = 0; i < n;) {
        const eddy_pstep_t *st = &spec->steps[out->order[i]];
        uint32_t end = i + 1;
        if (st->kind == EDDY_PSTEP_WINDOW && end < n)
            end++;
        bool key = false;
        while (fuse && fusable(st) && end < n && !key) {
            const eddy_pstep_t *next = &spec->steps[out->order[end]];
            if (!fusable(next) && next->kind != EDDY_PSTEP_KEY_BY)
                break;
            int same = same_parallelism(spec, out, st, next);
            if (same < 0)
                return -1;
            if (!same)
                break;
            key = next->kind == EDDY_PSTEP_KEY_BY;
            end++;
        }
        if (end - i > 1 && fusable(st) &&
            log_line(out, "fusion: steps %u..%u run as one operator: all stateless%s, adjacent, "
                     "same parallelism (no shuffle between them)", i, end - 1,
                     key ? " but the last, a key_by whose key it computes before the shuffle" : "") < 0)
            return -1;
        out->group_end[out->n_groups++] = end;
        i = end;
    }
    return 0;
}

int eddy_pipeline_optimize(const eddy_pipeline_spec_t *spec, bool optimize, eddy_pipeline_opt_t *out,
                           eddy_err_t *err)
{
    memset(out, 0, sizeof *out);
    uint32_t n = spec->n_steps;
    out->order = calloc(n ? n : 1, sizeof *out->order);
    out->group_end = calloc(n ? n : 1, sizeof *out->group_end);
    if (!out->order || !out->group_end)
        goto oom;
    out->n = n;
    for (uint32_t i = 0; i < n; i++)
        out->order[i] = i;
    if (!optimize)
        return group_steps(spec, out, false) < 0 ? eddy_err_set(err, "out of memory") : 0;
    if (push_filters(spec, out) < 0 || order_filters(spec, out) < 0)
        goto oom;
    if (group_steps(spec, out, true) < 0)
        goto oom;
    return 0;
oom:
    eddy_pipeline_opt_clear(out);
    return eddy_err_set(err, "out of memory");
}

void eddy_pipeline_opt_clear(eddy_pipeline_opt_t *self)
{
    for (uint32_t i = 0; i < self->n_log; i++)
        free(self->log[i]);
    free(self->log);
    free(self->order);
    free(self->group_end);
    memset(self, 0, sizeof *self);
}
