/* redis_source.c - the Redis Streams source (redis.h).
 *
 * Two sides share one refcounted struct: the reader thread owns the
 * connection, the read cursors and the ids it still has to XACK; poll() on
 * the worker loop takes entries off the bounded queue and records, per
 * stream, the id of the last entry it emitted: that is the source's state.
 * The thread is detached and lets go of the struct itself, so close() never
 * waits for a Redis command in flight. */
#include "connectors/redis/redis.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/clock.h"
#include "common/flags.h"
#include "connectors/redis/redis_conn.h"

#define QUEUE_MAX 4096          /* entries between the thread and poll() */
#define READ_COUNT 512          /* entries per XREAD */
#define READ_BLOCK_MS "100"     /* an idle XREAD returns this often, to see stop */
#define RESCAN_MS 1000          /* patterns: look for new streams this often */
#define LAG_MS 1000             /* how often the lag is measured */
#define STATE_MAGIC "eddy-redis-source 1\n"
#define SNAPSHOTS_MAX 64        /* states taken but not yet committed */

typedef struct id_list {
    eddy_redis_id_t *ids;
    size_t count, cap;
} id_list_t;

typedef struct stream {
    char name[EDDY_REDIS_NAME_MAX];
    /* poll side (under lock) */
    eddy_redis_id_t emitted;   /* last entry emitted (0-0: none) */
    uint64_t read;             /* entries emitted or skipped since the stream began */
    eddy_redis_id_t ack_upto;  /* committed: XACK everything up to it */
    /* thread side */
    eddy_redis_id_t cursor;    /* last entry read */
    bool has_end;
    eddy_redis_id_t end;       /* bounded: last id present at the job's start */
    bool done;                 /* bounded and read up to end */
    bool pending_phase;        /* group: re-read own pending entries first */
    eddy_redis_id_t pending_from; /* group: the pending entries are read after this */
    bool group_ready;          /* group exists on this server */
    id_list_t unacked;         /* group: read, not yet acknowledged */
} stream_t;

typedef struct entry {
    uint32_t stream;
    eddy_redis_id_t id;
    uint32_t len;
    char *line;
} entry_t;

typedef struct restored {
    char name[EDDY_REDIS_NAME_MAX];
    uint64_t read;
    eddy_redis_id_t id, end;
    bool has_end;
} restored_t;

typedef struct snapshot {
    uint64_t seq;
    size_t n;
    eddy_redis_id_t *ids; /* per stream index, as emitted at the time */
} snapshot_t;

typedef struct shared {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int refs;
    bool stop;
    eddy_redis_uri_t uri;
    uint32_t instance, parallelism;
    char consumer[64];
    char what[600];
    stream_t *streams;          /* grows; read under lock */
    size_t n_streams, cap_streams;
    restored_t *restored;
    size_t n_restored;
    entry_t *queue;             /* ring of QUEUE_MAX */
    size_t head, count;
    bool all_done;              /* bounded: every stream read to its end */
    bool scanned;               /* first discovery finished */
    bool ack_wanted;
    char fatal[512];            /* an error retrying cannot fix */
    uint64_t skipped;           /* entries without a `line` field */
    int64_t lag;                /* entries not read yet, -1 unknown */
} shared_t;

typedef struct redis_source {
    shared_t *sh;
    int64_t *lag_out;           /* ctx->source_lag */
    snapshot_t snaps[SNAPSHOTS_MAX];
    size_t n_snaps;
    uint64_t next_seq;
} redis_source_t;

/* ---- shared struct ------------------------------------------------------- */

static void shared_release(shared_t *sh)
{
    pthread_mutex_lock(&sh->lock);
    bool last = --sh->refs == 0;
    pthread_mutex_unlock(&sh->lock);
    if (!last)
        return;
    for (size_t i = 0; i < sh->count; i++)
        free(sh->queue[(sh->head + i) % QUEUE_MAX].line);
    for (size_t i = 0; i < sh->n_streams; i++)
        free(sh->streams[i].unacked.ids);
    free(sh->queue);
    free(sh->streams);
    free(sh->restored);
    pthread_cond_destroy(&sh->changed);
    pthread_mutex_destroy(&sh->lock);
    free(sh);
}

/* A stream named in the URI goes by its place in the list, so a list of at
 * least p streams gives every instance one; a stream found by a pattern
 * (and not named) goes by the hash of its name, which stays put as streams
 * come and go. Either way exactly one instance reads it. */
static bool listed(const shared_t *sh, const char *name, uint32_t *index)
{
    for (uint32_t k = 0; k < sh->uri.n_streams; k++)
        if (!eddy_redis_is_pattern(sh->uri.streams[k]) && !strcmp(sh->uri.streams[k], name)) {
            *index = k;
            return true;
        }
    return false;
}

