/* policy.h - when to act on DS2: the scaling decision policy of one job.
 *
 * This file owns the decision rules around the DS2 model (controller/ds2.h)
 * and the little state they need: when the job and each operator were last
 * rescaled, and how many consecutive intervals have asked for a scale-down.
 * It reads no clock (the caller passes now_ms) and prints nothing, so the
 * tests can drive it through simulated time.
 *
 * One call to eddy_scaling_policy_decide() evaluates every operator at once
 * and returns one decision per operator, so all operators that need a change
 * change in the same step. The rules, in order:
 *   interval   at most one evaluation per interval_ms; earlier calls return 0
 *              and decide nothing (the caller's metric window should match).
 *   warm-up    for warmup_ms after any rescale of the job, metrics are not
 *              trusted (backlog drain, state migration): every operator gets
 *              "no_change" and scale-down agreement starts over.
 *   scale-up   as soon as DS2's optimum (at target_utilisation) exceeds the
 *              current parallelism, to that optimum in one step.
 *   scale-down only with hysteresis: the parallelism needed at the lower
 *              scale_down_utilisation must be below the current one, and must
 *              have been so for scale_down_confirmations consecutive
 *              evaluations; the new parallelism is the largest of those
 *              intervals' proposals. The gap between the two utilisations
 *              is what stops 3 -> 4 -> 3 flapping on noisy measurements.
 *   cooldown   an operator rescaled less than cooldown_ms ago is not
 *              rescaled again; the decision still says what DS2 wants, with
 *              applied = false.
 *   limits     a scale-up never asks for more instances of one operator than
 *              the workers have cores (core_limit), unless
 *              allow_oversubscribe. When a hot key group's share of an
 *              operator's records means that one instance cannot carry it
 *              (share x target > what one instance processes), instances
 *              beyond ceil(1 / share) cannot help and are not asked for.
 *              After a scale-up, the first evaluation past the warm-up
 *              compares the throughput gained with the gain predicted; below
 *              effectiveness x predicted (and still short of the target), the
 *              operator's parallelism is recorded as its effective limit and
 *              it is not scaled up beyond it again (until the
 *              policy scales it down). Each of these is reported as
 *              infeasible = true with a reason "infeasible: target R,
 *              achieved A at parallelism P, limited by ...".
 *   memory     with a state budget (bytes of keyed state per instance), an
 *              operator gets at least the instances its state will need by
 *              the end of the next interval plus warm-up (the state now plus
 *              its growth over the last window times that horizon, divided
 *              by the budget), so it is scaled out before an instance
 *              crosses the budget, not after; such a scale-up is applied
 *              even in the operator's cooldown, and no scale-down goes
 *              below that need. memory_parallelism says what it was.
 *   backlog    a source that reports a lag is offered its arrival rate plus
 *              the rate that drains its backlog within catch_up_s (the
 *              controller computes it: controller/catch_up.h), so DS2 sizes
 *              everything downstream for the catch-up; the reasons of the
 *              operators it drove name the backlog and that target. Once
 *              the backlog is gone the target falls back to the arrival rate
 *              and the usual scale-down rules bring the operators back in.
 *   latency    with a latency objective (latency_slo_ms), when the job's p99
 *              latency in the window (its slowest operator's) is above it, an
 *              operator that is the queue -- busy at or above the target
 *              utilisation, or its upstreams blocked sending to it for at
 *              least 10% of the window -- gets at least one instance more
 *              (within the limits above, subject to the cooldown) and is not
 *              scaled down; an idle operator gets nothing for it (the
 *              latency is the sink's or the network's), and its reason says so.
 *   aligned    a new parallelism p that leaves the key groups unevenly
 *              spread (the busiest instance owns over 5% more than an
 *              even share) becomes p + 1 when p + 1 divides them evenly and
 *              is within the limits: one instance more at most.
 *   cost of moving  a rescale from p to q moves about state x |q - p| /
 *              max(p, q) bytes, at the rate the job's rescales achieved
 *              (eddy_scaling_policy_set_move_rate). A scale-down waits until
 *              the lower load has held ten times that transfer time (on top
 *              of its confirmations); a scale-up of an operator that still
 *              keeps up (it processed 95% of its target, no backlog, no
 *              latency objective missed, no memory need) waits for a second
 *              interval asking for it when the move takes a second or more.
 *              Overload, backlogs and budgets do not wait.
 *   effect     (every policy) the first clean window after an applied rescale reports the
 *              rate and utilisation it predicted beside those observed
 *              (decision.effect, and a clause of the reason).
 *   dry run    decisions are computed and reported but never applied.
 * Those rules are the "eddy" policy (kind EDDY_POLICY_EDDY, the default).
 * The other kinds (policy_alt.h: plain DS2, a busy threshold, a Flink-
 * autoscaler-like rule) replace how an operator's proposal is made -- the
 * scale-up, scale-down, limits, memory and latency rules above -- and keep
 * the interval, warm-up, cooldown, bounds and dry run, so that a benchmark
 * compares the rules under the same timing (bench/autoscale).
 * A decision with applied = true is assumed to be carried out at now_ms; its
 * time starts the job's warm-up and the operator's cooldown. Rescales the
 * policy did not order (manual, job start) are reported with
 * eddy_scaling_policy_note_rescale(). */
