/* cdp.c - a headless Chromium driven over its DevTools protocol (see cdp.h).
 *
 * Chromium is a child in its own process group (tests/support/proc.c), so
 * eddy_cdp_stop, or the test process dying, takes its helper processes
 * with it. The WebSocket client is the minimum the protocol needs: one
 * connection to the page target, masked text frames out, text frames
 * (possibly fragmented, a screenshot is a few hundred KB) in, pings
 * answered. Every read waits with a deadline. */
#include "tests/support/cdp.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/base64.h"
#include "tests/support/proc.h"

#define CDP_START_TIMEOUT_MS 60000   /* a cold chromium on a loaded machine */
#define CDP_COMMAND_TIMEOUT_MS 60000
#define CDP_MAX_MESSAGE (64u << 20)

struct eddy_cdp {
    eddy_proc_t proc;
    int port;
    int fd;
    int next_id;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const char *eddy_cdp_find_chromium(void)
{
    static char found[4096];
    const char *names[] = {"chromium", "chromium-browser"};
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        const char *p = path;
        while (*p) {
            size_t len = strcspn(p, ":");
            snprintf(found, sizeof found, "%.*s/%s", (int)len, p, names[n]);
            if (len && access(found, X_OK) == 0)
                return found;
            p += len + (p[len] == ':');
        }
    }
    return NULL;
}

/* ---- HTTP: the page target's WebSocket path from /json/list ------------- */

typedef struct grow {
    char *data;
    size_t len;
} grow_t;

static size_t on_body(char *ptr, size_t size, size_t n, void *arg)
{
    grow_t *g = arg;
    char *d = realloc(g->data, g->len + size * n + 1);
    if (!d)
        return 0;
    memcpy(d + g->len, ptr, size * n);
    g->len += size * n;
    d[g->len] = '\0';
    g->data = d;
    return size * n;
}

/* The path of the first page target's WebSocket ("/devtools/page/ID"). */
static char *page_ws_path(int port, eddy_err_t *err)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/json/list", port);
    CURL *c = curl_easy_init();
    if (!c) {
        eddy_err_set(err, "curl_easy_init failed");
        return NULL;
    }
    grow_t body = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        free(body.data);
        eddy_err_set(err, "GET %s: %s", url, curl_easy_strerror(rc));
        return NULL;
    }
    json_error_t jerr;
    json_t *list = json_loads(body.data ? body.data : "", 0, &jerr);
    free(body.data);
    char *path = NULL;
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t) {
        const char *type = json_string_value(json_object_get(t, "type"));
        const char *ws = json_string_value(json_object_get(t, "webSocketDebuggerUrl"));
        const char *slash = ws ? strstr(ws, "/devtools/") : NULL;
        if (type && !strcmp(type, "page") && slash) {
            path = strdup(slash);
            break;
        }
    }
    json_decref(list);
    if (!path)
        eddy_err_set(err, "chromium lists no page target at %s", url);
    return path;
}

/* ---- WebSocket ---------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t len, eddy_err_t *err)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return eddy_err_set(err, "devtools socket: send: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_full(int fd, void *buf, size_t len, uint64_t deadline, eddy_err_t *err)
{
    char *p = buf;
    while (len) {
        uint64_t now = now_ms();
        if (now >= deadline)
            return eddy_err_set(err, "devtools socket: no answer in time");
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)(deadline - now));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return eddy_err_set(err, "devtools socket closed by chromium");
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int ws_connect(eddy_cdp_t *self, const char *path, eddy_err_t *err)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)self->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (fd >= 0)
            close(fd);
        return eddy_err_set(err, "connect to chromium's devtools port %d: %s", self->port, strerror(errno));
    }
    self->fd = fd;
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: ZWRkeS1kYXNoYm9hcmQtdA==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n",
                     path, self->port);
    if (write_all(fd, req, (size_t)n, err) < 0)
        return -1;
    /* the answer's headers, byte by byte up to the blank line */
    char head[4096];
    size_t len = 0;
    uint64_t deadline = now_ms() + 10000;
    while (len < sizeof head - 1) {
        if (read_full(fd, head + len, 1, deadline, err) < 0)
            return -1;
        len++;
        if (len >= 4 && !memcmp(head + len - 4, "\r\n\r\n", 4))
            break;
    }
    head[len] = '\0';
    if (strncmp(head, "HTTP/1.1 101", 12))
        return eddy_err_set(err, "devtools WebSocket upgrade refused: %.80s", head);
    return 0;
}

