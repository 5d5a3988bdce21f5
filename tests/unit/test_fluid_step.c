/* test_fluid_step.c - one fluid migration step between real tasks
 * (runtime/task_migrate.c), wired through a test host that carries every
 * data-plane message between them in order, as the worker would.
 *
 * Stages: src (unused source) -> fwd[2] (pass-through; the test feeds it
 * batches) -HASH-> sum[2] (a changelog sum per word) -> out[1] (the host
 * reads what arrives there). A step moves key groups 0..7 of sum from
 * instance 0 to instance 1: fwd tasks put HANDOFF markers in band, sum[0]
 * sends the groups' state to sum[1] in checksummed chunks once it has every
 * marker, sum[1] holds their records until the state is installed.
 *
 * - counts are exact through the step (the moved keys go on from the counts
 *   they had), and sum[1] then holds the groups, sum[0] not;
 * - while the transfer is held back (the host keeps the chunks), records of
 *   every unmoved group keep flowing to out, those of moved groups wait;
 * - a corrupt chunk, or one that does not follow the bytes received, is
 *   refused and nothing of the group is loaded;
 * - a checkpoint whose barrier meets a step in flight is declined;
 * - the old owner's clock stops from a step's first HANDOFF until it gave
 *   the groups away (a window of theirs fired meanwhile would miss records
 *   already sent to the new owner), the new owner's while they arrive. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/dataplane.h"
#include "operators/operators.h"
#include "runtime/task.h"
#include "state/keygroup.h"
#include "state/snapshot_store.h"
#include "tests/support/etcd.h"

#include "leak_check.h"

TestSuite(fluid, .fini = eddy_test_leak_check);

#define WORKER 1
#define WORDS 200
#define MOVED 8 /* key groups 0..MOVED-1 move from sum[0] to sum[1] */
#define MAX_MSGS 4096

typedef struct msg_copy {
    char *data;
    size_t len;
} msg_copy_t;

typedef struct net {
    msg_copy_t q[MAX_MSGS];
    uint32_t head, tail;
    msg_copy_t held[MAX_MSGS]; /* STATE_CHUNKs kept back */
    uint32_t n_held;
    bool hold_chunks;
    int64_t count[WORDS];      /* the last count out saw per word, -1 none */
    uint32_t updates[WORDS];   /* how many results out saw per word */
    uint32_t acks;
    bool declined;
    int64_t wm_out[2];         /* the last watermark out saw from sum[i] */
} net_t;

static void net_send(void *host, char *data, size_t len)
{
    net_t *n = host;
    cr_assert_lt(n->tail, MAX_MSGS, "test network full");
    n->q[n->tail++] = (msg_copy_t){data, len};
}

static int net_send_remote(void *host, uint32_t worker, char *data, size_t len)
{
    (void)worker;
    net_send(host, data, len);
    return 0;
}

static void net_notify(void *host, const eddy_msg_t *msg)
{
    net_t *n = host;
    if (msg->type == EDDY_MSG_ACK) {
        n->acks++;
        n->declined |= msg->u.ack.declined;
    }
}

static void net_submit(void *host, eddy_snapshot_unit_t *unit)
{
    net_notify(host, &unit->ack);
    eddy_snapshot_unit_free(unit);
}

static uint32_t whole_key(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len;
}

static int no_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    (void)self, (void)out, (void)max, (void)err;
    return 0;
}
static int64_t no_position(void *self)
{
    (void)self;
    return 0;
}
static const eddy_source_ops_t unused_source = {.kind = "unused", .poll = no_poll,
                                                .position = no_position};

static void *pass_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)ctx, (void)err;
    static int token;
    return &token;
}
static int pass_process(void *self, const eddy_record_t *rec, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self, (void)err;
    eddy_emit(out, rec);
    return 0;
}
static const eddy_operator_ops_t pass_ops = {.kind = "pass", .open = pass_open,
                                             .process = pass_process};

typedef struct fixture {
    net_t net;
    eddy_task_env_t env;
    eddy_job_graph_t graph;
    eddy_aggregate_config_t sum;
    uint32_t workers[2];
    eddy_stage_placement_t placement[4];
    eddy_task_t *fwd[2], *sum_task[2];
    char *root;
    eddy_snapshot_store_t *store;
    uint32_t fed[WORDS];       /* records of each word fed so far */
} fixture_t;