#ifndef EDDY_CONTROLLER_POLICY_H
#define EDDY_CONTROLLER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "controller/ds2.h"

/* Buffer sizes, including the terminating NUL. Longer names are rejected. */
#define EDDY_SCALING_NAME_MAX 64
#define EDDY_SCALING_REASON_MAX 512
#define EDDY_SCALING_POLICY_NAME_MAX 16

typedef struct eddy_scaling_policy eddy_scaling_policy_t;

/* Which rules propose the changes (--policy; policy_alt.h for the others). */
typedef enum eddy_scaling_policy_kind {
    EDDY_POLICY_EDDY,      /* the rules above (default) */
    EDDY_POLICY_DS2,       /* plain DS2: the optimum at utilisation 1, up and down at once */
    EDDY_POLICY_THRESHOLD, /* one instance more above 80% busy, one fewer below 30% */
    EDDY_POLICY_FLINK,     /* Flink's autoscaler: utilisation 0.7 within [0.4, 1],
                            * max-busy aggregation, key-group alignment, scale-down delay */
} eddy_scaling_policy_kind_t;

/* "eddy", "ds2", "threshold", "flink". */
const char *eddy_scaling_policy_kind_name(eddy_scaling_policy_kind_t kind);
/* Returns 0 and sets *kind for a name above, -1 otherwise. */
int eddy_scaling_policy_kind_parse(const char *name, eddy_scaling_policy_kind_t *kind);

typedef struct eddy_scaling_policy_config {
    const char *job;                   /* copied; NULL means "" */
    int64_t interval_ms;               /* >= 0; 0 evaluates on every call */
    int64_t warmup_ms;                 /* >= 0 */
    int64_t cooldown_ms;               /* >= 0 */
    double target_utilisation;         /* (0, 1] */
    double scale_down_utilisation;     /* (0, target_utilisation] */
    uint32_t scale_down_confirmations; /* >= 1 */
    uint32_t min_parallelism;          /* job-wide bounds, intersected with each */
    uint32_t max_parallelism;          /* operator's own; 1 <= min <= max */
    bool dry_run;
    uint32_t core_limit;               /* cores the workers have together; 0 unknown */
    bool allow_oversubscribe;          /* scale past core_limit */
    double effectiveness;              /* [0, 1]: a scale-up must bring this share of
                                        * the gain it predicted (0 disables the check) */
    uint64_t state_budget_bytes;       /* keyed state per instance; 0: no budget */
    double catch_up_s;                 /* >= 0: sources drain a backlog within this
                                        * (controller/catch_up.h); 0: backlogs ignored */
    double latency_slo_ms;             /* >= 0: the p99 latency objective; 0: none */
    eddy_scaling_policy_kind_t kind;   /* the rules that propose changes */
    int64_t scale_down_delay_ms;       /* >= 0, flink only: a scale-down waits until it
                                        * has been wanted this long */
} eddy_scaling_policy_config_t;

typedef enum eddy_scaling_action {
    EDDY_SCALING_NO_CHANGE,
    EDDY_SCALING_SCALE_UP,
    EDDY_SCALING_SCALE_DOWN,
} eddy_scaling_action_t;

/* The numbers a decision was based on. Unknown values are NaN. */
typedef struct eddy_scaling_rates {
    double target_input_rate;      /* records/s DS2 says the operator must process */
    double true_rate_per_instance; /* records/s one instance processes when busy */
    double observed_input_rate;    /* records/s actually processed in the window */
    double selectivity;            /* records emitted per record processed */
    double utilisation;            /* observed: busy fraction of the instances */
    double target_utilisation;     /* the utilisation the policy provisions for */
    double projected_utilisation;  /* target_input_rate / (new_parallelism * true rate) */
    /* Optional inputs (NaN: not reported; omitted from the JSON): */
    double backlog;                /* records behind at the sources upstream, summed */
    double latency_p99_ms;         /* the job's p99 latency in the window (its slowest
                                    * operator's), with a latency objective only */
    double state_bytes;            /* the operator's keyed state, all instances */
} eddy_scaling_rates_t;

