/* operator.h - the operator API jobs are written against.
 *
 * An operator instance is created by open() with its context, receives
 * records through process(), and at end of input gets finish(), where it
 * may still emit (a batch-style aggregate emits its results there). It
 * emits through the collector it is handed; the runtime chains operators of
 * one stage by direct calls and routes the last one's output to the next
 * stage. Built-in keyed operators find their per-key values in
 * ctx->keyed_state (state/keyed_state.h, not part of the API), already
 * restricted to (and restored for) the key groups the instance owns; a
 * job's own keyed operators declare named state (api/state.h) in a process
 * function (api/process.h).
 * Errors: return -1 with err filled; the task fails and the job recovers.
 *
 * Two-phase commit (transactional sinks, like Flink's TwoPhaseCommitSink /
 * FileSink): an operator with prepare() gets it at every aligned barrier,
 * before its task ACKs the checkpoint; it must make everything received
 * since the previous prepare durable but invisible, tagged with the
 * checkpoint id (pre-commit). commit(n) comes when checkpoint n completed
 * (the coordinator's COMPLETE): publish everything prepared with an id <= n.
 * At end of input the task calls prepare(EDDY_FINAL_CHECKPOINT) after
 * finish(); the coordinator sends COMPLETE(EDDY_FINAL_CHECKPOINT) once every
 * task of the job is done. open() gets ctx->restored_checkpoint: what was
 * prepared with an id <= it belongs to a completed checkpoint (publish it,
 * its COMPLETE may have been lost), anything later will be replayed
 * (discard it).
 *
 * prepare() and commit() get a sync list (state/sync_list.h): rather than
 * fsync on the worker loop they flush, rename and add the files and
 * directories to make durable (or a call that may block, such as waiting
 * for a database's PREPARE TRANSACTION: eddy_sync_list_add_call); the
 * runtime fsyncs them (and runs the calls) on its snapshot writer thread and acknowledges the checkpoint (or reports the task done,
 * or sends the job's final ACK) only after that succeeded. With a NULL list
 * the operator makes its work durable itself before returning.
 *
 * abort() (may be NULL) comes before close() when the job ends for good
 * without finishing: cancelled (eddy cancel) or failed (too many restarts).
 * No attempt follows that would resolve what was prepared, so a
 * transactional sink rolls back everything it prepared and was not told to
 * commit, before abort() returns (bounded: it must not hang the worker).
 * A close() without abort() is a restore (or a finished job): what was
 * prepared stays for the next attempt's open() to resolve.
 *
 * Event time (Flink's semantics): records carry a timestamp (ms) from their
 * source's timestamp assigner; watermarks travel in band behind the records
 * before them. A task's watermark is the minimum over its live input
 * channels (idle and finished ones excluded), never decreasing; whenever it
 * advances the runtime calls watermark(wm) on each operator of the chain in
 * order (an operator fires its timers/windows there, emitting downstream
 * first) and then forwards wm to every output channel. At end of a bounded
 * input the watermark becomes EDDY_WATERMARK_MAX before finish(). A record
 * is late for an operator when its timestamp <= the last watermark it saw.
 * tick(now_ms) is processing time: called about every
 * EDDY_TICK_INTERVAL_MS with the wall clock (epoch ms), for processing-time
 * timers and windows.
 *
 * Late records (Flink's side output for late data): an operator that judged
 * a record too late (a window with late = "emit", a process function
 * calling eddy_process_late) sends it on unchanged but with kind EDDY_LATE.
 * Such a record is not data for anything after it: the runtime hands it
 * past every operator whose ops do not set sees_late, unchanged, to the
 * next operator of the chain or, at the chain's end, to the task's outputs
 * (a sink's task has none, so a sink drops it). So windows, aggregates,
 * process functions and user functions downstream never see it and need no
 * check of their own; only an operator that sets sees_late (the built-in
 * late_records step, eddy_late_records in stream.h) gets it in process().
 *
 * Keyed operators whose state does not fit the per-key value of
 * ctx->keyed_state (window contents, timers, join buffers) keep it in their
 * own structures partitioned by key group and implement write_group /
 * read_group / drop_group: the runtime snapshots, restores and moves each
 * key group's bytes together with the keyed state of that group, so the
 * operator's state is checkpointed, rescaled and restored like the rest.
 *
 * Sources (eddy_source_ops_t): position() is one int64 a checkpoint keeps
 * for each source instance and hands back to open() on a restore. A source
 * whose progress is more than that (a directory source: the files read and
 * the offset in the current one; a Redis source: the last id per stream)
 * also implements write_state: at every checkpoint barrier, right where
 * position() is taken, it serialises its progress into at most
 * EDDY_SOURCE_STATE_MAX bytes (a larger state fails the task with a clear
 * error). The bytes travel in the task's ACK to the coordinator, are kept in
 * the checkpoint's metadata, and come back on a restore in
 * ctx->source_state for open() (NULL/0: a fresh start), instance i getting
 * what instance i wrote; open() must reject malformed bytes with a clear
 * error. A source's parallelism never changes while its state lives (only
 * keyed operators rescale; a checkpoint whose source instance count differs
 * from the job's is not used), so no redistribution is needed. commit(n)
 * is called when checkpoint n completed (the coordinator's COMPLETE, and
 * EDDY_FINAL_CHECKPOINT when the whole job is done): a source that must
 * acknowledge upstream (Redis XACK, a queue's offset commit) acknowledges
 * there only what checkpoints <= n covered, so a restore replays the rest. */
