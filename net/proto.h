/* proto.h - every control-plane message of eddy, one struct each, with one
 * encoder (eddy_msg_encode) and one decoder (eddy_msg_decode).
 *
 * Wire form: a msgpack array whose first element is the message type and
 * whose remaining elements are the struct's fields in declaration order.
 * Control messages travel worker/client DEALER <-> coordinator ROUTER.
 * The decoder validates every length against the limits below before
 * copying, and frees everything it allocated when it fails. */
#ifndef EDDY_NET_PROTO_H
#define EDDY_NET_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/histogram.h"
#include "common/guarantee.h"
#include "net/op_report.h"
#include "net/record.h" /* EDDY_SOURCE_STATE_MAX */

#define EDDY_NAME_MAX 64          /* job, stage, worker names (incl. NUL) */
#define EDDY_ENDPOINT_MAX 256     /* "tcp://host:port" (incl. NUL) */
/* A checkpoint storage location (--checkpoint-storage: a directory,
 * file:///DIR or s3://BUCKET/PREFIX?endpoint=URL&region=R), incl. NUL. It
 * never holds a credential. */
#define EDDY_STORAGE_URI_MAX 2048
/* --checkpoint-full-every's largest value (every N-th checkpoint full). */
#define EDDY_CHECKPOINT_FULL_EVERY_MAX 1000000u
#define EDDY_ERROR_MAX 512        /* error strings (incl. NUL) */
#define EDDY_MAX_ARGS 256
#define EDDY_ARG_MAX 65536 /* a pipeline spec travels as one argument */
#define EDDY_MAX_STAGES 64
#define EDDY_MAX_PARALLELISM 32768
#define EDDY_MAX_WORKERS 4096
#define EDDY_MAX_TASK_METRICS 65536
#define EDDY_BODY_MAX (64u << 20)
#define EDDY_NO_STAGE UINT32_MAX
#define EDDY_PLAN_MAX_WIRE (16u << 20) /* a serialised plan in a DEPLOY */
#define EDDY_MAX_PLUGINS 64
#define EDDY_PLUGIN_HASH_MAX 65          /* a SHA-256: 64 hex digits and NUL */
#define EDDY_PLUGIN_MAX_WIRE (32u << 20) /* a plugin's bytes in a PLUGIN message */
#define EDDY_TASK_REFS_MAX 65536 /* tasks named in one ACK's ended inputs or DEPLOY's finished */
/* Bumped whenever a message's fields change: a worker of another protocol
 * version is refused at registration with a message naming both. */
#define EDDY_PROTOCOL_VERSION 9u

/* A REPLY's status from a standby coordinator; its body starts with
 * EDDY_NOT_LEADER_PREFIX and the leader's endpoint when one is known. */
#define EDDY_STATUS_NOT_LEADER 421
#define EDDY_NOT_LEADER_PREFIX "not leader; the leader is "

/* Failover timing shared by workers and coordinators. A worker given
 * several coordinators takes the silence of the one it follows (it answers
 * every heartbeat) for its death after eddy_coordinator_silence_ms; it then
 * asks the candidates in turn, again after EDDY_LEADER_SEEK_MIN_MS doubling
 * to EDDY_LEADER_SEEK_MAX_MS while they answer "not the leader", until one
 * answers as leader. A new leader therefore expects every live worker back
 * within eddy_failover_reregister_ms of its takeover. */
#define EDDY_LEADER_SEEK_MIN_MS 50u
#define EDDY_LEADER_SEEK_MAX_MS 400u
static inline uint64_t eddy_coordinator_silence_ms(uint32_t heartbeat_ms)
{
    uint64_t t = 6ull * heartbeat_ms;
    return t < 3000 ? 3000 : t;
}
static inline uint64_t eddy_failover_reregister_ms(uint32_t heartbeat_ms)
{
    return eddy_coordinator_silence_ms(heartbeat_ms) + 2ull * EDDY_LEADER_SEEK_MAX_MS +
           heartbeat_ms;
}

