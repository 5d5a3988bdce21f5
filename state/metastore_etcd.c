/* metastore_etcd.c - the etcd metastore backend: etcd v3 through its JSON
 * gateway, with libcurl for HTTP and jansson for JSON (see metastore.h).
 *
 * Why the gateway: it needs no gRPC/protobuf stack, only POSTs of small
 * JSON documents, and libcurl gives hard timeouts, so an unreachable or
 * stuck etcd is an error naming the URL after at most the request timeout,
 * never a hang.
 *
 * Protocol, as etcd 3.4 speaks it (POST, JSON body, bytes as base64):
 *   put          /v3/kv/put         {"key": K, "value": V}
 *   get          /v3/kv/range       {"key": K}
 *   list prefix  /v3/kv/range       {"key": P, "range_end": P with its last
 *                                    byte incremented}; P = "" becomes the
 *                                    whole key space ("\0" .. "\0")
 *   delete       /v3/kv/deleterange {"key": K}
 * The gateway leaves out fields that have their default value: "kvs" when
 * nothing matched and "value" when the value is empty. Errors come back as a
 * non-200 status with {"error", "message", "code"}. open() probes with a
 * count-only range; when /v3/ answers 404 it falls back to /v3beta/ (etcd
 * 3.3). Everything decoded is checked: status, JSON shape, base64, and that
 * returned keys are the ones asked for.
 *
 * One curl easy handle per store, reused for keep-alive; metastore.c
 * serializes calls. curl_global_init/cleanup are reference counted across
 * open stores (state/curl_util.c), so the last destroy releases libcurl's
 * globals and leak checkers stay quiet. Proxies from the environment are
 * ignored on purpose: etcd is reached directly. https:// URLs use TLS with
 * the CA, client certificate and key given to eddy_metastore_open_tls
 * (--etcd-ca/--etcd-cert/--etcd-key); libcurl reads the files itself. */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "state/curl_util.h"
#include "state/metastore_backend.h"

#define CONNECT_TIMEOUT_MS 1000L
#define MAX_RESPONSE_BYTES (256u * 1024u * 1024u)
#define PROBE_KEY "/eddy/.probe"

typedef struct {
    char *base;    /* "http://host:port" */
    char *display; /* URL as the user gave it, for messages */
    const char *api; /* "/v3" or "/v3beta" */
    CURL *curl;
    struct curl_slist *headers;
    char curl_err[CURL_ERROR_SIZE];
    /* set_fence: puts and deletes are txns on this key's create revision */
    char *fence_key;
    int64_t fence_rev;
} etcd_store_t;

/* ---- HTTP + JSON --------------------------------------------------------- */

/* Result of one request, so open() can tell "unreachable" and "no such
 * endpoint" from other failures. */
typedef enum { REQ_OK, REQ_TRANSPORT, REQ_NOT_FOUND, REQ_FAILED } req_status_t;

/* POSTs body as JSON to api + path; the answer's bytes land in *b (the
 * caller frees b->data). Returns curl's result; *status is the HTTP status
 * when the transfer worked. */
