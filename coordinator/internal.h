/* internal.h - state shared by the coordinator's files (not a public API).
 *
 * coordinator.c owns the loop, sockets and worker registry; jobs.c the job
 * lifecycle (submit, finish, cancel, timers); one file per protocol:
 * deploy.c, checkpoint.c, rescale.c, recovery.c; job_store.c the job record
 * and checkpoint metadata; placement.c where instances run; views.c the
 * JSON and Prometheus renderings of this state. */
#ifndef EDDY_COORDINATOR_INTERNAL_H
#define EDDY_COORDINATOR_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "coordinator/checkpoint.h"
#include "coordinator/coordinator.h"
#include "coordinator/counters.h"
#include "coordinator/job_store.h"
#include "coordinator/latency.h"
#include "coordinator/rebalance.h"
#include "coordinator/rejects.h"
#include "coordinator/timeline.h"
#include "net/curve.h"
#include "net/proto.h"
#include "net/http.h"
#include "state/election.h"
#include "state/metastore.h"
#include "state/metastore_async.h"
#include "state/metastore_lease.h"
#include "state/route_table.h"
#include "state/snapshot_store.h"
#include "common/log.h"
#include "plan/plugin.h"
#include "plan/registry.h"

#define COORD_MAX_IDENTITY 256
#define COORD_MAX_RESCALES 256
#define COORD_MAX_DECISIONS 1024
#define COORD_MAX_RETAINED 64
#define COORD_MAX_HISTORY 64         /* ended jobs kept in memory for the views */
#define COORD_COUNTERS_SAVE_MS 1000  /* how often a job's counters are saved (and shown) */
#define COORD_MAX_RESTARTS 10        /* default --max-restarts: restores in a row without a checkpoint */
#define COORD_RESTART_DELAY_MIN_MS 100
#define COORD_RESTART_DELAY_MAX_MS 10000
#define COORD_QUARANTINE_MIN_MS 30000
#define COORD_QUARANTINE_MAX_MS 600000
/* How long an exiting coordinator (eddy local) waits for the workers to
 * confirm the RELEASE of a cancelled or failed job: their sinks roll back
 * what they prepared before it (coord_releases_confirmed). */
#define COORD_RELEASE_WAIT_MS 15000
/* Rebalancing (migrate.c): the default --rebalance-interval-ms, the least
 * time between two migrations (and after a job's rescale), and how often
 * the spread is checked when nothing else asks for it. */
#define COORD_REBALANCE_INTERVAL_MS 3000
#define COORD_REBALANCE_CHECK_MS 1000
#define COORD_MIGRATION_WHY_MAX 320

/* Worker registrations held on etcd leases (worker_lease.c). */
#define COORD_WORKER_KEY_PREFIX "/eddy/workers/"
/* The leader lease's TTL when --leader-ttl-ms is not given (leader.c). */
#define COORD_LEADER_TTL_MS 3000u

typedef enum coord_lease_state {
    COORD_LEASE_NONE,     /* no lease (file store, dead, or not granted yet) */
    COORD_LEASE_GRANTING, /* a grant is in flight */
    COORD_LEASE_HELD,     /* lease held and the key put on it */
} coord_lease_state_t;

typedef struct coord_worker {
    uint32_t id;
    char name[EDDY_NAME_MAX];
    char endpoint[EDDY_ENDPOINT_MAX];
    char host[EDDY_NAME_MAX];
    int64_t pid;
    uint32_t cores;                /* online CPUs of its machine (REGISTER), 0 unknown */
    unsigned char identity[COORD_MAX_IDENTITY];
    size_t identity_len;
    uint64_t last_seen_ms;
    uint64_t last_heartbeat_ms;    /* when its latest heartbeat (metrics) came */
    /* Liveness (coordinator.c, check_liveness): the secret its liveness
     * thread's LIVENESS carries (random per registration), when the last
     * valid one came (0: none yet) and the loop silence it reported; busy:
     * "busy" was logged for its current silence. */
    uint64_t liveness_token;
    uint64_t last_alive_ms;
    uint64_t reported_loop_silent_ms;
    bool busy;
    int64_t registered_wall_ms;
    uint64_t registered_ms;        /* monotonic: rebalancing moves work only to later joiners */
    bool alive;
    int conn_fd;                   /* its control connection's descriptor, -1 unknown */
    uint64_t dead_since_ms;        /* when it was declared dead (status hides it after a grace) */
    uint64_t clash_since_ms;       /* when another process first claimed its name or address */
    /* A worker that did not confirm a DEPLOY in time gets no tasks until
     * then, even if it registers again (see deploy.c). */
    uint64_t quarantined_until_ms;
    uint64_t quarantine_ms;        /* the next quarantine's length (doubles) */
    /* Listed in the metadata store by the previous leader, not registered
     * with this one yet: not alive, never given work (worker_lease.c). */
    bool awaiting;
    bool left;                     /* said LEAVE: stopped on purpose, not dead */
    coord_lease_state_t lease_state;
    int64_t lease;
    uint64_t lease_next_ms;        /* next keepalive (or grant retry) */
    bool lease_keepalive_sent;
    eddy_task_metrics_t *metrics;  /* latest heartbeat */
    uint32_t n_metrics;
    struct coord_worker *next;
} coord_worker_t;

