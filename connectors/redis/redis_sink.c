/* redis_sink.c - the Redis Streams sink: XADD of every output record
 * (redis.h). At least once: records go to a writer thread through a bounded
 * queue; the thread XADDs them in pipelined batches, and a batch leaves the
 * queue only once Redis confirmed every entry of it, so after a lost
 * connection it is sent again whole (entries may repeat, none is lost).
 * prepare() (at every barrier and at end of input) lets the checkpoint's ACK
 * go only after the queue is empty, so a checkpoint covers only records
 * that are in Redis; records after it are replayed after a failure. */
#include "connectors/redis/redis.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "connectors/redis/redis_conn.h"

#define SINK_BATCH 512
#define SINK_QUEUE_BYTES (64u << 20)
/* How long process() (queue full) or prepare() (draining) may wait for a
 * Redis that does not answer before the task fails and the job recovers. */
#define SINK_STALL_MS 60000

typedef struct sink_row {
    char *data;
    uint32_t len;
    uint8_t kind;
    int64_t value;
} sink_row_t;

typedef struct sink_shared {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* rows added, rows written, stop */
    int refs;
    bool stop;
    sink_row_t *rows; /* ring */
    size_t head, count, cap, bytes;
    uint64_t written;
    char host[256];
    uint16_t port;
    char stream[EDDY_REDIS_NAME_MAX];
    char what[600];
} sink_shared_t;

typedef struct redis_sink {
    sink_shared_t *sh;
} redis_sink_t;

static const char *kind_text(uint8_t kind)
{
    static const char *names[] = {"+I", "-U", "+U", "-D", "late", "partial"};
    return kind <= EDDY_ROW_KIND_MAX ? names[kind] : "?";
}

static void shared_release(sink_shared_t *sh)
{
    pthread_mutex_lock(&sh->lock);
    bool last = --sh->refs == 0;
    pthread_mutex_unlock(&sh->lock);
    if (!last)
        return;
    for (size_t i = 0; i < sh->count; i++)
        free(sh->rows[(sh->head + i) % sh->cap].data);
    free(sh->rows);
    pthread_cond_destroy(&sh->changed);
    pthread_mutex_destroy(&sh->lock);
    free(sh);
}

/* Sends rows [0, n) of the queue front; 0 when Redis took all of them. */
static int send_batch(redisContext *c, sink_shared_t *sh, size_t n, char *why, size_t why_size)
{
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&sh->lock);
        sink_row_t row = sh->rows[(sh->head + i) % sh->cap];
        pthread_mutex_unlock(&sh->lock);
        char value[24];
        snprintf(value, sizeof value, "%" PRId64, row.value);
        const char *argv[] = {"XADD", sh->stream, "*", "line", row.data, "value", value, "kind",
                              kind_text(row.kind)};
        size_t lens[] = {4, strlen(sh->stream), 1, 4, row.len, 5, strlen(value), 4,
                         strlen(kind_text(row.kind))};
        if (redisAppendCommandArgv(c, 9, argv, lens) != REDIS_OK) {
            snprintf(why, why_size, "%s", c->errstr);
            return -1;
        }
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            snprintf(why, why_size, "%s", c->errstr);
            return -1;
        }
        if (r->type == REDIS_REPLY_ERROR && rc == 0) {
            snprintf(why, why_size, "XADD: %s", r->str);
            rc = -1;
        }
        freeReplyObject(r);
    }
    return rc;
}

static void *writer_thread(void *arg)
{
    sink_shared_t *sh = arg;
    redisContext *c = NULL;
    eddy_redis_retry_t retry = {0};
    char why[512];
    pthread_mutex_lock(&sh->lock);
    while (!sh->stop) {
        if (sh->count == 0) {
            pthread_cond_wait(&sh->changed, &sh->lock);
            continue;
        }
        size_t n = sh->count < SINK_BATCH ? sh->count : SINK_BATCH;
        pthread_mutex_unlock(&sh->lock);
        if (!c)
            c = eddy_redis_connect(sh->host, sh->port, why, sizeof why);
        int rc = c ? send_batch(c, sh, n, why, sizeof why) : -1;
        if (rc == 0)
            eddy_redis_retry_ok(&retry, sh->what);
        pthread_mutex_lock(&sh->lock);
        if (rc == 0) {
            for (size_t i = 0; i < n; i++) {
                sink_row_t *row = &sh->rows[sh->head];
                sh->bytes -= row->len;
                free(row->data);
                sh->head = (sh->head + 1) % sh->cap;
            }
            sh->count -= n;
            sh->written += n;
            pthread_cond_broadcast(&sh->changed);
            continue;
        }
        if (c) {
            redisFree(c);
            c = NULL;
        }
        uint32_t wait = eddy_redis_retry_failed(&retry, sh->what, why);
        if (!sh->stop)
            eddy_redis_wait(&sh->changed, &sh->lock, wait);
    }
    pthread_mutex_unlock(&sh->lock);
    if (c)
        redisFree(c);
    shared_release(sh);
    return NULL;
}

