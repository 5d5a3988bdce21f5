/* test_metastore.c - the metastore contract (state/metastore.h), run against
 * both backends: the file store in a fresh temp dir and a real etcd that
 * this binary starts once (ReportHook PRE_ALL) and stops at the end
 * (POST_ALL). Suite "file" and suite "etcd" share every contract test
 * through BOTH(); backend-specific behaviour (durability across processes,
 * escaping on disk, unreachable/slow etcd, URL forms) has its own tests.
 *
 * Each test namespaces its keys under "/t<pid>/" so the shared etcd can serve
 * tests running in parallel (criterion --jobs=N). */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "state/metastore.h"
#include "tests/support/etcd.h"

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    eddy_test_etcd_start_shared();
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    eddy_test_etcd_stop_shared();
}

/* ---- fixtures ------------------------------------------------------------ */

static eddy_metastore_t *ms;
static char *tmp_dir;   /* file suite: the temp dir holding the store */
static char store_dir[512];
static int is_file;
static char ns[32];     /* "/t<pid>/" */
static eddy_err_t init_err; /* why a fixture has no store; need_store() reports it */

/* Fixtures only record failures: an assertion in .init is reported by
 * Criterion as a crash in setup, so every test checks here instead. */
static void need_store(void)
{
    cr_assert_not_null(ms, "%s", init_err.msg);
}

/* ns + suffix in a rotating static buffer (enough for one expression). */
static const char *k(const char *suffix)
{
    static char bufs[16][EDDY_METASTORE_KEY_MAX + 1];
    static int next;
    char *b = bufs[next++ % 16];
    snprintf(b, sizeof bufs[0], "%s%s", ns, suffix);
    return b;
}

static void file_init(void)
{
    snprintf(ns, sizeof ns, "/t%d/", (int)getpid());
    is_file = 1;
    tmp_dir = eddy_test_mkdtemp("metastore", &init_err);
    if (!tmp_dir)
        return;
    snprintf(store_dir, sizeof store_dir, "%s/store", tmp_dir);
    ms = eddy_metastore_open(store_dir, &init_err);
    if (!ms)
        eddy_err_wrap(&init_err, "open %s", store_dir);
}

static void file_fini(void)
{
    eddy_metastore_destroy(&ms);
    eddy_test_rm_rf(tmp_dir);
    free(tmp_dir);
    tmp_dir = NULL;
}

static void etcd_init(void)
{
    snprintf(ns, sizeof ns, "/t%d/", (int)getpid());
    is_file = 0;
    const char *url = eddy_test_etcd_shared_url(&init_err);
    if (url && !(ms = eddy_metastore_open(url, &init_err)))
        eddy_err_wrap(&init_err, "open %s", url);
}

static void etcd_fini(void)
{
    if (ms) { /* leave the shared server clean */
        eddy_kv_list_t l;
        if (eddy_metastore_list(ms, ns, &l, NULL) == 0)
            for (size_t i = 0; i < l.count; i++)
                eddy_metastore_delete(ms, l.items[i].key, NULL);
        eddy_kv_list_clear(&l);
    }
    eddy_metastore_destroy(&ms);
}

/* One contract test, registered for both backends. */
#define BOTH(name)                                                                           \
    static void body_##name(void);                                                           \
    Test(file, name, .init = file_init, .fini = file_fini)                                   \
    {                                                                                        \
        need_store();                                                                        \
        body_##name();                                                                       \
    }                                                                                        \
    Test(etcd, name, .init = etcd_init, .fini = etcd_fini)                                   \
    {                                                                                        \
        need_store();                                                                        \
        body_##name();                                                                       \
    }                                                                                        \
    static void body_##name(void)

/* ---- helpers ------------------------------------------------------------- */

static void put_str(const char *key, const char *value)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_metastore_put(ms, key, value, strlen(value), &err), 0, "put %s: %s", key,
                 err.msg);
}

static void expect_value(const char *key, const void *want, size_t want_len)
{
    eddy_err_t err = {{0}};
    char *v = NULL;
    size_t n = 12345;
    int rc = eddy_metastore_get(ms, key, &v, &n, &err);
    cr_assert_eq(rc, 1, "get %s: rc %d: %s", key, rc, err.msg);
    cr_assert_not_null(v);
    cr_assert_eq(n, want_len, "get %s: length %zu, want %zu", key, n, want_len);
    cr_assert(memcmp(v, want, want_len) == 0, "get %s: wrong bytes", key);
    cr_assert_eq(v[n], '\0', "value is not NUL-terminated");
    free(v);
}

static void expect_absent(const char *key)
{
    eddy_err_t err = {{0}};
    char *v = (char *)"junk";
    size_t n = 99;
    cr_assert_eq(eddy_metastore_get(ms, key, &v, &n, &err), 0, "get %s: %s", key, err.msg);
    cr_assert_null(v);
    cr_assert_eq(n, 0);
}

