/* keyed_state.c - the heap keyed-state backend (see keyed_state.h).
 *
 * Owns the per-key-group hash tables and their serialisation (the bulk
 * form, version 2, written; the msgpack form, version 1, still read). Each
 * key group has its own open-addressing table (linear probing, power-of-two
 * capacity, grown by doubling at 3/4 load, backward-shift deletion so there
 * are no tombstones) so a group can be written, dropped or loaded without
 * touching the others, which is what a rescale needs.
 *
 * A slot holds the key's 64-bit hash and a pointer to one entry that
 * carries the key length, the value (at offset 8, so it is 8-byte aligned
 * for int64/double accumulators) and the key bytes right after the value.
 * An entry lives in a slab (ks_slab_t): the group's open slab for entries
 * made one by one (upsert, copy on write; bump-allocated, KS_OPEN_SLAB_BYTES
 * each) or one slab with the rest of a group loaded in bulk (ks_read_v2).
 * Only an entry too large for an open slab is malloc'd on its own;
 * ks_free_entry frees either. Slabs rather than a malloc per entry because
 * a moved or dropped group's entries are then given back by slab, not one
 * free() each: a million small frees fragmented glibc's heap so that every
 * later large allocation (a serialised group, a loaded table) spent
 * milliseconds sorting the freed chunks, measured as a third of a fluid
 * rescale's CPU time at 1.5M keys.
 * Probing compares the stored hash first, so the entry is only dereferenced
 * on a probable hit. All keys of one group share hash % K, so the slot index
 * is taken from the high bits of a Fibonacci-multiplied hash, never from the
 * low bits. Entries never move, so value pointers actually stay valid until
 * the entry is removed or its group dropped (the header promises less) -
 * unless a view makes the next write access copy the entry.
 *
 * Copy-on-write (in the spirit of Flink's CopyOnWriteStateMap, with the
 * key group as the unit of the table copy): slot arrays carry a reference
 * count; a view takes one reference on every group's array and copies the
 * group headers (O(K)). The live side copies an array whose count is above
 * one before writing a slot. Entries carry the state's version when they were
 * made; a view records the version it froze and the state's version moves
 * on, so an entry whose version is <= the newest live view's is pinned and
 * is copied before a write access. An entry the live side gives up (copied,
 * removed, dropped, destroyed) while pinned is not freed: it goes on the
 * newest view's retired list, and when that view goes it moves to the next
 * older view that also pinned it, or is freed. So every allocation has one
 * owner at any time: the live table, or exactly one view's retired list;
 * slot arrays are freed by the last reference. All of this bookkeeping runs
 * on the owner thread; the reader thread only reads pinned arrays and
 * entries, which nobody writes.
 *
 * Reading a group is strict: the outer array header is parsed here so the
 * element count can be checked against the bytes present, and each element
 * is decoded with msgpack_unpack_next only after checking that it is not a
 * container - a garbage array/map header would otherwise make msgpack-c
 * allocate count * sizeof(msgpack_object) before noticing the data is short. */
#include "state/keyed_state.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/byteorder.h"
#include "common/prefault.h"
#include "state/keygroup.h"

#define KS_FORMAT_VERSION 1u /* msgpack, one bin per key and value: read only */
#define KS_FORMAT_BULK 2u    /* length-prefixed entries in one buffer: written */
#define KS_MIN_CAPACITY 8u
#define KS_FIB 0x9E3779B97F4A7C15ull

typedef struct ks_entry {
    uint32_t klen_slab; /* key length; KS_SLAB_BIT: the entry lives in a slab */
    uint32_t version;   /* the state's version when created or copied */
    unsigned char data[]; /* value (value_stride bytes), then the key */
} ks_entry_t;

/* A slab holds entries in one malloc: it starts with a count of the
 * entries still in use (plus one while it is a group's open slab), and each
 * slab entry is preceded by the byte offset from the slab's start, so an
 * entry can be given up on its own (removed, copied on write, retired to a
 * view) and the slab is freed with its last entry. Keys are therefore
 * shorter than 2 GiB (upsert refuses longer ones). An entry freed inside a
 * slab keeps its bytes until the whole slab goes, so a slab is small. */
#define KS_SLAB_BIT 0x80000000u
#define KS_KEY_MAX (KS_SLAB_BIT - 1u)

typedef struct ks_slab {
    size_t live; /* entries of this slab not yet freed (owner thread only) */
    size_t pad;  /* keeps the entries 16-byte aligned */
} ks_slab_t;

static inline uint32_t ks_klen(const ks_entry_t *e)
{
    return e->klen_slab & KS_KEY_MAX;
}

/* Frees one entry: free() for a malloc'd one, a slab's count for one of a
 * bulk load (the slab goes with its last entry). Owner thread only. */
static void ks_free_entry(ks_entry_t *e)
{
    if (!(e->klen_slab & KS_SLAB_BIT)) {
        free(e);
        return;
    }
    uint64_t back;
    memcpy(&back, (const char *)e - sizeof back, sizeof back);
    ks_slab_t *slab = (ks_slab_t *)(void *)((char *)e - back);
    if (--slab->live == 0)
        free(slab);
}

_Static_assert(offsetof(ks_entry_t, data) == 8, "value must sit at offset 8");

typedef struct ks_slot {
    uint64_t hash;
    ks_entry_t *entry; /* NULL: empty slot */
} ks_slot_t;

#define KS_OPEN_SLAB_BYTES 16384u

typedef struct ks_group {
    ks_slot_t *slots;
    ks_slab_t *open;  /* where new entries are bump-allocated (held: +1 live) */
    size_t open_used;
    size_t cap;       /* 0 or a power of two */
    size_t count;
    size_t key_bytes; /* sum of the keys' lengths: sizes a serialised group up front */
    unsigned shift;   /* 64 - log2(cap) */
} ks_group_t;

