/* test_counters.c - job counters that never go backwards
 * (coordinator/counters.c): the increase of each task is added once, a
 * restore's new tasks add from zero, a rescale's kept tasks continue, stale
 * heartbeats are ignored, and the saved slots let a restarted coordinator
 * continue a running task without counting it twice. */
#include <criterion/criterion.h>
#include <string.h>

#include "coordinator/counters.h"
#include "tests/unit/leak_check.h"

TestSuite(counters, .fini = eddy_test_leak_check);

static eddy_task_metrics_t task(uint32_t epoch, uint32_t stage, uint32_t instance, uint64_t in)
{
    eddy_task_metrics_t m = {.job = 1, .epoch = epoch, .stage = stage, .instance = instance};
    m.records_in = in;
    m.records_out = in * 2;
    m.busy_ns = in * 1000;
    return m;
}

/* The totals now (views show them once saved: see shown_after_save). */
static uint64_t stage_in(coord_counters_t *c, uint32_t stage)
{
    coord_counters_show_all(c, 1);
    coord_counts_t t;
    coord_counters_stage(c, stage, false, &t);
    return t.records_in;
}

static bool keep_all(void *arg, uint32_t stage, uint32_t instance, const char *worker)
{
    (void)arg;
    (void)stage;
    (void)worker;
    return instance == 0; /* the rescale keeps instance 0, drops instance 1 */
}

Test(counters, heartbeats_add_each_increase_once)
{
    coord_counters_t *c = coord_counters_new();
    coord_counters_begin_epoch(c, 1, NULL, NULL);
    eddy_task_metrics_t m = task(1, 0, 0, 100);
    coord_counters_observe(c, "A#1", 1, &m);
    coord_counters_observe(c, "A#1", 1, &m); /* the same heartbeat twice */
    m = task(1, 0, 0, 150);
    coord_counters_observe(c, "A#1", 1, &m);
    m = task(1, 0, 1, 40);
    coord_counters_observe(c, "B#2", 2, &m);
    cr_assert_eq(stage_in(c, 0), 190);
    coord_counts_t t;
    coord_counters_show_all(c, 1);
    coord_counters_stage(c, 0, false, &t);
    cr_assert_eq(t.records_out, 380);
    cr_assert_eq(t.busy_ns, 190000);
    coord_counters_destroy(&c);
    cr_assert_null(c);
}

Test(counters, a_restore_adds_new_tasks_from_zero_and_ignores_stale_ones)
{
    coord_counters_t *c = coord_counters_new();
    coord_counters_begin_epoch(c, 1, NULL, NULL);
    eddy_task_metrics_t m = task(1, 0, 0, 1000);
    coord_counters_observe(c, "A#1", 1, &m);
    coord_counters_begin_epoch(c, 2, NULL, NULL); /* restore: tasks start again */
    m = task(1, 0, 0, 1200);                     /* a late heartbeat of the old task */
    coord_counters_observe(c, "A#1", 1, &m);
    cr_assert_eq(stage_in(c, 0), 1000, "a stale heartbeat is not counted");
    m = task(2, 0, 0, 30); /* the new task on the same process */
    coord_counters_observe(c, "A#1", 1, &m);
    cr_assert_eq(stage_in(c, 0), 1030);
    m = task(2, 0, 0, 50);
    coord_counters_observe(c, "A#1", 1, &m);
    cr_assert_eq(stage_in(c, 0), 1050);
    coord_counters_destroy(&c);
}

Test(counters, a_rescale_keeps_the_counts_of_kept_tasks)
{
    coord_counters_t *c = coord_counters_new();
    coord_counters_begin_epoch(c, 1, NULL, NULL);
    eddy_task_metrics_t m = task(1, 0, 0, 500);
    coord_counters_observe(c, "A#1", 1, &m);
    m = task(1, 0, 1, 300);
    coord_counters_observe(c, "B#2", 2, &m);
    coord_counters_begin_epoch(c, 2, keep_all, NULL);
    m = task(2, 0, 0, 520); /* kept: its counts continue under the new epoch */
    coord_counters_observe(c, "A#1", 1, &m);
    cr_assert_eq(stage_in(c, 0), 820, "no double count of the kept task");
    coord_counters_begin_epoch(c, 3, keep_all, NULL); /* scale out again: instance 1 is new */
    m = task(3, 0, 1, 7);
    coord_counters_observe(c, "B#2", 2, &m);
    cr_assert_eq(stage_in(c, 0), 827, "a new instance 1 counts from zero");
    coord_counters_destroy(&c);
}

