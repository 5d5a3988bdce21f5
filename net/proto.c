/* proto.c - encoder and decoder of every control-plane message (see proto.h).
 *
 * Each message type has a static encode_X/decode_X pair here, kept next to
 * each other so a field added to one is visibly missing from the other. */
#include "net/proto.h"

#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"

/* Stage and instance fields are indices, so they stay below the maximum
 * counts (EDDY_MAX_STAGES stages, EDDY_MAX_PARALLELISM instances). */
#define MAX_STAGE_INDEX (EDDY_MAX_STAGES - 1)
#define MAX_INSTANCE_INDEX (EDDY_MAX_PARALLELISM - 1)

static const char *type_names[EDDY_MSG_TYPE_COUNT] = {
    [EDDY_MSG_REGISTER] = "REGISTER",     [EDDY_MSG_REGISTERED] = "REGISTERED",
    [EDDY_MSG_HEARTBEAT] = "HEARTBEAT",   [EDDY_MSG_DEPLOY] = "DEPLOY",
    [EDDY_MSG_DEPLOYED] = "DEPLOYED",     [EDDY_MSG_START] = "START",
    [EDDY_MSG_TRIGGER] = "TRIGGER",       [EDDY_MSG_ACK] = "ACK",
    [EDDY_MSG_COMPLETE] = "COMPLETE",     [EDDY_MSG_TASK_DONE] = "TASK_DONE",
    [EDDY_MSG_TASK_FAILED] = "TASK_FAILED", [EDDY_MSG_RELEASE] = "RELEASE",
    [EDDY_MSG_REQUEST] = "REQUEST",       [EDDY_MSG_REPLY] = "REPLY",
    [EDDY_MSG_PLUGIN] = "PLUGIN",
};

const char *eddy_msg_type_name(eddy_msg_type_t type)
{
    if (type <= 0 || type >= EDDY_MSG_TYPE_COUNT)
        return "UNKNOWN";
    return type_names[type];
}

const char *eddy_release_reason_name(uint32_t reason)
{
    static const char *const names[] = {"restore", "finished", "cancelled", "failed"};
    return reason <= EDDY_RELEASE_FAILED ? names[reason] : "unknown";
}

char **eddy_strv_dup(uint32_t argc, char *const *argv)
{
    char **out = calloc(argc + 1, sizeof *out);
    if (!out)
        return NULL;
    for (uint32_t i = 0; i < argc; i++) {
        out[i] = strdup(argv[i] ? argv[i] : "");
        if (!out[i]) {
            eddy_strv_free(i, out);
            return NULL;
        }
    }
    return out;
}

void eddy_strv_free(uint32_t argc, char **argv)
{
    if (!argv)
        return;
    for (uint32_t i = 0; i < argc; i++)
        free(argv[i]);
    free(argv);
}

/* ---- string vectors ---------------------------------------------------- */

static void encode_strv(eddy_mpw_t *w, uint32_t argc, char *const *argv)
{
    eddy_mpw_array(w, argc);
    for (uint32_t i = 0; i < argc; i++)
        eddy_mpw_str(w, argv[i]);
}

static char **decode_strv(eddy_mpr_t *r, uint32_t *argc)
{
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_MAX_ARGS, &si, &sc, &sn);
    char **argv = calloc(n + 1, sizeof *argv);
    if (!argv)
        eddy_mpr_fail(r, "out of memory");
    for (uint32_t i = 0; argv && i < n; i++) {
        argv[i] = eddy_mpr_strdup(r, EDDY_ARG_MAX);
        if (!argv[i])
            argv[i] = strdup(""); /* nil, or the reader already failed */
        if (!argv[i])
            eddy_mpr_fail(r, "out of memory");
    }
    eddy_mpr_leave(r, si, sc, sn);
    *argc = argv ? n : 0;
    return argv;
}

/* ---- source state bytes -------------------------------------------------- */

/* A copy of a bin of at most EDDY_SOURCE_STATE_MAX bytes; NULL/0 when empty. */
static char *decode_source_state(eddy_mpr_t *r, uint32_t *len)
{
    *len = 0;
    uint32_t n = 0;
    const char *p = eddy_mpr_bytes(r, EDDY_SOURCE_STATE_MAX, &n);
    if (!p || !r->ok || n == 0)
        return NULL;
    char *copy = malloc(n);
    if (!copy) {
        eddy_mpr_fail(r, "out of memory");
        return NULL;
    }
    memcpy(copy, p, n);
    *len = n;
    return copy;
}

static void encode_source_state(eddy_mpw_t *w, const char *state, uint32_t len)
{
    eddy_mpw_bin(w, state && len ? state : "", state ? len : 0);
}

/* ---- per-message codecs ------------------------------------------------- */