struct eddy_keyed_state {
    uint32_t max_key_groups;
    size_t value_size;
    size_t value_stride;  /* value_size rounded up to 8 */
    size_t keys;
    size_t entry_bytes;   /* sum of malloc'd entry sizes */
    size_t slot_bytes;    /* sum of slot array sizes */
    ks_group_t *groups;
    uint8_t *changed;     /* [max_key_groups]: written since take_changed (see the header) */
    uint32_t version;     /* stamp of entries created or copied now */
    eddy_keyed_state_view_t *oldest, *newest; /* live views, by age */
    /* Groups given up by drop_group_later whose entries are not freed yet:
     * each a slot array, freed from slot `next` on by eddy_keyed_state_reap. */
    struct ks_grave { ks_slot_t *slots; size_t cap, next; } *graves;
    size_t n_graves, graves_cap, grave_entries;
};

/* A frozen view: a reference on every group's slot array as it was, and the
 * entries the state gave up while this view was its newest (see the top). */
struct eddy_keyed_state_view {
    eddy_keyed_state_t *state;            /* NULL once the state is destroyed */
    eddy_keyed_state_view_t *older, *newer;
    uint32_t version;                     /* entries with version <= it may be here */
    uint32_t max_key_groups;
    size_t value_size, value_stride;
    size_t keys;
    ks_group_t *groups;                   /* pinned copies of the group headers */
    ks_entry_t **retired;                 /* capacity: keys (each entry once) */
    size_t n_retired;
};

/* Slot arrays carry a reference count in front (owner thread only): the
 * live group holds one, each view that pinned the array one more. */
typedef struct ks_slots_hdr {
    size_t refs;
    size_t pad; /* keeps the slots 16-byte aligned */
} ks_slots_hdr_t;

static ks_slot_t *ks_slots_new(size_t cap)
{
    if (cap > (SIZE_MAX - sizeof(ks_slots_hdr_t)) / sizeof(ks_slot_t))
        return NULL;
    ks_slots_hdr_t *h = calloc(1, sizeof *h + cap * sizeof(ks_slot_t));
    if (!h)
        return NULL;
    eddy_prefault(h, sizeof *h + cap * sizeof(ks_slot_t)); /* filled at random next */
    h->refs = 1;
    return (ks_slot_t *)(h + 1);
}

static inline ks_slots_hdr_t *ks_slots_hdr(ks_slot_t *slots)
{
    return (ks_slots_hdr_t *)slots - 1;
}

static void ks_slots_unref(ks_slot_t *slots)
{
    if (slots && --ks_slots_hdr(slots)->refs == 0)
        free(ks_slots_hdr(slots));
}

static inline size_t ks_home(uint64_t hash, unsigned shift)
{
    return (size_t)((hash * KS_FIB) >> shift);
}

static inline unsigned char *ks_value(ks_entry_t *e)
{
    return e->data;
}

static inline unsigned char *ks_key(const eddy_keyed_state_t *self, ks_entry_t *e)
{
    return e->data + self->value_stride;
}

static inline size_t ks_entry_size(const eddy_keyed_state_t *self, uint32_t key_len)
{
    return sizeof(ks_entry_t) + self->value_stride + key_len;
}

/* Bytes an entry with a key of key_len takes in a slab: its offset from
 * the slab (8), the header and value, the key rounded up to 8 so the next
 * entry stays aligned. */
static inline size_t ks_slab_entry_size(const eddy_keyed_state_t *self, uint32_t key_len)
{
    return sizeof(uint64_t) + sizeof(ks_entry_t) + self->value_stride +
           (((size_t)key_len + 7u) & ~(size_t)7);
}

/* Places an entry with a key of key_len at `at` inside slab (preceded by
 * its offset from the slab, which ks_free_entry reads back) and counts it
 * live. The caller fills the rest and moves past ks_slab_entry_size. */
static ks_entry_t *ks_slab_place(ks_slab_t *slab, unsigned char *at, uint32_t key_len)
{
    uint64_t back = (uint64_t)(at + sizeof back - (unsigned char *)slab);
    memcpy(at, &back, sizeof back);
    ks_entry_t *e = (ks_entry_t *)(void *)(at + sizeof back);
    e->klen_slab = key_len | KS_SLAB_BIT;
    slab->live++;
    return e;
}

/* Lets go of g's open slab (freed if no entry of it is live). */
static void ks_close_open_slab(ks_group_t *g)
{
    if (g->open && --g->open->live == 0)
        free(g->open);
    g->open = NULL;
    g->open_used = 0;
}

/* Room for one entry of group g with a key of key_len, its klen_slab set.
 * NULL when out of memory. */
static ks_entry_t *ks_alloc_entry(const eddy_keyed_state_t *self, ks_group_t *g, uint32_t key_len)
{
    size_t need = ks_slab_entry_size(self, key_len);
    if (need > KS_OPEN_SLAB_BYTES / 4) {
        ks_entry_t *e = malloc(ks_entry_size(self, key_len));
        if (e)
            e->klen_slab = key_len;
        return e;
    }
    if (!g->open || g->open_used + need > KS_OPEN_SLAB_BYTES) {
        ks_slab_t *slab = malloc(sizeof(ks_slab_t) + KS_OPEN_SLAB_BYTES);
        if (!slab)
            return NULL;
        slab->live = 1; /* the group's hold while it is open */
        ks_close_open_slab(g);
        g->open = slab;
    }
    ks_entry_t *e = ks_slab_place(g->open, (unsigned char *)(g->open + 1) + g->open_used, key_len);
    g->open_used += need;
    return e;
}

static inline bool ks_key_eq(const eddy_keyed_state_t *self, ks_entry_t *e, const void *key,
                             uint32_t key_len)
{
    return ks_klen(e) == key_len && (key_len == 0 || memcmp(ks_key(self, e), key, key_len) == 0);
}

