/* test_object_store_s3.c - the object store's S3 backend
 * (state/object_store_s3.c) against a real S3-compatible server, npm's
 * s3rver, started per test on a free loopback port (tests/support/s3rver.h).
 *
 * Round trips at the documented path-style location, ListObjectsV2 over
 * several pages (1100 keys at S3's 1000 per page, and small pages), a
 * multipart upload of 20 MiB in 5 MiB parts, a wrong bucket, an unreachable
 * endpoint, a silent one (timeout), a key id s3rver does not know, and a
 * server killed and restarted: between calls, during a call's retries, and
 * in the middle of a multipart upload.
 *
 * What s3rver cannot check: it does not verify SigV4 signatures (only the
 * access key id, the date and that x-amz-content-sha256 is there), so a
 * wrong secret or a wrong payload hash would pass here; it does not enforce
 * S3's 5 MiB minimum part size; and it does not implement
 * AbortMultipartUpload (405), so the abort path is only exercised, not
 * confirmed. The signatures are checked by signature_is_sigv4 instead,
 * which records the requests on a plain socket and recomputes them. */
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "state/object_store.h"
#include "tests/support/etcd.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"
#include "tests/support/s3rver.h"
#include "tests/unit/leak_check.h"

#define BUCKET "eddy-test"

static eddy_test_s3rver_t *srv;

static void setup(void)
{
    eddy_err_t err = {{0}};
    srv = eddy_test_s3rver_start_with_env(BUCKET, &err);
    cr_assert_not_null(srv, "cannot start s3rver: %s", err.msg);
}

static void teardown(void)
{
    eddy_test_s3rver_destroy(&srv);
    eddy_test_leak_check();
}

TestSuite(object_store_s3, .init = setup, .fini = teardown, .timeout = 300);

/* s3://BUCKET/PREFIX?endpoint=<srv> with opts (may be NULL). */
static eddy_object_store_t *open_store(const char *bucket, const char *prefix,
                                       const eddy_object_store_opts_t *opts, eddy_err_t *err)
{
    char uri[512];
    snprintf(uri, sizeof uri, "s3://%s%s%s?endpoint=%s&region=us-east-1", bucket,
             prefix ? "/" : "", prefix ? prefix : "", eddy_test_s3rver_url(srv));
    return eddy_object_store_open(uri, opts, err);
}

static eddy_object_store_t *open_ok(const char *prefix, const eddy_object_store_opts_t *opts)
{
    eddy_err_t err = {{0}};
    eddy_object_store_t *s = open_store(BUCKET, prefix, opts, &err);
    cr_assert_not_null(s, "open: %s", err.msg);
    return s;
}

static void put_ok(eddy_object_store_t *s, const char *key, const void *data, size_t len)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_object_store_put(s, key, data, len, &err), 0, "put %s: %s", key, err.msg);
}

static void expect_value(eddy_object_store_t *s, const char *key, const void *data, size_t len)
{
    eddy_err_t err = {{0}};
    char *got = NULL;
    size_t got_len = 0;
    cr_assert_eq(eddy_object_store_get(s, key, &got, &got_len, &err), 1, "get %s: %s", key,
                 err.msg);
    cr_assert_eq(got_len, len, "%s: %zu bytes, want %zu", key, got_len, len);
    cr_assert(len == 0 || memcmp(got, data, len) == 0, "%s: other bytes", key);
    cr_assert_eq(got[len], '\0');
    free(got);
}

static void expect_absent(eddy_object_store_t *s, const char *key)
{
    eddy_err_t err = {{0}};
    char *got = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_object_store_get(s, key, &got, &len, &err), 0, "get %s: %s", key, err.msg);
    cr_assert_null(got);
}

static char *pattern(size_t len, unsigned seed)
{
    char *p = malloc(len ? len : 1);
    cr_assert_not_null(p);
    uint64_t st = seed;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = eddy_test_rand(&st);
        memcpy(p + i, &v, len - i < 8 ? len - i : 8);
    }
    return p;
}

