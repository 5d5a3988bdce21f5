/* test_proto.c - the control-plane codec (net/proto.c).
 *
 * Every message type in proto.h is built with non-trivial values, encoded,
 * decoded and compared field by field. Then the decoder is attacked with
 * what a stranger on the coordinator's port could send: every truncation
 * and every single-byte change of every message (decoding either fails
 * cleanly or yields a message that re-encodes to the same thing; never a
 * crash, and under EDDY_SANITIZE never a leak or out-of-bounds access),
 * missing/extra fields, wrongly typed fields, unknown types, out-of-range
 * numbers, strings and vectors over their limits, and container headers
 * that announce billions of elements. Malformed messages are made by
 * splicing msgpack values into a valid encoding (see splice()). */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"
#include "net/proto.h"

#include "leak_check.h"

TestSuite(proto, .fini = eddy_test_leak_check);

/* ---- building sample messages ------------------------------------------- */

static eddy_task_metrics_t sample_metrics(uint32_t i)
{
    eddy_task_metrics_t m = {
        .job = 7,
        .epoch = 3 + i,
        .stage = i % EDDY_MAX_STAGES,
        .instance = (i * 977) % EDDY_MAX_PARALLELISM,
        .records_in = 1000000007ull * i,
        .records_out = UINT64_MAX - i,
        .busy_ns = 123456789ull << (i % 20),
        .idle_ns = i,
        .blocked_ns = 0,
        .state_keys = 42ull * i,
        .state_bytes = (1ull << 40) + i,
        .position = i % 2 ? -1 : (int64_t)i * 1000,
        .offered_rate = i % 3 ? 12345.625 * i : 0.0,
        .watermark = i % 2 ? INT64_MIN : 1700000000000 + i,
        .late_records = 3ull * i,
        .source_lag = i ? 1000 * (int64_t)i : -1,
        .rejected_records = 7ull * i,
    };
    m.n_key_loads = i % 3; /* none, one, two keyed outputs */
    for (uint32_t k = 0; k < m.n_key_loads; k++)
        m.key_loads[k] = (eddy_key_load_t){.dst_stage = (i + k + 1) % EDDY_MAX_STAGES,
                                           .key_group = (i * 4099 + k) % EDDY_MAX_PARALLELISM,
                                           .key_group_records = 300ull * i,
                                           .records = 1000ull * i + k,
                                           .window_ms = 1000 + i};
    return m;
}

static char *const sample_args[] = {"--rate=100000", "--words=/data/words.txt", "",
                                    "--note=ünïcödé, spaces and \"quotes\""};

/* A message of the given type with every field set; heap parts are owned by
 * the message, so eddy_msg_clear frees it. */
static eddy_msg_t make_msg(eddy_msg_type_t type)
{
    eddy_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = type;
    switch (type) {
    case EDDY_MSG_REGISTER:
        strcpy(m.u.reg.name, "worker-7");
        strcpy(m.u.reg.data_endpoint, "tcp://10.1.2.3:41234");
        m.u.reg.pid = 4194301;
        strcpy(m.u.reg.host, "node-7.rack-2.example.org");
        m.u.reg.protocol_version = EDDY_PROTOCOL_VERSION;
        m.u.reg.cores = 96;
        break;
    case EDDY_MSG_REGISTERED:
        m.u.registered.worker_id = 4000000000u;
        m.u.registered.heartbeat_ms = 250;
        strcpy(m.u.registered.error, "name 'worker-7' already registered from 10.1.2.4");
        m.u.registered.liveness_token = 0xfedcba9876543210ull;
        break;
    case EDDY_MSG_HEARTBEAT:
        m.u.heartbeat.worker_id = 12;
        m.u.heartbeat.n_tasks = 5;
        m.u.heartbeat.tasks = calloc(5, sizeof *m.u.heartbeat.tasks);
        for (uint32_t i = 0; i < 5; i++)
            m.u.heartbeat.tasks[i] = sample_metrics(i);
        break;
    case EDDY_MSG_DEPLOY: {
        eddy_deploy_t *d = &m.u.deploy;
        d->job = 2;
        strcpy(d->job_id, "wordcount-prod");
        strcpy(d->job_name, "wordcount");
        d->plan_len = 300;
        d->plan = malloc(d->plan_len);
        for (uint32_t i = 0; i < d->plan_len; i++)
            d->plan[i] = (char)(i * 7); /* bytes, NULs included */
        d->plan_fingerprint = 0xfedcba9876543210ull;
        d->n_plugins = 2;
        static char *const plugins[] = {"0123456789abcdef0123456789abcdef",
                                        "fedcba9876543210fedcba9876543210"};
        d->plugins = eddy_strv_dup(2, plugins);
        d->epoch = 9;
        d->mode = EDDY_DEPLOY_RESCALE;
        d->restore_checkpoint = 0x123456789abcull;
        strcpy(d->snapshot_dir, "/var/lib/eddy/snapshots/wordcount-prod");
        strcpy(d->storage_uri, "s3://eddy-ck/prod?endpoint=http://127.0.0.1:9000&region=eu-west-1");
        d->checkpoint_full_every = 10;
        strcpy(d->restore_uri, "/var/lib/eddy/savepoints/savepoint-wordcount-17");
        strcpy(d->restore_job, "wordcount");
        d->max_parallelism = 128;
        d->guarantee = EDDY_GUARANTEE_AT_MOST_ONCE;
        d->n_stages = 3;
        d->stages = calloc(3, sizeof *d->stages);
        static const uint32_t par[3] = {2, 5, 1};
        for (uint32_t s = 0; s < 3; s++) {
            d->stages[s].parallelism = par[s];
            d->stages[s].worker_of = calloc(par[s], sizeof(uint32_t));
            for (uint32_t i = 0; i < par[s]; i++)
                d->stages[s].worker_of[i] = (s * 7 + i * 3) % 4 + (s == 1 ? 4000000000u : 0);
        }
        d->n_workers = 3;
        d->workers = calloc(3, sizeof *d->workers);
        for (uint32_t i = 0; i < 3; i++) {
            d->workers[i].id = i * 1000 + 1;
            snprintf(d->workers[i].endpoint, sizeof d->workers[i].endpoint,
                     "tcp://worker-%u.example.org:%u", i, 40000 + i);
        }
        d->n_positions = 2;
        d->positions = calloc(2, sizeof *d->positions);
        d->positions[0] = (eddy_source_position_t){0, 0, 0, NULL, 0};
        d->positions[1] = (eddy_source_position_t){0, 1, INT64_MAX, malloc(7), 7};
        memcpy(d->positions[1].state, "a\0\xff" "b\nc", 7); /* source state bytes */
        d->n_finished = 2;
        d->finished = calloc(2, sizeof *d->finished);
        d->finished[0] = (eddy_task_ref_t){0, 1};
        d->finished[1] = (eddy_task_ref_t){1, 4};
        d->n_renames = 1;
        d->renames = calloc(1, sizeof *d->renames);
        d->renames[0] = (eddy_task_rename_t){1, 6, 2};
        break;
    }
    case EDDY_MSG_DEPLOYED:
        m.u.deployed.job = 2;
        m.u.deployed.epoch = 9;
        m.u.deployed.bytes_loaded = 5ull << 33;
        m.u.deployed.groups_loaded = 128;
        m.u.deployed.groups_local = 85;
        m.u.deployed.bytes_local = 3ull << 32;
        strcpy(m.u.deployed.error, "checkpoint 17: key group 5: checksum mismatch");
        break;
    case EDDY_MSG_START:
        m.u.start.job = 2;
        m.u.start.epoch = UINT32_MAX;
        break;
    case EDDY_MSG_TRIGGER:
        m.u.trigger.job = 2;
        m.u.trigger.epoch = 9;
        m.u.trigger.checkpoint = UINT64_MAX;
        m.u.trigger.pause_after = true;
        m.u.trigger.migrate_stage = 3;
        m.u.trigger.migrate_parallelism = 17;
        m.u.trigger.n_moving = 2;
        m.u.trigger.moving = malloc(2 * sizeof *m.u.trigger.moving);
        m.u.trigger.moving[0] = 0;
        m.u.trigger.moving[1] = 16;
        strcpy(m.u.trigger.savepoint_uri, "s3://sp/wordcount?endpoint=http://127.0.0.1:9000");
        break;
    case EDDY_MSG_ACK:
        m.u.ack.job = 2;
        m.u.ack.epoch = 9;
        m.u.ack.checkpoint = 17;
        m.u.ack.stage = EDDY_MAX_STAGES - 1;
        m.u.ack.instance = EDDY_MAX_PARALLELISM - 1;
        m.u.ack.position = INT64_MIN;
        m.u.ack.state_keys = 99999;
        m.u.ack.bytes_written = 1ull << 36;
        m.u.ack.files_written = 128;
        strcpy(m.u.ack.error, "write /snap/17/5: No space left on device");
        m.u.ack.source_state_len = 9;
        m.u.ack.source_state = malloc(9);
        memcpy(m.u.ack.source_state, "f\0i\xffle:17", 9);
        m.u.ack.declined = true;
        m.u.ack.n_ended = 3;
        m.u.ack.ended = calloc(3, sizeof *m.u.ack.ended);
        m.u.ack.ended[0] = (eddy_task_ref_t){0, 2};
        m.u.ack.ended[1] = (eddy_task_ref_t){EDDY_MAX_STAGES - 1, EDDY_MAX_PARALLELISM - 1};
        m.u.ack.ended[2] = (eddy_task_ref_t){1, 0};
        m.u.ack.sync_us = 812;
        m.u.ack.async_us = 1ull << 40;
        m.u.ack.align_us = 77;
        m.u.ack.files_referenced = 96;
        break;
    case EDDY_MSG_COMPLETE:
        m.u.complete.job = 2;
        m.u.complete.checkpoint = 1ull << 63;
        break;
    case EDDY_MSG_TASK_DONE:
        m.u.task_done.job = 2;
        m.u.task_done.epoch = 9;
        m.u.task_done.stage = 1;
        m.u.task_done.instance = 4;
        break;
    case EDDY_MSG_TASK_FAILED:
        m.u.task_failed.job = 2;
        m.u.task_failed.epoch = 9;
        m.u.task_failed.stage = 2;
        m.u.task_failed.instance = 0;
        strcpy(m.u.task_failed.error, "operator 'count' failed: out of memory");
        break;
    case EDDY_MSG_RELEASE:
        m.u.release.job = UINT32_MAX;
        m.u.release.reason = EDDY_RELEASE_CANCELLED;
        break;
    case EDDY_MSG_REQUEST:
        strcpy(m.u.request.verb, "submit");
        m.u.request.argc = 4;
        m.u.request.argv = eddy_strv_dup(4, sample_args);
        break;
    case EDDY_MSG_REPLY:
        m.u.reply.status = -22;
        m.u.reply.body = strdup("job wordcount-prod:\n  stage 0: 2 instances\n  stage 1: 5 "
                                "instances\n\tlag: 12 ms \xe2\x9c\x93\n");
        break;
    case EDDY_MSG_PLUGIN:
        strcpy(m.u.plugin.hash, "0123456789abcdef0123456789abcdef");
        m.u.plugin.len = 1000;
        m.u.plugin.data = malloc(m.u.plugin.len);
        for (uint32_t i = 0; i < m.u.plugin.len; i++)
            m.u.plugin.data[i] = (char)(i * 13); /* ELF bytes: NULs and all */
        strcpy(m.u.plugin.error, "no such plugin");
        break;
    case EDDY_MSG_LEAVE:
        strcpy(m.u.leave.reason, "stopped by SIGTERM");
        break;
    case EDDY_MSG_ROUTE_STEP:
        m.u.route_step.job = 3;
        m.u.route_step.epoch = 9;
        m.u.route_step.stage = 2;
        m.u.route_step.version = (9ull << 32) | 4;
        m.u.route_step.to = 5;
        m.u.route_step.n_kgs = 3;
        m.u.route_step.kgs = malloc(3 * sizeof(uint32_t));
        m.u.route_step.kgs[0] = 0;
        m.u.route_step.kgs[1] = 64;
        m.u.route_step.kgs[2] = 127;
        break;
    case EDDY_MSG_LIVENESS:
        m.u.liveness.worker_id = 4000000000u;
        m.u.liveness.token = UINT64_MAX - 1;
        m.u.liveness.loop_silent_ms = 61234;
        break;
    case EDDY_MSG_STEP_DONE:
        m.u.step_done.job = 3;
        m.u.step_done.epoch = 9;
        m.u.step_done.stage = 2;
        m.u.step_done.instance = 5;
        m.u.step_done.version = (9ull << 32) | 4;
        m.u.step_done.groups = 3;
        m.u.step_done.bytes = 1ull << 33;
        m.u.step_done.transfer_us = 12345;
        break;
    default:
        break;
    }
    return m;
}

