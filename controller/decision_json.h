/* decision_json.h - scaling decisions as JSON, for the metadata store and
 * the HTTP API.
 *
 * This file owns the wire form of eddy_scaling_decision_t (policy.h):
 *   {"time_ms": 1700000000000, "job": "wordcount", "operator": "count",
 *    "old_parallelism": 1, "new_parallelism": 4, "action": "scale_up",
 *    "applied": true, "reason": "target 25000 rec/s / ...",
 *    "rates": {"target_input_rate": 25000, "true_rate_per_instance": 10000,
 *              "observed_input_rate": 10000, "selectivity": 1,
 *              "utilisation": 1, "target_utilisation": 0.8,
 *              "projected_utilisation": 0.625, "backlog": 20000,
 *              "latency_p99_ms": 850}}
 * An unknown (NaN) rate is written as null, since JSON has no NaN; the
 * optional inputs "backlog" (records behind at the sources upstream),
 * "latency_p99_ms" (the job's p99 in the window, under a latency objective)
 * and "state_bytes" (the operator's keyed state) are left out instead, and
 * read as NaN when absent (decisions stored before they existed). The
 * optional "effect" reports an earlier applied rescale of the operator once
 * it settled: {"decided_ms", "from", "to" (integers), "predicted_rate",
 * "observed_rate", "predicted_utilisation", "observed_utilisation"}. Decoding
 * checks every key's presence, type and range, and that the action agrees
 * with the two parallelisms, so a corrupt store entry is an error, not a
 * decision. Besides these keys a decision may carry only what its writers
 * add: "job_time_ms" (the controller: ms since the job started), and for
 * the worker pool's decisions "kind": "pool" (its parallelisms count live
 * workers and may be 0), "target_workers" and "worker"; any other key, at
 * the top or in "rates", is refused. "policy" (optional: "eddy", "ds2",
 * "threshold" or "flink", policy.h) names the rules that made the decision. Strings are bounded (job and operator
 * EDDY_SCALING_NAME_MAX, reason EDDY_SCALING_REASON_MAX, worker 128 bytes,
 * all with the NUL), integers must be JSON integers. */
#ifndef EDDY_CONTROLLER_DECISION_JSON_H
#define EDDY_CONTROLLER_DECISION_JSON_H

#include <jansson.h>

#include "common/err.h"
#include "controller/policy.h"

/* Returns a new reference owned by the caller, or NULL on error. */
json_t *eddy_scaling_decision_to_json(const eddy_scaling_decision_t *decision, eddy_err_t *err);

/* Fills *decision from obj (borrowed). Returns 0, or -1 naming the bad key. */
int eddy_scaling_decision_from_json(const json_t *obj, eddy_scaling_decision_t *decision,
                                    eddy_err_t *err);

/* The schema check alone (the coordinator's, before it stores a decision
 * from a `decision` request or loads one from the store): 0, or -1 naming
 * what is wrong. */
int eddy_scaling_decision_check_json(const json_t *obj, eddy_err_t *err);

#endif
