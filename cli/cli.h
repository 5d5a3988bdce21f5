/* cli.h - the subcommands of the eddy binary, one function each. Every
 * subcommand returns its exit status: 0 success, 1 runtime failure, 2 usage
 * error (a one-line message naming the problem, nothing started). */
#ifndef EDDY_CLI_CLI_H
#define EDDY_CLI_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/flags.h"
#include "net/client.h"
#include "net/keys.h"
#include "plan/graph.h"
#include "plan/plugin.h"
#include "state/savepoint_manifest.h"

#define EDDY_DEFAULT_CONTROL_PORT 7600
#define EDDY_DEFAULT_HTTP_PORT 9250
#define EDDY_DEFAULT_COORDINATOR EDDY_CLIENT_DEFAULT_COORDINATOR

extern volatile sig_atomic_t eddy_cli_stop;
void eddy_cli_install_signals(void);

int eddy_cmd_local(int argc, char **argv);
int eddy_cmd_coordinator(int argc, char **argv);
int eddy_cmd_worker(int argc, char **argv);
int eddy_cmd_controller(int argc, char **argv);
int eddy_cmd_submit(int argc, char **argv);
int eddy_cmd_rescale(int argc, char **argv);
int eddy_cmd_status(int argc, char **argv);
int eddy_cmd_scaling(int argc, char **argv);
int eddy_cmd_jobs(int argc, char **argv);
int eddy_cmd_cancel(int argc, char **argv);
int eddy_cmd_plan(int argc, char **argv);
int eddy_cmd_nexmark(int argc, char **argv);
int eddy_cmd_keygen(int argc, char **argv);
int eddy_cmd_savepoint(int argc, char **argv);
int eddy_cmd_upgrade(int argc, char **argv);
/* --from-savepoint LOC of local and submit (cmd_savepoint.c): makes LOC a
 * root, reads its manifest and every file it names, and checks it against
 * the job's graph g; prints one line and returns 2 when anything is wrong
 * (m cleared), else 0 with root and m filled. */
int eddy_cli_open_savepoint(const char *sub, const char *loc, const eddy_job_graph_t *g,
                            bool allow_non_restored, char *root, size_t cap,
                            eddy_savepoint_manifest_t *m);
/* The same without printing: -1 with err (m cleared). */
int eddy_cli_savepoint_read(const char *loc, const eddy_job_graph_t *g, bool allow_non_restored,
                            char *root, size_t cap, eddy_savepoint_manifest_t *m, eddy_err_t *err);
/* eddy_cli_savepoint_read, then its manifest encoded for a submit
 * request (*text malloc'd, at most EDDY_ARG_MAX): 0, or -1 with err. */
int eddy_cli_savepoint_text(const char *loc, const eddy_job_graph_t *g, bool allow_non_restored,
                            char *root, size_t cap, char **text, eddy_err_t *err);
/* A state of `eddy status --json`'s jobs that is final: finished, failed,
 * cancelled or stopped (NULL is not). */
bool eddy_cli_job_state_ended(const char *state);

/* A job to submit to a running coordinator (cli/submit_job.c), the one
 * copy `eddy submit` and `eddy upgrade` share. The caller fills what the
 * user gave (EDDY_CLI_JOB_FLAGS) and the job flags in args (taken over);
 * eddy_cli_job_resolve only reads --pipeline/--sql into args (the job's
 * text in spec_text); eddy_cli_job_prepare does that, loads --plugin
 * and builds the graph (-1 with err: a usage error, nothing sent);
 * eddy_cli_job_submit checks --from-savepoint against that graph, uploads
 * the plugin and sends `submit`: 0 with the new job's id in *job_id
 * (malloc'd), or the exit status (1 the cluster failed or refused, 2 the
 * savepoint or a flag is wrong) with err. eddy_cli_job_clear frees. */