static CURLcode post_json(etcd_store_t *es, const char *api, const char *path, json_t *body,
                          eddy_curl_body_t *b, long *status, eddy_err_t *err)
{
    *status = 0;
    char *text = json_dumps(body, JSON_COMPACT);
    size_t ulen = strlen(es->base) + strlen(api) + strlen(path) + 1;
    char *url = text ? malloc(ulen) : NULL;
    if (!url) {
        free(text);
        eddy_err_set(err, "out of memory encoding the request");
        return CURLE_OUT_OF_MEMORY;
    }
    snprintf(url, ulen, "%s%s%s", es->base, api, path);
    es->curl_err[0] = '\0';
    curl_easy_setopt(es->curl, CURLOPT_URL, url);
    curl_easy_setopt(es->curl, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(es->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
    curl_easy_setopt(es->curl, CURLOPT_WRITEDATA, b);
    CURLcode c = curl_easy_perform(es->curl);
    curl_easy_setopt(es->curl, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(es->curl, CURLOPT_WRITEDATA, NULL);
    free(text);
    free(url);
    if (c == CURLE_OK) {
        curl_easy_getinfo(es->curl, CURLINFO_RESPONSE_CODE, status);
    } else if (b->too_big) {
        eddy_err_set(err, "answer larger than %u bytes", MAX_RESPONSE_BYTES);
    } else if (es->curl_err[0] && strstr(es->curl_err, curl_easy_strerror(c))) {
        eddy_err_set(err, "%s", es->curl_err); /* already says it, with details */
    } else if (es->curl_err[0]) {
        eddy_err_set(err, "%s (%s)", curl_easy_strerror(c), es->curl_err);
    } else {
        eddy_err_set(err, "%s", curl_easy_strerror(c));
    }
    return c;
}

/* POSTs body to api + path and returns the parsed JSON object of a 200
 * answer in *resp. Fills err with the cause on any failure. */
static req_status_t request(etcd_store_t *es, const char *api, const char *path, json_t *body,
                            json_t **resp, eddy_err_t *err)
{
    *resp = NULL;
    eddy_curl_body_t b = {.limit = MAX_RESPONSE_BYTES};
    long status;
    CURLcode c = post_json(es, api, path, body, &b, &status, err);
    req_status_t st = REQ_FAILED;
    if (c != CURLE_OK) {
        st = c == CURLE_WRITE_ERROR || c == CURLE_OUT_OF_MEMORY ? REQ_FAILED : REQ_TRANSPORT;
        goto out;
    }
    json_error_t jerr;
    json_t *j = b.len ? json_loadb(b.data, b.len, 0, &jerr) : NULL;
    if (status != 200) {
        json_t *m = json_is_object(j) ? json_object_get(j, "message") : NULL;
        if (!json_is_string(m) && json_is_object(j))
            m = json_object_get(j, "error");
        if (json_is_string(m))
            eddy_err_set(err, "HTTP %ld: %s", status, json_string_value(m));
        else
            eddy_err_set(err, "HTTP %ld from %s%s", status, api, path);
        json_decref(j);
        st = status == 404 ? REQ_NOT_FOUND : REQ_FAILED;
        goto out;
    }
    if (!j) {
        eddy_err_set(err, "answer from %s%s is not JSON: %s", api, path,
                     b.len ? jerr.text : "empty body");
        goto out;
    }
    if (!json_is_object(j) || !json_is_object(json_object_get(j, "header"))) {
        json_decref(j);
        eddy_err_set(err, "answer from %s%s is not an etcd response (no \"header\")", api,
                     path);
        goto out;
    }
    *resp = j;
    st = REQ_OK;
out:
    free(b.data);
    return st;
}

/* {"key": b64(key)} plus, when given, "range_end"/"value" and "count_only". */
static json_t *make_body(const char *key, size_t key_len, const char *second_name,
                         const void *second, size_t second_len, int count_only)
{
    json_t *o = json_object();
    char *k = eddy_b64_encode((const unsigned char *)key, key_len);
    char *v = second_name ? eddy_b64_encode(second, second_len) : NULL;
    if (!o || !k || (second_name && !v) ||
        json_object_set_new(o, "key", json_string(k)) < 0 ||
        (second_name && json_object_set_new(o, second_name, json_string(v)) < 0) ||
        (count_only && json_object_set_new(o, "count_only", json_true()) < 0)) {
        json_decref(o);
        o = NULL;
    }
    free(k);
    free(v);
    return o;
}

/* One request with the store's api prefix; wraps everything but OK. */
static int call(etcd_store_t *es, const char *path, json_t *body, json_t **resp,
                eddy_err_t *err)
{
    if (!body)
        return eddy_err_set(err, "out of memory encoding the request");
    req_status_t st = request(es, es->api, path, body, resp, err);
    json_decref(body);
    return st == REQ_OK ? 0 : -1;
}

/* Decodes the base64 string field name of kv (absent = empty when
 * optional). Returns 0, or -1 with err. */
static int decode_field(json_t *kv, const char *name, int optional, char **out, size_t *len,
                        eddy_err_t *err)
{
    json_t *f = json_object_get(kv, name);
    if (!f && optional) {
        *out = calloc(1, 1);
        *len = 0;
        return *out ? 0 : eddy_err_set(err, "out of memory");
    }
    if (!json_is_string(f))
        return eddy_err_set(err, "malformed range answer: \"%s\" is not a string", name);
    int rc = eddy_b64_decode(json_string_value(f), json_string_length(f), out, len);
    if (rc == -2)
        return eddy_err_set(err, "out of memory decoding \"%s\"", name);
    if (rc < 0)
        return eddy_err_set(err, "malformed range answer: \"%s\" is not base64", name);
    return 0;
}

/* The "kvs" array of a range answer (NULL when absent, i.e. no match). */
static int get_kvs(json_t *resp, json_t **kvs, eddy_err_t *err)
{
    *kvs = json_object_get(resp, "kvs");
    if (*kvs && !json_is_array(*kvs))
        return eddy_err_set(err, "malformed range answer: \"kvs\" is not an array");
    json_t *more = json_object_get(resp, "more");
    if (json_is_true(more))
        return eddy_err_set(err, "range answer is incomplete (\"more\": true)");
    return 0;
}

/* ---- backend operations -------------------------------------------------- */

static void etcd_destroy(void **impl_p)
{
    etcd_store_t *es = *impl_p;
    if (!es)
        return;
    if (es->curl)
        curl_easy_cleanup(es->curl);
    curl_slist_free_all(es->headers);
    free(es->base);
    free(es->display);
    free(es->fence_key);
    free(es);
    *impl_p = NULL;
    eddy_curl_release();
}

void *eddy_metastore_etcd_open(const char *base_url, const char *display, long timeout_ms,
                               const eddy_metastore_tls_t *tls, bool *unreachable,
                               eddy_err_t *err)
{
    if (unreachable)
        *unreachable = false;
    if (eddy_curl_acquire(err) < 0)
        return NULL;
    etcd_store_t *es = calloc(1, sizeof *es);
    if (!es) {
        eddy_curl_release();
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    void *impl = es;
    es->base = strdup(base_url);
    es->display = strdup(display);
    es->curl = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (h) {
        es->headers = h;
        /* no "Expect: 100-continue" round trip for bodies over 1 KiB */
        h = curl_slist_append(es->headers, "Expect:");
    }
    if (!es->base || !es->display || !es->curl || !h) {
        etcd_destroy(&impl);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    es->headers = h;
    CURL *c = es->curl;
    int bad = 0;
    bad |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    /* libcurl's connect phase includes the TLS handshake, which on a busy
     * machine takes longer than a TCP connect: https gets the whole budget */
    long connect_ms = timeout_ms < CONNECT_TIMEOUT_MS || !strncmp(base_url, "https://", 8)
                          ? timeout_ms
                          : CONNECT_TIMEOUT_MS;
    bad |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, es->headers) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, es->curl_err) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, eddy_curl_body_collect) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_POST, 1L) != CURLE_OK;
    /* https: libcurl verifies etcd's certificate and name by default; these
     * only choose whom to trust and who we are */
    if (tls && tls->ca_file)
        bad |= curl_easy_setopt(c, CURLOPT_CAINFO, tls->ca_file) != CURLE_OK;
    if (tls && tls->cert_file) {
        bad |= curl_easy_setopt(c, CURLOPT_SSLCERT, tls->cert_file) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM") != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_SSLKEY, tls->key_file) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM") != CURLE_OK;
    }
    if (bad) {
        etcd_destroy(&impl);
        eddy_err_set(err, "etcd at %s: cannot configure libcurl", display);
        return NULL;
    }

    /* Probe: a count-only range proves the gateway is there and the cluster
     * answers reads (a linearizable range needs a leader). */
    static const char *const apis[] = {"/v3", "/v3beta"};
    for (size_t i = 0; i < sizeof apis / sizeof apis[0]; i++) {
        json_t *body = make_body(PROBE_KEY, strlen(PROBE_KEY), NULL, NULL, 0, 1);
        if (!body) {
            etcd_destroy(&impl);
            eddy_err_set(err, "out of memory");
            return NULL;
        }
        json_t *resp;
        req_status_t st = request(es, apis[i], "/kv/range", body, &resp, err);
        json_decref(body);
        json_decref(resp);
        if (st == REQ_OK) {
            es->api = apis[i];
            return es;
        }
        if (st == REQ_TRANSPORT && !strncmp(base_url, "https://", 8) && !(tls && tls->cert_file) &&
            (!err || !strstr(err->msg, "SSL certificate")))
            /* a server that wants a client certificate just drops the
             * handshake; say what it probably wanted */
            eddy_err_wrap(err, "etcd at %s is unreachable or wants a client certificate "
                          "(--etcd-cert/--etcd-key)", display);
        else if (st == REQ_TRANSPORT) {
            eddy_err_wrap(err, "etcd at %s is unreachable", display);
            if (unreachable)
                *unreachable = true;
        }
        else if (st == REQ_NOT_FOUND && i + 1 < sizeof apis / sizeof apis[0])
            continue;
        else if (st == REQ_NOT_FOUND)
            eddy_err_set(err, "etcd at %s does not serve the v3 JSON gateway (HTTP 404 at "
                         "/v3/kv/range and /v3beta/kv/range)", display);
        else
            eddy_err_wrap(err, "etcd at %s failed the probe request", display);
        break;
    }
    etcd_destroy(&impl);
    return NULL;
}

