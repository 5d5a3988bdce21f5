/* metastore_async.c - runs metadata-store calls on one background thread so
 * that the coordinator's event loop never waits on etcd (see
 * metastore_async.h for the contract).
 *
 * Owns: the worker thread, the FIFO of submitted calls, the list of
 * finished calls waiting for dispatch, and the eventfd that tells the loop
 * about them. One mutex guards both lists; the worker drops it around every
 * store call, so submitting never waits on the store. One condition variable
 * ("wake") wakes the worker for new work and cuts a retry's backoff short at
 * destroy; another ("idle") tells destroy that the queue has drained.
 *
 * Why a call in flight delays destroy: the store has no way to abort a
 * request, and the store is borrowed (the caller frees it right after), so
 * destroy must join the thread. It therefore returns after drain_ms plus at
 * most the rest of one request (the store's own timeout, 3 s by default for
 * etcd); a backoff wait between attempts ends at once.
 *
 * A key the store rejects (eddy_metastore_key_check) fails at once without
 * retries: no number of attempts would fix it, and a call retried forever
 * would block every call behind it. */
#include "state/metastore_async.h"

#include "state/metastore_lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_FIRST_MS 100u
#define BACKOFF_MAX_MS 5000u

typedef enum {
    CALL_PUT,
    CALL_DELETE,
    CALL_GET,
    CALL_LEASE_GRANT,
    CALL_LEASE_KEEPALIVE,
    CALL_LEASE_REVOKE,
    CALL_PUT_LEASED,
} call_kind_t;

typedef struct call {
    call_kind_t kind;
    char *key;
    char *value; /* put: the bytes to store; get: what was found */
    size_t len;
    int64_t lease;      /* grant: the lease granted; others: the lease acted on */
    int64_t ttl_s;      /* grant: the TTL asked for; keepalive: the TTL left (0: gone) */
    int retries;
    bool out_of_memory; /* copying key or value failed at submission */
    eddy_meta_done_fn done;
    void *arg;
    int rc;
    unsigned attempts;
    eddy_err_t err;
    struct call *next;
} call_t;

typedef struct call_list {
    call_t *head, *tail;
} call_list_t;

struct eddy_metastore_async {
    eddy_metastore_t *store;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* worker: new call or stopping */
    pthread_cond_t idle; /* destroy: a call finished */
    call_list_t queued;  /* submitted, not started; FIFO */
    call_list_t finished; /* waiting for dispatch; FIFO */
    bool running;        /* the worker holds a call */
    bool stopping;
    size_t pending;      /* queued + running + finished */
    int event_fd;
};

/* ---- small helpers --------------------------------------------------------- */

static void list_push(call_list_t *l, call_t *c)
{
    c->next = NULL;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
}

static call_t *list_pop(call_list_t *l)
{
    call_t *c = l->head;
    if (c) {
        l->head = c->next;
        if (!l->head)
            l->tail = NULL;
        c->next = NULL;
    }
    return c;
}

static void call_free(call_t *c)
{
    if (!c)
        return;
    free(c->key);
    free(c->value);
    free(c);
}

static void free_list(call_list_t *l)
{
    call_t *c;
    while ((c = list_pop(l)))
        call_free(c);
}

