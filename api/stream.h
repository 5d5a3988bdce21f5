/* stream.h - the stream builder: a job is written as a pipeline of streams,
 * in the spirit of Flink's DataStream API.
 *
 *   eddy_stream_t lines = eddy_source(b, "source", "file", cfg);
 *   eddy_stream_t words = eddy_flat_map(lines, "split", "split_words", NULL);
 *   eddy_stream_t counts = eddy_aggregate(eddy_key_by(words, "whole_record"), "count", "sum", NULL);
 *   eddy_sink(eddy_global(counts), "sink", "table_file", out_cfg);
 *
 * Every step names a registered kind (built in, or registered by a plugin:
 * see plugin.h) and takes an optional configuration (taken over by the
 * builder, NULL for none). Nothing runs and nothing is opened while a job
 * is built: the builder only records a plan, which the submitting side
 * validates, serialises and ships to the workers.
 *
 * Each step has a uid: a stable operator id that must be unique in the job;
 * keyed state is matched to operators by uid across restarts and plan
 * changes (Flink's uid()). Its display name defaults to the uid. Errors are
 * sticky: after the first one every call is a no-op and the job's build
 * function returns eddy_builder_error()'s message. */
#ifndef EDDY_API_STREAM_H
#define EDDY_API_STREAM_H

#include <stdarg.h>
#include <stdint.h>

#include "api/config.h"
#include "common/err.h"

typedef struct eddy_job_builder eddy_job_builder_t;

/* A handle to the output of one step. node < 0 after an error. */
typedef struct eddy_stream {
    eddy_job_builder_t *builder;
    int node;
} eddy_stream_t;

/* A stream partitioned by a registered key selector (key groups). */
typedef struct eddy_keyed_stream {
    eddy_job_builder_t *builder;
    int node;
    const char *key_kind;
} eddy_keyed_stream_t;

eddy_stream_t eddy_source(eddy_job_builder_t *b, const char *uid, const char *kind,
                          eddy_config_t *config);
/* Stateless steps; they chain with the step before them when the
 * parallelism is the same (one task, direct calls). */
eddy_stream_t eddy_map(eddy_stream_t in, const char *uid, const char *kind, eddy_config_t *config);
eddy_stream_t eddy_flat_map(eddy_stream_t in, const char *uid, const char *kind,
                            eddy_config_t *config);
eddy_stream_t eddy_filter(eddy_stream_t in, const char *uid, const char *kind,
                          eddy_config_t *config);

/* Partitioning: by key (the next step is keyed and rescalable), round robin,
 * or everything to one instance. */
eddy_keyed_stream_t eddy_key_by(eddy_stream_t in, const char *key_kind);
eddy_stream_t eddy_rebalance(eddy_stream_t in);
eddy_stream_t eddy_global(eddy_stream_t in);

/* Keyed steps: per-key state in key groups, checkpointed and rescaled. */
eddy_stream_t eddy_reduce(eddy_keyed_stream_t in, const char *uid, const char *kind,
                          eddy_config_t *config);
eddy_stream_t eddy_aggregate(eddy_keyed_stream_t in, const char *uid, const char *kind,
                             eddy_config_t *config);

/* Keyed windows (a kind registered with eddy_register_window, api/window.h;
 * the config names the assigner: see there) and keyed process functions
 * with timers and state (eddy_register_process, api/process.h). */
eddy_stream_t eddy_window(eddy_keyed_stream_t in, const char *uid, const char *kind,
                          eddy_config_t *config);
eddy_stream_t eddy_process(eddy_keyed_stream_t in, const char *uid, const char *kind,
                           eddy_config_t *config);
