/* err.h - the error value every fallible eddy function fills in.
 *
 * Library code never prints: it returns -1 (or NULL) and describes the
 * problem in an eddy_err_t owned by the caller. The binary decides what to
 * print and which exit status to use. A NULL err is allowed and ignored. */
#ifndef EDDY_COMMON_ERR_H
#define EDDY_COMMON_ERR_H

#include <stddef.h>

typedef struct eddy_err {
    char msg[512];
} eddy_err_t;

/* printf-style; always returns -1 so callers can `return eddy_err_set(...)`. */
int eddy_err_set(eddy_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix an existing message: "context: old message". Returns -1. */
int eddy_err_wrap(eddy_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void eddy_err_clear(eddy_err_t *err);

#endif
