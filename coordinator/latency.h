/* latency.h - per job and operator histograms of record latency and
 * event-time lag, summed from the workers' heartbeats (not a public API).
 *
 * Workers send each task's cumulative bucket counts (net/proto.h,
 * eddy_task_metrics_t.latency / .event_lag); the coordinator adds what grew
 * since that task's previous report to the operator's totals. A task that
 * reports less than before was recreated (restore, rescale, a new worker):
 * its whole reading is new. So the exported histograms are counters that
 * never go back, across rescales and restores, for as long as the
 * coordinator runs (a new coordinator starts from zero: a counter reset,
 * as Prometheus expects of a restarted target). */
#ifndef EDDY_COORDINATOR_LATENCY_H
#define EDDY_COORDINATOR_LATENCY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/histogram.h"
#include "net/proto.h"

typedef struct coord_latency coord_latency_t;
struct coord;
struct coord_job;

/* A heartbeat's task metrics from worker `worker` (any jobs). */
void coord_latency_on_metrics(struct coord *c, uint32_t worker, const eddy_task_metrics_t *m,
                              uint32_t n);
void coord_latency_destroy(coord_latency_t **self_p);
/* The job's totals for one stage (NULL: none reported yet). */
const eddy_histogram_t *coord_latency_of(const struct coord_job *j, uint32_t stage,
                                         bool event_lag);
/* {"count", "p50_ms", "p99_ms", "p999_ms", "counts": [per bucket],
 * "bounds_ms": [upper bounds]} of one stage since the job started (the
 * dashboard diffs counts over time for recent quantiles); NULL when empty. */
struct json_t;
struct json_t *coord_latency_json(const struct coord_job *j, uint32_t stage, bool event_lag);
/* Both histogram families of every job in Prometheus text format
 * (malloc'd, NULL when out of memory). */
char *coord_latency_prometheus(struct coord *c);

#endif
