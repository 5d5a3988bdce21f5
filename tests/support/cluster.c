/* cluster.c - the shared cluster fixture of the integration tests (see
 * cluster.h): owns a test cluster's directory, ports, processes (local,
 * coordinators, workers, etcd) and the polling of their logs and status,
 * so that each test keeps only its scenario and its assertions. */
#include "tests/support/cluster.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/etcd.h"
#include "tests/support/lines.h"

#define PATH_CAP 700
#define MAX_PATHS 64
#define MAX_ARGS 64
#define LISTEN_DEADLINE_MS 15000
#define SUBMIT_DEADLINE_MS 20000
#define WORKERS_DEADLINE_MS 20000

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_HB_TIMEOUT "5000"
#else
#define DEFAULT_HB_TIMEOUT "2000"
#endif

struct eddy_test_cluster {
    eddy_test_cluster_opts_t opts;
    char *dir;
    char snap_dir[PATH_CAP], meta_dir[PATH_CAP], metastore[PATH_CAP], etcd_url[128];
    int n_ports;
    int port[EDDY_TEST_CLUSTER_MAX_COORDS], http[EDDY_TEST_CLUSTER_MAX_COORDS];
    char port_s[EDDY_TEST_CLUSTER_MAX_COORDS][16], http_s[EDDY_TEST_CLUSTER_MAX_COORDS][16];
    char url[EDDY_TEST_CLUSTER_MAX_COORDS][64];
    char urls[EDDY_TEST_CLUSTER_MAX_COORDS * 64];
    char coord_log[EDDY_TEST_CLUSTER_MAX_COORDS][PATH_CAP];
    int coord_starts[EDDY_TEST_CLUSTER_MAX_COORDS];
    eddy_proc_t coords[EDDY_TEST_CLUSTER_MAX_COORDS];
    eddy_proc_t workers[EDDY_TEST_CLUSTER_MAX_WORKERS];
    int n_workers;
    eddy_proc_t local;
    bool local_started;
    char local_log[PATH_CAP];
    eddy_test_etcd_t *etcd;
    char *paths[MAX_PATHS];
    int n_paths;
};

static const char *or_default(const char *v, const char *def)
{
    return v ? v : def;
}

