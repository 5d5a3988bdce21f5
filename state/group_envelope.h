/* group_envelope.h - what one key group's snapshot file holds: the task's
 * watermark when it was taken, the group's per-key values (keyed_state.h's
 * serialised group) and each chained operator's own bytes for the group
 * (window contents, timers, join buffers: api/operator.h write_group).
 *
 * Encoding (msgpack): ["eddy-kg", 3, watermark (int), keyed (bin),
 * [op0 (bin), op1 (bin), ...], [kind0 (str), kind1 (str), ...]]: each
 * chained operator's bytes and its kind, which a restore matches the
 * stage's operators by (a new version may chain another stateless step
 * beside a stateful one: runtime/task_migrate.c). Version 2 is the same
 * without the kinds (matched by position). A file that does not start so
 * is read as a bare keyed-state group (the format before event time), with
 * watermark EDDY_GROUP_NO_WATERMARK and no operator bytes. The decoder
 * bounds-checks everything; decoded pointers point into the caller's
 * buffer. */
#ifndef EDDY_STATE_GROUP_ENVELOPE_H
#define EDDY_STATE_GROUP_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EDDY_GROUP_MAX_OPS 8
#define EDDY_GROUP_NO_WATERMARK INT64_MIN

typedef struct eddy_group_envelope {
    int64_t watermark;
    const char *keyed;
    size_t keyed_len;
    uint32_t n_ops;
    const char *ops[EDDY_GROUP_MAX_OPS]; /* NULL/0: the operator had nothing */
    size_t op_lens[EDDY_GROUP_MAX_OPS];
    /* Each operator's kind (api/operator.h): encoded from the NUL-ended
     * strings (NULL: ""); decoded as pointers into the data with their
     * lengths, kind_lens all 0 for a version 2 envelope. */
    const char *kinds[EDDY_GROUP_MAX_OPS];
    size_t kind_lens[EDDY_GROUP_MAX_OPS];
} eddy_group_envelope_t;

#define EDDY_GROUP_KIND_MAX 255

/* Malloc'd bytes (NULL when out of memory, n_ops is too large or a kind
 * longer than EDDY_GROUP_KIND_MAX). */
char *eddy_group_envelope_encode(const eddy_group_envelope_t *env, size_t *len);
/* Fills env from data (which must outlive it); -1 with err when malformed.
 * env->ops[i] for i >= n_ops are NULL. */
int eddy_group_envelope_decode(const void *data, size_t len, eddy_group_envelope_t *env,
                               eddy_err_t *err);

#endif
