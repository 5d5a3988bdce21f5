/* policy_alt.h - the scaling policies eddy's own is compared with
 * (issue 29, bench/autoscale): plain DS2, a busy threshold, and a
 * Flink-autoscaler-like rule.
 *
 * This file owns each one's proposal for one operator, as a pure function
 * of the operator's window (ds2.h: its bounds, parallelism and metrics)
 * and DS2's estimate of it; they read no clock (the flink one is given
 * now_ms) and print nothing. The policy (policy.c) calls the one its
 * config's kind names in place of its own proposal rules and then applies
 * the same interval, warm-up, cooldown, bounds and dry run to all, so that
 * a benchmark compares the rules and not their timing. None of them knows
 * about cores, hot keys, state budgets or latency objectives: those are
 * eddy's additions.
 *
 *   ds2        DS2 as published (Kalavri et al., OSDI 2018): the operator
 *              needs ceil(target input rate / true rate per instance)
 *              instances (utilisation 1, no headroom), up or down in one
 *              step, no confirmation. Its sources' targets are what arrives,
 *              without the catch-up rate (the caller removes it).
 *   threshold  a CPU autoscaler: observed busy share of the instances above
 *              0.8: one instance more; below 0.3: one fewer. Rates unused.
 *   flink      Flink's Kubernetes autoscaler: the busy share is the busiest
 *              instance's (max aggregation) when known, so the true rate is
 *              observed rate / (max busy x parallelism); nothing changes
 *              while the utilisation the target needs at the current
 *              parallelism is within [0.4, 1.0] (target 0.7, boundary 0.3);
 *              outside it the parallelism is ceil(target / (true rate x
 *              0.7)), raised to the next divisor of the key groups (up to
 *              half of them, within the bounds) so state spreads evenly; a
 *              scale-down is applied only once it has been wanted for the
 *              scale-down delay, to the largest proposal seen meanwhile.
 *              The sources' targets include the catch-up rate (Flink's
 *              catch-up duration). */
#ifndef EDDY_CONTROLLER_POLICY_ALT_H
#define EDDY_CONTROLLER_POLICY_ALT_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/ds2.h"
#include "controller/policy.h"

#define EDDY_THRESHOLD_UP_BUSY 0.8
#define EDDY_THRESHOLD_DOWN_BUSY 0.3
#define EDDY_FLINK_TARGET_UTILISATION 0.7
#define EDDY_FLINK_UTILISATION_BOUNDARY 0.3

/* What the flink rule remembers of an operator between evaluations. */
typedef struct eddy_policy_alt_state {
    bool down_wanted;      /* a scale-down has been wanted since down_since_ms */
    int64_t down_since_ms;
    uint32_t down_max;     /* the largest parallelism proposed since */
} eddy_policy_alt_state_t;

/* Each sets d->action and d->new_parallelism (d->old_parallelism is the
 * current one; d is otherwise as start_decision left it) and appends its
 * reasoning to d->reason. */
void eddy_policy_ds2_propose(const eddy_ds2_operator_t *op, const eddy_ds2_estimate_t *est,
                             eddy_scaling_decision_t *d);
void eddy_policy_threshold_propose(const eddy_ds2_operator_t *op, const eddy_ds2_estimate_t *est,
                                   eddy_scaling_decision_t *d);
/* key_groups: the job's key groups (alignment); scale_down_delay_ms as in
 * the policy config. */
void eddy_policy_flink_propose(const eddy_ds2_operator_t *op, const eddy_ds2_estimate_t *est,
                               int64_t now_ms, int64_t scale_down_delay_ms, uint32_t key_groups,
                               eddy_policy_alt_state_t *state, eddy_scaling_decision_t *d);

/* Appends to a decision's reason (silently truncated; policy.c). */
void eddy_scaling_reason_append(char *reason, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
