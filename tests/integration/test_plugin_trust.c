/* test_plugin_trust.c - plugins are run only when their bytes are the ones
 * named (docs/security.md, "Plugins"), with real `eddy local` and `eddy
 * worker` processes.
 *
 * - planted: a library whose constructor creates a marker file is planted
 *   under the SHA-256 name of the genuine plugin in the workers' cache
 *   ($XDG_RUNTIME_DIR/eddy-plugins) and in the coordinator's store
 *   (<state dir>/snapshots/plugins). `eddy local --plugin` of the genuine
 *   plugin runs its job to the exact output; the marker never appears (no
 *   process loaded the planted file), and both files now hold the genuine
 *   bytes.
 * - a cache directory that others may write (0777) or that another user
 *   owns is refused: the worker exits at once saying which and why. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan/plugin.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define RUN_TIMEOUT_MS 120000
#define LINES 3000

static eddy_test_cluster_t *cl;
static char *dir;

static void setup(void)
{
    eddy_err_t err = {{0}};
    /* eddy local on 2 workers with eddy's own timing */
    eddy_test_cluster_opts_t o = {.tag = "plugintrust", .workers = 2, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
}

static void teardown(void)
{
    if (cl) {
        char cmd[800];
        snprintf(cmd, sizeof cmd, "chown -R %u %s 2>/dev/null; true", (unsigned)geteuid(), dir);
        if (system(cmd) != 0)
            cr_log_warn("chown failed");
    }
    eddy_test_cluster_destroy(&cl);
}

static void mkdir_private(const char *path)
{
    cr_assert(mkdir(path, 0700) == 0 || errno == EEXIST, "%s", path);
    cr_assert_eq(chmod(path, 0700), 0);
}

static void plant(const char *dir_path, const char *name)
{
    size_t len = 0;
    char *bytes = eddy_read_file(EDDY_BINARY_DIR "/test-plugins/libtest_plugin_planted.so", &len);
    cr_assert(bytes && len, "no planted plugin built");
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.so", dir_path, name);
    cr_assert_eq(eddy_write_file(path, bytes, len), 0, "%s", path);
    cr_assert_eq(chmod(path, 0700), 0);
    free(bytes);
}

static void expect_genuine(const char *dir_path, const char *hash)
{
    char path[1200], got[EDDY_PLUGIN_HASH_LEN + 1];
    snprintf(path, sizeof path, "%s/%s.so", dir_path, hash);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_plugin_hash_file(path, got, &err), 0, "%s", err.msg);
    cr_assert_str_eq(got, hash, "%s does not hold the genuine plugin", path);
}

