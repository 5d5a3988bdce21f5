/* proto.c - encoder and decoder of every control-plane message (see proto.h).
 *
 * Each message type has a static encode_X/decode_X pair here, kept next to
 * each other so a field added to one is visibly missing from the other. */
#include "net/proto.h"

#include <stdlib.h>
#include <string.h>

#include "net/dataplane.h" /* EDDY_HANDOFF_MAX_GROUPS */
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
    [EDDY_MSG_PLUGIN] = "PLUGIN",         [EDDY_MSG_LEAVE] = "LEAVE",
    [EDDY_MSG_ROUTE_STEP] = "ROUTE_STEP", [EDDY_MSG_STEP_DONE] = "STEP_DONE",
    [EDDY_MSG_LIVENESS] = "LIVENESS",
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

/* ---- field tables --------------------------------------------------------
 *
 * A message body (and a task's metrics in a HEARTBEAT) is a msgpack array
 * of fields in a fixed order. One table per layout lists them, with where
 * each lives in the C struct and its bound; the encoder, the decoder and
 * eddy_msg_clear all walk the same table, so a field cannot be added to one
 * and forgotten in another. Shapes a table cannot say (DEPLOY's placement
 * arrays, the HEARTBEAT's task list) are FIELD_CUSTOM with their own pair
 * of functions next to each other below. */

typedef enum field_kind {
    FIELD_U32,       /* uint32_t at most max */
    FIELD_U64,       /* uint64_t at most max */
    FIELD_I64,       /* int64_t */
    FIELD_BOOL,      /* bool */
    FIELD_DOUBLE,    /* double */
    FIELD_TEXT,      /* char[max], NUL-terminated; a longer string is an error */
    FIELD_STRING,    /* char * (heap), at most max bytes; NULL is sent as "" */
    FIELD_BYTES,     /* char * (heap) and its uint32_t length at len_offset, at most max */
    FIELD_STRV,      /* char ** (heap) and its uint32_t count at len_offset, at most max */
    FIELD_HISTOGRAM, /* eddy_histogram_t */
    FIELD_CUSTOM,    /* encode/decode/clear below */
} field_kind_t;

typedef struct field {
    field_kind_t kind;
    size_t offset;     /* of the value in its struct */
    size_t len_offset; /* FIELD_BYTES, FIELD_STRV: of the uint32_t length or count */
    uint64_t max;      /* the bound checked on decoding (see the kinds) */
    int64_t absent;    /* integers: the value when an older form lacks the field */
    void (*encode)(eddy_mpw_t *w, const void *obj);
    void (*decode)(eddy_mpr_t *r, void *obj);
    void (*clear)(void *obj);
} field_t;

typedef struct layout {
    const field_t *fields;
    uint32_t count;
    /* Field counts of older forms still read (missing fields take their
     * `absent` value); 0 ends the list. Messages of an older form have no
     * trailing leader epoch. */
    uint32_t older[2];
    /* How many last fields a peer of this protocol may leave out and still
     * end with the leader epoch (a field added later as optional): such a
     * form is read with them at their absent values. */
    uint32_t optional;
} layout_t;

#define ELEMS(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

static void *at(void *obj, size_t offset)
{
    return (char *)obj + offset;
}

static const void *cat(const void *obj, size_t offset)
{
    return (const char *)obj + offset;
}

static void encode_fields(eddy_mpw_t *w, const layout_t *l, const void *obj);
static void decode_fields(eddy_mpr_t *r, const layout_t *l, void *obj, uint32_t present);
static void clear_fields(const layout_t *l, void *obj);

/* ---- string vectors ---------------------------------------------------- */

static void encode_strv(eddy_mpw_t *w, uint32_t argc, char *const *argv)
{
    eddy_mpw_array(w, argc);
    for (uint32_t i = 0; i < argc; i++)
        eddy_mpw_str(w, argv[i]);
}

static char **decode_strv(eddy_mpr_t *r, uint32_t max, uint32_t *argc)
{
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, max, &si, &sc, &sn);
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

/* ---- byte strings ---------------------------------------------------------- */

/* A heap copy of a bin of at most max bytes; NULL/0 when empty. */
static char *decode_bytes(eddy_mpr_t *r, uint64_t max, uint32_t *len)
{
    *len = 0;
    uint32_t n = 0;
    const char *p = eddy_mpr_bytes(r, (uint32_t)max, &n);
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

static void encode_bytes(eddy_mpw_t *w, const char *data, uint32_t len)
{
    eddy_mpw_bin(w, data && len ? data : "", data ? len : 0);
}

/* ---- histograms: [sum_us, count of bucket 0, ..., count of +Inf] ----------- */

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

/* ---- a task's metrics in a HEARTBEAT --------------------------------------- */

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

/* FIELD_CUSTOM wrappers: the report is a fixed-size member, nothing to free. */
static void encode_task_report(eddy_mpw_t *w, const void *obj)
{
    encode_report(w, &((const eddy_task_metrics_t *)obj)->report);
}

static void decode_task_report(eddy_mpr_t *r, void *obj)
{
    decode_report(r, &((eddy_task_metrics_t *)obj)->report);
}

static void clear_task_report(void *obj)
{
    (void)obj;
}


#define TASK(member) offsetof(eddy_task_metrics_t, member)

/* The key loads: [[dst_stage, key_group, key_group_records, records,
 * window_ms], ...], at most EDDY_KEY_LOADS_MAX. */
static void encode_key_loads(eddy_mpw_t *w, const void *obj)
{
    const eddy_task_metrics_t *m = obj;
    uint32_t n = m->n_key_loads < EDDY_KEY_LOADS_MAX ? m->n_key_loads : EDDY_KEY_LOADS_MAX;
    eddy_mpw_array(w, n);
    for (uint32_t i = 0; i < n; i++) {
        const eddy_key_load_t *k = &m->key_loads[i];
        eddy_mpw_array(w, 5);
        eddy_mpw_u64(w, k->dst_stage);
        eddy_mpw_u64(w, k->key_group);
        eddy_mpw_u64(w, k->key_group_records);
        eddy_mpw_u64(w, k->records);
        eddy_mpw_u64(w, k->window_ms);
    }
}

static void decode_key_loads(eddy_mpr_t *r, void *obj)
{
    eddy_task_metrics_t *m = obj;
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_KEY_LOADS_MAX, &si, &sc, &sn);
    for (uint32_t i = 0; r->ok && i < n; i++) {
        eddy_key_load_t *k = &m->key_loads[i];
        const msgpack_object *ki;
        uint32_t kc, kn;
        uint32_t fields = eddy_mpr_enter(r, 5, &ki, &kc, &kn);
        if (r->ok && fields != 5)
            eddy_mpr_fail(r, "key load: wrong number of fields");
        if (r->ok) {
            k->dst_stage = (uint32_t)eddy_mpr_u64(r, MAX_STAGE_INDEX);
            k->key_group = (uint32_t)eddy_mpr_u64(r, EDDY_MAX_PARALLELISM - 1);
            k->key_group_records = eddy_mpr_u64(r, UINT64_MAX);
            k->records = eddy_mpr_u64(r, UINT64_MAX);
            k->window_ms = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        }
        if (r->ok && (k->key_group_records > k->records || k->window_ms == 0))
            eddy_mpr_fail(r, "key load: more records in a key group than in all, or an empty window");
        eddy_mpr_leave(r, ki, kc, kn);
    }
    m->n_key_loads = r->ok ? n : 0;
    eddy_mpr_leave(r, si, sc, sn);
}

