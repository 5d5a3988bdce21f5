/* reaper.c - removes checkpoint directories off the coordinator's loop.
 *
 * Two kinds of work: a plain removal of one checkpoint that no other can
 * refer to (abandoned before it completed, a rescale's migration snapshot),
 * and a collection by reference (state/snapshot_gc.h) when a complete
 * checkpoint leaves retention: of every stored checkpoint up to it that is
 * not retained, only the objects no retained checkpoint's manifest refers
 * to are deleted (incremental checkpoints share objects), from what is
 * stored, so a coordinator that took over collects what its predecessor
 * left.
 *
 * Removing a checkpoint (retention, an abandoned checkpoint, a rescale's
 * migration snapshot) unlinks one file per key group and fsyncs the job's
 * directory; on a busy disk that took hundreds of milliseconds, during
 * which the loop noticed no dead worker and restored nothing. One thread
 * takes the removals in submission order; the snapshot store object holds
 * only its root path, so using it from this thread is safe. */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "coordinator/internal.h"
#include "state/snapshot_gc.h"

typedef struct removal {
    char job[EDDY_NAME_MAX];
    uint64_t checkpoint;
    bool collect;                       /* by reference, every id <= checkpoint */
    uint32_t n_keep;
    uint64_t keep[COORD_MAX_RETAINED];  /* the retained checkpoints */
    struct removal *next;
} removal_t;

struct coord_reaper {
    eddy_snapshot_store_t *store;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    removal_t *head, *tail;
    bool stopping;
};

static void remove_one(eddy_snapshot_store_t *store, const removal_t *r)
{
    eddy_err_t err;
    if (!r->collect) {
        if (eddy_snapshot_store_remove_checkpoint(store, r->job, r->checkpoint, &err) < 0)
            eddy_warn("%s", err.msg);
        return;
    }
    eddy_snapshot_gc_stats_t st;
    if (eddy_snapshot_gc_collect(store, r->job, r->checkpoint, r->keep, r->n_keep, &st, &err) < 0)
        eddy_warn("job %s: collecting checkpoints up to %" PRIu64 ": %s", r->job, r->checkpoint,
                  err.msg);
    else if (st.checkpoints_removed || st.objects_removed || st.objects_kept)
        eddy_debug("job %s: checkpoints up to %" PRIu64 ": %" PRIu64 " removed, %" PRIu64
                   " objects removed, %" PRIu64 " kept (referenced by a retained checkpoint)",
                   r->job, r->checkpoint, st.checkpoints_removed, st.objects_removed,
                   st.objects_kept);
}

static void *run(void *arg)
{
    coord_reaper_t *self = arg;
    pthread_mutex_lock(&self->lock);
    for (;;) {
        while (!self->head && !self->stopping)
            pthread_cond_wait(&self->wake, &self->lock);
        removal_t *r = self->head;
        if (!r)
            break; /* stopping, and nothing left */
        self->head = r->next;
        if (!self->head)
            self->tail = NULL;
        pthread_mutex_unlock(&self->lock);
        remove_one(self->store, r);
        free(r);
        pthread_mutex_lock(&self->lock);
    }
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

coord_reaper_t *coord_reaper_new(eddy_snapshot_store_t *store, eddy_err_t *err)
{
    coord_reaper_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->store = store;
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->wake, NULL);
    if (pthread_create(&self->thread, NULL, run, self) != 0) {
        pthread_mutex_destroy(&self->lock);
        pthread_cond_destroy(&self->wake);
        free(self);
        eddy_err_set(err, "cannot start the checkpoint remover thread");
        return NULL;
    }
    return self;
}

static void enqueue(coord_reaper_t *self, const removal_t *what)
{
    removal_t *r = malloc(sizeof *r);
    if (!self || !r) { /* out of memory (or no thread): here, then */
        if (self)
            remove_one(self->store, what);
        free(r);
        return;
    }
    *r = *what;
    r->next = NULL;
    pthread_mutex_lock(&self->lock);
    if (self->tail)
        self->tail->next = r;
    else
        self->head = r;
    self->tail = r;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
}

void coord_reaper_remove(coord_reaper_t *self, const char *job, uint64_t checkpoint)
{
    removal_t r = {.checkpoint = checkpoint};
    snprintf(r.job, sizeof r.job, "%s", job);
    enqueue(self, &r);
}

void coord_reaper_collect(coord_reaper_t *self, const char *job, uint64_t upto,
                          const uint64_t *keep, uint32_t n_keep)
{
    removal_t r = {.checkpoint = upto, .collect = true};
    snprintf(r.job, sizeof r.job, "%s", job);
    for (uint32_t i = 0; i < n_keep && i < COORD_MAX_RETAINED; i++)
        r.keep[r.n_keep++] = keep[i];
    enqueue(self, &r);
}

void coord_reaper_destroy(coord_reaper_t **self_p)
{
    coord_reaper_t *self = *self_p;
    if (!self)
        return;
    /* what is queued is still removed: files left behind are never reclaimed */
    pthread_mutex_lock(&self->lock);
    self->stopping = true;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
    pthread_join(self->thread, NULL);
    pthread_mutex_destroy(&self->lock);
    pthread_cond_destroy(&self->wake);
    free(self);
    *self_p = NULL;
}
