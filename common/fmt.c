/* fmt.c - decimal formatting without snprintf (see fmt.h). */
#include "common/fmt.h"

#include <string.h>

char *eddy_fmt_i64(char *p, int64_t v)
{
    char tmp[EDDY_I64_CHARS], *end = tmp + sizeof tmp, *q = end;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        *--q = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--q = '-';
    memcpy(p, q, (size_t)(end - q));
    return p + (end - q);
}