static void clear_key_loads(void *obj)
{
    (void)obj; /* held in the struct */
}

/* 15 fields before source_lag was added (those read as lag unknown), 16
 * before rejected_records, 17 before the histograms (empty), 19 before the
 * key loads (none), 20 before the operator report (empty). */
static const field_t task_metrics_fields[] = {
    {.kind = FIELD_U32, .offset = TASK(job), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = TASK(epoch), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = TASK(stage), .max = MAX_STAGE_INDEX},
    {.kind = FIELD_U32, .offset = TASK(instance), .max = MAX_INSTANCE_INDEX},
    {.kind = FIELD_U64, .offset = TASK(records_in), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = TASK(records_out), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = TASK(busy_ns), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = TASK(idle_ns), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = TASK(blocked_ns), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = TASK(state_keys), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = TASK(state_bytes), .max = UINT64_MAX},
    {.kind = FIELD_I64, .offset = TASK(position)},
    {.kind = FIELD_DOUBLE, .offset = TASK(offered_rate)},
    {.kind = FIELD_I64, .offset = TASK(watermark)},
    {.kind = FIELD_U64, .offset = TASK(late_records), .max = UINT64_MAX},
    {.kind = FIELD_I64, .offset = TASK(source_lag), .absent = -1},
    {.kind = FIELD_U64, .offset = TASK(rejected_records), .max = UINT64_MAX},
    {.kind = FIELD_HISTOGRAM, .offset = TASK(latency)},
    {.kind = FIELD_HISTOGRAM, .offset = TASK(event_lag)},
    {.kind = FIELD_CUSTOM, .encode = encode_key_loads,
     .decode = decode_key_loads, .clear = clear_key_loads},
    /* 20 fields before the operator report (an older worker's: empty) */
    {.kind = FIELD_CUSTOM, .encode = encode_task_report, .decode = decode_task_report,
     .clear = clear_task_report},
};
static const uint32_t task_metrics_oldest = 15;

static const layout_t task_metrics_layout = {task_metrics_fields, ELEMS(task_metrics_fields), {0}, 0};

static void encode_tasks(eddy_mpw_t *w, const void *obj)
{
    const eddy_msg_t *m = obj;
    eddy_mpw_array(w, m->u.heartbeat.n_tasks);
    for (uint32_t i = 0; i < m->u.heartbeat.n_tasks; i++) {
        eddy_mpw_array(w, task_metrics_layout.count);
        encode_fields(w, &task_metrics_layout, &m->u.heartbeat.tasks[i]);
    }
}

static void decode_tasks(eddy_mpr_t *r, void *obj)
{
    eddy_msg_t *m = obj;
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_MAX_TASK_METRICS, &si, &sc, &sn);
    m->u.heartbeat.tasks = calloc(n ? n : 1, sizeof *m->u.heartbeat.tasks);
    if (!m->u.heartbeat.tasks)
        eddy_mpr_fail(r, "out of memory");
    else
        m->u.heartbeat.n_tasks = n;
    for (uint32_t i = 0; r->ok && i < m->u.heartbeat.n_tasks; i++) {
        const msgpack_object *ti;
        uint32_t tc, tn;
        uint32_t fields = eddy_mpr_enter(r, task_metrics_layout.count, &ti, &tc, &tn);
        if (r->ok && fields < task_metrics_oldest)
            eddy_mpr_fail(r, "task metrics: fields missing");
        decode_fields(r, &task_metrics_layout, &m->u.heartbeat.tasks[i], fields);
        eddy_mpr_leave(r, ti, tc, tn);
    }
    eddy_mpr_leave(r, si, sc, sn);
}

static void clear_tasks(void *obj)
{
    eddy_msg_t *m = obj;
    free(m->u.heartbeat.tasks);
}

/* ---- DEPLOY's placement: stages, workers, source positions ----------------- */

static void encode_stages(eddy_mpw_t *w, const void *obj)
{
    const eddy_deploy_t *d = &((const eddy_msg_t *)obj)->u.deploy;
    eddy_mpw_array(w, d->n_stages);
    for (uint32_t s = 0; s < d->n_stages; s++) {
        eddy_mpw_array(w, d->stages[s].parallelism);
        for (uint32_t i = 0; i < d->stages[s].parallelism; i++)
            eddy_mpw_u64(w, d->stages[s].worker_of[i]);
    }
}

static void decode_stages(eddy_mpr_t *r, void *obj)
{
    eddy_deploy_t *d = &((eddy_msg_t *)obj)->u.deploy;
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_MAX_STAGES, &si, &sc, &sn);
    d->stages = calloc(n ? n : 1, sizeof *d->stages);
    if (!d->stages)
        eddy_mpr_fail(r, "out of memory");
    else
        d->n_stages = n;
    for (uint32_t s = 0; r->ok && s < d->n_stages; s++) {
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
    eddy_mpr_leave(r, si, sc, sn);
}

