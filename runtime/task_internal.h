/* task_internal.h - the task's state, shared by the files that run it (not
 * a public API; runtime/task.h is).
 *
 * One job per file:
 *   task.c          lifecycle, the operator chain and the record loop
 *                   (scheduling, slices, sources, watermarks, end of input)
 *   task_input.c    input channels: queues, delivery, credit return
 *   task_output.c   output channels: batching, credits, pending queues,
 *                   routing of records and control messages
 *   task_barrier.c  barrier alignment and checkpoints (snapshot units, ACKs)
 *   task_chain.c    incremental checkpoints: groups written or referred to,
 *                   the manifest
 *   task_migrate.c  key-group state in and out of a task: serialisation,
 *                   rewire for a new placement, loading moved groups
 *   task_metrics.c  busy/idle accounting, key loads, metrics */
#ifndef EDDY_RUNTIME_TASK_INTERNAL_H
#define EDDY_RUNTIME_TASK_INTERNAL_H

#include "runtime/task.h"

#include "state/route_table.h"
#include "state/snapshot_chain.h"

#include "common/histogram.h"
#include "runtime/channel_flow.h"
#include "runtime/watermark_valve.h"


typedef struct in_entry {
    struct in_entry *next;
    eddy_data_msg_t msg;
    zmq_msg_t zmsg;
    bool has_zmsg;
    char *heap;
} in_entry_t;

typedef struct input_channel {
    uint32_t src_stage;
    uint32_t input;        /* 0, or 1 for a two-input stage's second input */
    uint32_t src_instance;
    uint32_t src_worker;
    in_entry_t *head, *tail;
    uint32_t queued;
    bool eos;
    bool eos_received;     /* ended by an EOS message, not unused by the edge */
    uint64_t barrier;      /* checkpoint whose barrier blocks this channel, 0: none */
    uint32_t credit_owed;  /* batches consumed and not yet returned */
    uint64_t handoff;      /* fluid: version of the last HANDOFF giving groups away */
    bool hold_full;        /* fluid: stopped at a record the hold has no room for */
} input_channel_t;

/* Fluid migration, old owner: a step whose HANDOFF markers are arriving. */
typedef struct fluid_out_step {
    uint64_t version;
    uint32_t to, n;
    uint32_t *kgs;
} fluid_out_step_t;

/* Fluid migration, new owner: a step adopted here. Chunks may come before
 * the HANDOFF that names their step, so what was installed is kept by
 * version (named: the HANDOFF came and kgs are known). sent_us: the old
 * owner's start (from the chunks), done_us: the last install; their
 * difference is the copy's time, without the wait for markers. */
typedef struct fluid_in_step {
    uint64_t version;
    uint32_t n;
    uint32_t *kgs;
    bool named, reported;
    uint64_t bytes, load_ns;
    int64_t sent_us, done_us, first_us;
} fluid_in_step_t;

typedef struct out_entry {
    struct out_entry *next;
    char *data;
    size_t len;
    bool is_batch;
} out_entry_t;

typedef struct output_channel {
    eddy_channel_id_t id;
    uint32_t dst_worker;
    eddy_batch_writer_t writer;
    bool writer_open;
    uint32_t credits;
    eddy_channel_flow_t flow;   /* in-flight data bounded by time */
    out_entry_t *head, *tail;
    uint32_t pending_batches;   /* batches in head..tail */
} output_channel_t;

typedef struct output_group {
    uint32_t dst_stage;
    eddy_edge_t edge;
    eddy_key_fn key_fn;
    uint32_t parallelism;
    eddy_route_table_t routes; /* HASH: key group -> instance, versioned */
    uint64_t *kg_sent;       /* HASH: records per key group in the load window */
    uint32_t round_robin;
    output_channel_t *channels;
} output_group_t;

/* Fluid migration, new owner: a record of a key group whose state has not
 * arrived, copied, in arrival order (task_migrate.c). */
typedef struct held_record {
    struct held_record *next;
    uint32_t kg, input;
    int64_t ingest_us;
    eddy_record_t rec;   /* rec.data points at bytes */
    char bytes[];
} held_record_t;