Test(plugin_trust, a_planted_plugin_never_runs, .init = setup, .fini = teardown, .timeout = 300)
{
    const char *genuine_path = EDDY_BINARY_DIR "/examples/libjson_filter.so";
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_plugin_hash_file(genuine_path, hash, &err), 0, "%s", err.msg);

    char xdg[700], cache[800], state[700], snaps[800], store[900], marker[700];
    snprintf(xdg, sizeof xdg, "%s/xdg", dir);
    snprintf(cache, sizeof cache, "%s/eddy-plugins", xdg);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(snaps, sizeof snaps, "%s/snapshots", state);
    snprintf(store, sizeof store, "%s/plugins", snaps);
    snprintf(marker, sizeof marker, "%s/planted-code-ran", dir);
    const char *dirs[] = {xdg, cache, state, snaps, store};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        mkdir_private(dirs[i]);
    plant(cache, hash);
    plant(store, hash);
    setenv("XDG_RUNTIME_DIR", xdg, 1); /* the workers' cache: cache */
    setenv("EDDY_TEST_PLANT_MARKER", marker, 1);

    char input[700], outdir[700];
    snprintf(input, sizeof input, "%s/events.jsonl", dir);
    snprintf(outdir, sizeof outdir, "%s/out", dir);
    FILE *f = fopen(input, "w");
    cr_assert(f);
    size_t cap = (size_t)LINES * 40, len = 0;
    char *expected = malloc(cap);
    for (int i = 0; i < LINES; i++) {
        fprintf(f, "{\"user\":\"u%d\",\"type\":\"%s\",\"n\":%d}\n", i % 7, i % 2 ? "click" : "view", i);
        if (i % 2)
            len += (size_t)snprintf(expected + len, cap - len, "{\"user\":\"u%d\",\"n\":%d}\n", i % 7, i);
    }
    fclose(f);
    const char *argv[] = {"--state-dir", state, "--plugin", genuine_path, "--job", "json_filter",
                          "--input", input, "--field", "type", "--equals", "click", "--project",
                          "user,n", "--output-dir", outdir, NULL};
    int rc = eddy_test_cluster_run_local(cl, argv, RUN_TIMEOUT_MS, &err);
    unsetenv("EDDY_TEST_PLANT_MARKER");
    unsetenv("XDG_RUNTIME_DIR");
    char *log = eddy_read_file(eddy_test_cluster_path(cl, "local.log"), NULL);
    cr_assert_eq(rc, 0, "eddy local exited %d (%s); log:\n%s", rc, err.msg, log ? log : "");
    cr_assert_neq(access(marker, F_OK), 0, "the planted library ran; log:\n%s", log);
    cr_assert(strstr(log, "fetching it from the coordinator"), "no worker fetched the plugin:\n%s", log);
    cr_assert(strstr(log, "refused"), "no planted file was refused:\n%s", log);
    expect_genuine(store, hash);
    expect_genuine(cache, hash);
    char cmd[2000], all[800];
    snprintf(all, sizeof all, "%s/all.txt", dir);
    snprintf(cmd, sizeof cmd, "cat %s/part-*.txt | sort > %s", outdir, all);
    cr_assert_eq(system(cmd), 0);
    char *got = eddy_read_file(all, NULL);
    char want_path[800];
    snprintf(want_path, sizeof want_path, "%s/want.txt", dir);
    cr_assert_eq(eddy_write_file(want_path, expected, len), 0);
    snprintf(cmd, sizeof cmd, "sort -o %s %s", want_path, want_path);
    cr_assert_eq(system(cmd), 0);
    char *want = eddy_read_file(want_path, NULL);
    cr_assert(got && want && !strcmp(got, want), "output differs from the reference");
    free(got);
    free(want);
    free(expected);
    free(log);
}

static void expect_worker_refuses(const char *cache, const char *needle)
{
    char *coord = eddy_test_cluster_url(cl, 0); /* nobody listens: never reached */
    char *argv[] = {EDDY_BINARY, "worker", "--coordinator", coord, "--plugin-cache", (char *)cache,
                    "--register-timeout-ms", "60000", NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 30000, &out, &errout);
    cr_assert_eq(rc, 1, "worker with cache %s exited %d: %s", cache, rc, errout ? errout : "");
    cr_assert(errout && strstr(errout, needle) && strstr(errout, cache), "want '%s' in: %s", needle,
              errout ? errout : "");
    free(out);
    free(errout);
}

Test(plugin_trust, an_open_or_foreign_cache_is_refused, .init = setup, .fini = teardown,
     .timeout = 120)
{
    char cache[700];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    cr_assert_eq(mkdir(cache, 0700), 0);
    cr_assert_eq(chmod(cache, 0777), 0);
    expect_worker_refuses(cache, "has mode 0777: refused");
    char link[700];
    snprintf(link, sizeof link, "%s/link", dir);
    cr_assert_eq(chmod(cache, 0700), 0);
    cr_assert_eq(symlink(cache, link), 0);
    expect_worker_refuses(link, "symbolic link");
    if (geteuid() == 0) {
        cr_assert_eq(chown(cache, 65534, 65534), 0);
        expect_worker_refuses(cache, "is owned by uid 65534");
    }
}
