/* object_store.c - URI parsing, key validation and dispatch to the file and
 * S3 backends (see object_store.h).
 *
 * Everything the backends share lives here: the key rules, the defaults of
 * eddy_object_store_opts_t, and the store's URI in front of every message,
 * so that "object store s3://b/p: ..." says which store failed however deep
 * the cause. */
#include "state/object_store.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/percent.h"
#include "state/object_store_backend.h"

#define DEFAULT_TIMEOUT_MS 30000L
#define DEFAULT_MAX_ATTEMPTS 5
#define DEFAULT_BACKOFF_MS 100L
#define MIN_PART_SIZE ((size_t)5 << 20)          /* S3's minimum (but the last part) */
#define MAX_PART_SIZE ((size_t)5 << 30)          /* S3's maximum */
#define DEFAULT_PART_SIZE ((size_t)8 << 20)
#define DEFAULT_MULTIPART_THRESHOLD ((size_t)16 << 20)
#define DEFAULT_LIST_PAGE 1000
#define DEFAULT_MAX_OBJECT ((size_t)2 << 30)
#define DEFAULT_REGION "us-east-1"

struct eddy_object_store {
    char *uri;
    const eddy_object_store_ops_t *ops;
    void *impl;
};

/* ---- keys ---------------------------------------------------------------- */

static bool key_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-' || c == '/';
}

/* partial: a prefix (may be empty, may end in '/'). */
static int check_path(const char *what, const char *s, bool partial, eddy_err_t *err)
{
    if (!s)
        return eddy_err_set(err, "%s is missing", what);
    size_t len = strlen(s);
    if (len == 0 && !partial)
        return eddy_err_set(err, "%s is empty", what);
    if (len > EDDY_OBJECT_STORE_KEY_MAX)
        return eddy_err_set(err, "%s \"%.60s...\" is longer than %d bytes", what, s,
                            EDDY_OBJECT_STORE_KEY_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!key_char(c))
            return eddy_err_set(err,
                                "%s \"%.200s\": byte 0x%02x at offset %zu is not in "
                                "[A-Za-z0-9._-/]",
                                what, s, c, i);
    }
    if (len && s[0] == '/')
        return eddy_err_set(err, "%s \"%.200s\" starts with '/' (keys are relative)", what, s);
    if (!partial && s[len - 1] == '/')
        return eddy_err_set(err, "%s \"%.200s\" ends with '/'", what, s);
    for (const char *seg = s; *seg;) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        if (n == 0)
            return eddy_err_set(err, "%s \"%.200s\" has an empty segment (\"//\")", what, s);
        if (n > EDDY_OBJECT_STORE_SEGMENT_MAX)
            return eddy_err_set(err, "%s \"%.60s...\": segment \"%.20s...\" is longer than %d bytes",
                                what, s, seg, EDDY_OBJECT_STORE_SEGMENT_MAX);
        if (seg[0] == '.')
            return eddy_err_set(err,
                                "%s \"%.200s\": segment \"%.*s\" starts with '.' (no \".\", "
                                "\"..\" or hidden names)",
                                what, s, (int)(n > 64 ? 64 : n), seg);
        if (!end)
            break;
        seg = end + 1;
    }
    return 0;
}

int eddy_object_store_check_key(const char *key, eddy_err_t *err)
{
    return check_path("key", key, false, err);
}

int eddy_object_store_check_prefix(const char *prefix, eddy_err_t *err)
{
    return check_path("prefix", prefix, true, err);
}

/* ---- URIs ---------------------------------------------------------------- */

static bool valid_bucket(const char *b)
{
    size_t n = strlen(b);
    if (n < 3 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '.' && c != '-')
            return false;
        if (!alnum && (i == 0 || i == n - 1))
            return false;
    }
    return true;
}

static bool valid_region(const char *r)
{
    size_t n = strlen(r);
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') || r[i] == '-'))
            return false;
    return true;
}

/* Checks an endpoint URL and copies it without trailing '/'. */
static char *clean_endpoint(const char *e, eddy_err_t *err)
{
    if (strncmp(e, "http://", 7) != 0 && strncmp(e, "https://", 8) != 0) {
        eddy_err_set(err, "endpoint \"%.200s\" is not an http:// or https:// URL", e);
        return NULL;
    }
    const char *host = strstr(e, "://") + 3;
    if (!*host || *host == '/') {
        eddy_err_set(err, "endpoint \"%.200s\" has no host", e);
        return NULL;
    }
    for (const char *p = e; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == '?' || *p == '#' || *p == '@' ||
            (unsigned char)*p >= 0x7f) {
            eddy_err_set(err, "endpoint \"%.200s\" has a character that is not allowed ('%c')",
                         e, *p > ' ' && *p < 0x7f ? *p : '?');
            return NULL;
        }
    size_t n = strlen(e);
    while (n > 0 && e[n - 1] == '/')
        n--;
    char *out = strndup(e, n);
    if (!out)
        eddy_err_set(err, "out of memory");
    return out;
}

typedef struct {
    char *bucket, *prefix, *endpoint, *region;
} s3_uri_t;

