/* local_supervisor.c - starts, watches and restarts the child processes of
 * `eddy local` (see local_supervisor.h).
 *
 * One thread polls waitpid(WNOHANG) on each child every few milliseconds:
 * simple, needs no SIGCHLD handler in a process whose other threads
 * (ZeroMQ, the coordinator loop) must not be interrupted, and only ever
 * reaps its own children. */
#include "cli/local_supervisor.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/spawn.h"

#define MAX_CHILDREN 72
#define MAX_ARGS 64
/* Restart policy: backoff 100 ms, 200 ms, ... up to 5 s; a child that died
 * more than MAX_QUICK_RESTARTS times in a row, each time within STABLE_MS of
 * its start, cannot be kept alive. */
#define FIRST_BACKOFF_MS 100
#define MAX_BACKOFF_MS 5000
#define MAX_QUICK_RESTARTS 5
#define STABLE_MS 10000
#define POLL_MS 20
#define STOP_GRACE_MS 3000

typedef struct child {
    char name[64];
    char *argv[MAX_ARGS + 1]; /* owned copies */
    bool done_on_success;
    pid_t pid;                /* 0: not running */
    bool done;                /* exited 0 and done_on_success */
    uint64_t started_ms;
    uint64_t restart_at_ms;   /* 0: no restart pending */
    uint32_t quick_restarts;  /* consecutive restarts of short-lived runs */
} child_t;

struct eddy_local_supervisor {
    child_t children[MAX_CHILDREN];
    int n_children;
    volatile sig_atomic_t *stop;
    pthread_t thread;
    bool thread_started;
    atomic_bool finish;       /* main -> thread: stop supervising */
    pthread_mutex_t lock;     /* guards gave_up and cause */
    bool gave_up;
    char cause[512];
};

static void start_child(child_t *c)
{
    c->pid = eddy_spawn_self(c->argv);
    c->started_ms = eddy_mono_ms();
    c->restart_at_ms = 0;
    if (c->pid < 0) {
        eddy_warn("cannot start %s: %s", c->name, strerror(errno));
        c->pid = 0;
    }
}

static void give_up(eddy_local_supervisor_t *self, const child_t *c, const char *how)
{
    pthread_mutex_lock(&self->lock);
    self->gave_up = true;
    snprintf(self->cause, sizeof self->cause,
             "%s keeps dying: it %s after %u restarts in a row; giving up", c->name, how,
             c->quick_restarts);
    eddy_error("%s", self->cause);
    pthread_mutex_unlock(&self->lock);
    /* The coordinator loop polls this flag (a signal handler sets it too). */
    *self->stop = 1;
}

/* A child ended with status: schedule its restart, or give up. */
static void on_exit_status(eddy_local_supervisor_t *self, child_t *c, int status, uint64_t now)
{
    char how[160];
    eddy_describe_exit(status, how, sizeof how);
    pid_t pid = c->pid;
    c->pid = 0;
    if (c->done_on_success && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        eddy_info("%s (pid %d) %s; not restarting it", c->name, (int)pid, how);
        c->done = true;
        return;
    }
    if (now - c->started_ms >= STABLE_MS)
        c->quick_restarts = 0;
    if (c->quick_restarts >= MAX_QUICK_RESTARTS) {
        give_up(self, c, how);
        return;
    }
    uint64_t backoff = (uint64_t)FIRST_BACKOFF_MS << c->quick_restarts;
    if (backoff > MAX_BACKOFF_MS)
        backoff = MAX_BACKOFF_MS;
    c->quick_restarts++;
    c->restart_at_ms = now + backoff;
    eddy_warn("%s (pid %d) %s; restarting it in %llu ms (restart %u of at most %u in a row)",
              c->name, (int)pid, how, (unsigned long long)backoff, c->quick_restarts,
              MAX_QUICK_RESTARTS);
}

/* SIGTERM to every running child; SIGKILL to those still running after the
 * grace period; reap all. Runs on the supervising thread, the parent of the
 * children (see PR_SET_PDEATHSIG in the header). */