typedef struct eddy_cli_job {
    const char *job, *plugin, *pipeline, *sql, *guarantee;
    eddy_args_t args;
    char *spec_text;
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
    eddy_job_graph_t graph;
    bool resolved, built, uploaded;
} eddy_cli_job_t;
#define EDDY_CLI_JOB_FLAGS(j)                                                                      \
    EDDY_FLAG_STR("job", &(j).job, "JOB", "job to run (see eddy jobs, or the plugin's)"),          \
    EDDY_FLAG_STR("guarantee", &(j).guarantee, "G",                                                \
                  "exactly-once (default), at-least-once or at-most-once"),                        \
    EDDY_FLAG_STR("plugin", &(j).plugin, "FILE.so", "upload this plugin first (its jobs and kinds)"), \
    EDDY_FLAG_STR("pipeline", &(j).pipeline, "FILE",                                               \
                  "a declarative pipeline (docs/pipelines.md)"),                                   \
    EDDY_FLAG_STR("sql", &(j).sql, "FILE", "SQL statements (docs/sql.md)")
int eddy_cli_job_resolve(eddy_cli_job_t *j, eddy_err_t *err);
int eddy_cli_job_prepare(eddy_cli_job_t *j, eddy_err_t *err);
int eddy_cli_job_submit(eddy_cli_job_t *j, const char *coordinator, const char *keys_dir,
                        const char *from_savepoint, bool allow_non_restored, char **job_id,
                        eddy_err_t *err);
/* Only the plugin's upload (submit does it when it was not done): 0, or
 * the exit status with err. */
int eddy_cli_job_upload(eddy_cli_job_t *j, const char *coordinator, const char *keys_dir,
                        eddy_err_t *err);
void eddy_cli_job_clear(eddy_cli_job_t *j);
/* One request to the coordinator: 0 with its answer in *body (malloc'd;
 * body may be NULL), or the exit status it means (1: unreachable or
 * failed, 2: the coordinator called it a usage error) with the answer or
 * the failure in err. */
int eddy_cli_request(const char *coordinator, const eddy_keys_t *keys, const char *verb, int argc,
                     char **argv, uint32_t timeout_ms, char **body, eddy_err_t *err);

/* --keys DIR: CURVE keys from `eddy keygen` (net/keys.h); default $EDDY_KEYS. */
#define EDDY_CLI_KEYS_FLAG(var)                                                                    \
    EDDY_FLAG_STR("keys", &(var), "DIR",                                                           \
                  "CURVE keys made by `eddy keygen DIR` (env EDDY_KEYS; default none)")
const char *eddy_cli_default_keys(void);
/* The coordinator's caps (eddy_coordinator_limits_t lim), shared by
 * `eddy coordinator` and `eddy local` (docs/security.md). */
#define EDDY_CLI_LIMIT_FLAGS(lim)                                                                  \
    EDDY_FLAG_U32("max-heartbeat-entries", &(lim).max_heartbeat_entries, 1, 65536, "N",           \
                  "reject a worker heartbeat with more than N task entries (1024)"),              \
    EDDY_FLAG_U32("max-heartbeat-bytes", &(lim).max_heartbeat_bytes, 1024, 64u << 20, "BYTES",    \
                  "reject a worker heartbeat larger than BYTES (2097152)"),                       \
    EDDY_FLAG_U32("max-worker-series", &(lim).max_worker_series, 1, 65536, "N",                   \
                  "keep at most N task metric series per worker (1024)"),                         \
    EDDY_FLAG_U32("max-registrations", &(lim).max_workers, 1, 4096, "N",                          \
                  "refuse worker registrations beyond N live workers (1024)"),                    \
    EDDY_FLAG_U32("max-decisions", &(lim).max_decisions, 1, 1024, "N",                            \
                  "keep the newest N scaling decisions (1024)"),                                  \
    EDDY_FLAG_U32("max-decision-bytes", &(lim).max_decision_bytes, 64, 65536, "BYTES",            \
                  "refuse a scaling decision larger than BYTES (16384)"),                         \
    EDDY_FLAG_U32("max-ended-jobs", &(lim).max_ended_jobs, 1, 100000, "N",                        \
                  "keep N ended jobs (and their dashboard history) in memory (64)"),              \
    EDDY_FLAG_U32("max-plugins", &(lim).max_plugins, 1, 100000, "N",                              \
                  "refuse uploads of new plugins after N (64)"),                                  \
    EDDY_FLAG_U32("reply-hwm", &(lim).reply_hwm, 1, 10000000, "N",                                \
                  "drop messages to a peer that has N unread ones queued (100000)")