static bool mine(const shared_t *sh, const char *name)
{
    uint32_t k;
    if (listed(sh, name, &k))
        return k % sh->parallelism == sh->instance;
    return XXH64(name, strlen(name), 0) % sh->parallelism == sh->instance;
}

/* Adds stream name (lock held) unless known; -1 out of memory. */
static int add_stream(shared_t *sh, const char *name)
{
    for (size_t i = 0; i < sh->n_streams; i++)
        if (!strcmp(sh->streams[i].name, name))
            return 0;
    if (sh->n_streams == sh->cap_streams) {
        size_t cap = sh->cap_streams ? sh->cap_streams * 2 : 8;
        stream_t *s = realloc(sh->streams, cap * sizeof *s);
        if (!s)
            return -1;
        sh->streams = s;
        sh->cap_streams = cap;
    }
    stream_t *s = &sh->streams[sh->n_streams];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->pending_phase = true;
    for (size_t i = 0; i < sh->n_restored; i++) {
        if (strcmp(sh->restored[i].name, name))
            continue;
        s->emitted = s->cursor = s->ack_upto = sh->restored[i].id;
        s->read = sh->restored[i].read;
        s->has_end = sh->restored[i].has_end;
        s->end = sh->restored[i].end;
    }
    sh->n_streams++;
    return 0;
}

/* ---- reader thread -------------------------------------------------------- */

static redisReply *command(redisContext *c, int argc, const char **argv, const size_t *lens,
                           char *why, size_t why_size)
{
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    if (!r)
        snprintf(why, why_size, "%s", c->errstr[0] ? c->errstr : "connection lost");
    return r;
}

static redisReply *command_text(redisContext *c, char *why, size_t why_size, int argc, ...)
{
    const char *argv[8];
    size_t lens[8];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc && i < 8; i++) {
        argv[i] = va_arg(ap, const char *);
        lens[i] = strlen(argv[i]);
    }
    va_end(ap);
    return command(c, argc, argv, lens, why, why_size);
}

/* Finds the streams of this instance: plain names as given, patterns by
 * SCAN ... TYPE stream. 0, or -1 with why (connection trouble). */
static int discover(redisContext *c, shared_t *sh, char *why, size_t why_size)
{
    for (uint32_t k = 0; k < sh->uri.n_streams; k++) {
        const char *name = sh->uri.streams[k];
        if (!eddy_redis_is_pattern(name)) {
            if (mine(sh, name)) {
                pthread_mutex_lock(&sh->lock);
                int rc = add_stream(sh, name);
                pthread_mutex_unlock(&sh->lock);
                if (rc < 0)
                    return snprintf(why, why_size, "out of memory"), -1;
            }
            continue;
        }
        char cursor[32] = "0";
        do {
            redisReply *r = command_text(c, why, why_size, 8, "SCAN", cursor, "MATCH", name,
                                         "COUNT", "1000", "TYPE", "stream");
            if (!r)
                return -1;
            if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
                r->element[0]->type != REDIS_REPLY_STRING ||
                r->element[1]->type != REDIS_REPLY_ARRAY) {
                snprintf(why, why_size, "SCAN: unexpected reply%s%s",
                         r->type == REDIS_REPLY_ERROR ? ": " : "",
                         r->type == REDIS_REPLY_ERROR ? r->str : "");
                freeReplyObject(r);
                return -1;
            }
            snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
            for (size_t i = 0; i < r->element[1]->elements; i++) {
                redisReply *e = r->element[1]->element[i];
                if (e->type != REDIS_REPLY_STRING || e->len >= EDDY_REDIS_NAME_MAX ||
                    memchr(e->str, '\n', e->len) || memchr(e->str, '\t', e->len) ||
                    strlen(e->str) != e->len || !mine(sh, e->str))
                    continue;
                pthread_mutex_lock(&sh->lock);
                int rc = add_stream(sh, e->str);
                pthread_mutex_unlock(&sh->lock);
                if (rc < 0) {
                    freeReplyObject(r);
                    return snprintf(why, why_size, "out of memory"), -1;
                }
            }
            freeReplyObject(r);
        } while (strcmp(cursor, "0"));
    }
    return 0;
}

/* Per-stream setup on a (new) connection: the bounded end (once per job:
 * it is part of the state) and the consumer group. */
