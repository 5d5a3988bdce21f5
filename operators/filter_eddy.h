/* filter_eddy.h - the order of a run of commutative filters, re-decided as
 * records flow (an eddy: Avnur & Hellerstein, SIGMOD 2000, with the rank
 * ordering of commutative selections, rank = (1 - selectivity) / cost).
 *
 * The caller evaluates the filters in eddy_filter_eddy_order() and reports
 * each evaluation; every period records the eddy computes each filter's
 * observed selectivity and cost (cost timed on a sample of records) and
 * switches to the best order only when its expected cost per record is
 * clearly lower (hysteresis, so noise does not flap the order). Figures
 * then decay by half, so a stream whose data changes character mid-way is
 * followed. Selectivities are as observed in the current order (each
 * filter sees only what passed those before it). */
#ifndef EDDY_OPERATORS_FILTER_EDDY_H
#define EDDY_OPERATORS_FILTER_EDDY_H

#include <stdbool.h>
#include <stdint.h>

#define EDDY_FILTER_EDDY_PERIOD 2048   /* records between decisions */
#define EDDY_FILTER_EDDY_SAMPLE 64     /* time one record in this many (a clock read
                                         * costs ~230 ns on a VM: at 16, more than
                                         * the filters it timed; bench/reorder) */
#define EDDY_FILTER_EDDY_GAIN 0.85     /* switch when new cost < GAIN x current */

typedef struct eddy_filter_eddy eddy_filter_eddy_t;

eddy_filter_eddy_t *eddy_filter_eddy_new(uint32_t n_filters);
void eddy_filter_eddy_destroy(eddy_filter_eddy_t **self_p);

/* The filters in the order to evaluate them (n_filters indices). */
const uint32_t *eddy_filter_eddy_order(const eddy_filter_eddy_t *self);
/* Whether to time this record's evaluations (call once per record). */
bool eddy_filter_eddy_timed(eddy_filter_eddy_t *self);
/* One evaluation of filter f: passed or not, and its time when timed. */
void eddy_filter_eddy_observe(eddy_filter_eddy_t *self, uint32_t f, bool passed, uint64_t ns, bool timed);
/* Called after each record; true when the order just changed. */
bool eddy_filter_eddy_tick(eddy_filter_eddy_t *self);

/* Observed figures of filter f (since the last decay): the share of the
 * records it saw that passed, and nanoseconds per evaluation (0: not yet
 * timed). */
double eddy_filter_eddy_selectivity(const eddy_filter_eddy_t *self, uint32_t f);
double eddy_filter_eddy_cost_ns(const eddy_filter_eddy_t *self, uint32_t f);
/* Order changes so far. */
uint64_t eddy_filter_eddy_changes(const eddy_filter_eddy_t *self);

#endif
