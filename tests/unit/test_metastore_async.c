/* test_metastore_async.c - the metadata-store executor (state/metastore_async.h)
 * over both backends: the file store in a temp dir and a real etcd (one
 * shared server for the contract tests, started in ReportHook PRE_ALL; a
 * private one for tests that stop or kill it).
 *
 * What is checked: calls land in submission order (put/delete/put on one
 * key), gets return values, callbacks run only inside dispatch and the fd
 * is readable exactly while completions wait, a bad key fails at once even
 * with endless retries, a put retried forever survives a SIGSTOPped etcd,
 * a put without retries to a dead etcd reports the store's error, and
 * destroy returns within its drain bound with calls pending (ASan checks
 * that nothing leaks). Every wait polls a condition against a deadline. */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "state/metastore.h"
#include "state/metastore_async.h"
#include "tests/support/etcd.h"

#define WAIT_MS 20000

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

/* ---- fixtures ------------------------------------------------------------- */

static eddy_metastore_t *ms;
static eddy_metastore_async_t *as;
static char *tmp_dir;
static char ns[32]; /* "/ta<pid>/": keys of this test on the shared etcd */
static eddy_err_t init_err;

static const char *k(const char *suffix)
{
    static char bufs[8][256];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s%s", ns, suffix);
    return b;
}

static void open_async(void)
{
    if (ms && !(as = eddy_metastore_async_new(ms, &init_err)))
        eddy_err_wrap(&init_err, "executor");
}

static void file_init(void)
{
    snprintf(ns, sizeof ns, "/ta%d/", (int)getpid());
    tmp_dir = eddy_test_mkdtemp("metaasync", &init_err);
    if (tmp_dir && !(ms = eddy_metastore_open(tmp_dir, &init_err)))
        eddy_err_wrap(&init_err, "open %s", tmp_dir);
    open_async();
}

static void etcd_init(void)
{
    snprintf(ns, sizeof ns, "/ta%d/", (int)getpid());
    const char *url = eddy_test_etcd_shared_url(&init_err);
    if (url && !(ms = eddy_metastore_open(url, &init_err)))
        eddy_err_wrap(&init_err, "open %s", url);
    open_async();
}

static void fini(void)
{
    eddy_metastore_async_destroy(&as, 1000);
    if (ms && !tmp_dir) { /* leave the shared etcd clean */
        eddy_kv_list_t l;
        if (eddy_metastore_list(ms, ns, &l, NULL) == 0)
            for (size_t i = 0; i < l.count; i++)
                eddy_metastore_delete(ms, l.items[i].key, NULL);
        eddy_kv_list_clear(&l);
    }
    eddy_metastore_destroy(&ms);
    if (tmp_dir)
        eddy_test_rm_rf(tmp_dir);
    free(tmp_dir);
    tmp_dir = NULL;
}

static void need_async(void)
{
    cr_assert_not_null(as, "%s", init_err.msg);
}

#define BOTH(name)                                                                 \
    static void body_##name(void);                                                 \
    Test(file, name, .init = file_init, .fini = fini)                              \
    {                                                                              \
        need_async();                                                              \
        body_##name();                                                             \
    }                                                                              \
    Test(etcd, name, .init = etcd_init, .fini = fini)                              \
    {                                                                              \
        need_async();                                                              \
        body_##name();                                                             \
    }                                                                              \
    static void body_##name(void)

/* ---- recording callbacks ------------------------------------------------------ */

#define MAX_SEEN 256

typedef struct seen {
    int tag;
    int rc;
    unsigned attempts;
    char key[128];
    char value[128];
    size_t len;
    char err[512];
    int64_t lease, ttl_s;
} seen_t;

typedef struct recorder {
    seen_t items[MAX_SEEN];
    int count;
} recorder_t;

typedef struct tagged {
    recorder_t *rec;
    int tag;
} tagged_t;

