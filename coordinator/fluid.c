/* fluid.c - a rescale with --migration fluid: key groups move between
 * instances in small steps, worker to worker, while the sources run
 * (Megaphone, Hoffmann et al. VLDB 2019; docs/architecture.md, "Fluid
 * key-group migration").
 *
 * Phases of a rescale of stage S from p to q instances:
 *  EXPAND (q > p): the new instances are deployed owning no key group (a
 *    DEPLOY(RESCALE) whose placement routes S as at p: route_parallelism),
 *    behind a migration barrier that writes no state. This is the one
 *    pause: it drains the channels so new ones can be wired, it does not
 *    grow with the state.
 *  STEPS: for each step of eddy_route_plan_to (at most
 *    --migration-step-key-groups groups, one old and one new owner), split
 *    further so that a step moves about --migration-step-bytes of state
 *    (groups_for_bytes: the bytes per group the steps so far moved, or
 *    before the first the old owner's heap bytes; at least one group),
 *    ROUTE_STEP to every worker; the senders put HANDOFF markers in band,
 *    the old owner sends the groups' state to the new owner over the data
 *    plane, the new owner installs it and answers STEP_DONE. Up to
 *    steps_in_flight steps are out at once (they move disjoint groups; more
 *    when markers wait long behind queued records, i.e. the job is
 *    behind), the first ones sent before EXPAND's START so that their
 *    markers are ahead of every record (coord_fluid_before_start). No
 *    checkpoint starts while a step is in flight (and a task declines one
 *    that meets a step), so every group is in exactly one snapshot; no
 *    step starts while a checkpoint is in flight or due.
 *  SHRINK (q < p): the instances the steps emptied are removed, like
 *    EXPAND behind a barrier that writes no state.
 * A migration (rebalancing, migrate.c: instances of S move to other workers
 * at the same parallelism p) is the same machinery (coord_fluid_migrate):
 *  EXPAND to p + n, instance p + k on move k's target worker owning nothing;
 *  STEPS moving each moved instance's key groups to its new instance;
 *  SHRINK back to p, where instance p + k takes the moved instance's number
 *    (DEPLOY renames; the emptied old task goes) and keeps its state.
 * A failure meanwhile restores the job from its last complete checkpoint
 * (recovery.c calls coord_rescale_abandon, which clears this), at the
 * placement of then: checkpoint files are per key group, so whatever steps
 * were committed, the restore is exact. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"
#include "net/dataplane.h" /* EDDY_HANDOFF_MAX_GROUPS */

static uint32_t step_groups(const coord_t *c)
{
    uint32_t n = c->opts->migration_step_key_groups ? c->opts->migration_step_key_groups
                                                    : EDDY_MIGRATION_STEP_KEY_GROUPS;
    return n > EDDY_HANDOFF_MAX_GROUPS ? EDDY_HANDOFF_MAX_GROUPS : n;
}

static uint64_t step_bytes(const coord_t *c)
{
    return c->opts->migration_step_bytes ? c->opts->migration_step_bytes : EDDY_MIGRATION_STEP_BYTES;
}

/* Serialised bytes of one key group of `from`, estimated: what the steps
 * so far moved per group, or before the first one, the old owner's heap
 * bytes (its heartbeat) over the groups it holds, which is more than its
 * serialised form (slots, pointers and allocation overhead), so the first
 * step errs small. 0: unknown. */
static uint64_t group_bytes(const coord_t *c, const coord_job_t *j, uint32_t from)
{
    if (j->fluid_groups)
        return j->fluid_bytes / j->fluid_groups;
    uint32_t held = 0;
    for (uint32_t kg = 0; kg < j->fluid_table.n_groups; kg++)
        held += eddy_route_table_owner(&j->fluid_table, kg) == from;
    for (const coord_worker_t *w = c->workers; w && held; w = w->next) {
        if (!w->alive)
            continue;
        for (uint32_t i = 0; i < w->n_metrics; i++) {
            const eddy_task_metrics_t *m = &w->metrics[i];
            if (m->job == j->num && m->epoch == j->epoch && (int)m->stage == j->rescale_stage &&
                m->instance == from)
                return m->state_bytes / held;
        }
    }
    return 0;
}

