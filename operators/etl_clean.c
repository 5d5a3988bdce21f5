/* etl_clean.c - the etl job's cleaning rules (etl_clean.h). Calendar
 * arithmetic is Howard Hinnant's days_from_civil / civil_from_days, so no
 * timegm()/TZ state is involved and every input form converts the same way. */
#include "operators/etl_clean.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

size_t eddy_etl_trim(const char *s, size_t len, const char **start)
{
    while (len && is_space(*s)) {
        s++;
        len--;
    }
    while (len && is_space(s[len - 1]))
        len--;
    *start = s;
    return len;
}

void eddy_etl_lower(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
}

void eddy_etl_upper(char *s)
{
    for (; *s; s++)
        if (*s >= 'a' && *s <= 'z')
            *s = (char)(*s - 'a' + 'A');
}

/* ---- dates ------------------------------------------------------------------ */

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int64_t *m, int64_t *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yoe + era * 400 + (*m <= 2);
}

static int days_in_month(int64_t y, int64_t m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* Exactly n digits at *p (advanced). */
static bool digits(const char **p, const char *end, int n, int64_t *v)
{
    if (end - *p < n)
        return false;
    int64_t x = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit((*p)[i]))
            return false;
        x = x * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *v = x;
    return true;
}

static bool lit(const char **p, const char *end, char c)
{
    if (*p < end && **p == c) {
        (*p)++;
        return true;
    }
    return false;
}

/* HH:MM[:SS[.frac]][zone] from p to end; seconds since midnight minus the
 * zone offset in *secs. iso: a zone is allowed. */
static bool parse_time(const char *p, const char *end, bool iso, int64_t *secs)
{
    int64_t h, mi, s = 0;
    if (!digits(&p, end, 2, &h) || !lit(&p, end, ':') || !digits(&p, end, 2, &mi))
        return false;
    if (lit(&p, end, ':')) {
        if (!digits(&p, end, 2, &s))
            return false;
        if (lit(&p, end, '.')) {
            if (p == end || !is_digit(*p))
                return false;
            while (p < end && is_digit(*p))
                p++;
        }
    }
    if (h > 23 || mi > 59 || s > 59)
        return false;
    int64_t offset = 0;
    if (iso && p < end) {
        if (*p == 'Z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p == '-' ? -1 : 1;
            int64_t oh, om = 0;
            p++;
            if (!digits(&p, end, 2, &oh))
                return false;
            if (lit(&p, end, ':')) {
                if (!digits(&p, end, 2, &om))
                    return false;
            } else if (p < end && !digits(&p, end, 2, &om)) {
                return false;
            }
            if (oh > 23 || om > 59)
                return false;
            offset = sign * (oh * 3600 + om * 60);
        }
    }
    if (p != end)
        return false;
    *secs = h * 3600 + mi * 60 + s - offset;
    return true;
}

/* The calendar forms; epoch seconds in *t. */
static bool parse_calendar(const char *p, const char *end, int64_t *t)
{
    int64_t y, m, d;
    const char *q = p;
    bool iso = false;
    if (digits(&q, end, 4, &y) && (lit(&q, end, '-') || lit(&q, end, '/'))) {
        char sep = q[-1];
        iso = sep == '-';
        if (!digits(&q, end, 2, &m) || !lit(&q, end, sep) || !digits(&q, end, 2, &d))
            return false;
    } else {
        q = p;
        if (!digits(&q, end, 2, &d) || !lit(&q, end, '.') || !digits(&q, end, 2, &m) ||
            !lit(&q, end, '.') || !digits(&q, end, 4, &y))
            return false;
    }
    if (m < 1 || m > 12 || d < 1 || d > days_in_month(y, m))
        return false;
    int64_t secs = 0;
    if (q < end) {
        if (!(*q == ' ' || (iso && *q == 'T')))
            return false;
        if (!parse_time(q + 1, end, iso, &secs))
            return false;
    }
    *t = days_from_civil(y, m, d) * 86400 + secs;
    return true;
}

static bool parse_epoch(const char *p, const char *end, int64_t *t)
{
    bool neg = lit(&p, end, '-');
    if (p == end || end - p > 18)
        return false;
    int64_t v = 0;
    for (; p < end; p++) {
        if (!is_digit(*p))
            return false;
        v = v * 10 + (*p - '0');
    }
    if (v >= 100000000000ll) {
        /* milliseconds, floored to the second */
        v = neg ? (v + 999) / 1000 : v / 1000;
    }
    *t = neg ? -v : v;
    return true;
}

