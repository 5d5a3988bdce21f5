/* err.c - formatting of eddy_err_t messages (see err.h). */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int eddy_err_set(eddy_err_t *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int eddy_err_wrap(eddy_err_t *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3)
        n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3;
    size_t old_len = strnlen(old, room);
    memcpy(err->msg + n + 2, old, old_len);
    err->msg[n + 2 + old_len] = '\0';
    return -1;
}

void eddy_err_clear(eddy_err_t *err)
{
    if (err)
        err->msg[0] = '\0';
}