/* How many of the n groups left in a plan step go in the next ROUTE_STEP:
 * as many as fit in --migration-step-bytes, at least one (the plan's
 * steps are already at most --migration-step-key-groups). */
static uint32_t groups_for_bytes(const coord_t *c, const coord_job_t *j, uint32_t from, uint32_t n)
{
    uint64_t per = group_bytes(c, j, from);
    if (!per)
        return n;
    uint64_t fit = step_bytes(c) / per;
    return fit < 1 ? 1 : fit < n ? (uint32_t)fit : n;
}

void coord_fluid_clear(coord_job_t *j)
{
    if (!j->fluid)
        return;
    eddy_route_table_free(&j->fluid_table);
    eddy_route_plan_free(&j->fluid_plan);
    for (uint32_t s = 0; s < EDDY_MAX_STAGES; s++)
        j->placement[s].route_parallelism = 0;
    j->fluid = false;
    j->fluid_phase = 0;
    j->n_fluid_flight = 0;
    j->fluid_next_step = 0;
    j->fluid_step_off = 0;
}

bool coord_fluid_step_in_flight(const coord_job_t *j)
{
    return j->fluid && j->n_fluid_flight != 0;
}

/* How many steps go at once. A step's markers wait behind the records
 * queued ahead of them on their channels, for about the time the job is
 * behind (fluid_lag_ms); one step after another, a rescale of a job that
 * is behind took steps x that wait (7-25 s against well under a second).
 * Steps move disjoint key groups, so several can be in flight: their
 * markers wait behind the same queued records together. One step per
 * EDDY_MIGRATION_STEP_TARGET_MS of wait, plus one: a job that keeps up
 * (markers in at once) moves one step at a time, so a moved group is held
 * at its new owner no longer than one step's copy; a job that is behind
 * moves as many as the wait covers (its records wait that long anyway). */
static uint32_t steps_in_flight(const coord_t *c, const coord_job_t *j)
{
    uint64_t n = c->opts->migration_steps_in_flight;
    if (!n)
        n = 1 + j->fluid_lag_ms / EDDY_MIGRATION_STEP_TARGET_MS;
    return n > EDDY_MIGRATION_STEPS_IN_FLIGHT_MAX ? EDDY_MIGRATION_STEPS_IN_FLIGHT_MAX : (uint32_t)n;
}

/* The sources stop behind a barrier that writes no state (checkpoint.c
 * asks for the groups that change owner at a parallelism where none do). */
static void pause_for_deploy(coord_t *c, coord_job_t *j)
{
    j->pause_started_ns = eddy_mono_ns();
    coord_job_set_state(c, j, JOB_RESCALING);
    if (!j->pending)
        coord_checkpoint_trigger(c, j, true);
    /* else: checkpoint.c's tick triggers it when the running one ends */
}

/* A migration's plan: each moved instance's groups (as at rescale_from)
 * to its new instance rescale_from + k. */
static int plan_moves(coord_t *c, coord_job_t *j, eddy_err_t *err)
{
    eddy_route_table_t to;
    if (eddy_route_table_init_as(&to, j->fluid_table.n_groups, j->fluid_table.parallelism,
                                 j->rescale_from, err) < 0)
        return -1;
    for (uint32_t k = 0; k < j->n_moves; k++)
        for (uint32_t kg = 0; kg < to.n_groups; kg++)
            if (to.owner[kg] == j->moves[k].instance && j->rescale_from + k < to.parallelism)
                to.owner[kg] = (uint16_t)(j->rescale_from + k);
    int rc = eddy_route_plan_between(&j->fluid_table, &to, step_groups(c), &j->fluid_plan, err);
    eddy_route_table_free(&to);
    return rc;
}

/* The plan from the committed routing to the uniform one at rescale_to,
 * or for a migration to the moved instances' new ones. */