static struct timespec mono_after_ms(uint64_t ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

static bool mono_passed(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline->tv_sec ||
           (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

/* ---- the worker ------------------------------------------------------------- */

/* One attempt, without the lock. */
static int attempt(eddy_metastore_t *store, call_t *c)
{
    eddy_err_clear(&c->err);
    switch (c->kind) {
    case CALL_PUT:
        return eddy_metastore_put(store, c->key, c->value, c->len, &c->err);
    case CALL_DELETE:
        return eddy_metastore_delete(store, c->key, &c->err);
    case CALL_GET:
        free(c->value);
        c->value = NULL;
        c->len = 0;
        return eddy_metastore_get(store, c->key, &c->value, &c->len, &c->err);
    case CALL_LEASE_GRANT:
        c->lease = 0;
        return eddy_metastore_lease_grant(store, (uint32_t)c->ttl_s, &c->lease, &c->err);
    case CALL_LEASE_KEEPALIVE:
        c->ttl_s = 0;
        return eddy_metastore_lease_keepalive(store, c->lease, &c->ttl_s, &c->err);
    case CALL_LEASE_REVOKE:
        return eddy_metastore_lease_revoke(store, c->lease, &c->err);
    case CALL_PUT_LEASED:
        return eddy_metastore_put_leased(store, c->key, c->value, c->len, c->lease, &c->err);
    }
    return eddy_err_set(&c->err, "unknown metastore call");
}

/* Runs c to its end with self->lock held on entry and exit. Returns false
 * when destroy abandoned it during a backoff wait. */
static bool run_call(eddy_metastore_async_t *self, call_t *c)
{
    if (c->out_of_memory) {
        c->attempts = 1;
        c->rc = eddy_err_set(&c->err, "out of memory queueing a metastore call");
        return true;
    }
    /* a lease call's key is only a label passed back to the caller */
    bool key_used = c->kind == CALL_PUT || c->kind == CALL_DELETE || c->kind == CALL_GET ||
                    c->kind == CALL_PUT_LEASED;
    if ((key_used || c->key) && eddy_metastore_key_check(c->key, &c->err) < 0) {
        c->attempts = 1;
        c->rc = -1;
        return true;
    }
    unsigned backoff_ms = BACKOFF_FIRST_MS;
    for (;;) {
        c->attempts++;
        pthread_mutex_unlock(&self->lock);
        c->rc = attempt(self->store, c);
        pthread_mutex_lock(&self->lock);
        if (c->rc >= 0)
            return true;
        if (c->retries != EDDY_META_RETRY_FOREVER && c->attempts > (unsigned)c->retries)
            return true;
        struct timespec until = mono_after_ms(backoff_ms);
        while (!self->stopping && !mono_passed(&until))
            pthread_cond_timedwait(&self->wake, &self->lock, &until);
        if (self->stopping)
            return false;
        backoff_ms = backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff_ms * 2;
    }
}

static void signal_loop(eddy_metastore_async_t *self)
{
    uint64_t one = 1;
    ssize_t w = write(self->event_fd, &one, sizeof one);
    (void)w; /* EAGAIN only when the counter is saturated: it is readable anyway */
}

static void *worker_main(void *arg)
{
    eddy_metastore_async_t *self = arg;
    pthread_mutex_lock(&self->lock);
    for (;;) {
        while (!self->stopping && !self->queued.head)
            pthread_cond_wait(&self->wake, &self->lock);
        if (self->stopping)
            break;
        call_t *c = list_pop(&self->queued);
        self->running = true;
        bool finished = run_call(self, c);
        self->running = false;
        if (finished) {
            list_push(&self->finished, c);
            signal_loop(self);
        } else {
            self->pending--;
            call_free(c);
        }
        pthread_cond_broadcast(&self->idle);
    }
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

/* ---- public API ---------------------------------------------------------------- */

eddy_metastore_async_t *eddy_metastore_async_new(eddy_metastore_t *store, eddy_err_t *err)
{
    if (!store) {
        eddy_err_set(err, "metastore executor: no store");
        return NULL;
    }
    eddy_metastore_async_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->store = store;
    self->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->event_fd < 0) {
        eddy_err_set(err, "metastore executor: eventfd: %s", strerror(errno));
        free(self);
        return NULL;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->wake, &attr);
    pthread_cond_init(&self->idle, &attr);
    pthread_condattr_destroy(&attr);
    int rc = pthread_create(&self->thread, NULL, worker_main, self);
    if (rc != 0) {
        eddy_err_set(err, "metastore executor: cannot start its thread: %s", strerror(rc));
        pthread_cond_destroy(&self->idle);
        pthread_cond_destroy(&self->wake);
        pthread_mutex_destroy(&self->lock);
        close(self->event_fd);
        free(self);
        return NULL;
    }
    return self;
}

void eddy_metastore_async_destroy(eddy_metastore_async_t **self_p, unsigned drain_ms)
{
    eddy_metastore_async_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    pthread_mutex_lock(&self->lock);
    struct timespec until = mono_after_ms(drain_ms);
    while ((self->queued.head || self->running) && !mono_passed(&until))
        pthread_cond_timedwait(&self->idle, &self->lock, &until);
    self->stopping = true;
    pthread_cond_broadcast(&self->wake);
    pthread_mutex_unlock(&self->lock);
    pthread_join(self->thread, NULL);

    /* Callbacks of finished calls run now; ones they submit are dropped. */
    eddy_metastore_async_dispatch(self);
    free_list(&self->queued);
    free_list(&self->finished);
    pthread_cond_destroy(&self->idle);
    pthread_cond_destroy(&self->wake);
    pthread_mutex_destroy(&self->lock);
    close(self->event_fd);
    free(self);
    *self_p = NULL;
}

int eddy_metastore_async_fd(const eddy_metastore_async_t *self)
{
    return self ? self->event_fd : -1;
}

static void submit_lease(eddy_metastore_async_t *self, call_kind_t kind, const char *key,
                         const char *value, size_t len, int64_t lease, int64_t ttl_s,
                         int retries, eddy_meta_done_fn done, void *arg)
{
    if (!self)
        return;
    call_t *c = calloc(1, sizeof *c);
    if (!c)
        return; /* nothing left to report it with; the loop will fail elsewhere */
    c->kind = kind;
    c->lease = lease;
    c->ttl_s = ttl_s;
    c->retries = retries < 0 ? EDDY_META_RETRY_FOREVER : retries;
    c->done = done;
    c->arg = arg;
    c->key = key ? strdup(key) : NULL; /* a NULL key is reported by the key check */
    c->out_of_memory = key && !c->key;
    if (kind == CALL_PUT || kind == CALL_PUT_LEASED) {
        c->value = malloc(len + 1);
        if (c->value) {
            if (len)
                memcpy(c->value, value, len);
            c->value[len] = '\0';
            c->len = len;
        } else {
            c->out_of_memory = true;
        }
    }
    pthread_mutex_lock(&self->lock);
    if (self->stopping) { /* submitted by a callback during destroy */
        pthread_mutex_unlock(&self->lock);
        call_free(c);
        return;
    }
    list_push(&self->queued, c);
    self->pending++;
    pthread_cond_broadcast(&self->wake);
    pthread_mutex_unlock(&self->lock);
}

static void submit(eddy_metastore_async_t *self, call_kind_t kind, const char *key,
                   const char *value, size_t len, int retries, eddy_meta_done_fn done, void *arg)
{
    submit_lease(self, kind, key, value, len, 0, 0, retries, done, arg);
}

void eddy_metastore_async_put(eddy_metastore_async_t *self, const char *key, const char *value,
                              size_t len, int retries, eddy_meta_done_fn done, void *arg)
{
    submit(self, CALL_PUT, key, value, len, retries, done, arg);
}

void eddy_metastore_async_delete(eddy_metastore_async_t *self, const char *key, int retries,
                                 eddy_meta_done_fn done, void *arg)
{
    submit(self, CALL_DELETE, key, NULL, 0, retries, done, arg);
}

void eddy_metastore_async_get(eddy_metastore_async_t *self, const char *key, int retries,
                              eddy_meta_done_fn done, void *arg)
{
    submit(self, CALL_GET, key, NULL, 0, retries, done, arg);
}

void eddy_metastore_async_lease_grant(eddy_metastore_async_t *self, const char *label,
                                      uint32_t ttl_s, int retries, eddy_meta_done_fn done,
                                      void *arg)
{
    submit_lease(self, CALL_LEASE_GRANT, label, NULL, 0, 0, ttl_s, retries, done, arg);
}

void eddy_metastore_async_lease_keepalive(eddy_metastore_async_t *self, const char *label,
                                          int64_t lease, int retries, eddy_meta_done_fn done,
                                          void *arg)
{
    submit_lease(self, CALL_LEASE_KEEPALIVE, label, NULL, 0, lease, 0, retries, done, arg);
}

void eddy_metastore_async_lease_revoke(eddy_metastore_async_t *self, const char *label,
                                       int64_t lease, int retries, eddy_meta_done_fn done,
                                       void *arg)
{
    submit_lease(self, CALL_LEASE_REVOKE, label, NULL, 0, lease, 0, retries, done, arg);
}

void eddy_metastore_async_put_leased(eddy_metastore_async_t *self, const char *key,
                                     const char *value, size_t len, int64_t lease, int retries,
                                     eddy_meta_done_fn done, void *arg)
{
    submit_lease(self, CALL_PUT_LEASED, key, value, len, lease, 0, retries, done, arg);
}

int eddy_metastore_async_dispatch(eddy_metastore_async_t *self)
{
    if (!self)
        return 0;
    uint64_t count;
    ssize_t r = read(self->event_fd, &count, sizeof count); /* reset before taking the list */
    (void)r;
    pthread_mutex_lock(&self->lock);
    call_list_t ready = self->finished;
    self->finished = (call_list_t){0};
    pthread_mutex_unlock(&self->lock);
    int ran = 0;
    call_t *c;
    while ((c = list_pop(&ready))) {
        pthread_mutex_lock(&self->lock);
        self->pending--;
        pthread_mutex_unlock(&self->lock);
        if (c->done) {
            eddy_meta_result_t res = {
                .rc = c->rc,
                .key = c->key,
                .value = c->kind == CALL_GET ? c->value : NULL,
                .len = c->kind == CALL_GET ? c->len : 0,
                .err = c->err,
                .attempts = c->attempts,
                .lease = c->lease,
                .ttl_s = c->ttl_s,
            };
            c->done(c->arg, &res);
        }
        call_free(c);
        ran++;
    }
    return ran;
}

size_t eddy_metastore_async_pending(const eddy_metastore_async_t *self)
{
    if (!self)
        return 0;
    /* The lock is not part of the object's logical state. */
    pthread_mutex_t *lock = (pthread_mutex_t *)&self->lock;
    pthread_mutex_lock(lock);
    size_t n = self->pending;
    pthread_mutex_unlock(lock);
    return n;
}
