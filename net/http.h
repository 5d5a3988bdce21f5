/* http.h - a small HTTP server (libmicrohttpd) that runs inside another
 * event loop: the owner polls the server's file descriptors together with
 * its ZeroMQ sockets and calls eddy_http_run when they are ready, so request
 * handlers run on the owner's thread and can read its state without locks. */
#ifndef EDDY_NET_HTTP_H
#define EDDY_NET_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "common/err.h"

typedef struct eddy_http_response {
    unsigned status;
    const char *content_type;
    char *body;      /* malloc'd; the server frees it */
    size_t body_len;
} eddy_http_response_t;

/* Fills resp for GET path. */
typedef void (*eddy_http_handler)(void *ctx, const char *method, const char *path,
                                  eddy_http_response_t *resp);

typedef struct eddy_http eddy_http_t;

/* Listens on bind_host:port (port 0 = disabled: returns NULL without error). */
eddy_http_t *eddy_http_new(const char *bind_host, uint16_t port, eddy_http_handler handler,
                           void *ctx, eddy_err_t *err);
void eddy_http_destroy(eddy_http_t **self_p);
/* Appends pollitems for the server's descriptors (one, its epoll set, where
 * epoll is available); returns how many (<= max). */
int eddy_http_pollitems(eddy_http_t *self, zmq_pollitem_t *items, int max);
/* Milliseconds until the server needs eddy_http_run again (-1 = no deadline). */
long eddy_http_timeout_ms(eddy_http_t *self);
void eddy_http_run(eddy_http_t *self);

#endif
