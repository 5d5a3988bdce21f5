/* metastore_async.c - PLACEHOLDER for the threaded implementation.
 *
 * Same API and ordering as state/metastore_async.h promises (FIFO, retries
 * with backoff 100 ms doubling to 5 s, callbacks on the dispatching thread),
 * but the calls run synchronously inside eddy_metastore_async_dispatch(),
 * head of the queue first; a failed call waiting for its retry holds back
 * the calls behind it, as the real background thread would. The lead
 * replaces this file with the threaded one at merge; until then a slow
 * store still stalls the caller for one call's timeout per dispatch. */
#include "state/metastore_async.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/clock.h"

typedef enum { CALL_PUT, CALL_DELETE, CALL_GET } call_kind_t;

typedef struct call {
    call_kind_t kind;
    char *key;
    char *value;
    size_t len;
    int retries;
    unsigned attempts;
    uint64_t not_before_ms;
    eddy_meta_done_fn done;
    void *arg;
    struct call *next;
} call_t;

struct eddy_metastore_async {
    eddy_metastore_t *store;
    int fd;
    call_t *head, *tail;
    size_t pending;
};

static void signal_fd(eddy_metastore_async_t *self)
{
    uint64_t one = 1;
    ssize_t n = write(self->fd, &one, sizeof one);
    (void)n;
}

static void drain_fd(eddy_metastore_async_t *self)
{
    uint64_t v;
    ssize_t n = read(self->fd, &v, sizeof v);
    (void)n;
}

eddy_metastore_async_t *eddy_metastore_async_new(eddy_metastore_t *store, eddy_err_t *err)
{
    eddy_metastore_async_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->store = store;
    self->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->fd < 0) {
        eddy_err_set(err, "eventfd: %s", strerror(errno));
        free(self);
        return NULL;
    }
    return self;
}

static void free_call(call_t *call)
{
    free(call->key);
    free(call->value);
    free(call);
}

static uint64_t backoff_ms(unsigned attempts)
{
    uint64_t ms = 100;
    for (unsigned i = 1; i < attempts && ms < 5000; i++)
        ms *= 2;
    return ms < 5000 ? ms : 5000;
}

/* Runs the head call once; true when it is finished (callback ran). */
static bool run_head(eddy_metastore_async_t *self)
{
    call_t *call = self->head;
    eddy_meta_result_t res = {.key = call->key};
    eddy_err_t err = {{0}};
    char *value = NULL;
    size_t len = 0;
    call->attempts++;
    switch (call->kind) {
    case CALL_PUT:
        res.rc = eddy_metastore_put(self->store, call->key, call->value, call->len, &err);
        break;
    case CALL_DELETE:
        res.rc = eddy_metastore_delete(self->store, call->key, &err);
        break;
    case CALL_GET:
        res.rc = eddy_metastore_get(self->store, call->key, &value, &len, &err);
        break;
    }
    bool retry = res.rc < 0 && (call->retries == EDDY_META_RETRY_FOREVER ||
                                call->attempts <= (unsigned)call->retries);
    if (retry) {
        call->not_before_ms = eddy_mono_ms() + backoff_ms(call->attempts);
        return false;
    }
    self->head = call->next;
    if (!self->head)
        self->tail = NULL;
    self->pending--;
    res.value = value;
    res.len = len;
    res.err = err;
    res.attempts = call->attempts;
    if (call->done)
        call->done(call->arg, &res);
    free(value);
    free_call(call);
    return true;
}

int eddy_metastore_async_dispatch(eddy_metastore_async_t *self)
{
    if (!self)
        return 0;
    drain_fd(self);
    int ran = 0;
    /* only the calls queued before this dispatch: callbacks may queue more */
    size_t budget = self->pending;
    while (self->head && budget-- > 0) {
        if (self->head->not_before_ms > eddy_mono_ms())
            break;
        if (!run_head(self))
            break;
        ran++;
    }
    if (self->head && self->head->not_before_ms <= eddy_mono_ms())
        signal_fd(self);
    return ran;
}

void eddy_metastore_async_destroy(eddy_metastore_async_t **self_p, unsigned drain_ms)
{
    eddy_metastore_async_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    uint64_t deadline = eddy_mono_ms() + drain_ms;
    while (self->head && eddy_mono_ms() < deadline) {
        if (self->head->not_before_ms > eddy_mono_ms()) {
            usleep(10000);
            continue;
        }
        run_head(self);
    }
    while (self->head) {
        call_t *call = self->head;
        self->head = call->next;
        free_call(call);
    }
    close(self->fd);
    free(self);
    *self_p = NULL;
}

int eddy_metastore_async_fd(const eddy_metastore_async_t *self)
{
    return self->fd;
}

static void enqueue(eddy_metastore_async_t *self, call_kind_t kind, const char *key,
                    const char *value, size_t len, int retries, eddy_meta_done_fn done, void *arg)
{
    call_t *call = calloc(1, sizeof *call);
    if (!call)
        return;
    call->kind = kind;
    call->key = strdup(key);
    if (value) {
        call->value = malloc(len + 1);
        if (call->value) {
            memcpy(call->value, value, len);
            call->value[len] = '\0';
        }
    }
    if (!call->key || (value && !call->value)) {
        free_call(call);
        return;
    }
    call->len = len;
    call->retries = retries;
    call->done = done;
    call->arg = arg;
    if (self->tail)
        self->tail->next = call;
    else
        self->head = call;
    self->tail = call;
    self->pending++;
    signal_fd(self);
}

void eddy_metastore_async_put(eddy_metastore_async_t *self, const char *key, const char *value,
                              size_t len, int retries, eddy_meta_done_fn done, void *arg)
{
    enqueue(self, CALL_PUT, key, value, len, retries, done, arg);
}

void eddy_metastore_async_delete(eddy_metastore_async_t *self, const char *key, int retries,
                                 eddy_meta_done_fn done, void *arg)
{
    enqueue(self, CALL_DELETE, key, NULL, 0, retries, done, arg);
}

void eddy_metastore_async_get(eddy_metastore_async_t *self, const char *key, int retries,
                              eddy_meta_done_fn done, void *arg)
{
    enqueue(self, CALL_GET, key, NULL, 0, retries, done, arg);
}

size_t eddy_metastore_async_pending(const eddy_metastore_async_t *self)
{
    return self ? self->pending : 0;
}
