/* views.c - renderings of the coordinator's state: `eddy status --json`,
 * GET /api/v1/jobs, GET /api/v1/scaling, the per-operator metrics the
 * controller reads, and GET /metrics in Prometheus text format.
 *
 * Gauges (state size, offered rate, watermarks) come from the latest
 * heartbeat of each alive worker. Counters (records, busy/idle/blocked
 * time, late records) come from the job's counters (counters.c): totals
 * since the job was submitted that never go backwards across rescales,
 * restores and coordinator restarts, and stay when the job has ended. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/redact.h"
#include "controller/decision_json.h"
#include "coordinator/internal.h"
#include "coordinator/web_assets.h"
#include "state/keygroup.h"

typedef struct op_totals {
    uint64_t records_in, records_out, busy_ns, idle_ns, blocked_ns, late_records, state_keys, state_bytes;
    double offered_rate;
    uint32_t instances_reporting;
    int64_t source_lag;         /* summed over the instances; -1 unless every one knows its own */
} op_totals_t;

static void totals_for(coord_t *c, const coord_job_t *j, uint32_t stage, bool live, op_totals_t *t)
{
    memset(t, 0, sizeof *t);
    bool lag_known = true;
    for (coord_worker_t *w = c->workers; w; w = w->next) {
        if (!w->alive)
            continue;
        for (uint32_t i = 0; i < w->n_metrics; i++) {
            const eddy_task_metrics_t *m = &w->metrics[i];
            if (m->job != j->num || m->stage != stage || m->epoch != j->epoch)
                continue;
            t->state_keys += m->state_keys;
            t->state_bytes += m->state_bytes;
            t->offered_rate += m->offered_rate;
            t->instances_reporting++;
            if (m->source_lag < 0)
                lag_known = false;
            else
                t->source_lag += m->source_lag;
        }
    }
    if (!lag_known || !t->instances_reporting)
        t->source_lag = -1;
    coord_counts_t n;
    coord_counters_stage(j->counters, stage, live, &n);
    t->records_in = n.records_in;
    t->records_out = n.records_out;
    t->busy_ns = n.busy_ns;
    t->idle_ns = n.idle_ns;
    t->blocked_ns = n.blocked_ns;
    t->late_records = n.late_records;
}

/* What the stage's current instances reported about themselves
 * (net/op_report.h), by instance: [{"instance", "worker", "text",
 * "gauges": [{"name", "label_key", "label", "value", "counter"}]}]; NULL
 * when none reported anything. */
static json_t *reports_json(coord_t *c, const coord_job_t *j, uint32_t stage)
{
    json_t *out = NULL;
    for (coord_worker_t *w = c->workers; w; w = w->next) {
        for (uint32_t i = 0; w->alive && i < w->n_metrics; i++) {
            const eddy_task_metrics_t *m = &w->metrics[i];
            const eddy_op_report_t *r = &m->report;
            if (m->job != j->num || m->stage != stage || m->epoch != j->epoch ||
                (!r->text[0] && !r->n_gauges))
                continue;
            json_t *gauges = json_array();
            for (uint32_t g = 0; g < r->n_gauges; g++)
                json_array_append_new(
                    gauges, json_pack("{s:s, s:s, s:s, s:f, s:b}", "name", r->gauges[g].name,
                                      "label_key", r->gauges[g].label_key, "label",
                                      r->gauges[g].label, "value", r->gauges[g].value, "counter",
                                      r->gauges[g].counter));
            if (!out)
                out = json_array();
            json_array_append_new(out, json_pack("{s:i, s:i, s:s, s:o}", "instance", m->instance,
                                                 "worker", w->id, "text", r->text, "gauges",
                                                 gauges));
        }
    }
    return out;
}

/* An instance's busy time from the job's counters (cumulative, as the
 * operator's busy_ns); -1 when the counters have no slot for it. The
 * controller's flink policy takes the busiest instance's share. */
static double instance_busy_ns(const coord_job_t *j, uint32_t s, uint32_t instance, bool live)
{
    for (uint32_t i = 0; i < coord_counters_slot_count(j->counters); i++) {
        const coord_counter_slot_t *slot = coord_counters_slot(j->counters, i);
        if (slot->stage == s && slot->instance == instance)
            return (double)(live ? slot->total.busy_ns : slot->shown.busy_ns);
    }
    return -1;
}

