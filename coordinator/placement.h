/* placement.h - where each instance of each stage runs: a pure function of
 * the stages' parallelism, the current placement and the usable workers.
 *
 * A fresh job (no current placement) deals its instances, stage by stage,
 * round robin over the workers in id order, carrying on where the previous
 * stage stopped: every worker gets work as soon as the job has as many
 * instances as there are workers, the counts per worker differ by at most
 * one, and a stage's instances are on distinct workers while its
 * parallelism is at most W. "Instance i on worker i mod W" for every stage left
 * workers idle: a wordcount of parallelism 1/2/2 on three workers was placed
 * 3/2/0. Otherwise every
 * instance that is still on a usable worker stays where it is (its
 * in-memory state stays put) and each new or orphaned instance goes to the
 * least loaded worker (the lowest id on ties). No I/O, no clock, no state:
 * the coordinator passes its usable workers in. */
#ifndef EDDY_COORDINATOR_PLACEMENT_H
#define EDDY_COORDINATOR_PLACEMENT_H

#include <stdint.h>

#include "common/err.h"
#include "net/proto.h"

/* next[s].worker_of is malloc'd for every stage (free with
 * eddy_placement_clear). current may be NULL, or have NULL worker_of
 * entries, for a fresh job. -1 with err when there is no worker. */
int eddy_placement_compute(uint32_t n_stages, const uint32_t *parallelism,
                           const eddy_stage_placement_t *current, const uint32_t *worker_ids,
                           uint32_t n_workers, eddy_stage_placement_t *next, eddy_err_t *err);
void eddy_placement_clear(uint32_t n_stages, eddy_stage_placement_t *placement);

#endif
