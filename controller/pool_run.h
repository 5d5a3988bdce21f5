/* pool_run.h - the worker pool inside the controller's loop (loop.c): it
 * keeps what each watched job's latest decisions need in slots, reads the
 * workers from the coordinator ("status"), runs the pool policy (pool.h)
 * and carries out its decisions on the backend, logging one line each.
 *
 * A scale-up that needs workers still starting is held back ("deferred")
 * so that its new instances are placed on the new workers rather than
 * piled onto the old ones; the scaling policy orders it again after its
 * cooldown, when the workers have registered. */
#ifndef EDDY_CONTROLLER_POOL_RUN_H
#define EDDY_CONTROLLER_POOL_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "controller/policy.h"
#include "controller/pool.h"
#include "net/keys.h"

typedef struct eddy_pool eddy_pool_t;

/* Takes the backend (it is destroyed with the pool: its workers stop).
 * prefix names the workers it starts (PREFIX-1, PREFIX-2, ...). */
eddy_pool_t *eddy_pool_new(const eddy_pool_config_t *config, eddy_pool_backend_t *backend,
                           const char *prefix, eddy_err_t *err);
void eddy_pool_destroy(eddy_pool_t **self_p);

/* A job's latest decisions (decisions[0..count)): its demand becomes the
 * largest wanted_parallelism among them; decisions that measured nothing
 * (warm-up) leave the previous demand. */
void eddy_pool_note_decisions(eddy_pool_t *self, const char *job,
                              const eddy_scaling_decision_t *decisions, size_t count);
/* The job ended: it needs nothing any more. */
void eddy_pool_forget_job(eddy_pool_t *self, const char *job);

/* One round: asks the coordinator for its workers, decides, carries out.
 * Returns the decision's log entry (a new reference) when it changed
 * something, NULL otherwise (and when the coordinator cannot be asked:
 * nothing is decided blind). */
json_t *eddy_pool_step(eddy_pool_t *self, const char *coordinator, const eddy_keys_t *keys);

/* True when a scale-up to new_parallelism instances needs more slots than
 * the live workers offer while the pool is still starting workers: then
 * it should wait for them. */
bool eddy_pool_should_wait(const eddy_pool_t *self, uint32_t new_parallelism);
/* Workers the pool started that have not registered yet. */
uint32_t eddy_pool_starting(const eddy_pool_t *self);

#endif