/* ---- contract tests, both backends --------------------------------------- */

BOTH(put_get_roundtrip)
{
    put_str(k("jobs/wordcount"), "{\"parallelism\":4}");
    expect_value(k("jobs/wordcount"), "{\"parallelism\":4}", 17);
    cr_assert_str_eq(eddy_metastore_url(ms), is_file ? store_dir : getenv("EDDY_TEST_ETCD_URL"));
}

BOTH(overwrite_replaces_value)
{
    put_str(k("a"), "first, and longer");
    put_str(k("a"), "second");
    expect_value(k("a"), "second", 6);
    put_str(k("a"), "third value, longer again");
    expect_value(k("a"), "third value, longer again", 25);
}

BOTH(delete_and_absent_keys)
{
    eddy_err_t err = {{0}};
    expect_absent(k("never"));
    cr_assert_eq(eddy_metastore_delete(ms, k("never"), &err), 0, "%s", err.msg);
    put_str(k("gone"), "x");
    cr_assert_eq(eddy_metastore_delete(ms, k("gone"), &err), 0, "%s", err.msg);
    expect_absent(k("gone"));
    cr_assert_eq(eddy_metastore_delete(ms, k("gone"), &err), 0, "second delete: %s", err.msg);
    /* existence check without taking the value */
    put_str(k("here"), "y");
    cr_assert_eq(eddy_metastore_get(ms, k("here"), NULL, NULL, &err), 1, "%s", err.msg);
    cr_assert_eq(eddy_metastore_get(ms, k("gone"), NULL, NULL, &err), 0, "%s", err.msg);
}

