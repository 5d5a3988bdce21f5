/* combiner_table.h - a combiner's keys and their int64 accumulators since
 * its last flush.
 *
 * A combiner is emptied at every flush (each output batch, each
 * watermark), so what its table costs is mostly filling and emptying, not
 * looking up. This one keeps its memory across flushes: entries in an
 * array in insertion order, keys in one arena, an open-addressing index of
 * entry numbers; clear forgets the entries and zeroes only the index slots
 * they used, so a flush frees nothing and the next fill allocates nothing
 * until it outgrows the largest fill so far. Single-threaded; keys are
 * compared by hash, then length, then bytes. */
#ifndef EDDY_OPERATORS_COMBINER_TABLE_H
#define EDDY_OPERATORS_COMBINER_TABLE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct eddy_combiner_table eddy_combiner_table_t;

/* NULL when out of memory. */
eddy_combiner_table_t *eddy_combiner_table_new(void);
void eddy_combiner_table_destroy(eddy_combiner_table_t **self_p);

/* key's accumulator; a new key's is 0 and sets *created. NULL when out of
 * memory (the table is unchanged). The pointer is valid until the next
 * upsert or clear. */
int64_t *eddy_combiner_table_upsert(eddy_combiner_table_t *self, uint64_t hash, const void *key,
                                    uint32_t key_len, bool *created);
uint32_t eddy_combiner_table_count(const eddy_combiner_table_t *self);
/* fn for every key, in the order the keys were first upserted. */
void eddy_combiner_table_foreach(const eddy_combiner_table_t *self,
                                 void (*fn)(void *ctx, const void *key, uint32_t key_len, int64_t acc),
                                 void *ctx);
/* Forgets every key; keeps the memory. */
void eddy_combiner_table_clear(eddy_combiner_table_t *self);

#endif
