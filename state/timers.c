/* timers.c - the timer service of one keyed operator instance (see timers.h).
 *
 * Owns every pending timer as one malloc'd entry (fixed fields, then the key
 * and namespace bytes) threaded through three structures, so that each
 * operation touches only what it needs:
 *  - a binary min-heap per domain, ordered by (time, key, ns, kg), so an
 *    advance costs O(log n) per fired timer and nothing for the rest - the
 *    watermark moves often and operators may hold 100k+ timers;
 *  - one chained hash table over the timer's identity, for the dedupe on
 *    register and for delete (an entry knows its heap slot, so it leaves
 *    the heap in O(log n));
 *  - a doubly linked list per key group, so writing or dropping a group
 *    walks that group's timers only.
 * An advance unlinks the timer before calling back, so the callback may
 * register the very same timer again (a new one, fired later in this
 * advance when its time is <= until) or delete any other timer.
 *
 * Serialised form of one key group (msgpack): [version=1, kg, n, then n
 * times: domain, time, key (bin), ns (bin)], sorted by (domain, time, key,
 * ns) so equal state always gives equal bytes. The reader goes through
 * eddy_mpr (validated before msgpack-c allocates) and rejects a wrong
 * version or kg, a count that does not match, an unknown domain, a
 * duplicate timer and trailing elements. */
#include "state/timers.h"

#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"
#include "state/keygroup.h"

#define TM_FORMAT_VERSION 1u
#define TM_FIELDS 4u /* per timer in the serialised form */
#define TM_MIN_BUCKETS 16u

typedef struct tm_entry tm_entry_t;
struct tm_entry {
    tm_entry_t *hnext;              /* hash chain */
    tm_entry_t *gprev, *gnext;      /* key group list */
    size_t heap_pos;
    uint64_t hash;
    int64_t time;
    uint32_t kg;
    uint32_t key_len;
    uint32_t ns_len;
    uint8_t domain;
    unsigned char bytes[]; /* key, then ns */
};

typedef struct tm_heap {
    tm_entry_t **items;
    size_t count;
    size_t cap;
} tm_heap_t;

struct eddy_timers {
    uint32_t max_key_groups;
    tm_heap_t heaps[2];
    tm_entry_t **buckets;
    size_t nbuckets; /* 0 or a power of two */
    size_t count;
    tm_entry_t **groups; /* list head per key group */
    void (*before_fire)(void *ctx, uint32_t kg); /* eddy_timers_before_fire */
    void *before_ctx;
};

static inline const unsigned char *tm_key(const tm_entry_t *e)
{
    return e->bytes;
}

static inline const unsigned char *tm_ns(const tm_entry_t *e)
{
    return e->bytes + e->key_len;
}

static uint64_t tm_hash(eddy_time_domain_t domain, int64_t time, uint32_t kg, const void *key,
                        uint32_t key_len, const void *ns, uint32_t ns_len)
{
    uint64_t h = eddy_key_hash(key_len ? key : "", key_len);
    h ^= eddy_key_hash(ns_len ? ns : "", ns_len) * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)time * 0xC2B2AE3D27D4EB4Full;
    h ^= ((uint64_t)kg << 1 | (uint64_t)domain) * 0x165667B19E3779F9ull;
    return h ^ (h >> 29);
}

