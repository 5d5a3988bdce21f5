/* test_http_security.c - the coordinator's HTTP server as an attacker on
 * the network sees it (docs/security.md, "HTTP").
 *
 * A real `eddy coordinator` process on free loopback ports, reached with
 * libcurl and with raw sockets for requests no well-behaved client sends:
 * - only GET and HEAD: POST, PUT, DELETE, PATCH get 405 with an Allow header;
 * - with --http-token-file every path but /healthz needs the bearer token
 *   (401 and WWW-Authenticate without it or with a wrong one);
 * - an oversized URL, too many or too large header fields, and a request
 *   body are refused, and the server keeps serving afterwards;
 * - a token file others may read (or an empty or missing one) is a usage
 *   error (exit 2) for `eddy coordinator` and `eddy local`;
 * - without --bind/--http-host the coordinator listens on loopback only;
 *   a control socket beyond loopback without --keys is refused (exit 2, the
 *   line says anyone reaching the port can run code on the workers through
 *   plugins) for `eddy coordinator`, `eddy worker` and `eddy local`, unless
 *   --insecure, which starts with that said as a warning; HTTP beyond
 *   loopback without a token is logged as a warning;
 * - without keys, a worker registering from beyond loopback (this host's
 *   non-loopback address) is refused and exits saying why;
 * - what /api/v1/jobs and /api/v1/status serve holds no password of a job's
 *   URI, no token and no token file path; nor does any file of the file
 *   metadata store (encrypted records; directory 0700, records 0600), and a
 *   second coordinator on that directory stops naming the pid holding it;
 * - `eddy local --http-token-file` guards its HTTP the same way;
 * - every response (page, script, API, error, refusal) carries a strict
 *   Content-Security-Policy (only the server's own script, no inline
 *   script or style, Trusted Types, no framing), X-Content-Type-Options:
 *   nosniff, Referrer-Policy: no-referrer and X-Frame-Options: DENY. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "tests/support/cluster.h"
#include "tests/support/etcd.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"

#define TOKEN "s3cr3t-T0ken_for-eddy.tests"
#define START_MS 30000u

/* The fixture gives the directory, the ports and the loopback coordinator
 * and worker; the coordinators
 * and eddy locals with other addresses are started here by hand in coord. */
static eddy_test_cluster_t *cl;
static char *dir, *logp, *meta, *snaps, *token_path;
static int cport, hport;
static eddy_proc_t coord;
static eddy_proc_t *served; /* the process serving HTTP on hport */

static void make_dir(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "httpsec", .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = "", .workers = 1};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    logp = eddy_test_cluster_coordinator_log(cl, 0);
    meta = eddy_test_cluster_metastore(cl);
    snaps = eddy_test_cluster_path(cl, "snapshots");
    token_path = eddy_test_cluster_path(cl, "http.token");
    cport = eddy_test_cluster_port(cl, 0);
    hport = eddy_test_cluster_http_port(cl, 0);
    memset(&coord, 0, sizeof coord);
    served = &coord;
    cr_assert(eddy_write_file(token_path, TOKEN "\n", strlen(TOKEN) + 1) == 0);
    cr_assert(chmod(token_path, 0600) == 0);
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void teardown(void)
{
    eddy_proc_kill(&coord, 3000);
    curl_global_cleanup();
    eddy_test_cluster_destroy(&cl);
}

typedef eddy_test_http_reply_t reply_t;

static void reply_free(reply_t *r)
{
    eddy_test_http_reply_clear(r);
}

/* One request; auth NULL = no Authorization header. */
static reply_t request(const char *method, const char *path, const char *auth, const char *body)
{
    reply_t r;
    eddy_test_http_request(hport, method, path, auth, body, 15000, &r);
    cr_assert(r.status, "%s", r.error);
    return r;
}

static long status_of(const char *method, const char *path, const char *auth)
{
    reply_t r = request(method, path, auth, NULL);
    long st = r.status;
    reply_free(&r);
    return st;
}

/* Case-insensitive header lookup in a raw header block; value copied. */
static bool header(const char *block, const char *name, char *value, size_t size)
{
    size_t n = strlen(name);
    for (const char *p = block; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (!strncasecmp(p, name, n) && p[n] == ':') {
            const char *v = p + n + 1;
            while (*v == ' ')
                v++;
            size_t len = strcspn(v, "\r\n");
            snprintf(value, size, "%.*s", (int)len, v);
            return true;
        }
    }
    return false;
}