/* ---- comparing ---------------------------------------------------------- */

static void assert_metrics_eq(const eddy_task_metrics_t *a, const eddy_task_metrics_t *b)
{
    cr_assert_eq(a->job, b->job);
    cr_assert_eq(a->epoch, b->epoch);
    cr_assert_eq(a->stage, b->stage);
    cr_assert_eq(a->instance, b->instance);
    cr_assert_eq(a->records_in, b->records_in);
    cr_assert_eq(a->records_out, b->records_out);
    cr_assert_eq(a->busy_ns, b->busy_ns);
    cr_assert_eq(a->idle_ns, b->idle_ns);
    cr_assert_eq(a->blocked_ns, b->blocked_ns);
    cr_assert_eq(a->state_keys, b->state_keys);
    cr_assert_eq(a->state_bytes, b->state_bytes);
    cr_assert_eq(a->position, b->position);
    /* Bitwise, so a NaN made by a flipped byte still compares equal. */
    cr_assert_eq(memcmp(&a->offered_rate, &b->offered_rate, sizeof a->offered_rate), 0);
    cr_assert_eq(a->watermark, b->watermark);
    cr_assert_eq(a->late_records, b->late_records);
    cr_assert_eq(a->source_lag, b->source_lag);
    cr_assert_eq(a->rejected_records, b->rejected_records);
    cr_assert_eq(a->n_key_loads, b->n_key_loads);
    for (uint32_t k = 0; k < a->n_key_loads; k++) {
        cr_assert_eq(a->key_loads[k].dst_stage, b->key_loads[k].dst_stage);
        cr_assert_eq(a->key_loads[k].key_group, b->key_loads[k].key_group);
        cr_assert_eq(a->key_loads[k].key_group_records, b->key_loads[k].key_group_records);
        cr_assert_eq(a->key_loads[k].records, b->key_loads[k].records);
        cr_assert_eq(a->key_loads[k].window_ms, b->key_loads[k].window_ms);
    }
}

static void assert_strv_eq(uint32_t ac, char **av, uint32_t bc, char **bv)
{
    cr_assert_eq(ac, bc);
    for (uint32_t i = 0; i < ac; i++) {
        cr_assert_not_null(av[i]);
        cr_assert_not_null(bv[i]);
        cr_assert_str_eq(av[i], bv[i]);
    }
}

static void assert_msg_eq(const eddy_msg_t *a, const eddy_msg_t *b)
{
    cr_assert_eq(a->type, b->type);
    switch (a->type) {
    case EDDY_MSG_REGISTER:
        cr_assert_str_eq(a->u.reg.name, b->u.reg.name);
        cr_assert_str_eq(a->u.reg.data_endpoint, b->u.reg.data_endpoint);
        cr_assert_eq(a->u.reg.pid, b->u.reg.pid);
        cr_assert_str_eq(a->u.reg.host, b->u.reg.host);
        cr_assert_eq(a->u.reg.protocol_version, b->u.reg.protocol_version);
        cr_assert_eq(a->u.reg.cores, b->u.reg.cores);
        break;
    case EDDY_MSG_REGISTERED:
        cr_assert_eq(a->u.registered.worker_id, b->u.registered.worker_id);
        cr_assert_eq(a->u.registered.heartbeat_ms, b->u.registered.heartbeat_ms);
        cr_assert_str_eq(a->u.registered.error, b->u.registered.error);
        cr_assert_eq(a->u.registered.liveness_token, b->u.registered.liveness_token);
        break;
    case EDDY_MSG_HEARTBEAT:
        cr_assert_eq(a->u.heartbeat.worker_id, b->u.heartbeat.worker_id);
        cr_assert_eq(a->u.heartbeat.n_tasks, b->u.heartbeat.n_tasks);
        for (uint32_t i = 0; i < a->u.heartbeat.n_tasks; i++)
            assert_metrics_eq(&a->u.heartbeat.tasks[i], &b->u.heartbeat.tasks[i]);
        break;
    case EDDY_MSG_DEPLOY: {
        const eddy_deploy_t *x = &a->u.deploy, *y = &b->u.deploy;
        cr_assert_eq(x->job, y->job);
        cr_assert_str_eq(x->job_id, y->job_id);
        cr_assert_str_eq(x->job_name, y->job_name);
        cr_assert_eq(x->plan_len, y->plan_len);
        cr_assert(x->plan_len == 0 || !memcmp(x->plan, y->plan, x->plan_len));
        cr_assert_eq(x->plan_fingerprint, y->plan_fingerprint);
        assert_strv_eq(x->n_plugins, x->plugins, y->n_plugins, y->plugins);
        cr_assert_eq(x->epoch, y->epoch);
        cr_assert_eq(x->mode, y->mode);
        cr_assert_eq(x->restore_checkpoint, y->restore_checkpoint);
        cr_assert_str_eq(x->snapshot_dir, y->snapshot_dir);
        cr_assert_str_eq(x->storage_uri, y->storage_uri);
        cr_assert_eq(x->checkpoint_full_every, y->checkpoint_full_every);
        cr_assert_str_eq(x->restore_uri, y->restore_uri);
        cr_assert_str_eq(x->restore_job, y->restore_job);
        cr_assert_eq(x->max_parallelism, y->max_parallelism);
        cr_assert_eq(x->guarantee, y->guarantee);
        cr_assert_eq(x->n_stages, y->n_stages);
        for (uint32_t s = 0; s < x->n_stages; s++) {
            cr_assert_eq(x->stages[s].parallelism, y->stages[s].parallelism);
            for (uint32_t i = 0; i < x->stages[s].parallelism; i++)
                cr_assert_eq(x->stages[s].worker_of[i], y->stages[s].worker_of[i]);
        }
        cr_assert_eq(x->n_workers, y->n_workers);
        for (uint32_t i = 0; i < x->n_workers; i++) {
            cr_assert_eq(x->workers[i].id, y->workers[i].id);
            cr_assert_str_eq(x->workers[i].endpoint, y->workers[i].endpoint);
        }
        cr_assert_eq(x->n_positions, y->n_positions);
        for (uint32_t i = 0; i < x->n_positions; i++) {
            cr_assert_eq(x->positions[i].stage, y->positions[i].stage);
            cr_assert_eq(x->positions[i].instance, y->positions[i].instance);
            cr_assert_eq(x->positions[i].position, y->positions[i].position);
            cr_assert_eq(x->positions[i].state_len, y->positions[i].state_len);
            cr_assert(!x->positions[i].state_len ||
                      !memcmp(x->positions[i].state, y->positions[i].state, x->positions[i].state_len));
        }
        cr_assert_eq(x->n_finished, y->n_finished);
        for (uint32_t i = 0; i < x->n_finished; i++) {
            cr_assert_eq(x->finished[i].stage, y->finished[i].stage);
            cr_assert_eq(x->finished[i].instance, y->finished[i].instance);
        }
        cr_assert_eq(x->n_renames, y->n_renames);
        for (uint32_t i = 0; i < x->n_renames; i++) {
            cr_assert_eq(x->renames[i].stage, y->renames[i].stage);
            cr_assert_eq(x->renames[i].from, y->renames[i].from);
            cr_assert_eq(x->renames[i].to, y->renames[i].to);
        }
        break;
    }
    case EDDY_MSG_DEPLOYED:
        cr_assert_eq(a->u.deployed.job, b->u.deployed.job);
        cr_assert_eq(a->u.deployed.epoch, b->u.deployed.epoch);
        cr_assert_eq(a->u.deployed.bytes_loaded, b->u.deployed.bytes_loaded);
        cr_assert_eq(a->u.deployed.groups_loaded, b->u.deployed.groups_loaded);
        cr_assert_eq(a->u.deployed.groups_local, b->u.deployed.groups_local);
        cr_assert_eq(a->u.deployed.bytes_local, b->u.deployed.bytes_local);
        cr_assert_str_eq(a->u.deployed.error, b->u.deployed.error);
        break;
    case EDDY_MSG_START:
        cr_assert_eq(a->u.start.job, b->u.start.job);
        cr_assert_eq(a->u.start.epoch, b->u.start.epoch);
        break;
    case EDDY_MSG_TRIGGER:
        cr_assert_eq(a->u.trigger.job, b->u.trigger.job);
        cr_assert_eq(a->u.trigger.epoch, b->u.trigger.epoch);
        cr_assert_eq(a->u.trigger.checkpoint, b->u.trigger.checkpoint);
        cr_assert_eq(a->u.trigger.pause_after, b->u.trigger.pause_after);
        cr_assert_eq(a->u.trigger.migrate_stage, b->u.trigger.migrate_stage);
        cr_assert_eq(a->u.trigger.migrate_parallelism, b->u.trigger.migrate_parallelism);
        cr_assert_eq(a->u.trigger.n_moving, b->u.trigger.n_moving);
        for (uint32_t i = 0; i < a->u.trigger.n_moving; i++)
            cr_assert_eq(a->u.trigger.moving[i], b->u.trigger.moving[i]);
        cr_assert_str_eq(a->u.trigger.savepoint_uri, b->u.trigger.savepoint_uri);
        break;
    case EDDY_MSG_ACK:
        cr_assert_eq(a->u.ack.job, b->u.ack.job);
        cr_assert_eq(a->u.ack.epoch, b->u.ack.epoch);
        cr_assert_eq(a->u.ack.checkpoint, b->u.ack.checkpoint);
        cr_assert_eq(a->u.ack.stage, b->u.ack.stage);
        cr_assert_eq(a->u.ack.instance, b->u.ack.instance);
        cr_assert_eq(a->u.ack.position, b->u.ack.position);
        cr_assert_eq(a->u.ack.state_keys, b->u.ack.state_keys);
        cr_assert_eq(a->u.ack.bytes_written, b->u.ack.bytes_written);
        cr_assert_eq(a->u.ack.files_written, b->u.ack.files_written);
        cr_assert_str_eq(a->u.ack.error, b->u.ack.error);
        cr_assert_eq(a->u.ack.declined, b->u.ack.declined);
        cr_assert_eq(a->u.ack.sync_us, b->u.ack.sync_us);
        cr_assert_eq(a->u.ack.async_us, b->u.ack.async_us);
        cr_assert_eq(a->u.ack.align_us, b->u.ack.align_us);
        cr_assert_eq(a->u.ack.files_referenced, b->u.ack.files_referenced);
        cr_assert_eq(a->u.ack.n_ended, b->u.ack.n_ended);
        for (uint32_t i = 0; i < a->u.ack.n_ended; i++) {
            cr_assert_eq(a->u.ack.ended[i].stage, b->u.ack.ended[i].stage);
            cr_assert_eq(a->u.ack.ended[i].instance, b->u.ack.ended[i].instance);
        }
        cr_assert_eq(a->u.ack.source_state_len, b->u.ack.source_state_len);
        cr_assert(!a->u.ack.source_state_len ||
                  !memcmp(a->u.ack.source_state, b->u.ack.source_state, a->u.ack.source_state_len));
        break;
    case EDDY_MSG_COMPLETE:
        cr_assert_eq(a->u.complete.job, b->u.complete.job);
        cr_assert_eq(a->u.complete.checkpoint, b->u.complete.checkpoint);
        break;
    case EDDY_MSG_TASK_DONE:
        cr_assert_eq(a->u.task_done.job, b->u.task_done.job);
        cr_assert_eq(a->u.task_done.epoch, b->u.task_done.epoch);
        cr_assert_eq(a->u.task_done.stage, b->u.task_done.stage);
        cr_assert_eq(a->u.task_done.instance, b->u.task_done.instance);
        break;
    case EDDY_MSG_TASK_FAILED:
        cr_assert_eq(a->u.task_failed.job, b->u.task_failed.job);
        cr_assert_eq(a->u.task_failed.epoch, b->u.task_failed.epoch);
        cr_assert_eq(a->u.task_failed.stage, b->u.task_failed.stage);
        cr_assert_eq(a->u.task_failed.instance, b->u.task_failed.instance);
        cr_assert_str_eq(a->u.task_failed.error, b->u.task_failed.error);
        break;
    case EDDY_MSG_RELEASE:
        cr_assert_eq(a->u.release.job, b->u.release.job);
        cr_assert_eq(a->u.release.reason, b->u.release.reason);
        break;
    case EDDY_MSG_REQUEST:
        cr_assert_str_eq(a->u.request.verb, b->u.request.verb);
        assert_strv_eq(a->u.request.argc, a->u.request.argv, b->u.request.argc,
                       b->u.request.argv);
        break;
    case EDDY_MSG_REPLY:
        cr_assert_eq(a->u.reply.status, b->u.reply.status);
        cr_assert_str_eq(a->u.reply.body ? a->u.reply.body : "",
                         b->u.reply.body ? b->u.reply.body : "");
        break;
    case EDDY_MSG_PLUGIN:
        cr_assert_str_eq(a->u.plugin.hash, b->u.plugin.hash);
        cr_assert_eq(a->u.plugin.len, b->u.plugin.len);
        cr_assert(a->u.plugin.len == 0 || !memcmp(a->u.plugin.data, b->u.plugin.data, a->u.plugin.len));
        cr_assert_str_eq(a->u.plugin.error, b->u.plugin.error);
        break;
    case EDDY_MSG_LEAVE:
        cr_assert_str_eq(a->u.leave.reason, b->u.leave.reason);
        break;
    case EDDY_MSG_ROUTE_STEP:
        cr_assert_eq(a->u.route_step.job, b->u.route_step.job);
        cr_assert_eq(a->u.route_step.epoch, b->u.route_step.epoch);
        cr_assert_eq(a->u.route_step.stage, b->u.route_step.stage);
        cr_assert_eq(a->u.route_step.version, b->u.route_step.version);
        cr_assert_eq(a->u.route_step.to, b->u.route_step.to);
        cr_assert_eq(a->u.route_step.n_kgs, b->u.route_step.n_kgs);
        for (uint32_t i = 0; i < a->u.route_step.n_kgs; i++)
            cr_assert_eq(a->u.route_step.kgs[i], b->u.route_step.kgs[i]);
        break;
    case EDDY_MSG_STEP_DONE:
        cr_assert_eq(memcmp(&a->u.step_done, &b->u.step_done, sizeof a->u.step_done), 0);
        break;
    case EDDY_MSG_LIVENESS:
        cr_assert_eq(a->u.liveness.worker_id, b->u.liveness.worker_id);
        cr_assert_eq(a->u.liveness.token, b->u.liveness.token);
        cr_assert_eq(a->u.liveness.loop_silent_ms, b->u.liveness.loop_silent_ms);
        break;
    default:
        cr_assert_fail("unexpected type %d", a->type);
    }
}

