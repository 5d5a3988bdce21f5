/* task_migrate.c - key-group state in and out of a task (see task_internal.h).
 *
 * Owns the serialised form of one key group of a task (its watermark, the
 * keyed values and every chained operator's own state of the group, in
 * state/group_envelope.h), a task's rewiring for a new placement (dropping
 * the groups it no longer owns) and the loading of groups it now owns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

#include "net/partial.h"
#include "state/group_envelope.h"
#include "state/keyed_state.h"
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
        env.kinds[i] = ops->kind;
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
    /* The groups held here: the instance's range, or after fluid steps
     * whatever the steps left it (task_migrate.c). */
    uint32_t k = t->graph->max_parallelism, n = 0;
    for (uint32_t kg = 0; kg < k; kg++)
        n += t->held[kg];
    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(n);
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
    for (uint32_t kg = 0; kg < k; kg++) {
        if (!t->held[kg])
            continue;
        /* A migration snapshot carries only the groups that change owner;
         * a fluid one's (migrate_parallelism 0) none: they move in steps. */
        if (migration && !moving &&
            (!t->env->migrate_parallelism ||
             eddy_kg_owner(kg, t->env->migrate_parallelism, t->graph->max_parallelism) == t->instance))
            continue;
        /* An incremental checkpoint refers to unchanged groups (task_chain.c). */
        if (!migration && !task_chain_writes(t, kg))
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

/* ---- asynchronous snapshots ----------------------------------------------
 * At a barrier the task freezes its keyed state (a copy-on-write view,
 * state/keyed_state.h: O(key groups), not O(keys)) and hands the view to the
 * snapshot writer, whose thread serialises each group from it while records
 * keep flowing. A chained operator with state of its own (window contents,
 * timers) that has snapshot_view (api/operator.h) is frozen the same way
 * and serialised by that thread too; one without has its write_group bytes
 * taken at the barrier, as in the synchronous path (EDDY_SNAPSHOT_MODE=keyed
 * does that for every operator, for comparison). The views are the unit's:
 * released by eddy_snapshot_unit_free on the worker's thread, after the
 * writer thread handed the unit back. */

typedef struct task_view {
    eddy_keyed_state_view_t *keyed;
    void *op_views[EDDY_GROUP_MAX_OPS]; /* snapshot_view's, NULL: bytes in parts */
    void (*op_release[EDDY_GROUP_MAX_OPS])(void *view);
    int (*op_write[EDDY_GROUP_MAX_OPS])(void *view, uint32_t kg, char **out, size_t *len,
                                        eddy_err_t *err);
    int64_t watermark;
    uint32_t n_ops;
    uint32_t n_groups;
    char **parts;   /* [n_groups * n_ops] operator bytes, by unit group index */
    size_t *lens;
    const uint32_t *groups; /* the unit's group ids (for the index) */
    const char *kinds[EDDY_GROUP_MAX_OPS]; /* the operators' kinds (static strings) */
} task_view_t;

static void view_release(void *arg)
{
    task_view_t *v = arg;
    if (!v)
        return;
    eddy_keyed_state_view_destroy(&v->keyed);
    for (uint32_t i = 0; i < EDDY_GROUP_MAX_OPS; i++)
        if (v->op_views[i])
            v->op_release[i](v->op_views[i]);
    for (size_t i = 0; v->parts && i < (size_t)v->n_groups * v->n_ops; i++)
        free(v->parts[i]);
    free(v->parts);
    free(v->lens);
    free(v);
}

/* Writer thread: group kg's envelope, the same bytes task_write_group gave
 * at the barrier. */
static int view_serialise(void *arg, uint32_t kg, char **out, size_t *len, eddy_err_t *err)
{
    task_view_t *v = arg;
    uint32_t at = 0;
    while (at < v->n_groups && v->groups[at] != kg)
        at++;
    if (at == v->n_groups)
        return eddy_err_set(err, "key group %u is not in the snapshot's view", kg);
    eddy_group_envelope_t env = {.watermark = v->watermark, .n_ops = v->n_ops};
    char *keyed = NULL;
    if (eddy_keyed_state_view_write_group(v->keyed, kg, &keyed, &env.keyed_len, err) < 0)
        return -1;
    env.keyed = keyed;
    char *taken[EDDY_GROUP_MAX_OPS] = {0};
    int rc = 0;
    for (uint32_t i = 0; i < v->n_ops; i++) {
        size_t cell = (size_t)at * v->n_ops + i;
        if (v->op_views[i] && rc == 0) {
            rc = v->op_write[i](v->op_views[i], kg, &taken[i], &env.op_lens[i], err);
            env.ops[i] = taken[i];
        } else {
            env.ops[i] = v->parts[cell];
            env.op_lens[i] = v->lens[cell];
        }
        env.kinds[i] = v->kinds[i];
    }
    if (rc == 0) {
        *out = eddy_group_envelope_encode(&env, len);
        rc = *out ? 0 : eddy_err_set(err, "out of memory");
    }
    free(keyed);
    for (uint32_t i = 0; i < EDDY_GROUP_MAX_OPS; i++)
        free(taken[i]);
    return rc;
}

/* Freezes each chained operator that can (its snapshot_view) over the
 * unit's groups; the others' bytes are taken by the caller. */
static int view_operators(eddy_task_t *t, task_view_t *v, const eddy_snapshot_unit_t *u,
                          eddy_err_t *err)
{
    if (t->env->snapshot_ops_sync)
        return 0;
    for (uint32_t i = 0; i < v->n_ops && i < EDDY_GROUP_MAX_OPS; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (!ops->write_group || !ops->snapshot_view || !ops->view_write_group ||
            !ops->view_release)
            continue;
        v->op_views[i] = ops->snapshot_view(t->ops[i], u->groups, u->n_groups, err);
        if (!v->op_views[i])
            return eddy_err_wrap(err, "%s[%u]: %s", t->def->name, t->instance, ops->kind);
        v->op_release[i] = ops->view_release;
        v->op_write[i] = ops->view_write_group;
    }
    return 0;
}

eddy_snapshot_unit_t *task_view_state(eddy_task_t *t, uint64_t checkpoint, eddy_err_t *err)
{
    uint32_t k = t->graph->max_parallelism, n = 0, n_ops = t->def->n_ops;
    for (uint32_t kg = 0; kg < k; kg++)
        n += t->held[kg];
    eddy_snapshot_unit_t *u = eddy_snapshot_unit_new(n);
    task_view_t *v = u ? calloc(1, sizeof *v) : NULL;
    size_t cells = (size_t)(n ? n : 1) * (n_ops ? n_ops : 1);
    if (v) {
        v->parts = calloc(cells, sizeof *v->parts);
        v->lens = calloc(cells, sizeof *v->lens);
        v->keyed = eddy_keyed_state_view_new(t->state);
    }
    if (!v || !v->parts || !v->lens || !v->keyed) {
        view_release(v);
        eddy_snapshot_unit_free(u);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    v->watermark = t->watermark;
    v->n_ops = n_ops;
    for (uint32_t i = 0; i < n_ops && i < EDDY_GROUP_MAX_OPS; i++)
        v->kinds[i] = t->def->ops[i].ops->kind;
    v->groups = u->groups;
    u->view = v;
    u->serialise = view_serialise;
    u->release = view_release;
    snprintf(u->root, sizeof u->root, "%s", eddy_snapshot_store_root(t->env->store));
    snprintf(u->job, sizeof u->job, "%s", t->job_id);
    snprintf(u->op, sizeof u->op, "%s", t->def->name);
    u->checkpoint = checkpoint;
    u->durable = true;
    for (uint32_t kg = 0; kg < k; kg++) {
        if (!t->held[kg] || !task_chain_writes(t, kg))
            continue;
        u->groups[u->n_groups++] = kg;
    }
    v->n_groups = u->n_groups;
    if (view_operators(t, v, u, err) < 0) {
        eddy_snapshot_unit_free(u);
        return NULL;
    }
    for (uint32_t at = 0; at < u->n_groups; at++) {
        uint32_t kg = u->groups[at];
        for (uint32_t i = 0; i < n_ops; i++) {
            const eddy_operator_ops_t *ops = t->def->ops[i].ops;
            size_t cell = (size_t)at * n_ops + i;
            if (ops->write_group && !v->op_views[i] &&
                ops->write_group(t->ops[i], kg, &v->parts[cell], &v->lens[cell], err) < 0) {
                eddy_err_wrap(err, "%s[%u]: %s: key group %u", t->def->name, t->instance,
                              ops->kind, kg);
                eddy_snapshot_unit_free(u);
                return NULL;
            }
        }
    }
    return u;
}

void eddy_task_renumber(eddy_task_t *self, uint32_t instance)
{
    self->instance = instance;
    self->ctx.instance = instance;
    for (uint32_t kg = 0; self->chain && kg < self->graph->max_parallelism; kg++)
        eddy_snapshot_chain_forget(self->chain, kg);
}

int eddy_task_rewire(eddy_task_t *self, uint32_t epoch, eddy_placement_view_t placement,
                     eddy_err_t *err)
{
    task_free_inputs(self);
    task_free_groups(self);
    task_free_migration(self); /* a fluid step in flight is abandoned */
    self->wm_held = false;     /* and its hold of the clock: the new inputs' watermarks move it */
    self->epoch = epoch;
    self->parallelism = placement.stages[self->stage].parallelism;
    self->ctx.parallelism = self->parallelism;
    if (self->state) {
        /* What it holds: its range, or what fluid steps left it. */
        eddy_kg_range_t now = task_owned_range(self, placement);
        for (uint32_t kg = 0; kg < self->graph->max_parallelism; kg++)
            if (self->held[kg] && !eddy_kg_range_contains(now, kg)) {
                eddy_keyed_state_drop_group(self->state, kg);
                for (uint32_t i = 0; i < self->def->n_ops; i++)
                    if (self->def->ops[i].ops->drop_group)
                        self->def->ops[i].ops->drop_group(self->ops[i], kg);
                self->held[kg] = 0;
            }
        self->ctx.key_groups = now;
    }
    if (task_build_inputs(self, placement, err) < 0 || task_build_groups(self, placement, err) < 0 ||
        task_build_peers(self, placement, err) < 0)
        return -1;
    return 0;
}

/* Which saved operator's bytes operator i of the chain gets: the saved
 * operator of the same kind, the n-th of that kind for the chain's n-th
 * (so a new version may chain a stateless step before or after a stateful
 * one); by position for an envelope without kinds. -1: none (the operator
 * starts empty). */
static int saved_index(const eddy_task_t *t, const eddy_group_envelope_t *env, bool kinds,
                       uint32_t i)
{
    if (!kinds)
        return i < env->n_ops ? (int)i : -1;
    const char *kind = t->def->ops[i].ops->kind ? t->def->ops[i].ops->kind : "";
    size_t len = strlen(kind);
    uint32_t nth = 0;
    for (uint32_t k = 0; k < i; k++)
        nth += t->def->ops[k].ops->kind && !strcmp(t->def->ops[k].ops->kind, kind);
    for (uint32_t k = 0; k < env->n_ops; k++)
        if (env->kind_lens[k] == len && !memcmp(env->kinds[k], kind, len) && nth-- == 0)
            return (int)k;
    return -1;
}

static int read_group(eddy_task_t *t, uint32_t kg, const char *data, size_t len, int64_t *wm,
                      eddy_err_t *err)
{
    eddy_group_envelope_t env;
    if (eddy_group_envelope_decode(data, len, &env, err) < 0)
        return -1;
    bool kinds = false;
    for (uint32_t k = 0; k < env.n_ops; k++)
        kinds = kinds || env.kind_lens[k] > 0;
    if (!kinds && env.n_ops != 0 && env.n_ops != t->def->n_ops)
        return eddy_err_set(err, "the snapshot holds state of %u operators, the stage chains %u",
                            env.n_ops, t->def->n_ops);
    int from[EDDY_MAX_CHAIN];
    bool claimed[EDDY_GROUP_MAX_OPS] = {false};
    for (uint32_t i = 0; i < t->def->n_ops; i++)
        if ((from[i] = saved_index(t, &env, kinds, i)) >= 0)
            claimed[from[i]] = true;
    /* saved bytes that no operator of the chain takes would be lost */
    for (uint32_t k = 0; k < env.n_ops; k++)
        if (env.ops[k] && !claimed[k])
            return eddy_err_set(err, "the snapshot holds state of operator %u of %u (%.*s) that no "
                                "operator of the stage's chain takes", k + 1, env.n_ops,
                                (int)env.kind_lens[k], env.kind_lens[k] ? env.kinds[k] : "");
    if (eddy_keyed_state_read_group(t->state, kg, env.keyed, env.keyed_len, err) < 0)
        return -1;
    for (uint32_t i = 0; i < t->def->n_ops; i++) {
        const eddy_operator_ops_t *ops = t->def->ops[i].ops;
        if (!ops->read_group)
            continue;
        if (ops->read_group(t->ops[i], kg, from[i] >= 0 ? env.ops[from[i]] : NULL,
                            from[i] >= 0 ? env.op_lens[from[i]] : 0, err) < 0)
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
        if (eddy_snapshot_store_read_group(task_restore_store(self, checkpoint), task_restore_job(self, checkpoint),
                                           checkpoint, self->def->name, kg, &data, &len, err) < 0)
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

/* ---- fluid migration ----------------------------------------------------
 * Megaphone-style steps (docs/architecture.md, "Fluid key-group
 * migration"). The sender side is eddy_task_route_step; the old owner gives
 * a step's groups away in task_on_handoff once every live input delivered
 * its HANDOFF (so it has processed every record of theirs that was sent to
 * it) and sends their state in checksummed chunks straight to the new owner
 * (several steps may wait for their markers; they go in version order);
 * the new owner holds records of groups it adopted until their state is
 * installed whole (task_on_state_chunk), then processes them in order. */

eddy_kg_range_t task_owned_range(const eddy_task_t *t, eddy_placement_view_t pl)
{
    uint32_t p = pl.stages[t->stage].parallelism, as_p = pl.stages[t->stage].route_parallelism;
    if (!as_p || as_p >= p)
        return eddy_kg_range_for(t->instance, p, t->graph->max_parallelism);
    if (t->instance >= as_p)
        return (eddy_kg_range_t){0, 0};
    return eddy_kg_range_for(t->instance, as_p, t->graph->max_parallelism);
}

int task_build_peers(eddy_task_t *t, eddy_placement_view_t pl, eddy_err_t *err)
{
    free(t->peer_worker);
    t->peer_worker = NULL;
    if (!t->state)
        return 0;
    uint32_t p = pl.stages[t->stage].parallelism;
    t->peer_worker = malloc(p * sizeof *t->peer_worker);
    if (!t->peer_worker)
        return eddy_err_set(err, "out of memory");
    memcpy(t->peer_worker, pl.stages[t->stage].worker_of, p * sizeof *t->peer_worker);
    if (!t->incoming) {
        t->incoming = calloc(t->graph->max_parallelism, 1);
        if (!t->incoming)
            return eddy_err_set(err, "out of memory");
    }
    return 0;
}

static void free_hold(eddy_task_t *t)
{
    while (t->hold_head) {
        held_record_t *h = t->hold_head;
        t->hold_head = h->next;
        free(h);
    }
    t->hold_tail = NULL;
    t->hold_bytes = 0;
}

static void free_assembly(group_assembly_t *a)
{
    free(a->buf);
    free(a);
}

void task_free_migration(eddy_task_t *t)
{
    free_hold(t);
    while (t->assembling) {
        group_assembly_t *a = t->assembling;
        t->assembling = a->next;
        free_assembly(a);
    }
    for (uint32_t i = 0; i < t->n_outs; i++)
        free(t->outs[i].kgs);
    free(t->outs);
    t->outs = NULL;
    t->n_outs = t->cap_outs = 0;
    t->out_next = 0;
    t->out_ready_ns = 0;
    for (uint32_t i = 0; i < t->n_ins; i++)
        free(t->ins[i].kgs);
    free(t->ins);
    t->ins = NULL;
    t->n_ins = t->cap_ins = 0;
    free(t->peer_worker);
    t->peer_worker = NULL;
    free(t->incoming);
    t->incoming = NULL;
    t->n_incoming = 0;
}

bool task_migration_in_flight(const eddy_task_t *t)
{
    return t->n_incoming > 0 || t->n_outs > 0 || t->assembling;
}

static void drop_group(eddy_task_t *t, uint32_t kg)
{
    eddy_keyed_state_drop_group(t->state, kg);
    for (uint32_t i = 0; i < t->def->n_ops; i++)
        if (t->def->ops[i].ops->drop_group)
            t->def->ops[i].ops->drop_group(t->ops[i], kg);
    t->held[kg] = 0;
}

int eddy_task_route_step(eddy_task_t *self, uint32_t dst_stage, uint64_t version,
                         const uint32_t *kgs, uint32_t n, uint32_t to, eddy_err_t *err)
{
    output_group_t *grp = NULL;
    for (uint32_t g = 0; g < self->n_groups; g++)
        if (self->groups[g].dst_stage == dst_stage && self->groups[g].edge == EDDY_EDGE_HASH)
            grp = &self->groups[g];
    if (!grp)
        return eddy_err_set(err, "%s[%u] has no keyed output to stage %u", self->def->name,
                            self->instance, dst_stage);
    if (n > EDDY_HANDOFF_MAX_GROUPS)
        return eddy_err_set(err, "a step of %u key groups exceeds %u", n, EDDY_HANDOFF_MAX_GROUPS);
    uint32_t *from = malloc((n ? n : 1) * sizeof *from);
    uint32_t *part = malloc((n ? n : 1) * sizeof *part);
    if (!from || !part) {
        free(from);
        free(part);
        return eddy_err_set(err, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++)
        from[i] = kgs[i] < grp->routes.n_groups ? eddy_route_table_owner(&grp->routes, kgs[i]) : 0;
    if (eddy_route_table_apply(&grp->routes, version, kgs, n, to, err) < 0) {
        free(from);
        free(part);
        return eddy_err_wrap(err, "%s[%u]: routing step", self->def->name, self->instance);
    }
    /* To each old owner: HANDOFF of its groups, behind everything sent to
     * it before; then to the new owner: HANDOFF of every group it adopts,
     * ahead of their first record. */
    uint32_t adopted = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (from[i] == to || from[i] == UINT32_MAX)
            continue;
        uint32_t owner = from[i], k = 0;
        for (uint32_t j = i; j < n; j++)
            if (from[j] == owner) {
                part[k++] = kgs[j];
                from[j] = UINT32_MAX;
                adopted++;
            }
        output_channel_t *ch = &grp->channels[owner];
        size_t len;
        char *data = eddy_handoff_encode(&ch->id, version, to, part, k, &len);
        task_send_control(self, ch, data, len);
    }
    if (adopted) {
        output_channel_t *ch = &grp->channels[to];
        size_t len;
        char *data = eddy_handoff_encode(&ch->id, version, to, kgs, n, &len);
        task_send_control(self, ch, data, len);
    }
    free(from);
    free(part);
    return self->fault ? task_take_fault(self, err) : 0;
}

/* Sends group kg's serialised state to instance `to` in chunks (an empty
 * group as one empty chunk). The group is dropped by the caller once the
 * whole step is on its way: the new owner gets its bytes first. */
static void give_group(eddy_task_t *t, uint32_t kg, uint64_t version, uint32_t to, int64_t sent_us)
{
    char *data = NULL;
    size_t len = 0;
    if (t->held[kg]) {
        eddy_err_t err = {{0}};
        if (task_write_group(t, kg, &data, &len, &err) < 0) {
            task_set_fault(t, err.msg);
            return;
        }
    }
    eddy_channel_id_t id = {t->job, t->epoch, t->stage, t->instance, t->stage, to};
    size_t off = 0;
    do {
        uint32_t n = len - off > EDDY_STATE_CHUNK_BYTES ? EDDY_STATE_CHUNK_BYTES : (uint32_t)(len - off);
        size_t mlen;
        char *m = eddy_state_chunk_encode_stamped(&id, version, kg, off, len,
                                                  data ? data + off : "", n, sent_us, &mlen);
        if (!m) {
            task_set_fault(t, "out of memory sending key group state");
            break;
        }
        if (t->env->fluid_corrupt && n && !t->corrupted) { /* the test hook */
            m[mlen - 1 - (sent_us ? 9 : 0)] ^= 0x5a; /* the chunk's last byte */
            t->corrupted = true;
        }
        task_send_message(t, t->peer_worker[to], m, mlen);
        off += n;
    } while (off < len);
    free(data);
    t->groups_sent++;
    t->state_bytes_sent += len;
}

/* The operators' clock stops while a step moves groups out of or into this
 * task (task_advance_watermark keeps what comes in wm_pending). Old owner:
 * from the step's first HANDOFF until its groups are given away, since
 * records of theirs sent after a HANDOFF go to the new owner, and a window
 * fired here meanwhile would miss them (and the new owner would count them
 * in a window of its own, or drop them as late). New owner: while groups
 * are incoming, so that their held records are not late. */
static void hold_watermark(eddy_task_t *t)
{
    if (!t->wm_held) {
        t->wm_held = true;
        t->wm_pending = t->watermark;
    }
}

static void release_watermark(eddy_task_t *t)
{
    if (t->wm_held && !t->n_incoming && !t->n_outs && !t->fault) {
        t->wm_held = false;
        task_advance_watermark(t, t->wm_pending);
    }
}

static bool handoffs_complete(const eddy_task_t *t, uint64_t version)
{
    for (uint32_t i = 0; i < t->n_inputs; i++)
        if (!t->inputs[i].eos && t->inputs[i].handoff < version)
            return false;
    return true;
}

/* Groups given away per loop turn: at least one, then until half a task's
 * time slice is spent. The new owner installs each as it arrives, so the
 * copy is pipelined across the two workers, and neither worker's other
 * tasks wait for a whole step (a step of 8 groups at 1.5M keys took 15-60
 * ms on one turn). */
#define GIVE_SLICE_NS (EDDY_TASK_SLICE_NS / 2)

/* Whether the oldest step waiting here can go: every live input delivered
 * its HANDOFF, and the test hook (if set) let it. */
static bool head_ready(eddy_task_t *t)
{
    if (!t->n_outs || !handoffs_complete(t, t->outs[0].version))
        return false;
    if (t->env->fluid_hold_ms && !t->out_next) { /* the test hook holds the transfer back */
        uint64_t now = eddy_mono_ns();
        if (!t->out_ready_ns)
            t->out_ready_ns = now + (uint64_t)t->env->fluid_hold_ms * 1000000u;
        if (now < t->out_ready_ns)
            return false;
    }
    return true;
}

/* The oldest step's groups go (a slice of them per loop turn); then the
 * next step's if its markers are in too. Steps go in version order, which
 * is the order every input delivers their markers in. */
static void give_step_away(eddy_task_t *t)
{
    uint64_t t0 = eddy_mono_ns();
    while (!t->fault && head_ready(t)) {
        fluid_out_step_t *st = &t->outs[0];
        /* What the operators hold back for these groups leaves with their
         * state. Each group is sent before it is dropped, so the new owner
         * has its bytes first; the stamp lets it time the copy from the
         * first group (not the wait for the markers before). */
        if (!t->out_next) {
            t->out_ready_ns = 0;
            t->out_t0_ns = eddy_mono_ns();
            t->out_bytes0 = t->state_bytes_sent;
            int64_t now_us = eddy_wall_us();
            t->out_sent_us = now_us ? now_us : 1;
        }
        while (t->out_next < st->n && !t->fault) {
            uint32_t kg = st->kgs[t->out_next++];
            give_group(t, kg, st->version, st->to, t->out_sent_us);
            if (t->held[kg]) {
                /* The keyed entries are freed a slice per loop turn
                 * (task_fluid_poll): records of the groups that stay here
                 * go on meanwhile. */
                eddy_keyed_state_drop_group_later(t->state, kg);
                drop_group(t, kg);
            }
            if (eddy_mono_ns() - t0 >= GIVE_SLICE_NS)
                break;
        }
        if (t->out_next < st->n || t->fault)
            return; /* the rest on the next turns (task_fluid_wake says when) */
        eddy_debug("%s[%u]: step %llu: %u key groups (%llu bytes) serialised and sent to [%u] in "
                   "%.1f ms", t->def->name, t->instance, (unsigned long long)st->version, st->n,
                   (unsigned long long)(t->state_bytes_sent - t->out_bytes0), st->to,
                   (double)(eddy_mono_ns() - t->out_t0_ns) / 1e6);
        free(st->kgs);
        memmove(&t->outs[0], &t->outs[1], (t->n_outs - 1) * sizeof *t->outs);
        t->n_outs--;
        t->out_next = 0;
        if (eddy_mono_ns() - t0 >= GIVE_SLICE_NS)
            break; /* the next step on the next turn */
    }
    release_watermark(t); /* with no step left, what is left here fires as before */
}

/* Room for one more element in *arr (n used of *cap, each `size` bytes);
 * -1: out of memory, the task faulted. */
static int room_for_one(eddy_task_t *t, void **arr, uint32_t n, uint32_t *cap, size_t size)
{
    if (n < *cap)
        return 0;
    uint32_t more = *cap ? 2 * *cap : 4;
    void *p = realloc(*arr, more * size);
    if (!p) {
        task_set_fault(t, "out of memory");
        return -1;
    }
    *arr = p;
    *cap = more;
    return 0;
}

/* The new owner's record of step `version` (created if absent; NULL: out
 * of memory, the task faulted). */
static fluid_in_step_t *in_step(eddy_task_t *t, uint64_t version)
{
    for (uint32_t i = 0; i < t->n_ins; i++)
        if (t->ins[i].version == version)
            return &t->ins[i];
    if (room_for_one(t, (void **)&t->ins, t->n_ins, &t->cap_ins, sizeof *t->ins) < 0)
        return NULL;
    fluid_in_step_t *st = &t->ins[t->n_ins++];
    memset(st, 0, sizeof *st);
    st->version = version;
    return st;
}

/* A step adopted here is installed whole: the coordinator hears it. */
static void report_step_if_done(eddy_task_t *t, fluid_in_step_t *st)
{
    if (!st->named || st->reported)
        return;
    for (uint32_t i = 0; i < st->n; i++)
        if (!t->held[st->kgs[i]])
            return;
    st->reported = true;
    eddy_msg_t m = {.type = EDDY_MSG_STEP_DONE};
    m.u.step_done.job = t->job;
    m.u.step_done.epoch = t->epoch;
    m.u.step_done.stage = t->stage;
    m.u.step_done.instance = t->instance;
    m.u.step_done.version = st->version;
    m.u.step_done.groups = st->n;
    m.u.step_done.bytes = st->bytes;
    if (st->sent_us > 0 && st->done_us > st->sent_us)
        m.u.step_done.transfer_us = (uint64_t)(st->done_us - st->sent_us);
    eddy_debug("%s[%u]: step %llu installed: %u key groups, %llu bytes, %.1f ms since the old "
               "owner began sending (first group in after %.1f ms; loading took %.1f ms)",
               t->def->name, t->instance, (unsigned long long)st->version, st->n,
               (unsigned long long)st->bytes, (double)m.u.step_done.transfer_us / 1e3,
               st->sent_us && st->first_us ? (double)(st->first_us - st->sent_us) / 1e3 : 0.0,
               (double)st->load_ns / 1e6);
    t->env->notify(t->env->host, &m);
}

static void adopt(eddy_task_t *t, const eddy_data_msg_t *msg)
{
    fluid_in_step_t *st = in_step(t, msg->version);
    if (!st)
        return;
    if (!st->named) { /* the first sender's HANDOFF names the step's groups */
        uint32_t *kgs = malloc((msg->n_kgs ? msg->n_kgs : 1) * sizeof *kgs);
        if (!kgs) {
            task_set_fault(t, "out of memory");
            return;
        }
        uint32_t n = 0;
        for (uint32_t i = 0; i < msg->n_kgs; i++)
            if (msg->kgs[i] < t->graph->max_parallelism)
                kgs[n++] = msg->kgs[i];
        st->kgs = kgs;
        st->n = n;
        st->named = true;
    }
    for (uint32_t i = 0; i < msg->n_kgs; i++) {
        uint32_t kg = msg->kgs[i];
        if (kg >= t->graph->max_parallelism || t->held[kg] || t->incoming[kg])
            continue;
        /* Chunks that came first are being put together: still incoming. */
        t->incoming[kg] = 1;
        t->n_incoming++;
    }
    if (t->n_incoming)
        hold_watermark(t);
    report_step_if_done(t, st); /* its chunks may all have come first */
}

void task_on_handoff(eddy_task_t *t, input_channel_t *in, const eddy_data_msg_t *msg)
{
    if (!t->state || !t->incoming) {
        task_set_fault(t, "HANDOFF for a task without keyed state");
        return;
    }
    if (msg->handoff_to == t->instance) {
        adopt(t, msg);
        return;
    }
    if (msg->handoff_to >= t->parallelism) {
        task_set_fault(t, "HANDOFF to an instance that does not exist");
        return;
    }
    if (in->handoff >= msg->version) {
        task_set_fault(t, "HANDOFF of an old routing version");
        return;
    }
    in->handoff = msg->version;
    bool known = false;
    for (uint32_t i = 0; i < t->n_outs; i++)
        known |= t->outs[i].version == msg->version;
    if (!known) {
        /* A new step: newer than every one waiting here, since each input
         * delivers the markers in version order. */
        if (t->n_outs && t->outs[t->n_outs - 1].version > msg->version) {
            task_set_fault(t, "HANDOFF of a step older than one waiting to be given away");
            return;
        }
        for (uint32_t i = 0; i < msg->n_kgs; i++)
            if (msg->kgs[i] >= t->graph->max_parallelism) {
                task_set_fault(t, "HANDOFF of a key group out of range");
                return;
            }
        uint32_t *kgs = malloc((msg->n_kgs ? msg->n_kgs : 1) * sizeof *kgs);
        if (!kgs) {
            task_set_fault(t, "out of memory");
            return;
        }
        if (room_for_one(t, (void **)&t->outs, t->n_outs, &t->cap_outs, sizeof *t->outs) < 0) {
            free(kgs);
            return;
        }
        memcpy(kgs, msg->kgs, msg->n_kgs * sizeof *kgs);
        t->outs[t->n_outs++] = (fluid_out_step_t){msg->version, msg->handoff_to, msg->n_kgs, kgs};
        hold_watermark(t); /* no window of the leaving groups fires here now */
    }
    give_step_away(t);
}

int task_hold_record(eddy_task_t *t, input_channel_t *in, const eddy_record_t *rec)
{
    if (!t->n_incoming)
        return 0;
    const char *key;
    uint32_t klen;
    if (rec->kind == EDDY_PARTIAL) {
        klen = eddy_partial_key(rec, &key);
    } else {
        eddy_key_fn fn = eddy_stage_key_from(t->def, in->src_stage);
        if (!fn)
            return 0;
        klen = fn(rec, &key);
    }
    uint32_t kg = eddy_key_group_of(key, klen, t->graph->max_parallelism);
    if (!t->incoming[kg])
        return 0;
    if (t->hold_bytes + rec->len > EDDY_HOLD_BYTES_MAX && t->hold_head) {
        in->hold_full = true;
        return -1;
    }
    held_record_t *h = malloc(sizeof *h + (rec->len ? rec->len : 1));
    if (!h) {
        task_set_fault(t, "out of memory holding a record of a moving key group");
        return 1;
    }
    h->next = NULL;
    h->kg = kg;
    h->input = in->input;
    h->ingest_us = t->cur_ingest_us;
    h->rec = *rec;
    memcpy(h->bytes, rec->data, rec->len);
    h->rec.data = h->bytes;
    if (t->hold_tail)
        t->hold_tail->next = h;
    else
        t->hold_head = h;
    t->hold_tail = h;
    t->hold_bytes += rec->len + sizeof *h;
    return 1;
}

/* Group kg arrived whole: its held records go through the chain in order;
 * with no group incoming any more, the held watermark moves on. */
static void drain_hold(eddy_task_t *t, uint32_t kg)
{
    held_record_t **pp = &t->hold_head, *last = NULL;
    while (*pp && !t->fault) {
        held_record_t *h = *pp;
        if (h->kg != kg) {
            last = h;
            pp = &h->next;
            continue;
        }
        *pp = h->next;
        t->current_input = h->input;
        t->cur_ingest_us = h->ingest_us;
        t->records_in++;
        task_chain_emit(&t->links[0].base, &h->rec);
        t->cur_ingest_us = 0;
        t->hold_bytes -= h->rec.len + sizeof *h;
        free(h);
    }
    t->hold_tail = NULL;
    for (held_record_t *h = t->hold_head; h; h = h->next)
        t->hold_tail = h;
    (void)last;
    for (uint32_t i = 0; i < t->n_inputs; i++)
        t->inputs[i].hold_full = false;
    release_watermark(t);
}

/* Group kg's state, whole: loaded (never half: a failed load drops it),
 * then its held records run. */
static int install(eddy_task_t *t, uint32_t kg, uint64_t version, const char *data, uint64_t total,
                   int64_t sent_us, eddy_err_t *err)
{
    if (t->held[kg])
        return eddy_err_set(err, "key group %u arrived but is held here already", kg);
    uint64_t t0 = eddy_mono_ns();
    if (total) {
        int64_t wm = EDDY_GROUP_NO_WATERMARK;
        if (read_group(t, kg, data, total, &wm, err) < 0) {
            drop_group(t, kg); /* never half-loaded */
            return -1;
        }
    }
    uint64_t load_ns = eddy_mono_ns() - t0;
    t->held[kg] = 1;
    t->groups_received++;
    t->state_bytes_received += total;
    fluid_in_step_t *st = in_step(t, version);
    if (st) {
        int64_t now_us = eddy_wall_us();
        if (!st->first_us)
            st->first_us = now_us - (int64_t)(load_ns / 1000);
        st->bytes += total;
        st->load_ns += load_ns;
        if (sent_us > 0 && (!st->sent_us || sent_us < st->sent_us))
            st->sent_us = sent_us;
        st->done_us = now_us;
    }
    if (t->incoming[kg]) {
        t->incoming[kg] = 0;
        t->n_incoming--;
    }
    drain_hold(t, kg);
    if (st)
        report_step_if_done(t, st);
    return 0;
}

int task_on_state_chunk(eddy_task_t *t, const eddy_data_msg_t *msg, eddy_err_t *err)
{
    uint32_t kg = msg->kg;
    if (!t->state || !t->incoming || kg >= t->graph->max_parallelism)
        return eddy_err_set(err, "protocol violation: state chunk of key group %u for %s[%u]", kg,
                            t->def->name, t->instance);
    if (eddy_state_chunk_checksum(msg->chunk, msg->chunk_len) != msg->checksum)
        return eddy_err_set(err, "corrupt state chunk of key group %u for %s[%u] (checksum)", kg,
                            t->def->name, t->instance);
    group_assembly_t **pp = &t->assembling;
    while (*pp && (*pp)->kg != kg)
        pp = &(*pp)->next;
    group_assembly_t *a = *pp;
    int rc;
    if (!a && msg->offset == 0 && msg->chunk_len == msg->total) {
        /* The whole group in one chunk (the usual case): loaded straight
         * from the message, no copy put together first. */
        rc = install(t, kg, msg->version, msg->chunk, msg->total, msg->sent_us, err);
        if (rc < 0)
            return eddy_err_wrap(err, "%s[%u]: moved key group %u", t->def->name, t->instance, kg);
        return t->fault ? task_take_fault(t, err) : 0;
    }
    if (!a) {
        if (msg->offset != 0)
            return eddy_err_set(err, "state of key group %u for %s[%u] starts at %llu, not 0", kg,
                                t->def->name, t->instance, (unsigned long long)msg->offset);
        a = calloc(1, sizeof *a);
        if (!a || (msg->total && !(a->buf = malloc(msg->total)))) {
            free(a);
            return eddy_err_set(err, "out of memory");
        }
        a->kg = kg;
        a->version = msg->version;
        a->total = msg->total;
        a->next = t->assembling;
        t->assembling = a;
        pp = &t->assembling;
    } else if (msg->version != a->version || msg->total != a->total || msg->offset != a->got) {
        eddy_err_set(err, "state of key group %u for %s[%u]: chunk at %llu of %llu does not "
                     "follow the %llu bytes received", kg, t->def->name, t->instance,
                     (unsigned long long)msg->offset, (unsigned long long)msg->total,
                     (unsigned long long)a->got);
        *pp = a->next;
        free_assembly(a); /* never half-loaded: the group is dropped whole */
        return -1;
    }
    if (msg->chunk_len)
        memcpy(a->buf + a->got, msg->chunk, msg->chunk_len);
    a->got += msg->chunk_len;
    if (a->got < a->total)
        return 0;
    *pp = a->next;
    rc = install(t, a->kg, a->version, a->buf, a->total, msg->sent_us, err);
    free_assembly(a);
    if (rc < 0)
        return eddy_err_wrap(err, "%s[%u]: moved key group %u", t->def->name, t->instance, kg);
    return t->fault ? task_take_fault(t, err) : 0;
}

void eddy_task_migration_stats(const eddy_task_t *self, eddy_task_migration_stats_t *out)
{
    out->groups_sent = self->groups_sent;
    out->groups_received = self->groups_received;
    out->bytes_sent = self->state_bytes_sent;
    out->bytes_received = self->state_bytes_received;
    out->groups_incoming = self->n_incoming;
    out->held_bytes = self->hold_bytes;
    out->in_flight = task_migration_in_flight(self);
}

bool eddy_task_holds_group(const eddy_task_t *self, uint32_t kg)
{
    return self->held && kg < self->graph->max_parallelism && self->held[kg];
}

bool eddy_task_routes_to(const eddy_task_t *self, uint32_t stage)
{
    for (uint32_t g = 0; g < self->n_groups; g++)
        if (self->groups[g].dst_stage == stage && self->groups[g].edge == EDDY_EDGE_HASH)
            return true;
    return false;
}

void task_fluid_input_ended(eddy_task_t *t)
{
    give_step_away(t);
}

/* Entries of given-away groups freed per loop turn: a few milliseconds. */
#define REAP_SLICE 8192u

uint64_t task_fluid_wake(const eddy_task_t *t)
{
    if (t->state && eddy_keyed_state_reap_pending(t->state))
        return 0; /* at once: task_fluid_poll frees the next slice */
    if (!t->n_outs)
        return UINT64_MAX;
    if (t->out_next)
        return 0; /* a step half given away goes on */
    if (t->out_ready_ns)
        return t->out_ready_ns; /* the test hook holds it */
    /* a step whose markers are all in (the previous one took the slice) */
    return handoffs_complete(t, t->outs[0].version) ? 0 : UINT64_MAX;
}

void task_fluid_poll(eddy_task_t *t, uint64_t now_ns)
{
    if (t->state && eddy_keyed_state_reap_pending(t->state))
        eddy_keyed_state_reap(t->state, REAP_SLICE);
    if (task_fluid_wake(t) <= now_ns)
        give_step_away(t);
}