Test(object_store_s3, round_trip)
{
    eddy_object_store_t *s = open_ok("ckpt/eddy", NULL);
    char *bin = pattern(100000, 1);
    put_ok(s, "JOB/chk-7/count/kg-12.snap", bin, 100000);
    put_ok(s, "JOB/chk-7/empty", NULL, 0);
    expect_value(s, "JOB/chk-7/count/kg-12.snap", bin, 100000);
    expect_value(s, "JOB/chk-7/empty", "", 0);
    expect_absent(s, "JOB/chk-7/count/kg-13.snap");

    /* path-style, under the prefix: ENDPOINT/BUCKET/PREFIX/KEY */
    long status = 0;
    char *raw = eddy_test_http_get(eddy_test_s3rver_port(srv),
                                   "/" BUCKET "/ckpt/eddy/JOB/chk-7/count/kg-12.snap", 5000,
                                   &status);
    cr_assert_eq(status, 200, "the object is not at /BUCKET/PREFIX/KEY");
    free(raw);

    /* overwrite, then delete (twice: absent is no error) */
    put_ok(s, "JOB/chk-7/count/kg-12.snap", "new", 3);
    expect_value(s, "JOB/chk-7/count/kg-12.snap", "new", 3);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_object_store_delete(s, "JOB/chk-7/count/kg-12.snap", &err), 0, "%s",
                 err.msg);
    expect_absent(s, "JOB/chk-7/count/kg-12.snap");
    cr_assert_eq(eddy_object_store_delete(s, "JOB/chk-7/count/kg-12.snap", &err), 0, "%s",
                 err.msg);
    /* bad keys never reach the server */
    cr_assert_eq(eddy_object_store_put(s, "../escape", "x", 1, &err), -1);
    cr_assert(strstr(err.msg, "starts with '.'"), "%s", err.msg);
    eddy_object_store_destroy(&s);

    /* no prefix, endpoint from the options instead of the URI, a session token */
    setenv("AWS_SESSION_TOKEN", "session-token-for-test", 1);
    eddy_object_store_opts_t o = {.endpoint = eddy_test_s3rver_url(srv)};
    s = eddy_object_store_open("s3://" BUCKET, &o, &err);
    cr_assert_not_null(s, "%s", err.msg);
    put_ok(s, "top", "t", 1);
    expect_value(s, "top", "t", 1);
    expect_value(s, "ckpt/eddy/JOB/chk-7/empty", "", 0);
    eddy_object_store_destroy(&s);
    free(bin);
}

typedef struct {
    char **keys;
    uint64_t *sizes;
    int n, cap, stop_after;
} seen_t;

static int collect(const char *key, uint64_t size, void *ctx)
{
    seen_t *s = ctx;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->keys = realloc(s->keys, (size_t)s->cap * sizeof *s->keys);
        s->sizes = realloc(s->sizes, (size_t)s->cap * sizeof *s->sizes);
        cr_assert(s->keys && s->sizes);
    }
    s->keys[s->n] = strdup(key);
    s->sizes[s->n++] = size;
    return s->stop_after && s->n >= s->stop_after;
}

static void seen_clear(seen_t *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->keys[i]);
    free(s->keys);
    free(s->sizes);
    memset(s, 0, sizeof *s);
}

