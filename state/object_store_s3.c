/* object_store_s3.c - the object store on the S3 API (AWS S3 or any
 * compatible service), over libcurl (see object_store.h).
 *
 * Requests are path-style, ENDPOINT/BUCKET/PREFIX/KEY, signed with libcurl's
 * SigV4 (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3", key id and secret as user
 * name and password). What libcurl 7.88 (Debian 12) does and does not do,
 * checked against a SigV4 computed independently (test_object_store_s3's
 * signature_is_sigv4 keeps checking it): it signs host, x-amz-date
 * and every header we add (x-amz-content-sha256, x-amz-security-token,
 * Content-Type), takes the payload hash from our x-amz-content-sha256
 * header, and uses the path and query string exactly as given. So every
 * request carries the SHA-256 of its body (computed here), every query
 * string is built already in canonical form (parameters sorted, values
 * percent-encoded, "uploads=" rather than "uploads"), and keys need no
 * encoding (object_store.c allows only [A-Za-z0-9._-/]). We never send an
 * empty "Expect:" header: libcurl 7.88 would sign it although it is not
 * sent.
 *
 *   put    PUT /B/P/K, or above the threshold CreateMultipartUpload
 *          (POST ?uploads=), UploadPart (PUT ?partNumber=N&uploadId=U) per
 *          part, CompleteMultipartUpload (POST ?uploadId=U, XML list of
 *          ETags; a 200 whose body is an <Error> is an error), and
 *          AbortMultipartUpload (DELETE ?uploadId=U) when anything failed
 *   get    GET /B/P/K (404 NoSuchKey: absent)
 *   delete DELETE /B/P/K (S3 answers 204 whether or not it existed)
 *   list   GET /B?continuation-token=T&list-type=2&max-keys=N&prefix=P/X,
 *          page after page while IsTruncated
 * Each request is tried up to max_attempts times, waiting backoff_ms,
 * doubling, at most 5 s, after transport errors (refused, reset, timed
 * out), HTTP 5xx, 429 and RequestTimeout; anything else fails at once. The
 * answers are XML, of which we need a handful of elements (Code, Message,
 * UploadId, Key, Size, IsTruncated, NextContinuationToken): a small
 * extractor below does that, with entity decoding, instead of an XML
 * library. Bodies are bounded: objects by max_object_bytes, anything else
 * by XML_BODY_MAX.
 *
 * One curl easy handle per store, reused (keep-alive) and reset before each
 * request; a mutex serializes the store's calls. Proxies from the
 * environment are ignored, as for etcd. The secret stays in this struct and
 * libcurl; messages name only the access key id. */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "state/curl_util.h"
#include "state/object_store_backend.h"

#define XML_BODY_MAX ((size_t)16 << 20)
#define BACKOFF_CAP_MS 5000L
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MAX_PARTS 10000

typedef struct {
    pthread_mutex_t lock;
    CURL *curl;
    char *endpoint, *bucket, *prefix, *region;
    char *key_id, *secret, *token;
    char sigv4[80];
    eddy_object_store_opts_t o;
    char curl_err[CURL_ERROR_SIZE];
} s3_store_t;

/* ---- small helpers ------------------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!EVP_Digest(len ? data : "", len, md, &n, EVP_sha256(), NULL) || n != 32)
        return -1;
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* RFC 3986 percent-encoding of everything but unreserved characters, as
 * SigV4 wants query values. malloc'd; NULL when out of memory. */
static char *pct_encode(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            *o++ = (char)c;
        } else {
            snprintf(o, 4, "%%%02X", c);
            o += 3;
        }
    }
    *o = '\0';
    return out;
}

/* The text of the first <tag>...</tag> at or after *from, entity-decoded,
 * into a new string; *from moves past it. NULL when absent (or no memory). */