typedef enum job_state {
    JOB_WAITING,    /* for workers */
    JOB_DEPLOYING,
    JOB_RUNNING,
    JOB_RESCALING,
    JOB_RESTORING,
    JOB_FINISHED,
    JOB_FAILED,
    JOB_CANCELLED,
    JOB_STOPPED,    /* stopped with a savepoint (eddy savepoint --stop) */
} job_state_t;

typedef struct rescale_record {
    int64_t time_ms;
    char stage[EDDY_NAME_MAX];
    uint32_t old_p, new_p;
    double pause_ms;
    uint64_t bytes_moved, groups_moved;
    uint64_t checkpoint;
    /* A migration (rebalance): old_p == new_p, instances that changed
     * worker and why; 0 and "" for a parallelism change. */
    uint32_t instances_moved;
    char why[COORD_MIGRATION_WHY_MAX];
    /* A fluid rescale or migration (fluid.c): its steps and their total
     * time (pause_ms is then only its EXPAND/SHRINK pause); 0 for a
     * sudden one. */
    uint32_t fluid_steps;
    double migration_ms;
    /* Of a fluid rescale: the steps' copy time summed (each from the old
     * owner starting to serialise to the new owner's last install, as the
     * new owners measured it; 0: unknown), not the wait for markers. */
    double transfer_ms;
} rescale_record_t;

typedef struct pending_client {
    unsigned char identity[COORD_MAX_IDENTITY];
    size_t identity_len;
    bool waiting;
} pending_client_t;

typedef struct coord_retained {
    uint64_t id;
    uint32_t n_positions;
    coord_source_progress_t *positions; /* source progress, as coord_pending_checkpoint_t's */
    uint32_t n_finished;
    eddy_task_ref_t *finished; /* tasks finished at it (finished.c), owned; NULL: none */
} coord_retained_t;

/* A fluid step in flight (fluid.c): its routing version, groups, old and
 * new owner and when its ROUTE_STEP went out. */
typedef struct coord_fluid_flight {
    uint64_t version;
    uint32_t n, from, to;
    uint32_t number;    /* the rescale's step count when it was sent */
    bool early;         /* sent before EXPAND's START: its markers met empty queues */
    uint64_t started_ms;
} coord_fluid_flight_t;

