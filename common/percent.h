/* percent.h - RFC 3986 %XX decoding for the parts of URLs eddy takes
 * (a file URL's path, an s3:// URI's query values). One decoder, so every
 * URL refuses the same escapes. */
#ifndef EDDY_COMMON_PERCENT_H
#define EDDY_COMMON_PERCENT_H

#include <stddef.h>

/* Decodes n bytes of s into a new NUL-terminated string (the caller frees
 * it). NULL with *bad_escape set on a truncated or non-hex escape, or on
 * %00 (a NUL would cut the result short); NULL with *bad_escape clear when
 * out of memory. */
char *eddy_percent_decode(const char *s, size_t n, int *bad_escape);

#endif