static int bytes_cmp(const void *a, uint32_t alen, const void *b, uint32_t blen)
{
    uint32_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* Heap and write order: (time, key, ns, kg). */
static int tm_cmp(const tm_entry_t *a, const tm_entry_t *b)
{
    if (a->time != b->time)
        return a->time < b->time ? -1 : 1;
    int c = bytes_cmp(tm_key(a), a->key_len, tm_key(b), b->key_len);
    if (c)
        return c;
    c = bytes_cmp(tm_ns(a), a->ns_len, tm_ns(b), b->ns_len);
    if (c)
        return c;
    return a->kg < b->kg ? -1 : a->kg > b->kg;
}

static bool tm_same(const tm_entry_t *e, uint64_t hash, eddy_time_domain_t domain, int64_t time,
                    uint32_t kg, const void *key, uint32_t key_len, const void *ns,
                    uint32_t ns_len)
{
    return e->hash == hash && e->domain == (uint8_t)domain && e->time == time && e->kg == kg &&
           e->key_len == key_len && e->ns_len == ns_len &&
           (key_len == 0 || memcmp(tm_key(e), key, key_len) == 0) &&
           (ns_len == 0 || memcmp(tm_ns(e), ns, ns_len) == 0);
}

/* --- heap --------------------------------------------------------------- */

static inline void heap_set(tm_heap_t *h, size_t i, tm_entry_t *e)
{
    h->items[i] = e;
    e->heap_pos = i;
}

static void heap_up(tm_heap_t *h, size_t i)
{
    tm_entry_t *e = h->items[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (tm_cmp(h->items[parent], e) <= 0)
            break;
        heap_set(h, i, h->items[parent]);
        i = parent;
    }
    heap_set(h, i, e);
}

static void heap_down(tm_heap_t *h, size_t i)
{
    tm_entry_t *e = h->items[i];
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= h->count)
            break;
        size_t m = l;
        if (l + 1 < h->count && tm_cmp(h->items[l + 1], h->items[l]) < 0)
            m = l + 1;
        if (tm_cmp(e, h->items[m]) <= 0)
            break;
        heap_set(h, i, h->items[m]);
        i = m;
    }
    heap_set(h, i, e);
}

static int heap_reserve(tm_heap_t *h)
{
    if (h->count < h->cap)
        return 0;
    size_t cap = h->cap ? h->cap * 2 : 64;
    if (cap > SIZE_MAX / sizeof *h->items)
        return -1;
    tm_entry_t **items = realloc(h->items, cap * sizeof *items);
    if (!items)
        return -1;
    h->items = items;
    h->cap = cap;
    return 0;
}

/* The caller reserved room with heap_reserve. */
static void heap_push(tm_heap_t *h, tm_entry_t *e)
{
    h->items[h->count] = e;
    e->heap_pos = h->count++;
    heap_up(h, e->heap_pos);
}

static void heap_remove(tm_heap_t *h, tm_entry_t *e)
{
    size_t i = e->heap_pos;
    tm_entry_t *last = h->items[--h->count];
    if (i == h->count)
        return;
    heap_set(h, i, last);
    if (i > 0 && tm_cmp(last, h->items[(i - 1) / 2]) < 0)
        heap_up(h, i);
    else
        heap_down(h, i);
}

/* --- hash table --------------------------------------------------------- */

static int table_grow(eddy_timers_t *self)
{
    size_t n = self->nbuckets ? self->nbuckets * 2 : TM_MIN_BUCKETS;
    if (n > SIZE_MAX / sizeof(tm_entry_t *))
        return -1;
    tm_entry_t **b = calloc(n, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < self->nbuckets; i++) {
        tm_entry_t *e = self->buckets[i];
        while (e) {
            tm_entry_t *next = e->hnext;
            size_t j = e->hash & (n - 1);
            e->hnext = b[j];
            b[j] = e;
            e = next;
        }
    }
    free(self->buckets);
    self->buckets = b;
    self->nbuckets = n;
    return 0;
}

static tm_entry_t **table_slot(eddy_timers_t *self, uint64_t hash, eddy_time_domain_t domain,
                               int64_t time, uint32_t kg, const void *key, uint32_t key_len,
                               const void *ns, uint32_t ns_len)
{
    if (self->nbuckets == 0)
        return NULL;
    tm_entry_t **p = &self->buckets[hash & (self->nbuckets - 1)];
    while (*p && !tm_same(*p, hash, domain, time, kg, key, key_len, ns, ns_len))
        p = &(*p)->hnext;
    return *p ? p : NULL;
}