static bool is_zeroed(const eddy_msg_t *m)
{
    static const eddy_msg_t zero;
    return memcmp(m, &zero, sizeof zero) == 0;
}

/* Decodes what must decode; returns the message. */
static eddy_msg_t decode_ok(const void *data, size_t len)
{
    eddy_msg_t m;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_msg_decode(data, len, &m, &err), 0, "%s", err.msg);
    return m;
}

/* Decoding must fail, leave the message zeroed (nothing owned), and, when
 * needle is given, say so in the error. */
static void expect_reject(const void *data, size_t len, const char *needle)
{
    eddy_msg_t m;
    eddy_err_t err = {{0}};
    int rc = eddy_msg_decode(data, len, &m, &err);
    if (rc == 0)
        eddy_msg_clear(&m);
    cr_assert_eq(rc, -1, "decoded %zu bytes that should be rejected", len);
    cr_assert(is_zeroed(&m), "failed decode left state behind");
    cr_assert_neq(err.msg[0], '\0');
    if (needle)
        cr_assert_not_null(strstr(err.msg, needle), "'%s' not in '%s'", needle, err.msg);
}

/* ---- splicing malformed messages ----------------------------------------- */

typedef enum { REPLACE, REMOVE, INSERT } splice_op_t;

/* Re-packs the top-level array of a valid encoding with element idx
 * replaced by (or preceded by) the raw msgpack bytes `value`, or removed.
 * Returns a malloc'd buffer. */
static char *splice(const char *enc, size_t len, splice_op_t op, uint32_t idx, const void *value,
                    size_t value_len, size_t *out_len)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    cr_assert_eq(msgpack_unpack_next(&u, enc, len, &off), MSGPACK_UNPACK_SUCCESS);
    const msgpack_object_array *a = &u.data.via.array;
    cr_assert(idx < a->size || (op == INSERT && idx == a->size));
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, a->size + (op == INSERT) - (op == REMOVE));
    for (uint32_t i = 0; i <= a->size; i++) {
        if (i == idx && op != REMOVE)
            msgpack_sbuffer_write(&sb, value, value_len);
        if (i < a->size && !(i == idx && op != INSERT))
            msgpack_pack_object(&pk, a->ptr[i]);
    }
    msgpack_unpacked_destroy(&u);
    *out_len = sb.size;
    return msgpack_sbuffer_release(&sb);
}

static void expect_splice_rejected(eddy_msg_type_t type, splice_op_t op, uint32_t idx,
                                   const void *value, size_t value_len, const char *needle)
{
    eddy_msg_t m = make_msg(type);
    size_t len, bad_len;
    char *enc = eddy_msg_encode(&m, &len);
    char *bad = splice(enc, len, op, idx, value, value_len, &bad_len);
    expect_reject(bad, bad_len, needle);
    free(bad);
    free(enc);
    eddy_msg_clear(&m);
}

static void expect_splice_accepted(eddy_msg_type_t type, uint32_t idx, const void *value,
                                   size_t value_len)
{
    eddy_msg_t m = make_msg(type);
    size_t len, ok_len;
    char *enc = eddy_msg_encode(&m, &len);
    char *ok = splice(enc, len, REPLACE, idx, value, value_len, &ok_len);
    eddy_msg_t d = decode_ok(ok, ok_len);
    eddy_msg_clear(&d);
    free(ok);
    free(enc);
    eddy_msg_clear(&m);
}

/* msgpack bytes of a str of n copies of c (malloc'd). */
static char *packed_str(size_t n, char c, size_t *len)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    char *s = malloc(n + 1);
    memset(s, c, n);
    msgpack_pack_str(&pk, n);
    msgpack_pack_str_body(&pk, s, n);
    free(s);
    *len = sb.size;
    return msgpack_sbuffer_release(&sb);
}

/* msgpack bytes of an unsigned integer / a signed one. */
static size_t packed_u64(uint64_t v, unsigned char out[9])
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_uint64(&pk, v);
    size_t n = sb.size;
    memcpy(out, sb.data, n);
    msgpack_sbuffer_destroy(&sb);
    return n;
}

static size_t packed_i64(int64_t v, unsigned char out[9])
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_int64(&pk, v);
    size_t n = sb.size;
    memcpy(out, sb.data, n);
    msgpack_sbuffer_destroy(&sb);
    return n;
}

/* 1 + the field count of each type, i.e. the top-level array length. */
static uint32_t elements_of(eddy_msg_type_t type)
{
    eddy_msg_t m = make_msg(type);
    size_t len;
    char *enc = eddy_msg_encode(&m, &len);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    cr_assert_eq(msgpack_unpack_next(&u, enc, len, &off), MSGPACK_UNPACK_SUCCESS);
    uint32_t n = u.data.via.array.size;
    msgpack_unpacked_destroy(&u);
    free(enc);
    eddy_msg_clear(&m);
    return n;
}

#define FOR_EACH_TYPE(t) for (eddy_msg_type_t t = EDDY_MSG_REGISTER; t < EDDY_MSG_TYPE_COUNT; t++)

/* ---- round trips ---------------------------------------------------------- */