static int prepare_stream(redisContext *c, shared_t *sh, stream_t *s, char *why, size_t why_size)
{
    if (sh->uri.bounded && !s->has_end) {
        redisReply *r = command_text(c, why, why_size, 6, "XREVRANGE", s->name, "+", "-", "COUNT", "1");
        if (!r)
            return -1;
        eddy_redis_id_t end = {0, 0};
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
            r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements >= 1 &&
            r->element[0]->element[0]->type == REDIS_REPLY_STRING) {
            if (eddy_redis_id_parse(r->element[0]->element[0]->str,
                                    r->element[0]->element[0]->len, &end) < 0) {
                snprintf(why, why_size, "XREVRANGE %s: bad id", s->name);
                freeReplyObject(r);
                return -1;
            }
        } else if (r->type == REDIS_REPLY_ERROR) {
            snprintf(why, why_size, "XREVRANGE %s: %s", s->name, r->str);
            freeReplyObject(r);
            return -1;
        }
        freeReplyObject(r);
        pthread_mutex_lock(&sh->lock);
        s->end = end;
        s->has_end = true;
        pthread_mutex_unlock(&sh->lock);
    }
    if (sh->uri.group[0] && !s->group_ready) {
        redisReply *r = command_text(c, why, why_size, 6, "XGROUP", "CREATE", s->name,
                                     sh->uri.group, "0", "MKSTREAM");
        if (!r)
            return -1;
        bool ok = r->type != REDIS_REPLY_ERROR || strncmp(r->str, "BUSYGROUP", 9) == 0;
        if (!ok && snprintf(why, why_size, "XGROUP CREATE %s %s: %s", s->name, sh->uri.group,
                            r->str) < 0)
            why[0] = '\0'; /* a long reply is cut to fit: the message is for a person */
        freeReplyObject(r);
        if (!ok)
            return -1;
        s->group_ready = true;
    }
    return 0;
}

static int id_list_push(id_list_t *l, eddy_redis_id_t id)
{
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        eddy_redis_id_t *ids = realloc(l->ids, cap * sizeof *ids);
        if (!ids)
            return -1;
        l->ids = ids;
        l->cap = cap;
    }
    l->ids[l->count++] = id;
    return 0;
}

/* Adds id to the ascending list l unless it is there. */
static int id_list_insert(id_list_t *l, eddy_redis_id_t id)
{
    size_t lo = 0, hi = l->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = eddy_redis_id_cmp(l->ids[mid], id);
        if (c == 0)
            return 0;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (id_list_push(l, id) < 0)
        return -1;
    memmove(l->ids + lo + 1, l->ids + lo, (l->count - 1 - lo) * sizeof *l->ids);
    l->ids[lo] = id;
    return 0;
}

/* XACKs what commit() allowed: the unacked ids <= ack_upto of each stream. */
static int send_acks(redisContext *c, shared_t *sh, char *why, size_t why_size)
{
    for (size_t i = 0;; i++) {
        pthread_mutex_lock(&sh->lock);
        if (i >= sh->n_streams) {
            pthread_mutex_unlock(&sh->lock);
            return 0;
        }
        stream_t *s = &sh->streams[i];
        eddy_redis_id_t upto = s->ack_upto;
        char name[EDDY_REDIS_NAME_MAX];
        snprintf(name, sizeof name, "%s", s->name);
        pthread_mutex_unlock(&sh->lock);
        /* The thread alone changes unacked and streams' addresses only
         * change under add_stream, on this thread. */
        size_t n = 0;
        while (n < s->unacked.count && eddy_redis_id_cmp(s->unacked.ids[n], upto) <= 0)
            n++;
        for (size_t done = 0; done < n;) {
            size_t batch = n - done < 500 ? n - done : 500;
            const char **argv = malloc((3 + batch) * sizeof *argv);
            size_t *lens = malloc((3 + batch) * sizeof *lens);
            char (*ids)[EDDY_REDIS_ID_TEXT] = malloc(batch * sizeof *ids);
            if (!argv || !lens || !ids) {
                free(argv);
                free(lens);
                free(ids);
                return snprintf(why, why_size, "out of memory"), -1;
            }
            argv[0] = "XACK";
            argv[1] = name;
            argv[2] = sh->uri.group;
            for (size_t k = 0; k < batch; k++) {
                eddy_redis_id_format(s->unacked.ids[done + k], ids[k], sizeof ids[k]);
                argv[3 + k] = ids[k];
            }
            for (size_t k = 0; k < 3 + batch; k++)
                lens[k] = strlen(argv[k]);
            redisReply *r = command(c, (int)(3 + batch), argv, lens, why, why_size);
            free(argv);
            free(lens);
            free(ids);
            if (!r)
                return -1;
            bool ok = r->type == REDIS_REPLY_INTEGER;
            if (!ok)
                snprintf(why, why_size, "XACK %s: %s", name,
                         r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            freeReplyObject(r);
            if (!ok)
                return -1;
            done += batch;
        }
        if (n == 0) /* also: no list yet (ids NULL), nothing to move */
            continue;
        memmove(s->unacked.ids, s->unacked.ids + n, (s->unacked.count - n) * sizeof *s->unacked.ids);
        s->unacked.count -= n;
    }
}

/* The "entries-added" and "length" fields of XINFO STREAM (Redis 7+). */
static int stream_counts(redisContext *c, const char *name, long long *added, long long *length,
                         char *why, size_t why_size)
{
    redisReply *r = command_text(c, why, why_size, 3, "XINFO", "STREAM", name);
    if (!r)
        return -1;
    *added = *length = -1;
    if (r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            redisReply *k = r->element[i], *v = r->element[i + 1];
            if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_INTEGER)
                continue;
            if (!strcmp(k->str, "entries-added"))
                *added = v->integer;
            else if (!strcmp(k->str, "length"))
                *length = v->integer;
        }
    /* A stream not created yet has nothing to read. */
    if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "ERR no such key", 15))
        *added = *length = 0;
    freeReplyObject(r);
    return 0;
}

