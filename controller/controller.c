/* controller.c - metrics snapshots -> DS2 windows -> policy decisions (see
 * controller.h for the rules). */
#include "controller/controller.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/histogram.h"
#include "controller/catch_up.h"
#include "controller/ds2.h"

/* Per-instance busy time is read for operators of at most this many
 * instances (the flink policy's max aggregation; wider ones go without). */
#define BUSY_INSTANCES_MAX 64

typedef struct op_snapshot {
    char name[EDDY_SCALING_NAME_MAX];
    uint32_t parallelism, min_parallelism, max_parallelism;
    bool keyed, source;
    long upstream; /* index of the upstream operator, -1 for none */
    long upstream2; /* a two-input operator's second upstream, -1 for none */
    double records_in, records_out, busy_ns, offered_rate;
    double hot_key_share; /* 0: unknown (a gauge: the latest, not a window's) */
    uint32_t hot_key_group;
    double state_bytes;   /* keyed state over the instances (a gauge); 0: none */
    double blocked_ns;    /* cumulative time blocked sending (0 when not reported) */
    double lag;           /* sources: records behind (a gauge); -1 unknown */
    double ratio;         /* sources: records emitted per record read, NaN unknown */
    bool has_latency;
    eddy_histogram_t latency; /* cumulative, since the job started */
    uint32_t busy_instances;  /* instance_busy_ns[0..busy_instances) known; 0: none */
    double instance_busy_ns[BUSY_INSTANCES_MAX]; /* cumulative, per instance */
} op_snapshot_t;

typedef struct snapshot {
    bool valid;
    int64_t time_ms;
    int64_t epoch;
    size_t count;
    op_snapshot_t *ops;
} snapshot_t;

struct eddy_controller {
    eddy_scaling_policy_t *policy;
    uint32_t min_parallelism, max_parallelism; /* job-wide, for keyed operators */
    double catch_up_s;
    snapshot_t prev;
    eddy_scaling_decision_t *decisions;
    size_t decisions_capacity;
};

eddy_controller_t *eddy_controller_new(const eddy_scaling_policy_config_t *config,
                                       eddy_err_t *err)
{
    if (!config) {
        eddy_err_set(err, "controller: no config");
        return NULL;
    }
    eddy_scaling_policy_config_t pc = *config;
    uint32_t min = config->min_parallelism, max = config->max_parallelism;
    if (min < 1 || (max && max < min)) {
        eddy_err_set(err, "controller: parallelism bounds [%u, %u] need 1 <= min <= max", min, max);
        return NULL;
    }
    /* The controller applies the job-wide bounds itself, to keyed operators
     * only: the pinned, non-rescalable ones must not conflict with them. */
    pc.min_parallelism = 1;
    pc.max_parallelism = UINT32_MAX;
    eddy_controller_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "controller: out of memory");
        return NULL;
    }
    self->policy = eddy_scaling_policy_new(&pc, err);
    if (!self->policy) {
        free(self);
        return NULL;
    }
    self->min_parallelism = min;
    self->max_parallelism = max ? max : UINT32_MAX;
    self->catch_up_s = config->catch_up_s;
    return self;
}

static void snapshot_clear(snapshot_t *s)
{
    free(s->ops);
    memset(s, 0, sizeof *s);
}

void eddy_controller_destroy(eddy_controller_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_controller_t *self = *self_p;
    eddy_scaling_policy_destroy(&self->policy);
    snapshot_clear(&self->prev);
    free(self->decisions);
    free(self);
    *self_p = NULL;
}

int eddy_controller_note_rescale(eddy_controller_t *self, const char *operator_name,
                                 int64_t now_ms, eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "controller: no controller");
    return eddy_scaling_policy_note_rescale(self->policy, operator_name, now_ms, err);
}

/* ---- parsing ------------------------------------------------------------ */

