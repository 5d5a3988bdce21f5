/* list_state.c - keyed list state (see list_state.h).
 *
 * Owns, per key group, a chained hash table of lists keyed by (key, ns).
 * A list is one malloc'd header carrying its identity bytes (key, then ns)
 * plus two growable arrays: the entries' fixed fields and one byte buffer
 * holding every entry's data back to back. Two allocations per list rather
 * than one per entry, because a window or a join buffer appends many small
 * rows to few lists. Growing the byte buffer may move it, which is why a
 * record from at() is only valid until the group changes.
 *
 * Per key group tables (not one global table) so that writing, dropping and
 * reading a group touch only that group, which is what a rescale needs.
 *
 * Serialised form of one key group (msgpack): [version=1, kg, nlists, then
 * per list: key (bin), ns (bin), n, then n times: data (bin), kind, value,
 * timestamp], lists sorted by (key, ns) so equal state gives equal bytes.
 * The reader goes through eddy_mpr (validated before msgpack-c allocates)
 * and rejects a wrong version or kg, counts that do not match, an empty or
 * duplicate list, out-of-range fields and trailing elements. */
#include "state/list_state.h"

#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"
#include "state/keygroup.h"

#define LS_FORMAT_VERSION 1u
#define LS_ITEM_FIELDS 4u
#define LS_LIST_FIELDS 3u
#define LS_MIN_BUCKETS 8u

typedef struct ls_item {
    size_t off; /* into the list's byte buffer */
    uint32_t len;
    uint8_t kind;
    int64_t value;
    int64_t timestamp;
} ls_item_t;

typedef struct ls_list ls_list_t;
struct ls_list {
    ls_list_t *next; /* hash chain */
    uint64_t hash;
    ls_item_t *items;
    size_t n, cap;
    char *bytes;
    size_t blen, bcap;
    uint32_t key_len, ns_len;
    unsigned char ident[]; /* key, then ns */
};

typedef struct ls_group {
    ls_list_t **buckets;
    size_t nbuckets; /* 0 or a power of two */
    size_t nlists;
} ls_group_t;

struct eddy_list_state {
    uint32_t max_key_groups;
    size_t entries;
    size_t bytes; /* approximate heap bytes of all lists */
    ls_group_t *groups;
};

static uint64_t ls_hash(const void *key, uint32_t key_len, const void *ns, uint32_t ns_len)
{
    uint64_t h = eddy_key_hash(key_len ? key : "", key_len);
    h ^= eddy_key_hash(ns_len ? ns : "", ns_len) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 31);
}

static size_t ls_list_bytes(const ls_list_t *l)
{
    return sizeof *l + l->key_len + l->ns_len + l->cap * sizeof(ls_item_t) + l->bcap;
}

static ls_list_t **ls_find(ls_group_t *g, uint64_t hash, const void *key, uint32_t key_len,
                           const void *ns, uint32_t ns_len)
{
    if (g->nbuckets == 0)
        return NULL;
    ls_list_t **p = &g->buckets[hash & (g->nbuckets - 1)];
    for (; *p; p = &(*p)->next) {
        ls_list_t *l = *p;
        if (l->hash == hash && l->key_len == key_len && l->ns_len == ns_len &&
            (key_len == 0 || memcmp(l->ident, key, key_len) == 0) &&
            (ns_len == 0 || memcmp(l->ident + key_len, ns, ns_len) == 0))
            return p;
    }
    return NULL;
}

static ls_list_t *ls_get(eddy_list_state_t *self, uint32_t kg, const void *key, uint32_t key_len,
                         const void *ns, uint32_t ns_len)
{
    if (!self || kg >= self->max_key_groups || (key_len && !key) || (ns_len && !ns))
        return NULL;
    ls_list_t **p = ls_find(&self->groups[kg], ls_hash(key, key_len, ns, ns_len), key, key_len,
                            ns, ns_len);
    return p ? *p : NULL;
}

