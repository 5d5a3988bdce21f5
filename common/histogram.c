/* histogram.c - fixed-bucket histograms (see histogram.h). */
#include "common/histogram.h"

static const uint64_t bounds_us[EDDY_HIST_BOUNDS] = {
    100,     250,     500,     1000,     2500,     5000,     10000,
    25000,   50000,   100000,  250000,   500000,   1000000,  2500000,
    5000000, 10000000, 20000000, 30000000, 60000000,
};

uint64_t eddy_hist_bound_us(uint32_t i)
{
    return i < EDDY_HIST_BOUNDS ? bounds_us[i] : UINT64_MAX;
}

void eddy_hist_observe(eddy_histogram_t *h, int64_t value_us)
{
    uint64_t v = value_us > 0 ? (uint64_t)value_us : 0;
    uint32_t i = 0;
    while (i < EDDY_HIST_BOUNDS && v > bounds_us[i])
        i++;
    h->counts[i]++;
    h->sum_us += v;
}

uint64_t eddy_hist_count(const eddy_histogram_t *h)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < EDDY_HIST_BUCKETS; i++)
        n += h->counts[i];
    return n;
}

void eddy_hist_add(eddy_histogram_t *into, const eddy_histogram_t *h)
{
    for (uint32_t i = 0; i < EDDY_HIST_BUCKETS; i++)
        into->counts[i] += h->counts[i];
    into->sum_us += h->sum_us;
}

bool eddy_hist_grew_from(const eddy_histogram_t *now, const eddy_histogram_t *before)
{
    for (uint32_t i = 0; i < EDDY_HIST_BUCKETS; i++)
        if (now->counts[i] < before->counts[i])
            return false;
    return now->sum_us >= before->sum_us;
}

void eddy_hist_delta(eddy_histogram_t *out, const eddy_histogram_t *now,
                     const eddy_histogram_t *before)
{
    for (uint32_t i = 0; i < EDDY_HIST_BUCKETS; i++)
        out->counts[i] = now->counts[i] - before->counts[i];
    out->sum_us = now->sum_us - before->sum_us;
}

double eddy_hist_quantile_us(const eddy_histogram_t *h, double q)
{
    uint64_t total = eddy_hist_count(h);
    if (total == 0)
        return -1;
    double rank = q * (double)total, seen = 0;
    for (uint32_t i = 0; i < EDDY_HIST_BUCKETS; i++) {
        double next = seen + (double)h->counts[i];
        if (next >= rank && h->counts[i]) {
            if (i == EDDY_HIST_BOUNDS) /* +Inf: the highest finite bound, as Prometheus */
                return (double)bounds_us[EDDY_HIST_BOUNDS - 1];
            double lo = i ? (double)bounds_us[i - 1] : 0, hi = (double)bounds_us[i];
            return lo + (hi - lo) * (rank - seen) / (double)h->counts[i];
        }
        seen = next;
    }
    return (double)bounds_us[EDDY_HIST_BOUNDS - 1];
}
