/* ds2.h - the DS2 scaling model (Kalavri et al., OSDI 2018) as a pure function.
 *
 * This file owns the arithmetic only: from per-operator measurements taken
 * over one window it derives each operator's true processing rate, its
 * selectivity, the rate it must sustain (target input rate) and the
 * parallelism that sustains it. It keeps no state, reads no clock and
 * allocates nothing, so it can be tested with hand-computed graphs; when
 * and whether to act on the result is the policy's job (controller/policy.h).
 *
 * The model. Per operator, summed over its instances during the window:
 *   records_in   records the operator processed
 *   records_out  records its user function emitted (once per record, however
 *                many downstream operators receive it)
 *   useful_ns    time spent processing, excluding time waiting for input
 *                and time blocked on output (backpressure)
 * Then
 *   true rate per instance = records_in  / useful seconds
 *   true output rate       = records_out / useful seconds
 *   selectivity            = true output rate / true rate = records_out / records_in
 * Walking the operators in topological order:
 *   source:     target input rate = target output rate = offered_rate, the
 *               records/s the outside world offers (selectivity reported as 1;
 *               a source's "processed" count is records_out, records_in is ignored)
 *   otherwise:  target input rate  = sum of the upstreams' target output rates
 *               target output rate = target input rate * selectivity
 *   optimal parallelism = ceil(target input rate /
 *                              (true rate per instance * target_utilisation)),
 *               clamped to [min_parallelism, max_parallelism].
 * Fan-out: every downstream operator receives the whole output of its
 * upstream (records are split among the instances of one operator, never
 * among operators), so each consumer's target includes it in full.
 *
 * Missing data never produces a guess. An operator without a measurement
 * (no useful time or nothing processed) keeps its current parallelism; if it
 * also processed nothing, its selectivity is unknown and so are the targets
 * of everything downstream of it, which then keep their parallelism too.
 * Unknown values are NaN; nothing here divides by zero. */
#ifndef EDDY_CONTROLLER_DS2_H
#define EDDY_CONTROLLER_DS2_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* The target utilisation the rest of eddy uses unless configured otherwise:
 * provision so that instances are busy 80% of the time at the target rate,
 * which leaves room to drain the backlog built up during a rescale and to
 * absorb measurement noise without an immediate second scale-up. */
#define EDDY_DS2_DEFAULT_TARGET_UTILISATION 0.8

/* Measurements of one operator over one window, summed over its instances. */
typedef struct eddy_ds2_metrics {
    uint64_t records_in;   /* records processed (ignored for sources) */
    uint64_t records_out;  /* records emitted */
    uint64_t useful_ns;    /* busy time, excluding input waits and output blocking */
    uint64_t window_ns;    /* wall-clock length of the window; 0 if unknown
                              (only the observed rates need it) */
    double offered_rate;   /* sources only: records/s offered by the outside
                              world; NaN if unknown. Ignored for other operators. */
    /* Keyed operators: the share (0, 1] of records_in that went to the
     * busiest key group, and which group that is; 0: unknown. Not used by
     * DS2 itself: the policy (policy.h) reads it to name a hot key. */
    double hot_key_share;
    uint32_t hot_key_group;
    /* Keyed operators: bytes of keyed state over all instances (a gauge,
     * the latest) and how fast that grew over the window (bytes/s; may be
     * negative). 0: unknown or stateless. Not used by DS2 itself: the
     * policy's state budget (policy.h) reads them. */
    double state_bytes;
    double state_growth_per_s;
    /* Sources that report a lag: the records behind (the source's own
     * records, e.g. Redis entries) and the part of offered_rate that drains
     * them within the catch-up time (controller/catch_up.h; records/s as
     * offered_rate). 0: none or unknown. Not used by DS2 itself: the policy
     * names them in its reasons. */
    double backlog;
    double catch_up_rate;
    /* The p99 latency (ms since ingest) of the records through this
     * operator in the window, and the share of the window its upstreams'
     * instances spent blocked sending to it (backpressure). 0: unknown or
     * none. Not used by DS2 itself: the policy's latency objective reads them. */
    double latency_p99_ms;
    double upstream_blocked;
    /* The busiest instance's busy share of the window (0, 1]; 0: unknown.
     * Not used by DS2 itself: the flink policy (policy_alt.h) aggregates
     * busy time by the maximum, as Flink's autoscaler does. */
    double busy_max_share;
} eddy_ds2_metrics_t;

/* One operator of the job graph. Everything is borrowed from the caller for
 * the duration of the call. */
typedef struct eddy_ds2_operator {
    const char *name;
    uint32_t parallelism;      /* current, >= 1 */
    uint32_t min_parallelism;  /* >= 1 */
    uint32_t max_parallelism;  /* >= min_parallelism */
    const size_t *upstreams;   /* indexes of upstream operators, each lower than
                                  this operator's own index; NULL when none */
    size_t upstream_count;     /* 0 makes the operator a source */
    eddy_ds2_metrics_t metrics;
} eddy_ds2_operator_t;

typedef enum eddy_ds2_status {
    EDDY_DS2_OK,             /* optimal_parallelism is computed */
    EDDY_DS2_NO_MEASUREMENT, /* no useful time or nothing processed: keep parallelism */
    EDDY_DS2_NO_TARGET,      /* target input rate unknown (source without offered
                                rate, or an upstream's output unknown): keep parallelism */
} eddy_ds2_status_t;

/* The model's view of one operator. Unknown rates are NaN. */
typedef struct eddy_ds2_estimate {
    eddy_ds2_status_t status;
    double true_rate_per_instance;        /* records processed per useful second */
    double true_output_rate_per_instance; /* records emitted per useful second */
    double selectivity;                   /* output per input record; 1 for sources */
    double observed_input_rate;           /* records processed per wall second, all instances */
    double observed_utilisation;          /* useful_ns / (window_ns * parallelism) */
    double target_input_rate;             /* records/s the operator must process */
    double target_output_rate;            /* records/s it then emits downstream */
    double exact_parallelism;             /* unrounded, unclamped; NaN unless status is OK */
    uint32_t optimal_parallelism;         /* clamped; the current parallelism unless OK */
} eddy_ds2_estimate_t;

const char *eddy_ds2_status_name(eddy_ds2_status_t status);

/* Runs the model over count operators in topological order and writes one
 * estimate per operator to estimates[0..count). target_utilisation must be in
 * (0, 1]. Returns 0, or -1 on invalid input (bad bounds, an upstream index
 * that is not lower than its operator's, a negative or infinite offered rate). */
int eddy_ds2_estimate(const eddy_ds2_operator_t *operators, size_t count,
                      double target_utilisation, eddy_ds2_estimate_t *estimates,
                      eddy_err_t *err);

/* ceil(target_input_rate / (true_rate_per_instance * utilisation)) clamped
 * to [min_parallelism, max_parallelism]. A value within a relative 1e-9 of
 * an integer counts as that integer, so that 3.0000000001 stays 3. Meant for
 * known inputs; otherwise a NaN or non-positive quotient gives the minimum
 * and an infinite one (zero capacity) the maximum. */
uint32_t eddy_ds2_parallelism_for(double target_input_rate, double true_rate_per_instance,
                                  double utilisation, uint32_t min_parallelism,
                                  uint32_t max_parallelism);

#endif