/* Sends raw bytes and returns the status code of the answer (0 when the
 * server closed or reset the connection without one). */
static int raw_request(const char *data, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct timeval tv = {15, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)hport)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s", strerror(errno));
    for (size_t off = 0; off < len;) {
        ssize_t n = send(fd, data + off, len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break; /* refused mid-request: the answer may still be readable */
        off += (size_t)n;
    }
    char buf[256];
    size_t got = 0;
    while (got < sizeof buf - 1) {
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (memchr(buf, '\n', got))
            break;
    }
    close(fd);
    buf[got] = '\0';
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    return status;
}

static bool coord_serves(void *arg)
{
    (void)arg;
    if (!eddy_proc_alive(served))
        return true; /* stop polling: the assertion below reports it */
    long status = 0;
    free(eddy_test_http_get(hport, "/healthz", 2000, &status));
    return status == 200;
}

/* Waits for the process started as `served` to serve /healthz on hport;
 * what names it in the failure message, the log it writes in log. */
static void expect_serving(const char *what, const char *log_path)
{
    eddy_poll_until(coord_serves, NULL, START_MS);
    char *log = eddy_read_file(log_path, NULL);
    cr_assert(eddy_proc_alive(served) && coord_serves(NULL), "%s does not serve /healthz on %d; log:\n%s",
              what, hport, log ? log : "");
    free(log);
}

/* The fixture's coordinator (loopback control and HTTP, its state in dir)
 * with --http-token-file. */
static void start_with_token(void)
{
    make_dir();
    const char *extra[] = {"--http-token-file", token_path, NULL};
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_coordinator_with(cl, 0, extra, &err) == 0, "%s", err.msg);
    served = eddy_test_cluster_coordinator(cl, 0);
    expect_serving("coordinator", logp);
}

Test(http_security, only_get_and_head, .init = start_with_token, .fini = teardown, .timeout = 120)
{
    static const char *const methods[] = {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
    static const char *const paths[] = {"/api/v1/jobs", "/healthz", "/metrics", "/nowhere"};
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            for (int with_token = 0; with_token < 2; with_token++) {
                reply_t r = request(methods[m], paths[p], with_token ? "Bearer " TOKEN : NULL,
                                    !strcmp(methods[m], "POST") ? "job=evil" : NULL);
                cr_assert_eq(r.status, 405, "%s %s%s: status %ld", methods[m], paths[p],
                             with_token ? " (with token)" : "", r.status);
                char allow[64] = "";
                cr_assert(header(r.headers, "Allow", allow, sizeof allow), "%s %s: no Allow in\n%s",
                          methods[m], paths[p], r.headers);
                cr_assert(strstr(allow, "GET") && strstr(allow, "HEAD") && !strstr(allow, "POST"),
                          "Allow: %s", allow);
                reply_free(&r);
            }
        }
    }
    cr_assert_eq(status_of("HEAD", "/healthz", NULL), 200);
    cr_assert_eq(status_of("HEAD", "/api/v1/jobs", "Bearer " TOKEN), 200);
    cr_assert_eq(status_of("GET", "/healthz", NULL), 200);
}

