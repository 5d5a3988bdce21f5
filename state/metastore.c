/* metastore.c - the public metastore API (see metastore.h): URL parsing,
 * backend dispatch, key validation, locking and eddy_kv_list_t helpers.
 *
 * The backends (metastore_file.c, metastore_etcd.c) sit behind the small
 * vtable in metastore_backend.h and only move bytes. Everything the callers
 * rely on regardless of backend lives here, once: which URL means what, which
 * keys are legal, that a shared handle is safe across threads, that lists
 * come back sorted, and that a failed get leaves *value NULL. */
#include "state/metastore.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/percent.h"
#include "state/metastore_backend.h"
#include "state/metastore_lease.h"

#define DEFAULT_TIMEOUT_MS 3000L
#define MAX_TIMEOUT_MS 600000L
#define ETCD_DEFAULT_PORT "2379"

struct eddy_metastore {
    char *url; /* as given to open */
    const eddy_metastore_ops_t *ops;
    void *impl;
    pthread_mutex_t lock;
};

/* ---- validation ---------------------------------------------------------- */

/* 0 when s is acceptable as a key (allow_empty == 0) or prefix. */
static int check_key(const char *what, const char *s, int allow_empty, eddy_err_t *err)
{
    if (!s)
        return allow_empty ? 0 : eddy_err_set(err, "%s is NULL", what);
    size_t n = strnlen(s, EDDY_METASTORE_KEY_MAX + 1);
    if (n == 0 && !allow_empty)
        return eddy_err_set(err, "%s is empty", what);
    if (n > EDDY_METASTORE_KEY_MAX)
        return eddy_err_set(err, "%s \"%.40s...\" is longer than %d bytes", what, s,
                            EDDY_METASTORE_KEY_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e)
            return eddy_err_set(err, "%s \"%.*s\" has byte 0x%02x at offset %zu; only "
                                "printable ASCII is allowed", what, (int)(i < 200 ? i : 200),
                                s, c, i);
    }
    return 0;
}

int eddy_metastore_key_check(const char *key, eddy_err_t *err)
{
    return check_key("metastore key", key, 0, err);
}

/* ---- URL parsing --------------------------------------------------------- */

typedef enum { TARGET_FILE, TARGET_ETCD } target_kind_t;

typedef struct {
    target_kind_t kind;
    char *target;    /* file: directory path; etcd: base URL "http://host:port" */
    long timeout_ms; /* etcd only */
} target_t;

/* Decodes %XX escapes of a file URL path into a new string. */
static char *percent_decode_path(const char *url, const char *s, eddy_err_t *err)
{
    int bad_escape;
    char *out = eddy_percent_decode(s, strlen(s), &bad_escape);
    if (!out && bad_escape)
        eddy_err_set(err, "metastore URL '%s': bad %% escape in path", url);
    else if (!out)
        eddy_err_set(err, "out of memory");
    return out;
}

static int parse_file_url(const char *url, const char *rest, target_t *t, eddy_err_t *err)
{
    const char *path;
    if (rest[0] == '/')
        path = rest;
    else if (strncasecmp(rest, "localhost/", 10) == 0)
        path = rest + 9;
    else
        return eddy_err_set(err, "metastore URL '%s': a file URL must look like "
                            "file:///abs/dir (or file://localhost/abs/dir)", url);
    if (strpbrk(path, "?#"))
        return eddy_err_set(err, "metastore URL '%s': a file URL has no query or fragment "
                            "(write '?' as %%3F and '#' as %%23)", url);
    t->kind = TARGET_FILE;
    t->target = percent_decode_path(url, path, err);
    return t->target ? 0 : -1;
}

static int parse_timeout_query(const char *url, const char *q, long *timeout_ms,
                               eddy_err_t *err)
{
    static const char name[] = "timeout_ms=";
    if (strncmp(q, name, sizeof name - 1) != 0)
        return eddy_err_set(err, "metastore URL '%s': unknown query; the only option is "
                            "?timeout_ms=N", url);
    const char *num = q + sizeof name - 1;
    if (!isdigit((unsigned char)num[0]))
        return eddy_err_set(err, "metastore URL '%s': timeout_ms needs a number", url);
    errno = 0;
    char *end;
    long v = strtol(num, &end, 10);
    if (errno || *end != '\0' || v < 1 || v > MAX_TIMEOUT_MS)
        return eddy_err_set(err, "metastore URL '%s': timeout_ms must be 1..%ld", url,
                            MAX_TIMEOUT_MS);
    *timeout_ms = v;
    return 0;
}