static void round_trip(const eddy_msg_t *m)
{
    size_t len;
    char *enc = eddy_msg_encode(m, &len);
    cr_assert_not_null(enc);
    eddy_msg_t d = decode_ok(enc, len);
    assert_msg_eq(m, &d);
    /* The encoding is canonical: re-encoding the decoded message gives the
     * same bytes. */
    size_t len2;
    char *enc2 = eddy_msg_encode(&d, &len2);
    cr_assert_eq(len2, len);
    cr_assert_eq(memcmp(enc, enc2, len), 0);
    free(enc2);
    free(enc);
    eddy_msg_clear(&d);
    cr_assert(is_zeroed(&d));
}

Test(proto, round_trip_every_type)
{
    FOR_EACH_TYPE(t) {
        eddy_msg_t m = make_msg(t);
        round_trip(&m);
        eddy_msg_clear(&m);
    }
}

Test(proto, round_trip_variants)
{
    /* Empty variable parts. */
    eddy_msg_t m = make_msg(EDDY_MSG_HEARTBEAT);
    m.u.heartbeat.n_tasks = 0;
    round_trip(&m);
    eddy_msg_clear(&m);

    m = make_msg(EDDY_MSG_DEPLOY);
    eddy_msg_t empty = {.type = EDDY_MSG_DEPLOY};
    strcpy(empty.u.deploy.job_id, m.u.deploy.job_id);
    round_trip(&empty);
    /* Restore mode, a plugin list with NULL entries (they travel as nil and
     * come back as ""), a stage with no instances. */
    m.u.deploy.mode = EDDY_DEPLOY_RESTORE;
    free(m.u.deploy.plugins[1]);
    m.u.deploy.plugins[1] = NULL;
    m.u.deploy.stages[2].parallelism = 0;
    size_t len;
    char *enc = eddy_msg_encode(&m, &len);
    eddy_msg_t d = decode_ok(enc, len);
    cr_assert_eq(d.u.deploy.mode, EDDY_DEPLOY_RESTORE);
    cr_assert_str_eq(d.u.deploy.plugins[1], "");
    cr_assert_str_eq(d.u.deploy.plugins[0], "0123456789abcdef0123456789abcdef");
    cr_assert_null(d.u.deploy.plugins[2], "the plugin list stays NULL-terminated");
    cr_assert_eq(d.u.deploy.stages[2].parallelism, 0);
    eddy_msg_clear(&d);
    free(enc);
    m.u.deploy.stages[2].parallelism = 1;
    eddy_msg_clear(&m);

    /* No error text, no request arguments. */
    m = make_msg(EDDY_MSG_REGISTERED);
    m.u.registered.error[0] = '\0';
    round_trip(&m);
    m = (eddy_msg_t){.type = EDDY_MSG_REQUEST};
    strcpy(m.u.request.verb, "list");
    round_trip(&m);

    /* A reply without a body decodes with an empty one; a large body. */
    m = (eddy_msg_t){.type = EDDY_MSG_REPLY};
    enc = eddy_msg_encode(&m, &len);
    d = decode_ok(enc, len);
    cr_assert_str_eq(d.u.reply.body, "");
    eddy_msg_clear(&d);
    free(enc);
    m.u.reply.status = INT64_MIN;
    m.u.reply.body = malloc(1 << 20);
    for (int i = 0; i < (1 << 20) - 1; i++)
        m.u.reply.body[i] = (char)('a' + i % 26);
    m.u.reply.body[(1 << 20) - 1] = '\0';
    round_trip(&m);
    eddy_msg_clear(&m);

    /* Largest indices and longest strings that fit. */
    m = make_msg(EDDY_MSG_TASK_DONE);
    m.u.task_done.stage = EDDY_MAX_STAGES - 1;
    m.u.task_done.instance = EDDY_MAX_PARALLELISM - 1;
    round_trip(&m);
    m = make_msg(EDDY_MSG_REGISTER);
    memset(m.u.reg.name, 'n', EDDY_NAME_MAX - 1);
    memset(m.u.reg.data_endpoint, 'e', EDDY_ENDPOINT_MAX - 1);
    memset(m.u.reg.host, 'h', EDDY_NAME_MAX - 1);
    m.u.reg.pid = INT64_MIN;
    round_trip(&m);
}

Test(proto, type_names)
{
    FOR_EACH_TYPE(t) {
        const char *name = eddy_msg_type_name(t);
        cr_assert_not_null(name);
        cr_assert_str_neq(name, "UNKNOWN");
    }
    cr_assert_str_eq(eddy_msg_type_name(EDDY_MSG_DEPLOY), "DEPLOY");
    cr_assert_str_eq(eddy_msg_type_name(0), "UNKNOWN");
    cr_assert_str_eq(eddy_msg_type_name(EDDY_MSG_TYPE_COUNT), "UNKNOWN");
    cr_assert_str_eq(eddy_msg_type_name((eddy_msg_type_t)-1), "UNKNOWN");
}

Test(proto, strv_helpers)
{
    char *const in[] = {"a", NULL, "ccc"};
    char **v = eddy_strv_dup(3, in);
    cr_assert_not_null(v);
    cr_assert_str_eq(v[0], "a");
    cr_assert_str_eq(v[1], "");
    cr_assert_str_eq(v[2], "ccc");
    cr_assert_null(v[3]);
    cr_assert_neq(v[0], in[0]);
    eddy_strv_free(3, v);
    v = eddy_strv_dup(0, NULL);
    cr_assert_not_null(v);
    cr_assert_null(v[0]);
    eddy_strv_free(0, v);
    eddy_strv_free(5, NULL);
}

/* ---- damaged input ------------------------------------------------------- */

Test(proto, every_truncation_rejected)
{
    FOR_EACH_TYPE(t) {
        eddy_msg_t m = make_msg(t);
        size_t len;
        char *enc = eddy_msg_encode(&m, &len);
        for (size_t n = 0; n < len; n++) {
            /* Copy so ASan catches any read past the shortened buffer. */
            char *cut = malloc(n ? n : 1);
            memcpy(cut, enc, n);
            expect_reject(cut, n, NULL);
            free(cut);
        }
        free(enc);
        eddy_msg_clear(&m);
    }
}

Test(proto, every_byte_change_fails_cleanly_or_decodes, .timeout = 120)
{
    unsigned long decoded = 0, rejected = 0;
    FOR_EACH_TYPE(t) {
        eddy_msg_t m = make_msg(t);
        size_t len;
        char *enc = eddy_msg_encode(&m, &len);
        char *buf = malloc(len);
        for (size_t i = 0; i < len; i++) {
            for (unsigned v = 0; v < 256; v++) {
                memcpy(buf, enc, len);
                if ((unsigned char)buf[i] == v)
                    continue;
                buf[i] = (char)v;
                eddy_msg_t d;
                eddy_err_t err = {{0}};
                if (eddy_msg_decode(buf, len, &d, &err) < 0) {
                    cr_assert(is_zeroed(&d));
                    cr_assert_neq(err.msg[0], '\0');
                    rejected++;
                    continue;
                }
                /* Whatever decoded is a well-formed message of its type:
                 * it survives another round trip unchanged. */
                decoded++;
                round_trip(&d);
                eddy_msg_clear(&d);
            }
        }
        free(buf);
        free(enc);
        eddy_msg_clear(&m);
    }
    cr_assert_gt(decoded, 0);
    cr_assert_gt(rejected, 0);
    cr_log_info("byte changes: %lu decoded, %lu rejected", decoded, rejected);
}

Test(proto, wrong_field_counts_rejected)
{
    FOR_EACH_TYPE(t) {
        uint32_t n = elements_of(t);
        char expected[64];
        snprintf(expected, sizeof expected, "%u fields, expected %u", n - 2, n - 1);
        /* Without its last field (the leader epoch), a REGISTER or RELEASE
         * is an older peer's, still read, and a TRIGGER, ACK or STEP_DONE
         * one without its optional last field; anything else is rejected. */
        if (t != EDDY_MSG_RELEASE && t != EDDY_MSG_REGISTER && t != EDDY_MSG_TRIGGER &&
            t != EDDY_MSG_ACK && t != EDDY_MSG_DEPLOY && t != EDDY_MSG_STEP_DONE &&
            t != EDDY_MSG_DEPLOYED && t != EDDY_MSG_REGISTERED)
            expect_splice_rejected(t, REMOVE, n - 1, NULL, 0, expected);
        snprintf(expected, sizeof expected, "%u fields, expected %u", n, n - 1);
        expect_splice_rejected(t, INSERT, n, "\xc0", 1, expected);
        expect_splice_rejected(t, INSERT, 1, "\x01", 1, expected);
    }
    /* The type alone. */
    expect_reject("\x91\x01", 2, "REGISTER message: 0 fields, expected 7");
    expect_reject("\x91\x0e", 2, "REPLY message: 0 fields, expected 3");
}

/* Protocol 4's RELEASE (job only) is a restore; with the reason, each one
 * decodes as itself; a RELEASE without even the job is rejected. */
Test(proto, release_reason)
{
    eddy_msg_t d;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_msg_decode("\x92\x0c\x07", 3, &d, &err), 0, "%s", err.msg);
    cr_assert_eq(d.type, EDDY_MSG_RELEASE);
    cr_assert_eq(d.u.release.job, 7);
    cr_assert_eq(d.u.release.reason, EDDY_RELEASE_RESTORE);
    eddy_msg_clear(&d);
    for (uint32_t r = EDDY_RELEASE_RESTORE; r <= EDDY_RELEASE_FAILED; r++) {
        eddy_msg_t m = {.type = EDDY_MSG_RELEASE};
        m.u.release.job = 9;
        m.u.release.reason = r;
        size_t len;
        char *enc = eddy_msg_encode(&m, &len);
        cr_assert_eq(eddy_msg_decode(enc, len, &d, &err), 0, "%s", err.msg);
        cr_assert_eq(d.u.release.job, 9);
        cr_assert_eq(d.u.release.reason, r);
        eddy_msg_clear(&d);
        free(enc);
    }
    expect_reject("\x91\x0c", 2, "RELEASE message: 0 fields, expected 3");
    expect_reject("\x95\x0c\x07\x02\x01\x01", 6, "RELEASE message: 4 fields, expected 3");
    expect_reject("\x93\x0c\x07\x04", 4, "integer out of range");
    cr_assert_str_eq(eddy_release_reason_name(EDDY_RELEASE_CANCELLED), "cancelled");
    cr_assert_str_eq(eddy_release_reason_name(EDDY_RELEASE_FAILED), "failed");
    cr_assert_str_eq(eddy_release_reason_name(99), "unknown");
}

