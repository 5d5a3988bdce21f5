/* combiner_table.c - see combiner_table.h. Linear probing over a power-of-
 * two index at most 3/4 full; each entry remembers its index slot, so clear
 * zeroes exactly the slots in use (every entry goes at once, so no probe
 * chain is ever broken by a single removal). A lookup is bound by cache
 * misses (perf: a 50k-word vocabulary spends most of the combiner's time
 * there), so an index slot carries the upper half of its key's hash and a
 * probe touches an entry only when that matches, and keys of up to
 * INLINE_KEY bytes (most words) live in their entry, not the arena. */
#include "operators/combiner_table.h"

#include <stdlib.h>
#include <string.h>

#define MIN_INDEX 64u
#define INLINE_KEY 16u

typedef struct entry {
    uint64_t hash;
    int64_t acc;
    uint32_t key_len;
    uint32_t slot; /* its place in the index */
    union {
        char bytes[INLINE_KEY]; /* key_len <= INLINE_KEY */
        size_t off;             /* else: in the arena */
    } key;
} entry_t;

struct eddy_combiner_table {
    entry_t *entries; /* [n], insertion order */
    uint32_t n, entries_cap;
    uint64_t *index;  /* [index_cap]: 0 empty, else tag_of(hash) | (entry number + 1) */
    uint32_t index_cap;
    char *arena;
    size_t arena_len, arena_cap;
};

eddy_combiner_table_t *eddy_combiner_table_new(void)
{
    return calloc(1, sizeof(eddy_combiner_table_t));
}

void eddy_combiner_table_destroy(eddy_combiner_table_t **self_p)
{
    eddy_combiner_table_t *self = *self_p;
    if (!self)
        return;
    free(self->entries);
    free(self->index);
    free(self->arena);
    free(self);
    *self_p = NULL;
}

static uint64_t tag_of(uint64_t hash)
{
    return hash & 0xffffffff00000000ull;
}

static uint32_t entry_of(uint64_t slot)
{
    return (uint32_t)slot - 1;
}

static const char *key_of(const eddy_combiner_table_t *self, const entry_t *e)
{
    return e->key_len <= INLINE_KEY ? e->key.bytes : self->arena + e->key.off;
}

static bool same_key(const eddy_combiner_table_t *self, const entry_t *e, uint64_t hash,
                     const void *key, uint32_t key_len)
{
    return e->hash == hash && e->key_len == key_len &&
           (key_len == 0 || !memcmp(key_of(self, e), key, key_len));
}

static int grow_index(eddy_combiner_table_t *self)
{
    uint32_t cap = self->index_cap ? self->index_cap * 2 : MIN_INDEX;
    if (cap < self->index_cap)
        return -1;
    uint64_t *index = calloc(cap, sizeof *index);
    if (!index)
        return -1;
    for (uint32_t k = 0; k < self->n; k++) {
        uint32_t i = (uint32_t)self->entries[k].hash & (cap - 1);
        while (index[i])
            i = (i + 1) & (cap - 1);
        index[i] = tag_of(self->entries[k].hash) | (k + 1);
        self->entries[k].slot = i;
    }
    free(self->index);
    self->index = index;
    self->index_cap = cap;
    return 0;
}

static int reserve(eddy_combiner_table_t *self, uint32_t key_len)
{
    if ((uint64_t)(self->n + 1) * 4 > (uint64_t)self->index_cap * 3 && grow_index(self) < 0)
        return -1;
    if (self->n == self->entries_cap) {
        uint32_t cap = self->entries_cap ? self->entries_cap * 2 : MIN_INDEX;
        entry_t *e = cap > self->entries_cap ? realloc(self->entries, (size_t)cap * sizeof *e) : NULL;
        if (!e)
            return -1;
        self->entries = e;
        self->entries_cap = cap;
    }
    if (key_len > INLINE_KEY && (!self->arena || self->arena_len + key_len > self->arena_cap)) {
        size_t cap = self->arena_cap ? self->arena_cap : 4096;
        while (cap < self->arena_len + key_len)
            cap *= 2;
        char *a = realloc(self->arena, cap);
        if (!a)
            return -1;
        self->arena = a;
        self->arena_cap = cap;
    }
    return 0;
}

int64_t *eddy_combiner_table_upsert(eddy_combiner_table_t *self, uint64_t hash, const void *key,
                                    uint32_t key_len, bool *created)
{
    *created = false;
    uint32_t i = 0, probed_cap = self->index_cap;
    if (probed_cap) {
        uint64_t tag = tag_of(hash);
        for (i = (uint32_t)hash & (probed_cap - 1); self->index[i]; i = (i + 1) & (probed_cap - 1)) {
            if (tag_of(self->index[i]) != tag)
                continue;
            entry_t *e = &self->entries[entry_of(self->index[i])];
            if (same_key(self, e, hash, key, key_len))
                return &e->acc;
        }
    }
    if (reserve(self, key_len) < 0)
        return NULL;
    if (self->index_cap != probed_cap) { /* grown: i was a slot of the old index */
        i = (uint32_t)hash & (self->index_cap - 1);
        while (self->index[i])
            i = (i + 1) & (self->index_cap - 1);
    }
    entry_t *e = &self->entries[self->n];
    *e = (entry_t){.hash = hash, .key_len = key_len, .slot = i};
    if (key_len > INLINE_KEY) {
        e->key.off = self->arena_len;
        memcpy(self->arena + self->arena_len, key, key_len);
        self->arena_len += key_len;
    } else if (key_len) {
        memcpy(e->key.bytes, key, key_len);
    }
    self->index[i] = tag_of(hash) | ++self->n;
    *created = true;
    return &e->acc;
}

uint32_t eddy_combiner_table_count(const eddy_combiner_table_t *self)
{
    return self->n;
}

void eddy_combiner_table_foreach(const eddy_combiner_table_t *self,
                                 void (*fn)(void *ctx, const void *key, uint32_t key_len, int64_t acc),
                                 void *ctx)
{
    for (uint32_t k = 0; k < self->n; k++) {
        const entry_t *e = &self->entries[k];
        fn(ctx, key_of(self, e), e->key_len, e->acc);
    }
}

void eddy_combiner_table_clear(eddy_combiner_table_t *self)
{
    for (uint32_t k = 0; k < self->n; k++)
        self->index[self->entries[k].slot] = 0;
    self->n = 0;
    self->arena_len = 0;
}
