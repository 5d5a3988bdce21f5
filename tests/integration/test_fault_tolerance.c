/* test_fault_tolerance.c - failures of real eddy processes while a
 * rate-limited wordcount runs: SIGKILLed workers (one; two with a
 * replacement in between; one during a rescale), a SIGKILLed and restarted
 * coordinator, and a checkpoint left in flight by a dying worker.
 *
 * Every test checks the final `--output` file byte for byte against a
 * reference computed here (the table sink writes it once, at end of input,
 * with an atomic rename, so output must be exactly once), and that the
 * recovery really happened (restarts in `eddy status --json`, the
 * coordinator's "restoring from checkpoint N" lines).
 *
 * Timing: every wait is a poll with a deadline on an observable condition
 * (status fields, log lines, process exit). The only plain waits are for
 * wall-clock progress while a worker is SIGSTOPped (so that a checkpoint
 * is surely triggered and stuck); they are marked. SIGSTOP before SIGKILL
 * makes "kill during a rescale" and "kill with a checkpoint in flight"
 * deterministic: a stopped worker never ACKs, so the rescale / checkpoint
 * cannot finish before the kill lands.
 *
 * Heartbeats are shortened (200 ms, timeout 1-2.5 s; more under ASan) and checkpoints are
 * every 300-400 ms so the whole file stays well under three minutes. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "tests/support/cluster.h"
#include "tests/support/lines.h"
#include "tests/support/proc.h"

#define TEXT_BYTES (3u * 1024 * 1024)
#define RUN_SECONDS 8 /* --rate is chosen so an undisturbed run takes this long */
#define MAX_WORKERS 8

/* Heartbeat timeouts. Under ASan a surviving worker can be silent for ~1 s
 * while it applies a restore DEPLOY, so 1 s there cascades into extra
 * restores (tolerated, but they could reach the restart limit). */
#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "3000"     /* most tests */
#define HB_TIMEOUT_HOLD "5000" /* tests that SIGSTOP a worker before killing it */
#define HB_HOLD_MS 5000
#else
#define HB_TIMEOUT "1000"
#define HB_TIMEOUT_HOLD "2500"
#define HB_HOLD_MS 2500
#endif

static eddy_test_cluster_t *cl;
static char *dir, *input, *output, *logp, *coord_logp, *state_dir, *coord_url;
static char *text, *expected;
static size_t text_len, expected_len;
static char rate[32];
static int ports[2];

static eddy_proc_t *local; /* eddy local */
static eddy_proc_t *coord; /* eddy coordinator */

/* ---- fixture -------------------------------------------------------------- */

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "ft", .workers = 3, .checkpoint_interval = "400",
                                  .heartbeat_timeout_ms = HB_TIMEOUT};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    logp = eddy_test_cluster_path(cl, "local.log");
    coord_logp = eddy_test_cluster_coordinator_log(cl, 0);
    state_dir = eddy_test_cluster_path(cl, "state");
    coord_url = eddy_test_cluster_url(cl, 0);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    local = eddy_test_cluster_local(cl);
    coord = eddy_test_cluster_coordinator(cl, 0);
    cr_assert(eddy_gen_text(input, TEXT_BYTES, 4242, &err) == 0, "%s", err.msg);
    text = eddy_read_file(input, &text_len);
    cr_assert(text);
    expected = eddy_reference_wordcount(text, text_len, &expected_len);
    cr_assert(expected);
    size_t lines = 1;
    for (size_t i = 0; i < text_len; i++)
        lines += text[i] == '\n';
    snprintf(rate, sizeof rate, "%zu", lines / RUN_SECONDS);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    free(text);
    free(expected);
}

/* ---- logs ------------------------------------------------------------------- */

/* The coordinator's log, or eddy local's: the tests count its lines. */
static const char *main_log(void)
{
    return coord->pid > 0 ? coord_logp : logp;
}

static char *log_text(void)
{
    char *s = eddy_read_file(main_log(), NULL);
    return s ? s : strdup("(no log)");
}