static int ls_grow_table(eddy_list_state_t *self, ls_group_t *g)
{
    size_t n = g->nbuckets ? g->nbuckets * 2 : LS_MIN_BUCKETS;
    if (n > SIZE_MAX / sizeof(ls_list_t *))
        return -1;
    ls_list_t **b = calloc(n, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < g->nbuckets; i++) {
        ls_list_t *l = g->buckets[i];
        while (l) {
            ls_list_t *next = l->next;
            size_t j = l->hash & (n - 1);
            l->next = b[j];
            b[j] = l;
            l = next;
        }
    }
    free(g->buckets);
    self->bytes += (n - g->nbuckets) * sizeof *b;
    g->buckets = b;
    g->nbuckets = n;
    return 0;
}

/* The list of (key, ns), created empty when absent; NULL on allocation failure. */
static ls_list_t *ls_upsert(eddy_list_state_t *self, uint32_t kg, uint64_t hash, const void *key,
                            uint32_t key_len, const void *ns, uint32_t ns_len)
{
    ls_group_t *g = &self->groups[kg];
    ls_list_t **p = ls_find(g, hash, key, key_len, ns, ns_len);
    if (p)
        return *p;
    if (g->nlists >= g->nbuckets && ls_grow_table(self, g) != 0)
        return NULL;
    ls_list_t *l = calloc(1, sizeof *l + (size_t)key_len + ns_len);
    if (!l)
        return NULL;
    l->hash = hash;
    l->key_len = key_len;
    l->ns_len = ns_len;
    if (key_len)
        memcpy(l->ident, key, key_len);
    if (ns_len)
        memcpy(l->ident + key_len, ns, ns_len);
    size_t b = hash & (g->nbuckets - 1);
    l->next = g->buckets[b];
    g->buckets[b] = l;
    g->nlists++;
    self->bytes += ls_list_bytes(l);
    return l;
}

static void ls_free_list(eddy_list_state_t *self, ls_list_t *l)
{
    self->entries -= l->n;
    self->bytes -= ls_list_bytes(l);
    free(l->items);
    free(l->bytes);
    free(l);
}

/* Unlinks and frees the list at *p of group g. */
static void ls_remove(eddy_list_state_t *self, ls_group_t *g, ls_list_t **p)
{
    ls_list_t *l = *p;
    *p = l->next;
    g->nlists--;
    ls_free_list(self, l);
}

/* Drops an empty list created for an append that then failed. */
static void ls_forget_if_empty(eddy_list_state_t *self, uint32_t kg, ls_list_t *l)
{
    if (l->n != 0)
        return;
    ls_group_t *g = &self->groups[kg];
    ls_list_t **p = &g->buckets[l->hash & (g->nbuckets - 1)];
    while (*p != l)
        p = &(*p)->next;
    ls_remove(self, g, p);
}

static int ls_append(eddy_list_state_t *self, ls_list_t *l, const void *data, uint32_t len,
                     uint8_t kind, int64_t value, int64_t timestamp)
{
    size_t before = ls_list_bytes(l);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        if (cap > SIZE_MAX / sizeof(ls_item_t))
            return -1;
        ls_item_t *items = realloc(l->items, cap * sizeof *items);
        if (!items)
            return -1;
        l->items = items;
        l->cap = cap;
    }
    if (len > l->bcap - l->blen) {
        size_t cap = l->bcap ? l->bcap : 64;
        while (len > cap - l->blen) {
            if (cap > SIZE_MAX / 2)
                return -1;
            cap *= 2;
        }
        char *bytes = realloc(l->bytes, cap);
        if (!bytes)
            return -1;
        l->bytes = bytes;
        l->bcap = cap;
    }
    ls_item_t *it = &l->items[l->n++];
    it->off = l->blen;
    it->len = len;
    it->kind = kind;
    it->value = value;
    it->timestamp = timestamp;
    if (len)
        memcpy(l->bytes + l->blen, data, len);
    l->blen += len;
    self->entries++;
    self->bytes += ls_list_bytes(l) - before;
    return 0;
}

