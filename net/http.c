/* http.c - libmicrohttpd driven by its owner's event loop (see http.h).
 *
 * The server must stay reachable (GET /healthz) when peers misbehave, so:
 * - connections are bounded in total and per client address, and idle ones
 *   are closed after a few seconds (a client holding sockets open without
 *   sending a request cannot exhaust the server);
 * - each connection's memory is bounded (MHD_OPTION_CONNECTION_MEMORY_LIMIT):
 *   a request line and headers that do not fit are refused by MHD itself
 *   (414/431) before any handler runs; a long URL or many header fields
 *   that do fit are refused here (414/431), and a request body is never
 *   read (413) since nothing served accepts one;
 * - every refusal is decided on MHD's first callback, when only the headers
 *   are in, so an unauthenticated or oversized request costs no body read
 *   (MHD then closes the connection rather than skip an unread body);
 * - MHD runs in epoll mode where available: the owner polls one descriptor
 *   (MHD's epoll set) and connection descriptors may have any number. The
 *   select() fallback cannot handle descriptors at or above FD_SETSIZE
 *   (MHD refuses such connections); the connection limit keeps the server's
 *   own share of descriptors small there.
 *
 * Read-only on purpose: the control plane (ZeroMQ, net/proto.c) is where
 * anything changes; HTTP only shows state, so GET and HEAD are all it
 * takes. */
#include "net/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open connections at once, in total and from one client address. Beyond
 * the total MHD stops accepting (new clients wait in the listen backlog);
 * beyond the per-address limit it accepts and closes at once. */
#define EDDY_HTTP_MAX_CONNECTIONS 256u
#define EDDY_HTTP_MAX_CONNECTIONS_PER_CLIENT 32u
/* Seconds a connection may stay idle (no request, or no progress reading
 * one) before it is closed. */
#define EDDY_HTTP_IDLE_TIMEOUT_S 5u
/* Memory per connection for the request line, headers and MHD's own
 * bookkeeping; responses are separate buffers. 32 KiB holds a maximal URL
 * and header set with room to spare, and 256 connections of it are 8 MiB. */
#define EDDY_HTTP_CONNECTION_MEMORY (32u * 1024u)

#define ALLOWED_METHODS "GET, HEAD"

/* Sent with every response (pages, JSON, errors alike), so a browser that
 * renders anything from this server runs only the dashboard's own script:
 * no inline script or style, nothing loaded from elsewhere, no framing;
 * Trusted Types make any HTML string the script did not build through its
 * one escaping helper (coordinator/web/dashboard.js, html``) an error. */
static const char *const SECURITY_HEADERS[][2] = {
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
     "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
     "require-trusted-types-for 'script'; trusted-types eddy-html"},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"X-Frame-Options", "DENY"},
    {"Cross-Origin-Opener-Policy", "same-origin"},
    {"Cross-Origin-Resource-Policy", "same-origin"},
};

struct eddy_http {
    struct MHD_Daemon *daemon;
    int epoll_fd; /* -1: select() mode, descriptors come from MHD_get_fdset */
    eddy_http_handler handler;
    void *ctx;
    char *token;     /* NULL: no authentication */
    size_t token_len;
    eddy_http_open_fn is_open; /* paths served without the token */
};

/* Equal strings, in time that depends only on the lengths (the caller's
 * guess's length is no secret; the token's bytes are). */
static bool token_equal(const char *given, size_t given_len, const char *token, size_t token_len)
{
    volatile unsigned char diff = given_len != token_len;
    for (size_t i = 0; i < token_len; i++)
        diff |= (unsigned char)(token[i] ^ (i < given_len ? given[i] : 0));
    return diff == 0;
}

/* 1 authorised, 0 no credentials, -1 wrong credentials. */
static int check_bearer(const eddy_http_t *self, struct MHD_Connection *conn)
{
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth)
        return 0;
    while (*auth == ' ')
        auth++;
    if (strncasecmp(auth, "Bearer", 6) || (auth[6] != ' ' && auth[6] != '\t'))
        return -1;
    const char *given = auth + 7;
    while (*given == ' ' || *given == '\t')
        given++;
    size_t len = strlen(given);
    while (len && (given[len - 1] == ' ' || given[len - 1] == '\t'))
        len--;
    return token_equal(given, len, self->token, self->token_len) ? 1 : -1;
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    (void)key;
    (void)value;
    (*(unsigned *)cls)++;
    return MHD_YES;
}

/* MHD hands the handler the path without its query, which it has parsed
 * into arguments: their lengths (with '?'/'&' and '=') make up the rest. */
static enum MHD_Result add_argument_length(void *cls, enum MHD_ValueKind kind, const char *key,
                                           const char *value)
{
    (void)kind;
    *(size_t *)cls += 2 + (key ? strlen(key) : 0) + (value ? strlen(value) : 0);
    return MHD_YES;
}

/* A request body announced by its headers (Content-Length > 0, or chunked). */
static bool has_body(struct MHD_Connection *conn)
{
    const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (te)
        return true;
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return cl && strspn(cl, "0 ") != strlen(cl);
}

