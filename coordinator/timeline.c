/* timeline.c - per-job history of operator rates, parallelism and
 * checkpoints for the web dashboard (see timeline.h).
 *
 * Why its own counters: a task's metrics are cumulative since the task
 * started, and tasks restart at every rescale or restore (a new epoch), so
 * sums over the current tasks go back to zero and differences between two
 * such sums make spikes and holes. Here each heartbeat adds, per operator,
 * how far each of the worker's tasks moved since that worker's previous
 * heartbeat; a task the worker did not report before starts from zero (a
 * new task). The sums only grow, and a sample divides their growth by the
 * time between the newest heartbeats behind it. Only tasks of the job's
 * current epoch count: a released task's last report must not add twice. */
#include "coordinator/timeline.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "coordinator/internal.h"

typedef struct tl_counters {
    uint64_t in, out, busy_ns, idle_ns, blocked_ns;
} tl_counters_t;

typedef struct tl_point {
    double rate_in, rate_out, offered, busy, backpressure; /* busy, backpressure < 0: no time passed */
    uint32_t parallelism;
    uint64_t state_bytes;
    int64_t watermark_lag_ms; /* INT64_MIN: no watermark */
} tl_point_t;

typedef struct tl_checkpoint {
    uint64_t id;
    int64_t wall_ms;
    double duration_ms;
    uint64_t bytes;
} tl_checkpoint_t;

typedef struct tl_job {
    uint32_t num;
    tl_counters_t total[EDDY_MAX_STAGES];  /* accumulated from heartbeats */
    tl_counters_t at_sample[EDDY_MAX_STAGES];
    uint64_t heartbeat_ms;                 /* newest heartbeat that added to total */
    uint64_t sample_heartbeat_ms;          /* heartbeat_ms at the last sample; 0: none yet */
    uint64_t next_sample_ms;
    bool final_sampled;
    /* samples: ring of COORD_TIMELINE_SAMPLES, oldest at (head - count) */
    int64_t *wall_ms;
    tl_point_t *points;                    /* [COORD_TIMELINE_SAMPLES][n_stages] */
    uint32_t n_stages, head, count;
    tl_checkpoint_t checkpoints[COORD_TIMELINE_CHECKPOINTS];
    uint32_t ck_head, ck_count;
    uint64_t last_checkpoint_seen;
    struct tl_job *next;
} tl_job_t;

struct coord_timeline {
    tl_job_t *jobs;
};

coord_timeline_t *coord_timeline_new(void)
{
    return calloc(1, sizeof(coord_timeline_t));
}

void coord_timeline_destroy(coord_timeline_t **self_p)
{
    coord_timeline_t *self = *self_p;
    if (!self)
        return;
    while (self->jobs) {
        tl_job_t *t = self->jobs;
        self->jobs = t->next;
        free(t->wall_ms);
        free(t->points);
        free(t);
    }
    free(self);
    *self_p = NULL;
}

static tl_job_t *find_job(coord_timeline_t *tl, uint32_t num)
{
    for (tl_job_t *t = tl->jobs; t; t = t->next)
        if (t->num == num)
            return t;
    return NULL;
}

static tl_job_t *job_for(coord_timeline_t *tl, const coord_job_t *j)
{
    tl_job_t *t = find_job(tl, j->num);
    if (t)
        return t;
    t = calloc(1, sizeof *t);
    uint32_t n = j->graph.n_stages ? j->graph.n_stages : 1;
    if (t) {
        t->wall_ms = calloc(COORD_TIMELINE_SAMPLES, sizeof *t->wall_ms);
        t->points = calloc((size_t)COORD_TIMELINE_SAMPLES * n, sizeof *t->points);
    }
    if (!t || !t->wall_ms || !t->points) {
        if (t) {
            free(t->wall_ms);
            free(t->points);
        }
        free(t);
        return NULL; /* no history for this job; everything else goes on */
    }
    t->num = j->num;
    t->n_stages = j->graph.n_stages;
    t->next = tl->jobs;
    tl->jobs = t;
    return t;
}

/* How far a counter moved: from its previous report, or from zero for a
 * task not reported before (or restarted, which reads lower). */
static uint64_t moved(uint64_t now, const uint64_t *before)
{
    return before && now >= *before ? now - *before : now;
}

