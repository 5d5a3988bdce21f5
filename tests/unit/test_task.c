/* test_task.c - one task driven through its interface (runtime/task.h) with
 * a test host: eddy_task_env_t is a set of callbacks, so messages the task
 * sends are captured here instead of going to sockets.
 *
 * - A failure inside one task's chain stays with that task: a finish() that
 *   fails after a downstream operator in its chain failed used to leave a
 *   process-global error set, and the next task stepped in the process
 *   failed with it.
 * - A step is a time slice: a batch of costly records is consumed over
 *   several steps (the rest stays queued, read on by cursor), and its credit
 *   goes back once, when it is read through.
 * - A source restored from a checkpoint resumes from the watermark it had
 *   emitted: replayed events with older timestamps do not move the
 *   watermark it sends downstream back. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "net/dataplane.h"
#include "operators/operators.h"
#include "runtime/task.h"
#include "state/snapshot_store.h"
#include "tests/support/etcd.h"

#include "leak_check.h"

TestSuite(task, .fini = eddy_test_leak_check);

/* ---- test host ---------------------------------------------------------- */

#define HOST_MAX_RECORDS 16

/* A record as it left a task in a DATA batch. */
typedef struct sent_record {
    char data[16];
    uint8_t kind;
    int64_t value, timestamp;
    uint32_t dst_stage;
} sent_record_t;

/* A control message (barrier, end of stream, watermark) a task sent. */
#define HOST_MAX_CONTROL 32
typedef struct sent_control {
    eddy_data_type_t type;
    uint32_t dst_stage, dst_instance;
    char *bytes; /* a copy, for delivering it on */
    size_t len;
} sent_control_t;

typedef struct host {
    uint32_t credits_returned;
    uint32_t n_watermarks;          /* WATERMARK messages sent (not idle) */
    int64_t watermarks[64];
    eddy_snapshot_store_t *store;   /* when set, snapshot units are written to it */
    int64_t acked_position;         /* of the last ACK */
    uint32_t seq;                   /* messages' order: records and idle statuses */
    uint32_t last_record_seq, last_idle_seq;
    uint32_t done_reports;
    sent_record_t sent[HOST_MAX_RECORDS];
    uint32_t n_sent;
    sent_control_t control[HOST_MAX_CONTROL];
    uint32_t n_control;
    uint32_t acks;
    uint64_t acked_checkpoint;
    bool acked_declined;
    char ack_error[EDDY_ERROR_MAX];
    uint32_t acked_n_ended;
    eddy_task_ref_t acked_ended0; /* the first ended input the last ACK named */
} host_t;

static void host_free_control(host_t *h)
{
    for (uint32_t i = 0; i < h->n_control; i++)
        free(h->control[i].bytes);
    h->n_control = 0;
}

static void count_message(host_t *h, char *data, size_t len)
{
    eddy_data_msg_t msg;
    eddy_err_t err;
    if (eddy_data_decode(data, len, &msg, &err) == 0) {
        if (msg.type == EDDY_DATA_CREDIT)
            h->credits_returned += msg.credit;
        if (msg.type == EDDY_DATA_BARRIER || msg.type == EDDY_DATA_EOS ||
            msg.type == EDDY_DATA_WATERMARK) {
            cr_assert_lt(h->n_control, HOST_MAX_CONTROL);
            sent_control_t *c = &h->control[h->n_control++];
            c->type = msg.type;
            c->dst_stage = msg.channel.dst_stage;
            c->dst_instance = msg.channel.dst_instance;
            c->bytes = malloc(len);
            memcpy(c->bytes, data, len);
            c->len = len;
        }
        if (msg.type == EDDY_DATA_WATERMARK && !msg.idle && h->n_watermarks < 64)
            h->watermarks[h->n_watermarks++] = msg.watermark;
        if (msg.type == EDDY_DATA_WATERMARK && msg.idle)
            h->last_idle_seq = ++h->seq;
        eddy_record_t rec;
        while (msg.type == EDDY_DATA_BATCH && eddy_data_next_record(&msg, &rec, &err) == 1) {
            cr_assert_lt(h->n_sent, HOST_MAX_RECORDS);
            sent_record_t *s = &h->sent[h->n_sent++];
            snprintf(s->data, sizeof s->data, "%.*s", (int)rec.len, rec.data);
            s->kind = rec.kind;
            s->value = rec.value;
            s->timestamp = rec.timestamp;
            s->dst_stage = msg.channel.dst_stage;
            h->last_record_seq = ++h->seq;
        }
        eddy_data_msg_close(&msg);
    }
    free(data);
}

static int host_send_remote(void *host, uint32_t worker_id, char *data, size_t len)
{
    (void)worker_id;
    count_message(host, data, len);
    return 0;
}

static void host_send_local(void *host, char *data, size_t len)
{
    count_message(host, data, len);
}

static void host_notify(void *host, const eddy_msg_t *msg)
{
    host_t *h = host;
    if (msg->type == EDDY_MSG_TASK_DONE)
        h->done_reports++;
    if (msg->type == EDDY_MSG_ACK) {
        h->acks++;
        h->acked_checkpoint = msg->u.ack.checkpoint;
        h->acked_position = msg->u.ack.position;
        h->acked_declined = msg->u.ack.declined;
        snprintf(h->ack_error, sizeof h->ack_error, "%s", msg->u.ack.error);
        h->acked_n_ended = msg->u.ack.n_ended;
        if (msg->u.ack.n_ended)
            h->acked_ended0 = msg->u.ack.ended[0];
    }
}

static void host_submit_snapshot(void *host, eddy_snapshot_unit_t *unit)
{
    host_t *h = host;
    if (h->store) {
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_snapshot_store_write_groups(h->store, unit->job, unit->checkpoint,
                                                      unit->op, unit->n_groups, unit->groups,
                                                      unit->data, unit->lens, false, &err),
                     0, "%s", err.msg);
    }
    host_notify(host, &unit->ack);
    eddy_snapshot_unit_free(unit);
}

/* ---- operators ---------------------------------------------------------- */

static void *op_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)ctx;
    (void)err;
    static int token;
    return &token;
}

static int pass_process(void *self, const eddy_record_t *rec, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self;
    (void)err;
    eddy_emit(out, rec);
    return 0;
}

/* At end of input emits "boom" into the next operator, then fails itself. */
static int emit_boom_then_fail(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self;
    eddy_record_t rec = eddy_record_make("boom", 4, 1);
    eddy_emit(out, &rec);
    return eddy_err_set(err, "finish failed");
}

static int fail_on_boom(void *self, const eddy_record_t *rec, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self;
    if (rec->len == 4 && !memcmp(rec->data, "boom", 4))
        return eddy_err_set(err, "process failed on boom");
    eddy_emit(out, rec);
    return 0;
}

/* Costs COSTLY_NS per record, so a batch takes many time slices. */
#define COSTLY_NS (2u * 1000u * 1000u)
static int costly_process(void *self, const eddy_record_t *rec, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self;
    (void)err;
    struct timespec ts = {0, COSTLY_NS};
    nanosleep(&ts, NULL);
    eddy_emit(out, rec);
    return 0;
}