static char *xml_text(const char *body, const char **from, const char *tag)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *start = strstr(from ? *from : body, open);
    if (!start)
        return NULL;
    start += strlen(open);
    const char *end = strstr(start, close);
    if (!end)
        return NULL;
    if (from)
        *from = end + strlen(close);
    size_t n = (size_t)(end - start);
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = start; p < end;) {
        static const struct {
            const char *name;
            char c;
        } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
        bool done = false;
        if (*p == '&') {
            for (size_t i = 0; i < sizeof ents / sizeof ents[0] && !done; i++) {
                size_t el = strlen(ents[i].name);
                if ((size_t)(end - p) >= el && !memcmp(p, ents[i].name, el)) {
                    *o++ = ents[i].c;
                    p += el;
                    done = true;
                }
            }
            if (!done && p + 2 < end && p[1] == '#') {
                char *stop;
                unsigned long v = p[2] == 'x' ? strtoul(p + 3, &stop, 16) : strtoul(p + 2, &stop, 10);
                if (stop < end && *stop == ';' && v > 0 && v < 0x80) {
                    *o++ = (char)v; /* ASCII only; others stay as written */
                    p = stop + 1;
                    done = true;
                }
            }
        }
        if (!done)
            *o++ = *p++;
    }
    *o = '\0';
    return out;
}

/* Copies a short XML element into buf ("" when absent). */
static void xml_field(const char *body, const char *tag, char *buf, size_t size)
{
    buf[0] = '\0';
    char *t = body ? xml_text(body, NULL, tag) : NULL;
    if (t) {
        snprintf(buf, size, "%s", t);
        for (char *p = buf; *p; p++)
            if (*p == '\n' || *p == '\r' || *p == '\t')
                *p = ' ';
    }
    free(t);
}

/* ---- one request --------------------------------------------------------- */

typedef struct {
    const char *method;  /* GET PUT POST DELETE HEAD */
    const char *path;    /* "/BUCKET" or "/BUCKET/OBJECT" */
    const char *query;   /* canonical query string or NULL */
    const char *body;    /* request body (PUT, POST) or NULL */
    size_t body_len;
    const char *content_type;
    size_t limit;        /* response body limit */
    bool error_in_200;   /* CompleteMultipartUpload: a 200 may carry an <Error> */
} s3_req_t;

typedef struct {
    long status;         /* HTTP status, 0 when the transfer failed */
    CURLcode curl;
    eddy_curl_body_t body;
    char etag[128];
    char code[64];       /* S3 error Code, "" if none */
    char message[200];   /* S3 error Message */
    int attempts;
} s3_resp_t;

static void resp_clear(s3_resp_t *r)
{
    free(r->body.data);
    memset(r, 0, sizeof *r);
}

typedef struct {
    const char *data;
    size_t len, off;
} cursor_t;

static size_t read_cb(char *buf, size_t size, size_t nmemb, void *userdata)
{
    cursor_t *c = userdata;
    size_t n = size * nmemb, left = c->len - c->off;
    if (n > left)
        n = left;
    memcpy(buf, c->data + c->off, n);
    c->off += n;
    return n;
}

static int seek_cb(void *userdata, curl_off_t offset, int origin)
{
    cursor_t *c = userdata;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > c->len)
        return CURL_SEEKFUNC_CANTSEEK;
    c->off = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

static size_t header_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
    s3_resp_t *r = userdata;
    size_t n = size * nitems;
    if (n > 5 && !strncasecmp(buf, "etag:", 5)) {
        const char *v = buf + 5;
        size_t vl = n - 5;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        snprintf(r->etag, sizeof r->etag, "%.*s", (int)(vl < sizeof r->etag ? vl : 0), v);
    }
    return n;
}

static bool retryable_curl(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return true;
    default:
        return false;
    }
}

static bool retryable(const s3_resp_t *r)
{
    if (r->status == 0)
        return retryable_curl(r->curl) && !r->body.too_big;
    return r->status >= 500 || r->status == 429 || !strcmp(r->code, "RequestTimeout") ||
           !strcmp(r->code, "InternalError") || !strcmp(r->code, "SlowDown");
}

/* One transfer. 0 when it got an HTTP answer (any status), -1 on a
 * transport failure (r->curl) or a local one (err). */