Test(http_security, security_headers_on_every_response, .init = start_with_token, .fini = teardown,
     .timeout = 120)
{
    static const struct {
        const char *method, *path, *auth;
        long status;
    } cases[] = {
        {"GET", "/", NULL, 200},
        {"GET", "/dashboard.js", NULL, 200},
        {"GET", "/dashboard.css", NULL, 200},
        {"GET", "/healthz", NULL, 200},
        {"GET", "/api/v1/status", "Bearer " TOKEN, 200},
        {"GET", "/api/v1/scaling", "Bearer " TOKEN, 200},
        {"GET", "/metrics", "Bearer " TOKEN, 200},
        {"GET", "/nowhere", "Bearer " TOKEN, 404},
        {"GET", "/api/v1/status", NULL, 401},
        {"POST", "/api/v1/jobs", NULL, 405},
        {"HEAD", "/", NULL, 200},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reply_t r = request(cases[i].method, cases[i].path, cases[i].auth, NULL);
        cr_assert_eq(r.status, cases[i].status, "%s %s: %ld", cases[i].method, cases[i].path, r.status);
        char v[512] = "";
        cr_assert(header(r.headers, "Content-Security-Policy", v, sizeof v), "%s %s: no CSP in\n%s",
                  cases[i].method, cases[i].path, r.headers);
        static const char *const wanted[] = {"default-src 'none'", "script-src 'self'", "style-src 'self'",
                                             "frame-ancestors 'none'", "base-uri 'none'",
                                             "require-trusted-types-for 'script'"};
        for (size_t k = 0; k < sizeof wanted / sizeof wanted[0]; k++)
            cr_assert(strstr(v, wanted[k]), "%s %s: CSP without %s: %s", cases[i].method, cases[i].path,
                      wanted[k], v);
        cr_assert(!strstr(v, "unsafe-inline") && !strstr(v, "unsafe-eval"), "CSP: %s", v);
        cr_assert(header(r.headers, "X-Content-Type-Options", v, sizeof v) && !strcmp(v, "nosniff"),
                  "%s %s:\n%s", cases[i].method, cases[i].path, r.headers);
        cr_assert(header(r.headers, "Referrer-Policy", v, sizeof v) && !strcmp(v, "no-referrer"),
                  "%s %s:\n%s", cases[i].method, cases[i].path, r.headers);
        cr_assert(header(r.headers, "X-Frame-Options", v, sizeof v) && !strcmp(v, "DENY"), "%s %s:\n%s",
                  cases[i].method, cases[i].path, r.headers);
        /* nosniff: a script is run only when served as one */
        if (!strcmp(cases[i].path, "/dashboard.js"))
            cr_assert(header(r.headers, "Content-Type", v, sizeof v) && strstr(v, "javascript"), "%s", v);
        reply_free(&r);
    }
    /* The page loads its script from the server: no inline script at all. */
    reply_t r = request("GET", "/", NULL, NULL);
    cr_assert(strstr(r.body, "<script src=\"/dashboard.js\"></script>"), "%s", r.body);
    const char *p = r.body;
    while ((p = strstr(p, "<script"))) {
        cr_assert(!strncmp(p, "<script src=", 12), "an inline script in the page: %.80s", p);
        p++;
    }
    cr_assert(!strstr(r.body, " style=") && !strstr(r.body, "<style"), "inline style in the page");
    reply_free(&r);
}

Test(http_security, token_required_except_healthz, .init = start_with_token, .fini = teardown,
     .timeout = 120)
{
    static const char *const paths[] = {"/api/v1/jobs", "/api/v1/status", "/api/v1/scaling",
                                        "/metrics", "/nowhere", "/healthz/", "/HEALTHZ"};
    static const char *const wrong[] = {
        NULL,                      /* none */
        "Bearer",                  /* scheme only */
        "Bearer ",                 /* empty token */
        "Bearer s3cr3t-T0ken_for-eddy.testz", /* last byte differs */
        "Bearer s3cr3t-T0ken_for-eddy.test",  /* a prefix */
        "Bearer " TOKEN "x",       /* longer */
        "Basic " TOKEN,            /* another scheme */
        TOKEN,                     /* no scheme */
    };
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        for (size_t w = 0; w < sizeof wrong / sizeof wrong[0]; w++) {
            reply_t r = request("GET", paths[p], wrong[w], NULL);
            cr_assert_eq(r.status, 401, "GET %s with '%s': status %ld", paths[p],
                         wrong[w] ? wrong[w] : "(none)", r.status);
            char www[128] = "";
            cr_assert(header(r.headers, "WWW-Authenticate", www, sizeof www),
                      "no WWW-Authenticate in\n%s", r.headers);
            cr_assert(!strncmp(www, "Bearer", 6), "WWW-Authenticate: %s", www);
            cr_assert(!strstr(r.body, TOKEN) && !strstr(r.headers, TOKEN), "token leaked");
            reply_free(&r);
        }
        long want = !strcmp(paths[p], "/nowhere") || !strcmp(paths[p], "/healthz/") ||
                            !strcmp(paths[p], "/HEALTHZ")
                        ? 404
                        : 200;
        cr_assert_eq(status_of("GET", paths[p], "Bearer " TOKEN), want, "GET %s with the token",
                     paths[p]);
        /* the scheme is case-insensitive (RFC 7235) */
        cr_assert_eq(status_of("GET", paths[p], "bearer " TOKEN), want);
    }
    reply_t r = request("GET", "/healthz", NULL, NULL);
    cr_assert_eq(r.status, 200, "open /healthz: %ld", r.status);
    cr_assert(strstr(r.body, "ok"), "%s", r.body);
    reply_free(&r);
    cr_assert_eq(status_of("GET", "/healthz?probe=1", NULL), 200);
}

