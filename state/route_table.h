/* route_table.h - a keyed exchange's versioned routing: key group -> instance.
 *
 * A sender routes each record of a keyed (HASH) exchange by its key group's
 * entry here. A table starts at version 0 as the uniform assignment of
 * state/keygroup.h at the receiving stage's parallelism; a fluid migration
 * (docs/architecture.md, "Fluid key-group migration") changes it one step at
 * a time: each step moves a few key groups to a new owner and raises the
 * version, so a sender and its receivers can tell which routing a handoff
 * marker and the records around it follow.
 *
 * A migration plan lists the key groups whose owner differs between two
 * tables, in steps of at most N groups that each go from one old owner to one
 * new owner (Megaphone's fine-grained steps). Pure functions, no I/O. */
#ifndef EDDY_STATE_ROUTE_TABLE_H
#define EDDY_STATE_ROUTE_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

typedef struct eddy_route_table {
    uint32_t n_groups;     /* K: the job's max parallelism */
    uint32_t parallelism;  /* receiving instances: owners are < this */
    uint64_t version;      /* 0: the uniform assignment; raised by each step */
    uint16_t *owner;       /* [n_groups] */
} eddy_route_table_t;

/* The uniform assignment of k groups to p instances at version 0.
 * 1 <= p <= k <= EDDY_MAX_KEY_GROUPS; -1 with err otherwise or out of memory. */
int eddy_route_table_init(eddy_route_table_t *self, uint32_t k, uint32_t p, eddy_err_t *err);
/* The same, with key groups owned as at parallelism as_p (1 <= as_p <= p):
 * instances as_p.. own none (a fluid rescale's new instances). */
int eddy_route_table_init_as(eddy_route_table_t *self, uint32_t k, uint32_t p, uint32_t as_p,
                             eddy_err_t *err);
void eddy_route_table_free(eddy_route_table_t *self);

static inline uint32_t eddy_route_table_owner(const eddy_route_table_t *self, uint32_t kg)
{
    return self->owner[kg];
}

/* One step: key groups kgs[0..n) go to instance `to` and the table becomes
 * `version`. Refused (-1, err, the table unchanged) when version is not
 * above the table's, a key group is out of range or repeated, or `to` is
 * not below the parallelism. */
int eddy_route_table_apply(eddy_route_table_t *self, uint64_t version, const uint32_t *kgs,
                           uint32_t n, uint32_t to, eddy_err_t *err);

/* Whether every key group's owner is its uniform owner at the parallelism
 * (what a sudden rescale's deploy and a restore start from). */
bool eddy_route_table_uniform(const eddy_route_table_t *self);

/* One step of a migration plan: groups kgs[first .. first+n) of the plan,
 * all owned by `from` before and by `to` after. */
typedef struct eddy_route_step {
    uint32_t from, to;
    uint32_t first, n;
} eddy_route_step_t;

typedef struct eddy_route_plan {
    uint32_t n_groups;          /* key groups that move */
    uint32_t *kgs;              /* [n_groups], grouped by step */
    uint32_t n_steps;
    eddy_route_step_t *steps;   /* [n_steps] */
} eddy_route_plan_t;

/* The plan that takes `from` to the uniform assignment at parallelism p
 * (same k): groups that change owner, in steps of at most step_groups (>= 1)
 * each with one old and one new owner, in key group order. An empty plan
 * when nothing moves. -1 with err on bad arguments or out of memory. */
int eddy_route_plan_to(const eddy_route_table_t *from, uint32_t p, uint32_t step_groups,
                       eddy_route_plan_t *plan, eddy_err_t *err);
/* The same towards any table `to` of the same size and parallelism (a
 * migration: one instance's groups to another). */
int eddy_route_plan_between(const eddy_route_table_t *from, const eddy_route_table_t *to,
                            uint32_t step_groups, eddy_route_plan_t *plan, eddy_err_t *err);
void eddy_route_plan_free(eddy_route_plan_t *plan);

#endif
