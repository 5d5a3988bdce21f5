/* snapshot_writer.c - the background writer of checkpoint files (see
 * snapshot_writer.h). One thread per worker, two queues under one mutex:
 * pending (worker -> thread) and done (thread -> worker). The thread opens
 * the snapshot store per unit by its root path, so a job released while its
 * unit is queued leaves nothing dangling; it keeps the last root's store
 * open (an s3:// store's open is a request). */
#include "state/snapshot_writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/clock.h"
#include "state/snapshot_store.h"

struct eddy_snapshot_writer {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    eddy_snapshot_unit_t *pending_head, *pending_tail;
    eddy_snapshot_unit_t *done_head, *done_tail;
    bool stopping;
    int done_fd; /* eventfd: readable while done units wait (the loop polls it) */
    eddy_snapshot_store_t *store; /* the thread's: the last unit's root, kept open */
};

static void push(eddy_snapshot_unit_t **head, eddy_snapshot_unit_t **tail, eddy_snapshot_unit_t *u)
{
    u->next = NULL;
    if (*tail)
        (*tail)->next = u;
    else
        *head = u;
    *tail = u;
}

static eddy_snapshot_unit_t *pop(eddy_snapshot_unit_t **head, eddy_snapshot_unit_t **tail)
{
    eddy_snapshot_unit_t *u = *head;
    if (u) {
        *head = u->next;
        if (!*head)
            *tail = NULL;
        u->next = NULL;
    }
    return u;
}

static void fail_unit(eddy_snapshot_unit_t *u, const char *error)
{
    if (!u->error[0])
        snprintf(u->error, sizeof u->error, "%s", error);
    if (u->ack.type == EDDY_MSG_ACK && !u->ack.u.ack.error[0])
        snprintf(u->ack.u.ack.error, sizeof u->ack.u.ack.error, "%s", error);
}

/* An asynchronous unit's groups, serialised from the producer's view. */
static int serialise_unit(eddy_snapshot_unit_t *u, eddy_err_t *err)
{
    uint64_t t0 = eddy_mono_ns(), bytes = 0;
    for (uint32_t i = 0; i < u->n_groups; i++) {
        if (u->serialise(u->view, u->groups[i], &u->data[i], &u->lens[i], err) < 0)
            return -1;
        bytes += u->lens[i];
    }
    if (u->ack.type == EDDY_MSG_ACK)
        u->ack.u.ack.bytes_written = bytes + u->manifest_len;
    u->serialise_ns = eddy_mono_ns() - t0;
    return 0;
}

/* The store of root, kept open across units (an s3:// store opens with a
 * request); reopened when a unit names another root. Writer thread only. */
static eddy_snapshot_store_t *store_for(eddy_snapshot_writer_t *w, const char *root,
                                        eddy_err_t *err)
{
    if (w->store && strcmp(eddy_snapshot_store_root(w->store), root) != 0)
        eddy_snapshot_store_destroy(&w->store);
    if (!w->store)
        w->store = eddy_snapshot_store_new(root, err);
    return w->store;
}

/* A read unit: every group it can get; the others stay NULL. */
static void read_unit(eddy_snapshot_writer_t *w, eddy_snapshot_unit_t *u)
{
    eddy_err_t err = {{0}};
    uint64_t t0 = eddy_mono_ns();
    eddy_snapshot_store_t *store = store_for(w, u->root, &err);
    for (uint32_t i = 0; store && i < u->n_groups; i++) {
        if (eddy_snapshot_store_read_group(store, u->job, u->checkpoint, u->op, u->groups[i],
                                           &u->data[i], &u->lens[i], &err) < 0) {
            u->data[i] = NULL;
            u->lens[i] = 0;
            fail_unit(u, err.msg);
        }
    }
    if (!store)
        fail_unit(u, err.msg);
    u->write_ns = eddy_mono_ns() - t0;
}