/* Fluid migration, new owner: one key group's state arriving in chunks. */
typedef struct group_assembly {
    struct group_assembly *next;
    uint32_t kg;
    uint64_t version, total, got;
    char *buf;
} group_assembly_t;

typedef struct chain_link {
    eddy_collector_t base;
    eddy_task_t *task;
    uint32_t next_op;        /* index of the operator this collector feeds */
} chain_link_t;

struct eddy_task {
    eddy_task_env_t *env;
    uint32_t job, epoch;
    char job_id[EDDY_NAME_MAX];
    const eddy_job_graph_t *graph;
    const eddy_stage_def_t *def;
    uint32_t stage, instance, parallelism;
    uint64_t align_started_ns; /* the pending checkpoint's first barrier, 0: none */

    eddy_op_context_t ctx;
    void *ops[EDDY_MAX_CHAIN];
    chain_link_t links[EDDY_MAX_CHAIN + 1];
    eddy_keyed_state_t *state;
    uint8_t *held;           /* [max_parallelism] key groups present in state */
    /* Incremental checkpoints (task_chain.c): NULL when every checkpoint
     * is full. chain_holder[kg]: at the checkpoint being taken, the earlier
     * checkpoint a held group is referred to in, 0 when it is written. */
    eddy_snapshot_chain_t *chain;
    uint64_t *chain_holder;

    /* event time: the task's watermark (last one handed to the chain and
     * forwarded), the valve over the inputs, whether downstream was told
     * this task is idle, and operators' late records */
    int64_t watermark;
    eddy_wm_valve_t *valve;
    bool idle_out;
    bool time_ops;           /* some chained operator has watermark() or tick() */
    uint64_t late_records;
    uint64_t rejected_records;
    eddy_op_report_t report; /* the operators' own figures (ctx.report) */
    int64_t source_lag;   /* sources: set through ctx.source_lag, -1 unknown */
    uint64_t next_tick_ns;

    /* source */
    void *source;
    bool running, source_done;
    uint64_t source_idle_until_ns; /* nothing to read before then */
    uint64_t trigger_checkpoint;
    bool trigger_pause;
    double clock_offset_s;
    uint64_t created_ns, last_refill_ns;
    double tokens;
    double offered_rate;
    int64_t max_timestamp;   /* event time: the largest timestamp read */
    uint64_t last_wm_ns, last_record_ns;

    /* inputs: the first input's channels (one per upstream instance), then
     * a two-input stage's second input's; barriers align and the watermark
     * is the minimum across all of them */
    uint32_t n_inputs;
    input_channel_t *inputs;
    uint32_t next_input;
    uint32_t first_input_channels;  /* inputs[0..this) come from def->input */
    uint32_t current_input;         /* input of the batch being consumed (ctx.input) */

    /* outputs */
    uint32_t n_groups;
    output_group_t *groups;
    /* Key load of the keyed outputs: counted per key group at the
     * partitioner over a window, summarised when the window ends. */
    uint64_t load_window_start_ns;
    uint32_t n_key_loads;
    eddy_key_load_t key_loads[EDDY_KEY_LOADS_MAX];

    /* A failure inside the chain (an operator's process(), an output that
     * could not be queued) where no error can be returned: the step that
     * notices it fails the task. Per task, so it never leaks into another. */
    bool fault;
    eddy_err_t fault_err;

    bool finished, failed;
    bool start_finished; /* restored as finished: ends at its first step once running */
    uint64_t records_in, records_out;
    uint64_t busy_ns, idle_ns, blocked_ns, last_account_ns;

    /* Record latency: when the input now being processed was read by its
     * source (wall clock us, 0 unknown); output batches carry the oldest
     * such time of their records. */
    int64_t cur_ingest_us;
    eddy_histogram_t latency, event_lag;
    /* A source that has nothing to read now may name a descriptor that
     * becomes readable when it has (ctx.wait_fd): the task then waits on it
     * in the worker's poll set instead of resting for a fixed time. */
    int wait_fd;
    bool waiting_fd;