static json_t *operator_json(coord_t *c, const coord_job_t *j, uint32_t s, bool live)
{
    const eddy_stage_def_t *def = &j->graph.stages[s];
    uint32_t p = j->placement[s].parallelism ? j->placement[s].parallelism : def->parallelism;
    json_t *op = json_object();
    json_object_set_new(op, "name", json_string(def->name));
    json_object_set_new(op, "parallelism", json_integer(p));
    json_object_set_new(op, "keyed", json_boolean(eddy_stage_is_keyed(def)));
    json_object_set_new(op, "source", json_boolean(def->source != NULL));
    json_object_set_new(op, "input", def->input >= 0 ? json_string(j->graph.stages[def->input].name) : json_null());
    if (def->second_input >= 0)
        json_object_set_new(op, "second_input", json_string(j->graph.stages[def->second_input].name));
    json_t *instances = json_array();
    for (uint32_t i = 0; i < p; i++) {
        json_t *inst = json_object();
        json_object_set_new(inst, "index", json_integer(i));
        if (j->placement[s].worker_of)
            json_object_set_new(inst, "worker", json_integer(j->placement[s].worker_of[i]));
        if (eddy_stage_is_keyed(def)) {
            eddy_kg_range_t r = eddy_kg_range_for(i, p, j->graph.max_parallelism);
            json_object_set_new(inst, "key_groups", json_pack("[i,i]", r.start, r.end));
        }
        double busy = instance_busy_ns(j, s, i, live);
        if (busy >= 0)
            json_object_set_new(inst, "busy_ns", json_integer((json_int_t)busy));
        json_array_append_new(instances, inst);
    }
    json_object_set_new(op, "instances", instances);
    op_totals_t t;
    totals_for(c, j, s, live, &t);
    json_object_set_new(op, "records_in", json_integer((json_int_t)t.records_in));
    json_object_set_new(op, "records_out", json_integer((json_int_t)t.records_out));
    json_object_set_new(op, "busy_ns", json_integer((json_int_t)t.busy_ns));
    json_object_set_new(op, "idle_ns", json_integer((json_int_t)t.idle_ns));
    json_object_set_new(op, "blocked_ns", json_integer((json_int_t)t.blocked_ns));
    json_object_set_new(op, "late_records", json_integer((json_int_t)t.late_records));
    json_object_set_new(op, "state_keys", json_integer((json_int_t)t.state_keys));
    json_object_set_new(op, "state_bytes", json_integer((json_int_t)t.state_bytes));
    if (def->source)
        json_object_set_new(op, "offered_rate", json_real(t.offered_rate));
    if (def->source && t.source_lag >= 0) /* the controller's backlog (controller/catch_up.h) */
        json_object_set_new(op, "source_lag", json_integer((json_int_t)t.source_lag));
    uint32_t hot_group;
    double hot_share;
    if (coord_hot_key(c, j, s, &hot_group, &hot_share)) { /* hot_key.c; the policy reads it */
        json_object_set_new(op, "hot_key_group", json_integer(hot_group));
        json_object_set_new(op, "hot_key_share", json_real(hot_share));
    }
    json_t *latency = coord_latency_json(j, s, false), *lag = coord_latency_json(j, s, true);
    if (latency)
        json_object_set_new(op, "latency", latency);
    if (lag)
        json_object_set_new(op, "event_time_lag", lag);
    json_t *reports = reports_json(c, j, s);
    if (reports)
        json_object_set_new(op, "reports", reports);
    json_object_set_new(op, "min_parallelism", json_integer(def->min_parallelism));
    json_object_set_new(op, "max_parallelism", json_integer(def->max_parallelism_limit));
    return op;
}

/* live: counters as they are now (the controller's differences within
 * one coordinator's life), else as last saved (never lower, even across a
 * coordinator restart), with counters_ms saying when they were taken. */
static json_t *job_json(coord_t *c, const coord_job_t *j, bool live)
{
    json_t *ops = json_array();
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        json_array_append_new(ops, operator_json(c, j, s, live));
    json_t *rescales = json_array();
    uint32_t first = j->n_rescales > COORD_MAX_RESCALES ? j->n_rescales - COORD_MAX_RESCALES : 0;
    for (uint32_t k = first; k < j->n_rescales; k++) {
        const rescale_record_t *r = &j->rescales[k % COORD_MAX_RESCALES];
        json_t *rj = json_pack("{s:I, s:s, s:i, s:i, s:f, s:I, s:I, s:I, s:s}", "time_ms",
                               (json_int_t)r->time_ms, "operator", r->stage, "old_parallelism",
                               r->old_p, "new_parallelism", r->new_p, "pause_ms", r->pause_ms,
                               "bytes_moved", (json_int_t)r->bytes_moved, "key_groups_moved",
                               (json_int_t)r->groups_moved, "checkpoint", (json_int_t)r->checkpoint,
                               "kind", r->instances_moved ? "migration" : "rescale");
        json_object_set_new(rj, "migration", json_string(r->fluid_steps ? "fluid" : "sudden"));
        if (r->fluid_steps) { /* its steps and their time; pause_ms: the deploy's pause only */
            json_object_set_new(rj, "steps", json_integer(r->fluid_steps));
            json_object_set_new(rj, "migration_ms", json_real(r->migration_ms));
            /* the copy itself, without the wait for markers (0: unknown) */
            json_object_set_new(rj, "transfer_ms", json_real(r->transfer_ms));
        }
        if (r->instances_moved) { /* a rebalance: which instances moved, and why */
            json_object_set_new(rj, "instances_moved", json_integer(r->instances_moved));
            json_object_set_new(rj, "reason", json_string(r->why));
        }
        json_array_append_new(rescales, rj);
    }
    /* shown to anyone who may read status: no credentials (common/redact.h) */
    json_t *args = json_array();
    for (uint32_t i = 0; i < j->argc; i++) {
        char *shown = eddy_redact_arg(i ? j->argv[i - 1] : NULL, j->argv[i]);
        json_array_append_new(args, json_string(shown ? shown : EDDY_REDACTED));
        free(shown);
    }
    const coord_checkpoint_cost_t *cost = &j->last_checkpoint_cost;
    json_t *ck = json_pack("{s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:f, s:f, s:f}", "id",
                           (json_int_t)j->last_checkpoint, "time_ms",
                           (json_int_t)j->last_checkpoint_wall_ms, "duration_ms", j->last_checkpoint_ms,
                           "bytes", (json_int_t)cost->bytes, "objects", (json_int_t)cost->files,
                           "completed", (json_int_t)j->checkpoints_completed, "failed",
                           (json_int_t)j->checkpoints_failed, "sync_ms", cost->sync_us / 1e3,
                           "async_ms", cost->async_us / 1e3, "alignment_ms", cost->align_us / 1e3);
    /* tasks that had finished when it was taken (restored as finished) */
    /* incremental checkpoints: the key groups it referred to, not wrote */
    json_object_set_new(ck, "objects_referenced", json_integer((json_int_t)cost->referenced));
    json_object_set_new(ck, "finished_tasks",
                        json_integer(j->n_retained ? j->retained[j->n_retained - 1].n_finished : 0));
    uint64_t end = j->ended_ms ? j->ended_ms : eddy_mono_ms();
    json_t *doc = json_pack("{s:s, s:s, s:o, s:s, s:i, s:i, s:f, s:o, s:o, s:o, s:i}", "id", j->id,
                            "job", j->name, "args", args, "state", coord_job_state_name(j->state),
                            "epoch", j->epoch, "max_parallelism", j->graph.max_parallelism,
                            "uptime_s", (double)(end - j->started_ms) / 1000.0, "operators", ops,
                            "last_checkpoint", ck, "rescales", rescales, "restarts", j->restarts);
    /* The number that names the job on the wire (data-plane channel ids). */
    json_object_set_new(doc, "num", json_integer(j->num));
    /* tasks that reached the end of their input in this epoch */
    json_object_set_new(doc, "tasks_done", json_integer(j->tasks_done));
    /* "rescales" lists this coordinator's last ones; these count them all */
    json_object_set_new(doc, "rescales_total", json_integer((json_int_t)j->rescales_earlier + j->n_rescales - j->n_migrations));
    json_object_set_new(doc, "rescale_bytes_total", json_integer((json_int_t)(j->rescale_bytes_total & INT64_MAX)));
    json_object_set_new(doc, "migration_bytes_total", json_integer((json_int_t)(j->migration_bytes_total & INT64_MAX)));
    json_object_set_new(doc, "guarantee", json_string(eddy_guarantee_name(j->guarantee)));
    /* savepoints (docs/savepoints.md): the last one taken, where it started from */
    if (j->savepoint_last[0])
        json_object_set_new(doc, "savepoint", json_string(j->savepoint_last));
    if (j->restore_uri[0])
        json_object_set_new(doc, "restored_from_savepoint", json_string(j->restore_uri));
    /* local recovery: what the last restore after a failure loaded, and
     * from where (absent until one happened under this coordinator) */
    if (j->last_restore.restored_ms)
        json_object_set_new(
            doc, "last_restore",
            json_pack("{s:I, s:I, s:I, s:I, s:I}", "key_groups", (json_int_t)j->last_restore.groups,
                      "bytes", (json_int_t)j->last_restore.bytes, "local_key_groups",
                      (json_int_t)j->last_restore.local_groups, "local_bytes",
                      (json_int_t)j->last_restore.local_bytes, "duration_ms",
                      (json_int_t)j->last_restore.restored_ms));
    /* wall-clock epoch ms; ended_ms only once the job has ended */
    json_object_set_new(doc, "submitted_ms", json_integer(j->submitted_wall_ms));
    if (j->ended_wall_ms)
        json_object_set_new(doc, "ended_ms", json_integer(j->ended_wall_ms));
    json_object_set_new(doc, "counters_ms",
                        json_integer(live ? eddy_wall_ms() : coord_counters_shown_ms(j->counters)));
    if (j->error[0])
        json_object_set_new(doc, "error", json_string(j->error));
    /* the cause of its last restore after a failure, or of its failure
     * (absent while it has had none): `eddy upgrade` names it */
    if (j->last_cause[0])
        json_object_set_new(doc, "last_failure", json_string(j->last_cause));
    return doc;
}

