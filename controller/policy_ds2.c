/* policy_ds2.c - plain DS2 as a scaling policy: the model's optimum at
 * utilisation 1, up or down in one step (see policy_alt.h). */
#include "controller/policy_alt.h"

void eddy_policy_ds2_propose(const eddy_ds2_operator_t *op, const eddy_ds2_estimate_t *est,
                             eddy_scaling_decision_t *d)
{
    uint32_t current = op->parallelism;
    d->action = EDDY_SCALING_NO_CHANGE;
    d->new_parallelism = current;
    if (est->status != EDDY_DS2_OK) {
        eddy_scaling_reason_append(d->reason, "ds2: %s; keeping parallelism %u",
                                   eddy_ds2_status_name(est->status), current);
        return;
    }
    uint32_t want = eddy_ds2_parallelism_for(est->target_input_rate, est->true_rate_per_instance,
                                             1.0, op->min_parallelism, op->max_parallelism);
    d->wanted_parallelism = want;
    eddy_scaling_reason_append(d->reason,
                               "ds2: target %.0f rec/s / %.0f rec/s per instance = %.2f -> %u",
                               est->target_input_rate, est->true_rate_per_instance,
                               est->target_input_rate / est->true_rate_per_instance, want);
    if (want == current)
        return;
    d->action = want > current ? EDDY_SCALING_SCALE_UP : EDDY_SCALING_SCALE_DOWN;
    d->new_parallelism = want;
}