static void clear_stages(void *obj)
{
    eddy_deploy_t *d = &((eddy_msg_t *)obj)->u.deploy;
    for (uint32_t s = 0; d->stages && s < d->n_stages; s++)
        free(d->stages[s].worker_of);
    free(d->stages);
}

/* [id, endpoint, id, endpoint, ...] */
static void encode_workers(eddy_mpw_t *w, const void *obj)
{
    const eddy_deploy_t *d = &((const eddy_msg_t *)obj)->u.deploy;
    eddy_mpw_array(w, d->n_workers * 2);
    for (uint32_t i = 0; i < d->n_workers; i++) {
        eddy_mpw_u64(w, d->workers[i].id);
        eddy_mpw_str(w, d->workers[i].endpoint);
    }
}

static void decode_workers(eddy_mpr_t *r, void *obj)
{
    eddy_deploy_t *d = &((eddy_msg_t *)obj)->u.deploy;
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_MAX_WORKERS * 2, &si, &sc, &sn);
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
}

static void clear_workers(void *obj)
{
    free(((eddy_msg_t *)obj)->u.deploy.workers);
}

/* [stage, instance, position, state, ...] */
static void encode_positions(eddy_mpw_t *w, const void *obj)
{
    const eddy_deploy_t *d = &((const eddy_msg_t *)obj)->u.deploy;
    eddy_mpw_array(w, d->n_positions * 4);
    for (uint32_t i = 0; i < d->n_positions; i++) {
        eddy_mpw_u64(w, d->positions[i].stage);
        eddy_mpw_u64(w, d->positions[i].instance);
        eddy_mpw_i64(w, d->positions[i].position);
        encode_bytes(w, d->positions[i].state, d->positions[i].state_len);
    }
}

static void decode_positions(eddy_mpr_t *r, void *obj)
{
    eddy_deploy_t *d = &((eddy_msg_t *)obj)->u.deploy;
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_MAX_PARALLELISM * 4, &si, &sc, &sn);
    if (n % 4)
        eddy_mpr_fail(r, "positions array is not (stage, instance, position, state) quadruples");
    d->positions = calloc(n / 4 ? n / 4 : 1, sizeof *d->positions);
    if (d->positions) {
        d->n_positions = n / 4;
        for (uint32_t i = 0; i < n / 4; i++) {
            d->positions[i].stage = (uint32_t)eddy_mpr_u64(r, MAX_STAGE_INDEX);
            d->positions[i].instance = (uint32_t)eddy_mpr_u64(r, MAX_INSTANCE_INDEX);
            d->positions[i].position = eddy_mpr_i64(r);
            d->positions[i].state =
                decode_bytes(r, EDDY_SOURCE_STATE_MAX, &d->positions[i].state_len);
        }
    } else {
        eddy_mpr_fail(r, "out of memory");
    }
    eddy_mpr_leave(r, si, sc, sn);
}

static void clear_positions(void *obj)
{
    eddy_deploy_t *d = &((eddy_msg_t *)obj)->u.deploy;
    for (uint32_t i = 0; d->positions && i < d->n_positions; i++)
        free(d->positions[i].state);
    free(d->positions);
}

/* ---- task lists (protocol 9) ------------------------------------------- */

/* A list of tasks as one flat array of (stage, instance) pairs: the one
 * encoder and decoder of an ACK's ended inputs and a DEPLOY's finished
 * tasks. Decoding checks the count and every index's bound. */
static void encode_task_refs(eddy_mpw_t *w, const eddy_task_ref_t *refs, uint32_t n)
{
    eddy_mpw_array(w, n * 2);
    for (uint32_t i = 0; i < n; i++) {
        eddy_mpw_u64(w, refs[i].stage);
        eddy_mpw_u64(w, refs[i].instance);
    }
}

static eddy_task_ref_t *decode_task_refs(eddy_mpr_t *r, uint32_t *n_out)
{
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_TASK_REFS_MAX * 2, &si, &sc, &sn);
    *n_out = 0;
    if (n % 2)
        eddy_mpr_fail(r, "task list is not (stage, instance) pairs");
    eddy_task_ref_t *refs = r->ok ? calloc(n / 2 ? n / 2 : 1, sizeof *refs) : NULL;
    if (r->ok && !refs)
        eddy_mpr_fail(r, "out of memory");
    for (uint32_t i = 0; r->ok && i < n / 2; i++) {
        refs[i].stage = (uint32_t)eddy_mpr_u64(r, MAX_STAGE_INDEX);
        refs[i].instance = (uint32_t)eddy_mpr_u64(r, MAX_INSTANCE_INDEX);
        *n_out = i + 1;
    }
    eddy_mpr_leave(r, si, sc, sn);
    return refs;
}

static void encode_ack_ended(eddy_mpw_t *w, const void *obj)
{
    const eddy_msg_t *m = obj;
    encode_task_refs(w, m->u.ack.ended, m->u.ack.n_ended);
}

static void decode_ack_ended(eddy_mpr_t *r, void *obj)
{
    eddy_msg_t *m = obj;
    m->u.ack.ended = decode_task_refs(r, &m->u.ack.n_ended);
}

static void clear_ack_ended(void *obj)
{
    free(((eddy_msg_t *)obj)->u.ack.ended);
}

static void encode_deploy_finished(eddy_mpw_t *w, const void *obj)
{
    const eddy_msg_t *m = obj;
    encode_task_refs(w, m->u.deploy.finished, m->u.deploy.n_finished);
}

static void decode_deploy_finished(eddy_mpr_t *r, void *obj)
{
    eddy_msg_t *m = obj;
    m->u.deploy.finished = decode_task_refs(r, &m->u.deploy.n_finished);
}

static void clear_deploy_finished(void *obj)
{
    free(((eddy_msg_t *)obj)->u.deploy.finished);
}