/* Removes e from the table, its heap and its group list; does not free it. */
static void tm_unlink(eddy_timers_t *self, tm_entry_t *e)
{
    tm_entry_t **p = &self->buckets[e->hash & (self->nbuckets - 1)];
    while (*p != e)
        p = &(*p)->hnext;
    *p = e->hnext;
    heap_remove(&self->heaps[e->domain], e);
    if (e->gprev)
        e->gprev->gnext = e->gnext;
    else
        self->groups[e->kg] = e->gnext;
    if (e->gnext)
        e->gnext->gprev = e->gprev;
    self->count--;
}

/* Inserts a timer known to be new. */
static int tm_insert(eddy_timers_t *self, uint64_t hash, eddy_time_domain_t domain, int64_t time,
                     uint32_t kg, const void *key, uint32_t key_len, const void *ns,
                     uint32_t ns_len)
{
    tm_heap_t *h = &self->heaps[domain];
    if (heap_reserve(h) != 0)
        return -1;
    if (self->count >= self->nbuckets && table_grow(self) != 0)
        return -1;
    if ((size_t)key_len + ns_len > SIZE_MAX - sizeof(tm_entry_t))
        return -1;
    tm_entry_t *e = malloc(sizeof *e + (size_t)key_len + ns_len);
    if (!e)
        return -1;
    e->hash = hash;
    e->time = time;
    e->kg = kg;
    e->key_len = key_len;
    e->ns_len = ns_len;
    e->domain = (uint8_t)domain;
    if (key_len)
        memcpy(e->bytes, key, key_len);
    if (ns_len)
        memcpy(e->bytes + key_len, ns, ns_len);

    size_t b = hash & (self->nbuckets - 1);
    e->hnext = self->buckets[b];
    self->buckets[b] = e;
    e->gprev = NULL;
    e->gnext = self->groups[kg];
    if (e->gnext)
        e->gnext->gprev = e;
    self->groups[kg] = e;
    heap_push(h, e);
    self->count++;
    return 0;
}

/* --- public ------------------------------------------------------------- */

eddy_timers_t *eddy_timers_new(uint32_t max_key_groups)
{
    if (max_key_groups == 0 || max_key_groups > EDDY_MAX_KEY_GROUPS)
        return NULL;
    eddy_timers_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->groups = calloc(max_key_groups, sizeof *self->groups);
    if (!self->groups) {
        free(self);
        return NULL;
    }
    self->max_key_groups = max_key_groups;
    return self;
}

void eddy_timers_destroy(eddy_timers_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_timers_t *self = *self_p;
    for (size_t i = 0; i < self->nbuckets; i++) {
        tm_entry_t *e = self->buckets[i];
        while (e) {
            tm_entry_t *next = e->hnext;
            free(e);
            e = next;
        }
    }
    free(self->buckets);
    free(self->heaps[0].items);
    free(self->heaps[1].items);
    free(self->groups);
    free(self);
    *self_p = NULL;
}

static bool valid_domain(eddy_time_domain_t domain)
{
    return domain == EDDY_EVENT_TIME || domain == EDDY_PROCESSING_TIME;
}

int eddy_timers_register(eddy_timers_t *self, eddy_time_domain_t domain, int64_t time, uint32_t kg,
                         const void *key, uint32_t key_len, const void *ns, uint32_t ns_len)
{
    if (!self || kg >= self->max_key_groups || !valid_domain(domain) || (key_len && !key) ||
        (ns_len && !ns))
        return -1;
    uint64_t hash = tm_hash(domain, time, kg, key, key_len, ns, ns_len);
    if (table_slot(self, hash, domain, time, kg, key, key_len, ns, ns_len))
        return 0;
    return tm_insert(self, hash, domain, time, kg, key, key_len, ns, ns_len);
}