json_t *coord_view_jobs(coord_t *c)
{
    json_t *jobs = json_array();
    for (coord_job_t *j = c->jobs; j; j = j->next)
        json_array_insert_new(jobs, 0, job_json(c, j, false)); /* oldest first */
    return jobs;
}

static bool name_alive(const coord_t *c, const char *name)
{
    for (const coord_worker_t *o = c->workers; o; o = o->next)
        if (o->alive && !strcmp(o->name, name))
            return true;
    return false;
}

json_t *coord_view_status(coord_t *c)
{
    json_t *workers = json_array();
    uint64_t now = eddy_mono_ms();
    uint64_t grace = c->opts->dead_worker_grace_ms ? c->opts->dead_worker_grace_ms : 60000;
    for (coord_worker_t *w = c->workers; w; w = w->next) {
        /* a worker dead for longer than the grace is gone (the log and
         * /metrics keep its history) */
        if (!w->alive && w->dead_since_ms && now - w->dead_since_ms > grace)
            continue;
        /* a dead entry whose name a live worker registered again (the same
         * process after a partition or failover, or its replacement) was
         * replaced by it: one entry per name */
        if (!w->alive && !w->awaiting && name_alive(c, w->name))
            continue;
        /* "awaiting heartbeat": registered with the previous leader (worker_lease.c) */
        const char *state = w->alive      ? "alive"
                            : w->awaiting ? "awaiting heartbeat"
                            : w->left     ? "left"
                                          : "dead";
        /* busy: alive, its loop silent past the heartbeat timeout while
         * its liveness thread speaks (coordinator.c, check_liveness) */
        json_t *wj = json_pack("{s:i, s:s, s:s, s:s, s:I, s:b, s:s, s:I, s:i, s:i, s:b, s:I}",
                               "id", w->id, "name", w->name, "address", w->endpoint, "host",
                               w->host, "pid", (json_int_t)w->pid, "alive", w->alive, "state",
                               state, "last_heartbeat_ms_ago", (json_int_t)(now - w->last_seen_ms),
                               "tasks", w->alive ? w->n_metrics : 0, "cores", w->cores, "busy",
                               w->alive && w->busy, "last_alive_ms_ago",
                               w->last_alive_ms ? (json_int_t)(now - w->last_alive_ms) : (json_int_t)-1);
        json_array_insert_new(workers, 0, wj);
    }
    return json_pack("{s:o, s:o, s:f, s:o}", "jobs", coord_view_jobs(c), "workers", workers,
                     "uptime_s", (double)(now - c->started_ms) / 1000.0, "leader",
                     coord_view_leader(c));
}