static const eddy_operator_ops_t failing_finish_ops = {
    .kind = "failing-finish", .open = op_open, .process = pass_process,
    .finish = emit_boom_then_fail};
static const eddy_operator_ops_t fail_on_boom_ops = {
    .kind = "fail-on-boom", .open = op_open, .process = fail_on_boom};
static const eddy_operator_ops_t costly_ops = {
    .kind = "costly", .open = op_open, .process = costly_process};

static int no_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    (void)self;
    (void)out;
    (void)max;
    (void)err;
    return 0;
}
static int64_t no_position(void *self)
{
    (void)self;
    return 0;
}
/* Only its placement matters: the tests drive the downstream stage. */
static const eddy_source_ops_t unused_source = {.kind = "unused", .poll = no_poll,
                                                .position = no_position};

/* Records every record its process() gets (data and kind) in the capture
 * its config points at, and passes it on. */
typedef struct capture {
    char data[HOST_MAX_RECORDS][16];
    uint8_t kind[HOST_MAX_RECORDS];
    uint32_t n;
} capture_t;

static void *capture_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)err;
    return (void *)ctx->config;
}

static int capture_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                           eddy_err_t *err)
{
    (void)err;
    capture_t *c = self;
    cr_assert_lt(c->n, HOST_MAX_RECORDS);
    snprintf(c->data[c->n], sizeof c->data[0], "%.*s", (int)rec->len, rec->data);
    c->kind[c->n++] = rec->kind;
    eddy_emit(out, rec);
    return 0;
}

static const eddy_operator_ops_t capture_ops = {
    .kind = "capture", .open = capture_open, .process = capture_process};
static const eddy_operator_ops_t capture_late_ops = {
    .kind = "capture-late", .open = capture_open, .process = capture_process, .sees_late = true};

/* ---- fixture ------------------------------------------------------------ */

#define WORKER 1

typedef struct fixture {
    host_t host;
    eddy_task_env_t env;
    eddy_job_graph_t graph;
    uint32_t src_workers[1], op_workers[2];
    eddy_stage_placement_t placement[3];
} fixture_t;

/* Stage 0: an unused source (1 instance); stage 1: two instances of `ops`. */
static void fixture_init(fixture_t *f, const eddy_operator_ops_t *const *ops, uint32_t n_ops)
{
    memset(f, 0, sizeof *f);
    f->env = (eddy_task_env_t){.host = &f->host, .send_remote = host_send_remote,
                               .send_local = host_send_local, .notify = host_notify,
                               .submit_snapshot = host_submit_snapshot, .self_worker_id = WORKER};
    eddy_err_t err = {{0}};
    eddy_graph_init(&f->graph, "test");
    f->graph.max_parallelism = 128;
    cr_assert(eddy_graph_add_source(&f->graph, "src", 1, &unused_source, NULL, &err) == 0, "%s", err.msg);
    cr_assert(eddy_graph_add_stage(&f->graph, "op", 2, 0, EDDY_EDGE_REBALANCE, NULL, &err) == 1,
              "%s", err.msg);
    for (uint32_t i = 0; i < n_ops; i++)
        cr_assert(eddy_graph_chain(&f->graph, 1, ops[i], NULL, &err) == 0, "%s", err.msg);
    f->src_workers[0] = WORKER;
    f->op_workers[0] = f->op_workers[1] = WORKER;
    f->placement[0] = (eddy_stage_placement_t){.parallelism = 1, .worker_of = f->src_workers};
    f->placement[1] = (eddy_stage_placement_t){.parallelism = 2, .worker_of = f->op_workers};
}

static eddy_task_t *fixture_task(fixture_t *f, uint32_t instance)
{
    eddy_task_config_t cfg = {.job = 1, .epoch = 1, .job_id = "test", .graph = &f->graph,
                              .stage = 1, .instance = instance,
                              .placement = {2, f->placement}, .start_position = -1};
    eddy_err_t err = {{0}};
    eddy_task_t *t = eddy_task_new(&f->env, &cfg, &err);
    cr_assert(t, "%s", err.msg);
    return t;
}

static eddy_channel_id_t channel_to(uint32_t instance)
{
    return (eddy_channel_id_t){1, 1, 0, 0, 1, instance};
}

/* A DATA batch of n records "w<i>" from src[0] to op[instance]. */
static void deliver_batch(eddy_task_t *t, uint32_t instance, uint32_t n)
{
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    eddy_channel_id_t ch = channel_to(instance);
    eddy_batch_writer_begin(&w, &ch);
    for (uint32_t i = 0; i < n; i++) {
        char word[16];
        int len = snprintf(word, sizeof word, "w%u", i);
        eddy_record_t rec = eddy_record_make(word, (uint32_t)len, 1);
        eddy_batch_writer_add(&w, &rec);
    }
    size_t len;
    char *data = eddy_batch_writer_finish(&w, &len);
    eddy_batch_writer_free(&w);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert(eddy_data_decode(data, len, &msg, &err) == 0, "%s", err.msg);
    cr_assert(eddy_task_deliver(t, &msg, NULL, data, &err) == 0, "%s", err.msg);
}

static void deliver_eos(eddy_task_t *t, uint32_t instance)
{
    eddy_channel_id_t ch = channel_to(instance);
    size_t len;
    char *data = eddy_eos_encode(&ch, &len);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert(eddy_data_decode(data, len, &msg, &err) == 0, "%s", err.msg);
    cr_assert(eddy_task_deliver(t, &msg, NULL, data, &err) == 0, "%s", err.msg);
}

static uint64_t records_in(const eddy_task_t *t)
{
    eddy_task_metrics_t m;
    eddy_task_metrics(t, &m);
    return m.records_in;
}

/* ---- tests -------------------------------------------------------------- */

Test(task, a_failed_chain_does_not_fail_the_next_task)
{
    fixture_t f;
    const eddy_operator_ops_t *ops[] = {&failing_finish_ops, &fail_on_boom_ops};
    fixture_init(&f, ops, 2);
    eddy_task_t *failing = fixture_task(&f, 0), *healthy = fixture_task(&f, 1);

    deliver_eos(failing, 0);
    cr_assert(eddy_task_runnable(failing, eddy_mono_ns()));
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_task_step(failing, eddy_mono_ns(), &err), -1);
    cr_assert(eddy_task_failed(failing));
    cr_assert(strstr(err.msg, "finish failed"), "error: %s", err.msg);

    deliver_batch(healthy, 1, 10);
    eddy_err_t err2 = {{0}};
    while (eddy_task_runnable(healthy, eddy_mono_ns()))
        cr_assert_eq(eddy_task_step(healthy, eddy_mono_ns(), &err2), 0,
                     "a healthy task failed with another task's error: %s", err2.msg);
    cr_assert_not(eddy_task_failed(healthy));
    cr_assert_eq(records_in(healthy), 10);

    eddy_task_destroy(&failing);
    eddy_task_destroy(&healthy);
    eddy_graph_clear(&f.graph);
}

