/* test_object_store_file.c - the object store on a directory
 * (state/object_store.c + state/object_store_file.c), and the URI and key
 * rules every backend shares.
 *
 * Round trips (binary, empty, nested keys), an overwrite that a concurrent
 * reader sees whole or not at all and that leaves no temporary files, list
 * by prefix in byte order with sizes and early stop, delete (absent is fine,
 * empty directories go), keys and prefixes that are refused with a reason,
 * a missing root as a clear error, and s3:// URIs refused before any
 * network traffic (bad bucket, parameter, region, endpoint, credentials).
 * Each test works in its own mkdtemp directory and removes it. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/object_store.h"
#include "tests/support/etcd.h"
#include "tests/unit/leak_check.h"

static char *tmp;
static char uri[4200];
static eddy_object_store_t *store;

static void setup(void)
{
    eddy_err_t err = {{0}};
    tmp = eddy_test_mkdtemp("objstore", &err);
    cr_assert_not_null(tmp, "%s", err.msg);
    snprintf(uri, sizeof uri, "file://%s", tmp);
    store = eddy_object_store_open(uri, NULL, &err);
    cr_assert_not_null(store, "%s", err.msg);
}

static void teardown(void)
{
    eddy_object_store_destroy(&store);
    cr_assert_null(store);
    eddy_test_rm_rf(tmp);
    free(tmp);
    eddy_test_leak_check();
}

TestSuite(object_store_file, .init = setup, .fini = teardown);

static void put_ok(const char *key, const void *data, size_t len)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_object_store_put(store, key, data, len, &err), 0, "put %s: %s", key,
                 err.msg);
}

static void expect_value(const char *key, const void *data, size_t len)
{
    eddy_err_t err = {{0}};
    char *got = NULL;
    size_t got_len = 99;
    cr_assert_eq(eddy_object_store_get(store, key, &got, &got_len, &err), 1, "get %s: %s", key,
                 err.msg);
    cr_assert_eq(got_len, len, "%s: %zu bytes, want %zu", key, got_len, len);
    cr_assert(len == 0 || memcmp(got, data, len) == 0, "%s: other bytes", key);
    cr_assert_eq(got[len], '\0', "values are NUL-terminated");
    free(got);
}

static void expect_absent(const char *key)
{
    eddy_err_t err = {{0}};
    char *got = (char *)1;
    size_t len = 7;
    cr_assert_eq(eddy_object_store_get(store, key, &got, &len, &err), 0, "get %s: %s", key,
                 err.msg);
    cr_assert_null(got);
    cr_assert_eq(len, 0);
}

Test(object_store_file, round_trip)
{
    cr_assert_str_eq(eddy_object_store_uri(store), uri);
    char bin[4096];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (char)(i * 7 + (i >> 5)); /* has NUL bytes */
    put_ok("JOB/chk-7/count/kg-12.snap", bin, sizeof bin);
    put_ok("JOB/chk-7/_manifest", "m", 1);
    put_ok("empty", NULL, 0);
    put_ok("top_level-file.v2", "x", 1);
    expect_value("JOB/chk-7/count/kg-12.snap", bin, sizeof bin);
    expect_value("JOB/chk-7/_manifest", "m", 1);
    expect_value("empty", "", 0);
    expect_value("top_level-file.v2", "x", 1);
    expect_absent("JOB/chk-7/count/kg-13.snap");
    expect_absent("JOB/chk-8/x");
    expect_absent("JOB/chk-7"); /* a "directory" is not an object */
    expect_absent("empty/below"); /* below a file */

    /* the documented layout: ROOT/KEY, the bytes exactly */
    char path[8192];
    snprintf(path, sizeof path, "%s/JOB/chk-7/count/kg-12.snap", tmp);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_size, (off_t)sizeof bin);
}