static eddy_task_t *new_task(fixture_t *f, uint32_t stage, uint32_t instance)
{
    eddy_task_config_t cfg = {.job = 1, .epoch = 1, .job_id = "fluid", .graph = &f->graph,
                              .stage = stage, .instance = instance,
                              .placement = {4, f->placement}, .start_position = -1};
    eddy_err_t err = {{0}};
    eddy_task_t *t = eddy_task_new(&f->env, &cfg, &err);
    cr_assert(t, "%s", err.msg);
    return t;
}

static void setup(fixture_t *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < WORDS; i++)
        f->net.count[i] = -1;
    f->net.wm_out[0] = f->net.wm_out[1] = INT64_MIN;
    eddy_err_t err = {{0}};
    f->root = eddy_test_mkdtemp("fluid", &err);
    cr_assert(f->root, "%s", err.msg);
    f->store = eddy_snapshot_store_new(f->root, &err);
    cr_assert(f->store, "%s", err.msg);
    f->env = (eddy_task_env_t){.host = &f->net, .send_remote = net_send_remote,
                               .send_local = net_send, .notify = net_notify,
                               .submit_snapshot = net_submit, .store = f->store,
                               .self_worker_id = WORKER};
    eddy_graph_init(&f->graph, "fluid");
    f->graph.max_parallelism = 128;
    eddy_aggregate_sum_config(&f->sum, EDDY_EMIT_CHANGELOG);
    f->sum.combine = false;
    cr_assert(eddy_graph_add_source(&f->graph, "src", 1, &unused_source, NULL, &err) == 0);
    cr_assert(eddy_graph_add_stage(&f->graph, "fwd", 2, 0, EDDY_EDGE_REBALANCE, NULL, &err) == 1);
    cr_assert(eddy_graph_chain(&f->graph, 1, &pass_ops, NULL, &err) == 0, "%s", err.msg);
    cr_assert(eddy_graph_add_stage(&f->graph, "sum", 2, 1, EDDY_EDGE_HASH, whole_key, &err) == 2);
    cr_assert(eddy_graph_chain(&f->graph, 2, &eddy_aggregate_ops, &f->sum, &err) == 0, "%s", err.msg);
    cr_assert(eddy_graph_add_stage(&f->graph, "out", 1, 2, EDDY_EDGE_REBALANCE, NULL, &err) == 3);
    cr_assert(eddy_graph_chain(&f->graph, 3, &pass_ops, NULL, &err) == 0, "%s", err.msg);
    f->workers[0] = f->workers[1] = WORKER;
    f->placement[0] = (eddy_stage_placement_t){.parallelism = 1, .worker_of = f->workers};
    f->placement[1] = (eddy_stage_placement_t){.parallelism = 2, .worker_of = f->workers};
    f->placement[2] = (eddy_stage_placement_t){.parallelism = 2, .worker_of = f->workers};
    f->placement[3] = (eddy_stage_placement_t){.parallelism = 1, .worker_of = f->workers};
    for (uint32_t i = 0; i < 2; i++) {
        f->fwd[i] = new_task(f, 1, i);
        f->sum_task[i] = new_task(f, 2, i);
    }
}

static void teardown(fixture_t *f)
{
    for (uint32_t i = 0; i < 2; i++) {
        eddy_task_destroy(&f->fwd[i]);
        eddy_task_destroy(&f->sum_task[i]);
    }
    for (uint32_t i = f->net.head; i < f->net.tail; i++)
        free(f->net.q[i].data);
    for (uint32_t i = 0; i < f->net.n_held; i++)
        free(f->net.held[i].data);
    eddy_graph_clear(&f->graph);
    eddy_snapshot_store_destroy(&f->store);
    eddy_test_rm_rf(f->root);
    free(f->root);
}

static int word_index(const char *data, uint32_t len)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%.*s", (int)len, data);
    return atoi(buf + 1);
}