/* DEPLOY's renames: flat (stage, from, to) triples. */
static void encode_deploy_renames(eddy_mpw_t *w, const void *obj)
{
    const eddy_deploy_t *d = &((const eddy_msg_t *)obj)->u.deploy;
    eddy_mpw_array(w, d->n_renames * 3);
    for (uint32_t i = 0; i < d->n_renames; i++) {
        eddy_mpw_u64(w, d->renames[i].stage);
        eddy_mpw_u64(w, d->renames[i].from);
        eddy_mpw_u64(w, d->renames[i].to);
    }
}

static void decode_deploy_renames(eddy_mpr_t *r, void *obj)
{
    eddy_deploy_t *d = &((eddy_msg_t *)obj)->u.deploy;
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_MAX_PARALLELISM * 3, &si, &sc, &sn);
    d->n_renames = 0;
    if (n % 3)
        eddy_mpr_fail(r, "renames are not (stage, from, to) triples");
    d->renames = r->ok ? calloc(n / 3 ? n / 3 : 1, sizeof *d->renames) : NULL;
    if (r->ok && !d->renames)
        eddy_mpr_fail(r, "out of memory");
    for (uint32_t i = 0; r->ok && i < n / 3; i++) {
        d->renames[i].stage = (uint32_t)eddy_mpr_u64(r, MAX_STAGE_INDEX);
        d->renames[i].from = (uint32_t)eddy_mpr_u64(r, MAX_INSTANCE_INDEX);
        d->renames[i].to = (uint32_t)eddy_mpr_u64(r, MAX_INSTANCE_INDEX);
        d->n_renames = i + 1;
    }
    eddy_mpr_leave(r, si, sc, sn);
}

static void clear_deploy_renames(void *obj)
{
    free(((eddy_msg_t *)obj)->u.deploy.renames);
}

/* ---- the messages ------------------------------------------------------------ */

#define MSG(member) offsetof(eddy_msg_t, u.member)
#define TEXT_SIZE(member) sizeof(((eddy_msg_t *)0)->u.member)

static const field_t register_fields[] = {
    {.kind = FIELD_TEXT, .offset = MSG(reg.name), .max = TEXT_SIZE(reg.name)},
    {.kind = FIELD_TEXT, .offset = MSG(reg.data_endpoint), .max = TEXT_SIZE(reg.data_endpoint)},
    {.kind = FIELD_I64, .offset = MSG(reg.pid)},
    {.kind = FIELD_TEXT, .offset = MSG(reg.host), .max = TEXT_SIZE(reg.host)},
    {.kind = FIELD_U32, .offset = MSG(reg.protocol_version), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(reg.cores), .max = UINT32_MAX}, /* protocol 6 */
};

static const field_t registered_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(registered.worker_id), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(registered.heartbeat_ms), .max = UINT32_MAX},
    {.kind = FIELD_TEXT, .offset = MSG(registered.error), .max = TEXT_SIZE(registered.error)},
    {.kind = FIELD_BOOL, .offset = MSG(registered.not_leader)}, /* the leader fields: protocol 6 */
    {.kind = FIELD_TEXT, .offset = MSG(registered.leader), .max = TEXT_SIZE(registered.leader)},
    {.kind = FIELD_BOOL, .offset = MSG(registered.fatal)},
    /* optional: the registration's liveness token (absent: 0, none) */
    {.kind = FIELD_U64, .offset = MSG(registered.liveness_token), .max = UINT64_MAX},
};

static const field_t heartbeat_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(heartbeat.worker_id), .max = UINT32_MAX},
    {.kind = FIELD_CUSTOM, .encode = encode_tasks, .decode = decode_tasks, .clear = clear_tasks},
};

/* DEPLOY's optional last field: each stage's route parallelism (0: as
 * placed), at most its parallelism; a DEPLOY without it decodes as 0s. */
static void encode_route_p(eddy_mpw_t *w, const void *obj)
{
    const eddy_deploy_t *d = &((const eddy_msg_t *)obj)->u.deploy;
    eddy_mpw_array(w, d->n_stages);
    for (uint32_t s = 0; s < d->n_stages; s++)
        eddy_mpw_u64(w, d->stages[s].route_parallelism);
}

static void decode_route_p(eddy_mpr_t *r, void *obj)
{
    eddy_deploy_t *d = &((eddy_msg_t *)obj)->u.deploy;
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_MAX_STAGES, &si, &sc, &sn);
    /* a stage beyond the placed ones has none (eddy_deploy_check refuses
     * a DEPLOY whose stages do not match the plan's) */
    for (uint32_t s = 0; r->ok && s < n; s++) {
        uint32_t v = (uint32_t)eddy_mpr_u64(r, s < d->n_stages ? d->stages[s].parallelism : 0);
        if (s < d->n_stages)
            d->stages[s].route_parallelism = v;
    }
    eddy_mpr_leave(r, si, sc, sn);
}

static void clear_nothing(void *obj)
{
    (void)obj;
}

