/* pool_local.c - worker pool backend: forked `eddy worker` processes (see
 * pool_local.h). Every call returns at once: a released worker is
 * signalled and reaped by a later live() (or killed after a grace period),
 * never waited for. */
#include "controller/pool_local.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/spawn.h"

#define STOP_GRACE_MS 5000

typedef struct local_worker {
    char name[EDDY_POOL_NAME_MAX];
    pid_t pid;
    bool stopping;
    uint64_t kill_at_ms; /* stopping: SIGKILL from then on */
} local_worker_t;

typedef struct pool_local {
    char *coordinator, *snapshot_dir, *keys_dir;
    bool insecure;
    local_worker_t *workers;
    size_t n, cap;
} pool_local_t;

void eddy_local_worker_argv(const eddy_local_worker_flags_t *f, const char *name,
                            char *argv[EDDY_LOCAL_WORKER_ARGV_MAX])
{
    int k = 0;
    argv[k++] = "eddy";
    argv[k++] = "worker";
    argv[k++] = "--coordinator";
    argv[k++] = (char *)f->coordinator;
    argv[k++] = "--name";
    argv[k++] = (char *)name;
    if (f->snapshot_dir) {
        argv[k++] = "--snapshot-dir";
        argv[k++] = (char *)f->snapshot_dir;
    }
    if (f->keys_dir) {
        argv[k++] = "--keys";
        argv[k++] = (char *)f->keys_dir;
    }
    if (f->no_leave_wait) {
        argv[k++] = "--leave-wait-ms";
        argv[k++] = "0";
    }
    if (f->insecure)
        argv[k++] = "--insecure";
    if (f->no_local_recovery)
        argv[k++] = "--no-local-recovery";
    argv[k] = NULL;
}

/* Forgets worker i (the array is unordered). */
static void forget(pool_local_t *p, size_t i)
{
    p->workers[i] = p->workers[--p->n];
}

static int local_grow(void *backend, const char *name, eddy_err_t *err)
{
    pool_local_t *p = backend;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        local_worker_t *grown = realloc(p->workers, cap * sizeof *grown);
        if (!grown)
            return eddy_err_set(err, "pool local: out of memory");
        p->workers = grown;
        p->cap = cap;
    }
    /* released while the coordinator runs: they say they leave */
    eddy_local_worker_flags_t flags = {p->coordinator, p->snapshot_dir, p->keys_dir, false,
                                       p->insecure, false};
    char *argv[EDDY_LOCAL_WORKER_ARGV_MAX];
    eddy_local_worker_argv(&flags, name, argv);
    pid_t pid = eddy_spawn_self(argv);
    if (pid < 0)
        return eddy_err_set(err, "pool local: cannot start worker %s: %s", name, strerror(errno));
    local_worker_t *w = &p->workers[p->n++];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->pid = pid;
    return 0;
}

static int local_shrink(void *backend, const char *name, eddy_err_t *err)
{
    pool_local_t *p = backend;
    for (size_t i = 0; i < p->n; i++) {
        local_worker_t *w = &p->workers[i];
        if (w->stopping || strcmp(w->name, name))
            continue;
        kill(w->pid, SIGTERM);
        w->stopping = true;
        w->kill_at_ms = eddy_mono_ms() + STOP_GRACE_MS;
        return 0;
    }
    return eddy_err_set(err, "pool local: no running worker %s of the pool's", name);
}

/* Reaps what ended, kills what overstayed its stop. */
static void reap(pool_local_t *p)
{
    uint64_t now = eddy_mono_ms();
    for (size_t i = 0; i < p->n;) {
        local_worker_t *w = &p->workers[i];
        int status;
        pid_t r = waitpid(w->pid, &status, WNOHANG);
        if (r == w->pid || (r < 0 && errno == ECHILD)) {
            if (!w->stopping && r == w->pid) {
                char how[160];
                eddy_describe_exit(status, how, sizeof how);
                eddy_log(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? EDDY_LOG_INFO : EDDY_LOG_WARN,
                         "pool: worker %s (pid %d) %s", w->name, (int)w->pid, how);
            }
            forget(p, i);
            continue;
        }
        if (w->stopping && now >= w->kill_at_ms)
            kill(w->pid, SIGKILL);
        i++;
    }
}

static int local_live(void *backend, char (*names)[EDDY_POOL_NAME_MAX], size_t cap,
                      eddy_err_t *err)
{
    (void)err;
    pool_local_t *p = backend;
    reap(p);
    size_t n = 0;
    for (size_t i = 0; i < p->n && n < cap; i++)
        if (!p->workers[i].stopping)
            snprintf(names[n++], EDDY_POOL_NAME_MAX, "%s", p->workers[i].name);
    return (int)n;
}

static void local_destroy(void *backend)
{
    pool_local_t *p = backend;
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        if (!p->workers[i].stopping) {
            kill(p->workers[i].pid, SIGTERM);
            p->workers[i].stopping = true;
            p->workers[i].kill_at_ms = eddy_mono_ms() + STOP_GRACE_MS;
        }
    while (p->n > 0) {
        reap(p);
        if (p->n > 0)
            usleep(20000);
    }
    free(p->workers);
    free(p->coordinator);
    free(p->snapshot_dir);
    free(p->keys_dir);
    free(p);
}

static const eddy_pool_ops_t LOCAL_OPS = {
    .name = "local",
    .grow = local_grow,
    .shrink = local_shrink,
    .live = local_live,
    .destroy = local_destroy,
};

static char *dup_or_null(const char *s, bool *failed)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *failed = true;
    return d;
}

int eddy_pool_local_new(const eddy_local_worker_flags_t *flags, eddy_pool_backend_t *out,
                        eddy_err_t *err)
{
    if (!flags || !flags->coordinator)
        return eddy_err_set(err, "pool local: no coordinator for the workers");
    pool_local_t *p = calloc(1, sizeof *p);
    if (!p)
        return eddy_err_set(err, "pool local: out of memory");
    bool failed = false;
    p->coordinator = dup_or_null(flags->coordinator, &failed);
    p->snapshot_dir = dup_or_null(flags->snapshot_dir, &failed);
    p->keys_dir = dup_or_null(flags->keys_dir, &failed);
    p->insecure = flags->insecure;
    if (failed) {
        local_destroy(p);
        return eddy_err_set(err, "pool local: out of memory");
    }
    out->ops = &LOCAL_OPS;
    out->self = p;
    return 0;
}