typedef enum eddy_msg_type {
    EDDY_MSG_REGISTER = 1,   /* worker -> coordinator */
    EDDY_MSG_REGISTERED,     /* coordinator -> worker */
    EDDY_MSG_HEARTBEAT,      /* worker -> coordinator, carries task metrics */
    EDDY_MSG_DEPLOY,         /* coordinator -> worker: the job's full placement */
    EDDY_MSG_DEPLOYED,       /* worker -> coordinator */
    EDDY_MSG_START,          /* coordinator -> worker: sources may run */
    EDDY_MSG_TRIGGER,        /* coordinator -> worker: sources inject a barrier */
    EDDY_MSG_ACK,            /* worker -> coordinator: a task snapshotted */
    EDDY_MSG_COMPLETE,       /* coordinator -> worker: a checkpoint is complete */
    EDDY_MSG_TASK_DONE,      /* worker -> coordinator: a task reached end of input */
    EDDY_MSG_TASK_FAILED,    /* worker -> coordinator */
    EDDY_MSG_RELEASE,        /* coordinator -> worker: drop the job's tasks */
    EDDY_MSG_REQUEST,        /* client -> coordinator */
    EDDY_MSG_REPLY,          /* coordinator -> client */
    EDDY_MSG_PLUGIN,         /* client -> coordinator: upload (REPLY answers);
                              * worker -> coordinator: fetch (no data);
                              * coordinator -> worker: the plugin, or an error */
    EDDY_MSG_LEAVE,          /* worker -> coordinator: it stops on purpose (protocol 8);
                              * REGISTERED answers, so it may close */
    EDDY_MSG_ROUTE_STEP,     /* coordinator -> worker: a fluid migration step (its senders route
                              * the step's key groups to the new owner, HANDOFF in band) */
    EDDY_MSG_STEP_DONE,      /* worker -> coordinator: the new owner installed a step's groups */
    EDDY_MSG_LIVENESS,       /* worker's liveness thread -> coordinator, on its own DEALER:
                              * the process lives, whatever its loop does (runtime/liveness.h) */
    EDDY_MSG_TYPE_COUNT
} eddy_msg_type_t;

typedef enum eddy_deploy_mode {
    EDDY_DEPLOY_FRESH = 0,   /* new tasks, empty state (or restore_checkpoint if set) */
    EDDY_DEPLOY_RESCALE = 1, /* keep live tasks and their in-memory key groups */
    EDDY_DEPLOY_RESTORE = 2, /* drop live tasks, rebuild all from restore_checkpoint */
} eddy_deploy_mode_t;

/* Why a RELEASE drops a job's tasks: a restore (a new attempt follows, so
 * what they prepared is resolved by it), or the job's end. Cancelled and
 * failed mean no attempt follows: two-phase-commit operators roll back what
 * they prepared and nothing committed (eddy_operator_ops_t.abort). A RELEASE
 * of an older peer without the field decodes as EDDY_RELEASE_RESTORE. */
typedef enum eddy_release_reason {
    EDDY_RELEASE_RESTORE = 0,
    EDDY_RELEASE_FINISHED = 1,
    EDDY_RELEASE_CANCELLED = 2,
    EDDY_RELEASE_FAILED = 3,
} eddy_release_reason_t;

/* What one task sent on one keyed (HASH) output over its last load window
 * (runtime/task.c): the busiest key group and how many of the records it
 * sent to that stage went there. The coordinator adds up the senders of a
 * stage to name its hot key group (coordinator/hot_key.c). */
#define EDDY_KEY_LOADS_MAX 4   /* keyed outputs reported per task; more are not */
typedef struct eddy_key_load {
    uint32_t dst_stage;         /* the receiving stage */
    uint32_t key_group;         /* the busiest key group in the window */
    uint64_t key_group_records; /* records sent to key_group, <= records */
    uint64_t records;           /* records sent to dst_stage in the window */
    uint32_t window_ms;         /* the window's length, >= 1 */
} eddy_key_load_t;

typedef struct eddy_task_metrics {
    uint32_t job, epoch, stage, instance;
    uint64_t records_in, records_out;
    uint64_t busy_ns, idle_ns, blocked_ns; /* cumulative since the task started */
    uint64_t state_keys, state_bytes;
    int64_t position;        /* sources: next input position, else -1 */
    double offered_rate;     /* sources: configured rate (0 = unlimited) */
    int64_t watermark;       /* event time: the task's watermark (INT64_MIN: none yet) */
    uint64_t late_records;   /* records its windows dropped or sent on as late */
    int64_t source_lag;      /* sources: entries upstream not yet read, -1 unknown */
    uint64_t rejected_records; /* malformed input its operators dropped */
    /* Cumulative since the task started (common/histogram.h): record
     * latency from source ingestion to the end of this task's batch, and
     * event-time lag (wall clock - watermark) sampled every tick. Fields 18
     * and 19; a 17-field entry from an older worker reads as empty. */
    eddy_histogram_t latency;
    eddy_histogram_t event_lag;
    /* Field 20: per keyed output, its key load over the last completed
     * window (none yet, or not keyed: 0). Older workers send 19 fields. */
    uint32_t n_key_loads;
    eddy_key_load_t key_loads[EDDY_KEY_LOADS_MAX];
    /* What the operators reported about themselves (net/op_report.h).
     * Field 21; an older worker's 19- or 20-field entry reads as an empty report. */
    eddy_op_report_t report;
} eddy_task_metrics_t;

