/* rebalance.c - the rebalance planner (see rebalance.h): which instances
 * move to which worker so that the load per core becomes even. Pure: the
 * coordinator's side (when to plan, one migration at a time, carrying a
 * plan out with the rescale machinery) is migrate.c. */
#include "coordinator/rebalance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct candidate {
    uint32_t stage;    /* index into the stages given */
    uint32_t instance;
    uint32_t worker;   /* index into the workers given */
    bool moved;
} candidate_t;

static int worker_index(const eddy_rebalance_worker_t *workers, uint32_t n, uint32_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (workers[i].id == id)
            return (int)i;
    return -1;
}

/* Unknown cores weigh like the smallest machine reported: a worker whose
 * size we do not know is not given more than any known one. */
static uint64_t *weights_of(const eddy_rebalance_worker_t *workers, uint32_t n)
{
    uint64_t *w = calloc(n ? n : 1, sizeof *w);
    if (!w)
        return NULL;
    uint32_t fewest = 0;
    for (uint32_t i = 0; i < n; i++)
        if (workers[i].cores && (!fewest || workers[i].cores < fewest))
            fewest = workers[i].cores;
    for (uint32_t i = 0; i < n; i++)
        w[i] = workers[i].cores ? workers[i].cores : fewest ? fewest : 1;
    return w;
}

/* Whether x carries less per core than y: load[x]/w[x] < load[y]/w[y]. */
static bool lighter(const uint32_t *load, const uint64_t *w, uint32_t x, uint32_t y)
{
    return (uint64_t)load[x] * w[y] < (uint64_t)load[y] * w[x];
}

/* Moving one instance from a to b lowers sum(load^2 / weight) exactly when
 * (2 load[b] + 1) / w[b] < (2 load[a] - 1) / w[a]; with equal weights, when
 * load[a] - load[b] > 1. The sum falls with every move, so the walk ends. */
static bool move_helps(const uint32_t *load, const uint64_t *w, uint32_t a, uint32_t b)
{
    if (load[a] == 0)
        return false;
    return (2 * (uint64_t)load[b] + 1) * w[a] < (2 * (uint64_t)load[a] - 1) * w[b];
}

/* An instance on worker a to move: one of the same job and stage as the
 * previous move if there is one (fewer migrations), else the first. */
static int pick(candidate_t *cand, uint32_t n, uint32_t a, const eddy_rebalance_stage_t *stages,
                const eddy_rebalance_move_t *prev)
{
    int first = -1;
    for (uint32_t k = 0; k < n; k++) {
        if (cand[k].moved || cand[k].worker != a)
            continue;
        const eddy_rebalance_stage_t *st = &stages[cand[k].stage];
        if (prev && st->job == prev->job && st->stage == prev->stage)
            return (int)k;
        if (first < 0)
            first = (int)k;
    }
    return first;
}

/* Moves of one job and stage together, groups in the order they first
 * appear (the coordinator carries out one group per migration). */
static void group_moves(eddy_rebalance_move_t *m, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t next = i + 1;
        for (uint32_t k = i + 1; k < n; k++) {
            if (m[k].job != m[i].job || m[k].stage != m[i].stage)
                continue;
            eddy_rebalance_move_t keep = m[k];
            memmove(&m[next + 1], &m[next], (k - next) * sizeof *m);
            m[next++] = keep;
        }
        i = next - 1;
    }
}

void eddy_rebalance_plan_clear(eddy_rebalance_plan_t *plan)
{
    free(plan->moves);
    free(plan->load_before);
    free(plan->load_after);
    memset(plan, 0, sizeof *plan);
}

int eddy_rebalance_compute(const eddy_rebalance_worker_t *workers, uint32_t n_workers,
                           const eddy_rebalance_stage_t *stages, uint32_t n_stages,
                           eddy_rebalance_plan_t *plan, eddy_err_t *err)
{
    memset(plan, 0, sizeof *plan);
    uint32_t n_cand = 0;
    for (uint32_t s = 0; s < n_stages; s++)
        if (stages[s].movable)
            n_cand += stages[s].parallelism;
    plan->n_workers = n_workers;
    plan->load_before = calloc(n_workers ? n_workers : 1, sizeof *plan->load_before);
    plan->load_after = calloc(n_workers ? n_workers : 1, sizeof *plan->load_after);
    plan->moves = calloc(n_cand ? n_cand : 1, sizeof *plan->moves);
    candidate_t *cand = calloc(n_cand ? n_cand : 1, sizeof *cand);
    uint64_t *w = weights_of(workers, n_workers);
    if (!plan->load_before || !plan->load_after || !plan->moves || !cand || !w) {
        free(cand);
        free(w);
        eddy_rebalance_plan_clear(plan);
        return eddy_err_set(err, "out of memory");
    }
    uint32_t *load = plan->load_after;
    n_cand = 0;
    for (uint32_t s = 0; s < n_stages; s++) {
        for (uint32_t i = 0; i < stages[s].parallelism; i++) {
            int x = worker_index(workers, n_workers, stages[s].worker_of[i]);
            if (x < 0)
                continue;
            load[x]++;
            if (stages[s].movable)
                cand[n_cand++] = (candidate_t){s, i, (uint32_t)x, false};
        }
    }
    memcpy(plan->load_before, load, n_workers * sizeof *load);
    while (n_workers > 1 && plan->n_moves < n_cand) {
        uint32_t b = 0;
        for (uint32_t x = 1; x < n_workers; x++)
            if (lighter(load, w, x, b))
                b = x;
        int a = -1;
        for (uint32_t x = 0; x < n_workers; x++) {
            if (x == b || !move_helps(load, w, x, b) || (a >= 0 && !lighter(load, w, (uint32_t)a, x)))
                continue;
            if (pick(cand, n_cand, x, stages, NULL) >= 0)
                a = (int)x;
        }
        if (a < 0)
            break;
        const eddy_rebalance_move_t *prev = plan->n_moves ? &plan->moves[plan->n_moves - 1] : NULL;
        candidate_t *c = &cand[pick(cand, n_cand, (uint32_t)a, stages, prev)];
        c->moved = true;
        load[a]--;
        load[b]++;
        plan->moves[plan->n_moves++] = (eddy_rebalance_move_t){
            .job = stages[c->stage].job, .stage = stages[c->stage].stage, .instance = c->instance,
            .from = workers[a].id, .to = workers[b].id};
    }
    group_moves(plan->moves, plan->n_moves);
    free(cand);
    free(w);
    return 0;
}

char *eddy_rebalance_spread(const uint32_t *loads, uint32_t n, char *buf, size_t size)
{
    size_t used = 0;
    if (size)
        buf[0] = '\0';
    for (uint32_t i = 0; i < n && used < size; i++) {
        int k = snprintf(buf + used, size - used, "%s%u", i ? "/" : "", loads[i]);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    return buf;
}
