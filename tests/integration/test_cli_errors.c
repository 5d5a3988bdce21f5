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
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"

#define T 20000

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
    char *out, *err;
    char *argv[] = {EDDY_BINARY, NULL};
    cr_assert_eq(run(argv, &out, &err), 2);
    cr_assert(strstr(err, "usage"), "stderr: %s", err);
    free(out);
    free(err);
}

Test(cli, unknown_subcommand_exits_2)
{
    char *out, *err;
    char *argv[] = {EDDY_BINARY, "frobnicate", NULL};
    cr_assert_eq(run(argv, &out, &err), 2);
    cr_assert(strstr(err, "frobnicate"), "stderr should name the command: %s", err);
    free(out);
    free(err);
}

Test(cli, local_bogus_flag_one_line_naming_it)
{
    char *out, *err;
    char *argv[] = {EDDY_BINARY, "local", "--bogus", NULL};
    cr_assert_eq(run(argv, &out, &err), 2, "stderr: %s", err);
    cr_assert(strstr(err, "--bogus") || strstr(err, "bogus"), "stderr should name the flag: %s", err);
    cr_assert_eq(count_lines(err), 1, "expected exactly one line on stderr, got:\n%s", err);
    free(out);
    free(err);
}

Test(cli, local_unknown_job_exits_2)
{
    char *out, *err;
    char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--job", "nosuchjob", NULL};
    cr_assert_eq(run(argv, &out, &err), 2, "stderr: %s", err);
    cr_assert(strstr(err, "nosuchjob"), "stderr should name the job: %s", err);
    cr_assert_eq(count_lines(err), 1, "stderr:\n%s", err);
    free(out);
    free(err);
}

Test(cli, wordcount_without_source_exits_2)
{
    char *out, *err;
    char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--job", "wordcount", NULL};
    cr_assert_eq(run(argv, &out, &err), 2, "stderr: %s", err);
    cr_assert(strstr(err, "--input"), "stderr should say what source is needed: %s", err);
    cr_assert_eq(count_lines(err), 1, "stderr:\n%s", err);
    free(out);
    free(err);
}

Test(cli, missing_input_file_names_it, .timeout = 60)
{
    eddy_err_t e = {{0}};
    int ports[2];
    cr_assert(eddy_test_free_ports(2, ports, &e) == 0, "%s", e.msg);
    char cp[16], hp[16];
    snprintf(cp, sizeof cp, "%d", ports[0]);
    snprintf(hp, sizeof hp, "%d", ports[1]);
    const char *missing = "/nonexistent/eddy-test/no-such-input.txt";
    char *out, *err;
    char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--control-port", cp, "--http-port", hp,
                    "--quiet", "--job", "wordcount", "--input", (char *)missing, NULL};
    int rc = run(argv, &out, &err);
    cr_assert_eq(rc, 2, "exit %d (want 2: a usage error, nothing started); stderr:\n%s", rc, err);
    cr_assert(strstr(err, "no-such-input.txt"), "stderr should name the file:\n%s", err);
    cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "want one line on stderr:\n%s", err);
    free(out);
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
    char *out, *err;
    char *argv[] = {EDDY_BINARY, "status", "--coordinator", coord, NULL};
    cr_assert_eq(run(argv, &out, &err), 1, "stderr:\n%s", err);
    cr_assert(strstr(err, coord), "stderr should name the coordinator:\n%s", err);
    free(out);
    free(err);
}

Test(cli, help_exits_0)
{
    char *out, *err;
    char *a1[] = {EDDY_BINARY, "--help", NULL};
    cr_assert_eq(run(a1, &out, &err), 0);
    cr_assert(strstr(out, "local") && strstr(out, "rescale"), "stdout:\n%s", out);
    free(out);
    free(err);
    char *a2[] = {EDDY_BINARY, "local", "--help", NULL};
    cr_assert_eq(run(a2, &out, &err), 0);
    cr_assert(strstr(out, "--workers"), "stdout:\n%s", out);
    free(out);
    free(err);
    char *a3[] = {EDDY_BINARY, "local", "--job", "wordcount", "--help", NULL};
    cr_assert_eq(run(a3, &out, &err), 0);
    cr_assert(strstr(out, "--input"), "stdout:\n%s", out);
    free(out);
    free(err);
}

Test(cli, jobs_lists_wordcount)
{
    char *out, *err;
    char *argv[] = {EDDY_BINARY, "jobs", NULL};
    cr_assert_eq(run(argv, &out, &err), 0);
    cr_assert(strstr(out, "wordcount"), "stdout:\n%s", out);
    free(out);
    free(err);
}