/* All worker logs too, for failure messages of the coordinator tests. */
static char *all_logs(void)
{
    return eddy_test_cluster_log_text(cl);
}

static bool log_contains(void *needle)
{
    char *s = eddy_read_file(main_log(), NULL);
    bool ok = s && strstr(s, needle);
    free(s);
    return ok;
}

/* ---- status ----------------------------------------------------------------- */

typedef eddy_test_job_view_t job_view_t;

static job_view_t job_view(void)
{
    return eddy_test_job_view(ports[0], "wordcount");
}

/* Polls status until the job matches; fails the test with the log if not. */
static job_view_t wait_view(eddy_proc_t *owner, const char *state, int64_t min_ck_id,
                            int64_t min_completed, int64_t min_restarts, uint64_t timeout_ms,
                            const char *what)
{
    eddy_test_job_want_t want = {.state = state, .min_ck_id = min_ck_id,
                                 .min_completed = min_completed, .min_restarts = min_restarts};
    job_view_t last;
    bool gone;
    if (!eddy_test_job_wait(ports[0], "wordcount", &want, owner, timeout_ms, &last, &gone)) {
        char *l = all_logs();
        cr_assert_fail("timed out waiting for %s (state %s, checkpoint %lld, restarts %lld)%s; logs:\n%s",
                       what, last.state, (long long)last.ck_id, (long long)last.restarts,
                       gone ? " - the process exited" : "", l);
    }
    return last;
}

typedef struct worker_info {
    pid_t pid;
    int id, tasks;
    bool alive;
    char name[64];
} worker_info_t;

/* Workers listed in status; returns how many (at most max). */
static int status_workers(worker_info_t *out, int max)
{
    json_t *st = eddy_test_status(ports[0]);
    int n = 0;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (n == max)
            break;
        out[n].pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
        out[n].id = (int)json_integer_value(json_object_get(w, "id"));
        out[n].tasks = (int)json_integer_value(json_object_get(w, "tasks"));
        out[n].alive = json_is_true(json_object_get(w, "alive"));
        snprintf(out[n].name, sizeof out[n].name, "%s", json_string_value(json_object_get(w, "name")));
        n++;
    }
    json_decref(st);
    return n;
}

static bool worker_busy(void *arg)
{
    pid_t pid = *(pid_t *)arg;
    worker_info_t w[MAX_WORKERS * 2];
    int n = status_workers(w, MAX_WORKERS * 2);
    for (int i = 0; i < n; i++)
        if (w[i].pid == pid && w[i].alive && w[i].tasks > 0)
            return true;
    return false;
}

/* The pid of an alive worker running tasks, other than `except`. */
static pid_t victim(pid_t except)
{
    cr_assert(eddy_test_cluster_wait_workers(cl, 1, true, 10000), "no worker with tasks in status");
    pid_t pid = eddy_test_busy_worker(ports[0], except);
    if (pid > 0)
        return pid;
    json_t *st = eddy_test_status(ports[0]);
    char *text = st ? json_dumps(json_object_get(st, "workers"), JSON_COMPACT) : NULL;
    char *log = eddy_read_file(logp, NULL);
    cr_assert_fail("no alive worker with tasks other than pid %d; workers: %s; log:\n%s",
                   (int)except, text ? text : "(no answer)", log ? log : "");
    return -1;
}

/* ---- processes ---------------------------------------------------------------- */

static void start_local(int n, const char *hb_timeout_ms, const char *interval, bool keep_state)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t *o = eddy_test_cluster_opts(cl);
    o->workers = n;
    o->heartbeat_timeout_ms = hb_timeout_ms;
    o->checkpoint_interval = interval;
    /* no --quiet: the tests read INFO lines ("listening on", "running again") */
    const char *job[] = {"--job", "wordcount", "--input", input, "--output", output,
                         "--parallelism", "3", "--rate", rate, NULL};
    const char *with_state[] = {"--state-dir", state_dir, "--job", "wordcount", "--input", input,
                                "--output", output, "--parallelism", "3", "--rate", rate, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, keep_state ? with_state : job, &err) == 0, "%s",
              err.msg);
}