typedef struct coord_job {
    uint32_t num;
    char id[EDDY_NAME_MAX];
    char name[EDDY_NAME_MAX];
    uint32_t argc;
    char **argv;
    eddy_job_graph_t graph;
    char *plan;                   /* the serialised plan DEPLOY carries, built once at submit */
    char **plugins;               /* content hashes of the plugins the plan needs (NULL-ended) */
    uint32_t n_plugins;
    size_t plan_len;
    uint64_t plan_fingerprint;
    job_state_t state;
    char error[EDDY_ERROR_MAX];
    int64_t submitted_wall_ms;
    int64_t ended_wall_ms;        /* 0: not ended */
    bool history;                 /* an ended job reloaded from the metadata store, for views only */
    uint64_t started_ms, ended_ms;

    eddy_stage_placement_t placement[EDDY_MAX_STAGES];
    uint32_t epoch;
    /* deploy (deploy.c): the epoch is persisted, then DEPLOY goes out */
    bool deploy_persisting;
    eddy_deploy_mode_t deploy_mode;
    uint64_t deploy_checkpoint;
    coord_source_progress_t *deploy_positions;
    uint32_t n_deploy_positions;
    /* a restore's tasks that start finished (finished.c): the restored
     * checkpoint's, owned; none for other deploys */
    eddy_task_ref_t *deploy_finished;
    uint32_t n_deploy_finished;
    eddy_guarantee_t guarantee;   /* --guarantee, in every DEPLOY and the job record */
    /* at-most-once (recovery.c): the furthest position each source instance
     * of the current epoch reported in a heartbeat, -1 unknown; indexed as
     * deploy_positions (source stages in order, then instances) */
    int64_t *reported_positions;
    uint32_t n_reported_positions;
    uint32_t deploys_pending;     /* workers that have not answered DEPLOYED */
    uint32_t *deploy_awaiting;    /* [deploys_pending] their ids */
    uint32_t n_deploy_targets;    /* workers the DEPLOY went to */
    uint64_t deploy_bytes, deploy_groups;
    uint64_t deploy_local_bytes, deploy_local_groups; /* of those, from workers' local copies */
    uint64_t deploy_started_ms;
    /* The last restore's loads (local recovery): key groups and bytes in
     * all, and from the workers' local copies; restored_ms 0: none yet. */
    struct {
        uint64_t groups, bytes, local_groups, local_bytes, restored_ms;
    } last_restore;
    /* The last fresh or restore deploy: its placement saw the workers of
     * then, so only workers that joined later are a reason to migrate. */
    uint64_t placed_ms;

    /* recovery (recovery.c) */
    uint32_t restarts;            /* all restores after a failure, for views */
    uint32_t consecutive_restarts;/* since the last complete checkpoint; limits and backs off */
    bool restore_scheduled;
    uint64_t restore_at_ms;
    char last_cause[EDDY_ERROR_MAX];
    /* Non-empty: the job must not be restored from what is retained, since
     * a sink may have published a newer checkpoint that is unusable
     * (recovery.c); the first restore fails the job with this cause. */
    char unrestorable[EDDY_ERROR_MAX];
    /* after a failure: when it was noticed, and whether records have not
     * yet been seen reaching the last stage in the restored epoch */
    uint64_t failure_noticed_ms;
    bool awaiting_flow;
    /* reloaded from the metadata store (a failover or a restart): its
     * first restore is one after a failure, counted and logged as such */
    bool resumed_restore_pending;

    /* checkpoints (checkpoint.c) */
    uint64_t next_checkpoint;
    coord_pending_checkpoint_t *pending; /* NULL: none in flight */
    /* savepoints (savepoint.c): the one requested or in flight (NULL:
     * none), the location of the last one taken, and the savepoint the job
     * was restored from (its location, job name and checkpoint id; 0: none) */
    struct coord_savepoint *savepoint;
    char savepoint_last[EDDY_STORAGE_URI_MAX];
    char restore_uri[EDDY_STORAGE_URI_MAX];
    char restore_job[EDDY_NAME_MAX];
    uint64_t restore_savepoint;
    uint32_t consecutive_checkpoint_failures;
    uint64_t last_checkpoint;     /* newest complete (= retained[n_retained-1].id), 0 none */
    coord_retained_t retained[COORD_MAX_RETAINED]; /* complete checkpoints, oldest first */
    uint32_t n_retained;
    uint64_t cleaned_below;       /* checkpoint ids below this were deleted */
    uint64_t last_checkpoint_wall_ms;
    double last_checkpoint_ms;
    coord_checkpoint_cost_t last_checkpoint_cost;
    uint64_t checkpoints_completed, checkpoints_failed;
    uint64_t last_trigger_ms;

    /* rescale in flight */
    uint64_t migration;           /* id of the rescale's migration snapshot, 0: none */
    uint64_t migration_bytes;
    int rescale_stage;            /* -1: none */
    uint32_t rescale_to;
    uint32_t rescale_from;
    uint64_t pause_started_ns;
    pending_client_t rescale_client;
    rescale_record_t rescales[COORD_MAX_RESCALES];
    uint32_t n_rescales;          /* at this coordinator, migrations included */
    uint32_t rescales_earlier;    /* parallelism changes at the coordinators before it (counters.h) */
    uint64_t rescale_bytes_total; /* moved by every rescale of the job (not migrations) */
    uint64_t migration_bytes_total; /* moved by every migration of the job */
    /* A migration in flight (migrate.c): a rescale of rescale_stage at the
     * same parallelism whose moves change the instances' workers. */
    eddy_rebalance_move_t *moves;
    uint32_t n_moves;
    char migration_why[COORD_MIGRATION_WHY_MAX];
    uint32_t n_migrations;        /* completed here, also counted in n_rescales */
    uint32_t migrations_earlier;  /* at the coordinators before it */
    uint64_t instances_migrated;  /* since the job was submitted */
    /* A fluid rescale in flight (fluid.c): rescale_stage's key groups move
     * in steps; fluid_table is their routing as the steps sent so far left
     * it, fluid_flight the steps in flight (disjoint groups; none: 0). */
    bool fluid;
    int fluid_phase;              /* coord_fluid_phase_t */
    eddy_route_table_t fluid_table;
    eddy_route_plan_t fluid_plan;
    uint32_t fluid_next_step;
    coord_fluid_flight_t fluid_flight[EDDY_MIGRATION_STEPS_IN_FLIGHT_MAX];
    uint32_t n_fluid_flight;
    uint32_t fluid_most_flight;   /* the most steps in flight at once */
    /* How long an in-band marker waits behind the records queued ahead of
     * it, as last seen (EXPAND's barrier, a step's wait for its markers);
     * sets how many steps go at once (fluid.c steps_in_flight). */
    uint64_t fluid_lag_ms;
    uint64_t fluid_started_ns;
    uint64_t fluid_bytes, fluid_groups;
    uint64_t fluid_transfer_us;   /* the steps' copy time, summed */
    uint32_t fluid_step_off;      /* groups of plan step fluid_next_step already sent */
    uint32_t fluid_steps_taken;   /* ROUTE_STEPs sent (steps split by bytes count each) */
    double fluid_pause_ms;        /* sources paused by its expand/shrink deploys */
    /* Routing versions: (epoch << 32) + a count of the epoch's steps, so
     * they only grow while tasks keep their tables (a deploy resets both). */
    uint32_t fluid_seq, fluid_seq_epoch;

    /* counters that never go backwards (counters.c), saved in the job record */
    coord_counters_t *counters;

    uint32_t tasks_done;
    uint32_t tasks_total;
    /* senders.c: per task of the current epoch (stages in order, then
     * instances), the COORD_TASK_SEEN_* reports already counted */
    uint8_t *task_seen;
    uint32_t n_task_seen;
    bool any_done;
    /* Every task is done: COMPLETE(EDDY_FINAL_CHECKPOINT) went out and the
     * job finishes when each task ACKed its final commit. */
    bool finishing;
    uint32_t final_acks_pending;
    uint64_t finishing_started_ms;
    /* latency and event-lag histograms from heartbeats (latency.c) */
    struct coord_latency *latency;
    struct coord_job *next;
} coord_job_t;

/* What a metadata-store completion callback needs to find its job again:
 * the job may have been restored (new epoch) or ended meanwhile. Owned by
 * coord_t's list until the callback ran (or the coordinator is freed). */
typedef struct coord_ticket {
    struct coord *c;
    uint32_t job;
    uint32_t epoch;
    uint64_t checkpoint;
    char job_id[EDDY_NAME_MAX];
    struct coord_ticket *prev, *next;
} coord_ticket_t;