json_t *coord_view_leader(coord_t *c)
{
    return json_pack("{s:s, s:s, s:I}", "role", "leader", "leader",
                     c->advertise ? c->advertise : "", "epoch", (json_int_t)c->leader_epoch);
}

/* The cores the alive workers can use together: workers on one host share
 * its cores, so each host counts once. 0 when a worker did not say. */
static uint32_t worker_cores(coord_t *c)
{
    uint32_t total = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next) {
        if (!w->alive)
            continue;
        if (!w->cores)
            return 0;
        bool seen = false;
        for (coord_worker_t *o = c->workers; o != w && !seen; o = o->next)
            seen = o->alive && o->cores && !strcmp(o->host, w->host);
        if (!seen)
            total += w->cores;
    }
    return total;
}

json_t *coord_view_operator_metrics(coord_t *c, const char *job_id)
{
    coord_job_t *j = coord_job_find(c, job_id);
    if (!j)
        return NULL;
    json_t *doc = job_json(c, j, true);
    if (doc) /* the controller never asks for more instances than these run */
        json_object_set_new(doc, "worker_cores", json_integer(worker_cores(c)));
    return doc;
}

/* ---- scaling decision history -------------------------------------------- */

/* Each decision is one key, so recording one is one small write, whatever the
 * history holds (the whole history used to be rewritten as one value under
 * DECISIONS_LEGACY_KEY, which is still read at startup and deleted once its
 * last entry has left the bounded in-memory window). Writes go through the
 * async executor: the loop never waits on the store. Keys sort by sequence
 * because the sequence is zero-padded to 20 digits. */
#define DECISIONS_LEGACY_KEY "/eddy/scaling/decisions"
#define DECISIONS_PREFIX "/eddy/scaling/decisions/"
#define DECISION_SEQ_DIGITS 20

static void decision_key(char *buf, size_t size, uint64_t seq)
{
    snprintf(buf, size, DECISIONS_PREFIX "%0*" PRIu64, DECISION_SEQ_DIGITS, seq);
}

static void on_decision_stored(void *arg, const eddy_meta_result_t *res)
{
    (void)arg;
    if (res->rc < 0)
        eddy_warn("scaling decision history: %s", res->err.msg);
}

/* Before the executor exists (startup) the store is called directly. */
static void delete_key(coord_t *c, const char *key)
{
    if (c->meta_async) {
        eddy_metastore_async_delete(c->meta_async, key, EDDY_META_RETRY_FOREVER,
                                    on_decision_stored, NULL);
        return;
    }
    eddy_err_t err = {{0}};
    if (eddy_metastore_delete(c->meta, key, &err) < 0)
        eddy_warn("scaling decision history: %s", err.msg);
}

static void drop_oldest_decision(coord_t *c)
{
    size_t n = json_array_size(c->decisions);
    if (n == 0)
        return;
    uint64_t seq = c->decision_seqs[0];
    json_array_remove(c->decisions, 0);
    memmove(c->decision_seqs, c->decision_seqs + 1, (n - 1) * sizeof c->decision_seqs[0]);
    char key[sizeof DECISIONS_PREFIX + DECISION_SEQ_DIGITS];
    if (seq) {
        decision_key(key, sizeof key, seq);
        delete_key(c, key);
    } else if (n == 1 || c->decision_seqs[0] != 0) { /* the last legacy entry left */
        delete_key(c, DECISIONS_LEGACY_KEY);
    }
}

static void append_decision(coord_t *c, json_t *decision, uint64_t seq)
{
    while (json_array_size(c->decisions) && json_array_size(c->decisions) >= c->limits.max_decisions)
        drop_oldest_decision(c);
    c->decision_seqs[json_array_size(c->decisions)] = seq;
    json_array_append_new(c->decisions, decision);
}

/* Rejections are logged at most this often (a flood must not flood the log). */
#define COORD_REJECT_LOG_MS 10000

int coord_record_decision(coord_t *c, json_t *decision, eddy_err_t *err)
{
    if (eddy_scaling_decision_check_json(decision, err) < 0) {
        json_decref(decision);
        c->decisions_rejected++;
        uint64_t now = eddy_mono_ms();
        if (c->decisions_rejected == 1 || now - c->decision_reject_logged_ms >= COORD_REJECT_LOG_MS) {
            c->decision_reject_logged_ms = now;
            eddy_warn("scaling decision refused (%" PRIu64 " so far): %s", c->decisions_rejected,
                      err->msg);
        }
        return -1;
    }
    uint64_t seq = c->next_decision_seq ? c->next_decision_seq : 1;
    c->next_decision_seq = seq + 1;
    char *text = json_dumps(decision, JSON_COMPACT);
    append_decision(c, decision, seq);
    if (!text)
        return 0;
    char key[sizeof DECISIONS_PREFIX + DECISION_SEQ_DIGITS];
    decision_key(key, sizeof key, seq);
    eddy_metastore_async_put(c->meta_async, key, text, strlen(text), EDDY_META_RETRY_FOREVER,
                             on_decision_stored, NULL);
    free(text);
    return 0;
}

/* The sequence of a per-decision key, or 0 for any other key. */
static uint64_t decision_seq_of(const char *key)
{
    const char *digits = key + strlen(DECISIONS_PREFIX);
    if (strlen(digits) != DECISION_SEQ_DIGITS || strspn(digits, "0123456789") != DECISION_SEQ_DIGITS)
        return 0;
    return strtoull(digits, NULL, 10);
}