static size_t count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strstr(de->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

typedef struct {
    atomic_bool stop;
    const char *a, *b;
    size_t alen, blen;
    long reads, torn;
    char why[256];
} reader_t;

static void *reader(void *arg)
{
    reader_t *r = arg;
    while (!atomic_load(&r->stop)) {
        char *got = NULL;
        size_t len = 0;
        eddy_err_t err = {{0}};
        int rc = eddy_object_store_get(store, "j/chk-1/op/kg-0.snap", &got, &len, &err);
        r->reads++;
        bool whole = rc == 1 && ((len == r->alen && !memcmp(got, r->a, len)) ||
                                 (len == r->blen && !memcmp(got, r->b, len)));
        if (!whole && !r->torn)
            snprintf(r->why, sizeof r->why, "rc %d, %zu bytes: %.200s", rc, len, err.msg);
        r->torn += !whole;
        free(got);
    }
    return NULL;
}

Test(object_store_file, overwrite_is_atomic)
{
    size_t alen = 256 * 1024, blen = 100 * 1024 + 3;
    char *a = malloc(alen), *b = malloc(blen);
    memset(a, 'a', alen);
    memset(b, 'b', blen);
    put_ok("j/chk-1/op/kg-0.snap", a, alen);
    reader_t r = {.a = a, .b = b, .alen = alen, .blen = blen};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, reader, &r), 0);
    for (int i = 0; i < 60; i++)
        put_ok("j/chk-1/op/kg-0.snap", i % 2 ? a : b, i % 2 ? alen : blen);
    atomic_store(&r.stop, true);
    pthread_join(th, NULL);
    cr_assert_gt(r.reads, 0);
    cr_assert_eq(r.torn, 0, "%ld of %ld reads saw neither value whole (%s)", r.torn, r.reads,
                 r.why);
    expect_value("j/chk-1/op/kg-0.snap", a, alen); /* the last put (i = 59) */
    char dir[8192];
    snprintf(dir, sizeof dir, "%s/j/chk-1/op", tmp);
    cr_assert_eq(count_tmp(dir), 0, "temporary files left behind");
    free(a);
    free(b);
}

typedef struct {
    char keys[64][EDDY_OBJECT_STORE_KEY_MAX + 1];
    uint64_t sizes[64];
    int n, stop_after;
} seen_t;

static int collect(const char *key, uint64_t size, void *ctx)
{
    seen_t *s = ctx;
    cr_assert_lt(s->n, 64);
    snprintf(s->keys[s->n], sizeof s->keys[0], "%s", key);
    s->sizes[s->n++] = size;
    return s->stop_after && s->n >= s->stop_after;
}

static seen_t *list_ok(const char *prefix, int want_rc)
{
    static seen_t s;
    memset(&s, 0, sizeof s);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_object_store_list(store, prefix, collect, &s, &err), want_rc,
                 "list '%s': %s", prefix, err.msg);
    return &s;
}

Test(object_store_file, list)
{
    seen_t *s = list_ok("", 0);
    cr_assert_eq(s->n, 0, "an empty store lists nothing");
    const char *keys[] = {"J/chk-10/op/kg-1.snap", "J/chk-1/op/kg-2.snap", "J/chk-1/op/kg-1.snap",
                          "J/chk-1/_manifest", "J/chk-2/_manifest", "K/chk-1/_manifest", "top"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        put_ok(keys[i], "0123456789", i + 1);
    /* a temporary file of a put that crashed is no key */
    char junk[8192];
    snprintf(junk, sizeof junk, "%s/J/chk-1/.x.tmp.1.2", tmp);
    FILE *f = fopen(junk, "w");
    cr_assert_not_null(f);
    fclose(f);

    s = list_ok("", 0);
    cr_assert_eq(s->n, 7);
    const char *all[] = {"J/chk-1/_manifest", "J/chk-1/op/kg-1.snap", "J/chk-1/op/kg-2.snap",
                         "J/chk-10/op/kg-1.snap", "J/chk-2/_manifest", "K/chk-1/_manifest", "top"};
    for (int i = 0; i < 7; i++)
        cr_assert_str_eq(s->keys[i], all[i], "byte order: #%d", i);
    cr_assert_eq(s->sizes[0], 4); /* J/chk-1/_manifest was keys[3]: 4 bytes */
    cr_assert_eq(s->sizes[3], 1);

    s = list_ok("J/chk-1/", 0);
    cr_assert_eq(s->n, 3);
    cr_assert_str_eq(s->keys[0], "J/chk-1/_manifest");
    cr_assert_str_eq(s->keys[2], "J/chk-1/op/kg-2.snap");

    s = list_ok("J/chk-1", 0); /* a partial segment: chk-1 and chk-10 */
    cr_assert_eq(s->n, 4);
    cr_assert_str_eq(s->keys[3], "J/chk-10/op/kg-1.snap");

    s = list_ok("J/chk-1/op/kg-2", 0);
    cr_assert_eq(s->n, 1);
    s = list_ok("J/chk-1/op/kg-2.snap", 0); /* a whole key is its own prefix */
    cr_assert_eq(s->n, 1);
    s = list_ok("nothing/", 0);
    cr_assert_eq(s->n, 0);
    s = list_ok("to", 0);
    cr_assert_eq(s->n, 1);

    memset(s, 0, sizeof *s);
    s->stop_after = 2;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_object_store_list(store, "J/", collect, s, &err), 1,
                 "a callback that stops makes list return 1");
    cr_assert_eq(s->n, 2);
}

