/* cluster.h - one eddy cluster for an integration test: a temp directory,
 * free loopback ports, `eddy local` or coordinator(s) + workers (+ an etcd
 * of its own when asked), waits on their logs and on `eddy status --json`,
 * submit and other `eddy` commands against it, job-state polling with a
 * deadline, operators in the status, the wordcount reference check, kills,
 * and every log for a failure message.
 *
 * The integration tests each had a copy of this set-up (paths, ports,
 * argv, "listening on" polling, status polling, teardown); this is the one
 * copy. Built on proc.h (processes, status), etcd.h (temp dirs, etcd) and
 * lines.h (logs). Nothing here prints or asserts: failures come back as -1
 * or false with an eddy_err_t, so the tests keep their own assertions and
 * messages.
 *
 * Files in the cluster's directory: coordinator.log (coordinator-2.log, ..
 * for more), worker-1.log .. worker-N.log, local.log, meta/ (file
 * metastore), snapshots/ (or snapshots-coordinator-I/ and snapshots-worker-K/
 * with own_snapshot_dirs), state/. */
#ifndef EDDY_TESTS_SUPPORT_CLUSTER_H
#define EDDY_TESTS_SUPPORT_CLUSTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "tests/support/proc.h"

#define EDDY_TEST_CLUSTER_MAX_COORDS 4
#define EDDY_TEST_CLUSTER_MAX_WORKERS 16

typedef struct eddy_test_cluster_opts {
    const char *tag;          /* temp dir eddy-<tag>-XXXXXX ("cluster" when NULL) */
    int coordinators;         /* started by _new (0: none yet; start them yourself) */
    int workers;              /* started by _new after the coordinators; for local: --workers */
    int ports;                /* coordinators' port pairs to reserve (0: max(1, coordinators)) */
    bool etcd;                /* start an etcd of its own; the metastore is its URL + etcd_query */
    const char *etcd_query;   /* appended to the etcd URL, e.g. "?timeout_ms=1000" */
    const char *keys_dir;     /* --keys DIR for every process it starts (NULL: none) */
    /* Timing flags of coordinators and eddy local; NULL: the default shown,
     * "": the flag left out (eddy's own default). */
    const char *checkpoint_interval;  /* --checkpoint-interval "400" */
    const char *heartbeat_ms;         /* --heartbeat-ms "200" */
    const char *heartbeat_timeout_ms; /* --heartbeat-timeout-ms "2000" ("5000" under ASan) */
    const char *const *coord_args;  /* extra coordinator flags, NULL-terminated (may be NULL) */
    const char *const *worker_args; /* extra worker flags, NULL-terminated (may be NULL) */
    const char *worker_coordinators; /* workers' --coordinator (NULL: every coordinator, in order) */
    /* Each process its own --snapshot-dir (DIR/snapshots-coordinator-I,
     * DIR/snapshots-worker-K) rather than the shared DIR/snapshots: for
     * checkpoint storage that no process shares (s3://). */
    bool own_snapshot_dirs;
} eddy_test_cluster_opts_t;

typedef struct eddy_test_cluster eddy_test_cluster_t;

/* Makes the directory, reserves ports, starts etcd, coordinators and
 * workers as opts says, and waits for each coordinator to listen and for
 * the workers to be alive in status. NULL with err (and everything it
 * started stopped) on failure. */
eddy_test_cluster_t *eddy_test_cluster_new(const eddy_test_cluster_opts_t *opts, eddy_err_t *err);
/* Kills every process (SIGTERM, then SIGKILL), stops etcd, removes the
 * directory (kept when EDDY_TEST_KEEP is set, to look at). NULL-safe. */
void eddy_test_cluster_destroy(eddy_test_cluster_t **self_p);

/* The options in use: a test may change the heartbeat, checkpoint
 * interval or worker count here; processes started afterwards use them. */
eddy_test_cluster_opts_t *eddy_test_cluster_opts(eddy_test_cluster_t *self);

/* The strings below are owned by the cluster and valid until destroy;
 * they are char * so that they can stand in an argv.
 * The directory, and DIR/name. */
char *eddy_test_cluster_dir(eddy_test_cluster_t *self);
char *eddy_test_cluster_path(eddy_test_cluster_t *self, const char *name);
/* Coordinator i's control port, HTTP port, and "tcp://127.0.0.1:PORT";
 * the _s forms as decimal strings for argv. */