static const field_t deploy_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(deploy.job), .max = UINT32_MAX},
    {.kind = FIELD_TEXT, .offset = MSG(deploy.job_id), .max = TEXT_SIZE(deploy.job_id)},
    {.kind = FIELD_TEXT, .offset = MSG(deploy.job_name), .max = TEXT_SIZE(deploy.job_name)},
    {.kind = FIELD_BYTES, .offset = MSG(deploy.plan), .len_offset = MSG(deploy.plan_len),
     .max = EDDY_PLAN_MAX_WIRE},
    {.kind = FIELD_U64, .offset = MSG(deploy.plan_fingerprint), .max = UINT64_MAX},
    {.kind = FIELD_STRV, .offset = MSG(deploy.plugins), .len_offset = MSG(deploy.n_plugins),
     .max = EDDY_MAX_PLUGINS},
    {.kind = FIELD_U32, .offset = MSG(deploy.epoch), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(deploy.mode), .max = EDDY_DEPLOY_RESTORE},
    {.kind = FIELD_U64, .offset = MSG(deploy.restore_checkpoint), .max = UINT64_MAX},
    {.kind = FIELD_TEXT, .offset = MSG(deploy.snapshot_dir), .max = TEXT_SIZE(deploy.snapshot_dir)},
    {.kind = FIELD_U32, .offset = MSG(deploy.max_parallelism), .max = EDDY_MAX_PARALLELISM},
    {.kind = FIELD_U32, .offset = MSG(deploy.guarantee), .max = EDDY_GUARANTEE_LAST},
    {.kind = FIELD_CUSTOM, .encode = encode_stages, .decode = decode_stages, .clear = clear_stages},
    {.kind = FIELD_CUSTOM, .encode = encode_workers, .decode = decode_workers,
     .clear = clear_workers},
    {.kind = FIELD_CUSTOM, .encode = encode_positions, .decode = decode_positions,
     .clear = clear_positions},
    /* optional: each stage's route parallelism (fluid migration) */
    {.kind = FIELD_CUSTOM, .encode = encode_route_p, .decode = decode_route_p,
     .clear = clear_nothing},
    /* optional: the tasks restored as finished (protocol 9) */
    {.kind = FIELD_CUSTOM, .encode = encode_deploy_finished, .decode = decode_deploy_finished,
     .clear = clear_deploy_finished},
    /* optional: the checkpoint storage URI (absent: "", the snapshot dir) */
    {.kind = FIELD_TEXT, .offset = MSG(deploy.storage_uri), .max = TEXT_SIZE(deploy.storage_uri)},
    /* optional: --checkpoint-full-every (absent: 0, every checkpoint full) */
    {.kind = FIELD_U32, .offset = MSG(deploy.checkpoint_full_every), .max = EDDY_CHECKPOINT_FULL_EVERY_MAX},
    /* optional: where restore_checkpoint is when not in the checkpoint
     * storage (a savepoint's location) and the job name its files are under
     * (absent: "", the checkpoint storage and job_id) */
    {.kind = FIELD_TEXT, .offset = MSG(deploy.restore_uri), .max = TEXT_SIZE(deploy.restore_uri)},
    {.kind = FIELD_TEXT, .offset = MSG(deploy.restore_job), .max = TEXT_SIZE(deploy.restore_job)},
    /* optional: a fluid migration's renumbered tasks (absent: none) */
    {.kind = FIELD_CUSTOM, .encode = encode_deploy_renames, .decode = decode_deploy_renames,
     .clear = clear_deploy_renames},
};

static const field_t deployed_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(deployed.job), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(deployed.epoch), .max = UINT32_MAX},
    {.kind = FIELD_U64, .offset = MSG(deployed.bytes_loaded), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = MSG(deployed.groups_loaded), .max = UINT64_MAX},
    {.kind = FIELD_TEXT, .offset = MSG(deployed.error), .max = TEXT_SIZE(deployed.error)},
    /* optional: what of it came from the worker's local copies (local recovery) */
    {.kind = FIELD_U64, .offset = MSG(deployed.groups_local), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = MSG(deployed.bytes_local), .max = UINT64_MAX},
};

static const field_t start_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(start.job), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(start.epoch), .max = UINT32_MAX},
};

/* A migration's moving instances: each below the migration's parallelism,
 * at most that many (migrate_parallelism is decoded before). */
static void encode_moving(eddy_mpw_t *w, const void *obj)
{
    const eddy_msg_t *m = obj;
    eddy_mpw_array(w, m->u.trigger.n_moving);
    for (uint32_t i = 0; i < m->u.trigger.n_moving; i++)
        eddy_mpw_u64(w, m->u.trigger.moving[i]);
}

static void decode_moving(eddy_mpr_t *r, void *obj)
{
    eddy_msg_t *m = obj;
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t p = m->u.trigger.migrate_parallelism;
    uint32_t n = eddy_mpr_enter(r, EDDY_MAX_PARALLELISM, &si, &sc, &sn);
    if (n > p)
        eddy_mpr_fail(r, "more moving instances than the migration's parallelism");
    m->u.trigger.moving = calloc(n ? n : 1, sizeof *m->u.trigger.moving);
    if (!m->u.trigger.moving)
        eddy_mpr_fail(r, "out of memory");
    for (uint32_t i = 0; r->ok && i < n; i++) {
        m->u.trigger.moving[i] = (uint32_t)eddy_mpr_u64(r, p ? p - 1 : 0);
        m->u.trigger.n_moving = i + 1;
    }
    eddy_mpr_leave(r, si, sc, sn);
}

static void clear_moving(void *obj)
{
    free(((eddy_msg_t *)obj)->u.trigger.moving);
}

static const field_t trigger_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(trigger.job), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(trigger.epoch), .max = UINT32_MAX},
    {.kind = FIELD_U64, .offset = MSG(trigger.checkpoint), .max = UINT64_MAX},
    {.kind = FIELD_BOOL, .offset = MSG(trigger.pause_after)},
    {.kind = FIELD_U32, .offset = MSG(trigger.migrate_stage), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(trigger.migrate_parallelism), .max = EDDY_MAX_PARALLELISM},
    /* optional: a migration's moving instances (rebalancing) */
    {.kind = FIELD_CUSTOM, .encode = encode_moving, .decode = decode_moving, .clear = clear_moving},
    /* optional: a savepoint's location (absent: "", a checkpoint) */
    {.kind = FIELD_TEXT, .offset = MSG(trigger.savepoint_uri), .max = TEXT_SIZE(trigger.savepoint_uri)},
};

