/* counters.c - per-instance totals that only grow, from per-task counts
 * that start again whenever a task does (see counters.h).
 *
 * A slot adds the increase of the task it last saw. Which increase depends
 * on whether the task it sees now is the same one:
 *  - same epoch, same process: the same task; add new - last;
 *  - a later epoch on the same process, and the deploy of that epoch kept
 *    the task (a rescale): the same task renamed; add new - last;
 *  - anything else is a new task that counted from zero: add new.
 * Metrics older than the current deploy are from tasks being replaced and
 * are ignored, so a late heartbeat of a dropped task is not counted again.
 * What such a task did after its last heartbeat is not counted: a total
 * may be a little low, never high and never lower than before. */
#include "coordinator/counters.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_COUNTS 7

struct coord_counters {
    uint32_t epoch;
    uint64_t captures;
    int64_t captured_ms, shown_ms;
    coord_counter_slot_t *slots;
    uint32_t n_slots, cap;
    coord_job_counts_t job, job_captured, job_shown; /* like a slot's total, captured, shown */
};

coord_counters_t *coord_counters_new(void)
{
    return calloc(1, sizeof(coord_counters_t));
}

void coord_counters_destroy(coord_counters_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->slots);
    free(*self_p);
    *self_p = NULL;
}

void coord_counters_worker_key(char *buf, size_t size, const char *endpoint, int64_t pid)
{
    snprintf(buf, size, "%.*s#%" PRId64, EDDY_ENDPOINT_MAX - 1, endpoint, pid);
}

static void counts_to_array(const coord_counts_t *c, uint64_t v[N_COUNTS])
{
    v[0] = c->records_in;
    v[1] = c->records_out;
    v[2] = c->busy_ns;
    v[3] = c->idle_ns;
    v[4] = c->blocked_ns;
    v[5] = c->late_records;
    v[6] = c->rejected_records;
}

static void counts_from_array(coord_counts_t *c, const uint64_t v[N_COUNTS])
{
    *c = (coord_counts_t){v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
}

static coord_counter_slot_t *find_slot(coord_counters_t *self, uint32_t stage, uint32_t instance,
                                       bool create)
{
    for (uint32_t i = 0; i < self->n_slots; i++)
        if (self->slots[i].stage == stage && self->slots[i].instance == instance)
            return &self->slots[i];
    if (!create)
        return NULL;
    if (self->n_slots == self->cap) {
        uint32_t cap = self->cap ? self->cap * 2 : 16;
        coord_counter_slot_t *s = realloc(self->slots, cap * sizeof *s);
        if (!s)
            return NULL;
        self->slots = s;
        self->cap = cap;
    }
    coord_counter_slot_t *s = &self->slots[self->n_slots++];
    memset(s, 0, sizeof *s);
    s->stage = stage;
    s->instance = instance;
    return s;
}

void coord_counters_observe(coord_counters_t *self, const char *worker, uint32_t worker_id,
                            const eddy_task_metrics_t *m)
{
    if (m->epoch < self->epoch)
        return;
    coord_counter_slot_t *s = find_slot(self, m->stage, m->instance, true);
    if (!s)
        return; /* out of memory: this heartbeat is not counted */
    bool same_process = !strcmp(s->worker, worker);
    bool same_task = same_process && (s->epoch == m->epoch || (s->continues && m->epoch > s->epoch));
    uint64_t last[N_COUNTS], now[N_COUNTS], total[N_COUNTS];
    coord_counts_t cur = {m->records_in, m->records_out, m->busy_ns, m->idle_ns, m->blocked_ns,
                          m->late_records, m->rejected_records};
    counts_to_array(&s->last, last);
    counts_to_array(&cur, now);
    counts_to_array(&s->total, total);
    for (int k = 0; k < N_COUNTS; k++)
        total[k] += same_task && now[k] >= last[k] ? now[k] - last[k] : same_task ? 0 : now[k];
    counts_from_array(&s->total, total);
    s->last = cur;
    s->epoch = m->epoch;
    s->continues = false;
    s->worker_id = worker_id;
    snprintf(s->worker, sizeof s->worker, "%s", worker);
}

void coord_counters_begin_epoch(coord_counters_t *self, uint32_t epoch, coord_counters_keep_fn keep,
                                void *arg)
{
    self->epoch = epoch;
    for (uint32_t i = 0; i < self->n_slots; i++) {
        coord_counter_slot_t *s = &self->slots[i];
        s->continues = keep && s->worker[0] && keep(arg, s->stage, s->instance, s->worker);
    }
}

uint32_t coord_counters_epoch(const coord_counters_t *self)
{
    return self->epoch;
}

void coord_counters_stage(const coord_counters_t *self, uint32_t stage, bool live,
                          coord_counts_t *out)
{
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < self->n_slots; i++) {
        const coord_counts_t *t = live ? &self->slots[i].total : &self->slots[i].shown;
        if (self->slots[i].stage != stage)
            continue;
        out->records_in += t->records_in;
        out->records_out += t->records_out;
        out->busy_ns += t->busy_ns;
        out->idle_ns += t->idle_ns;
        out->blocked_ns += t->blocked_ns;
        out->late_records += t->late_records;
        out->rejected_records += t->rejected_records;
    }
}

