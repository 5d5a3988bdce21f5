/* filter_eddy.c - adaptive filter order (see filter_eddy.h). The expected
 * cost of an order is sum_i cost_i * prod_{j<i} sel_j; sorting by rank
 * (1 - sel) / cost minimises it for independent filters. */
#include "operators/filter_eddy.h"

#include <stdlib.h>
#include <string.h>

typedef struct filter_stats {
    double seen, passed;     /* evaluations, passes (decayed) */
    double timed, ns;        /* timed evaluations and their total ns (decayed) */
} filter_stats_t;

struct eddy_filter_eddy {
    uint32_t n;
    uint32_t *order, *scratch;
    filter_stats_t *stats;
    uint64_t records, changes;
};

eddy_filter_eddy_t *eddy_filter_eddy_new(uint32_t n_filters)
{
    eddy_filter_eddy_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->n = n_filters;
    e->order = calloc(n_filters ? n_filters : 1, sizeof *e->order);
    e->scratch = calloc(n_filters ? n_filters : 1, sizeof *e->scratch);
    e->stats = calloc(n_filters ? n_filters : 1, sizeof *e->stats);
    if (!e->order || !e->scratch || !e->stats) {
        eddy_filter_eddy_destroy(&e);
        return NULL;
    }
    for (uint32_t i = 0; i < n_filters; i++)
        e->order[i] = i;
    return e;
}

void eddy_filter_eddy_destroy(eddy_filter_eddy_t **self_p)
{
    eddy_filter_eddy_t *e = self_p ? *self_p : NULL;
    if (!e)
        return;
    free(e->order);
    free(e->scratch);
    free(e->stats);
    free(e);
    *self_p = NULL;
}

const uint32_t *eddy_filter_eddy_order(const eddy_filter_eddy_t *self)
{
    return self->order;
}

bool eddy_filter_eddy_timed(eddy_filter_eddy_t *self)
{
    return self->records % EDDY_FILTER_EDDY_SAMPLE == 0;
}

void eddy_filter_eddy_observe(eddy_filter_eddy_t *self, uint32_t f, bool passed, uint64_t ns, bool timed)
{
    filter_stats_t *s = &self->stats[f];
    s->seen += 1;
    s->passed += passed;
    if (timed) {
        s->timed += 1;
        s->ns += (double)ns;
    }
}

double eddy_filter_eddy_selectivity(const eddy_filter_eddy_t *self, uint32_t f)
{
    const filter_stats_t *s = &self->stats[f];
    /* Laplace smoothing: an unseen filter is a coin toss, not a wall. */
    return (s->passed + 1) / (s->seen + 2);
}

double eddy_filter_eddy_cost_ns(const eddy_filter_eddy_t *self, uint32_t f)
{
    const filter_stats_t *s = &self->stats[f];
    return s->timed > 0 ? s->ns / s->timed : 0;
}

uint64_t eddy_filter_eddy_changes(const eddy_filter_eddy_t *self)
{
    return self->changes;
}

static double expected_cost(const eddy_filter_eddy_t *e, const uint32_t *order)
{
    double reach = 1, total = 0;
    for (uint32_t i = 0; i < e->n; i++) {
        double cost = eddy_filter_eddy_cost_ns(e, order[i]);
        total += reach * (cost > 0 ? cost : 1);
        reach *= eddy_filter_eddy_selectivity(e, order[i]);
    }
    return total;
}

static double rank(const eddy_filter_eddy_t *e, uint32_t f)
{
    double cost = eddy_filter_eddy_cost_ns(e, f);
    return (1 - eddy_filter_eddy_selectivity(e, f)) / (cost > 0 ? cost : 1);
}

bool eddy_filter_eddy_tick(eddy_filter_eddy_t *self)
{
    if (++self->records % EDDY_FILTER_EDDY_PERIOD != 0 || self->n < 2)
        return false;
    for (uint32_t i = 0; i < self->n; i++)
        if (self->stats[i].timed == 0)
            return false; /* every filter needs a measured cost first */
    memcpy(self->scratch, self->order, self->n * sizeof *self->scratch);
    /* Insertion sort by rank, highest first; stable, n is small. */
    for (uint32_t i = 1; i < self->n; i++) {
        uint32_t cur = self->scratch[i], j = i;
        double r = rank(self, cur);
        while (j > 0 && rank(self, self->scratch[j - 1]) < r) {
            self->scratch[j] = self->scratch[j - 1];
            j--;
        }
        self->scratch[j] = cur;
    }
    bool changed = memcmp(self->scratch, self->order, self->n * sizeof *self->order) != 0 &&
                   expected_cost(self, self->scratch) < EDDY_FILTER_EDDY_GAIN * expected_cost(self, self->order);
    if (changed) {
        memcpy(self->order, self->scratch, self->n * sizeof *self->order);
        self->changes++;
    }
    for (uint32_t i = 0; i < self->n; i++) {
        filter_stats_t *s = &self->stats[i];
        s->seen /= 2;
        s->passed /= 2;
        s->timed /= 2;
        s->ns /= 2;
    }
    return changed;
}