bool eddy_timers_delete(eddy_timers_t *self, eddy_time_domain_t domain, int64_t time, uint32_t kg,
                        const void *key, uint32_t key_len, const void *ns, uint32_t ns_len)
{
    if (!self || kg >= self->max_key_groups || !valid_domain(domain) || (key_len && !key) ||
        (ns_len && !ns))
        return false;
    uint64_t hash = tm_hash(domain, time, kg, key, key_len, ns, ns_len);
    tm_entry_t **p = table_slot(self, hash, domain, time, kg, key, key_len, ns, ns_len);
    if (!p)
        return false;
    tm_entry_t *e = *p;
    tm_unlink(self, e);
    free(e);
    return true;
}

int eddy_timers_advance(eddy_timers_t *self, eddy_time_domain_t domain, int64_t until,
                        eddy_timer_fire_fn fire, void *ctx, eddy_err_t *err)
{
    if (!self || !valid_domain(domain))
        return eddy_err_set(err, "timers: advance called with an invalid argument");
    tm_heap_t *h = &self->heaps[domain];
    while (h->count > 0 && h->items[0]->time <= until) {
        tm_entry_t *e = h->items[0];
        if (self->before_fire)
            self->before_fire(self->before_ctx, e->kg);
        tm_unlink(self, e);
        eddy_timer_t t = {
            .domain = domain,
            .time = e->time,
            .kg = e->kg,
            .key = tm_key(e),
            .key_len = e->key_len,
            .ns = tm_ns(e),
            .ns_len = e->ns_len,
        };
        int rc = fire ? fire(ctx, &t, err) : 0;
        free(e);
        if (rc != 0)
            return -1;
    }
    return 0;
}

void eddy_timers_before_fire(eddy_timers_t *self, void (*before)(void *ctx, uint32_t kg),
                             void *ctx)
{
    if (!self)
        return;
    self->before_fire = before;
    self->before_ctx = ctx;
}

int64_t eddy_timers_next(const eddy_timers_t *self, eddy_time_domain_t domain)
{
    if (!self || !valid_domain(domain) || self->heaps[domain].count == 0)
        return INT64_MAX;
    return self->heaps[domain].items[0]->time;
}

size_t eddy_timers_count(const eddy_timers_t *self)
{
    return self ? self->count : 0;
}

void eddy_timers_drop_group(eddy_timers_t *self, uint32_t kg)
{
    if (!self || kg >= self->max_key_groups)
        return;
    while (self->groups[kg]) {
        tm_entry_t *e = self->groups[kg];
        tm_unlink(self, e);
        free(e);
    }
}

/* --- serialisation ------------------------------------------------------ */

static int write_order(const void *a, const void *b)
{
    const tm_entry_t *x = *(tm_entry_t *const *)a, *y = *(tm_entry_t *const *)b;
    if (x->domain != y->domain)
        return x->domain < y->domain ? -1 : 1;
    return tm_cmp(x, y);
}