static void *sink_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    const eddy_redis_uri_t *uri = ctx->config;
    if (uri->n_streams != 1 || eddy_redis_is_pattern(uri->streams[0]) || uri->bounded ||
        uri->group[0]) {
        eddy_err_set(err, "a redis sink writes to exactly one stream, with no parameters");
        return NULL;
    }
    redis_sink_t *s = calloc(1, sizeof *s);
    sink_shared_t *sh = calloc(1, sizeof *sh);
    if (sh)
        sh->rows = calloc(1024, sizeof *sh->rows);
    if (!s || !sh || !sh->rows) {
        if (sh)
            free(sh->rows);
        free(sh);
        free(s);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    sh->cap = 1024;
    sh->refs = 2;
    snprintf(sh->host, sizeof sh->host, "%s", uri->host);
    sh->port = uri->port;
    snprintf(sh->stream, sizeof sh->stream, "%s", uri->streams[0]);
    snprintf(sh->what, sizeof sh->what, "redis sink %s:%u/%s", uri->host, uri->port,
             uri->streams[0]);
    pthread_mutex_init(&sh->lock, NULL);
    pthread_cond_init(&sh->changed, NULL);
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&thread, &attr, writer_thread, sh);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        sh->refs = 1;
        shared_release(sh);
        free(s);
        eddy_err_set(err, "redis sink: cannot start its writer thread: %s", strerror(rc));
        return NULL;
    }
    s->sh = sh;
    return s;
}

/* Waits (lock held) until cond_fn holds or SINK_STALL_MS passed. */
static int wait_for(sink_shared_t *sh, bool (*cond_fn)(const sink_shared_t *, size_t), size_t arg,
                    const char *doing, eddy_err_t *err)
{
    uint64_t deadline = eddy_mono_ms() + SINK_STALL_MS;
    while (!cond_fn(sh, arg)) {
        uint64_t now = eddy_mono_ms();
        if (now >= deadline)
            return eddy_err_set(err, "%s: Redis took no entries for %d s while %s", sh->what,
                                SINK_STALL_MS / 1000, doing);
        eddy_redis_wait(&sh->changed, &sh->lock, (uint32_t)(deadline - now));
    }
    return 0;
}

static bool has_room(const sink_shared_t *sh, size_t len)
{
    return sh->bytes + len <= SINK_QUEUE_BYTES || sh->count == 0;
}

static bool drained(const sink_shared_t *sh, size_t unused)
{
    (void)unused;
    return sh->count == 0;
}

static int sink_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                        eddy_err_t *err)
{
    (void)out;
    sink_shared_t *sh = ((redis_sink_t *)self)->sh;
    char *copy = malloc(rec->len ? rec->len : 1);
    if (!copy)
        return eddy_err_set(err, "out of memory");
    memcpy(copy, rec->data, rec->len);
    pthread_mutex_lock(&sh->lock);
    /* A full queue means Redis is slower than the job or away: waiting here
     * is the sink's backpressure (bounded by SINK_STALL_MS). */
    if (wait_for(sh, has_room, rec->len, "the queue was full", err) < 0) {
        pthread_mutex_unlock(&sh->lock);
        free(copy);
        return -1;
    }
    if (sh->count == sh->cap) {
        sink_row_t *rows = malloc(sh->cap * 2 * sizeof *rows);
        if (!rows) {
            pthread_mutex_unlock(&sh->lock);
            free(copy);
            return eddy_err_set(err, "out of memory");
        }
        for (size_t i = 0; i < sh->count; i++)
            rows[i] = sh->rows[(sh->head + i) % sh->cap];
        free(sh->rows);
        sh->rows = rows;
        sh->head = 0;
        sh->cap *= 2;
    }
    sh->rows[(sh->head + sh->count) % sh->cap] =
        (sink_row_t){copy, rec->len, rec->kind, rec->value};
    sh->count++;
    sh->bytes += rec->len;
    pthread_cond_broadcast(&sh->changed);
    pthread_mutex_unlock(&sh->lock);
    return 0;
}

static int sink_prepare(void *self, uint64_t checkpoint, eddy_sync_list_t *sync, eddy_err_t *err)
{
    (void)checkpoint;
    (void)sync;
    sink_shared_t *sh = ((redis_sink_t *)self)->sh;
    pthread_mutex_lock(&sh->lock);
    int rc = wait_for(sh, drained, 0, "a checkpoint waited for them", err);
    pthread_mutex_unlock(&sh->lock);
    return rc;
}

static void sink_close(void *self)
{
    redis_sink_t *s = self;
    pthread_mutex_lock(&s->sh->lock);
    s->sh->stop = true;
    pthread_cond_broadcast(&s->sh->changed);
    pthread_mutex_unlock(&s->sh->lock);
    shared_release(s->sh);
    free(s);
}

const eddy_operator_ops_t eddy_redis_sink_ops = {
    .kind = "redis_sink", .open = sink_open, .process = sink_process, .prepare = sink_prepare,
    .close = sink_close};