eddy_list_state_t *eddy_list_state_new(uint32_t max_key_groups)
{
    if (max_key_groups == 0 || max_key_groups > EDDY_MAX_KEY_GROUPS)
        return NULL;
    eddy_list_state_t *self = calloc(1, sizeof *self);
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

void eddy_list_state_destroy(eddy_list_state_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_list_state_t *self = *self_p;
    for (uint32_t kg = 0; kg < self->max_key_groups; kg++)
        eddy_list_state_drop_group(self, kg);
    free(self->groups);
    free(self);
    *self_p = NULL;
}

int eddy_list_state_add(eddy_list_state_t *self, uint32_t kg, const void *key, uint32_t key_len,
                        const void *ns, uint32_t ns_len, const eddy_record_t *rec)
{
    if (!self || !rec || kg >= self->max_key_groups || (key_len && !key) || (ns_len && !ns) ||
        (rec->len && !rec->data))
        return -1;
    ls_list_t *l = ls_upsert(self, kg, ls_hash(key, key_len, ns, ns_len), key, key_len, ns, ns_len);
    if (!l)
        return -1;
    if (ls_append(self, l, rec->data, rec->len, rec->kind, rec->value, rec->timestamp) != 0) {
        ls_forget_if_empty(self, kg, l);
        return -1;
    }
    return 0;
}

size_t eddy_list_state_size(eddy_list_state_t *self, uint32_t kg, const void *key,
                            uint32_t key_len, const void *ns, uint32_t ns_len)
{
    ls_list_t *l = ls_get(self, kg, key, key_len, ns, ns_len);
    return l ? l->n : 0;
}

bool eddy_list_state_at(eddy_list_state_t *self, uint32_t kg, const void *key, uint32_t key_len,
                        const void *ns, uint32_t ns_len, size_t i, eddy_record_t *rec)
{
    ls_list_t *l = ls_get(self, kg, key, key_len, ns, ns_len);
    if (!l || i >= l->n || !rec)
        return false;
    const ls_item_t *it = &l->items[i];
    rec->data = it->len ? l->bytes + it->off : "";
    rec->len = it->len;
    rec->kind = it->kind;
    rec->value = it->value;
    rec->timestamp = it->timestamp;
    return true;
}

bool eddy_list_state_clear(eddy_list_state_t *self, uint32_t kg, const void *key,
                           uint32_t key_len, const void *ns, uint32_t ns_len)
{
    if (!self || kg >= self->max_key_groups || (key_len && !key) || (ns_len && !ns))
        return false;
    ls_group_t *g = &self->groups[kg];
    ls_list_t **p = ls_find(g, ls_hash(key, key_len, ns, ns_len), key, key_len, ns, ns_len);
    if (!p)
        return false;
    ls_remove(self, g, p);
    return true;
}

int eddy_list_state_move(eddy_list_state_t *self, uint32_t kg, const void *key, uint32_t key_len,
                         const void *from_ns, uint32_t from_len, const void *to_ns,
                         uint32_t to_len)
{
    if (!self || kg >= self->max_key_groups || (key_len && !key) || (from_len && !from_ns) ||
        (to_len && !to_ns))
        return -1;
    ls_list_t *from = ls_get(self, kg, key, key_len, from_ns, from_len);
    if (!from || (from_len == to_len && (to_len == 0 || memcmp(from_ns, to_ns, to_len) == 0)))
        return 0;
    ls_list_t *to =
        ls_upsert(self, kg, ls_hash(key, key_len, to_ns, to_len), key, key_len, to_ns, to_len);
    if (!to)
        return -1;
    if (to->n == 0) {
        /* Hand the arrays over rather than copying them. */
        size_t before = ls_list_bytes(from) + ls_list_bytes(to);
        ls_item_t *items = to->items;
        char *bytes = to->bytes;
        size_t cap = to->cap, bcap = to->bcap;
        to->items = from->items, to->n = from->n, to->cap = from->cap;
        to->bytes = from->bytes, to->blen = from->blen, to->bcap = from->bcap;
        from->items = items, from->n = 0, from->cap = cap;
        from->bytes = bytes, from->blen = 0, from->bcap = bcap;
        self->bytes = self->bytes - before + ls_list_bytes(from) + ls_list_bytes(to);
    } else {
        for (size_t i = 0; i < from->n; i++) {
            const ls_item_t *it = &from->items[i];
            if (ls_append(self, to, from->bytes + it->off, it->len, it->kind, it->value,
                          it->timestamp) != 0) {
                /* Undo the partial copy so no entry is duplicated. */
                self->entries -= i;
                to->n -= i;
                to->blen = to->n ? to->items[to->n - 1].off + to->items[to->n - 1].len : 0;
                return -1;
            }
        }
    }
    eddy_list_state_clear(self, kg, key, key_len, from_ns, from_len);
    return 0;
}

void eddy_list_state_foreach(eddy_list_state_t *self, uint32_t kg, eddy_list_state_visit_fn visit,
                             void *ctx)
{
    if (!self || kg >= self->max_key_groups || !visit)
        return;
    ls_group_t *g = &self->groups[kg];
    for (size_t i = 0; i < g->nbuckets; i++)
        for (ls_list_t *l = g->buckets[i]; l; l = l->next)
            visit(ctx, l->ident, l->key_len, l->ident + l->key_len, l->ns_len, l->n);
}

size_t eddy_list_state_entries(const eddy_list_state_t *self)
{
    return self ? self->entries : 0;
}

size_t eddy_list_state_bytes(const eddy_list_state_t *self)
{
    if (!self)
        return 0;
    return sizeof *self + (size_t)self->max_key_groups * sizeof(ls_group_t) + self->bytes;
}

void eddy_list_state_drop_group(eddy_list_state_t *self, uint32_t kg)
{
    if (!self || kg >= self->max_key_groups)
        return;
    ls_group_t *g = &self->groups[kg];
    for (size_t i = 0; i < g->nbuckets; i++) {
        ls_list_t *l = g->buckets[i];
        while (l) {
            ls_list_t *next = l->next;
            ls_free_list(self, l);
            l = next;
        }
    }
    free(g->buckets);
    self->bytes -= g->nbuckets * sizeof(ls_list_t *);
    memset(g, 0, sizeof *g);
}

/* --- serialisation ------------------------------------------------------ */

static int list_order(const void *a, const void *b)
{
    const ls_list_t *x = *(ls_list_t *const *)a, *y = *(ls_list_t *const *)b;
    uint32_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = n ? memcmp(x->ident, y->ident, n) : 0;
    if (c)
        return c;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len ? -1 : 1;
    n = x->ns_len < y->ns_len ? x->ns_len : y->ns_len;
    c = n ? memcmp(x->ident + x->key_len, y->ident + y->key_len, n) : 0;
    if (c)
        return c;
    return x->ns_len < y->ns_len ? -1 : x->ns_len > y->ns_len;
}

int eddy_list_state_write_group(const eddy_list_state_t *self, uint32_t kg, char **out,
                                size_t *len, eddy_err_t *err)
{
    if (!self || !out || !len)
        return eddy_err_set(err, "list state: write_group called with a NULL argument");
    if (kg >= self->max_key_groups)
        return eddy_err_set(err, "list state: key group %u out of range (K = %u)", kg,
                            self->max_key_groups);
    const ls_group_t *g = &self->groups[kg];
    uint64_t fields = 3;
    ls_list_t **sorted = NULL;
    if (g->nlists) {
        sorted = malloc(g->nlists * sizeof *sorted);
        if (!sorted)
            return eddy_err_set(err, "list state: out of memory writing key group %u", kg);
    }
    size_t k = 0;
    for (size_t i = 0; i < g->nbuckets; i++)
        for (ls_list_t *l = g->buckets[i]; l; l = l->next) {
            sorted[k++] = l;
            fields += LS_LIST_FIELDS + (uint64_t)LS_ITEM_FIELDS * l->n;
        }
    if (fields > UINT32_MAX) {
        free(sorted);
        return eddy_err_set(err, "list state: key group %u has too many entries to serialise", kg);
    }
    if (k > 1)
        qsort(sorted, k, sizeof *sorted, list_order);
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, (uint32_t)fields);
    eddy_mpw_u64(&w, LS_FORMAT_VERSION);
    eddy_mpw_u64(&w, kg);
    eddy_mpw_u64(&w, k);
    for (size_t i = 0; i < k; i++) {
        const ls_list_t *l = sorted[i];
        eddy_mpw_bin(&w, l->ident, l->key_len);
        eddy_mpw_bin(&w, l->ident + l->key_len, l->ns_len);
        eddy_mpw_u64(&w, l->n);
        for (size_t j = 0; j < l->n; j++) {
            const ls_item_t *it = &l->items[j];
            eddy_mpw_bin(&w, l->bytes + it->off, it->len);
            eddy_mpw_u64(&w, it->kind);
            eddy_mpw_i64(&w, it->value);
            eddy_mpw_i64(&w, it->timestamp);
        }
    }
    free(sorted);
    *out = eddy_mpw_release(&w, len);
    if (!*out)
        return eddy_err_set(err, "list state: out of memory writing key group %u", kg);
    return 0;
}