/* [sum_us, count of bucket 0, ..., count of +Inf] */
static void encode_histogram(eddy_mpw_t *w, const eddy_histogram_t *h)
{
    eddy_mpw_array(w, 1 + EDDY_HIST_BUCKETS);
    eddy_mpw_u64(w, h->sum_us);
    for (uint32_t i = 0; i < EDDY_HIST_BUCKETS; i++)
        eddy_mpw_u64(w, h->counts[i]);
}

static void decode_histogram(eddy_mpr_t *r, eddy_histogram_t *h)
{
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, 1 + EDDY_HIST_BUCKETS, &si, &sc, &sn);
    if (r->ok && n != 1 + EDDY_HIST_BUCKETS)
        eddy_mpr_fail(r, "histogram: wrong number of buckets");
    if (r->ok) {
        h->sum_us = eddy_mpr_u64(r, UINT64_MAX);
        for (uint32_t i = 0; i < EDDY_HIST_BUCKETS; i++)
            h->counts[i] = eddy_mpr_u64(r, UINT64_MAX);
    }
    eddy_mpr_leave(r, si, sc, sn);
}

/* [] when there is nothing to report, else [text, [[name, label_key,
 * label, value, counter], ...]] */
static void encode_report(eddy_mpw_t *w, const eddy_op_report_t *r)
{
    uint32_t n = r->n_gauges < EDDY_OP_REPORT_GAUGES ? r->n_gauges : EDDY_OP_REPORT_GAUGES;
    if (!r->text[0] && n == 0) {
        eddy_mpw_array(w, 0);
        return;
    }
    eddy_mpw_array(w, 2);
    eddy_mpw_str(w, r->text);
    eddy_mpw_array(w, n);
    for (uint32_t i = 0; i < n; i++) {
        const eddy_op_gauge_t *g = &r->gauges[i];
        eddy_mpw_array(w, 5);
        eddy_mpw_str(w, g->name);
        eddy_mpw_str(w, g->label_key);
        eddy_mpw_str(w, g->label);
        eddy_mpw_double(w, g->value);
        eddy_mpw_bool(w, g->counter);
    }
}

static void decode_report(eddy_mpr_t *r, eddy_op_report_t *out)
{
    const msgpack_object *si, *gi, *ei;
    uint32_t sc, sn, gc, gn, ec, en;
    eddy_op_report_clear(out);
    uint32_t fields = eddy_mpr_enter(r, 2, &si, &sc, &sn);
    if (r->ok && fields != 0 && fields != 2)
        eddy_mpr_fail(r, "operator report: expected [] or [text, gauges]");
    if (r->ok && fields == 2) {
        eddy_mpr_strcpy(r, out->text, sizeof out->text);
        uint32_t n = eddy_mpr_enter(r, EDDY_OP_REPORT_GAUGES, &gi, &gc, &gn);
        for (uint32_t i = 0; r->ok && i < n; i++) {
            eddy_op_gauge_t *g = &out->gauges[i];
            uint32_t k = eddy_mpr_enter(r, 5, &ei, &ec, &en);
            if (r->ok && k != 5)
                eddy_mpr_fail(r, "operator report: a gauge has 5 fields");
            if (r->ok) {
                eddy_mpr_strcpy(r, g->name, sizeof g->name);
                eddy_mpr_strcpy(r, g->label_key, sizeof g->label_key);
                eddy_mpr_strcpy(r, g->label, sizeof g->label);
                g->value = eddy_mpr_double(r);
                g->counter = eddy_mpr_bool(r);
            }
            /* Names end up in /metrics unquoted: only [a-z0-9_]. */
            if (r->ok && (!eddy_op_report_name_ok(g->name, sizeof g->name) ||
                          (g->label_key[0] &&
                           !eddy_op_report_name_ok(g->label_key, sizeof g->label_key))))
                eddy_mpr_fail(r, "operator report: gauge name not [a-z0-9_]");
            eddy_mpr_leave(r, ei, ec, en);
            if (r->ok)
                out->n_gauges = i + 1;
        }
        eddy_mpr_leave(r, gi, gc, gn);
    }
    eddy_mpr_leave(r, si, sc, sn);
}