static int perform_once(s3_store_t *s, const s3_req_t *q, s3_resp_t *r, eddy_err_t *err)
{
    long attempts = r->attempts;
    resp_clear(r);
    r->attempts = (int)attempts;
    r->body.limit = q->limit;

    char hash[65];
    if (sha256_hex(q->body, q->body_len, hash) < 0)
        return eddy_err_set(err, "SHA-256 of the request body failed");
    size_t ulen = strlen(s->endpoint) + strlen(q->path) + (q->query ? strlen(q->query) : 0) + 2;
    char *url = malloc(ulen);
    char h_hash[100], h_type[100];
    char *h_token = NULL;
    struct curl_slist *headers = NULL, *h;
    snprintf(h_hash, sizeof h_hash, "x-amz-content-sha256: %s", hash);
    h = url ? curl_slist_append(NULL, h_hash) : NULL;
    headers = h;
    if (h && q->content_type) {
        snprintf(h_type, sizeof h_type, "Content-Type: %s", q->content_type);
        h = curl_slist_append(headers, h_type);
    }
    if (h && s->token) {
        size_t n = strlen(s->token) + 32;
        h_token = malloc(n);
        if (h_token) {
            snprintf(h_token, n, "x-amz-security-token: %s", s->token);
            h = curl_slist_append(headers, h_token);
        } else {
            h = NULL;
        }
    }
    if (!h) {
        curl_slist_free_all(headers);
        free(h_token);
        free(url);
        return eddy_err_set(err, "out of memory");
    }
    headers = h;
    snprintf(url, ulen, "%s%s%s%s", s->endpoint, q->path, q->query ? "?" : "",
             q->query ? q->query : "");

    CURL *c = s->curl;
    curl_easy_reset(c);
    s->curl_err[0] = '\0';
    cursor_t cur = {q->body ? q->body : "", q->body_len, 0};
    long stall_s = (s->o.timeout_ms + 999) / 1000;
    int bad = 0;
    bad |= curl_easy_setopt(c, CURLOPT_URL, url) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, s->o.timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_s > 0 ? stall_s : 1L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, s->curl_err) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_USERNAME, s->key_id) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_PASSWORD, s->secret) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, eddy_curl_body_collect) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HEADERDATA, r) != CURLE_OK;
    if (!strcmp(q->method, "PUT")) {
        bad |= curl_easy_setopt(c, CURLOPT_UPLOAD, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_READDATA, &cur) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, seek_cb) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_SEEKDATA, &cur) != CURLE_OK;
    } else if (!strcmp(q->method, "POST")) {
        bad |= curl_easy_setopt(c, CURLOPT_POST, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_POSTFIELDS, cur.data) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len) !=
               CURLE_OK;
    } else if (!strcmp(q->method, "HEAD")) {
        bad |= curl_easy_setopt(c, CURLOPT_NOBODY, 1L) != CURLE_OK;
    } else if (strcmp(q->method, "GET") != 0) {
        bad |= curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method) != CURLE_OK;
    }
    int rc = 0;
    if (bad) {
        rc = eddy_err_set(err, "cannot configure libcurl (needs 7.75 or later for SigV4)");
    } else {
        r->curl = curl_easy_perform(c);
        if (r->curl == CURLE_OK) {
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
            const char *b = r->body.data;
            if (b && (r->status >= 300 || (q->error_in_200 && strstr(b, "<Error>")))) {
                xml_field(b, "Code", r->code, sizeof r->code);
                xml_field(b, "Message", r->message, sizeof r->message);
                if (r->status < 300) /* a 200 with an error inside: as S3 says, a failure */
                    r->status = retryable(r) ? 500 : 400;
            }
        } else {
            rc = -1;
        }
    }
    /* the handle keeps pointers to these until the next reset */
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(c, CURLOPT_URL, "");
    curl_slist_free_all(headers);
    free(h_token);
    free(url);
    return rc;
}

