/* named_state.h - the store behind api/state.h's handles for one operator
 * instance: its declared states, the current key, and the entries of every
 * state in one keyed list state (state/list_state.h), partitioned by key
 * group. Internal to operators/ (the process operator owns one).
 *
 * Entries live under (key, ns) with ns = the state's name, a NUL byte, and
 * for a MAP the user key; a VALUE, MAP entry or accumulator is a list of one
 * element. A key group's bytes (write_group) are self-describing:
 *   [version=1, [name0, schema0, name1, schema1, ...], lists (bin)]
 * the names and schema versions of every declared state, then the list
 * state's own group serialisation. read_group replaces the group; it
 * migrates elements of states saved with an older schema version through
 * their migrate callback, drops entries of states no longer declared, and
 * refuses (leaving the group empty) a state saved with a newer version or
 * an older one without a migrate callback. */
#ifndef EDDY_OPERATORS_NAMED_STATE_H
#define EDDY_OPERATORS_NAMED_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "api/state.h"
#include "common/err.h"

typedef struct eddy_named_states eddy_named_states_t;

/* Checks declarations (names, kinds, versions, accumulators): 0, or -1
 * with err naming the first bad one. */
int eddy_state_descs_check(const eddy_state_desc_t *descs, uint32_t n, eddy_err_t *err);

/* descs (checked, n >= 1) must outlive the store. NULL when out of memory. */
eddy_named_states_t *eddy_named_states_new(const eddy_state_desc_t *descs, uint32_t n,
                                           uint32_t max_key_groups);
void eddy_named_states_destroy(eddy_named_states_t **self_p);

/* The key the handles act on (borrowed until the next call). */
void eddy_named_states_set_key(eddy_named_states_t *self, const char *key, uint32_t key_len,
                               uint32_t kg);
/* The handle of the state declared as name, NULL when none is. */
eddy_state_t *eddy_named_states_find(eddy_named_states_t *self, const char *name);

int eddy_named_states_write_group(eddy_named_states_t *self, uint32_t kg, char **out,
                                  size_t *len, eddy_err_t *err);
/* Replaces group kg with data (0 bytes: empty); see the top. */
int eddy_named_states_read_group(eddy_named_states_t *self, uint32_t kg, const void *data,
                                 size_t len, eddy_err_t *err);
void eddy_named_states_drop_group(eddy_named_states_t *self, uint32_t kg);

#endif