void coord_timeline_on_heartbeat(coord_t *c, bool first_report, const eddy_task_metrics_t *old,
                                 uint32_t n_old, const eddy_task_metrics_t *now, uint32_t n_now)
{
    if (!c->timeline)
        return;
    uint64_t at = eddy_mono_ms();
    for (uint32_t i = 0; i < n_now; i++) {
        const eddy_task_metrics_t *m = &now[i];
        coord_job_t *j = coord_job_by_num(c, m->job);
        if (!j || m->epoch != j->epoch || m->stage >= j->graph.n_stages)
            continue;
        tl_job_t *t = job_for(c->timeline, j);
        if (!t || m->stage >= t->n_stages)
            continue;
        const eddy_task_metrics_t *p = NULL;
        for (uint32_t k = 0; k < n_old && !p; k++)
            if (old[k].job == m->job && old[k].epoch == m->epoch && old[k].stage == m->stage &&
                old[k].instance == m->instance)
                p = &old[k];
        t->heartbeat_ms = at;
        if (first_report)
            continue;
        tl_counters_t *sum = &t->total[m->stage];
        sum->in += moved(m->records_in, p ? &p->records_in : NULL);
        sum->out += moved(m->records_out, p ? &p->records_out : NULL);
        sum->busy_ns += moved(m->busy_ns, p ? &p->busy_ns : NULL);
        sum->idle_ns += moved(m->idle_ns, p ? &p->idle_ns : NULL);
        sum->blocked_ns += moved(m->blocked_ns, p ? &p->blocked_ns : NULL);
    }
}

static void note_checkpoint(tl_job_t *t, const coord_job_t *j)
{
    if (!j->last_checkpoint || j->last_checkpoint == t->last_checkpoint_seen)
        return;
    t->last_checkpoint_seen = j->last_checkpoint;
    t->checkpoints[t->ck_head] = (tl_checkpoint_t){j->last_checkpoint, (int64_t)j->last_checkpoint_wall_ms,
                                                   j->last_checkpoint_ms, j->last_checkpoint_bytes};
    t->ck_head = (t->ck_head + 1) % COORD_TIMELINE_CHECKPOINTS;
    if (t->ck_count < COORD_TIMELINE_CHECKPOINTS)
        t->ck_count++;
}

static double fraction(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : -1;
}

static void sample(coord_t *c, tl_job_t *t, const coord_job_t *j)
{
    bool first = t->sample_heartbeat_ms == 0;
    double dt_s = (double)(t->heartbeat_ms - t->sample_heartbeat_ms) / 1000.0;
    if (!first && dt_s <= 0 && !coord_job_ended(j))
        return; /* no heartbeat since the last sample: nothing to divide */
    int64_t wall = eddy_wall_ms();
    tl_point_t *row = &t->points[(size_t)t->head * t->n_stages];
    for (uint32_t s = 0; s < t->n_stages; s++) {
        const tl_counters_t *a = &t->total[s], *b = &t->at_sample[s];
        tl_point_t *pt = &row[s];
        memset(pt, 0, sizeof *pt);
        if (dt_s > 0) {
            pt->rate_in = (double)(a->in - b->in) / dt_s;
            pt->rate_out = (double)(a->out - b->out) / dt_s;
        }
        uint64_t busy = a->busy_ns - b->busy_ns, blocked = a->blocked_ns - b->blocked_ns;
        uint64_t all = busy + blocked + (a->idle_ns - b->idle_ns);
        pt->busy = fraction(busy, all);
        pt->backpressure = fraction(blocked, all);
        pt->parallelism = coord_job_parallelism(j, s);
        pt->watermark_lag_ms = INT64_MIN;
        int64_t low = INT64_MAX;
        bool any = false, unknown = false;
        for (coord_worker_t *w = c->workers; w; w = w->next) {
            for (uint32_t i = 0; w->alive && i < w->n_metrics; i++) {
                const eddy_task_metrics_t *m = &w->metrics[i];
                if (m->job != j->num || m->epoch != j->epoch || m->stage != s)
                    continue;
                pt->offered += m->offered_rate;
                pt->state_bytes += m->state_bytes;
                any = true;
                if (m->watermark == INT64_MIN)
                    unknown = true;
                else if (m->watermark < low)
                    low = m->watermark;
            }
        }
        if (any && !unknown)
            pt->watermark_lag_ms = low == INT64_MAX ? 0 : (wall > low ? wall - low : 0);
    }
    memcpy(t->at_sample, t->total, sizeof t->total);
    t->sample_heartbeat_ms = t->heartbeat_ms ? t->heartbeat_ms : 1;
    if (first)
        return; /* a baseline: no interval to divide by yet */
    t->wall_ms[t->head] = wall;
    t->head = (t->head + 1) % COORD_TIMELINE_SAMPLES;
    if (t->count < COORD_TIMELINE_SAMPLES)
        t->count++;
}