static int start_steps(coord_t *c, coord_job_t *j, uint32_t table_p, uint32_t as_p)
{
    eddy_err_t err = {{0}};
    eddy_route_table_free(&j->fluid_table);
    eddy_route_plan_free(&j->fluid_plan);
    if (eddy_route_table_init_as(&j->fluid_table, j->graph.max_parallelism, table_p, as_p, &err) < 0 ||
        (j->n_moves ? plan_moves(c, j, &err)
                    : eddy_route_plan_to(&j->fluid_table, j->rescale_to, step_groups(c), &j->fluid_plan,
                                         &err)) < 0) {
        coord_restore_job(c, j, err.msg, true);
        return -1;
    }
    j->fluid_phase = COORD_FLUID_STEPS;
    j->fluid_next_step = 0;
    j->fluid_step_off = 0;
    j->n_fluid_flight = 0;
    if (j->n_moves)
        eddy_info("job %s: fluid migration of %u instance%s of %s: %u key groups to move in %u steps "
                  "of at most %u key groups and about %" PRIu64 " bytes", j->id, j->n_moves,
                  j->n_moves == 1 ? "" : "s", j->graph.stages[j->rescale_stage].name,
                  j->fluid_plan.n_groups, j->fluid_plan.n_steps, step_groups(c), step_bytes(c));
    else
        eddy_info("job %s: fluid rescale of %s %u -> %u: %u key groups to move in %u steps of at "
                  "most %u key groups and about %" PRIu64 " bytes", j->id,
                  j->graph.stages[j->rescale_stage].name, j->rescale_from, j->rescale_to,
                  j->fluid_plan.n_groups, j->fluid_plan.n_steps, step_groups(c), step_bytes(c));
    return 0;
}

static void done(coord_t *c, coord_job_t *j)
{
    double total_ms = (double)(eddy_mono_ns() - j->fluid_started_ns) / 1e6;
    rescale_record_t *r = &j->rescales[j->n_rescales % COORD_MAX_RESCALES];
    j->n_rescales++;
    memset(r, 0, sizeof *r);
    r->time_ms = eddy_wall_ms();
    memcpy(r->stage, j->graph.stages[j->rescale_stage].name, sizeof r->stage);
    r->old_p = j->rescale_from;
    r->new_p = j->rescale_to;
    r->pause_ms = j->fluid_pause_ms;
    r->bytes_moved = j->fluid_bytes;
    if (j->n_moves) /* a migration's bytes are counted apart, like its count */
        j->migration_bytes_total += r->bytes_moved;
    else
        j->rescale_bytes_total += r->bytes_moved;
    r->groups_moved = j->fluid_groups;
    r->fluid_steps = j->fluid_steps_taken ? j->fluid_steps_taken : 1;
    r->migration_ms = total_ms;
    r->transfer_ms = (double)j->fluid_transfer_us / 1e3;
    char transfer[96] = "";
    if (j->fluid_transfer_us)
        snprintf(transfer, sizeof transfer, ", copied in %.1f ms (%.0f MB/s)", r->transfer_ms,
                 (double)r->bytes_moved / 1048576.0 / (r->transfer_ms / 1e3));
    char msg[640], what[160], flight[48] = "";
    if (j->fluid_most_flight > 1)
        snprintf(flight, sizeof flight, " (up to %u at once)", j->fluid_most_flight);
    if (j->n_moves)
        snprintf(what, sizeof what, "migrated %u instance%s of %s/%s", j->n_moves,
                 j->n_moves == 1 ? "" : "s", j->id, r->stage);
    else
        snprintf(what, sizeof what, "rescaled %s/%s %u -> %u", j->id, r->stage, r->old_p, r->new_p);
    snprintf(msg, sizeof msg,
             "%s (fluid): %u steps%s in %.1f ms, sources paused %.1f ms, moved %" PRIu64
             " key groups (%" PRIu64 " bytes)%s",
             what, r->fluid_steps, flight, total_ms, r->pause_ms, r->groups_moved, r->bytes_moved, transfer);
    eddy_info("%s", msg);
    if (j->n_moves) {
        r->instances_moved = j->n_moves;
        snprintf(r->why, sizeof r->why, "%s", j->migration_why);
        j->n_migrations++;
        j->instances_migrated += j->n_moves;
        free(j->moves);
        j->moves = NULL;
        j->n_moves = 0;
        coord_rebalance_migration_ended(c);
    }
    if (j->rescale_client.waiting) {
        coord_reply(c, j->rescale_client.identity, j->rescale_client.identity_len, 0, msg);
        j->rescale_client.waiting = false;
    }
    coord_fluid_clear(j);
    j->rescale_stage = -1;
    coord_job_store_save(c, j, 3, NULL, NULL);
}