static void record(void *arg, const eddy_meta_result_t *res)
{
    tagged_t *t = arg;
    cr_assert_lt(t->rec->count, MAX_SEEN);
    seen_t *s = &t->rec->items[t->rec->count++];
    s->tag = t->tag;
    s->rc = res->rc;
    s->attempts = res->attempts;
    snprintf(s->key, sizeof s->key, "%s", res->key ? res->key : "");
    snprintf(s->value, sizeof s->value, "%s", res->value ? res->value : "");
    s->len = res->len;
    snprintf(s->err, sizeof s->err, "%s", res->err.msg);
    s->lease = res->lease;
    s->ttl_s = res->ttl_s;
}

/* Polls the executor's fd and dispatches until want callbacks ran. */
static void dispatch_until(eddy_metastore_async_t *a, recorder_t *rec, int want)
{
    uint64_t deadline = eddy_mono_ms() + WAIT_MS;
    while (rec->count < want) {
        uint64_t now = eddy_mono_ms();
        cr_assert_lt(now, deadline, "only %d of %d callbacks after %d ms", rec->count, want,
                     WAIT_MS);
        struct pollfd p = {.fd = eddy_metastore_async_fd(a), .events = POLLIN};
        if (poll(&p, 1, (int)(deadline - now)) > 0)
            eddy_metastore_async_dispatch(a);
    }
}

static int fd_readable(eddy_metastore_async_t *a, int timeout_ms)
{
    struct pollfd p = {.fd = eddy_metastore_async_fd(a), .events = POLLIN};
    return poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN);
}

static void put_str(eddy_metastore_async_t *a, const char *key, const char *v, int retries,
                    tagged_t *t)
{
    eddy_metastore_async_put(a, key, v, strlen(v), retries, record, t);
}

/* ---- contract, both backends ---------------------------------------------------- */

BOTH(fifo_order_on_one_key)
{
    /* put/delete alternating on one key: only submission order explains
     * the final value and the callback order */
    static recorder_t rec;
    static tagged_t tags[40];
    memset(&rec, 0, sizeof rec);
    char v[32];
    for (int i = 0; i < 40; i++) {
        tags[i] = (tagged_t){&rec, i};
        if (i % 2 == 0) {
            snprintf(v, sizeof v, "v%d", i);
            put_str(as, k("one"), v, 0, &tags[i]);
        } else {
            eddy_metastore_async_delete(as, k("one"), 0, record, &tags[i]);
        }
    }
    put_str(as, k("one"), "last", 0, &tags[0]);
    dispatch_until(as, &rec, 41);
    for (int i = 0; i < 40; i++) {
        cr_assert_eq(rec.items[i].tag, i, "callback %d is for call %d", i, rec.items[i].tag);
        cr_assert_eq(rec.items[i].rc, 0, "call %d: %s", i, rec.items[i].err);
        cr_assert_eq(rec.items[i].attempts, 1);
        cr_assert_str_eq(rec.items[i].key, k("one"));
    }
    cr_assert_eq(eddy_metastore_async_pending(as), 0);
    eddy_metastore_async_destroy(&as, 1000); /* the store is ours again */
    char *got = NULL;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_metastore_get(ms, k("one"), &got, NULL, &err), 1, "%s", err.msg);
    cr_assert_str_eq(got, "last");
    free(got);
}