/* Checks HOST[:PORT] (HOST a name, IPv4 or [IPv6]); sets *has_port. */
static int check_authority(const char *url, const char *a, size_t n, int *has_port,
                           eddy_err_t *err)
{
    if (n == 0)
        return eddy_err_set(err, "metastore URL '%s': no host", url);
    if (memchr(a, '@', n))
        return eddy_err_set(err, "metastore URL '%s': user info is not supported", url);
    if (memchr(a, ',', n))
        return eddy_err_set(err, "metastore URL '%s': only one etcd endpoint is supported",
                            url);
    size_t host_end;
    if (a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (!close || close == a + 1)
            return eddy_err_set(err, "metastore URL '%s': bad [IPv6] host", url);
        for (const char *p = a + 1; p < close; p++)
            if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
                return eddy_err_set(err, "metastore URL '%s': bad [IPv6] host", url);
        host_end = (size_t)(close - a) + 1;
    } else {
        host_end = 0;
        while (host_end < n && a[host_end] != ':') {
            unsigned char c = (unsigned char)a[host_end];
            if (!isalnum(c) && c != '.' && c != '-' && c != '_')
                return eddy_err_set(err, "metastore URL '%s': bad character in host", url);
            host_end++;
        }
        if (host_end == 0)
            return eddy_err_set(err, "metastore URL '%s': no host", url);
    }
    *has_port = 0;
    if (host_end == n)
        return 0;
    if (a[host_end] != ':' || host_end + 1 == n)
        return eddy_err_set(err, "metastore URL '%s': bad port", url);
    long port = 0;
    for (size_t i = host_end + 1; i < n; i++) {
        if (!isdigit((unsigned char)a[i]) || port > 65535)
            return eddy_err_set(err, "metastore URL '%s': bad port", url);
        port = port * 10 + (a[i] - '0');
    }
    if (port < 1 || port > 65535)
        return eddy_err_set(err, "metastore URL '%s': port must be 1..65535", url);
    *has_port = 1;
    return 0;
}

static int parse_etcd_url(const char *url, const char *scheme, const char *rest, target_t *t,
                          eddy_err_t *err)
{
    if (strchr(rest, '#'))
        return eddy_err_set(err, "metastore URL '%s': a fragment is not supported", url);
    const char *query = strchr(rest, '?');
    size_t before_query = query ? (size_t)(query - rest) : strlen(rest);
    size_t auth_len = strcspn(rest, "/?");
    const char *path = rest + auth_len;
    size_t path_len = before_query - auth_len;
    if (!(path_len == 0 || (path_len == 1 && path[0] == '/')))
        return eddy_err_set(err, "metastore URL '%s': no path is allowed after host:port",
                            url);
    t->timeout_ms = DEFAULT_TIMEOUT_MS;
    if (query && parse_timeout_query(url, query + 1, &t->timeout_ms, err) < 0)
        return -1;
    int has_port;
    if (check_authority(url, rest, auth_len, &has_port, err) < 0)
        return -1;
    int is_etcd = strcmp(scheme, "etcd") == 0;
    const char *http = is_etcd ? "http" : scheme;
    const char *port = is_etcd && !has_port ? ":" ETCD_DEFAULT_PORT : "";
    size_t need = strlen(http) + 3 + auth_len + strlen(port) + 1;
    t->target = malloc(need);
    if (!t->target)
        return eddy_err_set(err, "out of memory");
    snprintf(t->target, need, "%s://%.*s%s", http, (int)auth_len, rest, port);
    t->kind = TARGET_ETCD;
    return 0;
}

