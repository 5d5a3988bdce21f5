/* task.h - one running instance of a stage: its operator chain, input
 * channels (with barrier alignment), output channels (batching, credits)
 * and metrics.
 *
 * A task never blocks. The worker's loop asks whether it is runnable and
 * then runs one step: a source emits up to EDDY_SOURCE_STEP_RECORDS records,
 * any other task consumes records of one queued input message. A step also
 * ends after EDDY_TASK_SLICE_NS or when an output piles up batches, so the
 * worker serves control messages and heartbeats between slices whatever the
 * operators cost (a partly read batch goes on at the next step). Only a
 * single record that takes longer than the heartbeat timeout can still make
 * a busy worker look dead: that is the operator's to avoid.
 * Output that exceeds a channel's credit or its time-bounded in-flight
 * budget (runtime/channel_flow.h) stays queued in that channel and makes the
 * task not runnable until credit returns, which is how backpressure reaches
 * the sources. */
#ifndef EDDY_RUNTIME_TASK_H
#define EDDY_RUNTIME_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "common/err.h"
#include "net/dataplane.h"
#include "net/proto.h"
#include "state/keyed_state.h"
#include "state/snapshot_store.h"
#include "plan/graph.h"
#include "state/snapshot_writer.h"

#define EDDY_BATCH_BYTES (32u * 1024u)
#define EDDY_CHANNEL_CREDITS 16u
#define EDDY_SOURCE_STEP_RECORDS 1024u
/* Longest a step runs before it yields to the worker's loop (checked between
 * records, so one costly record may overrun it). */
#define EDDY_TASK_SLICE_NS (5ull * 1000u * 1000u)

typedef struct eddy_task eddy_task_t;

/* What a task needs from the process hosting it. */
typedef struct eddy_task_env {
    void *host;
    /* Sends an encoded data-plane message to another worker; takes ownership of data. */
    int (*send_remote)(void *host, uint32_t worker_id, char *data, size_t len);
    /* Delivers an encoded data-plane message to a task in this process; takes ownership. */
    void (*send_local)(void *host, char *data, size_t len);
    /* Sends a control message to the coordinator. */
    void (*notify)(void *host, const eddy_msg_t *msg);
    /* Makes a checkpoint unit durable, then sends its ACK; takes ownership. */
    void (*submit_snapshot)(void *host, eddy_snapshot_unit_t *unit);
    eddy_snapshot_store_t *store;
    /* A restore from a savepoint (DEPLOY restore_uri): its store and the job
     * name its files are under; NULL/"": restores read store under the
     * task's job id. Owned by the worker's job. */
    eddy_snapshot_store_t *restore_store;
    char restore_job[EDDY_NAME_MAX];
    uint64_t restore_savepoint; /* the savepoint's checkpoint id */
    /* A savepoint in progress (TRIGGER savepoint_uri), 0: none. At its
     * barrier every task writes all its key groups, with no references to
     * earlier checkpoints and no manifest, under savepoint_root. */
    uint64_t savepoint_checkpoint;
    char savepoint_root[EDDY_STORAGE_URI_MAX];
    uint32_t self_worker_id;
    /* A rescale's migration snapshot in progress (set from TRIGGER), 0: none.
     * Its barrier makes the rescaled stage write only the key groups that
     * change owner at migrate_parallelism, without fsync, and the other
     * stages write nothing; migrate_parallelism 0 (a fluid rescale's or
     * migration's pause, coordinator/fluid.c): no stage writes any. */
    uint64_t migration_checkpoint;
    uint32_t migrate_stage, migrate_parallelism;
    /* A migration (a rebalance: the parallelism stays, instances change
     * worker): the instances of migrate_stage that move write all their key
     * groups. Owned by the worker's job; NULL/0 for a rescale. */
    uint32_t *migrate_moving;
    uint32_t n_migrate_moving;
    /* The job's eddy_guarantee_t (from DEPLOY): at-least-once leaves
     * barriers unaligned (task.c). */
    uint32_t guarantee;
    /* Checkpoints snapshot keyed state through a copy-on-write view that the
     * snapshot writer serialises (true, the default), or serialise it all at
     * the barrier (false: EDDY_SNAPSHOT_MODE=sync, read by the worker).
     * Migration snapshots are always synchronous. */
    bool snapshot_async;
    /* With snapshot_async, chained operators' own state (windows, timers)
     * is still serialised at the barrier even where the operator has
     * snapshot_view (EDDY_SNAPSHOT_MODE=keyed: the behaviour before
     * operators had views, kept for bench/checkpoint_windows.sh). */
    bool snapshot_ops_sync;
    /* --checkpoint-full-every (DEPLOY): every N-th checkpoint of a keyed
     * task is full, the others write only the key groups changed since its
     * last completed checkpoint (runtime/task_chain.c); 0 or 1: always full. */
    uint32_t checkpoint_full_every;
    /* Test hook (EDDY_TEST_FLUID_HOLD_MS, read by the worker): an old owner
     * holds each fluid step's state back this long once it could send it,
     * so tests can act in the middle of a step. 0: off. */
    uint32_t fluid_hold_ms;
    /* Test hook (EDDY_TEST_FLUID_CORRUPT=1): an old owner flips a byte of
     * the first non-empty state chunk it sends, after its checksum. */
    bool fluid_corrupt;
} eddy_task_env_t;