BOTH(list_prefix_sorted)
{
    eddy_err_t err = {{0}};
    const char *in[] = {"w/3", "w/1", "w/10", "w/2", "wx", "v/1", "w/", "w/1/sub"};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        put_str(k(in[i]), in[i]);
    eddy_kv_list_t l;
    cr_assert_eq(eddy_metastore_list(ms, k("w/"), &l, &err), 0, "%s", err.msg);
    const char *want[] = {"w/", "w/1", "w/1/sub", "w/10", "w/2", "w/3"};
    cr_assert_eq(l.count, sizeof want / sizeof want[0], "count %zu", l.count);
    for (size_t i = 0; i < l.count; i++) {
        cr_assert_str_eq(l.items[i].key, k(want[i]));
        cr_assert_eq(l.items[i].value_len, strlen(want[i]));
        cr_assert_str_eq(l.items[i].value, want[i]);
    }
    eddy_kv_list_clear(&l);
    cr_assert_eq(l.count, 0);
    cr_assert_null(l.items);

    /* bytewise prefix, not path components: "w" matches "wx" too */
    cr_assert_eq(eddy_metastore_list(ms, k("w"), &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.count, 7);
    cr_assert_str_eq(l.items[6].key, k("wx"));
    eddy_kv_list_clear(&l);

    /* nothing matches */
    cr_assert_eq(eddy_metastore_list(ms, k("zzz"), &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.count, 0);
    eddy_kv_list_clear(&l);

    /* a full key is a prefix of itself */
    cr_assert_eq(eddy_metastore_list(ms, k("w/10"), &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.count, 1);
    eddy_kv_list_clear(&l);
}

BOTH(list_empty_prefix_lists_everything)
{
    eddy_err_t err = {{0}};
    put_str(k("b"), "2");
    put_str(k("a"), "1");
    eddy_kv_list_t l;
    cr_assert_eq(eddy_metastore_list(ms, "", &l, &err), 0, "%s", err.msg);
    size_t mine = 0;
    for (size_t i = 0; i < l.count; i++) {
        if (i > 0)
            cr_assert(strcmp(l.items[i - 1].key, l.items[i].key) < 0, "not sorted");
        if (strncmp(l.items[i].key, ns, strlen(ns)) == 0)
            mine++;
    }
    cr_assert_eq(mine, 2);
    if (is_file)
        cr_assert_eq(l.count, 2);
    eddy_kv_list_clear(&l);
    cr_assert_eq(eddy_metastore_list(ms, NULL, &l, &err), 0, "NULL prefix: %s", err.msg);
    cr_assert_geq(l.count, 2);
    eddy_kv_list_clear(&l);
}

BOTH(values_are_bytes)
{
    eddy_err_t err = {{0}};
    unsigned char all[256 * 2];
    for (size_t i = 0; i < sizeof all; i++)
        all[i] = (unsigned char)i;
    cr_assert_eq(eddy_metastore_put(ms, k("bin"), all, sizeof all, &err), 0, "%s", err.msg);
    expect_value(k("bin"), all, sizeof all);

    const char nuls[] = {'\0', 'a', '\0', '\0', 'b', '\0'};
    cr_assert_eq(eddy_metastore_put(ms, k("nuls"), nuls, sizeof nuls, &err), 0, "%s", err.msg);
    expect_value(k("nuls"), nuls, sizeof nuls);

    /* empty value: etcd's gateway omits "value" entirely for it */
    cr_assert_eq(eddy_metastore_put(ms, k("empty"), NULL, 0, &err), 0, "%s", err.msg);
    expect_value(k("empty"), "", 0);

    /* every base64 tail length */
    for (size_t n = 1; n <= 4; n++) {
        cr_assert_eq(eddy_metastore_put(ms, k("tail"), "\xff\xfe\xfd\xfc", n, &err), 0);
        expect_value(k("tail"), "\xff\xfe\xfd\xfc", n);
    }

    eddy_kv_list_t l;
    cr_assert_eq(eddy_metastore_list(ms, ns, &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.count, 4);
    cr_assert_str_eq(l.items[0].key, k("bin"));
    cr_assert_eq(l.items[0].value_len, sizeof all);
    cr_assert(memcmp(l.items[0].value, all, sizeof all) == 0);
    cr_assert_str_eq(l.items[1].key, k("empty"));
    cr_assert_eq(l.items[1].value_len, 0);
    cr_assert_str_eq(l.items[1].value, "");
    cr_assert_str_eq(l.items[2].key, k("nuls"));
    cr_assert_eq(l.items[2].value_len, sizeof nuls);
    cr_assert(memcmp(l.items[2].value, nuls, sizeof nuls) == 0);
    eddy_kv_list_clear(&l);
}

BOTH(large_value)
{
    eddy_err_t err = {{0}};
    size_t n = 512 * 1024;
    unsigned char *big = malloc(n);
    cr_assert_not_null(big);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        big[i] = (unsigned char)(x >> 16);
    }
    cr_assert_eq(eddy_metastore_put(ms, k("big"), big, n, &err), 0, "%s", err.msg);
    expect_value(k("big"), big, n);
    free(big);
}

static const char *const odd_keys[] = {
    "plain", ".", "..", "../../escape", "./x", ".hidden", "a/../../b", "~tmp.1.2", "%", "%2F",
    "%41", "a%b", "with space", " lead", "trail ", "q?x#y&z=1", "tilde~", "\\back\\slash",
    "quote\"'`", "!$()*+,;:<=>@[]^{|}", "UPPER.lower-0_9", "a.b.c", "-dash", "_under",
};

BOTH(keys_needing_escaping)
{
    eddy_err_t err = {{0}};
    size_t n = sizeof odd_keys / sizeof odd_keys[0];
    for (size_t i = 0; i < n; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%zu", i);
        put_str(k(odd_keys[i]), v);
    }
    for (size_t i = 0; i < n; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%zu", i);
        expect_value(k(odd_keys[i]), v, strlen(v));
    }
    /* keys without the namespace too: "." and ".." alone, "/" alone */
    const char *bare[] = {".", "..", "/", "~"};
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(eddy_metastore_put(ms, bare[i], "b", 1, &err), 0, "%s: %s", bare[i],
                     err.msg);
        expect_value(bare[i], "b", 1);
    }
    eddy_kv_list_t l;
    cr_assert_eq(eddy_metastore_list(ms, ns, &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.count, n);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            cr_assert(strcmp(l.items[i - 1].key, l.items[i].key) < 0);
        int found = 0;
        for (size_t j = 0; j < n; j++)
            found |= strcmp(l.items[i].key, k(odd_keys[j])) == 0;
        cr_assert(found, "unexpected key %s", l.items[i].key);
    }
    eddy_kv_list_clear(&l);
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(eddy_metastore_delete(ms, bare[i], &err), 0, "%s", err.msg);
}

BOTH(invalid_keys_are_rejected)
{
    eddy_err_t err = {{0}};
    char longkey[EDDY_METASTORE_KEY_MAX + 2];
    memset(longkey, 'a', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    const char *bad[] = {"", "line\nbreak", "tab\t", "del\x7f", "utf8-\xc3\xa9", longkey};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = '\0';
        cr_assert_eq(eddy_metastore_put(ms, bad[i], "x", 1, &err), -1, "key %zu accepted", i);
        cr_assert_neq(err.msg[0], '\0');
        cr_assert_eq(eddy_metastore_get(ms, bad[i], NULL, NULL, &err), -1);
        cr_assert_eq(eddy_metastore_delete(ms, bad[i], &err), -1);
    }
    cr_assert_eq(eddy_metastore_put(ms, NULL, "x", 1, &err), -1);
    cr_assert_eq(eddy_metastore_put(ms, k("x"), NULL, 1, &err), -1, "NULL value, length 1");
    eddy_kv_list_t l = {(eddy_kv_t *)&l, 7}; /* garbage on purpose */
    cr_assert_eq(eddy_metastore_list(ms, "bad\n", &l, &err), -1);
    cr_assert_eq(l.count, 0);
    cr_assert_null(l.items);
    cr_assert(strstr(err.msg, "printable") != NULL, "message: %s", err.msg);
    /* the longest legal key works on etcd; on files it may be too long */
    char maxkey[EDDY_METASTORE_KEY_MAX + 1];
    memset(maxkey, 'k', sizeof maxkey - 1);
    maxkey[sizeof maxkey - 1] = '\0';
    int rc = eddy_metastore_put(ms, maxkey, "m", 1, &err);
    if (is_file) {
        cr_assert_eq(rc, -1);
        cr_assert(strstr(err.msg, "too long") != NULL, "message: %s", err.msg);
    } else {
        cr_assert_eq(rc, 0, "%s", err.msg);
        expect_value(maxkey, "m", 1);
        cr_assert_eq(eddy_metastore_delete(ms, maxkey, &err), 0, "%s", err.msg);
    }
}

BOTH(visible_through_a_second_handle)
{
    eddy_err_t err = {{0}};
    put_str(k("shared"), "one");
    eddy_metastore_t *other = eddy_metastore_open(eddy_metastore_url(ms), &err);
    cr_assert_not_null(other, "%s", err.msg);
    char *v;
    size_t n;
    cr_assert_eq(eddy_metastore_get(other, k("shared"), &v, &n, &err), 1, "%s", err.msg);
    cr_assert_str_eq(v, "one");
    free(v);
    cr_assert_eq(eddy_metastore_put(other, k("shared"), "two", 3, &err), 0, "%s", err.msg);
    eddy_metastore_destroy(&other);
    cr_assert_null(other);
    eddy_metastore_destroy(&other); /* destroying NULL is fine */
    expect_value(k("shared"), "two", 3);
}

typedef struct {
    int id;
    int failures;
} worker_arg_t;

static void *hammer(void *p)
{
    worker_arg_t *a = p;
    for (int i = 0; i < 20; i++) {
        char key[64], val[32];
        snprintf(key, sizeof key, "%sthread/%d/%d", ns, a->id, i);
        snprintf(val, sizeof val, "%d", i);
        char *got = NULL;
        if (eddy_metastore_put(ms, key, val, strlen(val), NULL) < 0 ||
            eddy_metastore_get(ms, key, &got, NULL, NULL) != 1 || strcmp(got, val) != 0)
            a->failures++;
        free(got);
    }
    return NULL;
}

BOTH(one_handle_shared_by_threads)
{
    pthread_t t[4];
    worker_arg_t args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg_t){.id = i};
        pthread_create(&t[i], NULL, hammer, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(args[i].failures, 0, "thread %d failed %d times", i, args[i].failures);
    }
    eddy_kv_list_t l;
    cr_assert_eq(eddy_metastore_list(ms, k("thread/"), &l, NULL), 0);
    cr_assert_eq(l.count, 80);
    eddy_kv_list_clear(&l);
}

/* ---- URL parsing (no store is contacted) --------------------------------- */

Test(url, bad_urls_are_errors)
{
    const char *bad[] = {
        "", "ftp://host/x", "://x", "file://otherhost/x", "file:relative/x", "file:///a?b",
        "etcd://", "etcd://:2379", "etcd://host:0", "etcd://host:65536", "etcd://host:12x",
        "etcd://user@host:2379", "etcd://h1:2379,h2:2379", "etcd://host:2379/path",
        "http://host:2379/v3", "etcd://host:2379?foo=1", "etcd://host:2379?timeout_ms=0",
        "etcd://host:2379?timeout_ms=abc", "etcd://host:2379#frag", "etcd://[zz]:1",
        "etcd://ho st:1", "file:///bad%zzescape", "file:///nul%00byte",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        eddy_err_t err = {{0}};
        eddy_metastore_t *m = eddy_metastore_open(bad[i], &err);
        cr_expect_null(m, "'%s' was accepted", bad[i]);
        eddy_metastore_destroy(&m);
        cr_expect_neq(err.msg[0], '\0', "'%s': no message", bad[i]);
    }
    eddy_err_t err = {{0}};
    cr_assert_null(eddy_metastore_open(NULL, &err));
    cr_assert_null(eddy_metastore_open("etcd://h:1/x", NULL), "NULL err must be fine");
}

/* ---- file store only ----------------------------------------------------- */

Test(file, persists_across_destroy_and_reopen, .init = file_init, .fini = file_fini)
{
    need_store();
    eddy_err_t err = {{0}};
    put_str(k("durable"), "yes");
    put_str(k("deleted"), "no");
    cr_assert_eq(eddy_metastore_delete(ms, k("deleted"), &err), 0);
    eddy_metastore_destroy(&ms);
    cr_assert_null(ms);
    ms = eddy_metastore_open(store_dir, &err);
    cr_assert_not_null(ms, "%s", err.msg);
    expect_value(k("durable"), "yes", 3);
    expect_absent(k("deleted"));
}

Test(file, other_processes_see_the_data, .init = file_init, .fini = file_fini)
{
    need_store();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        eddy_metastore_t *m = eddy_metastore_open(store_dir, NULL);
        int ok = m && eddy_metastore_put(m, k("from-child"), "hello", 5, NULL) == 0;
        char *v = NULL;
        ok = ok && eddy_metastore_get(m, k("from-parent"), &v, NULL, NULL) == 0;
        eddy_metastore_destroy(&m);
        _exit(ok ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
    expect_value(k("from-child"), "hello", 5);
}

Test(file, no_key_escapes_the_directory, .init = file_init, .fini = file_fini)
{
    need_store();
    size_t n = sizeof odd_keys / sizeof odd_keys[0];
    for (size_t i = 0; i < n; i++)
        put_str(odd_keys[i], "v");
    put_str("..", "v");
    put_str("/..", "v");
    put_str("../", "v");
    /* the temp dir holds only the store; the store only plain files with
     * safe names (no temp files left behind) */
    DIR *d = opendir(tmp_dir);
    cr_assert_not_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            cr_assert_str_eq(de->d_name, "store");
    closedir(d);
    d = opendir(store_dir);
    cr_assert_not_null(d);
    size_t files = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (!strcmp(de->d_name, ".key")) /* the store's own: its encryption key */
            continue;
        files++;
        cr_assert_neq(de->d_name[0], '.', "hidden/dot name %s", de->d_name);
        cr_assert_eq(strspn(de->d_name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789._-%"),
                     strlen(de->d_name), "unsafe name %s", de->d_name);
        struct stat st;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", store_dir, de->d_name);
        cr_assert_eq(lstat(path, &st), 0);
        cr_assert(S_ISREG(st.st_mode), "%s is not a regular file", de->d_name);
    }
    closedir(d);
    cr_assert_eq(files, n + 2, "files %zu", files); /* ".." was in odd_keys already */
    char outside[1024];
    snprintf(outside, sizeof outside, "%s/../escape", tmp_dir); /* "../../escape" from store */
    cr_assert_eq(access(outside, F_OK), -1, "%s exists", outside);
}

static void touch(const char *dir, const char *name, const char *content)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(content, f);
    fclose(f);
}

Test(file, foreign_entries_are_ignored, .init = file_init, .fini = file_fini)
{
    need_store();
    eddy_err_t err = {{0}};
    put_str("/real", "1");
    touch(store_dir, "~tmp.1.1", "half-written");
    touch(store_dir, ".hidden", "x");
    touch(store_dir, "%2freal", "lower-case escape: not canonical");
    touch(store_dir, "%41bc", "escaped plain char: not canonical");
    touch(store_dir, "bad%0A", "escaped control char");
    touch(store_dir, "trunc%2", "truncated escape");
    char sub[600];
    snprintf(sub, sizeof sub, "%s/subdir", store_dir);
    cr_assert_eq(mkdir(sub, 0755), 0);
    eddy_kv_list_t l;
    cr_assert_eq(eddy_metastore_list(ms, "", &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.count, 1);
    cr_assert_str_eq(l.items[0].key, "/real");
    eddy_kv_list_clear(&l);
    /* a get on a name that is a directory is an error, not data */
    cr_assert_eq(eddy_metastore_get(ms, "subdir", NULL, NULL, &err), -1);
    cr_assert(strstr(err.msg, "not a regular file") != NULL, "%s", err.msg);
}

Test(file, url_forms, .init = file_init, .fini = file_fini)
{
    need_store();
    eddy_err_t err = {{0}};
    put_str("/k", "v");
    eddy_metastore_destroy(&ms);
    char url[1024];
    const char *forms[] = {"file://%s", "file://localhost%s", "%s", "%s/", "FILE://%s"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(url, sizeof url, forms[i], store_dir);
        ms = eddy_metastore_open(url, &err);
        cr_assert_not_null(ms, "%s: %s", url, err.msg);
        cr_assert_str_eq(eddy_metastore_url(ms), url);
        expect_value("/k", "v", 1);
        eddy_metastore_destroy(&ms);
    }
    /* percent escapes in file URLs; nested missing dirs are created */
    snprintf(url, sizeof url, "file://%s/with%%20space/a/b", tmp_dir);
    ms = eddy_metastore_open(url, &err);
    cr_assert_not_null(ms, "%s: %s", url, err.msg);
    put_str("/k", "w");
    eddy_metastore_destroy(&ms);
    snprintf(url, sizeof url, "%s/with space/a/b", tmp_dir);
    ms = eddy_metastore_open(url, &err);
    cr_assert_not_null(ms, "%s: %s", url, err.msg);
    expect_value("/k", "w", 1);
    eddy_metastore_destroy(&ms);
    /* a relative path means relative to the cwd at open time */
    char cwd[1024];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(tmp_dir), 0);
    ms = eddy_metastore_open("store", &err);
    cr_assert_eq(chdir(cwd), 0);
    cr_assert_not_null(ms, "%s", err.msg);
    expect_value("/k", "v", 1);
    put_str("/k2", "after chdir");
    eddy_metastore_destroy(&ms);
    ms = eddy_metastore_open(store_dir, &err);
    expect_value("/k2", "after chdir", 11);
}

Test(file, open_errors, .init = file_init, .fini = file_fini)
{
    need_store();
    eddy_err_t err = {{0}};
    touch(tmp_dir, "plainfile", "x");
    char path[1024];
    snprintf(path, sizeof path, "%s/plainfile", tmp_dir);
    cr_assert_null(eddy_metastore_open(path, &err));
    cr_assert(strstr(err.msg, path) != NULL, "message names the dir: %s", err.msg);
    snprintf(path, sizeof path, "%s/plainfile/below", tmp_dir);
    cr_assert_null(eddy_metastore_open(path, &err));
    cr_assert(strstr(err.msg, "plainfile") != NULL, "%s", err.msg);
}

Test(file, stale_temp_files_are_cleaned_at_open, .init = file_init, .fini = file_fini)
{
    need_store();
    touch(store_dir, "~tmp.99.1", "old");
    touch(store_dir, "~tmp.99.2", "fresh");
    char old[1024], fresh[1024];
    snprintf(old, sizeof old, "%s/~tmp.99.1", store_dir);
    snprintf(fresh, sizeof fresh, "%s/~tmp.99.2", store_dir);
    struct timespec times[2] = {{.tv_sec = time(NULL) - 3600}, {.tv_sec = time(NULL) - 3600}};
    cr_assert_eq(utimensat(AT_FDCWD, old, times, 0), 0);
    eddy_metastore_destroy(&ms);
    eddy_err_t err = {{0}};
    ms = eddy_metastore_open(store_dir, &err);
    cr_assert_not_null(ms, "%s", err.msg);
    cr_assert_eq(access(old, F_OK), -1, "stale temp file survived");
    cr_assert_eq(access(fresh, F_OK), 0, "a fresh temp file may belong to a live writer");
}

/* ---- file store: private, sealed, one coordinator ------------------------ */

static mode_t mode_of(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s", path);
    return st.st_mode & 07777;
}

/* Whether needle occurs in any file of dir (bytes, not lines). */
static bool any_file_holds(const char *dir_path, const char *needle)
{
    DIR *d = opendir(dir_path);
    cr_assert_not_null(d);
    bool found = false;
    for (struct dirent *de; !found && (de = readdir(d));) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir_path, de->d_name);
        struct stat st;
        if (lstat(path, &st) || !S_ISREG(st.st_mode))
            continue;
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f);
        char *buf = calloc(1, (size_t)st.st_size + 1);
        size_t n = fread(buf, 1, (size_t)st.st_size, f);
        fclose(f);
        found = memmem(buf, n, needle, strlen(needle)) != NULL;
        free(buf);
    }
    closedir(d);
    return found;
}