int eddy_test_cluster_port(const eddy_test_cluster_t *self, int i);
int eddy_test_cluster_http_port(const eddy_test_cluster_t *self, int i);
char *eddy_test_cluster_port_s(eddy_test_cluster_t *self, int i);
char *eddy_test_cluster_http_port_s(eddy_test_cluster_t *self, int i);
char *eddy_test_cluster_url(eddy_test_cluster_t *self, int i);
/* All coordinators' URLs, comma-separated (for --coordinator). */
char *eddy_test_cluster_urls(eddy_test_cluster_t *self);
/* The metastore the coordinators use (etcd URL or DIR/meta). */
char *eddy_test_cluster_metastore(eddy_test_cluster_t *self);
/* The etcd process (0 without etcd), for SIGSTOP / SIGCONT. */
pid_t eddy_test_cluster_etcd_pid(const eddy_test_cluster_t *self);
char *eddy_test_cluster_etcd_url(eddy_test_cluster_t *self);

/* `eddy local --workers N --control-port P --http-port H
 * --checkpoint-interval I --heartbeat-ms B --heartbeat-timeout-ms T
 * EXTRA...` with its output in DIR/local.log (--workers from opts.workers,
 * 3 when 0). 0 or -1 with err. */
int eddy_test_cluster_start_local(eddy_test_cluster_t *self, const char *const extra[],
                                  eddy_err_t *err);
/* The same with its stdout in stdout_path (a changelog) instead of the log. */
int eddy_test_cluster_start_local_to(eddy_test_cluster_t *self, const char *const extra[],
                                     const char *stdout_path, eddy_err_t *err);
eddy_proc_t *eddy_test_cluster_local(eddy_test_cluster_t *self);
/* Starts eddy local (as above) and waits up to timeout_ms for it to end:
 * its exit code, -1 when it had to be killed or did not start (err). */
int eddy_test_cluster_run_local(eddy_test_cluster_t *self, const char *const extra[],
                                uint64_t timeout_ms, eddy_err_t *err);

/* Waits up to timeout_ms for eddy local to end, calling tick(arg) (may be
 * NULL) about every every_ms meanwhile: its exit code, or -1 when it had
 * not ended by then (it keeps running; _destroy kills it). */
int eddy_test_cluster_wait_local(eddy_test_cluster_t *self, uint64_t timeout_ms,
                                 unsigned every_ms, void (*tick)(void *arg), void *arg);

/* Starts coordinator i (again, if it was killed) and waits up to 15 s for
 * a new "] listening on" (leading, or a file store) or "] standing by as"
 * line in its log. 0 or -1 with err (the log's text in it). */
int eddy_test_cluster_start_coordinator(eddy_test_cluster_t *self, int i, eddy_err_t *err);
/* The same with these flags after opts.coord_args (NULL-terminated). */
int eddy_test_cluster_start_coordinator_with(eddy_test_cluster_t *self, int i,
                                             const char *const extra[], eddy_err_t *err);
eddy_proc_t *eddy_test_cluster_coordinator(eddy_test_cluster_t *self, int i);
char *eddy_test_cluster_coordinator_log(eddy_test_cluster_t *self, int i);
/* Starts one more worker ("worker-K", log DIR/worker-K.log) against every
 * coordinator; its index (K - 1), or -1 with err. */
int eddy_test_cluster_start_worker(eddy_test_cluster_t *self, eddy_err_t *err);
/* The same named `name` (NULL: "worker-K"; "": no --name, the worker's
 * own choice) with these flags after opts.worker_args (may be NULL); its
 * log is DIR/worker-K.log all the same. */
int eddy_test_cluster_start_worker_as(eddy_test_cluster_t *self, const char *name,
                                      const char *const extra[], eddy_err_t *err);
eddy_proc_t *eddy_test_cluster_worker(eddy_test_cluster_t *self, int i);
int eddy_test_cluster_n_workers(const eddy_test_cluster_t *self);
/* Polls coordinator 0's status until at least n workers are alive (with
 * tasks when with_tasks). */
bool eddy_test_cluster_wait_workers(eddy_test_cluster_t *self, int n, bool with_tasks,
                                    uint64_t timeout_ms);

/* `eddy submit --coordinator URLS JOB_ARGS...`; 0 when it exited 0 (its
 * stdout in *out when out is not NULL, malloc'd), else -1 with err holding
 * the exit code and its output. */