#ifndef EDDY_API_OPERATOR_H
#define EDDY_API_OPERATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/state.h"
#include "common/err.h"
#include "net/op_report.h"
#include "net/record.h"
#include "state/keygroup.h"
#include "state/sync_list.h"

/* eddy's own per-key values of built-in keyed operators (ctx->keyed_state):
 * opaque here, a job's operators keep named state (api/state.h) instead. */
typedef struct eddy_keyed_state eddy_keyed_state_t;

typedef struct eddy_collector eddy_collector_t;
struct eddy_collector {
    void (*emit)(eddy_collector_t *self, const eddy_record_t *rec);
};

static inline void eddy_emit(eddy_collector_t *out, const eddy_record_t *rec)
{
    out->emit(out, rec);
}

/* Returns the key's length and points *key into rec->data. */
typedef uint32_t (*eddy_key_fn)(const eddy_record_t *rec, const char **key);

typedef struct eddy_op_context {
    const char *job_id;
    const char *stage_name;
    uint32_t stage;
    uint32_t instance;
    uint32_t parallelism;
    uint32_t max_parallelism;
    eddy_kg_range_t key_groups;      /* keyed stages only */
    eddy_keyed_state_t *keyed_state; /* keyed stages only, owned by the task */
    eddy_key_fn key_fn;              /* keyed stages only */
    const void *config;              /* the operator's own config from the job graph */
    const void *job_config;          /* the job's parsed flags */
    uint64_t restored_checkpoint;    /* checkpoint the task starts from, 0 = fresh */
    /* Sources: the bytes write_state gave at the restored checkpoint
     * (NULL/0: fresh). Borrowed: valid only during open(). */
    const void *source_state;
    size_t source_state_len;
    /* Counters the operator bumps; the task exports them as metrics. */
    uint64_t *late_records;          /* eddy_late_records_total */
    /* Two-input keyed stages (eddy_process2, api/stream.h): the second
     * input's key selector (key_fn is the first's), and where the task
     * keeps which input (0 or 1) the record its first operator is
     * processing came from. NULL in every other stage. */
    eddy_key_fn second_key_fn;
    const uint32_t *input;
    /* Sources: entries upstream not read yet (a queue's lag), -1 while
     * unknown; the source keeps it current, the task exports it as the
     * gauge eddy_source_lag. */
    int64_t *source_lag;
    /* The job's attempt (the DEPLOY's epoch) the instance was opened in:
     * raised by every deploy, never repeated, so a transactional sink can
     * tell its own pre-commits from those of an earlier attempt. */
    uint32_t epoch;
    /* Input the operator could not parse and dropped (or wrote to a
     * rejects file): the counter eddy_rejected_records_total. */
    uint64_t *rejected_records;
    /* Sources: where the source names a descriptor that becomes readable
     * when poll() may have records again (a connected socket), -1 (the
     * default) for none. While poll() returns EDDY_SOURCE_IDLE the task
     * waits for it in the worker's poll set, so a record is read as soon as
     * it arrives; a source without one is polled again after a short rest
     * (EDDY_SOURCE_REST_MS). The source may set it at any time (once
     * connected) and must keep it open while it is set. */
    int *wait_fd;
    /* Figures the instance shows about itself (net/op_report.h): a line in
     * `eddy status` and /api/v1/jobs, gauges at /metrics. Owned by the
     * task, empty at open; the operator overwrites it whenever its figures
     * change (the next heartbeat carries them). Shared by the operators of
     * one chained task: the pipeline chain is the only built-in user. */
    eddy_op_report_t *report;
} eddy_op_context_t;

/* Watermarks: no event time yet / end of input (every window fires). */
#define EDDY_WATERMARK_MIN INT64_MIN
#define EDDY_WATERMARK_MAX INT64_MAX
#define EDDY_TICK_INTERVAL_MS 50

/* The id prepare()/commit() get for what is left at end of input. */
#define EDDY_FINAL_CHECKPOINT UINT64_MAX