/* Delivers one message as the worker would; -1 when the task refused it. */
static int dispatch(fixture_t *f, char *data, size_t len, eddy_err_t *err)
{
    eddy_data_msg_t msg;
    cr_assert_eq(eddy_data_decode(data, len, &msg, err), 0, "%s", err->msg);
    eddy_channel_id_t ch = msg.channel;
    if (msg.type == EDDY_DATA_CREDIT) {
        eddy_task_t *t = ch.src_stage == 1 ? f->fwd[ch.src_instance]
                         : ch.src_stage == 2 ? f->sum_task[ch.src_instance] : NULL;
        if (t)
            eddy_task_credit(t, &ch, msg.credit);
        eddy_data_msg_close(&msg);
        free(data);
        return 0;
    }
    if (ch.dst_stage == 3) { /* out: read the results */
        if (msg.type == EDDY_DATA_WATERMARK && !msg.idle)
            f->net.wm_out[ch.src_instance] = msg.watermark;
        eddy_record_t rec;
        while (msg.type == EDDY_DATA_BATCH && eddy_data_next_record(&msg, &rec, err) == 1) {
            if (rec.kind != EDDY_INSERT && rec.kind != EDDY_UPDATE_AFTER)
                continue;
            int w = word_index(rec.data, rec.len);
            f->net.count[w] = rec.value;
            f->net.updates[w]++;
        }
        if (msg.type == EDDY_DATA_BATCH) /* out consumed it */
            eddy_task_credit(f->sum_task[ch.src_instance], &ch, 1);
        eddy_data_msg_close(&msg);
        free(data);
        return 0;
    }
    cr_assert_eq(ch.dst_stage, 2, "unexpected message for stage %u", ch.dst_stage);
    return eddy_task_deliver(f->sum_task[ch.dst_instance], &msg, NULL, data, err);
}

/* Carries messages and steps tasks until nothing moves. */
static void pump(fixture_t *f)
{
    for (int round = 0; round < 10000; round++) {
        bool busy = false;
        while (f->net.head < f->net.tail) {
            msg_copy_t m = f->net.q[f->net.head++];
            busy = true;
            eddy_data_msg_t peek;
            eddy_err_t err = {{0}};
            cr_assert_eq(eddy_data_decode(m.data, m.len, &peek, &err), 0, "%s", err.msg);
            bool chunk = peek.type == EDDY_DATA_STATE_CHUNK;
            eddy_data_msg_close(&peek);
            if (chunk && f->net.hold_chunks) {
                f->net.held[f->net.n_held++] = m;
                continue;
            }
            cr_assert_eq(dispatch(f, m.data, m.len, &err), 0, "%s", err.msg);
        }
        eddy_task_t *all[4] = {f->fwd[0], f->fwd[1], f->sum_task[0], f->sum_task[1]};
        for (int i = 0; i < 4; i++) {
            uint64_t now = 0;
            while (eddy_task_runnable(all[i], now)) {
                eddy_err_t err = {{0}};
                cr_assert_eq(eddy_task_step(all[i], now, &err), 0, "%s", err.msg);
                busy = true;
            }
            eddy_task_flush(all[i]);
        }
        if (!busy && f->net.head == f->net.tail)
            return;
    }
    cr_assert_fail("the test network never went quiet");
}

/* Feeds fwd[instance] one batch with every word whose index % mod == rest. */
static void feed(fixture_t *f, uint32_t instance, uint32_t mod, uint32_t rest)
{
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    eddy_channel_id_t ch = {1, 1, 0, 0, 1, instance};
    eddy_batch_writer_begin(&w, &ch);
    for (uint32_t i = 0; i < WORDS; i++) {
        if (i % mod != rest)
            continue;
        char word[16];
        int len = snprintf(word, sizeof word, "w%u", i);
        eddy_record_t rec = eddy_record_make(word, (uint32_t)len, 1);
        eddy_batch_writer_add(&w, &rec);
        f->fed[i]++;
    }
    size_t len;
    char *data = eddy_batch_writer_finish(&w, &len);
    eddy_batch_writer_free(&w);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert(eddy_data_decode(data, len, &msg, &err) == 0, "%s", err.msg);
    cr_assert(eddy_task_deliver(f->fwd[instance], &msg, NULL, data, &err) == 0, "%s", err.msg);
}

static uint32_t kg_of_word(uint32_t i)
{
    char word[16];
    int len = snprintf(word, sizeof word, "w%u", i);
    return eddy_key_group_of(word, (size_t)len, 128);
}

static void step(fixture_t *f, uint64_t version)
{
    uint32_t kgs[MOVED];
    for (uint32_t i = 0; i < MOVED; i++)
        kgs[i] = i;
    for (uint32_t i = 0; i < 2; i++) {
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_task_route_step(f->fwd[i], 2, version, kgs, MOVED, 1, &err), 0, "%s",
                     err.msg);
    }
}

static void expect_exact(const fixture_t *f)
{
    for (uint32_t i = 0; i < WORDS; i++)
        cr_assert_eq(f->net.count[i], (int64_t)f->fed[i], "w%u (key group %u): count %lld, fed %u",
                     i, kg_of_word(i), (long long)f->net.count[i], f->fed[i]);
}