Test(counters, a_moved_instance_is_a_new_task)
{
    coord_counters_t *c = coord_counters_new();
    coord_counters_begin_epoch(c, 1, NULL, NULL);
    eddy_task_metrics_t m = task(1, 0, 0, 500);
    coord_counters_observe(c, "A#1", 1, &m);
    coord_counters_begin_epoch(c, 2, keep_all, NULL);
    m = task(2, 0, 0, 600); /* on another process: counted from zero */
    coord_counters_observe(c, "C#3", 3, &m);
    cr_assert_eq(stage_in(c, 0), 1100);
    coord_counters_destroy(&c);
}

Test(counters, saved_slots_continue_a_running_task_after_a_coordinator_restart)
{
    const char *names[] = {"source", "count"};
    coord_counters_t *c = coord_counters_new();
    coord_counters_begin_epoch(c, 4, NULL, NULL);
    eddy_task_metrics_t m = task(4, 1, 0, 800);
    coord_counters_observe(c, "tcp://127.0.0.1:5000#77", 1, &m);
    coord_counters_capture(c, 1);
    json_t *doc = coord_counters_to_json(c, names, 2, 1);
    cr_assert(doc);
    coord_counters_destroy(&c);

    coord_counters_t *back = coord_counters_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(coord_counters_from_json(back, doc, names, 2, &err), 0, "%s", err.msg);
    json_decref(doc);
    cr_assert_eq(stage_in(back, 1), 800);
    cr_assert_eq(coord_counters_epoch(back), 4);
    m = task(4, 1, 0, 900); /* the same task, still running, reports to the new coordinator */
    coord_counters_observe(back, "tcp://127.0.0.1:5000#77", 9, &m);
    cr_assert_eq(stage_in(back, 1), 900, "only the increase since the save is added");
    coord_counters_begin_epoch(back, 6, NULL, NULL); /* the restore */
    m = task(6, 1, 0, 10);
    coord_counters_observe(back, "tcp://127.0.0.1:5000#77", 9, &m);
    cr_assert_eq(stage_in(back, 1), 910);
    coord_counters_destroy(&back);
}

Test(counters, malformed_saved_counters_are_refused)
{
    const char *names[] = {"source"};
    coord_counters_t *c = coord_counters_new();
    eddy_err_t err = {{0}};
    json_t *bad = json_loads("{\"epoch\": 1, \"tasks\": [{\"stage\": \"source\", \"instance\": 0, "
                             "\"worker\": \"A\", \"epoch\": 1, \"last\": [1,2], \"total\": [1,2,3,4,5,6,7]}]}",
                             0, NULL);
    cr_assert(bad);
    cr_assert_eq(coord_counters_from_json(c, bad, names, 1, &err), -1);
    cr_assert(strstr(err.msg, "counters"), "%s", err.msg);
    json_decref(bad);
    bad = json_loads("{\"tasks\": []}", 0, NULL);
    cr_assert_eq(coord_counters_from_json(c, bad, names, 1, &err), -1);
    json_decref(bad);
    coord_counters_destroy(&c);
}