static void init(coord_job_t *j, int stage, uint32_t to, const unsigned char *identity,
                 size_t identity_len)
{
    uint32_t from = j->placement[stage].parallelism;
    j->rescale_stage = stage;
    j->rescale_from = from;
    j->rescale_to = to;
    j->rescale_client.waiting = identity_len > 0;
    if (identity_len)
        memcpy(j->rescale_client.identity, identity, identity_len);
    j->rescale_client.identity_len = identity_len;
    memset(&j->fluid_table, 0, sizeof j->fluid_table);
    memset(&j->fluid_plan, 0, sizeof j->fluid_plan);
    j->fluid = true;
    j->fluid_started_ns = eddy_mono_ns();
    j->fluid_bytes = j->fluid_groups = 0;
    j->fluid_transfer_us = 0;
    j->fluid_steps_taken = 0;
    j->fluid_most_flight = 0;
    j->fluid_pause_ms = 0;
    /* until EXPAND's barrier or a step measures it: the last checkpoint's
     * time without its writers' (what its barriers spent behind the same
     * queues, and the tasks' time at them) */
    double async_ms = (double)j->last_checkpoint_cost.async_us / 1e3;
    j->fluid_lag_ms = j->last_checkpoint_ms > async_ms ? (uint64_t)(j->last_checkpoint_ms - async_ms) : 0;
}

int coord_fluid_begin(coord_t *c, coord_job_t *j, int stage, uint32_t to,
                      const unsigned char *identity, size_t identity_len, eddy_err_t *err)
{
    (void)err;
    uint32_t from = j->placement[stage].parallelism;
    init(j, stage, to, identity, identity_len);
    eddy_info("job %s: rescaling %s %u -> %u (fluid, steps of %u key groups)", j->id,
              j->graph.stages[stage].name, from, to, step_groups(c));
    if (to > from) {
        j->fluid_phase = COORD_FLUID_EXPAND;
        pause_for_deploy(c, j);
        return 0;
    }
    if (start_steps(c, j, from, from) == 0) /* a failure restores the job */
        coord_fluid_tick(c, j, eddy_mono_ms());
    return 0;
}

void coord_fluid_migrate(coord_t *c, coord_job_t *j, int stage)
{
    uint32_t p = j->placement[stage].parallelism;
    init(j, stage, p, NULL, 0);
    eddy_info("job %s: %u instance%s of %s to move (fluid, steps of %u key groups)", j->id,
              j->n_moves, j->n_moves == 1 ? "" : "s", j->graph.stages[stage].name, step_groups(c));
    j->fluid_phase = COORD_FLUID_EXPAND;
    pause_for_deploy(c, j);
}

eddy_task_rename_t *coord_fluid_renames(const coord_job_t *j, uint32_t *n)
{
    *n = 0;
    if (!j->fluid || !j->n_moves || j->fluid_phase != COORD_FLUID_SHRINK)
        return NULL;
    eddy_task_rename_t *r = malloc(j->n_moves * sizeof *r);
    for (uint32_t k = 0; r && k < j->n_moves; k++)
        r[(*n)++] = (eddy_task_rename_t){(uint32_t)j->rescale_stage, j->rescale_from + k,
                                         j->moves[k].instance};
    return r;
}

