/* policy_threshold.c - a CPU-autoscaler-like policy: one instance more
 * above 80% busy, one fewer below 30% (see policy_alt.h). */
#include "controller/policy_alt.h"

#include <math.h>

void eddy_policy_threshold_propose(const eddy_ds2_operator_t *op, const eddy_ds2_estimate_t *est,
                                   eddy_scaling_decision_t *d)
{
    uint32_t current = op->parallelism;
    double busy = est->observed_utilisation;
    d->action = EDDY_SCALING_NO_CHANGE;
    d->new_parallelism = current;
    if (!isfinite(busy)) {
        eddy_scaling_reason_append(d->reason, "threshold: busy share unknown; keeping %u", current);
        return;
    }
    eddy_scaling_reason_append(d->reason, "threshold: busy %.2f", busy);
    if (busy > EDDY_THRESHOLD_UP_BUSY && current < op->max_parallelism) {
        d->action = EDDY_SCALING_SCALE_UP;
        d->new_parallelism = current + 1;
        eddy_scaling_reason_append(d->reason, " > %.2f: one more, %u", EDDY_THRESHOLD_UP_BUSY,
                                   current + 1);
    } else if (busy < EDDY_THRESHOLD_DOWN_BUSY && current > op->min_parallelism) {
        d->action = EDDY_SCALING_SCALE_DOWN;
        d->new_parallelism = current - 1;
        eddy_scaling_reason_append(d->reason, " < %.2f: one fewer, %u", EDDY_THRESHOLD_DOWN_BUSY,
                                   current - 1);
    } else {
        eddy_scaling_reason_append(d->reason, " within [%.2f, %.2f] or at a bound: keeping %u",
                                   EDDY_THRESHOLD_DOWN_BUSY, EDDY_THRESHOLD_UP_BUSY, current);
    }
    d->wanted_parallelism = d->new_parallelism;
}