/* Describes a failed request in err: what, where and why, in one line. */
static int describe(s3_store_t *s, const s3_req_t *q, const s3_resp_t *r, eddy_err_t *err)
{
    char what[160];
    snprintf(what, sizeof what, "%s %.100s%s", q->method, q->path,
             q->query && !strncmp(q->query, "uploads", 7) ? "?uploads" : "");
    char tries[40] = "";
    if (r->attempts > 1)
        snprintf(tries, sizeof tries, ", %d attempts", r->attempts);
    if (r->status == 0) {
        const char *detail = s->curl_err[0] ? s->curl_err : curl_easy_strerror(r->curl);
        if (r->body.too_big)
            return eddy_err_set(err, "%s: the answer is larger than %zu bytes", what,
                                r->body.limit);
        if (r->curl == CURLE_COULDNT_CONNECT || r->curl == CURLE_COULDNT_RESOLVE_HOST)
            return eddy_err_set(err, "S3 endpoint %.120s is unreachable (%s: %.150s%s)",
                                s->endpoint, what, detail, tries);
        if (r->curl == CURLE_OPERATION_TIMEDOUT)
            return eddy_err_set(err,
                                "S3 endpoint %.120s timed out (no progress for %ld ms; %s: "
                                "%.120s%s)",
                                s->endpoint, s->o.timeout_ms, what, detail, tries);
        return eddy_err_set(err, "S3 endpoint %.120s: transfer failed (%s: %.150s%s)",
                            s->endpoint, what, detail, tries);
    }
    const char *code = r->code[0] ? r->code : "no error code";
    if (!strcmp(r->code, "NoSuchBucket"))
        return eddy_err_set(err, "bucket \"%s\" does not exist at %.120s (HTTP %ld NoSuchBucket)",
                            s->bucket, s->endpoint, r->status);
    if (r->status == 403 || !strcmp(r->code, "InvalidAccessKeyId") ||
        !strcmp(r->code, "SignatureDoesNotMatch") || !strcmp(r->code, "ExpiredToken") ||
        !strcmp(r->code, "InvalidToken"))
        return eddy_err_set(err,
                            "S3 refused the credentials or signature for bucket \"%s\" (HTTP %ld "
                            "%s: %.120s): check AWS_ACCESS_KEY_ID (now \"%.40s\"), "
                            "AWS_SECRET_ACCESS_KEY%s and region %s (%s)",
                            s->bucket, r->status, code, r->message, s->key_id,
                            s->token ? ", AWS_SESSION_TOKEN" : "", s->region, what);
    if (r->status == 301 || !strcmp(r->code, "AuthorizationHeaderMalformed") ||
        !strcmp(r->code, "PermanentRedirect"))
        return eddy_err_set(err,
                            "bucket \"%s\" is not served by %.120s in region %s (HTTP %ld %s: "
                            "%.120s); set ?region= or ?endpoint=",
                            s->bucket, s->endpoint, s->region, r->status, code, r->message);
    return eddy_err_set(err, "S3 endpoint %.120s answered HTTP %ld %s%s%.150s (%s%s)",
                        s->endpoint, r->status, code, r->message[0] ? ": " : "", r->message,
                        what, tries);
}

/* A request with retries. 0 when it got an HTTP answer (the caller looks at
 * r->status and r->code), -1 with err after the last transport failure or a
 * local error. Retryable HTTP answers are retried too, and the last one
 * returned. */
static int perform(s3_store_t *s, const s3_req_t *q, s3_resp_t *r, eddy_err_t *err)
{
    long wait = s->o.backoff_ms;
    for (int attempt = 1;; attempt++) {
        r->attempts = attempt;
        eddy_err_t local = {{0}};
        int rc = perform_once(s, q, r, &local);
        if (rc < 0 && r->curl == CURLE_OK) /* local failure: no retry */
            return eddy_err_set(err, "%s", local.msg);
        if (attempt >= s->o.max_attempts || !retryable(r)) {
            if (rc < 0)
                return describe(s, q, r, err);
            return 0;
        }
        sleep_ms(wait);
        wait = wait * 2 > BACKOFF_CAP_MS ? BACKOFF_CAP_MS : wait * 2;
    }
}