Test(file, directory_0700_records_0600_and_fixed_at_open, .init = file_init, .fini = file_fini)
{
    need_store();
    put_str("/jobs/a", "{}");
    char rec[1024], key[1024];
    snprintf(rec, sizeof rec, "%s/%%2Fjobs%%2Fa", store_dir);
    snprintf(key, sizeof key, "%s/.key", store_dir);
    cr_assert_eq(mode_of(store_dir), 0700, "directory mode %o", mode_of(store_dir));
    cr_assert_eq(mode_of(rec), 0600, "record mode %o", mode_of(rec));
    cr_assert_eq(mode_of(key), 0600, "key mode %o", mode_of(key));
    /* what an older eddy left: 0755 and 0644 */
    eddy_metastore_destroy(&ms);
    cr_assert_eq(chmod(store_dir, 0755), 0);
    cr_assert_eq(chmod(rec, 0644), 0);
    cr_assert_eq(chmod(key, 0644), 0);
    eddy_err_t err = {{0}};
    ms = eddy_metastore_open(store_dir, &err);
    cr_assert_not_null(ms, "%s", err.msg);
    cr_assert_eq(mode_of(store_dir), 0700, "directory mode %o", mode_of(store_dir));
    cr_assert_eq(mode_of(rec), 0600, "record mode %o", mode_of(rec));
    cr_assert_eq(mode_of(key), 0600, "key mode %o", mode_of(key));
    expect_value("/jobs/a", "{}", 2);
}