eddy_test_cluster_t *eddy_test_cluster_new(const eddy_test_cluster_opts_t *opts, eddy_err_t *err)
{
    eddy_test_cluster_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    if (opts)
        self->opts = *opts;
    eddy_test_cluster_opts_t *o = &self->opts;
    o->checkpoint_interval = or_default(o->checkpoint_interval, "400");
    o->heartbeat_ms = or_default(o->heartbeat_ms, "200");
    o->heartbeat_timeout_ms = or_default(o->heartbeat_timeout_ms, DEFAULT_HB_TIMEOUT);
    self->n_ports = o->ports > 0 ? o->ports : (o->coordinators > 0 ? o->coordinators : 1);
    if (self->n_ports > EDDY_TEST_CLUSTER_MAX_COORDS || o->coordinators > self->n_ports ||
        o->workers > EDDY_TEST_CLUSTER_MAX_WORKERS) {
        eddy_err_set(err, "cluster: too many coordinators or workers");
        free(self);
        return NULL;
    }
    self->dir = eddy_test_mkdtemp(o->tag ? o->tag : "cluster", err);
    if (!self->dir) {
        free(self);
        return NULL;
    }
    snprintf(self->snap_dir, sizeof self->snap_dir, "%s/snapshots", self->dir);
    snprintf(self->meta_dir, sizeof self->meta_dir, "%s/meta", self->dir);
    snprintf(self->local_log, sizeof self->local_log, "%s/local.log", self->dir);
    int ports[2 * EDDY_TEST_CLUSTER_MAX_COORDS];
    if (eddy_test_free_ports(2 * self->n_ports, ports, err) != 0)
        goto fail;
    size_t used = 0;
    for (int i = 0; i < self->n_ports; i++) {
        self->port[i] = ports[2 * i];
        self->http[i] = ports[2 * i + 1];
        snprintf(self->port_s[i], sizeof self->port_s[i], "%d", self->port[i]);
        snprintf(self->http_s[i], sizeof self->http_s[i], "%d", self->http[i]);
        snprintf(self->url[i], sizeof self->url[i], "tcp://127.0.0.1:%d", self->port[i]);
        used += (size_t)snprintf(self->urls + used, sizeof self->urls - used, "%s%s",
                                 i ? "," : "", self->url[i]);
        if (i == 0)
            snprintf(self->coord_log[i], PATH_CAP, "%s/coordinator.log", self->dir);
        else
            snprintf(self->coord_log[i], PATH_CAP, "%s/coordinator-%d.log", self->dir, i + 1);
    }
    if (o->etcd) {
        self->etcd = eddy_test_etcd_start(err);
        if (!self->etcd)
            goto fail;
        snprintf(self->etcd_url, sizeof self->etcd_url, "%s", eddy_test_etcd_url(self->etcd));
        snprintf(self->metastore, sizeof self->metastore, "%s%s", self->etcd_url,
                 o->etcd_query ? o->etcd_query : "");
    } else {
        snprintf(self->metastore, sizeof self->metastore, "%s", self->meta_dir);
    }
    for (int i = 0; i < o->coordinators; i++)
        if (eddy_test_cluster_start_coordinator(self, i, err) != 0)
            goto fail;
    if (o->coordinators > 0) {
        for (int i = 0; i < o->workers; i++)
            if (eddy_test_cluster_start_worker(self, err) < 0)
                goto fail;
        if (o->workers > 0 &&
            !eddy_test_cluster_wait_workers(self, o->workers, false, WORKERS_DEADLINE_MS)) {
            eddy_err_set(err, "cluster: %d workers not alive in status within %d ms",
                         o->workers, WORKERS_DEADLINE_MS);
            goto fail;
        }
    }
    return self;
fail:
    eddy_test_cluster_destroy(&self);
    return NULL;
}

/* eddy_proc_kill for a process that was started (a zeroed eddy_proc_t has
 * stdout_fd 0, which eddy_proc_kill would close), resumed first so that a
 * SIGSTOPped one takes its SIGTERM. */
static void stop(eddy_proc_t *p, uint64_t grace_ms)
{
    if (p->pid > 0) {
        if (!p->exited)
            kill(-p->pid, SIGCONT); /* a test may have left it stopped */
        eddy_proc_kill(p, grace_ms);
    }
}

/* Asks p (continued first: a test may have left it stopped) to end,
 * without waiting: the cluster's processes then shut down together. */
static void ask_to_end(eddy_proc_t *p)
{
    if (p->pid > 0 && !p->exited) {
        kill(-p->pid, SIGCONT);
        kill(-p->pid, SIGTERM);
    }
}

void eddy_test_cluster_destroy(eddy_test_cluster_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_test_cluster_t *self = *self_p;
    /* every eddy process at once (a worker takes a second or so to end),
     * then each reaped, SIGKILLed after its grace; etcd last */
    ask_to_end(&self->local);
    for (int i = 0; i < EDDY_TEST_CLUSTER_MAX_COORDS; i++)
        ask_to_end(&self->coords[i]);
    for (int i = 0; i < self->n_workers; i++)
        ask_to_end(&self->workers[i]);
    stop(&self->local, 3000);
    for (int i = 0; i < EDDY_TEST_CLUSTER_MAX_COORDS; i++)
        stop(&self->coords[i], 3000);
    for (int i = 0; i < self->n_workers; i++)
        stop(&self->workers[i], 2000);
    if (self->etcd) {
        kill(eddy_test_etcd_pid(self->etcd), SIGCONT); /* in case a test left it stopped */
        eddy_test_etcd_stop(&self->etcd);
    }
    if (self->dir && !getenv("EDDY_TEST_KEEP"))
        eddy_test_rm_rf(self->dir);
    free(self->dir);
    for (int i = 0; i < self->n_paths; i++)
        free(self->paths[i]);
    free(self);
    *self_p = NULL;
}

