/* base64.c - base64 encode and strict decode (see base64.h); what Go's JSON
 * uses for bytes, so etcd's API and eddy's own metadata share it. */
#include "common/base64.h"

#include <stdint.h>
#include <stdlib.h>

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *eddy_b64_encode(const unsigned char *in, size_t len)
{
    if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
        return NULL;
    size_t olen = (len + 2) / 3 * 4;
    char *out = malloc(olen + 1);
    if (!out)
        return NULL;
    size_t o = 0, i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = b64_alphabet[v >> 6 & 63];
        out[o++] = b64_alphabet[v & 63];
    }
    if (len - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (len - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = b64_alphabet[v >> 6 & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
    return out;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int eddy_b64_decode(const char *in, size_t len, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (len % 4 != 0)
        return -1;
    size_t pad = 0;
    if (len >= 4 && in[len - 1] == '=')
        pad = in[len - 2] == '=' ? 2 : 1;
    size_t olen = len / 4 * 3 - pad;
    unsigned char *buf = malloc(olen + 1);
    if (!buf)
        return -2;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int last = i + 4 == len;
        int v[4];
        for (int k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)in[i + (size_t)k];
            if (c == '=' && last && (size_t)k >= 4 - pad) {
                v[k] = 0;
                continue;
            }
            v[k] = b64_value(c);
            if (v[k] < 0) {
                free(buf);
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        size_t take = last ? 3 - pad : 3;
        /* Non-canonical padding (leftover bits set) is malformed. */
        if (last && ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))) {
            free(buf);
            return -1;
        }
        if (take > 0)
            buf[o++] = (unsigned char)(w >> 16);
        if (take > 1)
            buf[o++] = (unsigned char)(w >> 8);
        if (take > 2)
            buf[o++] = (unsigned char)w;
    }
    buf[o] = '\0';
    *out = (char *)buf;
    *out_len = o;
    return 0;
}
