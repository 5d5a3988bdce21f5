/* test_plugins.c - user jobs from plugins (examples/), end to end: `eddy
 * local --plugin` with 3 workers loads the library, ships it to the workers
 * over the control plane (each fetches it by content hash into its own
 * fresh cache in TMPDIR, the test's directory, so nothing is cached before), and
 * runs the job through a rescale and a kill -9 of a worker, with exact
 * output. A plugin whose entry point fails, or that was built for another
 * ABI, fails the command itself with the reason (exit 2), not the workers.
 *
 *   clicks       per-user clicks (custom keyed aggregate): rescaled 2 -> 3
 *                mid-run, then a worker is killed; output vs a reference.
 *   json_filter  JSON filter/project into exactly-once part files: a worker
 *                is killed mid-run; the committed lines vs a reference. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/proc.h"
#include "tests/unit/leak_check.h"

#define RUN_TIMEOUT_MS 180000
#define STATE_TIMEOUT_MS 60000
#define LINES 48000
#define RATE "6000" /* lines/s: about 8 s of input */

TestSuite(plugins, .fini = eddy_test_leak_check);

static eddy_test_cluster_t *cl;
static char *dir, *cp, *hp, *coord;
static int ports[2];
static eddy_proc_t *local;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "plugins", .workers = 3, .checkpoint_interval = "300",
                                  .heartbeat_ms = "100", .heartbeat_timeout_ms = "1500"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    /* each worker's plugin cache is then a fresh directory in dir (no
     * $XDG_RUNTIME_DIR/eddy-plugins shared with earlier runs): empty */
    setenv("TMPDIR", dir, 1);
    unsetenv("XDG_RUNTIME_DIR");
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    cp = eddy_test_cluster_port_s(cl, 0);
    hp = eddy_test_cluster_http_port_s(cl, 0);
    coord = eddy_test_cluster_url(cl, 0);
    local = eddy_test_cluster_local(cl);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

/* INFO lines read: no --quiet */
static void start_local(const char *plugin, char *const job_args[])
{
    const char *argv[64] = {"--plugin", plugin};
    int k = 2;
    for (int i = 0; job_args[i] && k < 63; i++)
        argv[k++] = job_args[i];
    argv[k] = NULL;
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
}

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

typedef struct progress {
    const char *job;
    long long min_records;
} progress_t;

/* The job runs and its source has emitted at least min_records. */
static bool source_progressed(void *arg)
{
    progress_t *p = arg;
    json_t *st = eddy_test_status(ports[0]);
    json_t *j = st ? eddy_test_status_job(st, p->job) : NULL;
    bool ok = false;
    const char *state = j ? json_string_value(json_object_get(j, "state")) : NULL;
    if (state && !strcmp(state, "running")) {
        json_t *op = json_array_get(json_object_get(j, "operators"), 0);
        ok = json_integer_value(json_object_get(op, "records_out")) >= p->min_records;
    }
    json_decref(st);
    return ok;
}

/* kill -9 one alive worker (found through eddy status --json). */
static void kill_a_worker(void)
{
    json_t *st = eddy_test_status(ports[0]);
    cr_assert(st, "no status");
    long long pid = 0;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w)
    {
        if (json_is_true(json_object_get(w, "alive")))
            pid = json_integer_value(json_object_get(w, "pid"));
    }
    json_decref(st);
    cr_assert_gt(pid, 0, "no alive worker");
    cr_assert_eq(kill((pid_t)pid, SIGKILL), 0);
}

static void run_cli(char *const argv[], const char *what)
{
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 60000, &out, &err);
    cr_assert_eq(rc, 0, "%s exited %d: %s%s", what, rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
}

static int cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of text, sorted, joined again with '\n' (malloc'd). */
static char *sorted_lines(char *text)
{
    size_t n = 0, cap = 1024;
    char **lines = malloc(cap * sizeof *lines);
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (n == cap)
            lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[n++] = l;
    }
    qsort(lines, n, sizeof *lines, cmp_lines);
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total += strlen(lines[i]) + 1;
    char *out = malloc(total), *p = out;
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s\n", lines[i]);
    *p = '\0';
    free(lines);
    return out;
}