static void start_coordinator(void)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_coordinator(cl, 0, &err) == 0, "%s", err.msg);
}

static eddy_proc_t *start_worker(void)
{
    cr_assert(eddy_test_cluster_n_workers(cl) < MAX_WORKERS);
    eddy_err_t err = {{0}};
    int i = eddy_test_cluster_start_worker(cl, &err);
    cr_assert(i >= 0, "%s", err.msg);
    return eddy_test_cluster_worker(cl, i);
}

static void submit(void)
{
    eddy_err_t err = {{0}};
    const char *job[] = {"--job", "wordcount", "--input", input, "--output", output,
                         "--parallelism", "3", "--rate", rate, NULL};
    char *out = NULL;
    cr_assert(eddy_test_cluster_submit(cl, job, &out, &err) == 0, "%s", err.msg);
    cr_assert(strstr(out, "wordcount"), "eddy submit printed '%s'", out);
    free(out);
}

static int rescale_run(const char *p, char **err)
{
    char *argv[] = {EDDY_BINARY, "rescale", "wordcount", "count", (char *)p, "--coordinator",
                    coord_url, NULL};
    char *out = NULL;
    int rc = eddy_proc_run(argv, 60000, &out, err);
    free(out);
    return rc;
}

static void sigkill(pid_t pid)
{
    cr_assert(pid > 0);
    cr_assert(kill(pid, SIGKILL) == 0, "kill -9 %d failed", (int)pid);
}

/* ---- output ------------------------------------------------------------------- */

static void expect_exact_output(void)
{
    size_t gl = 0;
    char *got = eddy_read_file(output, &gl);
    if (!got) {
        char *l = all_logs();
        cr_assert_fail("no output file %s; logs:\n%s", output, l);
    }
    if (gl != expected_len || memcmp(got, expected, expected_len) != 0) {
        size_t i = 0, line = 1;
        while (i < gl && i < expected_len && got[i] == expected[i])
            line += got[i++] == '\n';
        char *l = all_logs();
        cr_assert_fail("output differs from the reference (%zu vs %zu bytes), first at line %zu; logs:\n%s",
                       gl, expected_len, line, l);
    }
    free(got);
}

static void expect_local_finished(void)
{
    int rc = eddy_proc_wait(local, 120000);
    if (rc != 0) {
        char *l = log_text();
        cr_assert_fail("eddy local exited %d; log:\n%s", rc, l);
    }
    expect_exact_output();
}

/* ---- tests ---------------------------------------------------------------------- */

/* A worker dies with SIGKILL after a checkpoint: it is declared dead (its
 * connection closes, or at the latest after the heartbeat timeout) and the
 * job is restored on the two others. */
Test(fault_tolerance, kill_one_worker, .init = setup, .fini = teardown, .timeout = 180)
{
    start_local(3, HB_TIMEOUT, "300", false);
    job_view_t v = wait_view(local, "running", 1, 1, 0, 30000, "a completed checkpoint");
    pid_t pid = victim(0);
    sigkill(pid);
    uint64_t killed = eddy_mono_ms();
    v = wait_view(local, "running", 0, 0, 1, 30000, "the job restored and running again");
    uint64_t restored = eddy_mono_ms() - killed;
    char *l = log_text();
    char dead[64];
    snprintf(dead, sizeof dead, "pid %d) declared dead", (int)pid);
    cr_assert(strstr(l, dead), "the coordinator never declared pid %d dead:\n%s", (int)pid, l);
    uint64_t from = 0;
    cr_assert_geq(eddy_test_restores_logged(l, &from), 1, "no restore in the log:\n%s", l);
    cr_assert_geq(from, 1, "restored from checkpoint %llu, want a completed one", (unsigned long long)from);
    cr_assert(strstr(l, "running again"), "%s", l);
    if (v.restarts > 1) /* one kill, several restores: show why */
        for (char *line = strtok(l, "\n"); line; line = strtok(NULL, "\n"))
            if (strstr(line, "WARN") || strstr(line, "ERROR"))
                cr_log_warn("%s", line);
    free(l);
    cr_log_info("kill_one_worker: restored and running %llu ms after kill -9 (restarts %lld)",
                (unsigned long long)restored, (long long)v.restarts);
    expect_local_finished();
}

