/* fmt.c - decimal formatting without snprintf (see fmt.h). */
#include "common/fmt.h"

#include <stdio.h>
#include <stdlib.h>
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

char *eddy_fmt_ceil_operand(char *buf, size_t size, double x, uint32_t rounded)
{
    for (int decimals = 2; decimals <= 6; decimals++) {
        snprintf(buf, size, "%.*f", decimals, x);
        double shown = strtod(buf, NULL);
        /* the text must lie in (rounded - 1, rounded] to explain the ceiling */
        if (shown <= (double)rounded && shown > (double)rounded - 1.0)
            return buf;
    }
    snprintf(buf, size, "%.9g", x); /* rounded by a tolerance or a bound: show what there is */
    return buf;
}
