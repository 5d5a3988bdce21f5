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
#include "tests/support/etcd.h"
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

static char *dir;
static char input[600], output[600], logp[600], coord_logp[600], state_dir[600];
static char meta_dir[600], snap_dir[600];
static char *text, *expected;
static size_t text_len, expected_len;
static char rate[32];
static int ports[2];
static char coord_url[64], port_s[16], http_s[16];

static eddy_proc_t local;                 /* eddy local */
static eddy_proc_t coord;                 /* eddy coordinator */
static eddy_proc_t workers[MAX_WORKERS];  /* eddy worker */
static int n_workers;
static int coord_starts; /* "listening on" lines expected in the log */

/* ---- fixture -------------------------------------------------------------- */

static void setup(void)
{
    eddy_err_t err = {{0}};
    dir = eddy_test_mkdtemp("ft", &err);
    cr_assert(dir, "%s", err.msg);
    snprintf(input, sizeof input, "%s/input.txt", dir);
    snprintf(output, sizeof output, "%s/counts.tsv", dir);
    snprintf(logp, sizeof logp, "%s/local.log", dir);
    snprintf(coord_logp, sizeof coord_logp, "%s/coordinator.log", dir);
    snprintf(state_dir, sizeof state_dir, "%s/state", dir);
    snprintf(meta_dir, sizeof meta_dir, "%s/meta", dir);
    snprintf(snap_dir, sizeof snap_dir, "%s/snapshots", dir);
    cr_assert(eddy_gen_text(input, TEXT_BYTES, 4242, &err) == 0, "%s", err.msg);
    text = eddy_read_file(input, &text_len);
    cr_assert(text);
    expected = eddy_reference_wordcount(text, text_len, &expected_len);
    cr_assert(expected);
    size_t lines = 1;
    for (size_t i = 0; i < text_len; i++)
        lines += text[i] == '\n';
    snprintf(rate, sizeof rate, "%zu", lines / RUN_SECONDS);
    cr_assert(eddy_test_free_ports(2, ports, &err) == 0, "%s", err.msg);
    snprintf(port_s, sizeof port_s, "%d", ports[0]);
    snprintf(http_s, sizeof http_s, "%d", ports[1]);
    snprintf(coord_url, sizeof coord_url, "tcp://127.0.0.1:%d", ports[0]);
    memset(&local, 0, sizeof local);
    memset(&coord, 0, sizeof coord);
    memset(workers, 0, sizeof workers);
    n_workers = 0;
    coord_starts = 0;
}

static void teardown(void)
{
    eddy_proc_kill(&local, 3000);
    eddy_proc_kill(&coord, 3000);
    for (int i = 0; i < n_workers; i++)
        eddy_proc_kill(&workers[i], 2000);
    free(text);
    free(expected);
    if (dir)
        eddy_test_rm_rf(dir);
    free(dir);
}

/* ---- logs ------------------------------------------------------------------- */

static const char *main_log(void)
{
    return coord.pid > 0 ? coord_logp : logp;
}

static char *log_text(void)
{
    char *s = eddy_read_file(main_log(), NULL);
    return s ? s : strdup("(no log)");
}

/* All worker logs too, for failure messages of the coordinator tests. */
static char *all_logs(void)
{
    const char *heads[] = {main_log()};
    return eddy_test_cluster_logs(heads, 1, dir, n_workers);
}

/* Number of "restoring from checkpoint N" lines; *last = the last N. */
static int restores_logged(const char *log, uint64_t *last)
{
    int n = 0;
    for (const char *p = log; (p = strstr(p, "restoring from checkpoint ")); n++) {
        p += strlen("restoring from checkpoint ");
        if (last)
            *last = strtoull(p, NULL, 10);
    }
    return n;
}

static int count_in_log(const char *needle)
{
    char *s = eddy_read_file(main_log(), NULL);
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, needle)); p++)
        n++;
    free(s);
    return n;
}

