/* guarantee.h - a job's processing guarantee (`--guarantee`).
 *
 * exactly-once (default): aligned barriers, sources rewind to the restored
 * checkpoint, two-phase-commit sinks publish what completed checkpoints
 * cover. at-least-once: barriers are not aligned (a channel that delivered
 * its barrier keeps flowing until the last one arrives), so a snapshot may
 * hold effects of records after the barrier that a restore replays:
 * duplicates, never losses. at-most-once: a restore loads the checkpoint's
 * state but sources skip ahead to the latest position they reported, so
 * nothing is replayed: losses, never duplicates. The value travels in
 * DEPLOY (net/proto.h) and the job record. */
#ifndef EDDY_COMMON_GUARANTEE_H
#define EDDY_COMMON_GUARANTEE_H

typedef enum eddy_guarantee {
    EDDY_GUARANTEE_EXACTLY_ONCE = 0,
    EDDY_GUARANTEE_AT_LEAST_ONCE = 1,
    EDDY_GUARANTEE_AT_MOST_ONCE = 2,
} eddy_guarantee_t;

#define EDDY_GUARANTEE_LAST EDDY_GUARANTEE_AT_MOST_ONCE

/* "exactly-once", "at-least-once", "at-most-once" ("?" out of range). */
const char *eddy_guarantee_name(unsigned guarantee);
/* 0 and *out set, or -1 when name is none of the three. */
int eddy_guarantee_parse(const char *name, eddy_guarantee_t *out);

#endif
