/* sketch_hll.h - HyperLogLog distinct count (Flajolet et al. 2007) as a
 * fixed-size, pointer-free struct: an accumulator the window operator and
 * keyed state copy as bytes.
 *
 * Precision 12: 4096 one-byte registers, standard error 1.04/sqrt(4096) =
 * 1.6%. Values are hashed with XXH64 (seed EDDY_HLL_SEED, not the key-group
 * seed 0, so the keys of one key group do not share register bits); the top
 * 12 bits pick the register, the rank of the remaining 52 bits is stored.
 * Small counts use linear counting. Merge is the register-wise maximum, so
 * merging the sketches of two halves gives exactly the sketch of the whole.
 *
 * Serialised form: the struct's bytes (EDDY_HLL_SIZE), host byte order,
 * starting with the sketch header (state/sketch_header.h). A buffer read
 * from a snapshot must pass eddy_hll_validate before it is used. */
#ifndef EDDY_STATE_SKETCH_HLL_H
#define EDDY_STATE_SKETCH_HLL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "state/sketch_header.h"

#define EDDY_HLL_PRECISION 12
#define EDDY_HLL_REGISTERS (1u << EDDY_HLL_PRECISION)
#define EDDY_HLL_VERSION 1
#define EDDY_HLL_SEED 0x65646479484c4cull /* "eddyHLL" */

typedef struct eddy_hll {
    eddy_sketch_header_t header;
    uint8_t registers[EDDY_HLL_REGISTERS]; /* 0..(64 - precision + 1) */
} eddy_hll_t;

#define EDDY_HLL_SIZE sizeof(eddy_hll_t)

void eddy_hll_init(eddy_hll_t *self);
void eddy_hll_add(eddy_hll_t *self, const void *bytes, size_t len);
/* The value's hash, when the caller has one already (XXH64, EDDY_HLL_SEED). */
void eddy_hll_add_hash(eddy_hll_t *self, uint64_t hash);
/* into |= from: the sketch of the union of both inputs. */
void eddy_hll_merge(eddy_hll_t *into, const eddy_hll_t *from);
/* Estimated number of distinct values added. */
double eddy_hll_estimate(const eddy_hll_t *self);
/* 0 when buf is exactly one valid sketch of this layout; else -1 and why. */
int eddy_hll_validate(const void *buf, size_t len, eddy_err_t *err);

#endif
