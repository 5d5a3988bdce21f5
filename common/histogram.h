/* histogram.h - fixed-bucket latency histograms, as Prometheus exports them.
 *
 * One bucket layout for every histogram eddy keeps (record latency and
 * event-time lag): upper bounds from 100 us to 60 s, then +Inf. Fixed bounds
 * make histograms of different tasks and workers add up bucket by bucket,
 * which is how the coordinator aggregates them (and what Prometheus'
 * histogram_quantile expects). Counts are per bucket (not cumulative) and
 * only grow; sum_us is the sum of observed values in microseconds. */
#ifndef EDDY_COMMON_HISTOGRAM_H
#define EDDY_COMMON_HISTOGRAM_H

#include <stdbool.h>
#include <stdint.h>

/* The finite upper bounds, then +Inf: 20 buckets. */
#define EDDY_HIST_BOUNDS 19
#define EDDY_HIST_BUCKETS (EDDY_HIST_BOUNDS + 1)

typedef struct eddy_histogram {
    uint64_t counts[EDDY_HIST_BUCKETS];
    uint64_t sum_us;
} eddy_histogram_t;

/* Upper bound of bucket i in microseconds (i < EDDY_HIST_BOUNDS). */
uint64_t eddy_hist_bound_us(uint32_t i);
/* Counts one value (microseconds; negative values, from clock skew, count as 0). */
void eddy_hist_observe(eddy_histogram_t *h, int64_t value_us);
uint64_t eddy_hist_count(const eddy_histogram_t *h);
void eddy_hist_add(eddy_histogram_t *into, const eddy_histogram_t *h);
/* True when no bucket of now is below the same bucket of before (now may be
 * a later reading of the same cumulative histogram). */
bool eddy_hist_grew_from(const eddy_histogram_t *now, const eddy_histogram_t *before);
/* now - before, bucket by bucket (requires eddy_hist_grew_from). */
void eddy_hist_delta(eddy_histogram_t *out, const eddy_histogram_t *now,
                     const eddy_histogram_t *before);
/* The q-quantile (0..1) in microseconds, interpolated within its bucket as
 * Prometheus' histogram_quantile does; -1 when empty. */
double eddy_hist_quantile_us(const eddy_histogram_t *h, double q);

#endif