Test(task, a_process_error_fails_only_its_task)
{
    fixture_t f;
    const eddy_operator_ops_t *ops[] = {&fail_on_boom_ops};
    fixture_init(&f, ops, 1);
    eddy_task_t *a = fixture_task(&f, 0), *b = fixture_task(&f, 1);

    /* a gets a batch whose record 0 is "w0"...; make it fail with a boom. */
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    eddy_channel_id_t ch = channel_to(0);
    eddy_batch_writer_begin(&w, &ch);
    eddy_record_t boom = eddy_record_make("boom", 4, 1);
    eddy_batch_writer_add(&w, &boom);
    size_t len;
    char *data = eddy_batch_writer_finish(&w, &len);
    eddy_batch_writer_free(&w);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert(eddy_data_decode(data, len, &msg, &err) == 0);
    cr_assert(eddy_task_deliver(a, &msg, NULL, data, &err) == 0);
    cr_assert_eq(eddy_task_step(a, eddy_mono_ns(), &err), -1);
    cr_assert(strstr(err.msg, "process failed on boom"), "error: %s", err.msg);
    cr_assert(eddy_task_failed(a));

    deliver_batch(b, 1, 3);
    eddy_err_t err2 = {{0}};
    cr_assert_eq(eddy_task_step(b, eddy_mono_ns(), &err2), 0, "%s", err2.msg);
    cr_assert_eq(records_in(b), 3);
    eddy_task_destroy(&a);
    eddy_task_destroy(&b);
    eddy_graph_clear(&f.graph);
}

Test(task, a_costly_batch_is_consumed_over_several_time_slices)
{
    fixture_t f;
    const eddy_operator_ops_t *ops[] = {&costly_ops};
    fixture_init(&f, ops, 1);
    eddy_task_t *t = fixture_task(&f, 0);
    enum { N = 40 }; /* 80 ms of work at COSTLY_NS, 16 slices */
    deliver_batch(t, 0, N);

    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_task_step(t, eddy_mono_ns(), &err), 0, "%s", err.msg);
    uint64_t first = records_in(t);
    cr_assert(first >= 1 && first < N, "one step consumed %llu of %d costly records",
              (unsigned long long)first, N);
    eddy_task_flush(t);
    cr_assert_eq(f.host.credits_returned, 0, "credit returned for a batch still being read");

    uint32_t steps = 1;
    while (eddy_task_runnable(t, eddy_mono_ns())) {
        cr_assert_eq(eddy_task_step(t, eddy_mono_ns(), &err), 0, "%s", err.msg);
        steps++;
    }
    cr_assert_eq(records_in(t), N, "the batch was not read on from where the last step stopped");
    cr_assert_gt(steps, 2);
    eddy_task_flush(t);
    cr_assert_eq(f.host.credits_returned, 1);

    eddy_task_destroy(&t);
    eddy_graph_clear(&f.graph);
}

/* ---- late records pass operators that do not ask for them ---------------- */

/* Stage 0: an unused source; stage 1: one instance of `ops`; stage 2 (when
 * downstream): one instance reading stage 1, so stage 1 has an output. */
static void late_fixture_init(fixture_t *f, const eddy_operator_ops_t *const *ops,
                              const void *const *configs, uint32_t n_ops, bool downstream)
{
    memset(f, 0, sizeof *f);
    f->env = (eddy_task_env_t){.host = &f->host, .send_remote = host_send_remote,
                               .send_local = host_send_local, .notify = host_notify,
                               .submit_snapshot = host_submit_snapshot, .self_worker_id = WORKER};
    eddy_err_t err = {{0}};
    eddy_graph_init(&f->graph, "test");
    f->graph.max_parallelism = 128;
    cr_assert(eddy_graph_add_source(&f->graph, "src", 1, &unused_source, NULL, &err) == 0, "%s", err.msg);
    cr_assert(eddy_graph_add_stage(&f->graph, "op", 1, 0, EDDY_EDGE_REBALANCE, NULL, &err) == 1,
              "%s", err.msg);
    for (uint32_t i = 0; i < n_ops; i++)
        cr_assert(eddy_graph_chain(&f->graph, 1, ops[i], configs[i], &err) == 0, "%s", err.msg);
    if (downstream) {
        cr_assert(eddy_graph_add_stage(&f->graph, "next", 1, 1, EDDY_EDGE_REBALANCE, NULL, &err) == 2,
                  "%s", err.msg);
        cr_assert(eddy_graph_chain(&f->graph, 2, &capture_ops, NULL, &err) == 0, "%s", err.msg);
    }
    f->src_workers[0] = WORKER;
    f->op_workers[0] = f->op_workers[1] = WORKER;
    f->placement[0] = (eddy_stage_placement_t){.parallelism = 1, .worker_of = f->src_workers};
    f->placement[1] = (eddy_stage_placement_t){.parallelism = 1, .worker_of = f->op_workers};
    f->placement[2] = (eddy_stage_placement_t){.parallelism = 1, .worker_of = f->op_workers + 1};
}

static eddy_task_t *late_fixture_task(fixture_t *f, bool downstream)
{
    eddy_task_config_t cfg = {.job = 1, .epoch = 1, .job_id = "test", .graph = &f->graph,
                              .stage = 1, .instance = 0,
                              .placement = {downstream ? 3 : 2, f->placement}, .start_position = -1};
    eddy_err_t err = {{0}};
    eddy_task_t *t = eddy_task_new(&f->env, &cfg, &err);
    cr_assert(t, "%s", err.msg);
    return t;
}

/* "a" (data), "late" (EDDY_LATE, value 7, timestamp 1000), "b" (data), as
 * one batch into op[0], stepped through and flushed. */
static void run_late_batch(eddy_task_t *t)
{
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    eddy_channel_id_t ch = channel_to(0);
    eddy_batch_writer_begin(&w, &ch);
    eddy_record_t a = eddy_record_make("a", 1, 1), late = eddy_record_make("late", 4, 7),
                  b = eddy_record_make("b", 1, 1);
    late.kind = EDDY_LATE;
    late.timestamp = 1000;
    eddy_batch_writer_add(&w, &a);
    eddy_batch_writer_add(&w, &late);
    eddy_batch_writer_add(&w, &b);
    size_t len;
    char *data = eddy_batch_writer_finish(&w, &len);
    eddy_batch_writer_free(&w);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert(eddy_data_decode(data, len, &msg, &err) == 0, "%s", err.msg);
    cr_assert(eddy_task_deliver(t, &msg, NULL, data, &err) == 0, "%s", err.msg);
    while (eddy_task_runnable(t, eddy_mono_ns()))
        cr_assert_eq(eddy_task_step(t, eddy_mono_ns(), &err), 0, "%s", err.msg);
    eddy_task_flush(t);
}

