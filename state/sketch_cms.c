/* sketch_cms.c - count-min counters and the heavy-hitter table (see sketch_cms.h). */
#include "state/sketch_cms.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define SEED 0x65646479434d5331ull /* "eddyCMS1" */

_Static_assert(EDDY_CMS_DEPTH * 16 <= 64 && EDDY_CMS_WIDTH <= 65536,
               "each row takes its own 16 bits of one 64-bit hash");

typedef struct columns {
    uint32_t col[EDDY_CMS_DEPTH];
} columns_t;

static columns_t columns_of(const void *key, size_t len)
{
    /* Disjoint bits per row, not h1 + i*h2: with a narrow row the latter
     * makes two keys collide in every row at once with chance 1/width^2. */
    uint64_t h = XXH64(key, len, SEED);
    columns_t c;
    for (uint32_t i = 0; i < EDDY_CMS_DEPTH; i++)
        c.col[i] = (uint32_t)((h >> (16 * i)) & (EDDY_CMS_WIDTH - 1));
    return c;
}

static uint64_t estimate_at(const eddy_cms_t *self, columns_t c)
{
    uint64_t best = UINT64_MAX;
    for (uint32_t i = 0; i < EDDY_CMS_DEPTH; i++)
        if (self->cells[i][c.col[i]] < best)
            best = self->cells[i][c.col[i]];
    return best;
}

uint64_t eddy_cms_estimate(const eddy_cms_t *self, const void *key, size_t len)
{
    return estimate_at(self, columns_of(key, len));
}

void eddy_cms_init(eddy_cms_t *self)
{
    memset(self, 0, sizeof *self);
    eddy_sketch_header_init(&self->header, EDDY_SKETCH_CMS, EDDY_CMS_VERSION);
}

static int find_entry(const eddy_cms_t *self, const void *key, size_t len)
{
    for (uint32_t i = 0; i < self->n_top; i++)
        if (self->top[i].len == len && memcmp(self->top[i].key, key, len) == 0)
            return (int)i;
    return -1;
}

static void set_entry(eddy_cms_entry_t *e, const void *key, size_t len, uint64_t count)
{
    memset(e, 0, sizeof *e);
    e->count = count;
    e->len = (uint8_t)len;
    memcpy(e->key, key, len);
}

/* Larger count first, then key bytes: one order for top() and merge, so the
 * result does not depend on the order entries were added in. */
static int entry_cmp(const void *a, const void *b)
{
    const eddy_cms_entry_t *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);
    if (c)
        return c;
    return (int)x->len - (int)y->len;
}

static void offer(eddy_cms_t *self, const void *key, size_t len, uint64_t estimate)
{
    if (len > EDDY_CMS_KEY_MAX)
        return;
    int at = find_entry(self, key, len);
    if (at >= 0) {
        self->top[at].count = estimate;
        return;
    }
    if (self->n_top < EDDY_CMS_TOP_K) {
        set_entry(&self->top[self->n_top++], key, len, estimate);
        return;
    }
    /* The last entry in top()'s order (smallest count, then largest key)
     * gives way to a key that would sort before it: on equal counts the
     * byte-smaller key stays, so which keys tie their way into a full
     * table does not depend on the order records arrived in (a restored
     * or rescaled window sees them in another order). */
    eddy_cms_entry_t offered;
    set_entry(&offered, key, len, estimate);
    uint32_t last = 0;
    for (uint32_t i = 1; i < self->n_top; i++)
        if (entry_cmp(&self->top[i], &self->top[last]) > 0)
            last = i;
    if (entry_cmp(&offered, &self->top[last]) < 0)
        self->top[last] = offered;
}

void eddy_cms_add(eddy_cms_t *self, const void *key, size_t len, uint64_t count)
{
    if (count == 0)
        return;
    columns_t c = columns_of(key, len);
    for (uint32_t i = 0; i < EDDY_CMS_DEPTH; i++)
        self->cells[i][c.col[i]] += count;
    self->total += count;
    offer(self, key, len, estimate_at(self, c));
}