static void encode_metrics(eddy_mpw_t *w, const eddy_task_metrics_t *m)
{
    eddy_mpw_array(w, 20);
    eddy_mpw_u64(w, m->job);
    eddy_mpw_u64(w, m->epoch);
    eddy_mpw_u64(w, m->stage);
    eddy_mpw_u64(w, m->instance);
    eddy_mpw_u64(w, m->records_in);
    eddy_mpw_u64(w, m->records_out);
    eddy_mpw_u64(w, m->busy_ns);
    eddy_mpw_u64(w, m->idle_ns);
    eddy_mpw_u64(w, m->blocked_ns);
    eddy_mpw_u64(w, m->state_keys);
    eddy_mpw_u64(w, m->state_bytes);
    eddy_mpw_i64(w, m->position);
    eddy_mpw_double(w, m->offered_rate);
    eddy_mpw_i64(w, m->watermark);
    eddy_mpw_u64(w, m->late_records);
    eddy_mpw_i64(w, m->source_lag);
    eddy_mpw_u64(w, m->rejected_records);
    encode_histogram(w, &m->latency);
    encode_histogram(w, &m->event_lag);
    encode_report(w, &m->report);
}

static void decode_metrics(eddy_mpr_t *r, eddy_task_metrics_t *m)
{
    const msgpack_object *si;
    uint32_t sc, sn;
    /* 15 fields before source_lag was added (those read as lag unknown),
     * 16 before rejected_records, 17 before the histograms (empty), 19
     * before the operator report (empty). */
    uint32_t fields = eddy_mpr_enter(r, 20, &si, &sc, &sn);
    m->job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    m->epoch = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    m->stage = (uint32_t)eddy_mpr_u64(r, MAX_STAGE_INDEX);
    m->instance = (uint32_t)eddy_mpr_u64(r, MAX_INSTANCE_INDEX);
    m->records_in = eddy_mpr_u64(r, UINT64_MAX);
    m->records_out = eddy_mpr_u64(r, UINT64_MAX);
    m->busy_ns = eddy_mpr_u64(r, UINT64_MAX);
    m->idle_ns = eddy_mpr_u64(r, UINT64_MAX);
    m->blocked_ns = eddy_mpr_u64(r, UINT64_MAX);
    m->state_keys = eddy_mpr_u64(r, UINT64_MAX);
    m->state_bytes = eddy_mpr_u64(r, UINT64_MAX);
    m->position = eddy_mpr_i64(r);
    m->offered_rate = eddy_mpr_double(r);
    m->watermark = eddy_mpr_i64(r);
    m->late_records = eddy_mpr_u64(r, UINT64_MAX);
    m->source_lag = fields > 15 ? eddy_mpr_i64(r) : -1;
    m->rejected_records = fields > 16 ? eddy_mpr_u64(r, UINT64_MAX) : 0;
    memset(&m->latency, 0, sizeof m->latency);
    memset(&m->event_lag, 0, sizeof m->event_lag);
    if (fields > 17)
        decode_histogram(r, &m->latency);
    if (fields > 18)
        decode_histogram(r, &m->event_lag);
    if (fields > 19)
        decode_report(r, &m->report);
    else
        eddy_op_report_clear(&m->report);
    eddy_mpr_leave(r, si, sc, sn);
}

