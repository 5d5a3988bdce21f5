/* loop.h - the controller as a process: the loop that reads a job's
 * metrics from its coordinator, runs the DS2 policy (controller.h) and asks
 * for the rescales it decides, recording every decision. `eddy controller`
 * and `eddy local --autoscale` run it. */
#ifndef EDDY_CONTROLLER_LOOP_H
#define EDDY_CONTROLLER_LOOP_H

#include <signal.h>

#include "common/err.h"
#include "controller/policy.h"
#include "net/keys.h"

/* Runs until the job has ended (0) or *stop is set (0); -1 with err when
 * the controller cannot be made from the policy configuration, 1 when it
 * ran out of memory. */
/* keys: NULL, or client keys (net/keys.h) for a coordinator with --keys. */
int eddy_controller_run(const char *coordinator, const eddy_keys_t *keys,
                        const eddy_scaling_policy_config_t *pc,
                        volatile sig_atomic_t *stop, eddy_err_t *err);

#endif