static bool coordinator_listening(void *arg)
{
    (void)arg;
    return count_in_log("] listening on ") >= coord_starts;
}

static bool log_contains(void *needle)
{
    char *s = eddy_read_file(main_log(), NULL);
    bool ok = s && strstr(s, needle);
    free(s);
    return ok;
}

/* ---- status ----------------------------------------------------------------- */

typedef struct job_view {
    bool ok;
    char state[32];
    int64_t restarts, ck_id, ck_completed, ck_failed, source_in;
} job_view_t;

static job_view_t job_view(void)
{
    job_view_t v = {0};
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, "wordcount") : NULL;
    if (j) {
        v.ok = true;
        snprintf(v.state, sizeof v.state, "%s", json_string_value(json_object_get(j, "state")));
        v.restarts = json_integer_value(json_object_get(j, "restarts"));
        json_t *ck = json_object_get(j, "last_checkpoint");
        v.ck_id = json_integer_value(json_object_get(ck, "id"));
        v.ck_completed = json_integer_value(json_object_get(ck, "completed"));
        v.ck_failed = json_integer_value(json_object_get(ck, "failed"));
        size_t i;
        json_t *op;
        json_array_foreach(json_object_get(j, "operators"), i, op)
        {
            if (json_is_true(json_object_get(op, "source")))
                v.source_in += json_integer_value(json_object_get(op, "records_in"));
        }
    }
    json_decref(st);
    return v;
}

typedef struct view_wait {
    eddy_proc_t *owner; /* gives up when it exits (may be NULL) */
    bool gone;
    const char *state;  /* NULL = any */
    int64_t min_ck_id, min_completed, min_restarts;
    job_view_t last;
} view_wait_t;

static bool view_matches(void *arg)
{
    view_wait_t *w = arg;
    if (w->owner && !eddy_proc_alive(w->owner)) {
        w->gone = true;
        return true;
    }
    job_view_t v = job_view();
    if (!v.ok)
        return false;
    w->last = v;
    return (!w->state || !strcmp(v.state, w->state)) && v.ck_id >= w->min_ck_id &&
           v.ck_completed >= w->min_completed && v.restarts >= w->min_restarts;
}