int coord_decisions_load(coord_t *c, eddy_err_t *serr)
{
    eddy_err_t err = {{0}};
    char *text = NULL;
    size_t len = 0;
    /* a retried load starts from nothing */
    json_array_clear(c->decisions);
    c->next_decision_seq = 0;
    int found = eddy_metastore_get(c->meta, DECISIONS_LEGACY_KEY, &text, &len, &err);
    if (found < 0)
        return eddy_err_set(serr, "scaling decision history: %s", err.msg);
    if (found == 1) {
        json_error_t jerr;
        json_t *old = json_loadb(text, len, 0, &jerr);
        size_t i;
        json_t *d;
        json_array_foreach(old, i, d) {
            if (eddy_scaling_decision_check_json(d, &err) == 0)
                append_decision(c, json_incref(d), 0);
            else
                eddy_warn("scaling decision history: ignoring entry %zu of %s: %s", i,
                          DECISIONS_LEGACY_KEY, err.msg);
        }
        json_decref(old);
    }
    free(text);

    eddy_kv_list_t list;
    if (eddy_metastore_list(c->meta, DECISIONS_PREFIX, &list, &err) < 0) {
        json_array_clear(c->decisions);
        return eddy_err_set(serr, "scaling decision history: %s", err.msg);
    }
    for (size_t i = 0; i < list.count; i++) {
        uint64_t seq = decision_seq_of(list.items[i].key);
        json_error_t jerr;
        json_t *d = seq ? json_loadb(list.items[i].value, list.items[i].value_len, 0, &jerr) : NULL;
        if (!d || eddy_scaling_decision_check_json(d, &err) < 0) {
            eddy_warn("scaling decision history: ignoring %s (%s)", list.items[i].key,
                      d ? err.msg : "not JSON");
            json_decref(d);
            continue;
        }
        append_decision(c, d, seq); /* drops (and deletes) what an earlier run left beyond the bound */
        if (seq >= c->next_decision_seq)
            c->next_decision_seq = seq + 1;
    }
    eddy_kv_list_clear(&list);
    if (json_array_size(c->decisions))
        eddy_info("loaded %zu scaling decisions from the metadata store",
                  json_array_size(c->decisions));
    return 0;
}

/* ---- Prometheus --------------------------------------------------------- */

typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf_t;

static void tb_printf(text_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(text_buf_t *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (b->data && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return;
        b->data = d;
        b->cap = cap;
    }
}

static void family(text_buf_t *b, const char *name, const char *type, const char *help)
{
    tb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The families of coord_view_metrics() whose values are counters. */
static bool is_counter_family(size_t f)
{
    return (f >= 1 && f <= 5) || f == 12 || f == 14;
}

static double count_of(const coord_counts_t *t, size_t f)
{
    switch (f) {
    case 1: return (double)t->records_in;
    case 2: return (double)t->records_out;
    case 3: return (double)t->busy_ns / 1e9;
    case 4: return (double)t->idle_ns / 1e9;
    case 5: return (double)t->blocked_ns / 1e9;
    case 14: return (double)t->rejected_records;
    default: return (double)t->late_records;
    }
}

/* Per-instance counters from the job's counters (monotonic per series): the
 * instances of the current epoch, labelled with the worker that ran them
 * last; an instance seen on another worker is another series. */
static void task_counters(text_buf_t *b, const char *name, size_t f, const coord_job_t *j, uint32_t s)
{
    uint32_t epoch = coord_counters_epoch(j->counters);
    for (uint32_t i = 0; i < coord_counters_slot_count(j->counters); i++) {
        const coord_counter_slot_t *slot = coord_counters_slot(j->counters, i);
        if (slot->stage != s || slot->epoch < epoch || !slot->worker_id)
            continue;
        tb_printf(b, "%s{job=\"%s\",operator=\"%s\",instance=\"%u\",worker=\"%u\"} %.17g\n", name,
                  j->id, j->graph.stages[s].name, slot->instance, slot->worker_id,
                  count_of(&slot->shown, f));
    }
}

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void label_value(text_buf_t *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            tb_printf(b, "\\%c", *v);
        else if (*v == '\n')
            tb_printf(b, "\\n");
        else
            tb_printf(b, "%c", *v);
    }
}

static const char *report_help(const char *name)
{
    static const struct {
        const char *name, *help;
    } known[] = {
        {"pipeline_filter_position", "Where the pipeline's adaptive filter order runs this filter now (1 = first within its run of filters)."},
        {"pipeline_filter_selectivity", "Share of the records a filter saw that passed it, as its eddy last measured (in the current order)."},
        {"pipeline_filter_cost_seconds", "A filter's time per evaluation, as its eddy last measured on a sample of records."},
        {"pipeline_reorders_total", "Times the instance's adaptive filter order changed since it started."},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(known[i].name, name))
            return known[i].help;
    return "Reported by the operator instance itself (see the operator's documentation).";
}

/* The families operators reported (net/op_report.h), each once, with the
 * current instances' values: eddy_NAME{job,operator,instance,worker[,KEY]}. */
static void operator_reports(text_buf_t *b, coord_t *c)
{
    enum { MAX_FAMILIES = 256 };
    const eddy_op_gauge_t *families[MAX_FAMILIES];
    size_t n = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        for (uint32_t i = 0; w->alive && i < w->n_metrics; i++)
            for (uint32_t g = 0; g < w->metrics[i].report.n_gauges; g++) {
                const eddy_op_gauge_t *gauge = &w->metrics[i].report.gauges[g];
                size_t k = 0;
                while (k < n && strcmp(families[k]->name, gauge->name))
                    k++;
                if (k == n && n < MAX_FAMILIES)
                    families[n++] = gauge;
            }
    for (size_t f = 0; f < n; f++) {
        char name[EDDY_OP_REPORT_NAME + 8];
        snprintf(name, sizeof name, "eddy_%s", families[f]->name);
        family(b, name, families[f]->counter ? "counter" : "gauge", report_help(families[f]->name));
        for (coord_job_t *j = c->jobs; j; j = j->next)
            for (coord_worker_t *w = c->workers; w; w = w->next)
                for (uint32_t i = 0; w->alive && i < w->n_metrics; i++) {
                    const eddy_task_metrics_t *m = &w->metrics[i];
                    if (m->job != j->num || m->epoch != j->epoch || m->stage >= j->graph.n_stages)
                        continue;
                    for (uint32_t g = 0; g < m->report.n_gauges; g++) {
                        const eddy_op_gauge_t *gauge = &m->report.gauges[g];
                        if (strcmp(gauge->name, families[f]->name))
                            continue;
                        tb_printf(b, "%s{job=\"%s\",operator=\"%s\",instance=\"%u\",worker=\"%u\"",
                                  name, j->id, j->graph.stages[m->stage].name, m->instance, w->id);
                        if (gauge->label_key[0]) {
                            tb_printf(b, ",%s=\"", gauge->label_key);
                            label_value(b, gauge->label);
                            tb_printf(b, "\"");
                        }
                        tb_printf(b, "} %.17g\n", gauge->value);
                    }
                }
    }
}

/* Job-level counters per operator: every instance past and present. */
static void operator_counters(text_buf_t *b, coord_t *c)
{
    static const struct {
        const char *name, *help;
        size_t f;
    } ops[] = {
        {"eddy_operator_records_in_total", "Records the operator consumed since the job was submitted (never lower across rescales, restores and coordinator restarts).", 1},
        {"eddy_operator_records_out_total", "Records the operator emitted since the job was submitted.", 2},
        {"eddy_operator_busy_seconds_total", "Useful time of all the operator's instances since the job was submitted.", 3},
        {"eddy_operator_backpressure_seconds_total", "Time the operator's instances were blocked on output credit since the job was submitted.", 5},
    };
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        family(b, ops[k].name, "counter", ops[k].help);
        for (coord_job_t *j = c->jobs; j; j = j->next)
            for (uint32_t s = 0; s < j->graph.n_stages; s++) {
                coord_counts_t t;
                coord_counters_stage(j->counters, s, false, &t);
                tb_printf(b, "%s{job=\"%s\",operator=\"%s\"} %.17g\n", ops[k].name, j->id,
                          j->graph.stages[s].name, count_of(&t, ops[k].f));
            }
    }
}

