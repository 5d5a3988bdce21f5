/* combiner_table.c - see combiner_table.h. Linear probing over a power-of-
 * two index at most 3/4 full; each entry remembers its index slot, so clear
 * zeroes exactly the slots in use (every entry goes at once, so no probe
 * chain is ever broken by a single removal). */
#include "operators/combiner_table.h"

#include <stdlib.h>
#include <string.h>

#define MIN_INDEX 64u

typedef struct entry {
    uint64_t hash;
    size_t key_off; /* in the arena */
    uint32_t key_len;
    uint32_t slot;  /* its place in the index */
    int64_t acc;
} entry_t;

struct eddy_combiner_table {
    entry_t *entries; /* [n], insertion order */
    uint32_t n, entries_cap;
    uint32_t *index;  /* [index_cap]: 0 empty, else entry number + 1 */
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

static bool same_key(const eddy_combiner_table_t *self, const entry_t *e, uint64_t hash,
                     const void *key, uint32_t key_len)
{
    return e->hash == hash && e->key_len == key_len &&
           (key_len == 0 || !memcmp(self->arena + e->key_off, key, key_len));
}

static int grow_index(eddy_combiner_table_t *self)
{
    uint32_t cap = self->index_cap ? self->index_cap * 2 : MIN_INDEX;
    if (cap < self->index_cap)
        return -1;
    uint32_t *index = calloc(cap, sizeof *index);
    if (!index)
        return -1;
    for (uint32_t k = 0; k < self->n; k++) {
        uint32_t i = (uint32_t)self->entries[k].hash & (cap - 1);
        while (index[i])
            i = (i + 1) & (cap - 1);
        index[i] = k + 1;
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
    if (!self->arena || self->arena_len + key_len > self->arena_cap) {
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
        for (i = (uint32_t)hash & (probed_cap - 1); self->index[i]; i = (i + 1) & (probed_cap - 1)) {
            entry_t *e = &self->entries[self->index[i] - 1];
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
    *e = (entry_t){.hash = hash, .key_off = self->arena_len, .key_len = key_len, .slot = i};
    if (key_len)
        memcpy(self->arena + self->arena_len, key, key_len);
    self->arena_len += key_len;
    self->index[i] = ++self->n;
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
        fn(ctx, self->arena + e->key_off, e->key_len, e->acc);
    }
}

void eddy_combiner_table_clear(eddy_combiner_table_t *self)
{
    for (uint32_t k = 0; k < self->n; k++)
        self->index[self->entries[k].slot] = 0;
    self->n = 0;
    self->arena_len = 0;
}
