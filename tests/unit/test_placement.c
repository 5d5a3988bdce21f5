/* test_placement.c - the pure placement function (coordinator/placement.c):
 * a fresh spread (every worker gets work), instances that stay on their workers through a rescale
 * and a lost worker, orphans to the least loaded worker, and no worker. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "coordinator/placement.h"
#include "tests/unit/leak_check.h"

TestSuite(placement, .fini = eddy_test_leak_check);

static uint32_t count_on(const eddy_stage_placement_t *p, uint32_t n_stages, uint32_t worker)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < n_stages; s++)
        for (uint32_t i = 0; i < p[s].parallelism; i++)
            n += p[s].worker_of[i] == worker;
    return n;
}

Test(placement, a_fresh_job_deals_its_instances_round_robin)
{
    const uint32_t par[3] = {2, 3, 1}, workers[3] = {7, 3, 5}; /* any order */
    eddy_stage_placement_t p[3];
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_placement_compute(3, par, NULL, workers, 3, p, &err), 0, "%s", err.msg);
    cr_assert_eq(p[0].worker_of[0], 3);
    cr_assert_eq(p[0].worker_of[1], 5);
    cr_assert_eq(p[1].worker_of[0], 7, "a stage carries on where the previous one stopped");
    cr_assert_eq(p[1].worker_of[1], 3);
    cr_assert_eq(p[1].worker_of[2], 5);
    cr_assert_eq(p[2].worker_of[0], 7);
    eddy_placement_clear(3, p);
}

/* Issue 23: a wordcount (source 1, split 2, count 2) on three workers was
 * placed 3/2/0 and the third worker idled until another one joined. */
Test(placement, a_fresh_job_gives_every_worker_instances)
{
    const uint32_t par[3] = {1, 2, 2}, workers[3] = {1, 2, 3};
    eddy_stage_placement_t p[3];
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_placement_compute(3, par, NULL, workers, 3, p, &err), 0, "%s", err.msg);
    for (uint32_t w = 1; w <= 3; w++) {
        uint32_t n = count_on(p, 3, w);
        cr_assert(n >= 1 && n <= 2, "worker %u has %u instances (want 1 or 2)", w, n);
    }
    for (uint32_t s = 1; s < 3; s++)
        cr_assert_neq(p[s].worker_of[0], p[s].worker_of[1], "stage %u's instances share a worker", s);
    eddy_placement_clear(3, p);

    /* many stages, many workers: the counts differ by at most one */
    const uint32_t par2[5] = {1, 3, 4, 2, 1}, workers2[4] = {10, 20, 30, 40};
    eddy_stage_placement_t q[5];
    cr_assert_eq(eddy_placement_compute(5, par2, NULL, workers2, 4, q, &err), 0, "%s", err.msg);
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t k = 0; k < 4; k++) {
        uint32_t n = count_on(q, 5, workers2[k]);
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
    }
    cr_assert_leq(hi - lo, 1, "11 instances on 4 workers spread %u..%u", lo, hi);
    eddy_placement_clear(5, q);
}

Test(placement, a_rescale_keeps_instances_and_fills_the_least_loaded)
{
    const uint32_t workers[3] = {1, 2, 3};
    const uint32_t before[2] = {2, 2};
    eddy_stage_placement_t cur[2], next[2];
    eddy_err_t err = {{0}};
    /* cur: stage 0 on 1, 2; stage 1 on 1, 2; worker 3 idle (as if it joined later) */
    for (uint32_t s = 0; s < 2; s++) {
        cur[s].parallelism = before[s];
        cur[s].worker_of = malloc(2 * sizeof(uint32_t));
        cr_assert_not_null(cur[s].worker_of);
        cur[s].worker_of[0] = 1;
        cur[s].worker_of[1] = 2;
    }
    const uint32_t after[2] = {2, 4};
    cr_assert_eq(eddy_placement_compute(2, after, cur, workers, 3, next, &err), 0, "%s", err.msg);
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t i = 0; i < 2; i++)
            cr_assert_eq(next[s].worker_of[i], cur[s].worker_of[i], "instance %u/%u moved", s, i);
    cr_assert_eq(next[1].worker_of[2], 3, "the first new instance goes to the idle worker");
    cr_assert_eq(count_on(next, 2, 3), 2, "both new instances balance onto worker 3");
    eddy_placement_clear(2, next);

    /* worker 2 is gone: its instances are orphans, the others stay */
    const uint32_t left[2] = {1, 3};
    cr_assert_eq(eddy_placement_compute(2, before, cur, left, 2, next, &err), 0);
    cr_assert_eq(next[0].worker_of[0], 1);
    cr_assert_eq(next[1].worker_of[0], 1);
    cr_assert_eq(count_on(next, 2, 2), 0);
    cr_assert_eq(count_on(next, 2, 3), 2);
    eddy_placement_clear(2, next);
    eddy_placement_clear(2, cur);
}

Test(placement, no_worker_is_an_error_and_places_nothing)
{
    const uint32_t par[1] = {2};
    eddy_stage_placement_t p[1];
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_placement_compute(1, par, NULL, NULL, 0, p, &err), -1);
    cr_assert_str_eq(err.msg, "no alive workers");
    cr_assert_null(p[0].worker_of);
}
