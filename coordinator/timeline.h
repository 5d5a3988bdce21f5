/* timeline.h - the coordinator's recent history of each job, for the web
 * dashboard (GET /api/v1/timeseries/JOB): once a second, per operator, the
 * records/s in and out, the offered rate of sources, busy and backpressured
 * fractions, parallelism, state size, event-time lag and the p50/p99
 * latency of the batches measured in that second; and the job's
 * completed checkpoints (id, time, duration, bytes, objects, and the
 * slowest task's synchronous, asynchronous and alignment times).
 *
 * Rates are per worker, from each heartbeat's difference to the same
 * worker's previous one over the time between them, so a rescale (tasks
 * restarting their counters at a new epoch) or a worker reporting late
 * makes no spike. Memory is bounded: a ring of COORD_TIMELINE_SAMPLES
 * samples and COORD_TIMELINE_CHECKPOINTS checkpoints per job. */
#ifndef EDDY_COORDINATOR_TIMELINE_H
#define EDDY_COORDINATOR_TIMELINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/proto.h"

#define COORD_TIMELINE_SAMPLES 900      /* 15 minutes at one a second */
#define COORD_TIMELINE_INTERVAL_MS 1000
#define COORD_TIMELINE_CHECKPOINTS 120

struct coord;
struct coord_worker;
typedef struct coord_timeline coord_timeline_t;

coord_timeline_t *coord_timeline_new(void);
void coord_timeline_destroy(coord_timeline_t **self_p);
/* A worker's heartbeat replaced its task metrics old[n_old] by now[n_now].
 * Call before w->last_heartbeat_ms is updated (it dates the previous one). */
void coord_timeline_on_heartbeat(struct coord *c, struct coord_worker *w,
                                 const eddy_task_metrics_t *old, uint32_t n_old, const eddy_task_metrics_t *now, uint32_t n_now);
/* From the coordinator's loop: takes a sample when one is due. */
void coord_timeline_tick(struct coord *c, uint64_t now_ms);
/* The history of job_id as columns (see docs/architecture.md), or NULL for
 * an unknown job. */
json_t *coord_timeline_json(struct coord *c, const char *job_id);

#endif
