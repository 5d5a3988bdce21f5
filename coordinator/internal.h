/* internal.h - state shared by the coordinator's files (not a public API).
 *
 * coordinator.c owns the loop, sockets and worker registry; jobs.c the job
 * lifecycle and its protocols; placement.c where instances run; views.c the
 * JSON and Prometheus renderings of this state. */
#ifndef EDDY_COORDINATOR_INTERNAL_H
#define EDDY_COORDINATOR_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "coordinator/coordinator.h"
#include "net/proto.h"
#include "net/http.h"
#include "state/metastore.h"
#include "state/metastore_async.h"
#include "state/snapshot_store.h"
#include "plan/registry.h"

#define COORD_MAX_IDENTITY 256
#define COORD_MAX_RESCALES 256
#define COORD_MAX_DECISIONS 1024

typedef struct coord_worker {
    uint32_t id;
    char name[EDDY_NAME_MAX];
    char endpoint[EDDY_ENDPOINT_MAX];
    char host[EDDY_NAME_MAX];
    int64_t pid;
    unsigned char identity[COORD_MAX_IDENTITY];
    size_t identity_len;
    uint64_t last_seen_ms;
    int64_t registered_wall_ms;
    bool alive;
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
} job_state_t;

typedef struct rescale_record {
    int64_t time_ms;
    char stage[EDDY_NAME_MAX];
    uint32_t old_p, new_p;
    double pause_ms;
    uint64_t bytes_moved, groups_moved;
    uint64_t checkpoint;
} rescale_record_t;

typedef struct pending_client {
    unsigned char identity[COORD_MAX_IDENTITY];
    size_t identity_len;
    bool waiting;
} pending_client_t;

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
    uint64_t started_ms, ended_ms;

    eddy_stage_placement_t placement[EDDY_MAX_STAGES];
    uint32_t epoch;
    uint32_t deploys_pending;
    uint64_t deploy_bytes, deploy_groups;
    uint64_t deploy_started_ms;
    uint32_t restarts;

    /* checkpoints */
    uint64_t next_checkpoint;
    uint64_t inflight;            /* 0: none */
    bool inflight_pause;
    uint32_t acks_pending;
    uint64_t inflight_started_ms, inflight_bytes, inflight_files;
    int64_t *inflight_positions;  /* [stage][instance] flattened for source stages */
    uint64_t last_checkpoint;     /* last complete, 0 none */
    int64_t *last_positions;
    uint64_t last_checkpoint_wall_ms;
    double last_checkpoint_ms;
    uint64_t last_checkpoint_bytes;
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
    uint32_t n_rescales;

    uint32_t tasks_done;
    uint32_t tasks_total;
    bool any_done;
    /* Every task is done: COMPLETE(EDDY_FINAL_CHECKPOINT) went out and the
     * job finishes when each task ACKed its final commit. */
    bool finishing;
    uint32_t final_acks_pending;
    uint64_t finishing_started_ms;
    struct coord_job *next;
} coord_job_t;

typedef struct coord {
    const eddy_coordinator_options_t *opts;
    void *zctx, *router;
    eddy_http_t *http;
    eddy_metastore_t *meta;
    eddy_metastore_async_t *meta_async; /* metadata-store calls off the loop (after startup) */
    eddy_snapshot_store_t *store;
    coord_worker_t *workers;
    uint32_t next_worker_id;
    coord_job_t *jobs;
    uint32_t next_job_num;
    json_t *decisions;            /* array of scaling decisions, oldest first */
    /* Key sequence of decisions[i] (views.c); 0: it came from the legacy
     * single key "/eddy/scaling/decisions". */
    uint64_t decision_seqs[COORD_MAX_DECISIONS];
    uint64_t next_decision_seq;
    uint64_t started_ms;
    bool submitted;
    bool resumed_jobs;            /* jobs were reloaded from the metadata store */
    bool any_failed;
    bool any_cancelled;
    uint64_t last_progress_ms;
} coord_t;

/* coordinator.c */
void coord_send_worker(coord_t *c, coord_worker_t *w, const eddy_msg_t *msg);
void coord_broadcast(coord_t *c, const eddy_msg_t *msg);
void coord_reply(coord_t *c, const unsigned char *identity, size_t identity_len, int64_t status,
                 const char *body);
coord_worker_t *coord_find_worker(coord_t *c, uint32_t id);
uint32_t coord_alive_workers(coord_t *c);

/* jobs.c */
coord_job_t *coord_job_find(coord_t *c, const char *id);
coord_job_t *coord_job_by_num(coord_t *c, uint32_t num);
coord_job_t *coord_job_submit(coord_t *c, const char *job_name, int argc, char **argv,
                              eddy_err_t *err);
void coord_jobs_tick(coord_t *c, uint64_t now_ms);
void coord_job_on_deployed(coord_t *c, const eddy_msg_t *m);
void coord_job_on_ack(coord_t *c, const eddy_msg_t *m);
void coord_job_on_task_done(coord_t *c, const eddy_msg_t *m);
void coord_job_on_task_failed(coord_t *c, const eddy_msg_t *m);
void coord_jobs_on_worker_lost(coord_t *c, coord_worker_t *w);
void coord_jobs_on_worker_joined(coord_t *c);
/* Starts a rescale; the reply goes to identity when it ends. -1 (err) when refused now. */
int coord_job_rescale(coord_t *c, const char *job_id, const char *stage, uint32_t parallelism,
                      const unsigned char *identity, size_t identity_len, eddy_err_t *err);
int coord_job_cancel(coord_t *c, const char *job_id, eddy_err_t *err);
const char *coord_job_state_name(job_state_t s);
bool coord_all_jobs_ended(coord_t *c);
void coord_job_free(coord_job_t *j);
void coord_jobs_restore_from_store(coord_t *c);

/* plugins.c */
/* Stores and loads a plugin file (eddy local --plugin). */
int coord_plugins_add_file(coord_t *c, const char *path, char hash[33], eddy_err_t *err);
/* Loads a stored plugin by hash, if not loaded (a resumed job's). */
int coord_plugins_ensure(coord_t *c, const char *hash, eddy_err_t *err);
/* PLUGIN: an upload from a client (w NULL or not), or a worker's fetch. */
void coord_plugins_on_message(coord_t *c, const unsigned char *id, size_t id_len, coord_worker_t *w,
                              const eddy_msg_t *m);

/* placement.c */
/* Places every instance of every stage on alive workers, keeping instances
 * already on alive workers where they are. -1 when no worker is alive. */
int coord_place(coord_t *c, coord_job_t *j, const uint32_t *parallelism, eddy_err_t *err);

/* views.c */
json_t *coord_view_status(coord_t *c);
json_t *coord_view_jobs(coord_t *c);
char *coord_view_metrics(coord_t *c);
void coord_http_handler(void *ctx, const char *method, const char *path,
                        eddy_http_response_t *resp);
/* Appends one decision (taking the reference) and stores it under its own key. */
void coord_record_decision(coord_t *c, json_t *decision);
/* Loads the history at startup, synchronously: call before meta_async exists. */
void coord_decisions_load(coord_t *c);
json_t *coord_view_operator_metrics(coord_t *c, const char *job_id);

#endif