BOTH(get_returns_values)
{
    static recorder_t rec;
    static tagged_t t0, t1, t2, t3;
    memset(&rec, 0, sizeof rec);
    t0 = (tagged_t){&rec, 0};
    t1 = (tagged_t){&rec, 1};
    t2 = (tagged_t){&rec, 2};
    t3 = (tagged_t){&rec, 3};
    const char bytes[] = {'a', '\0', 'b'};
    eddy_metastore_async_put(as, k("g"), bytes, sizeof bytes, 0, record, &t0);
    eddy_metastore_async_get(as, k("g"), 0, record, &t1);
    eddy_metastore_async_get(as, k("missing"), 0, record, &t2);
    eddy_metastore_async_put(as, k("g"), "text", 4, 0, NULL, NULL); /* no callback */
    eddy_metastore_async_get(as, k("g"), 0, record, &t3);
    dispatch_until(as, &rec, 4);
    cr_assert_eq(rec.items[0].rc, 0, "%s", rec.items[0].err);
    cr_assert_eq(rec.items[1].tag, 1);
    cr_assert_eq(rec.items[1].rc, 1, "%s", rec.items[1].err);
    cr_assert_eq(rec.items[1].len, 3);
    cr_assert_str_eq(rec.items[1].value, "a"); /* bytes after the NUL are there by length */
    cr_assert_eq(rec.items[2].rc, 0, "missing key: %s", rec.items[2].err);
    cr_assert_eq(rec.items[2].len, 0);
    cr_assert_eq(rec.items[3].tag, 3);
    cr_assert_eq(rec.items[3].rc, 1);
    cr_assert_str_eq(rec.items[3].value, "text");
    cr_assert_eq(rec.items[3].len, 4);
}

BOTH(callbacks_run_only_on_dispatch)
{
    static recorder_t rec;
    static tagged_t t0;
    memset(&rec, 0, sizeof rec);
    t0 = (tagged_t){&rec, 7};
    cr_assert(!fd_readable(as, 0), "readable before any call");
    cr_assert_eq(eddy_metastore_async_dispatch(as), 0);
    put_str(as, k("d"), "x", 0, &t0);
    cr_assert_eq(eddy_metastore_async_pending(as), 1);
    cr_assert(fd_readable(as, WAIT_MS), "fd never became readable");
    /* finished, but nothing ran on its own */
    cr_assert_eq(rec.count, 0);
    cr_assert_eq(eddy_metastore_async_pending(as), 1, "finished but undispatched is pending");
    cr_assert_eq(eddy_metastore_async_dispatch(as), 1);
    cr_assert_eq(rec.count, 1);
    cr_assert_eq(rec.items[0].tag, 7);
    cr_assert_eq(rec.items[0].rc, 0, "%s", rec.items[0].err);
    cr_assert_eq(eddy_metastore_async_pending(as), 0);
    cr_assert(!fd_readable(as, 0), "still readable after dispatch");
    cr_assert_eq(eddy_metastore_async_dispatch(as), 0);
}

BOTH(bad_key_fails_at_once_even_retrying_forever)
{
    static recorder_t rec;
    static tagged_t t0, t1;
    memset(&rec, 0, sizeof rec);
    t0 = (tagged_t){&rec, 0};
    t1 = (tagged_t){&rec, 1};
    put_str(as, "bad\nkey", "x", EDDY_META_RETRY_FOREVER, &t0);
    put_str(as, k("after"), "y", 0, &t1); /* not stuck behind it */
    dispatch_until(as, &rec, 2);
    cr_assert_eq(rec.items[0].rc, -1);
    cr_assert_eq(rec.items[0].attempts, 1);
    cr_assert(strstr(rec.items[0].err, "printable ASCII"), "%s", rec.items[0].err);
    cr_assert_eq(rec.items[1].rc, 0, "%s", rec.items[1].err);
}

/* ---- leases ---------------------------------------------------------------------- */

Test(file, lease_calls_fail_at_once_saying_why, .init = file_init, .fini = fini)
{
    need_async();
    static recorder_t rec;
    static tagged_t t0, t1;
    memset(&rec, 0, sizeof rec);
    t0 = (tagged_t){&rec, 0};
    t1 = (tagged_t){&rec, 1};
    eddy_metastore_async_lease_grant(as, k("w"), 2, 0, record, &t0);
    eddy_metastore_async_put_leased(as, k("w"), "v", 1, 42, 0, record, &t1);
    dispatch_until(as, &rec, 2);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(rec.items[i].rc, -1);
        cr_assert(strstr(rec.items[i].err, "has no leases"), "%s", rec.items[i].err);
    }
}

