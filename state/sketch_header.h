/* sketch_header.h - the first 8 bytes of every synopsis (HyperLogLog,
 * quantile sketch, count-min), which are what make them safe to keep as raw
 * bytes in keyed state, snapshots and rescales.
 *
 * A synopsis is a fixed-size struct without pointers; its serialised form is
 * its bytes, in the host's byte order. The header names the kind and the
 * layout version, and carries a byte-order mark, so a buffer of another kind,
 * from another layout or from a host of the other byte order is refused by
 * the sketch's validate function instead of being read as garbage. A layout
 * change must bump that sketch's version. */
#ifndef EDDY_STATE_SKETCH_HEADER_H
#define EDDY_STATE_SKETCH_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EDDY_SKETCH_ORDER_MARK 0x0102u /* reads 0x0201 on a host of the other order */

typedef enum eddy_sketch_kind {
    EDDY_SKETCH_HLL = 1,
    EDDY_SKETCH_QUANTILE = 2,
    EDDY_SKETCH_CMS = 3,
} eddy_sketch_kind_t;

typedef struct eddy_sketch_header {
    uint8_t kind;        /* eddy_sketch_kind_t */
    uint8_t version;     /* layout version of that kind */
    uint16_t order_mark; /* EDDY_SKETCH_ORDER_MARK in host order */
    uint32_t reserved;   /* zero; keeps the body 8-byte aligned */
} eddy_sketch_header_t;

void eddy_sketch_header_init(eddy_sketch_header_t *h, eddy_sketch_kind_t kind, uint8_t version);

/* Checks that buf holds exactly `size` bytes starting with a header of this
 * kind and version in this host's byte order; `what` names the sketch in the
 * error ("hll sketch: ..."). */
int eddy_sketch_header_check(const void *buf, size_t len, size_t size, eddy_sketch_kind_t kind,
                             uint8_t version, const char *what, eddy_err_t *err);

#endif