static uint64_t records_out(const eddy_task_t *t)
{
    eddy_task_metrics_t m;
    eddy_task_metrics(t, &m);
    return m.records_out;
}

/* A late record skips the operators without sees_late, in order, and
 * leaves the task unchanged (kind, bytes, value, timestamp) in its place
 * among the data records; an operator with sees_late gets it. */
Test(task, a_late_record_passes_operators_that_do_not_ask_for_it)
{
    fixture_t f;
    capture_t first = {0}, seeing = {0}, last = {0};
    const eddy_operator_ops_t *ops[] = {&capture_ops, &capture_late_ops, &capture_ops};
    const void *configs[] = {&first, &seeing, &last};
    late_fixture_init(&f, ops, configs, 3, true);
    eddy_task_t *t = late_fixture_task(&f, true);
    run_late_batch(t);

    cr_assert_eq(first.n, 2, "an operator without sees_late saw %u records", first.n);
    cr_assert_str_eq(first.data[0], "a");
    cr_assert_str_eq(first.data[1], "b");
    cr_assert_eq(seeing.n, 3);
    cr_assert_str_eq(seeing.data[1], "late");
    cr_assert_eq(seeing.kind[1], EDDY_LATE);
    cr_assert_eq(last.n, 2);

    cr_assert_eq(f.host.n_sent, 3, "the task sent %u records", f.host.n_sent);
    const char *order[] = {"a", "late", "b"};
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(f.host.sent[i].data, order[i]);
        cr_assert_eq(f.host.sent[i].dst_stage, 2);
    }
    cr_assert_eq(f.host.sent[1].kind, EDDY_LATE);
    cr_assert_eq(f.host.sent[1].value, 7);
    cr_assert_eq(f.host.sent[1].timestamp, 1000);
    cr_assert_eq(f.host.sent[0].kind, EDDY_INSERT);
    cr_assert_eq(records_out(t), 3);
    eddy_task_destroy(&t);
    eddy_graph_clear(&f.graph);
}

/* The built-in side output keeps only the late records, as data. */
Test(task, the_late_records_step_turns_late_records_into_data)
{
    fixture_t f;
    capture_t before = {0};
    const eddy_operator_ops_t *ops[] = {&capture_ops, &eddy_late_records_ops};
    const void *configs[] = {&before, NULL};
    late_fixture_init(&f, ops, configs, 2, true);
    eddy_task_t *t = late_fixture_task(&f, true);
    run_late_batch(t);

    cr_assert_eq(before.n, 2);
    cr_assert_eq(f.host.n_sent, 1, "the side output sent %u records", f.host.n_sent);
    cr_assert_str_eq(f.host.sent[0].data, "late");
    cr_assert_eq(f.host.sent[0].kind, EDDY_INSERT);
    cr_assert_eq(f.host.sent[0].value, 7);
    cr_assert_eq(f.host.sent[0].timestamp, 1000);
    eddy_task_destroy(&t);
    eddy_graph_clear(&f.graph);
}

/* At the end of a sink's chain (no outputs) a late record goes nowhere and
 * is not counted as output. */
Test(task, a_late_record_ends_at_a_sink)
{
    fixture_t f;
    capture_t sink = {0};
    const eddy_operator_ops_t *ops[] = {&capture_ops};
    const void *configs[] = {&sink};
    late_fixture_init(&f, ops, configs, 1, false);
    eddy_task_t *t = late_fixture_task(&f, false);
    run_late_batch(t);
    cr_assert_eq(sink.n, 2);
    cr_assert_eq(f.host.n_sent, 0);
    cr_assert_eq(records_out(t), 2, "records_out counts what the chain emitted, not the late one");
    cr_assert_eq(records_in(t), 3);
    eddy_task_destroy(&t);
    eddy_graph_clear(&f.graph);
}

/* ---- two-input stages --------------------------------------------------- */

/* Records every record its process() gets with the input the task says it
 * came from, and at prepare() how many it had seen: what the checkpoint of
 * that barrier covers. */
typedef struct join_capture {
    char data[HOST_MAX_RECORDS][16];
    uint32_t input[HOST_MAX_RECORDS];
    uint32_t n, n_at_prepare;
    uint64_t prepared;
    const uint32_t *task_input;
} join_capture_t;

static void *join_capture_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)err;
    join_capture_t *c = (join_capture_t *)ctx->config;
    cr_assert(ctx->input, "a two-input stage tells its operators the input");
    cr_assert(ctx->second_key_fn, "and gives them the second input's key selector");
    c->task_input = ctx->input;
    return c;
}

static int join_capture_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                                eddy_err_t *err)
{
    (void)out;
    (void)err;
    join_capture_t *c = self;
    cr_assert_lt(c->n, HOST_MAX_RECORDS);
    snprintf(c->data[c->n], sizeof c->data[0], "%.*s", (int)rec->len, rec->data);
    c->input[c->n++] = *c->task_input;
    return 0;
}

static int join_capture_prepare(void *self, uint64_t checkpoint, eddy_sync_list_t *sync,
                                eddy_err_t *err)
{
    (void)sync;
    (void)err;
    join_capture_t *c = self;
    if (checkpoint != EDDY_FINAL_CHECKPOINT) {
        c->n_at_prepare = c->n;
        c->prepared = checkpoint;
    }
    return 0;
}

static const eddy_operator_ops_t join_capture_ops = {
    .kind = "join-capture", .open = join_capture_open, .process = join_capture_process,
    .prepare = join_capture_prepare};

static uint32_t whole_key(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len;
}

typedef struct join_fixture {
    host_t host;
    eddy_task_env_t env;
    eddy_job_graph_t graph;
    uint32_t workers[1];
    eddy_stage_placement_t placement[3];
    join_capture_t capture;
    char *root;
    eddy_snapshot_store_t *store;
    eddy_task_t *task;
} join_fixture_t;

/* Stages 0 ("left") and 1 ("right"): unused sources, one instance each;
 * stage 2 ("join"): one keyed instance reading both by key. */