/* Index of the slot holding key, or SIZE_MAX. */
static inline size_t ks_find(const eddy_keyed_state_t *self, const ks_group_t *g, uint64_t hash,
                             const void *key, uint32_t key_len)
{
    if (g->cap == 0)
        return SIZE_MAX;
    size_t mask = g->cap - 1;
    for (size_t i = ks_home(hash, g->shift);; i = (i + 1) & mask) {
        const ks_slot_t *s = &g->slots[i];
        if (!s->entry)
            return SIZE_MAX;
        if (s->hash == hash && ks_key_eq(self, s->entry, key, key_len))
            return i;
    }
}

static unsigned ks_log2(size_t cap)
{
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap)
        bits++;
    return bits;
}

/* Rehashes group g into a table of new_cap slots (a power of two that keeps
 * the load at or under 3/4). Returns -1 on allocation failure, g unchanged. */
static int ks_rehash(eddy_keyed_state_t *self, ks_group_t *g, size_t new_cap)
{
    ks_slot_t *slots = ks_slots_new(new_cap);
    if (!slots)
        return -1;
    unsigned shift = 64 - ks_log2(new_cap);
    size_t mask = new_cap - 1;
    for (size_t i = 0; i < g->cap; i++) {
        ks_slot_t s = g->slots[i];
        if (!s.entry)
            continue;
        size_t j = ks_home(s.hash, shift);
        while (slots[j].entry)
            j = (j + 1) & mask;
        slots[j] = s;
    }
    ks_slots_unref(g->slots); /* a view may still read the old array */
    self->slot_bytes -= g->cap * sizeof(ks_slot_t);
    self->slot_bytes += new_cap * sizeof(ks_slot_t);
    g->slots = slots;
    g->cap = new_cap;
    g->shift = shift;
    return 0;
}

static inline bool ks_fits(size_t cap, size_t count)
{
    return count <= cap - cap / 4;
}

/* Makes room for `count` entries in g without further growth. */
static int ks_reserve(eddy_keyed_state_t *self, ks_group_t *g, size_t count)
{
    if (g->cap && ks_fits(g->cap, count))
        return 0;
    size_t cap = g->cap ? g->cap : KS_MIN_CAPACITY;
    while (!ks_fits(cap, count)) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    return ks_rehash(self, g, cap);
}

/* --- copy-on-write ------------------------------------------------------- */

/* Whether a live view may reference e: it existed when the newest view was
 * taken (entries never re-enter the table, so it was pinned then). */
static inline bool ks_entry_shared(const eddy_keyed_state_t *self, const ks_entry_t *e)
{
    return self->newest && e->version <= self->newest->version;
}

/* Gives up e: freed, or handed to the newest view when a view still reads
 * it. Never fails: a view's retired array holds every entry it pinned. */
static void ks_release_entry(eddy_keyed_state_t *self, ks_entry_t *e)
{
    if (ks_entry_shared(self, e))
        self->newest->retired[self->newest->n_retired++] = e;
    else
        ks_free_entry(e);
}

/* Makes g's slot array private before the live side writes into it: a
 * pinned array is copied once (memcpy), later writes go to the copy. */
static int ks_own_slots(eddy_keyed_state_t *self, ks_group_t *g)
{
    (void)self;
    if (!g->slots || ks_slots_hdr(g->slots)->refs == 1)
        return 0;
    ks_slot_t *copy = ks_slots_new(g->cap);
    if (!copy)
        return -1;
    memcpy(copy, g->slots, g->cap * sizeof *copy);
    ks_slots_unref(g->slots);
    g->slots = copy;
    return 0;
}

/* The entry at slot i, made private before the caller may write its value:
 * a shared entry is copied (once per view) and the original retired. NULL
 * when out of memory. */
static ks_entry_t *ks_own_entry(eddy_keyed_state_t *self, ks_group_t *g, size_t i)
{
    ks_entry_t *e = g->slots[i].entry;
    if (!ks_entry_shared(self, e))
        return e;
    if (ks_own_slots(self, g) != 0)
        return NULL;
    ks_entry_t *copy = ks_alloc_entry(self, g, ks_klen(e));
    if (!copy)
        return NULL;
    memcpy(copy->data, e->data, self->value_stride + ks_klen(e));
    copy->version = self->version;
    g->slots[i].entry = copy;
    ks_release_entry(self, e);
    return copy;
}

eddy_keyed_state_t *eddy_keyed_state_new(uint32_t max_key_groups, size_t value_size)
{
    if (max_key_groups == 0 || max_key_groups > EDDY_MAX_KEY_GROUPS || value_size > UINT32_MAX)
        return NULL;
    eddy_keyed_state_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->groups = calloc(max_key_groups, sizeof *self->groups);
    self->changed = calloc(max_key_groups, 1);
    if (!self->groups || !self->changed) {
        free(self->groups);
        free(self->changed);
        free(self);
        return NULL;
    }
    self->max_key_groups = max_key_groups;
    self->value_size = value_size;
    self->value_stride = (value_size + 7) & ~(size_t)7;
    self->version = 1;
    return self;
}

void eddy_keyed_state_destroy(eddy_keyed_state_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_keyed_state_t *self = *self_p;
    /* Shared entries go to the newest view; the views outlive the state. */
    for (uint32_t kg = 0; kg < self->max_key_groups; kg++)
        eddy_keyed_state_drop_group(self, kg);
    eddy_keyed_state_reap(self, SIZE_MAX);
    free(self->graves);
    for (eddy_keyed_state_view_t *v = self->oldest; v; v = v->newer)
        v->state = NULL;
    free(self->groups);
    free(self->changed);
    free(self);
    *self_p = NULL;
}