/* "/BUCKET/PREFIX/KEY" (prefix may be empty) */
static char *object_path(const s3_store_t *s, const char *key, eddy_err_t *err)
{
    size_t n = strlen(s->bucket) + strlen(s->prefix) + strlen(key) + 4;
    char *p = malloc(n);
    if (!p) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(p, n, "/%s/%s%s%s", s->bucket, s->prefix, s->prefix[0] ? "/" : "", key);
    return p;
}

/* ---- put ----------------------------------------------------------------- */

static int put_single(s3_store_t *s, const char *path, const void *data, size_t len,
                      eddy_err_t *err)
{
    s3_req_t q = {.method = "PUT", .path = path, .body = data, .body_len = len,
                  .content_type = "application/octet-stream", .limit = XML_BODY_MAX};
    s3_resp_t r = {0};
    int rc = perform(s, &q, &r, err);
    if (rc == 0 && r.status != 200)
        rc = describe(s, &q, &r, err);
    resp_clear(&r);
    return rc;
}

static void abort_upload(s3_store_t *s, const char *path, const char *upload_query,
                         eddy_err_t *err)
{
    s3_req_t q = {.method = "DELETE", .path = path, .query = upload_query, .limit = XML_BODY_MAX};
    s3_resp_t r = {0};
    eddy_err_t e = {{0}};
    int saved = s->o.max_attempts;
    s->o.max_attempts = saved < 2 ? saved : 2; /* best effort: the put already failed */
    int rc = perform(s, &q, &r, &e);
    s->o.max_attempts = saved;
    if (rc == 0 && r.status != 204 && r.status != 200 && r.status != 404)
        rc = describe(s, &q, &r, &e);
    if (rc < 0 && err) {
        char cause[sizeof err->msg];
        memcpy(cause, err->msg, sizeof cause);
        eddy_err_set(err, "%.300s (and the upload could not be aborted: %.150s)", cause, e.msg);
    }
    resp_clear(&r);
}

static int put_multipart(s3_store_t *s, const char *path, const char *data, size_t len,
                         eddy_err_t *err)
{
    size_t part = s->o.part_size;
    size_t nparts = (len + part - 1) / part;
    if (nparts > MAX_PARTS)
        return eddy_err_set(err, "%zu bytes make %zu parts of %zu, more than S3's %d", len,
                            nparts, part, MAX_PARTS);
    /* CreateMultipartUpload */
    s3_req_t q = {.method = "POST", .path = path, .query = "uploads=", .body = "", .body_len = 0,
                  .content_type = "application/octet-stream", .limit = XML_BODY_MAX};
    s3_resp_t r = {0};
    if (perform(s, &q, &r, err) < 0 || (r.status != 200 && describe(s, &q, &r, err) < 0)) {
        resp_clear(&r);
        return eddy_err_wrap(err, "multipart upload of %zu bytes in %zu parts", len, nparts);
    }
    char *upload_id = r.body.data ? xml_text(r.body.data, NULL, "UploadId") : NULL;
    resp_clear(&r);
    if (!upload_id || !upload_id[0]) {
        free(upload_id);
        return eddy_err_set(err, "CreateMultipartUpload of %s answered no UploadId", path);
    }
    char *enc_id = pct_encode(upload_id);
    size_t qn = enc_id ? strlen(enc_id) + 64 : 0;
    char *upload_query = enc_id ? malloc(qn) : NULL;
    char *part_query = enc_id ? malloc(qn) : NULL;
    /* <CompleteMultipartUpload> with one <Part> of at most ~200 bytes each */
    size_t xcap = nparts * 200 + 128, xlen = 0;
    char *xml = malloc(xcap);
    int rc = -1;
    if (!upload_query || !part_query || !xml) {
        eddy_err_set(err, "out of memory");
        goto out;
    }
    snprintf(upload_query, qn, "uploadId=%s", enc_id);
    xlen += (size_t)snprintf(xml + xlen, xcap - xlen, "<CompleteMultipartUpload>");
    for (size_t i = 0; i < nparts; i++) {
        size_t off = i * part, n = len - off < part ? len - off : part;
        snprintf(part_query, qn, "partNumber=%zu&uploadId=%s", i + 1, enc_id);
        s3_req_t pq = {.method = "PUT", .path = path, .query = part_query, .body = data + off,
                       .body_len = n, .limit = XML_BODY_MAX};
        if (perform(s, &pq, &r, err) < 0)
            goto abort;
        if (r.status != 200) {
            describe(s, &pq, &r, err);
            goto abort;
        }
        if (!r.etag[0] || strchr(r.etag, '<') || strchr(r.etag, '&')) {
            eddy_err_set(err, "UploadPart %zu of %s answered no usable ETag", i + 1, path);
            goto abort;
        }
        xlen += (size_t)snprintf(xml + xlen, xcap - xlen,
                                 "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>", i + 1,
                                 r.etag);
    }
    xlen += (size_t)snprintf(xml + xlen, xcap - xlen, "</CompleteMultipartUpload>");
    s3_req_t cq = {.method = "POST", .path = path, .query = upload_query, .body = xml,
                   .body_len = xlen, .content_type = "application/xml", .limit = XML_BODY_MAX,
                   .error_in_200 = true};
    if (perform(s, &cq, &r, err) < 0)
        goto abort;
    if (r.status != 200) {
        describe(s, &cq, &r, err);
        goto abort;
    }
    rc = 0;
    goto out;
abort:
    eddy_err_wrap(err, "multipart upload of %zu bytes in %zu parts", len, nparts);
    abort_upload(s, path, upload_query, err);
out:
    resp_clear(&r);
    free(xml);
    free(part_query);
    free(upload_query);
    free(enc_id);
    free(upload_id);
    return rc;
}