Test(object_store_file, delete)
{
    eddy_err_t err = {{0}};
    put_ok("J/chk-3/op/kg-1.snap", "a", 1);
    put_ok("J/chk-3/op/kg-2.snap", "b", 1);
    put_ok("J/chk-4/_manifest", "c", 1);
    cr_assert_eq(eddy_object_store_delete(store, "J/chk-3/op/kg-1.snap", &err), 0, "%s", err.msg);
    expect_absent("J/chk-3/op/kg-1.snap");
    expect_value("J/chk-3/op/kg-2.snap", "b", 1);
    cr_assert_eq(eddy_object_store_delete(store, "J/chk-3/op/kg-1.snap", &err), 0,
                 "absent is not an error: %s", err.msg);
    cr_assert_eq(eddy_object_store_delete(store, "never/was/here", &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_object_store_delete(store, "J/chk-3/op/kg-2.snap", &err), 0, "%s", err.msg);
    /* the emptied directories are gone, the others stay */
    char path[8192];
    struct stat st;
    snprintf(path, sizeof path, "%s/J/chk-3", tmp);
    cr_assert_neq(stat(path, &st), 0, "empty directory %s left behind", path);
    snprintf(path, sizeof path, "%s/J/chk-4", tmp);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(stat(tmp, &st), 0, "the root stays");
    seen_t *s = list_ok("", 0);
    cr_assert_eq(s->n, 1);
    cr_assert_str_eq(s->keys[0], "J/chk-4/_manifest");
    /* put again where a directory was removed */
    put_ok("J/chk-3/op/kg-1.snap", "d", 1);
    expect_value("J/chk-3/op/kg-1.snap", "d", 1);
}

Test(object_store_file, bad_keys)
{
    char long_key[EDDY_OBJECT_STORE_KEY_MAX + 2];
    memset(long_key, 'k', sizeof long_key - 1);
    for (size_t i = 100; i < sizeof long_key - 1; i += 101)
        long_key[i] = '/';
    long_key[sizeof long_key - 1] = '\0';
    static const struct {
        const char *key, *why;
    } bad[] = {
        {"", "empty"},
        {"/etc/passwd", "starts with '/'"},
        {"a/../b", "starts with '.'"},
        {"..", "starts with '.'"},
        {"../x", "starts with '.'"},
        {"a/./b", "starts with '.'"},
        {"a/.hidden", "starts with '.'"},
        {"a//b", "empty segment"},
        {"a/", "ends with '/'"},
        {"a b", "byte 0x20"},
        {"a\\b", "byte 0x5c"},
        {"a\nb", "byte 0x0a"},
        {"caf\xc3\xa9", "byte 0xc3"},
        {"a%2e", "byte 0x25"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        eddy_err_t err = {{0}};
        char *data = NULL;
        size_t len = 0;
        cr_assert_eq(eddy_object_store_put(store, bad[i].key, "x", 1, &err), -1, "put '%s'",
                     bad[i].key);
        cr_assert(strstr(err.msg, bad[i].why), "put '%s': '%s' does not say '%s'", bad[i].key,
                  err.msg, bad[i].why);
        cr_assert(strstr(err.msg, uri), "'%s' does not name the store", err.msg);
        cr_assert_eq(eddy_object_store_get(store, bad[i].key, &data, &len, &err), -1);
        cr_assert_eq(eddy_object_store_delete(store, bad[i].key, &err), -1);
        cr_assert_eq(eddy_object_store_check_key(bad[i].key, NULL), -1);
    }
    eddy_err_t err = {{0}};
    char long_segment[EDDY_OBJECT_STORE_SEGMENT_MAX + 4] = "a/";
    memset(long_segment + 2, 's', EDDY_OBJECT_STORE_SEGMENT_MAX + 1);
    cr_assert_eq(eddy_object_store_put(store, long_segment, "x", 1, &err), -1);
    cr_assert(strstr(err.msg, "longer than 200"), "%s", err.msg);
    long_segment[EDDY_OBJECT_STORE_SEGMENT_MAX + 2] = '\0'; /* 200: fine */
    put_ok(long_segment, "x", 1);
    cr_assert_eq(eddy_object_store_put(store, long_key, "x", 1, &err), -1);
    cr_assert(strstr(err.msg, "longer than 512"), "%s", err.msg);
    long_key[EDDY_OBJECT_STORE_KEY_MAX] = '\0'; /* exactly the limit is fine */
    if (long_key[EDDY_OBJECT_STORE_KEY_MAX - 1] == '/')
        long_key[EDDY_OBJECT_STORE_KEY_MAX - 1] = 'k';
    put_ok(long_key, "x", 1);
    expect_value(long_key, "x", 1);
    /* prefixes follow the same rules, but may be empty or end in '/' */
    seen_t s = {0};
    cr_assert_eq(eddy_object_store_list(store, "../", collect, &s, &err), -1);
    cr_assert(strstr(err.msg, "starts with '.'"), "%s", err.msg);
    cr_assert_eq(eddy_object_store_list(store, "/", collect, &s, &err), -1);
    cr_assert_eq(eddy_object_store_put(store, "k", NULL, 3, &err), -1, "NULL data, 3 bytes");
    /* nothing was written outside the root */
    char path[8192];
    snprintf(path, sizeof path, "%s/../b", tmp);
    cr_assert_neq(access(path, F_OK), 0);
}

Test(object_store_file, missing_root_is_an_error)
{
    eddy_err_t err = {{0}};
    char missing[8192];
    snprintf(missing, sizeof missing, "file://%s/not/there", tmp);
    eddy_object_store_t *s = eddy_object_store_open(missing, NULL, &err);
    cr_assert_null(s);
    cr_assert(strstr(err.msg, "/not/there") && strstr(err.msg, "No such file or directory") &&
                  strstr(err.msg, "create it first"),
              "%s", err.msg);
    char path[8192];
    snprintf(path, sizeof path, "%s/not", tmp);
    cr_assert_neq(access(path, F_OK), 0, "open must not create the root");

    /* a root that is a file */
    put_ok("plain", "x", 1);
    snprintf(missing, sizeof missing, "file://%s/plain", tmp);
    cr_assert_null(eddy_object_store_open(missing, NULL, &err));
    cr_assert(strstr(err.msg, "not a directory"), "%s", err.msg);

    /* a root removed after open: every call says so */
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/sub", tmp);
    cr_assert_eq(mkdir(sub, 0755), 0);
    snprintf(missing, sizeof missing, "file://%s/", sub); /* trailing '/' is fine */
    s = eddy_object_store_open(missing, NULL, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_eq(rmdir(sub), 0);
    cr_assert_eq(eddy_object_store_put(s, "a/b", "x", 1, &err), -1);
    cr_assert(strstr(err.msg, sub) && strstr(err.msg, "create it first"), "%s", err.msg);
    cr_assert_neq(access(sub, F_OK), 0, "put must not re-create the root");
    char *data = NULL;
    size_t len;
    cr_assert_eq(eddy_object_store_get(s, "a/b", &data, &len, &err), -1, "absent root != absent key");
    cr_assert_eq(eddy_object_store_delete(s, "a/b", &err), -1);
    seen_t seen = {0};
    cr_assert_eq(eddy_object_store_list(s, "", collect, &seen, &err), -1);
    eddy_object_store_destroy(&s);
}

Test(object_store_file, bad_uris)
{
    static const struct {
        const char *uri, *why;
    } bad[] = {
        {"", "URI is empty"},
        {"/tmp/x", "unsupported scheme"},
        {"ftp://x/y", "unsupported scheme"},
        {"file://host/dir", "a file URI has no host"},
        {"file:relative", "unsupported scheme"},
        {"s3://", "not a valid S3 bucket name"},
        {"s3://Bad_Bucket/p", "\"Bad_Bucket\" is not a valid S3 bucket name"},
        {"s3://ab/p", "not a valid S3 bucket name"},
        {"s3://bucket/a/../b", "bad prefix"},
        {"s3://bucket/p?endpoint=ftp://x", "not an http:// or https:// URL"},
        {"s3://bucket/p?endpoint=http://user@host", "not allowed"},
        {"s3://bucket/p?region=US_EAST", "not a region name"},
        {"s3://bucket/p?foo=1", "unknown query parameter \"foo\""},
        {"s3://bucket/p?endpoint=http%3A%2F%2Fx%zz", "bad %-escape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        eddy_err_t err = {{0}};
        cr_assert_null(eddy_object_store_open(bad[i].uri, NULL, &err), "%s", bad[i].uri);
        cr_assert(strstr(err.msg, bad[i].why), "%s: '%s' does not say '%s'", bad[i].uri, err.msg,
                  bad[i].why);
    }
    eddy_err_t err = {{0}};
    eddy_object_store_opts_t o = {.part_size = 1 << 20};
    cr_assert_null(eddy_object_store_open(uri, &o, &err));
    cr_assert(strstr(err.msg, "5 MiB"), "%s", err.msg);
    o = (eddy_object_store_opts_t){.list_page_size = 5000};
    cr_assert_null(eddy_object_store_open(uri, &o, &err));
    cr_assert(strstr(err.msg, "1000"), "%s", err.msg);

    /* no credentials: refused before any request */
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    cr_assert_null(eddy_object_store_open("s3://bucket/p?endpoint=http://127.0.0.1:1", NULL, &err));
    cr_assert(strstr(err.msg, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set") &&
                  strstr(err.msg, "s3://bucket/p"),
              "%s", err.msg);
}