/* Fast failure detection (coordinator/disconnect.c): with a heartbeat
 * timeout of a minute, a SIGKILLed worker is still declared dead within
 * seconds, because its control connection closed, and the log says so. */
Test(fault_tolerance, kill_detected_by_disconnect, .init = setup, .fini = teardown, .timeout = 180)
{
    start_local(3, "60000", "300", false);
    wait_view(local, "running", 1, 1, 0, 30000, "a completed checkpoint");
    pid_t pid = victim(0);
    sigkill(pid);
    uint64_t killed = eddy_mono_ms();
    char dead[128];
    snprintf(dead, sizeof dead, "pid %d) declared dead: its connection closed", (int)pid);
    /* far below the heartbeat timeout: only the closed connection can tell */
    if (!eddy_poll_until(log_contains, dead, 30000)) {
        char *l = log_text();
        cr_assert_fail("pid %d not declared dead by its closed connection within 30 s:\n%s", (int)pid, l);
    }
    uint64_t detected = eddy_mono_ms() - killed;
    wait_view(local, "running", 0, 0, 1, 30000, "the job restored and running again");
    char *l = log_text();
    cr_assert(strstr(l, "no heartbeat for") == NULL, "a heartbeat timeout fired:\n%s", l);
    free(l);
    cr_log_info("kill_detected_by_disconnect: declared dead within %llu ms of kill -9",
                (unsigned long long)detected);
    expect_local_finished();
}

/* Coordinator and workers started one by one: kill one worker, start a
 * replacement (it gets tasks at the next restore), then kill another. */
Test(fault_tolerance, kill_two_workers_with_replacement, .init = setup, .fini = teardown,
     .timeout = 180)
{
    start_coordinator();
    for (int i = 0; i < 3; i++)
        start_worker();
    cr_assert(eddy_test_cluster_wait_workers(cl, 3, false, 15000), "3 workers never registered:\n%s",
              log_text());
    submit();
    wait_view(coord, "running", 1, 1, 0, 30000, "a completed checkpoint");

    pid_t first = victim(0);
    sigkill(first);
    job_view_t v = wait_view(coord, "running", 0, 0, 1, 30000, "the restore after the first kill");

    eddy_proc_t *repl = start_worker();
    cr_assert(eddy_test_cluster_wait_workers(cl, 3, false, 15000), "the replacement never registered:\n%s",
              log_text());
    /* let the restored job make progress: a checkpoint after the restore */
    v = wait_view(coord, "running", v.ck_id + 1, v.ck_completed + 1, 1, 30000,
                  "a checkpoint after the first restore");

    pid_t second = victim(repl->pid);
    cr_assert_neq(second, first);
    sigkill(second);
    v = wait_view(coord, "running", 0, 0, 2, 30000, "the restore after the second kill");

    /* the replacement runs tasks now (reported with its next heartbeat) */
    cr_assert(eddy_poll_until(worker_busy, &repl->pid, 10000),
              "the replacement worker (pid %d) got no tasks at the second restore",
              (int)repl->pid);

    v = wait_view(coord, "finished", 0, 0, 2, 120000, "the job to finish");
    char *l = log_text();
    cr_assert_geq(eddy_test_restores_logged(l, NULL), 2, "want two restores in the log:\n%s", l);
    free(l);
    expect_exact_output();
}

/* A worker dies while `eddy rescale wordcount count 4` waits for its
 * pausing checkpoint: the rescale reports failure, the job is restored and
 * finishes exactly; a later rescale succeeds. The victim is SIGSTOPped
 * before the request so it cannot ACK: the rescale is surely in progress
 * when it is killed. */