typedef struct coord_fd_table coord_fd_table_t;
typedef struct coord_reaper coord_reaper_t;

/* Workers that came to this process while it stood by (leader.c): at
 * takeover it expects them, as it does the ones the previous leader listed
 * in etcd, and its grace ends once all of them are back. */
#define COORD_EXPECT_MAX 64
typedef struct coord_expected {
    char names[COORD_EXPECT_MAX][EDDY_NAME_MAX];
    uint32_t n;
} coord_expected_t;

typedef struct coord {
    const eddy_coordinator_options_t *opts;
    void *zctx, *router;
    void *monitor;                /* PAIR on the router's socket monitor (disconnect.c) */
    coord_fd_table_t *fds;
    eddy_zap_t *zap;                    /* with --keys: who may connect (net/curve.h) */
    eddy_http_t *http;
    eddy_metastore_t *meta;             /* synchronous use only before the loop starts */
    eddy_metastore_async_t *meta_async; /* every metadata-store call from the loop */
    coord_ticket_t *tickets;
    eddy_snapshot_store_t *store;
    eddy_plugin_dir_t *plugin_store;     /* <snapshot dir>/plugins, private (plugins.c) */
    coord_reaper_t *reaper;       /* removes checkpoint directories off the loop */
    coord_worker_t *workers;
    uint32_t next_worker_id;
    coord_job_t *jobs;             /* newest first */
    uint32_t next_job_num;
    json_t *used_ids;              /* every job id recorded or assigned (a set), never reused */
    json_t *decisions;            /* array of scaling decisions, oldest first */
    coord_timeline_t *timeline;   /* recent history for the dashboard (timeline.c) */
    /* Key sequence of decisions[i] (views.c); 0: it came from the legacy
     * single key "/eddy/scaling/decisions". */
    uint64_t decision_seqs[COORD_MAX_DECISIONS];
    uint64_t next_decision_seq;
    uint64_t decisions_rejected;  /* `decision` requests refused by the schema (views.c) */
    uint64_t decision_reject_logged_ms; /* last warning about one (once per interval) */
    uint64_t started_ms;
    bool submitted;
    bool resumed_jobs;            /* jobs were reloaded from the metadata store */
    bool any_failed;
    bool any_cancelled;
    uint64_t last_progress_ms;
    uint64_t last_counters_save_ms;
    /* Leader election (state/election.h; NULL with a file store): commands
     * carry leader_epoch; a lost lease or a peer's higher epoch deposes. */
    eddy_election_t *election;
    uint64_t leader_epoch;
    const char *advertise;
    bool deposed;
    /* Rebalancing (migrate.c): no migration starts before not_before, the
     * spread is next checked at check (0: at once, a worker joined). */
    uint64_t rebalance_not_before_ms;
    uint64_t rebalance_check_ms;
    /* worker_lease.c: registrations on etcd leases (false: file store) */
    bool worker_leases;
    uint32_t listed_workers;      /* listed by the previous leader at takeover */
    eddy_coordinator_limits_t limits; /* opts->limits with the defaults filled in */
    coord_rejects_t rejects;      /* dropped messages by reason (rejects.h) */
    uint32_t n_plugin_uploads;    /* uploads of plugins not loaded before (--max-plugins) */
    bool all_back_logged;         /* "all listed workers back after N ms" said */
    const coord_expected_t *expected; /* NULL: none (see coord_run_leader) */
    /* quorum.c: since when fewer than a majority of the workers are alive
     * (0: a majority is), whether the standby's report is being read, and
     * whether this leader stepped down */
    uint64_t minority_since_ms;
    uint64_t quorum_next_check_ms;
    bool quorum_reading;
    bool stepped_down;
} coord_t;

/* quorum.c: a leader cut off from most of its workers (but not from etcd)
 * steps down once a standby reports hearing from them. */
void coord_quorum_tick(coord_t *c, uint64_t now_ms);

/* How long after taking over a leader waits for the workers to register
 * again before it places resumed jobs or declares the previous leader's
 * workers dead: the heartbeat timeout, and with an election at least the
 * time a worker needs to notice the old leader's silence and find the new
 * one (eddy_failover_reregister_ms, net/proto.h). Ends early once every
 * listed worker is back. */
uint64_t coord_takeover_grace_ms(const coord_t *c);

/* coordinator.c */
/* What coord_run_leader returns when this process lost its leadership. */
#define COORD_RUN_DEPOSED (-2)
/* ... and when it gave its leadership up for its workers' sake (quorum.c):
 * it lets a standby win the next election. */
#define COORD_RUN_STEPPED_DOWN (-3)
/* The leader's loop (eddy_coordinator_run without the election around
 * it); expect may be NULL. */
int coord_run_leader(const eddy_coordinator_options_t *opts, eddy_election_t *election,
                     const char *advertise, const coord_expected_t *expect,
                     volatile sig_atomic_t *stop, eddy_err_t *err);
/* Every worker the previous leader listed and every expected one is back. */
bool coord_takeover_all_back(const coord_t *c);
/* Whether msg was queued: false for a dead worker, one whose control
 * connection is gone (it registers again under a new identity) or whose
 * queue is full. */
bool coord_send_worker(coord_t *c, coord_worker_t *w, const eddy_msg_t *msg);
void coord_broadcast(coord_t *c, const eddy_msg_t *msg);
void coord_reply(coord_t *c, const unsigned char *identity, size_t identity_len, int64_t status,
                 const char *body);