static int fenced_txn(etcd_store_t *es, json_t *op, eddy_err_t *err);

/* lease 0: the key is held by no lease */
static int etcd_put_leased(void *impl, const char *key, const void *value, size_t len,
                           int64_t lease, eddy_err_t *err);

static int etcd_put(void *impl, const char *key, const void *value, size_t len,
                    eddy_err_t *err)
{
    return etcd_put_leased(impl, key, value, len, 0, err);
}

static int etcd_get(void *impl, const char *key, char **value, size_t *len, eddy_err_t *err)
{
    etcd_store_t *es = impl;
    json_t *resp, *kvs;
    size_t klen = strlen(key);
    if (call(es, "/kv/range", make_body(key, klen, NULL, NULL, 0, 0), &resp, err) < 0)
        return -1;
    int rc = get_kvs(resp, &kvs, err);
    if (rc == 0 && json_array_size(kvs) > 1)
        rc = eddy_err_set(err, "range answer has %zu keys for one key", json_array_size(kvs));
    if (rc < 0 || json_array_size(kvs) == 0) {
        json_decref(resp);
        return rc;
    }
    json_t *kv = json_array_get(kvs, 0);
    char *got = NULL;
    size_t got_len = 0;
    if (!json_is_object(kv))
        rc = eddy_err_set(err, "malformed range answer: kvs[0] is not an object");
    else if (decode_field(kv, "key", 0, &got, &got_len, err) < 0)
        rc = -1;
    else if (got_len != klen || memcmp(got, key, klen) != 0)
        rc = eddy_err_set(err, "range answer is for another key");
    else if (decode_field(kv, "value", 1, value, len, err) < 0)
        rc = -1;
    else
        rc = 1;
    free(got);
    json_decref(resp);
    return rc;
}