static int parse_url(const char *url, target_t *t, eddy_err_t *err)
{
    memset(t, 0, sizeof *t);
    if (!url || !url[0])
        return eddy_err_set(err, "metastore URL is empty");
    const char *sep = strstr(url, "://");
    static const char *const schemes[] = {"file:", "etcd:", "http:", "https:"};
    for (size_t i = 0; !sep && i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncasecmp(url, schemes[i], strlen(schemes[i])) == 0)
            return eddy_err_set(err, "metastore URL '%s': missing '//' after the scheme "
                                "(file:///abs/dir, etcd://host:port; write ./%s for a "
                                "directory)", url, url);
    if (!sep) {
        t->kind = TARGET_FILE;
        t->target = strdup(url);
        return t->target ? 0 : eddy_err_set(err, "out of memory");
    }
    char scheme[8];
    size_t slen = (size_t)(sep - url);
    if (slen == 0 || slen >= sizeof scheme)
        goto unsupported;
    for (size_t i = 0; i < slen; i++)
        scheme[i] = (char)tolower((unsigned char)url[i]);
    scheme[slen] = '\0';
    if (strcmp(scheme, "file") == 0)
        return parse_file_url(url, sep + 3, t, err);
    if (strcmp(scheme, "etcd") == 0 || strcmp(scheme, "http") == 0 ||
        strcmp(scheme, "https") == 0)
        return parse_etcd_url(url, scheme, sep + 3, t, err);
unsupported:
    return eddy_err_set(err, "metastore URL '%s': unsupported scheme (want file:///dir, "
                        "etcd://host:port, http://host:port, https://host:port or a "
                        "plain directory path)", url);
}

/* ---- public API ---------------------------------------------------------- */

static bool tls_set(const eddy_metastore_tls_t *tls)
{
    return tls && (tls->ca_file || tls->cert_file || tls->key_file);
}

/* The TLS settings make sense for this target and their files can be used:
 * a mistake here is a clear error at open, not a handshake failure later. */
static int check_tls(const char *url, const target_t *t, const eddy_metastore_tls_t *tls,
                     eddy_err_t *err)
{
    if (!tls_set(tls))
        return 0;
    if (t->kind != TARGET_ETCD || strncmp(t->target, "https://", 8))
        return eddy_err_set(err, "metastore URL '%s': TLS settings (CA, client certificate, "
                            "key) need an https:// etcd URL", url);
    if (!tls->cert_file != !tls->key_file)
        return eddy_err_set(err, "etcd TLS: a client certificate and its key go together (%s "
                            "given without the %s)", tls->cert_file ? "certificate" : "key",
                            tls->cert_file ? "key" : "certificate");
    const char *files[] = {tls->ca_file, tls->cert_file, tls->key_file};
    static const char *const what[] = {"CA file", "client certificate", "client key"};
    for (size_t i = 0; i < 3; i++) {
        if (!files[i])
            continue;
        struct stat st;
        if (stat(files[i], &st) < 0 || access(files[i], R_OK) < 0)
            return eddy_err_set(err, "etcd TLS %s %s: %s", what[i], files[i], strerror(errno));
        if (!S_ISREG(st.st_mode))
            return eddy_err_set(err, "etcd TLS %s %s is not a regular file", what[i], files[i]);
        if (i == 2 && (st.st_mode & 007))
            return eddy_err_set(err, "etcd TLS client key %s is accessible by others (mode %04o): "
                                "a private key must be private, chmod 600 it", files[i],
                                (unsigned)(st.st_mode & 07777));
    }
    return 0;
}

eddy_metastore_t *eddy_metastore_open(const char *url, eddy_err_t *err)
{
    return eddy_metastore_open_tls(url, NULL, err);
}

eddy_metastore_t *eddy_metastore_open_tls(const char *url, const eddy_metastore_tls_t *tls,
                                          eddy_err_t *err)
{
    return eddy_metastore_open_probe(url, tls, NULL, err);
}

eddy_metastore_t *eddy_metastore_open_probe(const char *url, const eddy_metastore_tls_t *tls,
                                            bool *unreachable, eddy_err_t *err)
{
    if (unreachable)
        *unreachable = false;
    target_t t;
    if (parse_url(url, &t, err) < 0)
        return NULL;
    if (check_tls(url, &t, tls, err) < 0) {
        free(t.target);
        return NULL;
    }
    eddy_metastore_t *self = calloc(1, sizeof *self);
    if (!self || !(self->url = strdup(url))) {
        free(self);
        free(t.target);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    if (t.kind == TARGET_FILE) {
        self->ops = &eddy_metastore_file_ops;
        self->impl = eddy_metastore_file_open(t.target, err);
    } else {
        self->ops = &eddy_metastore_etcd_ops;
        self->impl = eddy_metastore_etcd_open(t.target, url, t.timeout_ms,
                                              tls_set(tls) ? tls : NULL, unreachable, err);
    }
    free(t.target);
    if (!self->impl) {
        free(self->url);
        free(self);
        return NULL;
    }
    pthread_mutex_init(&self->lock, NULL);
    return self;
}

void eddy_metastore_destroy(eddy_metastore_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_metastore_t *self = *self_p;
    self->ops->destroy(&self->impl);
    pthread_mutex_destroy(&self->lock);
    free(self->url);
    free(self);
    *self_p = NULL;
}

const char *eddy_metastore_url(const eddy_metastore_t *self)
{
    return self ? self->url : NULL;
}

int eddy_metastore_lock(eddy_metastore_t *self, eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "metastore lock: no store");
    if (!self->ops->lock)
        return 0;
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->lock(self->impl, err);
    pthread_mutex_unlock(&self->lock);
    return rc;
}

