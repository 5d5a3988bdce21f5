/* counters.h - a job's counters that never go backwards.
 *
 * A task's metrics (records in/out, busy/idle/blocked time, late records)
 * are cumulative since the task started, and tasks start again at every
 * restore; a rescale keeps the tasks that stay on their process (with their
 * counts) under a new epoch. This module turns those per-task values into
 * per-instance totals that only grow: one slot per (stage, instance) adds
 * the increase of whatever task runs that instance now. The slots are saved
 * in the job record (counters_to_json), so a restarted coordinator carries
 * on from them: a task still running on the same process continues from
 * the saved value, not from zero, so nothing is counted twice.
 *
 * What views show is the totals as of the last save that completed
 * (capture, then commit when the store confirmed it), so a restarted
 * coordinator, which starts from what was saved, never shows less than its
 * predecessor showed. The job-level counts (checkpoints, rescales, restarts)
 * are kept the same way: the coordinator states them before each save, a
 * restarted one continues from what was saved. Pure logic, no I/O
 * (tests/unit/test_counters.c). */
#ifndef EDDY_COORDINATOR_COUNTERS_H
#define EDDY_COORDINATOR_COUNTERS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "net/proto.h"

#define COORD_COUNTER_WORKER_MAX (EDDY_ENDPOINT_MAX + 24)

typedef struct coord_counts {
    uint64_t records_in, records_out, busy_ns, idle_ns, blocked_ns, late_records, rejected_records;
} coord_counts_t;

/* Counts of the whole job, since it was submitted. */
typedef struct coord_job_counts {
    uint64_t checkpoints_completed, checkpoints_failed, rescales, rescale_bytes, restarts;
    uint64_t migrations, instances_migrated; /* rebalancing (migrate.c); not in rescales */
    uint64_t migration_bytes;                /* state moved by migrations (not in rescale_bytes) */
} coord_job_counts_t;

typedef struct coord_counter_slot {
    uint32_t stage, instance;
    char worker[COORD_COUNTER_WORKER_MAX]; /* the process of the last task seen ("ENDPOINT#PID") */
    uint32_t worker_id;                    /* its id at this coordinator, 0: not seen since start */
    uint32_t epoch;                        /* of the last task seen */
    bool continues;                        /* the next epoch keeps that task and its counts */
    coord_counts_t last;                   /* the task's own values when last seen */
    coord_counts_t total;                  /* the instance's total over all its tasks */
    coord_counts_t captured;               /* total when the save in flight was made */
    coord_counts_t shown;                  /* total as of the last completed save */
} coord_counter_slot_t;

typedef struct coord_counters coord_counters_t;

coord_counters_t *coord_counters_new(void);
void coord_counters_destroy(coord_counters_t **self_p);

/* One task's metrics as a heartbeat brought them, from the process named
 * worker (see coord_counters_worker_key). Metrics of an epoch before the
 * current one are stale and ignored. */
void coord_counters_observe(coord_counters_t *self, const char *worker, uint32_t worker_id,
                            const eddy_task_metrics_t *m);

/* Whether the task of (stage, instance) on process worker lives on into the
 * new epoch with its counts (a rescale keeps it there). */
typedef bool (*coord_counters_keep_fn)(void *arg, uint32_t stage, uint32_t instance,
                                       const char *worker);
/* A deploy of epoch begins; keep NULL: every task starts again (restore). */
void coord_counters_begin_epoch(coord_counters_t *self, uint32_t epoch, coord_counters_keep_fn keep,
                                void *arg);
uint32_t coord_counters_epoch(const coord_counters_t *self);

/* The sum over the stage's instances, past and present: as shown (saved),
 * or live (the controller, which only takes differences within one
 * coordinator's life). */
void coord_counters_stage(const coord_counters_t *self, uint32_t stage, bool live,
                          coord_counts_t *out);
/* Wall-clock ms when the shown totals were taken (0: none yet): rates
 * over the true interval are differences of totals over differences of it. */
int64_t coord_counters_shown_ms(const coord_counters_t *self);
/* Takes the totals a save made at wall_ms is about to write; returns the
 * save's number. */
uint64_t coord_counters_capture(coord_counters_t *self, int64_t wall_ms);
/* That save completed: its totals are shown (unless a later save was
 * captured since: it commits the newer totals when it completes). */
void coord_counters_commit(coord_counters_t *self, uint64_t capture);
/* Shows the current totals without a save (a job that has ended on a
 * coordinator that keeps running: nothing can lower them any more). */
void coord_counters_show_all(coord_counters_t *self, int64_t wall_ms);
/* Sum of all totals, to tell which of two saved documents is newer. */
uint64_t coord_counters_grand_total(const coord_counters_t *self);
uint32_t coord_counters_slot_count(const coord_counters_t *self);
const coord_counter_slot_t *coord_counters_slot(const coord_counters_t *self, uint32_t i);

/* The job's counts now, as the coordinator knows them; a field lower than
 * before is ignored (totals never go back). The next capture saves them. */
void coord_counters_set_job(coord_counters_t *self, const coord_job_counts_t *now);
/* The job's counts as shown (saved) or live (the last set or loaded). */
void coord_counters_job(const coord_counters_t *self, bool live, coord_job_counts_t *out);

/* "ENDPOINT#PID": names one worker process across coordinator restarts. */
void coord_counters_worker_key(char *buf, size_t size, const char *endpoint, int64_t pid);

/* The current totals (now_ms: the wall clock, "time_ms"):
 * {"epoch": E, "time_ms": T, "tasks": [{"stage": NAME, "instance", "worker", "epoch",
 * "last": [7 counts], "total": [7 counts]}], "job": {"checkpoints_completed",
 * "checkpoints_failed", "rescales", "rescale_bytes", "restarts", "migrations",
 * "instances_migrated", "migration_bytes"}} (a missing one is 0), counts in
 * coord_counts_t order (documents from before rejected_records have 6, from
 * before the job's counts no "job"). */
json_t *coord_counters_to_json(const coord_counters_t *self, const char *const *stage_names,
                               uint32_t n_stages, int64_t now_ms);
/* Replaces self's slots; entries of stages the job does not have are dropped. */
int coord_counters_from_json(coord_counters_t *self, const json_t *doc,
                             const char *const *stage_names, uint32_t n_stages,
                             eddy_err_t *err);

#endif