Test(fault_tolerance, kill_during_rescale, .init = setup, .fini = teardown, .timeout = 180)
{
    start_local(3, HB_TIMEOUT_HOLD, "300", false);
    wait_view(local, "running", 1, 1, 0, 30000, "a completed checkpoint");
    pid_t pid = victim(0);

    eddy_err_t err = {{0}};
    char rs_out[600], rs_err[600];
    snprintf(rs_out, sizeof rs_out, "%s/rescale.out", dir);
    snprintf(rs_err, sizeof rs_err, "%s/rescale.err", dir);
    char *argv[] = {EDDY_BINARY, "rescale", "wordcount", "count", "4", "--coordinator", coord_url,
                    NULL};
    eddy_proc_t rs;
    cr_assert(kill(pid, SIGSTOP) == 0);
    cr_assert(eddy_proc_start(&rs, argv, rs_out, rs_err, &err) == 0, "%s", err.msg);
    bool started = eddy_poll_until(log_contains, "rescaling count 3 -> 4", 5000);
    sigkill(pid);
    if (!started) {
        eddy_proc_kill(&rs, 1000);
        char *l = log_text();
        cr_assert_fail("the rescale never started; log:\n%s", l);
    }
    int rc = eddy_proc_wait(&rs, 60000);
    char *msg = eddy_read_file(rs_err, NULL);
    eddy_proc_kill(&rs, 1000);
    cr_assert_neq(rc, 0, "eddy rescale succeeded although a worker died during it");
    cr_assert_neq(rc, -1, "eddy rescale did not return");
    cr_assert(msg && (strstr(msg, "interrupted") || strstr(msg, "abandoned")),
              "eddy rescale exited %d without saying why: %s", rc, msg ? msg : "(no stderr)");
    cr_log_info("kill_during_rescale: eddy rescale exited %d: %s", rc, msg);
    free(msg);

    wait_view(local, "running", 0, 0, 1, 30000, "the restore after the kill");
    /* eddy local's replacement worker may be getting instances by a
     * migration, during which a rescale is refused with "try again" */
    char *e = NULL;
    uint64_t deadline = eddy_mono_ms() + 30000;
    while ((rc = rescale_run("4", &e)) != 0 && e && strstr(e, "migrating") &&
           eddy_mono_ms() < deadline) {
        free(e);
        e = NULL;
        eddy_nap_ms(200);
    }
    cr_assert_eq(rc, 0, "the rescale after recovery failed (%d): %s", rc, e);
    free(e);
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = eddy_test_status_job(st, "wordcount");
    cr_assert(j);
    size_t i;
    json_t *op;
    int64_t p = -1;
    json_array_foreach(json_object_get(j, "operators"), i, op)
    {
        if (!strcmp(json_string_value(json_object_get(op, "name")), "count"))
            p = json_integer_value(json_object_get(op, "parallelism"));
    }
    json_decref(st);
    cr_assert_eq(p, 4, "count has parallelism %lld after the rescale, want 4", (long long)p);
    expect_local_finished();
}

/* The coordinator dies with SIGKILL after a checkpoint and is restarted
 * with the same flags and metadata store: it reloads the job, waits for the
 * workers to register again and restores from its last checkpoint. */
