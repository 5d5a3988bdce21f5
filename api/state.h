/* state.h - named keyed state for job authors (Flink's ValueState,
 * MapState, ListState and AggregatingState with state descriptors).
 *
 * An operator declares its state up front, by name, in an array of
 * eddy_state_desc_t (a process function: eddy_process_udf_t.states,
 * api/process.h), and reaches each state at run time through an opaque
 * handle (eddy_process_state(ctx, "name")). Every operation acts on the
 * current key (the key of the record or timer being handled); only
 * eddy_state_foreach_group walks every key of the current key's key group.
 *
 * Kinds:
 *  - VALUE: one byte string per key (get/put/remove);
 *  - MAP: per key, user keys (bytes) to values (bytes) (map_get/map_put/
 *    map_remove, foreach in unspecified order, remove clears the map);
 *  - LIST: per key, byte strings in insertion order (list_add, foreach,
 *    remove clears the list);
 *  - AGGREGATING: per key, an accumulator of acc_size bytes, zeroed when
 *    the key is new and folded with add(acc, input) by eddy_state_add;
 *    get reads it, remove forgets it.
 * Values are bytes copied in and out (they must hold no pointers). A pointer
 * returned by get/map_get, or handed to a visit function, stays valid only
 * until the next change of any state of the operator; a visit function
 * must not change state.
 *
 * Names are what savepoints match state by across versions of a job (with
 * the operator's uid), so keep a name for as long as its bytes mean the
 * same thing. When they change shape, raise the state's schema version and
 * give a migrate callback: on a restore from a checkpoint or savepoint
 * written with an older version, eddy calls migrate(from_version, old
 * bytes) for every stored element of that state (a value, a map's value,
 * a list element, an accumulator) and keeps the bytes it returns (a
 * malloc'd buffer eddy frees; an accumulator must come back acc_size bytes
 * long). A restore whose saved version is older and which has no migrate
 * callback, or whose saved version is newer than the declared one, is
 * refused before the job starts (eddy local/submit --from-savepoint exit 2
 * naming the operator uid, the state and both versions). A state the saved
 * data lacks starts empty; saved state under a name the operator no longer
 * declares is dropped.
 *
 * All of it is keyed state in key groups: checkpointed with the job,
 * restored after a failure, moved with its key groups on a rescale and
 * carried by savepoints, whose manifest records each state's name and
 * schema version (`eddy savepoint inspect` shows them). */
#ifndef EDDY_API_STATE_H
#define EDDY_API_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum eddy_state_kind {
    EDDY_STATE_VALUE = 1,
    EDDY_STATE_MAP = 2,
    EDDY_STATE_LIST = 3,
    EDDY_STATE_AGGREGATING = 4,
} eddy_state_kind_t;

/* Longest state name (bytes, without the NUL); at most this many states per
 * operator. */
#define EDDY_STATE_NAME_MAX 63u
#define EDDY_STATE_MAX_STATES 16u

/* old (old_len bytes, written with schema version from_version) in the
 * declared version: a malloc'd buffer in *out (*out_len bytes; NULL/0 is an
 * empty value), 0; or -1 with err filled, which fails the restore. */
typedef int (*eddy_state_migrate_fn)(uint32_t from_version, const void *old, size_t old_len,
                                     char **out, size_t *out_len, eddy_err_t *err);

typedef struct eddy_state_desc {
    const char *name;        /* 1..EDDY_STATE_NAME_MAX bytes, unique in the operator */
    eddy_state_kind_t kind;
    uint32_t version;        /* schema version, >= 1 */
    eddy_state_migrate_fn migrate; /* may be NULL: older versions are refused */
    /* AGGREGATING only: the accumulator's size (1..4096) and the fold. */
    size_t acc_size;
    void (*add)(void *acc, const void *in, size_t in_len);
} eddy_state_desc_t;

/* A declared state of one operator instance (opaque, owned by it). */
typedef struct eddy_state eddy_state_t;

/* VALUE and AGGREGATING: the current key's bytes (*len, len may be NULL),
 * NULL when absent. */
const void *eddy_state_get(eddy_state_t *h, size_t *len);
/* VALUE: sets the current key's value. 0, or -1 when out of memory (or h
 * is no value state). */
int eddy_state_put(eddy_state_t *h, const void *value, size_t len);
/* Any kind: forgets the current key's state; true when there was some. */
bool eddy_state_remove(eddy_state_t *h);

/* MAP: the current key's entry for user key k (NULL when absent), set it
 * (0, or -1 when out of memory), forget it (true when it existed). */
const void *eddy_state_map_get(eddy_state_t *h, const void *k, size_t k_len, size_t *len);
int eddy_state_map_put(eddy_state_t *h, const void *k, size_t k_len, const void *value,
                       size_t len);
bool eddy_state_map_remove(eddy_state_t *h, const void *k, size_t k_len);

/* LIST: appends a copy of value to the current key's list (0, or -1). */
int eddy_state_list_add(eddy_state_t *h, const void *value, size_t len);

/* AGGREGATING: folds in into the current key's accumulator (created zeroed
 * when absent). 0, or -1 when out of memory. */
int eddy_state_add(eddy_state_t *h, const void *in, size_t len);

/* Visits the current key's state: a MAP's entries (k = the user key, order
 * unspecified), a LIST's elements in order (k NULL), a VALUE's or an
 * AGGREGATING accumulator's bytes once when present (k NULL). Returns the
 * number visited. */
typedef void (*eddy_state_visit_fn)(void *arg, const void *k, size_t k_len, const void *value,
                                    size_t len);
size_t eddy_state_foreach(eddy_state_t *h, eddy_state_visit_fn visit, void *arg);

/* Visits the state of every key of the current key's key group (the unit
 * eddy moves on a rescale), order unspecified: key is the key, k/value as
 * for eddy_state_foreach. Returns the number visited. */
typedef void (*eddy_state_group_visit_fn)(void *arg, const void *key, size_t key_len,
                                          const void *k, size_t k_len, const void *value,
                                          size_t len);
size_t eddy_state_foreach_group(eddy_state_t *h, eddy_state_group_visit_fn visit, void *arg);

#endif
