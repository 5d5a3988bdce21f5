/* test_backpressure.c - a slow consumer must slow the pipeline, not grow it.
 *
 * Runs an unthrottled generated wordcount (3M lines) whose changelog goes
 * to stdout, a pipe this test drains slowly (a few KB every 10 ms) for
 * about 5 s. Meanwhile it samples VmRSS of the worker processes (pids from
 * `eddy status --json` on the run's own control port) and requires it to
 * stay under a bound and to stop growing: with end-to-end credit-based
 * backpressure the sink blocks on the pipe, the counts and sources stall,
 * and buffers stay bounded. That nothing is dropped is covered by the
 * end-to-end tests; this one is only about memory. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#ifdef __SANITIZE_ADDRESS__ /* ASan's shadow memory and quarantine inflate RSS */
#define RSS_BOUND_KB (800L * 1024)
#define GROWTH_BOUND_KB (160L * 1024)
#else
#define RSS_BOUND_KB (200L * 1024)
#define GROWTH_BOUND_KB (48L * 1024)
#endif
#define DRAIN_MS 5000
#define CHUNK 4096

static eddy_test_cluster_t *cl;
static eddy_proc_t *job;

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

/* Reads at most one chunk if available within wait_ms; bytes read. */
static size_t drain_some(int fd, int wait_ms)
{
    char buf[CHUNK];
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf);
    return n > 0 ? (size_t)n : 0;
}

static int worker_pids(int port, pid_t *pids, int max)
{
    json_t *st = eddy_test_status(port);
    int n = 0;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (n < max && json_is_true(json_object_get(w, "alive")))
            pids[n++] = (pid_t)json_integer_value(json_object_get(w, "pid"));
    }
    json_decref(st);
    return n;
}

static long total_rss(const pid_t *pids, int n)
{
    long sum = 0;
    for (int i = 0; i < n; i++) {
        long kb = eddy_proc_rss_kb(pids[i]);
        if (kb < 0)
            return -1;
        sum += kb;
    }
    return sum;
}

Test(backpressure, slow_stdout_keeps_worker_memory_bounded, .fini = teardown, .timeout = 120)
{
    eddy_err_t err = {{0}};
    /* eddy's own checkpoint and heartbeat timing */
    eddy_test_cluster_opts_t o = {.tag = "backpressure", .workers = 2, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    int ports[1] = {eddy_test_cluster_port(cl, 0)};
    const char *argv[] = {"--quiet", "--job", "wordcount", "--generate", "--lines", "3000000",
                          NULL};
    cr_assert(eddy_test_cluster_start_local_to(cl, argv, EDDY_PROC_PIPE, &err) == 0, "%s",
              err.msg);
    job = eddy_test_cluster_local(cl);

    /* Keep draining slowly while waiting for the job and its workers. */
    uint64_t deadline = eddy_mono_ms() + 30000;
    pid_t pids[8];
    int n = 0;
    size_t got = 0;
    while ((n = worker_pids(ports[0], pids, 8)) < 2) {
        cr_assert(eddy_mono_ms() < deadline && eddy_proc_alive(job),
                  "workers never showed up in eddy status");
        got += drain_some(job->stdout_fd, 10);
    }
    cr_assert(eddy_test_wait_job_state(ports[0], "wordcount", "running", 30000, job),
              "job never reached state running");

    uint64_t start = eddy_mono_ms(), next_sample = start;
    long early = -1, peak = 0, last = 0;
    int samples = 0;
    while (eddy_mono_ms() - start < DRAIN_MS) {
        cr_assert(eddy_proc_alive(job), "eddy local died while being drained (exit %d)", job->code);
        got += drain_some(job->stdout_fd, 0);
        if (eddy_mono_ms() >= next_sample) {
            last = total_rss(pids, n);
            cr_assert(last > 0, "cannot read VmRSS of the workers");
            if (last > peak)
                peak = last;
            if (early < 0 && eddy_mono_ms() - start >= 1500)
                early = last; /* after buffers had time to fill */
            samples++;
            next_sample += 250;
        }
        eddy_nap_ms(10); /* the slow consumer's pace, not synchronisation */
    }
    cr_log_info("drained %zu bytes in %d ms; worker RSS early %ld kB, peak %ld kB, last %ld kB "
                "(%d samples)", got, DRAIN_MS, early, peak, last, samples);
    cr_assert_gt(got, 0, "nothing arrived on stdout");
    cr_assert(eddy_proc_alive(job),
              "the job finished within %d ms despite the slow consumer: no backpressure?", DRAIN_MS);
    cr_assert_lt(peak, RSS_BOUND_KB, "worker RSS peaked at %ld kB (bound %ld kB)", peak,
                 RSS_BOUND_KB);
    cr_assert_lt(last - early, GROWTH_BOUND_KB,
                 "worker RSS kept growing: %ld kB after 1.5 s, %ld kB at the end", early, last);
}