eddy_test_cluster_opts_t *eddy_test_cluster_opts(eddy_test_cluster_t *self)
{
    return &self->opts;
}

char *eddy_test_cluster_dir(eddy_test_cluster_t *self)
{
    return self->dir;
}

char *eddy_test_cluster_path(eddy_test_cluster_t *self, const char *name)
{
    for (int i = 0; i < self->n_paths; i++) {
        const char *p = self->paths[i] + strlen(self->dir) + 1;
        if (!strcmp(p, name))
            return self->paths[i];
    }
    if (self->n_paths == MAX_PATHS)
        return NULL;
    size_t n = strlen(self->dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p)
        return NULL;
    snprintf(p, n, "%s/%s", self->dir, name);
    self->paths[self->n_paths++] = p;
    return p;
}

int eddy_test_cluster_port(const eddy_test_cluster_t *self, int i)
{
    return self->port[i];
}

int eddy_test_cluster_http_port(const eddy_test_cluster_t *self, int i)
{
    return self->http[i];
}

char *eddy_test_cluster_port_s(eddy_test_cluster_t *self, int i)
{
    return self->port_s[i];
}

char *eddy_test_cluster_http_port_s(eddy_test_cluster_t *self, int i)
{
    return self->http_s[i];
}

char *eddy_test_cluster_url(eddy_test_cluster_t *self, int i)
{
    return self->url[i];
}

char *eddy_test_cluster_urls(eddy_test_cluster_t *self)
{
    return self->urls;
}

char *eddy_test_cluster_metastore(eddy_test_cluster_t *self)
{
    return self->metastore;
}

pid_t eddy_test_cluster_etcd_pid(const eddy_test_cluster_t *self)
{
    return self->etcd ? eddy_test_etcd_pid(self->etcd) : 0;
}

char *eddy_test_cluster_etcd_url(eddy_test_cluster_t *self)
{
    return self->etcd ? self->etcd_url : NULL;
}

/* ---- processes ------------------------------------------------------------ */

static int add_args(char **argv, int k, const char *const *extra)
{
    for (int i = 0; extra && extra[i] && k < MAX_ARGS - 1; i++)
        argv[k++] = (char *)extra[i];
    return k;
}

/* The fixture's own flags: name, value pairs after argv[0] and the
 * subcommand; a pair whose value is "" is left out (eddy's default). */
static int add_flags(char **argv, int k, const char *const *base)
{
    for (int i = 0; i < 2 && base[i]; i++)
        argv[k++] = (char *)base[i];
    for (int i = 2; base[i] && base[i + 1] && k < MAX_ARGS - 2; i += 2)
        if (base[i + 1][0]) {
            argv[k++] = (char *)base[i];
            argv[k++] = (char *)base[i + 1];
        }
    return k;
}

static const char *keys_of(const eddy_test_cluster_t *self)
{
    return self->opts.keys_dir ? self->opts.keys_dir : "";
}

int eddy_test_cluster_start_local(eddy_test_cluster_t *self, const char *const extra[],
                                  eddy_err_t *err)
{
    return eddy_test_cluster_start_local_to(self, extra, NULL, err);
}