Test(plugins, clicks_through_a_rescale_and_a_killed_worker, .init = setup, .fini = teardown,
     .timeout = 300)
{
    char input[700], out[700];
    snprintf(input, sizeof input, "%s/clicks.txt", dir);
    snprintf(out, sizeof out, "%s/clicks.tsv", dir);
    FILE *f = fopen(input, "w");
    static long counts[500];
    uint64_t x = 12345;
    for (int i = 0; i < LINES; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int user = (int)((x >> 33) % 500);
        counts[user]++;
        fprintf(f, "u%03d p%d\n", user, (int)((x >> 20) % 40));
    }
    fclose(f);
    char expected[500 * 16] = "", *p = expected;
    for (int u = 0; u < 500; u++) /* "u000".."u499" sort as numbers do */
        if (counts[u])
            p += sprintf(p, "u%03d\t%ld\n", u, counts[u]);

    char *job[] = {"--job", "clicks", "--input", input, "--output", out, "--rate", RATE, NULL};
    start_local(EDDY_BINARY_DIR "/examples/libclicks.so", job);
    progress_t early = {"clicks", 6000};
    cr_assert(eddy_poll_until(source_progressed, &early, STATE_TIMEOUT_MS), "the job never ran");
    char *rescale[] = {EDDY_BINARY, "rescale", "--coordinator", coord, "clicks", "count", "3", NULL};
    run_cli(rescale, "eddy rescale clicks count 3");
    progress_t later = {"clicks", 20000};
    cr_assert(eddy_poll_until(source_progressed, &later, STATE_TIMEOUT_MS), "no progress after the rescale");
    kill_a_worker();
    int rc = eddy_proc_wait(local, RUN_TIMEOUT_MS);
    char *log = log_text();
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log);
    cr_assert(strstr(log, "fetching it from the coordinator"), "no worker fetched the plugin");
    cr_assert(strstr(log, "restoring from checkpoint") || strstr(log, "restarting from the beginning"),
              "the killed worker did not cause a restore");
    size_t got_len = 0;
    char *got = eddy_read_file(out, &got_len);
    cr_assert(got, "no output");
    cr_assert_str_eq(got, expected, "clicks output differs from the reference");
    free(got);
    free(log);
}

Test(plugins, json_filter_through_a_killed_worker, .init = setup, .fini = teardown, .timeout = 300)
{
    char input[700], outdir[700];
    snprintf(input, sizeof input, "%s/events.jsonl", dir);
    snprintf(outdir, sizeof outdir, "%s/out", dir);
    FILE *f = fopen(input, "w");
    size_t cap = (size_t)LINES * 40, len = 0;
    char *expected = malloc(cap);
    for (int i = 0; i < LINES; i++) {
        const char *type = i % 3 == 0 ? "view" : "click";
        fprintf(f, "{\"user\":\"u%d\",\"type\":\"%s\",\"page\":\"p%d\",\"n\":%d}\n", i % 97, type,
                i % 13, i);
        if (i % 3 != 0)
            len += (size_t)snprintf(expected + len, cap - len, "{\"user\":\"u%d\",\"n\":%d}\n", i % 97, i);
        if (i == 17) /* a line that is not JSON is dropped */
            fprintf(f, "not json\n");
    }
    fclose(f);

    char *job[] = {"--job", "json_filter", "--input", input, "--field", "type", "--equals", "click",
                   "--project", "user,n", "--output-dir", outdir, "--rate", RATE, NULL};
    start_local(EDDY_BINARY_DIR "/examples/libjson_filter.so", job);
    progress_t mid = {"json_filter", 15000};
    cr_assert(eddy_poll_until(source_progressed, &mid, STATE_TIMEOUT_MS), "the job never ran");
    kill_a_worker();
    int rc = eddy_proc_wait(local, RUN_TIMEOUT_MS);
    char *log = log_text();
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cat %s/part-*.txt > %s/all.txt", outdir, dir);
    cr_assert_eq(system(cmd), 0);
    char all[800];
    snprintf(all, sizeof all, "%s/all.txt", dir);
    char *got = eddy_read_file(all, NULL);
    cr_assert(got, "no part files");
    char *got_sorted = sorted_lines(got), *want_sorted = sorted_lines(expected);
    cr_assert(!strcmp(got_sorted, want_sorted), "committed lines differ from the reference (%zu vs %zu bytes)",
              strlen(got_sorted), strlen(want_sorted));
    free(got_sorted);
    free(want_sorted);
    free(got);
    free(expected);
    free(log);
}

static void expect_refused(const char *plugin, const char *needle)
{
    char *argv[] = {EDDY_BINARY, "local", "--workers", "3", "--control-port", cp, "--http-port", hp,
                    "--plugin", (char *)plugin, "--job", "whatever", NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &err);
    cr_assert_eq(rc, 2, "eddy local with %s exited %d: %s", plugin, rc, err ? err : "");
    cr_assert(err && strstr(err, needle), "stderr lacks '%s': %s", needle, err ? err : "");
    cr_assert(!strstr(err, "registered as worker"), "workers were started: %s", err);
    free(out);
    free(err);
}

Test(plugins, a_failing_or_foreign_plugin_fails_the_command_not_the_workers, .init = setup,
     .fini = teardown, .timeout = 120)
{
    expect_refused(EDDY_BINARY_DIR "/test-plugins/libtest_plugin_fails.so",
                   "cannot reach the model server");
    expect_refused(EDDY_BINARY_DIR "/test-plugins/libtest_plugin_bad_abi.so", "was built for eddy ABI");
    expect_refused(EDDY_BINARY_DIR "/test-plugins/libtest_not_a_plugin.so", "not an eddy plugin");
}