static int get_count(const json_t *op, const char *key, size_t i, double *out, eddy_err_t *err)
{
    const json_t *v = json_object_get(op, key);
    if (!json_is_number(v) || json_number_value(v) < 0)
        return eddy_err_set(err, "metrics: operators[%zu].%s is missing or not a count", i, key);
    *out = json_number_value(v);
    return 0;
}

static int get_u32(const json_t *op, const char *key, size_t i, uint32_t *out, eddy_err_t *err)
{
    const json_t *v = json_object_get(op, key);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > UINT32_MAX)
        return eddy_err_set(err, "metrics: operators[%zu].%s is missing or not a positive integer",
                            i, key);
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* The operator's "latency" histogram (views.c: per-bucket counts since the
 * job started); false when absent or not of eddy's bucket layout. */
static bool parse_latency(const json_t *op, eddy_histogram_t *h)
{
    const json_t *counts = json_object_get(json_object_get(op, "latency"), "counts");
    if (!json_is_array(counts) || json_array_size(counts) != EDDY_HIST_BUCKETS)
        return false;
    memset(h, 0, sizeof *h);
    for (size_t b = 0; b < EDDY_HIST_BUCKETS; b++) {
        const json_t *v = json_array_get(counts, b);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return false;
        h->counts[b] = (uint64_t)json_integer_value(v);
    }
    return true;
}

/* The instances' cumulative busy_ns (views.c), when every one has it. */
static void parse_instance_busy(const json_t *op, op_snapshot_t *p)
{
    const json_t *instances = json_object_get(op, "instances");
    size_t n = json_array_size(instances);
    p->busy_instances = 0;
    if (n == 0 || n > BUSY_INSTANCES_MAX || n != p->parallelism)
        return;
    for (size_t k = 0; k < n; k++) {
        const json_t *v = json_object_get(json_array_get(instances, k), "busy_ns");
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return;
        p->instance_busy_ns[k] = (double)json_integer_value(v);
    }
    p->busy_instances = (uint32_t)n;
}

/* The busiest instance's share of the window; 0 when unknown. */
static double busy_max_share(const op_snapshot_t *a, const op_snapshot_t *b, uint64_t window_ns)
{
    if (!window_ns || !a->busy_instances || a->busy_instances != b->busy_instances)
        return 0.0;
    double max = 0.0;
    for (uint32_t k = 0; k < b->busy_instances; k++) {
        double d = b->instance_busy_ns[k] - a->instance_busy_ns[k];
        if (d < 0)
            return 0.0;
        if (d > max)
            max = d;
    }
    double share = max / (double)window_ns;
    return share > 1.0 ? 1.0 : share;
}

