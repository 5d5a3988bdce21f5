/* window.h - keyed windows with Flink's semantics (its WindowOperator with
 * the default event-time / processing-time triggers).
 *
 * A window kind is registered from user functions and used as a step:
 *
 *   static const eddy_window_udf_t sum = {.reduce = add};
 *   eddy_register_window(r, "sum_window", &sum, err);
 *   ...
 *   eddy_config_t *w = eddy_config_new();
 *   eddy_config_set_str(w, "assigner", "tumbling");
 *   eddy_config_set_int(w, "size_ms", 10000);
 *   eddy_window(eddy_key_by(bids, "auction"), "per_auction", "sum_window", w);
 *
 * Step config (clear errors name the key; other keys are left for the
 * user's functions, which see the config):
 *   assigner    "tumbling" | "sliding" | "session" | "cumulate" (required)
 *   size_ms     window size, > 0 (tumbling, sliding; cumulate: the max size)
 *   slide_ms    slide, > 0 (sliding; at most 65536 windows per record);
 *               cumulate: the step, dividing size_ms
 *   panes       true (default) | false: a sliding event-time window with
 *               slide <= size, slide / gcd(size, slide) <= 16 and an
 *               accumulator that merges (reduce, or
 *               an aggregate or accumulator with merge) keeps one
 *               accumulator per key and pane, a slice of gcd(size, slide),
 *               instead of one per window: a record updates one pane, not
 *               size / slide windows, and a firing merges the window's
 *               panes. Results, late records and lateness are exactly
 *               those of per-window state. A snapshot of one does not
 *               restore into the other (a clear error says which 'panes'
 *               reads it).
 *   offset_ms   |offset| < size (tumbling, cumulate) or < slide (sliding); default 0
 *   gap_ms      session gap, > 0 (session)
 *   time        "event" (default) | "processing"
 *   lateness_ms allowed lateness >= 0, event time only; default 0
 *   late        "drop" (default) | "emit"
 *   combine     true (default) | false: local-global aggregation. With an
 *               accumulator that merges (reduce, or an aggregate or
 *               accumulator with merge; associative and commutative), event time,
 *               tumbling or sliding, lateness_ms 0 and late "drop", eddy
 *               chains a combiner before the shuffle that folds records per
 *               key and pane and sends partial accumulators; results and
 *               late counts are exactly those without it. Elsewhere no
 *               combiner is used (operators/window.c says why).
 *
 * Windows are [start, end). Tumbling: start = ts - ((ts - offset) mod size)
 * (mod >= 0, also for negative times). Sliding: every window of `size`
 * whose start is aligned to slide/offset and that contains ts. Cumulate
 * (Flink's cumulating windows): the windows [start, start + k * slide),
 * k = 1 .. size / slide, of the tumbling window of `size` that holds ts,
 * each that contains ts (no combiner; no panes). Session:
 * [ts, ts + gap), merged with every window of the key it intersects
 * (touching windows merge too, as in Flink), also when a record bridges two
 * sessions; merged state is combined with the aggregate's merge() (or the
 * reduce function), element lists are concatenated.
 *
 * Event time (record timestamps): a window fires when the watermark reaches
 * end - 1. A record is late, counted in eddy_late_records_total and dropped
 * (late = "drop") or sent on unchanged with kind EDDY_LATE (late = "emit",
 * for a late output: eddy_late_records in stream.h) when end - 1 +
 * lateness <= watermark for every window it belongs to (for sessions: the
 * window after merging) and ts + lateness <= watermark. With lateness a window's state is kept until the watermark
 * passes end - 1 + lateness; a record arriving in that time fires the
 * window again at once with the updated result (a late firing).
 * Processing time: records are assigned by the operator's processing clock
 * (the last tick()'s time; the wall clock before the first tick) and
 * windows fire from tick(); there is no lateness. At end of a bounded input
 * (finish()) every processing-time window still open fires, so a bounded
 * job shows its last windows. A window's state is removed once it can no
 * longer fire.
 *
 * A firing emits, with an accumulator, what its emit() writes; without a
 * process function, one record {data = key,
 * value = result, timestamp = end - 1}. A process function sees the key,
 * the window and its elements: every record of the window (element lists)
 * or, with reduce / aggregate, the one result as a record like the above
 * (Flink's aggregate(agg, processWindowFunction)). Records it emits get
 * timestamp end - 1 (Flink's TimestampedCollector).
 *
 * Window state (accumulators or element lists, session window sets,
 * timers) is keyed state: checkpointed, restored and moved with its key
 * groups; accumulators are copied as bytes and must hold no pointers. A key
 * group's state carries the watermark it was written at and an instance
 * that reads it continues from at least that watermark, so a restore
 * continues exactly (a replayed record is as late as it was). */
#ifndef EDDY_API_WINDOW_H
#define EDDY_API_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "api/config.h"
#include "api/operator.h"
#include "api/plugin.h"

typedef struct eddy_window {
    int64_t start; /* inclusive */
    int64_t end;   /* exclusive */
} eddy_window_t;

/* The elements of one firing. get() fills *rec with element i (< count);
 * its pointers are valid during the process call only. */