typedef struct eddy_stage_placement {
    uint32_t parallelism;
    uint32_t *worker_of;     /* [parallelism] worker id of each instance */
    /* Fluid migration: key groups are owned (and routed) as at this
     * parallelism (<= parallelism), instances beyond it own none until
     * steps move groups to them; 0: as at parallelism. DEPLOY's optional
     * last field (absent: 0). */
    uint32_t route_parallelism;
} eddy_stage_placement_t;

typedef struct eddy_worker_endpoint {
    uint32_t id;
    char endpoint[EDDY_ENDPOINT_MAX];
} eddy_worker_endpoint_t;

/* One task of a job: its stage and instance. */
typedef struct eddy_task_ref {
    uint32_t stage, instance;
} eddy_task_ref_t;

/* A fluid migration's end (coordinator/fluid.c): the task `from` of
 * `stage` becomes instance `to` on the worker that runs it, keeping its
 * state; the task `to` was elsewhere and is removed. */
typedef struct eddy_task_rename {
    uint32_t stage, from, to;
} eddy_task_rename_t;

/* Where a source instance resumes: its position and, for sources with
 * write_state, its state bytes (at most EDDY_SOURCE_STATE_MAX; NULL/0 none). */
typedef struct eddy_source_position {
    uint32_t stage, instance;
    int64_t position;
    char *state;
    uint32_t state_len;
} eddy_source_position_t;

typedef struct eddy_deploy {
    uint32_t job;
    char job_id[EDDY_NAME_MAX];    /* user-visible id, e.g. "wordcount" */
    char job_name[EDDY_NAME_MAX];  /* the job's name, for logs */
    char *plan;                    /* the serialised plan (plan/plan.h), built once */
    uint32_t plan_len;
    uint64_t plan_fingerprint;     /* checked by the worker against the bytes */
    uint32_t n_plugins;
    char **plugins;                /* content hashes of the plugins the plan needs */
    uint32_t epoch;
    uint32_t mode;                 /* eddy_deploy_mode_t */
    uint64_t restore_checkpoint;   /* 0: none */
    char snapshot_dir[EDDY_ENDPOINT_MAX * 4]; /* the coordinator's directory ("" with s3://) */
    uint32_t max_parallelism;
    uint32_t guarantee;            /* eddy_guarantee_t (common/guarantee.h) */
    uint32_t n_stages;
    eddy_stage_placement_t *stages;
    uint32_t n_workers;
    eddy_worker_endpoint_t *workers;
    uint32_t n_positions;
    eddy_source_position_t *positions;
    /* Tasks the restored checkpoint recorded as finished (protocol 9,
     * DEPLOY's optional last field; absent: none): each starts at its end,
     * sends end of stream downstream, reads and restores nothing and
     * reports TASK_DONE. Borrowed when sending; owned when decoded. */
    uint32_t n_finished;
    eddy_task_ref_t *finished;
    /* The coordinator's checkpoint storage (DEPLOY's optional last field;
     * absent or "": snapshot_dir). A worker started with its own
     * --checkpoint-storage uses that instead. Never a credential. */
    char storage_uri[EDDY_STORAGE_URI_MAX];
    /* --checkpoint-full-every (optional last field; absent: 1, every
     * checkpoint full as before incremental checkpoints). */
    uint32_t checkpoint_full_every;
    /* A restore from a savepoint (optional last fields; absent: ""): the
     * location restore_checkpoint's files are read from instead of the
     * checkpoint storage, and the job name they are stored under (the
     * savepoint's job; "": job_id). Later checkpoints go to the storage. */
    char restore_uri[EDDY_STORAGE_URI_MAX];
    char restore_job[EDDY_NAME_MAX];
    /* A fluid migration's last deploy (RESCALE; optional last field,
     * absent: none): tasks renumbered before the placement applies, so an
     * instance that took over another's key groups on another worker takes
     * its number too (protocol 9). Borrowed when sending; owned when
     * decoded. */
    uint32_t n_renames;
    eddy_task_rename_t *renames;
} eddy_deploy_t;

