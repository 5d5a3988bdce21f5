/* sketch_header.c - the kind/version/byte-order header shared by the
 * synopses (see sketch_header.h): one check instead of one per sketch. */
#include "state/sketch_header.h"

#include <string.h>

void eddy_sketch_header_init(eddy_sketch_header_t *h, eddy_sketch_kind_t kind, uint8_t version)
{
    memset(h, 0, sizeof *h);
    h->kind = (uint8_t)kind;
    h->version = version;
    h->order_mark = EDDY_SKETCH_ORDER_MARK;
}

int eddy_sketch_header_check(const void *buf, size_t len, size_t size, eddy_sketch_kind_t kind,
                             uint8_t version, const char *what, eddy_err_t *err)
{
    if (!buf)
        return eddy_err_set(err, "%s: no buffer", what);
    if (len < sizeof(eddy_sketch_header_t))
        return eddy_err_set(err, "%s: truncated (%zu bytes, header needs %zu)", what, len,
                            sizeof(eddy_sketch_header_t));
    eddy_sketch_header_t h;
    memcpy(&h, buf, sizeof h);
    if (h.kind != (uint8_t)kind)
        return eddy_err_set(err, "%s: not this kind of sketch (kind %u, expected %u)", what,
                            h.kind, (unsigned)kind);
    if (h.order_mark != EDDY_SKETCH_ORDER_MARK)
        return eddy_err_set(err, "%s: written on a host of another byte order", what);
    if (h.version != version)
        return eddy_err_set(err, "%s: layout version %u, this build reads %u", what, h.version,
                            version);
    if (h.reserved != 0)
        return eddy_err_set(err, "%s: corrupt header (reserved bytes set)", what);
    if (len != size)
        return eddy_err_set(err, "%s: %zu bytes, expected %zu", what, len, size);
    return 0;
}