coord_worker_t *coord_find_worker(coord_t *c, uint32_t id);
uint32_t coord_alive_workers(coord_t *c);
/* Alive and not quarantined: may get tasks. */
bool coord_worker_usable(const coord_worker_t *w, uint64_t now_ms);
uint32_t coord_usable_workers(coord_t *c);
/* Declares w failed (as if its heartbeats stopped) and keeps it out of
 * placement for a growing backoff period, even if it registers again. */
void coord_quarantine_worker(coord_t *c, coord_worker_t *w, const char *why);

/* Marks w dead (once), logging why, and restores the jobs it ran. */
void coord_declare_dead(coord_t *c, coord_worker_t *w, const char *why);
/* A worker that said LEAVE: gone like a dead one (its tasks' jobs are
 * restored), logged and shown as having left. */
void coord_worker_left(coord_t *c, coord_worker_t *w, const char *why);

/* worker_lease.c: each live worker's registration on an etcd lease */
/* At takeover, synchronously (before meta_async has calls): the workers
 * the previous leader registered become "awaiting heartbeat". */
int coord_worker_leases_load(coord_t *c, eddy_err_t *err);
/* w (re)registered: grant its lease and record it. */
void coord_worker_lease_on_registered(coord_t *c, coord_worker_t *w);
/* w is dead: revoke its lease, so its key goes. */
void coord_worker_lease_release(coord_t *c, coord_worker_t *w);
/* Keepalives, retries, and awaiting workers that did not come back. */
void coord_worker_leases_tick(coord_t *c, uint64_t now_ms);
uint32_t coord_awaiting_workers(const coord_t *c);
coord_worker_t *coord_awaiting_worker_named(coord_t *c, const char *name);
/* A worker registered: once every worker the takeover expects is back,
 * logs how long after the takeover that was (measured, for the grace). */
void coord_worker_back(coord_t *c, coord_worker_t *w);

/* disconnect.c: a worker whose control connection closes is dead now */
/* Monitors the router's connections (not with opts->heartbeat_only). */
int coord_disconnect_start(coord_t *c, eddy_err_t *err);
void coord_disconnect_stop(coord_t *c);
/* The monitor socket to poll, NULL when off. */
void *coord_disconnect_socket(coord_t *c);
/* Handles the connection events waiting; call before reading the router. */
void coord_disconnect_drain(coord_t *c);
/* A message from routing id `id` came through descriptor fd (ZMQ_SRCFD);
 * w: the alive worker with that id, if any. */
void coord_disconnect_heard(coord_t *c, int fd, const unsigned char *id, size_t id_len,
                            coord_worker_t *w);

/* reaper.c: checkpoint directories are removed on a thread, in order */
coord_reaper_t *coord_reaper_new(eddy_snapshot_store_t *store, eddy_err_t *err);
/* Queues the removal of ROOT/JOB/chk-<checkpoint>; self NULL: removes nothing. */
void coord_reaper_remove(coord_reaper_t *self, const char *job, uint64_t checkpoint);
/* Collects by reference (state/snapshot_gc.h) every stored checkpoint of
 * job up to upto that is not one of keep[n_keep] (the retained ones). */
void coord_reaper_collect(coord_reaper_t *self, const char *job, uint64_t upto,
                          const uint64_t *keep, uint32_t n_keep);
/* Finishes the queued removals, joins the thread, frees, NULLs *self_p. */
void coord_reaper_destroy(coord_reaper_t **self_p);

/* jobs.c: lifecycle */
/* The job with this id, unless it ended and a job of that name runs:
 * then the newest such job (a name follows its resubmissions). */
coord_job_t *coord_job_find(coord_t *c, const char *id);
/* The job whose id is exactly id, ended or not (NULL: none in memory). */
coord_job_t *coord_job_with_id(coord_t *c, const char *id);
bool coord_job_id_taken(coord_t *c, const char *id);
void coord_job_id_reserve(coord_t *c, const char *id);
coord_job_t *coord_job_by_num(coord_t *c, uint32_t num);
/* Builds a job (graph, id, flags) without adding, persisting or deploying it. */
/* Builds the job's plan from its flags, or (plan_bytes set) instantiates
 * the plan it was submitted with (a resumed job). */
coord_job_t *coord_job_new(coord_t *c, const char *job_name, int argc, char **argv,
                           const void *plan_bytes, size_t plan_len, eddy_err_t *err);
/* Adds a job built by coord_job_new to the coordinator's list. */
void coord_job_add(coord_t *c, coord_job_t *j);
/* at-most-once jobs: source positions from a heartbeat's task metrics
 * (recovery.c). */
void coord_recovery_on_metrics(coord_t *c, const eddy_task_metrics_t *m, uint32_t n);
/* A heartbeat's task metrics into each job's counters (counters.h). */
void coord_jobs_on_metrics(coord_t *c, const coord_worker_t *w);
/* from: restore the new job from a savepoint (NULL: none); see savepoint.c */
typedef struct coord_savepoint_from {
    const char *location;
    const eddy_savepoint_manifest_t *manifest;
    bool allow_non_restored;
} coord_savepoint_from_t;
coord_job_t *coord_job_submit(coord_t *c, const char *job_name, eddy_guarantee_t guarantee,
                              int argc, char **argv, const coord_savepoint_from_t *from,
                              eddy_err_t *err);