/* Entries of this instance's streams not read yet: added minus read, at
 * most what the stream holds (trimmed entries are never read); -1 when
 * the server does not count added entries. */
static int measure_lag(redisContext *c, shared_t *sh, char *why, size_t why_size)
{
    int64_t lag = 0;
    for (size_t i = 0; i < sh->n_streams; i++) {
        long long added, length;
        if (stream_counts(c, sh->streams[i].name, &added, &length, why, why_size) < 0)
            return -1;
        pthread_mutex_lock(&sh->lock);
        uint64_t read = sh->streams[i].read;
        pthread_mutex_unlock(&sh->lock);
        if (added < 0 || length < 0) {
            lag = -1;
            break;
        }
        int64_t behind = added > (long long)read ? added - (int64_t)read : 0;
        lag += behind < length ? behind : length;
    }
    pthread_mutex_lock(&sh->lock);
    sh->lag = lag;
    pthread_mutex_unlock(&sh->lock);
    return 0;
}

/* Queues the entries of one stream's reply; sets *got to their number. */
static int take_entries(shared_t *sh, size_t si, redisReply *entries, size_t *got, char *why,
                        size_t why_size)
{
    *got = entries->elements;
    for (size_t k = 0; k < entries->elements; k++) {
        redisReply *e = entries->element[k];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[0]->type != REDIS_REPLY_STRING)
            return snprintf(why, why_size, "unexpected entry in a reply"), -1;
        eddy_redis_id_t id;
        if (eddy_redis_id_parse(e->element[0]->str, e->element[0]->len, &id) < 0)
            return snprintf(why, why_size, "bad entry id in a reply"), -1;
        stream_t *s = &sh->streams[si];
        if (sh->uri.group[0] && s->pending_phase) {
            s->pending_from = id;
            /* Pending, but at or before what this source already emitted:
             * read before a lost connection (already listed), or covered
             * by the restored checkpoint, whose acks may have been lost
             * with the old process. Either way it is only to be acked. */
            if (eddy_redis_id_cmp(id, s->cursor) <= 0) {
                if (id_list_insert(&s->unacked, id) < 0)
                    return snprintf(why, why_size, "out of memory"), -1;
                continue;
            }
        }
        if (s->has_end && eddy_redis_id_cmp(id, s->end) > 0) {
            s->done = true;
            break;
        }
        const char *line = NULL;
        size_t len = 0;
        redisReply *fields = e->element[1];
        for (size_t f = 0; fields->type == REDIS_REPLY_ARRAY && f + 1 < fields->elements; f += 2)
            if (fields->element[f]->len == 4 && !memcmp(fields->element[f]->str, "line", 4) &&
                fields->element[f + 1]->type == REDIS_REPLY_STRING) {
                line = fields->element[f + 1]->str;
                len = fields->element[f + 1]->len;
            }
        if (len > EDDY_RECORD_MAX_BYTES)
            line = NULL;
        char *copy = line ? malloc(len ? len : 1) : NULL;
        if (line && !copy)
            return snprintf(why, why_size, "out of memory"), -1;
        if (copy)
            memcpy(copy, line, len);
        if (sh->uri.group[0] && id_list_push(&s->unacked, id) < 0) {
            free(copy);
            return snprintf(why, why_size, "out of memory"), -1;
        }
        pthread_mutex_lock(&sh->lock);
        /* An entry without a line still moves the position: it is queued
         * with line NULL, and poll() only advances the stream's id. */
        sh->queue[(sh->head + sh->count) % QUEUE_MAX] = (entry_t){(uint32_t)si, id, (uint32_t)len, copy};
        sh->count++;
        if (!line)
            sh->skipped++;
        pthread_mutex_unlock(&sh->lock);
        s->cursor = id;
        if (s->has_end && eddy_redis_id_cmp(id, s->end) >= 0)
            s->done = true;
    }
    return 0;
}

