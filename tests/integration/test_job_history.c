/* test_job_history.c - numbers that never go backwards, job history and
 * the readable views, with real processes (eddy coordinator, eddy worker,
 * eddy submit/rescale/status/scaling) and the file metadata store.
 *
 * counters_never_go_backwards: a rate-limited wordcount is rescaled, loses
 * a worker to SIGKILL (a restore) and then its coordinator to SIGKILL (a
 * restart from the metadata store). Throughout, every operator's records
 * in/out in `eddy status --json` and every counter series of /metrics
 * (per instance, per operator and of the whole job: checkpoints, rescales,
 * restarts) is sampled and must never be lower than at the sample before
 * (across the restart too). At the end the finished job keeps its numbers (the source
 * read at least every line); a resubmission gets the id wordcount-2 while
 * wordcount's record stays readable; after another coordinator restart the
 * history is still there, ids go on at wordcount-3, and `eddy status`
 * shows running jobs only while `--all` shows the history.
 *
 * checkpoint_costs_are_visible: a completed checkpoint's parts (the slowest
 * task's synchronous, asynchronous and alignment times) and what it wrote
 * are in the job's status (the API the dashboard reads), in /metrics and
 * in `eddy status JOB`.
 *
 * changelog_file_and_quiet, quiet_prints_only_the_changelog: `eddy local
 * --quiet` writes no INFO line (its workers neither) and no progress line;
 * stdout (or --changelog FILE) carries the job's output and nothing else.
 *
 * scaling_view: decisions recorded at a coordinator are listed by
 * `eddy scaling` with local ISO 8601 times and job times, no_change ones
 * only with --all.
 *
 * Every wait is a poll with a deadline on an observable condition. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/client.h"
#include "tests/support/cluster.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"

#define LINES 60000
#define RUN_SECONDS 14
#define MAX_WORKERS 4
#define MAX_SERIES 512

#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "3000"
#else
#define HB_TIMEOUT "1500"
#endif

static eddy_test_cluster_t *cl;
static char *dir, *input, *output, *coord_url, *http_s;
static int ports[2];
static char rate[32];
static eddy_proc_t *coord;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "history", .checkpoint_interval = "500",
                                  .heartbeat_timeout_ms = HB_TIMEOUT};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    cr_assert(eddy_gen_lines(input, LINES, 99, &err) == 0, "%s", err.msg);
    snprintf(rate, sizeof rate, "%d", LINES / RUN_SECONDS);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    coord_url = eddy_test_cluster_url(cl, 0);
    http_s = eddy_test_cluster_http_port_s(cl, 0);
    coord = eddy_test_cluster_coordinator(cl, 0);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

/* ---- processes ------------------------------------------------------------ */

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void start_coordinator(void)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_coordinator(cl, 0, &err) == 0, "%s", err.msg);
}

static void start_worker(void)
{
    cr_assert(eddy_test_cluster_n_workers(cl) < MAX_WORKERS);
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_worker(cl, &err) >= 0, "%s", err.msg);
}

/* eddy submit; returns the id it printed (malloc'd). */
static char *submit(bool rate_limited)
{
    char *argv[] = {EDDY_BINARY, "submit", "--coordinator", coord_url, "--job", "wordcount",
                    "--input", input, "--output", output, "--parallelism", "2",
                    rate_limited ? "--rate" : NULL, rate, NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &err);
    cr_assert_eq(rc, 0, "eddy submit exited %d: %s%s", rc, out, err);
    free(err);
    json_t *doc = json_loads(out, 0, NULL);
    const char *id = json_string_value(json_object_get(doc, "id"));
    char *copy = strdup(id ? id : out);
    copy[strcspn(copy, "\n")] = '\0';
    json_decref(doc);
    free(out);
    return copy;
}

static char *cli(const char *sub, const char *flag)
{
    char *argv[] = {EDDY_BINARY, (char *)sub, "--coordinator", coord_url, (char *)flag, NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &err);
    cr_assert_eq(rc, 0, "eddy %s %s exited %d: %s%s", sub, flag ? flag : "", rc, out, err);
    free(err);
    return out;
}

/* ---- samples that must never go backwards ---------------------------------- */

