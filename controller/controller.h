/* controller.h - the autoscaling controller's loop logic, without I/O.
 *
 * This file owns the step from "the coordinator's metrics document for a job
 * at time now" to "scaling decisions": it keeps the previous snapshot, turns
 * two successive snapshots into one DS2 window per operator (deltas of the
 * cumulative records_in, records_out and busy_ns counters), hands the window
 * to the scaling policy (controller/policy.h) and returns its decisions. It
 * does no networking, reads no clock and prints nothing; the CLI
 * (cli/cmd_controller.c) polls the coordinator, posts the decisions and
 * carries out the rescales.
 *
 * Input: the JSON of request "metrics JOB" (coordinator/views.c):
 *   {"state": "running", "epoch": 3, "operators": [{"name", "parallelism",
 *    "keyed", "source", "input" (upstream name or null), "second_input" (a
 *    two-input operator's second upstream, optional), "records_in",
 *    "records_out", "busy_ns", "offered_rate" (sources), "min_parallelism",
 *    "max_parallelism", "hot_key_group" and "hot_key_share" (keyed
 *    operators, when known), "state_bytes" (keyed state, optional),
 *    "blocked_ns" (optional), "source_lag" (sources that report one, when
 *    every instance did), "latency" {"counts": [per bucket]} (optional),
 *    "instances" [{"busy_ns"}] (optional: each instance's cumulative busy
 *    time, whose busiest share of the window the flink policy reads)}, ...]}
 * with the operators in topological order and counters cumulative per task
 * since the task started (summed over the current epoch's tasks). The hot
 * key is a gauge (the senders' latest seconds), passed to the policy as it
 * is, which names the group when the share caps the useful parallelism.
 * state_bytes is a gauge too; its change over the window is the state's
 * growth rate, which the policy's state budget projects forward.
 *
 * A window is skipped (no evaluation, the new snapshot becomes the baseline)
 * when the counters cannot be compared: the first snapshot, a job that is
 * not "running" (deploying, rescaling), a changed epoch, operator set or
 * parallelism (tasks were recreated and their counters restarted), or any
 * counter that went backwards. A parallelism change the controller sees
 * is reported to the policy as a rescale of that operator (so a manual
 * `eddy rescale` starts a cooldown too), an epoch change without one as a
 * restart of the job (warm-up), and the first snapshot as the job's start.
 *
 * Mapping to DS2 (controller/ds2.h):
 *   useful time  = busy_ns delta (idle and backpressure time are excluded
 *                  by the worker's accounting)
 *   sources      the coordinator's offered_rate is in records the source
 *                reads from outside per second, while the source stage's
 *                records_out counts what its chained operators emit (e.g.
 *                words after the line splitter). DS2 wants the latter, so
 *                the offered output rate is offered_rate * (records_out delta
 *                / records_in delta). An unlimited source (offered_rate 0)
 *                or one that read nothing in the window has no known target,
 *                unless it reports a lag: then its target is what arrived
 *                plus its backlog drained within the policy's catch_up_s
 *                (controller/catch_up.h), scaled the same way (by the last
 *                known ratio when it read nothing), and the backlog and
 *                catch-up rate go to the policy for its reasons.
 *   latency      the p99 of the window's growth of each operator's latency
 *                histogram, and the share of the window its upstreams'
 *                instances were blocked sending (blocked_ns delta / (window x
 *                their parallelism)): the policy's latency objective.
 *   bounds       only keyed operators can be rescaled (the coordinator
 *                rejects the rest), so every other operator is pinned to its
 *                current parallelism; keyed ones get their own bounds
 *                narrowed to the controller's job-wide [min, max]. */
#ifndef EDDY_CONTROLLER_CONTROLLER_H
#define EDDY_CONTROLLER_CONTROLLER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "controller/policy.h"

typedef struct eddy_controller eddy_controller_t;

/* The policy config as for eddy_scaling_policy_new(). Its min_parallelism
 * and max_parallelism are applied by the controller to keyed operators only
 * (max 0 means "each operator's own maximum"). Returns NULL with err on an
 * invalid config or out of memory. */
eddy_controller_t *eddy_controller_new(const eddy_scaling_policy_config_t *config,
                                       eddy_err_t *err);
void eddy_controller_destroy(eddy_controller_t **self_p);

#define EDDY_CONTROLLER_NOTE_MAX 160

typedef struct eddy_controller_step {
    bool job_ended;       /* state is finished, failed or cancelled */
    char state[32];       /* the job's state as reported */
    bool evaluated;       /* decisions[0..count) are valid */
    char note[EDDY_CONTROLLER_NOTE_MAX]; /* why nothing was evaluated */
    size_t count;
    const eddy_scaling_decision_t *decisions; /* owned by the controller, valid
                                                 until the next observe call */
} eddy_controller_step_t;

/* Feeds one metrics document (borrowed) taken at now_ms (a monotonic clock
 * in milliseconds, strictly increasing between calls). Returns 0 with *step
 * filled, or -1 with err when the document is malformed or the policy
 * rejects the input; the snapshot then does not become the baseline. */
int eddy_controller_observe(eddy_controller_t *self, const json_t *job, int64_t now_ms,
                            eddy_controller_step_t *step, eddy_err_t *err);

/* Tells the policy that operator_name (NULL: the whole job) was rescaled at
 * now_ms, e.g. when a rescale the decisions asked for has completed, so the
 * warm-up and cooldown run from its end. */
int eddy_controller_note_rescale(eddy_controller_t *self, const char *operator_name,
                                 int64_t now_ms, eddy_err_t *err);

#endif