static int s3_put(void *impl, const char *key, const void *data, size_t len, eddy_err_t *err)
{
    s3_store_t *s = impl;
    char *path = object_path(s, key, err);
    if (!path)
        return -1;
    pthread_mutex_lock(&s->lock);
    int rc = len > s->o.multipart_threshold ? put_multipart(s, path, data, len, err)
                                            : put_single(s, path, data, len, err);
    pthread_mutex_unlock(&s->lock);
    free(path);
    return rc < 0 ? eddy_err_wrap(err, "%s", key) : 0;
}

/* ---- get, delete --------------------------------------------------------- */

static int s3_get(void *impl, const char *key, char **data, size_t *len, eddy_err_t *err)
{
    s3_store_t *s = impl;
    char *path = object_path(s, key, err);
    if (!path)
        return -1;
    s3_req_t q = {.method = "GET", .path = path, .limit = s->o.max_object_bytes};
    s3_resp_t r = {0};
    pthread_mutex_lock(&s->lock);
    int rc = perform(s, &q, &r, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == 0 && r.status == 200) {
        *data = r.body.data ? r.body.data : calloc(1, 1);
        *len = r.body.len;
        r.body.data = NULL;
        rc = *data ? 1 : eddy_err_set(err, "out of memory");
    } else if (rc == 0 && r.status == 404 && strcmp(r.code, "NoSuchBucket") != 0) {
        rc = 0; /* NoSuchKey */
    } else if (rc == 0) {
        rc = describe(s, &q, &r, err);
    }
    resp_clear(&r);
    free(path);
    return rc < 0 ? eddy_err_wrap(err, "%s", key) : rc;
}

static int s3_del(void *impl, const char *key, eddy_err_t *err)
{
    s3_store_t *s = impl;
    char *path = object_path(s, key, err);
    if (!path)
        return -1;
    s3_req_t q = {.method = "DELETE", .path = path, .limit = XML_BODY_MAX};
    s3_resp_t r = {0};
    pthread_mutex_lock(&s->lock);
    int rc = perform(s, &q, &r, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == 0 && r.status != 204 && r.status != 200 &&
        !(r.status == 404 && strcmp(r.code, "NoSuchBucket") != 0))
        rc = describe(s, &q, &r, err);
    resp_clear(&r);
    free(path);
    return rc < 0 ? eddy_err_wrap(err, "%s", key) : 0;
}

