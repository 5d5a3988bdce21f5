/* rescale.c - changing a keyed operator's parallelism while the job runs.
 *
 *  1. A checkpoint whose barrier also pauses the sources (checkpoint.c);
 *     at it the rescaled stage writes only the key groups that change
 *     owner: a migration snapshot, not a recovery point.
 *  2. When every task acknowledged it, a deploy in RESCALE mode (deploy.c)
 *     with the new parallelism; tasks load only the key groups they newly
 *     own, the others keep running with their state.
 *  3. When every worker confirmed, the sources resume and the rescale is
 *     recorded (and answered to the client that asked).
 * A failure meanwhile restores the job from its last complete checkpoint.
 * A migration (migrate.c, rebalancing) is the same at the same parallelism:
 * its moves give some instances another worker, and only those instances
 * write (all) their key groups into the migration snapshot. With
 * --migration fluid both go through fluid.c instead (key groups move in
 * steps while the sources run). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"

void coord_rescale_abandon(coord_t *c, coord_job_t *j, const char *why)
{
    /* A fluid migration's EXPAND added instances that a restore does not
     * keep: the stage goes back to its parallelism (the moved instances stay
     * where they were; the next rebalance plans again). */
    if (j->fluid && j->n_moves && j->rescale_stage >= 0 &&
        j->placement[j->rescale_stage].parallelism > j->rescale_from)
        j->placement[j->rescale_stage].parallelism = j->rescale_from;
    coord_fluid_clear(j);
    if (j->rescale_client.waiting) {
        coord_reply(c, j->rescale_client.identity, j->rescale_client.identity_len, 1, why);
        j->rescale_client.waiting = false;
    }
    j->rescale_stage = -1;
    if (j->migration) { /* a rescale's moved key groups, no longer needed */
        coord_reaper_remove(c->reaper, j->id, j->migration);
        j->migration = 0;
    }
    if (j->n_moves)
        coord_rebalance_migration_ended(c);
    free(j->moves);
    j->moves = NULL;
    j->n_moves = 0;
}

/* What a rescale and a migration check and set before their snapshot. */
static void begin(coord_t *c, coord_job_t *j, int stage, uint32_t to, const unsigned char *identity,
                  size_t identity_len)
{
    j->rescale_stage = stage;
    j->rescale_from = j->placement[stage].parallelism;
    j->rescale_to = to;
    j->pause_started_ns = eddy_mono_ns();
    j->rescale_client.waiting = identity_len > 0;
    if (identity_len) /* a migration has no client waiting, and no identity */
        memcpy(j->rescale_client.identity, identity, identity_len);
    j->rescale_client.identity_len = identity_len;
    coord_job_set_state(c, j, JOB_RESCALING);
    if (!j->pending)
        coord_checkpoint_trigger(c, j, true);
    /* else: the rescale's own checkpoint starts when the running one ends */
}

static int refuse_busy(const coord_job_t *j, eddy_err_t *err)
{
    if (j->state != JOB_RUNNING || j->rescale_stage >= 0)
        return eddy_err_set(err, "job %s is %s; try again when it is running", j->id,
                            j->n_moves                ? "migrating instances to balance the workers"
                            : j->rescale_stage >= 0 ? "already rescaling"
                                                    : coord_job_state_name(j->state));
    if (coord_job_has_finished(j))
        return eddy_err_set(err, "job %s has reached the end of its input; not rescaling", j->id);
    return 0;
}

/* The names of g's keyed stages, comma-separated (cut short with "..."):
 * the operators a rescale may name. A pipeline's are named after its steps
 * (docs/pipelines.md), so a user who guessed wrong learns them here. */
static void keyed_names(const eddy_job_graph_t *g, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t s = 0; s < g->n_stages; s++) {
        if (!eddy_stage_is_keyed(&g->stages[s]))
            continue;
        int n = snprintf(out + used, size - used, "%s%s", used ? ", " : "", g->stages[s].name);
        if (n < 0 || (size_t)n >= size - used) {
            snprintf(out + (size > 4 ? size - 4 : 0), size > 4 ? 4 : size, "...");
            return;
        }
        used += (size_t)n;
    }
    if (!used)
        snprintf(out, size, "none");
}

int coord_job_rescale(coord_t *c, const char *job_id, const char *stage, uint32_t parallelism,
                      const unsigned char *identity, size_t identity_len, eddy_err_t *err)
{
    coord_job_t *j = coord_job_find(c, job_id);
    if (!j)
        return eddy_err_set(err, "no job '%s'", job_id);
    int s = eddy_graph_find_stage(&j->graph, stage);
    char keyed[200];
    if (s < 0 || !eddy_stage_is_keyed(&j->graph.stages[s]))
        keyed_names(&j->graph, keyed, sizeof keyed);
    if (s < 0)
        return eddy_err_set(err, "job %s has no operator '%s' (its keyed operators: %s)", job_id,
                            stage, keyed);
    if (!eddy_stage_is_keyed(&j->graph.stages[s]))
        return eddy_err_set(err, "operator '%s' is not keyed; only keyed operators can be rescaled "
                            "(%s's: %s)", stage, job_id, keyed);
    if (parallelism < 1 || parallelism > j->graph.max_parallelism)
        return eddy_err_set(err, "parallelism %u is out of range 1..%u (the job's max parallelism)",
                            parallelism, j->graph.max_parallelism);
    if (refuse_busy(j, err) < 0)
        return -1;
    uint32_t old = j->placement[s].parallelism;
    if (old == parallelism) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s/%s already has parallelism %u", job_id, stage, parallelism);
        coord_reply(c, identity, identity_len, 0, msg);
        return 0;
    }
    if (c->opts->migration == EDDY_MIGRATION_FLUID)
        return coord_fluid_begin(c, j, s, parallelism, identity, identity_len, err);
    eddy_info("job %s: rescaling %s %u -> %u", job_id, stage, old, parallelism);
    begin(c, j, s, parallelism, identity, identity_len);
    return 0;
}