/* grant, put on the lease, keepalive, revoke: the key goes with the lease,
 * and a keepalive of the revoked lease says it is gone */
Test(etcd, lease_grant_put_keepalive_revoke, .init = etcd_init, .fini = fini)
{
    need_async();
    static recorder_t rec;
    static tagged_t t[8];
    memset(&rec, 0, sizeof rec);
    for (int i = 0; i < 8; i++)
        t[i] = (tagged_t){&rec, i};
    eddy_metastore_async_lease_grant(as, k("w1"), 5, 0, record, &t[0]);
    dispatch_until(as, &rec, 1);
    cr_assert_eq(rec.items[0].rc, 0, "%s", rec.items[0].err);
    cr_assert_str_eq(rec.items[0].key, k("w1"), "the label comes back");
    int64_t lease = rec.items[0].lease;
    cr_assert_neq(lease, 0);
    cr_assert_eq(rec.items[0].ttl_s, 5);
    eddy_metastore_async_put_leased(as, k("w1"), "held", 4, lease, 0, record, &t[1]);
    eddy_metastore_async_lease_keepalive(as, k("w1"), lease, 0, record, &t[2]);
    eddy_metastore_async_get(as, k("w1"), 0, record, &t[3]);
    eddy_metastore_async_lease_revoke(as, NULL, lease, 0, record, &t[4]);
    eddy_metastore_async_get(as, k("w1"), 0, record, &t[5]);
    eddy_metastore_async_lease_keepalive(as, NULL, lease, 0, record, &t[6]);
    eddy_metastore_async_lease_revoke(as, NULL, lease, 0, record, &t[7]);
    dispatch_until(as, &rec, 8);
    for (int i = 1; i < 8; i++) {
        cr_assert_eq(rec.items[i].tag, i);
        cr_assert_geq(rec.items[i].rc, 0, "call %d: %s", i, rec.items[i].err);
    }
    cr_assert_gt(rec.items[2].ttl_s, 0, "a live lease has time left");
    cr_assert_eq(rec.items[2].lease, lease);
    cr_assert_eq(rec.items[3].rc, 1);
    cr_assert_str_eq(rec.items[3].value, "held");
    cr_assert_str_eq(rec.items[4].key, "", "no label: no key");
    cr_assert_eq(rec.items[5].rc, 0, "the key went with its lease");
    cr_assert_eq(rec.items[6].ttl_s, 0, "a revoked lease is gone");
    cr_assert_eq(rec.items[7].rc, 0, "revoking an unknown lease is no error");
}

/* kept alive past its TTL the key stays; left alone it expires */
Test(etcd, leased_key_expires_without_keepalive, .init = etcd_init, .fini = fini)
{
    need_async();
    static recorder_t rec;
    static tagged_t tg = {&rec, 0};
    memset(&rec, 0, sizeof rec);
    eddy_metastore_async_lease_grant(as, NULL, 2, 0, record, &tg);
    dispatch_until(as, &rec, 1);
    cr_assert_eq(rec.items[0].rc, 0, "%s", rec.items[0].err);
    int64_t lease = rec.items[0].lease;
    eddy_metastore_async_put_leased(as, k("w2"), "v", 1, lease, 0, record, &tg);
    dispatch_until(as, &rec, 2);
    cr_assert_eq(rec.items[1].rc, 0, "%s", rec.items[1].err);
    uint64_t start = eddy_mono_ms();
    while (eddy_mono_ms() - start < 3500) { /* longer than the TTL */
        int want = rec.count + 2;
        eddy_metastore_async_lease_keepalive(as, NULL, lease, 0, record, &tg);
        eddy_metastore_async_get(as, k("w2"), 0, record, &tg);
        dispatch_until(as, &rec, want);
        cr_assert_gt(rec.items[want - 2].ttl_s, 0, "lease lost while kept alive");
        cr_assert_eq(rec.items[want - 1].rc, 1, "key lost while its lease was kept alive");
        struct pollfd none = {.fd = -1};
        poll(&none, 1, 500); /* the keepalive period, not a synchronisation */
    }
    uint64_t left_alone = eddy_mono_ms();
    for (;;) {
        int want = rec.count + 1;
        eddy_metastore_async_get(as, k("w2"), 0, record, &tg);
        dispatch_until(as, &rec, want);
        if (rec.items[want - 1].rc == 0)
            break;
        cr_assert_lt(eddy_mono_ms() - left_alone, 10000, "the key outlived its lease");
        cr_assert_lt(rec.count, MAX_SEEN - 2);
        struct pollfd none = {.fd = -1};
        poll(&none, 1, 100);
    }
}