static const field_t ack_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(ack.job), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(ack.epoch), .max = UINT32_MAX},
    {.kind = FIELD_U64, .offset = MSG(ack.checkpoint), .max = UINT64_MAX},
    {.kind = FIELD_U32, .offset = MSG(ack.stage), .max = MAX_STAGE_INDEX},
    {.kind = FIELD_U32, .offset = MSG(ack.instance), .max = MAX_INSTANCE_INDEX},
    {.kind = FIELD_I64, .offset = MSG(ack.position)},
    {.kind = FIELD_U64, .offset = MSG(ack.state_keys), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = MSG(ack.bytes_written), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = MSG(ack.files_written), .max = UINT64_MAX},
    {.kind = FIELD_TEXT, .offset = MSG(ack.error), .max = TEXT_SIZE(ack.error)},
    {.kind = FIELD_BYTES, .offset = MSG(ack.source_state), .len_offset = MSG(ack.source_state_len),
     .max = EDDY_SOURCE_STATE_MAX},
    /* optional: declined because an input ended (protocol 8) */
    {.kind = FIELD_BOOL, .offset = MSG(ack.declined)},
    /* optional: the inputs counted as ended (protocol 9) */
    {.kind = FIELD_CUSTOM, .encode = encode_ack_ended, .decode = decode_ack_ended,
     .clear = clear_ack_ended},
    /* optional: the checkpoint's cost to the task (protocol 9, later) */
    {.kind = FIELD_U64, .offset = MSG(ack.sync_us), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = MSG(ack.async_us), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = MSG(ack.align_us), .max = UINT64_MAX},
    /* optional: groups referred to, not written (incremental checkpoints) */
    {.kind = FIELD_U64, .offset = MSG(ack.files_referenced), .max = UINT64_MAX},
};

static const field_t complete_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(complete.job), .max = UINT32_MAX},
    {.kind = FIELD_U64, .offset = MSG(complete.checkpoint), .max = UINT64_MAX},
};

static const field_t task_done_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(task_done.job), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(task_done.epoch), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(task_done.stage), .max = MAX_STAGE_INDEX},
    {.kind = FIELD_U32, .offset = MSG(task_done.instance), .max = MAX_INSTANCE_INDEX},
};

static const field_t task_failed_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(task_failed.job), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(task_failed.epoch), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(task_failed.stage), .max = MAX_STAGE_INDEX},
    {.kind = FIELD_U32, .offset = MSG(task_failed.instance), .max = MAX_INSTANCE_INDEX},
    {.kind = FIELD_TEXT, .offset = MSG(task_failed.error), .max = TEXT_SIZE(task_failed.error)},
};

static const field_t release_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(release.job), .max = UINT32_MAX},
    /* absent in a RELEASE of protocol 4: a restore */
    {.kind = FIELD_U32, .offset = MSG(release.reason), .max = EDDY_RELEASE_FAILED,
     .absent = EDDY_RELEASE_RESTORE},
};

static const field_t request_fields[] = {
    {.kind = FIELD_TEXT, .offset = MSG(request.verb), .max = TEXT_SIZE(request.verb)},
    {.kind = FIELD_STRV, .offset = MSG(request.argv), .len_offset = MSG(request.argc),
     .max = EDDY_MAX_ARGS},
};

static const field_t reply_fields[] = {
    {.kind = FIELD_I64, .offset = MSG(reply.status)},
    {.kind = FIELD_STRING, .offset = MSG(reply.body), .max = EDDY_BODY_MAX},
};

static const field_t plugin_fields[] = {
    {.kind = FIELD_TEXT, .offset = MSG(plugin.hash), .max = TEXT_SIZE(plugin.hash)},
    {.kind = FIELD_BYTES, .offset = MSG(plugin.data), .len_offset = MSG(plugin.len),
     .max = EDDY_PLUGIN_MAX_WIRE},
    {.kind = FIELD_TEXT, .offset = MSG(plugin.error), .max = TEXT_SIZE(plugin.error)},
};

static const field_t leave_fields[] = {
    {.kind = FIELD_TEXT, .offset = MSG(leave.reason), .max = TEXT_SIZE(leave.reason)},
};

static void encode_step_kgs(eddy_mpw_t *w, const void *obj)
{
    const eddy_msg_t *m = obj;
    eddy_mpw_array(w, m->u.route_step.n_kgs);
    for (uint32_t i = 0; i < m->u.route_step.n_kgs; i++)
        eddy_mpw_u64(w, m->u.route_step.kgs[i]);
}

static void decode_step_kgs(eddy_mpr_t *r, void *obj)
{
    eddy_msg_t *m = obj;
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, EDDY_HANDOFF_MAX_GROUPS, &si, &sc, &sn);
    m->u.route_step.kgs = calloc(n ? n : 1, sizeof *m->u.route_step.kgs);
    if (!m->u.route_step.kgs)
        eddy_mpr_fail(r, "out of memory");
    for (uint32_t i = 0; r->ok && i < n; i++) {
        m->u.route_step.kgs[i] = (uint32_t)eddy_mpr_u64(r, EDDY_MAX_PARALLELISM - 1);
        m->u.route_step.n_kgs = i + 1;
    }
    eddy_mpr_leave(r, si, sc, sn);
}

static void clear_step_kgs(void *obj)
{
    free(((eddy_msg_t *)obj)->u.route_step.kgs);
}

static const field_t route_step_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(route_step.job), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(route_step.epoch), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(route_step.stage), .max = MAX_STAGE_INDEX},
    {.kind = FIELD_U64, .offset = MSG(route_step.version), .max = UINT64_MAX},
    {.kind = FIELD_U32, .offset = MSG(route_step.to), .max = MAX_INSTANCE_INDEX},
    {.kind = FIELD_CUSTOM, .encode = encode_step_kgs, .decode = decode_step_kgs,
     .clear = clear_step_kgs},
};

static const field_t step_done_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(step_done.job), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(step_done.epoch), .max = UINT32_MAX},
    {.kind = FIELD_U32, .offset = MSG(step_done.stage), .max = MAX_STAGE_INDEX},
    {.kind = FIELD_U32, .offset = MSG(step_done.instance), .max = MAX_INSTANCE_INDEX},
    {.kind = FIELD_U64, .offset = MSG(step_done.version), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = MSG(step_done.groups), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = MSG(step_done.bytes), .max = UINT64_MAX},
    /* optional: the copy's time (absent from older workers: 0) */
    {.kind = FIELD_U64, .offset = MSG(step_done.transfer_us), .max = UINT64_MAX},
};

static const field_t liveness_fields[] = {
    {.kind = FIELD_U32, .offset = MSG(liveness.worker_id), .max = UINT32_MAX},
    {.kind = FIELD_U64, .offset = MSG(liveness.token), .max = UINT64_MAX},
    {.kind = FIELD_U64, .offset = MSG(liveness.loop_silent_ms), .max = UINT64_MAX},
};

