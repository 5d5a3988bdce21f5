/* test_keyed_state_view.c - copy-on-write views of keyed state
 * (state/keyed_state.h): a view's bytes equal the synchronous write_group's
 * at the time it was taken, stay unchanged while the owner writes (also from
 * another thread reading concurrently), successive views, views released
 * out of order or after the state, and release frees the copies (ASan/LSan
 * builds check the frees). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/keygroup.h"
#include "state/keyed_state.h"

#define K 16u

static int64_t *slot(eddy_keyed_state_t *st, const char *key)
{
    uint64_t h = eddy_key_hash(key, (uint32_t)strlen(key));
    return eddy_keyed_state_upsert(st, eddy_key_group_of_hash(h, K), h, key,
                                   (uint32_t)strlen(key), NULL);
}

static void fill(eddy_keyed_state_t *st, int n, int64_t base)
{
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        int64_t *v = slot(st, key);
        cr_assert_not_null(v);
        *v = base + i;
    }
}

/* Every group's bytes, concatenated with lengths: a state's fingerprint. */
typedef struct {
    char *data[K];
    size_t len[K];
} image_t;

static void image_of_state(const eddy_keyed_state_t *st, image_t *img)
{
    for (uint32_t kg = 0; kg < K; kg++)
        cr_assert_eq(eddy_keyed_state_write_group(st, kg, &img->data[kg], &img->len[kg], NULL), 0);
}

static void image_of_view(const eddy_keyed_state_view_t *v, image_t *img)
{
    for (uint32_t kg = 0; kg < K; kg++)
        cr_assert_eq(eddy_keyed_state_view_write_group(v, kg, &img->data[kg], &img->len[kg], NULL),
                     0);
}

static void assert_same(const image_t *a, const image_t *b)
{
    for (uint32_t kg = 0; kg < K; kg++) {
        cr_assert_eq(a->len[kg], b->len[kg], "key group %u: length differs", kg);
        cr_assert(memcmp(a->data[kg], b->data[kg], a->len[kg]) == 0, "key group %u differs", kg);
    }
}

static void image_free(image_t *img)
{
    for (uint32_t kg = 0; kg < K; kg++)
        free(img->data[kg]);
}

/* Writes of every kind after the view: updates, inserts, removes, a drop. */
static void churn(eddy_keyed_state_t *st, int n)
{
    char key[32];
    for (int i = 0; i < n; i += 2) {
        snprintf(key, sizeof key, "key-%d", i);
        *slot(st, key) += 1000;
    }
    for (int i = n; i < n + 500; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        *slot(st, key) = -i;
    }
    for (int i = 1; i < n; i += 7) {
        snprintf(key, sizeof key, "key-%d", i);
        uint64_t h = eddy_key_hash(key, (uint32_t)strlen(key));
        eddy_keyed_state_remove(st, eddy_key_group_of_hash(h, K), h, key, (uint32_t)strlen(key));
    }
    eddy_keyed_state_drop_group(st, 3);
}

Test(keyed_state_view, bytes_equal_the_synchronous_path)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, 8);
    fill(st, 2000, 0);
    image_t sync, async;
    image_of_state(st, &sync);
    eddy_keyed_state_view_t *v = eddy_keyed_state_view_new(st);
    cr_assert_not_null(v);
    cr_assert_eq(eddy_keyed_state_view_keys(v), 2000);
    image_of_view(v, &async);
    assert_same(&sync, &async);
    image_free(&async);
    /* and still the same after the state changed under it */
    churn(st, 2000);
    image_of_view(v, &async);
    assert_same(&sync, &async);
    cr_assert_gt(eddy_keyed_state_view_retired(v), 0, "removed pinned entries wait on the view");
    image_free(&async);
    image_free(&sync);
    eddy_keyed_state_view_destroy(&v);
    cr_assert_null(v);
    eddy_keyed_state_destroy(&st);
}

typedef struct {
    const eddy_keyed_state_view_t *view;
    const image_t *expect;
    int rounds;
} reader_t;