int64_t coord_counters_shown_ms(const coord_counters_t *self)
{
    return self->shown_ms;
}

uint64_t coord_counters_capture(coord_counters_t *self, int64_t wall_ms)
{
    for (uint32_t i = 0; i < self->n_slots; i++)
        self->slots[i].captured = self->slots[i].total;
    self->job_captured = self->job;
    self->captured_ms = wall_ms;
    return ++self->captures;
}

void coord_counters_commit(coord_counters_t *self, uint64_t capture)
{
    if (capture != self->captures)
        return;
    for (uint32_t i = 0; i < self->n_slots; i++)
        self->slots[i].shown = self->slots[i].captured;
    self->job_shown = self->job_captured;
    self->shown_ms = self->captured_ms;
}

void coord_counters_show_all(coord_counters_t *self, int64_t wall_ms)
{
    for (uint32_t i = 0; i < self->n_slots; i++)
        self->slots[i].shown = self->slots[i].captured = self->slots[i].total;
    self->job_shown = self->job_captured = self->job;
    self->shown_ms = self->captured_ms = wall_ms;
}

/* The job's counts in a fixed order, for loops over all of them. */
#define N_JOB_COUNTS 8
static const char *const job_count_names[N_JOB_COUNTS] = {
    "checkpoints_completed", "checkpoints_failed", "rescales", "rescale_bytes", "restarts",
    "migrations", "instances_migrated", "migration_bytes"};

static void job_count_fields(coord_job_counts_t *c, uint64_t *f[N_JOB_COUNTS])
{
    f[0] = &c->checkpoints_completed;
    f[1] = &c->checkpoints_failed;
    f[2] = &c->rescales;
    f[3] = &c->rescale_bytes;
    f[4] = &c->restarts;
    f[5] = &c->migrations;
    f[6] = &c->instances_migrated;
    f[7] = &c->migration_bytes;
}

void coord_counters_set_job(coord_counters_t *self, const coord_job_counts_t *now)
{
    coord_job_counts_t in = *now;
    uint64_t *have[N_JOB_COUNTS], *want[N_JOB_COUNTS];
    job_count_fields(&self->job, have);
    job_count_fields(&in, want);
    for (int k = 0; k < N_JOB_COUNTS; k++)
        if (*want[k] > *have[k])
            *have[k] = *want[k];
}

void coord_counters_job(const coord_counters_t *self, bool live, coord_job_counts_t *out)
{
    *out = live ? self->job : self->job_shown;
}

uint64_t coord_counters_grand_total(const coord_counters_t *self)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < self->n_slots; i++) {
        uint64_t v[N_COUNTS];
        counts_to_array(&self->slots[i].total, v);
        for (int k = 0; k < N_COUNTS; k++)
            sum += v[k];
    }
    coord_job_counts_t job = self->job;
    uint64_t *f[N_JOB_COUNTS];
    job_count_fields(&job, f);
    for (int k = 0; k < N_JOB_COUNTS; k++)
        sum += *f[k];
    return sum;
}

uint32_t coord_counters_slot_count(const coord_counters_t *self)
{
    return self->n_slots;
}

const coord_counter_slot_t *coord_counters_slot(const coord_counters_t *self, uint32_t i)
{
    return i < self->n_slots ? &self->slots[i] : NULL;
}

/* ---- persistence ------------------------------------------------------------ */

static json_t *counts_json(const coord_counts_t *c)
{
    uint64_t v[N_COUNTS];
    counts_to_array(c, v);
    json_t *a = json_array();
    for (int k = 0; k < N_COUNTS; k++)
        json_array_append_new(a, json_integer((json_int_t)(v[k] & INT64_MAX)));
    return a;
}