/* Older forms still read, without the trailing leader epoch: a REGISTER
 * (protocol 5's had no cores; read so an older worker is refused naming
 * both versions), a REGISTERED before the leader fields (so a newer worker
 * hears an older coordinator's refusal), and a RELEASE with or without its
 * reason (protocols 4 and 5). */
static const layout_t layouts[EDDY_MSG_TYPE_COUNT] = {
    [EDDY_MSG_REGISTER] = {register_fields, ELEMS(register_fields), {5, 6}, 0},
    [EDDY_MSG_REGISTERED] = {registered_fields, ELEMS(registered_fields), {3}, 1},
    [EDDY_MSG_HEARTBEAT] = {heartbeat_fields, ELEMS(heartbeat_fields), {0}, 0},
    [EDDY_MSG_DEPLOY] = {deploy_fields, ELEMS(deploy_fields), {0}, 6},
    [EDDY_MSG_DEPLOYED] = {deployed_fields, ELEMS(deployed_fields), {0}, 2},
    [EDDY_MSG_START] = {start_fields, ELEMS(start_fields), {0}, 0},
    [EDDY_MSG_TRIGGER] = {trigger_fields, ELEMS(trigger_fields), {0}, 2},
    [EDDY_MSG_ACK] = {ack_fields, ELEMS(ack_fields), {0}, 6},
    [EDDY_MSG_COMPLETE] = {complete_fields, ELEMS(complete_fields), {0}, 0},
    [EDDY_MSG_TASK_DONE] = {task_done_fields, ELEMS(task_done_fields), {0}, 0},
    [EDDY_MSG_TASK_FAILED] = {task_failed_fields, ELEMS(task_failed_fields), {0}, 0},
    [EDDY_MSG_RELEASE] = {release_fields, ELEMS(release_fields), {1, 2}, 0},
    [EDDY_MSG_REQUEST] = {request_fields, ELEMS(request_fields), {0}, 0},
    [EDDY_MSG_REPLY] = {reply_fields, ELEMS(reply_fields), {0}, 0},
    [EDDY_MSG_PLUGIN] = {plugin_fields, ELEMS(plugin_fields), {0}, 0},
    [EDDY_MSG_LEAVE] = {leave_fields, ELEMS(leave_fields), {0}, 0},
    [EDDY_MSG_ROUTE_STEP] = {route_step_fields, ELEMS(route_step_fields), {0}, 0},
    [EDDY_MSG_STEP_DONE] = {step_done_fields, ELEMS(step_done_fields), {0}, 1},
    [EDDY_MSG_LIVENESS] = {liveness_fields, ELEMS(liveness_fields), {0}, 0},
};

/* ---- walking a table ----------------------------------------------------------- */

static void encode_fields(eddy_mpw_t *w, const layout_t *l, const void *obj)
{
    for (uint32_t i = 0; i < l->count; i++) {
        const field_t *f = &l->fields[i];
        const void *v = cat(obj, f->offset);
        switch (f->kind) {
        case FIELD_U32:
            eddy_mpw_u64(w, *(const uint32_t *)v);
            break;
        case FIELD_U64:
            eddy_mpw_u64(w, *(const uint64_t *)v);
            break;
        case FIELD_I64:
            eddy_mpw_i64(w, *(const int64_t *)v);
            break;
        case FIELD_BOOL:
            eddy_mpw_bool(w, *(const bool *)v);
            break;
        case FIELD_DOUBLE:
            eddy_mpw_double(w, *(const double *)v);
            break;
        case FIELD_TEXT:
            eddy_mpw_str(w, (const char *)v);
            break;
        case FIELD_STRING: {
            const char *text = *(char *const *)v;
            eddy_mpw_str(w, text ? text : "");
            break;
        }
        case FIELD_BYTES:
            encode_bytes(w, *(char *const *)v, *(const uint32_t *)cat(obj, f->len_offset));
            break;
        case FIELD_STRV:
            encode_strv(w, *(const uint32_t *)cat(obj, f->len_offset), *(char **const *)v);
            break;
        case FIELD_HISTOGRAM:
            encode_histogram(w, (const eddy_histogram_t *)v);
            break;
        case FIELD_CUSTOM:
            f->encode(w, obj);
            break;
        }
    }
}

/* Reads the first `present` fields; the others take their absent value. */
static void decode_fields(eddy_mpr_t *r, const layout_t *l, void *obj, uint32_t present)
{
    for (uint32_t i = 0; i < l->count; i++) {
        const field_t *f = &l->fields[i];
        void *v = at(obj, f->offset);
        bool here = i < present;
        switch (f->kind) {
        case FIELD_U32:
            *(uint32_t *)v = here ? (uint32_t)eddy_mpr_u64(r, f->max) : (uint32_t)f->absent;
            break;
        case FIELD_U64:
            *(uint64_t *)v = here ? eddy_mpr_u64(r, f->max) : (uint64_t)f->absent;
            break;
        case FIELD_I64:
            *(int64_t *)v = here ? eddy_mpr_i64(r) : f->absent;
            break;
        case FIELD_BOOL:
            *(bool *)v = here && eddy_mpr_bool(r);
            break;
        case FIELD_DOUBLE:
            *(double *)v = here ? eddy_mpr_double(r) : 0.0;
            break;
        case FIELD_TEXT:
            if (here)
                eddy_mpr_strcpy(r, (char *)v, (size_t)f->max);
            break;
        case FIELD_STRING:
            if (here)
                *(char **)v = eddy_mpr_strdup(r, (uint32_t)f->max);
            break;
        case FIELD_BYTES:
            if (here)
                *(char **)v = decode_bytes(r, f->max, (uint32_t *)at(obj, f->len_offset));
            break;
        case FIELD_STRV:
            if (here)
                *(char ***)v = decode_strv(r, (uint32_t)f->max, (uint32_t *)at(obj, f->len_offset));
            break;
        case FIELD_HISTOGRAM:
            if (here)
                decode_histogram(r, (eddy_histogram_t *)v);
            break;
        case FIELD_CUSTOM:
            if (here)
                f->decode(r, obj);
            break;
        }
    }
}