/* One XREAD / XREADGROUP over the streams not done. 0, or -1 with why. */
static int read_once(redisContext *c, shared_t *sh, size_t room, char *why, size_t why_size)
{
    size_t n = sh->n_streams; /* only this thread grows it */
    const char **argv = calloc(10 + 2 * n, sizeof *argv);
    size_t *lens = calloc(10 + 2 * n, sizeof *lens);
    char (*ids)[EDDY_REDIS_ID_TEXT] = calloc(n ? n : 1, sizeof *ids);
    size_t *index = calloc(n ? n : 1, sizeof *index);
    bool *replied = calloc(n ? n : 1, sizeof *replied);
    char count[16];
    int rc = -1;
    redisReply *r = NULL;
    if (!argv || !lens || !ids || !index || !replied) {
        snprintf(why, why_size, "out of memory");
        goto out;
    }
    int argc = 0;
    bool group = sh->uri.group[0] != '\0';
    if (group) {
        argv[argc++] = "XREADGROUP";
        argv[argc++] = "GROUP";
        argv[argc++] = sh->uri.group;
        argv[argc++] = sh->consumer;
    } else {
        argv[argc++] = "XREAD";
    }
    argv[argc++] = "COUNT";
    argv[argc++] = count;
    bool any_pending = false;
    size_t active = 0;
    for (size_t i = 0; i < n; i++)
        if (!sh->streams[i].done) {
            index[active++] = i;
            any_pending |= group && sh->streams[i].pending_phase;
        }
    /* COUNT is per stream: every stream's entries must fit the queue. */
    if (active == 0 || room < active) {
        rc = 0;
        goto out;
    }
    snprintf(count, sizeof count, "%zu", room / active < READ_COUNT ? room / active : READ_COUNT);
    if (!any_pending) { /* a pending read never blocks; BLOCK with it is refused */
        argv[argc++] = "BLOCK";
        argv[argc++] = READ_BLOCK_MS;
    }
    argv[argc++] = "STREAMS";
    for (size_t k = 0; k < active; k++)
        argv[argc++] = sh->streams[index[k]].name;
    for (size_t k = 0; k < active; k++) {
        stream_t *s = &sh->streams[index[k]];
        if (group && !s->pending_phase)
            snprintf(ids[k], sizeof ids[k], ">");
        else if (group)
            eddy_redis_id_format(s->pending_from, ids[k], sizeof ids[k]);
        else
            eddy_redis_id_format(s->cursor, ids[k], sizeof ids[k]);
        argv[argc++] = ids[k];
    }
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    r = command(c, argc, argv, lens, why, why_size);
    if (!r)
        goto out;
    if (r->type == REDIS_REPLY_ERROR) {
        if (!strncmp(r->str, "NOGROUP", 7)) /* the server lost it (restart): make it again */
            for (size_t k = 0; k < active; k++)
                sh->streams[index[k]].group_ready = false;
        if (!strncmp(r->str, "WRONGTYPE", 9)) { /* a key that is not a stream: no retry helps */
            pthread_mutex_lock(&sh->lock);
            snprintf(sh->fatal, sizeof sh->fatal, "%s: %s", argv[0], r->str);
            pthread_mutex_unlock(&sh->lock);
        }
        snprintf(why, why_size, "%s: %s", argv[0], r->str);
        goto out;
    }
    size_t got_total = 0;
    if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t j = 0; j < r->elements; j++) {
            redisReply *sr = r->element[j];
            if (sr->type != REDIS_REPLY_ARRAY || sr->elements != 2 ||
                sr->element[0]->type != REDIS_REPLY_STRING) {
                snprintf(why, why_size, "%s: unexpected reply", argv[0]);
                goto out;
            }
            size_t si = n;
            for (size_t k = 0; k < active; k++)
                if (!strcmp(sh->streams[index[k]].name, sr->element[0]->str))
                    si = index[k];
            if (si == n || sr->element[1]->type != REDIS_REPLY_ARRAY)
                continue;
            size_t got;
            if (take_entries(sh, si, sr->element[1], &got, why, why_size) < 0)
                goto out;
            replied[si] = true;
            got_total += got;
            if (group && sh->streams[si].pending_phase && got == 0)
                sh->streams[si].pending_phase = false;
        }
    }
    for (size_t k = 0; k < active; k++) {
        stream_t *s = &sh->streams[index[k]];
        /* A pending read that named a stream without history returns it
         * with no entries, or not at all: either way its history is done. */
        if (group && s->pending_phase && !replied[index[k]])
            s->pending_phase = false;
        /* A bounded stream whose end is not yet read but has nothing after
         * the cursor (entries deleted) is done too. */
        if (s->has_end && !s->done && eddy_redis_id_cmp(s->cursor, s->end) >= 0)
            s->done = true;
    }
    (void)got_total;
    rc = 0;
out:
    if (r)
        freeReplyObject(r);
    free(argv);
    free(lens);
    free(ids);
    free(index);
    free(replied);
    return rc;
}