Test(file, no_plaintext_secret_on_disk, .init = file_init, .fini = file_fini)
{
    need_store();
    const char *record = "{\"args\":[\"--sink-uri\",\"postgresql://eddy:Hunter2-Secret@db:5432/x\"]}";
    put_str("/eddy/jobs/j1", record);
    expect_value("/eddy/jobs/j1", record, strlen(record));
    cr_assert_not(any_file_holds(store_dir, "Hunter2-Secret"), "a password is on disk in plain text");
    cr_assert_not(any_file_holds(store_dir, "postgresql://"), "the record is on disk in plain text");
    /* a record moved to another key's file does not decrypt */
    char from[1024], to[1024];
    snprintf(from, sizeof from, "%s/%%2Feddy%%2Fjobs%%2Fj1", store_dir);
    snprintf(to, sizeof to, "%s/%%2Feddy%%2Fjobs%%2Fj2", store_dir);
    cr_assert_eq(link(from, to), 0);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_metastore_get(ms, "/eddy/jobs/j2", NULL, NULL, &err), -1);
    cr_assert(strstr(err.msg, "does not decrypt"), "%s", err.msg);
}

Test(file, an_older_plain_record_is_read_and_sealed_under_the_lock, .init = file_init,
     .fini = file_fini)
{
    need_store();
    touch(store_dir, "%2Fold", "postgresql://eddy:Old-Secret@db/x");
    expect_value("/old", "postgresql://eddy:Old-Secret@db/x", 33);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_metastore_lock(ms, &err), 0, "%s", err.msg);
    cr_assert_not(any_file_holds(store_dir, "Old-Secret"), "not sealed under the lock");
    expect_value("/old", "postgresql://eddy:Old-Secret@db/x", 33);
}

