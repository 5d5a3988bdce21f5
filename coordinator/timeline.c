/* timeline.c - per-job history of operator rates, parallelism and
 * checkpoints for the web dashboard (see timeline.h).
 *
 * Why rates per worker: a task's metrics are cumulative since the task
 * started, and some tasks restart at a rescale or restore (a new epoch), so
 * sums over the current tasks go back to zero, and differences of such sums
 * taken once a second jump whenever a worker's heartbeat lands on the other
 * side of a sample. Here each heartbeat turns how far each of the worker's
 * tasks moved since that worker's previous heartbeat into a rate over the
 * time between the two, measured by the tasks' own clock (their busy +
 * idle + blocked time), not by when the heartbeats arrived. A task
 * reported before under another epoch and still counting on, as a task
 * kept by a rescale does, continues from its old numbers; one not reported
 * before, or that reads lower, starts from zero. A sample adds up the latest rate of every live worker, so it is
 * neither a spike nor a hole when heartbeats and samples drift apart.
 *
 * Latency over time: the quantiles of what each operator's latency
 * histogram (latency.c, which never goes back) gained since the previous
 * sample, so a point is the latency of the batches of that second, not
 * an average since the job started. */
#include "coordinator/timeline.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "coordinator/internal.h"
#include "coordinator/latency.h"

/* Deltas of one worker's heartbeats add up at least this long before they
 * become its rate: a heartbeat sent at once after another (a worker
 * confirms a RELEASE that way) must not make a rate of a few records over
 * a few milliseconds. */
#define TL_MIN_RATE_INTERVAL_MS 200
/* A worker's rate older than this (it stopped reporting) counts no more. */
#define TL_RATE_STALE_MS 5000

typedef struct tl_moved {
    double in, out, busy_ns, idle_ns, blocked_ns;
    /* the worker's own time over which these moved: a task's busy + idle +
     * blocked time grows with its worker's clock, so it dates reports more
     * truly than their arrival here (0: the worker does not time tasks) */
    double task_ns;
} tl_moved_t;

/* One worker's share of a job: what its tasks did since the last sample,
 * and the rates that made of it. */
typedef struct tl_worker {
    uint32_t worker;
    bool counting;                        /* false until its first heartbeat set the baseline */
    uint64_t rate_at_ms;                  /* when rate was last set; 0: never */
    uint64_t pending_since_ms;            /* the report the deltas in pending start after */
    uint64_t reported_ms;                 /* its latest report */
    tl_moved_t pending[EDDY_MAX_STAGES];  /* moved since pending_since_ms */
    tl_moved_t rate[EDDY_MAX_STAGES];     /* per second (busy/idle/blocked: ns per second) */
    double heartbeat_task_ns[EDDY_MAX_STAGES]; /* this heartbeat's longest task interval per stage */
    struct tl_worker *next;
} tl_worker_t;

typedef struct tl_point {
    double rate_in, rate_out, offered, busy, backpressure; /* busy, backpressure < 0: no time passed */
    uint32_t parallelism;
    uint64_t state_bytes;
    int64_t watermark_lag_ms; /* INT64_MIN: no watermark */
    double latency_p50_ms, latency_p99_ms; /* NAN: no batch measured since the previous sample */
} tl_point_t;

typedef struct tl_checkpoint {
    uint64_t id;
    int64_t wall_ms;
    double duration_ms;
    coord_checkpoint_cost_t cost;
} tl_checkpoint_t;