/* What an applied rescale brought, seen in the first clean window after it
 * settled (past the warm-up): the prediction it was made on beside what
 * was observed. Reported on that later decision of the same operator. */
typedef struct eddy_scaling_effect {
    bool known;                   /* the fields below are valid */
    int64_t decided_ms;           /* time_ms of the decision it follows */
    uint32_t from, to;            /* that decision's parallelisms */
    double predicted_rate;        /* records/s the new parallelism was to process */
    double observed_rate;         /* records/s it processed */
    double predicted_utilisation; /* its projected_utilisation */
    double observed_utilisation;
} eddy_scaling_effect_t;

typedef struct eddy_scaling_decision {
    int64_t time_ms;
    char job[EDDY_SCALING_NAME_MAX];
    char operator_name[EDDY_SCALING_NAME_MAX];
    char policy[EDDY_SCALING_POLICY_NAME_MAX]; /* the kind's name; "" for the pool's */
    uint32_t old_parallelism;
    uint32_t new_parallelism; /* what the policy wants; == old for no_change */
    eddy_scaling_action_t action;
    bool applied;             /* the change is to be carried out now */
    bool infeasible;          /* the target cannot be reached by instances (see limits) */
    uint32_t wanted_parallelism; /* the instances the operator needs, for a worker pool:
                                  * new_parallelism, or DS2's optimum when only the
                                  * workers' cores held it back; 0 when not measured */
    uint32_t memory_parallelism; /* the instances the state budget asks for; 0: no
                                  * budget or no state */
    char reason[EDDY_SCALING_REASON_MAX];
    eddy_scaling_rates_t rates;
    eddy_scaling_effect_t effect; /* of this operator's last applied rescale, once */
} eddy_scaling_decision_t;

/* The defaults (see policy.c for why each value):
 *   interval 10 s, warm-up 30 s, cooldown 60 s, target utilisation 0.8,
 *   scale-down utilisation 0.7, 3 confirmations, parallelism [1, 128],
 *   dry run off, no core limit, effectiveness 0.5, no state budget,
 *   catch-up 30 s, no latency objective, policy eddy, scale-down delay
 *   60 s (flink only). */
eddy_scaling_policy_config_t eddy_scaling_policy_config_default(void);

/* Returns NULL and fills err on an invalid config or out of memory. */
eddy_scaling_policy_t *eddy_scaling_policy_new(const eddy_scaling_policy_config_t *config,
                                               eddy_err_t *err);
/* Frees *self_p and sets it to NULL; NULL and *NULL are fine. */
void eddy_scaling_policy_destroy(eddy_scaling_policy_t **self_p);

/* Evaluates operators[0..count) (topological order, as for eddy_ds2_estimate;
 * operators are matched to earlier calls by name) and writes one decision per
 * operator to decisions[0..count). Returns 1 when it evaluated, 0 when the
 * interval has not elapsed since the last evaluation (decisions untouched),
 * -1 on invalid input (policy state unchanged; the call does not count as an
 * evaluation) or out of memory. */
int eddy_scaling_policy_decide(eddy_scaling_policy_t *self, int64_t now_ms,
                               const eddy_ds2_operator_t *operators, size_t count,
                               eddy_scaling_decision_t *decisions, eddy_err_t *err);

/* Records a rescale the policy did not order: operator_name's cooldown
 * starts at now_ms, and the job's warm-up in every case. NULL operator_name
 * means the whole job (e.g. its start or restart): warm-up only. */
int eddy_scaling_policy_note_rescale(eddy_scaling_policy_t *self, const char *operator_name,
                                     int64_t now_ms, eddy_err_t *err);

/* The workers' cores changed (0: unknown, no limit): see core_limit. */
void eddy_scaling_policy_set_core_limit(eddy_scaling_policy_t *self, uint32_t cores);

/* The state transfer rate the job's rescales achieved (bytes/s; <= 0 or
 * NaN: unknown, the policy assumes EDDY_SCALING_DEFAULT_MOVE_RATE): see
 * cost of moving. */
void eddy_scaling_policy_set_move_rate(eddy_scaling_policy_t *self, double bytes_per_s);

/* Bytes/s of state a rescale is assumed to move when none was measured:
 * what fluid steps reached on loopback (bench/README.md, rescale). */
#define EDDY_SCALING_DEFAULT_MOVE_RATE (50.0 * 1024.0 * 1024.0)

/* "scale_up", "scale_down", "no_change". */
const char *eddy_scaling_action_name(eddy_scaling_action_t action);
/* Returns 0 and sets *action for a name above, -1 otherwise. */
int eddy_scaling_action_parse(const char *name, eddy_scaling_action_t *action);

#endif
