/* builder.h - the stream builder's other half (api/stream.h): making a
 * builder for a plan and taking the plan out of it. Not for job authors. */
#ifndef EDDY_PLAN_BUILDER_H
#define EDDY_PLAN_BUILDER_H

#include "api/stream.h"
#include "plan/plan.h"

eddy_job_builder_t *eddy_job_builder_new(const char *job);
void eddy_job_builder_destroy(eddy_job_builder_t **self_p);
/* The recorded plan, validated; the builder gives it up (NULL, err set, on
 * the builder's first error or a validation failure). */
eddy_plan_t *eddy_job_builder_finish(eddy_job_builder_t *self, eddy_err_t *err);

#endif
