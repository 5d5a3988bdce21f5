/* keyed_state.h - the heap keyed-state backend of one operator instance.
 *
 * State is a map key -> fixed-size value (value_size bytes, e.g. an int64
 * count or an aggregate accumulator), partitioned by key group: one hash table
 * per key group, so a key group can be serialised, dropped or loaded on its
 * own when a rescale moves it. Keys are copied in; value pointers stay valid
 * until the next insert into the same key group, drop or destroy.
 *
 * Serialised form of one key group, version 2 (the bulk form, written since
 * issue 25): one buffer, little endian,
 *   0  "EKS", version byte 2     4  u32 kg        8  u32 value_size
 *   12 u32 flags (0)             16 u64 n entries 24 u64 key bytes (sum)
 *   32 u64 body length
 *   40 body: n entries, each LEB128 key length (1..5 bytes), the value
 *      (value_size bytes), the key
 *   40 + body: u64 XXH64 (seed 0) of every byte before it.
 * The writer knows the exact bound up front (each group keeps its key
 * bytes' sum) and fills the buffer in one pass. The reader checks lengths,
 * the checksum, kg and value size before it touches the state, then sizes
 * the group's table once and lays all entries out in one allocation (a
 * slab); a truncated or corrupt buffer, trailing bytes, an unknown version
 * or flags, a count that does not fit, key lengths that do not add up or a
 * duplicate key are errors that leave the group empty (never half-loaded).
 *
 * Version 1 (msgpack), what snapshots written before hold, is still read:
 * [version=1, kg, value_size, n, key0 (bin), value0 (bin), key1, value1, ...].
 * The reader bounds-checks all of it and rejects a group that names a
 * different kg or value size. Precisely: one msgpack array of exactly 4 + 2n
 * elements and nothing after it; version, kg, value_size and n are unsigned
 * integers (any width); every key and every value is a bin (bin8/16/32), each
 * value exactly value_size bytes; entries are in unspecified order and keys
 * are unique. The reader recomputes each key's hash with eddy_key_hash;
 * duplicate keys, other types, trailing bytes or a count that does not match
 * are errors. A buffer starting with "EKS" is version 2, anything else
 * version 1 (whose first byte is a msgpack array header). Keys are shorter
 * than 2 GiB.
 *
 * kg must be < K: with an out-of-range kg, upsert/get return NULL, remove
 * returns false, foreach/drop_group do nothing and write/read_group fail.
 *
 * Views (asynchronous snapshots): eddy_keyed_state_view_new freezes every
 * key group in O(K) time, whatever the number of keys, and the state goes on
 * changing copy-on-write: the first write to a group after a view copies
 * that group's slot array (once), and the first write access (get, upsert,
 * foreach) to an entry the view holds copies that entry (once per view).
 * Threads: the state and view_new/view_destroy belong to one thread (the
 * owner); one other thread may call view_write_group (and the view's other
 * readers) concurrently with the owner's use of the state, because nothing
 * a view reads is ever written or freed by the owner before view_destroy.
 * The owner destroys the view only once the reader is done with it (the
 * hand-back must order the reader's accesses before it, e.g. a mutex). A
 * view may outlive its state. view_write_group gives the bytes write_group
 * gave for the same group when the view was taken. */
#ifndef EDDY_STATE_KEYED_STATE_H
#define EDDY_STATE_KEYED_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct eddy_keyed_state eddy_keyed_state_t;
typedef struct eddy_keyed_state_view eddy_keyed_state_view_t;

/* Returns NULL only on allocation failure or invalid arguments (K must be
 * 1..EDDY_MAX_KEY_GROUPS, value_size at most UINT32_MAX). max_key_groups is K.
 * Value pointers are 8-byte aligned. */
eddy_keyed_state_t *eddy_keyed_state_new(uint32_t max_key_groups, size_t value_size);
void eddy_keyed_state_destroy(eddy_keyed_state_t **self_p);

/* Value for key in key group kg (hash = eddy_key_hash(key)); inserts a zeroed
 * value when absent and sets *created (created may be NULL). NULL only on
 * allocation failure (or kg out of range). */
void *eddy_keyed_state_upsert(eddy_keyed_state_t *self, uint32_t kg, uint64_t hash,
                              const void *key, uint32_t key_len, bool *created);