Test(proto, wrong_field_types_rejected)
{
    FOR_EACH_TYPE(t) {
        uint32_t n = elements_of(t);
        for (uint32_t i = 1; i < n; i++) {
            /* No field of any message is a map or an ext; only DEPLOY's
             * plan (field 4), ACK's source state (field 11) and PLUGIN's
             * data (field 2) are bins. */
            expect_splice_rejected(t, REPLACE, i, "\x80", 1, NULL);
            expect_splice_rejected(t, REPLACE, i, "\xd4\x01\x00", 3, NULL);
            if (!(t == EDDY_MSG_DEPLOY && i == 4) && !(t == EDDY_MSG_PLUGIN && i == 2) &&
                !(t == EDDY_MSG_ACK && i == 11))
                expect_splice_rejected(t, REPLACE, i, "\xc4\x01x", 3, NULL);
        }
    }
    /* Specific mismatches. */
    expect_splice_rejected(EDDY_MSG_START, REPLACE, 1, "\xa1" "1", 2, "expected an unsigned");
    expect_splice_rejected(EDDY_MSG_START, REPLACE, 1, "\xff", 1, "expected an unsigned");
    expect_splice_rejected(EDDY_MSG_START, REPLACE, 1, "\xcb\x3f\xf0\0\0\0\0\0\0", 9,
                           "expected an unsigned");
    expect_splice_rejected(EDDY_MSG_TRIGGER, REPLACE, 4, "\x01", 1, "field 4: expected a boolean");
    expect_splice_rejected(EDDY_MSG_REGISTER, REPLACE, 1, "\x07", 1, "field 1: expected a string");
    expect_splice_rejected(EDDY_MSG_REGISTER, REPLACE, 3, "\xc3", 1, "expected a signed");
    expect_splice_rejected(EDDY_MSG_REQUEST, REPLACE, 2, "\xa0", 1, "expected an array");
    expect_splice_rejected(EDDY_MSG_REQUEST, REPLACE, 2, "\x91\x01", 2, "expected a string");
    expect_splice_rejected(EDDY_MSG_HEARTBEAT, REPLACE, 2, "\x91\x01", 2, "expected an array");
    expect_splice_rejected(EDDY_MSG_HEARTBEAT, REPLACE, 2, "\x91\x9c\x01\x01\x01\x01\x01\x01\x01"
                                                           "\x01\x01\x01\x01\x01",
                           14, "missing");
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 13, "\x91\x91\xa0", 3, "expected an unsigned");
    /* Where a number is expected, ints of either sign and floats are fine. */
    expect_splice_accepted(EDDY_MSG_HEARTBEAT, 2,
                           "\x91\x9f\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\xff\x05\xff\x00",
                           17);
    expect_splice_rejected(EDDY_MSG_HEARTBEAT, REPLACE, 2,
                           "\x91\x9f\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\xff\xc0\x01\x01", 17,
                           "expected a number");
    /* A nil string field decodes as empty. */
    expect_splice_accepted(EDDY_MSG_REGISTER, 4, "\xc0", 1);
}

Test(proto, unknown_types_rejected)
{
    expect_reject("\x91\x00", 2, "unknown message type");
    expect_reject("\x91\x14", 2, "unknown message type");
    expect_reject("\x91\x20", 2, "unknown message type"); /* a data-plane type */
    expect_reject("\x91\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 10, "unknown message type");
    expect_reject("\x91\xff", 2, "unknown message type");
    expect_reject("\x92\xa1\x01\x01", 4, "unknown message type");
    expect_reject("\x91\xc0", 2, "unknown message type");
    expect_reject("\x91\xcb\x3f\xf0\0\0\0\0\0\0", 10, "unknown message type");
    expect_reject("\x90", 1, "unknown message type");
    expect_reject("\x01", 1, "not an array");
    expect_reject("\x81\x01\x01", 3, "not an array");
    expect_reject("\xa3" "abc", 4, "not an array");
    expect_reject("", 0, NULL);
    expect_reject(NULL, 0, NULL);
    expect_reject("\xc1", 1, "0xc1");
    expect_reject("\x92\x06\x01\x01", 4, "trailing");
    expect_reject("GET / HTTP/1.1\r\n\r\n", 18, NULL);
}

static void expect_field_range(eddy_msg_type_t type, uint32_t idx, uint64_t max_ok)
{
    unsigned char v[9];
    expect_splice_accepted(type, idx, v, packed_u64(max_ok, v));
    if (max_ok < UINT64_MAX)
        expect_splice_rejected(type, REPLACE, idx, v, packed_u64(max_ok + 1, v),
                               "integer out of range");
    expect_splice_rejected(type, REPLACE, idx, v, packed_i64(-1, v), NULL);
}

Test(proto, out_of_range_values_rejected)
{
    /* 32-bit fields. */
    expect_field_range(EDDY_MSG_START, 1, UINT32_MAX);
    expect_field_range(EDDY_MSG_START, 2, UINT32_MAX);
    expect_field_range(EDDY_MSG_REGISTERED, 1, UINT32_MAX);
    expect_field_range(EDDY_MSG_RELEASE, 1, UINT32_MAX);
    expect_field_range(EDDY_MSG_RELEASE, 2, EDDY_RELEASE_FAILED);
    expect_field_range(EDDY_MSG_COMPLETE, 2, UINT64_MAX);
    /* Stage and instance indices. */
    expect_field_range(EDDY_MSG_ACK, 4, EDDY_MAX_STAGES - 1);
    expect_field_range(EDDY_MSG_ACK, 5, EDDY_MAX_PARALLELISM - 1);
    expect_field_range(EDDY_MSG_TASK_DONE, 3, EDDY_MAX_STAGES - 1);
    expect_field_range(EDDY_MSG_TASK_DONE, 4, EDDY_MAX_PARALLELISM - 1);
    expect_field_range(EDDY_MSG_TASK_FAILED, 3, EDDY_MAX_STAGES - 1);
    expect_field_range(EDDY_MSG_TASK_FAILED, 4, EDDY_MAX_PARALLELISM - 1);
    /* DEPLOY: mode, max parallelism. */
    expect_field_range(EDDY_MSG_DEPLOY, 8, EDDY_DEPLOY_RESTORE);
    expect_field_range(EDDY_MSG_DEPLOY, 11, EDDY_MAX_PARALLELISM);
    /* DEPLOY: the job's guarantee (common/guarantee.h). */
    expect_field_range(EDDY_MSG_DEPLOY, 12, EDDY_GUARANTEE_LAST);
    /* Signed fields: a uint64 above INT64_MAX does not fit. */
    unsigned char v[9];
    expect_splice_rejected(EDDY_MSG_REGISTER, REPLACE, 3, v, packed_u64(1ull << 63, v),
                           "expected a signed integer");
    expect_splice_accepted(EDDY_MSG_REGISTER, 3, v, packed_u64(INT64_MAX, v));
    /* Nested: a heartbeat metric's stage, a source position's instance. */
    expect_splice_rejected(EDDY_MSG_HEARTBEAT, REPLACE, 2,
                           "\x91\x9f\x01\x01\x40\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01", 17,
                           "integer out of range");
    expect_splice_accepted(EDDY_MSG_HEARTBEAT, 2,
                           "\x91\x9f\x01\x01\x3f\xcd\x7f\xff\x01\x01\x01\x01\x01\x01\x01\xff\x01\x01\x01",
                           19);
    expect_splice_rejected(EDDY_MSG_HEARTBEAT, REPLACE, 2,
                           "\x91\x9f\x01\x01\x3f\xcd\x80\x00\x01\x01\x01\x01\x01\x01\x01\xff\x01\x01\x01",
                           19, "integer out of range");
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 15, "\x94\x00\xcd\x80\x00\x05\xc0", 7,
                           "integer out of range");
    expect_splice_accepted(EDDY_MSG_DEPLOY, 15, "\x94\x3f\xcd\x7f\xff\x05\xc4\x00", 8);
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 15, "\x94\x40\x00\x05\xc4\x00", 6,
                           "integer out of range");
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 13, "\x91\x91\xcf\0\0\0\1\0\0\0\0", 11,
                           "integer out of range");
}

Test(proto, deploy_shape_errors_rejected)
{
    /* workers: (id, endpoint) pairs; positions: (stage, instance, position, state). */
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 14, "\x93\x01\xa1x\x02", 5,
                           "not (id, endpoint) pairs");
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 15, "\x93\x00\x00\x00", 4,
                           "not (stage, instance, position, state) quadruples");
    /* a state that is not bytes */
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 15, "\x94\x00\x00\x00\x00", 5,
                           "expected a string");
    expect_splice_accepted(EDDY_MSG_DEPLOY, 15, "\x94\x00\x00\x00\xc4\x00", 6);
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 14, "\x92\xa1x\x01", 4, NULL);
    /* A stage that is not an array, stages beyond the limit. */
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 13, "\x92\x90\x01", 3, "expected an array");
    unsigned char stages[3 + EDDY_MAX_STAGES + 1] = {0xdc, 0x00, EDDY_MAX_STAGES + 1};
    memset(stages + 3, 0x90, EDDY_MAX_STAGES + 1);
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 13, stages, sizeof stages, "array too long");
    stages[2] = EDDY_MAX_STAGES;
    expect_splice_accepted(EDDY_MSG_DEPLOY, 13, stages, sizeof stages - 1);
}

static void expect_string_limit(eddy_msg_type_t type, uint32_t idx, size_t max_ok)
{
    size_t n;
    char *s = packed_str(max_ok, 's', &n);
    expect_splice_accepted(type, idx, s, n);
    free(s);
    s = packed_str(max_ok + 1, 's', &n);
    expect_splice_rejected(type, REPLACE, idx, s, n, "string too long");
    free(s);
}

