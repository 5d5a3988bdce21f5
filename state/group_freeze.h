/* group_freeze.h - a frozen view of an operator's per-key-group state,
 * taken in O(key groups) time at a barrier and serialised group by group
 * later, by another thread (asynchronous snapshots of state that has no
 * copy-on-write of its own: window contents, timers, element lists).
 *
 * Copy-on-write at the granularity of a key group, where the copy is the
 * group's serialised bytes: eddy_group_freeze_new marks every group of the
 * snapshot pending and returns at once. The reader (the snapshot writer's
 * thread) then serialises each pending group from the live state with the
 * owner's write function. The owner calls eddy_group_freeze_touch(kg)
 * before it changes group kg in any way; if kg is still pending, the owner
 * serialises it itself first (once), and if the reader is serialising it
 * right then, the owner waits for that one group. Either way the bytes are
 * those of the group at the barrier. Once every group was taken a touch is
 * one atomic load.
 *
 * What write(arg, kg, ...) may read from another thread: only structures
 * of group kg (which nobody changes while it runs, by the above) and what
 * never changes (configuration); anything else that changes (a watermark)
 * must be captured in arg when the view is taken.
 *
 * Lifetime: new returns a view with two references, the owner's and the
 * reader's. The owner gives up its reference with detach, which first
 * serialises every group still pending (so write is never called once the
 * live state is gone: detach before destroying it) - unless the reader released the view already: then nothing
 * is serialised any more. The reader gives up its reference with release; the last one
 * frees the view and calls arg_free(arg). Both may come in any order, from
 * their own threads. */
#ifndef EDDY_STATE_GROUP_FREEZE_H
#define EDDY_STATE_GROUP_FREEZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct eddy_group_freeze eddy_group_freeze_t;

/* Serialises the live group kg into a malloc'd buffer (an empty group may
 * give NULL/0), as api/operator.h's write_group. */
typedef int (*eddy_group_freeze_write_fn)(void *arg, uint32_t kg, char **out, size_t *len,
                                          eddy_err_t *err);

/* A view of the n groups (each < max_key_groups); NULL when out of memory
 * (arg is then not freed). */
eddy_group_freeze_t *eddy_group_freeze_new(uint32_t max_key_groups, const uint32_t *groups,
                                           uint32_t n, eddy_group_freeze_write_fn write, void *arg,
                                           void (*arg_free)(void *arg));
/* Owner: before any change to group kg (no-op for a group not in the view
 * or taken already). */
void eddy_group_freeze_touch(eddy_group_freeze_t *self, uint32_t kg);
/* Owner: serialises what is still pending, drops the owner's reference and
 * sets *self_p to NULL; the same for the older views listed behind it
 * (take, below). NULL-safe. */
void eddy_group_freeze_detach(eddy_group_freeze_t **self_p);
/* Reader: group kg's bytes as at the barrier, moved to the caller (a group
 * can be taken once). A write error (of the reader or of the owner's
 * touch) is returned here. */
int eddy_group_freeze_write_group(eddy_group_freeze_t *self, uint32_t kg, char **out, size_t *len,
                                  eddy_err_t *err);
/* Reader: drops the reader's reference. NULL-safe. */
void eddy_group_freeze_release(eddy_group_freeze_t **self_p);
/* The arg the view was made with (either thread; it lives as long as the
 * view). */
void *eddy_group_freeze_arg(const eddy_group_freeze_t *self);
/* Groups of the view not serialised yet (either thread; for tests). */
uint32_t eddy_group_freeze_pending(const eddy_group_freeze_t *self);

/* An owner's list of views (*slot: the newest, NULL: none), the way an
 * operator keeps them: a checkpoint's view may still be written when the
 * next is taken, and both stay frozen. take: makes a new view (NULL when
 * out of memory: then arg_free(arg) was called), puts the owner's
 * reference at the head of the list and returns the reader's. touch_slot:
 * touches kg in every view of the list, and detaches the views whose groups
 * were all taken or whose reader released them (with none left, a touch
 * is a NULL check). detach (above) on the slot detaches the whole list. */
eddy_group_freeze_t *eddy_group_freeze_take(eddy_group_freeze_t **slot, uint32_t max_key_groups,
                                            const uint32_t *groups, uint32_t n,
                                            eddy_group_freeze_write_fn write, void *arg,
                                            void (*arg_free)(void *arg));
void eddy_group_freeze_touch_slot(eddy_group_freeze_t **slot, uint32_t kg);

/* The same two as api/operator.h's view_write_group and view_release take
 * them (view: an eddy_group_freeze_t), so an operator can name them. */
int eddy_group_freeze_view_write_group(void *view, uint32_t kg, char **out, size_t *len,
                                       eddy_err_t *err);
void eddy_group_freeze_view_release(void *view);

#endif