void *eddy_keyed_state_upsert(eddy_keyed_state_t *self, uint32_t kg, uint64_t hash,
                              const void *key, uint32_t key_len, bool *created)
{
    if (created)
        *created = false;
    if (kg >= self->max_key_groups || key_len > KS_KEY_MAX)
        return NULL;
    self->changed[kg] = 1; /* the caller writes the value */
    ks_group_t *g = &self->groups[kg];
    size_t i = ks_find(self, g, hash, key, key_len);
    if (i != SIZE_MAX) {
        ks_entry_t *e = ks_own_entry(self, g, i);
        return e ? ks_value(e) : NULL;
    }

    if (ks_reserve(self, g, g->count + 1) != 0 || ks_own_slots(self, g) != 0)
        return NULL;
    size_t size = ks_entry_size(self, key_len);
    ks_entry_t *e = ks_alloc_entry(self, g, key_len);
    if (!e)
        return NULL;
    e->version = self->version;
    memset(ks_value(e), 0, self->value_stride);
    if (key_len)
        memcpy(ks_key(self, e), key, key_len);

    size_t mask = g->cap - 1;
    i = ks_home(hash, g->shift);
    while (g->slots[i].entry)
        i = (i + 1) & mask;
    g->slots[i].hash = hash;
    g->slots[i].entry = e;
    g->count++;
    g->key_bytes += key_len;
    self->keys++;
    self->entry_bytes += size;
    if (created)
        *created = true;
    return ks_value(e);
}

void *eddy_keyed_state_get(eddy_keyed_state_t *self, uint32_t kg, uint64_t hash,
                           const void *key, uint32_t key_len)
{
    if (kg >= self->max_key_groups)
        return NULL;
    ks_group_t *g = &self->groups[kg];
    size_t i = ks_find(self, g, hash, key, key_len);
    if (i == SIZE_MAX)
        return NULL;
    self->changed[kg] = 1;
    ks_entry_t *e = ks_own_entry(self, g, i); /* the caller may write the value */
    return e ? ks_value(e) : NULL;
}

bool eddy_keyed_state_remove(eddy_keyed_state_t *self, uint32_t kg, uint64_t hash,
                             const void *key, uint32_t key_len)
{
    if (kg >= self->max_key_groups)
        return false;
    ks_group_t *g = &self->groups[kg];
    size_t i = ks_find(self, g, hash, key, key_len);
    if (i == SIZE_MAX || ks_own_slots(self, g) != 0)
        return false;
    self->changed[kg] = 1;
    ks_entry_t *e = g->slots[i].entry;
    self->entry_bytes -= ks_entry_size(self, ks_klen(e));
    g->key_bytes -= ks_klen(e);
    ks_release_entry(self, e);

    /* Backward-shift: pull later members of the probe run into the hole
     * when their home slot is not cyclically after the hole. */
    size_t mask = g->cap - 1;
    for (size_t j = (i + 1) & mask; g->slots[j].entry; j = (j + 1) & mask) {
        size_t home = ks_home(g->slots[j].hash, g->shift);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            g->slots[i] = g->slots[j];
            i = j;
        }
    }
    g->slots[i].entry = NULL;
    g->slots[i].hash = 0;
    g->count--;
    self->keys--;
    return true;
}

int eddy_keyed_state_foreach(eddy_keyed_state_t *self, uint32_t kg,
                             eddy_keyed_state_visit_fn visit, void *ctx)
{
    if (kg >= self->max_key_groups)
        return 0;
    ks_group_t *g = &self->groups[kg];
    if (g->count)
        self->changed[kg] = 1; /* visit may write values */
    for (size_t i = 0; i < g->cap; i++) {
        if (!g->slots[i].entry)
            continue;
        ks_entry_t *e = ks_own_entry(self, g, i); /* visit may write the value */
        if (!e)
            return -1;
        visit(ctx, ks_key(self, e), ks_klen(e), ks_value(e));
    }
    return 0;
}

void eddy_keyed_state_drop_group(eddy_keyed_state_t *self, uint32_t kg)
{
    if (kg >= self->max_key_groups)
        return;
    self->changed[kg] = 1;
    ks_group_t *g = &self->groups[kg];
    for (size_t i = 0; i < g->cap; i++) {
        ks_entry_t *e = g->slots[i].entry;
        if (e) {
            self->entry_bytes -= ks_entry_size(self, ks_klen(e));
            ks_release_entry(self, e);
        }
    }
    ks_slots_unref(g->slots);
    ks_close_open_slab(g);
    self->slot_bytes -= g->cap * sizeof(ks_slot_t);
    self->keys -= g->count;
    memset(g, 0, sizeof *g);
}

void eddy_keyed_state_drop_group_later(eddy_keyed_state_t *self, uint32_t kg)
{
    if (kg >= self->max_key_groups)
        return;
    self->changed[kg] = 1;
    ks_group_t *g = &self->groups[kg];
    /* A live view may hold these entries: they must be retired to it, one
     * by one, now. With none, no view can ever see them (a view taken
     * later finds the group empty), so they can be freed at leisure. */
    if (self->newest || !g->count) {
        eddy_keyed_state_drop_group(self, kg);
        return;
    }
    if (self->n_graves == self->graves_cap) {
        size_t cap = self->graves_cap ? 2 * self->graves_cap : 8;
        struct ks_grave *grown = realloc(self->graves, cap * sizeof *grown);
        if (!grown) {
            eddy_keyed_state_drop_group(self, kg);
            return;
        }
        self->graves = grown;
        self->graves_cap = cap;
    }
    self->graves[self->n_graves++] = (struct ks_grave){g->slots, g->cap, 0};
    ks_close_open_slab(g); /* its entries keep it until they are reaped */
    self->grave_entries += g->count;
    self->entry_bytes -= g->count * (sizeof(ks_entry_t) + self->value_stride) + g->key_bytes;
    self->slot_bytes -= g->cap * sizeof(ks_slot_t);
    self->keys -= g->count;
    memset(g, 0, sizeof *g);
}

bool eddy_keyed_state_take_changed(eddy_keyed_state_t *self, uint32_t kg)
{
    if (kg >= self->max_key_groups)
        return false;
    bool changed = self->changed[kg];
    self->changed[kg] = 0;
    return changed;
}

