/* latency.c - latency and event-time lag histograms per job and operator
 * (see latency.h). Owns each job's totals and the last reading of every
 * task that reported, matched by (worker, stage, instance). */
#include "coordinator/latency.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/internal.h"

typedef struct task_reading {
    uint32_t worker, stage, instance;
    eddy_histogram_t latency, event_lag;
} task_reading_t;

struct coord_latency {
    uint32_t n_stages;
    eddy_histogram_t *latency, *event_lag; /* [n_stages] totals */
    task_reading_t *readings;
    uint32_t n_readings, cap_readings;
};

void coord_latency_destroy(coord_latency_t **self_p)
{
    coord_latency_t *l = *self_p;
    if (!l)
        return;
    free(l->latency);
    free(l->event_lag);
    free(l->readings);
    free(l);
    *self_p = NULL;
}

static coord_latency_t *latency_for(coord_job_t *j)
{
    if (j->latency)
        return j->latency;
    coord_latency_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->n_stages = j->graph.n_stages;
    l->latency = calloc(l->n_stages ? l->n_stages : 1, sizeof *l->latency);
    l->event_lag = calloc(l->n_stages ? l->n_stages : 1, sizeof *l->event_lag);
    if (!l->latency || !l->event_lag) {
        coord_latency_destroy(&l);
        return NULL;
    }
    j->latency = l;
    return l;
}

static task_reading_t *reading_of(coord_latency_t *l, uint32_t worker, uint32_t stage,
                                  uint32_t instance)
{
    for (uint32_t i = 0; i < l->n_readings; i++) {
        task_reading_t *r = &l->readings[i];
        if (r->worker == worker && r->stage == stage && r->instance == instance)
            return r;
    }
    if (l->n_readings == l->cap_readings) {
        uint32_t cap = l->cap_readings ? l->cap_readings * 2 : 16;
        task_reading_t *grown = realloc(l->readings, cap * sizeof *grown);
        if (!grown)
            return NULL;
        l->readings = grown;
        l->cap_readings = cap;
    }
    task_reading_t *r = &l->readings[l->n_readings++];
    memset(r, 0, sizeof *r);
    r->worker = worker;
    r->stage = stage;
    r->instance = instance;
    return r;
}

/* Adds what the task's histogram gained since its last reading. */
static void accumulate(eddy_histogram_t *total, eddy_histogram_t *last, const eddy_histogram_t *now)
{
    eddy_histogram_t delta;
    if (eddy_hist_grew_from(now, last))
        eddy_hist_delta(&delta, now, last);
    else
        delta = *now; /* a new task in the old one's place */
    eddy_hist_add(total, &delta);
    *last = *now;
}

void coord_latency_on_metrics(coord_t *c, uint32_t worker, const eddy_task_metrics_t *m, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        coord_job_t *j = coord_job_by_num(c, m[i].job);
        if (!j || m[i].stage >= j->graph.n_stages)
            continue;
        coord_latency_t *l = latency_for(j);
        task_reading_t *r = l ? reading_of(l, worker, m[i].stage, m[i].instance) : NULL;
        if (!r)
            continue;
        accumulate(&l->latency[m[i].stage], &r->latency, &m[i].latency);
        accumulate(&l->event_lag[m[i].stage], &r->event_lag, &m[i].event_lag);
    }
}

const eddy_histogram_t *coord_latency_of(const coord_job_t *j, uint32_t stage, bool event_lag)
{
    const coord_latency_t *l = j->latency;
    if (!l || stage >= l->n_stages)
        return NULL;
    return event_lag ? &l->event_lag[stage] : &l->latency[stage];
}

typedef struct text {
    char *data;
    size_t len, cap;
    bool oom;
} text_t;

static void add(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text_t *t, const char *fmt, ...)
{
    while (!t->oom) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->data ? t->data + t->len : NULL, t->data ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = true;
            return;
        }
        if (t->data && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *d = realloc(t->data, cap);
        if (!d) {
            t->oom = true;
            return;
        }
        t->data = d;
        t->cap = cap;
    }
}

static void family(text_t *t, coord_t *c, const char *name, const char *help, bool event_lag)
{
    add(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        for (uint32_t s = 0; s < j->graph.n_stages; s++) {
            const eddy_histogram_t *h = coord_latency_of(j, s, event_lag);
            eddy_histogram_t empty = {{0}, 0};
            if (!h)
                h = &empty;
            const char *op = j->graph.stages[s].name;
            uint64_t cumulative = 0;
            for (uint32_t b = 0; b < EDDY_HIST_BUCKETS; b++) {
                cumulative += h->counts[b];
                if (b < EDDY_HIST_BOUNDS)
                    add(t, "%s_bucket{job=\"%s\",operator=\"%s\",le=\"%g\"} %llu\n", name, j->id,
                        op, (double)eddy_hist_bound_us(b) / 1e6, (unsigned long long)cumulative);
                else
                    add(t, "%s_bucket{job=\"%s\",operator=\"%s\",le=\"+Inf\"} %llu\n", name, j->id,
                        op, (unsigned long long)cumulative);
            }
            add(t, "%s_sum{job=\"%s\",operator=\"%s\"} %.6f\n", name, j->id, op,
                (double)h->sum_us / 1e6);
            add(t, "%s_count{job=\"%s\",operator=\"%s\"} %llu\n", name, j->id, op,
                (unsigned long long)cumulative);
        }
    }
}

char *coord_latency_prometheus(coord_t *c)
{
    text_t t = {0};
    add(&t, "%s", "");
    family(&t, c, "eddy_latency_seconds",
           "Record latency from ingestion at the source to the end of the operator's batch "
           "(at a sink: end to end), per batch, by its oldest record.",
           false);
    family(&t, c, "eddy_event_time_lag_seconds",
           "Wall clock minus the operator's event-time watermark, sampled every 50 ms per "
           "instance.",
           true);
    if (t.oom) {
        free(t.data);
        return NULL;
    }
    return t.data;
}

json_t *coord_latency_json(const coord_job_t *j, uint32_t stage, bool event_lag)
{
    const eddy_histogram_t *h = coord_latency_of(j, stage, event_lag);
    uint64_t n = h ? eddy_hist_count(h) : 0;
    if (!n)
        return NULL;
    json_t *o = json_object(), *counts = json_array(), *bounds = json_array();
    for (uint32_t b = 0; b < EDDY_HIST_BUCKETS; b++) {
        json_array_append_new(counts, json_integer((json_int_t)h->counts[b]));
        if (b < EDDY_HIST_BOUNDS)
            json_array_append_new(bounds, json_real((double)eddy_hist_bound_us(b) / 1e3));
    }
    json_object_set_new(o, "count", json_integer((json_int_t)n));
    json_object_set_new(o, "p50_ms", json_real(eddy_hist_quantile_us(h, 0.5) / 1e3));
    json_object_set_new(o, "p99_ms", json_real(eddy_hist_quantile_us(h, 0.99) / 1e3));
    json_object_set_new(o, "p999_ms", json_real(eddy_hist_quantile_us(h, 0.999) / 1e3));
    json_object_set_new(o, "counts", counts);
    json_object_set_new(o, "bounds_ms", bounds);
    return o;
}