int eddy_test_cluster_start_local_to(eddy_test_cluster_t *self, const char *const extra[],
                                     const char *stdout_path, eddy_err_t *err)
{
    char workers[16];
    snprintf(workers, sizeof workers, "%d", self->opts.workers > 0 ? self->opts.workers : 3);
    const char *base[] = {EDDY_BINARY, "local", "--workers", workers, "--control-port",
                          self->port_s[0], "--http-port", self->http_s[0], "--checkpoint-interval",
                          self->opts.checkpoint_interval, "--heartbeat-ms", self->opts.heartbeat_ms,
                          "--heartbeat-timeout-ms", self->opts.heartbeat_timeout_ms, "--keys",
                          keys_of(self), NULL};
    char *argv[MAX_ARGS];
    int k = add_flags(argv, 0, base);
    k = add_args(argv, k, extra);
    argv[k] = NULL;
    stop(&self->local, 0);
    memset(&self->local, 0, sizeof self->local);
    self->local.stdout_fd = -1;
    if (eddy_proc_start(&self->local, argv, stdout_path, self->local_log, err) != 0)
        return -1;
    self->local_started = true;
    return 0;
}

eddy_proc_t *eddy_test_cluster_local(eddy_test_cluster_t *self)
{
    return &self->local;
}

int eddy_test_cluster_run_local(eddy_test_cluster_t *self, const char *const extra[],
                                uint64_t timeout_ms, eddy_err_t *err)
{
    if (eddy_test_cluster_start_local(self, extra, err) != 0)
        return -1;
    int rc = eddy_proc_wait(&self->local, timeout_ms);
    if (rc < 0)
        eddy_err_set(err, "eddy local did not end within %llu ms", (unsigned long long)timeout_ms);
    eddy_proc_kill(&self->local, 2000);
    return rc;
}

int eddy_test_cluster_wait_local(eddy_test_cluster_t *self, uint64_t timeout_ms,
                                 unsigned every_ms, void (*tick)(void *arg), void *arg)
{
    uint64_t waited = 0;
    for (;;) {
        int rc = eddy_proc_wait(&self->local, 0);
        if (rc >= 0)
            return rc;
        if (waited >= timeout_ms)
            return -1;
        if (tick)
            tick(arg);
        uint64_t step = every_ms ? every_ms : 100;
        if (step > timeout_ms - waited)
            step = timeout_ms - waited;
        rc = eddy_proc_wait(&self->local, step);
        if (rc >= 0)
            return rc;
        waited += step;
    }
}

static int count_in_file(const char *path, const char *needle)
{
    char *s = eddy_read_file(path, NULL);
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, needle)); p++)
        n++;
    free(s);
    return n;
}

typedef struct listen_wait {
    eddy_test_cluster_t *self;
    int i;
    size_t from; /* the log's length before this start */
} listen_wait_t;

/* Up: it listens as the leader (or with a file store), or stands by. */
static bool coordinator_up(void *arg)
{
    listen_wait_t *w = arg;
    if (!eddy_proc_alive(&w->self->coords[w->i]))
        return true;
    size_t len = 0;
    char *s = eddy_read_file(w->self->coord_log[w->i], &len);
    bool up = s && len > w->from &&
              (strstr(s + w->from, "] listening on ") || strstr(s + w->from, "] standing by as "));
    free(s);
    return up;
}

int eddy_test_cluster_start_coordinator(eddy_test_cluster_t *self, int i, eddy_err_t *err)
{
    return eddy_test_cluster_start_coordinator_with(self, i, NULL, err);
}