/* ---- file store ----------------------------------------------------------------- */

Test(file, destroy_drains_and_dispatches, .init = file_init, .fini = fini)
{
    need_async();
    static recorder_t rec;
    static tagged_t tags[100];
    memset(&rec, 0, sizeof rec);
    char key[64];
    for (int i = 0; i < 100; i++) {
        tags[i] = (tagged_t){&rec, i};
        snprintf(key, sizeof key, "%sdrain/%03d", ns, i);
        put_str(as, key, "v", 0, &tags[i]);
    }
    eddy_metastore_async_destroy(&as, 60000); /* a healthy store drains well before */
    cr_assert_null(as);
    cr_assert_eq(rec.count, 100, "destroy ran %d callbacks", rec.count);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(rec.items[i].tag, i);
    eddy_kv_list_t l;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_metastore_list(ms, k("drain/"), &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.count, 100);
    eddy_kv_list_clear(&l);
}

/* ---- private etcd: stopped, dead ------------------------------------------------ */

static eddy_test_etcd_t *own_etcd;
static bool own_stopped;

static void own_init(void)
{
    snprintf(ns, sizeof ns, "/ta%d/", (int)getpid());
    own_etcd = eddy_test_etcd_start(&init_err);
    if (!own_etcd)
        return;
    /* short request timeout: a SIGSTOPped etcd fails an attempt in 300 ms */
    char url[128];
    snprintf(url, sizeof url, "%s?timeout_ms=300", eddy_test_etcd_url(own_etcd));
    if (!(ms = eddy_metastore_open(url, &init_err)))
        eddy_err_wrap(&init_err, "open %s", url);
    open_async();
}

static void own_fini(void)
{
    if (own_stopped && own_etcd)
        kill(eddy_test_etcd_pid(own_etcd), SIGCONT);
    own_stopped = false;
    eddy_metastore_async_destroy(&as, 0);
    eddy_metastore_destroy(&ms);
    eddy_test_etcd_stop(&own_etcd);
}