Test(proto, oversized_strings_rejected)
{
    expect_string_limit(EDDY_MSG_REGISTER, 1, EDDY_NAME_MAX - 1);
    expect_string_limit(EDDY_MSG_REGISTER, 2, EDDY_ENDPOINT_MAX - 1);
    expect_string_limit(EDDY_MSG_REGISTER, 4, EDDY_NAME_MAX - 1);
    expect_string_limit(EDDY_MSG_REGISTERED, 3, EDDY_ERROR_MAX - 1);
    expect_string_limit(EDDY_MSG_DEPLOY, 2, EDDY_NAME_MAX - 1);
    expect_string_limit(EDDY_MSG_DEPLOY, 3, EDDY_NAME_MAX - 1);
    expect_string_limit(EDDY_MSG_DEPLOY, 10, EDDY_ENDPOINT_MAX * 4 - 1);
    expect_string_limit(EDDY_MSG_DEPLOY, 18, EDDY_STORAGE_URI_MAX - 1);
    expect_string_limit(EDDY_MSG_DEPLOYED, 5, EDDY_ERROR_MAX - 1);
    expect_string_limit(EDDY_MSG_ACK, 10, EDDY_ERROR_MAX - 1);
    expect_string_limit(EDDY_MSG_ACK, 11, EDDY_SOURCE_STATE_MAX); /* source state */
    expect_string_limit(EDDY_MSG_TASK_FAILED, 5, EDDY_ERROR_MAX - 1);
    expect_string_limit(EDDY_MSG_REQUEST, 1, EDDY_NAME_MAX - 1);

    /* Worker endpoints inside DEPLOY. */
    size_t n;
    char *s = packed_str(EDDY_ENDPOINT_MAX, 'e', &n);
    char *pair = malloc(n + 2);
    pair[0] = (char)0x92;
    pair[1] = 0x01;
    memcpy(pair + 2, s, n);
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 14, pair, n + 2, "string too long");
    free(pair);
    free(s);

    /* Source states inside DEPLOY: at most EDDY_SOURCE_STATE_MAX bytes each. */
    for (size_t len = EDDY_SOURCE_STATE_MAX; len <= EDDY_SOURCE_STATE_MAX + 1; len++) {
        s = packed_str(len, 'p', &n);
        char *quad = malloc(n + 4);
        memcpy(quad, "\x94\x00\x01\x05", 4);
        memcpy(quad + 4, s, n);
        if (len == EDDY_SOURCE_STATE_MAX)
            expect_splice_accepted(EDDY_MSG_DEPLOY, 15, quad, n + 4);
        else
            expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 15, quad, n + 4, "string too long");
        free(quad);
        free(s);
    }

    /* Arguments: each at most EDDY_ARG_MAX bytes, at most EDDY_MAX_ARGS. */
    for (size_t len = EDDY_ARG_MAX; len <= EDDY_ARG_MAX + 1; len++) {
        s = packed_str(len, 'a', &n);
        char *argv = malloc(n + 1);
        argv[0] = (char)0x91;
        memcpy(argv + 1, s, n);
        if (len == EDDY_ARG_MAX) {
            expect_splice_accepted(EDDY_MSG_REQUEST, 2, argv, n + 1);
            expect_splice_accepted(EDDY_MSG_DEPLOY, 6, argv, n + 1);
        } else {
            expect_splice_rejected(EDDY_MSG_REQUEST, REPLACE, 2, argv, n + 1, "string too long");
            expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 6, argv, n + 1, "string too long");
        }
        free(argv);
        free(s);
    }
    unsigned char many[3 + EDDY_MAX_ARGS + 1] = {0xdc, (EDDY_MAX_ARGS + 1) >> 8,
                                                 (EDDY_MAX_ARGS + 1) & 0xff};
    memset(many + 3, 0xa0, EDDY_MAX_ARGS + 1);
    expect_splice_rejected(EDDY_MSG_REQUEST, REPLACE, 2, many, sizeof many, "array too long");
    many[1] = EDDY_MAX_ARGS >> 8;
    many[2] = EDDY_MAX_ARGS & 0xff;
    expect_splice_accepted(EDDY_MSG_REQUEST, 2, many, sizeof many - 1);

    /* Heartbeat task count. */
    size_t hb_len = 5 + EDDY_MAX_TASK_METRICS + 1;
    unsigned char *hb = calloc(1, hb_len);
    hb[0] = 0xdd;
    hb[2] = (EDDY_MAX_TASK_METRICS + 1) >> 16;
    hb[4] = (EDDY_MAX_TASK_METRICS + 1) & 0xff;
    memset(hb + 5, 0xc0, EDDY_MAX_TASK_METRICS + 1);
    expect_splice_rejected(EDDY_MSG_HEARTBEAT, REPLACE, 2, hb, hb_len, "array too long");
    free(hb);

    /* Embedded NUL bytes cannot be represented in a C string field. */
    expect_splice_rejected(EDDY_MSG_REGISTER, REPLACE, 1, "\xa3" "a\0b", 4, "NUL");
    expect_splice_rejected(EDDY_MSG_REQUEST, REPLACE, 2, "\x91\xa3" "a\0b", 5, "NUL");
    expect_splice_rejected(EDDY_MSG_REPLY, REPLACE, 2, "\xa3" "a\0b", 4, "NUL");
}

Test(proto, oversized_reply_body_rejected, .timeout = 60)
{
    /* EDDY_BODY_MAX is 64 MiB: build one byte more. */
    size_t n;
    char *s = packed_str(EDDY_BODY_MAX + 1, 'b', &n);
    expect_splice_rejected(EDDY_MSG_REPLY, REPLACE, 2, s, n, "string too long");
    free(s);
}

Test(proto, hostile_headers_rejected_quickly, .timeout = 10)
{
    /* Whole message, then as each kind of variable-length field, both bare
     * and padded with enough bytes that the header itself is complete. */
    static const char *const heads[] = {"\xdd\xff\xff\xff\xff", "\xdf\xff\xff\xff\xff",
                                        "\xdb\xff\xff\xff\xff", "\xc6\xff\xff\xff\xff",
                                        "\xc9\xff\xff\xff\xff"};
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++) {
        expect_reject(heads[h], 5, NULL);
        char padded[64] = {0};
        memcpy(padded, heads[h], 5);
        expect_reject(padded, sizeof padded, NULL);
        expect_splice_rejected(EDDY_MSG_REQUEST, REPLACE, 2, heads[h], 5, NULL);
        expect_splice_rejected(EDDY_MSG_HEARTBEAT, REPLACE, 2, heads[h], 5, NULL);
        expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 13, heads[h], 5, NULL);
        expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 2, heads[h], 5, NULL);
        expect_splice_rejected(EDDY_MSG_REPLY, REPLACE, 2, heads[h], 5, NULL);
        /* Inside a nested array, after a real element, and as an extra
         * top-level element after the real fields. */
        char nested[2 + sizeof padded] = {(char)0x92, 0x01};
        memcpy(nested + 2, padded, sizeof padded);
        expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 15, nested, sizeof nested, NULL);
        expect_splice_rejected(EDDY_MSG_DEPLOY, INSERT, 14, padded, sizeof padded, NULL);
    }
    /* A DEPLOY whose stage list claims 4 billion stages, with a few real ones
     * behind it: refused before anything is allocated for it. */
    expect_splice_rejected(EDDY_MSG_DEPLOY, REPLACE, 13, "\xdd\xff\xff\xff\xff\x90\x90\x90", 8,
                           "announces 4294967295 elements");
}

/* ---- DEPLOY checked against the job graph ------------------------------- */

/* A well-formed DEPLOY of the 3-stage sample job on workers 1, 1001, 2001. */
static eddy_msg_t valid_deploy(void)
{
    eddy_msg_t m = make_msg(EDDY_MSG_DEPLOY);
    eddy_deploy_t *d = &m.u.deploy;
    for (uint32_t s = 0; s < d->n_stages; s++)
        for (uint32_t i = 0; i < d->stages[s].parallelism; i++)
            d->stages[s].worker_of[i] = d->workers[(s + i) % d->n_workers].id;
    return m;
}

static void expect_deploy_rejected(const eddy_msg_t *m, uint32_t graph_stages,
                                   uint32_t graph_max, const char *needle)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_deploy_check(&m->u.deploy, graph_stages, graph_max, &err), -1,
                 "accepted a DEPLOY that should fail with '%s'", needle);
    cr_assert(strstr(err.msg, needle), "error '%s' does not mention '%s'", err.msg, needle);
}

Test(proto, deploy_check_accepts_a_valid_placement)
{
    eddy_msg_t m = valid_deploy();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_deploy_check(&m.u.deploy, 3, 128, &err), 0, "%s", err.msg);
    /* Parallelism up to max parallelism is fine. */
    m.u.deploy.max_parallelism = 5;
    cr_assert_eq(eddy_deploy_check(&m.u.deploy, 3, 5, &err), 0, "%s", err.msg);
    eddy_msg_clear(&m);
}

Test(proto, deploy_check_rejects_bad_max_parallelism)
{
    eddy_msg_t m = valid_deploy();
    m.u.deploy.max_parallelism = 0;
    expect_deploy_rejected(&m, 3, 128, "max parallelism 0 is not in 1..32768");
    m.u.deploy.max_parallelism = EDDY_MAX_PARALLELISM + 1;
    expect_deploy_rejected(&m, 3, 128, "max parallelism 32769 is not in 1..32768");
    m.u.deploy.max_parallelism = 64;
    expect_deploy_rejected(&m, 3, 128, "max parallelism 64, job graph 128");
    eddy_msg_clear(&m);
}

Test(proto, deploy_check_rejects_bad_stage_counts_and_parallelism)
{
    eddy_msg_t m = valid_deploy();
    expect_deploy_rejected(&m, 4, 128, "3 stages, job graph 4");
    expect_deploy_rejected(&m, 2, 128, "3 stages, job graph 2");
    m.u.deploy.stages[2].parallelism = 0;
    expect_deploy_rejected(&m, 3, 128, "stage 2 has parallelism 0, not in 1..128");
    m.u.deploy.stages[2].parallelism = 1;
    m.u.deploy.max_parallelism = 4; /* stage 1 has 5 instances */
    expect_deploy_rejected(&m, 3, 4, "stage 1 has parallelism 5, not in 1..4");
    eddy_msg_clear(&m);
}

Test(proto, deploy_check_rejects_unknown_workers_and_positions)
{
    eddy_msg_t m = valid_deploy();
    m.u.deploy.stages[1].worker_of[3] = 77;
    expect_deploy_rejected(&m, 3, 128, "stage 1 instance 3 is placed on worker 77, which is "
                                       "not in its worker list");
    m.u.deploy.stages[1].worker_of[3] = 1001;
    m.u.deploy.positions[1].instance = 2; /* stage 0 has 2 instances */
    expect_deploy_rejected(&m, 3, 128, "source position for 0[2]");
    m.u.deploy.positions[1].instance = 1;
    m.u.deploy.n_workers = 0;
    expect_deploy_rejected(&m, 3, 128, "not in its worker list");
    m.u.deploy.n_workers = 3;
    eddy_msg_clear(&m);
}

/* Every message ends with the leader epoch (fencing); REGISTERED carries
 * the standby's pointer to the leader and whether a refusal is final. An
 * older REGISTERED (3 fields, no epoch) reads as epoch 0, not a standby. */
Test(proto, leader_epoch_and_registered_leader)
{
    eddy_msg_t m = {.type = EDDY_MSG_REGISTERED, .leader_epoch = 12345678901ull};
    m.u.registered.worker_id = 4;
    m.u.registered.not_leader = true;
    snprintf(m.u.registered.leader, sizeof m.u.registered.leader, "tcp://c2:7600");
    m.u.registered.fatal = true;
    size_t len;
    char *enc = eddy_msg_encode(&m, &len);
    eddy_msg_t d = decode_ok(enc, len);
    cr_assert_eq(d.leader_epoch, 12345678901ull);
    cr_assert_eq(d.u.registered.worker_id, 4);
    cr_assert(d.u.registered.not_leader);
    cr_assert(d.u.registered.fatal);
    cr_assert_str_eq(d.u.registered.leader, "tcp://c2:7600");
    eddy_msg_clear(&d);
    free(enc);

    eddy_msg_t t = {.type = EDDY_MSG_TRIGGER, .leader_epoch = 7};
    t.u.trigger.job = 1;
    enc = eddy_msg_encode(&t, &len);
    d = decode_ok(enc, len);
    cr_assert_eq(d.leader_epoch, 7);
    eddy_msg_clear(&d);
    free(enc);

    d = decode_ok("\x94\x02\x05\x01\xa0", 5); /* REGISTERED of protocol 5 */
    cr_assert_eq(d.u.registered.worker_id, 5);
    cr_assert_eq(d.leader_epoch, 0);
    cr_assert(!d.u.registered.not_leader && !d.u.registered.fatal);
    eddy_msg_clear(&d);
    /* a TRIGGER without the epoch is not an older form: rejected */
    expect_reject("\x97\x07\x01\x01\x01\xc2\x01\x01", 8, "TRIGGER message: 6 fields, expected 9");
}