static void encode_body(eddy_mpw_t *w, const eddy_msg_t *m)
{
    switch (m->type) {
    case EDDY_MSG_REGISTER:
        eddy_mpw_str(w, m->u.reg.name);
        eddy_mpw_str(w, m->u.reg.data_endpoint);
        eddy_mpw_i64(w, m->u.reg.pid);
        eddy_mpw_str(w, m->u.reg.host);
        eddy_mpw_u64(w, m->u.reg.protocol_version);
        eddy_mpw_u64(w, m->u.reg.cores);
        break;
    case EDDY_MSG_REGISTERED:
        eddy_mpw_u64(w, m->u.registered.worker_id);
        eddy_mpw_u64(w, m->u.registered.heartbeat_ms);
        eddy_mpw_str(w, m->u.registered.error);
        eddy_mpw_bool(w, m->u.registered.not_leader);
        eddy_mpw_str(w, m->u.registered.leader);
        eddy_mpw_bool(w, m->u.registered.fatal);
        break;
    case EDDY_MSG_HEARTBEAT:
        eddy_mpw_u64(w, m->u.heartbeat.worker_id);
        eddy_mpw_array(w, m->u.heartbeat.n_tasks);
        for (uint32_t i = 0; i < m->u.heartbeat.n_tasks; i++)
            encode_metrics(w, &m->u.heartbeat.tasks[i]);
        break;
    case EDDY_MSG_DEPLOY: {
        const eddy_deploy_t *d = &m->u.deploy;
        eddy_mpw_u64(w, d->job);
        eddy_mpw_str(w, d->job_id);
        eddy_mpw_str(w, d->job_name);
        eddy_mpw_bin(w, d->plan, d->plan_len);
        eddy_mpw_u64(w, d->plan_fingerprint);
        encode_strv(w, d->n_plugins, d->plugins);
        eddy_mpw_u64(w, d->epoch);
        eddy_mpw_u64(w, d->mode);
        eddy_mpw_u64(w, d->restore_checkpoint);
        eddy_mpw_str(w, d->snapshot_dir);
        eddy_mpw_u64(w, d->max_parallelism);
        eddy_mpw_u64(w, d->guarantee);
        eddy_mpw_array(w, d->n_stages);
        for (uint32_t s = 0; s < d->n_stages; s++) {
            eddy_mpw_array(w, d->stages[s].parallelism);
            for (uint32_t i = 0; i < d->stages[s].parallelism; i++)
                eddy_mpw_u64(w, d->stages[s].worker_of[i]);
        }
        eddy_mpw_array(w, d->n_workers * 2);
        for (uint32_t i = 0; i < d->n_workers; i++) {
            eddy_mpw_u64(w, d->workers[i].id);
            eddy_mpw_str(w, d->workers[i].endpoint);
        }
        eddy_mpw_array(w, d->n_positions * 4);
        for (uint32_t i = 0; i < d->n_positions; i++) {
            eddy_mpw_u64(w, d->positions[i].stage);
            eddy_mpw_u64(w, d->positions[i].instance);
            eddy_mpw_i64(w, d->positions[i].position);
            encode_source_state(w, d->positions[i].state, d->positions[i].state_len);
        }
        break;
    }
    case EDDY_MSG_DEPLOYED:
        eddy_mpw_u64(w, m->u.deployed.job);
        eddy_mpw_u64(w, m->u.deployed.epoch);
        eddy_mpw_u64(w, m->u.deployed.bytes_loaded);
        eddy_mpw_u64(w, m->u.deployed.groups_loaded);
        eddy_mpw_str(w, m->u.deployed.error);
        break;
    case EDDY_MSG_START:
        eddy_mpw_u64(w, m->u.start.job);
        eddy_mpw_u64(w, m->u.start.epoch);
        break;
    case EDDY_MSG_TRIGGER:
        eddy_mpw_u64(w, m->u.trigger.job);
        eddy_mpw_u64(w, m->u.trigger.epoch);
        eddy_mpw_u64(w, m->u.trigger.checkpoint);
        eddy_mpw_bool(w, m->u.trigger.pause_after);
        eddy_mpw_u64(w, m->u.trigger.migrate_stage);
        eddy_mpw_u64(w, m->u.trigger.migrate_parallelism);
        break;
    case EDDY_MSG_ACK:
        eddy_mpw_u64(w, m->u.ack.job);
        eddy_mpw_u64(w, m->u.ack.epoch);
        eddy_mpw_u64(w, m->u.ack.checkpoint);
        eddy_mpw_u64(w, m->u.ack.stage);
        eddy_mpw_u64(w, m->u.ack.instance);
        eddy_mpw_i64(w, m->u.ack.position);
        eddy_mpw_u64(w, m->u.ack.state_keys);
        eddy_mpw_u64(w, m->u.ack.bytes_written);
        eddy_mpw_u64(w, m->u.ack.files_written);
        eddy_mpw_str(w, m->u.ack.error);
        encode_source_state(w, m->u.ack.source_state, m->u.ack.source_state_len);
        break;
    case EDDY_MSG_COMPLETE:
        eddy_mpw_u64(w, m->u.complete.job);
        eddy_mpw_u64(w, m->u.complete.checkpoint);
        break;
    case EDDY_MSG_TASK_DONE:
        eddy_mpw_u64(w, m->u.task_done.job);
        eddy_mpw_u64(w, m->u.task_done.epoch);
        eddy_mpw_u64(w, m->u.task_done.stage);
        eddy_mpw_u64(w, m->u.task_done.instance);
        break;
    case EDDY_MSG_TASK_FAILED:
        eddy_mpw_u64(w, m->u.task_failed.job);
        eddy_mpw_u64(w, m->u.task_failed.epoch);
        eddy_mpw_u64(w, m->u.task_failed.stage);
        eddy_mpw_u64(w, m->u.task_failed.instance);
        eddy_mpw_str(w, m->u.task_failed.error);
        break;
    case EDDY_MSG_RELEASE:
        eddy_mpw_u64(w, m->u.release.job);
        eddy_mpw_u64(w, m->u.release.reason);
        break;
    case EDDY_MSG_REQUEST:
        eddy_mpw_str(w, m->u.request.verb);
        encode_strv(w, m->u.request.argc, m->u.request.argv);
        break;
    case EDDY_MSG_REPLY:
        eddy_mpw_i64(w, m->u.reply.status);
        eddy_mpw_str(w, m->u.reply.body ? m->u.reply.body : "");
        break;
    case EDDY_MSG_PLUGIN:
        eddy_mpw_str(w, m->u.plugin.hash);
        eddy_mpw_bin(w, m->u.plugin.data, m->u.plugin.len);
        eddy_mpw_str(w, m->u.plugin.error);
        break;
    default:
        break;
    }
}