/* Prefixes a backend's cause with the store and operation. */
static int fail(eddy_metastore_t *self, const char *op, const char *key, eddy_err_t *err)
{
    return eddy_err_wrap(err, "%s store %s: %s \"%.120s\"", self->ops->name, self->url, op,
                         key);
}

int eddy_metastore_put(eddy_metastore_t *self, const char *key, const void *value, size_t len,
                       eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "metastore put: no store");
    if (check_key("metastore key", key, 0, err) < 0)
        return -1;
    if (!value && len > 0)
        return eddy_err_set(err, "metastore put \"%s\": NULL value with length %zu", key, len);
    if (len > SIZE_MAX / 2)
        return eddy_err_set(err, "metastore put \"%s\": value too large", key);
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->put(self->impl, key, value ? value : "", len, err);
    pthread_mutex_unlock(&self->lock);
    return rc < 0 ? fail(self, "put", key, err) : 0;
}

int eddy_metastore_get(eddy_metastore_t *self, const char *key, char **value, size_t *len,
                       eddy_err_t *err)
{
    if (value)
        *value = NULL;
    if (len)
        *len = 0;
    if (!self)
        return eddy_err_set(err, "metastore get: no store");
    if (check_key("metastore key", key, 0, err) < 0)
        return -1;
    char *v = NULL;
    size_t n = 0;
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->get(self->impl, key, &v, &n, err);
    pthread_mutex_unlock(&self->lock);
    if (rc < 0)
        return fail(self, "get", key, err);
    if (rc == 0)
        return 0;
    if (value)
        *value = v;
    else
        free(v);
    if (len)
        *len = n;
    return 1;
}

int eddy_metastore_delete(eddy_metastore_t *self, const char *key, eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "metastore delete: no store");
    if (check_key("metastore key", key, 0, err) < 0)
        return -1;
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->del(self->impl, key, err);
    pthread_mutex_unlock(&self->lock);
    return rc < 0 ? fail(self, "delete", key, err) : 0;
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(((const eddy_kv_t *)a)->key, ((const eddy_kv_t *)b)->key);
}

int eddy_metastore_list(eddy_metastore_t *self, const char *prefix, eddy_kv_list_t *out,
                        eddy_err_t *err)
{
    if (!out)
        return eddy_err_set(err, "metastore list: no output list");
    out->items = NULL;
    out->count = 0;
    if (!self)
        return eddy_err_set(err, "metastore list: no store");
    if (!prefix)
        prefix = "";
    if (check_key("metastore prefix", prefix, 1, err) < 0)
        return -1;
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->list(self->impl, prefix, out, err);
    pthread_mutex_unlock(&self->lock);
    if (rc < 0) {
        eddy_kv_list_clear(out);
        return fail(self, "list", prefix, err);
    }
    if (out->count > 1)
        qsort(out->items, out->count, sizeof *out->items, cmp_kv);
    return 0;
}

void eddy_kv_list_clear(eddy_kv_list_t *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].key);
        free(list->items[i].value);
    }
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

int eddy_kv_list_push(eddy_kv_list_t *list, size_t *cap, char *key, char *value, size_t len,
                      eddy_err_t *err)
{
    if (list->count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        eddy_kv_t *items = ncap < SIZE_MAX / sizeof *items
                               ? realloc(list->items, ncap * sizeof *items)
                               : NULL;
        if (!items) {
            free(key);
            free(value);
            return eddy_err_set(err, "out of memory");
        }
        list->items = items;
        *cap = ncap;
    }
    list->items[list->count].key = key;
    list->items[list->count].value = value;
    list->items[list->count].value_len = len;
    list->count++;
    return 0;
}

/* ---- leases (metastore_lease.h) ------------------------------------------ */

