/* test_source_state.c - a source's progress as bytes (write_state, commit and
 * ctx->source_state in api/operator.h) through a real task (runtime/task.h)
 * with a test host that captures the ACK:
 * - at a checkpoint barrier the task calls write_state, right where it takes
 *   position(), and the ACK carries the bytes;
 * - a task opened with those bytes (a restore) hands them to the source's
 *   open() in ctx->source_state, and a fresh one hands NULL;
 * - COMPLETE reaches the source's commit();
 * - a state above EDDY_SOURCE_STATE_MAX fails the task with a clear error. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "runtime/task.h"

#include "leak_check.h"

TestSuite(source_state, .fini = eddy_test_leak_check);

/* ---- a source that counts what it emitted ---------------------------------- */

typedef struct counting_source {
    uint64_t emitted;
    uint64_t committed;
    bool restored;
} counting_source_t;

static size_t state_size = 0; /* 0: "emitted=N"; else that many bytes (oversize test) */
static counting_source_t *last_opened;

static void *counting_open(const eddy_op_context_t *ctx, int64_t start, eddy_err_t *err)
{
    (void)start;
    counting_source_t *s = calloc(1, sizeof *s);
    if (!s) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    if (ctx->source_state) {
        char text[64];
        if (ctx->source_state_len >= sizeof text) {
            free(s);
            eddy_err_set(err, "malformed state");
            return NULL;
        }
        memcpy(text, ctx->source_state, ctx->source_state_len);
        text[ctx->source_state_len] = '\0';
        unsigned long long n;
        if (sscanf(text, "emitted=%llu", &n) != 1) {
            free(s);
            eddy_err_set(err, "malformed state '%s'", text);
            return NULL;
        }
        s->emitted = n;
        s->restored = true;
    }
    last_opened = s;
    return s;
}

static int counting_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    (void)err;
    counting_source_t *s = self;
    for (uint32_t i = 0; i < max && i < 3; i++) {
        eddy_record_t rec = eddy_record_make("x", 1, 1);
        eddy_emit(out, &rec);
        s->emitted++;
    }
    return 1;
}

static int64_t counting_position(void *self)
{
    return (int64_t)((counting_source_t *)self)->emitted;
}

static int counting_write_state(void *self, char **out, size_t *len, eddy_err_t *err)
{
    counting_source_t *s = self;
    size_t n = state_size ? state_size : 64;
    *out = malloc(n);
    if (!*out)
        return eddy_err_set(err, "out of memory");
    if (state_size) {
        memset(*out, 's', n);
        *len = n;
    } else {
        *len = (size_t)snprintf(*out, n, "emitted=%llu", (unsigned long long)s->emitted);
    }
    return 0;
}

static void counting_commit(void *self, uint64_t checkpoint)
{
    ((counting_source_t *)self)->committed = checkpoint;
}

static void counting_close(void *self)
{
    if (last_opened == self)
        last_opened = NULL;
    free(self);
}

static const eddy_source_ops_t counting_ops = {
    .kind = "counting", .replayable = true, .open = counting_open, .poll = counting_poll,
    .position = counting_position, .close = counting_close,
    .write_state = counting_write_state, .commit = counting_commit};

/* ---- test host ------------------------------------------------------------- */

typedef struct host {
    uint32_t acks;
    char ack_error[EDDY_ERROR_MAX];
    int64_t ack_position;
    char *ack_state;
    uint32_t ack_state_len;
} host_t;

static int host_send_remote(void *host, uint32_t worker_id, char *data, size_t len)
{
    (void)host;
    (void)worker_id;
    (void)len;
    free(data);
    return 0;
}

static void host_send_local(void *host, char *data, size_t len)
{
    (void)host;
    (void)len;
    free(data);
}

static void host_notify(void *host, const eddy_msg_t *msg)
{
    host_t *h = host;
    if (msg->type != EDDY_MSG_ACK)
        return;
    h->acks++;
    snprintf(h->ack_error, sizeof h->ack_error, "%s", msg->u.ack.error);
    h->ack_position = msg->u.ack.position;
    free(h->ack_state);
    h->ack_state = NULL;
    h->ack_state_len = msg->u.ack.source_state_len;
    if (msg->u.ack.source_state_len) {
        h->ack_state = malloc(msg->u.ack.source_state_len);
        memcpy(h->ack_state, msg->u.ack.source_state, msg->u.ack.source_state_len);
    }
}

static void host_submit_snapshot(void *host, eddy_snapshot_unit_t *unit)
{
    host_notify(host, &unit->ack);
    eddy_snapshot_unit_free(unit);
}

static void *pass_open(const eddy_op_context_t *ctx, eddy_err_t *err)
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

static const eddy_operator_ops_t pass_ops = {.kind = "pass", .open = pass_open,
                                             .process = pass_process};

/* ---- fixture ---------------------------------------------------------------- */

#define WORKER 1

typedef struct fixture {
    host_t host;
    eddy_task_env_t env;
    eddy_job_graph_t graph;
    uint32_t workers[1];
    eddy_stage_placement_t placement[2];
} fixture_t;