int eddy_test_cluster_start_coordinator_with(eddy_test_cluster_t *self, int i,
                                             const char *const extra[], eddy_err_t *err)
{
    if (i < 0 || i >= self->n_ports) {
        eddy_err_set(err, "cluster: no ports for coordinator %d", i);
        return -1;
    }
    char own_snap[PATH_CAP + 64];
    snprintf(own_snap, sizeof own_snap, "%s/snapshots-coordinator-%d", self->dir, i + 1);
    const char *base[] = {EDDY_BINARY, "coordinator", "--bind", self->url[i], "--http-host",
                          "127.0.0.1", "--http-port", self->http_s[i], "--metastore",
                          self->metastore, "--snapshot-dir",
                          self->opts.own_snapshot_dirs ? own_snap : self->snap_dir,
                          "--checkpoint-interval", self->opts.checkpoint_interval, "--heartbeat-ms",
                          self->opts.heartbeat_ms, "--heartbeat-timeout-ms",
                          self->opts.heartbeat_timeout_ms, "--keys", keys_of(self), NULL};
    char *argv[MAX_ARGS];
    int k = add_flags(argv, 0, base);
    k = add_args(argv, k, self->opts.coord_args);
    k = add_args(argv, k, extra);
    argv[k] = NULL;
    stop(&self->coords[i], 0); /* reap a killed one before reuse */
    memset(&self->coords[i], 0, sizeof self->coords[i]);
    self->coords[i].stdout_fd = -1;
    listen_wait_t w = {self, i, 0};
    char *before = eddy_read_file(self->coord_log[i], &w.from);
    free(before);
    if (!before)
        w.from = 0;
    if (eddy_proc_start(&self->coords[i], argv, NULL, self->coord_log[i], err) != 0)
        return -1;
    self->coord_starts[i]++;
    if (!eddy_poll_until(coordinator_up, &w, LISTEN_DEADLINE_MS) ||
        !eddy_proc_alive(&self->coords[i])) {
        char *log = eddy_read_file(self->coord_log[i], NULL);
        eddy_err_set(err, "coordinator %d did not start (exit %d): %s", i + 1,
                     eddy_proc_wait(&self->coords[i], 0), log ? log : "(no log)");
        free(log);
        return -1;
    }
    return 0;
}

eddy_proc_t *eddy_test_cluster_coordinator(eddy_test_cluster_t *self, int i)
{
    return &self->coords[i];
}

char *eddy_test_cluster_coordinator_log(eddy_test_cluster_t *self, int i)
{
    return self->coord_log[i];
}

int eddy_test_cluster_start_worker(eddy_test_cluster_t *self, eddy_err_t *err)
{
    return eddy_test_cluster_start_worker_as(self, NULL, NULL, err);
}

int eddy_test_cluster_start_worker_as(eddy_test_cluster_t *self, const char *name,
                                      const char *const extra[], eddy_err_t *err)
{
    if (self->n_workers == EDDY_TEST_CLUSTER_MAX_WORKERS) {
        eddy_err_set(err, "cluster: more than %d workers",
                     EDDY_TEST_CLUSTER_MAX_WORKERS);
        return -1;
    }
    int i = self->n_workers;
    char auto_name[32], wlog[PATH_CAP];
    snprintf(auto_name, sizeof auto_name, "worker-%d", i + 1);
    snprintf(wlog, sizeof wlog, "%s/%s.log", self->dir, auto_name);
    if (!name)
        name = auto_name;
    const char *coordinators =
        self->opts.worker_coordinators ? self->opts.worker_coordinators : self->urls;
    char own_snap[PATH_CAP + 64];
    snprintf(own_snap, sizeof own_snap, "%s/snapshots-%s", self->dir, auto_name);
    const char *base[] = {EDDY_BINARY, "worker", "--coordinator", coordinators, "--name", name,
                          "--snapshot-dir", self->opts.own_snapshot_dirs ? own_snap : self->snap_dir,
                          "--keys", keys_of(self), NULL};
    char *argv[MAX_ARGS];
    int k = add_flags(argv, 0, base);
    k = add_args(argv, k, self->opts.worker_args);
    k = add_args(argv, k, extra);
    argv[k] = NULL;
    if (eddy_proc_start(&self->workers[i], argv, NULL, wlog, err) != 0)
        return -1;
    self->n_workers++;
    return i;
}

eddy_proc_t *eddy_test_cluster_worker(eddy_test_cluster_t *self, int i)
{
    return &self->workers[i];
}

int eddy_test_cluster_n_workers(const eddy_test_cluster_t *self)
{
    return self->n_workers;
}

typedef struct alive_wait {
    int port, want;
    bool with_tasks;
} alive_wait_t;

