/* curl_util.h - what eddy's libcurl clients (the etcd metadata store, the
 * Docker worker pool) share: curl_global_init reference counted across
 * clients and threads, and a response body collected up to a limit.
 *
 *   eddy_curl_acquire(&err) before a client's first handle, and
 *   eddy_curl_release() after its last one;
 *   CURLOPT_WRITEFUNCTION eddy_curl_body_collect with CURLOPT_WRITEDATA an
 *   eddy_curl_body_t {.limit = N}: data is NUL-terminated; a body over the
 *   limit aborts the transfer (CURLE_WRITE_ERROR) with too_big set. The
 *   caller frees data. */
#ifndef EDDY_STATE_CURL_UTIL_H
#define EDDY_STATE_CURL_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

typedef struct eddy_curl_body {
    char *data;
    size_t len, cap;
    size_t limit; /* 0: no limit */
    bool too_big;
} eddy_curl_body_t;

int eddy_curl_acquire(eddy_err_t *err);
void eddy_curl_release(void);
size_t eddy_curl_body_collect(char *ptr, size_t size, size_t nmemb, void *body);

#endif
