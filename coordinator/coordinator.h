/* coordinator.h - the coordinator process: registry of workers, jobs and
 * their placement, and the protocols that change them (deploy, checkpoint,
 * rescale, recovery), served on a ZeroMQ ROUTER control socket plus an HTTP
 * endpoint for metrics and the REST API. */
#ifndef EDDY_COORDINATOR_COORDINATOR_H
#define EDDY_COORDINATOR_COORDINATOR_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/guarantee.h"
#include "net/keys.h"
#include "state/savepoint_manifest.h"

/* Caps on what peers can make the coordinator hold (docs/security.md).
 * Each is a flag of `eddy coordinator` and `eddy local`; 0 means the
 * default below. Whatever goes past a cap is dropped, counted in
 * eddy_rejected_messages_total{reason} and logged once per interval. */
#define EDDY_COORD_DEFAULT_MAX_HEARTBEAT_ENTRIES 1024u  /* tasks in one heartbeat */
#define EDDY_COORD_DEFAULT_MAX_HEARTBEAT_BYTES (2u << 20) /* one heartbeat on the wire */
#define EDDY_COORD_DEFAULT_MAX_WORKER_SERIES 1024u      /* task metrics kept per worker */
#define EDDY_COORD_DEFAULT_MAX_WORKERS 1024u            /* live registrations */
#define EDDY_COORD_DEFAULT_MAX_DECISIONS 1024u          /* scaling decisions kept (at most 1024) */
#define EDDY_COORD_DEFAULT_MAX_DECISION_BYTES 16384u    /* one decision's JSON */
#define EDDY_COORD_DEFAULT_MAX_ENDED_JOBS 64u           /* ended jobs kept in memory for the views */
#define EDDY_COORD_DEFAULT_MAX_PLUGINS 64u              /* plugin uploads stored */
#define EDDY_COORD_DEFAULT_REPLY_HWM 100000u            /* messages queued to one peer */
#define EDDY_COORD_DEFAULT_STUCK_TIMEOUT_MS 60000u      /* --stuck-timeout-ms */

typedef struct eddy_coordinator_limits {
    uint32_t max_heartbeat_entries;
    uint32_t max_heartbeat_bytes;
    uint32_t max_worker_series;
    uint32_t max_workers;
    uint32_t max_decisions;
    uint32_t max_decision_bytes;
    uint32_t max_ended_jobs;
    uint32_t max_plugins;
    uint32_t reply_hwm;
} eddy_coordinator_limits_t;

/* Fills the zero fields of limits with their defaults. */
void eddy_coordinator_limits_fill(eddy_coordinator_limits_t *limits);
/* How a rescale or a rebalancing migration moves key groups (--migration):
 * SUDDEN pauses every source at a migration checkpoint and moves the
 * changed groups through the snapshot store (coordinator/rescale.c); FLUID
 * moves them in steps of --migration-step-key-groups, worker to worker, with
 * versioned routing and in-band handoff markers while the sources run
 * (docs/architecture.md, "Fluid key-group migration"). */
typedef enum eddy_migration_mode {
    EDDY_MIGRATION_SUDDEN = 0,
    EDDY_MIGRATION_FLUID = 1,
} eddy_migration_mode_t;

#define EDDY_MIGRATION_STEP_KEY_GROUPS 8u /* default --migration-step-key-groups */
#define EDDY_MIGRATION_STEP_BYTES (4ull << 20) /* default --migration-step-bytes */
/* Fluid steps in flight at once, at most (--migration-steps-in-flight). */
#define EDDY_MIGRATION_STEPS_IN_FLIGHT_MAX 64u
/* With --migration-steps-in-flight 0 (adaptive, the default): one step in
 * flight, plus one per this many ms that a marker waits behind the records
 * queued ahead of it (fluid.c). */
#define EDDY_MIGRATION_STEP_TARGET_MS 20u

/* "sudden" or "fluid"; -1 otherwise. */
int eddy_migration_mode_parse(const char *name, eddy_migration_mode_t *out);
const char *eddy_migration_mode_name(eddy_migration_mode_t mode);