/* ---- list ---------------------------------------------------------------- */

/* One ListObjectsV2 page of full_prefix after token (NULL: the first).
 * Calls fn for each valid key; *next gets the next token (NULL at the end).
 * Returns 0, 1 (fn stopped), -1. */
static int list_page(s3_store_t *s, const char *full_prefix, const char *token, int max_keys,
                     eddy_object_store_list_fn fn, void *ctx, char **next, eddy_err_t *err)
{
    *next = NULL;
    char *enc_prefix = pct_encode(full_prefix);
    char *enc_token = token ? pct_encode(token) : NULL;
    size_t qn = (enc_prefix ? strlen(enc_prefix) : 0) + (enc_token ? strlen(enc_token) : 0) + 96;
    char *query = malloc(qn);
    char path[80];
    snprintf(path, sizeof path, "/%s", s->bucket);
    int rc = -1;
    s3_resp_t r = {0};
    if (!enc_prefix || (token && !enc_token) || !query) {
        eddy_err_set(err, "out of memory");
        goto out;
    }
    /* parameters in byte order: the canonical query string of SigV4 */
    snprintf(query, qn, "%s%s%slist-type=2&max-keys=%d%s%s", token ? "continuation-token=" : "",
             token ? enc_token : "", token ? "&" : "", max_keys, full_prefix[0] ? "&prefix=" : "",
             enc_prefix);
    s3_req_t q = {.method = "GET", .path = path, .query = query, .limit = XML_BODY_MAX};
    if (perform(s, &q, &r, err) < 0)
        goto out;
    if (r.status != 200) {
        describe(s, &q, &r, err);
        goto out;
    }
    const char *body = r.body.data ? r.body.data : "";
    if (!strstr(body, "<ListBucketResult")) {
        eddy_err_set(err, "ListObjectsV2 answer is not a ListBucketResult");
        goto out;
    }
    size_t skip = s->prefix[0] ? strlen(s->prefix) + 1 : 0;
    rc = 0;
    const char *at = body;
    for (;;) {
        const char *contents = strstr(at, "<Contents>");
        if (!contents)
            break;
        const char *end = strstr(contents, "</Contents>");
        if (!end) {
            rc = eddy_err_set(err, "ListObjectsV2 answer is cut inside <Contents>");
            break;
        }
        /* look at this entry only */
        size_t elen = (size_t)(end - contents);
        char *entry = strndup(contents, elen);
        if (!entry) {
            rc = eddy_err_set(err, "out of memory");
            break;
        }
        char *k = xml_text(entry, NULL, "Key");
        char *size = xml_text(entry, NULL, "Size");
        free(entry);
        at = end + 11;
        if (k && strlen(k) > skip && !strncmp(k, full_prefix, strlen(full_prefix)) &&
            eddy_object_store_check_key(k + skip, NULL) == 0) {
            uint64_t sz = size ? strtoull(size, NULL, 10) : 0;
            if (fn(k + skip, sz, ctx) != 0)
                rc = 1;
        }
        free(k);
        free(size);
        if (rc != 0)
            break;
    }
    if (rc == 0) {
        char truncated[16];
        xml_field(body, "IsTruncated", truncated, sizeof truncated);
        if (!strcmp(truncated, "true")) {
            *next = xml_text(body, NULL, "NextContinuationToken");
            if (!*next || !(*next)[0] || (token && !strcmp(*next, token))) {
                free(*next);
                *next = NULL;
                rc = eddy_err_set(err, "ListObjectsV2 answer is truncated but has no new "
                                  "NextContinuationToken");
            }
        }
    }
out:
    resp_clear(&r);
    free(query);
    free(enc_token);
    free(enc_prefix);
    return rc;
}