typedef struct series {
    char key[256];
    double value;
} series_t;

static series_t seen[MAX_SERIES];
static int n_seen;
static long long source_read; /* the latest sample's source records_in */

static void expect_not_lower(const char *key, double value, const char *when)
{
    for (int i = 0; i < n_seen; i++)
        if (!strcmp(seen[i].key, key)) {
            cr_assert_geq(value, seen[i].value, "%s went back from %.0f to %.0f (%s)", key,
                          seen[i].value, value, when);
            seen[i].value = value;
            return;
        }
    cr_assert_lt(n_seen, MAX_SERIES);
    snprintf(seen[n_seen].key, sizeof seen[n_seen].key, "%s", key);
    seen[n_seen++].value = value;
}

/* The latest sample of a series, -1 if never seen. */
static double last_seen(const char *key)
{
    for (int i = 0; i < n_seen; i++)
        if (!strcmp(seen[i].key, key))
            return seen[i].value;
    return -1;
}

/* The latest sample of the job-level counter family `name` of job `id`. */
static double job_counter(const char *name, const char *id)
{
    char key[256];
    snprintf(key, sizeof key, "%s{job=\"%s\"}", name, id);
    return last_seen(key);
}

static char *get_metrics(void)
{
    long status = 0;
    char *body = eddy_test_http_get(ports[1], "/metrics", 5000, &status);
    if (body && status != 200) {
        free(body);
        return NULL;
    }
    return body;
}

/* One sample of the job's counters in status and of /metrics' counters of
 * job `id`; false when the coordinator did not answer (it may be down). */
static bool sample(const char *id, const char *when)
{
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, id) : NULL;
    if (!j) {
        json_decref(st);
        return false;
    }
    size_t i;
    json_t *op;
    json_array_foreach(json_object_get(j, "operators"), i, op)
    {
        const char *name = json_string_value(json_object_get(op, "name"));
        const char *fields[] = {"records_in", "records_out", "busy_ns"};
        for (size_t f = 0; f < 3; f++) {
            char key[256];
            snprintf(key, sizeof key, "status %s %s %s", id, name, fields[f]);
            expect_not_lower(key, (double)json_integer_value(json_object_get(op, fields[f])), when);
        }
        if (json_is_true(json_object_get(op, "source")))
            source_read = json_integer_value(json_object_get(op, "records_in"));
    }
    json_decref(st);
    char *m = get_metrics();
    char label[128]; /* {job="ID"} or {job="ID",...}, not {job="ID-2"...} */
    snprintf(label, sizeof label, "{job=\"%s\"", id);
    for (char *line = m ? strtok(m, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || !strstr(line, label))
            continue;
        char *space = strrchr(line, ' ');
        if (!space)
            continue;
        *space = '\0';
        if (strstr(line, "_total{")) /* every counter family */
            expect_not_lower(line, strtod(space + 1, NULL), when);
    }
    free(m);
    return true;
}

typedef struct progress_wait {
    const char *id;
    const char *state; /* NULL: any */
    long long min_read;
    int64_t min_restarts;
    const char *when;
} progress_wait_t;

static bool progressed(void *arg)
{
    progress_wait_t *p = arg;
    if (!sample(p->id, p->when))
        return false;
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, p->id) : NULL;
    const char *state = j ? json_string_value(json_object_get(j, "state")) : NULL;
    bool ok = state && (!p->state || !strcmp(state, p->state)) && source_read >= p->min_read &&
              json_integer_value(json_object_get(j, "restarts")) >= p->min_restarts;
    json_decref(st);
    return ok;
}

static void wait_progress(const char *id, const char *state, long long min_read, int64_t min_restarts,
                          uint64_t timeout_ms, const char *when)
{
    progress_wait_t p = {id, state, min_read, min_restarts, when};
    if (!eddy_poll_until(progressed, &p, timeout_ms)) {
        char *l = log_text();
        cr_assert_fail("timed out waiting for %s (source read %lld); coordinator log:\n%s", when,
                       source_read, l);
    }
}

typedef struct worker_pick {
    pid_t pid;
} worker_pick_t;