/* Where each instance of each stage runs (from DEPLOY). */
typedef struct eddy_placement_view {
    uint32_t n_stages;
    const eddy_stage_placement_t *stages;
} eddy_placement_view_t;

typedef struct eddy_task_config {
    uint32_t job, epoch;
    const char *job_id;
    const eddy_job_graph_t *graph;
    uint32_t stage, instance;
    eddy_placement_view_t placement;
    int64_t start_position;   /* sources: -1 or a checkpointed position */
    const void *source_state; /* sources: write_state's bytes at it (NULL/0: none), */
    size_t source_state_len;  /* borrowed for eddy_task_new only */
    uint64_t restore_checkpoint; /* keyed: groups come from it (restore_groups) */
    double start_time_s;      /* sources: seconds since the job started (rate schedules) */
    /* The restored checkpoint recorded the task as finished: it restores
     * nothing (restore_checkpoint is ignored), its source (if any) is not
     * opened, and once started it sends end of stream downstream and
     * reports TASK_DONE. */
    bool start_finished;
} eddy_task_config_t;

eddy_task_t *eddy_task_new(eddy_task_env_t *env, const eddy_task_config_t *cfg, eddy_err_t *err);
void eddy_task_destroy(eddy_task_t **self_p);
/* The job ended for good (cancelled or failed): calls each operator's
 * abort() (api/operator.h), before the task is destroyed. */
void eddy_task_abort(eddy_task_t *self);

/* Re-wires the task for a new epoch and placement (rescale): rebuilds input
 * and output channels; keyed tasks drop key groups they no longer own. The
 * caller then loads the newly owned groups with eddy_task_restore_groups. */
/* A fluid migration's end (DEPLOY renames): the task becomes instance
 * `instance` of its stage, keeping its state, before eddy_task_rewire
 * wires it as that instance. Its operators keep the context they were
 * opened with (as they keep their parallelism across a rescale); its next
 * checkpoint writes every group it holds (no incremental reference to
 * what it wrote under its old number). */
void eddy_task_renumber(eddy_task_t *self, uint32_t instance);
int eddy_task_rewire(eddy_task_t *self, uint32_t epoch, eddy_placement_view_t placement,
                     eddy_err_t *err);
/* Loads the key groups in range that are not yet held, from checkpoint. */
int eddy_task_restore_groups(eddy_task_t *self, uint64_t checkpoint, uint64_t *bytes,
                             uint64_t *groups, eddy_err_t *err);

/* Fluid migration, a sender of a keyed exchange to dst_stage: key groups
 * kgs[0..n) go to instance `to` from routing version `version` on. A
 * HANDOFF marker goes to each old owner behind every record sent to it, and
 * one to `to` ahead of the groups' first record there (runtime/task_migrate.c).
 * -1 (err, nothing changed) when the task has no keyed output to dst_stage
 * or the routing table refuses the step. */
int eddy_task_route_step(eddy_task_t *self, uint32_t dst_stage, uint64_t version,
                         const uint32_t *kgs, uint32_t n, uint32_t to, eddy_err_t *err);
/* Fluid migration figures: key groups sent away and received whole, and
 * their bytes; whether a step is in flight here (groups incoming, or given
 * away once every input's HANDOFF arrived). */