static int etcd_del(void *impl, const char *key, eddy_err_t *err)
{
    etcd_store_t *es = impl;
    json_t *resp;
    if (es->fence_key) {
        json_t *op = json_pack("{s:o}", "request_delete_range",
                               make_body(key, strlen(key), NULL, NULL, 0, 0));
        return fenced_txn(es, op, err);
    }
    if (call(es, "/kv/deleterange", make_body(key, strlen(key), NULL, NULL, 0, 0), &resp,
             err) < 0)
        return -1;
    json_decref(resp);
    return 0;
}

static int etcd_list(void *impl, const char *prefix, eddy_kv_list_t *out, eddy_err_t *err)
{
    etcd_store_t *es = impl;
    size_t plen = strlen(prefix);
    /* range_end: the prefix with its last byte below 0xff incremented and
     * the rest dropped; "\0" (with key "\0" for the empty prefix) means "to
     * the end of the key space". */
    char *end = malloc(plen + 1);
    if (!end)
        return eddy_err_set(err, "out of memory");
    size_t elen = plen;
    memcpy(end, prefix, plen);
    while (elen > 0 && (unsigned char)end[elen - 1] == 0xff)
        elen--;
    if (elen > 0)
        end[elen - 1] = (char)((unsigned char)end[elen - 1] + 1);
    else
        end[elen++] = '\0';
    json_t *body = plen ? make_body(prefix, plen, "range_end", end, elen, 0)
                        : make_body("", 1, "range_end", "", 1, 0);
    free(end);
    json_t *resp, *kvs;
    if (call(es, "/kv/range", body, &resp, err) < 0)
        return -1;
    int rc = get_kvs(resp, &kvs, err);
    size_t cap = 0;
    for (size_t i = 0; rc == 0 && i < json_array_size(kvs); i++) {
        json_t *kv = json_array_get(kvs, i);
        char *key = NULL, *value = NULL;
        size_t klen, vlen;
        if (!json_is_object(kv)) {
            rc = eddy_err_set(err, "malformed range answer: kvs[%zu] is not an object", i);
            break;
        }
        if (decode_field(kv, "key", 0, &key, &klen, err) < 0) {
            rc = -1;
            break;
        }
        if (klen < plen || memcmp(key, prefix, plen) != 0) {
            free(key);
            rc = eddy_err_set(err, "range answer has a key outside the prefix");
            break;
        }
        int foreign = klen == 0;
        for (size_t k = 0; k < klen; k++)
            foreign |= (unsigned char)key[k] < 0x20 || (unsigned char)key[k] > 0x7e;
        if (foreign) { /* not an eddy key (binary, written by another tool): skip */
            free(key);
            continue;
        }
        if (decode_field(kv, "value", 1, &value, &vlen, err) < 0) {
            free(key);
            rc = -1;
            break;
        }
        rc = eddy_kv_list_push(out, &cap, key, value, vlen, err);
    }
    json_decref(resp);
    if (rc < 0)
        eddy_kv_list_clear(out);
    return rc;
}