Test(http_security, oversize_requests_refused_and_server_keeps_serving, .init = start_with_token,
     .fini = teardown, .timeout = 180)
{
    size_t big = 200 * 1024;
    char *req = malloc(big + 4096);
    cr_assert(req);
    char *fill = malloc(big + 1);
    memset(fill, 'a', big);
    fill[big] = '\0';

    /* a URL longer than the limit that still fits the connection's memory */
    int n = snprintf(req, big + 4096, "GET /api/v1/jobs?q=%.*s HTTP/1.1\r\nHost: x\r\n"
                     "Authorization: Bearer " TOKEN "\r\n\r\n", 3000, fill);
    cr_assert_eq(raw_request(req, (size_t)n), 414);
    /* one that does not */
    n = snprintf(req, big + 4096, "GET /healthz?q=%s HTTP/1.1\r\nHost: x\r\n\r\n", fill);
    int st = raw_request(req, (size_t)n);
    cr_assert(st == 0 || st == 414 || st == 431, "200 KB URL: status %d", st);
    cr_assert(coord_serves(NULL), "server stopped serving after a 200 KB URL");
    /* one huge header field */
    n = snprintf(req, big + 4096, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", fill);
    st = raw_request(req, (size_t)n);
    cr_assert(st == 0 || st == 431, "200 KB header: status %d", st);
    cr_assert(coord_serves(NULL), "server stopped serving after a 200 KB header");
    /* many small header fields */
    n = snprintf(req, big + 4096, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 100; i++)
        n += snprintf(req + n, big + 4096 - (size_t)n, "X-H%d: %d\r\n", i, i);
    n += snprintf(req + n, big + 4096 - (size_t)n, "\r\n");
    cr_assert_eq(raw_request(req, (size_t)n), 431, "100 header fields");
    /* a body on a GET (announced, and chunked), with the token */
    n = snprintf(req, big + 4096, "GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 TOKEN "\r\nContent-Length: 10\r\n\r\n0123456789");
    cr_assert_eq(raw_request(req, (size_t)n), 413, "GET with a body");
    n = snprintf(req, big + 4096, "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                 "\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    cr_assert_eq(raw_request(req, (size_t)n), 413, "GET with a chunked body");
    /* a 1 MB POST is refused before its body is read */
    n = snprintf(req, big + 4096, "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: "
                 "1048576\r\n\r\n");
    cr_assert_eq(raw_request(req, (size_t)n), 405, "POST announcing 1 MB");
    /* garbage */
    st = raw_request("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15);
    cr_assert(st == 0 || st / 100 == 4, "TLS hello on the HTTP port: status %d", st);

    /* and it still serves, authenticated and not */
    cr_assert_eq(status_of("GET", "/healthz", NULL), 200);
    cr_assert_eq(status_of("GET", "/api/v1/jobs", "Bearer " TOKEN), 200);
    free(fill);
    free(req);
}

/* ---- token files -------------------------------------------------------- */

static void expect_usage_error(char *const argv[], const char *needle)
{
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 30000, &out, &errout);
    cr_assert_eq(rc, 2, "%s %s: exit %d, stderr: %s", argv[1], argv[2], rc, errout ? errout : "");
    cr_assert(errout && strstr(errout, needle), "stderr lacks '%s': %s", needle, errout ? errout : "");
    cr_assert(strchr(errout, '\n') == errout + strlen(errout) - 1, "not one line: %s", errout);
    free(out);
    free(errout);
}

Test(http_security, loose_token_file_refused, .init = make_dir, .fini = teardown, .timeout = 120)
{
    static const mode_t loose[] = {0644, 0640, 0604, 0660, 0606};
    char empty[700];
    snprintf(empty, sizeof empty, "%s/empty.token", dir);
    cr_assert(eddy_write_file(empty, "\n", 1) == 0);
    cr_assert(chmod(empty, 0600) == 0);
    for (size_t i = 0; i < sizeof loose / sizeof loose[0]; i++) {
        cr_assert(chmod(token_path, loose[i]) == 0);
        char *c[] = {EDDY_BINARY, "coordinator", "--http-token-file", token_path, "--http-port", "0",
                     "--bind", "tcp://127.0.0.1:1", NULL};
        expect_usage_error(c, "chmod 600");
        char *l[] = {EDDY_BINARY, "local", "--http-token-file", token_path, "--control-port", "1",
                     "--job", "wordcount", "--generate", "--lines", "10", NULL};
        expect_usage_error(l, "chmod 600");
    }
    char missing[700];
    snprintf(missing, sizeof missing, "%s/missing.token", dir);
    char *c2[] = {EDDY_BINARY, "coordinator", "--http-token-file", missing, NULL};
    expect_usage_error(c2, "No such file");
    char *c3[] = {EDDY_BINARY, "coordinator", "--http-token-file", empty, NULL};
    expect_usage_error(c3, "holds no token");
    char *c4[] = {EDDY_BINARY, "coordinator", "--http-token-file", dir, NULL};
    expect_usage_error(c4, "not a regular file");
}

/* ---- listening addresses ---------------------------------------------- */

/* An IPv4 address of this machine outside 127/8 (NULL if it has none). */
static bool non_loopback_ipv4(struct in_addr *out)
{
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) < 0)
        return false;
    bool found = false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        if ((ntohl(a.s_addr) >> 24) != 127) {
            *out = a;
            found = true;
        }
    }
    freeifaddrs(ifs);
    return found;
}