    /* Fluid migration (task_migrate.c). Old owner: the steps whose HANDOFF
     * markers are arriving, oldest first (several may be in flight: they
     * move disjoint groups, and each input delivers their markers in
     * version order; the oldest goes to its new owner once every live
     * input delivered its marker). New owner: groups adopted whose state
     * has not arrived (their records wait in the hold, and the watermark
     * waits with them), and the groups' chunks being put together. */
    uint32_t *peer_worker;       /* [parallelism]: the worker of each instance of this stage */
    fluid_out_step_t *outs;      /* [n_outs], oldest first */
    uint32_t n_outs, cap_outs;
    /* Giving a step away runs a time slice per loop turn (task_fluid_poll),
     * so this worker's other tasks and keys go on between groups: out_next
     * groups of outs[0] are given so far; the stamp and counters span the
     * slices. */
    uint32_t out_next;
    int64_t out_sent_us;
    uint64_t out_t0_ns, out_bytes0;
    uint64_t out_ready_ns;       /* test hook: not before then (0: not held) */
    bool corrupted;              /* test hook: a chunk was corrupted */
    uint8_t *incoming;           /* [max_parallelism] */
    uint32_t n_incoming;
    held_record_t *hold_head, *hold_tail;
    size_t hold_bytes;
    bool wm_held;
    int64_t wm_pending;
    group_assembly_t *assembling;
    /* New owner: the steps it adopts groups of (or got chunks of first),
     * each reported (STEP_DONE) once every one of its groups is installed;
     * kept until the next rewire, so a late HANDOFF of a reported step does
     * not report it again. */
    fluid_in_step_t *ins;
    uint32_t n_ins, cap_ins;
    uint64_t groups_sent, groups_received, state_bytes_sent, state_bytes_received;
};

/* The hold's bound: beyond it, a channel with a record for an incoming
 * group stops (and so returns no credit) until a group is installed. */
#define EDDY_HOLD_BYTES_MAX (8u * 1024u * 1024u)
/* Chunks of a key group's serialised state on the wire: the largest the
 * decoder takes, so a group of up to 1 MiB is one message, installed
 * straight from it without being put together (it was 256 KiB). */
#define EDDY_STATE_CHUNK_BYTES EDDY_STATE_CHUNK_MAX

/* task_chain.c */
int task_chain_open(eddy_task_t *t, eddy_err_t *err);
void task_chain_close(eddy_task_t *t);
/* At checkpoint's barrier (not a migration snapshot's): fills
 * chain_holder, and the unit's manifest once the unit exists. */
/* force_full: a savepoint, every held group written, none referred to. */
void task_chain_plan(eddy_task_t *t, uint64_t checkpoint, bool force_full, uint32_t *n_referenced);
/* Whether held group kg is written at the checkpoint being taken. */
bool task_chain_writes(const eddy_task_t *t, uint32_t kg);
int task_chain_manifest(eddy_task_t *t, eddy_snapshot_unit_t *u, eddy_err_t *err);

/* task.c */
void task_set_fault(eddy_task_t *t, const char *what);
int task_take_fault(eddy_task_t *t, eddy_err_t *err);
void task_advance_watermark(eddy_task_t *t, int64_t wm);

/* task_output.c */
void task_send_message(eddy_task_t *t, uint32_t worker, char *data, size_t len);
void task_flush_channel(eddy_task_t *t, output_channel_t *ch);
void task_route(eddy_task_t *t, const eddy_record_t *rec);
void task_broadcast_small(eddy_task_t *t, uint64_t barrier, bool eos);
void task_broadcast_watermark(eddy_task_t *t, int64_t wm, bool idle);
bool task_outputs_backlogged(const eddy_task_t *t);
bool task_outputs_piling_up(const eddy_task_t *t);
void task_free_groups(eddy_task_t *t);
int task_build_groups(eddy_task_t *t, eddy_placement_view_t pl, eddy_err_t *err);

/* task_input.c */
void task_free_entry(in_entry_t *e);
void task_free_inputs(eddy_task_t *t);
int task_build_valve(eddy_task_t *t, eddy_err_t *err);
int task_build_inputs(eddy_task_t *t, eddy_placement_view_t pl, eddy_err_t *err);
void task_return_credit(eddy_task_t *t, input_channel_t *in, bool force);
bool task_all_inputs_ended(const eddy_task_t *t);
input_channel_t *task_next_ready_input(eddy_task_t *t);
bool task_has_ready_input(const eddy_task_t *t);