int eddy_etl_date(const char *s, bool date_only, char *out, eddy_err_t *err)
{
    const char *p;
    size_t len = eddy_etl_trim(s, strlen(s), &p);
    const char *end = p + len;
    int64_t t;
    if (!len || !(parse_calendar(p, end, &t) || parse_epoch(p, end, &t)))
        return eddy_err_set(err, "not a date: '%.*s'", (int)(len > 64 ? 64 : len), p);
    int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    int64_t secs = t - days * 86400, y, m, d;
    civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999)
        return eddy_err_set(err, "date out of range (years 0000..9999): '%.*s'",
                            (int)(len > 64 ? 64 : len), p);
    /* The ranges are checked, but the compiler cannot see them: format into
     * room for any int, then copy what fits. */
    char text[96];
    if (date_only)
        snprintf(text, sizeof text, "%04d-%02d-%02d", (int)y, (int)m, (int)d);
    else
        snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02dZ", (int)y, (int)m, (int)d,
                 (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60));
    size_t n = strnlen(text, EDDY_ETL_DATE_MAX - 1);
    memcpy(out, text, n);
    out[n] = '\0';
    return 0;
}

/* ---- numbers ---------------------------------------------------------------- */

static bool is_group_sep(char c)
{
    return c == ',' || c == '.' || c == '_' || c == '\'' || c == ' ';
}

int eddy_etl_number(const char *s, char *out, eddy_err_t *err)
{
    const char *p;
    size_t len = eddy_etl_trim(s, strlen(s), &p);
    const char *end = p + len;
    int shown = (int)(len > 64 ? 64 : len);
    bool neg = false;
    if (p < end && (*p == '+' || *p == '-'))
        neg = *p++ == '-';
    /* The decimal separator: see etl_clean.h. */
    const char *last_dot = NULL, *last_comma = NULL;
    size_t dots = 0, commas = 0;
    for (const char *q = p; q < end; q++) {
        if (*q == '.') {
            last_dot = q;
            dots++;
        } else if (*q == ',') {
            last_comma = q;
            commas++;
        } else if (!is_digit(*q) && !is_group_sep(*q)) {
            return eddy_err_set(err, "not a number: '%.*s'", shown, p);
        }
    }
    const char *decimal = NULL;
    if (last_dot && last_comma)
        decimal = last_dot > last_comma ? last_dot : last_comma;
    else if (dots == 1)
        decimal = last_dot;
    else if (commas == 1) {
        const char *q = last_comma + 1;
        size_t after = 0;
        while (q + after < end && is_digit(q[after]))
            after++;
        size_t before = 0;
        while (last_comma - before > p && is_digit(last_comma[-(ptrdiff_t)before - 1]))
            before++;
        bool grouping = after == 3 && q + after == end && before >= 1 && before <= 3 &&
                        last_comma - before == p;
        if (!grouping)
            decimal = last_comma;
    }
    const char *int_end = decimal ? decimal : end;
    /* Integer part: digits, or groups of three after a first group of 1..3,
     * all separated by one and the same separator. */
    char sep = 0;
    size_t group = 0, groups = 0, o = 0;
    bool bad = false;
    if (neg)
        out[o++] = '-';
    size_t digits_start = o;
    for (const char *q = p; q < int_end && !bad; q++) {
        if (is_digit(*q)) {
            group++;
            if (!(o == digits_start && *q == '0'))
                out[o++] = *q;
            continue;
        }
        if ((sep && *q != sep) || group == 0 || (groups == 0 && group > 3) ||
            (groups > 0 && group != 3))
            bad = true;
        sep = *q;
        groups++;
        group = 0;
    }
    if (sep && group != 3)
        bad = true;
    if (!sep && decimal == NULL && group == 0)
        bad = true;
    if (sep && groups > 0 && o == digits_start && group == 0)
        bad = true;
    if (bad || (decimal && sep == *decimal))
        return eddy_err_set(err, "not a number: '%.*s'", shown, p);
    bool int_zero = o == digits_start;
    if (int_zero)
        out[o++] = '0';
    if (decimal) {
        const char *f = decimal + 1;
        if (f == end && p == decimal)
            return eddy_err_set(err, "not a number: '%.*s'", shown, p);
        size_t frac_start = o + 1;
        out[o++] = '.';
        for (; f < end; f++) {
            if (!is_digit(*f))
                return eddy_err_set(err, "not a number: '%.*s'", shown, p);
            out[o++] = *f;
        }
        while (o > frac_start && out[o - 1] == '0')
            o--;
        if (o == frac_start)
            o--; /* no fraction left: drop the '.' */
    } else if (p == int_end) {
        return eddy_err_set(err, "not a number: '%.*s'", shown, p);
    }
    out[o] = '\0';
    if (neg && !strcmp(out, "-0"))
        memmove(out, out + 1, 2);
    return 0;
}
