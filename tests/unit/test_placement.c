/* test_placement.c - the pure placement function (coordinator/placement.c):
 * a fresh spread, instances that stay on their workers through a rescale
 * and a lost worker, orphans to the least loaded worker, and no worker. */
#include <criterion/criterion.h>

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

Test(placement, a_fresh_job_spreads_instance_i_on_worker_i_mod_w)
{
    const uint32_t par[3] = {2, 3, 1}, workers[3] = {7, 3, 5}; /* any order */
    eddy_stage_placement_t p[3];
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_placement_compute(3, par, NULL, workers, 3, p, &err), 0, "%s", err.msg);
    cr_assert_eq(p[0].worker_of[0], 3);
    cr_assert_eq(p[0].worker_of[1], 5);
    cr_assert_eq(p[1].worker_of[2], 7);
    cr_assert_eq(p[2].worker_of[0], 3, "instance 0 of every stage shares worker 3");
    eddy_placement_clear(3, p);
}

Test(placement, a_rescale_keeps_instances_and_fills_the_least_loaded)
{
    const uint32_t workers[3] = {1, 2, 3};
    const uint32_t before[2] = {2, 2};
    eddy_stage_placement_t cur[2], next[2];
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_placement_compute(2, before, NULL, workers, 3, cur, &err), 0);
    /* cur: stage 0 on 1, 2; stage 1 on 1, 2; worker 3 idle */
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
