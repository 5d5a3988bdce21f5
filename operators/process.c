/* process.c - the keyed process-function operator (api/process.h) and
 * eddy_register_process, which makes operator kinds from a user's functions.
 *
 * An instance owns its own keyed state rather than the task's
 * ctx->keyed_state: a value table (value_size bytes per key), keyed list
 * state and a timer service, all partitioned by key group. The task's table
 * has one value size per stage and may belong to another keyed operator of
 * the same chain, so sharing it would tie the function's value to theirs.
 * With the function's named states (api/state.h, operators/named_state.h)
 * the four are snapshotted, restored and moved together through the
 * operator's write_group/read_group/drop_group, in one envelope per group:
 *
 *   [version=2, kg, value_size, values (bin), lists (bin), timers (bin),
 *    named (bin)]
 *
 * each bin the sub-structure's own group serialisation (keyed_state.h,
 * list_state.h, timers.h, named_state.h; an empty values bin when
 * value_size is 0, an empty named bin without named states). Version 1,
 * written before named state, is the same without the named bin and still
 * read. A restore with another value_size is refused: the function changed
 * shape; named states change shape by schema version and migrate instead.
 *
 * State exists for whatever key groups the runtime gives the instance
 * records or read_group for; nothing is filtered by the ctx->key_groups of
 * open(), because the runtime rescales a task in place (the range changes
 * under the operator) and drops departing groups with drop_group.
 *
 * watermark(wm) fires event timers <= wm; tick(now) processing timers
 * <= now. finish() has nothing to do: the runtime raises the watermark to
 * EDDY_WATERMARK_MAX before it, which fires every event timer, and pending
 * processing-time timers are not fired at end of input (as in Flink). */
#include <stdlib.h>
#include <string.h>

#include "api/process.h"
#include "common/clock.h"
#include "net/mpcodec.h"
#include "operators/named_state.h"
#include "plan/registry.h"
#include "state/keyed_state.h"
#include "state/keygroup.h"
#include "state/list_state.h"
#include "state/timers.h"

#define PROCESS_FORMAT_VERSION 2u

/* What a process step's task sees as its config. */
typedef struct process_step {
    const eddy_process_udf_t *udf; /* the registry's copy */
    const eddy_config_t *config;
    bool emit_late;                /* config late = "emit" */
} process_step_t;

typedef struct process_op process_op_t;

struct eddy_process_context {
    process_op_t *op;
    const char *key;
    uint32_t key_len;
    uint32_t kg;
    uint64_t hash;
    uint32_t input; /* of the record process() is called with */
};

struct process_op {
    eddy_process_context_t ctx;
    const process_step_t *step;
    eddy_key_fn key_fn;
    eddy_key_fn second_key_fn;  /* two-input steps: the second input's selector */
    const uint32_t *input;      /* two-input steps: the task's current input */
    uint32_t max_key_groups;
    eddy_keyed_state_t *values; /* NULL when value_size is 0 */
    eddy_list_state_t *lists;
    eddy_timers_t *timers;
    eddy_named_states_t *named; /* NULL when the function declares none */
    int64_t watermark;
    int64_t now_ms;
    bool ticked;
    eddy_collector_t *out; /* during an advance */
    uint64_t *late_records; /* the task's eddy_late_records_total (may be NULL) */
};

static void set_key(process_op_t *op, const char *key, uint32_t key_len, uint32_t kg,
                    uint64_t hash)
{
    op->ctx.key = key_len ? key : "";
    op->ctx.key_len = key_len;
    op->ctx.kg = kg;
    op->ctx.hash = hash;
    if (op->named)
        eddy_named_states_set_key(op->named, op->ctx.key, key_len, kg);
}

/* ---- the operator ------------------------------------------------------- */

static void process_close(void *self)
{
    process_op_t *op = self;
    if (!op)
        return;
    eddy_keyed_state_destroy(&op->values);
    eddy_list_state_destroy(&op->lists);
    eddy_timers_destroy(&op->timers);
    eddy_named_states_destroy(&op->named);
    free(op);
}

