/* sync_list.c - a list of pending fsyncs (see sync_list.h). Plain arrays:
 * a prepare adds a file and a directory, a commit one directory. */
#include "state/sync_list.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fsutil.h"

typedef struct sync_entry {
    bool is_dir;
    int fd;      /* a file's descriptor until synced, else -1 */
    char *path;
} sync_entry_t;

typedef struct sync_call {
    eddy_sync_call_fn fn;
    void *arg;
    void (*release)(void *arg);
} sync_call_t;

struct eddy_sync_list {
    sync_entry_t *entries;
    size_t count, cap;
    sync_call_t *calls;
    size_t n_calls, calls_cap;
};

eddy_sync_list_t *eddy_sync_list_new(void)
{
    return calloc(1, sizeof(eddy_sync_list_t));
}

static void clear(eddy_sync_list_t *self)
{
    for (size_t i = 0; i < self->count; i++) {
        if (self->entries[i].fd >= 0)
            close(self->entries[i].fd);
        free(self->entries[i].path);
    }
    self->count = 0;
    for (size_t i = 0; i < self->n_calls; i++)
        if (self->calls[i].release)
            self->calls[i].release(self->calls[i].arg);
    self->n_calls = 0;
}

void eddy_sync_list_destroy(eddy_sync_list_t **self_p)
{
    eddy_sync_list_t *self = *self_p;
    if (!self)
        return;
    clear(self);
    free(self->entries);
    free(self->calls);
    free(self);
    *self_p = NULL;
}

static int add(eddy_sync_list_t *self, bool is_dir, int fd, const char *path, eddy_err_t *err)
{
    /* A directory already listed need not be synced twice. */
    for (size_t i = 0; is_dir && i < self->count; i++)
        if (self->entries[i].is_dir && !strcmp(self->entries[i].path, path))
            return 0;
    if (self->count == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 4;
        sync_entry_t *e = realloc(self->entries, cap * sizeof *e);
        if (!e)
            goto oom;
        self->entries = e;
        self->cap = cap;
    }
    char *copy = strdup(path);
    if (!copy)
        goto oom;
    self->entries[self->count++] = (sync_entry_t){is_dir, fd, copy};
    return 0;
oom:
    if (fd >= 0)
        close(fd);
    return eddy_err_set(err, "out of memory");
}

int eddy_sync_list_add_file(eddy_sync_list_t *self, int fd, const char *path, eddy_err_t *err)
{
    return add(self, false, fd, path, err);
}

int eddy_sync_list_add_dir(eddy_sync_list_t *self, const char *path, eddy_err_t *err)
{
    return add(self, true, -1, path, err);
}

int eddy_sync_list_add_call(eddy_sync_list_t *self, eddy_sync_call_fn fn, void *arg,
                            void (*release)(void *arg), eddy_err_t *err)
{
    if (self->n_calls == self->calls_cap) {
        size_t cap = self->calls_cap ? self->calls_cap * 2 : 2;
        sync_call_t *c = realloc(self->calls, cap * sizeof *c);
        if (!c) {
            if (release)
                release(arg);
            return eddy_err_set(err, "out of memory");
        }
        self->calls = c;
        self->calls_cap = cap;
    }
    self->calls[self->n_calls++] = (sync_call_t){fn, arg, release};
    return 0;
}

bool eddy_sync_list_empty(const eddy_sync_list_t *self)
{
    return self->count == 0 && self->n_calls == 0;
}

int eddy_sync_list_run(eddy_sync_list_t *self, eddy_err_t *err)
{
    int rc = 0;
    for (size_t i = 0; i < self->count; i++) {
        sync_entry_t *e = &self->entries[i];
        if (e->is_dir)
            continue;
        if (fsync(e->fd) != 0 && rc == 0)
            rc = eddy_err_set(err, "cannot write %s: %s", e->path, strerror(errno));
        if (close(e->fd) != 0 && rc == 0)
            rc = eddy_err_set(err, "cannot write %s: %s", e->path, strerror(errno));
        e->fd = -1;
    }
    for (size_t i = 0; i < self->count; i++) {
        eddy_err_t derr = {{0}};
        if (self->entries[i].is_dir && eddy_fsync_dir(self->entries[i].path, &derr) < 0 &&
            rc == 0) {
            if (err)
                *err = derr;
            rc = -1;
        }
    }
    for (size_t i = 0; i < self->n_calls; i++) {
        eddy_err_t cerr = {{0}};
        if (self->calls[i].fn(self->calls[i].arg, &cerr) < 0 && rc == 0) {
            if (err)
                *err = cerr;
            rc = -1;
        }
    }
    clear(self);
    return rc;
}