static int counts_parse(const json_t *a, coord_counts_t *c)
{
    size_t n = json_array_size(a);
    if (!json_is_array(a) || n < N_COUNTS - 1 || n > N_COUNTS)
        return -1;
    uint64_t v[N_COUNTS] = {0};
    for (size_t k = 0; k < n; k++) {
        const json_t *x = json_array_get(a, k);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return -1;
        v[k] = (uint64_t)json_integer_value(x);
    }
    counts_from_array(c, v);
    return 0;
}

json_t *coord_counters_to_json(const coord_counters_t *self, const char *const *stage_names,
                               uint32_t n_stages, int64_t now_ms)
{
    json_t *tasks = json_array();
    for (uint32_t i = 0; i < self->n_slots; i++) {
        const coord_counter_slot_t *s = &self->slots[i];
        if (s->stage >= n_stages)
            continue;
        json_array_append_new(tasks, json_pack("{s:s, s:I, s:s, s:I, s:o, s:o}", "stage",
                                               stage_names[s->stage], "instance", (json_int_t)s->instance,
                                               "worker", s->worker, "epoch", (json_int_t)s->epoch,
                                               "last", counts_json(&s->last), "total",
                                               counts_json(&s->total)));
    }
    coord_job_counts_t job = self->job;
    uint64_t *f[N_JOB_COUNTS];
    job_count_fields(&job, f);
    json_t *counts = json_object();
    for (int k = 0; k < N_JOB_COUNTS; k++)
        json_object_set_new(counts, job_count_names[k], json_integer((json_int_t)(*f[k] & INT64_MAX)));
    return json_pack("{s:I, s:I, s:o, s:o}", "epoch", (json_int_t)self->epoch, "time_ms",
                     (json_int_t)now_ms, "tasks", tasks, "job", counts);
}

int coord_counters_from_json(coord_counters_t *self, const json_t *doc, const char *const *stage_names,
                             uint32_t n_stages, eddy_err_t *err)
{
    json_int_t epoch = 0;
    json_t *tasks = NULL;
    if (json_unpack((json_t *)doc, "{s:I, s:o}", "epoch", &epoch, "tasks", &tasks) < 0 ||
        !json_is_array(tasks) || epoch < 0 || epoch > UINT32_MAX)
        return eddy_err_set(err, "job record: malformed counters");
    const json_t *counts = json_object_get(doc, "job"); /* absent in older documents */
    coord_job_counts_t job = {0};
    uint64_t *f[N_JOB_COUNTS];
    job_count_fields(&job, f);
    for (int k = 0; counts && k < N_JOB_COUNTS; k++) {
        const json_t *v = json_object_get(counts, job_count_names[k]);
        if (!json_is_object(counts) || (v && (!json_is_integer(v) || json_integer_value(v) < 0)))
            return eddy_err_set(err, "job record: malformed job counters");
        *f[k] = v ? (uint64_t)json_integer_value(v) : 0;
    }
    self->job = self->job_captured = self->job_shown = job;
    self->n_slots = 0;
    self->epoch = (uint32_t)epoch;
    const json_t *time_ms = json_object_get(doc, "time_ms");
    self->shown_ms = self->captured_ms = json_is_integer(time_ms) ? json_integer_value(time_ms) : 0;
    size_t i;
    json_t *t;
    json_array_foreach(tasks, i, t)
    {
        const char *stage, *worker;
        json_int_t instance, task_epoch;
        json_t *last, *total;
        if (json_unpack(t, "{s:s, s:I, s:s, s:I, s:o, s:o}", "stage", &stage, "instance", &instance,
                        "worker", &worker, "epoch", &task_epoch, "last", &last, "total", &total) < 0 ||
            instance < 0 || instance > UINT32_MAX || task_epoch < 0 || task_epoch > UINT32_MAX ||
            strlen(worker) >= COORD_COUNTER_WORKER_MAX)
            return eddy_err_set(err, "job record: malformed counters entry %zu", i);
        uint32_t s = 0;
        while (s < n_stages && strcmp(stage_names[s], stage))
            s++;
        if (s == n_stages)
            continue; /* a stage this job no longer has */
        coord_counter_slot_t *slot = find_slot(self, s, (uint32_t)instance, true);
        if (!slot)
            return eddy_err_set(err, "out of memory");
        if (counts_parse(last, &slot->last) < 0 || counts_parse(total, &slot->total) < 0)
            return eddy_err_set(err, "job record: malformed counters entry %zu", i);
        snprintf(slot->worker, sizeof slot->worker, "%s", worker);
        slot->epoch = (uint32_t)task_epoch;
        slot->captured = slot->shown = slot->total;
    }
    return 0;
}
