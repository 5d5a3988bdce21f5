/* test_busy_worker.c - a busy worker is never declared dead; a stuck one is
 * (issue 28, "a busy worker must never be declared dead").
 *
 * A worker's heartbeats come from its loop; its liveness thread
 * (runtime/liveness.h) says on a connection of its own that the process
 * lives. The test hook EDDY_TEST_STALL_LOOP_MS=N (read by the worker,
 * inherited from the test through `eddy local`) blocks each worker's loop
 * once for N ms right after the job's first completed checkpoint, as a
 * loop writing a large final output does.
 *
 *  busy_worker_is_not_declared_dead  loops blocked for longer than the
 *                      heartbeat timeout: the coordinator logs them busy,
 *                      declares none dead, restores nothing, and the job's
 *                      output is exact.
 *  stuck_worker_is_restored  loops blocked for longer than a short
 *                      --stuck-timeout-ms: declared dead as stuck (never a
 *                      silent hang), the job restored, the output exact.
 *
 * The job is a rate-limited wordcount, so that its first checkpoint comes
 * well before its end. Every wait is the run's own end, with a deadline. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"
#include "tests/unit/leak_check.h"

#define RUN_TIMEOUT_MS 90000
#define HB_TIMEOUT "1500"

TestSuite(busy_worker, .fini = eddy_test_leak_check);

static eddy_test_cluster_t *cl;

/* Whether `eddy status` (its JSON) ever showed a worker busy. */
typedef struct busy_seen {
    int port;
    bool busy;
} busy_seen_t;

static void look_for_busy(void *arg)
{
    busy_seen_t *seen = arg;
    json_t *st = eddy_test_status(seen->port);
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (json_is_true(json_object_get(w, "busy")) && json_is_true(json_object_get(w, "alive")))
            seen->busy = true;
    }
    json_decref(st);
}

/* Runs eddy local (2 workers) over a wordcount whose loops stall for
 * stall_ms once, with --stuck-timeout-ms stuck_ms (NULL: its default);
 * returns its log (malloc'd) after checking exit 0 and the output, and
 * whether its status showed a worker busy meanwhile. */
static char *run_stalled(const char *stall_ms, const char *stuck_ms, bool *status_busy)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "busy-worker", .workers = 2, .checkpoint_interval = "300",
                                  .heartbeat_ms = "100", .heartbeat_timeout_ms = HB_TIMEOUT};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    char *dir = eddy_test_cluster_dir(cl);
    char input[700], out[700];
    snprintf(input, sizeof input, "%s/input.txt", dir);
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    cr_assert(eddy_gen_text(input, 120 * 1024, 11, &err) == 0, "%s", err.msg);
    size_t len = 0;
    char *text = eddy_read_file(input, &len);
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    free(text);
    /* about 3 s of input: the first checkpoint (300 ms) comes early in it */
    char rate[32];
    snprintf(rate, sizeof rate, "%zu", lines / 3 + 1);
    setenv("EDDY_TEST_STALL_LOOP_MS", stall_ms, 1); /* inherited by the workers */
    const char *job[] = {"--stuck-timeout-ms", stuck_ms ? stuck_ms : "60000", "--job", "wordcount",
                         "--input", input, "--output", out, "--rate", rate, NULL};
    int rc = eddy_test_cluster_start_local(cl, job, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    busy_seen_t seen = {eddy_test_cluster_port(cl, 0), false};
    rc = eddy_test_cluster_wait_local(cl, RUN_TIMEOUT_MS, 200, look_for_busy, &seen);
    *status_busy = seen.busy;
    unsetenv("EDDY_TEST_STALL_LOOP_MS");
    char *log = eddy_test_cluster_log_text(cl);
    cr_assert_eq(rc, 0, "eddy local exited %d (%s); logs:\n%s", rc, err.msg, log);
    size_t got = 0, want = 0;
    cr_assert_eq(eddy_test_same_wordcount(input, out, &got, &want), 1,
                 "output differs from the reference (%zu bytes, want %zu); logs:\n%s", got, want,
                 log);
    cr_assert(strstr(log, "test hook EDDY_TEST_STALL_LOOP_MS: blocking the loop"),
              "the loops never stalled (the job ended before its first checkpoint?); logs:\n%s",
              log);
    return log;
}

static void teardown(void)
{
    unsetenv("EDDY_TEST_STALL_LOOP_MS");
    eddy_test_cluster_destroy(&cl);
}

Test(busy_worker, busy_worker_is_not_declared_dead, .fini = teardown, .timeout = 120)
{
    bool status_busy = false;
    char *log = run_stalled("3500", NULL, &status_busy);
    cr_assert(status_busy, "eddy status never showed a worker busy; logs:\n%s", log);
    cr_assert(strstr(log, "busy: loop silent for"), "no worker was logged busy; logs:\n%s", log);
    cr_assert(!strstr(log, "declared dead"), "a busy worker was declared dead; logs:\n%s", log);
    cr_assert_eq(eddy_test_restores_logged(log, NULL), 0, "the job was restored; logs:\n%s", log);
    cr_assert(!strstr(log, "restoring"), "the job was restored; logs:\n%s", log);
    free(log);
}

Test(busy_worker, stuck_worker_is_restored, .fini = teardown, .timeout = 120)
{
    bool status_busy = false;
    char *log = run_stalled("6000", "2500", &status_busy);
    cr_assert(strstr(log, "declared dead: stuck: loop silent for"),
              "no worker was declared dead as stuck; logs:\n%s", log);
    cr_assert(!strstr(log, "no heartbeat for"), "a live worker's liveness went unheard; logs:\n%s",
              log);
    cr_assert(strstr(log, "restoring"), "the job was not restored; logs:\n%s", log);
    free(log);
}