static void join_fixture_init_with(join_fixture_t *f, eddy_guarantee_t guarantee,
                                   uint64_t migration_checkpoint)
{
    memset(f, 0, sizeof *f);
    eddy_err_t err = {{0}};
    f->root = eddy_test_mkdtemp("task", &err);
    cr_assert(f->root, "%s", err.msg);
    f->store = eddy_snapshot_store_new(f->root, &err);
    cr_assert(f->store, "%s", err.msg);
    f->env = (eddy_task_env_t){.host = &f->host, .send_remote = host_send_remote,
                               .send_local = host_send_local, .notify = host_notify,
                               .submit_snapshot = host_submit_snapshot, .store = f->store,
                               .self_worker_id = WORKER, .guarantee = guarantee,
                               .migration_checkpoint = migration_checkpoint};
    eddy_graph_init(&f->graph, "test");
    f->graph.max_parallelism = 128;
    cr_assert(eddy_graph_add_source(&f->graph, "left", 1, &unused_source, NULL, &err) == 0);
    cr_assert(eddy_graph_add_source(&f->graph, "right", 1, &unused_source, NULL, &err) == 1);
    cr_assert(eddy_graph_add_stage(&f->graph, "join", 1, 0, EDDY_EDGE_HASH, whole_key, &err) == 2,
              "%s", err.msg);
    cr_assert_eq(eddy_graph_set_second_input(&f->graph, 2, 1, EDDY_EDGE_HASH, whole_key, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(eddy_graph_chain(&f->graph, 2, &join_capture_ops, &f->capture, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(eddy_graph_validate(&f->graph, &err), 0, "%s", err.msg);
    f->workers[0] = WORKER;
    for (int s = 0; s < 3; s++)
        f->placement[s] = (eddy_stage_placement_t){.parallelism = 1, .worker_of = f->workers};
    eddy_task_config_t cfg = {.job = 1, .epoch = 1, .job_id = "test", .graph = &f->graph,
                              .stage = 2, .instance = 0, .placement = {3, f->placement},
                              .start_position = -1};
    f->task = eddy_task_new(&f->env, &cfg, &err);
    cr_assert(f->task, "%s", err.msg);
}

static void join_fixture_init(join_fixture_t *f)
{
    join_fixture_init_with(f, EDDY_GUARANTEE_EXACTLY_ONCE, 0);
}

static void join_fixture_fini(join_fixture_t *f)
{
    eddy_task_destroy(&f->task);
    eddy_snapshot_store_destroy(&f->store);
    eddy_test_rm_rf(f->root);
    free(f->root);
    host_free_control(&f->host);
    eddy_graph_clear(&f->graph);
}

static void deliver_bytes(eddy_task_t *t, char *data, size_t len)
{
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert(eddy_data_decode(data, len, &msg, &err) == 0, "%s", err.msg);
    cr_assert(eddy_task_deliver(t, &msg, NULL, data, &err) == 0, "%s", err.msg);
}

/* A batch of one record `word` from stage src[0] to join[0]. */
static void join_record(join_fixture_t *f, uint32_t src, const char *word)
{
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    eddy_channel_id_t ch = {1, 1, src, 0, 2, 0};
    eddy_batch_writer_begin(&w, &ch);
    eddy_record_t rec = eddy_record_make(word, (uint32_t)strlen(word), 1);
    eddy_batch_writer_add(&w, &rec);
    size_t len;
    char *data = eddy_batch_writer_finish(&w, &len);
    eddy_batch_writer_free(&w);
    deliver_bytes(f->task, data, len);
}

static void join_barrier(join_fixture_t *f, uint32_t src, uint64_t checkpoint)
{
    eddy_channel_id_t ch = {1, 1, src, 0, 2, 0};
    size_t len;
    char *data = eddy_barrier_encode(&ch, checkpoint, &len);
    deliver_bytes(f->task, data, len);
}

static void join_watermark(join_fixture_t *f, uint32_t src, int64_t wm)
{
    eddy_channel_id_t ch = {1, 1, src, 0, 2, 0};
    size_t len;
    char *data = eddy_watermark_encode(&ch, wm, false, &len);
    deliver_bytes(f->task, data, len);
}

static void join_eos(join_fixture_t *f, uint32_t src)
{
    eddy_channel_id_t ch = {1, 1, src, 0, 2, 0};
    size_t len;
    char *data = eddy_eos_encode(&ch, &len);
    deliver_bytes(f->task, data, len);
}

static void run_until_idle(eddy_task_t *t)
{
    eddy_err_t err = {{0}};
    while (eddy_task_runnable(t, eddy_mono_ns()))
        cr_assert_eq(eddy_task_step(t, eddy_mono_ns(), &err), 0, "%s", err.msg);
}

static int64_t task_watermark(const eddy_task_t *t)
{
    eddy_task_metrics_t m;
    eddy_task_metrics(t, &m);
    return m.watermark;
}

/* Barriers align across the channels of both inputs: after the left
 * input's barrier its records wait, the right input's records before its
 * barrier are processed; the checkpoint covers exactly those before both
 * barriers, and is taken once. */
Test(task, barriers_align_across_both_inputs_of_a_two_input_stage)
{
    join_fixture_t f;
    join_fixture_init(&f);
    join_record(&f, 0, "a1");
    join_barrier(&f, 0, 5);
    join_record(&f, 0, "a2"); /* after the left barrier: not in checkpoint 5 */
    join_record(&f, 1, "b1");
    run_until_idle(f.task);
    cr_assert_eq(f.capture.n, 2, "a2 waits behind the left barrier");
    cr_assert_eq(f.host.acks, 0, "no checkpoint before the right barrier");
    join_record(&f, 1, "b2"); /* still before the right barrier: in checkpoint 5 */
    join_barrier(&f, 1, 5);
    join_record(&f, 1, "b3");
    run_until_idle(f.task);
    cr_assert_eq(f.host.acks, 1);
    cr_assert_eq(f.host.acked_checkpoint, 5);
    cr_assert_eq(f.capture.prepared, 5);
    cr_assert_eq(f.capture.n_at_prepare, 3, "a1, b1, b2 are before both barriers");
    cr_assert_eq(f.capture.n, 5);
    for (uint32_t i = 0; i < f.capture.n; i++) {
        const char *d = f.capture.data[i];
        uint32_t want_input = d[0] == 'a' ? 0 : 1;
        cr_assert_eq(f.capture.input[i], want_input, "%s came from input %u", d, want_input);
        if (i < f.capture.n_at_prepare)
            cr_assert(strcmp(d, "a2") && strcmp(d, "b3"), "%s is after its barrier", d);
    }
    join_fixture_fini(&f);
}

/* at-least-once: the left input's records after its barrier are not held
 * back; the snapshot is taken at the last barrier and so covers a2 (which a
 * restore replays: a duplicate, which this mode allows). */
Test(task, at_least_once_keeps_a_channel_flowing_after_its_barrier)
{
    join_fixture_t f;
    join_fixture_init_with(&f, EDDY_GUARANTEE_AT_LEAST_ONCE, 0);
    join_record(&f, 0, "a1");
    join_barrier(&f, 0, 5);
    join_record(&f, 0, "a2");
    join_record(&f, 1, "b1");
    run_until_idle(f.task);
    cr_assert_eq(f.capture.n, 3, "a2 flows past the left barrier");
    cr_assert_eq(f.host.acks, 0, "no checkpoint before the right barrier");
    join_record(&f, 1, "b2");
    join_barrier(&f, 1, 5);
    join_record(&f, 1, "b3");
    run_until_idle(f.task);
    cr_assert_eq(f.host.acks, 1);
    cr_assert_eq(f.host.acked_checkpoint, 5);
    cr_assert_eq(f.capture.prepared, 5);
    cr_assert_eq(f.capture.n_at_prepare, 4, "a1, a2, b1, b2 are in checkpoint 5");
    cr_assert_eq(f.capture.n, 5);
    /* The barrier went on once, to the (single) downstream: none here, the
     * join has no outputs; the next checkpoint aligns the same way. */
    join_barrier(&f, 1, 6);
    join_record(&f, 1, "b4");
    run_until_idle(f.task);
    cr_assert_eq(f.capture.n, 6, "b4 flows past the right barrier of checkpoint 6");
    cr_assert_eq(f.host.acks, 1);
    join_barrier(&f, 0, 6);
    run_until_idle(f.task);
    cr_assert_eq(f.host.acks, 2);
    cr_assert_eq(f.host.acked_checkpoint, 6);
    join_fixture_fini(&f);
}

/* at-least-once: a barrier of a checkpoint given up meanwhile is superseded
 * by a newer one, and a stale one arriving late is ignored. */
Test(task, at_least_once_a_newer_barrier_supersedes_an_older_one)
{
    join_fixture_t f;
    join_fixture_init_with(&f, EDDY_GUARANTEE_AT_LEAST_ONCE, 0);
    join_barrier(&f, 0, 5);
    run_until_idle(f.task);
    join_barrier(&f, 0, 6); /* checkpoint 5 timed out, 6 was triggered */
    run_until_idle(f.task);
    join_barrier(&f, 1, 5); /* stale */
    run_until_idle(f.task);
    cr_assert_eq(f.host.acks, 0, "checkpoint 5 is not taken");
    join_barrier(&f, 1, 6);
    run_until_idle(f.task);
    cr_assert_eq(f.host.acks, 1);
    cr_assert_eq(f.host.acked_checkpoint, 6);
    join_fixture_fini(&f);
}

/* A rescale's migration snapshot aligns under at-least-once too. */
Test(task, at_least_once_still_aligns_a_migration_snapshot)
{
    join_fixture_t f;
    join_fixture_init_with(&f, EDDY_GUARANTEE_AT_LEAST_ONCE, 7);
    join_record(&f, 0, "a1");
    join_barrier(&f, 0, 7);
    join_record(&f, 0, "a2");
    run_until_idle(f.task);
    cr_assert_eq(f.capture.n, 1, "a2 waits behind the migration barrier");
    join_barrier(&f, 1, 7);
    run_until_idle(f.task);
    cr_assert_eq(f.host.acks, 1);
    cr_assert_eq(f.capture.n, 2);
    join_fixture_fini(&f);
}

/* The watermark is the minimum over both inputs; the stage's input ends
 * only when both ended. */
Test(task, a_two_input_stage_takes_the_minimum_watermark_and_ends_with_both_inputs)
{
    join_fixture_t f;
    join_fixture_init(&f);
    join_watermark(&f, 0, 100);
    run_until_idle(f.task);
    cr_assert_eq(task_watermark(f.task), EDDY_WATERMARK_MIN, "the right input has none yet");
    join_watermark(&f, 1, 50);
    run_until_idle(f.task);
    cr_assert_eq(task_watermark(f.task), 50);
    join_watermark(&f, 1, 200);
    run_until_idle(f.task);
    cr_assert_eq(task_watermark(f.task), 100);
    join_eos(&f, 0);
    run_until_idle(f.task);
    cr_assert_eq(task_watermark(f.task), 200, "an ended input leaves the minimum");
    cr_assert_not(eddy_task_finished(f.task), "the right input has not ended");
    cr_assert_eq(f.host.done_reports, 0);
    join_record(&f, 1, "b");
    join_eos(&f, 1);
    run_until_idle(f.task);
    cr_assert(eddy_task_finished(f.task));
    cr_assert_eq(f.host.done_reports, 1);
    cr_assert_eq(f.capture.n, 1);

    /* A message from a stage that is neither input is a protocol violation. */
    eddy_channel_id_t ch = {1, 1, 2, 0, 2, 0};
    size_t len;
    char *data = eddy_eos_encode(&ch, &len);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_data_decode(data, len, &msg, &err), 0);
    cr_assert_eq(eddy_task_deliver(f.task, &msg, NULL, data, &err), -1);
    cr_assert(strstr(err.msg, "protocol violation"), "%s", err.msg);
    join_fixture_fini(&f);
}

/* An input that sent its end of stream has no barrier to give: a checkpoint
 * aligned without it is taken (FLIP-147), and the ACK names the ended input
 * so that the coordinator counts it only if that upstream task reported
 * TASK_DONE (a forged end of stream must not make the task snapshot before
 * the records its real upstream sent before the barrier: protocol 8
 * declined for that reason). Anything behind an end of stream, even one
 * still queued, is a protocol violation. */
Test(task, a_checkpoint_aligned_with_an_ended_input_names_it)
{
    join_fixture_t f;
    join_fixture_init(&f);
    join_record(&f, 0, "a1");
    join_eos(&f, 0);
    eddy_channel_id_t ch = {1, 1, 0, 0, 2, 0};
    size_t len;
    char *data = eddy_barrier_encode(&ch, 4, &len);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_data_decode(data, len, &msg, &err), 0);
    cr_assert_eq(eddy_task_deliver(f.task, &msg, NULL, data, &err), -1,
                 "a barrier queued behind an end of stream is accepted");
    cr_assert(strstr(err.msg, "after end of stream"), "%s", err.msg);
    join_record(&f, 1, "b1");
    join_barrier(&f, 1, 5);
    run_until_idle(f.task);
    cr_assert_eq(f.host.acks, 1);
    cr_assert_eq(f.host.acked_checkpoint, 5);
    cr_assert_not(f.host.acked_declined, "declined: %s", f.host.ack_error);
    cr_assert_str_eq(f.host.ack_error, "");
    cr_assert_eq(f.host.acked_n_ended, 1);
    cr_assert_eq(f.host.acked_ended0.stage, 0);
    cr_assert_eq(f.host.acked_ended0.instance, 0);
    cr_assert_eq(f.capture.prepared, 5, "the checkpoint was not taken");
    cr_assert_eq(f.capture.n, 2);
    /* the right input flows on after the barrier */
    join_record(&f, 1, "b2");
    run_until_idle(f.task);
    cr_assert_eq(f.capture.n, 3);
    join_fixture_fini(&f);
}

/* A task restored as finished (the checkpoint recorded it so, FLIP-147):
 * a source is not even opened (unused_source has no open()), and a keyed
 * task loads nothing (checkpoint 7 does not exist); once started, each
 * sends end of stream downstream and reports TASK_DONE, and nothing more. */
Test(task, a_task_restored_as_finished_starts_at_its_end)
{
    join_fixture_t f;
    join_fixture_init(&f);
    eddy_err_t err = {{0}};
    for (uint32_t stage = 0; stage <= 2; stage += 2) {
        eddy_task_config_t cfg = {.job = 1, .epoch = 2, .job_id = "test", .graph = &f.graph,
                                  .stage = stage, .instance = 0, .placement = {3, f.placement},
                                  .start_position = -1, .restore_checkpoint = 7,
                                  .start_finished = true};
        eddy_task_t *t = eddy_task_new(&f.env, &cfg, &err);
        cr_assert(t, "stage %u: %s", stage, err.msg);
        uint64_t groups = 0, bytes = 0;
        cr_assert_eq(eddy_task_restore_groups(t, 7, &bytes, &groups, &err), 0, "%s", err.msg);
        cr_assert_eq(groups, 0);
        uint32_t done = f.host.done_reports, control = f.host.n_control;
        cr_assert_not(eddy_task_runnable(t, eddy_mono_ns()), "it ended before START");
        eddy_task_set_running(t, true);
        run_until_idle(t);
        cr_assert(eddy_task_finished(t));
        cr_assert_eq(f.host.done_reports, done + 1, "stage %u: no TASK_DONE", stage);
        uint32_t eos = 0;
        for (uint32_t i = control; i < f.host.n_control; i++)
            eos += f.host.control[i].type == EDDY_DATA_EOS;
        cr_assert_eq(eos, stage == 0 ? 1 : 0, "stage %u: %u ends of stream", stage, eos);
        eddy_task_trigger(t, 9, false);
        run_until_idle(t);
        cr_assert_eq(f.host.acks, 0, "a finished task acknowledged a checkpoint");
        eddy_task_destroy(&t);
    }
    join_fixture_fini(&f);
}

/* ---- unchained FORWARD edges -------------------------------------------- */

/* An unchained FORWARD edge (op -> next, two instances each) with event
 * time: op[i]'s watermarks, barriers and end of stream go to next[i] only,
 * which listens to op[i] alone and counts op's other channels as ended.
 * Sending them on every channel made next[1-i] fail with "protocol
 * violation ... after end of stream". */
Test(task, an_unchained_forward_edge_sends_control_messages_to_its_instance_only)
{
    fixture_t f;
    const eddy_operator_ops_t *ops[] = {&capture_ops};
    memset(&f, 0, sizeof f);
    f.env = (eddy_task_env_t){.host = &f.host, .send_remote = host_send_remote,
                              .send_local = host_send_local, .notify = host_notify,
                              .submit_snapshot = host_submit_snapshot, .self_worker_id = WORKER};
    eddy_err_t err = {{0}};
    eddy_graph_init(&f.graph, "test");
    f.graph.max_parallelism = 128;
    cr_assert(eddy_graph_add_source(&f.graph, "src", 2, &unused_source, NULL, &err) == 0);
    cr_assert(eddy_graph_add_stage(&f.graph, "op", 2, 0, EDDY_EDGE_FORWARD, NULL, &err) == 1);
    capture_t cap_op, cap_next[2];
    memset(&cap_op, 0, sizeof cap_op);
    memset(cap_next, 0, sizeof cap_next);
    cr_assert_eq(eddy_graph_chain(&f.graph, 1, ops[0], &cap_op, &err), 0);
    cr_assert(eddy_graph_add_stage(&f.graph, "next", 2, 1, EDDY_EDGE_FORWARD, NULL, &err) == 2);
    cr_assert_eq(eddy_graph_chain(&f.graph, 2, &capture_ops, &cap_next, &err), 0);
    f.src_workers[0] = WORKER;
    f.op_workers[0] = f.op_workers[1] = WORKER;
    uint32_t two_workers[2] = {WORKER, WORKER};
    f.placement[0] = (eddy_stage_placement_t){.parallelism = 2, .worker_of = two_workers};
    f.placement[1] = (eddy_stage_placement_t){.parallelism = 2, .worker_of = f.op_workers};
    f.placement[2] = (eddy_stage_placement_t){.parallelism = 2, .worker_of = two_workers};
    eddy_task_config_t cfg = {.job = 1, .epoch = 1, .job_id = "test", .graph = &f.graph,
                              .stage = 1, .instance = 1, .placement = {3, f.placement},
                              .start_position = -1};
    eddy_task_t *op = eddy_task_new(&f.env, &cfg, &err);
    cr_assert(op, "%s", err.msg);
    eddy_task_t *next[2];
    for (uint32_t i = 0; i < 2; i++) {
        cfg.stage = 2;
        cfg.instance = i;
        next[i] = eddy_task_new(&f.env, &cfg, &err);
        cr_assert(next[i], "%s", err.msg);
    }
    /* src[1] -> op[1]: a watermark, a barrier, end of stream. */
    eddy_channel_id_t ch = {1, 1, 0, 1, 1, 1};
    size_t len;
    char *data = eddy_watermark_encode(&ch, 1000, false, &len);
    deliver_bytes(op, data, len);
    data = eddy_barrier_encode(&ch, 3, &len);
    deliver_bytes(op, data, len);
    data = eddy_eos_encode(&ch, &len);
    deliver_bytes(op, data, len);
    run_until_idle(op);
    cr_assert(eddy_task_finished(op));
    uint32_t seen = 0;
    for (uint32_t i = 0; i < f.host.n_control; i++) {
        sent_control_t *c = &f.host.control[i];
        if (c->dst_stage != 2)
            continue;
        cr_assert_eq(c->dst_instance, 1, "a %s went to next[%u]",
                     c->type == EDDY_DATA_WATERMARK ? "watermark"
                     : c->type == EDDY_DATA_BARRIER ? "barrier" : "end of stream",
                     c->dst_instance);
        seen |= 1u << (c->type - EDDY_DATA_BATCH);
        /* next[1] takes it as any message of its input. */
        eddy_data_msg_t msg;
        cr_assert_eq(eddy_data_decode(c->bytes, c->len, &msg, &err), 0, "%s", err.msg);
        char *copy = c->bytes;
        c->bytes = NULL;
        cr_assert_eq(eddy_task_deliver(next[1], &msg, NULL, copy, &err), 0, "%s", err.msg);
    }
    cr_assert_eq(seen, (1u << (EDDY_DATA_WATERMARK - EDDY_DATA_BATCH)) |
                           (1u << (EDDY_DATA_BARRIER - EDDY_DATA_BATCH)) |
                           (1u << (EDDY_DATA_EOS - EDDY_DATA_BATCH)));
    run_until_idle(next[1]);
    cr_assert(eddy_task_finished(next[1]));
    cr_assert_not(eddy_task_finished(next[0]), "next[0] still waits for op[0]");
    host_free_control(&f.host);
    eddy_task_destroy(&op);
    eddy_task_destroy(&next[0]);
    eddy_task_destroy(&next[1]);
}

/* ---- a restored source resumes its watermark ----------------------------- */

/* Emits events at positions start.. from ts_of[], then is idle. */
static const int64_t event_ts[] = {1000, 2000, 3000, 1500, 1600, 5000};
#define EVENTS_BEFORE_CHECKPOINT 3

typedef struct ts_source {
    int64_t pos, end;
} ts_source_t;

static void *ts_open(const eddy_op_context_t *ctx, int64_t start, eddy_err_t *err)
{
    (void)err;
    ts_source_t *s = calloc(1, sizeof *s);
    cr_assert(s);
    s->pos = start < 0 ? 0 : start;
    s->end = *(const int64_t *)ctx->config; /* events available so far */
    return s;
}

static int ts_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    (void)err;
    ts_source_t *s = self;
    uint32_t n = 0;
    for (; n < max && s->pos < s->end; n++, s->pos++) {
        eddy_record_t r = eddy_record_make("e", 1, s->pos);
        r.timestamp = event_ts[s->pos];
        eddy_emit(out, &r);
    }
    return n ? 1 : EDDY_SOURCE_IDLE;
}

static int64_t ts_position(void *self) { return ((ts_source_t *)self)->pos; }
static void ts_close(void *self) { free(self); }

static const eddy_source_ops_t ts_source_ops = {.kind = "ts", .replayable = true, .open = ts_open,
                                                .poll = ts_poll, .position = ts_position,
                                                .close = ts_close};

static eddy_task_t *source_task(fixture_t *f, uint64_t restore, int64_t position)
{
    eddy_task_config_t cfg = {.job = 1, .epoch = 1, .job_id = "srcwm", .graph = &f->graph,
                              .stage = 0, .instance = 0, .placement = {2, f->placement},
                              .start_position = position, .restore_checkpoint = restore};
    eddy_err_t err = {{0}};
    eddy_task_t *t = eddy_task_new(&f->env, &cfg, &err);
    cr_assert(t, "%s", err.msg);
    eddy_task_set_running(t, true);
    return t;
}

/* Steps the source until it rests, then lets one watermark interval pass. */
static void run_source(eddy_task_t *t, uint64_t *clock_ns)
{
    eddy_err_t err = {{0}};
    for (int i = 0; i < 10; i++) {
        *clock_ns += 200000000u;
        while (eddy_task_runnable(t, *clock_ns))
            cr_assert_eq(eddy_task_step(t, *clock_ns, &err), 0, "%s", err.msg);
        eddy_task_tick(t, *clock_ns);
        eddy_task_flush(t);
    }
}

Test(task, a_restored_source_resumes_from_its_checkpointed_watermark)
{
    fixture_t f;
    fixture_init(&f, (const eddy_operator_ops_t *const[]){&capture_ops}, 1);
    eddy_err_t err = {{0}};
    char *dir = eddy_test_mkdtemp("task-srcwm", &err);
    cr_assert(dir, "%s", err.msg);
    f.host.store = eddy_snapshot_store_new(dir, &err);
    cr_assert(f.host.store, "%s", err.msg);
    f.env.store = f.host.store;
    int64_t available = EVENTS_BEFORE_CHECKPOINT;
    f.graph.stages[0].source = &ts_source_ops;
    f.graph.stages[0].source_config = &available;
    f.graph.stages[0].event_time = (eddy_event_time_t){.enabled = true, .interval_ms = 1};

    uint64_t clock = eddy_mono_ns();
    eddy_task_t *t = source_task(&f, 0, -1);
    run_source(t, &clock);
    cr_assert_gt(f.host.n_watermarks, 0);
    int64_t before = f.host.watermarks[f.host.n_watermarks - 1];
    cr_assert_eq(before, 2999, "the watermark follows the largest timestamp");
    eddy_task_trigger(t, 1, false);
    run_source(t, &clock);
    cr_assert_eq(f.host.acked_position, EVENTS_BEFORE_CHECKPOINT);
    eddy_task_destroy(&t);

    /* Restored at the checkpoint: the next events are older (1500, 1600)
     * than the last one before it, then one moves event time on. */
    f.host.n_watermarks = 0;
    available = 5;
    t = source_task(&f, 1, f.host.acked_position);
    eddy_task_metrics_t m;
    eddy_task_metrics(t, &m);
    cr_assert_eq(m.watermark, before, "the restored source starts at its watermark");
    run_source(t, &clock);
    for (uint32_t i = 0; i < f.host.n_watermarks; i++)
        cr_assert_geq(f.host.watermarks[i], before, "watermark %lld after a restore went back below %lld",
                      (long long)f.host.watermarks[i], (long long)before);
    available = 6;
    eddy_task_destroy(&t);
    t = source_task(&f, 1, EVENTS_BEFORE_CHECKPOINT);
    run_source(t, &clock);
    cr_assert_gt(f.host.n_watermarks, 0);
    cr_assert_eq(f.host.watermarks[f.host.n_watermarks - 1], 4999, "event time moves on");
    eddy_task_destroy(&t);

    host_free_control(&f.host);
    eddy_graph_clear(&f.graph);
    eddy_snapshot_store_destroy(&f.host.store);
    eddy_test_rm_rf(dir);
    free(dir);
}

/* ---- an idle status goes behind what a pre-aggregation held ------------- */

/* Holds every record until flush() (like a combiner). */
typedef struct holder {
    char data[HOST_MAX_RECORDS][16];
    uint32_t n;
} holder_t;

static holder_t holder;

static void *holder_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)ctx;
    (void)err;
    memset(&holder, 0, sizeof holder);
    return &holder;
}

