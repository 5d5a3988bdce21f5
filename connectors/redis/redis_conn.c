/* redis_conn.c - connecting, retrying and stream ids for the Redis
 * connectors' threads (redis_conn.h). */
#include "connectors/redis/redis_conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/flags.h"

int eddy_redis_id_parse(const char *text, size_t len, eddy_redis_id_t *out)
{
    char buf[EDDY_REDIS_ID_TEXT];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *dash = strchr(buf, '-');
    uint64_t ms, seq = 0;
    if (dash)
        *dash = '\0';
    if (eddy_parse_uint(buf, &ms) < 0 || (dash && eddy_parse_uint(dash + 1, &seq) < 0))
        return -1;
    out->ms = ms;
    out->seq = seq;
    return 0;
}

void eddy_redis_id_format(eddy_redis_id_t id, char *buf, size_t size)
{
    snprintf(buf, size, "%" PRIu64 "-%" PRIu64, id.ms, id.seq);
}

int eddy_redis_id_cmp(eddy_redis_id_t a, eddy_redis_id_t b)
{
    if (a.ms != b.ms)
        return a.ms < b.ms ? -1 : 1;
    return (a.seq > b.seq) - (a.seq < b.seq);
}

redisContext *eddy_redis_connect(const char *host, uint16_t port, char *why, size_t why_size)
{
    struct timeval connect_tv = {EDDY_REDIS_CONNECT_TIMEOUT_MS / 1000,
                                 (EDDY_REDIS_CONNECT_TIMEOUT_MS % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(host, port, connect_tv);
    if (!c) {
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    if (c->err) {
        snprintf(why, why_size, "%s", c->errstr);
        redisFree(c);
        return NULL;
    }
    struct timeval tv = {EDDY_REDIS_COMMAND_TIMEOUT_MS / 1000,
                         (EDDY_REDIS_COMMAND_TIMEOUT_MS % 1000) * 1000};
    if (redisSetTimeout(c, tv) != REDIS_OK) {
        snprintf(why, why_size, "cannot set a timeout: %s", c->errstr);
        redisFree(c);
        return NULL;
    }
    return c;
}

uint32_t eddy_redis_retry_failed(eddy_redis_retry_t *r, const char *what, const char *why)
{
    r->failures++;
    r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : EDDY_REDIS_BACKOFF_MIN_MS;
    if (r->backoff_ms > EDDY_REDIS_BACKOFF_MAX_MS)
        r->backoff_ms = EDDY_REDIS_BACKOFF_MAX_MS;
    eddy_log_limited(&r->limit, EDDY_LOG_WARN, "%s: %s; retrying (attempt %u, next in %u ms)",
                     what, why, r->failures, r->backoff_ms);
    return r->backoff_ms;
}

void eddy_redis_retry_ok(eddy_redis_retry_t *r, const char *what)
{
    if (r->failures)
        eddy_info("%s: connected again after %u failed attempts", what, r->failures);
    r->failures = 0;
    r->backoff_ms = 0;
}

void eddy_redis_wait(pthread_cond_t *cond, pthread_mutex_t *lock, uint32_t ms)
{
    struct timespec ts = eddy_timespec_in(CLOCK_REALTIME, ms);
    pthread_cond_timedwait(cond, lock, &ts);
}
