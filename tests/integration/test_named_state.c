/* test_named_state.c - named state across versions of a plugin (issue 27
 * item 1, api/state.h) through the real binary: version 1 of
 * tests/plugins/plugin_named_state.c counts words in the VALUE state
 * "count" (schema version 1, decimal text) over a rate-limited input and is
 * stopped with `eddy savepoint --stop` after a few checkpoints; `eddy
 * savepoint inspect` shows the state and its version; version 2, which
 * keeps the count as an int64 (schema version 2, with a migrate callback)
 * and adds the state "chars", resumes from it with exact counts at the
 * end. The same version 2 without its migrate callback is refused before
 * anything starts: one line naming the operator uid, the state and both
 * versions, exit status 2. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/proc.h"

#define PLUGIN_DIR EDDY_TEST_PLUGIN_DIR "/libtest_plugin_named_state"
#define LINES 3000
#define RATE "600"

static char dir[256];

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s/eddy-named-state-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
    char *rm[] = {"/bin/rm", "-rf", dir, NULL};
    eddy_proc_run(rm, 10000, NULL, NULL);
}

TestSuite(named_state, .init = setup, .fini = teardown, .timeout = 120);

static char *path(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

/* Version 1 rate-limited, stopped with a savepoint after a few checkpoints;
 * the savepoint's location (malloc'd). */
static char *v1_stopped(void)
{
    eddy_err_t err = {{0}};
    int ports[1];
    cr_assert_eq(eddy_test_free_ports(1, ports, &err), 0, "%s", err.msg);
    char port[16], coord[64];
    snprintf(port, sizeof port, "%d", ports[0]);
    snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", ports[0]);
    char *argv[] = {EDDY_BINARY, "local", "--workers", "2", "--state-dir", path("state1"),
                    "--control-port", port, "--http-port", "0", "--checkpoint-interval", "200",
                    "--quiet", "--plugin", PLUGIN_DIR ".so", "--job", "test_named_state",
                    "--input", path("in.txt"), "--output", path("out1.tsv"), "--rate", RATE, NULL};
    eddy_proc_t local;
    cr_assert_eq(eddy_proc_start(&local, argv, NULL, path("local1.log"), &err), 0, "%s", err.msg);
    cr_assert(eddy_test_wait_job_progress(ports[0], "test_named_state", "running", 3, 0, 60000,
                                          &local),
              "the job never ran");
    char *sp[] = {EDDY_BINARY, "savepoint", "--coordinator", coord, "test_named_state", "--stop",
                  "--dir", path("savepoints"), NULL};
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
    return loc;
}

/* eddy local --from-savepoint with version `plugin`; its exit status. */
static int resume(const char *plugin, const char *loc, const char *output, char **errout)
{
    eddy_err_t err = {{0}};
    int ports[1];
    cr_assert_eq(eddy_test_free_ports(1, ports, &err), 0, "%s", err.msg);
    char port[16];
    snprintf(port, sizeof port, "%d", ports[0]);
    char *argv[] = {EDDY_BINARY, "local", "--workers", "2", "--state-dir", path("state2"),
                    "--control-port", port, "--http-port", "0", "--quiet", "--plugin",
                    (char *)plugin, "--job", "test_named_state", "--input", path("in.txt"),
                    "--output", (char *)output, "--parallelism", "3", "--from-savepoint",
                    (char *)loc, NULL};
    return eddy_proc_run(argv, 60000, NULL, errout);
}

Test(named_state, v2_migrates_the_saved_state_and_adds_one_with_exact_counts)
{
    eddy_err_t err = {{0}};
    size_t expected_len = 0, lines = 0;
    char *expected = eddy_test_wc_reference(path("in.txt"), LINES * 40, 11, &expected_len, &lines,
                                            &err);
    cr_assert(expected, "%s", err.msg);
    char *loc = v1_stopped();

    char *inspect[] = {EDDY_BINARY, "savepoint", "inspect", loc, NULL};
    char *out = NULL;
    cr_assert_eq(eddy_proc_run(inspect, 10000, &out, NULL), 0);
    cr_assert(strstr(out, "operator count: keyed state"), "%s", out);
    cr_assert(strstr(out, "    state count: schema version 1\n"), "%s", out);
    free(out);

    /* without a migrate callback: refused, one line, nothing started */
    char *errout = NULL;
    int rc = resume(PLUGIN_DIR "_nomigrate.so", loc, path("never.tsv"), &errout);
    cr_assert_eq(rc, 2, "rc %d: %s", rc, errout);
    cr_assert(strstr(errout, "operator count, state count: schema version 1 in the savepoint, 2 "
                             "in the job (no migrate callback for it)"),
              "%s", errout);
    cr_assert_eq(strchr(errout, '\n'), errout + strlen(errout) - 1, "not one line: %s", errout);
    cr_assert(access(path("never.tsv"), F_OK) != 0, "a job ran");
    free(errout);

    errout = NULL;
    rc = resume(PLUGIN_DIR "_v2.so", loc, path("out2.tsv"), &errout);
    cr_assert_eq(rc, 0, "resume: %s", errout);
    free(errout);
    size_t len = 0;
    char *got = eddy_read_file(path("out2.tsv"), &len);
    cr_assert(got);
    cr_assert_eq(len, expected_len);
    cr_assert(!memcmp(got, expected, len), "counts differ after the upgrade");
    free(got);
    free(expected);
    free(loc);
}
