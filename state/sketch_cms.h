/* sketch_cms.h - count-min sketch (Cormode and Muthukrishnan 2005) with a
 * small table of heavy hitters, as a fixed-size, pointer-free struct: an
 * accumulator the window operator and keyed state copy as bytes.
 *
 * EDDY_CMS_DEPTH rows of EDDY_CMS_WIDTH 64-bit counters; a key's estimate
 * is the minimum of its counters, never below its true count and above it
 * by at most e/WIDTH (0.5%) of the total with probability 1 - e^-DEPTH
 * (98%). Row i's column is bits [16i, 16i + 9) of the key's XXH64 (seed
 * "eddyCMS1"). Beside it, the EDDY_CMS_TOP_K keys with the largest
 * estimates seen so far are kept with their bytes (keys of at most
 * EDDY_CMS_KEY_MAX bytes; longer keys are counted but never listed): a new
 * key displaces the last entry in top()'s order (smallest estimate, then
 * largest key) when it sorts before it, so ties keep the byte-smaller keys
 * whatever the order of arrival. Merge adds
 * the counters and keeps the largest of both tables' keys re-estimated on
 * the merged counters, so the counters of merged halves equal the whole's.
 *
 * Serialised form: the struct's bytes (EDDY_CMS_SIZE), host byte order,
 * starting with the sketch header (state/sketch_header.h); unused table
 * entries are zero bytes. A buffer read from a snapshot must pass
 * eddy_cms_validate before it is used. */
#ifndef EDDY_STATE_SKETCH_CMS_H
#define EDDY_STATE_SKETCH_CMS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "state/sketch_header.h"

#define EDDY_CMS_DEPTH 4
#define EDDY_CMS_WIDTH 512 /* a power of two */
#define EDDY_CMS_TOP_K 16
#define EDDY_CMS_KEY_MAX 48
#define EDDY_CMS_VERSION 1

typedef struct eddy_cms_entry {
    uint64_t count; /* estimate when last seen (top() re-estimates) */
    uint8_t len;
    uint8_t reserved[7];
    uint8_t key[EDDY_CMS_KEY_MAX];
} eddy_cms_entry_t;

typedef struct eddy_cms {
    eddy_sketch_header_t header;
    uint64_t total; /* sum of all counts added */
    uint32_t n_top; /* entries of top[] in use */
    uint32_t reserved;
    uint64_t cells[EDDY_CMS_DEPTH][EDDY_CMS_WIDTH];
    eddy_cms_entry_t top[EDDY_CMS_TOP_K];
} eddy_cms_t;

#define EDDY_CMS_SIZE sizeof(eddy_cms_t)

void eddy_cms_init(eddy_cms_t *self);
void eddy_cms_add(eddy_cms_t *self, const void *key, size_t len, uint64_t count);
void eddy_cms_merge(eddy_cms_t *into, const eddy_cms_t *from);
uint64_t eddy_cms_estimate(const eddy_cms_t *self, const void *key, size_t len);
/* Copies up to max heavy hitters into out, largest current estimate first
 * (ties in key byte order), counts re-estimated; returns how many. */
size_t eddy_cms_top(const eddy_cms_t *self, eddy_cms_entry_t *out, size_t max);
/* 0 when buf is exactly one valid sketch of this layout; else -1 and why. */
int eddy_cms_validate(const void *buf, size_t len, eddy_err_t *err);

#endif
