/* base64.h - base64 (RFC 4648, standard alphabet, padded), strict.
 *
 * For bytes inside JSON documents: etcd's API (state/metastore_etcd.c) and
 * source state in checkpoint metadata (coordinator/job_store.c). */
#ifndef EDDY_COMMON_BASE64_H
#define EDDY_COMMON_BASE64_H

#include <stddef.h>

/* Returns a malloc'd NUL-terminated encoding, NULL when out of memory. */
char *eddy_b64_encode(const unsigned char *in, size_t len);
/* Strict decode into a malloc'd buffer with a trailing NUL (not counted in
 * *out_len). Returns 0, -1 on malformed input (*out NULL), -2 when out of
 * memory. */
int eddy_b64_decode(const char *in, size_t len, char **out, size_t *out_len);

#endif