typedef struct eddy_msg {
    eddy_msg_type_t type;
    /* Fencing: every message ends with a leader epoch. A coordinator sends
     * its own (the create revision of its leader key in etcd; 0 without an
     * election), a worker the highest it has seen. A worker ignores commands
     * of a lower epoch than it has seen; a coordinator ignores the epoch of
     * every message it receives (only its lease says whether it leads:
     * docs/security.md). Absent (an older peer): 0. */
    uint64_t leader_epoch;
    union {
        struct {
            char name[EDDY_NAME_MAX];
            char data_endpoint[EDDY_ENDPOINT_MAX];
            int64_t pid;
            char host[EDDY_NAME_MAX];
            uint32_t protocol_version;
            uint32_t cores;            /* online CPUs of the worker's machine; 0 unknown */
        } reg;
        struct {
            uint32_t worker_id;
            uint32_t heartbeat_ms;
            char error[EDDY_ERROR_MAX]; /* non-empty: registration refused */
            /* Not the leader (a standby coordinator): register with the
             * leader at `leader` ("" when none is known yet) instead. */
            bool not_leader;
            char leader[EDDY_ENDPOINT_MAX];
            /* The refusal is final (a duplicate worker identity): the
             * worker exits saying why instead of registering again. */
            bool fatal;
            /* The secret this registration's LIVENESS messages carry
             * (optional last field; absent or 0: the coordinator takes
             * none). Random per registration, sent only to the worker. */
            uint64_t liveness_token;
        } registered;
        struct {
            uint32_t worker_id;
            uint32_t n_tasks;
            eddy_task_metrics_t *tasks;
        } heartbeat;
        eddy_deploy_t deploy;
        struct {
            uint32_t job, epoch;
            uint64_t bytes_loaded, groups_loaded;
            char error[EDDY_ERROR_MAX];
            /* optional (absent: 0): of those, from the worker's local copies */
            uint64_t groups_local, bytes_local;
        } deployed;
        struct {
            uint32_t job, epoch;
        } start;
        struct {
            uint32_t job, epoch;
            uint64_t checkpoint;
            bool pause_after;              /* sources stop after the barrier (rescale) */
            /* A rescale's migration snapshot: only the key groups of this stage
             * that change owner at the new parallelism are written, without
             * fsync; it is not a recovery point. EDDY_NO_STAGE: a checkpoint. */
            uint32_t migrate_stage;
            uint32_t migrate_parallelism; /* 0: no group moves (a fluid pause) */
            /* A migration (a rebalance: same parallelism, new placement):
             * the instances of migrate_stage that change worker write every
             * key group they own. Borrowed when sending; owned (heap,
             * eddy_msg_clear frees it) when decoded. A TRIGGER without the
             * field (an older peer's) decodes as none. */
            uint32_t *moving;
            uint32_t n_moving;
            /* A savepoint (optional last field; absent or "": a checkpoint):
             * every task writes all its key groups (no references to
             * earlier checkpoints, no manifest) under this location instead
             * of the checkpoint storage (docs/savepoints.md). */
            char savepoint_uri[EDDY_STORAGE_URI_MAX];
        } trigger;
        struct {
            uint32_t job, epoch;
            uint64_t checkpoint;
            uint32_t stage, instance;
            int64_t position;              /* sources: position at the barrier, else -1 */
            uint64_t state_keys, bytes_written, files_written;
            char error[EDDY_ERROR_MAX];
            /* sources with write_state: their state at the barrier (owned,
             * heap; eddy_msg_clear frees it), else NULL/0 */
            char *source_state;
            uint32_t source_state_len;
            /* The task could not take this checkpoint because an input of
             * it had ended (error says which): a checkpoint with an ended
             * input cannot complete, so this is not a failure to count. */
            bool declined;
            /* The inputs the task counted as ended when it took the
             * checkpoint (their upstream tasks' end of stream came before
             * the barrier; protocol 9, optional last field, absent: none).
             * The coordinator accepts the ACK only if each of them reported
             * TASK_DONE in this epoch. Owned (heap) like source_state. */
            uint32_t n_ended;
            eddy_task_ref_t *ended;
            /* What the checkpoint cost the task (protocol 9, unreleased,
             * optional last fields, absent: 0), microseconds: its thread's time at the
             * barrier (the synchronous part), the snapshot writer's from
             * the barrier's end to this ACK (the asynchronous part), and
             * from its first input's barrier to its last (alignment). */
            uint64_t sync_us, async_us, align_us;
            /* Incremental checkpoints (optional last field, absent: 0):
             * the key groups the task referred to in earlier checkpoints'
             * objects instead of writing them (files_written counts what
             * it wrote, its manifest included). */
            uint64_t files_referenced;
        } ack;
        struct {
            uint32_t job;
            uint64_t checkpoint;
        } complete;
        struct {
            uint32_t job, epoch, stage, instance;
        } task_done;
        struct {
            uint32_t job, epoch, stage, instance;
            char error[EDDY_ERROR_MAX];
        } task_failed;
        struct {
            uint32_t job;
            uint32_t reason;               /* eddy_release_reason_t */
        } release;
        struct {
            char verb[EDDY_NAME_MAX];
            uint32_t argc;
            char **argv;
        } request;
        struct {
            int64_t status;                /* 0 ok, else an error (body says why) */
            char *body;
        } reply;
        struct {
            char hash[EDDY_PLUGIN_HASH_MAX]; /* content hash (plan/plugin.h) */
            char *data;                      /* the shared library; NULL/0: a fetch */
            uint32_t len;
            char error[EDDY_ERROR_MAX];      /* coordinator -> worker: cannot serve it */
        } plugin;
        struct {
            char reason[EDDY_ERROR_MAX];     /* why it stops, for the coordinator's log */
        } leave;
        /* Sent every heartbeat interval by the worker's liveness thread on
         * a connection of its own: it counts for worker_id only with the
         * token of that worker's current registration. */
        struct {
            uint32_t worker_id;
            uint64_t token;
            uint64_t loop_silent_ms;         /* since the worker's loop last turned */
        } liveness;
        struct {
            uint32_t job, epoch, stage;      /* stage: the one whose groups move */
            uint64_t version;                /* routing version after the step */
            uint32_t to;                     /* the groups' new owner */
            uint32_t n_kgs;
            uint32_t *kgs;                   /* owned when decoded (eddy_msg_clear) */
        } route_step;
        struct {
            uint32_t job, epoch, stage, instance;
            uint64_t version;
            uint64_t groups, bytes;          /* installed by this step */
            /* optional (0: unknown, an older worker): the copy's time, from
             * the old owner starting to serialise the step to the last
             * group installed here (wall clocks of both workers) */
            uint64_t transfer_us;
        } step_done;
    } u;
} eddy_msg_t;