/* ---- leases, txn, fencing (metastore_lease.h) --------------------------- */

/* etcd's int64 fields come as JSON strings ("123"); absent means 0. */
static int64_t int64_field(json_t *o, const char *name)
{
    json_t *f = json_object_get(o, name);
    if (json_is_integer(f))
        return (int64_t)json_integer_value(f);
    if (json_is_string(f))
        return strtoll(json_string_value(f), NULL, 10);
    return 0;
}

static json_t *int64_json(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return json_string(buf);
}

static int etcd_put_leased(void *impl, const char *key, const void *value, size_t len,
                           int64_t lease, eddy_err_t *err)
{
    etcd_store_t *es = impl;
    json_t *body = make_body(key, strlen(key), "value", value, len, 0);
    if (body && lease && json_object_set_new(body, "lease", int64_json(lease)) < 0) {
        json_decref(body);
        body = NULL;
    }
    if (es->fence_key)
        return fenced_txn(es, body ? json_pack("{s:o}", "request_put", body) : NULL, err);
    json_t *resp;
    if (call(es, "/kv/put", body, &resp, err) < 0)
        return -1;
    json_decref(resp);
    return 0;
}

/* The compare of a fenced write: the fence key was created at fence_rev. */
static json_t *create_compare(const char *key, int64_t rev)
{
    json_t *cmp = make_body(key, strlen(key), NULL, NULL, 0, 0);
    if (cmp && (json_object_set_new(cmp, "target", json_string("CREATE")) < 0 ||
                json_object_set_new(cmp, "result", json_string("EQUAL")) < 0 ||
                json_object_set_new(cmp, "create_revision", int64_json(rev)) < 0)) {
        json_decref(cmp);
        cmp = NULL;
    }
    return cmp;
}