int eddy_timers_write_group(const eddy_timers_t *self, uint32_t kg, char **out, size_t *len,
                            eddy_err_t *err)
{
    if (!self || !out || !len)
        return eddy_err_set(err, "timers: write_group called with a NULL argument");
    if (kg >= self->max_key_groups)
        return eddy_err_set(err, "timers: key group %u out of range (K = %u)", kg,
                            self->max_key_groups);
    size_t n = 0;
    for (const tm_entry_t *e = self->groups[kg]; e; e = e->gnext)
        n++;
    if (n > (UINT32_MAX - 3) / TM_FIELDS)
        return eddy_err_set(err, "timers: key group %u has too many timers (%zu)", kg, n);
    tm_entry_t **sorted = NULL;
    if (n) {
        sorted = malloc(n * sizeof *sorted);
        if (!sorted)
            return eddy_err_set(err, "timers: out of memory writing key group %u", kg);
        size_t i = 0;
        for (tm_entry_t *e = self->groups[kg]; e; e = e->gnext)
            sorted[i++] = e;
        qsort(sorted, n, sizeof *sorted, write_order);
    }
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, (uint32_t)(3 + TM_FIELDS * n));
    eddy_mpw_u64(&w, TM_FORMAT_VERSION);
    eddy_mpw_u64(&w, kg);
    eddy_mpw_u64(&w, n);
    for (size_t i = 0; i < n; i++) {
        const tm_entry_t *e = sorted[i];
        eddy_mpw_u64(&w, e->domain);
        eddy_mpw_i64(&w, e->time);
        eddy_mpw_bin(&w, tm_key(e), e->key_len);
        eddy_mpw_bin(&w, tm_ns(e), e->ns_len);
    }
    free(sorted);
    *out = eddy_mpw_release(&w, len);
    if (!*out)
        return eddy_err_set(err, "timers: out of memory writing key group %u", kg);
    return 0;
}

static int read_timers(eddy_timers_t *self, uint32_t kg, eddy_mpr_t *r, eddy_err_t *err)
{
    uint64_t version = eddy_mpr_u64(r, UINT64_MAX);
    if (r->ok && version != TM_FORMAT_VERSION)
        return eddy_err_set(err, "timers: key group %u: unsupported format version %llu "
                                 "(expected %u)",
                            kg, (unsigned long long)version, TM_FORMAT_VERSION);
    uint64_t data_kg = eddy_mpr_u64(r, UINT64_MAX);
    if (r->ok && data_kg != kg)
        return eddy_err_set(err, "timers: key group %u: data is for key group %llu", kg,
                            (unsigned long long)data_kg);
    uint64_t n = eddy_mpr_u64(r, UINT32_MAX);
    if (r->ok && n * TM_FIELDS != eddy_mpr_remaining(r))
        return eddy_err_set(err, "timers: key group %u: %llu timers announced, %u fields present",
                            kg, (unsigned long long)n, eddy_mpr_remaining(r));
    for (uint64_t i = 0; i < n && r->ok; i++) {
        uint64_t domain = eddy_mpr_u64(r, EDDY_PROCESSING_TIME);
        int64_t time = eddy_mpr_i64(r);
        uint32_t key_len = 0, ns_len = 0;
        const char *key = eddy_mpr_bytes(r, UINT32_MAX, &key_len);
        const char *ns = eddy_mpr_bytes(r, UINT32_MAX, &ns_len);
        if (!r->ok)
            break;
        eddy_time_domain_t d = (eddy_time_domain_t)domain;
        uint64_t hash = tm_hash(d, time, kg, key, key_len, ns, ns_len);
        if (table_slot(self, hash, d, time, kg, key, key_len, ns, ns_len))
            return eddy_err_set(err, "timers: key group %u: timer %llu is a duplicate", kg,
                                (unsigned long long)i);
        if (tm_insert(self, hash, d, time, kg, key, key_len, ns, ns_len) != 0)
            return eddy_err_set(err, "timers: key group %u: out of memory", kg);
    }
    if (eddy_mpr_finish(r, "timers", err) != 0)
        return eddy_err_wrap(err, "key group %u", kg);
    return 0;
}

int eddy_timers_read_group(eddy_timers_t *self, uint32_t kg, const void *data, size_t len,
                           eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "timers: read_group called with a NULL object");
    if (kg >= self->max_key_groups)
        return eddy_err_set(err, "timers: key group %u out of range (K = %u)", kg,
                            self->max_key_groups);
    eddy_timers_drop_group(self, kg);
    if (len == 0)
        return 0;
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) != 0)
        return eddy_err_wrap(err, "timers: key group %u", kg);
    int rc = read_timers(self, kg, &r, err);
    eddy_mpr_close(&r);
    if (rc != 0)
        eddy_timers_drop_group(self, kg);
    return rc;
}