/* Per keyed operator, its busiest key group's share of its records over
 * the senders' latest windows (hot_key.c), and which group that is. */
static void hot_keys(text_buf_t *b, coord_t *c)
{
    for (int pass = 0; pass < 2; pass++) {
        const char *name = pass ? "eddy_hot_key_group" : "eddy_hot_key_group_share";
        family(b, name, "gauge",
               pass ? "The operator's busiest key group (see eddy_hot_key_group_share)."
                    : "Share of the operator's records in its busiest key group, which one "
                      "instance carries alone (recent seconds).");
        for (coord_job_t *j = c->jobs; j; j = j->next)
            for (uint32_t s = 0; !coord_job_ended(j) && s < j->graph.n_stages; s++) {
                uint32_t group;
                double share;
                if (!coord_hot_key(c, j, s, &group, &share))
                    continue;
                tb_printf(b, "%s{job=\"%s\",operator=\"%s\"} %.17g\n", name, j->id,
                          j->graph.stages[s].name, pass ? (double)group : share);
            }
    }
}

/* Job-level counters as last saved (counters.h): never lower, across
 * coordinator restarts too. */
static void job_counters(text_buf_t *b, coord_t *c)
{
    static const struct {
        const char *name, *help;
    } fams[] = {
        {"eddy_checkpoints_completed_total", "Completed checkpoints since the job was submitted."},
        {"eddy_checkpoints_failed_total", "Abandoned checkpoints since the job was submitted."},
        {"eddy_rescales_total", "Completed rescales (parallelism changes) since the job was submitted."},
        {"eddy_rescale_bytes_total", "State bytes moved by the job's rescales (parallelism changes; not rebalancing migrations: eddy_migration_bytes_total) since it was submitted."},
        {"eddy_job_restarts_total", "Restores of the job after failures since it was submitted."},
        {"eddy_migrations_total", "Rebalancing migrations (instances moved to another worker at the same parallelism) since the job was submitted."},
        {"eddy_instances_migrated_total", "Instances that rebalancing moved to another worker since the job was submitted."},
        {"eddy_migration_bytes_total", "State bytes moved by the job's rebalancing migrations since it was submitted."},
    };
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        family(b, fams[f].name, "counter", fams[f].help);
        for (coord_job_t *j = c->jobs; j; j = j->next) {
            coord_job_counts_t t;
            coord_counters_job(j->counters, false, &t);
            const uint64_t v[] = {t.checkpoints_completed, t.checkpoints_failed, t.rescales,
                                  t.rescale_bytes, t.restarts, t.migrations,
                                  t.instances_migrated, t.migration_bytes};
            tb_printf(b, "%s{job=\"%s\"} %" PRIu64 "\n", fams[f].name, j->id, v[f]);
        }
    }
}

/* What the last complete checkpoint cost (coord_checkpoint_cost_t): the
 * parts of its duration, slowest task each, and what it wrote. */