typedef struct eddy_window_elements eddy_window_elements_t;
struct eddy_window_elements {
    size_t count;
    void (*get)(const eddy_window_elements_t *self, size_t i, eddy_record_t *rec);
};

static inline eddy_record_t eddy_window_element(const eddy_window_elements_t *e, size_t i)
{
    eddy_record_t rec;
    e->get(e, i, &rec);
    return rec;
}

/* What a process function knows about the firing. */
typedef struct eddy_window_context {
    const char *key;
    uint32_t key_len;
    eddy_window_t window;
    int64_t watermark;       /* the operator's current watermark */
    int64_t processing_time; /* the operator's processing clock */
    const eddy_config_t *config; /* the step's config (never NULL) */
} eddy_window_context_t;

typedef void (*eddy_window_process_fn)(const eddy_window_context_t *ctx,
                                       const eddy_window_elements_t *elements,
                                       eddy_collector_t *out);

/* A config-aware accumulator: fixed-size window state whose functions see
 * the step's config, for aggregates only the config names (a declarative
 * pipeline's "count(), count_distinct(bidder)" is one).
 *
 * open(config) prepares a per-instance handle (parsed expressions, scratch
 * buffers; NULL is a valid handle) or fails with err; close frees it. The
 * window operator opens one per operator instance and one per combiner, and
 * one at configure time to learn size(prepared): the bytes of one
 * accumulator for this step, 1..EDDY_WINDOW_MAX_ACC, fixed by the config
 * (every instance must get the same size from the same config). A new
 * accumulator is zeroed, then create()d (may be NULL); add() folds a
 * record in; merge() (may be NULL: then no session windows and no
 * combiner) folds `other` into acc and must be associative and
 * commutative; emit() writes the firing's record(s) for acc, each stamped
 * end - 1. Accumulators are keyed state copied as bytes: no pointers.
 * check() (may be NULL) is given every accumulator read from a snapshot
 * or a combiner's partial record before any other function sees it: -1
 * with err refuses bytes that break the accumulator's invariants (a
 * corrupt snapshot), and the restore fails with that error. Handles are
 * used by one thread at a time. */
typedef struct eddy_window_accumulator {
    int (*open)(const eddy_config_t *config, void **prepared, eddy_err_t *err);
    void (*close)(void *prepared);
    size_t (*size)(const void *prepared);
    void (*create)(void *prepared, void *acc);
    void (*add)(void *prepared, void *acc, const eddy_record_t *rec);
    void (*merge)(void *prepared, void *acc, const void *other);
    void (*emit)(void *prepared, const eddy_window_context_t *ctx, const void *acc,
                 eddy_collector_t *out);
    int (*check)(void *prepared, const void *acc, eddy_err_t *err);
} eddy_window_accumulator_t;

/* Largest accumulator (aggregate.acc_size or accumulator size()). */
#define EDDY_WINDOW_MAX_ACC (1u << 20)

/* At most one of reduce, aggregate (used when acc_size > 0) and accumulator
 * (used when its add is set); with none the window keeps its elements and
 * needs process. reduce folds record values (the first value starts it);
 * sessions need aggregate.merge / accumulator.merge. An accumulator emits
 * its own records, so it takes no process function.
 *
 * max_by (element lists only: with process and none of the three) makes
 * the window a running "max by": it keeps only the elements that rank
 * highest so far, all ties, in the order they arrived, instead of every
 * element. max_by.rank(prepared, a, b) > 0 when a ranks above b, 0 when
 * they tie, < 0 below; it must be a total preorder. open(config,
 * &prepared, err) and close (both may be NULL) are as an accumulator's:
 * one handle per operator instance, for a ranking read from the step's
 * config (a pipeline's "max_by: EXPR"). A record that ranks below the kept
 * ones is not kept; one above them replaces them. So process sees exactly
 * the elements of the window whose rank is the largest, in arrival order
 * (a process function that emits the rows with the largest value of all
 * its elements emits the same with or without it). Sessions keep the
 * higher side's elements when they merge (both, in order, on a tie). A
 * restore of lists written without max_by keeps their best elements. */
typedef struct eddy_window_max_by {
    int (*open)(const eddy_config_t *config, void **prepared, eddy_err_t *err);
    void (*close)(void *prepared);
    int (*rank)(void *prepared, const eddy_record_t *a, const eddy_record_t *b);
} eddy_window_max_by_t;

typedef struct eddy_window_udf {
    int64_t (*reduce)(int64_t a, int64_t b);
    eddy_aggregate_udf_t aggregate;
    eddy_window_process_fn process;
    eddy_window_accumulator_t accumulator;
    eddy_window_max_by_t max_by;
} eddy_window_udf_t;

/* A max_by rank of records by their value (Nexmark q7's highest bids):
 * .max_by = {.rank = eddy_window_rank_value}. */
static inline int eddy_window_rank_value(void *prepared, const eddy_record_t *a,
                                         const eddy_record_t *b)
{
    (void)prepared;
    return (a->value > b->value) - (a->value < b->value);
}

/* Registers operator kind `name` (an eddy_window step); the udf is copied.
 * -1 with err when the functions do not form one of the shapes above. */
int eddy_register_window(eddy_registry_t *r, const char *name, const eddy_window_udf_t *udf,
                         eddy_err_t *err);

#endif