static bool enough_alive(void *arg)
{
    alive_wait_t *a = arg;
    json_t *st = eddy_test_status(a->port);
    int alive = 0;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        alive += json_is_true(json_object_get(w, "alive")) &&
                 (!a->with_tasks || json_integer_value(json_object_get(w, "tasks")) > 0);
    }
    json_decref(st);
    return alive >= a->want;
}

bool eddy_test_cluster_wait_workers(eddy_test_cluster_t *self, int n, bool with_tasks,
                                    uint64_t timeout_ms)
{
    alive_wait_t a = {self->port[0], n, with_tasks};
    return eddy_poll_until(enough_alive, &a, timeout_ms);
}

int eddy_test_cluster_submit(eddy_test_cluster_t *self, const char *const job_args[], char **out,
                             eddy_err_t *err)
{
    const char *base[] = {EDDY_BINARY, "submit", "--coordinator", self->urls, "--keys",
                          keys_of(self), NULL};
    char *argv[MAX_ARGS];
    int k = add_flags(argv, 0, base);
    k = add_args(argv, k, job_args);
    argv[k] = NULL;
    char *o = NULL, *e = NULL;
    int rc = eddy_proc_run(argv, SUBMIT_DEADLINE_MS, &o, &e);
    if (rc != 0) {
        eddy_err_set(err, "eddy submit exited %d: %s%s", rc, o ? o : "", e ? e : "");
        free(o);
        free(e);
        return -1;
    }
    free(e);
    if (out)
        *out = o;
    else
        free(o);
    return 0;
}

/* `eddy ARGS... --coordinator URLS [--keys DIR]` into argv. */
static void ctl_argv(eddy_test_cluster_t *self, const char *const args[], char **argv)
{
    int k = 0;
    argv[k++] = EDDY_BINARY;
    k = add_args(argv, k, args);
    if (k < MAX_ARGS - 5) {
        argv[k++] = "--coordinator";
        argv[k++] = self->urls;
        if (self->opts.keys_dir) {
            argv[k++] = "--keys";
            argv[k++] = (char *)self->opts.keys_dir;
        }
    }
    argv[k] = NULL;
}

int eddy_test_cluster_ctl(eddy_test_cluster_t *self, const char *const args[],
                          uint64_t timeout_ms, char **out, char **errout)
{
    char *argv[MAX_ARGS];
    ctl_argv(self, args, argv);
    return eddy_proc_run(argv, timeout_ms, out, errout);
}

int eddy_test_cluster_ctl_start(eddy_test_cluster_t *self, const char *const args[],
                                eddy_proc_t *p, const char *stdout_path,
                                const char *stderr_path, eddy_err_t *err)
{
    char *argv[MAX_ARGS];
    ctl_argv(self, args, argv);
    return eddy_proc_start(p, argv, stdout_path, stderr_path, err);
}

/* ---- job state ------------------------------------------------------------ */

json_t *eddy_test_cluster_status(eddy_test_cluster_t *self)
{
    if (self->n_ports == 1)
        return eddy_test_status(self->port[0]);
    const char *base[] = {EDDY_BINARY, "status", "--coordinator", self->urls, "--keys",
                          keys_of(self), NULL};
    const char *json[] = {"--json", NULL};
    char *argv[MAX_ARGS];
    argv[add_args(argv, add_flags(argv, 0, base), json)] = NULL;
    char *out = NULL;
    int rc = eddy_proc_run(argv, 15000, &out, NULL);
    json_t *doc = rc == 0 && out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    return doc;
}

