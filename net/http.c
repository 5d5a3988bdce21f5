/* http.c - libmicrohttpd driven by its owner's event loop (see http.h).
 *
 * The server must stay reachable (GET /healthz) when peers misbehave, so:
 * - connections are bounded in total and per client address, and idle ones
 *   are closed after a few seconds (a client holding sockets open without
 *   sending a request cannot exhaust the server);
 * - MHD runs in epoll mode where available: the owner polls one descriptor
 *   (MHD's epoll set) and connection descriptors may have any number. The
 *   select() fallback cannot handle descriptors at or above FD_SETSIZE
 *   (MHD refuses such connections); the connection limit keeps the server's
 *   own share of descriptors small there. */
#include "net/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

/* Open connections at once, in total and from one client address. Beyond
 * the total MHD stops accepting (new clients wait in the listen backlog);
 * beyond the per-address limit it accepts and closes at once. */
#define EDDY_HTTP_MAX_CONNECTIONS 256u
#define EDDY_HTTP_MAX_CONNECTIONS_PER_CLIENT 32u
/* Seconds a connection may stay idle (no request, or no progress reading
 * one) before it is closed. */
#define EDDY_HTTP_IDLE_TIMEOUT_S 5u

struct eddy_http {
    struct MHD_Daemon *daemon;
    int epoll_fd; /* -1: select() mode, descriptors come from MHD_get_fdset */
    eddy_http_handler handler;
    void *ctx;
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    eddy_http_t *self = cls;
    if (*con_cls == NULL) { /* first call: headers only */
        *con_cls = self;
        return MHD_YES;
    }
    if (*upload_size) { /* ignore request bodies */
        *upload_size = 0;
        return MHD_YES;
    }
    eddy_http_response_t resp = {404, "text/plain; charset=utf-8", NULL, 0};
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        resp.status = 405;
        resp.body = strdup("method not allowed\n");
    } else {
        self->handler(self->ctx, method, url, &resp);
    }
    if (!resp.body)
        resp.body = strdup(resp.status == 404 ? "not found\n" : "");
    resp.body_len = resp.body ? strlen(resp.body) : 0;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(resp.body_len, resp.body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(resp.body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", resp.content_type);
    enum MHD_Result ret = MHD_queue_response(conn, resp.status, r);
    MHD_destroy_response(r);
    return ret;
}

eddy_http_t *eddy_http_new(const char *bind_host, uint16_t port, eddy_http_handler handler,
                           void *ctx, eddy_err_t *err)
{
    if (port == 0)
        return NULL;
    eddy_http_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->handler = handler;
    self->ctx = ctx;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, bind_host ? bind_host : "0.0.0.0", &addr.sin_addr) != 1) {
        eddy_err_set(err, "invalid HTTP bind address '%s'", bind_host);
        free(self);
        return NULL;
    }
    unsigned flags = MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL : 0;
    self->daemon = MHD_start_daemon(flags, port, NULL, NULL, on_request, self,
                                    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                    MHD_OPTION_CONNECTION_TIMEOUT, EDDY_HTTP_IDLE_TIMEOUT_S,
                                    MHD_OPTION_CONNECTION_LIMIT, EDDY_HTTP_MAX_CONNECTIONS,
                                    MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                    EDDY_HTTP_MAX_CONNECTIONS_PER_CLIENT,
                                    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
                                    MHD_OPTION_END);
    if (!self->daemon) {
        eddy_err_set(err, "cannot listen for HTTP on %s:%u (port in use?)",
                     bind_host ? bind_host : "0.0.0.0", port);
        free(self);
        return NULL;
    }
    self->epoll_fd = -1;
    if (flags & MHD_USE_EPOLL) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(self->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
            eddy_err_set(err, "HTTP server has no epoll descriptor");
            MHD_stop_daemon(self->daemon);
            free(self);
            return NULL;
        }
        self->epoll_fd = info->epoll_fd;
    }
    return self;
}

void eddy_http_destroy(eddy_http_t **self_p)
{
    eddy_http_t *self = *self_p;
    if (!self)
        return;
    MHD_stop_daemon(self->daemon);
    free(self);
    *self_p = NULL;
}

int eddy_http_pollitems(eddy_http_t *self, zmq_pollitem_t *items, int max)
{
    if (!self || max < 1)
        return 0;
    if (self->epoll_fd >= 0) {
        items[0] = (zmq_pollitem_t){.socket = NULL, .fd = self->epoll_fd, .events = ZMQ_POLLIN};
        return 1;
    }
    fd_set rs, ws, es;
    FD_ZERO(&rs);
    FD_ZERO(&ws);
    FD_ZERO(&es);
    MHD_socket maxfd = 0;
    if (MHD_get_fdset2(self->daemon, &rs, &ws, &es, &maxfd, FD_SETSIZE) != MHD_YES)
        return 0;
    int n = 0;
    for (int fd = 0; fd <= maxfd && n < max; fd++) {
        short events = (short)((FD_ISSET(fd, &rs) ? ZMQ_POLLIN : 0) | (FD_ISSET(fd, &ws) ? ZMQ_POLLOUT : 0));
        if (!events)
            continue;
        items[n].socket = NULL;
        items[n].fd = fd;
        items[n].events = events;
        items[n].revents = 0;
        n++;
    }
    return n;
}

long eddy_http_timeout_ms(eddy_http_t *self)
{
    if (!self)
        return -1;
    MHD_UNSIGNED_LONG_LONG t;
    if (MHD_get_timeout(self->daemon, &t) != MHD_YES)
        return -1;
    return (long)t;
}

void eddy_http_run(eddy_http_t *self)
{
    if (self)
        MHD_run(self->daemon);
}