Test(counters, views_show_what_was_saved)
{
    coord_counters_t *c = coord_counters_new();
    coord_counters_begin_epoch(c, 1, NULL, NULL);
    eddy_task_metrics_t m = task(1, 0, 0, 100);
    coord_counters_observe(c, "A#1", 1, &m);
    coord_counts_t t;
    coord_counters_stage(c, 0, false, &t);
    cr_assert_eq(t.records_in, 0, "nothing saved yet");
    uint64_t first = coord_counters_capture(c, 1000);
    m = task(1, 0, 0, 150);
    coord_counters_observe(c, "A#1", 1, &m);
    uint64_t second = coord_counters_capture(c, 2000);
    m = task(1, 0, 0, 180);
    coord_counters_observe(c, "A#1", 1, &m);
    coord_counters_commit(c, first); /* superseded by the second save */
    coord_counters_stage(c, 0, false, &t);
    cr_assert_eq(t.records_in, 0);
    coord_counters_commit(c, second);
    coord_counters_stage(c, 0, false, &t);
    cr_assert_eq(t.records_in, 150, "the second save's totals, not the live 180");
    cr_assert_eq(coord_counters_shown_ms(c), 2000);
    coord_counters_stage(c, 0, true, &t);
    cr_assert_eq(t.records_in, 180, "live totals for the controller");
    cr_assert_eq(coord_counters_grand_total(c), 180 + 360 + 180000);
    coord_counters_destroy(&c);
}

Test(counters, job_counts_are_shown_as_saved_and_survive_a_restart)
{
    const char *names[] = {"source"};
    coord_counters_t *c = coord_counters_new();
    coord_job_counts_t now = {.checkpoints_completed = 5, .checkpoints_failed = 1, .rescales = 2,
                              .rescale_bytes = 4096, .restarts = 1, .migration_bytes = 512};
    coord_counters_set_job(c, &now);
    coord_job_counts_t t;
    coord_counters_job(c, false, &t);
    cr_assert_eq(t.checkpoints_completed, 0, "nothing saved yet");
    uint64_t save = coord_counters_capture(c, 1000);
    now.checkpoints_completed = 6; /* completed while the save was in flight */
    coord_counters_set_job(c, &now);
    coord_counters_commit(c, save);
    coord_counters_job(c, false, &t);
    cr_assert_eq(t.checkpoints_completed, 5, "the saved value, not the live 6");
    cr_assert_eq(t.rescale_bytes, 4096);
    coord_counters_job(c, true, &t);
    cr_assert_eq(t.checkpoints_completed, 6);
    /* a lower value (a coordinator that lost count) is ignored */
    coord_job_counts_t lower = {.checkpoints_completed = 2, .rescales = 3};
    coord_counters_set_job(c, &lower);
    coord_counters_job(c, true, &t);
    cr_assert_eq(t.checkpoints_completed, 6);
    cr_assert_eq(t.rescales, 3);
    cr_assert_eq(t.restarts, 1);

    coord_counters_capture(c, 2000);
    json_t *doc = coord_counters_to_json(c, names, 1, 2000);
    coord_counters_destroy(&c);
    coord_counters_t *back = coord_counters_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(coord_counters_from_json(back, doc, names, 1, &err), 0, "%s", err.msg);
    json_decref(doc);
    coord_counters_job(back, false, &t);
    cr_assert(t.checkpoints_completed == 6 && t.checkpoints_failed == 1 && t.rescales == 3 &&
                  t.rescale_bytes == 4096 && t.restarts == 1 && t.migration_bytes == 512,
              "a restarted coordinator shows what was saved");
    cr_assert_eq(coord_counters_grand_total(back), 6 + 1 + 3 + 4096 + 1 + 512);
    coord_counters_destroy(&back);

    /* documents from before the job's counts: all zero; malformed ones refused */
    back = coord_counters_new();
    doc = json_loads("{\"epoch\": 1, \"tasks\": []}", 0, NULL);
    cr_assert_eq(coord_counters_from_json(back, doc, names, 1, &err), 0, "%s", err.msg);
    json_decref(doc);
    coord_counters_job(back, false, &t);
    cr_assert_eq(t.restarts, 0);
    doc = json_loads("{\"epoch\": 1, \"tasks\": [], \"job\": {\"rescales\": -1}}", 0, NULL);
    cr_assert_eq(coord_counters_from_json(back, doc, names, 1, &err), -1);
    json_decref(doc);
    coord_counters_destroy(&back);
}