/* counting(1) -> pass(1), both on this worker. */
static void fixture_init(fixture_t *f)
{
    memset(f, 0, sizeof *f);
    f->env = (eddy_task_env_t){.host = &f->host, .send_remote = host_send_remote,
                               .send_local = host_send_local, .notify = host_notify,
                               .submit_snapshot = host_submit_snapshot, .self_worker_id = WORKER};
    eddy_err_t err = {{0}};
    eddy_graph_init(&f->graph, "test");
    f->graph.max_parallelism = 128;
    cr_assert(eddy_graph_add_source(&f->graph, "src", 1, &counting_ops, NULL, &err) == 0, "%s", err.msg);
    cr_assert(eddy_graph_add_stage(&f->graph, "op", 1, 0, EDDY_EDGE_FORWARD, NULL, &err) == 1,
              "%s", err.msg);
    cr_assert(eddy_graph_chain(&f->graph, 1, &pass_ops, NULL, &err) == 0, "%s", err.msg);
    f->workers[0] = WORKER;
    f->placement[0] = (eddy_stage_placement_t){.parallelism = 1, .worker_of = f->workers};
    f->placement[1] = (eddy_stage_placement_t){.parallelism = 1, .worker_of = f->workers};
    state_size = 0;
}

static void fixture_fini(fixture_t *f)
{
    free(f->host.ack_state);
    eddy_graph_clear(&f->graph);
}

static eddy_task_t *source_task(fixture_t *f, const void *state, size_t state_len, eddy_err_t *err)
{
    eddy_task_config_t cfg = {.job = 1, .epoch = 1, .job_id = "test", .graph = &f->graph,
                              .stage = 0, .instance = 0, .placement = {2, f->placement},
                              .start_position = state ? 0 : -1, .source_state = state,
                              .source_state_len = state_len,
                              .restore_checkpoint = state ? 5 : 0};
    return eddy_task_new(&f->env, &cfg, err);
}

/* ---- tests ------------------------------------------------------------------ */

Test(source_state, written_at_the_barrier_and_handed_back_at_restore)
{
    fixture_t f;
    fixture_init(&f);
    eddy_err_t err = {{0}};
    eddy_task_t *t = source_task(&f, NULL, 0, &err);
    cr_assert(t, "%s", err.msg);
    cr_assert_not(last_opened->restored, "a fresh source got a state");
    eddy_task_set_running(t, true);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(eddy_task_step(t, eddy_mono_ns(), &err), 0, "%s", err.msg);
    uint64_t emitted = last_opened->emitted;
    cr_assert_gt(emitted, 0);

    eddy_task_trigger(t, 5, false);
    cr_assert_eq(eddy_task_step(t, eddy_mono_ns(), &err), 0, "%s", err.msg);
    cr_assert_eq(f.host.acks, 1);
    cr_assert_str_empty(f.host.ack_error);
    cr_assert_eq(f.host.ack_position, (int64_t)emitted);
    char expected[64];
    snprintf(expected, sizeof expected, "emitted=%llu", (unsigned long long)emitted);
    cr_assert_eq(f.host.ack_state_len, strlen(expected));
    cr_assert_eq(memcmp(f.host.ack_state, expected, strlen(expected)), 0);

    /* more records after the barrier are not in the checkpoint */
    cr_assert_eq(eddy_task_step(t, eddy_mono_ns(), &err), 0, "%s", err.msg);
    cr_assert_gt(last_opened->emitted, emitted);
    /* COMPLETE(5) reaches the source */
    eddy_task_commit(t, 5, NULL);
    cr_assert_eq(last_opened->committed, 5);
    eddy_task_destroy(&t);

    /* the restore: the state the barrier took comes back at open() */
    t = source_task(&f, f.host.ack_state, f.host.ack_state_len, &err);
    cr_assert(t, "%s", err.msg);
    cr_assert(last_opened->restored);
    cr_assert_eq(last_opened->emitted, emitted);
    eddy_task_destroy(&t);

    /* a malformed state is the source's clear error */
    t = source_task(&f, "bogus", 5, &err);
    cr_assert_null(t);
    cr_assert(strstr(err.msg, "malformed state 'bogus'"), "%s", err.msg);
    fixture_fini(&f);
}

Test(source_state, an_oversized_state_fails_the_task)
{
    fixture_t f;
    fixture_init(&f);
    eddy_err_t err = {{0}};
    eddy_task_t *t = source_task(&f, NULL, 0, &err);
    cr_assert(t, "%s", err.msg);
    state_size = EDDY_SOURCE_STATE_MAX + 1;
    eddy_task_set_running(t, true);
    eddy_task_trigger(t, 3, false);
    cr_assert_eq(eddy_task_step(t, eddy_mono_ns(), &err), -1);
    cr_assert(strstr(err.msg, "exceeds the limit"), "%s", err.msg);
    cr_assert(eddy_task_failed(t));
    cr_assert_eq(f.host.acks, 1);
    cr_assert(strstr(f.host.ack_error, "exceeds the limit"), "%s", f.host.ack_error);
    cr_assert_null(f.host.ack_state);
    eddy_task_destroy(&t);

    /* exactly the limit is fine */
    t = source_task(&f, NULL, 0, &err);
    cr_assert(t, "%s", err.msg);
    state_size = EDDY_SOURCE_STATE_MAX;
    eddy_task_set_running(t, true);
    eddy_task_trigger(t, 4, false);
    cr_assert_eq(eddy_task_step(t, eddy_mono_ns(), &err), 0, "%s", err.msg);
    cr_assert_eq(f.host.ack_state_len, EDDY_SOURCE_STATE_MAX);
    eddy_task_destroy(&t);
    fixture_fini(&f);
}
