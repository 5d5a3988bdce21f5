/* fmt.h - number formatting for hot paths (rows made per record), where
 * snprintf's format parsing costs more than the work it does. */
#ifndef EDDY_COMMON_FMT_H
#define EDDY_COMMON_FMT_H

#include <stddef.h>
#include <stdint.h>

/* Longest decimal int64: "-9223372036854775808". */
#define EDDY_I64_CHARS 20

/* Writes v in decimal at p (at most EDDY_I64_CHARS bytes, no NUL) and
 * returns the end of what it wrote. */
char *eddy_fmt_i64(char *p, int64_t v);

/* Writes x, a value that was rounded up to `rounded`, with two decimals or
 * as many more (up to six) as it takes for the text to agree with the
 * rounding: 3.123 -> "3.12" (-> 4), 1.002 -> "1.002" (-> 2), never "1.00"
 * (-> 2). Returns buf. */
char *eddy_fmt_ceil_operand(char *buf, size_t size, double x, uint32_t rounded);

#endif