Test(file, a_second_process_cannot_lock_the_directory, .init = file_init, .fini = file_fini)
{
    need_store();
    eddy_err_t err = {{0}};
    int ready[2], done[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(done), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* the first coordinator */
        eddy_metastore_t *m = eddy_metastore_open(store_dir, NULL);
        char ok = m && eddy_metastore_lock(m, NULL) == 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        char c;
        if (read(done[0], &c, 1) < 0)
            _exit(1);
        eddy_metastore_destroy(&m);
        _exit(0);
    }
    char ok = 0;
    cr_assert_eq(read(ready[0], &ok, 1), 1);
    cr_assert_eq(ok, 'y', "the child could not lock");
    cr_assert_eq(eddy_metastore_lock(ms, &err), -1, "two processes locked one directory");
    char want[1200];
    snprintf(want, sizeof want, "metadata directory %s is in use by pid %d", store_dir, (int)pid);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    cr_assert_eq(write(done[1], "x", 1), 1);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    /* released with its holder */
    cr_assert_eq(eddy_metastore_lock(ms, &err), 0, "%s", err.msg);
    char lock[1024];
    snprintf(lock, sizeof lock, "%s/.lock", store_dir);
    cr_assert_eq(mode_of(lock), 0600);
}

/* ---- etcd only ----------------------------------------------------------- */

