/* explain.h - a plan as people read it (`eddy plan`): stages with their
 * chained steps, how each stage reads its input, parallelism, keys, uids
 * and configurations; as text or as JSON. */
#ifndef EDDY_PLAN_EXPLAIN_H
#define EDDY_PLAN_EXPLAIN_H

#include <jansson.h>
#include <stdio.h>

#include "plan/plan.h"

/* NULL (err set) when the plan does not chain into stages. */
json_t *eddy_plan_explain_json(const eddy_plan_t *plan, eddy_err_t *err);
int eddy_plan_explain_text(const eddy_plan_t *plan, FILE *out, eddy_err_t *err);

#endif