/* A migration's placement before coord_place keeps it: at EXPAND the new
 * instances rescale_from + k on the moves' targets, at SHRINK each moved
 * instance where its new one ran (the new ones then go). */
static int place_moves(coord_job_t *j)
{
    eddy_stage_placement_t *pl = &j->placement[j->rescale_stage];
    uint32_t p = j->rescale_from;
    if (j->fluid_phase == COORD_FLUID_SHRINK) {
        for (uint32_t k = 0; k < j->n_moves && p + k < pl->parallelism; k++)
            if (j->moves[k].instance < p)
                pl->worker_of[j->moves[k].instance] = pl->worker_of[p + k];
        return 0;
    }
    uint32_t *w = realloc(pl->worker_of, (p + j->n_moves) * sizeof *w);
    if (!w)
        return -1;
    for (uint32_t k = 0; k < j->n_moves; k++)
        w[p + k] = j->moves[k].to;
    pl->worker_of = w;
    pl->parallelism = p + j->n_moves;
    return 0;
}

/* The barrier of EXPAND or SHRINK was acknowledged by every task: the
 * placement at the new parallelism goes out (EXPAND: routed as at the old
 * one, the new instances owning nothing). */
void coord_fluid_on_snapshot(coord_t *c, coord_job_t *j)
{
    coord_pending_checkpoint_t *pc = j->pending;
    j->pending = NULL;
    j->migration = pc->id;
    if (coord_job_has_finished(j)) {
        /* A task that ended during the steps sent its end of stream on the
         * old epoch's channels: the new epoch's instances would wait for it
         * forever (the compose test's hang). A restore deploys the tasks
         * its checkpoint recorded finished at their end and replays the rest. */
        coord_pending_checkpoint_destroy(&pc);
        coord_restore_job(c, j, "tasks reached the end of their input during it", true);
        return;
    }
    /* the barrier went behind every queued record: the wait a marker sees */
    uint64_t now_ms = eddy_mono_ms();
    j->fluid_lag_ms = now_ms > pc->started_ms ? now_ms - pc->started_ms : 0;
    uint32_t p[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        p[s] = coord_job_parallelism(j, s);
    p[j->rescale_stage] = j->rescale_to;
    if (j->n_moves && j->fluid_phase == COORD_FLUID_EXPAND)
        p[j->rescale_stage] = j->rescale_from + j->n_moves;
    eddy_err_t err = {{0}};
    if (j->n_moves && place_moves(j) < 0) {
        coord_pending_checkpoint_destroy(&pc);
        coord_restore_job(c, j, "out of memory", true);
        return;
    }
    if (coord_place(c, j, p, &err) < 0) {
        coord_pending_checkpoint_destroy(&pc);
        coord_restore_job(c, j, err.msg, true);
        return;
    }
    j->placement[j->rescale_stage].route_parallelism =
        j->fluid_phase == COORD_FLUID_EXPAND ? j->rescale_from : 0;
    coord_deploy(c, j, EDDY_DEPLOY_RESCALE, j->migration, pc->positions);
    coord_pending_checkpoint_destroy(&pc);
}

static void issue_steps(coord_t *c, coord_job_t *j, bool starting);

/* Every worker confirmed EXPAND's deploy and the sources are about to
 * start (deploy.c, before START): the first steps go now, so that their
 * markers are the first thing on every channel, ahead of the records the
 * sources send when they start. Sent later, behind a job that is behind,
 * they would wait for the queues that refill at once. */
void coord_fluid_before_start(coord_t *c, coord_job_t *j)
{
    if (!j->fluid || j->fluid_phase != COORD_FLUID_EXPAND)
        return;
    uint32_t q = j->placement[j->rescale_stage].parallelism;
    j->placement[j->rescale_stage].route_parallelism = 0; /* a restore places uniformly */
    if (start_steps(c, j, q, j->rescale_from) == 0) /* a failure restores the job */
        issue_steps(c, j, true);
}

/* Every worker confirmed EXPAND's or SHRINK's deploy (the sources resume). */
void coord_fluid_on_deployed(coord_t *c, coord_job_t *j)
{
    j->fluid_pause_ms += (double)(eddy_mono_ns() - j->pause_started_ns) / 1e6;
    coord_reaper_remove(c->reaper, j->id, j->migration);
    j->migration = 0;
    if (j->fluid_phase == COORD_FLUID_SHRINK)
        done(c, j);
    /* else the steps began before START (coord_fluid_before_start); the
     * rest go from coord_fluid_tick and coord_fluid_on_step_done */
}

/* Whether a periodic checkpoint is due but for the steps in flight: no
 * more steps start, so that it finds a moment with none. */
static bool checkpoint_waits(const coord_t *c, const coord_job_t *j, uint64_t now_ms)
{
    return c->opts->checkpoint_interval_ms && now_ms >= j->last_trigger_ms + c->opts->checkpoint_interval_ms;
}

/* Sends the next step. */
static int issue_step(coord_t *c, coord_job_t *j, bool early)
{
    const eddy_route_step_t *st = &j->fluid_plan.steps[j->fluid_next_step];
    const uint32_t *kgs = &j->fluid_plan.kgs[st->first + j->fluid_step_off];
    uint32_t n = groups_for_bytes(c, j, st->from, st->n - j->fluid_step_off);
    if (j->fluid_seq_epoch != j->epoch) {
        j->fluid_seq_epoch = j->epoch;
        j->fluid_seq = 0;
    }
    uint64_t version = ((uint64_t)j->epoch << 32) | ++j->fluid_seq;
    eddy_err_t err = {{0}};
    if (eddy_route_table_apply(&j->fluid_table, version, kgs, n, st->to, &err) < 0) {
        coord_restore_job(c, j, err.msg, true);
        return -1;
    }
    j->fluid_steps_taken++;
    j->fluid_flight[j->n_fluid_flight++] = (coord_fluid_flight_t){
        .version = version, .n = n, .from = st->from, .to = st->to,
        .number = j->fluid_steps_taken, .early = early, .started_ms = eddy_mono_ms()};
    if (j->n_fluid_flight > j->fluid_most_flight)
        j->fluid_most_flight = j->n_fluid_flight;
    eddy_msg_t m = {.type = EDDY_MSG_ROUTE_STEP};
    m.u.route_step.job = j->num;
    m.u.route_step.epoch = j->epoch;
    m.u.route_step.stage = (uint32_t)j->rescale_stage;
    m.u.route_step.version = version;
    m.u.route_step.to = st->to;
    m.u.route_step.n_kgs = n;
    m.u.route_step.kgs = (uint32_t *)kgs;
    coord_broadcast(c, &m);
    eddy_debug("job %s: fluid step %u (plan step %u/%u): %u key groups %u -> %u (routing version %"
               PRIu64 "), %u in flight%s", j->id, j->fluid_steps_taken, j->fluid_next_step + 1,
               j->fluid_plan.n_steps, n, st->from, st->to, version, j->n_fluid_flight,
               early ? ", before the sources start" : "");
    j->fluid_step_off += n;
    if (j->fluid_step_off >= st->n) {
        j->fluid_next_step++;
        j->fluid_step_off = 0;
    }
    return 0;
}

/* The next steps, up to steps_in_flight, or the end of the steps.
 * starting: before START of EXPAND's deploy (the job is not running yet). */
static void issue_steps(coord_t *c, coord_job_t *j, bool starting)
{
    if (j->fluid_next_step == j->fluid_plan.n_steps) {
        if (j->n_fluid_flight || starting)
            return;
        if (j->rescale_to < j->rescale_from || j->n_moves) {
            j->fluid_phase = COORD_FLUID_SHRINK;
            pause_for_deploy(c, j);
        } else {
            done(c, j);
        }
        return;
    }
    if (!starting && (j->pending || j->state != JOB_RUNNING))
        return; /* a checkpoint first: each group in exactly one snapshot */
    if (!starting && j->n_fluid_flight && checkpoint_waits(c, j, eddy_mono_ms()))
        return; /* the steps in flight end, then the checkpoint, then more */
    uint32_t want = steps_in_flight(c, j);
    while (j->fluid_next_step < j->fluid_plan.n_steps && j->n_fluid_flight < want)
        if (issue_step(c, j, starting) < 0)
            return;
}

void coord_fluid_on_step_done(coord_t *c, const eddy_msg_t *m)
{
    coord_job_t *j = coord_job_by_num(c, m->u.step_done.job);
    if (!j || !j->fluid || j->epoch != m->u.step_done.epoch || (int)m->u.step_done.stage != j->rescale_stage)
        return; /* stale: from before a restore, or of an abandoned migration */
    uint32_t k = 0;
    while (k < j->n_fluid_flight && j->fluid_flight[k].version != m->u.step_done.version)
        k++;
    if (k == j->n_fluid_flight || m->u.step_done.instance != j->fluid_flight[k].to)
        return;
    coord_fluid_flight_t f = j->fluid_flight[k];
    memmove(&j->fluid_flight[k], &j->fluid_flight[k + 1], (j->n_fluid_flight - k - 1) * sizeof f);
    j->n_fluid_flight--;
    uint64_t took_ms = eddy_mono_ms() - f.started_ms;
    uint64_t us = m->u.step_done.transfer_us, bytes = m->u.step_done.bytes;
    j->fluid_bytes += bytes;
    j->fluid_groups += f.n;
    j->fluid_transfer_us += us;
    /* What the step spent before its old owner began sending: its markers'
     * wait behind queued records (a step sent before the sources started
     * saw empty queues, and says nothing about the job's lag). */
    uint64_t wait_ms = took_ms > us / 1000 ? took_ms - us / 1000 : 0;
    if (!f.early)
        j->fluid_lag_ms = wait_ms;
    if (us)
        eddy_info("job %s: fluid step %u: %u key groups (%" PRIu64 " bytes) %u -> %u copied in %.1f "
                  "ms (%.0f MB/s), step done in %" PRIu64 " ms (markers about %" PRIu64 " ms)",
                  j->id, f.number, f.n, bytes, f.from, f.to, (double)us / 1e3,
                  (double)bytes / 1048576.0 / ((double)us / 1e6), took_ms, wait_ms);
    else
        eddy_info("job %s: fluid step %u: %u key groups (%" PRIu64 " bytes) %u -> %u, step done in %"
                  PRIu64 " ms", j->id, f.number, f.n, bytes, f.from, f.to, took_ms);
    /* A periodic checkpoint that came due during the steps goes before
     * more steps (issue_steps stops sending them; the tick resumes the
     * steps when it ended): a checkpoint waits for the steps in flight,
     * never for the whole migration. Otherwise every step started the next
     * at once and no checkpoint found a moment between two steps. */
    if (j->fluid_next_step < j->fluid_plan.n_steps && coord_checkpoint_due(c, j, eddy_mono_ms())) {
        eddy_debug("job %s: checkpoint before fluid step %u", j->id, j->fluid_steps_taken + 1);
        coord_checkpoint_trigger(c, j, false);
    }
    issue_steps(c, j, false);
}

void coord_fluid_tick(coord_t *c, coord_job_t *j, uint64_t now_ms)
{
    if (!j->fluid || j->fluid_phase != COORD_FLUID_STEPS)
        return;
    for (uint32_t k = 0; k < j->n_fluid_flight; k++) {
        const coord_fluid_flight_t *f = &j->fluid_flight[k];
        if (now_ms > f->started_ms + c->opts->checkpoint_timeout_ms) {
            char why[200];
            snprintf(why, sizeof why, "fluid migration step %u (%u key groups %u -> %u) was not "
                     "done within %u ms", f->number, f->n, f->from, f->to,
                     c->opts->checkpoint_timeout_ms);
            coord_restore_job(c, j, why, true);
            return;
        }
    }
    issue_steps(c, j, false);
}
