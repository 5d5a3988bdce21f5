/* redis.c - a real redis-server for tests (see redis.h). */
#include "tests/support/redis.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"

#define START_DEADLINE_MS 20000

struct eddy_test_redis {
    eddy_proc_t proc;
    bool running;
    bool persistent;
    int port;
    char *dir;
    char log[4200];
};

static bool pings(int port)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    bool ok = false;
    if (c && !c->err) {
        redisReply *r = redisCommand(c, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");
        if (r)
            freeReplyObject(r);
    }
    if (c)
        redisFree(c);
    return ok;
}

/* 1 serving, 0 the server exited (port taken?), -1 error. */
static int launch(eddy_test_redis_t *self, eddy_err_t *err)
{
    const char *bin = getenv("EDDY_REDIS_SERVER");
    if (!bin || !bin[0])
        bin = EDDY_TEST_REDIS_DEFAULT;
    if (access(bin, X_OK) < 0)
        return eddy_err_set(err, "redis-server not found at %s (%s); install the redis-server "
                            "package or set EDDY_REDIS_SERVER", bin, strerror(errno));
    char port[16];
    snprintf(port, sizeof port, "%d", self->port);
    char *argv[] = {(char *)bin, "--port", port, "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", self->persistent ? "yes" : "no",
                    "--appendfsync", "always", "--dir", self->dir, "--daemonize", "no", NULL};
    if (eddy_proc_start(&self->proc, argv, self->log, self->log, err) < 0)
        return -1;
    self->running = true;
    uint64_t deadline = eddy_mono_ms() + START_DEADLINE_MS;
    while (eddy_mono_ms() < deadline) {
        if (pings(self->port))
            return 1;
        if (!eddy_proc_alive(&self->proc)) {
            self->running = false;
            return 0;
        }
        eddy_nap_ms(20);
    }
    eddy_test_redis_stop(self);
    return eddy_err_set(err, "redis-server on port %d did not answer PING in %d s (log %s)",
                        self->port, START_DEADLINE_MS / 1000, self->log);
}

eddy_test_redis_t *eddy_test_redis_start(bool persistent, eddy_err_t *err)
{
    eddy_test_redis_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->persistent = persistent;
    self->dir = eddy_test_mkdtemp("redis", err);
    if (!self->dir) {
        free(self);
        return NULL;
    }
    snprintf(self->log, sizeof self->log, "%s/redis.log", self->dir);
    for (int attempt = 0; attempt < 3; attempt++) {
        self->port = eddy_test_free_port(err);
        if (self->port < 0)
            break;
        int rc = launch(self, err);
        if (rc == 1)
            return self;
        if (rc < 0)
            break;
        eddy_err_set(err, "redis-server exited at start (port %d taken?); log %s", self->port,
                     self->log);
    }
    eddy_test_redis_destroy(&self);
    return NULL;
}

int eddy_test_redis_port(const eddy_test_redis_t *self)
{
    return self->port;
}

pid_t eddy_test_redis_pid(const eddy_test_redis_t *self)
{
    return self->running ? self->proc.pid : -1;
}

void eddy_test_redis_stop(eddy_test_redis_t *self)
{
    if (!self->running)
        return;
    eddy_proc_kill(&self->proc, 5000);
    self->running = false;
}

int eddy_test_redis_restart(eddy_test_redis_t *self, eddy_err_t *err)
{
    eddy_test_redis_stop(self);
    /* The port was just released; another process may take it in between,
     * which a test reports rather than hides. */
    uint64_t deadline = eddy_mono_ms() + START_DEADLINE_MS;
    for (;;) {
        int rc = launch(self, err);
        if (rc == 1)
            return 0;
        if (rc < 0)
            return -1;
        if (eddy_mono_ms() >= deadline)
            return eddy_err_set(err, "redis-server could not start again on port %d (log %s)",
                                self->port, self->log);
        eddy_nap_ms(100);
    }
}

void eddy_test_redis_destroy(eddy_test_redis_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_test_redis_t *self = *self_p;
    eddy_test_redis_stop(self);
    eddy_test_rm_rf(self->dir);
    free(self->dir);
    free(self);
    *self_p = NULL;
}

redisContext *eddy_test_redis_client(const eddy_test_redis_t *self, eddy_err_t *err)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", self->port, tv);
    if (!c || c->err) {
        eddy_err_set(err, "cannot connect to the test redis on port %d: %s", self->port,
                     c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}
