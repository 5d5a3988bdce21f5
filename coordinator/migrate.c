/* migrate.c - rebalancing: when a worker joins after a job was placed, or
 * a usable worker runs nothing, instances of running jobs move onto the
 * lighter workers.
 *
 * The planner (rebalance.c) decides which instances move; this file decides
 * when, and hands one job's stage worth of moves at a time to the rescale
 * machinery as a migration (rescale.c: same parallelism, new placement; only
 * the moved instances' key groups travel). Rate limits, so that a cluster is
 * never busy only moving state: one migration at a time in the cluster, and
 * none within --rebalance-interval-ms of the previous one ending, nor of a
 * rescale of the same job (the controller's, which keeps its place: a job
 * that is rescaling is not migrated, and a migration in flight makes the
 * controller's request wait for its next interval). Only keyed stages of
 * running jobs move: their state travels by key group like a rescale's;
 * sources, stateless steps, sinks and stages with a two-phase-commit
 * operator stay where they run. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"

static uint32_t interval_ms(const coord_t *c)
{
    return c->opts->rebalance_interval_ms ? c->opts->rebalance_interval_ms : COORD_REBALANCE_INTERVAL_MS;
}

void coord_rebalance_worker_joined(coord_t *c)
{
    c->rebalance_check_ms = 0;
}

void coord_rebalance_migration_ended(coord_t *c)
{
    uint64_t now = eddy_mono_ms();
    c->rebalance_not_before_ms = now + interval_ms(c);
    c->rebalance_check_ms = c->rebalance_not_before_ms; /* the spread may still be uneven */
}

/* Whether worker id holds an instance of any job that has not ended. */
static bool holds_instances(const coord_t *c, uint32_t id)
{
    for (const coord_job_t *j = c->jobs; j; j = j->next)
        if (!coord_job_ended(j) && !j->history && coord_job_on_worker(j, id))
            return true;
    return false;
}

/* A worker joined after the job was placed (placement at a fresh or restore
 * deploy already spread the job over the workers it saw), or a usable worker
 * runs nothing at all: one that joined before the job but was not usable
 * when it was placed (quarantined, say), or one a placement left idle. */
static bool worth_moving(const coord_t *c, const coord_job_t *j, uint64_t now)
{
    for (const coord_worker_t *w = c->workers; w; w = w->next)
        if (coord_worker_usable(w, now) && (w->registered_ms > j->placed_ms || !holds_instances(c, w->id)))
            return true;
    return false;
}

/* A job whose instances may move now: a worker joined since it was placed
 * or idles,
 * it runs with no rescale or deploy or restore in the way (once a deploy is
 * confirmed every task holds its key groups: they load before DEPLOYED),
 * and its last rescale was an interval ago. */
static bool movable_job(const coord_t *c, const coord_job_t *j, uint64_t now)
{
    if (j->state != JOB_RUNNING || j->rescale_stage >= 0 || coord_job_has_finished(j) || j->finishing ||
        j->restore_scheduled || j->deploys_pending || j->deploy_persisting ||
        !worth_moving(c, j, now))
        return false;
    if (!j->n_rescales)
        return true;
    int64_t last = j->rescales[(j->n_rescales - 1) % COORD_MAX_RESCALES].time_ms;
    return eddy_wall_ms() - last >= (int64_t)interval_ms(c);
}

/* A keyed stage that may move: its state is its key groups. One with a
 * two-phase-commit operator (prepare/commit) stays, as what it prepared
 * lives with its instance on its worker until a checkpoint commits it. */
static bool stage_movable(const eddy_stage_def_t *d)
{
    if (!eddy_stage_is_keyed(d))
        return false;
    for (uint32_t i = 0; i < d->n_ops; i++)
        if (d->ops[i].ops->prepare || d->ops[i].ops->commit)
            return false;
    return true;
}

static int cmp_worker(const void *a, const void *b)
{
    uint32_t x = ((const eddy_rebalance_worker_t *)a)->id, y = ((const eddy_rebalance_worker_t *)b)->id;
    return x < y ? -1 : x > y;
}

/* "worker 3 (w3) joined 1.2 s ago with 0 instances; spread 5/4/0 -> 4/4/1
 * over workers 1/2/3" */
static void explain(coord_t *c, const eddy_rebalance_plan_t *plan, const eddy_rebalance_worker_t *ws,
                    uint32_t n_moves, char *why, size_t size)
{
    uint32_t to = plan->moves[0].to, x = 0;
    while (x < plan->n_workers && ws[x].id != to)
        x++;
    const coord_worker_t *w = coord_find_worker(c, to);
    uint32_t *after = malloc(plan->n_workers * sizeof *after);
    if (!after || !w || x == plan->n_workers) {
        snprintf(why, size, "the spread is uneven");
        free(after);
        return;
    }
    memcpy(after, plan->load_before, plan->n_workers * sizeof *after);
    for (uint32_t i = 0; i < n_moves; i++)
        for (uint32_t k = 0; k < plan->n_workers; k++) {
            after[k] -= ws[k].id == plan->moves[i].from;
            after[k] += ws[k].id == plan->moves[i].to;
        }
    char before_s[96], after_s[96], ids[96];
    uint32_t *idv = malloc(plan->n_workers * sizeof *idv);
    for (uint32_t k = 0; idv && k < plan->n_workers; k++)
        idv[k] = ws[k].id;
    eddy_rebalance_spread(plan->load_before, plan->n_workers, before_s, sizeof before_s);
    eddy_rebalance_spread(after, plan->n_workers, after_s, sizeof after_s);
    eddy_rebalance_spread(idv ? idv : after, idv ? plan->n_workers : 0, ids, sizeof ids);
    double age_s = (double)(eddy_wall_ms() - w->registered_wall_ms) / 1000.0;
    uint32_t had = plan->load_before[x];
    char who[160];
    if (age_s < 60.0)
        snprintf(who, sizeof who, "worker %u (%.64s) joined %.1f s ago", to, w->name, age_s);
    else
        snprintf(who, sizeof who, "worker %u (%.64s) is the least loaded", to, w->name);
    /* a cluster of many workers has a long spread: the reason is cut then */
    if (snprintf(why, size, "%s with %u instance%s; spread %s -> %s over workers %s", who, had,
                 had == 1 ? "" : "s", before_s, after_s, ids) >= (int)size)
        eddy_debug("rebalance: the reason was cut to %zu bytes", size - 1);
    free(after);
    free(idv);
}