static int parse_snapshot(const json_t *job, int64_t now_ms, snapshot_t *s, eddy_err_t *err)
{
    memset(s, 0, sizeof *s);
    s->time_ms = now_ms;
    const json_t *epoch = json_object_get(job, "epoch");
    s->epoch = json_is_integer(epoch) ? (int64_t)json_integer_value(epoch) : -1;
    const json_t *ops = json_object_get(job, "operators");
    if (!json_is_array(ops) || json_array_size(ops) == 0)
        return eddy_err_set(err, "metrics: no operators[] in the job document");
    s->count = json_array_size(ops);
    s->ops = calloc(s->count, sizeof *s->ops);
    if (!s->ops)
        return eddy_err_set(err, "controller: out of memory");
    for (size_t i = 0; i < s->count; i++) {
        const json_t *o = json_array_get(ops, i);
        op_snapshot_t *p = &s->ops[i];
        const char *name = json_string_value(json_object_get(o, "name"));
        if (!json_is_object(o) || !name || !*name || strlen(name) >= sizeof p->name)
            goto bad_name;
        snprintf(p->name, sizeof p->name, "%s", name);
        if (get_u32(o, "parallelism", i, &p->parallelism, err) < 0 ||
            get_u32(o, "min_parallelism", i, &p->min_parallelism, err) < 0 ||
            get_u32(o, "max_parallelism", i, &p->max_parallelism, err) < 0 ||
            get_count(o, "records_in", i, &p->records_in, err) < 0 ||
            get_count(o, "records_out", i, &p->records_out, err) < 0 ||
            get_count(o, "busy_ns", i, &p->busy_ns, err) < 0)
            goto fail;
        p->keyed = json_is_true(json_object_get(o, "keyed"));
        p->source = json_is_true(json_object_get(o, "source"));
        p->offered_rate = NAN;
        if (p->source) {
            const json_t *r = json_object_get(o, "offered_rate");
            if (json_is_number(r) && json_number_value(r) >= 0)
                p->offered_rate = json_number_value(r);
        }
        /* the coordinator's view of the operator's busiest key group (hot_key.c) */
        const json_t *share = json_object_get(o, "hot_key_share");
        const json_t *group = json_object_get(o, "hot_key_group");
        if (json_is_number(share) && json_number_value(share) > 0 && json_number_value(share) <= 1 &&
            json_is_integer(group) && json_integer_value(group) >= 0 &&
            json_integer_value(group) <= UINT32_MAX) {
            p->hot_key_share = json_number_value(share);
            p->hot_key_group = (uint32_t)json_integer_value(group);
        }
        const json_t *state = json_object_get(o, "state_bytes"); /* optional */
        if (json_is_number(state) && json_number_value(state) > 0)
            p->state_bytes = json_number_value(state);
        const json_t *blocked = json_object_get(o, "blocked_ns"); /* optional */
        if (json_is_number(blocked) && json_number_value(blocked) > 0)
            p->blocked_ns = json_number_value(blocked);
        p->lag = -1;
        p->ratio = NAN;
        const json_t *lag = json_object_get(o, "source_lag"); /* sources that report one */
        if (p->source && json_is_integer(lag) && json_integer_value(lag) >= 0)
            p->lag = (double)json_integer_value(lag);
        p->has_latency = parse_latency(o, &p->latency);
        parse_instance_busy(o, p);
        p->upstream = -1;
        p->upstream2 = -1;
        const json_t *in2 = json_object_get(o, "second_input");
        if (json_is_string(in2)) {
            for (size_t k = 0; k < i; k++)
                if (!strcmp(s->ops[k].name, json_string_value(in2)))
                    p->upstream2 = (long)k;
            if (p->upstream2 < 0) {
                eddy_err_set(err, "metrics: operator %s reads from '%s', which is not an earlier operator",
                             p->name, json_string_value(in2));
                goto fail;
            }
        }
        const json_t *in = json_object_get(o, "input");
        if (json_is_string(in)) {
            for (size_t k = 0; k < i; k++)
                if (!strcmp(s->ops[k].name, json_string_value(in)))
                    p->upstream = (long)k;
            if (p->upstream < 0) {
                eddy_err_set(err, "metrics: operator %s reads from '%s', which is not an earlier operator",
                             p->name, json_string_value(in));
                goto fail;
            }
        } else if (!p->source) {
            eddy_err_set(err, "metrics: operator %s is neither a source nor has an input", p->name);
            goto fail;
        }
    }
    return 0;
bad_name:
    eddy_err_set(err, "metrics: an operator has no usable name");
fail:
    snapshot_clear(s);
    return -1;
}

/* ---- the step ----------------------------------------------------------- */

static bool same_shape(const snapshot_t *a, const snapshot_t *b)
{
    if (a->count != b->count)
        return false;
    for (size_t i = 0; i < a->count; i++)
        if (strcmp(a->ops[i].name, b->ops[i].name) || a->ops[i].upstream != b->ops[i].upstream ||
            a->ops[i].upstream2 != b->ops[i].upstream2)
            return false;
    return true;
}

/* Makes cur the baseline (taking its memory). */
static void keep(eddy_controller_t *self, snapshot_t *cur)
{
    snapshot_clear(&self->prev);
    self->prev = *cur;
    self->prev.valid = true;
    memset(cur, 0, sizeof *cur);
}

