/* partial.h - the frame of an EDDY_PARTIAL record (local-global
 * aggregation, api/operator.h "combiner").
 *
 * A partial record's data is the key's length (4 bytes, big-endian), the
 * key, then the accumulator's bytes (the payload, operator-defined; may be
 * empty). The runtime routes a partial by that key, not by the stage's key
 * selector, since a selector need not find the key in bytes it did not
 * make; the keyed operator reads key and payload back with
 * eddy_partial_decode, which checks every length. value and timestamp stay
 * free for the operator (a count, a time). */
#ifndef EDDY_NET_PARTIAL_H
#define EDDY_NET_PARTIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/record.h"

#define EDDY_PARTIAL_HEADER 4u

/* Bytes a frame of this key and payload needs. */
static inline size_t eddy_partial_size(uint32_t key_len, size_t payload_len)
{
    return EDDY_PARTIAL_HEADER + (size_t)key_len + payload_len;
}

/* Writes the frame into buf (eddy_partial_size bytes); returns its length. */
uint32_t eddy_partial_encode(char *buf, const char *key, uint32_t key_len, const void *payload,
                             size_t payload_len);

/* Splits rec's data into key and payload; false when the frame is malformed
 * (shorter than its header or its key length says). */
bool eddy_partial_decode(const eddy_record_t *rec, const char **key, uint32_t *key_len,
                         const char **payload, uint32_t *payload_len);

/* The key to route a partial by; a malformed frame routes by all its bytes
 * (its receiver then rejects it with a clear error). */
uint32_t eddy_partial_key(const eddy_record_t *rec, const char **key);

#endif
