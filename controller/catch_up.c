/* catch_up.c - a source's target rate from its lag (see catch_up.h). */
#include "controller/catch_up.h"

#include <math.h>
#include <stdbool.h>

eddy_catch_up_t eddy_catch_up_target(const eddy_catch_up_input_t *in)
{
    eddy_catch_up_t out = {NAN, NAN, 0.0, NAN};
    bool has_offered = in->offered_rate > 0.0 && isfinite(in->offered_rate);
    if (!(in->lag_now >= 0.0)) { /* no lag: the configured rate, if any */
        if (has_offered)
            out.arrival_rate = out.target_rate = in->offered_rate;
        return out;
    }
    out.backlog = in->lag_now;
    if (has_offered) {
        out.arrival_rate = in->offered_rate;
    } else if (in->window_s > 0.0 && in->read >= 0.0) {
        double arrival = in->read / in->window_s;
        if (in->lag_before >= 0.0)
            arrival += (in->lag_now - in->lag_before) / in->window_s;
        out.arrival_rate = arrival > 0.0 ? arrival : 0.0;
    }
    if (in->catch_up_s > 0.0)
        out.catch_up_rate = in->lag_now / in->catch_up_s;
    out.target_rate = out.arrival_rate + out.catch_up_rate; /* NaN stays NaN */
    return out;
}
