/* etcd.c - test helpers: temp dirs, free ports, and a real etcd process
 * (see etcd.h).
 *
 * Why a real etcd: the metastore's etcd backend talks to etcd's JSON gateway,
 * whose quirks (omitted default fields, base64 bytes, error bodies) are
 * exactly what a fake would get wrong. Starting etcd costs about a second,
 * so a test binary starts one and shares it. */
#include "tests/support/etcd.h"

#include "common/base64.h"
#include "tests/support/http_get.h"

#include <curl/curl.h>
#include <jansson.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define START_DEADLINE_MS 30000
#define STOP_GRACE_MS 5000
#define START_ATTEMPTS 3
#define ENV_URL "EDDY_TEST_ETCD_URL"
#define ENV_ERROR "EDDY_TEST_ETCD_ERROR"

struct eddy_test_etcd {
    pid_t pid;
    char *dir;
    char url[64];
};

/* ---- temp dirs ----------------------------------------------------------- */

char *eddy_test_mkdtemp(const char *tag, eddy_err_t *err)
{
    const char *base = getenv("TMPDIR");
    if (!base || !base[0])
        base = "/tmp";
    size_t n = strlen(base) + strlen(tag) + 32;
    char *path = malloc(n);
    if (!path) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(path, n, "%s/eddy-%s-XXXXXX", base, tag);
    if (!mkdtemp(path)) {
        eddy_err_set(err, "mkdtemp %s: %s", path, strerror(errno));
        free(path);
        return NULL;
    }
    return path;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

int eddy_test_rm_rf(const char *path)
{
    if (!path)
        return 0;
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    struct stat st;
    return lstat(path, &st) == 0 ? -1 : 0;
}

/* ---- ports --------------------------------------------------------------- */

static int bind_loopback(int *port, eddy_err_t *err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return eddy_err_set(err, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
        int e = errno;
        close(fd);
        return eddy_err_set(err, "bind 127.0.0.1:0: %s", strerror(e));
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int eddy_test_free_port(eddy_err_t *err)
{
    int port = 0; /* set by bind_loopback on success; GCC -O3 cannot see that */
    int fd = bind_loopback(&port, err);
    if (fd < 0)
        return -1;
    close(fd);
    return port;
}

int eddy_test_listen_silent(int *port, eddy_err_t *err)
{
    int fd = bind_loopback(port, err);
    if (fd < 0)
        return -1;
    if (listen(fd, 16) < 0) {
        int e = errno;
        close(fd);
        return eddy_err_set(err, "listen: %s", strerror(e));
    }
    return fd;
}

/* ---- etcd ---------------------------------------------------------------- */

static size_t discard_or_keep(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    char *buf = userdata; /* 128 bytes, NUL-terminated */
    size_t n = size * nmemb, have = strlen(buf);
    size_t room = 127 - have;
    memcpy(buf + have, ptr, n < room ? n : room);
    buf[have + (n < room ? n : room)] = '\0';
    return n;
}

/* 1 when GET url/health says {"health":"true"}. */
static int healthy(const char *url)
{
    CURL *c = curl_easy_init();
    if (!c)
        return 0;
    char target[96], body[128] = "";
    snprintf(target, sizeof target, "%s/health", url);
    curl_easy_setopt(c, CURLOPT_URL, target);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 500L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 1000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_or_keep);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, (void *)body);
    long status = 0;
    int ok = curl_easy_perform(c) == CURLE_OK &&
             curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
             status == 200 && strstr(body, "\"health\":\"true\"") != NULL;
    curl_easy_cleanup(c);
    return ok;
}

/* Last ~300 bytes of the etcd log, for error messages. */
static void log_tail(const char *dir, char *out, size_t outlen)
{
    out[0] = '\0';
    char path[512];
    snprintf(path, sizeof path, "%s/etcd.log", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, -300, SEEK_END) < 0)
        rewind(f);
    size_t n = fread(out, 1, outlen - 1, f);
    out[n] = '\0';
    fclose(f);
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = ' ';
}