size_t eddy_keyed_state_reap(eddy_keyed_state_t *self, size_t max_entries)
{
    size_t freed = 0;
    while (self->n_graves && freed < max_entries) {
        struct ks_grave *gr = &self->graves[self->n_graves - 1];
        for (; gr->next < gr->cap && freed < max_entries; gr->next++) {
            ks_entry_t *e = gr->slots[gr->next].entry;
            if (e) {
                ks_free_entry(e);
                freed++;
            }
        }
        if (gr->next == gr->cap) {
            ks_slots_unref(gr->slots);
            self->n_graves--;
        }
    }
    self->grave_entries -= freed < self->grave_entries ? freed : self->grave_entries;
    if (!self->n_graves)
        self->grave_entries = 0;
    return self->grave_entries;
}

size_t eddy_keyed_state_reap_pending(const eddy_keyed_state_t *self)
{
    return self->n_graves ? (self->grave_entries ? self->grave_entries : 1) : 0;
}

size_t eddy_keyed_state_group_keys(const eddy_keyed_state_t *self, uint32_t kg)
{
    return kg < self->max_key_groups ? self->groups[kg].count : 0;
}

size_t eddy_keyed_state_keys(const eddy_keyed_state_t *self)
{
    return self->keys;
}

size_t eddy_keyed_state_bytes(const eddy_keyed_state_t *self)
{
    /* 8 bytes per entry: its offset from its slab (ks_slab_entry_size). */
    return sizeof *self + (size_t)self->max_key_groups * sizeof(ks_group_t) + self->slot_bytes +
           self->entry_bytes + self->keys * 8;
}

size_t eddy_keyed_state_value_size(const eddy_keyed_state_t *self)
{
    return self->value_size;
}

/* --- the bulk format (version 2) ---------------------------------------- */

#define KS_V2_HEADER 40u
#define KS_V2_TRAILER 8u
/* Slots ahead whose entry is prefetched while a table is walked: entries are
 * separate allocations in hash order, so each one is a likely cache miss. */
#define KS_PREFETCH 8u

