/* keygroup.h - key groups: the unit in which keyed state is owned and moved.
 *
 * Every key hashes (xxhash64, seed 0) to one of K = max_parallelism key
 * groups: kg = hash % K. Instance i of an operator with parallelism p owns
 * the contiguous range [start, end) with start = ceil(i*K/p) and
 * end = ceil((i+1)*K/p), i.e. kg belongs to floor(kg*p/K) - Flink's
 * KeyGroupRangeAssignment, so a rescale moves whole key groups, never keys. */
#ifndef EDDY_STATE_KEYGROUP_H
#define EDDY_STATE_KEYGROUP_H

#include <stddef.h>
#include <stdint.h>

#define EDDY_DEFAULT_MAX_PARALLELISM 128u
#define EDDY_MAX_KEY_GROUPS 32768u

typedef struct eddy_kg_range {
    uint32_t start; /* first key group owned */
    uint32_t end;   /* one past the last; start == end means none */
} eddy_kg_range_t;

uint64_t eddy_key_hash(const void *key, size_t len);
uint32_t eddy_key_group_of_hash(uint64_t hash, uint32_t max_parallelism);
uint32_t eddy_key_group_of(const void *key, size_t len, uint32_t max_parallelism);

/* Instance that owns key group kg at parallelism p (0 <= kg < K, 1 <= p <= K). */
uint32_t eddy_kg_owner(uint32_t kg, uint32_t parallelism, uint32_t max_parallelism);
eddy_kg_range_t eddy_kg_range_for(uint32_t instance, uint32_t parallelism, uint32_t max_parallelism);

static inline int eddy_kg_range_contains(eddy_kg_range_t r, uint32_t kg)
{
    return kg >= r.start && kg < r.end;
}

#endif