static void checkpoint_costs(text_buf_t *b, coord_t *c)
{
    static const struct {
        const char *name, *help;
    } fams[] = {
        {"eddy_checkpoint_sync_seconds", "Synchronous part of the last complete checkpoint: the slowest task's time at its barrier."},
        {"eddy_checkpoint_async_seconds", "Asynchronous part of the last complete checkpoint: the slowest task's snapshot writer time, up to its acknowledgement."},
        {"eddy_checkpoint_alignment_seconds", "Barrier alignment of the last complete checkpoint: the slowest task's time from its first input's barrier to its last."},
        {"eddy_checkpoint_bytes", "State bytes the last complete checkpoint wrote."},
        {"eddy_checkpoint_objects", "Snapshot files (objects) the last complete checkpoint wrote."},
        {"eddy_checkpoint_referenced_objects", "Key groups the last complete checkpoint referred to in earlier checkpoints' objects instead of writing them (incremental checkpoints)."},
    };
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        family(b, fams[f].name, "gauge", fams[f].help);
        for (coord_job_t *j = c->jobs; j; j = j->next) {
            const coord_checkpoint_cost_t *k = &j->last_checkpoint_cost;
            const double v[] = {k->sync_us / 1e6, k->async_us / 1e6, k->align_us / 1e6,
                                (double)k->bytes, (double)k->files, (double)k->referenced};
            tb_printf(b, "%s{job=\"%s\"} %.17g\n", fams[f].name, j->id, v[f]);
        }
    }
}

/* What the last restore after a failure loaded (local recovery): key
 * groups and bytes from the workers' local copies and from checkpoint
 * storage; jobs not restored under this coordinator have no line. */
static void restore_loads(text_buf_t *b, coord_t *c)
{
    static const struct {
        const char *name, *help;
    } fams[] = {
        {"eddy_restore_key_groups", "Key groups the job's last restore loaded, by where from: the workers' local copies of their last checkpoint (local recovery) or checkpoint storage."},
        {"eddy_restore_bytes", "State bytes the job's last restore loaded, by where from (see eddy_restore_key_groups)."},
    };
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        family(b, fams[f].name, "gauge", fams[f].help);
        for (coord_job_t *j = c->jobs; j; j = j->next) {
            if (!j->last_restore.restored_ms)
                continue;
            uint64_t all = f ? j->last_restore.bytes : j->last_restore.groups;
            uint64_t local = f ? j->last_restore.local_bytes : j->last_restore.local_groups;
            tb_printf(b, "%s{job=\"%s\",from=\"local\"} %" PRIu64 "\n", fams[f].name, j->id, local);
            tb_printf(b, "%s{job=\"%s\",from=\"storage\"} %" PRIu64 "\n", fams[f].name, j->id,
                      all - local);
        }
    }
}

/* Served by every coordinator, a standby too: Prometheus scrapes them all,
 * so a standby's scrape must succeed (up = 1 says the process is fine) and
 * say which one leads, without any of the leader's series. */
static void leader_family(text_buf_t *b, bool leading)
{
    family(b, "eddy_coordinator_leader", "gauge",
           "1 if this coordinator leads, 0 if it stands by (only the leader exports the other series).");
    tb_printf(b, "eddy_coordinator_leader %d\n", leading ? 1 : 0);
}

static const char metrics_content_type[] = "text/plain; version=0.0.4; charset=utf-8";

void coord_view_standby_metrics(eddy_http_response_t *resp)
{
    text_buf_t b = {0};
    leader_family(&b, false);
    resp->status = 200;
    resp->content_type = metrics_content_type;
    resp->body = b.data;
}

