/* route_table.c - versioned key group -> instance routing and migration
 * plans (see route_table.h). */
#include "state/route_table.h"

#include <stdlib.h>
#include <string.h>

#include "state/keygroup.h"

int eddy_route_table_init(eddy_route_table_t *self, uint32_t k, uint32_t p, eddy_err_t *err)
{
    memset(self, 0, sizeof *self);
    if (k == 0 || k > EDDY_MAX_KEY_GROUPS || p == 0 || p > k)
        return eddy_err_set(err, "routing table of %u key groups over %u instances", k, p);
    self->owner = malloc(k * sizeof *self->owner);
    if (!self->owner)
        return eddy_err_set(err, "out of memory");
    self->n_groups = k;
    self->parallelism = p;
    for (uint32_t kg = 0; kg < k; kg++)
        self->owner[kg] = (uint16_t)eddy_kg_owner(kg, p, k);
    return 0;
}

int eddy_route_table_init_as(eddy_route_table_t *self, uint32_t k, uint32_t p, uint32_t as_p,
                             eddy_err_t *err)
{
    if (eddy_route_table_init(self, k, p, err) < 0)
        return -1;
    if (as_p == 0 || as_p > p) {
        eddy_route_table_free(self);
        return eddy_err_set(err, "routing as at parallelism %u over %u instances", as_p, p);
    }
    for (uint32_t kg = 0; kg < k; kg++)
        self->owner[kg] = (uint16_t)eddy_kg_owner(kg, as_p, k);
    return 0;
}

void eddy_route_table_free(eddy_route_table_t *self)
{
    free(self->owner);
    memset(self, 0, sizeof *self);
}

int eddy_route_table_apply(eddy_route_table_t *self, uint64_t version, const uint32_t *kgs,
                           uint32_t n, uint32_t to, eddy_err_t *err)
{
    if (version <= self->version)
        return eddy_err_set(err, "routing version %llu is not newer than %llu",
                            (unsigned long long)version, (unsigned long long)self->version);
    if (to >= self->parallelism)
        return eddy_err_set(err, "routing to instance %u of %u", to, self->parallelism);
    for (uint32_t i = 0; i < n; i++) {
        if (kgs[i] >= self->n_groups)
            return eddy_err_set(err, "key group %u of %u", kgs[i], self->n_groups);
        for (uint32_t j = 0; j < i; j++)
            if (kgs[j] == kgs[i])
                return eddy_err_set(err, "key group %u twice in one step", kgs[i]);
    }
    for (uint32_t i = 0; i < n; i++)
        self->owner[kgs[i]] = (uint16_t)to;
    self->version = version;
    return 0;
}

bool eddy_route_table_uniform(const eddy_route_table_t *self)
{
    for (uint32_t kg = 0; kg < self->n_groups; kg++)
        if (self->owner[kg] != eddy_kg_owner(kg, self->parallelism, self->n_groups))
            return false;
    return true;
}

void eddy_route_plan_free(eddy_route_plan_t *plan)
{
    free(plan->kgs);
    free(plan->steps);
    memset(plan, 0, sizeof *plan);
}

/* The plan from `from` to `to` (NULL: the uniform assignment at p). */
static int plan(const eddy_route_table_t *from, const eddy_route_table_t *to, uint32_t p,
                uint32_t step_groups, eddy_route_plan_t *plan, eddy_err_t *err)
{
    memset(plan, 0, sizeof *plan);
    uint32_t k = from->n_groups;
    if (p == 0 || p > k || step_groups == 0)
        return eddy_err_set(err, "migration plan to %u instances in steps of %u key groups", p,
                            step_groups);
    plan->kgs = malloc(k * sizeof *plan->kgs);
    plan->steps = malloc(k * sizeof *plan->steps); /* at most one step per group */
    if (!plan->kgs || !plan->steps) {
        eddy_route_plan_free(plan);
        return eddy_err_set(err, "out of memory");
    }
    /* A step collects groups of one (from, to) pair in key group order; a
     * contiguous range of moved groups shares its pair, so steps are runs. */
    eddy_route_step_t *cur = NULL;
    for (uint32_t kg = 0; kg < k; kg++) {
        uint32_t a = from->owner[kg], b = to ? to->owner[kg] : eddy_kg_owner(kg, p, k);
        if (a == b)
            continue;
        if (!cur || cur->from != a || cur->to != b || cur->n == step_groups ||
            cur->first + cur->n != plan->n_groups) {
            cur = &plan->steps[plan->n_steps++];
            *cur = (eddy_route_step_t){.from = a, .to = b, .first = plan->n_groups, .n = 0};
        }
        plan->kgs[plan->n_groups++] = kg;
        cur->n++;
    }
    return 0;
}

int eddy_route_plan_to(const eddy_route_table_t *from, uint32_t p, uint32_t step_groups,
                       eddy_route_plan_t *out, eddy_err_t *err)
{
    return plan(from, NULL, p, step_groups, out, err);
}

int eddy_route_plan_between(const eddy_route_table_t *from, const eddy_route_table_t *to,
                            uint32_t step_groups, eddy_route_plan_t *out, eddy_err_t *err)
{
    if (to->n_groups != from->n_groups || to->parallelism != from->parallelism) {
        memset(out, 0, sizeof *out);
        return eddy_err_set(err, "migration plan between tables of %u and %u key groups",
                            from->n_groups, to->n_groups);
    }
    return plan(from, to, from->parallelism, step_groups, out, err);
}
