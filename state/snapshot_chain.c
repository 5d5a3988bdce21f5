/* snapshot_chain.c - the incremental checkpoint bookkeeping of one keyed
 * task (see snapshot_chain.h). */
#include "state/snapshot_chain.h"

#include <stdlib.h>

#include "state/keygroup.h"

typedef struct chain_group {
    uint64_t base;      /* completed checkpoint holding the group as it is, 0: none */
    int64_t base_wm;    /* the watermark in base's object */
    uint64_t pending;   /* checkpoint the group was last written in, not yet completed */
    int64_t pending_wm;
} chain_group_t;

struct eddy_snapshot_chain {
    uint32_t k, full_every;
    uint32_t since_full;  /* checkpoints begun since the last full one */
    bool begun;
    uint64_t last_begun;  /* the newest checkpoint begun */
    chain_group_t *groups;
};

eddy_snapshot_chain_t *eddy_snapshot_chain_new(uint32_t k, uint32_t full_every)
{
    if (k == 0 || k > EDDY_MAX_KEY_GROUPS || full_every == 0)
        return NULL;
    eddy_snapshot_chain_t *self = calloc(1, sizeof *self);
    if (!self || !(self->groups = calloc(k, sizeof *self->groups))) {
        free(self);
        return NULL;
    }
    self->k = k;
    self->full_every = full_every;
    return self;
}

void eddy_snapshot_chain_destroy(eddy_snapshot_chain_t **self_p)
{
    if (!*self_p)
        return;
    free((*self_p)->groups);
    free(*self_p);
    *self_p = NULL;
}

bool eddy_snapshot_chain_begin(eddy_snapshot_chain_t *self, uint64_t checkpoint)
{
    self->last_begun = checkpoint;
    bool full = !self->begun || self->since_full + 1 >= self->full_every;
    self->begun = true;
    self->since_full = full ? 0 : self->since_full + 1;
    return full;
}

void eddy_snapshot_chain_forget(eddy_snapshot_chain_t *self, uint32_t kg)
{
    if (kg < self->k)
        self->groups[kg] = (chain_group_t){0};
}

uint64_t eddy_snapshot_chain_plan(eddy_snapshot_chain_t *self, uint32_t kg, int64_t wm, bool full,
                                  uint64_t checkpoint)
{
    if (kg >= self->k)
        return 0;
    chain_group_t *g = &self->groups[kg];
    if (!full && g->base && g->base < checkpoint && g->base_wm == wm)
        return g->base;
    /* Written here: until this one completes nothing is referred to (a
     * later checkpoint must not name an old base that the newest complete
     * checkpoint, which named this one, no longer keeps alive). */
    g->base = 0;
    g->pending = checkpoint;
    g->pending_wm = wm;
    return 0;
}

void eddy_snapshot_chain_completed(eddy_snapshot_chain_t *self, uint64_t checkpoint)
{
    /* Only the newest snapshot taken becomes a base: one taken after it
     * did not name it, so a retained checkpoint might not keep it alive. */
    if (!self->begun || checkpoint != self->last_begun)
        return;
    for (uint32_t kg = 0; kg < self->k; kg++) {
        chain_group_t *g = &self->groups[kg];
        if (g->pending && g->pending == checkpoint) {
            g->base = checkpoint;
            g->base_wm = g->pending_wm;
            g->pending = 0;
        }
    }
}

uint64_t eddy_snapshot_chain_base(const eddy_snapshot_chain_t *self, uint32_t kg)
{
    return kg < self->k ? self->groups[kg].base : 0;
}