/* "count[0] 1->3, count[2] 1->3" */
static void list_moves(const coord_job_t *j, const eddy_rebalance_move_t *m, uint32_t n, char *out,
                       size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < n && used < size; i++) {
        int k = snprintf(out + used, size - used, "%s%s[%u] %u->%u", i ? ", " : "",
                         j->graph.stages[m[i].stage].name, m[i].instance, m[i].from, m[i].to);
        if (k < 0)
            break;
        used += (size_t)k;
    }
}

/* The usable workers, by id, and every placed stage of every job that has
 * not ended; *n_stages 0 and NULL when there is nothing placed. */
static int gather(coord_t *c, uint64_t now, eddy_rebalance_worker_t **ws, uint32_t *n_ws,
                  eddy_rebalance_stage_t **ss, uint32_t *n_ss)
{
    uint32_t nw = 0, ns = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        nw += coord_worker_usable(w, now);
    for (coord_job_t *j = c->jobs; j; j = j->next)
        if (!coord_job_ended(j) && !j->history)
            ns += j->graph.n_stages;
    *ws = calloc(nw ? nw : 1, sizeof **ws);
    *ss = calloc(ns ? ns : 1, sizeof **ss);
    if (!*ws || !*ss) {
        free(*ws);
        free(*ss);
        return -1;
    }
    *n_ws = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (coord_worker_usable(w, now))
            (*ws)[(*n_ws)++] = (eddy_rebalance_worker_t){w->id, w->cores};
    qsort(*ws, *n_ws, sizeof **ws, cmp_worker);
    *n_ss = 0;
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        if (coord_job_ended(j) || j->history)
            continue;
        bool movable = movable_job(c, j, now);
        for (uint32_t s = 0; s < j->graph.n_stages; s++) {
            if (!j->placement[s].worker_of)
                continue;
            (*ss)[(*n_ss)++] = (eddy_rebalance_stage_t){
                .job = j->num, .stage = s,
                .movable = movable && stage_movable(&j->graph.stages[s]),
                .parallelism = j->placement[s].parallelism, .worker_of = j->placement[s].worker_of};
        }
    }
    return 0;
}

void coord_rebalance_tick(coord_t *c, uint64_t now_ms)
{
    if (c->opts->no_rebalance || now_ms < c->rebalance_check_ms || now_ms < c->rebalance_not_before_ms)
        return;
    c->rebalance_check_ms = now_ms + COORD_REBALANCE_CHECK_MS;
    /* after a restart the jobs are placed once the workers had time to come back */
    if (c->resumed_jobs && now_ms < c->started_ms + coord_takeover_grace_ms(c))
        return;
    for (coord_job_t *j = c->jobs; j; j = j->next)
        if (j->n_moves && !coord_job_ended(j))
            return; /* one migration at a time in the cluster */
    eddy_rebalance_worker_t *ws;
    eddy_rebalance_stage_t *ss;
    uint32_t n_ws, n_ss;
    if (gather(c, now_ms, &ws, &n_ws, &ss, &n_ss) < 0)
        return;
    eddy_rebalance_plan_t plan;
    eddy_err_t err = {{0}};
    if (eddy_rebalance_compute(ws, n_ws, ss, n_ss, &plan, &err) < 0 || plan.n_moves == 0) {
        eddy_rebalance_plan_clear(&plan);
        free(ws);
        free(ss);
        return;
    }
    /* the first job and stage of the plan now; the rest after the interval */
    uint32_t n = 1;
    while (n < plan.n_moves && plan.moves[n].job == plan.moves[0].job &&
           plan.moves[n].stage == plan.moves[0].stage)
        n++;
    coord_job_t *j = coord_job_by_num(c, plan.moves[0].job);
    char why[COORD_MIGRATION_WHY_MAX], moves[512];
    explain(c, &plan, ws, n, why, sizeof why);
    if (j) {
        list_moves(j, plan.moves, n, moves, sizeof moves);
        if (coord_job_migrate(c, j, plan.moves, n, why, &err) == 0)
            eddy_info("job %s: migrating %s: %s", j->id, moves, why);
        else
            eddy_warn("job %s: not migrating %s: %s", j->id, moves, err.msg);
    }
    eddy_rebalance_plan_clear(&plan);
    free(ws);
    free(ss);
}