char *coord_view_metrics(coord_t *c)
{
    text_buf_t b = {0};
    tb_printf(&b, "%s", "");
    leader_family(&b, true);
    family(&b, "eddy_workers_alive", "gauge", "Workers currently alive.");
    tb_printf(&b, "eddy_workers_alive %u\n", coord_alive_workers(c));
    family(&b, "eddy_rejected_messages_total", "counter",
           "Messages dropped for who sent them or how much they ask for (docs/security.md).");
    for (int r = 0; r < COORD_REJECT_COUNT; r++)
        tb_printf(&b, "eddy_rejected_messages_total{reason=\"%s\"} %" PRIu64 "\n",
                  coord_reject_name((coord_reject_reason_t)r), c->rejects.count[r]);
    family(&b, "eddy_decisions_rejected_total", "counter",
           "Scaling decisions refused because they did not fit the decision schema.");
    tb_printf(&b, "eddy_decisions_rejected_total %" PRIu64 "\n", c->decisions_rejected);

    struct {
        const char *name, *type, *help;
    } fams[] = {
        {"eddy_operator_parallelism", "gauge", "Instances of the operator."},
        {"eddy_task_records_in_total", "counter", "Records consumed by the instance since the job started (all its tasks: never lower across rescales and restores)."},
        {"eddy_task_records_out_total", "counter", "Records emitted by the instance since the job started."},
        {"eddy_task_busy_seconds_total", "counter", "Time spent processing (useful time) since the job started."},
        {"eddy_task_idle_seconds_total", "counter", "Time spent waiting for input since the job started."},
        {"eddy_task_backpressure_seconds_total", "counter", "Time blocked on output credit since the job started."},
        {"eddy_task_true_processing_rate", "gauge", "Records per second of useful time (DS2)."},
        {"eddy_task_busy_ratio", "gauge", "Busy time over all time since the task started."},
        {"eddy_task_state_keys", "gauge", "Keys in the instance's keyed state."},
        {"eddy_task_state_bytes", "gauge", "Bytes of the instance's keyed state."},
        {"eddy_source_offered_rate", "gauge", "Configured source rate, records/s (0 = unlimited)."},
        {"eddy_task_watermark_ms", "gauge", "Event-time watermark of the instance, epoch ms."},
        {"eddy_late_records_total", "counter", "Records later than the watermark for every window they belong to (dropped or sent to the late output)."},
        {"eddy_source_lag", "gauge", "Entries upstream the source instance has not read yet (Redis streams)."},
        {"eddy_rejected_records_total", "counter", "Malformed input records the instance's operators dropped (etl: also in --rejects)."},
    };
    size_t nf = sizeof fams / sizeof fams[0];
    for (size_t f = 0; f < nf; f++) {
        family(&b, fams[f].name, fams[f].type, fams[f].help);
        for (coord_job_t *j = c->jobs; j; j = j->next) {
            for (uint32_t s = 0; s < j->graph.n_stages; s++) {
                const char *op = j->graph.stages[s].name;
                if (f == 0) {
                    tb_printf(&b, "%s{job=\"%s\",operator=\"%s\"} %u\n", fams[f].name, j->id, op,
                              j->placement[s].parallelism);
                    continue;
                }
                if (is_counter_family(f)) {
                    task_counters(&b, fams[f].name, f, j, s);
                    continue;
                }
                for (coord_worker_t *w = c->workers; w; w = w->next) {
                    for (uint32_t i = 0; w->alive && i < w->n_metrics; i++) {
                        const eddy_task_metrics_t *m = &w->metrics[i];
                        if (m->job != j->num || m->stage != s)
                            continue;
                        double total = (double)(m->busy_ns + m->idle_ns + m->blocked_ns);
                        double v = 0;
                        switch (f) {
                        case 1: v = (double)m->records_in; break;
                        case 2: v = (double)m->records_out; break;
                        case 3: v = (double)m->busy_ns / 1e9; break;
                        case 4: v = (double)m->idle_ns / 1e9; break;
                        case 5: v = (double)m->blocked_ns / 1e9; break;
                        case 6: v = m->busy_ns ? (double)m->records_in / ((double)m->busy_ns / 1e9) : 0; break;
                        case 7: v = total > 0 ? (double)m->busy_ns / total : 0; break;
                        case 8: v = (double)m->state_keys; break;
                        case 9: v = (double)m->state_bytes; break;
                        case 10:
                            if (!j->graph.stages[s].source)
                                continue;
                            v = m->offered_rate;
                            break;
                        case 11:
                            if (m->watermark == INT64_MIN)
                                continue;
                            v = (double)m->watermark; /* end of input: INT64_MAX */
                            break;
                        case 12: v = (double)m->late_records; break;
                        case 13:
                            if (!j->graph.stages[s].source || m->source_lag < 0)
                                continue;
                            v = (double)m->source_lag;
                            break;
                        case 14: v = (double)m->rejected_records; break;
                        }
                        tb_printf(&b, "%s{job=\"%s\",operator=\"%s\",instance=\"%u\",worker=\"%u\"} %.17g\n",
                                  fams[f].name, j->id, op, m->instance, w->id, v);
                    }
                }
            }
        }
    }
    operator_counters(&b, c);
    operator_reports(&b, c);
    hot_keys(&b, c);
    job_counters(&b, c);
    family(&b, "eddy_checkpoint_duration_seconds", "gauge", "Duration of the last complete checkpoint.");
    for (coord_job_t *j = c->jobs; j; j = j->next)
        tb_printf(&b, "eddy_checkpoint_duration_seconds{job=\"%s\"} %.6f\n", j->id, j->last_checkpoint_ms / 1000.0);
    checkpoint_costs(&b, c);
    restore_loads(&b, c);
    family(&b, "eddy_rescale_pause_seconds", "gauge", "Pause of the last rescale or migration (sources paused to resumed).");
    for (coord_job_t *j = c->jobs; j; j = j->next)
        if (j->n_rescales)
            tb_printf(&b, "eddy_rescale_pause_seconds{job=\"%s\"} %.6f\n", j->id,
                      j->rescales[(j->n_rescales - 1) % COORD_MAX_RESCALES].pause_ms / 1000.0);
    char *histograms = coord_latency_prometheus(c);
    if (histograms)
        tb_printf(&b, "%s", histograms);
    free(histograms);
    return b.data;
}

/* Served without the HTTP token: the health check, and the dashboard's
 * static files (they hold no data; the page sends the token on its API
 * calls, taken from the URL's #token=...). */
bool coord_http_is_open(const char *path)
{
    return !strcmp(path, "/healthz") || coord_web_asset_find(path) != NULL;
}

void coord_http_handler(void *ctx, const char *method, const char *path, eddy_http_response_t *resp)
{
    (void)method;
    coord_t *c = ctx;
    json_t *doc = NULL;
    if (!strcmp(path, "/healthz")) {
        resp->status = 200;
        resp->body = strdup("ok\n");
        return;
    }
    if (!strcmp(path, "/metrics")) {
        resp->status = 200;
        resp->content_type = metrics_content_type;
        resp->body = coord_view_metrics(c);
        return;
    }
    const coord_web_asset_t *asset = coord_web_asset_find(path);
    if (asset) { /* the dashboard (coordinator/web/) */
        resp->status = 200;
        resp->content_type = asset->content_type;
        resp->body = strdup(asset->data);
        return;
    }
    const char *series = "/api/v1/timeseries/";
    size_t flags = JSON_INDENT(2) | JSON_SORT_KEYS;
    if (!strncmp(path, series, strlen(series))) {
        doc = coord_timeline_json(c, path + strlen(series));
        flags = JSON_COMPACT | JSON_REAL_PRECISION(9); /* polled every second: keep it small */
    } else if (!strcmp(path, "/api/v1/jobs"))
        doc = coord_view_jobs(c);
    else if (!strcmp(path, "/api/v1/scaling"))
        doc = json_incref(c->decisions);
    else if (!strcmp(path, "/api/v1/status"))
        doc = coord_view_status(c);
    else if (!strcmp(path, "/api/v1/leader"))
        doc = coord_view_leader(c);
    if (!doc)
        return; /* 404 */
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = json_dumps(doc, flags);
    json_decref(doc);
}