static void *reader_thread(void *arg)
{
    shared_t *sh = arg;
    redisContext *c = NULL;
    eddy_redis_retry_t retry = {0};
    uint64_t next_scan = 0, next_lag = 0;
    char why[512];
    for (;;) {
        pthread_mutex_lock(&sh->lock);
        bool stop = sh->stop;
        size_t room = QUEUE_MAX - sh->count;
        bool ack_wanted = sh->ack_wanted;
        sh->ack_wanted = false;
        if (!stop && room == 0)
            eddy_redis_wait(&sh->changed, &sh->lock, 100);
        pthread_mutex_unlock(&sh->lock);
        if (stop) {
            /* Acknowledgements a last commit asked for go out if they can. */
            if (c && sh->uri.group[0] && ack_wanted)
                send_acks(c, sh, why, sizeof why);
            break;
        }
        if (room == 0 && !ack_wanted)
            continue;
        if (!c) {
            c = eddy_redis_connect(sh->uri.host, sh->uri.port, why, sizeof why);
            if (!c)
                goto failed;
            for (size_t i = 0; i < sh->n_streams; i++) {
                sh->streams[i].group_ready = false;
                /* Entries of a reply lost with the connection were
                 * delivered to the group: read them again from the PEL. */
                sh->streams[i].pending_phase = true;
                sh->streams[i].pending_from = (eddy_redis_id_t){0, 0};
            }
            next_scan = 0;
        }
        bool rescan = !sh->scanned || (!sh->uri.bounded && eddy_mono_ms() >= next_scan);
        if (rescan) {
            if (discover(c, sh, why, sizeof why) < 0)
                goto failed;
            sh->scanned = true;
            next_scan = eddy_mono_ms() + RESCAN_MS;
        }
        for (size_t i = 0; i < sh->n_streams; i++)
            if (prepare_stream(c, sh, &sh->streams[i], why, sizeof why) < 0)
                goto failed;
        if (sh->uri.group[0] && send_acks(c, sh, why, sizeof why) < 0)
            goto failed;
        if (eddy_mono_ms() >= next_lag) {
            if (measure_lag(c, sh, why, sizeof why) < 0)
                goto failed;
            next_lag = eddy_mono_ms() + LAG_MS;
        }
        bool all_done = sh->uri.bounded;
        for (size_t i = 0; i < sh->n_streams; i++)
            all_done &= sh->streams[i].done;
        if (all_done) {
            pthread_mutex_lock(&sh->lock);
            sh->all_done = true;
            /* Stay for the acks of the last checkpoints (group), or stop. */
            if (!sh->stop && sh->uri.group[0])
                eddy_redis_wait(&sh->changed, &sh->lock, 100);
            bool leave = !sh->uri.group[0] || sh->stop;
            pthread_mutex_unlock(&sh->lock);
            eddy_redis_retry_ok(&retry, sh->what);
            if (leave)
                break;
            continue;
        }
        if (room > 0 && read_once(c, sh, room, why, sizeof why) < 0)
            goto failed;
        eddy_redis_retry_ok(&retry, sh->what);
        if (sh->n_streams == 0) { /* nothing of ours yet: wait for the next scan */
            pthread_mutex_lock(&sh->lock);
            if (!sh->stop)
                eddy_redis_wait(&sh->changed, &sh->lock, 100);
            pthread_mutex_unlock(&sh->lock);
        }
        continue;
    failed:
        if (c) {
            redisFree(c);
            c = NULL;
        }
        uint32_t wait = eddy_redis_retry_failed(&retry, sh->what, why);
        pthread_mutex_lock(&sh->lock);
        if (!sh->stop)
            eddy_redis_wait(&sh->changed, &sh->lock, wait);
        pthread_mutex_unlock(&sh->lock);
    }
    if (c)
        redisFree(c);
    shared_release(sh);
    return NULL;
}

/* ---- state ---------------------------------------------------------------- */

/* Parses the restored state (lines "name\tid\tend\tread" after the magic
 * line; end "-" when unbounded, read the entries read so far, for the lag)
 * into sh->restored. */
static int parse_state(shared_t *sh, const char *data, size_t len, eddy_err_t *err)
{
    size_t magic = strlen(STATE_MAGIC);
    if (len == 0)
        return 0;
    if (len < magic || memcmp(data, STATE_MAGIC, magic))
        return eddy_err_set(err, "redis source: restored state is not a redis source's state");
    const char *p = data + magic, *end = data + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return eddy_err_set(err, "redis source: restored state is truncated");
        const char *t1 = memchr(p, '\t', (size_t)(nl - p));
        const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(nl - t1 - 1)) : NULL;
        const char *t3 = t2 ? memchr(t2 + 1, '\t', (size_t)(nl - t2 - 1)) : NULL;
        if (!t1 || !t2 || !t3 || t1 == p || (size_t)(t1 - p) >= EDDY_REDIS_NAME_MAX)
            return eddy_err_set(err, "redis source: malformed line in restored state");
        restored_t r;
        memset(&r, 0, sizeof r);
        memcpy(r.name, p, (size_t)(t1 - p));
        if (eddy_redis_id_parse(t1 + 1, (size_t)(t2 - t1 - 1), &r.id) < 0)
            return eddy_err_set(err, "redis source: bad id in restored state");
        if (!(t3 - t2 == 2 && t2[1] == '-')) {
            if (eddy_redis_id_parse(t2 + 1, (size_t)(t3 - t2 - 1), &r.end) < 0)
                return eddy_err_set(err, "redis source: bad end id in restored state");
            r.has_end = true;
        }
        char count[24];
        size_t clen = (size_t)(nl - t3 - 1);
        if (clen == 0 || clen >= sizeof count)
            return eddy_err_set(err, "redis source: bad entry count in restored state");
        memcpy(count, t3 + 1, clen);
        count[clen] = '\0';
        if (eddy_parse_uint(count, &r.read) < 0)
            return eddy_err_set(err, "redis source: bad entry count in restored state");
        restored_t *list = realloc(sh->restored, (sh->n_restored + 1) * sizeof *list);
        if (!list)
            return eddy_err_set(err, "out of memory");
        sh->restored = list;
        sh->restored[sh->n_restored++] = r;
        p = nl + 1;
    }
    return 0;
}