static int ws_send(eddy_cdp_t *self, unsigned opcode, const char *data, size_t len, eddy_err_t *err)
{
    unsigned char hdr[14];
    size_t h = 0;
    hdr[h++] = (unsigned char)(0x80 | opcode);
    if (len < 126) {
        hdr[h++] = (unsigned char)(0x80 | len);
    } else if (len <= 0xffff) {
        hdr[h++] = 0x80 | 126;
        hdr[h++] = (unsigned char)(len >> 8);
        hdr[h++] = (unsigned char)len;
    } else {
        hdr[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            hdr[h++] = (unsigned char)((uint64_t)len >> (8 * i));
    }
    unsigned char mask[4] = {0x5a, 0x17, 0xc3, 0x9e}; /* clients must mask; any key will do */
    memcpy(hdr + h, mask, 4);
    h += 4;
    unsigned char *masked = malloc(len ? len : 1);
    if (!masked)
        return eddy_err_set(err, "out of memory");
    for (size_t i = 0; i < len; i++)
        masked[i] = (unsigned char)data[i] ^ mask[i % 4];
    int rc = write_all(self->fd, hdr, h, err);
    if (rc == 0)
        rc = write_all(self->fd, masked, len, err);
    free(masked);
    return rc;
}

/* The next whole text message (malloc'd, NUL-terminated). */
static char *ws_recv(eddy_cdp_t *self, uint64_t deadline, eddy_err_t *err)
{
    char *msg = NULL;
    size_t msg_len = 0;
    for (;;) {
        unsigned char h[2];
        if (read_full(self->fd, h, 2, deadline, err) < 0)
            break;
        unsigned opcode = h[0] & 0x0f;
        bool fin = h[0] & 0x80;
        uint64_t len = h[1] & 0x7f;
        if (len == 126 || len == 127) {
            unsigned char ext[8];
            size_t n = len == 126 ? 2 : 8;
            if (read_full(self->fd, ext, n, deadline, err) < 0)
                break;
            len = 0;
            for (size_t i = 0; i < n; i++)
                len = (len << 8) | ext[i];
        }
        unsigned char mask[4] = {0};
        bool masked = h[1] & 0x80;
        if (masked && read_full(self->fd, mask, 4, deadline, err) < 0)
            break;
        if (len > CDP_MAX_MESSAGE || msg_len + len > CDP_MAX_MESSAGE) {
            eddy_err_set(err, "devtools message of %llu bytes is too large", (unsigned long long)len);
            break;
        }
        char *payload = malloc(len + 1);
        if (!payload || read_full(self->fd, payload, len, deadline, err) < 0) {
            free(payload);
            break;
        }
        for (uint64_t i = 0; masked && i < len; i++)
            payload[i] ^= (char)mask[i % 4];
        if (opcode == 0x8) {
            free(payload);
            eddy_err_set(err, "chromium closed the devtools connection");
            break;
        }
        if (opcode == 0x9) { /* ping */
            int rc = ws_send(self, 0xA, payload, len, err);
            free(payload);
            if (rc < 0)
                break;
            continue;
        }
        if (opcode == 0xA) {
            free(payload);
            continue;
        }
        char *grown = realloc(msg, msg_len + len + 1);
        if (!grown) {
            free(payload);
            eddy_err_set(err, "out of memory");
            break;
        }
        msg = grown;
        memcpy(msg + msg_len, payload, len);
        msg_len += len;
        msg[msg_len] = '\0';
        free(payload);
        if (fin)
            return msg;
    }
    free(msg);
    return NULL;
}

/* Sends method(params) (params taken) and returns its "result", owned. */
static json_t *command(eddy_cdp_t *self, const char *method, json_t *params, eddy_err_t *err)
{
    int id = ++self->next_id;
    json_t *req = json_pack("{s:i, s:s, s:o}", "id", id, "method", method, "params",
                            params ? params : json_object());
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!text || ws_send(self, 0x1, text, strlen(text), err) < 0) {
        free(text);
        return NULL;
    }
    free(text);
    uint64_t deadline = now_ms() + CDP_COMMAND_TIMEOUT_MS;
    for (;;) {
        char *msg = ws_recv(self, deadline, err);
        if (!msg) {
            eddy_err_wrap(err, method);
            return NULL;
        }
        json_error_t jerr;
        json_t *doc = json_loads(msg, 0, &jerr);
        free(msg);
        json_t *mid = json_object_get(doc, "id");
        if (!json_is_integer(mid) || json_integer_value(mid) != id) {
            json_decref(doc); /* an event, or an answer to nothing we wait for */
            continue;
        }
        json_t *e = json_object_get(doc, "error");
        if (e) {
            eddy_err_set(err, "%s: %s", method, json_string_value(json_object_get(e, "message")));
            json_decref(doc);
            return NULL;
        }
        json_t *result = json_incref(json_object_get(doc, "result"));
        json_decref(doc);
        return result ? result : json_object();
    }
}

/* ---- the browser -------------------------------------------------------- */

