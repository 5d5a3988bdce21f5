/* etl_clean.h - the etl job's cleaning rules, one function per rule, each
 * on one field's text. Pure: no I/O, no allocation.
 *
 * Dates (eddy_etl_date) accept, after trimming blanks:
 *   ISO 8601  YYYY-MM-DD, optionally followed by T or a space and
 *             HH:MM[:SS[.fraction]] and an optional zone Z, +HH:MM, +HHMM
 *             or +HH (no zone: UTC)
 *   YYYY/MM/DD and DD.MM.YYYY, optionally followed by a space and a time
 *   epoch     an integer (optionally negative): seconds when its absolute
 *             value is below 100000000000 (before year 5138), else
 *             milliseconds
 * and write UTC as YYYY-MM-DDTHH:MM:SSZ, or YYYY-MM-DD with date_only
 * (fractions of a second are dropped; years 0000..9999).
 *
 * Numbers (eddy_etl_number): an optional sign, digits with optional
 * thousands separators (',' '.' '_' '\'' or a space; groups of three
 * digits), an optional decimal separator ('.' or ','). With both '.' and
 * ',' the later one is the decimal separator; one ',' followed by exactly
 * three digits is a thousands separator ("1,234" = 1234), otherwise a
 * decimal one ("3,5" = 3.5); several '.' are thousands separators. Output:
 * [-]digits[.digits], no leading zeros, no trailing fraction zeros, no
 * "-0" ("1.234.567,50" -> "1234567.5"). Exponents are rejected. */
#ifndef EDDY_OPERATORS_ETL_CLEAN_H
#define EDDY_OPERATORS_ETL_CLEAN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* Longest output of eddy_etl_date with its NUL. */
#define EDDY_ETL_DATE_MAX 21

/* Points *start at s without leading/trailing blanks (space, tab, CR, LF,
 * FF, VT); returns the trimmed length. */
size_t eddy_etl_trim(const char *s, size_t len, const char **start);
/* ASCII case mapping in place (other bytes, UTF-8 included, unchanged). */
void eddy_etl_lower(char *s);
void eddy_etl_upper(char *s);
/* out: at least EDDY_ETL_DATE_MAX bytes. -1 with err: not a date. */
int eddy_etl_date(const char *s, bool date_only, char *out, eddy_err_t *err);
/* out: at least strlen(s) + 3 bytes. -1 with err: not a number. */
int eddy_etl_number(const char *s, char *out, eddy_err_t *err);

#endif