static void stop_children(eddy_local_supervisor_t *self)
{
    for (int i = 0; i < self->n_children; i++)
        if (self->children[i].pid > 0)
            kill(self->children[i].pid, SIGTERM);
    uint64_t deadline = eddy_mono_ms() + STOP_GRACE_MS;
    for (int i = 0; i < self->n_children; i++) {
        child_t *c = &self->children[i];
        while (c->pid > 0) {
            pid_t r = waitpid(c->pid, NULL, WNOHANG);
            if (r == c->pid || r < 0) {
                c->pid = 0;
            } else if (eddy_mono_ms() > deadline) {
                kill(c->pid, SIGKILL);
                waitpid(c->pid, NULL, 0);
                c->pid = 0;
            } else {
                eddy_sleep_ms(10);
            }
        }
    }
}

static bool has_given_up(eddy_local_supervisor_t *self)
{
    pthread_mutex_lock(&self->lock);
    bool gave_up = self->gave_up;
    pthread_mutex_unlock(&self->lock);
    return gave_up;
}

static void *supervise(void *arg)
{
    eddy_local_supervisor_t *self = arg;
    for (int i = 0; i < self->n_children; i++)
        start_child(&self->children[i]);
    while (!atomic_load(&self->finish)) {
        uint64_t now = eddy_mono_ms();
        for (int i = 0; i < self->n_children; i++) {
            child_t *c = &self->children[i];
            int status;
            /* Once the run is ending (interrupted: Ctrl-C reaches the
             * children too; or given up), a child that exits stays down. */
            bool ending = *self->stop || has_given_up(self);
            if (c->pid > 0 && waitpid(c->pid, &status, WNOHANG) == c->pid) {
                if (ending)
                    c->pid = 0;
                else
                    on_exit_status(self, c, status, now);
            } else if (c->pid == 0 && !c->done && c->restart_at_ms && now >= c->restart_at_ms &&
                       !ending) {
                start_child(c);
                if (c->pid > 0)
                    eddy_info("restarted %s as pid %d", c->name, (int)c->pid);
                else
                    c->restart_at_ms = now + MAX_BACKOFF_MS;
            }
        }
        eddy_sleep_ms(POLL_MS);
    }
    /* Here, on the children's parent thread, before it ends and their
     * PR_SET_PDEATHSIG would SIGKILL them. */
    stop_children(self);
    return NULL;
}

eddy_local_supervisor_t *eddy_local_supervisor_new(volatile sig_atomic_t *stop)
{
    eddy_local_supervisor_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->stop = stop;
    atomic_init(&self->finish, false);
    pthread_mutex_init(&self->lock, NULL);
    return self;
}

int eddy_local_supervisor_add(eddy_local_supervisor_t *self, const char *name, char *const argv[],
                              bool done_on_success, eddy_err_t *err)
{
    if (self->thread_started || self->n_children >= MAX_CHILDREN)
        return eddy_err_set(err, "cannot supervise %s: too many children", name);
    child_t *c = &self->children[self->n_children];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->done_on_success = done_on_success;
    for (int k = 0; argv[k]; k++) {
        if (k >= MAX_ARGS)
            return eddy_err_set(err, "cannot supervise %s: too many arguments", name);
        c->argv[k] = strdup(argv[k]);
        if (!c->argv[k])
            return eddy_err_set(err, "out of memory");
    }
    self->n_children++;
    return 0;
}

int eddy_local_supervisor_start(eddy_local_supervisor_t *self, eddy_err_t *err)
{
    int rc = pthread_create(&self->thread, NULL, supervise, self);
    if (rc != 0)
        return eddy_err_set(err, "cannot start the supervisor thread: %s", strerror(rc));
    self->thread_started = true;
    return 0;
}

bool eddy_local_supervisor_gave_up(eddy_local_supervisor_t *self, char *cause, size_t size)
{
    pthread_mutex_lock(&self->lock);
    bool gave_up = self->gave_up;
    if (gave_up && cause && size)
        snprintf(cause, size, "%s", self->cause);
    pthread_mutex_unlock(&self->lock);
    return gave_up;
}

void eddy_local_supervisor_destroy(eddy_local_supervisor_t **self_p)
{
    eddy_local_supervisor_t *self = *self_p;
    if (!self)
        return;
    if (self->thread_started) {
        atomic_store(&self->finish, true);
        pthread_join(self->thread, NULL); /* it stops the children */
    }
    for (int i = 0; i < self->n_children; i++)
        for (int k = 0; self->children[i].argv[k]; k++)
            free(self->children[i].argv[k]);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}