typedef struct eddy_task_migration_stats {
    uint64_t groups_sent, groups_received, bytes_sent, bytes_received;
    uint32_t groups_incoming;
    size_t held_bytes;
    bool in_flight;
} eddy_task_migration_stats_t;
void eddy_task_migration_stats(const eddy_task_t *self, eddy_task_migration_stats_t *out);
/* Whether the task sends to stage by key group (a sender of its fluid steps). */
bool eddy_task_routes_to(const eddy_task_t *self, uint32_t stage);
/* Whether this keyed task holds key group kg's state. */
bool eddy_task_holds_group(const eddy_task_t *self, uint32_t kg);

uint32_t eddy_task_stage(const eddy_task_t *self);
uint32_t eddy_task_instance(const eddy_task_t *self);
bool eddy_task_is_source(const eddy_task_t *self);
bool eddy_task_finished(const eddy_task_t *self);
bool eddy_task_failed(const eddy_task_t *self);

/* Checkpoint `checkpoint` completed (COMPLETE, or EDDY_FINAL_CHECKPOINT when
 * the whole job is done): two-phase-commit operators publish what they
 * prepared up to it, a source with commit() acknowledges upstream. Also for finished tasks. The fsyncs they hand over
 * are added to sync (NULL: they fsync themselves). */
void eddy_task_commit(eddy_task_t *self, uint64_t checkpoint, eddy_sync_list_t *sync);

/* Sources only. */
void eddy_task_set_running(eddy_task_t *self, bool running);
void eddy_task_trigger(eddy_task_t *self, uint64_t checkpoint, bool pause_after);

/* A decoded data-plane message for this task (DATA, BARRIER, EOS), queued
 * in its input channel. Takes ownership of msg (moved), and of the bytes it
 * points into: zmsg (moved) when not NULL, else heap (freed later).
 * -1 (message dropped, err "protocol violation: ...") when the channel is
 * not an input of this task or already delivered its end of stream. */
int eddy_task_deliver(eddy_task_t *self, eddy_data_msg_t *msg, zmq_msg_t *zmsg, char *heap,
                      eddy_err_t *err);
/* A CREDIT for one of this task's output channels. */
void eddy_task_credit(eddy_task_t *self, const eddy_channel_id_t *ch, uint32_t batches);

bool eddy_task_runnable(eddy_task_t *self, uint64_t now_ns);
/* Runs one step; -1 when the task failed (err says why; it is then finished). */
int eddy_task_step(eddy_task_t *self, uint64_t now_ns, eddy_err_t *err);
/* Processing time: at most every EDDY_TICK_INTERVAL_MS, sources emit their
 * periodic watermark (or idle status) and operators with tick() get the
 * wall clock. A failure surfaces at the next step. */
void eddy_task_tick(eddy_task_t *self, uint64_t now_ns);
/* Flushes partially filled output batches and returns owed credits
 * upstream. A step that leaves its task with nothing more to do does this
 * itself (and a sink's task flushes its operators' buffers), so records go
 * out as soon as the task runs dry, not after a fixed interval. */
void eddy_task_flush(eddy_task_t *self);
/* When (monotonic ns) the task may have work again without any message
 * arriving: a source's rest or rate allowance, its next tick. UINT64_MAX:
 * only a message (or its wait descriptor) can wake it. */
uint64_t eddy_task_next_wake(eddy_task_t *self, uint64_t now_ns);
/* The descriptor a resting source waits on (poll it for reading), or -1;
 * eddy_task_fd_ready when it was readable (or failed). */
int eddy_task_wait_fd(const eddy_task_t *self);
void eddy_task_fd_ready(eddy_task_t *self);
/* Accounts the time since the last call as idle or blocked (not busy). */
void eddy_task_account(eddy_task_t *self, uint64_t now_ns);
/* Ends the task's key load window when it is long enough (a second, and a
 * thousand records or ten seconds): its keyed outputs' busiest key groups
 * become what eddy_task_metrics reports, until the next window ends. Called
 * before each heartbeat; a cheap no-op otherwise. */
void eddy_task_roll_key_loads(eddy_task_t *self, uint64_t now_ns);
void eddy_task_metrics(const eddy_task_t *self, eddy_task_metrics_t *out);

#endif