typedef struct eddy_coordinator_options {
    const char *bind;                /* control socket, e.g. tcp://127.0.0.1:7600 */
    const eddy_keys_t *keys;         /* server keys: CURVE and roles (NULL: neither) */
    const char *http_host;           /* HTTP bind address (NULL = 127.0.0.1) */
    uint16_t http_port;              /* 0 disables HTTP */
    const char *http_token;          /* bearer token for HTTP, the secret itself
                                      * (NULL = open); /healthz stays open */
    const char *metastore;           /* URL or path of the metadata store */
    const char *etcd_ca, *etcd_cert, *etcd_key; /* TLS files for an https:// etcd (or NULL) */
    const char *snapshot_dir;        /* shared snapshot store root; with
                                      * checkpoint_storage only the plugins' */
    const char *checkpoint_storage;  /* s3://... URI, or NULL: snapshot_dir.
                                      * Sent to workers in DEPLOY */
    uint32_t heartbeat_ms;           /* interval workers are told to use */
    uint32_t heartbeat_timeout_ms;   /* a worker silent this long is dead */
    /* A worker whose heartbeats stopped but whose liveness thread still
     * speaks (busy: its loop blocks) is dead after its loop was silent
     * this long (stuck); 0: EDDY_COORD_DEFAULT_STUCK_TIMEOUT_MS. At most
     * heartbeat_timeout_ms: busy workers are not waited for. */
    uint32_t stuck_timeout_ms;
    bool heartbeat_only;             /* not also dead when its connection closes (disconnect.c) */
    uint32_t checkpoint_interval_ms; /* 0 disables periodic checkpoints */
    uint32_t checkpoint_timeout_ms;
    uint32_t checkpoints_retained;   /* complete checkpoints kept (>= 1; CLI default 2) */
    uint32_t checkpoint_full_every;  /* every N-th checkpoint full, the others
                                      * incremental (>= 1; default 10; 1 = always full) */
    uint32_t tolerable_checkpoint_failures; /* in a row, then restore (>= 1; default 3) */
    uint32_t deploy_timeout_ms;      /* a worker not confirming a DEPLOY is quarantined */
    uint32_t max_restarts;           /* restores in a row without a checkpoint, then the
                                      * job fails (>= 1; default COORD's 10) */
    /* eddy local: submit this job once min_workers registered, exit when done. */
    const char *submit_job;
    eddy_guarantee_t submit_guarantee;
    int submit_argc;
    char **submit_argv;
    /* eddy local --from-savepoint: the job starts from this savepoint (its
     * location and manifest, opened and checked by the caller; NULL: none) */
    const char *submit_savepoint;
    const eddy_savepoint_manifest_t *submit_savepoint_manifest;
    bool submit_allow_non_restored;
    /* --savepoint-dir: where `eddy savepoint` without --dir puts savepoints
     * (NULL: "savepoints" next to a directory checkpoint storage) */
    const char *savepoint_dir;
    uint32_t min_workers;
    bool exit_when_done;
    bool progress;                   /* print progress lines to stderr */
    /* High availability (etcd metastore only): the endpoint clients and
     * workers are told to use when this process leads (NULL: the bind
     * address, with a wildcard host replaced by the host name), and the
     * leader lease's TTL (0: 3000 ms). */
    const char *advertise;
    uint32_t leader_ttl_ms;
    /* A leader that reaches fewer than a majority of its workers for this
     * long while a standby hears from them steps down (quorum.c; 0: never). */
    uint32_t leader_quorum_timeout_ms;
    /* A dead worker leaves `eddy status` this long after its death (0: 60 s). */
    uint32_t dead_worker_grace_ms;
    /* Rebalancing (migrate.c): move instances onto a joined or underloaded
     * worker, at most one migration per interval (0: 3000 ms). */
    bool no_rebalance;
    uint32_t rebalance_interval_ms;
    /* Key-group migration of rescales and rebalancing (see above); a fluid
     * step moves at most this many key groups (0:
     * EDDY_MIGRATION_STEP_KEY_GROUPS) and at most about this many bytes of
     * state (0: EDDY_MIGRATION_STEP_BYTES; at least one group per step). */
    eddy_migration_mode_t migration;
    uint32_t migration_step_key_groups;
    uint64_t migration_step_bytes;
    /* Fluid steps in flight at once (0: adaptive, by how long markers wait
     * behind queued records; at most EDDY_MIGRATION_STEPS_IN_FLIGHT_MAX). */
    uint32_t migration_steps_in_flight;
    /* Plugin libraries to store and load at start (eddy local --plugin). */
    const char *const *plugin_files;
    uint32_t n_plugin_files;
    eddy_coordinator_limits_t limits; /* zero fields: the defaults */
} eddy_coordinator_options_t;

/* With an etcd metastore, first stands by until elected leader (answering
 * clients and workers "not leader, the leader is X"), and stands by again
 * when its leadership is lost; with a file store it leads at once.
 * Runs until *stop is set, or (exit_when_done) every job has ended.
 * Returns 0 when all jobs finished (or on stop), 1 when a job failed (err
 * names the job and the cause), 3 when a job was cancelled and none failed
 * (err names it), -1 with err when it could not start. */
int eddy_coordinator_run(const eddy_coordinator_options_t *opts, volatile sig_atomic_t *stop,
                         eddy_err_t *err);

/* Whether a savepoint fits a job's graph (coordinator/savepoint.c): the
 * same max parallelism, and every saved keyed operator's and source's state
 * claimed by a stage of its uid unless allow_non_restored. Pure. 0, or -1
 * with err naming location and the problem. */
struct eddy_job_graph;
int eddy_savepoint_check_graph(const struct eddy_job_graph *g, const char *location,
                               const eddy_savepoint_manifest_t *m, bool allow_non_restored,
                               eddy_err_t *err);

#endif