static const uint32_t field_counts[EDDY_MSG_TYPE_COUNT] = {
    [EDDY_MSG_REGISTER] = 6, [EDDY_MSG_REGISTERED] = 6, [EDDY_MSG_HEARTBEAT] = 2,
    [EDDY_MSG_DEPLOY] = 15,  [EDDY_MSG_DEPLOYED] = 5,   [EDDY_MSG_START] = 2,
    [EDDY_MSG_TRIGGER] = 6,  [EDDY_MSG_ACK] = 11,       [EDDY_MSG_COMPLETE] = 2,
    [EDDY_MSG_TASK_DONE] = 4, [EDDY_MSG_TASK_FAILED] = 5, [EDDY_MSG_RELEASE] = 2,
    [EDDY_MSG_REQUEST] = 2,  [EDDY_MSG_REPLY] = 2,     [EDDY_MSG_PLUGIN] = 3,
};

/* Forms of older peers still read, without the trailing leader epoch: a
 * REGISTER (so an older worker is refused naming both versions), a
 * REGISTERED (so a newer worker hears an older coordinator's refusal), and
 * a RELEASE with or without its reason (protocol 4 and 5). */
static bool older_form(uint64_t type, uint32_t fields)
{
    switch (type) {
    case EDDY_MSG_REGISTER: /* protocol 5's had no cores */
        return fields == field_counts[type] || fields == field_counts[type] - 1;
    case EDDY_MSG_REGISTERED:
        return fields == 3; /* before the leader fields */
    case EDDY_MSG_RELEASE:
        return fields == 1 || fields == 2;
    default:
        return false;
    }
}

char *eddy_msg_encode(const eddy_msg_t *msg, size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    uint32_t fields = (msg->type > 0 && msg->type < EDDY_MSG_TYPE_COUNT) ? field_counts[msg->type] : 0;
    eddy_mpw_array(&w, 1 + fields + 1);
    eddy_mpw_u64(&w, (uint64_t)msg->type);
    encode_body(&w, msg);
    eddy_mpw_u64(&w, msg->leader_epoch);
    return eddy_mpw_release(&w, len);
}

static void decode_deploy(eddy_mpr_t *r, eddy_msg_t *m)
{
    eddy_deploy_t *d = &m->u.deploy;
    const msgpack_object *si;
    uint32_t sc, sn;
    d->job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    eddy_mpr_strcpy(r, d->job_id, sizeof d->job_id);
    eddy_mpr_strcpy(r, d->job_name, sizeof d->job_name);
    uint32_t plan_len = 0;
    const char *plan = eddy_mpr_bytes(r, EDDY_PLAN_MAX_WIRE, &plan_len);
    if (plan && r->ok) {
        d->plan = malloc(plan_len ? plan_len : 1);
        if (d->plan) {
            memcpy(d->plan, plan, plan_len);
            d->plan_len = plan_len;
        } else {
            eddy_mpr_fail(r, "out of memory");
        }
    }
    d->plan_fingerprint = eddy_mpr_u64(r, UINT64_MAX);
    d->plugins = decode_strv(r, &d->n_plugins);
    if (d->n_plugins > EDDY_MAX_PLUGINS)
        eddy_mpr_fail(r, "too many plugins");
    d->epoch = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    d->mode = (uint32_t)eddy_mpr_u64(r, EDDY_DEPLOY_RESTORE);
    d->restore_checkpoint = eddy_mpr_u64(r, UINT64_MAX);
    eddy_mpr_strcpy(r, d->snapshot_dir, sizeof d->snapshot_dir);
    d->max_parallelism = (uint32_t)eddy_mpr_u64(r, EDDY_MAX_PARALLELISM);
    d->guarantee = (uint32_t)eddy_mpr_u64(r, EDDY_GUARANTEE_LAST);

    uint32_t n = eddy_mpr_enter(r, EDDY_MAX_STAGES, &si, &sc, &sn);
    d->stages = calloc(n ? n : 1, sizeof *d->stages);
    if (d->stages) {
        d->n_stages = n;
        for (uint32_t s = 0; s < n; s++) {
            const msgpack_object *si2;
            uint32_t sc2, sn2;
            uint32_t p = eddy_mpr_enter(r, EDDY_MAX_PARALLELISM, &si2, &sc2, &sn2);
            d->stages[s].worker_of = calloc(p ? p : 1, sizeof(uint32_t));
            if (d->stages[s].worker_of) {
                d->stages[s].parallelism = p;
                for (uint32_t i = 0; i < p; i++)
                    d->stages[s].worker_of[i] = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
            } else {
                eddy_mpr_fail(r, "out of memory");
            }
            eddy_mpr_leave(r, si2, sc2, sn2);
        }
    } else {
        eddy_mpr_fail(r, "out of memory");
    }
    eddy_mpr_leave(r, si, sc, sn);

    n = eddy_mpr_enter(r, EDDY_MAX_WORKERS * 2, &si, &sc, &sn);
    if (n % 2)
        eddy_mpr_fail(r, "workers array is not (id, endpoint) pairs");
    d->workers = calloc(n / 2 ? n / 2 : 1, sizeof *d->workers);
    if (d->workers) {
        d->n_workers = n / 2;
        for (uint32_t i = 0; i < n / 2; i++) {
            d->workers[i].id = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
            eddy_mpr_strcpy(r, d->workers[i].endpoint, sizeof d->workers[i].endpoint);
        }
    } else {
        eddy_mpr_fail(r, "out of memory");
    }
    eddy_mpr_leave(r, si, sc, sn);

    n = eddy_mpr_enter(r, EDDY_MAX_PARALLELISM * 4, &si, &sc, &sn);
    if (n % 4)
        eddy_mpr_fail(r, "positions array is not (stage, instance, position, state) quadruples");
    d->positions = calloc(n / 4 ? n / 4 : 1, sizeof *d->positions);
    if (d->positions) {
        d->n_positions = n / 4;
        for (uint32_t i = 0; i < n / 4; i++) {
            d->positions[i].stage = (uint32_t)eddy_mpr_u64(r, MAX_STAGE_INDEX);
            d->positions[i].instance = (uint32_t)eddy_mpr_u64(r, MAX_INSTANCE_INDEX);
            d->positions[i].position = eddy_mpr_i64(r);
            d->positions[i].state = decode_source_state(r, &d->positions[i].state_len);
        }
    } else {
        eddy_mpr_fail(r, "out of memory");
    }
    eddy_mpr_leave(r, si, sc, sn);
}