static void clear_fields(const layout_t *l, void *obj)
{
    for (uint32_t i = 0; i < l->count; i++) {
        const field_t *f = &l->fields[i];
        void *v = at(obj, f->offset);
        switch (f->kind) {
        case FIELD_STRING:
        case FIELD_BYTES:
            free(*(char **)v);
            break;
        case FIELD_STRV:
            eddy_strv_free(*(uint32_t *)at(obj, f->len_offset), *(char ***)v);
            break;
        case FIELD_CUSTOM:
            f->clear(obj);
            break;
        default:
            break;
        }
    }
}

static bool older_form(const layout_t *l, uint32_t fields)
{
    for (uint32_t i = 0; i < ELEMS(l->older) && l->older[i]; i++)
        if (fields == l->older[i])
            return true;
    return false;
}

char *eddy_msg_encode(const eddy_msg_t *msg, size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    bool known = msg->type > 0 && msg->type < EDDY_MSG_TYPE_COUNT;
    const layout_t *l = known ? &layouts[msg->type] : NULL;
    eddy_mpw_array(&w, 1 + (l ? l->count : 0) + 1);
    eddy_mpw_u64(&w, (uint64_t)msg->type);
    if (l)
        encode_fields(&w, l, msg);
    eddy_mpw_u64(&w, msg->leader_epoch);
    return eddy_mpw_release(&w, len);
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
    const layout_t *l = &layouts[type];
    uint32_t fields = eddy_mpr_remaining(&r); /* before close, which zeroes the count */
    /* Every message ends with the leader epoch, after all its fields or
     * all but optional last ones; older forms (fewer fields, no epoch) are
     * read with the missing fields at their defaults. */
    bool full = fields <= l->count + 1 && fields + l->optional >= l->count + 1;
    if (!full && !older_form(l, fields)) {
        eddy_mpr_close(&r);
        msg->type = 0;
        return eddy_err_set(err, "malformed %s message: %u fields, expected %u",
                            type_names[type], fields, l->count + 1);
    }
    decode_fields(&r, l, msg, full ? fields - 1 : fields);
    if (full)
        msg->leader_epoch = eddy_mpr_u64(&r, UINT64_MAX);
    int rc = eddy_mpr_finish(&r, type_names[type], err);
    eddy_mpr_close(&r);
    if (rc < 0)
        eddy_msg_clear(msg);
    return rc;
}

/* A msgpack array header at p[0..len): its length, and *used its bytes;
 * false when it is not one. */
static bool peek_array(const unsigned char *p, size_t len, uint32_t *n, size_t *used)
{
    if (len >= 1 && (p[0] & 0xf0) == 0x90) {
        *n = p[0] & 0x0f;
        *used = 1;
    } else if (len >= 3 && p[0] == 0xdc) {
        *n = (uint32_t)p[1] << 8 | p[2];
        *used = 3;
    } else if (len >= 5 && p[0] == 0xdd) {
        *n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
        *used = 5;
    } else {
        return false;
    }
    return true;
}

/* A msgpack integer at p[0..len) (any of its encodings: msgpack-c reads a
 * non-negative signed one as unsigned): its bytes in *used; false when it
 * is not one. */
static bool peek_int(const unsigned char *p, size_t len, size_t *used)
{
    static const size_t sizes[] = {2, 3, 5, 9}; /* 8, 16, 32, 64 bits */
    if (len >= 1 && (p[0] <= 0x7f || p[0] >= 0xe0)) {
        *used = 1;
        return true;
    }
    unsigned k = len >= 1 && p[0] >= 0xcc && p[0] <= 0xcf   ? p[0] - 0xcc
                 : len >= 1 && p[0] >= 0xd0 && p[0] <= 0xd3 ? p[0] - 0xd0
                                                            : 4;
    if (k < 4 && len >= sizes[k]) {
        *used = sizes[k];
        return true;
    }
    return false;
}

eddy_msg_type_t eddy_msg_peek(const void *data, size_t len, uint32_t *n_tasks)
{
    const unsigned char *p = data;
    uint32_t n;
    size_t used;
    *n_tasks = 0;
    if (!peek_array(p, len, &n, &used) || n < 1)
        return 0;
    p += used;
    len -= used;
    /* the type: a positive fixint (every type is below 128) */
    if (len < 1 || p[0] == 0 || p[0] >= EDDY_MSG_TYPE_COUNT)
        return 0;
    eddy_msg_type_t type = (eddy_msg_type_t)p[0];
    p++;
    len--;
    if (type != EDDY_MSG_HEARTBEAT)
        return type;
    /* HEARTBEAT: [type, worker_id, [task, ...], leader_epoch]; a head that
     * cannot be read counts as too many entries (the decoder would refuse
     * it anyway, after allocating) */
    *n_tasks = UINT32_MAX;
    uint32_t tasks;
    if (n >= 3 && peek_int(p, len, &used) && peek_array(p + used, len - used, &tasks, &used))
        *n_tasks = tasks;
    return type;
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
    for (uint32_t i = 0; i < d->n_finished; i++) {
        const eddy_task_ref_t *f = &d->finished[i];
        if (f->stage >= d->n_stages || f->instance >= d->stages[f->stage].parallelism)
            return eddy_err_set(err, "invalid DEPLOY: finished task %u[%u], which is not placed",
                                f->stage, f->instance);
    }
    for (uint32_t i = 0; i < d->n_renames; i++) {
        const eddy_task_rename_t *rn = &d->renames[i];
        if (d->mode != EDDY_DEPLOY_RESCALE || rn->stage >= d->n_stages ||
            rn->to >= d->stages[rn->stage].parallelism || rn->from == rn->to)
            return eddy_err_set(err, "invalid DEPLOY: renaming task %u[%u] to %u[%u]", rn->stage,
                                rn->from, rn->stage, rn->to);
    }
    return 0;
}

void eddy_msg_clear(eddy_msg_t *msg)
{
    if (msg->type > 0 && msg->type < EDDY_MSG_TYPE_COUNT)
        clear_fields(&layouts[msg->type], msg);
    memset(msg, 0, sizeof *msg);
}