typedef struct eddy_operator_ops {
    const char *kind;
    /* Keyed operators: size of their per-key state value, given their config. */
    size_t (*state_value_size)(const void *config);
    void *(*open)(const eddy_op_context_t *ctx, eddy_err_t *err);
    int (*process)(void *self, const eddy_record_t *rec, eddy_collector_t *out, eddy_err_t *err);
    int (*finish)(void *self, eddy_collector_t *out, eddy_err_t *err); /* may be NULL */
    void (*close)(void *self);                                         /* may be NULL */
    /* Two-phase commit (may be NULL, see above). prepare errors make the
     * task's ACK carry the error, so the checkpoint is abandoned. */
    int (*prepare)(void *self, uint64_t checkpoint, eddy_sync_list_t *sync, eddy_err_t *err);
    void (*commit)(void *self, uint64_t checkpoint, eddy_sync_list_t *sync);
    /* Event and processing time (may be NULL, see above). */
    int (*watermark)(void *self, int64_t watermark, eddy_collector_t *out, eddy_err_t *err);
    int (*tick)(void *self, int64_t now_ms, eddy_collector_t *out, eddy_err_t *err);
    /* Keyed operators with state of their own, per key group (may be NULL).
     * write_group serialises key group kg into a malloc'd buffer (an empty
     * group may give NULL/0); read_group replaces group kg with such bytes
     * (0 bytes: empty), rejecting malformed input with a clear error;
     * drop_group forgets group kg (it moved to another instance). */
    int (*write_group)(void *self, uint32_t kg, char **out, size_t *len, eddy_err_t *err);
    int (*read_group)(void *self, uint32_t kg, const void *data, size_t len, eddy_err_t *err);
    void (*drop_group)(void *self, uint32_t kg);
    /* Operators that hold back output (a pre-aggregation) emit it here:
     * called before a barrier goes downstream (may be NULL). In a sink's
     * task (a stage with no outputs) also whenever the task has nothing
     * more to do now, so a sink writing to a pipe or socket flushes per
     * batch, not per checkpoint. */
    int (*flush)(void *self, eddy_collector_t *out, eddy_err_t *err);
    /* Local-global aggregation (Flink SQL's two-phase aggregation): a keyed
     * operator whose records can be combined before the shuffle returns the
     * ops of that combiner for its config (NULL: not exact here). eddy then
     * chains the combiner, with the same config and the keyed step's key
     * selector as ctx->key_fn, at the end of the stage feeding the keyed
     * step (when that stage feeds nothing else); it sends EDDY_PARTIAL
     * records, flushed before every barrier and watermark and at end of
     * input, so it holds no state across a checkpoint. A partial's data is
     * the frame of net/partial.h (key, accumulator bytes); it is routed by
     * that key, so the keyed step reads its key from the frame too. */
    const struct eddy_operator_ops *(*combiner)(const void *config);
    /* process() also gets EDDY_LATE records (see above); false: they pass
     * this operator by unseen. */
    bool sees_late;
    /* The job ended for good (cancelled or failed; see above; may be NULL). */
    void (*abort)(void *self);
    /* Asynchronous snapshots of the state of write_group (all three, or
     * none: then write_group runs at the barrier). snapshot_view freezes
     * groups[0..n) in time independent of the state's size and returns a
     * view (NULL with err on failure); view_write_group(view, kg) then gives,
     * on another thread and while the operator goes on, the bytes
     * write_group gave for kg when the view was taken, once per group;
     * view_release frees the view (any thread; the view may outlive the
     * operator, whose close must leave it readable). state/group_freeze.h
     * does this for state serialised per group. */
    void *(*snapshot_view)(void *self, const uint32_t *groups, uint32_t n, eddy_err_t *err);
    int (*view_write_group)(void *view, uint32_t kg, char **out, size_t *len, eddy_err_t *err);
    void (*view_release)(void *view);
    /* Named state (api/state.h) the operator declares for its config: the
     * count, *descs pointing at the declarations (may be NULL: none). A
     * savepoint records their names and schema versions, and a job started
     * from one is checked against them before it starts. */
    uint32_t (*states)(const void *config, const eddy_state_desc_t **descs);
} eddy_operator_ops_t;

#define EDDY_SOURCE_IDLE 2
/* How long a source without a wait_fd rests after EDDY_SOURCE_IDLE. */
#define EDDY_SOURCE_REST_MS 5

/* A source emits records from outside. Positions let a checkpoint resume it. */
typedef struct eddy_source_ops {
    const char *kind;
    bool replayable;
    /* start_position: -1 from the beginning, else a position() it returned. */
    void *(*open)(const eddy_op_context_t *ctx, int64_t start_position, eddy_err_t *err);
    /* Emits at most max records. Returns 1 while more may follow, 0 at end of
     * input, EDDY_SOURCE_IDLE when nothing is available now (the task then
     * waits for ctx->wait_fd, or rests EDDY_SOURCE_REST_MS), -1 on error. Must never
     * block: no waiting, no connecting or resolving on the caller's thread. */
    int (*poll)(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err);
    int64_t (*position)(void *self); /* position of the next record */
    void (*close)(void *self);
    /* Progress as bytes (may be NULL, see above): a malloc'd buffer of at
     * most EDDY_SOURCE_STATE_MAX bytes in *out (NULL/0 allowed), the
     * caller frees it. -1 with err fails the task. */
    int (*write_state)(void *self, char **out, size_t *len, eddy_err_t *err);
    /* Checkpoint `checkpoint` completed (may be NULL, see above). */
    void (*commit)(void *self, uint64_t checkpoint);
} eddy_source_ops_t;

#endif
