/* redis_conn.h - what the Redis source and sink threads share: connecting
 * with a timeout, retrying with capped exponential backoff (logged at most
 * once a second), stream ids, and a stop flag their sleeps wake up for.
 *
 * Everything here runs on a connector's own thread, never on the worker
 * loop: connecting resolves names and waits for the server. */
#ifndef EDDY_CONNECTORS_REDIS_CONN_H
#define EDDY_CONNECTORS_REDIS_CONN_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/log.h"

#define EDDY_REDIS_CONNECT_TIMEOUT_MS 1000
#define EDDY_REDIS_COMMAND_TIMEOUT_MS 5000
#define EDDY_REDIS_BACKOFF_MIN_MS 50
#define EDDY_REDIS_BACKOFF_MAX_MS 2000
#define EDDY_REDIS_ID_TEXT 48 /* "ms-seq": two uint64 and '-' */

/* A stream entry id; entries of a stream have strictly increasing ids. */
typedef struct eddy_redis_id {
    uint64_t ms, seq;
} eddy_redis_id_t;

int eddy_redis_id_parse(const char *text, size_t len, eddy_redis_id_t *out);
void eddy_redis_id_format(eddy_redis_id_t id, char *buf, size_t size);
int eddy_redis_id_cmp(eddy_redis_id_t a, eddy_redis_id_t b);

typedef struct eddy_redis_retry {
    uint32_t backoff_ms;
    uint32_t failures;   /* since the last success */
    eddy_log_limit_t limit;
} eddy_redis_retry_t;

/* Connects to host:port (EDDY_REDIS_CONNECT_TIMEOUT_MS), sets the command
 * timeout; NULL with the reason in why. */
redisContext *eddy_redis_connect(const char *host, uint16_t port, char *why, size_t why_size);
/* Logs the failure (rate limited) naming what, and returns how long to wait
 * before the next attempt; the wait doubles up to the cap. */
uint32_t eddy_redis_retry_failed(eddy_redis_retry_t *r, const char *what, const char *why);
/* After a success: logs the recovery if there were failures, resets. */
void eddy_redis_retry_ok(eddy_redis_retry_t *r, const char *what);

/* Waits ms on cond (with lock held), or less when *stop turns true. */
void eddy_redis_wait(pthread_cond_t *cond, pthread_mutex_t *lock, uint32_t ms);

#endif
