/* http.h - a small read-only HTTP server (libmicrohttpd) that runs inside
 * another event loop: the owner polls the server's file descriptors
 * together with its ZeroMQ sockets and calls eddy_http_run when they are
 * ready, so request handlers run on the owner's thread and can read its
 * state without locks.
 *
 * Contract: only GET and HEAD reach the handler (anything else is 405 with
 * "Allow: GET, HEAD"); a request with a body is 413; an oversized URL or
 * header block is refused (414/431) without reaching the handler; with a
 * bearer token set, every path but the open one needs
 * "Authorization: Bearer TOKEN" (401 with WWW-Authenticate otherwise). */
#ifndef EDDY_NET_HTTP_H
#define EDDY_NET_HTTP_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

#include "common/err.h"

/* Longest request target (path and query) served; longer ones are 414. */
#define EDDY_HTTP_MAX_URL 2048u
/* Most request header fields served; more is 431. */
#define EDDY_HTTP_MAX_HEADERS 64u
/* Longest bearer token accepted in a token file. */
#define EDDY_HTTP_TOKEN_MAX 1024u

typedef struct eddy_http_response {
    unsigned status;
    const char *content_type;
    char *body;      /* malloc'd; the server frees it */
    size_t body_len;
} eddy_http_response_t;

/* Fills resp for a GET (or HEAD) of path. */
typedef void (*eddy_http_handler)(void *ctx, const char *method, const char *path,
                                  eddy_http_response_t *resp);

typedef struct eddy_http eddy_http_t;

/* Listens on bind_host:port (NULL host = 127.0.0.1; port 0 = disabled:
 * returns NULL without error). */
eddy_http_t *eddy_http_new(const char *bind_host, uint16_t port, eddy_http_handler handler,
                           void *ctx, eddy_err_t *err);
void eddy_http_destroy(eddy_http_t **self_p);
/* From now on every path for which is_open (may be NULL) is false needs
 * "Authorization: Bearer token" (compared in constant time). The token is
 * copied. 0, or -1 with err. */
typedef bool (*eddy_http_open_fn)(const char *path);
int eddy_http_require_token(eddy_http_t *self, const char *token, eddy_http_open_fn is_open,
                            eddy_err_t *err);
/* Appends pollitems for the server's descriptors (one, its epoll set, where
 * epoll is available); returns how many (<= max). */
int eddy_http_pollitems(eddy_http_t *self, zmq_pollitem_t *items, int max);
/* Milliseconds until the server needs eddy_http_run again (-1 = no deadline). */
long eddy_http_timeout_ms(eddy_http_t *self);
void eddy_http_run(eddy_http_t *self);

/* Reads a bearer token from path into *token (malloc'd): the file must be a
 * regular file that neither group nor others may access (mode 0600 or
 * 0400), holding one token of printable ASCII without spaces (trailing
 * newlines are ignored). 0, or -1 with err naming the file and the fix. */
int eddy_http_token_load(const char *path, char **token, eddy_err_t *err);
/* Overwrites and frees a loaded token; NULLs *token. */
void eddy_http_token_free(char **token);

#endif