Test(fluid, counts_stay_exact_through_a_step)
{
    fixture_t f;
    setup(&f);
    uint32_t moved_words = 0;
    for (uint32_t i = 0; i < WORDS; i++)
        moved_words += kg_of_word(i) < MOVED;
    cr_assert_gt(moved_words, 3, "the words should fall into the moved groups too");
    feed(&f, 0, 2, 0);
    feed(&f, 1, 2, 1);
    feed(&f, 0, 1, 0);
    pump(&f);
    expect_exact(&f);
    for (uint32_t kg = 0; kg < MOVED; kg++)
        cr_assert(eddy_task_holds_group(f.sum_task[0], kg));
    /* records in flight on both sides of the markers */
    feed(&f, 1, 1, 0);
    step(&f, 1);
    feed(&f, 0, 1, 0);
    feed(&f, 1, 3, 2);
    pump(&f);
    expect_exact(&f);
    for (uint32_t kg = 0; kg < MOVED; kg++) {
        cr_assert(!eddy_task_holds_group(f.sum_task[0], kg), "kg %u still at sum[0]", kg);
        cr_assert(eddy_task_holds_group(f.sum_task[1], kg), "kg %u not at sum[1]", kg);
    }
    cr_assert(eddy_task_holds_group(f.sum_task[0], MOVED));
    eddy_task_migration_stats_t s0, s1;
    eddy_task_migration_stats(f.sum_task[0], &s0);
    eddy_task_migration_stats(f.sum_task[1], &s1);
    cr_assert_eq(s0.groups_sent, MOVED);
    cr_assert_eq(s1.groups_received, MOVED);
    cr_assert_eq(s0.bytes_sent, s1.bytes_received);
    cr_assert_gt(s1.bytes_received, 0);
    cr_assert(!s0.in_flight && !s1.in_flight);
    /* and on after it */
    feed(&f, 0, 1, 0);
    feed(&f, 1, 1, 0);
    pump(&f);
    expect_exact(&f);
    teardown(&f);
}

Test(fluid, unmoved_groups_flow_while_the_transfer_is_held_back)
{
    fixture_t f;
    setup(&f);
    feed(&f, 0, 1, 0);
    pump(&f);
    expect_exact(&f);
    uint32_t before[WORDS];
    memcpy(before, f.net.updates, sizeof before);
    f.net.hold_chunks = true;
    step(&f, 1);
    feed(&f, 0, 1, 0);
    feed(&f, 1, 1, 0);
    pump(&f);
    cr_assert_gt(f.net.n_held, 0, "the old owner sent no state");
    eddy_task_migration_stats_t s1;
    eddy_task_migration_stats(f.sum_task[1], &s1);
    cr_assert_eq(s1.groups_incoming, MOVED);
    cr_assert_gt(s1.held_bytes, 0);
    for (uint32_t i = 0; i < WORDS; i++) {
        if (kg_of_word(i) < MOVED)
            cr_assert_eq(f.net.updates[i], before[i], "w%u of a moved group was counted without its state", i);
        else
            cr_assert_eq(f.net.count[i], (int64_t)f.fed[i], "w%u of an unmoved group did not flow: %lld of %u",
                         i, (long long)f.net.count[i], f.fed[i]);
    }
    /* the transfer goes through: the held records are counted on their state */
    f.net.hold_chunks = false;
    for (uint32_t i = 0; i < f.net.n_held; i++) {
        eddy_err_t err = {{0}};
        cr_assert_eq(dispatch(&f, f.net.held[i].data, f.net.held[i].len, &err), 0, "%s", err.msg);
    }
    f.net.n_held = 0;
    pump(&f);
    expect_exact(&f);
    eddy_task_migration_stats(f.sum_task[1], &s1);
    cr_assert_eq(s1.groups_incoming, 0);
    cr_assert_eq(s1.held_bytes, 0);
    teardown(&f);
}

/* The held chunks with one byte of the first non-empty one flipped. */
static msg_copy_t *first_chunk_with_bytes(fixture_t *f, eddy_data_msg_t *msg)
{
    for (uint32_t i = 0; i < f->net.n_held; i++) {
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_data_decode(f->net.held[i].data, f->net.held[i].len, msg, &err), 0);
        if (msg->chunk_len > 0)
            return &f->net.held[i];
        eddy_data_msg_close(msg);
    }
    cr_assert_fail("no chunk with bytes");
    return NULL;
}

