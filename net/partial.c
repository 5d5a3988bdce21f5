/* partial.c - encoder and decoder of the EDDY_PARTIAL frame (partial.h). */
#include "net/partial.h"

#include <string.h>

uint32_t eddy_partial_encode(char *buf, const char *key, uint32_t key_len, const void *payload,
                             size_t payload_len)
{
    unsigned char *p = (unsigned char *)buf;
    p[0] = (unsigned char)(key_len >> 24);
    p[1] = (unsigned char)(key_len >> 16);
    p[2] = (unsigned char)(key_len >> 8);
    p[3] = (unsigned char)key_len;
    if (key_len)
        memcpy(buf + EDDY_PARTIAL_HEADER, key, key_len);
    if (payload_len)
        memcpy(buf + EDDY_PARTIAL_HEADER + key_len, payload, payload_len);
    return (uint32_t)eddy_partial_size(key_len, payload_len);
}

bool eddy_partial_decode(const eddy_record_t *rec, const char **key, uint32_t *key_len,
                         const char **payload, uint32_t *payload_len)
{
    if (rec->len < EDDY_PARTIAL_HEADER)
        return false;
    const unsigned char *p = (const unsigned char *)rec->data;
    uint32_t klen = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    if (klen > rec->len - EDDY_PARTIAL_HEADER)
        return false;
    *key = rec->data + EDDY_PARTIAL_HEADER;
    *key_len = klen;
    *payload = *key + klen;
    *payload_len = rec->len - EDDY_PARTIAL_HEADER - klen;
    return true;
}

uint32_t eddy_partial_key(const eddy_record_t *rec, const char **key)
{
    const char *payload;
    uint32_t klen, plen;
    if (eddy_partial_decode(rec, key, &klen, &payload, &plen))
        return klen;
    *key = rec->data;
    return rec->len;
}
