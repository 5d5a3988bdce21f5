/* task_migrate.c - key-group state in and out of a task (see task_internal.h).
 *
 * Owns the serialised form of one key group of a task (its watermark, the
 * keyed values and every chained operator's own state of the group, in
 * state/group_envelope.h), a task's rewiring for a new placement (dropping
 * the groups it no longer owns) and the loading of groups it now owns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/group_envelope.h"
#include "state/keygroup.h"
#include "runtime/task_internal.h"

_Static_assert(EDDY_MAX_CHAIN <= EDDY_GROUP_MAX_OPS, "a key group snapshot holds every chained operator");

/* One key group's snapshot: the task's watermark, the per-key values and
 * each chained operator's own state of the group (state/group_envelope.h). */
int task_write_group(eddy_task_t *t, uint32_t kg, char **out, size_t *len, eddy_err_t *err)
{
    eddy_group_envelope_t env = {.watermark = t->watermark, .n_ops = t->def->n_ops};
    char *keyed = NULL;
    char *parts[EDDY_GROUP_MAX_OPS] = {0};
    int rc = -1;
    if (eddy_keyed_state_write_group(t->state, kg, &keyed, &env.keyed_len, err) < 0)
        goto out;
    env.keyed = keyed;
    for (uint32_t i = 0; i < t->def->n_ops; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (ops->write_group && ops->write_group(t->ops[i], kg, &parts[i], &env.op_lens[i], err) < 0) {
            eddy_err_wrap(err, "%s[%u]: %s: key group %u", t->def->name, t->instance, ops->kind, kg);
            goto out;
        }
        env.ops[i] = parts[i];
    }
    *out = eddy_group_envelope_encode(&env, len);
    rc = *out ? 0 : eddy_err_set(err, "out of memory");
out:
    free(keyed);
    for (uint32_t i = 0; i < EDDY_GROUP_MAX_OPS; i++)
        free(parts[i]);
    return rc;
}

/* Serialises the owned key groups into a unit for the snapshot writer; the
 * barrier can go on as soon as this returns, durability follows. */
eddy_snapshot_unit_t *task_serialise_state(eddy_task_t *t, uint64_t checkpoint, bool migration,
                                           eddy_err_t *err)
{
    eddy_kg_range_t r = t->ctx.key_groups;
    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(r.end - r.start);
    if (!u) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(u->root, sizeof u->root, "%s", eddy_snapshot_store_root(t->env->store));
    snprintf(u->job, sizeof u->job, "%s", t->job_id);
    snprintf(u->op, sizeof u->op, "%s", t->def->name);
    u->checkpoint = checkpoint;
    u->durable = !migration;
    bool moving = false; /* to another worker: every group it owns goes along */
    for (uint32_t i = 0; migration && i < t->env->n_migrate_moving; i++)
        moving |= t->env->migrate_moving[i] == t->instance;
    for (uint32_t kg = r.start; kg < r.end; kg++) {
        /* A migration snapshot carries only the groups that change owner. */
        if (migration && !moving &&
            eddy_kg_owner(kg, t->env->migrate_parallelism, t->graph->max_parallelism) == t->instance)
            continue;
        uint32_t i = u->n_groups;
        if (task_write_group(t, kg, &u->data[i], &u->lens[i], err) < 0) {
            eddy_snapshot_unit_free(u);
            return NULL;
        }
        u->groups[i] = kg;
        u->n_groups++;
    }
    return u;
}

int eddy_task_rewire(eddy_task_t *self, uint32_t epoch, eddy_placement_view_t placement,
                     eddy_err_t *err)
{
    task_free_inputs(self);
    task_free_groups(self);
    self->epoch = epoch;
    self->parallelism = placement.stages[self->stage].parallelism;
    self->ctx.parallelism = self->parallelism;
    if (self->state) {
        eddy_kg_range_t old = self->ctx.key_groups;
        eddy_kg_range_t now = eddy_kg_range_for(self->instance, self->parallelism,
                                                self->graph->max_parallelism);
        for (uint32_t kg = old.start; kg < old.end; kg++)
            if (!eddy_kg_range_contains(now, kg)) {
                eddy_keyed_state_drop_group(self->state, kg);
                for (uint32_t i = 0; i < self->def->n_ops; i++)
                    if (self->def->ops[i].ops->drop_group)
                        self->def->ops[i].ops->drop_group(self->ops[i], kg);
                self->held[kg] = 0;
            }
        self->ctx.key_groups = now;
    }
    if (task_build_inputs(self, placement, err) < 0 || task_build_groups(self, placement, err) < 0)
        return -1;
    return 0;
}

static int read_group(eddy_task_t *t, uint32_t kg, const char *data, size_t len, int64_t *wm,
                      eddy_err_t *err)
{
    eddy_group_envelope_t env;
    if (eddy_group_envelope_decode(data, len, &env, err) < 0)
        return -1;
    if (env.n_ops != 0 && env.n_ops != t->def->n_ops)
        return eddy_err_set(err, "the snapshot holds state of %u operators, the stage chains %u",
                            env.n_ops, t->def->n_ops);
    if (eddy_keyed_state_read_group(t->state, kg, env.keyed, env.keyed_len, err) < 0)
        return -1;
    for (uint32_t i = 0; i < t->def->n_ops; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (!ops->read_group)
            continue;
        if (ops->read_group(t->ops[i], kg, i < env.n_ops ? env.ops[i] : NULL,
                            i < env.n_ops ? env.op_lens[i] : 0, err) < 0)
            return eddy_err_wrap(err, "%s", ops->kind);
    }
    *wm = env.watermark;
    return 0;
}

int eddy_task_restore_groups(eddy_task_t *self, uint64_t checkpoint, uint64_t *bytes,
                             uint64_t *groups, eddy_err_t *err)
{
    if (!self->state)
        return 0;
    int64_t floor = EDDY_WATERMARK_MIN;
    bool floor_set = false;
    for (uint32_t kg = self->ctx.key_groups.start; kg < self->ctx.key_groups.end; kg++) {
        if (self->held[kg])
            continue;
        if (!checkpoint)
            return eddy_err_set(err, "%s[%u]: key group %u has no checkpoint to load from",
                                self->def->name, self->instance, kg);
        char *data;
        size_t len;
        if (eddy_snapshot_store_read_group(self->env->store, self->job_id, checkpoint,
                                           self->def->name, kg, &data, &len, err) < 0)
            return -1;
        int64_t group_wm = EDDY_GROUP_NO_WATERMARK;
        int rc = read_group(self, kg, data, len, &group_wm, err);
        free(data);
        if (rc < 0)
            return eddy_err_wrap(err, "%s[%u]: key group %u of checkpoint %llu", self->def->name,
                                 self->instance, kg, (unsigned long long)checkpoint);
        if (group_wm != EDDY_GROUP_NO_WATERMARK && (!floor_set || group_wm < floor)) {
            floor = group_wm;
            floor_set = true;
        }
        self->held[kg] = 1;
        *bytes += len;
        *groups += 1;
    }
    /* The restored groups' clock: the lowest watermark among them. */
    if (floor_set && floor > self->watermark) {
        self->watermark = floor;
        if (self->def->input >= 0 && task_build_valve(self, err) < 0)
            return -1;
    }
    return 0;
}