static void *process_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    const process_step_t *step = ctx->config;
    if (!step || !step->udf) {
        eddy_err_set(err, "process step has no configured function");
        return NULL;
    }
    if (!ctx->key_fn) {
        eddy_err_set(err, "process needs a keyed stage (key_by before it)");
        return NULL;
    }
    if (ctx->max_parallelism == 0 || ctx->max_parallelism > EDDY_MAX_KEY_GROUPS) {
        eddy_err_set(err, "process: max parallelism %u out of range 1..%u", ctx->max_parallelism,
                     EDDY_MAX_KEY_GROUPS);
        return NULL;
    }
    process_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    op->ctx.op = op;
    op->step = step;
    op->key_fn = ctx->key_fn;
    op->second_key_fn = ctx->second_key_fn;
    op->input = ctx->second_key_fn ? ctx->input : NULL;
    op->late_records = ctx->late_records;
    op->max_key_groups = ctx->max_parallelism;
    op->watermark = EDDY_WATERMARK_MIN;
    op->lists = eddy_list_state_new(op->max_key_groups);
    op->timers = eddy_timers_new(op->max_key_groups);
    if (step->udf->value_size)
        op->values = eddy_keyed_state_new(op->max_key_groups, step->udf->value_size);
    if (step->udf->n_states)
        op->named = eddy_named_states_new(step->udf->states, step->udf->n_states,
                                          op->max_key_groups);
    if (!op->lists || !op->timers || (step->udf->value_size && !op->values) ||
        (step->udf->n_states && !op->named)) {
        process_close(op);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    set_key(op, "", 0, 0, 0);
    return op;
}

static int process_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                           eddy_err_t *err)
{
    process_op_t *op = self;
    const char *key = NULL;
    /* A two-input step keys each record by its own input's selector. */
    uint32_t input = op->input && *op->input == 1 ? 1 : 0;
    uint32_t key_len = (input ? op->second_key_fn : op->key_fn)(rec, &key);
    uint64_t hash = eddy_key_hash(key_len ? key : "", key_len);
    set_key(op, key, key_len, eddy_key_group_of_hash(hash, op->max_key_groups), hash);
    op->ctx.input = input;
    int rc = op->step->udf->process(&op->ctx, rec, out, err);
    op->ctx.input = 0;
    return rc;
}

static int fire_timer(void *arg, const eddy_timer_t *t, eddy_err_t *err)
{
    process_op_t *op = arg;
    const eddy_process_udf_t *udf = op->step->udf;
    if (!udf->on_timer)
        return 0;
    set_key(op, t->key, t->key_len, t->kg, eddy_key_hash(t->key_len ? t->key : "", t->key_len));
    return udf->on_timer(&op->ctx, t->domain, t->time, t->ns, t->ns_len, op->out, err);
}

static int process_watermark(void *self, int64_t watermark, eddy_collector_t *out,
                             eddy_err_t *err)
{
    process_op_t *op = self;
    if (watermark <= op->watermark)
        return 0; /* watermarks never go back; nothing new can fire */
    op->watermark = watermark;
    op->out = out;
    int rc = eddy_timers_advance(op->timers, EDDY_EVENT_TIME, watermark, fire_timer, op, err);
    op->out = NULL;
    return rc;
}

static int process_tick(void *self, int64_t now_ms, eddy_collector_t *out, eddy_err_t *err)
{
    process_op_t *op = self;
    /* Processing time as the function sees it never goes back, even when
     * the wall clock is stepped back. */
    if (op->ticked && now_ms < op->now_ms)
        now_ms = op->now_ms;
    op->now_ms = now_ms;
    op->ticked = true;
    op->out = out;
    int rc = eddy_timers_advance(op->timers, EDDY_PROCESSING_TIME, now_ms, fire_timer, op, err);
    op->out = NULL;
    return rc;
}

static int process_finish(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self;
    (void)out;
    (void)err;
    return 0; /* see the file comment */
}

/* ---- per key group state ------------------------------------------------ */

static void process_drop_group(void *self, uint32_t kg)
{
    process_op_t *op = self;
    if (op->values)
        eddy_keyed_state_drop_group(op->values, kg);
    eddy_list_state_drop_group(op->lists, kg);
    eddy_timers_drop_group(op->timers, kg);
    if (op->named)
        eddy_named_states_drop_group(op->named, kg);
}

static int process_write_group(void *self, uint32_t kg, char **out, size_t *len, eddy_err_t *err)
{
    process_op_t *op = self;
    if (kg >= op->max_key_groups)
        return eddy_err_set(err, "process: key group %u out of range (K = %u)", kg,
                            op->max_key_groups);
    char *values = NULL, *lists = NULL, *timers = NULL, *named = NULL;
    size_t values_len = 0, lists_len = 0, timers_len = 0, named_len = 0;
    int rc = -1;
    if (op->values && eddy_keyed_state_write_group(op->values, kg, &values, &values_len, err) < 0)
        goto done;
    if (eddy_list_state_write_group(op->lists, kg, &lists, &lists_len, err) < 0 ||
        eddy_timers_write_group(op->timers, kg, &timers, &timers_len, err) < 0)
        goto done;
    if (op->named && eddy_named_states_write_group(op->named, kg, &named, &named_len, err) < 0)
        goto done;
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 7);
    eddy_mpw_u64(&w, PROCESS_FORMAT_VERSION);
    eddy_mpw_u64(&w, kg);
    eddy_mpw_u64(&w, op->step->udf->value_size);
    eddy_mpw_bin(&w, values, values_len);
    eddy_mpw_bin(&w, lists, lists_len);
    eddy_mpw_bin(&w, timers, timers_len);
    eddy_mpw_bin(&w, named, named_len);
    *out = eddy_mpw_release(&w, len);
    if (!*out) {
        eddy_err_set(err, "process: out of memory writing key group %u", kg);
        goto done;
    }
    rc = 0;