/* The job in a status document (NULL: none). */
static eddy_test_job_view_t view_of(json_t *st, const char *job)
{
    eddy_test_job_view_t v = {0};
    json_t *j = st ? eddy_test_status_job(st, job) : NULL;
    if (j) {
        v.ok = true;
        const char *state = json_string_value(json_object_get(j, "state"));
        snprintf(v.state, sizeof v.state, "%s", state ? state : "?");
        const char *g = json_string_value(json_object_get(j, "guarantee"));
        snprintf(v.guarantee, sizeof v.guarantee, "%s", g ? g : "(none)");
        v.epoch = json_integer_value(json_object_get(j, "epoch"));
        v.restarts = json_integer_value(json_object_get(j, "restarts"));
        json_t *ck = json_object_get(j, "last_checkpoint");
        v.ck_id = json_integer_value(json_object_get(ck, "id"));
        v.ck_completed = json_integer_value(json_object_get(ck, "completed"));
        v.ck_failed = json_integer_value(json_object_get(ck, "failed"));
        size_t i;
        json_t *op;
        json_array_foreach(json_object_get(j, "operators"), i, op)
        {
            if (json_is_true(json_object_get(op, "source")))
                v.source_in += json_integer_value(json_object_get(op, "records_in"));
        }
    }
    return v;
}

eddy_test_job_view_t eddy_test_job_view(int port, const char *job)
{
    json_t *st = eddy_test_status(port);
    eddy_test_job_view_t v = view_of(st, job);
    json_decref(st);
    return v;
}

typedef struct job_wait {
    eddy_test_cluster_t *cluster; /* asked through all its coordinators when set */
    int port;
    const char *job;
    const eddy_test_job_want_t *want;
    eddy_proc_t *owner;
    bool gone;
    eddy_test_job_view_t last;
} job_wait_t;

static bool job_matches(void *arg)
{
    job_wait_t *w = arg;
    if (w->owner && !eddy_proc_alive(w->owner)) {
        w->gone = true;
        return true;
    }
    json_t *st = w->cluster ? eddy_test_cluster_status(w->cluster) : eddy_test_status(w->port);
    eddy_test_job_view_t v = view_of(st, w->job);
    json_decref(st);
    if (!v.ok)
        return false;
    w->last = v;
    const eddy_test_job_want_t *q = w->want;
    return (!q->state || !strcmp(v.state, q->state)) && v.ck_id >= q->min_ck_id &&
           v.ck_completed >= q->min_completed && v.restarts >= q->min_restarts &&
           v.source_in >= q->min_source_in;
}

static bool wait_for(job_wait_t *w, uint64_t timeout_ms, eddy_test_job_view_t *last, bool *gone)
{
    bool ok = eddy_poll_until(job_matches, w, timeout_ms) && !w->gone;
    if (last)
        *last = w->last;
    if (gone)
        *gone = w->gone;
    return ok;
}

bool eddy_test_job_wait(int port, const char *job, const eddy_test_job_want_t *want,
                        eddy_proc_t *owner, uint64_t timeout_ms, eddy_test_job_view_t *last,
                        bool *gone)
{
    static const eddy_test_job_want_t any = {0};
    job_wait_t w = {NULL, port, job, want ? want : &any, owner, false, {0}};
    return wait_for(&w, timeout_ms, last, gone);
}

bool eddy_test_cluster_wait_job(eddy_test_cluster_t *self, const char *job,
                                const eddy_test_job_want_t *want, uint64_t timeout_ms,
                                eddy_test_job_view_t *last, bool *gone)
{
    /* with several coordinators, one exiting is what a test may do */
    eddy_proc_t *owner = self->local_started                        ? &self->local
                         : self->n_ports == 1 && self->coords[0].pid > 0 ? &self->coords[0]
                                                                         : NULL;
    static const eddy_test_job_want_t any = {0};
    job_wait_t w = {self, self->port[0], job, want ? want : &any, owner, false, {0}};
    return wait_for(&w, timeout_ms, last, gone);
}

json_t *eddy_test_status_operator(json_t *status, const char *job, const char *op)
{
    json_t *j = status ? eddy_test_status_job(status, job) : NULL, *o, *found = NULL;
    size_t i;
    json_array_foreach(json_object_get(j, "operators"), i, o)
    {
        const char *name = json_string_value(json_object_get(o, "name"));
        if (!found && name && !strcmp(name, op))
            found = o;
    }
    return found;
}