/* has_epoch: the message ends with the leader epoch, so optional fields
 * before it are present when more than that one field remains. */
static void decode_body(eddy_mpr_t *r, eddy_msg_t *m, bool has_epoch)
{
    uint32_t tail = has_epoch ? 1 : 0;
    switch (m->type) {
    case EDDY_MSG_REGISTER:
        eddy_mpr_strcpy(r, m->u.reg.name, sizeof m->u.reg.name);
        eddy_mpr_strcpy(r, m->u.reg.data_endpoint, sizeof m->u.reg.data_endpoint);
        m->u.reg.pid = eddy_mpr_i64(r);
        eddy_mpr_strcpy(r, m->u.reg.host, sizeof m->u.reg.host);
        m->u.reg.protocol_version = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.reg.cores = eddy_mpr_remaining(r) > tail ? (uint32_t)eddy_mpr_u64(r, UINT32_MAX) : 0;
        break;
    case EDDY_MSG_REGISTERED:
        m->u.registered.worker_id = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.registered.heartbeat_ms = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        eddy_mpr_strcpy(r, m->u.registered.error, sizeof m->u.registered.error);
        if (eddy_mpr_remaining(r) > tail) { /* the leader fields, before the leader epoch */
            m->u.registered.not_leader = eddy_mpr_bool(r);
            eddy_mpr_strcpy(r, m->u.registered.leader, sizeof m->u.registered.leader);
            m->u.registered.fatal = eddy_mpr_bool(r);
        }
        break;
    case EDDY_MSG_HEARTBEAT: {
        m->u.heartbeat.worker_id = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        const msgpack_object *si;
        uint32_t sc, sn;
        uint32_t n = eddy_mpr_enter(r, EDDY_MAX_TASK_METRICS, &si, &sc, &sn);
        m->u.heartbeat.tasks = calloc(n ? n : 1, sizeof *m->u.heartbeat.tasks);
        if (m->u.heartbeat.tasks) {
            m->u.heartbeat.n_tasks = n;
            for (uint32_t i = 0; i < n; i++)
                decode_metrics(r, &m->u.heartbeat.tasks[i]);
        } else {
            eddy_mpr_fail(r, "out of memory");
        }
        eddy_mpr_leave(r, si, sc, sn);
        break;
    }
    case EDDY_MSG_DEPLOY:
        decode_deploy(r, m);
        break;
    case EDDY_MSG_DEPLOYED:
        m->u.deployed.job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.deployed.epoch = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.deployed.bytes_loaded = eddy_mpr_u64(r, UINT64_MAX);
        m->u.deployed.groups_loaded = eddy_mpr_u64(r, UINT64_MAX);
        eddy_mpr_strcpy(r, m->u.deployed.error, sizeof m->u.deployed.error);
        break;
    case EDDY_MSG_START:
        m->u.start.job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.start.epoch = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        break;
    case EDDY_MSG_TRIGGER:
        m->u.trigger.job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.trigger.epoch = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.trigger.checkpoint = eddy_mpr_u64(r, UINT64_MAX);
        m->u.trigger.pause_after = eddy_mpr_bool(r);
        m->u.trigger.migrate_stage = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.trigger.migrate_parallelism = (uint32_t)eddy_mpr_u64(r, EDDY_MAX_PARALLELISM);
        break;
    case EDDY_MSG_ACK:
        m->u.ack.job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.ack.epoch = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.ack.checkpoint = eddy_mpr_u64(r, UINT64_MAX);
        m->u.ack.stage = (uint32_t)eddy_mpr_u64(r, MAX_STAGE_INDEX);
        m->u.ack.instance = (uint32_t)eddy_mpr_u64(r, MAX_INSTANCE_INDEX);
        m->u.ack.position = eddy_mpr_i64(r);
        m->u.ack.state_keys = eddy_mpr_u64(r, UINT64_MAX);
        m->u.ack.bytes_written = eddy_mpr_u64(r, UINT64_MAX);
        m->u.ack.files_written = eddy_mpr_u64(r, UINT64_MAX);
        eddy_mpr_strcpy(r, m->u.ack.error, sizeof m->u.ack.error);
        m->u.ack.source_state = decode_source_state(r, &m->u.ack.source_state_len);
        break;
    case EDDY_MSG_COMPLETE:
        m->u.complete.job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.complete.checkpoint = eddy_mpr_u64(r, UINT64_MAX);
        break;
    case EDDY_MSG_TASK_DONE:
        m->u.task_done.job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.task_done.epoch = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.task_done.stage = (uint32_t)eddy_mpr_u64(r, MAX_STAGE_INDEX);
        m->u.task_done.instance = (uint32_t)eddy_mpr_u64(r, MAX_INSTANCE_INDEX);
        break;
    case EDDY_MSG_TASK_FAILED:
        m->u.task_failed.job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.task_failed.epoch = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        m->u.task_failed.stage = (uint32_t)eddy_mpr_u64(r, MAX_STAGE_INDEX);
        m->u.task_failed.instance = (uint32_t)eddy_mpr_u64(r, MAX_INSTANCE_INDEX);
        eddy_mpr_strcpy(r, m->u.task_failed.error, sizeof m->u.task_failed.error);
        break;
    case EDDY_MSG_RELEASE:
        m->u.release.job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        /* absent in a RELEASE of protocol 4: a restore */
        m->u.release.reason = eddy_mpr_remaining(r) > tail
                                  ? (uint32_t)eddy_mpr_u64(r, EDDY_RELEASE_FAILED)
                                  : EDDY_RELEASE_RESTORE;
        break;
    case EDDY_MSG_REQUEST:
        eddy_mpr_strcpy(r, m->u.request.verb, sizeof m->u.request.verb);
        m->u.request.argv = decode_strv(r, &m->u.request.argc);
        break;
    case EDDY_MSG_REPLY:
        m->u.reply.status = eddy_mpr_i64(r);
        m->u.reply.body = eddy_mpr_strdup(r, EDDY_BODY_MAX);
        break;
    case EDDY_MSG_PLUGIN: {
        eddy_mpr_strcpy(r, m->u.plugin.hash, sizeof m->u.plugin.hash);
        uint32_t len = 0;
        const char *data = eddy_mpr_bytes(r, EDDY_PLUGIN_MAX_WIRE, &len);
        if (data && r->ok && len > 0) {
            m->u.plugin.data = malloc(len);
            if (m->u.plugin.data) {
                memcpy(m->u.plugin.data, data, len);
                m->u.plugin.len = len;
            } else {
                eddy_mpr_fail(r, "out of memory");
            }
        }
        eddy_mpr_strcpy(r, m->u.plugin.error, sizeof m->u.plugin.error);
        break;
    }
    default:
        break;
    }
}

