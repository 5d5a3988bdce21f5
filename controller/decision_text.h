/* decision_text.h - a scaling decision as one line for people (`eddy
 * scaling`), from the JSON the coordinator keeps (decision_json.h):
 *
 *   2026-12-03T10:15:02+01:00 wordcount/count 2 -> 4 scale_up at 65.2 s: REASON
 *   2026-12-03T10:15:12+01:00 wordcount/count 4 no_change at 75.2 s: REASON
 *
 * The time is local, ISO 8601; "at N s" is the job's time the reason's
 * times refer to (absent in decisions recorded before it was kept).
 * Below it, `eddy scaling` prints the inputs the decision was made on,
 * those that were known (rates, busy, backlog, latency, state):
 *
 *       inputs: processed 10000 rec/s of 25000 wanted, 10000 rec/s per
 *       instance when busy, busy 99%, backlog 20000, p99 850 ms, state 12.0 MB */
#ifndef EDDY_CONTROLLER_DECISION_TEXT_H
#define EDDY_CONTROLLER_DECISION_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Whether the decision changes a parallelism (or wanted to: not applied). */
bool eddy_scaling_decision_changes(const json_t *decision);
/* Writes the line (no newline) into buf, truncated to size. Returns buf. */
char *eddy_scaling_decision_text(const json_t *decision, char *buf, size_t size);
/* Writes "inputs: ..." with the decision's known inputs into buf, truncated
 * to size; returns buf, or NULL (buf empty) when none is known. */
char *eddy_scaling_decision_inputs_text(const json_t *decision, char *buf, size_t size);

#endif