done:
    free(values);
    free(lists);
    free(timers);
    free(named);
    return rc;
}

static int read_envelope(process_op_t *op, uint32_t kg, eddy_mpr_t *r, eddy_err_t *err)
{
    uint64_t version = eddy_mpr_u64(r, UINT64_MAX);
    if (r->ok && version != PROCESS_FORMAT_VERSION && version != 1)
        return eddy_err_set(err, "process: key group %u: unsupported format version %llu "
                                 "(expected %u)",
                            kg, (unsigned long long)version, PROCESS_FORMAT_VERSION);
    uint64_t data_kg = eddy_mpr_u64(r, UINT64_MAX);
    if (r->ok && data_kg != kg)
        return eddy_err_set(err, "process: key group %u: data is for key group %llu", kg,
                            (unsigned long long)data_kg);
    uint64_t value_size = eddy_mpr_u64(r, UINT64_MAX);
    if (r->ok && value_size != op->step->udf->value_size)
        return eddy_err_set(err, "process: key group %u: saved with a %llu-byte value, the "
                                 "function now has %zu",
                            kg, (unsigned long long)value_size, op->step->udf->value_size);
    uint32_t values_len = 0, lists_len = 0, timers_len = 0;
    const char *values = eddy_mpr_bytes(r, UINT32_MAX, &values_len);
    const char *lists = eddy_mpr_bytes(r, UINT32_MAX, &lists_len);
    const char *timers = eddy_mpr_bytes(r, UINT32_MAX, &timers_len);
    uint32_t named_len = 0;
    const char *named = version == 1 ? NULL : eddy_mpr_bytes(r, UINT32_MAX, &named_len);
    if (eddy_mpr_finish(r, "process state", err) < 0)
        return eddy_err_wrap(err, "key group %u", kg);
    if (!op->values && values_len)
        return eddy_err_set(err, "process: key group %u: values present for a function "
                                 "without a value",
                            kg);
    /* Each part replaces its group; an empty values bin is an empty group. */
    if (op->values && values_len &&
        eddy_keyed_state_read_group(op->values, kg, values, values_len, err) < 0)
        return eddy_err_wrap(err, "process: values");
    if (eddy_list_state_read_group(op->lists, kg, lists, lists_len, err) < 0)
        return eddy_err_wrap(err, "process: lists");
    if (eddy_timers_read_group(op->timers, kg, timers, timers_len, err) < 0)
        return eddy_err_wrap(err, "process: timers");
    if (!op->named)
        return 0; /* saved named state no state claims any more is dropped */
    if (eddy_named_states_read_group(op->named, kg, named, named_len, err) < 0)
        return eddy_err_wrap(err, "process");
    return 0;
}

static int process_read_group(void *self, uint32_t kg, const void *data, size_t len,
                              eddy_err_t *err)
{
    process_op_t *op = self;
    if (kg >= op->max_key_groups)
        return eddy_err_set(err, "process: key group %u out of range (K = %u)", kg,
                            op->max_key_groups);
    process_drop_group(op, kg);
    if (len == 0)
        return 0;
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) < 0)
        return eddy_err_wrap(err, "process: key group %u", kg);
    int rc = read_envelope(op, kg, &r, err);
    eddy_mpr_close(&r);
    if (rc < 0)
        process_drop_group(op, kg);
    return rc;
}

static uint32_t process_states(const void *config, const eddy_state_desc_t **descs)
{
    const process_step_t *step = config;
    *descs = step && step->udf ? step->udf->states : NULL;
    return *descs ? step->udf->n_states : 0;
}

static const eddy_operator_ops_t process_ops = {
    .kind = "process",
    .open = process_open,
    .process = process_process,
    .finish = process_finish,
    .close = process_close,
    .watermark = process_watermark,
    .tick = process_tick,
    .write_group = process_write_group,
    .read_group = process_read_group,
    .drop_group = process_drop_group,
    .states = process_states,
};

/* ---- the context functions ---------------------------------------------- */

uint32_t eddy_process_key(const eddy_process_context_t *ctx, const char **key)
{
    *key = ctx->key;
    return ctx->key_len;
}

int64_t eddy_process_watermark(const eddy_process_context_t *ctx)
{
    return ctx->op->watermark;
}

int64_t eddy_process_time(const eddy_process_context_t *ctx)
{
    return ctx->op->ticked ? ctx->op->now_ms : eddy_wall_ms();
}