static int fenced_txn(etcd_store_t *es, json_t *op, eddy_err_t *err)
{
    json_t *body = op ? json_pack("{s:[o], s:[o]}", "compare",
                                  create_compare(es->fence_key, es->fence_rev), "success", op)
                      : NULL;
    json_t *resp;
    if (call(es, "/kv/txn", body, &resp, err) < 0)
        return -1;
    int ok = json_is_true(json_object_get(resp, "succeeded"));
    json_decref(resp);
    if (!ok)
        return eddy_err_set(err, "fenced: %s is no longer at revision %lld (another process "
                            "leads now)", es->fence_key, (long long)es->fence_rev);
    return 0;
}

static int etcd_lease_grant(void *impl, uint32_t ttl_s, int64_t *lease, eddy_err_t *err)
{
    etcd_store_t *es = impl;
    json_t *resp;
    if (call(es, "/lease/grant", json_pack("{s:I}", "TTL", (json_int_t)ttl_s), &resp, err) < 0)
        return -1;
    *lease = int64_field(resp, "ID");
    json_decref(resp);
    return *lease ? 0 : eddy_err_set(err, "lease grant answered no lease ID");
}

static int etcd_lease_keepalive(void *impl, int64_t lease, int64_t *ttl_s, eddy_err_t *err)
{
    etcd_store_t *es = impl;
    /* A streaming call; the gateway wraps its one answer in "result", so it
     * bypasses request()'s check for a top-level "header". */
    json_t *body = json_pack("{s:o}", "ID", int64_json(lease));
    if (!body)
        return eddy_err_set(err, "out of memory");
    eddy_curl_body_t b = {.limit = MAX_RESPONSE_BYTES};
    long status;
    CURLcode c = post_json(es, es->api, "/lease/keepalive", body, &b, &status, err);
    json_decref(body);
    int rc = -1;
    if (c != CURLE_OK)
        goto out;
    json_error_t jerr;
    /* one JSON object per streamed answer, newline-separated: take the first */
    json_t *j = b.len ? json_loadb(b.data, b.len, JSON_DISABLE_EOF_CHECK, &jerr) : NULL;
    json_t *result = json_is_object(j) ? json_object_get(j, "result") : NULL;
    if (status != 200 || !json_is_object(result)) {
        json_t *m = json_is_object(j) ? json_object_get(j, "message") : NULL;
        eddy_err_set(err, "keepalive: HTTP %ld%s%s", status, json_is_string(m) ? ": " : "",
                     json_is_string(m) ? json_string_value(m) : "");
    } else {
        *ttl_s = int64_field(result, "TTL"); /* absent: the lease is gone */
        rc = 0;
    }
    json_decref(j);
out:
    free(b.data);
    return rc;
}

static int etcd_lease_revoke(void *impl, int64_t lease, eddy_err_t *err)
{
    etcd_store_t *es = impl;
    json_t *resp;
    eddy_err_t e = {{0}};
    if (call(es, "/lease/revoke", json_pack("{s:o}", "ID", int64_json(lease)), &resp, &e) < 0) {
        if (strstr(e.msg, "not found"))
            return 0;
        return eddy_err_set(err, "%s", e.msg);
    }
    json_decref(resp);
    return 0;
}