void coord_timeline_tick(coord_t *c, uint64_t now_ms)
{
    if (!c->timeline)
        return;
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        tl_job_t *t = find_job(c->timeline, j->num);
        if (!t && (coord_job_ended(j) || j->state == JOB_WAITING))
            continue; /* never ran while we watched: no history to keep */
        if (!t && !(t = job_for(c->timeline, j)))
            continue;
        note_checkpoint(t, j);
        if (t->final_sampled || now_ms < t->next_sample_ms)
            continue;
        t->next_sample_ms = now_ms + COORD_TIMELINE_INTERVAL_MS;
        sample(c, t, j);
        if (coord_job_ended(j))
            t->final_sampled = true; /* its last numbers stay as they were */
    }
}

static json_t *number_or_null(double v, bool known)
{
    return known && isfinite(v) ? json_real(round(v * 1000.0) / 1000.0) : json_null();
}

json_t *coord_timeline_json(coord_t *c, const char *job_id)
{
    coord_job_t *j = coord_job_find(c, job_id);
    if (!j)
        return NULL;
    tl_job_t *t = c->timeline ? find_job(c->timeline, j->num) : NULL;
    uint32_t count = t ? t->count : 0, n_stages = t ? t->n_stages : 0;
    json_t *times = json_array();
    json_t *ops = json_array();
    for (uint32_t s = 0; s < n_stages; s++) {
        json_t *cols[8];
        for (int k = 0; k < 8; k++)
            cols[k] = json_array();
        for (uint32_t i = 0; i < count; i++) {
            uint32_t slot = (t->head + COORD_TIMELINE_SAMPLES - count + i) % COORD_TIMELINE_SAMPLES;
            const tl_point_t *pt = &t->points[(size_t)slot * n_stages + s];
            json_array_append_new(cols[0], json_integer(pt->parallelism));
            json_array_append_new(cols[1], number_or_null(pt->rate_in, true));
            json_array_append_new(cols[2], number_or_null(pt->rate_out, true));
            json_array_append_new(cols[3], number_or_null(pt->offered, true));
            json_array_append_new(cols[4], number_or_null(pt->busy, pt->busy >= 0));
            json_array_append_new(cols[5], number_or_null(pt->backpressure, pt->backpressure >= 0));
            json_array_append_new(cols[6], json_integer((json_int_t)pt->state_bytes));
            json_array_append_new(cols[7], pt->watermark_lag_ms == INT64_MIN
                                               ? json_null()
                                               : json_integer((json_int_t)pt->watermark_lag_ms));
            if (s == 0)
                json_array_append_new(times, json_integer((json_int_t)t->wall_ms[slot]));
        }
        json_t *op = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "name", j->graph.stages[s].name,
                               "parallelism", cols[0], "rate_in", cols[1], "rate_out", cols[2], "busy",
                               cols[4], "backpressure", cols[5], "state_bytes", cols[6],
                               "watermark_lag_ms", cols[7]);
        if (j->graph.stages[s].source)
            json_object_set_new(op, "offered_rate", cols[3]);
        else
            json_decref(cols[3]);
        json_array_append_new(ops, op);
    }
    json_t *cks = json_array();
    for (uint32_t i = 0; t && i < t->ck_count; i++) {
        const tl_checkpoint_t *k =
            &t->checkpoints[(t->ck_head + COORD_TIMELINE_CHECKPOINTS - t->ck_count + i) % COORD_TIMELINE_CHECKPOINTS];
        json_array_append_new(cks, json_pack("{s:I, s:I, s:f, s:I}", "id", (json_int_t)k->id, "time_ms",
                                             (json_int_t)k->wall_ms, "duration_ms", k->duration_ms,
                                             "bytes", (json_int_t)k->bytes));
    }
    return json_pack("{s:s, s:i, s:o, s:o, s:o}", "job", j->id, "interval_ms", COORD_TIMELINE_INTERVAL_MS,
                     "t", times, "operators", ops, "checkpoints", cks);
}
