/* sketch_hll.c - HyperLogLog registers, merge and estimate (see sketch_hll.h). */
#include "state/sketch_hll.h"

#include <math.h>
#include <string.h>
#include <xxhash.h>

#define HLL_MAX_RANK (64 - EDDY_HLL_PRECISION + 1)

void eddy_hll_init(eddy_hll_t *self)
{
    memset(self, 0, sizeof *self);
    eddy_sketch_header_init(&self->header, EDDY_SKETCH_HLL, EDDY_HLL_VERSION);
}

void eddy_hll_add_hash(eddy_hll_t *self, uint64_t hash)
{
    uint32_t index = (uint32_t)(hash >> (64 - EDDY_HLL_PRECISION));
    uint64_t rest = hash << EDDY_HLL_PRECISION;
    /* Rank: position of the first 1 bit in the remaining 52 bits (1-based);
     * all zero gives the maximum. */
    uint8_t rank = rest ? (uint8_t)(__builtin_clzll(rest) + 1) : HLL_MAX_RANK;
    if (rank > HLL_MAX_RANK)
        rank = HLL_MAX_RANK;
    if (rank > self->registers[index])
        self->registers[index] = rank;
}

void eddy_hll_add(eddy_hll_t *self, const void *bytes, size_t len)
{
    eddy_hll_add_hash(self, XXH64(bytes, len, EDDY_HLL_SEED));
}

void eddy_hll_merge(eddy_hll_t *into, const eddy_hll_t *from)
{
    for (uint32_t i = 0; i < EDDY_HLL_REGISTERS; i++)
        if (from->registers[i] > into->registers[i])
            into->registers[i] = from->registers[i];
}

double eddy_hll_estimate(const eddy_hll_t *self)
{
    const double m = EDDY_HLL_REGISTERS;
    double sum = 0;
    uint32_t zeros = 0;
    for (uint32_t i = 0; i < EDDY_HLL_REGISTERS; i++) {
        sum += ldexp(1.0, -(int)self->registers[i]);
        if (self->registers[i] == 0)
            zeros++;
    }
    double alpha = 0.7213 / (1.0 + 1.079 / m);
    double raw = alpha * m * m / sum;
    /* With a 64-bit hash no large-range correction is needed; small counts
     * are far more accurate by linear counting over the empty registers. */
    if (raw <= 2.5 * m && zeros > 0)
        return m * log(m / zeros);
    return raw;
}

int eddy_hll_validate(const void *buf, size_t len, eddy_err_t *err)
{
    if (eddy_sketch_header_check(buf, len, EDDY_HLL_SIZE, EDDY_SKETCH_HLL, EDDY_HLL_VERSION,
                                 "hll sketch", err) < 0)
        return -1;
    const uint8_t *registers = (const uint8_t *)buf + offsetof(eddy_hll_t, registers);
    for (uint32_t i = 0; i < EDDY_HLL_REGISTERS; i++)
        if (registers[i] > HLL_MAX_RANK)
            return eddy_err_set(err, "hll sketch: register %u holds rank %u (at most %u)", i,
                                registers[i], HLL_MAX_RANK);
    return 0;
}