static bool worker_with_tasks(void *arg)
{
    worker_pick_t *w = arg;
    json_t *st = eddy_test_status(ports[0]);
    size_t i;
    json_t *wj;
    json_array_foreach(json_object_get(st, "workers"), i, wj)
    {
        if (json_is_true(json_object_get(wj, "alive")) && json_integer_value(json_object_get(wj, "tasks")) > 0)
            w->pid = (pid_t)json_integer_value(json_object_get(wj, "pid"));
    }
    json_decref(st);
    return w->pid > 0;
}

static long long status_source_read(const char *id, const char **state_out, char *state_buf, size_t size)
{
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, id) : NULL;
    long long read = -1;
    size_t i;
    json_t *op;
    json_array_foreach(json_object_get(j, "operators"), i, op)
    {
        if (json_is_true(json_object_get(op, "source")))
            read = json_integer_value(json_object_get(op, "records_in"));
    }
    snprintf(state_buf, size, "%s", j ? json_string_value(json_object_get(j, "state")) : "(none)");
    *state_out = state_buf;
    json_decref(st);
    return read;
}

Test(job_history, counters_never_go_backwards, .init = setup, .fini = teardown, .timeout = 300)
{
    start_coordinator();
    for (int i = 0; i < 3; i++)
        start_worker();
    cr_assert(eddy_test_cluster_wait_workers(cl, 3, false, 20000), "3 workers never registered:\n%s", log_text());
    char *id = submit(true);
    cr_assert_str_eq(id, "wordcount");
    wait_progress(id, "running", LINES / 10, 0, 60000, "the first tenth of the input");

    /* a rescale: kept tasks continue, new ones start from zero */
    char *argv[] = {EDDY_BINARY, "rescale", "wordcount", "count", "3", "--coordinator", coord_url, NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 60000, &out, &err);
    cr_assert_eq(rc, 0, "eddy rescale exited %d: %s%s", rc, out, err);
    free(out);
    free(err);
    long long after_rescale = source_read;
    wait_progress(id, "running", after_rescale + LINES / 20, 0, 60000, "progress after the rescale");

    /* a restore: kill -9 a worker with tasks */
    worker_pick_t victim = {0};
    cr_assert(eddy_poll_until(worker_with_tasks, &victim, 10000));
    cr_assert_eq(kill(victim.pid, SIGKILL), 0);
    wait_progress(id, "running", 0, 1, 60000, "the restore after kill -9 of a worker");
    long long after_restore = source_read;
    wait_progress(id, "running", after_restore + LINES / 20, 1, 60000, "progress after the restore");

    /* a coordinator restart: the saved counters continue */
    cr_assert(sample(id, "before the coordinator kill"));
    double checkpoints = job_counter("eddy_checkpoints_completed_total", id);
    cr_assert_geq(checkpoints, 1, "no completed checkpoint in /metrics");
    cr_assert_geq(job_counter("eddy_rescales_total", id), 1, "the rescale is not in /metrics");
    cr_assert_geq(job_counter("eddy_job_restarts_total", id), 1, "the restore is not in /metrics");
    kill(-coord->pid, SIGKILL);
    cr_assert_eq(eddy_proc_wait(coord, 10000), 128 + SIGKILL);
    start_coordinator();
    wait_progress(id, "finished", LINES, 0, 180000, "the job to finish after the coordinator restart");

    /* a finished job keeps its numbers */
    char sb[32];
    const char *state;
    long long final_read = status_source_read(id, &state, sb, sizeof sb);
    cr_assert_geq(final_read, LINES, "the finished job's source read %lld of %d lines", final_read, LINES);
    cr_assert(sample(id, "after the finish"));
    cr_assert_gt(job_counter("eddy_checkpoints_completed_total", id), checkpoints,
                 "checkpoints after the coordinator restart were not added to the earlier ones");
    cr_assert_geq(job_counter("eddy_rescale_bytes_total", id), 0, "no eddy_rescale_bytes_total");

    /* a resubmission gets a new id; the old record stays */
    char *id2 = submit(false);
    cr_assert_str_eq(id2, "wordcount-2");
    wait_progress(id2, "finished", LINES, 0, 120000, "wordcount-2 to finish");
    /* an undisturbed run reads each line once; the final count is shown
     * once it has been saved, which follows the finish closely */
    wait_progress(id2, "finished", LINES, 0, 10000, "wordcount-2's final numbers");
    long long read2 = status_source_read(id2, &state, sb, sizeof sb);
    cr_assert_eq(read2, LINES, "an undisturbed run reads each line once: %lld", read2);
    cr_assert_eq(status_source_read(id, &state, sb, sizeof sb), final_read);
    cr_assert_str_eq(state, "finished");

    /* history survives a coordinator restart; ids are never reused */
    kill(-coord->pid, SIGKILL);
    cr_assert_eq(eddy_proc_wait(coord, 10000), 128 + SIGKILL);
    start_coordinator();
    cr_assert_eq(status_source_read(id, &state, sb, sizeof sb), final_read,
                 "wordcount's numbers after a coordinator restart");
    cr_assert_str_eq(state, "finished");
    cr_assert_eq(status_source_read(id2, &state, sb, sizeof sb), read2);
    cr_assert(sample(id, "history after the restart"));
    char *id3 = submit(false);
    cr_assert_str_eq(id3, "wordcount-3");
    wait_progress(id3, "finished", LINES, 0, 120000, "wordcount-3 to finish");

    /* status shows running jobs; --all the history */
    char *running = cli("status", NULL), *all = cli("status", "--all");
    cr_assert_null(strstr(running, "wordcount"), "eddy status lists ended jobs:\n%s", running);
    cr_assert(strstr(running, "3 ended jobs not shown"), "%s", running);
    cr_assert(strstr(all, "wordcount (wordcount) finished"), "%s", all);
    cr_assert(strstr(all, "wordcount-2 (wordcount) finished"), "%s", all);
    cr_assert(strstr(all, "wordcount-3 (wordcount) finished"), "%s", all);
    free(running);
    free(all);
    free(id);
    free(id2);
    free(id3);
}

