/* cmd_local.c - `eddy local`: coordinator (in this process), N worker
 * processes and optionally the controller on one machine, with the embedded
 * metadata store; runs one job and exits when a bounded job finishes.
 *
 * Workers are separate `eddy worker` processes (fork + exec of this binary)
 * that die with this process (PR_SET_PDEATHSIG) and that it restarts when
 * they die (local_supervisor.h). Everything lives in a state directory
 * (metadata, snapshots) that is removed at exit unless named. Exit codes:
 * 0 finished, 1 failed (the last line on stderr says why), 2 usage error,
 * 3 cancelled (eddy cancel), 130 interrupted. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/local_supervisor.h"
#include "common/log.h"
#include "controller/pool_local.h"
#include "coordinator/coordinator.h"
#include "net/http.h"
#include "net/loopback.h"
#include "connectors/dir_source.h"
#include "connectors/sources.h"
#include "plan/plugin.h"
#include "plan/registry.h"
#include "state/snapshot_store.h"

#define MAX_LOCAL_WORKERS 64

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Frees what a run holds and removes its temporary state directory
 * (temp_dir NULL: none, or the user's own --state-dir). */
static void release_run(eddy_keys_t **keys, const char *temp_dir, eddy_args_t *job_args, char **token)
{
    eddy_keys_destroy(keys);
    if (temp_dir)
        nftw(temp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    eddy_args_free(job_args);
    eddy_http_token_free(token);
}

/* The workers, and with autoscale the controller, as supervised children. */
static int start_children(eddy_local_supervisor_t *sup, uint32_t workers, char *connect,
                          char *snaps, const char *keys_dir, bool insecure,
                          bool no_local_recovery, const char *autoscale_job,
                          const char *controller_flags, uint32_t pool_max, eddy_err_t *err)
{
    for (uint32_t i = 0; i < workers; i++) {
        char name[32];
        snprintf(name, sizeof name, "worker-%u", i + 1);
        /* eddy local stops them after its coordinator ended: nobody to tell */
        eddy_local_worker_flags_t wflags = {connect, snaps, keys_dir, true, insecure,
                                            no_local_recovery};
        char *wargv[EDDY_LOCAL_WORKER_ARGV_MAX];
        eddy_local_worker_argv(&wflags, name, wargv);
        if (eddy_local_supervisor_add(sup, name, wargv, false, err) < 0)
            return -1;
    }
    if (autoscale_job) {
        char *cargv[64] = {"eddy", "controller", "--coordinator", connect, "--job",
                           (char *)autoscale_job, "--exit-when-done"};
        int k = 7;
        if (keys_dir) {
            cargv[k++] = "--keys";
            cargv[k++] = (char *)keys_dir;
        }
        /* --pool: the controller grows the workers from --workers to
         * pool_max with workers of its own, started like the ones above.
         * Its minimum is 0: the --workers are this supervisor's to keep
         * alive (the pool only ever stops its own). */
        char max_s[16], expect_s[16];
        snprintf(max_s, sizeof max_s, "%u", pool_max);
        /* its start wait ends once this supervisor's workers registered */
        snprintf(expect_s, sizeof expect_s, "%u", workers);
        char *pool_argv[] = {"--pool", "local", "--min-workers", "0", "--max-workers", max_s,
                             "--pool-snapshot-dir", snaps, "--pool-expect-workers", expect_s, NULL};
        for (int i = 0; pool_max && pool_argv[i]; i++)
            cargv[k++] = pool_argv[i];
        char *extra = strdup(controller_flags);
        if (!extra)
            return eddy_err_set(err, "out of memory");
        for (char *tok = strtok(extra, " "); tok && k < 63; tok = strtok(NULL, " "))
            cargv[k++] = tok;
        cargv[k] = NULL;
        /* the controller exits 0 by itself when its job has ended */
        int rc = eddy_local_supervisor_add(sup, "controller", cargv, true, err);
        free(extra);
        if (rc < 0)
            return -1;
    }
    return eddy_local_supervisor_start(sup, err);
}

static const char *local_usage =
    "--workers N (--job JOB | --pipeline FILE | --sql FILE) [job flags]\n\n"
    "Runs a coordinator, N worker processes (and with --autoscale the controller)\n"
    "on this machine and runs JOB on them; exits when a bounded job finishes.\n"
    "With --pool the controller also adds workers when the job needs more than N\n"
    "(up to --max-workers) and stops them again when they have been idle.\n"
    "A worker (or the controller) that dies is restarted with a growing delay;\n"
    "one that keeps dying ends the run.\n"
    "`eddy jobs` lists the jobs; `eddy local --job JOB --help` shows a job's flags.\n"
    "--pipeline FILE runs a declarative pipeline (docs/pipelines.md).\n"
    "--sql FILE runs SQL statements as a pipeline (docs/sql.md); a script with EXPLAIN\n"
    "prints its plan (as eddy plan --sql) and starts nothing.\n"
    "What the job prints (wordcount's changelog without --output) goes to stdout,\n"
    "or to --changelog FILE; logs and progress lines go to stderr, whole lines each.\n\n"
    "exit status: 0 the job finished, 1 it failed or its workers could not be kept\n"
    "alive (the last line on stderr says why), 2 usage error (nothing started),\n"
    "3 the job was cancelled (eddy cancel), 130 interrupted (Ctrl-C, SIGTERM).";

/* The input files (and directories) of the job's file (and dir) sources:
 * a missing or special one is a usage error here rather than a failing task
 * in every worker. */
static int check_local_inputs(const eddy_job_graph_t *g, eddy_err_t *err)
{
    for (uint32_t s = 0; s < g->n_stages; s++) {
        if (g->stages[s].source == &eddy_dir_source_ops) {
            const eddy_dir_source_config_t *d = g->stages[s].source_config;
            if (eddy_dir_source_check(d->path, err) < 0)
                return eddy_err_wrap(err, "--input");
            continue;
        }
        if (g->stages[s].source != &eddy_file_source_ops)
            continue;
        const eddy_file_source_config_t *f = g->stages[s].source_config;
        if (eddy_file_source_check(f->path, err) < 0)
            return eddy_err_wrap(err, "--input");
    }
    return 0;
}

/* spec_text: a --pipeline spec read here, freed by the caller (job
 * arguments point into it until the job has run). */
static int run_local(int argc, char **argv, char **spec_text)
{
    uint32_t workers = 2, control_port = EDDY_DEFAULT_CONTROL_PORT, http_port = EDDY_DEFAULT_HTTP_PORT;
    uint32_t interval = 2000, hb = 500, hb_timeout = 3000;
    uint32_t stuck_timeout = EDDY_COORD_DEFAULT_STUCK_TIMEOUT_MS;
    uint32_t retained = 2, tolerable = 3, deploy_timeout = 10000, max_restarts = 10;
    uint32_t full_every = 10;
    const char *job = NULL, *state_dir = NULL, *bind_host = "127.0.0.1", *plugin = NULL;
    const char *pipeline = NULL, *sql = NULL;
    const char *token_file = NULL;
    const char *changelog = NULL;
    const char *storage = NULL, *storage_dir = NULL, *storage_uri = NULL;
    const char *from_savepoint = NULL, *savepoint_dir = NULL;
    bool allow_non_restored = false;
    bool autoscale = false, quiet = false, heartbeat_only = false, pool = false;
    bool no_rebalance = false, insecure = false, no_local_recovery = false;
    uint32_t max_workers = 0, rebalance_ms = 3000;
    eddy_coordinator_limits_t limits = {0};
    const char *migration_name = "fluid";
    uint32_t migration_step = EDDY_MIGRATION_STEP_KEY_GROUPS;
    uint64_t migration_step_bytes = EDDY_MIGRATION_STEP_BYTES;
    uint32_t migration_steps_in_flight = 0;
    const char *controller_flags = "", *guarantee_name = "exactly-once";
    const char *keys_dir = eddy_cli_default_keys();
    eddy_flag_t flags[] = {
        EDDY_FLAG_U32("workers", &workers, 1, MAX_LOCAL_WORKERS, "N", "worker processes to start (2)"),
        EDDY_FLAG_STR("job", &job, "JOB", "job to run (see eddy jobs, or one of --plugin's)"),
        EDDY_FLAG_STR("plugin", &plugin, "FILE.so", "load jobs and kinds from a plugin; workers fetch it"),
        EDDY_FLAG_STR("pipeline", &pipeline, "FILE", "run a declarative pipeline (docs/pipelines.md)"),
        EDDY_FLAG_STR("sql", &sql, "FILE", "run SQL statements (docs/sql.md)"),
        EDDY_FLAG_STR("guarantee", &guarantee_name, "G", "exactly-once (default), at-least-once or at-most-once (docs/connectors.md)"),
        EDDY_FLAG_U32("control-port", &control_port, 1, EDDY_FLAG_PORT_MAX, "PORT", "coordinator control port (7600)"),
        EDDY_FLAG_U32("http-port", &http_port, 0, EDDY_FLAG_PORT_MAX, "PORT", "coordinator HTTP port: the dashboard at /, /metrics, the JSON API (9250, 0 = off)"),
        EDDY_FLAG_STR("bind-host", &bind_host, "ADDR", "address the coordinator's control and HTTP ports listen on (127.0.0.1)"),
        EDDY_FLAG_STR("http-token-file", &token_file, "FILE", "require this bearer token (file mode 0600) on HTTP, except /healthz"),
        EDDY_FLAG_STR("state-dir", &state_dir, "DIR", "keep metadata and snapshots in DIR (default: temporary)"),
        EDDY_CLI_STORAGE_FLAG(storage),
        EDDY_FLAG_STR("from-savepoint", &from_savepoint, "LOC", "start the job from this savepoint (docs/savepoints.md): state by operator uid at any parallelism, sources from their saved positions"),
        EDDY_FLAG_SWITCH("allow-non-restored-state", &allow_non_restored, "with --from-savepoint: drop saved state that no operator of the job claims (else an error)"),
        EDDY_FLAG_STR("savepoint-dir", &savepoint_dir, "URI", "where `eddy savepoint` puts savepoints without --dir (default: STATE_DIR/savepoints, beside the snapshots)"),
        EDDY_FLAG_U32("checkpoint-interval", &interval, 0, EDDY_FLAG_MS_MAX, "MS", "periodic checkpoints (2000, 0 = off)"),
        EDDY_FLAG_U32("heartbeat-ms", &hb, 1, EDDY_FLAG_MS_MAX, "MS", "worker heartbeat interval (500)"),
        EDDY_FLAG_U32("heartbeat-timeout-ms", &hb_timeout, 2, EDDY_FLAG_MS_MAX, "MS", "declare a silent worker dead after (3000)"),
        EDDY_FLAG_U32("stuck-timeout-ms", &stuck_timeout, 2, EDDY_FLAG_MS_MAX, "MS", "a busy worker (heartbeats late while its liveness thread still speaks: its loop blocks) is declared dead only when its loop was silent this long (60000, at least --heartbeat-timeout-ms)"),
        EDDY_FLAG_SWITCH("heartbeat-only", &heartbeat_only, "detect dead workers only by --heartbeat-timeout-ms, not also at once by their closed connection"),
        EDDY_FLAG_U32("checkpoints-retained", &retained, 1, 64, "N", "complete checkpoints kept (2)"),
        EDDY_FLAG_U32("checkpoint-full-every", &full_every, 1, EDDY_CHECKPOINT_FULL_EVERY_MAX, "N", "every N-th checkpoint of a keyed task is full; the others write only the key groups changed since its last completed checkpoint and refer to earlier ones for the rest (10; 1 = always full)"),
        EDDY_FLAG_U32("tolerable-checkpoint-failures", &tolerable, 1, 1000000, "N", "restore after N failed checkpoints in a row (3)"),
        EDDY_FLAG_U32("max-restarts", &max_restarts, 1, 1000000, "N", "fail a job after N restores in a row without a completed checkpoint (10)"),
        EDDY_FLAG_U32("deploy-timeout-ms", &deploy_timeout, 1, EDDY_FLAG_MS_MAX, "MS", "quarantine a worker that does not confirm a deploy within MS (10000)"),
        EDDY_FLAG_SWITCH("no-rebalance", &no_rebalance, "never move running instances onto a joined or less loaded worker"),
        EDDY_FLAG_SWITCH("no-local-recovery", &no_local_recovery, "workers keep no in-memory copy of their last checkpoint: a restore reads every key group from checkpoint storage (eddy worker --no-local-recovery)"),
        EDDY_FLAG_U32("rebalance-interval-ms", &rebalance_ms, 1, EDDY_FLAG_MS_MAX, "MS", "at most one rebalancing migration per MS, none within MS of a job's rescale (3000)"),
        EDDY_FLAG_STR("migration", &migration_name, "MODE", "how a rescale moves key groups: fluid (the default: in steps, worker to worker over the data plane, while the sources run; adding or removing instances pauses them briefly, without moving state) or sudden (the sources pause while the moved groups go through the snapshot store)"),
        EDDY_FLAG_U32("migration-step-key-groups", &migration_step, 1, 32768, "N", "fluid migration: key groups moved per step, at most (8)"),
        EDDY_FLAG_U64("migration-step-bytes", &migration_step_bytes, 1, UINT64_MAX / 2, "BYTES", "fluid migration: bytes of state moved per step, about (4194304); a step moves at least one key group"),
        EDDY_FLAG_U32("migration-steps-in-flight", &migration_steps_in_flight, 0, EDDY_MIGRATION_STEPS_IN_FLIGHT_MAX, "N", "fluid migration: steps in flight at once, at most (0, the default: adaptive, more when the job is behind and markers wait behind queued records; 1: one after another)"),
        EDDY_FLAG_SWITCH("autoscale", &autoscale, "run the DS2 controller too"),
        EDDY_FLAG_STR("controller-flags", &controller_flags, "\"FLAGS\"", "extra flags for the controller"),
        EDDY_FLAG_SWITCH("pool", &pool, "autoscale with an elastic worker pool: the controller starts workers beyond --workers when the job needs them, up to --max-workers, and stops idle ones (pool flags of `eddy controller` go in --controller-flags)"),
        EDDY_FLAG_U32("max-workers", &max_workers, 1, MAX_LOCAL_WORKERS, "N", "with --pool: at most N workers in all (default --workers + 2)"),
        EDDY_FLAG_SWITCH("quiet", &quiet, "no progress lines and no INFO logs: warnings and errors only"),
        EDDY_FLAG_STR("changelog", &changelog, "FILE",
                      "write what the job prints (a changelog without --output) to FILE, not stdout"),
        EDDY_CLI_KEYS_FLAG(keys_dir),
        EDDY_CLI_INSECURE_FLAG(insecure),
        EDDY_CLI_LIMIT_FLAGS(limits),
        EDDY_FLAG_END,
    };
    eddy_args_t job_args = {0};
    eddy_err_t err = {{0}};
    int rc = eddy_flags_parse(flags, argc, argv, NULL, &job_args, &err);
    eddy_guarantee_t guarantee = EDDY_GUARANTEE_EXACTLY_ONCE;
    if (rc == 0 && eddy_guarantee_parse(guarantee_name, &guarantee) < 0) {
        rc = -1;
        eddy_err_set(&err, "--guarantee: expected exactly-once, at-least-once or at-most-once, got '%.64s'",
                     guarantee_name);
    }
    eddy_migration_mode_t migration = EDDY_MIGRATION_SUDDEN;
    if (rc == 0 && eddy_migration_mode_parse(migration_name, &migration) < 0) {
        rc = -1;
        eddy_err_set(&err, "--migration: expected sudden or fluid, got '%.64s'", migration_name);
    }
    if (rc == 0 && pipeline && sql)
        rc = eddy_err_set(&err, "give --pipeline or --sql, not both");
    if (rc == 0 && pipeline && eddy_cli_pipeline_job(pipeline, &job, &job_args, spec_text, &err) < 0)
        rc = -1;
    if (rc == 0 && sql && eddy_cli_sql_job(sql, &job, &job_args, spec_text, &err) < 0)
        rc = -1;
    if (rc < 0) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", err.msg);
    }
    if (rc == 1) {
        const eddy_job_kind_t *kind = job ? eddy_registry_job(eddy_registry_default(), job) : NULL;
        if (kind) {
            printf("usage: eddy local [local flags] --job %s [job flags]\n\njob flags:\n%s", job,
                   kind->usage);
        } else {
            printf("usage: eddy local %s\n\nflags:\n", local_usage);
            eddy_flags_print_help(stdout, flags);
        }
        eddy_args_free(&job_args);
        return 0;
    }
    if (!job) {
        /* Without --job, leftover flags cannot be job flags: name the first. */
        char msg[300];
        if (job_args.count > 0)
            snprintf(msg, sizeof msg, "unknown flag '%s' (see eddy local --help)", job_args.items[0]);
        else
            snprintf(msg, sizeof msg, "--job is required (see eddy jobs)");
        eddy_args_free(&job_args);
        return eddy_usage_error("local", msg);
    }
    /* EXPLAIN: the plan is printed, nothing starts */
    if (sql && (rc = eddy_cli_sql_explain(sql, *spec_text, &job_args)) >= 0) {
        eddy_args_free(&job_args);
        return rc;
    }
    /* file:///DIR: the snapshots go to DIR rather than the state dir's;
     * s3://: to the bucket, given to the workers in DEPLOY */
    if ((rc = eddy_cli_checkpoint_storage("local", storage, &storage_dir, &storage_uri)) != 0) {
        eddy_args_free(&job_args);
        return rc;
    }
    if (max_workers && !pool) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", "--max-workers needs --pool");
    }
    if (pool) {
        autoscale = true;
        if (!max_workers)
            max_workers = workers + 2 > MAX_LOCAL_WORKERS ? MAX_LOCAL_WORKERS : workers + 2;
        if (max_workers < workers) {
            eddy_args_free(&job_args);
            return eddy_usage_error("local", "--max-workers is below --workers");
        }
    }
    if (hb_timeout <= hb) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", "--heartbeat-timeout-ms must exceed --heartbeat-ms");
    if (stuck_timeout < hb_timeout)
        return eddy_usage_error("local", "--stuck-timeout-ms must be at least --heartbeat-timeout-ms");
    }
    if (limits.max_workers && limits.max_workers < (pool ? max_workers : workers)) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", pool ? "--max-registrations is below --max-workers"
                                              : "--max-registrations is below --workers");
    }
    /* A plugin that does not load fails here, not in the workers. */
    if (plugin && eddy_plugin_load(plugin, eddy_registry_default(), NULL, &err) < 0) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", err.msg);
    }
    /* Validate the job's flags, and (the workers share this file system)
     * its input files, before anything starts. */
    eddy_job_graph_t graph;
    if (eddy_job_build(&graph, job, job_args.count, job_args.items, &err) < 0) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", err.msg);
    }
    int inputs_ok = check_local_inputs(&graph, &err);
    /* A savepoint is read whole and checked against the job before anything starts. */
    char savepoint_root[EDDY_STORAGE_URI_MAX];
    eddy_savepoint_manifest_t savepoint = {0};
    if (inputs_ok == 0 && from_savepoint &&
        eddy_cli_open_savepoint("local", from_savepoint, &graph, allow_non_restored, savepoint_root,
                                sizeof savepoint_root, &savepoint) != 0) {
        eddy_graph_clear(&graph);
        eddy_args_free(&job_args);
        return 2;
    }
    eddy_graph_clear(&graph);
    if (inputs_ok < 0) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", err.msg);
    }
    char *token = NULL;
    if (token_file && eddy_http_token_load(token_file, &token, &err) < 0) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", err.msg);
    }

    /* Both halves of the keys, before anything starts: the coordinator here
     * listens with the server keys, a controller connects as a client. */
    eddy_keys_t *keys = NULL, *client_keys = NULL;
    if (eddy_cli_load_keys("local", keys_dir, EDDY_KEYS_SERVER, &keys) != 0 ||
        (autoscale && eddy_cli_load_keys("local", keys_dir, EDDY_KEYS_CLIENT, &client_keys) != 0)) {
        eddy_keys_destroy(&keys);
        eddy_args_free(&job_args);
        return 2;
    }
    eddy_keys_destroy(&client_keys);
    if (!keys)
        keys_dir = NULL;
    char what[300];
    snprintf(what, sizeof what, "control port on %s is reachable beyond loopback", bind_host);
    /* its workers would register from bind_host, which a keyless
     * coordinator refuses (beyond loopback) */
    if (!keys && !eddy_host_is_loopback(bind_host) && strcmp(bind_host, "0.0.0.0")) {
        release_run(&keys, NULL, &job_args, &token);
        return eddy_usage_error("local", "--bind-host other than loopback or 0.0.0.0 needs --keys: "
                                "without keys, workers register from loopback only");
    }
    if (eddy_cli_check_exposure("local", keys, insecure,
                                eddy_host_is_loopback(bind_host) ? NULL : what) != 0) {
        release_run(&keys, NULL, &job_args, &token);
        return 2;
    }

    char dir[4096];
    bool temporary = !state_dir;
    if (temporary) {
        snprintf(dir, sizeof dir, "%s/eddy-local-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir)) {
            fprintf(stderr, "eddy local: cannot create a state directory: %s\n", strerror(errno));
            release_run(&keys, NULL, &job_args, &token);
            return 1;
        }
    } else {
        snprintf(dir, sizeof dir, "%s", state_dir);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "eddy local: cannot create %s: %s\n", dir, strerror(errno));
            release_run(&keys, NULL, &job_args, &token);
            return 1;
        }
    }
    char meta[4200], snaps[4200], bind[300], connect[300];
    snprintf(meta, sizeof meta, "%s/meta", dir);
    if (storage_dir)
        snprintf(snaps, sizeof snaps, "%s", storage_dir);
    else
        snprintf(snaps, sizeof snaps, "%s/snapshots", dir);
    snprintf(bind, sizeof bind, "tcp://%s:%u", bind_host, (unsigned)control_port);
    snprintf(connect, sizeof connect, "tcp://%s:%u",
             strcmp(bind_host, "0.0.0.0") ? bind_host : "127.0.0.1", (unsigned)control_port);

    /* The job's stdout (the workers' sinks) goes to the file: the workers
     * inherit fd 1. Logs stay on stderr, so neither buries the other. */
    if (changelog) {
        int fd = open(changelog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
            char msg[600];
            snprintf(msg, sizeof msg, "--changelog: cannot write %.400s: %s", changelog, strerror(errno));
            if (fd >= 0)
                close(fd);
            release_run(&keys, temporary ? dir : NULL, &job_args, &token);
            return eddy_usage_error("local", msg);
        }
        close(fd);
    }
    if (quiet) {
        /* Warnings and errors only, here and in the children (workers and
         * the controller read the level from the environment); a stricter
         * EDDY_LOG_LEVEL=error stays. */
        const char *level = getenv("EDDY_LOG_LEVEL");
        if (!level || strcasecmp(level, "error")) {
            setenv("EDDY_LOG_LEVEL", "warn", 1);
            eddy_log_set_level(EDDY_LOG_WARN);
        }
    }
    eddy_log_set_component("local");
    eddy_cli_install_signals();
    /* A wrong bucket, endpoint or credentials: one line, before any worker
     * starts (the coordinator would stop there too, after they did). */
    if (storage_uri) {
        eddy_snapshot_store_t *probe = eddy_snapshot_store_new(storage_uri, &err);
        int ok = probe && eddy_snapshot_store_probe(probe, &err) == 0;
        eddy_snapshot_store_destroy(&probe);
        if (!ok) {
            fprintf(stderr, "eddy local: --checkpoint-storage: %s\n", err.msg);
            release_run(&keys, temporary ? dir : NULL, &job_args, &token);
            return 1;
        }
    }
    eddy_local_supervisor_t *sup = eddy_local_supervisor_new(&eddy_cli_stop);
    if (!sup || start_children(sup, workers, connect, snaps, keys_dir, insecure, no_local_recovery,
                               autoscale ? job : NULL,
                               controller_flags, pool ? max_workers : 0, &err) < 0) {
        fprintf(stderr, "eddy local: %s\n", sup ? err.msg : "out of memory");
        eddy_local_supervisor_destroy(&sup);
        release_run(&keys, temporary ? dir : NULL, &job_args, &token);
        return 1;
    }
    eddy_log_set_component("coordinator");
    eddy_info("eddy local: %u workers, job %s, state in %s%s", workers, job, dir,
              temporary ? " (temporary)" : "");
    eddy_coordinator_options_t opts = {
        .bind = bind, .keys = keys, .http_host = bind_host, .http_port = (uint16_t)http_port, .metastore = meta,
        .snapshot_dir = snaps, .checkpoint_storage = storage_uri, .heartbeat_ms = hb, .heartbeat_timeout_ms = hb_timeout, .stuck_timeout_ms = stuck_timeout, .heartbeat_only = heartbeat_only,
        .checkpoint_interval_ms = interval, .checkpoint_timeout_ms = 60000,
        .checkpoints_retained = retained, .checkpoint_full_every = full_every, .tolerable_checkpoint_failures = tolerable,
        .deploy_timeout_ms = deploy_timeout, .max_restarts = max_restarts, .submit_job = job,
        .submit_guarantee = guarantee, .submit_argc = job_args.count, .submit_argv = job_args.items, .min_workers = workers,
        .exit_when_done = true, .progress = !quiet, .plugin_files = &plugin,
        .n_plugin_files = plugin ? 1 : 0, .http_token = token, .no_rebalance = no_rebalance,
        .rebalance_interval_ms = rebalance_ms, .limits = limits, .migration = migration,
        .migration_step_key_groups = migration_step,
        .migration_step_bytes = migration_step_bytes,
        .migration_steps_in_flight = migration_steps_in_flight,
        .submit_savepoint = from_savepoint ? savepoint_root : NULL,
        .submit_savepoint_manifest = &savepoint, .submit_allow_non_restored = allow_non_restored,
        .savepoint_dir = savepoint_dir};
    rc = eddy_coordinator_run(&opts, &eddy_cli_stop, &err);
    eddy_savepoint_manifest_clear(&savepoint);
    char cause[512];
    bool gave_up = eddy_local_supervisor_gave_up(sup, cause, sizeof cause);
    eddy_local_supervisor_destroy(&sup);
    release_run(&keys, temporary ? dir : NULL, &job_args, &token);
    /* The final line says how the run ended: printed after the children
     * stopped, so none of their log lines follows it. */
    if (gave_up) {
        fprintf(stderr, "eddy local: failed: %s\n", cause);
        return 1;
    }
    if (rc < 0 || rc == 1) {
        fprintf(stderr, "eddy local: failed: %s\n", err.msg);
        return 1;
    }
    if (rc == 3) {
        fprintf(stderr, "eddy local: %s\n", err.msg);
        return 3;
    }
    if (eddy_cli_stop) {
        fprintf(stderr, "eddy local: interrupted\n");
        return 130;
    }
    return rc;
}

int eddy_cmd_local(int argc, char **argv)
{
    char *spec_text = NULL;
    int rc = run_local(argc, argv, &spec_text);
    free(spec_text);
    return rc;
}