/* Loads the keys in dir for use into *keys (NULL when dir is NULL or
 * empty). Returns 0, or prints "eddy SUB: error" and returns 2. */
int eddy_cli_load_keys(const char *sub, const char *dir, eddy_keys_use_t use, eddy_keys_t **keys);

/* --insecure: run without keys although reachable beyond loopback. */
#define EDDY_CLI_INSECURE_FLAG(var)                                                                \
    EDDY_FLAG_SWITCH("insecure", &(var),                                                           \
                     "run without --keys although listening or connecting beyond loopback: "       \
                     "anyone who can reach the port can run code on the workers through plugins")
/* Closed by default: without keys, a process that listens on or connects to
 * an address beyond loopback (what says so: "control socket
 * tcp://0.0.0.0:7600 is reachable beyond loopback") refuses to start (prints one line, returns 2) unless
 * insecure, when it prints a warning saying what that exposes (returns 0).
 * what NULL (all loopback) or keys: 0, nothing printed. */
int eddy_cli_check_exposure(const char *sub, bool keys, bool insecure, const char *what);

/* Prints "eddy SUB: message" and returns 2. */
int eddy_usage_error(const char *sub, const char *msg);

/* --checkpoint-storage URI against --snapshot-dir DIR (*dir: what was
 * given, NULL when not). file:///DIR becomes *dir = DIR (borrowed from
 * storage) and *uri NULL: the same as --snapshot-dir DIR, so giving both is
 * a usage error (printed, returns 2). s3://... stays in *uri (checked for
 * length and for credentials in it) and *dir is left as it is: a local
 * directory for what is not a checkpoint (the coordinator's uploaded
 * plugins). No storage: 0, *uri NULL. *dir NULL afterwards means neither
 * flag gave a directory. */
int eddy_cli_checkpoint_storage(const char *sub, const char *storage, const char **dir,
                                const char **uri);
#define EDDY_CLI_STORAGE_FLAG(var)                                                                \
    EDDY_FLAG_STR("checkpoint-storage", &(var), "URI",                                         \
                  "where checkpoints go: file:///DIR (the same as --snapshot-dir DIR) or "      \
                  "s3://BUCKET/PREFIX?endpoint=URL&region=R (credentials from "                 \
                  "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; no process "    \
                  "needs another's files)")
/* Parses flags; on --help prints usage + flags and sets *exit_code 0; on
 * error prints the one-line error and sets *exit_code 2. Returns 0 to go on. */
int eddy_cli_parse(const char *sub, const char *usage, eddy_flag_t *flags, int argc, char **argv,
                   eddy_args_t *positional, eddy_args_t *passthrough, int *exit_code);

/* --pipeline FILE: reads the spec (at most EDDY_ARG_MAX - 1 bytes), makes
 * *job "pipeline" and puts --spec TEXT --spec-file FILE before job_args;
 * *text (the caller frees it after job_args) holds the spec. */
int eddy_cli_pipeline_job(const char *file, const char **job, eddy_args_t *job_args, char **text,
                          eddy_err_t *err);
/* The same for --sql FILE: the text as the job pipeline's --sql (docs/sql.md). */
int eddy_cli_sql_job(const char *file, const char **job, eddy_args_t *job_args, char **text,
                     eddy_err_t *err);
/* A --sql script with an EXPLAIN statement is run by printing its plan,
 * as Flink's SQL client prints an EXPLAIN's: `eddy plan --sql FILE [job
 * flags]` (job_args as eddy_cli_sql_job made them), its exit status; -1
 * (nothing done) when text has no EXPLAIN. */
int eddy_cli_sql_explain(const char *file, const char *text, const eddy_args_t *job_args);
#endif