int eddy_msg_decode(const void *data, size_t len, eddy_msg_t *msg, eddy_err_t *err)
{
    memset(msg, 0, sizeof *msg);
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) < 0)
        return -1;
    uint64_t type = eddy_mpr_u64(&r, EDDY_MSG_TYPE_COUNT - 1);
    if (!r.ok || type == 0) {
        eddy_mpr_close(&r);
        return eddy_err_set(err, "malformed message: unknown message type");
    }
    msg->type = (eddy_msg_type_t)type;
    uint32_t fields = eddy_mpr_remaining(&r); /* before close, which zeroes the count */
    /* Every message ends with the leader epoch; older forms (fewer fields,
     * no epoch) are read with the missing fields at their defaults. */
    bool full = fields == field_counts[type] + 1;
    if (!full && !older_form(type, fields)) {
        eddy_mpr_close(&r);
        msg->type = 0;
        return eddy_err_set(err, "malformed %s message: %u fields, expected %u",
                            type_names[type], fields, field_counts[type] + 1);
    }
    decode_body(&r, msg, full);
    if (full)
        msg->leader_epoch = eddy_mpr_u64(&r, UINT64_MAX);
    int rc = eddy_mpr_finish(&r, type_names[type], err);
    eddy_mpr_close(&r);
    if (rc < 0)
        eddy_msg_clear(msg);
    return rc;
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Every placed worker id in the worker list: sorted ids and a binary search
 * keep a large placement cheap. */