Test(object_store_s3, list_pages)
{
    enum { N = 1100 };
    eddy_object_store_t *s = open_ok("lp", NULL);
    char key[64];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "J/chk-1/op/kg-%04d.snap", i);
        put_ok(s, key, key, (size_t)(i % 17));
    }
    put_ok(s, "J/chk-10/_manifest", "m", 1);
    put_ok(s, "J/chk-2/_manifest", "mm", 2);
    /* an object under the prefix that is not a valid key (another tool's) */
    eddy_test_http_reply_t reply;
    long st = eddy_test_http_request(eddy_test_s3rver_port(srv), "PUT",
                                     "/" BUCKET "/lp/J/chk-1/bad%20name", NULL, "x", 5000, &reply);
    eddy_test_http_reply_clear(&reply);
    cr_assert_eq(st, 200, "unsigned PUT of a foreign object");

    seen_t seen = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_object_store_list(s, "J/chk-1/", collect, &seen, &err), 0, "%s", err.msg);
    cr_assert_eq(seen.n, N, "listed %d of %d keys (continuation tokens?)", seen.n, N);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "J/chk-1/op/kg-%04d.snap", i);
        cr_assert_str_eq(seen.keys[i], key);
        cr_assert_eq(seen.sizes[i], (uint64_t)(i % 17));
    }
    seen_clear(&seen);

    /* small pages, a partial segment, all keys, an early stop */
    eddy_object_store_opts_t o = {.list_page_size = 7};
    eddy_object_store_t *small = open_ok("lp", &o);
    cr_assert_eq(eddy_object_store_list(small, "J/chk-1", collect, &seen, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(seen.n, N + 1);
    cr_assert_str_eq(seen.keys[N], "J/chk-10/_manifest");
    seen_clear(&seen);
    cr_assert_eq(eddy_object_store_list(small, "", collect, &seen, &err), 0, "%s", err.msg);
    cr_assert_eq(seen.n, N + 2);
    cr_assert_str_eq(seen.keys[N + 1], "J/chk-2/_manifest");
    cr_assert_eq(seen.sizes[N + 1], 2);
    seen_clear(&seen);
    seen.stop_after = 10;
    cr_assert_eq(eddy_object_store_list(small, "", collect, &seen, &err), 1, "%s", err.msg);
    cr_assert_eq(seen.n, 10);
    seen_clear(&seen);
    cr_assert_eq(eddy_object_store_list(small, "none/", collect, &seen, &err), 0, "%s", err.msg);
    cr_assert_eq(seen.n, 0);
    eddy_object_store_destroy(&small);
    eddy_object_store_destroy(&s);
}

static int count_in_file(const char *path, const char *needle)
{
    char *text = eddy_read_file(path, NULL);
    cr_assert_not_null(text, "cannot read %s", path);
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    free(text);
    return n;
}

Test(object_store_s3, multipart_upload)
{
    size_t mib = 1 << 20, len = 20 * mib + 123;
    eddy_object_store_opts_t o = {.part_size = 5 * mib, .multipart_threshold = 5 * mib};
    eddy_object_store_t *s = open_ok("mp", &o);
    char *big = pattern(len, 7);
    put_ok(s, "J/chk-1/op/kg-0.snap", big, len);
    expect_value(s, "J/chk-1/op/kg-0.snap", big, len);
    cr_assert_eq(count_in_file(eddy_test_s3rver_log(srv), "Stored part "), 5,
                 "20 MiB + 123 bytes in 5 MiB parts are 5 parts");
    seen_t seen = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_object_store_list(s, "J/", collect, &seen, &err), 0, "%s", err.msg);
    cr_assert_eq(seen.n, 1);
    cr_assert_eq(seen.sizes[0], (uint64_t)len);
    seen_clear(&seen);
    /* at the threshold: one PUT */
    put_ok(s, "J/chk-1/op/kg-1.snap", big, 5 * mib);
    expect_value(s, "J/chk-1/op/kg-1.snap", big, 5 * mib);
    cr_assert_eq(count_in_file(eddy_test_s3rver_log(srv), "Stored part "), 5);
    /* a get limit below the object's size is an error, not a truncation */
    eddy_object_store_opts_t lim = {.max_object_bytes = mib};
    eddy_object_store_t *small = open_ok("mp", &lim);
    char *got = NULL;
    size_t got_len = 0;
    cr_assert_eq(eddy_object_store_get(small, "J/chk-1/op/kg-1.snap", &got, &got_len, &err), -1);
    cr_assert(strstr(err.msg, "larger than 1048576 bytes"), "%s", err.msg);
    eddy_object_store_destroy(&small);
    eddy_object_store_destroy(&s);
    free(big);
}

Test(object_store_s3, wrong_bucket_is_named)
{
    eddy_err_t err = {{0}};
    cr_assert_null(open_store("no-such-bucket", "p", NULL, &err));
    cr_assert(strstr(err.msg, "bucket \"no-such-bucket\" does not exist") &&
                  strstr(err.msg, eddy_test_s3rver_url(srv)) && strstr(err.msg, "NoSuchBucket"),
              "%s", err.msg);
    cr_assert(strstr(err.msg, "s3://no-such-bucket/p"), "names the store: %s", err.msg);
}

Test(object_store_s3, unknown_access_key_is_a_credentials_error)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "very-secret-value", 1);
    eddy_err_t err = {{0}};
    cr_assert_null(open_store(BUCKET, "p", NULL, &err));
    cr_assert(strstr(err.msg, "credentials") && strstr(err.msg, "AKIAWRONGKEY") &&
                  strstr(err.msg, "403") && strstr(err.msg, "InvalidAccessKeyId"),
              "%s", err.msg);
    cr_assert_null(strstr(err.msg, "very-secret-value"), "the secret leaked: %s", err.msg);
}

