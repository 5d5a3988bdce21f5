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
 *   goes back once, when it is read through. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "net/dataplane.h"
#include "runtime/task.h"

#include "leak_check.h"

TestSuite(task, .fini = eddy_test_leak_check);

/* ---- test host ---------------------------------------------------------- */

typedef struct host {
    uint32_t credits_returned;
    uint32_t done_reports;
} host_t;

static void count_message(host_t *h, char *data, size_t len)
{
    eddy_data_msg_t msg;
    eddy_err_t err;
    if (eddy_data_decode(data, len, &msg, &err) == 0) {
        if (msg.type == EDDY_DATA_CREDIT)
            h->credits_returned += msg.credit;
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
}

static void host_submit_snapshot(void *host, eddy_snapshot_unit_t *unit)
{
    (void)host;
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

/* ---- fixture ------------------------------------------------------------ */

#define WORKER 1

typedef struct fixture {
    host_t host;
    eddy_task_env_t env;
    eddy_job_graph_t graph;
    uint32_t src_workers[1], op_workers[2];
    eddy_stage_placement_t placement[2];
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
    f->placement[0] = (eddy_stage_placement_t){1, f->src_workers};
    f->placement[1] = (eddy_stage_placement_t){2, f->op_workers};
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