static void skip(eddy_controller_t *self, snapshot_t *cur, eddy_controller_step_t *step,
                 const char *note)
{
    snprintf(step->note, sizeof step->note, "%s", note);
    keep(self, cur);
}

static bool is_ended(const char *state)
{
    return !strcmp(state, "finished") || !strcmp(state, "failed") || !strcmp(state, "cancelled");
}

/* A source's target (controller.h, sources; catch_up.h): offered_rate
 * counts what the source reads, DS2 wants what the source stage emits
 * (its chained operators included), so rates are scaled by the records
 * emitted per record read, the last known ratio when it read nothing. */
static void source_target(const eddy_controller_t *self, const op_snapshot_t *a, op_snapshot_t *b,
                          double d_in, double d_out, uint64_t window_ns, eddy_ds2_metrics_t *m)
{
    eddy_catch_up_input_t in = {
        .offered_rate = b->offered_rate > 0 ? b->offered_rate : 0.0,
        .read = d_in,
        .window_s = (double)window_ns / 1e9,
        .lag_before = a->lag,
        .lag_now = b->lag,
        .catch_up_s = self->catch_up_s,
    };
    eddy_catch_up_t t = eddy_catch_up_target(&in);
    b->ratio = d_in > 0 ? d_out / d_in : a->ratio;
    double ratio = d_in > 0 || b->lag >= 0 ? b->ratio : NAN; /* the old rule without a lag */
    m->offered_rate = NAN;
    if (t.target_rate == 0.0)
        m->offered_rate = 0.0; /* nothing to read: whatever it would emit */
    else if (isfinite(t.target_rate) && t.target_rate > 0 && isfinite(ratio))
        m->offered_rate = t.target_rate * ratio;
    if (isfinite(t.backlog) && t.backlog > 0) {
        m->backlog = t.backlog;
        if (isfinite(ratio))
            m->catch_up_rate = t.catch_up_rate * ratio;
    }
}

/* The p99 (ms) of the records through the operator between a and b; 0
 * when none were measured (or the histogram restarted). */
static double window_p99_ms(const op_snapshot_t *a, const op_snapshot_t *b)
{
    if (!a->has_latency || !b->has_latency || !eddy_hist_grew_from(&b->latency, &a->latency))
        return 0.0;
    eddy_histogram_t d;
    eddy_hist_delta(&d, &b->latency, &a->latency);
    double us = eddy_hist_quantile_us(&d, 0.99);
    return us > 0 ? us / 1e3 : 0.0;
}

/* The largest share of the window any upstream of operator i spent
 * blocked sending (per instance); 0 when unknown. */
static double upstream_blocked(const snapshot_t *prev, const snapshot_t *cur, size_t i,
                               uint64_t window_ns)
{
    long ups[2] = {cur->ops[i].upstream, cur->ops[i].upstream2};
    double worst = 0.0;
    for (size_t k = 0; k < 2 && window_ns; k++) {
        if (ups[k] < 0)
            continue;
        const op_snapshot_t *a = &prev->ops[ups[k]], *b = &cur->ops[ups[k]];
        double share = (b->blocked_ns - a->blocked_ns) / ((double)window_ns * b->parallelism);
        if (share > worst)
            worst = share > 1.0 ? 1.0 : share;
    }
    return worst;
}

/* Rescales that moved less than this say more about round trips than
 * about the transfer rate. */
#define MOVE_RATE_MIN_BYTES (1024.0 * 1024.0)

/* The bytes/s of the job's last rescale that moved enough state to tell
 * (its "rescales" records, coordinator/views.c): the copy's own time when
 * known (fluid: transfer_ms), else the migration's or the pause; NaN when
 * none did. */