/* errno of a TCP connect to addr:port (0 when it connected). */
static int connect_errno(struct in_addr addr, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = addr};
    int e = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 ? 0 : errno;
    close(fd);
    return e;
}

Test(http_security, default_bind_is_loopback, .init = make_dir, .fini = teardown, .timeout = 120)
{
    eddy_err_t err = {{0}};
    char *hp = eddy_test_cluster_http_port_s(cl, 0);
    /* no --bind, no --http-host: the defaults, control port 7600 included */
    char *argv[] = {EDDY_BINARY, "coordinator", "--http-port", hp, "--metastore", meta,
                    "--snapshot-dir", snaps, NULL};
    cr_assert(eddy_proc_start(&coord, argv, NULL, logp, &err) == 0, "%s", err.msg);
    eddy_poll_until(coord_serves, NULL, START_MS);
    char *log = eddy_read_file(logp, NULL);
    cr_assert(log);
    if (!eddy_proc_alive(&coord)) {
        /* 7600 belongs to someone else on this machine: the refusal still
         * names the default */
        cr_assert(strstr(log, "cannot listen on tcp://127.0.0.1:7600"), "log:\n%s", log);
        free(log);
        return;
    }
    cr_assert(strstr(log, "listening on tcp://127.0.0.1:7600 (no keys), HTTP on 127.0.0.1:"), "log:\n%s",
              log);
    cr_assert(!strstr(log, "reachable beyond"), "loopback listener warned:\n%s", log);
    free(log);
    struct in_addr other;
    if (non_loopback_ipv4(&other)) {
        cr_assert_eq(connect_errno(other, hport), ECONNREFUSED, "HTTP reachable on %s",
                     inet_ntoa(other));
        cr_assert_eq(connect_errno(other, 7600), ECONNREFUSED, "control reachable on %s",
                     inet_ntoa(other));
    }
    struct in_addr lo = {htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect_errno(lo, 7600), 0, "control port not on loopback");
}

static bool log_has_two_warnings(void *arg)
{
    (void)arg;
    char *log = eddy_read_file(logp, NULL);
    const char *second = log ? strstr(log, "reachable beyond") : NULL;
    bool ok = second && strstr(second + 1, "reachable beyond");
    free(log);
    return ok;
}