/* Polls status until the job matches; fails the test with the log if not. */
static job_view_t wait_view(eddy_proc_t *owner, const char *state, int64_t min_ck_id,
                            int64_t min_completed, int64_t min_restarts, uint64_t timeout_ms,
                            const char *what)
{
    view_wait_t w = {owner, false, state, min_ck_id, min_completed, min_restarts, {0}};
    bool ok = eddy_poll_until(view_matches, &w, timeout_ms) && !w.gone;
    if (!ok) {
        char *l = all_logs();
        cr_assert_fail("timed out waiting for %s (state %s, checkpoint %lld, restarts %lld)%s; logs:\n%s",
                       what, w.last.state, (long long)w.last.ck_id, (long long)w.last.restarts,
                       w.gone ? " - the process exited" : "", l);
    }
    return w.last;
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

typedef struct alive_wait {
    int want;
    bool with_tasks; /* count only workers running tasks */
} alive_wait_t;

static bool enough_alive(void *arg)
{
    alive_wait_t *a = arg;
    worker_info_t w[MAX_WORKERS * 2];
    int n = status_workers(w, MAX_WORKERS * 2), alive = 0;
    for (int i = 0; i < n; i++)
        alive += w[i].alive && (!a->with_tasks || w[i].tasks > 0);
    return alive >= a->want;
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
    alive_wait_t a = {1, true};
    cr_assert(eddy_poll_until(enough_alive, &a, 10000), "no worker with tasks in status");
    worker_info_t w[MAX_WORKERS * 2];
    int n = status_workers(w, MAX_WORKERS * 2);
    for (int i = 0; i < n; i++)
        if (w[i].alive && w[i].tasks > 0 && w[i].pid != except && w[i].pid > 0)
            return w[i].pid;
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
    char ns[8];
    snprintf(ns, sizeof ns, "%d", n);
    char *argv[40] = {EDDY_BINARY, "local", "--workers", ns, "--control-port", port_s,
                      "--http-port", http_s, "--checkpoint-interval", (char *)interval,
                      "--heartbeat-ms", "200", "--heartbeat-timeout-ms", (char *)hb_timeout_ms};
    int k = 14; /* no --quiet: the tests read INFO lines ("listening on", "running again") */
    if (keep_state) {
        argv[k++] = "--state-dir";
        argv[k++] = state_dir;
    }
    char *job[] = {"--job", "wordcount", "--input", input, "--output", output, "--parallelism", "3",
                   "--rate", rate, NULL};
    for (int i = 0; job[i]; i++)
        argv[k++] = job[i];
    argv[k] = NULL;
    cr_assert(eddy_proc_start(&local, argv, NULL, logp, &err) == 0, "%s", err.msg);
}

static void start_coordinator(void)
{
    eddy_err_t err = {{0}};
    char *argv[] = {EDDY_BINARY, "coordinator", "--bind", coord_url, "--http-host", "127.0.0.1",
                    "--http-port", http_s, "--metastore", meta_dir, "--snapshot-dir", snap_dir,
                    "--checkpoint-interval", "400", "--heartbeat-ms", "200",
                    "--heartbeat-timeout-ms", HB_TIMEOUT, NULL};
    cr_assert(eddy_proc_start(&coord, argv, NULL, coord_logp, &err) == 0, "%s", err.msg);
    coord_starts++;
    if (!eddy_poll_until(coordinator_listening, NULL, 10000)) {
        char *l = log_text();
        cr_assert_fail("coordinator did not start (exit %d):\n%s", eddy_proc_wait(&coord, 0), l);
    }
}

static eddy_proc_t *start_worker(void)
{
    cr_assert(n_workers < MAX_WORKERS);
    eddy_err_t err = {{0}};
    char name[32], wlog[600];
    snprintf(name, sizeof name, "worker-%d", n_workers + 1);
    snprintf(wlog, sizeof wlog, "%s/%s.log", dir, name);
    char *argv[] = {EDDY_BINARY, "worker", "--coordinator", coord_url, "--name", name,
                    "--snapshot-dir", snap_dir, NULL};
    eddy_proc_t *p = &workers[n_workers++];
    cr_assert(eddy_proc_start(p, argv, NULL, wlog, &err) == 0, "%s", err.msg);
    return p;
}

static void submit(void)
{
    char *argv[] = {EDDY_BINARY, "submit", "--coordinator", coord_url, "--job", "wordcount",
                    "--input", input, "--output", output, "--parallelism", "3", "--rate", rate,
                    NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &err);
    cr_assert_eq(rc, 0, "eddy submit exited %d: %s%s", rc, out, err);
    cr_assert(strstr(out, "wordcount"), "eddy submit printed '%s'", out);
    free(out);
    free(err);
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
    int rc = eddy_proc_wait(&local, 120000);
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
    job_view_t v = wait_view(&local, "running", 1, 1, 0, 30000, "a completed checkpoint");
    pid_t pid = victim(0);
    sigkill(pid);
    uint64_t killed = eddy_mono_ms();
    v = wait_view(&local, "running", 0, 0, 1, 30000, "the job restored and running again");
    uint64_t restored = eddy_mono_ms() - killed;
    char *l = log_text();
    char dead[64];
    snprintf(dead, sizeof dead, "pid %d) declared dead", (int)pid);
    cr_assert(strstr(l, dead), "the coordinator never declared pid %d dead:\n%s", (int)pid, l);
    uint64_t from = 0;
    cr_assert_geq(restores_logged(l, &from), 1, "no restore in the log:\n%s", l);
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
    wait_view(&local, "running", 1, 1, 0, 30000, "a completed checkpoint");
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
    wait_view(&local, "running", 0, 0, 1, 30000, "the job restored and running again");
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
    alive_wait_t three = {3, false};
    cr_assert(eddy_poll_until(enough_alive, &three, 15000), "3 workers never registered:\n%s",
              log_text());
    submit();
    wait_view(&coord, "running", 1, 1, 0, 30000, "a completed checkpoint");

    pid_t first = victim(0);
    sigkill(first);
    job_view_t v = wait_view(&coord, "running", 0, 0, 1, 30000, "the restore after the first kill");

    eddy_proc_t *repl = start_worker();
    alive_wait_t again = {3, false};
    cr_assert(eddy_poll_until(enough_alive, &again, 15000), "the replacement never registered:\n%s",
              log_text());
    /* let the restored job make progress: a checkpoint after the restore */
    v = wait_view(&coord, "running", v.ck_id + 1, v.ck_completed + 1, 1, 30000,
                  "a checkpoint after the first restore");

    pid_t second = victim(repl->pid);
    cr_assert_neq(second, first);
    sigkill(second);
    v = wait_view(&coord, "running", 0, 0, 2, 30000, "the restore after the second kill");

    /* the replacement runs tasks now (reported with its next heartbeat) */
    cr_assert(eddy_poll_until(worker_busy, &repl->pid, 10000),
              "the replacement worker (pid %d) got no tasks at the second restore",
              (int)repl->pid);

    v = wait_view(&coord, "finished", 0, 0, 2, 120000, "the job to finish");
    char *l = log_text();
    cr_assert_geq(restores_logged(l, NULL), 2, "want two restores in the log:\n%s", l);
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
    wait_view(&local, "running", 1, 1, 0, 30000, "a completed checkpoint");
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

    wait_view(&local, "running", 0, 0, 1, 30000, "the restore after the kill");
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
    alive_wait_t two = {2, false};
    cr_assert(eddy_poll_until(enough_alive, &two, 15000), "2 workers never registered:\n%s",
              log_text());
    submit();
    job_view_t v = wait_view(&coord, "running", 2, 2, 0, 30000, "two completed checkpoints");
    int64_t before = v.ck_id;

    kill(-coord.pid, SIGKILL);
    cr_assert_eq(eddy_proc_wait(&coord, 10000), 128 + SIGKILL);
    /* A checkpoint may have completed between the status call and the kill:
     * the one in the metadata store is what the new coordinator must use. */
    char *l1 = eddy_read_file(coord_logp, NULL);
    size_t l1_len = l1 ? strlen(l1) : 0;
    free(l1);
    start_coordinator(); /* same flags, same metastore; appends to the log */

    v = wait_view(&coord, "finished", 0, 0, 0, 120000, "the job to finish after the restart");
    char *l = log_text();
    const char *after = l + l1_len; /* the new coordinator's lines */
    unsigned long long resumed = 0, from = 0;
    const char *r = strstr(after, "resumed job wordcount from the metadata store (last checkpoint ");
    cr_assert(r, "the new coordinator did not resume the job:\n%s", l);
    sscanf(strstr(r, "(last checkpoint ") + strlen("(last checkpoint "), "%llu", &resumed);
    cr_assert_geq(resumed, (unsigned long long)before, "resumed from checkpoint %llu, but %lld had completed",
                  resumed, (long long)before);
    cr_assert_eq(restores_logged(after, (uint64_t *)&from), 1,
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
    job_view_t v0 = wait_view(&local, "running", 2, 2, 0, 30000, "two completed checkpoints");
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

    job_view_t r = wait_view(&local, "running", 0, 0, 1, 30000, "the restore");
    char *l = log_text();
    uint64_t from = 0;
    cr_assert_eq(restores_logged(l, &from), 1, "want one restore:\n%s", l);
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
