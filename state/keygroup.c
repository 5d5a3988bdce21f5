/* keygroup.c - key hashing and Flink's key-group range assignment (see keygroup.h). */
#include "state/keygroup.h"

#include <xxhash.h>

uint64_t eddy_key_hash(const void *key, size_t len)
{
    return XXH64(key, len, 0);
}

uint32_t eddy_key_group_of_hash(uint64_t hash, uint32_t max_parallelism)
{
    return (uint32_t)(hash % max_parallelism);
}

uint32_t eddy_key_group_of(const void *key, size_t len, uint32_t max_parallelism)
{
    return eddy_key_group_of_hash(eddy_key_hash(key, len), max_parallelism);
}

uint32_t eddy_kg_owner(uint32_t kg, uint32_t parallelism, uint32_t max_parallelism)
{
    return (uint32_t)((uint64_t)kg * parallelism / max_parallelism);
}

eddy_kg_range_t eddy_kg_range_for(uint32_t instance, uint32_t parallelism, uint32_t max_parallelism)
{
    uint64_t k = max_parallelism, p = parallelism;
    eddy_kg_range_t r;
    r.start = (uint32_t)((instance * k + p - 1) / p);
    r.end = (uint32_t)(((instance + 1) * k + p - 1) / p);
    return r;
}