/* ---- eddy scaling ---------------------------------------------------------- */

static void post_decision(const char *json)
{
    int64_t status = -1;
    char *body = NULL;
    eddy_err_t err = {{0}};
    char *args[] = {(char *)json};
    cr_assert_eq(eddy_client_call(coord_url, NULL, "decision", 1, args, 10000, &status, &body, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(status, 0, "%s", body ? body : "");
    free(body);
}

static bool second_checkpoint_done(void *arg)
{
    json_t **ck = arg;
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, "wordcount") : NULL;
    json_t *last = j ? json_object_get(j, "last_checkpoint") : NULL;
    bool done = json_integer_value(json_object_get(last, "id")) >= 2;
    if (done)
        *ck = json_incref(last);
    json_decref(st);
    return done;
}

Test(job_history, checkpoint_costs_are_visible, .init = setup, .fini = teardown, .timeout = 120)
{
    start_coordinator();
    start_worker();
    start_worker();
    cr_assert(eddy_test_cluster_wait_workers(cl, 2, false, 20000), "2 workers never registered:\n%s", log_text());
    free(submit(true));
    json_t *ck = NULL;
    cr_assert(eddy_poll_until(second_checkpoint_done, &ck, 60000), "no second checkpoint:\n%s", log_text());
    cr_assert_gt(json_integer_value(json_object_get(ck, "bytes")), 0, "no state bytes");
    cr_assert_geq(json_integer_value(json_object_get(ck, "objects")), 1, "no snapshot file");
    cr_assert(json_is_integer(json_object_get(ck, "objects_referenced")),
              "last_checkpoint.objects_referenced missing");
    const char *parts[] = {"sync_ms", "async_ms", "alignment_ms"};
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(ck, parts[i]);
        cr_assert(json_is_number(v) && json_number_value(v) >= 0, "last_checkpoint.%s missing", parts[i]);
        cr_assert_leq(json_number_value(v), json_number_value(json_object_get(ck, "duration_ms")) + 1,
                      "%s %.3f ms is longer than the checkpoint", parts[i], json_number_value(v));
    }
    /* the keyed count's state is written by its snapshot writer, and
     * two workers' sources cannot both be the last barrier at once */
    cr_assert_gt(json_number_value(json_object_get(ck, "async_ms")), 0, "no asynchronous part");
    json_decref(ck);

    char *metrics = get_metrics();
    cr_assert(metrics, "no /metrics");
    const char *families[] = {"eddy_checkpoint_sync_seconds", "eddy_checkpoint_async_seconds",
                              "eddy_checkpoint_alignment_seconds", "eddy_checkpoint_bytes",
                              "eddy_checkpoint_objects", "eddy_checkpoint_referenced_objects"};
    for (int i = 0; i < 6; i++) {
        char series[128];
        snprintf(series, sizeof series, "\n%s{job=\"wordcount\"} ", families[i]);
        cr_assert(strstr(metrics, series), "%s missing from /metrics", series + 1);
    }
    free(metrics);

    char *argv[] = {EDDY_BINARY, "status", "wordcount", "--coordinator", coord_url, NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &err);
    cr_assert_eq(rc, 0, "eddy status wordcount exited %d: %s%s", rc, out, err);
    cr_assert(strstr(out, "    checkpoint ") && strstr(out, " ms (sync ") && strstr(out, " files; ") &&
                  strstr(out, " key groups referred to earlier checkpoints; "),
              "no checkpoint line in eddy status wordcount:\n%s", out);
    free(out);
    free(err);
}

