/* sketch_quantile.h - relative-error quantiles (DDSketch: Masson, Rim and
 * Lee, VLDB 2019) as a fixed-size, pointer-free struct: an accumulator the
 * window operator and keyed state copy as bytes.
 *
 * A value x > 0 falls in bucket k = ceil(log(x) / log(gamma)), gamma =
 * (1 + a) / (1 - a) with relative accuracy a = 1%; the bucket answers
 * 2 gamma^k / (gamma + 1), within a of every value in it. Negative values
 * go by magnitude to a second store, zeros are counted apart. Each store is
 * a window of EDDY_QUANTILE_BINS consecutive buckets (a dynamic range of
 * about 8e8 at 1%); a value outside the window moves it if the occupied
 * buckets still fit, else the lowest-magnitude buckets are collapsed into
 * the lowest one kept (accuracy is given up for the values nearest zero,
 * never for the large ones). Merge adds bucket counts, so merging the
 * sketches of two halves gives the sketch of the whole when nothing had to
 * be collapsed. Non-finite values are refused.
 *
 * q-quantile: the value of rank floor(q * (count - 1)) in sorted order,
 * within a relative error of a (for buckets not collapsed), clamped to the
 * exact minimum and maximum; q = 0 and q = 1 answer those exactly.
 *
 * Serialised form: the struct's bytes (EDDY_QUANTILE_SIZE), host byte
 * order (doubles IEEE 754), starting with the sketch header
 * (state/sketch_header.h). A buffer read from a snapshot must pass
 * eddy_quantile_validate before it is used. */
#ifndef EDDY_STATE_SKETCH_QUANTILE_H
#define EDDY_STATE_SKETCH_QUANTILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "state/sketch_header.h"

#define EDDY_QUANTILE_ACCURACY 0.01
#define EDDY_QUANTILE_BINS 1024
#define EDDY_QUANTILE_VERSION 1

typedef struct eddy_quantile_store {
    int32_t offset;   /* bucket index of counts[0] */
    uint32_t reserved; /* zero */
    uint64_t total;    /* sum of counts */
    uint64_t counts[EDDY_QUANTILE_BINS];
} eddy_quantile_store_t;

typedef struct eddy_quantile {
    eddy_sketch_header_t header;
    uint64_t count;      /* values added */
    uint64_t zero_count; /* of which zero */
    double min, max;     /* exact; meaningful when count > 0 */
    eddy_quantile_store_t positive;
    eddy_quantile_store_t negative; /* by magnitude */
} eddy_quantile_t;

#define EDDY_QUANTILE_SIZE sizeof(eddy_quantile_t)

void eddy_quantile_init(eddy_quantile_t *self);
/* -1 (and nothing counted) for NaN or an infinity. */
int eddy_quantile_add(eddy_quantile_t *self, double value);
void eddy_quantile_merge(eddy_quantile_t *into, const eddy_quantile_t *from);
/* NaN when empty or q is outside [0, 1]. */
double eddy_quantile_quantile(const eddy_quantile_t *self, double q);
/* 0 when buf is exactly one valid sketch of this layout; else -1 and why. */
int eddy_quantile_validate(const void *buf, size_t len, eddy_err_t *err);

#endif