Test(http_security, beyond_loopback_refused_without_keys, .init = make_dir, .fini = teardown,
     .timeout = 120)
{
    const char *needle = "anyone who can reach the port can run code on the workers through plugins";
    char *c[] = {EDDY_BINARY, "coordinator", "--bind", "tcp://0.0.0.0:1", "--http-port", "0", NULL};
    expect_usage_error(c, needle);
    char *w1[] = {EDDY_BINARY, "worker", "--coordinator", "tcp://192.0.2.1:1", NULL};
    expect_usage_error(w1, needle);
    char *w2[] = {EDDY_BINARY, "worker", "--bind-host", "0.0.0.0", NULL};
    expect_usage_error(w2, needle);
    char *w3[] = {EDDY_BINARY, "worker", "--coordinator", "tcp://127.0.0.1:1,tcp://coordinator-2:1", NULL};
    expect_usage_error(w3, needle);
    char *l[] = {EDDY_BINARY, "local", "--bind-host", "0.0.0.0", "--control-port", "1",
                 "--job", "wordcount", "--generate", "--lines", "10", NULL};
    expect_usage_error(l, needle);
}

Test(http_security, local_with_insecure_runs_its_job, .init = make_dir, .fini = teardown,
     .timeout = 120)
{
    char *cp = eddy_test_cluster_port_s(cl, 0), *hp = eddy_test_cluster_http_port_s(cl, 0);
    char *out_path = eddy_test_cluster_path(cl, "counts.txt");
    char *argv[] = {EDDY_BINARY, "local", "--bind-host", "0.0.0.0", "--insecure", "--control-port", cp,
                    "--http-port", hp, "--job", "wordcount", "--generate", "--lines", "200",
                    "--output", out_path, NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 60000, &out, &errout);
    cr_assert_eq(rc, 0, "eddy local --insecure exited %d: %s", rc, errout ? errout : "");
    cr_assert(errout && strstr(errout, "INSECURE (--insecure): control port on 0.0.0.0"), "%s",
              errout ? errout : "");
    size_t len = 0;
    char *counts = eddy_read_file(out_path, &len);
    cr_assert(counts && len > 0, "no output: %s", errout);
    free(counts);
    free(out);
    free(errout);
    char *l[] = {EDDY_BINARY, "local", "--bind-host", "192.0.2.77", "--insecure", "--control-port", cp,
                 "--job", "wordcount", "--generate", "--lines", "10", NULL};
    expect_usage_error(l, "workers register from loopback only");
}