static int source_write_state(void *self, char **out, size_t *len, eddy_err_t *err)
{
    redis_source_t *src = self;
    shared_t *sh = src->sh;
    pthread_mutex_lock(&sh->lock);
    size_t n = sh->n_streams;
    size_t cap = strlen(STATE_MAGIC) + 1 + n * (EDDY_REDIS_NAME_MAX + 2 * EDDY_REDIS_ID_TEXT + 24);
    char *buf = malloc(cap);
    eddy_redis_id_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!buf || !ids) {
        pthread_mutex_unlock(&sh->lock);
        free(buf);
        free(ids);
        return eddy_err_set(err, "out of memory");
    }
    size_t used = (size_t)snprintf(buf, cap, "%s", STATE_MAGIC);
    for (size_t i = 0; i < n; i++) {
        const stream_t *s = &sh->streams[i];
        char id[EDDY_REDIS_ID_TEXT], end[EDDY_REDIS_ID_TEXT] = "-";
        eddy_redis_id_format(s->emitted, id, sizeof id);
        if (s->has_end)
            eddy_redis_id_format(s->end, end, sizeof end);
        used += (size_t)snprintf(buf + used, cap - used, "%s\t%s\t%s\t%" PRIu64 "\n", s->name, id,
                                 end, s->read);
        ids[i] = s->emitted;
    }
    pthread_mutex_unlock(&sh->lock);
    if (used > EDDY_SOURCE_STATE_MAX) {
        free(buf);
        free(ids);
        return eddy_err_set(err, "redis source: the state of its %zu streams is %zu bytes, over "
                            "the %u a source may keep (fewer streams per instance: raise the "
                            "parallelism)", n, used, EDDY_SOURCE_STATE_MAX);
    }
    /* Kept for commit(): the ids to acknowledge once this state is part of
     * a completed checkpoint. */
    if (src->n_snaps == SNAPSHOTS_MAX) {
        free(src->snaps[0].ids);
        memmove(src->snaps, src->snaps + 1, (SNAPSHOTS_MAX - 1) * sizeof *src->snaps);
        src->n_snaps--;
    }
    src->snaps[src->n_snaps++] = (snapshot_t){++src->next_seq, n, ids};
    *out = buf;
    *len = used;
    return 0;
}

/* Acknowledges what the snapshot with sequence number seq (and every
 * older one) emitted. */
static void commit_snapshot(redis_source_t *src, uint64_t seq)
{
    shared_t *sh = src->sh;
    size_t k = 0;
    while (k < src->n_snaps && src->snaps[k].seq <= seq)
        k++;
    if (k == 0)
        return;
    const snapshot_t *last = &src->snaps[k - 1];
    pthread_mutex_lock(&sh->lock);
    for (size_t i = 0; i < last->n && i < sh->n_streams; i++)
        if (eddy_redis_id_cmp(last->ids[i], sh->streams[i].ack_upto) > 0)
            sh->streams[i].ack_upto = last->ids[i];
    sh->ack_wanted = true;
    pthread_cond_broadcast(&sh->changed);
    pthread_mutex_unlock(&sh->lock);
    for (size_t i = 0; i < k; i++)
        free(src->snaps[i].ids);
    memmove(src->snaps, src->snaps + k, (src->n_snaps - k) * sizeof *src->snaps);
    src->n_snaps -= k;
}

/* ---- source ops ------------------------------------------------------------ */

static void source_close(void *self)
{
    redis_source_t *src = self;
    pthread_mutex_lock(&src->sh->lock);
    src->sh->stop = true;
    pthread_cond_broadcast(&src->sh->changed);
    pthread_mutex_unlock(&src->sh->lock);
    shared_release(src->sh);
    for (size_t i = 0; i < src->n_snaps; i++)
        free(src->snaps[i].ids);
    free(src);
}