/* LEB128: a key length in 1 byte below 128, at most 5. */
static inline unsigned char *ks_put_varint(unsigned char *p, uint32_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* Serialises one group's table: the live one or a view's pinned copy,
 * walked in slot order, so both give the same bytes for the same table.
 * One buffer of an exact upper bound (the group keeps its key bytes' sum),
 * filled in one pass: no allocation per entry, no msgpack call per field. */
static int ks_write_table(const ks_group_t *g, uint32_t kg, size_t value_size,
                          size_t value_stride, char **out, size_t *out_len, eddy_err_t *err)
{
    size_t n = g->count;
    size_t fixed = KS_V2_HEADER + KS_V2_TRAILER;
    if (g->key_bytes > SIZE_MAX - fixed || (n && (SIZE_MAX - fixed - g->key_bytes) / n < 5 + value_size))
        return eddy_err_set(err, "keyed state: key group %u is too large to serialise", kg);
    size_t cap = fixed + n * (5 + value_size) + g->key_bytes;
    unsigned char *buf = malloc(cap);
    if (!buf)
        return eddy_err_set(err, "keyed state: out of memory serialising key group %u", kg);
    eddy_prefault(buf, cap);
    unsigned char *p = buf + KS_V2_HEADER;
    size_t seen = 0, key_bytes = 0;
    for (size_t i = 0; i < g->cap; i++) {
        if (i + KS_PREFETCH < g->cap)
            __builtin_prefetch(g->slots[i + KS_PREFETCH].entry);
        const ks_entry_t *e = g->slots[i].entry;
        if (!e)
            continue;
        uint32_t kl = ks_klen(e);
        p = ks_put_varint(p, kl);
        memcpy(p, e->data, value_size);
        p += value_size;
        memcpy(p, e->data + value_stride, kl);
        p += kl;
        seen++;
        key_bytes += kl;
    }
    if (seen != n || key_bytes != g->key_bytes) { /* the table's own counts disagree: a bug */
        free(buf);
        return eddy_err_set(err, "keyed state: key group %u: %zu entries of %zu bytes in the table, "
                            "%zu of %zu counted", kg, seen, key_bytes, n, g->key_bytes);
    }
    memcpy(buf, "EKS", 3);
    buf[3] = KS_FORMAT_BULK;
    eddy_put_le32(buf + 4, kg);
    eddy_put_le32(buf + 8, (uint32_t)value_size);
    eddy_put_le32(buf + 12, 0); /* flags: none yet */
    eddy_put_le64(buf + 16, n);
    eddy_put_le64(buf + 24, key_bytes);
    eddy_put_le64(buf + 32, (uint64_t)(p - buf - KS_V2_HEADER));
    eddy_put_le64(p, XXH64(buf, (size_t)(p - buf), 0));
    p += KS_V2_TRAILER;
    *out = (char *)buf;
    *out_len = (size_t)(p - buf);
    return 0;
}

int eddy_keyed_state_write_group(const eddy_keyed_state_t *self, uint32_t kg, char **out,
                                 size_t *out_len, eddy_err_t *err)
{
    if (!self || !out || !out_len)
        return eddy_err_set(err, "keyed state: write_group called with a NULL argument");
    if (kg >= self->max_key_groups)
        return eddy_err_set(err, "keyed state: key group %u out of range (K = %u)", kg,
                            self->max_key_groups);
    return ks_write_table(&self->groups[kg], kg, self->value_size, self->value_stride, out,
                          out_len, err);
}

/* --- views ---------------------------------------------------------------- */

eddy_keyed_state_view_t *eddy_keyed_state_view_new(eddy_keyed_state_t *self)
{
    if (!self || self->version == UINT32_MAX)
        return NULL;
    eddy_keyed_state_view_t *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->groups = malloc((size_t)self->max_key_groups * sizeof *v->groups);
    /* Large and untouched until entries retire: the kernel maps it lazily. */
    v->retired = self->keys ? malloc(self->keys * sizeof *v->retired) : NULL;
    if (!v->groups || (self->keys && !v->retired)) {
        free(v->groups);
        free(v->retired);
        free(v);
        return NULL;
    }
    memcpy(v->groups, self->groups, (size_t)self->max_key_groups * sizeof *v->groups);
    for (uint32_t kg = 0; kg < self->max_key_groups; kg++)
        if (v->groups[kg].slots)
            ks_slots_hdr(v->groups[kg].slots)->refs++;
    v->state = self;
    v->version = self->version++;
    v->max_key_groups = self->max_key_groups;
    v->value_size = self->value_size;
    v->value_stride = self->value_stride;
    v->keys = self->keys;
    v->older = self->newest;
    if (self->newest)
        self->newest->newer = v;
    else
        self->oldest = v;
    self->newest = v;
    return v;
}

void eddy_keyed_state_view_destroy(eddy_keyed_state_view_t **view_p)
{
    if (!view_p || !*view_p)
        return;
    eddy_keyed_state_view_t *v = *view_p;
    /* A retired entry that the next older view also pinned moves there;
     * no newer view can hold it (it had left the table before they came). */
    eddy_keyed_state_view_t *older = v->older;
    for (size_t i = 0; i < v->n_retired; i++) {
        ks_entry_t *e = v->retired[i];
        if (older && e->version <= older->version)
            older->retired[older->n_retired++] = e;
        else
            ks_free_entry(e);
    }
    for (uint32_t kg = 0; kg < v->max_key_groups; kg++)
        ks_slots_unref(v->groups[kg].slots);
    if (v->older)
        v->older->newer = v->newer;
    else if (v->state)
        v->state->oldest = v->newer;
    if (v->newer)
        v->newer->older = v->older;
    else if (v->state)
        v->state->newest = v->older;
    free(v->retired);
    free(v->groups);
    free(v);
    *view_p = NULL;
}

int eddy_keyed_state_view_write_group(const eddy_keyed_state_view_t *view, uint32_t kg,
                                      char **out, size_t *out_len, eddy_err_t *err)
{
    if (!view || !out || !out_len)
        return eddy_err_set(err, "keyed state: view write_group called with a NULL argument");
    if (kg >= view->max_key_groups)
        return eddy_err_set(err, "keyed state: key group %u out of range (K = %u)", kg,
                            view->max_key_groups);
    return ks_write_table(&view->groups[kg], kg, view->value_size, view->value_stride, out,
                          out_len, err);
}

size_t eddy_keyed_state_view_keys(const eddy_keyed_state_view_t *view)
{
    return view->keys;
}

size_t eddy_keyed_state_view_group_keys(const eddy_keyed_state_view_t *view, uint32_t kg)
{
    return kg < view->max_key_groups ? view->groups[kg].count : 0;
}

size_t eddy_keyed_state_view_retired(const eddy_keyed_state_view_t *view)
{
    return view->n_retired;
}

/* --- reading ------------------------------------------------------------ */

typedef struct ks_reader {
    const char *data;
    size_t len;
    size_t off;
    uint32_t kg;
    msgpack_unpacked u;
    eddy_err_t *err;
} ks_reader_t;

static int ks_fail(ks_reader_t *r, const char *what)
{
    return eddy_err_set(r->err, "keyed state: key group %u: %s (at byte %zu of %zu)", r->kg, what,
                        r->off, r->len);
}

/* Decodes the next scalar element into r->u.data. Containers are refused
 * before msgpack sees them (see the file comment). */
static int ks_next(ks_reader_t *r, const char *what)
{
    char msg[160];
    if (r->off >= r->len) {
        snprintf(msg, sizeof msg, "truncated before %s", what);
        return ks_fail(r, msg);
    }
    unsigned char b = (unsigned char)r->data[r->off];
    if ((b >= 0x80 && b <= 0x9f) || (b >= 0xdc && b <= 0xdf)) {
        snprintf(msg, sizeof msg, "expected %s, found a msgpack array or map", what);
        return ks_fail(r, msg);
    }
    size_t off = r->off;
    msgpack_unpack_return ret = msgpack_unpack_next(&r->u, r->data, r->len, &off);
    if (ret == MSGPACK_UNPACK_CONTINUE) {
        snprintf(msg, sizeof msg, "truncated inside %s", what);
        return ks_fail(r, msg);
    }
    if (ret != MSGPACK_UNPACK_SUCCESS && ret != MSGPACK_UNPACK_EXTRA_BYTES) {
        snprintf(msg, sizeof msg, "%s while decoding %s",
                 ret == MSGPACK_UNPACK_NOMEM_ERROR ? "out of memory" : "invalid msgpack", what);
        return ks_fail(r, msg);
    }
    r->off = off;
    return 0;
}

static int ks_next_uint(ks_reader_t *r, const char *what, uint64_t *v)
{
    size_t at = r->off;
    if (ks_next(r, what) != 0)
        return -1;
    if (r->u.data.type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        char msg[160];
        r->off = at;
        snprintf(msg, sizeof msg, "%s is not an unsigned integer (msgpack type %d)", what,
                 (int)r->u.data.type);
        return ks_fail(r, msg);
    }
    *v = r->u.data.via.u64;
    return 0;
}

static int ks_next_bin(ks_reader_t *r, const char *what, const char **ptr, uint32_t *size)
{
    size_t at = r->off;
    if (ks_next(r, what) != 0)
        return -1;
    if (r->u.data.type != MSGPACK_OBJECT_BIN) {
        char msg[160];
        r->off = at;
        snprintf(msg, sizeof msg, "%s is not msgpack bin (msgpack type %d)", what,
                 (int)r->u.data.type);
        return ks_fail(r, msg);
    }
    *ptr = r->u.data.via.bin.ptr;
    *size = r->u.data.via.bin.size;
    return 0;
}

/* Parses the outer array header by hand; returns its element count. */
static int ks_array_header(ks_reader_t *r, uint64_t *count)
{
    const unsigned char *p = (const unsigned char *)r->data;
    if (r->len == 0)
        return ks_fail(r, "empty buffer");
    unsigned char b = p[0];
    if (b >= 0x90 && b <= 0x9f) {
        *count = b & 0x0f;
        r->off = 1;
    } else if (b == 0xdc) {
        if (r->len < 3)
            return ks_fail(r, "truncated array header");
        *count = ((uint64_t)p[1] << 8) | p[2];
        r->off = 3;
    } else if (b == 0xdd) {
        if (r->len < 5)
            return ks_fail(r, "truncated array header");
        *count = ((uint64_t)p[1] << 24) | ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 8) | p[4];
        r->off = 5;
    } else {
        return ks_fail(r, "not a msgpack array");
    }
    return 0;
}

static int ks_read(eddy_keyed_state_t *self, ks_reader_t *r)
{
    char msg[200];
    uint64_t count = 0, version = 0, kg = 0, value_size = 0, n = 0;
    if (ks_array_header(r, &count) != 0)
        return -1;
    if (count < 4 || (count - 4) % 2 != 0) {
        snprintf(msg, sizeof msg, "array has %llu elements, expected 4 + 2n",
                 (unsigned long long)count);
        return ks_fail(r, msg);
    }
    if (ks_next_uint(r, "version", &version) != 0)
        return -1;
    if (version != KS_FORMAT_VERSION) {
        snprintf(msg, sizeof msg, "unsupported format version %llu (expected %u)",
                 (unsigned long long)version, KS_FORMAT_VERSION);
        return ks_fail(r, msg);
    }
    if (ks_next_uint(r, "key group", &kg) != 0)
        return -1;
    if (kg != r->kg) {
        snprintf(msg, sizeof msg, "data is for key group %llu", (unsigned long long)kg);
        return ks_fail(r, msg);
    }
    if (ks_next_uint(r, "value size", &value_size) != 0)
        return -1;
    if (value_size != self->value_size) {
        snprintf(msg, sizeof msg, "value size is %llu, this state uses %zu",
                 (unsigned long long)value_size, self->value_size);
        return ks_fail(r, msg);
    }
    if (ks_next_uint(r, "entry count", &n) != 0)
        return -1;
    if (n != (count - 4) / 2) {
        snprintf(msg, sizeof msg, "entry count %llu does not match the array length %llu",
                 (unsigned long long)n, (unsigned long long)count);
        return ks_fail(r, msg);
    }
    /* Smallest entry: bin8 key header (2) + bin8 value header (2) + value. */
    if (n > (r->len - r->off) / (4 + self->value_size)) {
        snprintf(msg, sizeof msg, "truncated: %llu entries cannot fit in the remaining bytes",
                 (unsigned long long)n);
        return ks_fail(r, msg);
    }
    ks_group_t *g = &self->groups[r->kg];
    if (ks_reserve(self, g, (size_t)n) != 0)
        return ks_fail(r, "out of memory");

    for (uint64_t i = 0; i < n; i++) {
        const char *key = NULL, *value = NULL;
        uint32_t key_len = 0, value_len = 0;
        if (ks_next_bin(r, "key", &key, &key_len) != 0)
            return -1;
        size_t key_at = r->off;
        if (ks_next_bin(r, "value", &value, &value_len) != 0)
            return -1;
        if (value_len != self->value_size) {
            snprintf(msg, sizeof msg, "value %llu has %u bytes, expected %zu",
                     (unsigned long long)i, value_len, self->value_size);
            return ks_fail(r, msg);
        }
        bool created;
        void *slot = eddy_keyed_state_upsert(self, r->kg, eddy_key_hash(key, key_len), key,
                                             key_len, &created);
        if (!slot)
            return ks_fail(r, "out of memory");
        if (!created) {
            r->off = key_at;
            snprintf(msg, sizeof msg, "duplicate key (entry %llu)", (unsigned long long)i);
            return ks_fail(r, msg);
        }
        if (value_len)
            memcpy(slot, value, value_len);
    }
    if (r->off != r->len) {
        snprintf(msg, sizeof msg, "%zu trailing bytes after the last entry", r->len - r->off);
        return ks_fail(r, msg);
    }
    return 0;
}

/* The bulk format, read in bulk: every check that needs no state (sizes,
 * checksum, key group, value size) comes first, so a corrupt or truncated
 * buffer is refused before anything is allocated; then the table is sized
 * for all entries at once and the entries are laid out in one slab. A bad
 * entry after that (only possible with a matching checksum, i.e. a writer
 * bug or a forged buffer) fails the read; the caller drops the group. */
static int ks_read_v2(eddy_keyed_state_t *self, uint32_t kg, const unsigned char *p, size_t len,
                      eddy_err_t *err)
{
    if (len < KS_V2_HEADER + KS_V2_TRAILER)
        return eddy_err_set(err, "keyed state: key group %u: truncated: %zu bytes, a group has "
                            "at least %u", kg, len, KS_V2_HEADER + KS_V2_TRAILER);
    if (p[3] != KS_FORMAT_BULK)
        return eddy_err_set(err, "keyed state: key group %u: unsupported format version %u "
                            "(expected %u)", kg, p[3], KS_FORMAT_BULK);
    uint64_t body = eddy_get_le64(p + 32);
    if (body > len - KS_V2_HEADER - KS_V2_TRAILER)
        return eddy_err_set(err, "keyed state: key group %u: truncated: %zu bytes of %llu", kg,
                            len, (unsigned long long)body + KS_V2_HEADER + KS_V2_TRAILER);
    if (body < len - KS_V2_HEADER - KS_V2_TRAILER)
        return eddy_err_set(err, "keyed state: key group %u: %llu trailing bytes after the group",
                            kg, (unsigned long long)(len - KS_V2_HEADER - KS_V2_TRAILER - body));
    if (XXH64(p, len - KS_V2_TRAILER, 0) != eddy_get_le64(p + len - KS_V2_TRAILER))
        return eddy_err_set(err, "keyed state: key group %u: checksum mismatch (corrupt data)", kg);
    uint32_t data_kg = eddy_get_le32(p + 4), value_size = eddy_get_le32(p + 8), flags = eddy_get_le32(p + 12);
    uint64_t n = eddy_get_le64(p + 16), key_bytes = eddy_get_le64(p + 24);
    if (data_kg != kg)
        return eddy_err_set(err, "keyed state: key group %u: data is for key group %u", kg, data_kg);
    if (value_size != self->value_size)
        return eddy_err_set(err, "keyed state: key group %u: value size is %u, this state uses %zu",
                            kg, value_size, self->value_size);
    if (flags != 0)
        return eddy_err_set(err, "keyed state: key group %u: unknown flags 0x%x", kg, flags);
    /* Each entry takes at least a 1-byte length and its value. */
    if (key_bytes > body || n > (body - key_bytes) / (1 + (uint64_t)value_size))
        return eddy_err_set(err, "keyed state: key group %u: %llu entries of %llu key bytes cannot "
                            "fit in %llu bytes", kg, (unsigned long long)n,
                            (unsigned long long)key_bytes, (unsigned long long)body);
    if (n == 0)
        return 0;
    ks_group_t *g = &self->groups[kg];
    if (ks_reserve(self, g, (size_t)n) != 0)
        return eddy_err_set(err, "keyed state: key group %u: out of memory", kg);
    /* ks_slab_entry_size without the keys, which are added whole below
     * (each rounded up by at most 7). */
    size_t per = ks_slab_entry_size(self, 0) + 7;
    if ((SIZE_MAX - sizeof(ks_slab_t) - (size_t)key_bytes) / (size_t)n < per)
        return eddy_err_set(err, "keyed state: key group %u: too large to load", kg);
    ks_slab_t *slab = malloc(sizeof(ks_slab_t) + (size_t)n * per + (size_t)key_bytes);
    if (!slab)
        return eddy_err_set(err, "keyed state: key group %u: out of memory", kg);
    eddy_prefault(slab, sizeof(ks_slab_t) + (size_t)n * per + (size_t)key_bytes);
    slab->live = 0;
    unsigned char *at = (unsigned char *)(slab + 1);
    const unsigned char *q = p + KS_V2_HEADER, *end = q + body;
    size_t mask = g->cap - 1, sum = 0;
    const char *bad = NULL;
    for (uint64_t i = 0; i < n && !bad; i++) {
        uint32_t kl = 0;
        unsigned shift = 0;
        for (;;) {
            if (q == end || shift > 28) {
                bad = q == end ? "truncated inside a key length" : "key length too long";
                break;
            }
            unsigned char b = *q++;
            kl |= (uint32_t)(b & 0x7f) << shift;
            shift += 7;
            if (!(b & 0x80))
                break;
        }
        if (bad)
            break;
        if (kl > KS_KEY_MAX || (size_t)(end - q) < (size_t)value_size + kl) {
            bad = "an entry runs past the end of the group";
            break;
        }
        const unsigned char *value = q, *key = q + value_size;
        q += (size_t)value_size + kl;
        uint64_t hash = eddy_key_hash(key, kl);
        size_t j = ks_home(hash, g->shift);
        for (; g->slots[j].entry; j = (j + 1) & mask)
            if (g->slots[j].hash == hash && ks_key_eq(self, g->slots[j].entry, key, kl))
                break;
        if (g->slots[j].entry) {
            bad = "duplicate key";
            break;
        }
        ks_entry_t *e = ks_slab_place(slab, at, kl);
        e->version = self->version;
        memcpy(e->data, value, value_size);
        memset(e->data + value_size, 0, self->value_stride - value_size);
        memcpy(e->data + self->value_stride, key, kl);
        at += ks_slab_entry_size(self, kl);
        g->slots[j].hash = hash;
        g->slots[j].entry = e;
        g->count++;
        g->key_bytes += kl;
        self->keys++;
        self->entry_bytes += ks_entry_size(self, kl);
        sum += kl;
    }
    if (!bad && q != end)
        bad = "bytes left after the last entry";
    if (!bad && sum != key_bytes)
        bad = "key lengths do not add up to the header's";
    if (slab->live == 0)
        free(slab); /* else its entries, now in the table, free it (the caller drops them) */
    if (bad)
        return eddy_err_set(err, "keyed state: key group %u: %s (at byte %zu of %zu)", kg, bad,
                            (size_t)(q - p), len);
    return 0;
}

int eddy_keyed_state_read_group(eddy_keyed_state_t *self, uint32_t kg, const void *data,
                                size_t len, eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "keyed state: read_group called with a NULL state");
    if (kg >= self->max_key_groups)
        return eddy_err_set(err, "keyed state: key group %u out of range (K = %u)", kg,
                            self->max_key_groups);
    eddy_keyed_state_drop_group(self, kg);
    if (!data && len)
        return eddy_err_set(err, "keyed state: key group %u: NULL data", kg);
    int rc;
    if (data && len >= 4 && memcmp(data, "EKS", 3) == 0) {
        rc = ks_read_v2(self, kg, data, len, err);
    } else {
        /* Version 1 (msgpack), as snapshots written before the bulk format hold. */
        ks_reader_t r = {.data = data, .len = data ? len : 0, .off = 0, .kg = kg, .err = err};
        msgpack_unpacked_init(&r.u);
        rc = ks_read(self, &r);
        msgpack_unpacked_destroy(&r.u);
    }
    if (rc != 0)
        eddy_keyed_state_drop_group(self, kg);
    return rc;
}