/* Two keyed streams connected into one keyed process step (Flink's
 * connect(...).process(KeyedCoProcessFunction)): records of both reach the
 * instance that owns their key, whichever input they came from, and share
 * that key's state and timers; eddy_process_input (api/process.h) tells the
 * function which input a record came from (0: left, 1: right). Each input
 * has its own key selector (e.g. a person's id and an auction's seller);
 * their keys must mean the same thing, since both hash into the job's key
 * groups. Both inputs must be keyed and come from different steps of the
 * same job. Checkpoint barriers are aligned across both inputs, the step's
 * watermark is the minimum over both, and its input ends when both ended. */
eddy_stream_t eddy_process2(eddy_keyed_stream_t left, eddy_keyed_stream_t right, const char *uid,
                            const char *kind, eddy_config_t *config);

/* Side output of late records (Flink's sideOutputLateData): the records
 * of `in` that a step before it judged late and sent on with kind EDDY_LATE
 * (a window with late = "emit", api/window.h; a process function through
 * eddy_process_late, api/process.h), as ordinary EDDY_INSERT records with
 * their bytes, value and timestamp; `in`'s other records are not in it.
 * Late records pass every step that is not such a side output unseen
 * (api/operator.h), so they reach the end of the pipeline unchanged and
 * `in` may be its last step: e.g. the stream a sink reads, taken a second
 * time here for a late output. A filter step of kind EDDY_LATE_RECORDS_KIND;
 * it reads `in` round robin (eddy_rebalance) unless `in` was partitioned. */
eddy_stream_t eddy_late_records(eddy_stream_t in, const char *uid);
#define EDDY_LATE_RECORDS_KIND "late_records"

/* Returns the sink step, for eddy_set_name/eddy_set_parallelism only. */
eddy_stream_t eddy_sink(eddy_stream_t in, const char *uid, const char *kind, eddy_config_t *config);

/* Event time for a source step (Flink's assignTimestampsAndWatermarks with
 * bounded out-of-orderness): each record's timestamp comes from the
 * registered timestamp assigner `timestamps` (EDDY_TIMESTAMPS_FROM_SOURCE:
 * keep the timestamps the source set); every interval_ms (0: 200 ms) and
 * only when it rose, the source emits watermark = max timestamp seen -
 * max_delay_ms - 1, in band behind the records before it; at end of a
 * bounded input it emits EDDY_WATERMARK_MAX. idle_timeout_ms > 0: after
 * that long without a record the source declares itself idle, and
 * downstream operators leave it out of their minimum until it emits again. */
#define EDDY_TIMESTAMPS_FROM_SOURCE "source"
#define EDDY_WATERMARK_INTERVAL_MS 200
typedef struct eddy_event_time_spec {
    const char *timestamps;
    int64_t max_delay_ms;
    int64_t interval_ms;
    int64_t idle_timeout_ms;
} eddy_event_time_spec_t;
eddy_stream_t eddy_event_time(eddy_stream_t source, const eddy_event_time_spec_t *spec);
/* The source config keys eddy_event_time sets (the plan carries them). */
#define EDDY_EVENT_TIME_TIMESTAMPS "event_time.timestamps"
#define EDDY_EVENT_TIME_MAX_DELAY "event_time.max_delay_ms"
#define EDDY_EVENT_TIME_INTERVAL "event_time.interval_ms"
#define EDDY_EVENT_TIME_IDLE "event_time.idle_timeout_ms"

/* Properties of the step that made s. */
eddy_stream_t eddy_set_name(eddy_stream_t s, const char *name);
eddy_stream_t eddy_set_parallelism(eddy_stream_t s, uint32_t parallelism);

/* Job-wide: key groups (max parallelism of keyed steps) and the default
 * parallelism of steps that set none. */
void eddy_builder_set_max_parallelism(eddy_job_builder_t *b, uint32_t max_parallelism);
void eddy_builder_set_default_parallelism(eddy_job_builder_t *b, uint32_t parallelism);

/* Records an error (a job's own flag checks); the first one sticks. Returns -1. */
int eddy_builder_fail(eddy_job_builder_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* NULL while no error happened, else the first error's message. */
const char *eddy_builder_error(const eddy_job_builder_t *b);

#endif