static void *source_open(const eddy_op_context_t *ctx, int64_t start_position, eddy_err_t *err)
{
    (void)start_position; /* the position is ctx->source_state (write_state's bytes) */
    const eddy_redis_uri_t *uri = ctx->config;
    redis_source_t *src = calloc(1, sizeof *src);
    shared_t *sh = calloc(1, sizeof *sh);
    if (sh)
        sh->queue = calloc(QUEUE_MAX, sizeof *sh->queue);
    if (!src || !sh || !sh->queue) {
        if (sh)
            free(sh->queue);
        free(sh);
        free(src);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    src->sh = sh;
    src->lag_out = ctx->source_lag;
    sh->refs = 1;
    sh->lag = -1;
    sh->uri = *uri;
    sh->instance = ctx->instance;
    sh->parallelism = ctx->parallelism ? ctx->parallelism : 1;
    snprintf(sh->consumer, sizeof sh->consumer, "eddy-%u", ctx->instance);
    snprintf(sh->what, sizeof sh->what, "redis source %s:%u (instance %u)", uri->host, uri->port,
             ctx->instance);
    pthread_mutex_init(&sh->lock, NULL);
    pthread_cond_init(&sh->changed, NULL);
    if (parse_state(sh, ctx->source_state, ctx->source_state_len, err) < 0) {
        source_close(src);
        return NULL;
    }
    /* The streams known without asking Redis (named, or in the restored
     * state) are there from the start, so a checkpoint taken before Redis
     * answers keeps their restored ids rather than forgetting them. */
    int added = 0;
    for (uint32_t k = 0; k < uri->n_streams && added == 0; k++)
        if (!eddy_redis_is_pattern(uri->streams[k]) && mine(sh, uri->streams[k]))
            added = add_stream(sh, uri->streams[k]);
    for (size_t i = 0; i < sh->n_restored && added == 0; i++)
        if (mine(sh, sh->restored[i].name))
            added = add_stream(sh, sh->restored[i].name);
    if (added < 0) {
        source_close(src);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    sh->refs = 2;
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&thread, &attr, reader_thread, sh);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        sh->refs = 1;
        source_close(src);
        eddy_err_set(err, "redis source: cannot start its reader thread: %s", strerror(rc));
        return NULL;
    }
    return src;
}

static int source_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    redis_source_t *src = self;
    shared_t *sh = src->sh;
    entry_t batch[256];
    if (max > 256)
        max = 256;
    pthread_mutex_lock(&sh->lock);
    if (sh->fatal[0]) {
        pthread_mutex_unlock(&sh->lock);
        return eddy_err_set(err, "%s: %s", sh->what, sh->fatal);
    }
    uint32_t n = 0;
    while (n < max && sh->count > 0) {
        batch[n] = sh->queue[sh->head];
        sh->head = (sh->head + 1) % QUEUE_MAX;
        sh->count--;
        sh->streams[batch[n].stream].emitted = batch[n].id;
        sh->streams[batch[n].stream].read++;
        n++;
    }
    bool done = sh->all_done && sh->count == 0;
    if (src->lag_out)
        *src->lag_out = sh->lag;
    if (n)
        pthread_cond_broadcast(&sh->changed);
    pthread_mutex_unlock(&sh->lock);
    uint32_t emitted = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (batch[i].line) {
            eddy_record_t rec = eddy_record_make(batch[i].line, batch[i].len, 1);
            eddy_emit(out, &rec);
            emitted++;
        }
        free(batch[i].line);
    }
    if (n)
        return 1;
    return done ? 0 : EDDY_SOURCE_IDLE;
}

static int64_t source_position(void *self)
{
    /* Entries taken so far is no resume point (ids are); the state is
     * write_state's bytes. */
    (void)self;
    return -1;
}

static void source_commit(void *self, uint64_t checkpoint)
{
    redis_source_t *src = self;
    shared_t *sh = src->sh;
    if (checkpoint == EDDY_FINAL_CHECKPOINT) {
        /* The whole job is done: everything emitted is in its output. */
        pthread_mutex_lock(&sh->lock);
        for (size_t i = 0; i < sh->n_streams; i++)
            sh->streams[i].ack_upto = sh->streams[i].emitted;
        sh->ack_wanted = true;
        pthread_cond_broadcast(&sh->changed);
        pthread_mutex_unlock(&sh->lock);
        return;
    }
    /* write_state does not learn the checkpoint id, so the states taken
     * are matched to completions in order: the oldest one outstanding
     * belongs to a checkpoint <= this one (every completed checkpoint took
     * a state here), so acknowledging it is always covered; after an
     * abandoned checkpoint the acks trail by one until the job's end. */
    if (src->n_snaps)
        commit_snapshot(src, src->snaps[0].seq);
}

const eddy_source_ops_t eddy_redis_source_ops = {
    .kind = "redis", .replayable = true, .open = source_open, .poll = source_poll,
    .position = source_position, .close = source_close, .write_state = source_write_state,
    .commit = source_commit};