Test(etcd, url_forms, .init = etcd_init, .fini = etcd_fini)
{
    need_store();
    eddy_err_t err = {{0}};
    put_str(k("u"), "v");
    const char *base = getenv("EDDY_TEST_ETCD_URL"); /* http://127.0.0.1:PORT */
    const char *hostport = base + strlen("http://");
    char url[256];
    const char *forms[] = {"etcd://%s", "http://%s/", "HTTP://%s", "etcd://%s?timeout_ms=2000"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(url, sizeof url, forms[i], hostport);
        eddy_metastore_t *m = eddy_metastore_open(url, &err);
        cr_assert_not_null(m, "%s: %s", url, err.msg);
        cr_assert_str_eq(eddy_metastore_url(m), url);
        char *v;
        cr_assert_eq(eddy_metastore_get(m, k("u"), &v, NULL, &err), 1, "%s: %s", url, err.msg);
        cr_assert_str_eq(v, "v");
        free(v);
        eddy_metastore_destroy(&m);
    }
}

Test(etcd, unreachable_is_a_quick_error)
{
    eddy_err_t err = {{0}};
    int port = eddy_test_free_port(&err);
    cr_assert_gt(port, 0, "%s", err.msg);
    char url[64];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d", port);
    uint64_t t0 = eddy_mono_ms();
    eddy_metastore_t *m = eddy_metastore_open(url, &err);
    uint64_t took = eddy_mono_ms() - t0;
    cr_assert_null(m);
    cr_assert(strstr(err.msg, url) != NULL, "message names the URL: %s", err.msg);
    cr_assert(strstr(err.msg, "unreachable") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "Couldn't connect to server") != NULL, "%s", err.msg);
    cr_assert_lt(took, 1500, "took %llu ms", (unsigned long long)took);
}

Test(etcd, silent_server_times_out)
{
    eddy_err_t err = {{0}};
    int port;
    int fd = eddy_test_listen_silent(&port, &err);
    cr_assert_geq(fd, 0, "%s", err.msg);
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d?timeout_ms=300", port);
    uint64_t t0 = eddy_mono_ms();
    eddy_metastore_t *m = eddy_metastore_open(url, &err);
    uint64_t took = eddy_mono_ms() - t0;
    cr_assert_null(m);
    cr_assert(strstr(err.msg, "unreachable") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "Timeout") != NULL, "%s", err.msg);
    cr_assert(took >= 250 && took < 2000, "took %llu ms", (unsigned long long)took);

    /* the default: 3 s per request */
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    t0 = eddy_mono_ms();
    m = eddy_metastore_open(url, &err);
    took = eddy_mono_ms() - t0;
    cr_assert_null(m);
    cr_assert(took >= 2800 && took < 5000, "took %llu ms", (unsigned long long)took);
    close(fd);
}