void eddy_cms_merge(eddy_cms_t *into, const eddy_cms_t *from)
{
    for (uint32_t i = 0; i < EDDY_CMS_DEPTH; i++)
        for (uint32_t j = 0; j < EDDY_CMS_WIDTH; j++)
            into->cells[i][j] += from->cells[i][j];
    into->total += from->total;

    eddy_cms_entry_t candidates[2 * EDDY_CMS_TOP_K];
    size_t n = 0;
    for (uint32_t i = 0; i < into->n_top; i++)
        candidates[n++] = into->top[i];
    for (uint32_t i = 0; i < from->n_top; i++)
        if (find_entry(into, from->top[i].key, from->top[i].len) < 0)
            candidates[n++] = from->top[i];
    for (size_t i = 0; i < n; i++)
        candidates[i].count = eddy_cms_estimate(into, candidates[i].key, candidates[i].len);
    qsort(candidates, n, sizeof candidates[0], entry_cmp);
    memset(into->top, 0, sizeof into->top);
    into->n_top = (uint32_t)(n < EDDY_CMS_TOP_K ? n : EDDY_CMS_TOP_K);
    memcpy(into->top, candidates, into->n_top * sizeof candidates[0]);
}

size_t eddy_cms_top(const eddy_cms_t *self, eddy_cms_entry_t *out, size_t max)
{
    eddy_cms_entry_t all[EDDY_CMS_TOP_K];
    for (uint32_t i = 0; i < self->n_top; i++) {
        all[i] = self->top[i];
        all[i].count = eddy_cms_estimate(self, all[i].key, all[i].len);
    }
    qsort(all, self->n_top, sizeof all[0], entry_cmp);
    size_t n = self->n_top < max ? self->n_top : max;
    memcpy(out, all, n * sizeof all[0]);
    return n;
}

static int all_zero(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

int eddy_cms_validate(const void *buf, size_t len, eddy_err_t *err)
{
    if (eddy_sketch_header_check(buf, len, EDDY_CMS_SIZE, EDDY_SKETCH_CMS, EDDY_CMS_VERSION,
                                 "count-min sketch", err) < 0)
        return -1;
    /* Copied: buf need not be aligned for the struct. */
    eddy_cms_t *s = malloc(sizeof *s);
    if (!s)
        return eddy_err_set(err, "count-min sketch: out of memory");
    memcpy(s, buf, sizeof *s);
    int rc = -1;
    if (s->reserved != 0) {
        eddy_err_set(err, "count-min sketch: corrupt (reserved bytes set)");
        goto out;
    }
    /* Every count goes to one counter of each row: each row sums to the total. */
    for (uint32_t i = 0; i < EDDY_CMS_DEPTH; i++) {
        uint64_t sum = 0;
        for (uint32_t j = 0; j < EDDY_CMS_WIDTH; j++)
            sum += s->cells[i][j];
        if (sum != s->total) {
            eddy_err_set(err, "count-min sketch: row %u sums to %llu, total says %llu", i,
                         (unsigned long long)sum, (unsigned long long)s->total);
            goto out;
        }
    }
    if (s->n_top > EDDY_CMS_TOP_K) {
        eddy_err_set(err, "count-min sketch: %u heavy hitters (at most %u)", s->n_top,
                     EDDY_CMS_TOP_K);
        goto out;
    }
    for (uint32_t i = 0; i < EDDY_CMS_TOP_K; i++) {
        const eddy_cms_entry_t *e = &s->top[i];
        if (i >= s->n_top) {
            if (!all_zero(e, sizeof *e)) {
                eddy_err_set(err, "count-min sketch: unused heavy-hitter entry %u not empty", i);
                goto out;
            }
            continue;
        }
        if (e->len > EDDY_CMS_KEY_MAX || !all_zero(e->reserved, sizeof e->reserved) ||
            !all_zero(e->key + e->len, EDDY_CMS_KEY_MAX - e->len)) {
            eddy_err_set(err, "count-min sketch: corrupt heavy-hitter entry %u", i);
            goto out;
        }
        if (e->count == 0 || e->count > eddy_cms_estimate(s, e->key, e->len)) {
            eddy_err_set(err, "count-min sketch: heavy-hitter entry %u counts more than its counters",
                         i);
            goto out;
        }
        for (uint32_t j = 0; j < i; j++)
            if (s->top[j].len == e->len && memcmp(s->top[j].key, e->key, e->len) == 0) {
                eddy_err_set(err, "count-min sketch: heavy-hitter entry %u repeats entry %u", i, j);
                goto out;
            }
    }
    rc = 0;
out:
    free(s);
    return rc;
}