pid_t eddy_test_status_instance_pid(json_t *status, const char *job, const char *op,
                                    int instance)
{
    json_t *o = eddy_test_status_operator(status, job, op), *w;
    json_t *inst = json_array_get(json_object_get(o, "instances"), (size_t)instance);
    json_int_t wid = inst ? json_integer_value(json_object_get(inst, "worker")) : -1;
    pid_t pid = 0;
    size_t i;
    json_array_foreach(json_object_get(status, "workers"), i, w)
    {
        if (json_integer_value(json_object_get(w, "id")) == wid)
            pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
    }
    return pid;
}

int eddy_test_same_wordcount(const char *input, const char *output, size_t *got_len,
                             size_t *want_len)
{
    size_t tl = 0, el = 0, gl = 0;
    char *text = eddy_read_file(input, &tl);
    char *expected = text ? eddy_reference_wordcount(text, tl, &el) : NULL;
    char *got = eddy_read_file(output, &gl);
    int rc = !expected || !got ? -1 : gl == el && memcmp(got, expected, el) == 0;
    if (got_len)
        *got_len = gl;
    if (want_len)
        *want_len = el;
    free(text);
    free(expected);
    free(got);
    return rc;
}

pid_t eddy_test_busy_worker(int port, pid_t except)
{
    json_t *st = eddy_test_status(port);
    pid_t pid = 0;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        pid_t p = (pid_t)json_integer_value(json_object_get(w, "pid"));
        if (!pid && p > 0 && p != except && json_is_true(json_object_get(w, "alive")) &&
            json_integer_value(json_object_get(w, "tasks")) > 0)
            pid = p;
    }
    json_decref(st);
    return pid;
}

void eddy_test_cluster_kill_worker(eddy_test_cluster_t *self, int i, int sig)
{
    if (i < 0 || i >= self->n_workers || self->workers[i].pid <= 0)
        return;
    if (sig == SIGKILL) {
        kill(self->workers[i].pid, SIGKILL);
        eddy_proc_wait(&self->workers[i], 5000);
    } else {
        kill(self->workers[i].pid, sig);
    }
}

void eddy_test_cluster_kill_coordinator(eddy_test_cluster_t *self, int i, int sig)
{
    if (i < 0 || i >= EDDY_TEST_CLUSTER_MAX_COORDS || self->coords[i].pid <= 0)
        return;
    if (sig == SIGKILL) {
        kill(self->coords[i].pid, SIGKILL);
        eddy_proc_wait(&self->coords[i], 5000);
    } else {
        kill(self->coords[i].pid, sig);
    }
}

/* ---- logs ----------------------------------------------------------------- */

char *eddy_test_cluster_log_text(eddy_test_cluster_t *self)
{
    const char *heads[1 + EDDY_TEST_CLUSTER_MAX_COORDS];
    int n = 0;
    if (self->local_started)
        heads[n++] = self->local_log;
    for (int i = 0; i < EDDY_TEST_CLUSTER_MAX_COORDS; i++)
        if (self->coord_starts[i] > 0)
            heads[n++] = self->coord_log[i];
    char *s = eddy_test_cluster_logs(heads, n, self->dir, self->n_workers);
    return s ? s : strdup("(no logs)");
}

int eddy_test_cluster_log_count(eddy_test_cluster_t *self, const char *name, const char *needle)
{
    const char *path = eddy_test_cluster_path(self, name);
    return path ? count_in_file(path, needle) : 0;
}

int eddy_test_restores_logged(const char *log, uint64_t *last)
{
    int n = 0;
    for (const char *p = log; (p = strstr(p, "restoring from checkpoint ")); n++) {
        p += strlen("restoring from checkpoint ");
        if (last)
            *last = strtoull(p, NULL, 10);
    }
    return n;
}
