/* ds2.c - the DS2 model: validation, per-operator rates, the topological
 * walk and the parallelism formula (see ds2.h for the model itself). */
#include "controller/ds2.h"

#include <math.h>

/* Relative slack for floating-point noise before rounding up. */
#define CEIL_TOLERANCE 1e-9

const char *eddy_ds2_status_name(eddy_ds2_status_t status)
{
    switch (status) {
    case EDDY_DS2_OK:
        return "ok";
    case EDDY_DS2_NO_MEASUREMENT:
        return "no_measurement";
    case EDDY_DS2_NO_TARGET:
        return "no_target";
    }
    return "unknown";
}

uint32_t eddy_ds2_parallelism_for(double target_input_rate, double true_rate_per_instance,
                                  double utilisation, uint32_t min_parallelism,
                                  uint32_t max_parallelism)
{
    double capacity = true_rate_per_instance * utilisation;
    double exact = target_input_rate / capacity;
    if (isnan(exact) || exact <= 0.0)
        return min_parallelism;
    if (exact >= (double)max_parallelism) /* also catches +inf */
        return max_parallelism;
    double rounded = ceil(exact * (1.0 - CEIL_TOLERANCE));
    uint32_t parallelism = rounded < 1.0 ? 1u : (uint32_t)rounded;
    if (parallelism < min_parallelism)
        return min_parallelism;
    if (parallelism > max_parallelism)
        return max_parallelism;
    return parallelism;
}

static int validate_operator(const eddy_ds2_operator_t *op, size_t index, eddy_err_t *err)
{
    if (!op->name)
        return eddy_err_set(err, "ds2: operator %zu has no name", index);
    if (op->parallelism < 1)
        return eddy_err_set(err, "ds2: operator %s: parallelism must be >= 1", op->name);
    if (op->min_parallelism < 1 || op->max_parallelism < op->min_parallelism)
        return eddy_err_set(err, "ds2: operator %s: bounds [%u, %u] need 1 <= min <= max",
                            op->name, op->min_parallelism, op->max_parallelism);
    if (op->upstream_count > 0 && !op->upstreams)
        return eddy_err_set(err, "ds2: operator %s: %zu upstreams but no upstream array",
                            op->name, op->upstream_count);
    for (size_t u = 0; u < op->upstream_count; u++) {
        if (op->upstreams[u] >= index)
            return eddy_err_set(err,
                                "ds2: operator %s (index %zu) lists upstream %zu: operators "
                                "must be in topological order",
                                op->name, index, op->upstreams[u]);
    }
    double offered = op->metrics.offered_rate;
    if (op->upstream_count == 0 && !isnan(offered) && (offered < 0.0 || isinf(offered)))
        return eddy_err_set(err, "ds2: source %s: offered rate %g must be >= 0 and finite",
                            op->name, offered);
    return 0;
}

/* Fills the rates that depend on this operator's own measurements only. */
static void measure_operator(const eddy_ds2_operator_t *op, eddy_ds2_estimate_t *est)
{
    const eddy_ds2_metrics_t *m = &op->metrics;
    int is_source = op->upstream_count == 0;
    uint64_t processed = is_source ? m->records_out : m->records_in;
    double useful_s = (double)m->useful_ns / 1e9;
    double window_s = (double)m->window_ns / 1e9;

    est->true_rate_per_instance = NAN;
    est->true_output_rate_per_instance = NAN;
    if (m->useful_ns > 0 && processed > 0) {
        est->true_rate_per_instance = (double)processed / useful_s;
        est->true_output_rate_per_instance = (double)m->records_out / useful_s;
    }
    /* Selectivity needs counts only, so it is known even without useful time. */
    if (is_source)
        est->selectivity = 1.0;
    else
        est->selectivity = processed > 0 ? (double)m->records_out / (double)processed : NAN;

    est->observed_input_rate = m->window_ns > 0 ? (double)processed / window_s : NAN;
    est->observed_utilisation =
        m->window_ns > 0 ? useful_s / (window_s * (double)op->parallelism) : NAN;
}

static double target_input_rate_of(const eddy_ds2_operator_t *op,
                                   const eddy_ds2_estimate_t *estimates)
{
    if (op->upstream_count == 0)
        return op->metrics.offered_rate; /* NaN when unknown */
    double sum = 0.0;
    for (size_t u = 0; u < op->upstream_count; u++)
        sum += estimates[op->upstreams[u]].target_output_rate; /* NaN propagates */
    return sum;
}

int eddy_ds2_estimate(const eddy_ds2_operator_t *operators, size_t count,
                      double target_utilisation, eddy_ds2_estimate_t *estimates,
                      eddy_err_t *err)
{
    if (count > 0 && (!operators || !estimates))
        return eddy_err_set(err, "ds2: %zu operators but no operator or estimate array", count);
    if (!(target_utilisation > 0.0 && target_utilisation <= 1.0))
        return eddy_err_set(err, "ds2: target utilisation %g must be in (0, 1]",
                            target_utilisation);
    for (size_t i = 0; i < count; i++) {
        if (validate_operator(&operators[i], i, err) < 0)
            return -1;
    }

    for (size_t i = 0; i < count; i++) {
        const eddy_ds2_operator_t *op = &operators[i];
        eddy_ds2_estimate_t *est = &estimates[i];
        measure_operator(op, est);
        est->target_input_rate = target_input_rate_of(op, estimates);
        est->target_output_rate = est->target_input_rate * est->selectivity;
        est->exact_parallelism = NAN;
        est->optimal_parallelism = op->parallelism;

        if (isnan(est->true_rate_per_instance))
            est->status = EDDY_DS2_NO_MEASUREMENT;
        else if (isnan(est->target_input_rate))
            est->status = EDDY_DS2_NO_TARGET;
        else
            est->status = EDDY_DS2_OK;
        if (est->status != EDDY_DS2_OK)
            continue;

        est->exact_parallelism =
            est->target_input_rate / (est->true_rate_per_instance * target_utilisation);
        est->optimal_parallelism = eddy_ds2_parallelism_for(
            est->target_input_rate, est->true_rate_per_instance, target_utilisation,
            op->min_parallelism, op->max_parallelism);
    }
    return 0;
}