Test(http_security, beyond_loopback_with_insecure_warns, .init = make_dir, .fini = teardown,
     .timeout = 120)
{
    eddy_err_t err = {{0}};
    char bind[64], *hp = eddy_test_cluster_http_port_s(cl, 0);
    snprintf(bind, sizeof bind, "tcp://0.0.0.0:%d", cport);
    char *argv[] = {EDDY_BINARY, "coordinator", "--bind", bind, "--http-host", "0.0.0.0",
                    "--http-port", hp, "--metastore", meta, "--snapshot-dir", snaps, "--insecure", NULL};
    cr_assert(eddy_proc_start(&coord, argv, NULL, logp, &err) == 0, "%s", err.msg);
    eddy_poll_until(coord_serves, NULL, START_MS);
    cr_assert(eddy_poll_until(log_has_two_warnings, NULL, 10000), "no warnings for 0.0.0.0");
    char *log = eddy_read_file(logp, NULL);
    cr_assert(strstr(log, "WARN") && strstr(log, bind), "log:\n%s", log);
    cr_assert(strstr(log, "INSECURE (--insecure)") &&
              strstr(log, "anyone who can reach the port can run code on the workers through plugins"),
              "the warning says what --insecure exposes:\n%s", log);
    cr_assert(strstr(log, "--http-token-file"), "the HTTP warning names the fix:\n%s", log);
    free(log);

    /* without keys, a worker beyond loopback may not register, --insecure
     * or not: it would be sent plugins and job data */
    struct in_addr other;
    if (non_loopback_ipv4(&other)) {
        char url[64], wlog[700];
        snprintf(url, sizeof url, "tcp://%s:%d", inet_ntoa(other), cport);
        snprintf(wlog, sizeof wlog, "%s/worker.log", dir);
        char *wargv[] = {EDDY_BINARY, "worker", "--coordinator", url, "--insecure",
                         "--register-timeout-ms", "20000", NULL};
        eddy_proc_t worker = {0};
        cr_assert(eddy_proc_start(&worker, wargv, NULL, wlog, &err) == 0, "%s", err.msg);
        int rc = eddy_proc_wait(&worker, 30000);
        char *wl = eddy_read_file(wlog, NULL);
        cr_assert_neq(rc, 0, "the worker registered:\n%s", wl ? wl : "");
        cr_assert(wl && strstr(wl, "only workers on loopback may register"), "worker log:\n%s", wl ? wl : "");
        free(wl);
        log = eddy_read_file(logp, NULL);
        cr_assert(strstr(log, "registration from"), "coordinator log:\n%s", log);
        cr_assert(!strstr(log, ") registered, data at"), "coordinator log:\n%s", log);
        free(log);
    }
    eddy_proc_kill(&coord, 3000);

    /* with a token, HTTP beyond loopback is protected: only the control
     * socket is warned about */
    cr_assert(eddy_write_file(logp, "", 0) == 0);
    char *argv2[] = {EDDY_BINARY, "coordinator", "--bind", bind, "--http-host", "0.0.0.0",
                     "--http-port", hp, "--metastore", meta, "--snapshot-dir", snaps,
                     "--http-token-file", token_path, "--insecure", NULL};
    cr_assert(eddy_proc_start(&coord, argv2, NULL, logp, &err) == 0, "%s", err.msg);
    eddy_poll_until(coord_serves, NULL, START_MS);
    log = eddy_read_file(logp, NULL);
    cr_assert(log && strstr(log, "listening on"), "log:\n%s", log ? log : "");
    const char *w = strstr(log, "reachable beyond");
    cr_assert(w && !strstr(w + 1, "reachable beyond"), "want exactly the control warning:\n%s", log);
    cr_assert(strstr(log, "control socket"), "log:\n%s", log);
    free(log);
}

/* ---- nothing secret is served ------------------------------------------- */

static bool job_listed(void *arg)
{
    (void)arg;
    reply_t r = request("GET", "/api/v1/jobs", "Bearer " TOKEN, NULL);
    bool ok = r.status == 200 && strstr(r.body, "\"wordcount\"");
    reply_free(&r);
    return ok;
}

/* The file metadata store of the coordinator: directory 0700, records
 * 0600, and no file in it holds secret (the job's password) or any
 * "postgresql://" in plain text. */
static void meta_dir_is_private_and_sealed(const char *secret)
{
    struct stat st;
    cr_assert_eq(stat(meta, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "metadata directory mode %o", st.st_mode & 0777);
    DIR *d = opendir(meta);
    cr_assert(d);
    int records = 0;
    for (struct dirent *de; (de = readdir(d));) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", meta, de->d_name);
        if (lstat(path, &st) || !S_ISREG(st.st_mode))
            continue;
        records++;
        cr_assert_eq(st.st_mode & 0777, 0600, "%s has mode %o", path, st.st_mode & 0777);
        size_t len = 0;
        char *data = eddy_read_file(path, &len);
        cr_assert(data, "%s", path);
        cr_assert(!memmem(data, len, secret, strlen(secret)), "%s holds the password in plain text", path);
        cr_assert(!memmem(data, len, "postgresql://", 13), "%s holds the job's URI in plain text", path);
        free(data);
    }
    closedir(d);
    cr_assert_gt(records, 2, "the job record is missing");
}

/* A second coordinator on the metadata directory of a running one stops at
 * start, naming the directory and the pid that holds it. */
static void second_coordinator_refused(void)
{
    eddy_err_t err = {{0}};
    int ports[2];
    cr_assert(eddy_test_free_ports(2, ports, &err) == 0, "%s", err.msg);
    char bind[64], hp[16], want[900];
    snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", ports[0]);
    snprintf(hp, sizeof hp, "%d", ports[1]);
    char *argv[] = {EDDY_BINARY, "coordinator", "--bind", bind, "--http-port", hp, "--metastore",
                    meta, "--snapshot-dir", eddy_test_cluster_path(cl, "snapshots2"), NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &errout);
    snprintf(want, sizeof want, "metadata directory %s is in use by pid %d", meta, (int)served->pid);
    cr_assert_eq(rc, 1, "a second coordinator on %s exited %d: %s", meta, rc, errout ? errout : "");
    cr_assert(errout && strstr(errout, want), "want '%s' in: %s", want, errout ? errout : "");
    free(out);
    free(errout);
}