eddy_cdp_t *eddy_cdp_start(const char *chromium, const char *profile_dir, const char *log_path,
                           int width, int height, eddy_err_t *err)
{
    eddy_cdp_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->fd = -1;
    char profile[4200], window[64];
    snprintf(profile, sizeof profile, "--user-data-dir=%s", profile_dir);
    snprintf(window, sizeof window, "--window-size=%d,%d", width, height);
    /* --no-sandbox: CI runs the tests as root, where chromium's sandbox
     * refuses to start; the page is our own dashboard on loopback. */
    char *argv[] = {(char *)chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                    "--disable-extensions", "--disable-background-networking", "--mute-audio",
                    "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", profile,
                    window, "about:blank", NULL};
    if (eddy_proc_start(&self->proc, argv, NULL, log_path, err) < 0) {
        free(self);
        return NULL;
    }
    /* chromium writes the port it bound to its profile */
    char port_file[4300];
    snprintf(port_file, sizeof port_file, "%s/DevToolsActivePort", profile_dir);
    uint64_t deadline = now_ms() + CDP_START_TIMEOUT_MS;
    char *path = NULL;
    while (now_ms() < deadline && eddy_proc_alive(&self->proc)) {
        char *text = eddy_read_file(port_file, NULL);
        if (text && atoi(text) > 0 && strchr(text, '\n')) {
            self->port = atoi(text);
            free(text);
            eddy_err_t perr = {{0}};
            path = page_ws_path(self->port, &perr);
            if (path)
                break;
        } else {
            free(text);
        }
        eddy_nap_ms(50);
    }
    if (!path) {
        eddy_err_set(err, "chromium did not offer a devtools page within %d s (see %s)",
                     CDP_START_TIMEOUT_MS / 1000, log_path ? log_path : "its stderr");
        eddy_cdp_stop(&self);
        return NULL;
    }
    int rc = ws_connect(self, path, err);
    free(path);
    if (rc < 0) {
        eddy_cdp_stop(&self);
        return NULL;
    }
    return self;
}

int eddy_cdp_navigate(eddy_cdp_t *self, const char *url, eddy_err_t *err)
{
    json_t *r = command(self, "Page.navigate", json_pack("{s:s}", "url", url), err);
    if (!r)
        return -1;
    const char *failed = json_string_value(json_object_get(r, "errorText"));
    if (failed) {
        eddy_err_set(err, "loading %s: %s", url, failed);
        json_decref(r);
        return -1;
    }
    json_decref(r);
    uint64_t deadline = now_ms() + CDP_COMMAND_TIMEOUT_MS;
    while (now_ms() < deadline) {
        json_t *state = eddy_cdp_eval(self, "document.readyState", err);
        bool done = state && json_is_string(state) && !strcmp(json_string_value(state), "complete");
        json_decref(state);
        if (done)
            return 0;
        eddy_nap_ms(50);
    }
    return eddy_err_set(err, "%s did not finish loading", url);
}

json_t *eddy_cdp_eval(eddy_cdp_t *self, const char *expression, eddy_err_t *err)
{
    json_t *r = command(self, "Runtime.evaluate",
                        json_pack("{s:s, s:b, s:b}", "expression", expression, "returnByValue", 1,
                                  "awaitPromise", 1),
                        err);
    if (!r)
        return NULL;
    json_t *ex = json_object_get(r, "exceptionDetails");
    if (ex) {
        json_t *desc = json_object_get(json_object_get(ex, "exception"), "description");
        eddy_err_set(err, "page threw: %s",
                     json_is_string(desc) ? json_string_value(desc)
                                          : json_string_value(json_object_get(ex, "text")));
        json_decref(r);
        return NULL;
    }
    json_t *value = json_object_get(json_object_get(r, "result"), "value");
    value = value ? json_incref(value) : json_null();
    json_decref(r);
    return value;
}

int eddy_cdp_screenshot(eddy_cdp_t *self, const char *path, eddy_err_t *err)
{
    json_t *r = command(self, "Page.captureScreenshot",
                        json_pack("{s:s, s:b}", "format", "png", "captureBeyondViewport", 1), err);
    if (!r)
        return -1;
    const char *b64 = json_string_value(json_object_get(r, "data"));
    char *png = NULL;
    size_t len = 0;
    int rc = b64 ? eddy_b64_decode(b64, strlen(b64), &png, &len) : -1;
    json_decref(r);
    if (rc < 0)
        return eddy_err_set(err, "screenshot: chromium sent no PNG");
    rc = eddy_write_file(path, png, len);
    free(png);
    if (rc < 0)
        return eddy_err_set(err, "cannot write %s", path);
    return 0;
}

void eddy_cdp_stop(eddy_cdp_t **self_p)
{
    eddy_cdp_t *self = *self_p;
    if (!self)
        return;
    if (self->fd >= 0)
        close(self->fd);
    eddy_proc_kill(&self->proc, 3000);
    free(self);
    *self_p = NULL;
}