/* Queues a text response; extra header (name, value) when name is set. */
static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, const char *content_type,
                              char *body, const char *hname, const char *hvalue)
{
    size_t len = body ? strlen(body) : 0;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    for (size_t i = 0; i < sizeof SECURITY_HEADERS / sizeof SECURITY_HEADERS[0]; i++)
        MHD_add_response_header(r, SECURITY_HEADERS[i][0], SECURITY_HEADERS[i][1]);
    if (hname)
        MHD_add_response_header(r, hname, hvalue);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result refuse(struct MHD_Connection *conn, unsigned status, const char *text,
                              const char *hname, const char *hvalue)
{
    return answer(conn, status, "text/plain; charset=utf-8", strdup(text), hname, hvalue);
}

/* Everything that refuses a request, decided from its headers alone.
 * Returns true when a refusal was queued (in *ret). */
static bool refused(eddy_http_t *self, struct MHD_Connection *conn, const char *url,
                    const char *method, enum MHD_Result *ret)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
        *ret = refuse(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: this API is read-only\n",
                      MHD_HTTP_HEADER_ALLOW, ALLOWED_METHODS);
        return true;
    }
    size_t url_len = strlen(url);
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_argument_length, &url_len);
    if (url_len > EDDY_HTTP_MAX_URL) {
        *ret = refuse(conn, MHD_HTTP_URI_TOO_LONG, "URI too long\n", NULL, NULL);
        return true;
    }
    unsigned headers = 0;
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &headers);
    if (headers > EDDY_HTTP_MAX_HEADERS) {
        *ret = refuse(conn, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE, "too many header fields\n", NULL, NULL);
        return true;
    }
    if (has_body(conn)) {
        *ret = refuse(conn, MHD_HTTP_CONTENT_TOO_LARGE, "request bodies are not accepted\n", NULL, NULL);
        return true;
    }
    if (self->token && !(self->is_open && self->is_open(url))) {
        int auth = check_bearer(self, conn);
        if (auth <= 0) {
            *ret = refuse(conn, MHD_HTTP_UNAUTHORIZED, "unauthorized: a bearer token is required\n",
                          MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                          auth == 0 ? "Bearer realm=\"eddy\""
                                    : "Bearer realm=\"eddy\", error=\"invalid_token\"");
            return true;
        }
    }
    return false;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    eddy_http_t *self = cls;
    if (*con_cls == NULL) { /* first call: headers only */
        enum MHD_Result ret;
        if (refused(self, conn, url, method, &ret))
            return ret;
        *con_cls = self;
        return MHD_YES;
    }
    if (*upload_size) /* a body that its headers did not announce */
        return refuse(conn, MHD_HTTP_CONTENT_TOO_LARGE, "request bodies are not accepted\n", NULL, NULL);
    eddy_http_response_t resp = {404, "text/plain; charset=utf-8", NULL, 0};
    self->handler(self->ctx, method, url, &resp);
    if (!resp.body)
        resp.body = strdup(resp.status == 404 ? "not found\n" : "");
    return answer(conn, resp.status, resp.content_type, resp.body, NULL, NULL);
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
    if (!bind_host)
        bind_host = "127.0.0.1";
    if (inet_pton(AF_INET, bind_host, &addr.sin_addr) != 1) {
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
                                    MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                    (size_t)EDDY_HTTP_CONNECTION_MEMORY,
                                    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
                                    MHD_OPTION_END);
    if (!self->daemon) {
        eddy_err_set(err, "cannot listen for HTTP on %s:%u (port in use?)", bind_host, port);
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
    if (self->token)
        explicit_bzero(self->token, self->token_len);
    free(self->token);
    free(self);
    *self_p = NULL;
}

int eddy_http_require_token(eddy_http_t *self, const char *token, eddy_http_open_fn is_open,
                            eddy_err_t *err)
{
    if (!self)
        return 0;
    if (!token || !token[0])
        return eddy_err_set(err, "empty HTTP bearer token");
    char *t = strdup(token);
    if (!t)
        return eddy_err_set(err, "out of memory");
    self->token = t;
    self->token_len = strlen(t);
    self->is_open = is_open;
    return 0;
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

int eddy_http_token_load(const char *path, char **token, eddy_err_t *err)
{
    *token = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return eddy_err_set(err, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return eddy_err_set(err, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return eddy_err_set(err, "%s is not a regular file", path);
    }
    /* checked on the open descriptor: what was checked is what is read */
    if (st.st_mode & 077) {
        close(fd);
        return eddy_err_set(err, "%s is accessible by group or others (mode %04o): a secret "
                            "must be private, chmod 600 it", path, (unsigned)(st.st_mode & 07777));
    }
    char buf[EDDY_HTTP_TOKEN_MAX + 2];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            explicit_bzero(buf, sizeof buf);
            return eddy_err_set(err, "cannot read %s: %s", path, strerror(e));
        }
        if (n == 0 || (len += (size_t)n) == sizeof buf - 1)
            break;
    }
    close(fd);
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    buf[len] = '\0';
    int rc = 0;
    if (len > EDDY_HTTP_TOKEN_MAX)
        rc = eddy_err_set(err, "%s: token longer than %u bytes", path, EDDY_HTTP_TOKEN_MAX);
    else if (len == 0)
        rc = eddy_err_set(err, "%s holds no token", path);
    for (size_t i = 0; rc == 0 && i < len; i++)
        if (buf[i] < 0x21 || buf[i] > 0x7e)
            rc = eddy_err_set(err, "%s: the token must be one line of printable ASCII without "
                              "spaces", path);
    if (rc == 0 && !(*token = strdup(buf)))
        rc = eddy_err_set(err, "out of memory");
    explicit_bzero(buf, sizeof buf);
    return rc;
}

void eddy_http_token_free(char **token)
{
    if (!*token)
        return;
    explicit_bzero(*token, strlen(*token));
    free(*token);
    *token = NULL;
}