static int check_placed_workers(const eddy_deploy_t *d, eddy_err_t *err)
{
    uint32_t *ids = malloc((d->n_workers ? d->n_workers : 1) * sizeof *ids);
    if (!ids)
        return eddy_err_set(err, "out of memory");
    for (uint32_t i = 0; i < d->n_workers; i++)
        ids[i] = d->workers[i].id;
    qsort(ids, d->n_workers, sizeof *ids, compare_u32);
    int rc = 0;
    for (uint32_t s = 0; s < d->n_stages && rc == 0; s++)
        for (uint32_t k = 0; k < d->stages[s].parallelism; k++) {
            uint32_t id = d->stages[s].worker_of[k];
            if (!bsearch(&id, ids, d->n_workers, sizeof *ids, compare_u32)) {
                rc = eddy_err_set(err, "invalid DEPLOY: stage %u instance %u is placed on "
                                       "worker %u, which is not in its worker list", s, k, id);
                break;
            }
        }
    free(ids);
    return rc;
}

int eddy_deploy_check(const eddy_deploy_t *d, uint32_t graph_stages,
                      uint32_t graph_max_parallelism, eddy_err_t *err)
{
    if (d->max_parallelism < 1 || d->max_parallelism > EDDY_MAX_PARALLELISM)
        return eddy_err_set(err, "invalid DEPLOY: max parallelism %u is not in 1..%u",
                            d->max_parallelism, EDDY_MAX_PARALLELISM);
    if (d->max_parallelism != graph_max_parallelism)
        return eddy_err_set(err, "invalid DEPLOY: max parallelism %u, job graph %u",
                            d->max_parallelism, graph_max_parallelism);
    if (d->n_stages != graph_stages || !d->stages)
        return eddy_err_set(err, "invalid DEPLOY: %u stages, job graph %u", d->n_stages,
                            graph_stages);
    for (uint32_t s = 0; s < d->n_stages; s++) {
        const eddy_stage_placement_t *st = &d->stages[s];
        if (st->parallelism < 1 || st->parallelism > d->max_parallelism || !st->worker_of)
            return eddy_err_set(err, "invalid DEPLOY: stage %u has parallelism %u, not in 1..%u",
                                s, st->parallelism, d->max_parallelism);
    }
    if (check_placed_workers(d, err) < 0)
        return -1;
    for (uint32_t i = 0; i < d->n_positions; i++) {
        const eddy_source_position_t *p = &d->positions[i];
        if (p->stage >= d->n_stages || p->instance >= d->stages[p->stage].parallelism)
            return eddy_err_set(err, "invalid DEPLOY: source position for %u[%u], which is "
                                     "not placed", p->stage, p->instance);
    }
    return 0;
}

void eddy_msg_clear(eddy_msg_t *msg)
{
    switch (msg->type) {
    case EDDY_MSG_HEARTBEAT:
        free(msg->u.heartbeat.tasks);
        break;
    case EDDY_MSG_DEPLOY:
        free(msg->u.deploy.plan);
        eddy_strv_free(msg->u.deploy.n_plugins, msg->u.deploy.plugins);
        for (uint32_t s = 0; msg->u.deploy.stages && s < msg->u.deploy.n_stages; s++)
            free(msg->u.deploy.stages[s].worker_of);
        free(msg->u.deploy.stages);
        free(msg->u.deploy.workers);
        for (uint32_t i = 0; msg->u.deploy.positions && i < msg->u.deploy.n_positions; i++)
            free(msg->u.deploy.positions[i].state);
        free(msg->u.deploy.positions);
        break;
    case EDDY_MSG_ACK:
        free(msg->u.ack.source_state);
        break;
    case EDDY_MSG_REQUEST:
        eddy_strv_free(msg->u.request.argc, msg->u.request.argv);
        break;
    case EDDY_MSG_REPLY:
        free(msg->u.reply.body);
        break;
    case EDDY_MSG_PLUGIN:
        free(msg->u.plugin.data);
        break;
    default:
        break;
    }
    memset(msg, 0, sizeof *msg);
}