/* NULL when absent. */
void *eddy_keyed_state_get(eddy_keyed_state_t *self, uint32_t kg, uint64_t hash,
                           const void *key, uint32_t key_len);
/* Returns true when a key was removed (false also when out of memory
 * copying a group a view holds). */
bool eddy_keyed_state_remove(eddy_keyed_state_t *self, uint32_t kg, uint64_t hash,
                             const void *key, uint32_t key_len);

typedef void (*eddy_keyed_state_visit_fn)(void *ctx, const void *key, uint32_t key_len,
                                          void *value);
/* Visits every entry of key group kg (order unspecified). visit may modify
 * the value but must not insert into or remove from that key group. -1 when
 * out of memory copying an entry a view holds (the walk stops there). */
int eddy_keyed_state_foreach(eddy_keyed_state_t *self, uint32_t kg,
                             eddy_keyed_state_visit_fn visit, void *ctx);

void eddy_keyed_state_drop_group(eddy_keyed_state_t *self, uint32_t kg);
/* The same at once for the map (the group is empty when it returns), but
 * its entries are freed later, by eddy_keyed_state_reap, a slice at a time:
 * freeing a large group's entries one by one takes milliseconds that a
 * task handing groups away (a fluid migration step) should not block its
 * loop for. With a live view it is drop_group (the view may hold them). */
void eddy_keyed_state_drop_group_later(eddy_keyed_state_t *self, uint32_t kg);
/* Frees at most max_entries entries of groups dropped later; returns how
 * many wait still. */
size_t eddy_keyed_state_reap(eddy_keyed_state_t *self, size_t max_entries);
/* Non-zero while entries of groups dropped later wait to be freed. */
size_t eddy_keyed_state_reap_pending(const eddy_keyed_state_t *self);
size_t eddy_keyed_state_group_keys(const eddy_keyed_state_t *self, uint32_t kg);
size_t eddy_keyed_state_keys(const eddy_keyed_state_t *self);
/* Approximate heap bytes held (keys + values + table overhead). */
size_t eddy_keyed_state_bytes(const eddy_keyed_state_t *self);
size_t eddy_keyed_state_value_size(const eddy_keyed_state_t *self);

/* Change tracking, for incremental checkpoints (state/snapshot_chain.h):
 * every access that may write key group kg marks it changed - upsert, a
 * get that finds the key, a remove that removes one, foreach over a
 * non-empty group, drop_group(_later) and read_group (whatever it loaded,
 * also on error). take_changed says whether kg was marked since the last
 * take_changed of kg (or since new) and clears the mark. A group never
 * marked is byte for byte what it was at that point. */
bool eddy_keyed_state_take_changed(eddy_keyed_state_t *self, uint32_t kg);

/* Serialises key group kg into a malloc'd buffer the caller frees. */
int eddy_keyed_state_write_group(const eddy_keyed_state_t *self, uint32_t kg, char **out,
                                 size_t *out_len, eddy_err_t *err);
/* Replaces key group kg with the serialised data; on error the group is left empty. */
int eddy_keyed_state_read_group(eddy_keyed_state_t *self, uint32_t kg, const void *data,
                                size_t len, eddy_err_t *err);

/* A frozen view of every key group (see the top); NULL when out of memory. */
eddy_keyed_state_view_t *eddy_keyed_state_view_new(eddy_keyed_state_t *self);
/* Owner thread, once no other thread reads the view: frees what only it held. */
void eddy_keyed_state_view_destroy(eddy_keyed_state_view_t **view_p);
/* write_group of key group kg as it was when the view was taken. */
int eddy_keyed_state_view_write_group(const eddy_keyed_state_view_t *view, uint32_t kg,
                                      char **out, size_t *out_len, eddy_err_t *err);
size_t eddy_keyed_state_view_keys(const eddy_keyed_state_view_t *view);
size_t eddy_keyed_state_view_group_keys(const eddy_keyed_state_view_t *view, uint32_t kg);
/* Entries the state gave up that only views still hold, on this view's
 * list now (owner thread; for tests and metrics). */
size_t eddy_keyed_state_view_retired(const eddy_keyed_state_view_t *view);

#endif