/* savepoint.c: savepoints taken (eddy savepoint) and jobs started from one */
typedef struct coord_savepoint coord_savepoint_t;
/* Starts a savepoint of job_id under dir (NULL: the default) and answers
 * the client (identity) when it is written or failed. 0, or -1 with err. */
int coord_savepoint_request(coord_t *c, const char *job_id, const char *dir, bool stop,
                            const unsigned char *identity, size_t identity_len, eddy_err_t *err);
/* A savepoint requested and no checkpoint in flight: its TRIGGER's location
 * (the pending checkpoint pc becomes the savepoint); NULL otherwise. */
const char *coord_savepoint_on_trigger(coord_job_t *j, coord_pending_checkpoint_t *pc);
/* Every task acknowledged the savepoint: its manifest is written on a thread. */
void coord_savepoint_on_acked(coord_t *c, coord_job_t *j);
/* The manifest written (or not): the savepoint ends (with --stop, the job). */
void coord_savepoint_tick(coord_t *c, coord_job_t *j);
/* The savepoint's checkpoint was abandoned, or the job ended: its client hears why. */
void coord_savepoint_fail(coord_t *c, coord_job_t *j, const char *why);
/* Checks a savepoint against a new job's graph and makes it the job's
 * first restore point. 0, or -1 with err (nothing changed). */
int coord_savepoint_restore(coord_job_t *j, const coord_savepoint_from_t *from, eddy_err_t *err);
void coord_jobs_tick(coord_t *c, uint64_t now_ms);
void coord_job_on_task_done(coord_t *c, const eddy_msg_t *m);
void coord_jobs_on_worker_joined(coord_t *c);
int coord_job_cancel(coord_t *c, const char *job_id, eddy_err_t *err);
const char *coord_job_state_name(job_state_t s);
/* Where checkpoints go: --checkpoint-storage's URI, else the snapshot dir. */
const char *coord_storage(const eddy_coordinator_options_t *opts);
bool coord_job_ended(const coord_job_t *j);
bool coord_all_jobs_ended(coord_t *c);
void coord_job_free(coord_job_t *j);
void coord_job_set_state(coord_t *c, coord_job_t *j, job_state_t s);
void coord_job_release(coord_t *c, coord_job_t *j);
/* Whether every live worker confirmed (by a heartbeat without its tasks)
 * the RELEASE of each cancelled or failed job, or COORD_RELEASE_WAIT_MS
 * passed since the job ended: only then may eddy local stop the workers. */
bool coord_releases_confirmed(coord_t *c, uint64_t now_ms);
uint32_t coord_job_total_tasks(const coord_job_t *j);
uint32_t coord_job_count_positions(const coord_job_t *j);
uint32_t coord_job_parallelism(const coord_job_t *j, uint32_t stage);

/* deploy.c */
/* Bumps the epoch, persists it, then sends DEPLOY to every usable worker. */
void coord_deploy(coord_t *c, coord_job_t *j, eddy_deploy_mode_t mode, uint64_t checkpoint,
                  const coord_source_progress_t *positions);
void coord_job_on_deployed(coord_t *c, coord_worker_t *w, const eddy_msg_t *m);
/* Quarantines workers that did not confirm a DEPLOY within the timeout. */
void coord_deploy_tick(coord_t *c, coord_job_t *j, uint64_t now_ms);

/* checkpoint.c */
void coord_checkpoint_trigger(coord_t *c, coord_job_t *j, bool pause);
void coord_job_on_ack(coord_t *c, const eddy_msg_t *m);
/* Abandons the checkpoint in flight. counts: it is a checkpoint failure
 * (towards --tolerable-checkpoint-failures). */
void coord_checkpoint_abort(coord_t *c, coord_job_t *j, const char *why, bool counts);
/* Drops the pending checkpoint (the job is being restored): files removed. */
void coord_checkpoint_discard(coord_t *c, coord_job_t *j);
void coord_checkpoint_tick(coord_t *c, coord_job_t *j, uint64_t now_ms);
/* A periodic checkpoint is due: its interval passed and nothing is in its
 * way (a checkpoint or a fluid step in flight, a deploy, a finished
 * two-phase-commit task). */
bool coord_checkpoint_due(const coord_t *c, const coord_job_t *j, uint64_t now_ms);
/* Sets the newest complete checkpoint (restart path); takes positions and
 * finished (its finished tasks, may be NULL). */
void coord_retained_push(coord_job_t *j, uint64_t id, coord_source_progress_t *positions,
                         uint32_t n_positions, eddy_task_ref_t *finished, uint32_t n_finished);

/* ---- finished.c: checkpoints after tasks finish (FLIP-147) ---- */
/* A task that finished in this epoch holds a two-phase-commit operator
 * (its prepared final data would belong to no checkpoint): no checkpoint
 * may start while the job runs. Names it in *stage, *instance. */
bool coord_finished_blocks_checkpoints(const coord_job_t *j, uint32_t *stage, uint32_t *instance);
/* Some task finished in this epoch, or the epoch was restored with
 * finished tasks: a rescale is refused. */
bool coord_job_has_finished(const coord_job_t *j);
/* Marks the tasks done so far in this epoch as finished in j->pending
 * (they are not expected to ACK). */
void coord_finished_mark(coord_job_t *j);
/* TASK_DONE of (stage, instance): the pending checkpoint survives only if
 * that task acknowledged it already and holds no two-phase-commit operator
 * (and it is no rescale's snapshot). */