Test(fluid, a_corrupt_chunk_is_refused_and_nothing_is_loaded)
{
    fixture_t f;
    setup(&f);
    feed(&f, 0, 1, 0);
    pump(&f);
    f.net.hold_chunks = true;
    step(&f, 1);
    pump(&f);
    eddy_data_msg_t msg;
    msg_copy_t *m = first_chunk_with_bytes(&f, &msg);
    uint32_t kg = msg.kg;
    size_t at = (size_t)(msg.chunk - m->data) + msg.chunk_len / 2;
    eddy_data_msg_close(&msg);
    m->data[at] ^= 0x5a;
    eddy_err_t err = {{0}};
    char *copy = malloc(m->len);
    memcpy(copy, m->data, m->len);
    cr_assert_eq(dispatch(&f, copy, m->len, &err), -1);
    cr_assert(strstr(err.msg, "corrupt state chunk"), "%s", err.msg);
    cr_assert(!eddy_task_holds_group(f.sum_task[1], kg));
    /* the task fails (the job restores from its last checkpoint) */
    cr_assert_eq(eddy_task_step(f.sum_task[1], 0, &err), -1);
    cr_assert(eddy_task_failed(f.sum_task[1]));
    teardown(&f);
}

Test(fluid, a_chunk_that_does_not_follow_is_refused)
{
    fixture_t f;
    setup(&f);
    feed(&f, 0, 1, 0);
    pump(&f);
    f.net.hold_chunks = true;
    step(&f, 1);
    pump(&f);
    eddy_data_msg_t msg;
    msg_copy_t *m = first_chunk_with_bytes(&f, &msg);
    uint32_t kg = msg.kg;
    /* a first chunk that claims the group is longer: it waits for more ... */
    eddy_channel_id_t ch = msg.channel;
    size_t len;
    char *longer = eddy_state_chunk_encode(&ch, msg.version, kg, 0, msg.total + 10, msg.chunk,
                                           msg.chunk_len, &len);
    /* ... and a chunk that skips bytes is refused */
    size_t len2;
    char *skips = eddy_state_chunk_encode(&ch, msg.version, kg, msg.chunk_len + 5, msg.total + 10,
                                          "12345", 5, &len2);
    eddy_data_msg_close(&msg);
    (void)m;
    eddy_err_t err = {{0}};
    cr_assert_eq(dispatch(&f, longer, len, &err), 0, "%s", err.msg);
    cr_assert(!eddy_task_holds_group(f.sum_task[1], kg));
    cr_assert_eq(dispatch(&f, skips, len2, &err), -1);
    cr_assert(strstr(err.msg, "does not follow"), "%s", err.msg);
    cr_assert(!eddy_task_holds_group(f.sum_task[1], kg));
    teardown(&f);
}

Test(fluid, a_checkpoint_meeting_a_step_in_flight_is_declined)
{
    fixture_t f;
    setup(&f);
    feed(&f, 0, 1, 0);
    pump(&f);
    f.net.hold_chunks = true;
    step(&f, 1);
    /* barrier 5 from both fwd instances, behind the markers */
    for (uint32_t i = 0; i < 2; i++)
        for (uint32_t d = 0; d < 2; d++) {
            eddy_channel_id_t ch = {1, 1, 1, i, 2, d};
            size_t len;
            char *b = eddy_barrier_encode(&ch, 5, &len);
            net_send(&f.net, b, len);
        }
    pump(&f);
    cr_assert(f.net.declined, "sum[1] took a snapshot without the groups coming to it");
    teardown(&f);
}

static void end_input(fixture_t *f, uint32_t instance)
{
    eddy_channel_id_t ch = {1, 1, 0, 0, 1, instance};
    size_t len;
    char *data = eddy_eos_encode(&ch, &len);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert(eddy_data_decode(data, len, &msg, &err) == 0, "%s", err.msg);
    cr_assert(eddy_task_deliver(f->fwd[instance], &msg, NULL, data, &err) == 0, "%s", err.msg);
}

/* The input ends while a step's transfer is held back: the old owner gives
 * its groups away at the end of its input, the new owner finishes only once
 * they arrived and their held records ran (this used to finish both,
 * losing the held records and counting the moved groups from zero). */