static void *read_view(void *arg)
{
    reader_t *r = arg;
    for (int round = 0; round < r->rounds; round++) {
        for (uint32_t kg = 0; kg < K; kg++) {
            char *data;
            size_t len;
            if (eddy_keyed_state_view_write_group(r->view, kg, &data, &len, NULL) != 0)
                return "write failed";
            int same = len == r->expect->len[kg] && !memcmp(data, r->expect->data[kg], len);
            free(data);
            if (!same)
                return "the view changed";
        }
    }
    return NULL;
}

Test(keyed_state_view, unchanged_under_concurrent_writes)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, 8);
    fill(st, 5000, 0);
    image_t sync;
    image_of_state(st, &sync);
    eddy_keyed_state_view_t *v = eddy_keyed_state_view_new(st);
    reader_t r = {v, &sync, 20};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, read_view, &r), 0);
    for (int i = 0; i < 10; i++)
        churn(st, 5000);
    void *res;
    pthread_join(th, &res);
    cr_assert_null(res, "%s", (char *)res);
    /* the hand-back (join) orders the reader before the release */
    eddy_keyed_state_view_destroy(&v);
    image_free(&sync);
    eddy_keyed_state_destroy(&st);
}

Test(keyed_state_view, successive_views_each_keep_their_version)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, 8);
    fill(st, 1000, 0);
    image_t img[3], got;
    eddy_keyed_state_view_t *v[3];
    for (int c = 0; c < 3; c++) {
        image_of_state(st, &img[c]);
        v[c] = eddy_keyed_state_view_new(st);
        cr_assert_not_null(v[c]);
        churn(st, 1000 + 500 * c);
        fill(st, 300, 100 * (c + 1)); /* writes entries both older views pinned */
    }
    /* release the middle one first: its retired entries move to the oldest */
    eddy_keyed_state_view_destroy(&v[1]);
    image_of_view(v[0], &got);
    assert_same(&img[0], &got);
    image_free(&got);
    image_of_view(v[2], &got);
    assert_same(&img[2], &got);
    image_free(&got);
    eddy_keyed_state_view_destroy(&v[0]);
    image_of_view(v[2], &got);
    assert_same(&img[2], &got);
    image_free(&got);
    eddy_keyed_state_view_destroy(&v[2]);
    /* a fourth view after all were released: no copies needed any more */
    image_t now;
    image_of_state(st, &now);
    eddy_keyed_state_view_t *w = eddy_keyed_state_view_new(st);
    image_of_view(w, &got);
    assert_same(&now, &got);
    image_free(&got);
    image_free(&now);
    eddy_keyed_state_view_destroy(&w);
    for (int c = 0; c < 3; c++)
        image_free(&img[c]);
    eddy_keyed_state_destroy(&st);
}

Test(keyed_state_view, outlives_its_state_and_release_frees_copies)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, 8);
    fill(st, 1500, 7);
    image_t sync, got;
    image_of_state(st, &sync);
    eddy_keyed_state_view_t *a = eddy_keyed_state_view_new(st);
    churn(st, 1500);
    eddy_keyed_state_view_t *b = eddy_keyed_state_view_new(st);
    churn(st, 1500);
    eddy_keyed_state_destroy(&st); /* every pinned entry now lives on a view */
    image_of_view(a, &got);
    assert_same(&sync, &got);
    image_free(&got);
    eddy_keyed_state_view_destroy(&b);
    image_of_view(a, &got);
    assert_same(&sync, &got);
    image_free(&got);
    eddy_keyed_state_view_destroy(&a); /* LeakSanitizer: nothing left */
    image_free(&sync);
}

Test(keyed_state_view, an_entry_is_copied_once_per_view)
{
    eddy_keyed_state_t *st = eddy_keyed_state_new(K, 8);
    fill(st, 100, 0);
    eddy_keyed_state_view_t *v = eddy_keyed_state_view_new(st);
    int64_t *p = slot(st, "key-5");
    *p = 42;
    cr_assert_eq(eddy_keyed_state_view_retired(v), 1);
    cr_assert_eq(slot(st, "key-5"), p, "a private copy is written in place");
    cr_assert_eq(eddy_keyed_state_view_retired(v), 1);
    eddy_keyed_state_view_destroy(&v);
    cr_assert_eq(*slot(st, "key-5"), 42);
    eddy_keyed_state_destroy(&st);
}
