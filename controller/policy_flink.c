/* policy_flink.c - a Flink-Kubernetes-autoscaler-like policy: utilisation
 * target 0.7 with a 0.3 boundary, max-busy aggregation, key-group
 * alignment and a scale-down delay (see policy_alt.h for the rules; the
 * names follow Flink's job.autoscaler.* options). */
#include "controller/policy_alt.h"

#include <math.h>

/* Flink's JobVertexScaler: the smallest p' >= p that divides the key
 * groups, searched up to half of them and the upper bound; p if none. */
static uint32_t align_to_key_groups(uint32_t p, uint32_t key_groups, uint32_t upper)
{
    for (uint32_t q = p; key_groups && q <= key_groups / 2 && q <= upper; q++)
        if (key_groups % q == 0)
            return q;
    return p;
}

static void reset_down(eddy_policy_alt_state_t *state)
{
    state->down_wanted = false;
    state->down_max = 0;
}

void eddy_policy_flink_propose(const eddy_ds2_operator_t *op, const eddy_ds2_estimate_t *est,
                               int64_t now_ms, int64_t scale_down_delay_ms, uint32_t key_groups,
                               eddy_policy_alt_state_t *state, eddy_scaling_decision_t *d)
{
    uint32_t current = op->parallelism;
    d->action = EDDY_SCALING_NO_CHANGE;
    d->new_parallelism = current;
    if (est->status != EDDY_DS2_OK) {
        reset_down(state);
        eddy_scaling_reason_append(d->reason, "flink: %s; keeping parallelism %u",
                                   eddy_ds2_status_name(est->status), current);
        return;
    }
    /* max aggregation: every instance counted as busy as the busiest */
    double true_rate = est->true_rate_per_instance;
    double busy_max = op->metrics.busy_max_share;
    const char *aggregation = "average";
    if (busy_max > 0.0 && busy_max <= 1.0 && isfinite(est->observed_input_rate)) {
        true_rate = est->observed_input_rate / (busy_max * (double)current);
        aggregation = "max";
    }
    double target = est->target_input_rate;
    double needed = target / ((double)current * true_rate); /* utilisation at current */
    uint32_t want = eddy_ds2_parallelism_for(target, true_rate, EDDY_FLINK_TARGET_UTILISATION,
                                             op->min_parallelism, op->max_parallelism);
    want = align_to_key_groups(want, key_groups, op->max_parallelism);
    d->wanted_parallelism = want;
    eddy_scaling_reason_append(d->reason,
                               "flink: target %.0f rec/s, %.0f rec/s per instance (%s busy) "
                               "needs utilisation %.2f at %u",
                               target, true_rate, aggregation, needed, current);
    double high = EDDY_FLINK_TARGET_UTILISATION + EDDY_FLINK_UTILISATION_BOUNDARY;
    double low = EDDY_FLINK_TARGET_UTILISATION - EDDY_FLINK_UTILISATION_BOUNDARY;
    if ((needed <= high && needed >= low) || want == current) {
        reset_down(state);
        eddy_scaling_reason_append(d->reason, ", within [%.1f, %.1f]: keeping %u", low, high,
                                   current);
        return;
    }
    eddy_scaling_reason_append(d->reason, ": %u at %.1f (aligned to %u key groups)", want,
                               EDDY_FLINK_TARGET_UTILISATION, key_groups);
    if (want > current) {
        reset_down(state);
        d->action = EDDY_SCALING_SCALE_UP;
        d->new_parallelism = want;
        return;
    }
    if (!state->down_wanted) {
        state->down_wanted = true;
        state->down_since_ms = now_ms;
        state->down_max = want;
    } else if (want > state->down_max) {
        state->down_max = want;
    }
    if (now_ms - state->down_since_ms < scale_down_delay_ms) {
        eddy_scaling_reason_append(d->reason, "; scale-down delayed until %.1f s",
                                   (double)(state->down_since_ms + scale_down_delay_ms) / 1000.0);
        return;
    }
    d->action = EDDY_SCALING_SCALE_DOWN;
    d->new_parallelism = state->down_max;
    d->wanted_parallelism = state->down_max;
    eddy_scaling_reason_append(d->reason, "; to the largest proposal of the delay, %u",
                               state->down_max);
    reset_down(state);
}