Test(etcd_outage, retry_forever_survives_a_stopped_etcd, .init = own_init, .fini = own_fini)
{
    need_async();
    static recorder_t rec;
    static tagged_t once, forever;
    memset(&rec, 0, sizeof rec);
    once = (tagged_t){&rec, 0};
    forever = (tagged_t){&rec, 1};

    cr_assert_eq(kill(eddy_test_etcd_pid(own_etcd), SIGSTOP), 0);
    own_stopped = true;
    put_str(as, k("once"), "lost", 0, &once);
    put_str(as, k("kept"), "survived", EDDY_META_RETRY_FOREVER, &forever);
    dispatch_until(as, &rec, 1); /* the first put timed out: etcd is really stuck */
    cr_assert_eq(rec.items[0].rc, -1);
    cr_assert(strstr(rec.items[0].err, "Timeout") || strstr(rec.items[0].err, "timed out"),
              "%s", rec.items[0].err);

    /* Probes, one after the other: an open checks reachability with one
     * 300 ms request. When two have timed out, the forever put (started when
     * the first put failed) has had at least one attempt fail too. */
    eddy_err_t err = {{0}};
    char url[128];
    snprintf(url, sizeof url, "%s?timeout_ms=300", eddy_test_etcd_url(own_etcd));
    for (int i = 0; i < 2; i++) {
        eddy_metastore_t *probe_ms = eddy_metastore_open(url, &err);
        cr_assert_null(probe_ms, "open must fail while etcd is stopped");
    }
    cr_assert_eq(rec.count, 1, "the forever put finished while etcd was stopped");

    cr_assert_eq(kill(eddy_test_etcd_pid(own_etcd), SIGCONT), 0);
    own_stopped = false;
    dispatch_until(as, &rec, 2);
    cr_assert_eq(rec.items[1].tag, 1);
    cr_assert_eq(rec.items[1].rc, 0, "%s", rec.items[1].err);
    cr_assert_geq(rec.items[1].attempts, 2, "attempts %u", rec.items[1].attempts);
    eddy_metastore_async_destroy(&as, 1000);
    char *got = NULL;
    cr_assert_eq(eddy_metastore_get(ms, k("kept"), &got, NULL, &err), 1, "%s", err.msg);
    cr_assert_str_eq(got, "survived");
    free(got);
    /* (whether "once" landed is up to etcd: a timed-out request may still be
     * applied once the server runs again) */
}

Test(etcd_outage, no_retries_to_a_dead_etcd_reports_the_error, .init = own_init,
     .fini = own_fini)
{
    need_async();
    static recorder_t rec;
    static tagged_t t0, t1;
    memset(&rec, 0, sizeof rec);
    t0 = (tagged_t){&rec, 0};
    t1 = (tagged_t){&rec, 1};
    char url[128];
    snprintf(url, sizeof url, "%s", eddy_test_etcd_url(own_etcd));
    eddy_test_etcd_stop(&own_etcd);
    put_str(as, k("x"), "y", 0, &t0);
    eddy_metastore_async_get(as, k("x"), 2, record, &t1);
    dispatch_until(as, &rec, 2);
    cr_assert_eq(rec.items[0].rc, -1);
    cr_assert_eq(rec.items[0].attempts, 1);
    cr_assert(strstr(rec.items[0].err, url), "names the store: %s", rec.items[0].err);
    cr_assert(strstr(rec.items[0].err, k("x")), "names the key: %s", rec.items[0].err);
    cr_assert(strstr(rec.items[0].err, "Couldn't connect"), "%s", rec.items[0].err);
    cr_assert_eq(rec.items[1].rc, -1);
    cr_assert_eq(rec.items[1].attempts, 3, "1 + 2 retries, got %u", rec.items[1].attempts);
    cr_assert_str_eq(rec.items[1].value, "");
}

Test(etcd_outage, destroy_with_calls_pending_returns_promptly, .init = own_init,
     .fini = own_fini)
{
    need_async();
    static recorder_t rec;
    static tagged_t t0;
    memset(&rec, 0, sizeof rec);
    t0 = (tagged_t){&rec, 0};
    eddy_test_etcd_stop(&own_etcd);
    char key[64];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "%spending/%d", ns, i);
        put_str(as, key, "never", EDDY_META_RETRY_FOREVER, &t0);
    }
    cr_assert_eq(eddy_metastore_async_pending(as), 50);
    uint64_t t = eddy_mono_ms();
    eddy_metastore_async_destroy(&as, 300);
    uint64_t took = eddy_mono_ms() - t;
    cr_assert_null(as);
    cr_assert_eq(rec.count, 0, "abandoned calls ran callbacks");
    /* drain 300 ms + at most one refused connection; generous for a loaded machine */
    cr_assert_lt(took, 3000, "destroy took %llu ms", (unsigned long long)took);
    cr_assert_geq(took, 250, "destroy did not wait for the drain (%llu ms)",
                  (unsigned long long)took);
}