static void reap(pid_t pid)
{
    kill(pid, SIGTERM);
    uint64_t deadline = eddy_mono_ms() + STOP_GRACE_MS;
    while (waitpid(pid, NULL, WNOHANG) == 0) {
        if (eddy_mono_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* One attempt: 1 started, 0 retry with other ports, -1 give up. */
static int try_start(eddy_test_etcd_t *self, const char *bin, eddy_err_t *err)
{
    int client = eddy_test_free_port(err), peer = eddy_test_free_port(err);
    if (client < 0 || peer < 0)
        return -1;
    char client_url[64], peer_url[64], cluster[96], data[512], logp[512];
    snprintf(client_url, sizeof client_url, "http://127.0.0.1:%d", client);
    snprintf(peer_url, sizeof peer_url, "http://127.0.0.1:%d", peer);
    snprintf(cluster, sizeof cluster, "eddy-test=%s", peer_url);
    snprintf(data, sizeof data, "%s/data", self->dir);
    snprintf(logp, sizeof logp, "%s/etcd.log", self->dir);
    snprintf(self->url, sizeof self->url, "%s", client_url);

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return eddy_err_set(err, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Die with the test runner, whatever happens to it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int in = open("/dev/null", O_RDONLY);
        int lf = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || lf < 0)
            _exit(127);
        dup2(in, 0);
        dup2(lf, 1);
        dup2(lf, 2);
        close_range(3, ~0U, 0); /* no inherited pipes of the test runner */
        execl(bin, bin, "--name", "eddy-test", "--data-dir", data, "--listen-client-urls",
              client_url, "--advertise-client-urls", client_url, "--listen-peer-urls",
              peer_url, "--initial-advertise-peer-urls", peer_url, "--initial-cluster",
              cluster, "--initial-cluster-state", "new", (char *)NULL);
        _exit(127);
    }
    self->pid = pid;

    uint64_t deadline = eddy_mono_ms() + START_DEADLINE_MS;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            self->pid = 0;
            char tail[320];
            log_tail(self->dir, tail, sizeof tail);
            int retry = strstr(tail, "address already in use") != NULL;
            eddy_err_set(err, "%s exited (status %d) before serving: ...%s", bin,
                         WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), tail);
            if (retry) /* a port was taken meanwhile: start over, clean */
                eddy_test_rm_rf(data);
            return retry ? 0 : -1;
        }
        if (healthy(client_url))
            return 1;
        if (eddy_mono_ms() > deadline) {
            reap(pid);
            self->pid = 0;
            char tail[320];
            log_tail(self->dir, tail, sizeof tail);
            return eddy_err_set(err, "%s did not become healthy at %s within %d ms: ...%s", bin,
                                client_url, START_DEADLINE_MS, tail);
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

eddy_test_etcd_t *eddy_test_etcd_start(eddy_err_t *err)
{
    const char *bin = getenv("EDDY_ETCD");
    if (!bin || !bin[0])
        bin = EDDY_TEST_ETCD_DEFAULT;
    if (access(bin, X_OK) < 0) {
        eddy_err_set(err, "etcd not found at %s (%s); install the etcd-server package or set "
                     "EDDY_ETCD to the etcd binary", bin, strerror(errno));
        return NULL;
    }
    eddy_test_etcd_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->dir = eddy_test_mkdtemp("etcd", err);
    if (!self->dir) {
        free(self);
        return NULL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        eddy_err_set(err, "curl_global_init failed");
        eddy_test_etcd_stop(&self);
        return NULL;
    }
    int rc = 0;
    for (int i = 0; i < START_ATTEMPTS && rc == 0; i++)
        rc = try_start(self, bin, err);
    curl_global_cleanup();
    if (rc <= 0) {
        eddy_test_etcd_stop(&self);
        return NULL;
    }
    return self;
}

const char *eddy_test_etcd_url(const eddy_test_etcd_t *self)
{
    return self->url;
}

pid_t eddy_test_etcd_pid(const eddy_test_etcd_t *self)
{
    return self ? self->pid : -1;
}

void eddy_test_etcd_stop(eddy_test_etcd_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_test_etcd_t *self = *self_p;
    if (self->pid > 0)
        reap(self->pid);
    eddy_test_rm_rf(self->dir);
    free(self->dir);
    free(self);
    *self_p = NULL;
}

/* ---- one server per test binary ------------------------------------------ */

static eddy_test_etcd_t *shared;

void eddy_test_etcd_start_shared(void)
{
    eddy_err_t err = {{0}};
    shared = eddy_test_etcd_start(&err);
    if (shared) {
        setenv(ENV_URL, eddy_test_etcd_url(shared), 1);
        unsetenv(ENV_ERROR);
    } else {
        unsetenv(ENV_URL);
        setenv(ENV_ERROR, err.msg, 1);
    }
}

void eddy_test_etcd_stop_shared(void)
{
    eddy_test_etcd_stop(&shared);
    unsetenv(ENV_URL);
}

const char *eddy_test_etcd_shared_url(eddy_err_t *err)
{
    const char *url = getenv(ENV_URL);
    if (url && url[0])
        return url;
    const char *why = getenv(ENV_ERROR);
    eddy_err_set(err, "no test etcd: %s",
                 why ? why : "eddy_test_etcd_start_shared() was not called in PRE_ALL");
    return NULL;
}

/* ---- reading keys ---------------------------------------------------------- */

int eddy_test_etcd_range(const char *url, const char *prefix,
                         char (*keys)[EDDY_TEST_ETCD_KEY_MAX], long long *leases, int cap,
                         eddy_err_t *err)
{
    const char *colon = strrchr(url, ':');
    int port = colon ? atoi(colon + 1) : 0;
    if (port <= 0)
        return eddy_err_set(err, "no port in etcd URL %s", url);
    /* range_end: the prefix with its last byte incremented */
    size_t n = strlen(prefix);
    char *end = strdup(prefix);
    if (!end || !n) {
        free(end);
        return eddy_err_set(err, "bad prefix");
    }
    end[n - 1]++;
    char *k64 = eddy_b64_encode((const unsigned char *)prefix, n);
    char *e64 = eddy_b64_encode((const unsigned char *)end, n);
    free(end);
    json_t *req = k64 && e64 ? json_pack("{s:s, s:s}", "key", k64, "range_end", e64) : NULL;
    free(k64);
    free(e64);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body)
        return eddy_err_set(err, "out of memory");
    eddy_test_http_reply_t reply;
    long status = eddy_test_http_request(port, "POST", "/v3/kv/range", NULL, body, 5000, &reply);
    free(body);
    json_t *doc = status == 200 ? json_loads(reply.body, 0, NULL) : NULL;
    if (!doc) {
        eddy_err_set(err, "etcd range request: HTTP %ld %s %.200s", status, reply.error,
                     reply.body ? reply.body : "");
        eddy_test_http_reply_clear(&reply);
        return -1;
    }
    eddy_test_http_reply_clear(&reply);
    json_t *kvs = json_object_get(doc, "kvs");
    int count = 0;
    size_t i;
    json_t *kv;
    json_array_foreach(kvs, i, kv)
    {
        if (count < cap) {
            const char *k = json_string_value(json_object_get(kv, "key"));
            char *plain = NULL;
            size_t plen = 0;
            if (k && eddy_b64_decode(k, strlen(k), &plain, &plen) == 0)
                snprintf(keys[count], EDDY_TEST_ETCD_KEY_MAX, "%.*s", (int)plen, plain);
            else
                keys[count][0] = '\0';
            free(plain);
            /* int64 fields come as strings from the gateway */
            const char *l = json_string_value(json_object_get(kv, "lease"));
            leases[count] = l ? atoll(l) : 0;
        }
        count++;
    }
    json_decref(doc);
    return count;
}