static int read_lists(eddy_list_state_t *self, uint32_t kg, eddy_mpr_t *r, eddy_err_t *err)
{
    uint64_t version = eddy_mpr_u64(r, UINT64_MAX);
    if (r->ok && version != LS_FORMAT_VERSION)
        return eddy_err_set(err, "list state: key group %u: unsupported format version %llu "
                                 "(expected %u)",
                            kg, (unsigned long long)version, LS_FORMAT_VERSION);
    uint64_t data_kg = eddy_mpr_u64(r, UINT64_MAX);
    if (r->ok && data_kg != kg)
        return eddy_err_set(err, "list state: key group %u: data is for key group %llu", kg,
                            (unsigned long long)data_kg);
    /* Every list takes at least its 3 header fields plus one entry. */
    uint64_t nlists = eddy_mpr_u64(r, eddy_mpr_remaining(r) / (LS_LIST_FIELDS + LS_ITEM_FIELDS));
    for (uint64_t i = 0; i < nlists && r->ok; i++) {
        uint32_t key_len = 0, ns_len = 0;
        const char *key = eddy_mpr_bytes(r, UINT32_MAX, &key_len);
        const char *ns = eddy_mpr_bytes(r, UINT32_MAX, &ns_len);
        uint64_t n = eddy_mpr_u64(r, eddy_mpr_remaining(r) / LS_ITEM_FIELDS);
        if (!r->ok)
            break;
        if (n == 0)
            return eddy_err_set(err, "list state: key group %u: list %llu is empty", kg,
                                (unsigned long long)i);
        uint64_t hash = ls_hash(key, key_len, ns, ns_len);
        if (ls_find(&self->groups[kg], hash, key, key_len, ns, ns_len))
            return eddy_err_set(err, "list state: key group %u: list %llu is a duplicate", kg,
                                (unsigned long long)i);
        ls_list_t *l = ls_upsert(self, kg, hash, key, key_len, ns, ns_len);
        if (!l)
            return eddy_err_set(err, "list state: key group %u: out of memory", kg);
        for (uint64_t j = 0; j < n && r->ok; j++) {
            uint32_t len = 0;
            const char *data = eddy_mpr_bytes(r, EDDY_RECORD_MAX_BYTES, &len);
            uint8_t kind = (uint8_t)eddy_mpr_u64(r, UINT8_MAX);
            int64_t value = eddy_mpr_i64(r);
            int64_t ts = eddy_mpr_i64(r);
            if (!r->ok)
                break;
            if (ls_append(self, l, data, len, kind, value, ts) != 0)
                return eddy_err_set(err, "list state: key group %u: out of memory", kg);
        }
    }
    if (eddy_mpr_finish(r, "list state", err) != 0)
        return eddy_err_wrap(err, "key group %u", kg);
    return 0;
}

int eddy_list_state_read_group(eddy_list_state_t *self, uint32_t kg, const void *data, size_t len,
                               eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "list state: read_group called with a NULL object");
    if (kg >= self->max_key_groups)
        return eddy_err_set(err, "list state: key group %u out of range (K = %u)", kg,
                            self->max_key_groups);
    eddy_list_state_drop_group(self, kg);
    if (len == 0)
        return 0;
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) != 0)
        return eddy_err_wrap(err, "list state: key group %u", kg);
    int rc = read_lists(self, kg, &r, err);
    eddy_mpr_close(&r);
    if (rc != 0)
        eddy_list_state_drop_group(self, kg);
    return rc;
}