bool eddy_metastore_has_leases(const eddy_metastore_t *self)
{
    return self && self->ops->lease_grant;
}

static int fail_op(eddy_metastore_t *self, const char *op, eddy_err_t *err)
{
    return eddy_err_wrap(err, "%s store %s: %s", self->ops->name, self->url, op);
}

static int no_leases(eddy_metastore_t *self, eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "metastore: no store");
    return eddy_err_set(err, "%s store %s has no leases (leader election needs etcd://)",
                        self->ops->name, self->url);
}

int eddy_metastore_lease_grant(eddy_metastore_t *self, uint32_t ttl_s, int64_t *lease,
                               eddy_err_t *err)
{
    if (!eddy_metastore_has_leases(self))
        return no_leases(self, err);
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->lease_grant(self->impl, ttl_s, lease, err);
    pthread_mutex_unlock(&self->lock);
    return rc < 0 ? fail_op(self, "lease grant", err) : rc;
}

int eddy_metastore_lease_keepalive(eddy_metastore_t *self, int64_t lease, int64_t *ttl_s,
                                   eddy_err_t *err)
{
    if (!eddy_metastore_has_leases(self))
        return no_leases(self, err);
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->lease_keepalive(self->impl, lease, ttl_s, err);
    pthread_mutex_unlock(&self->lock);
    return rc < 0 ? fail_op(self, "lease keepalive", err) : rc;
}

int eddy_metastore_lease_revoke(eddy_metastore_t *self, int64_t lease, eddy_err_t *err)
{
    if (!eddy_metastore_has_leases(self))
        return no_leases(self, err);
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->lease_revoke(self->impl, lease, err);
    pthread_mutex_unlock(&self->lock);
    return rc < 0 ? fail_op(self, "lease revoke", err) : rc;
}

int eddy_metastore_create_leased(eddy_metastore_t *self, const char *key, const void *value,
                                 size_t len, int64_t lease, int64_t *create_rev, char **holder,
                                 eddy_err_t *err)
{
    if (holder)
        *holder = NULL;
    *create_rev = 0;
    if (!eddy_metastore_has_leases(self))
        return no_leases(self, err);
    if (check_key("metastore key", key, 0, err) < 0)
        return -1;
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->create_leased(self->impl, key, value ? value : "", len, lease,
                                      create_rev, holder, err);
    pthread_mutex_unlock(&self->lock);
    return rc < 0 ? fail(self, "create", key, err) : rc;
}

int eddy_metastore_put_leased(eddy_metastore_t *self, const char *key, const void *value,
                              size_t len, int64_t lease, eddy_err_t *err)
{
    if (!eddy_metastore_has_leases(self))
        return no_leases(self, err);
    if (check_key("metastore key", key, 0, err) < 0)
        return -1;
    if (!value && len > 0)
        return eddy_err_set(err, "metastore put \"%s\": NULL value with length %zu", key, len);
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->put_leased(self->impl, key, value ? value : "", len, lease, err);
    pthread_mutex_unlock(&self->lock);
    return rc < 0 ? fail(self, "put", key, err) : 0;
}

int eddy_metastore_get_rev(eddy_metastore_t *self, const char *key, char **value, size_t *len,
                           int64_t *create_rev, eddy_err_t *err)
{
    *create_rev = 0;
    if (value)
        *value = NULL;
    if (len)
        *len = 0;
    if (!eddy_metastore_has_leases(self))
        return no_leases(self, err);
    if (check_key("metastore key", key, 0, err) < 0)
        return -1;
    char *v = NULL;
    size_t n = 0;
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->get_rev(self->impl, key, &v, &n, create_rev, err);
    pthread_mutex_unlock(&self->lock);
    if (rc < 0)
        return fail(self, "get", key, err);
    if (value)
        *value = v;
    else
        free(v);
    if (len)
        *len = n;
    return rc;
}

int eddy_metastore_set_fence(eddy_metastore_t *self, const char *key, int64_t create_rev,
                             eddy_err_t *err)
{
    if (!eddy_metastore_has_leases(self))
        return no_leases(self, err);
    if (check_key("metastore key", key, 0, err) < 0)
        return -1;
    pthread_mutex_lock(&self->lock);
    int rc = self->ops->set_fence(self->impl, key, create_rev, err);
    pthread_mutex_unlock(&self->lock);
    return rc;
}