Test(object_store_s3, unreachable_endpoint_is_named)
{
    eddy_err_t err = {{0}};
    int port = eddy_test_free_port(&err);
    cr_assert_gt(port, 0, "%s", err.msg);
    char uri[128], endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
    snprintf(uri, sizeof uri, "s3://" BUCKET "/p?endpoint=%s", endpoint);
    eddy_object_store_opts_t o = {.max_attempts = 3, .backoff_ms = 20};
    uint64_t t0 = eddy_mono_ms();
    cr_assert_null(eddy_object_store_open(uri, &o, &err));
    cr_assert(strstr(err.msg, "is unreachable") && strstr(err.msg, endpoint) &&
                  strstr(err.msg, "3 attempts"),
              "%s", err.msg);
    cr_assert_lt(eddy_mono_ms() - t0, 5000, "3 quick attempts took too long");
}

Test(object_store_s3, silent_endpoint_times_out)
{
    eddy_err_t err = {{0}};
    int port = 0;
    int fd = eddy_test_listen_silent(&port, &err);
    cr_assert_geq(fd, 0, "%s", err.msg);
    char uri[128];
    snprintf(uri, sizeof uri, "s3://" BUCKET "/p?endpoint=http://127.0.0.1:%d", port);
    eddy_object_store_opts_t o = {.timeout_ms = 1000, .max_attempts = 2, .backoff_ms = 10};
    uint64_t t0 = eddy_mono_ms();
    cr_assert_null(eddy_object_store_open(uri, &o, &err));
    uint64_t took = eddy_mono_ms() - t0;
    cr_assert(strstr(err.msg, "timed out") && strstr(err.msg, "1000 ms") &&
                  strstr(err.msg, "2 attempts"),
              "%s", err.msg);
    cr_assert(took >= 1500 && took < 10000, "2 attempts of ~1 s took %llu ms",
              (unsigned long long)took);
    close(fd);
}

typedef struct {
    eddy_object_store_t *store;
    int rc;
    eddy_err_t err;
} putter_t;

static void *put_retrying(void *arg)
{
    putter_t *p = arg;
    p->rc = eddy_object_store_put(p->store, "retried", "r", 1, &p->err);
    return NULL;
}

Test(object_store_s3, server_killed_and_restarted)
{
    eddy_object_store_opts_t one = {.max_attempts = 1, .timeout_ms = 3000};
    eddy_object_store_t *s = open_ok("kr", &one);
    put_ok(s, "before", "b", 1);
    eddy_test_s3rver_kill(srv);

    /* down: clear errors, no crash */
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_object_store_put(s, "during", "d", 1, &err), -1);
    cr_assert(strstr(err.msg, "unreachable") && strstr(err.msg, eddy_test_s3rver_url(srv)),
              "%s", err.msg);
    char *got = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_object_store_get(s, "before", &got, &len, &err), -1, "down is not absent");
    seen_t seen = {0};
    cr_assert_eq(eddy_object_store_list(s, "", collect, &seen, &err), -1);
    cr_assert_eq(eddy_object_store_delete(s, "before", &err), -1);

    /* back: the same store works again, the data survived */
    cr_assert_eq(eddy_test_s3rver_restart(srv, &err), 0, "%s", err.msg);
    expect_value(s, "before", "b", 1);
    put_ok(s, "after", "a", 1);
    eddy_object_store_destroy(&s);

    /* down while a call retries: it succeeds once the server is back. The
     * restart happens on this thread: the server dies with the thread that
     * forked it (PR_SET_PDEATHSIG). */
    eddy_object_store_opts_t patient = {.max_attempts = 10, .backoff_ms = 100};
    s = open_ok("kr", &patient);
    eddy_test_s3rver_kill(srv);
    putter_t p = {.store = s};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, put_retrying, &p), 0);
    eddy_nap_ms(500);
    cr_assert_eq(eddy_test_s3rver_restart(srv, &err), 0, "%s", err.msg);
    pthread_join(th, NULL);
    cr_assert_eq(p.rc, 0, "put during the outage: %s", p.err.msg);
    expect_value(s, "retried", "r", 1);
    eddy_object_store_destroy(&s);
}

typedef struct {
    unsigned delay_ms;
} killer_t;

static void *kill_later(void *arg)
{
    killer_t *k = arg;
    eddy_nap_ms(k->delay_ms);
    eddy_test_s3rver_kill(srv);
    return NULL;
}