int eddy_test_cluster_submit(eddy_test_cluster_t *self, const char *const job_args[], char **out,
                             eddy_err_t *err);

/* `eddy ARGS... --coordinator URLS` (and --keys with opts.keys_dir) run
 * to completion, killed after timeout_ms: as eddy_proc_run, its exit code
 * (-1 on timeout) and its stdout and stderr in *out and *errout (malloc'd;
 * either may be NULL). */
int eddy_test_cluster_ctl(eddy_test_cluster_t *self, const char *const args[],
                          uint64_t timeout_ms, char **out, char **errout);

/* How many "restoring from checkpoint N" lines log holds; *last (may be
 * NULL) = the last N. */
int eddy_test_restores_logged(const char *log, uint64_t *last);
/* The same started in the background as p, its stdout in stdout_path and
 * its stderr in stderr_path (NULL: /dev/null). 0 or -1 with err. */
int eddy_test_cluster_ctl_start(eddy_test_cluster_t *self, const char *const args[],
                                eddy_proc_t *p, const char *stdout_path,
                                const char *stderr_path, eddy_err_t *err);

/* A job as `eddy status --json` shows it. */
typedef struct eddy_test_job_view {
    bool ok; /* the job was in the status */
    char state[32], guarantee[32];
    int64_t epoch, restarts, ck_id, ck_completed, ck_failed;
    int64_t source_in; /* records_in summed over the source operators */
} eddy_test_job_view_t;

/* What to wait for: every set field must hold (state NULL = any). */
typedef struct eddy_test_job_want {
    const char *state;
    int64_t min_ck_id, min_completed, min_restarts, min_source_in;
} eddy_test_job_want_t;

/* The job in the status of the coordinator on port. */
eddy_test_job_view_t eddy_test_job_view(int port, const char *job);
/* Polls the job on coordinator `port` until it matches want, or timeout_ms
 * passes, or owner (may be NULL) exits (then *gone). The last view seen in
 * *last (may be NULL). */
bool eddy_test_job_wait(int port, const char *job, const eddy_test_job_want_t *want,
                        eddy_proc_t *owner, uint64_t timeout_ms, eddy_test_job_view_t *last,
                        bool *gone);
/* `eddy status --json` of the cluster: coordinator 0's, or with several
 * coordinators the leader's (asked through all of them); NULL if none
 * answered. */
json_t *eddy_test_cluster_status(eddy_test_cluster_t *self);
/* The same as eddy_test_job_wait on the cluster's status, giving up when
 * its local process exits (or, with one coordinator, that coordinator). */
bool eddy_test_cluster_wait_job(eddy_test_cluster_t *self, const char *job,
                                const eddy_test_job_want_t *want, uint64_t timeout_ms,
                                eddy_test_job_view_t *last, bool *gone);

/* Operator `op` of job `job` in a status document (borrowed), or NULL. */
json_t *eddy_test_status_operator(json_t *status, const char *job, const char *op);
/* The pid of the worker that op[instance] of job is placed on in a status
 * document, or 0 when there is none. */
pid_t eddy_test_status_instance_pid(json_t *status, const char *job, const char *op,
                                    int instance);

/* A wordcount's output file against eddy_reference_wordcount of its input
 * file: 1 when byte for byte the same, 0 when not, -1 when either could not
 * be read; the lengths in *got_len and *want_len (may be NULL). */
int eddy_test_same_wordcount(const char *input, const char *output, size_t *got_len,
                             size_t *want_len);

/* The pid of the first worker in the status of coordinator `port` that is
 * alive and runs tasks, other than `except` (0: none such). */
pid_t eddy_test_busy_worker(int port, pid_t except);

/* Signals worker i (SIGKILL: it is reaped and marked dead). */
void eddy_test_cluster_kill_worker(eddy_test_cluster_t *self, int i, int sig);
void eddy_test_cluster_kill_coordinator(eddy_test_cluster_t *self, int i, int sig);

/* Every log of the cluster (local, coordinators, workers), each after a
 * "--- PATH" line; malloc'd, for a failure message. */
char *eddy_test_cluster_log_text(eddy_test_cluster_t *self);
/* How often needle appears in DIR/name's current text. */
int eddy_test_cluster_log_count(eddy_test_cluster_t *self, const char *name, const char *needle);

#endif