/* The first kv of a range answer: value (malloc'd) and create revision. */
static int first_kv(json_t *range, char **value, size_t *len, int64_t *create_rev,
                    eddy_err_t *err)
{
    json_t *kvs = json_object_get(range, "kvs");
    json_t *kv = json_is_array(kvs) ? json_array_get(kvs, 0) : NULL;
    if (!json_is_object(kv))
        return 0;
    *create_rev = int64_field(kv, "create_revision");
    char *v = NULL;
    size_t n = 0;
    if (decode_field(kv, "value", 1, &v, &n, err) < 0)
        return -1;
    if (value)
        *value = v;
    else
        free(v);
    if (len)
        *len = n;
    return 1;
}

static int etcd_create_leased(void *impl, const char *key, const void *value, size_t len,
                              int64_t lease, int64_t *create_rev, char **holder,
                              eddy_err_t *err)
{
    etcd_store_t *es = impl;
    json_t *put = make_body(key, strlen(key), "value", value, len, 0);
    if (put && lease)
        json_object_set_new(put, "lease", int64_json(lease));
    json_t *body = json_pack("{s:[o], s:[{s:o}], s:[{s:o}]}", "compare", create_compare(key, 0),
                             "success", "request_put", put, "failure", "request_range",
                             make_body(key, strlen(key), NULL, NULL, 0, 0));
    json_t *resp;
    if (call(es, "/kv/txn", body, &resp, err) < 0)
        return -1;
    int rc;
    if (json_is_true(json_object_get(resp, "succeeded"))) {
        /* the txn's revision is the one that created the key */
        *create_rev = int64_field(json_object_get(resp, "header"), "revision");
        rc = *create_rev > 0 ? 1 : eddy_err_set(err, "txn answered no revision");
    } else {
        json_t *rs = json_object_get(resp, "responses");
        json_t *r0 = json_is_array(rs) ? json_array_get(rs, 0) : NULL;
        json_t *range = json_is_object(r0) ? json_object_get(r0, "response_range") : NULL;
        rc = first_kv(range, holder, NULL, create_rev, err);
        if (rc == 1)
            rc = 0; /* exists */
        else if (rc == 0)
            rc = eddy_err_set(err, "key %s vanished during the txn; try again", key);
    }
    json_decref(resp);
    return rc;
}

static int etcd_get_rev(void *impl, const char *key, char **value, size_t *len,
                        int64_t *create_rev, eddy_err_t *err)
{
    etcd_store_t *es = impl;
    json_t *resp;
    if (call(es, "/kv/range", make_body(key, strlen(key), NULL, NULL, 0, 0), &resp, err) < 0)
        return -1;
    int rc = first_kv(resp, value, len, create_rev, err);
    json_decref(resp);
    return rc;
}

static int etcd_set_fence(void *impl, const char *key, int64_t create_rev, eddy_err_t *err)
{
    etcd_store_t *es = impl;
    free(es->fence_key);
    es->fence_key = NULL;
    es->fence_rev = 0;
    if (create_rev == 0)
        return 0;
    es->fence_key = strdup(key);
    if (!es->fence_key)
        return eddy_err_set(err, "out of memory");
    es->fence_rev = create_rev;
    return 0;
}

const eddy_metastore_ops_t eddy_metastore_etcd_ops = {
    .lease_grant = etcd_lease_grant,
    .lease_keepalive = etcd_lease_keepalive,
    .lease_revoke = etcd_lease_revoke,
    .create_leased = etcd_create_leased,
    .put_leased = etcd_put_leased,
    .get_rev = etcd_get_rev,
    .set_fence = etcd_set_fence,
    .name = "etcd",
    .put = etcd_put,
    .get = etcd_get,
    .del = etcd_del,
    .list = etcd_list,
    .destroy = etcd_destroy,
};