Test(object_store_s3, killed_during_multipart_upload)
{
    size_t mib = 1 << 20, len = 40 * mib;
    eddy_object_store_opts_t o = {.part_size = 5 * mib, .multipart_threshold = 5 * mib,
                                  .max_attempts = 1};
    eddy_object_store_t *s = open_ok("mk", &o);
    char *big = pattern(len, 9);
    killer_t k = {.delay_ms = 150};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, kill_later, &k), 0);
    eddy_err_t err = {{0}};
    int rc = eddy_object_store_put(s, "J/big", big, len, &err);
    pthread_join(th, NULL);
    cr_log_info("put while the server was killed: %d %s", rc, err.msg);
    if (rc < 0) /* the usual case; a very fast machine may have finished first */
        cr_assert(strstr(err.msg, eddy_test_s3rver_url(srv)) &&
                      strstr(err.msg, "multipart upload of 41943040 bytes in 8 parts"),
                  "%s", err.msg);
    cr_assert_eq(eddy_test_s3rver_restart(srv, &err), 0, "%s", err.msg);
    /* all or nothing: a failed upload left no object, a finished one is whole */
    char *got = NULL;
    size_t got_len = 0;
    int g = eddy_object_store_get(s, "J/big", &got, &got_len, &err);
    cr_assert_neq(g, -1, "%s", err.msg);
    if (rc < 0) {
        cr_assert_eq(g, 0, "a failed multipart upload is visible (%zu bytes)", got_len);
    } else {
        cr_assert_eq(g, 1);
        cr_assert(got_len == len && !memcmp(got, big, len));
    }
    free(got);
    /* and the store goes on */
    put_ok(s, "J/big", big, len);
    expect_value(s, "J/big", big, len);
    eddy_object_store_destroy(&s);
    free(big);
}

/* ---- the signature, checked independently ----------------------------------
 * s3rver does not verify SigV4, so this test puts a recording HTTP server in
 * its place, lets the store open (one list request) and put an object (a
 * PUT with a body), and recomputes each request's signature from what was
 * sent, as AWS would: canonical request, string to sign, the derived key.
 * It also insists that the query string is already canonical (libcurl 7.88
 * signs it as given), that x-amz-content-sha256 is the body's hash, and that
 * the session token is sent and signed. */

#define REC_MAX 8

typedef struct {
    int listen_fd, want;
    int n;
    char head[REC_MAX][8192];
    char *body[REC_MAX];
    size_t body_len[REC_MAX];
} recorder_t;

static const char *header_value(const char *head, const char *name, char *out, size_t size)
{
    size_t n = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n")) {
        const char *l = line + 2;
        if (!strncasecmp(l, name, n) && l[n] == ':') {
            const char *v = l + n + 1;
            while (*v == ' ')
                v++;
            const char *end = strstr(v, "\r\n");
            snprintf(out, size, "%.*s", (int)(end - v), v);
            while (strlen(out) && out[strlen(out) - 1] == ' ')
                out[strlen(out) - 1] = '\0';
            return out;
        }
    }
    return NULL;
}

static void *record(void *arg)
{
    recorder_t *r = arg;
    static const char list[] = "<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name>"
                               "<KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>"
                               "</ListBucketResult>";
    for (r->n = 0; r->n < r->want; r->n++) {
        int fd = accept(r->listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char *h = r->head[r->n];
        size_t got = 0;
        while (got < sizeof r->head[0] - 1 && !strstr(h, "\r\n\r\n")) {
            ssize_t k = recv(fd, h + got, 1, 0); /* byte by byte: stop at the blank line */
            if (k <= 0)
                break;
            h[++got] = '\0';
        }
        char v[64];
        size_t len = header_value(h, "Content-Length", v, sizeof v) ? strtoul(v, NULL, 10) : 0;
        if (header_value(h, "Expect", v, sizeof v))
            send(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_NOSIGNAL);
        r->body[r->n] = calloc(1, len + 1);
        for (size_t done = 0; done < len;) {
            ssize_t k = recv(fd, r->body[r->n] + done, len - done, 0);
            if (k <= 0)
                break;
            done += (size_t)k;
        }
        r->body_len[r->n] = len;
        /* an upload id with characters that must be percent-encoded */
        static const char create[] = "<InitiateMultipartUploadResult><UploadId>up/id+1=&amp;"
                                     "</UploadId></InitiateMultipartUploadResult>";
        static const char complete[] = "<CompleteMultipartUploadResult></CompleteMultipartUploadResult>";
        const char *answer = !strncmp(h, "GET ", 4)                                    ? list
                             : !strncmp(h, "POST ", 5) && strstr(h, "?uploads= ") ? create
                             : !strncmp(h, "POST ", 5)                               ? complete
                                                                                     : "";
        char reply[512];
        int rn = snprintf(reply, sizeof reply,
                          "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n"
                          "ETag: \"e%d\"\r\n\r\n%s",
                          strlen(answer), r->n, answer);
        send(fd, reply, (size_t)rn, MSG_NOSIGNAL);
        close(fd);
    }
    return NULL;
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
    unsigned int n = 32;
    cr_assert_not_null(HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg),
                            out, &n));
}