Test(http_security, served_views_hold_no_secrets, .init = start_with_token, .fini = teardown,
     .timeout = 180)
{
    eddy_err_t err = {{0}};
    /* a worker without --name */
    cr_assert(eddy_test_cluster_start_worker_as(cl, "", NULL, &err) >= 0, "%s", err.msg);
    /* a postgres sink on a closed port: the job fails and restarts, but its
     * record (and arguments) are what the views show */
    int closed = eddy_test_free_port(&err);
    char pg[200];
    snprintf(pg, sizeof pg, "postgresql://eddy:hunter2-pw@127.0.0.1:%d/db?table=t",
             closed);
    const char *sargv[] = {"--job", "wordcount", "--generate", "--lines", "0", "--rate", "10",
                           "--output", pg, NULL};
    char *out = NULL;
    bool listed = false;
    /* the worker may still be registering: submit until the job exists */
    for (int attempt = 0; attempt < 30 && !listed; attempt++) {
        free(out);
        out = NULL;
        err.msg[0] = '\0';
        eddy_test_cluster_submit(cl, sargv, &out, &err);
        listed = eddy_poll_until(job_listed, NULL, 2000);
    }
    cr_assert(listed, "job never listed; submit said: %s %s", out ? out : "", err.msg);
    free(out);
    static const char *const paths[] = {"/api/v1/jobs", "/api/v1/status", "/metrics",
                                        "/api/v1/scaling", "/healthz"};
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        reply_t r = request("GET", paths[p], "Bearer " TOKEN, NULL);
        cr_assert_eq(r.status, 200, "%s", paths[p]);
        cr_assert(!strstr(r.body, "hunter2-pw") && !strstr(r.body, "hunter3-pw"),
                  "%s serves the job's password:\n%.2000s", paths[p], r.body);
        cr_assert(!strstr(r.body, TOKEN), "%s serves the token", paths[p]);
        cr_assert(!strstr(r.body, token_path), "%s serves the token file's path", paths[p]);
        if (!strcmp(paths[p], "/api/v1/jobs"))
            cr_assert(strstr(r.body, "postgresql://eddy:***@127.0.0.1:"), "args not shown redacted:\n%.2000s",
                      r.body);
        reply_free(&r);
    }
    /* `eddy status --json` renders the same view over the control socket */
    json_t *status = eddy_test_status(cport);
    cr_assert(status, "no status");
    char *text = json_dumps(status, JSON_COMPACT);
    cr_assert(text && strstr(text, "eddy:***@") && !strstr(text, "hunter2-pw"),
              "status --json: %.2000s", text ? text : "");
    free(text);
    json_decref(status);
    eddy_proc_kill(eddy_test_cluster_worker(cl, 0), 3000);
    meta_dir_is_private_and_sealed("hunter2-pw");
    second_coordinator_refused();
}

/* ---- eddy local takes the token too ------------------------------------- */

Test(http_security, local_requires_token, .init = make_dir, .fini = teardown, .timeout = 120)
{
    eddy_err_t err = {{0}};
    const char *argv[] = {"--http-token-file", token_path, "--quiet", "--job", "wordcount",
                          "--generate", "--lines", "0", "--rate", "100", NULL};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    served = eddy_test_cluster_local(cl);
    char *local_log = eddy_test_cluster_path(cl, "local.log");
    expect_serving("eddy local", local_log);
    char *log = eddy_read_file(local_log, NULL);
    cr_assert(!strstr(log, "reachable beyond"), "loopback eddy local warned:\n%s", log);
    free(log);
    cr_assert_eq(status_of("GET", "/api/v1/jobs", NULL), 401);
    cr_assert_eq(status_of("GET", "/metrics", "Bearer wrong"), 401);
    cr_assert_eq(status_of("GET", "/api/v1/jobs", "Bearer " TOKEN), 200);
    cr_assert_eq(status_of("POST", "/api/v1/jobs", "Bearer " TOKEN), 405);
}
