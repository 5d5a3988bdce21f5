/* group_freeze.c - a frozen per-key-group view, serialised lazily (see
 * group_freeze.h).
 *
 * Owns one slot per key group: its state (pending, busy, done, absent), the
 * bytes once serialised and the error if that failed. Whoever moves a slot
 * from pending to busy (a compare-and-swap: the owner's touch or the
 * reader) serialises it and publishes done with release order, so the
 * other side's acquire load of done orders the writer's reads of the live
 * group before any change the owner makes after it. A side that finds a
 * slot busy waits on the view's condition variable for that one slot. */
#include "state/group_freeze.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

enum { SLOT_PENDING = 0, SLOT_BUSY = 1, SLOT_DONE = 2, SLOT_ABSENT = 3 };

typedef struct gf_slot {
    _Atomic uint8_t state;
    bool taken;  /* the reader moved data out */
    char *data;  /* owned until taken */
    size_t len;
    char *error; /* malloc'd message when write failed */
} gf_slot_t;

struct eddy_group_freeze {
    uint32_t max_key_groups;
    eddy_group_freeze_t *older; /* the owner's list of views (owner thread only) */
    uint32_t groups;       /* in the view */
    uint32_t owner_groups; /* serialised by the owner's touch (owner thread only) */
    uint64_t owner_ns;     /* and its time doing so */
    _Atomic uint32_t pending;
    _Atomic int refs;
    eddy_group_freeze_write_fn write;
    void *arg;
    void (*arg_free)(void *arg);
    pthread_mutex_t lock;
    pthread_cond_t done;
    gf_slot_t *slots;
};

eddy_group_freeze_t *eddy_group_freeze_new(uint32_t max_key_groups, const uint32_t *groups,
                                           uint32_t n, eddy_group_freeze_write_fn write, void *arg,
                                           void (*arg_free)(void *arg))
{
    if (!write || max_key_groups == 0)
        return NULL;
    eddy_group_freeze_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->slots = malloc((size_t)max_key_groups * sizeof *self->slots);
    if (!self->slots) {
        free(self);
        return NULL;
    }
    for (uint32_t kg = 0; kg < max_key_groups; kg++) {
        atomic_init(&self->slots[kg].state, SLOT_ABSENT);
        self->slots[kg].taken = false;
        self->slots[kg].data = NULL;
        self->slots[kg].len = 0;
        self->slots[kg].error = NULL;
    }
    uint32_t pending = 0;
    for (uint32_t i = 0; i < n; i++)
        if (groups[i] < max_key_groups &&
            atomic_load_explicit(&self->slots[groups[i]].state, memory_order_relaxed) == SLOT_ABSENT) {
            atomic_store_explicit(&self->slots[groups[i]].state, SLOT_PENDING, memory_order_relaxed);
            pending++;
        }
    self->max_key_groups = max_key_groups;
    self->groups = pending;
    atomic_init(&self->pending, pending);
    atomic_init(&self->refs, 2);
    self->write = write;
    self->arg = arg;
    self->arg_free = arg_free;
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->done, NULL);
    return self;
}

static void gf_free(eddy_group_freeze_t *self)
{
    for (uint32_t kg = 0; kg < self->max_key_groups; kg++) {
        free(self->slots[kg].data);
        free(self->slots[kg].error);
    }
    free(self->slots);
    if (self->arg_free)
        self->arg_free(self->arg);
    pthread_cond_destroy(&self->done);
    pthread_mutex_destroy(&self->lock);
    free(self);
}

static void gf_unref(eddy_group_freeze_t *self)
{
    if (atomic_fetch_sub_explicit(&self->refs, 1, memory_order_acq_rel) == 1)
        gf_free(self);
}

/* The caller moved slot kg to busy: serialise it and publish done. */
static void gf_serialise(eddy_group_freeze_t *self, uint32_t kg)
{
    gf_slot_t *s = &self->slots[kg];
    eddy_err_t err = {{0}};
    if (self->write(self->arg, kg, &s->data, &s->len, &err) < 0) {
        free(s->data);
        s->data = NULL;
        s->len = 0;
        s->error = strdup(err.msg[0] ? err.msg : "serialising failed");
    }
    atomic_fetch_sub_explicit(&self->pending, 1, memory_order_relaxed);
    pthread_mutex_lock(&self->lock);
    atomic_store_explicit(&s->state, SLOT_DONE, memory_order_release);
    pthread_cond_broadcast(&self->done);
    pthread_mutex_unlock(&self->lock);
}

/* Takes slot kg through to done (or absent); returns its final state.
 * owner: the owner's thread (its serialisations are counted). */