static void hex(const unsigned char *in, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", in[i]);
}

static void sha256(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int n = 32;
    cr_assert(EVP_Digest(data, len, md, &n, EVP_sha256(), NULL));
    hex(md, 32, out);
}

/* Recomputes the SigV4 of one recorded request with secret and region. */
static void check_signature(const recorder_t *r, int i, const char *secret, const char *region)
{
    const char *h = r->head[i];
    char method[16], target[2048];
    cr_assert_eq(sscanf(h, "%15s %2047s", method, target), 2);
    char *q = strchr(target, '?');
    const char *query = "";
    if (q) {
        *q = '\0';
        query = q + 1;
    }
    /* canonical already: parameters sorted, each with '=' */
    char prev[256] = "";
    for (const char *p = query; *p;) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        cr_assert(memchr(p, '=', n), "query parameter without '=': %s", query);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(strcspn(p, "=")), p);
        cr_assert_lt(strcmp(prev, name), 0, "query not sorted: %s", query);
        snprintf(prev, sizeof prev, "%s", name);
        p = amp ? amp + 1 : p + n;
    }
    char auth[1024], date[32], payload[80], v[1024];
    cr_assert_not_null(header_value(h, "Authorization", auth, sizeof auth), "%s", h);
    cr_assert_not_null(header_value(h, "X-Amz-Date", date, sizeof date));
    cr_assert_not_null(header_value(h, "x-amz-content-sha256", payload, sizeof payload));
    char body_hash[65];
    sha256(r->body[i], r->body_len[i], body_hash);
    cr_assert_str_eq(payload, body_hash, "x-amz-content-sha256 is not the body's SHA-256");
    char cred[256], signed_headers[512], sig[80];
    cr_assert_eq(sscanf(auth, "AWS4-HMAC-SHA256 Credential=%255[^,], SignedHeaders=%511[^,], "
                        "Signature=%79s", cred, signed_headers, sig), 3, "%s", auth);
    char scope[128];
    snprintf(scope, sizeof scope, "%.8s/%s/s3/aws4_request", date, region);
    cr_assert(strstr(cred, scope), "credential scope %s, want %s", cred, scope);
    cr_assert(strstr(signed_headers, "x-amz-content-sha256") &&
                  strstr(signed_headers, "host") && strstr(signed_headers, "x-amz-date"),
              "%s", signed_headers);

    char canon[16384];
    size_t c = (size_t)snprintf(canon, sizeof canon, "%s\n%s\n%s\n", method, target, query);
    char names[512];
    snprintf(names, sizeof names, "%s", signed_headers);
    for (char *save, *name = strtok_r(names, ";", &save); name; name = strtok_r(NULL, ";", &save)) {
        cr_assert_not_null(header_value(h, name, v, sizeof v), "signed header %s not sent", name);
        c += (size_t)snprintf(canon + c, sizeof canon - c, "%s:%s\n", name, v);
    }
    snprintf(canon + c, sizeof canon - c, "\n%s\n%s", signed_headers, payload);
    char canon_hash[65], sts[512];
    sha256(canon, strlen(canon), canon_hash);
    snprintf(sts, sizeof sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", date, scope, canon_hash);
    char k0[256];
    snprintf(k0, sizeof k0, "AWS4%s", secret);
    char day[9];
    snprintf(day, sizeof day, "%.8s", date);
    unsigned char k1[32], k2[32], k3[32], k4[32], s[32];
    hmac(k0, strlen(k0), day, k1);
    hmac(k1, 32, region, k2);
    hmac(k2, 32, "s3", k3);
    hmac(k3, 32, "aws4_request", k4);
    hmac(k4, 32, sts, s);
    char want[65];
    hex(s, 32, want);
    cr_assert_str_eq(sig, want, "request %d (%s %s?%s): signature differs", i, method, target,
                     query);
}