static void s3_uri_clear(s3_uri_t *u)
{
    free(u->bucket);
    free(u->prefix);
    free(u->endpoint);
    free(u->region);
    memset(u, 0, sizeof *u);
}

/* s3://BUCKET[/PREFIX][?endpoint=URL&region=R]; opts_endpoint overrides. */
static int parse_s3(const char *uri, const char *opts_endpoint, s3_uri_t *u, eddy_err_t *err)
{
    const char *p = uri + 5; /* after "s3://" */
    const char *q = strchr(p, '?');
    size_t path_len = q ? (size_t)(q - p) : strlen(p);
    const char *slash = memchr(p, '/', path_len);
    size_t blen = slash ? (size_t)(slash - p) : path_len;
    u->bucket = strndup(p, blen);
    if (!u->bucket)
        return eddy_err_set(err, "out of memory");
    if (!valid_bucket(u->bucket))
        return eddy_err_set(err,
                            "bucket \"%.100s\" is not a valid S3 bucket name (3-63 characters of "
                            "[a-z0-9.-], starting and ending with a letter or digit)",
                            u->bucket);
    size_t plen = slash ? path_len - blen - 1 : 0;
    while (plen > 0 && slash[plen] == '/') /* trailing slashes of the prefix */
        plen--;
    u->prefix = strndup(slash ? slash + 1 : "", plen);
    if (!u->prefix)
        return eddy_err_set(err, "out of memory");
    if (plen && eddy_object_store_check_key(u->prefix, err) < 0)
        return eddy_err_wrap(err, "bad prefix");
    char *endpoint = NULL, *region = NULL;
    for (const char *it = q ? q + 1 : NULL; it && *it;) {
        const char *amp = strchr(it, '&');
        size_t n = amp ? (size_t)(amp - it) : strlen(it);
        const char *eq = memchr(it, '=', n);
        size_t nlen = eq ? (size_t)(eq - it) : n;
        char **slot = NULL;
        if (nlen == 8 && !strncmp(it, "endpoint", 8))
            slot = &endpoint;
        else if (nlen == 6 && !strncmp(it, "region", 6))
            slot = &region;
        if (n == 0) {
            /* "&&" or a trailing '&': nothing */
        } else if (!slot || !eq) {
            free(endpoint);
            free(region);
            return eddy_err_set(err, "unknown query parameter \"%.*s\" (want endpoint=URL, "
                                "region=R)", (int)(nlen > 60 ? 60 : nlen), it);
        } else {
            free(*slot);
            int bad_escape;
            *slot = eddy_percent_decode(eq + 1, n - nlen - 1, &bad_escape);
            if (!*slot) {
                free(endpoint);
                free(region);
                return eddy_err_set(err, "bad %%-escape or out of memory in \"%.*s\"",
                                    (int)(n > 100 ? 100 : n), it);
            }
        }
        it = amp ? amp + 1 : NULL;
    }
    u->region = region ? region : strdup(DEFAULT_REGION);
    if (!u->region) {
        free(endpoint);
        return eddy_err_set(err, "out of memory");
    }
    if (!valid_region(u->region)) {
        free(endpoint);
        return eddy_err_set(err, "region \"%.60s\" is not a region name ([a-z0-9-])", u->region);
    }
    const char *e = opts_endpoint && *opts_endpoint ? opts_endpoint : endpoint;
    if (e) {
        u->endpoint = clean_endpoint(e, err);
    } else {
        size_t n = strlen(u->region) + 40;
        u->endpoint = malloc(n);
        if (u->endpoint)
            snprintf(u->endpoint, n, "https://s3.%s.amazonaws.com", u->region);
        else
            eddy_err_set(err, "out of memory");
    }
    free(endpoint);
    return u->endpoint ? 0 : -1;
}

static int resolve_opts(const eddy_object_store_opts_t *in, eddy_object_store_opts_t *o,
                        eddy_err_t *err)
{
    *o = in ? *in : (eddy_object_store_opts_t){0};
    if (o->timeout_ms < 0 || o->max_attempts < 0 || o->backoff_ms < 0 || o->list_page_size < 0)
        return eddy_err_set(err, "options: negative timeout, attempts, backoff or page size");
    if (!o->timeout_ms)
        o->timeout_ms = DEFAULT_TIMEOUT_MS;
    if (!o->max_attempts)
        o->max_attempts = DEFAULT_MAX_ATTEMPTS;
    if (!o->backoff_ms)
        o->backoff_ms = DEFAULT_BACKOFF_MS;
    if (!o->part_size)
        o->part_size = DEFAULT_PART_SIZE;
    if (!o->multipart_threshold)
        o->multipart_threshold = DEFAULT_MULTIPART_THRESHOLD;
    if (!o->list_page_size)
        o->list_page_size = DEFAULT_LIST_PAGE;
    if (!o->max_object_bytes)
        o->max_object_bytes = DEFAULT_MAX_OBJECT;
    if (o->part_size < MIN_PART_SIZE || o->part_size > MAX_PART_SIZE)
        return eddy_err_set(err, "options: part size %zu is outside S3's 5 MiB .. 5 GiB",
                            o->part_size);
    if (o->list_page_size > 1000)
        return eddy_err_set(err, "options: list page size %d is above S3's 1000",
                            o->list_page_size);
    if (o->max_attempts > 100)
        return eddy_err_set(err, "options: %d attempts per request is too many (at most 100)",
                            o->max_attempts);
    return 0;
}