Test(fluid, the_end_of_input_waits_for_a_step_in_flight)
{
    fixture_t f;
    setup(&f);
    feed(&f, 0, 1, 0);
    pump(&f);
    f.net.hold_chunks = true;
    step(&f, 1);
    feed(&f, 1, 1, 0);
    end_input(&f, 0);
    end_input(&f, 1);
    pump(&f);
    cr_assert(eddy_task_finished(f.sum_task[0]));
    cr_assert(!eddy_task_finished(f.sum_task[1]), "the new owner finished without its groups");
    /* nor did its clock go to the end: its windows of the arriving groups
     * would never fire, their held records would all be late */
    cr_assert_neq(f.net.wm_out[1], EDDY_WATERMARK_MAX, "the new owner's clock ended before its groups came");
    f.net.hold_chunks = false;
    for (uint32_t i = 0; i < f.net.n_held; i++) {
        eddy_err_t err = {{0}};
        cr_assert_eq(dispatch(&f, f.net.held[i].data, f.net.held[i].len, &err), 0, "%s", err.msg);
    }
    f.net.n_held = 0;
    pump(&f);
    cr_assert(eddy_task_finished(f.sum_task[1]));
    cr_assert_eq(f.net.wm_out[1], EDDY_WATERMARK_MAX);
    expect_exact(&f);
    teardown(&f);
}

/* A watermark into fwd[instance] from the source. */
static void feed_watermark(fixture_t *f, uint32_t instance, int64_t wm)
{
    eddy_channel_id_t ch = {1, 1, 0, 0, 1, instance};
    size_t len;
    char *data = eddy_watermark_encode(&ch, wm, false, &len);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert(eddy_data_decode(data, len, &msg, &err) == 0, "%s", err.msg);
    cr_assert(eddy_task_deliver(f->fwd[instance], &msg, NULL, data, &err) == 0, "%s", err.msg);
}

/* fwd[0] applied the step, fwd[1] not yet: sum[0] has one HANDOFF of two.
 * A watermark that passes both fwd tasks must not move sum[0]'s clock: its
 * windows of the leaving groups would fire without the records fwd[0]
 * already sends to sum[1] (this used to fire them, short, and sum[1] then
 * dropped those records as late). Once fwd[1]'s HANDOFF is in too, sum[0]
 * gives the groups away and its clock moves on; sum[1]'s moves once they
 * arrived. */
Test(fluid, the_old_owner_clock_waits_until_the_groups_left)
{
    fixture_t f;
    setup(&f);
    feed_watermark(&f, 0, 500);
    feed_watermark(&f, 1, 500);
    feed(&f, 0, 1, 0);
    pump(&f);
    cr_assert_eq(f.net.wm_out[0], 500);
    cr_assert_eq(f.net.wm_out[1], 500);
    uint32_t kgs[MOVED];
    for (uint32_t i = 0; i < MOVED; i++)
        kgs[i] = i;
    eddy_err_t err = {{0}};
    f.net.hold_chunks = true;
    cr_assert_eq(eddy_task_route_step(f.fwd[0], 2, 1, kgs, MOVED, 1, &err), 0, "%s", err.msg);
    feed(&f, 0, 1, 0); /* moved words now go to sum[1] and wait there */
    feed_watermark(&f, 0, 1000);
    feed_watermark(&f, 1, 1000);
    pump(&f);
    eddy_task_migration_stats_t s0;
    eddy_task_migration_stats(f.sum_task[0], &s0);
    cr_assert(s0.in_flight, "sum[0] gave the groups away with one HANDOFF of two");
    cr_assert_eq(f.net.wm_out[0], 500, "the old owner's clock moved to %lld with a step half in",
                 (long long)f.net.wm_out[0]);
    cr_assert_eq(f.net.wm_out[1], 500, "the new owner's clock moved to %lld before its groups came",
                 (long long)f.net.wm_out[1]);
    cr_assert_eq(eddy_task_route_step(f.fwd[1], 2, 1, kgs, MOVED, 1, &err), 0, "%s", err.msg);
    pump(&f);
    cr_assert_gt(f.net.n_held, 0, "the old owner sent no state");
    cr_assert_eq(f.net.wm_out[0], 1000, "the old owner's clock stayed at %lld after the groups left",
                 (long long)f.net.wm_out[0]);
    cr_assert_eq(f.net.wm_out[1], 500);
    f.net.hold_chunks = false;
    for (uint32_t i = 0; i < f.net.n_held; i++)
        cr_assert_eq(dispatch(&f, f.net.held[i].data, f.net.held[i].len, &err), 0, "%s", err.msg);
    f.net.n_held = 0;
    pump(&f);
    cr_assert_eq(f.net.wm_out[1], 1000, "the new owner's clock stayed at %lld after the groups came",
                 (long long)f.net.wm_out[1]);
    expect_exact(&f);
    teardown(&f);
}
