/* source_time.c - encoder and decoder of a source's checkpointed event
 * time (source_time.h). */
#include "state/source_time.h"

#include <string.h>

#include "net/mpcodec.h"

#define TAG "eddy-src-time"
#define VERSION 1u

char *eddy_source_time_encode(const eddy_source_time_t *st, size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 4);
    eddy_mpw_str(&w, TAG);
    eddy_mpw_u64(&w, VERSION);
    eddy_mpw_i64(&w, st->watermark);
    eddy_mpw_i64(&w, st->max_timestamp);
    char *out = eddy_mpw_release(&w, len);
    eddy_mpw_free(&w);
    return out;
}

int eddy_source_time_decode(const void *data, size_t len, eddy_source_time_t *st, eddy_err_t *err)
{
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) < 0)
        return eddy_err_wrap(err, "source event time");
    char tag[16];
    eddy_mpr_strcpy(&r, tag, sizeof tag);
    if (r.ok && strcmp(tag, TAG) != 0)
        eddy_mpr_fail(&r, "not a source's event time");
    uint64_t version = eddy_mpr_u64(&r, UINT64_MAX);
    if (r.ok && version != VERSION)
        eddy_mpr_fail(&r, "unsupported source event time version");
    st->watermark = eddy_mpr_i64(&r);
    st->max_timestamp = eddy_mpr_i64(&r);
    int rc = eddy_mpr_finish(&r, "source event time", err);
    eddy_mpr_close(&r);
    return rc;
}
