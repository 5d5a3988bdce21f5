/* redis.h - a real redis-server for a test: started on a free 127.0.0.1
 * port with its files in a fresh temp dir, waited for by polling PING with
 * a deadline, and stoppable and restartable on the same port (to test a
 * Redis that goes away). persistent = appendonly with fsync always, so the
 * streams survive a stop/restart; otherwise nothing is saved. The server
 * is in its own process group and dies with the test (proc.h). */
#ifndef EDDY_TESTS_SUPPORT_REDIS_H
#define EDDY_TESTS_SUPPORT_REDIS_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/err.h"

/* The server binary: $EDDY_REDIS_SERVER, else this. */
#define EDDY_TEST_REDIS_DEFAULT "/usr/bin/redis-server"

typedef struct eddy_test_redis eddy_test_redis_t;

eddy_test_redis_t *eddy_test_redis_start(bool persistent, eddy_err_t *err);
int eddy_test_redis_port(const eddy_test_redis_t *self);
pid_t eddy_test_redis_pid(const eddy_test_redis_t *self);
/* SIGTERM and reap (the data dir stays, for a restart). */
void eddy_test_redis_stop(eddy_test_redis_t *self);
/* Starts it again on the same port and waits for PING. */
int eddy_test_redis_restart(eddy_test_redis_t *self, eddy_err_t *err);
/* Stops it and removes its dir. */
void eddy_test_redis_destroy(eddy_test_redis_t **self_p);
/* A connected client (caller redisFree()s), or NULL with err. */
redisContext *eddy_test_redis_client(const eddy_test_redis_t *self, eddy_err_t *err);

#endif
