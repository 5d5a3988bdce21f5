/* test_savepoints.c - savepoints end to end through the real binary
 * (docs/savepoints.md): `eddy savepoint --stop` of a rate-limited wordcount
 * at about a sixth of its input, the savepoint directory moved elsewhere,
 * `eddy local --from-savepoint` at another parallelism of the keyed
 * operator with exact counts at the end; then the savepoint damaged in
 * every way item 7 of issue 27 names (a corrupt file, a truncated one, a
 * newer format, another max parallelism, no savepoint at all): one line
 * naming the file and the problem, exit status 2, nothing started. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/proc.h"

#define LINES 6000
#define RATE "1000"

static char dir[256];
static char *expected;
static size_t expected_len;

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s/eddy-savepoints-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
    char *rm[] = {"/bin/rm", "-rf", dir, NULL};
    eddy_proc_run(rm, 10000, NULL, NULL);
    free(expected);
}

TestSuite(savepoints, .init = setup, .fini = teardown, .timeout = 120);

static char *path(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

/* Runs wordcount rate-limited, stops it with a savepoint after a few
 * checkpoints and returns the savepoint's location (malloc'd). */
static char *stop_with_savepoint(void)
{
    eddy_err_t err = {{0}};
    size_t lines = 0;
    expected = eddy_test_wc_reference(path("in.txt"), LINES * 40, 7, &expected_len, &lines, &err);
    cr_assert(expected, "%s", err.msg);
    int ports[1];
    cr_assert_eq(eddy_test_free_ports(1, ports, &err), 0, "%s", err.msg);
    char port[16], coord[64];
    snprintf(port, sizeof port, "%d", ports[0]);
    snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", ports[0]);
    char *argv[] = {EDDY_BINARY, "local", "--workers", "2", "--state-dir", path("state1"),
                    "--control-port", port, "--http-port", "0", "--checkpoint-interval", "200",
                    "--quiet", "--job", "wordcount", "--input", path("in.txt"), "--output",
                    path("out1.tsv"), "--rate", RATE, NULL};
    eddy_proc_t local;
    cr_assert_eq(eddy_proc_start(&local, argv, NULL, path("local1.log"), &err), 0, "%s", err.msg);
    /* about a sixth of ~LINES lines at RATE lines/s: 5 checkpoints of 200 ms, with room
     * for a slow start under ASan before the input ends */
    cr_assert(eddy_test_wait_job_progress(ports[0], "wordcount", "running", 5, 0, 60000, &local),
              "the job never ran");
    char *sp[] = {EDDY_BINARY, "savepoint", "--coordinator", coord, "wordcount", "--stop", "--dir",
                  path("savepoints"), NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(sp, 60000, &out, &errout);
    cr_assert_eq(rc, 0, "eddy savepoint: %s", errout);
    cr_assert_eq(eddy_proc_wait(&local, 60000), 0, "eddy local did not end after the stop");
    cr_assert(access(path("out1.tsv"), F_OK) != 0, "a stopped job wrote its final output");
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n')
        out[--n] = '\0';
    char *last = strrchr(out, '\n');
    char *loc = strdup(last ? last + 1 : out);
    free(out);
    free(errout);
    cr_assert(!strncmp(loc, path("savepoints/"), strlen(path("savepoints/"))), "location %s", loc);
    return loc;
}

/* eddy local --from-savepoint with extra flags; its exit status, stderr in *errout. */
static int resume(const char *loc, const char *extra, const char *output, char **errout)
{
    eddy_err_t err = {{0}};
    int ports[1];
    cr_assert_eq(eddy_test_free_ports(1, ports, &err), 0, "%s", err.msg);
    char port[16];
    snprintf(port, sizeof port, "%d", ports[0]);
    char *argv[32] = {EDDY_BINARY, "local", "--workers", "2", "--state-dir", path("state2"),
                      "--control-port", port, "--http-port", "0", "--quiet", "--job", "wordcount",
                      "--input", path("in.txt"), "--output", (char *)output, "--from-savepoint",
                      (char *)loc, "--source-parallelism", "2"};
    int k = 21;
    char extra_copy[128];
    snprintf(extra_copy, sizeof extra_copy, "%s", extra);
    for (char *tok = strtok(extra_copy, " "); tok; tok = strtok(NULL, " "))
        argv[k++] = tok;
    argv[k] = NULL;
    return eddy_proc_run(argv, 60000, NULL, errout);
}

Test(savepoints, stop_move_resume_at_parallelism_3_is_exact)
{
    char *loc = stop_with_savepoint();
    char *mv[] = {"/bin/mv", loc, path("moved"), NULL};
    cr_assert_eq(eddy_proc_run(mv, 10000, NULL, NULL), 0);
    char *inspect[] = {EDDY_BINARY, "savepoint", "inspect", path("moved"), NULL};
    char *out = NULL;
    cr_assert_eq(eddy_proc_run(inspect, 10000, &out, NULL), 0);
    cr_assert(strstr(out, "operator count: keyed state, parallelism 2"), "%s", out);
    cr_assert(strstr(out, "source source[1]: position"), "%s", out);
    free(out);
    char *errout = NULL;
    int rc = resume(path("moved"), "--parallelism 3", path("out2.tsv"), &errout);
    cr_assert_eq(rc, 0, "resume: %s", errout);
    free(errout);
    size_t len = 0;
    char *got = eddy_read_file(path("out2.tsv"), &len);
    cr_assert(got);
    cr_assert_eq(len, expected_len);
    cr_assert(!memcmp(got, expected, len), "counts differ after the resume");
    free(got);
    free(loc);
}

/* resume must exit 2 with one line containing want (and naming the file) */
static void refused(const char *loc, const char *extra, const char *want)
{
    char *errout = NULL;
    int rc = resume(loc, extra, path("never.tsv"), &errout);
    cr_assert_eq(rc, 2, "rc %d: %s", rc, errout);
    cr_assert(strstr(errout, want), "'%s' lacks '%s'", errout, want);
    cr_assert_eq(strchr(errout, '\n'), errout + strlen(errout) - 1, "not one line: %s", errout);
    cr_assert(access(path("never.tsv"), F_OK) != 0, "a job ran");
    free(errout);
}

static void copy(const char *from, const char *to)
{
    char *cp[] = {"/bin/cp", "-r", (char *)from, (char *)to, NULL};
    cr_assert_eq(eddy_proc_run(cp, 10000, NULL, NULL), 0);
}

Test(savepoints, damaged_savepoints_are_refused_with_one_line)
{
    char *loc = stop_with_savepoint();
    refused(path("nowhere"), "", "no savepoint there");
    refused(loc, "--max-parallelism 64", "max parallelism 128, the job has 64");
    /* a newer format */
    copy(loc, path("newer"));
    char *manifest = path("newer/savepoint.json");
    size_t len = 0;
    char *text = eddy_read_file(manifest, &len);
    cr_assert(text);
    char *v = strstr(text, "\"format_version\": 1");
    cr_assert(v);
    v[strlen("\"format_version\": ")] = '9';
    cr_assert_eq(eddy_write_file(manifest, text, len), 0);
    free(text);
    refused(path("newer"), "", "savepoint.json: format version 9 is newer");
    /* a corrupt state file, then a truncated one */
    copy(loc, path("corrupt"));
    char *kg = path("corrupt/wordcount");
    char *find[] = {"/usr/bin/find", kg, "-name", "kg-*.snap", NULL};
    char *files = NULL;
    cr_assert_eq(eddy_proc_run(find, 10000, &files, NULL), 0);
    char *first = strtok(files, "\n");
    cr_assert(first);
    text = eddy_read_file(first, &len);
    cr_assert(text && len > 24);
    text[len - 1] ^= 0x5a;
    cr_assert_eq(eddy_write_file(first, text, len), 0);
    refused(path("corrupt"), "", first + strlen(dir) + 1);
    cr_assert_eq(eddy_write_file(first, text, len - 3), 0);
    refused(path("corrupt"), "", first + strlen(dir) + 1);
    free(text);
    free(files);
    free(loc);
}

/* Window state and timers: Nexmark q11 (session windows per bidder) stopped
 * with a savepoint mid-input and resumed gives the uninterrupted run's rows. */
Test(savepoints, nexmark_q11_sessions_resume_like_an_uninterrupted_run)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_test_nexmark_generate(path("ev.csv"), "40000", NULL, &err), 0, "%s", err.msg);
    int ports[3];
    cr_assert_eq(eddy_test_free_ports(3, ports, &err), 0, "%s", err.msg);
    char port[3][16], coord[64];
    for (int i = 0; i < 3; i++)
        snprintf(port[i], sizeof port[i], "%d", ports[i]);
    snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", ports[1]);
    char *full[] = {EDDY_BINARY, "local", "--workers", "2", "--state-dir", path("n0"),
                    "--control-port", port[0], "--http-port", "0", "--quiet", "--job", "nexmark",
                    "--query", "q11", "--input", path("ev.csv"), "--output", path("full.tsv"), NULL};
    cr_assert_eq(eddy_proc_run(full, 60000, NULL, NULL), 0);
    char *first[] = {EDDY_BINARY, "local", "--workers", "2", "--state-dir", path("n1"),
                     "--control-port", port[1], "--http-port", "0", "--quiet",
                     "--checkpoint-interval", "200", "--job", "nexmark", "--query", "q11", "--input",
                     path("ev.csv"), "--output", path("a.tsv"), "--rate", "8000", NULL};
    eddy_proc_t local;
    cr_assert_eq(eddy_proc_start(&local, first, NULL, path("n1.log"), &err), 0, "%s", err.msg);
    cr_assert(eddy_test_wait_job_progress(ports[1], "nexmark", "running", 3, 0, 60000, &local));
    char *sp[] = {EDDY_BINARY, "savepoint", "--coordinator", coord, "nexmark", "--stop", "--dir",
                  path("sp"), NULL};
    char *out = NULL;
    cr_assert_eq(eddy_proc_run(sp, 60000, &out, NULL), 0);
    cr_assert_eq(eddy_proc_wait(&local, 60000), 0);
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n')
        out[--n] = '\0';
    char *loc = strrchr(out, '\n') ? strrchr(out, '\n') + 1 : out;
    char *second[] = {EDDY_BINARY, "local", "--workers", "2", "--state-dir", path("n2"),
                      "--control-port", port[2], "--http-port", "0", "--quiet", "--job", "nexmark",
                      "--query", "q11", "--input", path("ev.csv"), "--output", path("b.tsv"),
                      "--from-savepoint", loc, NULL};
    char *errout = NULL;
    cr_assert_eq(eddy_proc_run(second, 60000, NULL, &errout), 0, "%s", errout);
    size_t la = 0, lb = 0;
    char *a = eddy_read_file(path("full.tsv"), &la), *b = eddy_read_file(path("b.tsv"), &lb);
    cr_assert(a && b && la > 0);
    cr_assert(la == lb && !memcmp(a, b, la), "the resumed run's rows differ from the uninterrupted run's");
    free(a);
    free(b);
    free(out);
    free(errout);
}