Test(fault_tolerance, coordinator_restart, .init = setup, .fini = teardown, .timeout = 180)
{
    start_coordinator();
    for (int i = 0; i < 2; i++)
        start_worker();
    cr_assert(eddy_test_cluster_wait_workers(cl, 2, false, 15000), "2 workers never registered:\n%s",
              log_text());
    submit();
    job_view_t v = wait_view(coord, "running", 2, 2, 0, 30000, "two completed checkpoints");
    int64_t before = v.ck_id;

    kill(-coord->pid, SIGKILL);
    cr_assert_eq(eddy_proc_wait(coord, 10000), 128 + SIGKILL);
    /* A checkpoint may have completed between the status call and the kill:
     * the one in the metadata store is what the new coordinator must use. */
    char *l1 = eddy_read_file(coord_logp, NULL);
    size_t l1_len = l1 ? strlen(l1) : 0;
    free(l1);
    start_coordinator(); /* same flags, same metastore; appends to the log */

    v = wait_view(coord, "finished", 0, 0, 0, 120000, "the job to finish after the restart");
    char *l = log_text();
    const char *after = l + l1_len; /* the new coordinator's lines */
    unsigned long long resumed = 0, from = 0;
    const char *r = strstr(after, "resumed job wordcount from the metadata store (last checkpoint ");
    cr_assert(r, "the new coordinator did not resume the job:\n%s", l);
    sscanf(strstr(r, "(last checkpoint ") + strlen("(last checkpoint "), "%llu", &resumed);
    cr_assert_geq(resumed, (unsigned long long)before, "resumed from checkpoint %llu, but %lld had completed",
                  resumed, (long long)before);
    cr_assert_eq(eddy_test_restores_logged(after, (uint64_t *)&from), 1,
                 "want exactly one restore by the new coordinator:\n%s", after);
    cr_assert_eq(from, resumed, "restored from %llu, resumed %llu", from, resumed);
    int registered = 0;
    for (const char *p = after; (p = strstr(p, ") registered, data at")); p++)
        registered++;
    cr_assert_geq(registered, 2, "workers did not re-register with the new coordinator:\n%s", after);
    free(l);
    expect_exact_output();
}

/* A checkpoint in flight when a worker dies is abandoned, never used: the
 * job restores from the last COMPLETED checkpoint and the in-flight one's
 * files are removed. The victim is SIGSTOPped first (it cannot ACK), kept
 * stopped past a checkpoint interval so a checkpoint is surely stuck in
 * flight, then SIGKILLed before the heartbeat timeout. */
Test(fault_tolerance, abandoned_checkpoint, .init = setup, .fini = teardown, .timeout = 180)
{
    start_local(3, HB_TIMEOUT_HOLD, "400", true);
    job_view_t v0 = wait_view(local, "running", 2, 2, 0, 30000, "two completed checkpoints");
    pid_t pid = victim(0);
    cr_assert(kill(pid, SIGSTOP) == 0);
    uint64_t stopped = eddy_mono_ms();
    /* wall-clock progress: > one interval + a checkpoint's duration, so a
     * checkpoint was triggered after the stop and cannot complete */
    eddy_nap_ms(900);
    job_view_t a = job_view();
    eddy_nap_ms(250); /* wall-clock progress: nothing may complete meanwhile */
    job_view_t b = job_view();
    uint64_t held = eddy_mono_ms() - stopped;
    sigkill(pid);
    cr_assert(a.ok && b.ok, "status failed");
    cr_assert_lt(held, HB_HOLD_MS, "the stopped worker may have been declared dead before the kill (%llu ms)",
                 (unsigned long long)held);
    cr_assert_eq(a.ck_id, b.ck_id, "checkpoint %lld completed although a worker was stopped",
                 (long long)b.ck_id);
    int64_t completed = b.ck_id;
    cr_assert_geq(completed, v0.ck_id);

    job_view_t r = wait_view(local, "running", 0, 0, 1, 30000, "the restore");
    char *l = log_text();
    uint64_t from = 0;
    cr_assert_eq(eddy_test_restores_logged(l, &from), 1, "want one restore:\n%s", l);
    cr_assert_eq((int64_t)from, completed,
                 "restored from checkpoint %llu, but the last completed one was %lld:\n%s",
                 (unsigned long long)from, (long long)completed, l);
    free(l);
    cr_assert_gt(r.ck_failed, b.ck_failed, "no checkpoint counted as abandoned (failed %lld -> %lld)",
                 (long long)b.ck_failed, (long long)r.ck_failed);
    /* the in-flight checkpoint (the next id) left nothing behind */
    char inflight[800];
    snprintf(inflight, sizeof inflight, "%s/snapshots/wordcount/chk-%lld", state_dir,
             (long long)completed + 1);
    struct stat sb;
    expect_local_finished();
    cr_assert(stat(inflight, &sb) != 0, "the abandoned checkpoint's files remain in %s", inflight);
}
