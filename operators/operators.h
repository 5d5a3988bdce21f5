/* operators.h - the built-in operators: stateless functions (map, flat_map,
 * filter, late records), the keyed aggregate (reduce/aggregate with per-key accumulators in
 * the keyed state backend), and sinks (changelog to stdout, sorted final
 * table to a file). Each is an eddy_operator_ops_t with a config struct the
 * job builder fills in and keeps alive as long as the graph. */
#ifndef EDDY_OPERATORS_OPERATORS_H
#define EDDY_OPERATORS_OPERATORS_H

#include <stdbool.h>
#include <stddef.h>

#include "api/operator.h"

/* map, flat_map: fn emits zero or more records per input. */
typedef void (*eddy_flat_map_fn)(const eddy_record_t *in, eddy_collector_t *out, const void *arg);
typedef struct eddy_flat_map_config {
    eddy_flat_map_fn fn;
    const void *arg;
} eddy_flat_map_config_t;
extern const eddy_operator_ops_t eddy_flat_map_ops;

typedef bool (*eddy_filter_fn)(const eddy_record_t *in, const void *arg);
typedef struct eddy_filter_config {
    eddy_filter_fn keep;
    const void *arg;
} eddy_filter_config_t;
extern const eddy_operator_ops_t eddy_filter_ops;

/* The late records of a stream as data (eddy_late_records, api/stream.h):
 * keeps only EDDY_LATE records, sending each on as EDDY_INSERT with its
 * bytes, value and timestamp unchanged; sees_late. No config. */
extern const eddy_operator_ops_t eddy_late_records_ops;

/* Keyed aggregate: one accumulator of acc_size bytes per key (zeroed when
 * created, then init() if set); add() folds a record in; merge() combines two
 * accumulators (pre-aggregation); result() gives the value emitted as
 * [key, result]. CHANGELOG emits +I / -U,+U on every update (Flink's group
 * aggregation); FINAL emits +I once per key at end of input. */
typedef enum { EDDY_EMIT_CHANGELOG, EDDY_EMIT_FINAL } eddy_emit_mode_t;
typedef struct eddy_aggregate_config {
    size_t acc_size;
    void (*init)(void *acc);
    void (*add)(void *acc, const eddy_record_t *rec);
    void (*merge)(void *acc, const void *other);
    int64_t (*result)(const void *acc);
    eddy_emit_mode_t emit;
    /* Optional simulated per-record cost (busy-wait, microseconds) for demos. */
    double cost_us;
    /* Sleep for cost_us instead of spinning: an instance then needs no CPU
     * while "working", so demos and tests with more instances than cores
     * still see each instance's capacity (e.g. autoscaling on a 2-core box). */
    bool cost_sleep;
    /* Local-global aggregation where exact (merge, an int64 accumulator,
     * emit FINAL, no simulated cost): config {combine: true}, the default. */
    bool combine;
} eddy_aggregate_config_t;
extern const eddy_operator_ops_t eddy_aggregate_ops;
/* The pre-aggregation chained before an aggregate's shuffle. */
extern const eddy_operator_ops_t eddy_combiner_ops;
/* A ready-made sum of record values (count when values are 1). */
void eddy_aggregate_sum_config(eddy_aggregate_config_t *cfg, eddy_emit_mode_t emit);

/* Sinks. */
extern const eddy_operator_ops_t eddy_changelog_sink_ops; /* stdout, config unused */
typedef struct eddy_table_file_config {
    char path[4096];
    bool lines; /* format "lines": each key written value times (a multiset of lines) */
} eddy_table_file_config_t;
/* Collects [key, value] records and at end of input writes "key<TAB>value"
 * lines in byte order of the key to path, atomically (temp + fsync + rename).
 * The sort and the write run on the snapshot writer thread (a call in the
 * final prepare's sync list), never on the worker loop; TASK_DONE waits. */
extern const eddy_operator_ops_t eddy_table_file_sink_ops;

/* Exactly-once part files (two-phase commit, like Flink's FileSink). Each
 * instance appends every record's data and '\n' (value and kind are not
 * written) to DIR/.pending/.inprogress-<stage>-<instance>-<attempt> (the
 * DEPLOY's epoch: a stale instance still running elsewhere never shares the
 * file of the current one). prepare(n) flushes
 * it, renames it to DIR/.pending/part-<stage>-<instance>-<n, 20 digits>
 * (nothing when no record came since the last prepare) and lists the file
 * and DIR/.pending in the sync list, which the runtime fsyncs off the loop
 * before the ACK; commit(n) renames every file this instance prepared with
 * an id <= n to DIR/part-<instance>-<id, 20 digits>.txt and lists DIR (both
 * fsync themselves when given no list). open() publishes
 * the instance's pending files with id <= ctx->restored_checkpoint and
 * deletes later ones and the in-progress files of every attempt. So the committed files,
 * concatenated, hold every record exactly once given a replayable source.
 * Assumptions: DIR is seen by every worker at the same path (one host, or a
 * shared file system), it holds one part-file sink stage of one job, and the
 * stage's parallelism does not change. */
typedef struct eddy_part_file_config {
    char directory[4096];
    /* Optional (config "merge_to"): each prepared file is sorted in place
     * on the snapshot writer thread before the checkpoint's ACK (a call
     * after its fsyncs); at the job's final commit, instance 0
     * publishes every instance's pending files and merges the committed
     * (sorted) parts into this file, byte-sorted (line_merge.h), on the snapshot
     * writer thread (a sync list call: the loop goes on, the job's final
     * ACK waits for it); then it writes DIR/.merged (a repeated final
     * commit merges nothing again) and removes the parts. Every open
     * removes what an earlier run or attempt left in DIR after the restored
     * checkpoint (on a fresh start, everything): each instance its own
     * parts, instance 0 the marker, the merge's runs and such parts of
     * instances beyond the parallelism. So FILE holds every row exactly
     * once, as the concatenated parts do. */
    char merge_to[4096];
} eddy_part_file_config_t;
extern const eddy_operator_ops_t eddy_part_file_sink_ops;

/* Writes each record's data and '\n' to stdout (rows as they come). */
extern const eddy_operator_ops_t eddy_print_sink_ops;

/* Formats a record as Flink's changelog row: "+I[word, 1]". Returns length. */
size_t eddy_format_changelog(const eddy_record_t *rec, char *buf, size_t size);

#endif