/* ---- public API ---------------------------------------------------------- */

eddy_object_store_t *eddy_object_store_open(const char *uri, const eddy_object_store_opts_t *opts,
                                            eddy_err_t *err)
{
    if (!uri || !*uri) {
        eddy_err_set(err, "object store: the URI is empty (want file:///DIR or "
                     "s3://BUCKET/PREFIX?endpoint=URL&region=R)");
        return NULL;
    }
    eddy_object_store_opts_t o;
    eddy_object_store_t *self = calloc(1, sizeof *self);
    if (!self || !(self->uri = strdup(uri))) {
        free(self);
        eddy_err_set(err, "object store: out of memory");
        return NULL;
    }
    if (resolve_opts(opts, &o, err) < 0)
        goto fail;
    if (!strncmp(uri, "file://", 7)) {
        const char *path = uri + 7;
        if (!strncmp(path, "localhost/", 10))
            path += 9;
        if (path[0] != '/') {
            eddy_err_set(err, "want file:///ABSOLUTE/DIR (a file URI has no host)");
            goto fail;
        }
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/')
            n--;
        char *dir = strndup(path, n);
        if (!dir) {
            eddy_err_set(err, "out of memory");
            goto fail;
        }
        self->ops = &eddy_object_store_file_ops;
        self->impl = eddy_object_store_file_open(dir, &o, err);
        free(dir);
    } else if (!strncmp(uri, "s3://", 5)) {
        s3_uri_t u = {0};
        if (parse_s3(uri, o.endpoint, &u, err) < 0) {
            s3_uri_clear(&u);
            goto fail;
        }
        eddy_s3_location_t loc = {.bucket = u.bucket, .prefix = u.prefix,
                                  .endpoint = u.endpoint, .region = u.region};
        self->ops = &eddy_object_store_s3_ops;
        self->impl = eddy_object_store_s3_open(&loc, &o, err);
        s3_uri_clear(&u);
    } else {
        eddy_err_set(err, "unsupported scheme (want file:///DIR or "
                     "s3://BUCKET/PREFIX?endpoint=URL&region=R)");
        goto fail;
    }
    if (self->impl)
        return self;
fail:
    eddy_err_wrap(err, "object store %.200s", uri);
    eddy_object_store_destroy(&self);
    return NULL;
}

void eddy_object_store_destroy(eddy_object_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_object_store_t *self = *self_p;
    if (self->impl)
        self->ops->destroy(&self->impl);
    free(self->uri);
    free(self);
    *self_p = NULL;
}

const char *eddy_object_store_uri(const eddy_object_store_t *self)
{
    return self->uri;
}

int eddy_object_store_put(eddy_object_store_t *self, const char *key, const void *data, size_t len,
                          eddy_err_t *err)
{
    if (eddy_object_store_check_key(key, err) < 0 ||
        (!data && len && eddy_err_set(err, "NULL data of %zu bytes for %s", len, key) < 0) ||
        self->ops->put(self->impl, key, data, len, err) < 0)
        return eddy_err_wrap(err, "object store %.200s: put", self->uri);
    return 0;
}

int eddy_object_store_get(eddy_object_store_t *self, const char *key, char **data, size_t *len,
                          eddy_err_t *err)
{
    if (!data || !len)
        return eddy_err_set(err, "object store %.200s: get: NULL output", self->uri);
    *data = NULL;
    *len = 0;
    if (eddy_object_store_check_key(key, err) < 0)
        return eddy_err_wrap(err, "object store %.200s: get", self->uri);
    int rc = self->ops->get(self->impl, key, data, len, err);
    if (rc < 0) {
        *data = NULL;
        *len = 0;
        return eddy_err_wrap(err, "object store %.200s: get", self->uri);
    }
    return rc;
}

int eddy_object_store_delete(eddy_object_store_t *self, const char *key, eddy_err_t *err)
{
    if (eddy_object_store_check_key(key, err) < 0 || self->ops->del(self->impl, key, err) < 0)
        return eddy_err_wrap(err, "object store %.200s: delete", self->uri);
    return 0;
}

int eddy_object_store_list(eddy_object_store_t *self, const char *prefix,
                           eddy_object_store_list_fn fn, void *ctx, eddy_err_t *err)
{
    if (!fn)
        return eddy_err_set(err, "object store %.200s: list: no callback", self->uri);
    if (!prefix)
        prefix = "";
    if (eddy_object_store_check_prefix(prefix, err) < 0)
        return eddy_err_wrap(err, "object store %.200s: list", self->uri);
    int rc = self->ops->list(self->impl, prefix, fn, ctx, err);
    if (rc < 0)
        return eddy_err_wrap(err, "object store %.200s: list", self->uri);
    return rc;
}
