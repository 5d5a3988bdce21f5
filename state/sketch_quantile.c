/* sketch_quantile.c - DDSketch buckets with a collapsing-lowest window
 * (see sketch_quantile.h). */
#include "state/sketch_quantile.h"

#include <math.h>
#include <string.h>

#define BINS EDDY_QUANTILE_BINS
/* Bucket indices of finite doubles lie within about +-37300 at 1%; offsets
 * outside this are corrupt (and would overflow index arithmetic). */
#define INDEX_LIMIT 100000

static double gamma_value(void)
{
    return (1.0 + EDDY_QUANTILE_ACCURACY) / (1.0 - EDDY_QUANTILE_ACCURACY);
}

static int32_t bucket_of(double magnitude)
{
    return (int32_t)ceil(log(magnitude) / log(gamma_value()));
}

static double bucket_value(int32_t k)
{
    double g = gamma_value();
    return 2.0 * pow(g, k) / (g + 1.0);
}

/* Moves the window to start at new_offset; counts below it fold into its
 * first bucket (the collapse), none can lie above it (callers make sure). */
static void store_rebase(eddy_quantile_store_t *s, int32_t new_offset)
{
    uint64_t moved[BINS];
    memset(moved, 0, sizeof moved);
    for (int i = 0; i < BINS; i++) {
        if (!s->counts[i])
            continue;
        int64_t j = (int64_t)s->offset + i - new_offset;
        if (j < 0)
            j = 0;
        if (j >= BINS)
            j = BINS - 1;
        moved[j] += s->counts[i];
    }
    memcpy(s->counts, moved, sizeof moved);
    s->offset = new_offset;
}

static void store_add(eddy_quantile_store_t *s, int32_t k, uint64_t n)
{
    if (s->total == 0) {
        memset(s->counts, 0, sizeof s->counts);
        s->offset = k - BINS / 2;
    } else if (k < s->offset || k >= s->offset + BINS) {
        int32_t lo = k, hi = k;
        for (int i = 0; i < BINS; i++)
            if (s->counts[i]) {
                int32_t idx = s->offset + i;
                lo = idx < lo ? idx : lo;
                hi = idx > hi ? idx : hi;
            }
        if (hi - lo + 1 <= BINS)
            store_rebase(s, lo - (BINS - (hi - lo + 1)) / 2);
        else
            store_rebase(s, hi - BINS + 1);
    }
    int64_t j = (int64_t)k - s->offset;
    s->counts[j < 0 ? 0 : j] += n;
    s->total += n;
}

void eddy_quantile_init(eddy_quantile_t *self)
{
    memset(self, 0, sizeof *self);
    eddy_sketch_header_init(&self->header, EDDY_SKETCH_QUANTILE, EDDY_QUANTILE_VERSION);
}

static void add_counted(eddy_quantile_t *into, const eddy_quantile_store_t *from, int negative)
{
    eddy_quantile_store_t *s = negative ? &into->negative : &into->positive;
    /* High to low: the first add places the window at the top, so a merge
     * that must collapse does so once instead of sliding bucket by bucket. */
    for (int i = BINS - 1; i >= 0; i--) {
        if (!from->counts[i])
            continue;
        store_add(s, from->offset + i, from->counts[i]);
    }
}

int eddy_quantile_add(eddy_quantile_t *self, double value)
{
    if (!isfinite(value))
        return -1;
    if (self->count == 0 || value < self->min)
        self->min = value;
    if (self->count == 0 || value > self->max)
        self->max = value;
    self->count++;
    if (value == 0) {
        self->zero_count++;
        return 0;
    }
    eddy_quantile_store_t *s = value > 0 ? &self->positive : &self->negative;
    store_add(s, bucket_of(fabs(value)), 1);
    return 0;
}

void eddy_quantile_merge(eddy_quantile_t *into, const eddy_quantile_t *from)
{
    if (from->count == 0)
        return;
    if (into->count == 0 || from->min < into->min)
        into->min = from->min;
    if (into->count == 0 || from->max > into->max)
        into->max = from->max;
    into->count += from->count;
    into->zero_count += from->zero_count;
    add_counted(into, &from->positive, 0);
    add_counted(into, &from->negative, 1);
}

static double clamp(const eddy_quantile_t *self, double v)
{
    return v < self->min ? self->min : v > self->max ? self->max : v;
}

double eddy_quantile_quantile(const eddy_quantile_t *self, double q)
{
    if (self->count == 0 || !(q >= 0.0 && q <= 1.0))
        return NAN;
    uint64_t rank = (uint64_t)floor(q * (double)(self->count - 1));
    /* The extremes are kept exactly, collapsed or not. */
    if (rank == 0)
        return self->min;
    if (rank >= self->count - 1)
        return self->max;
    uint64_t seen = 0;
    /* Most negative first: the negative store from its largest magnitude. */
    for (int i = BINS - 1; i >= 0; i--) {
        seen += self->negative.counts[i];
        if (seen > rank)
            return clamp(self, -bucket_value(self->negative.offset + i));
    }
    seen += self->zero_count;
    if (seen > rank)
        return clamp(self, 0.0);
    for (int i = 0; i < BINS; i++) {
        seen += self->positive.counts[i];
        if (seen > rank)
            return clamp(self, bucket_value(self->positive.offset + i));
    }
    return self->max;
}

static int check_store(const eddy_quantile_store_t *s, const char *name, uint64_t *total,
                       eddy_err_t *err)
{
    if (s->reserved != 0)
        return eddy_err_set(err, "quantile sketch: corrupt %s store (reserved bytes set)", name);
    if (s->offset < -INDEX_LIMIT || s->offset > INDEX_LIMIT)
        return eddy_err_set(err, "quantile sketch: %s store offset %d out of range", name,
                            (int)s->offset);
    uint64_t sum = 0;
    for (int i = 0; i < BINS; i++) {
        if (s->counts[i] > UINT64_MAX - sum)
            return eddy_err_set(err, "quantile sketch: %s store counts overflow", name);
        sum += s->counts[i];
    }
    if (sum != s->total)
        return eddy_err_set(err, "quantile sketch: %s store holds %llu values, its total says %llu",
                            name, (unsigned long long)sum, (unsigned long long)s->total);
    if (sum > UINT64_MAX - *total)
        return eddy_err_set(err, "quantile sketch: counts overflow");
    *total += sum;
    return 0;
}

int eddy_quantile_validate(const void *buf, size_t len, eddy_err_t *err)
{
    if (eddy_sketch_header_check(buf, len, EDDY_QUANTILE_SIZE, EDDY_SKETCH_QUANTILE,
                                 EDDY_QUANTILE_VERSION, "quantile sketch", err) < 0)
        return -1;
    eddy_quantile_t q;
    memcpy(&q, buf, sizeof q);
    uint64_t total = q.zero_count;
    if (check_store(&q.positive, "positive", &total, err) < 0 ||
        check_store(&q.negative, "negative", &total, err) < 0)
        return -1;
    if (total != q.count)
        return eddy_err_set(err, "quantile sketch: buckets hold %llu values, count says %llu",
                            (unsigned long long)total, (unsigned long long)q.count);
    if (q.count > 0 && !(isfinite(q.min) && isfinite(q.max) && q.min <= q.max))
        return eddy_err_set(err, "quantile sketch: corrupt minimum/maximum");
    return 0;
}