typedef struct tl_job {
    uint32_t num;
    tl_worker_t *workers;
    uint64_t next_sample_ms;
    bool final_sampled;
    /* samples: ring of COORD_TIMELINE_SAMPLES, oldest at (head - count) */
    int64_t *wall_ms;
    tl_point_t *points;                    /* [COORD_TIMELINE_SAMPLES][n_stages] */
    eddy_histogram_t *latency_seen;        /* [n_stages]: the latency totals at the last sample */
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

static void job_free(tl_job_t *t)
{
    while (t->workers) {
        tl_worker_t *w = t->workers;
        t->workers = w->next;
        free(w);
    }
    free(t->wall_ms);
    free(t->points);
    free(t->latency_seen);
    free(t);
}

void coord_timeline_destroy(coord_timeline_t **self_p)
{
    coord_timeline_t *self = *self_p;
    if (!self)
        return;
    while (self->jobs) {
        tl_job_t *t = self->jobs;
        self->jobs = t->next;
        job_free(t);
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
        t->latency_seen = calloc(n, sizeof *t->latency_seen);
    }
    if (!t || !t->wall_ms || !t->points || !t->latency_seen) {
        if (t)
            job_free(t);
        return NULL; /* no history for this job; everything else goes on */
    }
    t->num = j->num;
    t->n_stages = j->graph.n_stages;
    t->next = tl->jobs;
    tl->jobs = t;
    return t;
}

static tl_worker_t *worker_for(tl_job_t *t, uint32_t id)
{
    for (tl_worker_t *w = t->workers; w; w = w->next)
        if (w->worker == id)
            return w;
    tl_worker_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->worker = id;
    w->next = t->workers;
    t->workers = w;
    return w;
}

/* How far a counter moved since its previous report (before NULL: not
 * reported, a new task), or from zero if it reads lower (a restarted task). */
static double moved(uint64_t now, const uint64_t *before)
{
    return (double)(before && now >= *before ? now - *before : now);
}

/* The same task in the worker's previous heartbeat: same epoch, or an
 * older one (a task a rescale kept goes on counting). */
static const eddy_task_metrics_t *previous(const eddy_task_metrics_t *m, const eddy_task_metrics_t *old,
                                           uint32_t n_old)
{
    const eddy_task_metrics_t *any = NULL;
    for (uint32_t k = 0; k < n_old; k++) {
        const eddy_task_metrics_t *o = &old[k];
        if (o->job != m->job || o->stage != m->stage || o->instance != m->instance)
            continue;
        if (o->epoch == m->epoch)
            return o;
        any = o;
    }
    return any;
}

void coord_timeline_on_heartbeat(coord_t *c, coord_worker_t *cw, const eddy_task_metrics_t *old,
                                 uint32_t n_old, const eddy_task_metrics_t *now, uint32_t n_now)
{
    if (!c->timeline)
        return;
    uint64_t at = eddy_mono_ms();
    /* Its first heartbeat to this coordinator: the tasks may have run long
     * before (a coordinator that took over); their counts are no rate. */
    bool first_report = cw->last_heartbeat_ms == 0;
    for (uint32_t i = 0; i < n_now; i++) {
        const eddy_task_metrics_t *m = &now[i];
        coord_job_t *j = coord_job_by_num(c, m->job);
        if (!j || m->epoch != j->epoch || m->stage >= j->graph.n_stages)
            continue;
        tl_job_t *t = job_for(c->timeline, j);
        tl_worker_t *w = t && m->stage < t->n_stages ? worker_for(t, cw->id) : NULL;
        if (!w)
            continue;
        if (!w->counting || first_report)
            continue; /* a baseline: nothing to compare with yet */
        const eddy_task_metrics_t *p = previous(m, old, n_old);
        tl_moved_t *d = &w->pending[m->stage];
        d->in += moved(m->records_in, p ? &p->records_in : NULL);
        d->out += moved(m->records_out, p ? &p->records_out : NULL);
        d->busy_ns += moved(m->busy_ns, p ? &p->busy_ns : NULL);
        d->idle_ns += moved(m->idle_ns, p ? &p->idle_ns : NULL);
        d->blocked_ns += moved(m->blocked_ns, p ? &p->blocked_ns : NULL);
        uint64_t total = m->busy_ns + m->idle_ns + m->blocked_ns;
        uint64_t before = p ? p->busy_ns + p->idle_ns + p->blocked_ns : 0;
        double task_ns = moved(total, p ? &before : NULL);
        if (task_ns > w->heartbeat_task_ns[m->stage])
            w->heartbeat_task_ns[m->stage] = task_ns;
    }
    for (tl_job_t *t = c->timeline->jobs; t; t = t->next) {
        for (tl_worker_t *w = t->workers; w; w = w->next) {
            if (w->worker != cw->id)
                continue;
            for (uint32_t s = 0; s < t->n_stages; s++) {
                w->pending[s].task_ns += w->heartbeat_task_ns[s];
                w->heartbeat_task_ns[s] = 0;
            }
            if (!w->counting) {
                w->counting = true;
                w->pending_since_ms = at;
            }
            w->reported_ms = at;
        }
    }
}

/* At a sample: what the worker's tasks did since the previous one becomes
 * its rates. A worker that has not reported since keeps its rates (it
 * reports every heartbeat, more often than samples are taken), so each
 * report counts in exactly one interval and the rates add up to the counts. */
static void take_rates(tl_job_t *t, tl_worker_t *w, uint64_t now_ms)
{
    if (!w->counting || w->reported_ms <= w->pending_since_ms ||
        w->reported_ms - w->pending_since_ms < TL_MIN_RATE_INTERVAL_MS)
        return;
    for (uint32_t s = 0; s < t->n_stages; s++) {
        tl_moved_t *d = &w->pending[s], *r = &w->rate[s];
        double dt = d->task_ns > 0 ? d->task_ns / 1e9 : (double)(w->reported_ms - w->pending_since_ms) / 1000.0;
        *r = (tl_moved_t){d->in / dt, d->out / dt, d->busy_ns / dt, d->idle_ns / dt, d->blocked_ns / dt, 0};
        memset(d, 0, sizeof *d);
    }
    w->rate_at_ms = now_ms;
    w->pending_since_ms = w->reported_ms;
}

static void note_checkpoint(tl_job_t *t, const coord_job_t *j)
{
    if (!j->last_checkpoint || j->last_checkpoint == t->last_checkpoint_seen)
        return;
    t->last_checkpoint_seen = j->last_checkpoint;
    t->checkpoints[t->ck_head] = (tl_checkpoint_t){j->last_checkpoint, (int64_t)j->last_checkpoint_wall_ms,
                                                   j->last_checkpoint_ms, j->last_checkpoint_cost};
    t->ck_head = (t->ck_head + 1) % COORD_TIMELINE_CHECKPOINTS;
    if (t->ck_count < COORD_TIMELINE_CHECKPOINTS)
        t->ck_count++;
}

/* p50 and p99 of the batches the stage measured since the last sample. */
static void sample_latency(tl_job_t *t, const coord_job_t *j, uint32_t s, tl_point_t *pt)
{
    pt->latency_p50_ms = pt->latency_p99_ms = NAN;
    const eddy_histogram_t *now = coord_latency_of(j, s, false);
    if (!now)
        return;
    eddy_histogram_t *seen = &t->latency_seen[s], recent;
    if (eddy_hist_grew_from(now, seen)) {
        eddy_hist_delta(&recent, now, seen);
        if (eddy_hist_count(&recent) > 0) {
            pt->latency_p50_ms = eddy_hist_quantile_us(&recent, 0.50) / 1000.0;
            pt->latency_p99_ms = eddy_hist_quantile_us(&recent, 0.99) / 1000.0;
        }
    }
    *seen = *now;
}

static void sample(coord_t *c, tl_job_t *t, const coord_job_t *j, uint64_t now_ms)
{
    bool ended = coord_job_ended(j);
    int64_t wall = eddy_wall_ms();
    tl_point_t *row = &t->points[(size_t)t->head * t->n_stages];
    for (tl_worker_t *w = t->workers; w; w = w->next)
        take_rates(t, w, now_ms);
    for (uint32_t s = 0; s < t->n_stages; s++) {
        tl_point_t *pt = &row[s];
        memset(pt, 0, sizeof *pt);
        double busy = 0, blocked = 0, all = 0;
        for (tl_worker_t *w = t->workers; w && !ended; w = w->next) {
            coord_worker_t *cw = coord_find_worker(c, w->worker);
            if (!cw || !cw->alive || !w->rate_at_ms || now_ms - w->rate_at_ms > TL_RATE_STALE_MS)
                continue;
            const tl_moved_t *r = &w->rate[s];
            pt->rate_in += r->in;
            pt->rate_out += r->out;
            busy += r->busy_ns;
            blocked += r->blocked_ns;
            all += r->busy_ns + r->idle_ns + r->blocked_ns;
        }
        pt->busy = all > 0 ? busy / all : -1;
        pt->backpressure = all > 0 ? blocked / all : -1;
        pt->parallelism = coord_job_parallelism(j, s);
        sample_latency(t, j, s, pt);
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
        if (!any)
            pt->offered = NAN; /* no task of this epoch reported yet */
        if (any && !unknown)
            pt->watermark_lag_ms = low == INT64_MAX ? 0 : (wall > low ? wall - low : 0);
    }
    t->wall_ms[t->head] = wall;
    t->head = (t->head + 1) % COORD_TIMELINE_SAMPLES;
    if (t->count < COORD_TIMELINE_SAMPLES)
        t->count++;
}

void coord_timeline_tick(coord_t *c, uint64_t now_ms)
{
    if (!c->timeline)
        return;
    /* the history of a job the coordinator forgot (--max-ended-jobs) goes with it */
    for (tl_job_t **pp = &c->timeline->jobs; *pp;) {
        if (!coord_job_by_num(c, (*pp)->num)) {
            tl_job_t *gone = *pp;
            *pp = gone->next;
            job_free(gone);
        } else {
            pp = &(*pp)->next;
        }
    }
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
        sample(c, t, j, now_ms);
        if (coord_job_ended(j))
            t->final_sampled = true; /* its history stays as it was */
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
        json_t *cols[10];
        for (int k = 0; k < 10; k++)
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
            json_array_append_new(cols[8], number_or_null(pt->latency_p50_ms, !isnan(pt->latency_p50_ms)));
            json_array_append_new(cols[9], number_or_null(pt->latency_p99_ms, !isnan(pt->latency_p99_ms)));
            if (s == 0)
                json_array_append_new(times, json_integer((json_int_t)t->wall_ms[slot]));
        }
        json_t *op = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "name", j->graph.stages[s].name,
                               "parallelism", cols[0], "rate_in", cols[1], "rate_out", cols[2], "busy",
                               cols[4], "backpressure", cols[5], "state_bytes", cols[6],
                               "watermark_lag_ms", cols[7]);
        json_object_set_new(op, "latency_p50_ms", cols[8]);
        json_object_set_new(op, "latency_p99_ms", cols[9]);
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
        json_array_append_new(cks, json_pack("{s:I, s:I, s:f, s:I, s:I, s:f, s:f, s:f}", "id",
                                             (json_int_t)k->id, "time_ms", (json_int_t)k->wall_ms,
                                             "duration_ms", k->duration_ms, "bytes",
                                             (json_int_t)k->cost.bytes, "objects",
                                             (json_int_t)k->cost.files, "sync_ms",
                                             k->cost.sync_us / 1e3, "async_ms",
                                             k->cost.async_us / 1e3, "alignment_ms",
                                             k->cost.align_us / 1e3));
        json_object_set_new(json_array_get(cks, json_array_size(cks) - 1), "objects_referenced",
                            json_integer((json_int_t)k->cost.referenced));
    }
    return json_pack("{s:s, s:i, s:o, s:o, s:o}", "job", j->id, "interval_ms", COORD_TIMELINE_INTERVAL_MS,
                     "t", times, "operators", ops, "checkpoints", cks);
}