/* A migration TRIGGER names the instances that change worker; one without
 * that field (sent before rebalancing existed) still decodes, as none. A
 * moving instance at or past the migration's parallelism is refused. */
Test(proto, trigger_moving_instances)
{
    eddy_msg_t d = decode_ok("\x98\x07\x01\x02\x03\xc3\x01\x04\x09", 9);
    cr_assert_eq(d.u.trigger.migrate_parallelism, 4);
    cr_assert_eq(d.u.trigger.n_moving, 0);
    cr_assert_eq(d.leader_epoch, 9);
    eddy_msg_clear(&d);
    d = decode_ok("\x99\x07\x01\x02\x03\xc3\x01\x04\x92\x00\x03\x09", 12);
    cr_assert_eq(d.u.trigger.n_moving, 2);
    cr_assert_eq(d.u.trigger.moving[0], 0);
    cr_assert_eq(d.u.trigger.moving[1], 3);
    cr_assert_eq(d.leader_epoch, 9);
    eddy_msg_clear(&d);
    expect_reject("\x99\x07\x01\x02\x03\xc3\x01\x04\x91\x04\x09", 11, "out of range");
    expect_reject("\x99\x07\x01\x02\x03\xc3\x01\x01\x92\x00\x00\x09", 12,
                  "more moving instances");
}

/* An ACK may end with "declined" (protocol 8); one without it (an ACK
 * before the field existed) decodes as not declined. */
Test(proto, ack_declined_is_optional)
{
    eddy_msg_t d = decode_ok("\x9d\x08\x01\x02\x03\x00\x00\xff\x00\x00\x00\xa0\xc4\x00\x09", 15);
    cr_assert_eq(d.u.ack.checkpoint, 3);
    cr_assert_eq(d.u.ack.position, -1);
    cr_assert_not(d.u.ack.declined);
    cr_assert_eq(d.leader_epoch, 9);
    eddy_msg_clear(&d);
    d = decode_ok("\x9e\x08\x01\x02\x03\x00\x00\xff\x00\x00\x00\xa1x\xc4\x00\xc3\x09", 17);
    cr_assert(d.u.ack.declined);
    cr_assert_str_eq(d.u.ack.error, "x");
    cr_assert_eq(d.u.ack.n_ended, 0);
    eddy_msg_clear(&d);
}

/* An ACK may end with the inputs it counted as ended (protocol 9): pairs
 * of (stage, instance), each in range; absent, none. */
Test(proto, ack_ended_inputs_are_optional_and_bounded)
{
    eddy_msg_t d = decode_ok(
        "\x9f\x08\x01\x02\x03\x01\x00\xff\x00\x00\x00\xa0\xc4\x00\xc2\x94\x00\x02\x00\x00\x09",
        21);
    cr_assert_not(d.u.ack.declined);
    cr_assert_eq(d.u.ack.n_ended, 2);
    cr_assert_eq(d.u.ack.ended[0].stage, 0);
    cr_assert_eq(d.u.ack.ended[0].instance, 2);
    cr_assert_eq(d.u.ack.ended[1].instance, 0);
    cr_assert_eq(d.leader_epoch, 9);
    eddy_msg_clear(&d);
    expect_reject("\x9f\x08\x01\x02\x03\x01\x00\xff\x00\x00\x00\xa0\xc4\x00\xc2\x93\x00\x02\x00\x09",
                  20, "pairs");
    expect_reject("\x9f\x08\x01\x02\x03\x01\x00\xff\x00\x00\x00\xa0\xc4\x00\xc2\x92\x40\x00\x09",
                  19, "out of range");
}

/* A DEPLOYED may end with what the worker loaded from its local copies
 * (local recovery); absent, 0. */
Test(proto, deployed_local_loads_are_optional)
{
    eddy_msg_t d = decode_ok("\x97\x05\x02\x09\x00\x03\xa0\x07", 8);
    cr_assert_eq(d.u.deployed.groups_loaded, 3);
    cr_assert_eq(d.u.deployed.groups_local + d.u.deployed.bytes_local, 0, "absent: 0");
    cr_assert_eq(d.leader_epoch, 7);
    eddy_msg_clear(&d);
    d = decode_ok("\x99\x05\x02\x09\x00\x03\xa0\x02\x40\x07", 10);
    cr_assert_eq(d.u.deployed.groups_local, 2);
    cr_assert_eq(d.u.deployed.bytes_local, 64);
    cr_assert_eq(d.leader_epoch, 7);
    eddy_msg_clear(&d);
}

/* REGISTERED may end with the registration's liveness token (within
 * protocol 9): absent (an older coordinator's), 0, and the worker's
 * liveness thread sends nothing. LIVENESS has exactly its three fields, a
 * 32-bit worker id and 64-bit integers, nothing else. */
Test(proto, liveness_token_optional_and_liveness_bounded)
{
    /* [REGISTERED, 7, 500, "", false, "", false, epoch 9]: no token */
    eddy_msg_t d = decode_ok("\x98\x02\x07\xcd\x01\xf4\xa0\xc2\xa0\xc2\x09", 11);
    cr_assert_eq(d.u.registered.worker_id, 7);
    cr_assert_eq(d.u.registered.liveness_token, 0, "absent: 0");
    cr_assert_eq(d.leader_epoch, 9);
    eddy_msg_clear(&d);
    /* the same with a token */
    d = decode_ok("\x99\x02\x07\xcd\x01\xf4\xa0\xc2\xa0\xc2\xcf\x01\x02\x03\x04\x05\x06\x07\x08\x09",
                  20);
    cr_assert_eq(d.u.registered.liveness_token, 0x0102030405060708ull);
    cr_assert_eq(d.leader_epoch, 9);
    eddy_msg_clear(&d);
    /* [LIVENESS, worker 3, token, silent 0, epoch 0] */
    unsigned char ok[] = {0x95, EDDY_MSG_LIVENESS, 0x03, 0x2a, 0x00, 0x00};
    d = decode_ok(ok, sizeof ok);
    cr_assert_eq(d.type, EDDY_MSG_LIVENESS);
    cr_assert_eq(d.u.liveness.worker_id, 3);
    cr_assert_eq(d.u.liveness.token, 42);
    eddy_msg_clear(&d);
    /* without its silence, or with a field more: rejected */
    unsigned char short_form[] = {0x94, EDDY_MSG_LIVENESS, 0x03, 0x2a, 0x00};
    expect_reject(short_form, sizeof short_form, "LIVENESS message: 3 fields, expected 4");
    /* a worker id past 32 bits, a negative token, a string: rejected */
    unsigned char wide_id[] = {0x95, EDDY_MSG_LIVENESS, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0x2a, 0x00, 0x00};
    expect_reject(wide_id, sizeof wide_id, NULL);
    unsigned char negative[] = {0x95, EDDY_MSG_LIVENESS, 0x03, 0xff, 0x00, 0x00};
    expect_reject(negative, sizeof negative, NULL);
    unsigned char text[] = {0x95, EDDY_MSG_LIVENESS, 0x03, 0xa1, 'x', 0x00, 0x00};
    expect_reject(text, sizeof text, NULL);
}

/* An ACK may end with what the checkpoint cost the task (protocol 9,
 * unreleased: synchronous, asynchronous and alignment microseconds); absent, 0. */
Test(proto, ack_costs_are_optional)
{
    eddy_msg_t d = decode_ok(
        "\x9f\x08\x01\x02\x03\x01\x00\xff\x00\x00\x00\xa0\xc4\x00\xc2\x90\x09", 17);
    cr_assert_eq(d.u.ack.sync_us + d.u.ack.async_us + d.u.ack.align_us, 0);
    eddy_msg_clear(&d);
    d = decode_ok("\xdc\x00\x12\x08\x01\x02\x03\x01\x00\xff\x00\x00\x00\xa0\xc4\x00\xc2\x90"
                  "\x05\xcd\x01\x00\x07\x09",
                  24);
    cr_assert_eq(d.u.ack.sync_us, 5);
    cr_assert_eq(d.u.ack.async_us, 256);
    cr_assert_eq(d.u.ack.align_us, 7);
    cr_assert_eq(d.u.ack.files_referenced, 0, "absent: 0");
    cr_assert_eq(d.leader_epoch, 9);
    eddy_msg_clear(&d);
    /* and then the key groups referred to (incremental checkpoints) */
    d = decode_ok("\xdc\x00\x13\x08\x01\x02\x03\x01\x00\xff\x00\x00\x00\xa0\xc4\x00\xc2\x90"
                  "\x05\xcd\x01\x00\x07\x7f\x09",
                  25);
    cr_assert_eq(d.u.ack.files_referenced, 127);
    cr_assert_eq(d.leader_epoch, 9);
    eddy_msg_clear(&d);
    expect_reject("\xdc\x00\x12\x08\x01\x02\x03\x01\x00\xff\x00\x00\x00\xa0\xc4\x00\xc2\x90"
                  "\x05\xff\x07\x09",
                  22, "");
}

/* A DEPLOY may end with the tasks restored as finished (protocol 9); one
 * without them decodes as none, and the check refuses a finished task that
 * is not placed. */