/* task_barrier.c */
int task_prepare_chain(eddy_task_t *t, uint64_t checkpoint, eddy_sync_list_t *sync,
                       eddy_err_t *err);
eddy_snapshot_unit_t *task_sync_unit(eddy_sync_list_t **sync, const eddy_msg_t *msg,
                                     eddy_err_t *err);
int task_restore_source_time(eddy_task_t *t, uint64_t checkpoint, eddy_err_t *err);
void task_flush_chain(eddy_task_t *t);
void task_take_checkpoint(eddy_task_t *t, uint64_t checkpoint);
void task_check_alignment(eddy_task_t *t);
void task_note_barrier(eddy_task_t *t, input_channel_t *in, uint64_t checkpoint);
bool task_channel_blocked(const eddy_task_t *t, const input_channel_t *in);

/* task_output.c: a control message on ch, behind everything before it */
void task_send_control(eddy_task_t *t, output_channel_t *ch, char *data, size_t len);

/* task.c */
void task_chain_emit(eddy_collector_t *c, const eddy_record_t *rec);

/* task_migrate.c */
/* The key groups instance owns under pl: as at its stage's route
 * parallelism when set (fluid: none beyond it), else as at parallelism. */
eddy_kg_range_t task_owned_range(const eddy_task_t *t, eddy_placement_view_t pl);
int task_build_peers(eddy_task_t *t, eddy_placement_view_t pl, eddy_err_t *err);
void task_free_migration(eddy_task_t *t);
/* A HANDOFF delivered on in: adopt (this task is the new owner) or note the
 * marker and give the step's groups away once every live input had it. */
void task_on_handoff(eddy_task_t *t, input_channel_t *in, const eddy_data_msg_t *msg);
/* Whether rec (from in) belongs to an incoming group: then it is held
 * (1), or there is no room and the channel stops (-1); 0: process it. */
int task_hold_record(eddy_task_t *t, input_channel_t *in, const eddy_record_t *rec);
/* A STATE_CHUNK for this task; -1 (err) when it is corrupt or out of order. */
int task_on_state_chunk(eddy_task_t *t, const eddy_data_msg_t *msg, eddy_err_t *err);
/* The test hook's held transfer: when it may go (UINT64_MAX: none), and
 * sending it once that time came. */
uint64_t task_fluid_wake(const eddy_task_t *t);
/* An input ended: a step waiting for its HANDOFF need not any more. */
void task_fluid_input_ended(eddy_task_t *t);
void task_fluid_poll(eddy_task_t *t, uint64_t now_ns);
/* Whether a checkpoint now would miss or double a moving group. */
bool task_migration_in_flight(const eddy_task_t *t);
/* A checkpoint's unit of the owned key groups (a sudden migration's: only
 * the groups that change owner, not durable). */
eddy_snapshot_unit_t *task_serialise_state(eddy_task_t *t, uint64_t checkpoint, bool migration,
                                           eddy_err_t *err);
int task_write_group(eddy_task_t *t, uint32_t kg, char **out, size_t *len, eddy_err_t *err);
/* The same checkpoint (durable, every held group) as an asynchronous unit:
 * a copy-on-write view of the keyed state that the snapshot writer's thread
 * serialises (task_migrate.c). */
eddy_snapshot_unit_t *task_view_state(eddy_task_t *t, uint64_t checkpoint, eddy_err_t *err);

/* Where a restore reads the task's groups: a savepoint's store and job
 * name when the DEPLOY named one, else the job's checkpoint storage. */
static inline bool task_from_savepoint(const eddy_task_t *t, uint64_t checkpoint)
{
    return t->env->restore_store && checkpoint == t->env->restore_savepoint;
}
static inline eddy_snapshot_store_t *task_restore_store(const eddy_task_t *t, uint64_t checkpoint)
{
    return task_from_savepoint(t, checkpoint) ? t->env->restore_store : t->env->store;
}
static inline const char *task_restore_job(const eddy_task_t *t, uint64_t checkpoint)
{
    return task_from_savepoint(t, checkpoint) ? t->env->restore_job : t->job_id;
}

#endif