/* A one-shot HTTP server answering every request with a canned response. */
typedef struct {
    int fd;
    const char *v3_response, *other_response;
    int requests;
    char paths[4][64];
} canned_t;

static void *canned_serve(void *p)
{
    canned_t *c = p;
    for (;;) {
        int conn = accept(c->fd, NULL, NULL);
        if (conn < 0)
            return NULL;
        char req[8192];
        size_t n = 0;
        ssize_t r;
        char *end = NULL;
        while (n < sizeof req - 1 && (r = read(conn, req + n, sizeof req - 1 - n)) > 0) {
            n += (size_t)r;
            req[n] = '\0';
            if ((end = strstr(req, "\r\n\r\n"))) {
                const char *cl = strcasestr(req, "content-length:");
                size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
                if (n >= (size_t)(end + 4 - req) + body)
                    break;
            }
        }
        req[n] = '\0';
        if (c->requests < 4)
            sscanf(req, "POST %63s", c->paths[c->requests]);
        int is_v3 = strncmp(req, "POST /v3/", 9) == 0;
        c->requests++;
        const char *resp = is_v3 ? c->v3_response : c->other_response;
        ssize_t w = write(conn, resp, strlen(resp));
        (void)w;
        close(conn);
    }
}

static void canned_run(const char *v3_response, const char *other_response, const char *want,
                       int want_requests)
{
    eddy_err_t err = {{0}};
    canned_t c = {.v3_response = v3_response, .other_response = other_response};
    int port;
    c.fd = eddy_test_listen_silent(&port, &err);
    cr_assert_geq(c.fd, 0, "%s", err.msg);
    pthread_t t;
    pthread_create(&t, NULL, canned_serve, &c);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    eddy_metastore_t *m = eddy_metastore_open(url, &err);
    shutdown(c.fd, SHUT_RDWR);
    pthread_join(t, NULL);
    close(c.fd);
    cr_assert_null(m);
    cr_assert(strstr(err.msg, url) != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, want) != NULL, "want '%s' in: %s", want, err.msg);
    cr_assert_eq(c.requests, want_requests);
    cr_assert_str_eq(c.paths[0], "/v3/kv/range");
    if (want_requests > 1)
        cr_assert_str_eq(c.paths[1], "/v3beta/kv/range");
}

static char *http_response(char *buf, const char *status, const char *body)
{
    snprintf(buf, 256, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
             "Content-Length: %zu\r\n\r\n%s", status, strlen(body), body);
    return buf;
}

Test(etcd, not_an_etcd_gateway)
{
    char not_found[256], r[4][256];
    http_response(not_found, "404 Not Found", "not found");
    canned_run(not_found, not_found, "does not serve the v3 JSON gateway", 2);
    canned_run(http_response(r[0], "200 OK", "hello"), not_found, "not JSON", 1);
    canned_run(http_response(r[1], "200 OK", "[]"), not_found, "not an etcd response", 1);
    canned_run(http_response(r[2], "200 OK", "{\"kvs\":[]}"), not_found, "no \"header\"", 1);
    canned_run(http_response(r[3], "503 Service Unavailable",
                             "{\"error\":\"x\",\"message\":\"etcdserver: no leader\",\"code\":14}"),
               not_found, "HTTP 503: etcdserver: no leader", 1);
}

Test(etcd, errors_after_open_name_the_store)
{
    /* etcd rejects requests over 1.5 MiB (--max-request-bytes: "etcdserver:
     * request is too large"; from 2 MiB on, the gateway's gRPC client refuses
     * first: HTTP 429 "received message larger than max"). Either way the
     * error must say so and name the store and key. */
    eddy_err_t err = {{0}};
    const char *url = eddy_test_etcd_shared_url(&err);
    cr_assert_not_null(url, "%s", err.msg);
    snprintf(ns, sizeof ns, "/t%d/", (int)getpid());
    eddy_metastore_t *m = eddy_metastore_open(url, &err);
    cr_assert_not_null(m, "%s", err.msg);
    size_t n = 1600 * 1024;
    char *big = calloc(1, n);
    cr_assert_not_null(big);
    cr_assert_eq(eddy_metastore_put(m, k("huge"), big, n, &err), -1);
    free(big);
    cr_assert(strstr(err.msg, url) != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, k("huge")) != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "too large") != NULL || strstr(err.msg, "larger than max"),
              "%s", err.msg);
    eddy_metastore_destroy(&m);
}