uint32_t eddy_process_input(const eddy_process_context_t *ctx)
{
    return ctx->input;
}

const eddy_config_t *eddy_process_config(const eddy_process_context_t *ctx)
{
    return ctx->op->step->config;
}

void eddy_process_late(eddy_process_context_t *ctx, const eddy_record_t *rec,
                       eddy_collector_t *out)
{
    if (ctx->op->late_records)
        (*ctx->op->late_records)++;
    if (!ctx->op->step->emit_late)
        return;
    eddy_record_t r = *rec;
    r.kind = EDDY_LATE;
    eddy_emit(out, &r);
}

eddy_state_t *eddy_process_state(eddy_process_context_t *ctx, const char *name)
{
    return eddy_named_states_find(ctx->op->named, name);
}

int eddy_process_timer_register(eddy_process_context_t *ctx, eddy_time_domain_t domain,
                                 int64_t time, const void *ns, uint32_t ns_len)
{
    return eddy_timers_register(ctx->op->timers, domain, time, ctx->kg, ctx->key, ctx->key_len,
                                ns, ns_len);
}

bool eddy_process_timer_delete(eddy_process_context_t *ctx, eddy_time_domain_t domain,
                               int64_t time, const void *ns, uint32_t ns_len)
{
    return eddy_timers_delete(ctx->op->timers, domain, time, ctx->kg, ctx->key, ctx->key_len, ns,
                              ns_len);
}

void *eddy_process_value(eddy_process_context_t *ctx, bool *created)
{
    if (created)
        *created = false;
    if (!ctx->op->values)
        return NULL;
    return eddy_keyed_state_upsert(ctx->op->values, ctx->kg, ctx->hash, ctx->key, ctx->key_len,
                                   created);
}

void *eddy_process_value_get(eddy_process_context_t *ctx)
{
    if (!ctx->op->values)
        return NULL;
    return eddy_keyed_state_get(ctx->op->values, ctx->kg, ctx->hash, ctx->key, ctx->key_len);
}

bool eddy_process_value_clear(eddy_process_context_t *ctx)
{
    if (!ctx->op->values)
        return false;
    return eddy_keyed_state_remove(ctx->op->values, ctx->kg, ctx->hash, ctx->key, ctx->key_len);
}

int eddy_process_list_add(eddy_process_context_t *ctx, const void *ns, uint32_t ns_len,
                          const eddy_record_t *rec)
{
    return eddy_list_state_add(ctx->op->lists, ctx->kg, ctx->key, ctx->key_len, ns, ns_len, rec);
}

size_t eddy_process_list_size(eddy_process_context_t *ctx, const void *ns, uint32_t ns_len)
{
    return eddy_list_state_size(ctx->op->lists, ctx->kg, ctx->key, ctx->key_len, ns, ns_len);
}

bool eddy_process_list_at(eddy_process_context_t *ctx, const void *ns, uint32_t ns_len, size_t i,
                          eddy_record_t *rec)
{
    return eddy_list_state_at(ctx->op->lists, ctx->kg, ctx->key, ctx->key_len, ns, ns_len, i,
                              rec);
}

bool eddy_process_list_clear(eddy_process_context_t *ctx, const void *ns, uint32_t ns_len)
{
    return eddy_list_state_clear(ctx->op->lists, ctx->kg, ctx->key, ctx->key_len, ns, ns_len);
}

/* ---- registering -------------------------------------------------------- */

static void *process_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    process_step_t *step = calloc(1, sizeof *step);
    if (!step) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    step->udf = arg;
    step->config = cfg;
    const char *late = eddy_config_str(cfg, "late", "drop");
    if (strcmp(late, "drop") != 0 && strcmp(late, "emit") != 0) {
        eddy_err_set(err, "'late' is '%s'; expected drop or emit", late);
        free(step);
        return NULL;
    }
    step->emit_late = !strcmp(late, "emit");
    return step;
}

int eddy_register_process(eddy_registry_t *r, const char *name, const eddy_process_udf_t *udf,
                          eddy_err_t *err)
{
    if (!udf || !udf->process || udf->value_size > EDDY_PROCESS_MAX_VALUE)
        return eddy_err_set(err, "process '%s' needs process() and a value of 0..%u bytes",
                            name ? name : "", EDDY_PROCESS_MAX_VALUE);
    if (eddy_state_descs_check(udf->states, udf->n_states, err) < 0)
        return eddy_err_wrap(err, "process '%s'", name ? name : "");
    eddy_process_udf_t *copy = malloc(sizeof *copy);
    if (!copy)
        return eddy_err_set(err, "out of memory");
    *copy = *udf;
    eddy_operator_kind_t kind = {name, &process_ops, process_configure, free, copy};
    return eddy_registry_add_operator_owned(r, &kind, copy, err);
}
