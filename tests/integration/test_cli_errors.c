/* test_cli_errors.c - the CLI's error contract, through the real binary.
 *
 * DESIGN.md: bad flags or input give a one-line error naming the problem,
 * exit status 2, and nothing started; runtime failures (an unreachable
 * coordinator) exit 1 with a clear message; --help exits 0. Each case runs
 * `eddy` as a user would and checks exit status and stderr. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/cluster.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"

#define T 20000

/* The cluster of a test that runs `eddy local` (its free ports, its
 * directory); destroyed after each test. */
static eddy_test_cluster_t *cl;

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

TestSuite(cli, .fini = teardown);

/* `eddy local --workers 1 --control-port P --http-port H --quiet --job JOB
 * ARGS...` on a cluster's free ports (so a wrongly started run cannot
 * collide), run to its end: its exit code, its stderr in *err (malloc'd),
 * and how long it took in *took. */
static int run_local(const char *job, char *const job_args[], char **err, uint64_t *took)
{
    eddy_err_t e = {{0}};
    if (!cl) {
        eddy_test_cluster_opts_t o = {.tag = "cli", .workers = 1, .checkpoint_interval = "",
                                      .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
        cl = eddy_test_cluster_new(&o, &e);
        cr_assert(cl, "%s", e.msg);
    }
    const char *argv[40] = {"--quiet", "--job", job};
    int k = 3;
    for (int i = 0; job_args[i] && k < 39; i++)
        argv[k++] = job_args[i];
    argv[k] = NULL;
    char *log = eddy_test_cluster_path(cl, "local.log");
    unlink(log); /* this run's stderr alone */
    uint64_t t0 = eddy_mono_ms();
    int rc = eddy_test_cluster_run_local(cl, argv, T, &e);
    if (took)
        *took = eddy_mono_ms() - t0;
    *err = eddy_read_file(log, NULL);
    if (!*err)
        *err = strdup("");
    return rc;
}

static int run(char *const argv[], char **out, char **err)
{
    return eddy_proc_run(argv, T, out, err);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Runs argv: it must exit with `want` and name `needle` on its stdout
 * (on_stdout) or stderr; with one_line, its stderr is exactly one line. */
static void expect_run(char *const argv[], int want, bool on_stdout, const char *needle,
                       bool one_line)
{
    char *out, *err;
    int rc = run(argv, &out, &err);
    const char *where = on_stdout ? "stdout" : "stderr";
    char *text = on_stdout ? out : err;
    cr_assert_eq(rc, want, "%s ...: exit %d (want %d); stderr:\n%s", argv[1] ? argv[1] : "", rc,
                 want, err);
    cr_assert(strstr(text, needle), "%s should name '%s':\n%s", where, needle, text);
    if (one_line)
        cr_assert_eq(count_lines(err), 1, "want exactly one line on stderr, got:\n%s", err);
    free(out);
    free(err);
}

/* A port nobody listens on (free a moment ago). */
static int closed_port(void)
{
    eddy_err_t err = {{0}};
    int p = eddy_test_free_port(&err);
    cr_assert(p > 0, "%s", err.msg);
    return p;
}

Test(cli, no_args_exits_2_with_usage)
{
    char *argv[] = {EDDY_BINARY, NULL};
    expect_run(argv, 2, false, "usage", false);
}

Test(cli, unknown_subcommand_exits_2)
{
    char *argv[] = {EDDY_BINARY, "frobnicate", NULL};
    expect_run(argv, 2, false, "frobnicate", false);
}

Test(cli, local_bogus_flag_one_line_naming_it)
{
    char *argv[] = {EDDY_BINARY, "local", "--bogus", NULL};
    expect_run(argv, 2, false, "bogus", true);
}

Test(cli, local_unknown_job_exits_2)
{
    char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--job", "nosuchjob", NULL};
    expect_run(argv, 2, false, "nosuchjob", true);
}

Test(cli, wordcount_without_source_exits_2)
{
    char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--job", "wordcount", NULL};
    expect_run(argv, 2, false, "--input", true); /* the source it needs */
}

Test(cli, missing_input_file_names_it, .timeout = 60)
{
    char *missing[] = {"--input", "/nonexistent/eddy-test/no-such-input.txt", NULL};
    char *err;
    int rc = run_local("wordcount", missing, &err, NULL);
    cr_assert_eq(rc, 2, "exit %d (want 2: a usage error, nothing started); stderr:\n%s", rc, err);
    cr_assert(strstr(err, "no-such-input.txt"), "stderr should name the file:\n%s", err);
    cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "want one line on stderr:\n%s", err);
    free(err);
}

Test(cli, worker_cannot_reach_coordinator, .timeout = 30)
{
    char coord[64];
    snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", closed_port());
    char *out, *err;
    char *argv[] = {EDDY_BINARY, "worker", "--coordinator", coord, "--register-timeout-ms", "500",
                    NULL};
    uint64_t t0 = eddy_mono_ms();
    int rc = run(argv, &out, &err);
    cr_assert_eq(rc, 1, "exit %d; stderr:\n%s", rc, err);
    cr_assert(strstr(err, "cannot reach coordinator"), "stderr:\n%s", err);
    cr_assert_lt(eddy_mono_ms() - t0, 10000, "gave up only after %llu ms",
                 (unsigned long long)(eddy_mono_ms() - t0));
    free(out);
    free(err);
}

Test(cli, status_against_closed_port_exits_1, .timeout = 30)
{
    char coord[64];
    snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", closed_port());
    char *argv[] = {EDDY_BINARY, "status", "--coordinator", coord, NULL};
    expect_run(argv, 1, false, coord, false);
}

Test(cli, help_exits_0)
{
    char *a1[] = {EDDY_BINARY, "--help", NULL};
    expect_run(a1, 0, true, "local", false);
    expect_run(a1, 0, true, "rescale", false);
    char *a2[] = {EDDY_BINARY, "local", "--help", NULL};
    expect_run(a2, 0, true, "--workers", false);
    char *a3[] = {EDDY_BINARY, "local", "--job", "wordcount", "--help", NULL};
    expect_run(a3, 0, true, "--input", false);
}

Test(cli, jobs_lists_wordcount)
{
    char *argv[] = {EDDY_BINARY, "jobs", NULL};
    expect_run(argv, 0, true, "wordcount", false);
}

/* ---- numeric flags, --input kinds: usage errors before anything starts ---- */

/* A usage error: exit 2 within a generous bound, exactly one line on stderr
 * that names `needle` (the flag), and so no log line of a started process. */
static void expect_usage(const char *cmd, const char *arg, int rc, char *err, uint64_t took,
                         const char *needle)
{
    cr_assert_eq(rc, 2, "%s %s ...: exit %d (want 2); stderr:\n%s", cmd, arg ? arg : "", rc,
                 err ? err : "");
    cr_assert(strstr(err, needle), "stderr should name %s:\n%s", needle, err);
    cr_assert_eq(count_lines(err), 1, "want exactly one line on stderr:\n%s", err);
    cr_assert_lt(took, 10000, "a usage error took %llu ms", (unsigned long long)took);
    free(err);
}

static void expect_usage_error(char *const argv[], const char *needle)
{
    char *out, *err;
    uint64_t t0 = eddy_mono_ms();
    int rc = run(argv, &out, &err);
    free(out);
    expect_usage(argv[1], argv[2], rc, err, eddy_mono_ms() - t0, needle);
}

/* `eddy local` on the cluster's free ports (run_local). */
static void expect_local_usage_error(const char *needle, const char *job, char *const job_args[])
{
    char *err;
    uint64_t took;
    int rc = run_local(job, job_args, &err, &took);
    expect_usage("local", "--workers", rc, err, took, needle);
}

Test(cli, vocabulary_beyond_uint32_is_out_of_range, .timeout = 30)
{
    /* 2^32 used to pass the 64-bit check and become 0: SIGFPE in every worker */
    char *args[] = {"--generate", "--vocabulary", "4294967296", NULL};
    expect_local_usage_error("--vocabulary: 4294967296 is out of range 1..4294967295", "wordcount",
                             args);
}

Test(cli, cost_us_1e300_is_out_of_range, .timeout = 30)
{
    char *args[] = {"--generate", "--cost-us", "1e300", NULL};
    expect_local_usage_error("--cost-us: 1e300 is out of range", "wordcount", args);
}

Test(cli, job_numeric_flags_have_real_ranges, .timeout = 120)
{
    char *a1[] = {"--generate", "--vocabulary", "0", NULL};
    expect_local_usage_error("--vocabulary", "wordcount", a1);
    char *a2[] = {"--generate", "--words-per-line", "257", NULL};
    expect_local_usage_error("--words-per-line", "wordcount", a2);
    char *a3[] = {"--generate", "--parallelism", "0", NULL};
    expect_local_usage_error("--parallelism", "wordcount", a3);
    char *a4[] = {"--generate", "--max-parallelism", "40000", NULL};
    expect_local_usage_error("--max-parallelism", "wordcount", a4);
    char *a5[] = {"--generate", "--lines", "-1", NULL};
    expect_local_usage_error("--lines", "wordcount", a5);
    char *a6[] = {"--generate", "--rate", "1e300", NULL};
    expect_local_usage_error("--rate", "wordcount", a6);
    char *a7[] = {"--generate", "--cost-us", "nan", NULL};
    expect_local_usage_error("--cost-us", "wordcount", a7);
    char *a8[] = {"--generate", "--output-dir", "/tmp/x", "--users", "0", NULL};
    expect_local_usage_error("--users", "etl", a8);
    char *a9[] = {"--generate", "--output-dir", "/tmp/x", "--min-amount", "1e3", NULL};
    expect_local_usage_error("--min-amount", "etl", a9);
    char *a10[] = {"--generate", "--output-dir", "/tmp/x", "--sink-parallelism", "4294967297", NULL};
    expect_local_usage_error("--sink-parallelism", "etl", a10);
}

Test(cli, role_numeric_flags_have_real_ranges, .timeout = 120)
{
    char *l1[] = {EDDY_BINARY, "local", "--workers", "0", "--job", "wordcount", "--generate", NULL};
    expect_usage_error(l1, "--workers");
    char *l2[] = {EDDY_BINARY, "local", "--control-port", "65536", "--job", "wordcount", "--generate", NULL};
    expect_usage_error(l2, "--control-port");
    char *l3[] = {EDDY_BINARY, "local", "--heartbeat-ms", "4294967296", "--job", "wordcount", "--generate", NULL};
    expect_usage_error(l3, "--heartbeat-ms");
    char *w1[] = {EDDY_BINARY, "worker", "--data-port", "70000", NULL};
    expect_usage_error(w1, "--data-port");
    char *w2[] = {EDDY_BINARY, "worker", "--register-timeout-ms", "0", NULL};
    expect_usage_error(w2, "--register-timeout-ms");
    char *c1[] = {EDDY_BINARY, "coordinator", "--http-port", "-1", NULL};
    expect_usage_error(c1, "--http-port");
    char *c2[] = {EDDY_BINARY, "coordinator", "--checkpoint-interval", "99999999999", NULL};
    expect_usage_error(c2, "--checkpoint-interval");
    char *k1[] = {EDDY_BINARY, "controller", "--job", "j", "--target-utilisation", "1e300", NULL};
    expect_usage_error(k1, "--target-utilisation");
    char *k2[] = {EDDY_BINARY, "controller", "--job", "j", "--min-parallelism", "4294967296", NULL};
    expect_usage_error(k2, "--min-parallelism");
    char *k3[] = {EDDY_BINARY, "controller", "--job", "j", "--policy", "dhalion", NULL};
    expect_usage_error(k3, "--policy: expected eddy, ds2, threshold or flink");
    char *r1[] = {EDDY_BINARY, "rescale", "j", "count", "4294967297", NULL};
    expect_usage_error(r1, "PARALLELISM");
    char *r2[] = {EDDY_BINARY, "rescale", "--timeout-ms", "0", "j", "count", "2", NULL};
    expect_usage_error(r2, "--timeout-ms");
}

/* --migration names a mode; its step size is at least one key group. */
Test(cli, migration_flags_are_checked, .timeout = 60)
{
    char *l1[] = {EDDY_BINARY, "local", "--migration", "gradual", "--job", "wordcount", "--generate", NULL};
    expect_usage_error(l1, "--migration: expected sudden or fluid, got 'gradual'");
    char *l2[] = {EDDY_BINARY, "local", "--migration-step-key-groups", "0", "--job", "wordcount", "--generate", NULL};
    expect_usage_error(l2, "--migration-step-key-groups");
    char *c1[] = {EDDY_BINARY, "coordinator", "--migration", "", NULL};
    expect_usage_error(c1, "--migration");
    char *c2[] = {EDDY_BINARY, "coordinator", "--migration-step-key-groups", "40000", NULL};
    expect_usage_error(c2, "--migration-step-key-groups");
}

/* --checkpoint-full-every is a count of checkpoints, at least 1. */
Test(cli, checkpoint_full_every_is_checked, .timeout = 60)
{
    char *l1[] = {EDDY_BINARY, "local", "--checkpoint-full-every", "0", "--job", "wordcount", "--generate", NULL};
    expect_usage_error(l1, "--checkpoint-full-every");
    char *l2[] = {EDDY_BINARY, "local", "--checkpoint-full-every", "ten", "--job", "wordcount", "--generate", NULL};
    expect_usage_error(l2, "--checkpoint-full-every");
    char *c1[] = {EDDY_BINARY, "coordinator", "--checkpoint-full-every", "-3", NULL};
    expect_usage_error(c1, "--checkpoint-full-every");
    char *c2[] = {EDDY_BINARY, "coordinator", "--checkpoint-full-every", "1000001", NULL};
    expect_usage_error(c2, "--checkpoint-full-every");
    char *h[] = {EDDY_BINARY, "coordinator", "--help", NULL};
    expect_run(h, 0, true, "--checkpoint-full-every", false);
}

Test(cli, dev_zero_as_input_is_a_usage_error, .timeout = 30)
{
    /* used to exit 0 at once with an empty output */
    char *args[] = {"--input", "/dev/zero", NULL};
    expect_local_usage_error("/dev/zero", "wordcount", args);
}

Test(cli, fifo_and_directory_as_input_are_usage_errors, .timeout = 60)
{
    eddy_err_t e = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "cli-fifo", .workers = 1, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &e);
    cr_assert(cl, "%s", e.msg);
    char *dir = eddy_test_cluster_dir(cl);
    char *fifo = eddy_test_cluster_path(cl, "lines.fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0, "mkfifo %s", fifo);
    char *a1[] = {"--input", fifo, NULL};
    expect_local_usage_error("lines.fifo", "wordcount", a1);
    char *a2[] = {"--input", dir, "--output-dir", fifo, NULL};
    expect_local_usage_error(dir, "etl", a2);
}