int coord_job_migrate(coord_t *c, coord_job_t *j, const eddy_rebalance_move_t *moves, uint32_t n,
                      const char *why, eddy_err_t *err)
{
    uint32_t s = moves[0].stage;
    if (s >= j->graph.n_stages || !eddy_stage_is_keyed(&j->graph.stages[s]))
        return eddy_err_set(err, "job %s: stage %u is not keyed; only keyed instances move", j->id, s);
    if (refuse_busy(j, err) < 0)
        return -1;
    j->moves = malloc(n * sizeof *j->moves);
    if (!j->moves)
        return eddy_err_set(err, "out of memory");
    memcpy(j->moves, moves, n * sizeof *moves);
    j->n_moves = n;
    snprintf(j->migration_why, sizeof j->migration_why, "%s", why);
    if (c->opts->migration == EDDY_MIGRATION_FLUID)
        coord_fluid_migrate(c, j, (int)s);
    else
        begin(c, j, (int)s, j->placement[s].parallelism, NULL, 0);
    return 0;
}

uint32_t *coord_migration_moving(const coord_job_t *j, uint32_t *n)
{
    *n = 0;
    uint32_t *moving = j->n_moves ? malloc(j->n_moves * sizeof *moving) : NULL;
    for (uint32_t i = 0; moving && i < j->n_moves; i++)
        moving[(*n)++] = j->moves[i].instance;
    return moving;
}

/* The moves' instances get their new workers; coord_place then keeps them
 * there, or re-places one whose new worker left meanwhile. */
static void apply_moves(coord_job_t *j)
{
    eddy_stage_placement_t *pl = &j->placement[j->rescale_stage];
    for (uint32_t i = 0; i < j->n_moves; i++) {
        const eddy_rebalance_move_t *m = &j->moves[i];
        if (pl->worker_of && m->instance < pl->parallelism && pl->worker_of[m->instance] == m->from)
            pl->worker_of[m->instance] = m->to;
    }
}

void coord_rescale_on_snapshot(coord_t *c, coord_job_t *j)
{
    if (j->fluid) {
        coord_fluid_on_snapshot(c, j);
        return;
    }
    coord_pending_checkpoint_t *pc = j->pending;
    j->pending = NULL;
    j->migration = pc->id;
    j->migration_bytes = pc->cost.bytes;
    uint32_t p[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        p[s] = coord_job_parallelism(j, s);
    p[j->rescale_stage] = j->rescale_to;
    apply_moves(j);
    eddy_err_t err;
    if (coord_place(c, j, p, &err) < 0) {
        coord_pending_checkpoint_destroy(&pc);
        coord_restore_job(c, j, err.msg, true);
        return;
    }
    /* sources are not keyed, so their positions keep their order */
    coord_deploy(c, j, EDDY_DEPLOY_RESCALE, j->migration, pc->positions);
    coord_pending_checkpoint_destroy(&pc);
}

void coord_rescale_done(coord_t *c, coord_job_t *j)
{
    if (j->fluid) {
        coord_fluid_on_deployed(c, j);
        return;
    }
    double pause_ms = (double)(eddy_mono_ns() - j->pause_started_ns) / 1e6;
    rescale_record_t *r = &j->rescales[j->n_rescales % COORD_MAX_RESCALES];
    j->n_rescales++;
    r->time_ms = eddy_wall_ms();
    memcpy(r->stage, j->graph.stages[j->rescale_stage].name, sizeof r->stage);
    r->old_p = j->rescale_from;
    r->new_p = j->rescale_to;
    r->pause_ms = pause_ms;
    r->bytes_moved = j->deploy_bytes;
    if (j->n_moves) /* a migration's bytes are counted apart, like its count */
        j->migration_bytes_total += r->bytes_moved;
    else
        j->rescale_bytes_total += r->bytes_moved;
    r->groups_moved = j->deploy_groups;
    r->checkpoint = j->migration;
    r->instances_moved = j->n_moves;
    r->fluid_steps = 0; /* a sudden one */
    r->migration_ms = pause_ms;
    snprintf(r->why, sizeof r->why, "%s", j->n_moves ? j->migration_why : "");
    coord_reaper_remove(c->reaper, j->id, j->migration);
    j->migration = 0;
    char msg[256];
    if (j->n_moves) {
        j->n_migrations++;
        j->instances_migrated += j->n_moves;
        snprintf(msg, sizeof msg,
                 "migrated %u instance%s of %s/%s: paused %.1f ms, moved %" PRIu64 " key groups (%" PRIu64 " bytes)",
                 j->n_moves, j->n_moves == 1 ? "" : "s", j->id, r->stage, pause_ms, r->groups_moved,
                 r->bytes_moved);
        free(j->moves);
        j->moves = NULL;
        j->n_moves = 0;
        coord_rebalance_migration_ended(c);
    } else {
        snprintf(msg, sizeof msg,
                 "rescaled %s/%s %u -> %u: paused %.1f ms, moved %" PRIu64 " key groups (%" PRIu64 " bytes)",
                 j->id, r->stage, r->old_p, r->new_p, pause_ms, r->groups_moved, r->bytes_moved);
    }
    eddy_info("%s", msg);
    if (j->rescale_client.waiting) {
        coord_reply(c, j->rescale_client.identity, j->rescale_client.identity_len, 0, msg);
        j->rescale_client.waiting = false;
    }
    j->rescale_stage = -1;
    coord_job_store_save(c, j, 3, NULL, NULL);
}