static uint8_t gf_settle(eddy_group_freeze_t *self, uint32_t kg, bool owner)
{
    gf_slot_t *s = &self->slots[kg];
    uint8_t st = atomic_load_explicit(&s->state, memory_order_acquire);
    if (st == SLOT_DONE || st == SLOT_ABSENT)
        return st;
    if (st == SLOT_PENDING &&
        atomic_compare_exchange_strong_explicit(&s->state, &st, SLOT_BUSY, memory_order_acq_rel,
                                                memory_order_acquire)) {
        uint64_t t0 = owner ? eddy_mono_ns() : 0;
        gf_serialise(self, kg);
        if (owner) {
            self->owner_groups++;
            self->owner_ns += eddy_mono_ns() - t0;
        }
        return SLOT_DONE;
    }
    /* The other side has it: wait for that one group. */
    pthread_mutex_lock(&self->lock);
    while (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_DONE)
        pthread_cond_wait(&self->done, &self->lock);
    pthread_mutex_unlock(&self->lock);
    return SLOT_DONE;
}

void eddy_group_freeze_touch(eddy_group_freeze_t *self, uint32_t kg)
{
    if (!self || kg >= self->max_key_groups)
        return;
    gf_settle(self, kg, true);
}

/* Detaches one view (its older ones are the caller's). */
static void gf_detach_one(eddy_group_freeze_t *self)
{
    /* With the reader gone (it released the view, so it reads no more),
     * nothing pending is wanted any longer. */
    if (atomic_load_explicit(&self->refs, memory_order_acquire) > 1)
        for (uint32_t kg = 0; kg < self->max_key_groups; kg++)
            gf_settle(self, kg, true); /* serialises what is pending, waits for what is busy */
    if (self->owner_groups)
        eddy_debug("snapshot view: %u of %u key groups serialised by their owner before a change "
                   "(%.3f ms on its thread), the rest by the snapshot thread",
                   self->owner_groups, self->groups, self->owner_ns / 1e6);
    gf_unref(self);
}

void eddy_group_freeze_detach(eddy_group_freeze_t **self_p)
{
    eddy_group_freeze_t *self = self_p ? *self_p : NULL;
    if (self_p)
        *self_p = NULL;
    while (self) {
        eddy_group_freeze_t *older = self->older;
        self->older = NULL;
        gf_detach_one(self);
        self = older;
    }
}

int eddy_group_freeze_write_group(eddy_group_freeze_t *self, uint32_t kg, char **out, size_t *len,
                                  eddy_err_t *err)
{
    *out = NULL;
    *len = 0;
    if (!self || kg >= self->max_key_groups || gf_settle(self, kg, false) != SLOT_DONE)
        return eddy_err_set(err, "key group %u is not in the snapshot's view", kg);
    gf_slot_t *s = &self->slots[kg];
    if (s->error)
        return eddy_err_set(err, "%s", s->error);
    if (s->taken)
        return eddy_err_set(err, "key group %u of the snapshot's view was taken already", kg);
    s->taken = true;
    *out = s->data;
    *len = s->len;
    s->data = NULL;
    return 0;
}

void eddy_group_freeze_release(eddy_group_freeze_t **self_p)
{
    eddy_group_freeze_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    *self_p = NULL;
    gf_unref(self);
}

eddy_group_freeze_t *eddy_group_freeze_take(eddy_group_freeze_t **slot, uint32_t max_key_groups,
                                            const uint32_t *groups, uint32_t n,
                                            eddy_group_freeze_write_fn write, void *arg,
                                            void (*arg_free)(void *arg))
{
    eddy_group_freeze_t *view = eddy_group_freeze_new(max_key_groups, groups, n, write, arg, arg_free);
    if (!view) {
        if (arg_free)
            arg_free(arg);
        return NULL;
    }
    view->older = *slot; /* an older view still being written stays as it is */
    *slot = view;
    return view;
}

void eddy_group_freeze_touch_slot(eddy_group_freeze_t **slot, uint32_t kg)
{
    eddy_group_freeze_t **p = slot;
    while (*p) {
        eddy_group_freeze_t *v = *p;
        if (atomic_load_explicit(&v->pending, memory_order_acquire) &&
            atomic_load_explicit(&v->refs, memory_order_acquire) > 1) {
            eddy_group_freeze_touch(v, kg);
            p = &v->older;
        } else { /* all taken, or nobody reads it: done with it */
            *p = v->older;
            v->older = NULL;
            gf_detach_one(v);
        }
    }
}

void *eddy_group_freeze_arg(const eddy_group_freeze_t *self)
{
    return self ? self->arg : NULL;
}

uint32_t eddy_group_freeze_pending(const eddy_group_freeze_t *self)
{
    return self ? atomic_load_explicit(&self->pending, memory_order_acquire) : 0;
}

int eddy_group_freeze_view_write_group(void *view, uint32_t kg, char **out, size_t *len,
                                       eddy_err_t *err)
{
    return eddy_group_freeze_write_group(view, kg, out, len, err);
}

void eddy_group_freeze_view_release(void *view)
{
    eddy_group_freeze_t *self = view;
    eddy_group_freeze_release(&self);
}