Test(object_store_s3, signature_is_sigv4)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 1);
    setenv("AWS_SESSION_TOKEN", "the-session-token", 1);
    eddy_err_t err = {{0}};
    recorder_t rec = {.want = 2};
    int port = 0;
    rec.listen_fd = eddy_test_listen_silent(&port, &err);
    cr_assert_geq(rec.listen_fd, 0, "%s", err.msg);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, record, &rec), 0);
    char uri[256];
    snprintf(uri, sizeof uri, "s3://sig-bucket/some/prefix?region=eu-west-3&endpoint=http://"
             "127.0.0.1:%d", port);
    eddy_object_store_opts_t o = {.max_attempts = 1, .timeout_ms = 5000};
    eddy_object_store_t *s = eddy_object_store_open(uri, &o, &err);
    cr_assert_not_null(s, "%s", err.msg);
    put_ok(s, "JOB/chk-1/x.snap", "hello, signed world", 19);
    pthread_join(th, NULL);
    cr_assert_eq(rec.n, 2);
    static const char get_line[] = "GET /sig-bucket?list-type=2&max-keys=1&prefix=some%2Fprefix%2F ";
    static const char put_line[] = "PUT /sig-bucket/some/prefix/JOB/chk-1/x.snap ";
    cr_assert(!strncmp(rec.head[0], get_line, strlen(get_line)), "%.120s", rec.head[0]);
    cr_assert(!strncmp(rec.head[1], put_line, strlen(put_line)), "%.120s", rec.head[1]);
    char v[128];
    cr_assert_str_eq(header_value(rec.head[1], "x-amz-security-token", v, sizeof v),
                     "the-session-token");
    for (int i = 0; i < rec.n; i++) {
        char auth[1024];
        header_value(rec.head[i], "Authorization", auth, sizeof auth);
        cr_assert(strstr(auth, "x-amz-security-token"), "the token is not signed: %s", auth);
        check_signature(&rec, i, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "eu-west-3");
        free(rec.body[i]);
    }
    eddy_object_store_destroy(&s);

    /* a multipart upload: create, 3 parts, complete */
    memset(&rec.head, 0, sizeof rec.head);
    rec.want = 6;
    cr_assert_eq(pthread_create(&th, NULL, record, &rec), 0);
    o.part_size = o.multipart_threshold = 5 << 20;
    s = eddy_object_store_open(uri, &o, &err);
    cr_assert_not_null(s, "%s", err.msg);
    size_t len = (11 << 20) + 5;
    char *big = pattern(len, 3);
    put_ok(s, "JOB/chk-1/big.snap", big, len);
    pthread_join(th, NULL);
    cr_assert_eq(rec.n, 6);
    static const char *lines[] = {
        "GET /sig-bucket?",
        "POST /sig-bucket/some/prefix/JOB/chk-1/big.snap?uploads= ",
        "PUT /sig-bucket/some/prefix/JOB/chk-1/big.snap?partNumber=1&uploadId=up%2Fid%2B1%3D%26 ",
        "PUT /sig-bucket/some/prefix/JOB/chk-1/big.snap?partNumber=2&uploadId=up%2Fid%2B1%3D%26 ",
        "PUT /sig-bucket/some/prefix/JOB/chk-1/big.snap?partNumber=3&uploadId=up%2Fid%2B1%3D%26 ",
        "POST /sig-bucket/some/prefix/JOB/chk-1/big.snap?uploadId=up%2Fid%2B1%3D%26 "};
    for (int i = 0; i < rec.n; i++) {
        cr_assert(!strncmp(rec.head[i], lines[i], strlen(lines[i])), "request %d: %.160s", i,
                  rec.head[i]);
        check_signature(&rec, i, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "eu-west-3");
    }
    cr_assert_eq(rec.body_len[2], 5u << 20);
    cr_assert_eq(rec.body_len[4], (1u << 20) + 5);
    cr_assert(!memcmp(rec.body[4], big + (10 << 20), (1 << 20) + 5));
    cr_assert(strstr(rec.body[5], "<Part><PartNumber>3</PartNumber><ETag>\"e4\"</ETag></Part>"),
              "%s", rec.body[5]);
    for (int i = 0; i < rec.n; i++)
        free(rec.body[i]);
    free(big);
    eddy_object_store_destroy(&s);
    close(rec.listen_fd);
}