void coord_finished_on_task_done(coord_t *c, coord_job_t *j, uint32_t stage, uint32_t instance);
/* An ACK that names ended inputs: true when it may count, else the
 * checkpoint was declined (abandoned, not counted as a failure). */
bool coord_finished_ack_ok(coord_t *c, coord_job_t *j, const eddy_msg_t *m);
/* The restore's finished tasks for a deploy from `from` (NULL: none). */
int coord_finished_for_deploy(coord_job_t *j, const coord_retained_t *from);
/* Deletes checkpoint id's metadata (found unusable) but keeps its files for
 * inspection; later retention deletes them. */
void coord_checkpoint_forget(coord_t *c, coord_job_t *j, uint64_t id);
/* Forgets the newest retained checkpoint (found unusable). */
void coord_retained_drop_newest(coord_job_t *j);
void coord_retained_clear(coord_job_t *j);

/* rescale.c */
/* Starts a rescale; the reply goes to identity when it ends. -1 (err) when refused now. */
int coord_job_rescale(coord_t *c, const char *job_id, const char *stage, uint32_t parallelism,
                      const unsigned char *identity, size_t identity_len, eddy_err_t *err);
/* The rescale's migration snapshot is complete: deploy the new parallelism. */
void coord_rescale_on_snapshot(coord_t *c, coord_job_t *j);
/* The rescale's deploy is confirmed everywhere. */
void coord_rescale_done(coord_t *c, coord_job_t *j);
/* Ends a rescale that cannot go on, replying why to its client. */
void coord_rescale_abandon(coord_t *c, coord_job_t *j, const char *why);
/* Starts a migration: moves (all of one stage of j, n >= 1) change worker
 * at the same parallelism, through the rescale's migration snapshot; only
 * the moved instances' key groups travel. -1 (err) when j cannot now. */
int coord_job_migrate(coord_t *c, coord_job_t *j, const eddy_rebalance_move_t *moves, uint32_t n,
                      const char *why, eddy_err_t *err);
/* The instances of the migration in flight that move (malloc'd, *n set;
 * NULL with *n 0 when none): TRIGGER tells their tasks to write it all. */
uint32_t *coord_migration_moving(const coord_job_t *j, uint32_t *n);

/* fluid.c: --migration fluid rescales. */
typedef enum coord_fluid_phase {
    COORD_FLUID_EXPAND = 1, /* scale up: new instances deployed owning no key group */
    COORD_FLUID_STEPS,      /* key groups move step by step, sources running */
    COORD_FLUID_SHRINK,     /* scale down: the emptied instances removed */
} coord_fluid_phase_t;
int coord_fluid_begin(coord_t *c, coord_job_t *j, int stage, uint32_t to,
                      const unsigned char *identity, size_t identity_len, eddy_err_t *err);
/* A migration (j->moves set, all of `stage`) done fluidly: EXPAND with one
 * new instance per move on its target worker owning nothing, steps moving
 * each moved instance's key groups to its new one, SHRINK renumbering the
 * new ones into the moved ones' places (DEPLOY renames). */
void coord_fluid_migrate(coord_t *c, coord_job_t *j, int stage);
/* SHRINK's renames of a fluid migration (malloc'd, *n set; NULL with *n 0
 * otherwise): DEPLOY tells the workers which task takes which number. */
eddy_task_rename_t *coord_fluid_renames(const coord_job_t *j, uint32_t *n);
void coord_fluid_on_snapshot(coord_t *c, coord_job_t *j);
void coord_fluid_on_deployed(coord_t *c, coord_job_t *j);
/* EXPAND's deploy is confirmed everywhere, START not yet sent: the first
 * steps go ahead of the sources' records (deploy.c). */
void coord_fluid_before_start(coord_t *c, coord_job_t *j);
void coord_fluid_on_step_done(coord_t *c, const eddy_msg_t *m);
void coord_fluid_tick(coord_t *c, coord_job_t *j, uint64_t now_ms);
/* Whether a checkpoint must wait: a step is in flight. */
bool coord_fluid_step_in_flight(const coord_job_t *j);
void coord_fluid_clear(coord_job_t *j);

/* migrate.c: rebalancing, one migration at a time per cluster */
/* A worker registered: check the spread at the next tick. */
void coord_rebalance_worker_joined(coord_t *c);
/* Plans and starts a migration when the spread is uneven (rate-limited). */
void coord_rebalance_tick(coord_t *c, uint64_t now_ms);
/* A migration ended (done or abandoned): the next waits an interval. */
void coord_rebalance_migration_ended(coord_t *c);

/* recovery.c */
/* Restores the job from its last complete checkpoint (or from the start).
 * after_failure: counts against the restart limit and backs off. */
void coord_restore_job(coord_t *c, coord_job_t *j, const char *why, bool after_failure);
/* Runs a restore whose backoff delay has passed. */
void coord_recovery_tick(coord_t *c, coord_job_t *j, uint64_t now_ms);
void coord_fail_job(coord_t *c, coord_job_t *j, const char *why);
/* The name of a stage whose operator publishes at COMPLETE (two-phase
 * commit) when the job's guarantee forbids duplicates, else NULL: such a
 * sink may have published up to the newest completed checkpoint, so the
 * job must never restore an older one (that would publish the replay
 * twice). */