/* Returns a malloc'd buffer the caller frees. */
char *eddy_msg_encode(const eddy_msg_t *msg, size_t *len);
/* Fills msg (which the caller later eddy_msg_clear()s) or returns -1 with err. */
int eddy_msg_decode(const void *data, size_t len, eddy_msg_t *msg, eddy_err_t *err);
/* Reads only the head of an encoded message, allocating nothing: its type
 * (0 when the bytes do not start like a message) and, for a HEARTBEAT, how
 * many task entries its array announces (UINT32_MAX when that cannot be
 * read; 0 for other types). A receiver checks its caps with this before
 * eddy_msg_decode, which allocates for every entry; the decoder still
 * checks everything. */
eddy_msg_type_t eddy_msg_peek(const void *data, size_t len, uint32_t *n_tasks);
/* Frees what a decoded (or hand-built, heap-backed) message owns. */
void eddy_msg_clear(eddy_msg_t *msg);
/* Checks a decoded DEPLOY against the job graph the worker built from it
 * (graph_stages stages, graph_max_parallelism key groups): max_parallelism
 * in 1..EDDY_MAX_PARALLELISM and equal to the graph's, one placement per
 * stage, every stage's parallelism in 1..max_parallelism, every placed
 * worker id in the DEPLOY's worker list. The decoder checks only the wire
 * shape, so a worker must call this before acting on a DEPLOY. */
int eddy_deploy_check(const eddy_deploy_t *d, uint32_t graph_stages,
                      uint32_t graph_max_parallelism, eddy_err_t *err);
const char *eddy_msg_type_name(eddy_msg_type_t type);
const char *eddy_release_reason_name(uint32_t reason);

/* Helpers for the variable parts. */
char **eddy_strv_dup(uint32_t argc, char *const *argv);
void eddy_strv_free(uint32_t argc, char **argv);

#endif