Test(job_history, scaling_view, .init = setup, .fini = teardown, .timeout = 60)
{
    start_coordinator();
    post_decision("{\"time_ms\":1764756902250,\"job_time_ms\":12300,\"job\":\"wordcount\","
                  "\"operator\":\"count\",\"old_parallelism\":2,\"new_parallelism\":2,"
                  "\"action\":\"no_change\",\"applied\":false,"
                  "\"rates\":{\"target_input_rate\":null,\"true_rate_per_instance\":null,\"observed_input_rate\":null,"
                  "\"selectivity\":null,\"utilisation\":null,\"target_utilisation\":null,"
                  "\"projected_utilisation\":null},"
                  "\"reason\":\"within bounds\"}");
    post_decision("{\"time_ms\":1764756912250,\"job_time_ms\":22300,\"job\":\"wordcount\","
                  "\"operator\":\"count\",\"old_parallelism\":1,\"new_parallelism\":2,"
                  "\"action\":\"scale_up\",\"applied\":true,"
                  "\"rates\":{\"target_input_rate\":null,\"true_rate_per_instance\":null,\"observed_input_rate\":null,"
                  "\"selectivity\":null,\"utilisation\":null,\"target_utilisation\":null,"
                  "\"projected_utilisation\":null},"
                  "\"reason\":\"target 1002 rec/s / (1250 "
                  "rec/s per instance x 0.80) = 1.002 -> 2\"}");
    setenv("TZ", "UTC0", 1); /* the CLI inherits it */
    char *brief = cli("scaling", NULL), *all = cli("scaling", "--all");
    unsetenv("TZ");
    cr_assert_str_eq(brief,
                     "2025-12-03T10:15:12+00:00 wordcount/count 1 -> 2 scale_up at 22.3 s: target 1002 "
                     "rec/s / (1250 rec/s per instance x 0.80) = 1.002 -> 2\n"
                     "(1 no-change decision not shown: eddy scaling --all)\n");
    cr_assert(strstr(all, "2025-12-03T10:15:02+00:00 wordcount/count 2 no_change at 12.3 s: within bounds\n"),
              "%s", all);
    cr_assert(strstr(all, "scale_up at 22.3 s"), "%s", all);
    free(brief);
    free(all);
}

/* ---- eddy local --changelog FILE, --quiet ------------------------------------ */

static char small[600];

typedef struct quiet_run {
    char *out, *errs; /* eddy local's stdout and stderr, malloc'd */
} quiet_run_t;

/* `eddy local --quiet [--changelog FILE] --job wordcount` over two short
 * lines (in `small`), to completion: no progress line and no INFO line of
 * eddy local, its coordinator or its workers on stderr, and no row there. */