const char *coord_job_commit_fence(const coord_job_t *j);
void coord_job_on_task_failed(coord_t *c, const eddy_msg_t *m);
void coord_jobs_on_worker_lost(coord_t *c, coord_worker_t *w);
/* A RESTORE deploy failed with err: falls back to an older retained
 * checkpoint when err names a bad snapshot file. */
void coord_recovery_on_deploy_error(coord_t *c, coord_job_t *j, const char *err);

/* job_store.c */
/* Writes j's record (asynchronously, FIFO with every other store call);
 * done(arg) may be NULL. */
void coord_job_store_save(coord_t *c, coord_job_t *j, int retries, eddy_meta_done_fn done,
                          void *arg);
/* Startup: reloads the jobs that had not ended (synchronous; before the loop). */
/* -1 with err when the store could not be read; nothing is kept then. */
int coord_jobs_restore_from_store(coord_t *c, eddy_err_t *err);
/* Forgets every job (a reload that failed half-way is done again). */
void coord_jobs_drop_loaded(coord_t *c);
/* Writes the job's counters under their own key; when the write completed
 * the views show them (counters.h: never less than a restarted coordinator
 * would show). */
void coord_counters_save(coord_t *c, coord_job_t *j);
coord_ticket_t *coord_ticket_new(coord_t *c, const coord_job_t *j, uint64_t checkpoint);
void coord_ticket_release(coord_ticket_t *t);
/* The ticket's job if it still exists with the ticket's epoch, else NULL. */
coord_job_t *coord_ticket_job(coord_ticket_t *t);

/* plugins.c */
/* Stores and loads a plugin file (eddy local --plugin). */
int coord_plugins_add_file(coord_t *c, const char *path, char hash[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err);
/* Loads a stored plugin by hash, if not loaded (a resumed job's). */
int coord_plugins_ensure(coord_t *c, const char *hash, eddy_err_t *err);
/* Closes the plugin store (teardown). */
void coord_plugins_close(coord_t *c);
/* PLUGIN: an upload from a client (w NULL or not), or a worker's fetch. */
void coord_plugins_on_message(coord_t *c, const unsigned char *id, size_t id_len, coord_worker_t *w,
                              const eddy_msg_t *m);

/* senders.c: task-scoped messages count only from the task's worker */
#define COORD_TASK_SEEN_DONE 1u
#define COORD_TASK_SEEN_FINAL_ACK 2u
#define COORD_TASK_SEEN_FAILED 4u
/* A new epoch of j was deployed: nothing of it was reported yet. -1: no memory. */
int coord_senders_begin_epoch(coord_job_t *j);
/* The job when w may report on task (stage, instance) of job's current
 * epoch `epoch` (it is placed there); else NULL, counted and logged. */
coord_job_t *coord_sender_task(coord_t *c, const coord_worker_t *w, const char *what,
                               uint32_t job, uint32_t epoch, uint32_t stage, uint32_t instance);
/* Whether the task's report `flag` (COORD_TASK_SEEN_*) is the first of
 * this epoch; a repeat is counted as a duplicate. Call after coord_sender_task. */
bool coord_sender_once(coord_t *c, coord_job_t *j, uint32_t stage, uint32_t instance,
                       uint8_t flag, const char *what);
/* Drops from a heartbeat's tasks[n] the entries w may not report (current
 * epoch, not placed on w; unknown jobs; future epochs) and those past
 * --max-worker-series, in place; returns how many are left. */
uint32_t coord_sender_filter_metrics(coord_t *c, const coord_worker_t *w, eddy_task_metrics_t *tasks,
                                     uint32_t n);

/* placement.c */
/* Places every instance of every stage on alive workers, keeping instances
 * already on alive workers where they are. -1 when no worker is alive. */
int coord_place(coord_t *c, coord_job_t *j, const uint32_t *parallelism, eddy_err_t *err);
/* Whether j's placement puts an instance on worker worker_id. */
bool coord_job_on_worker(const coord_job_t *j, uint32_t worker_id);

/* hot_key.c */
/* The busiest key group of keyed stage `stage` of j and its share of the
 * records the stage receives, from its senders' latest key load windows
 * (alive workers, j's current epoch). false when unknown (not keyed, no
 * window yet, too few records). */
bool coord_hot_key(coord_t *c, const coord_job_t *j, uint32_t stage, uint32_t *key_group,
                   double *share);

/* views.c */
json_t *coord_view_status(coord_t *c);
/* {"role": "leader", "leader": its endpoint, "epoch": its leader epoch} */
json_t *coord_view_leader(coord_t *c);
json_t *coord_view_jobs(coord_t *c);
char *coord_view_metrics(coord_t *c);
/* GET /metrics of a standby: 200 with eddy_coordinator_leader 0 alone. */
void coord_view_standby_metrics(eddy_http_response_t *resp);
bool coord_http_is_open(const char *path);
void coord_http_handler(void *ctx, const char *method, const char *path,
                        eddy_http_response_t *resp);
/* Checks one decision against its schema (controller/decision_json.h) and,
 * if it holds, appends it (taking the reference) and stores it under its own
 * key; else drops it, counts it (eddy_decisions_rejected_total), logs it
 * (once per COORD_REJECT_LOG_MS) and returns -1 with err saying why. */
int coord_record_decision(coord_t *c, json_t *decision, eddy_err_t *err);
/* Loads the history at startup, synchronously: call before meta_async exists. */
int coord_decisions_load(coord_t *c, eddy_err_t *err);
json_t *coord_view_operator_metrics(coord_t *c, const char *job_id);

#endif
