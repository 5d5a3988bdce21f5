/* snapshot_chain.h - which key groups a keyed task writes at a checkpoint
 * and which it refers to (incremental checkpoints, --checkpoint-full-every).
 *
 * Per key group the chain knows its base: a COMPLETED checkpoint whose
 * object holds the group exactly as it is now, written when the task's
 * watermark was what it is now (the object's envelope carries it), or
 * none. A group the state marks changed (keyed_state.h take_changed), one
 * the task drops, loads (restore, rescale, a fluid step) or gives away, is
 * forgotten (no base). At checkpoint C a held group with a base is referred
 * to, unless C is full; any other is written in C (and loses its base)
 * and becomes the group's base only when the task learns that C completed
 * (COMPLETE), C is still the newest checkpoint it took, and the group did
 * not change since. Hence the invariant deletion by reference relies on
 * (state/snapshot_gc.h): a checkpoint that refers to base B for a group is
 * preceded, among the task's snapshots since B, only by ones that refer to
 * B too, so the newest complete checkpoint keeps B's object alive. So a checkpoint that never completes is never a
 * base, and a task that starts (deploy, restore) has no base at all: its
 * first checkpoint writes every group. Every full_every-th checkpoint of a
 * task is full (the first is; full_every 1: always), which bounds how far
 * back a reference reaches.
 *
 * Owner thread only; pure bookkeeping, no I/O. */
#ifndef EDDY_STATE_SNAPSHOT_CHAIN_H
#define EDDY_STATE_SNAPSHOT_CHAIN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct eddy_snapshot_chain eddy_snapshot_chain_t;

/* k key groups, full_every >= 1. NULL when out of memory or bad input. */
eddy_snapshot_chain_t *eddy_snapshot_chain_new(uint32_t k, uint32_t full_every);
void eddy_snapshot_chain_destroy(eddy_snapshot_chain_t **self_p);

/* Checkpoint C's snapshot begins: true when it is a full one. */
bool eddy_snapshot_chain_begin(eddy_snapshot_chain_t *self, uint64_t checkpoint);
/* Group kg changed (or left or joined the task): it has no base now. */
void eddy_snapshot_chain_forget(eddy_snapshot_chain_t *self, uint32_t kg);
/* At checkpoint C (after begin), held group kg with the task's watermark
 * wm: the completed checkpoint to refer to, or 0 when the group is written
 * in C (then recorded as pending in C). */
uint64_t eddy_snapshot_chain_plan(eddy_snapshot_chain_t *self, uint32_t kg, int64_t wm,
                                  bool full, uint64_t checkpoint);
/* Checkpoint C completed: the groups written in C and unchanged since
 * have C as their base. */
void eddy_snapshot_chain_completed(eddy_snapshot_chain_t *self, uint64_t checkpoint);
/* kg's base, 0 when none (tests, logs). */
uint64_t eddy_snapshot_chain_base(const eddy_snapshot_chain_t *self, uint32_t kg);

#endif
