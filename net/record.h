/* record.h - the record that flows between operators.
 *
 * Deliberately small: a byte string (a line, a word, an encoded row) plus an
 * int64 (a count, a sum, a price), an event timestamp and a changelog kind.
 * Keys are derived from the bytes by the job's key selector. Pointers inside
 * a record are borrowed: valid only during the call that receives it. */
#ifndef EDDY_NET_RECORD_H
#define EDDY_NET_RECORD_H

#include <stdint.h>

typedef enum eddy_row_kind {
    EDDY_INSERT = 0,        /* +I */
    EDDY_UPDATE_BEFORE = 1, /* -U */
    EDDY_UPDATE_AFTER = 2,  /* +U */
    EDDY_DELETE = 3,        /* -D */
    EDDY_LATE = 4,          /* a record too late for its windows, on its way to a late output */
    EDDY_PARTIAL = 5,       /* a combiner's pre-aggregated accumulator (net/partial.h frame) */
    EDDY_ROW_KIND_MAX = EDDY_PARTIAL
} eddy_row_kind_t;

#define EDDY_RECORD_MAX_BYTES (16u << 20)
/* A source's checkpointed progress as bytes (write_state in api/operator.h):
 * it travels in ACK and DEPLOY and sits in the coordinator's checkpoint
 * metadata, so it stays small. */
#define EDDY_SOURCE_STATE_MAX (64u << 10)

typedef struct eddy_record {
    const char *data;
    uint32_t len;
    uint8_t kind;      /* eddy_row_kind_t */
    int64_t value;
    int64_t timestamp; /* event time, ms; 0 when the job has none */
} eddy_record_t;

static inline eddy_record_t eddy_record_make(const char *data, uint32_t len, int64_t value)
{
    eddy_record_t r = {data, len, EDDY_INSERT, value, 0};
    return r;
}

#endif