static quiet_run_t run_quiet_wordcount(const char *changelog)
{
    eddy_err_t err = {{0}};
    char outp[600], errp[600], port_s[16];
    snprintf(small, sizeof small, "%s/small.txt", dir);
    snprintf(outp, sizeof outp, "%s/stdout.txt", dir);
    snprintf(errp, sizeof errp, "%s/stderr.txt", dir);
    snprintf(port_s, sizeof port_s, "%d", ports[0]);
    const char *text = "to be or not to be\nthat is the question\n";
    cr_assert(eddy_write_file(small, text, strlen(text)) == 0);
    char *argv[16] = {EDDY_BINARY, "local", "--workers", "2", "--control-port", port_s, "--http-port",
                      http_s, "--quiet", "--job", "wordcount", "--input", small};
    int k = 13;
    if (changelog) {
        argv[k++] = "--changelog";
        argv[k++] = (char *)changelog;
    }
    argv[k] = NULL;
    eddy_proc_t p = {0};
    cr_assert(eddy_proc_start(&p, argv, outp, errp, &err) == 0, "%s", err.msg);
    int rc = eddy_proc_wait(&p, 90000);
    quiet_run_t r = {eddy_read_file(outp, NULL), eddy_read_file(errp, NULL)};
    if (!r.out)
        r.out = strdup("");
    if (!r.errs)
        r.errs = strdup("");
    cr_assert_eq(rc, 0, "eddy local exited %d; stderr:\n%s", rc, r.errs);
    cr_assert(!strstr(r.errs, "records read"), "--quiet printed progress lines:\n%s", r.errs);
    cr_assert(!strstr(r.errs, " INFO "), "--quiet printed INFO lines:\n%s", r.errs);
    cr_assert(!strstr(r.errs, "+I["), "changelog rows on stderr:\n%s", r.errs);
    return r;
}

Test(job_history, changelog_file_and_quiet, .init = setup, .fini = teardown, .timeout = 120)
{
    char changelog[600];
    snprintf(changelog, sizeof changelog, "%s/changelog.txt", dir);
    quiet_run_t r = run_quiet_wordcount(changelog);
    char *log = eddy_read_file(changelog, NULL);
    cr_assert(log && strstr(log, "+I[to, 1]") && strstr(log, "+U[be, 2]"), "changelog file:\n%s",
              log ? log : "(none)");
    cr_assert(!strstr(r.out, "+I["), "the changelog also went to stdout:\n%s", r.out);
    free(r.out);
    free(r.errs);
    free(log);
    /* an unwritable file is a usage error, and nothing starts */
    char bad[700], port_s[16];
    snprintf(bad, sizeof bad, "%s/no/such/dir/changelog.txt", dir);
    snprintf(port_s, sizeof port_s, "%d", ports[0]);
    char *argv2[] = {EDDY_BINARY, "local", "--workers", "1", "--control-port", port_s, "--http-port",
                     http_s, "--changelog", bad, "--job", "wordcount", "--input", small, NULL};
    char *o2 = NULL, *e2 = NULL;
    int rc = eddy_proc_run(argv2, 30000, &o2, &e2);
    cr_assert_eq(rc, 2, "exit %d: %s", rc, e2 ? e2 : "");
    cr_assert(e2 && strstr(e2, "--changelog: cannot write"), "%s", e2 ? e2 : "");
    free(o2);
    free(e2);
}

/* Without --changelog the job's output is all of stdout: rows of the
 * changelog, each whole, and nothing else. */
Test(job_history, quiet_prints_only_the_changelog, .init = setup, .fini = teardown, .timeout = 120)
{
    quiet_run_t r = run_quiet_wordcount(NULL);
    cr_assert(strstr(r.out, "+I[to, 1]\n") && strstr(r.out, "+U[be, 2]\n"), "stdout:\n%s", r.out);
    size_t rows = 0;
    for (const char *line = r.out; *line; rows++) {
        const char *end = strchr(line, '\n');
        cr_assert(end, "stdout ends in a partial line: %s", line);
        cr_assert((line[0] == '+' || line[0] == '-') && strchr("IUD", line[1]) && line[2] == '[' &&
                      end[-1] == ']',
                  "stdout has a line that is not a changelog row: %.*s", (int)(end - line), line);
        line = end + 1;
    }
    cr_assert_geq(rows, 8, "stdout:\n%s", r.out); /* 8 distinct words, +U rows for repeats */
    free(r.out);
    free(r.errs);
}
