/* byteorder.h - little-endian integers in byte buffers (snapshot and
 * manifest headers): whatever the host's order, byte i holds bits 8i..8i+7. */
#ifndef EDDY_COMMON_BYTEORDER_H
#define EDDY_COMMON_BYTEORDER_H

#include <stdint.h>

static inline void eddy_put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void eddy_put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t eddy_get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline uint64_t eddy_get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#endif
