/* s3rver.c - npm's s3rver as a real S3 endpoint for tests (see s3rver.h).
 * Same shape as redis.c: eddy_proc_start (own process group, PDEATHSIG),
 * a readiness poll with a deadline, restart on the same port. */
#include "tests/support/s3rver.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/etcd.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"

#define START_DEADLINE_MS 30000

struct eddy_test_s3rver {
    eddy_proc_t proc;
    bool running;
    int port;
    char *dir;
    char bucket[64];
    char url[64];
    char data[4200];
    char log[4200];
};

/* Last ~300 bytes of the log, one line. */
static void log_tail(const char *path, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, -300, SEEK_END) < 0)
        rewind(f);
    size_t n = fread(out, 1, outlen - 1, f);
    out[n] = '\0';
    fclose(f);
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = ' ';
}

/* The bucket answers an unsigned GET (s3rver lets anonymous requests in). */
static bool serving(const eddy_test_s3rver_t *self)
{
    char path[96];
    snprintf(path, sizeof path, "/%s?list-type=2&max-keys=1", self->bucket);
    long status = 0;
    char *body = eddy_test_http_get(self->port, path, 1000, &status);
    free(body);
    return status == 200;
}

/* 1 serving, 0 the server exited (port taken?), -1 error. */
static int launch(eddy_test_s3rver_t *self, eddy_err_t *err)
{
    const char *bin = getenv("EDDY_S3RVER");
    if (!bin || !bin[0])
        bin = EDDY_TEST_S3RVER_DEFAULT;
    if (access(bin, X_OK) < 0)
        return eddy_err_set(err, "s3rver not found at %s (%s); run scripts/setup.sh (it "
                            "installs npm's s3rver) or set EDDY_S3RVER to the s3rver script",
                            bin, strerror(errno));
    char port[16];
    snprintf(port, sizeof port, "%d", self->port);
    /* s3rver 3.7 makes ListObjectsV2 continuation tokens with DES, which
     * OpenSSL 3 keeps in its legacy provider: without it node fails every
     * truncated listing with ERR_OSSL_EVP_UNSUPPORTED (HTTP 500). */
    char *argv[] = {"/usr/bin/env", "NODE_OPTIONS=--openssl-legacy-provider", (char *)bin,
                    "--directory", self->data, "--address", "127.0.0.1", "--port", port,
                    "--configure-bucket", self->bucket, NULL};
    if (eddy_proc_start(&self->proc, argv, self->log, self->log, err) < 0)
        return -1;
    self->running = true;
    uint64_t deadline = eddy_mono_ms() + START_DEADLINE_MS;
    while (eddy_mono_ms() < deadline) {
        if (serving(self))
            return 1;
        if (!eddy_proc_alive(&self->proc)) {
            self->running = false;
            char tail[320];
            log_tail(self->log, tail, sizeof tail);
            eddy_err_set(err, "s3rver exited at start on port %d: ...%s", self->port, tail);
            return strstr(tail, "EADDRINUSE") ? 0 : -1;
        }
        eddy_nap_ms(50);
    }
    eddy_test_s3rver_kill(self);
    char tail[320];
    log_tail(self->log, tail, sizeof tail);
    return eddy_err_set(err, "s3rver on port %d did not serve bucket %s within %d s: ...%s",
                        self->port, self->bucket, START_DEADLINE_MS / 1000, tail);
}

eddy_test_s3rver_t *eddy_test_s3rver_start(const char *bucket, eddy_err_t *err)
{
    eddy_test_s3rver_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(self->bucket, sizeof self->bucket, "%s", bucket);
    self->dir = eddy_test_mkdtemp("s3rver", err);
    if (!self->dir) {
        free(self);
        return NULL;
    }
    snprintf(self->data, sizeof self->data, "%s/data", self->dir);
    snprintf(self->log, sizeof self->log, "%s/s3rver.log", self->dir);
    for (int attempt = 0; attempt < 3; attempt++) {
        self->port = eddy_test_free_port(err);
        if (self->port < 0)
            break;
        snprintf(self->url, sizeof self->url, "http://127.0.0.1:%d", self->port);
        int rc = launch(self, err);
        if (rc == 1)
            return self;
        if (rc < 0)
            break;
    }
    eddy_test_s3rver_destroy(&self);
    return NULL;
}

const char *eddy_test_s3rver_url(const eddy_test_s3rver_t *self)
{
    return self->url;
}

int eddy_test_s3rver_port(const eddy_test_s3rver_t *self)
{
    return self->port;
}

const char *eddy_test_s3rver_log(const eddy_test_s3rver_t *self)
{
    return self->log;
}

pid_t eddy_test_s3rver_pid(const eddy_test_s3rver_t *self)
{
    return self->running ? self->proc.pid : -1;
}

void eddy_test_s3rver_kill(eddy_test_s3rver_t *self)
{
    if (!self->running)
        return;
    kill(-self->proc.pid, SIGKILL);
    kill(self->proc.pid, SIGKILL);
    eddy_proc_wait(&self->proc, 10000);
    eddy_proc_kill(&self->proc, 0); /* reaps if the wait did not */
    self->running = false;
}

int eddy_test_s3rver_restart(eddy_test_s3rver_t *self, eddy_err_t *err)
{
    eddy_test_s3rver_kill(self);
    /* The port was just released; another process may take it meanwhile,
     * which the test reports rather than hides. */
    uint64_t deadline = eddy_mono_ms() + START_DEADLINE_MS;
    for (;;) {
        int rc = launch(self, err);
        if (rc == 1)
            return 0;
        if (rc < 0)
            return -1;
        if (eddy_mono_ms() >= deadline)
            return eddy_err_set(err, "s3rver could not start again on port %d (log %s)",
                                self->port, self->log);
        eddy_nap_ms(100);
    }
}

void eddy_test_s3rver_destroy(eddy_test_s3rver_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_test_s3rver_t *self = *self_p;
    eddy_test_s3rver_kill(self);
    if (!getenv("EDDY_TEST_S3RVER_KEEP")) /* set it to look at the data and log after a run */
        eddy_test_rm_rf(self->dir);
    free(self->dir);
    free(self);
    *self_p = NULL;
}

eddy_test_s3rver_t *eddy_test_s3rver_start_with_env(const char *bucket, eddy_err_t *err)
{
    setenv("AWS_ACCESS_KEY_ID", EDDY_TEST_S3RVER_KEY_ID, 1);
    setenv("AWS_SECRET_ACCESS_KEY", EDDY_TEST_S3RVER_SECRET, 1);
    unsetenv("AWS_SESSION_TOKEN");
    return eddy_test_s3rver_start(bucket, err);
}