static double measured_move_rate(const json_t *job)
{
    const json_t *rescales = json_object_get(job, "rescales");
    for (size_t i = json_array_size(rescales); i-- > 0;) {
        const json_t *r = json_array_get(rescales, i);
        double bytes = json_number_value(json_object_get(r, "bytes_moved"));
        if (!(bytes >= MOVE_RATE_MIN_BYTES))
            continue;
        const char *keys[] = {"transfer_ms", "migration_ms", "pause_ms"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            double ms = json_number_value(json_object_get(r, keys[k]));
            if (ms > 0.0)
                return bytes / (ms / 1000.0);
        }
    }
    return NAN;
}

int eddy_controller_observe(eddy_controller_t *self, const json_t *job, int64_t now_ms,
                            eddy_controller_step_t *step, eddy_err_t *err)
{
    memset(step, 0, sizeof *step);
    if (!self || !json_is_object(job))
        return eddy_err_set(err, "metrics: expected a job object");
    const char *state = json_string_value(json_object_get(job, "state"));
    if (!state)
        return eddy_err_set(err, "metrics: the job document has no state");
    snprintf(step->state, sizeof step->state, "%s", state);
    if (is_ended(state)) {
        step->job_ended = true;
        snprintf(step->note, sizeof step->note, "job %s", state);
        return 0;
    }
    if (self->prev.valid && now_ms <= self->prev.time_ms)
        return eddy_err_set(err, "controller: time went backwards (%lld <= %lld ms)",
                            (long long)now_ms, (long long)self->prev.time_ms);
    snapshot_t cur;
    if (parse_snapshot(job, now_ms, &cur, err) < 0)
        return -1;
    /* the coordinator's sum over the workers' machines (views.c) */
    json_t *cores = json_object_get(job, "worker_cores");
    if (json_is_integer(cores) && json_integer_value(cores) >= 0 &&
        json_integer_value(cores) <= UINT32_MAX)
        eddy_scaling_policy_set_core_limit(self->policy, (uint32_t)json_integer_value(cores));
    eddy_scaling_policy_set_move_rate(self->policy, measured_move_rate(job));
    snapshot_t *prev = &self->prev;

    if (!prev->valid) {
        /* The job may have just started: its first windows are start-up. */
        if (eddy_scaling_policy_note_rescale(self->policy, NULL, now_ms, err) < 0) {
            snapshot_clear(&cur);
            return -1;
        }
        skip(self, &cur, step, "first snapshot: baseline");
        return 0;
    }
    if (!same_shape(prev, &cur)) {
        eddy_scaling_policy_note_rescale(self->policy, NULL, now_ms, err);
        skip(self, &cur, step, "the job's operators changed: new baseline");
        return 0;
    }
    bool resized = false;
    for (size_t i = 0; i < cur.count; i++) {
        if (cur.ops[i].parallelism != prev->ops[i].parallelism) {
            resized = true;
            if (eddy_scaling_policy_note_rescale(self->policy, cur.ops[i].name, now_ms, err) < 0) {
                snapshot_clear(&cur);
                return -1;
            }
        }
    }
    if (resized) {
        skip(self, &cur, step, "parallelism changed: counters restarted, new baseline");
        return 0;
    }
    if (cur.epoch != prev->epoch) {
        eddy_scaling_policy_note_rescale(self->policy, NULL, now_ms, err);
        skip(self, &cur, step, "epoch changed (tasks recreated): new baseline");
        return 0;
    }
    if (strcmp(state, "running") != 0) {
        char note[EDDY_CONTROLLER_NOTE_MAX];
        snprintf(note, sizeof note, "job is %s: new baseline", state);
        skip(self, &cur, step, note);
        return 0;
    }
    for (size_t i = 0; i < cur.count; i++) {
        const op_snapshot_t *a = &prev->ops[i], *b = &cur.ops[i];
        if (b->records_in < a->records_in || b->records_out < a->records_out ||
            b->busy_ns < a->busy_ns) {
            char note[EDDY_CONTROLLER_NOTE_MAX];
            snprintf(note, sizeof note, "counters of %s went backwards (tasks restarted): new baseline",
                     b->name);
            skip(self, &cur, step, note);
            return 0;
        }
    }

    /* One window per operator. */
    eddy_ds2_operator_t *ops = calloc(cur.count, sizeof *ops);
    size_t *ups = calloc(2 * cur.count + 1, sizeof *ups); /* two per operator at most */
    if (cur.count > self->decisions_capacity) {
        eddy_scaling_decision_t *grown = realloc(self->decisions, cur.count * sizeof *grown);
        if (grown) {
            self->decisions = grown;
            self->decisions_capacity = cur.count;
        }
    }
    if (!ops || !ups || cur.count > self->decisions_capacity) {
        free(ops);
        free(ups);
        snapshot_clear(&cur);
        return eddy_err_set(err, "controller: out of memory");
    }
    uint64_t window_ns = (uint64_t)(now_ms - prev->time_ms) * 1000000u;
    for (size_t i = 0; i < cur.count; i++) {
        const op_snapshot_t *a = &prev->ops[i], *b = &cur.ops[i];
        eddy_ds2_operator_t *o = &ops[i];
        o->name = b->name;
        o->parallelism = b->parallelism;
        if (b->keyed) {
            o->min_parallelism = b->min_parallelism > self->min_parallelism ? b->min_parallelism
                                                                           : self->min_parallelism;
            o->max_parallelism = b->max_parallelism < self->max_parallelism ? b->max_parallelism
                                                                           : self->max_parallelism;
            if (o->min_parallelism > o->max_parallelism) /* disjoint: keep it where it is */
                o->min_parallelism = o->max_parallelism = b->parallelism;
        } else {
            o->min_parallelism = o->max_parallelism = b->parallelism;
        }
        /* A two-input operator's target input rate is the sum of both
         * upstreams' target output rates (DS2). */
        if (b->upstream >= 0) {
            ups[2 * i] = (size_t)b->upstream;
            o->upstreams = &ups[2 * i];
            o->upstream_count = 1;
            if (b->upstream2 >= 0) {
                ups[2 * i + 1] = (size_t)b->upstream2;
                o->upstream_count = 2;
            }
        }
        double d_in = b->records_in - a->records_in, d_out = b->records_out - a->records_out;
        o->metrics.records_in = (uint64_t)d_in;
        o->metrics.records_out = (uint64_t)d_out;
        o->metrics.useful_ns = (uint64_t)(b->busy_ns - a->busy_ns);
        o->metrics.window_ns = window_ns;
        o->metrics.offered_rate = NAN;
        o->metrics.hot_key_share = b->hot_key_share;
        o->metrics.hot_key_group = b->hot_key_group;
        o->metrics.state_bytes = b->state_bytes;
        if (window_ns && b->state_bytes > 0)
            o->metrics.state_growth_per_s = (b->state_bytes - a->state_bytes) / ((double)window_ns / 1e9);
        if (b->source)
            source_target(self, a, &cur.ops[i], d_in, d_out, window_ns, &o->metrics);
        o->metrics.latency_p99_ms = window_p99_ms(a, b);
        o->metrics.busy_max_share = busy_max_share(a, b, window_ns);
    }
    for (size_t i = 0; i < cur.count; i++)
        ops[i].metrics.upstream_blocked = upstream_blocked(prev, &cur, i, window_ns);
    int rc = eddy_scaling_policy_decide(self->policy, now_ms, ops, cur.count, self->decisions, err);
    free(ops);
    free(ups);
    if (rc < 0) {
        snapshot_clear(&cur);
        return -1;
    }
    if (rc == 0) {
        /* The policy's interval has not elapsed: let the window grow. */
        snprintf(step->note, sizeof step->note, "interval not elapsed: window extended");
        snapshot_clear(&cur);
        return 0;
    }
    step->evaluated = true;
    step->count = cur.count;
    step->decisions = self->decisions;
    keep(self, &cur);
    return 0;
}