static int holder_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                          eddy_err_t *err)
{
    (void)out;
    (void)err;
    holder_t *h = self;
    cr_assert_lt(h->n, HOST_MAX_RECORDS);
    snprintf(h->data[h->n++], sizeof h->data[0], "%.*s", (int)rec->len, rec->data);
    return 0;
}

static int holder_flush(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    (void)err;
    holder_t *h = self;
    for (uint32_t i = 0; i < h->n; i++) {
        eddy_record_t r = eddy_record_make(h->data[i], (uint32_t)strlen(h->data[i]), 1);
        eddy_emit(out, &r);
    }
    h->n = 0;
    return 0;
}

static const eddy_operator_ops_t holder_ops = {
    .kind = "holder", .open = holder_open, .process = holder_process, .flush = holder_flush};

Test(task, an_idle_status_follows_what_the_chain_held_back)
{
    fixture_t f;
    fixture_init(&f, (const eddy_operator_ops_t *const[]){&capture_ops}, 1);
    eddy_err_t err = {{0}};
    int64_t available = 2;
    f.graph.stages[0].source = &ts_source_ops;
    f.graph.stages[0].source_config = &available;
    f.graph.stages[0].event_time =
        (eddy_event_time_t){.enabled = true, .interval_ms = 1000000, .idle_ms = 1};
    cr_assert_eq(eddy_graph_chain(&f.graph, 0, &holder_ops, NULL, &err), 0, "%s", err.msg);
    uint64_t clock = eddy_mono_ns();
    eddy_task_t *t = source_task(&f, 0, -1);
    run_source(t, &clock);
    cr_assert_neq(f.host.last_idle_seq, 0, "the source never went idle");
    cr_assert_eq(f.host.n_sent, 2, "the held records were not sent before the idle status");
    cr_assert_lt(f.host.last_record_seq, f.host.last_idle_seq,
                 "a held record went out after the idle status (record %u, idle %u)",
                 f.host.last_record_seq, f.host.last_idle_seq);
    eddy_task_destroy(&t);
    host_free_control(&f.host);
    eddy_graph_clear(&f.graph);
}
