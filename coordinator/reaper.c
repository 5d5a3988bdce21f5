/* reaper.c - removes checkpoint directories off the coordinator's loop.
 *
 * Removing a checkpoint (retention, an abandoned checkpoint, a rescale's
 * migration snapshot) unlinks one file per key group and fsyncs the job's
 * directory; on a busy disk that took hundreds of milliseconds, during
 * which the loop noticed no dead worker and restored nothing. One thread
 * takes the removals in submission order; the snapshot store object holds
 * only its root path, so using it from this thread is safe. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "coordinator/internal.h"

typedef struct removal {
    char job[EDDY_NAME_MAX];
    uint64_t checkpoint;
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
    if (eddy_snapshot_store_remove_checkpoint(store, r->job, r->checkpoint, &err) < 0)
        eddy_warn("%s", err.msg);
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

void coord_reaper_remove(coord_reaper_t *self, const char *job, uint64_t checkpoint)
{
    removal_t *r = calloc(1, sizeof *r);
    if (!self || !r) { /* out of memory (or no thread): here, then */
        removal_t here = {.checkpoint = checkpoint};
        snprintf(here.job, sizeof here.job, "%s", job);
        if (self)
            remove_one(self->store, &here);
        free(r);
        return;
    }
    snprintf(r->job, sizeof r->job, "%s", job);
    r->checkpoint = checkpoint;
    pthread_mutex_lock(&self->lock);
    if (self->tail)
        self->tail->next = r;
    else
        self->head = r;
    self->tail = r;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
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