Test(proto, deploy_finished_is_optional_and_checked)
{
    eddy_msg_t m = valid_deploy();
    size_t len;
    char *enc = eddy_msg_encode(&m, &len);
    cr_assert_not_null(enc);
    /* the same DEPLOY without finished tasks, to cut its last field below */
    uint32_t n = m.u.deploy.n_finished, n_renames = m.u.deploy.n_renames;
    m.u.deploy.n_finished = 0;
    m.u.deploy.n_renames = 0;             /* 0x90, cut too */
    m.u.deploy.storage_uri[0] = '\0'; /* encoded as 0xa0, cut with the list */
    m.u.deploy.checkpoint_full_every = 0; /* encoded as 0x00, cut too */
    m.u.deploy.restore_uri[0] = '\0';     /* 0xa0, cut too */
    m.u.deploy.restore_job[0] = '\0';     /* 0xa0, cut too */
    size_t len0;
    char *enc0 = eddy_msg_encode(&m, &len0);
    m.u.deploy.n_finished = n;
    m.u.deploy.n_renames = n_renames;
    cr_assert_not_null(enc0);
    eddy_msg_t d = decode_ok(enc, len);
    cr_assert_eq(d.u.deploy.n_finished, 2);
    cr_assert_eq(d.u.deploy.finished[1].stage, 1);
    cr_assert_eq(d.u.deploy.finished[1].instance, 4);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_deploy_check(&d.u.deploy, 3, 128, &err), 0, "%s", err.msg);
    d.u.deploy.finished[1].instance = 5; /* stage 1 has 5 instances */
    cr_assert_eq(eddy_deploy_check(&d.u.deploy, 3, 128, &err), -1);
    cr_assert(strstr(err.msg, "finished task 1[5]"), "%s", err.msg);
    d.u.deploy.finished[1].instance = 4;
    /* a fluid migration's renames: to an instance that is placed, in a rescale */
    cr_assert_eq(d.u.deploy.n_renames, 1);
    d.u.deploy.renames[0].to = 5;
    cr_assert_eq(eddy_deploy_check(&d.u.deploy, 3, 128, &err), -1);
    cr_assert(strstr(err.msg, "renaming task 1[6] to 1[5]"), "%s", err.msg);
    d.u.deploy.renames[0].to = 2;
    d.u.deploy.mode = EDDY_DEPLOY_RESTORE;
    cr_assert_eq(eddy_deploy_check(&d.u.deploy, 3, 128, &err), -1);
    eddy_msg_clear(&d);
    /* enc0 ends with 0x90 (the empty list), 0xa0 (no storage URI), 0x00
     * (no --checkpoint-full-every), 0xa0 0xa0 (no savepoint to restore
     * from), 0x90 (no renames) and the leader epoch: remove the six (older
     * forms) and lower the array's length by six */
    unsigned char *b = (unsigned char *)enc0;
    cr_assert_eq(b[0], 0xdc, "a DEPLOY is a msgpack array16");
    size_t at = len0 - 7; /* the six, a one-byte leader epoch */
    cr_assert_eq(b[at], 0x90);
    cr_assert_eq(b[at + 1], 0xa0);
    cr_assert_eq(b[at + 2], 0x00);
    cr_assert_eq(b[at + 3], 0xa0);
    cr_assert_eq(b[at + 4], 0xa0);
    cr_assert_eq(b[at + 5], 0x90);
    memmove(b + at, b + at + 6, 1);
    uint16_t count = (uint16_t)((b[1] << 8) | b[2]);
    count -= 6;
    b[1] = (unsigned char)(count >> 8);
    b[2] = (unsigned char)count;
    d = decode_ok(enc0, len0 - 6);
    cr_assert_eq(d.u.deploy.n_renames, 0);
    cr_assert_str_eq(d.u.deploy.restore_uri, "");
    cr_assert_str_eq(d.u.deploy.restore_job, "");
    cr_assert_eq(d.u.deploy.checkpoint_full_every, 0);
    cr_assert_eq(d.u.deploy.n_finished, 0);
    cr_assert_str_eq(d.u.deploy.storage_uri, "");
    cr_assert_null(d.u.deploy.finished);
    cr_assert_eq(d.u.deploy.epoch, 9);
    eddy_msg_clear(&d);
    free(enc);
    free(enc0);
    eddy_msg_clear(&m);
}

/* ---- key loads in heartbeat metrics (field 20) ---------------------------- */

/* A heartbeat of one task whose entry is cut to its first `keep` fields,
 * then followed by the raw msgpack `extra` (n_extra fields of it). */
static char *heartbeat_entry_cut(const eddy_task_metrics_t *t, uint32_t keep, const void *extra,
                                 size_t extra_len, uint32_t n_extra, size_t *out_len)
{
    eddy_msg_t m = {.type = EDDY_MSG_HEARTBEAT};
    m.u.heartbeat.worker_id = 3;
    m.u.heartbeat.n_tasks = 1;
    m.u.heartbeat.tasks = (eddy_task_metrics_t *)t;
    size_t len;
    char *enc = eddy_msg_encode(&m, &len);
    cr_assert_not_null(enc);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    cr_assert_eq(msgpack_unpack_next(&u, enc, len, &off), MSGPACK_UNPACK_SUCCESS);
    const msgpack_object_array *top = &u.data.via.array;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, top->size);
    for (uint32_t i = 0; i < top->size; i++) {
        if (i != 2) { /* [type, worker_id, tasks, leader_epoch] */
            msgpack_pack_object(&pk, top->ptr[i]);
            continue;
        }
        const msgpack_object_array *entry = &top->ptr[2].via.array.ptr[0].via.array;
        cr_assert_leq(keep, entry->size);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, keep + n_extra);
        for (uint32_t f = 0; f < keep; f++)
            msgpack_pack_object(&pk, entry->ptr[f]);
        if (extra_len)
            msgpack_sbuffer_write(&sb, extra, extra_len);
    }
    msgpack_unpacked_destroy(&u);
    free(enc);
    *out_len = sb.size;
    return msgpack_sbuffer_release(&sb);
}

Test(proto, key_loads_round_trip_and_older_form)
{
    eddy_task_metrics_t t = sample_metrics(4);
    t.n_key_loads = EDDY_KEY_LOADS_MAX;
    for (uint32_t k = 0; k < EDDY_KEY_LOADS_MAX; k++)
        t.key_loads[k] = (eddy_key_load_t){.dst_stage = EDDY_MAX_STAGES - 1 - k,
                                           .key_group = EDDY_MAX_PARALLELISM - 1 - k,
                                           .key_group_records = UINT64_MAX - 1,
                                           .records = UINT64_MAX,
                                           .window_ms = UINT32_MAX};
    size_t len;
    char *enc = heartbeat_entry_cut(&t, 20, NULL, 0, 0, &len);
    eddy_msg_t d = decode_ok(enc, len);
    assert_metrics_eq(&t, &d.u.heartbeat.tasks[0]);
    eddy_msg_clear(&d);
    free(enc);
    /* a worker before the key loads sends 19 fields: none */
    enc = heartbeat_entry_cut(&t, 19, NULL, 0, 0, &len);
    d = decode_ok(enc, len);
    cr_assert_eq(d.u.heartbeat.tasks[0].n_key_loads, 0);
    cr_assert_eq(d.u.heartbeat.tasks[0].rejected_records, t.rejected_records);
    eddy_msg_clear(&d);
    free(enc);
}

Test(proto, bad_key_loads_rejected)
{
    eddy_task_metrics_t t = sample_metrics(1);
    t.n_key_loads = 0;
    size_t len;
    struct {
        const char *bytes;
        size_t len;
        const char *needle;
    } bad[] = {
        /* five loads: more than EDDY_KEY_LOADS_MAX */
        {"\x95\x95\0\0\0\1\1\x95\0\0\0\1\1\x95\0\0\0\1\1\x95\0\0\0\1\1\x95\0\0\0\1\1", 31,
         "array too long"},
        /* a stage index past the last */
        {"\x91\x95\x40\0\0\1\1", 7, "integer out of range"},
        /* key group 32768 */
        {"\x91\x95\0\xcd\x80\x00\0\1\1", 9, "integer out of range"},
        /* more records in the group than in all */
        {"\x91\x95\0\0\2\1\1", 7, "more records in a key group"},
        /* an empty window */
        {"\x91\x95\0\0\0\1\0", 7, "empty window"},
        /* four fields */
        {"\x91\x94\0\0\0\1", 6, "wrong number of fields"},
        /* not an array */
        {"\x05", 1, "expected an array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *enc = heartbeat_entry_cut(&t, 19, bad[i].bytes, bad[i].len, 1, &len);
        expect_reject(enc, len, bad[i].needle);
        free(enc);
    }
    /* the largest valid one decodes */
    char *enc = heartbeat_entry_cut(&t, 19, "\x91\x95\x3f\xcd\x7f\xff\1\1\1", 9, 1, &len);
    eddy_msg_t d = decode_ok(enc, len);
    cr_assert_eq(d.u.heartbeat.tasks[0].n_key_loads, 1);
    cr_assert_eq(d.u.heartbeat.tasks[0].key_loads[0].key_group, EDDY_MAX_PARALLELISM - 1);
    eddy_msg_clear(&d);
    free(enc);
}

/* eddy_msg_peek reads a message's type and a HEARTBEAT's entry count from
 * its first bytes, whatever the worker id's width and the array's header
 * (fixarray, array 16, array 32), and never reads past the buffer. */
Test(proto, peek_type_and_heartbeat_entries)
{
    uint32_t worker_ids[] = {3, 200, 70000, 5000000};
    uint32_t counts[] = {0, 15, 16, 70000};
    for (size_t a = 0; a < sizeof worker_ids / sizeof *worker_ids; a++)
        for (size_t b = 0; b < sizeof counts / sizeof *counts; b++) {
            eddy_msg_t m = {.type = EDDY_MSG_HEARTBEAT};
            m.u.heartbeat.worker_id = worker_ids[a];
            m.u.heartbeat.n_tasks = counts[b];
            m.u.heartbeat.tasks = calloc(counts[b] ? counts[b] : 1, sizeof *m.u.heartbeat.tasks);
            cr_assert(m.u.heartbeat.tasks);
            size_t len;
            char *enc = eddy_msg_encode(&m, &len);
            free(m.u.heartbeat.tasks);
            uint32_t n = 99;
            cr_assert_eq(eddy_msg_peek(enc, len, &n), EDDY_MSG_HEARTBEAT);
            cr_assert_eq(n, counts[b], "worker %u, %u entries: peeked %u", worker_ids[a],
                         counts[b], n);
            /* every prefix: no crash, and never a count below the real one */
            for (size_t cut = 0; cut < len && cut < 16; cut++) {
                n = 99;
                eddy_msg_type_t t = eddy_msg_peek(enc, cut, &n);
                cr_assert(t == 0 || t == EDDY_MSG_HEARTBEAT);
                cr_assert(t == 0 ? n == 0 : n == counts[b] || n == UINT32_MAX);
            }
            free(enc);
        }
    eddy_msg_t r = {.type = EDDY_MSG_TASK_DONE};
    size_t len;
    char *enc = eddy_msg_encode(&r, &len);
    uint32_t n = 99;
    cr_assert_eq(eddy_msg_peek(enc, len, &n), EDDY_MSG_TASK_DONE);
    cr_assert_eq(n, 0);
    free(enc);
    /* a worker id as a signed integer (msgpack-c reads it as unsigned) */
    cr_assert_eq(eddy_msg_peek("\x94\x03\xd0\x05\xdc\x01\x00", 7, &n), EDDY_MSG_HEARTBEAT);
    cr_assert_eq(n, 256);
    /* a head that cannot be read: as many entries as can be */
    cr_assert_eq(eddy_msg_peek("\x94\x03\xc0\x90\x00", 5, &n), EDDY_MSG_HEARTBEAT);
    cr_assert_eq(n, UINT32_MAX);
    cr_assert_eq(eddy_msg_peek("\x92\x03\x01", 3, &n), EDDY_MSG_HEARTBEAT);
    cr_assert_eq(n, UINT32_MAX);
    cr_assert_eq(eddy_msg_peek("\x91\x00", 2, &n), 0);        /* type 0 */
    cr_assert_eq(eddy_msg_peek("\x91\x7f", 2, &n), 0);        /* unknown type */
    cr_assert_eq(eddy_msg_peek("\x81\x03\x03", 3, &n), 0);    /* a map, not an array */
    cr_assert_eq(eddy_msg_peek("", 0, &n), 0);
}
