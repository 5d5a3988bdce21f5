/* list_state.h - keyed list state: per (key, namespace), an ordered list of
 * records (bytes, value, timestamp), partitioned by key group (Flink's
 * ListState with a namespace, e.g. a window's elements or a join side's
 * buffered rows).
 *
 * Entries are copied in. Order within a list is insertion order. A record
 * from at() points into the state and stays valid until the next change of
 * that key group.
 * Per key group serialisation (msgpack, bounds-checked, versioned): a group
 * moves, restores and drops as a unit; read_group replaces the group (0
 * bytes: empty), and on malformed bytes fails with err saying why and leaves
 * the group empty. Keys and namespaces may be empty (length 0). */
#ifndef EDDY_STATE_LIST_STATE_H
#define EDDY_STATE_LIST_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "net/record.h"

typedef struct eddy_list_state eddy_list_state_t;

eddy_list_state_t *eddy_list_state_new(uint32_t max_key_groups);
void eddy_list_state_destroy(eddy_list_state_t **self_p);

/* Appends rec (data, len, kind, value, timestamp) to the list of (key, ns).
 * 0, or -1 on allocation failure or kg out of range. */
int eddy_list_state_add(eddy_list_state_t *self, uint32_t kg, const void *key, uint32_t key_len,
                        const void *ns, uint32_t ns_len, const eddy_record_t *rec);
/* Number of entries of (key, ns), 0 when none. */
size_t eddy_list_state_size(eddy_list_state_t *self, uint32_t kg, const void *key,
                            uint32_t key_len, const void *ns, uint32_t ns_len);
/* Entry i of (key, ns), records pointing into the state. false when absent. */
bool eddy_list_state_at(eddy_list_state_t *self, uint32_t kg, const void *key, uint32_t key_len,
                        const void *ns, uint32_t ns_len, size_t i, eddy_record_t *rec);
/* Removes the list of (key, ns); true when it existed. */
bool eddy_list_state_clear(eddy_list_state_t *self, uint32_t kg, const void *key,
                           uint32_t key_len, const void *ns, uint32_t ns_len);
/* Moves every entry of (key, from_ns) to the end of (key, to_ns) (merging
 * session windows). */
int eddy_list_state_move(eddy_list_state_t *self, uint32_t kg, const void *key, uint32_t key_len,
                         const void *from_ns, uint32_t from_len, const void *to_ns,
                         uint32_t to_len);
/* Visits every (key, ns) list of group kg (order unspecified); visit must
 * not change the group. */
typedef void (*eddy_list_state_visit_fn)(void *ctx, const void *key, uint32_t key_len,
                                         const void *ns, uint32_t ns_len, size_t n);
void eddy_list_state_foreach(eddy_list_state_t *self, uint32_t kg, eddy_list_state_visit_fn visit,
                             void *ctx);
size_t eddy_list_state_entries(const eddy_list_state_t *self);
size_t eddy_list_state_bytes(const eddy_list_state_t *self);

int eddy_list_state_write_group(const eddy_list_state_t *self, uint32_t kg, char **out,
                                size_t *len, eddy_err_t *err);
int eddy_list_state_read_group(eddy_list_state_t *self, uint32_t kg, const void *data, size_t len,
                               eddy_err_t *err);
void eddy_list_state_drop_group(eddy_list_state_t *self, uint32_t kg);

#endif
