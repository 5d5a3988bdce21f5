/* loop.h - the controller as a process: the loop that reads a job's
 * metrics from its coordinator, runs the DS2 policy (controller.h) and asks
 * for the rescales it decides, recording every decision. `eddy controller`
 * and `eddy local --autoscale` run it. */
#ifndef EDDY_CONTROLLER_LOOP_H
#define EDDY_CONTROLLER_LOOP_H

#include <signal.h>
#include <stdbool.h>

#include "common/err.h"
#include "controller/policy.h"
#include "controller/pool_run.h"
#include "net/keys.h"

/* Watches jobs (a comma-separated list of ids; NULL or "": every job the
 * coordinator runs, as they come) with one policy each (pc, its job
 * ignored). Runs until *stop is set (0), or with exit_when_done until every
 * named job has ended (0); -1 with err when the policy configuration is
 * bad, 1 when it ran out of memory. coordinator may be a list; keys: NULL,
 * or client keys (net/keys.h) for a coordinator with --keys. pool: NULL, or
 * the worker pool (pool_run.h, borrowed) that grows and shrinks with the
 * jobs' decisions; its decisions are recorded next to the scaling ones. */
int eddy_controller_run(const char *coordinator, const eddy_keys_t *keys,
                        const eddy_scaling_policy_config_t *pc, const char *jobs,
                        bool exit_when_done, eddy_pool_t *pool, volatile sig_atomic_t *stop,
                        eddy_err_t *err);

#endif