static int s3_list(void *impl, const char *prefix, eddy_object_store_list_fn fn, void *ctx,
                   eddy_err_t *err)
{
    s3_store_t *s = impl;
    size_t n = strlen(s->prefix) + strlen(prefix) + 2;
    char *full = malloc(n);
    if (!full)
        return eddy_err_set(err, "out of memory");
    snprintf(full, n, "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", prefix);
    char *token = NULL;
    int rc;
    pthread_mutex_lock(&s->lock);
    do {
        char *next = NULL;
        rc = list_page(s, full, token, s->o.list_page_size, fn, ctx, &next, err);
        free(token);
        token = next;
    } while (rc == 0 && token);
    pthread_mutex_unlock(&s->lock);
    free(token);
    free(full);
    return rc;
}

/* ---- open, destroy ------------------------------------------------------- */

static void s3_destroy(void **impl_p)
{
    s3_store_t *s = *impl_p;
    if (!s)
        return;
    if (s->curl)
        curl_easy_cleanup(s->curl);
    if (s->secret) {
        explicit_bzero(s->secret, strlen(s->secret));
        free(s->secret);
    }
    if (s->token) {
        explicit_bzero(s->token, strlen(s->token));
        free(s->token);
    }
    free(s->key_id);
    free(s->endpoint);
    free(s->bucket);
    free(s->prefix);
    free(s->region);
    pthread_mutex_destroy(&s->lock);
    free(s);
    *impl_p = NULL;
    eddy_curl_release();
}

static int count_page(const char *key, uint64_t size, void *ctx)
{
    (void)key;
    (void)size;
    (void)ctx;
    return 1; /* one is enough */
}

void *eddy_object_store_s3_open(const eddy_s3_location_t *loc, const eddy_object_store_opts_t *opts,
                                eddy_err_t *err)
{
    const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
    const char *token = getenv("AWS_SESSION_TOKEN");
    if (!id || !id[0] || !secret || !secret[0]) {
        eddy_err_set(err, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set for S3");
        return NULL;
    }
    for (const char *p = id; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == ':' || (unsigned char)*p >= 0x7f) {
            eddy_err_set(err, "AWS_ACCESS_KEY_ID has a character that is not allowed");
            return NULL;
        }
    if (token && strpbrk(token, "\r\n")) {
        eddy_err_set(err, "AWS_SESSION_TOKEN has a line break");
        return NULL;
    }
    if (eddy_curl_acquire(err) < 0)
        return NULL;
    s3_store_t *s = calloc(1, sizeof *s);
    if (!s) {
        eddy_curl_release();
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    void *impl = s;
    pthread_mutex_init(&s->lock, NULL);
    s->o = *opts;
    s->endpoint = strdup(loc->endpoint);
    s->bucket = strdup(loc->bucket);
    s->prefix = strdup(loc->prefix);
    s->region = strdup(loc->region);
    s->key_id = strdup(id);
    s->secret = strdup(secret);
    s->token = token && token[0] ? strdup(token) : NULL;
    s->curl = curl_easy_init();
    if (!s->endpoint || !s->bucket || !s->prefix || !s->region || !s->key_id || !s->secret ||
        (token && token[0] && !s->token) || !s->curl) {
        s3_destroy(&impl);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", s->region);

    /* Probe: one key under the prefix proves endpoint, bucket and credentials. */
    char *probe = NULL;
    size_t n = strlen(s->prefix) + 2;
    char *full = malloc(n);
    if (!full) {
        s3_destroy(&impl);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(full, n, "%s%s", s->prefix, s->prefix[0] ? "/" : "");
    int rc = list_page(s, full, NULL, 1, count_page, NULL, &probe, err);
    free(probe);
    free(full);
    if (rc < 0) {
        s3_destroy(&impl);
        return NULL;
    }
    return s;
}

const eddy_object_store_ops_t eddy_object_store_s3_ops = {
    .name = "s3",
    .put = s3_put,
    .get = s3_get,
    .del = s3_del,
    .list = s3_list,
    .destroy = s3_destroy,
};