static void write_unit(eddy_snapshot_writer_t *w, eddy_snapshot_unit_t *u)
{
    eddy_err_t err = {{0}};
    if (u->read) {
        read_unit(w, u);
        return;
    }
    if (u->sync && eddy_sync_list_run(u->sync, &err) < 0)
        fail_unit(u, err.msg);
    if (u->sync_only)
        return;
    if (u->serialise && serialise_unit(u, &err) < 0) {
        fail_unit(u, err.msg);
        return;
    }
    uint64_t t0 = eddy_mono_ns();
    eddy_snapshot_store_t *store = store_for(w, u->root, &err);
    if (!store || ((u->n_groups || !u->manifest) &&
                   eddy_snapshot_store_write_groups(store, u->job, u->checkpoint, u->op,
                                                    u->n_groups, u->groups, u->data, u->lens,
                                                    u->durable, &err) < 0))
        fail_unit(u, err.msg);
    else if (u->manifest &&
             eddy_snapshot_store_write_manifest(store, u->job, u->checkpoint, u->op,
                                                u->manifest_instance, u->manifest,
                                                u->manifest_len, &err) < 0)
        fail_unit(u, err.msg);
    else if (u->keep_local && u->n_groups && (u->hashes = malloc(u->n_groups * sizeof *u->hashes)))
        for (uint32_t i = 0; i < u->n_groups; i++)
            u->hashes[i] = XXH64(u->data[i], u->lens[i], 0);
    u->write_ns = eddy_mono_ns() - t0;
}

static void *run(void *arg)
{
    eddy_snapshot_writer_t *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        eddy_snapshot_unit_t *u = pop(&w->pending_head, &w->pending_tail);
        if (!u) {
            if (w->stopping)
                break;
            pthread_cond_wait(&w->wake, &w->lock);
            continue;
        }
        pthread_mutex_unlock(&w->lock);
        write_unit(w, u);
        pthread_mutex_lock(&w->lock);
        push(&w->done_head, &w->done_tail, u);
        uint64_t one = 1;
        if (write(w->done_fd, &one, sizeof one) < 0) {
            /* only when the counter is full: it is readable anyway */
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

eddy_snapshot_writer_t *eddy_snapshot_writer_new(eddy_err_t *err)
{
    eddy_snapshot_writer_t *w = calloc(1, sizeof *w);
    if (!w) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    w->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->done_fd < 0) {
        eddy_err_set(err, "cannot create the snapshot writer's eventfd: %s", strerror(errno));
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    if (pthread_create(&w->thread, NULL, run, w) != 0) {
        eddy_err_set(err, "cannot start the snapshot writer thread");
        close(w->done_fd);
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->wake);
        free(w);
        return NULL;
    }
    return w;
}

void eddy_snapshot_writer_destroy(eddy_snapshot_writer_t **self_p)
{
    eddy_snapshot_writer_t *w = *self_p;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    eddy_snapshot_store_destroy(&w->store);
    eddy_snapshot_unit_t *u;
    while ((u = pop(&w->done_head, &w->done_tail)))
        eddy_snapshot_unit_free(u);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    close(w->done_fd);
    free(w);
    *self_p = NULL;
}

eddy_snapshot_unit_t *eddy_snapshot_unit_new(uint32_t n_groups)
{
    eddy_snapshot_unit_t *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    size_t n = n_groups ? n_groups : 1;
    u->groups = calloc(n, sizeof *u->groups);
    u->data = calloc(n, sizeof *u->data);
    u->lens = calloc(n, sizeof *u->lens);
    if (!u->groups || !u->data || !u->lens) {
        eddy_snapshot_unit_free(u);
        return NULL;
    }
    return u;
}

void eddy_snapshot_unit_free(eddy_snapshot_unit_t *u)
{
    if (!u)
        return;
    for (uint32_t i = 0; u->data && i < u->n_groups; i++)
        free(u->data[i]);
    if (u->release)
        u->release(u->view);
    eddy_sync_list_destroy(&u->sync);
    eddy_msg_clear(&u->ack); /* an ACK's source state */
    free(u->manifest);
    free(u->hashes);
    free(u->groups);
    free(u->data);
    free(u->lens);
    free(u);
}

void eddy_snapshot_writer_submit(eddy_snapshot_writer_t *self, eddy_snapshot_unit_t *unit)
{
    unit->submitted_ns = eddy_mono_ns();
    pthread_mutex_lock(&self->lock);
    push(&self->pending_head, &self->pending_tail, unit);
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
}

eddy_snapshot_unit_t *eddy_snapshot_writer_poll(eddy_snapshot_writer_t *self)
{
    pthread_mutex_lock(&self->lock);
    eddy_snapshot_unit_t *u = pop(&self->done_head, &self->done_tail);
    if (!self->done_head) { /* drained: not readable until the next one */
        uint64_t n;
        if (read(self->done_fd, &n, sizeof n) < 0) {
            /* EAGAIN: it was not readable */
        }
    }
    pthread_mutex_unlock(&self->lock);
    return u;
}

int eddy_snapshot_writer_fd(const eddy_snapshot_writer_t *self)
{
    return self->done_fd;
}
