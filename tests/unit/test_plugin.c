/* test_plugin.c - loading plugins (plan/plugin.c) built by CMake from
 * tests/plugins/: a good one registers its kinds and job (once, whatever
 * how often it is loaded); another ABI version, a failing entry point, a
 * file that is no plugin and a missing file are refused with a message
 * naming the library, and leave the registry unchanged.
 *
 * Plugin directories (caches, the coordinator's store): a plugin is named
 * by its SHA-256; a library planted under a genuine plugin's name is never
 * run (its constructor would create a marker file) and is replaced by the
 * genuine bytes; a directory another user owns, that others may write, or
 * that is a symbolic link is refused with an error saying why. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan/plugin.h"

#ifndef EDDY_TEST_PLUGIN_DIR
#define EDDY_TEST_PLUGIN_DIR "."
#endif

static const char *plugin(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/lib%s.so", EDDY_TEST_PLUGIN_DIR, name);
    return path;
}

Test(plugin, a_plugin_registers_its_kinds_and_jobs_once)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    char hash[EDDY_PLUGIN_HASH_LEN + 1], again[EDDY_PLUGIN_HASH_LEN + 1];
    cr_assert_eq(eddy_plugin_load(plugin("test_plugin_ok"), r, hash, &err), 0, "%s", err.msg);
    cr_assert_eq(strlen(hash), EDDY_PLUGIN_HASH_LEN);
    cr_assert(eddy_registry_operator(r, "test_upper"));
    cr_assert(eddy_registry_key(r, "test_first_byte"));
    cr_assert(eddy_registry_job(r, "test_plugin_job"));
    cr_assert_eq(eddy_plugin_load(plugin("test_plugin_ok"), r, again, &err), 0, "%s", err.msg);
    cr_assert_str_eq(hash, again);
    cr_assert_eq(eddy_registry_job_count(r), 1);
    char file_hash[EDDY_PLUGIN_HASH_LEN + 1];
    cr_assert_eq(eddy_plugin_hash_file(plugin("test_plugin_ok"), file_hash, &err), 0);
    cr_assert_str_eq(hash, file_hash);
    /* The plugin's job builds a plan through eddy's builder. */
    eddy_plan_t *p = eddy_registry_build_plan(r, "test_plugin_job", 0, NULL, &err);
    cr_assert(p, "%s", err.msg);
    cr_assert_eq(p->n_nodes, 3);
    eddy_plan_destroy(&p);
    eddy_registry_destroy(&r);
}

Test(plugin, another_abi_version_is_refused_before_its_code_runs)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_plugin_load(plugin("test_plugin_bad_abi"), r, NULL, &err), -1);
    cr_assert(strstr(err.msg, "was built for eddy ABI") && strstr(err.msg, "test_plugin_bad_abi"),
              "%s", err.msg);
    eddy_registry_destroy(&r);
}

Test(plugin, a_failing_entry_point_registers_nothing)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_plugin_load(plugin("test_plugin_fails"), r, NULL, &err), -1);
    cr_assert(strstr(err.msg, "cannot reach the model server"), "%s", err.msg);
    cr_assert_null(eddy_registry_key(r, "test_half_registered"));
    eddy_registry_destroy(&r);
}

Test(plugin, what_is_no_plugin_is_refused)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_plugin_load("/nonexistent/libx.so", r, NULL, &err), -1);
    cr_assert(strstr(err.msg, "/nonexistent/libx.so"), "%s", err.msg);
    cr_assert_eq(eddy_plugin_load("/dev/null", r, NULL, &err), -1);
    cr_assert_eq(eddy_plugin_load(plugin("test_not_a_plugin"), r, NULL, &err), -1);
    cr_assert(strstr(err.msg, "not an eddy plugin"), "%s", err.msg);
    eddy_registry_destroy(&r);
}

Test(plugin, names_are_sha256)
{
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
    eddy_plugin_hash_bytes("abc", 3, hash);
    cr_assert_str_eq(hash, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    cr_assert(eddy_plugin_hash_valid(hash));
    cr_assert_not(eddy_plugin_hash_valid("0123456789abcdef0123456789abcdef"), "an XXH3-128 name");
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    char *buf = malloc(EDDY_PLUGIN_MAX_BYTES / 16);
    *len = fread(buf, 1, EDDY_PLUGIN_MAX_BYTES / 16, f);
    fclose(f);
    return buf;
}

static void copy_file(const char *from, const char *to)
{
    size_t len;
    char *data = read_all(from, &len);
    unlink(to); /* never truncate a file this process has mapped (SIGBUS) */
    int fd = open(to, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0, "%s", to);
    cr_assert_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
    free(data);
}

static char dir_template[] = "/tmp/eddy-test-plugin-dir-XXXXXX";

Test(plugin, a_plugin_planted_under_a_genuine_name_never_runs)
{
    char *dir = mkdtemp(dir_template);
    cr_assert(dir);
    char marker[512], planted[512];
    snprintf(marker, sizeof marker, "%s/planted-code-ran", dir);
    setenv("EDDY_TEST_PLANT_MARKER", marker, 1);
    eddy_err_t err = {{0}};
    char genuine[EDDY_PLUGIN_HASH_LEN + 1];
    cr_assert_eq(eddy_plugin_hash_file(plugin("test_plugin_ok"), genuine, &err), 0, "%s", err.msg);
    char cache_path[300];
    snprintf(cache_path, sizeof cache_path, "%s/cache", dir);
    eddy_plugin_dir_t *cache = eddy_plugin_dir_open(cache_path, &err);
    cr_assert(cache, "%s", err.msg);
    struct stat st;
    cr_assert_eq(stat(cache_path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "mode %o", st.st_mode & 0777);
    snprintf(planted, sizeof planted, "%s/%s.so", cache_path, genuine);
    copy_file(plugin("test_plugin_planted"), planted);

    /* loading by the genuine name refuses (and removes) the planted file */
    eddy_registry_t *r = eddy_registry_new();
    cr_assert_eq(eddy_plugin_dir_load(cache, genuine, r, &err), -1);
    cr_assert(strstr(err.msg, "refused"), "%s", err.msg);
    cr_assert_neq(access(marker, F_OK), 0, "the planted library ran");
    cr_assert_neq(access(planted, F_OK), 0, "the planted file is still there");

    /* planted again, then the genuine bytes arrive: they replace it */
    copy_file(plugin("test_plugin_planted"), planted);
    size_t len;
    char *bytes = read_all(plugin("test_plugin_ok"), &len);
    char got[EDDY_PLUGIN_HASH_LEN + 1];
    cr_assert_eq(eddy_plugin_dir_load_bytes(cache, bytes, len, genuine, r, got, &err), 0, "%s", err.msg);
    cr_assert_str_eq(got, genuine);
    cr_assert(eddy_registry_job(r, "test_plugin_job"));
    cr_assert_neq(access(marker, F_OK), 0, "the planted library ran");
    char on_disk[EDDY_PLUGIN_HASH_LEN + 1];
    cr_assert_eq(eddy_plugin_hash_file(planted, on_disk, &err), 0, "%s", err.msg);
    cr_assert_str_eq(on_disk, genuine, "the planted file was not replaced");
    cr_assert_eq(stat(planted, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);

    /* serving it (the coordinator) re-hashes too: a swapped file is refused */
    char *served;
    size_t served_len;
    cr_assert_eq(eddy_plugin_dir_read(cache, genuine, EDDY_PLUGIN_MAX_BYTES, &served, &served_len, &err), 1,
                 "%s", err.msg);
    cr_assert_eq(served_len, len);
    free(served);
    copy_file(plugin("test_plugin_planted"), planted);
    cr_assert_eq(eddy_plugin_dir_read(cache, genuine, EDDY_PLUGIN_MAX_BYTES, &served, &served_len, &err), -1);
    cr_assert(strstr(err.msg, "refused"), "%s", err.msg);
    cr_assert_eq(eddy_plugin_dir_read(cache, genuine, EDDY_PLUGIN_MAX_BYTES, &served, &served_len, &err), 0,
                 "the swapped file was not removed");
    /* loaded already, the genuine bytes arriving again still replace a
     * planted file (the store serves workers and restarts from it) */
    copy_file(plugin("test_plugin_planted"), planted);
    cr_assert_eq(eddy_plugin_dir_load_bytes(cache, bytes, len, genuine, r, got, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_plugin_hash_file(planted, on_disk, &err), 0, "%s", err.msg);
    cr_assert_str_eq(on_disk, genuine, "the planted file was not replaced");
    cr_assert_neq(access(marker, F_OK), 0, "the planted library ran");
    free(bytes);
    eddy_registry_destroy(&r);
    eddy_plugin_dir_destroy(&cache);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

static char refused_template[] = "/tmp/eddy-test-plugin-dir-XXXXXX";

Test(plugin, a_directory_others_can_write_or_own_is_refused)
{
    char *dir = mkdtemp(refused_template);
    cr_assert(dir);
    char path[256], link[256];
    eddy_err_t err = {{0}};
    snprintf(path, sizeof path, "%s/open", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    cr_assert_eq(chmod(path, 0777), 0);
    cr_assert_null(eddy_plugin_dir_open(path, &err));
    cr_assert(strstr(err.msg, "mode 0777") && strstr(err.msg, path), "%s", err.msg);
    cr_assert_eq(chmod(path, 0750), 0);
    cr_assert_null(eddy_plugin_dir_open(path, &err), "group access is refused too");

    snprintf(link, sizeof link, "%s/link", dir);
    cr_assert_eq(chmod(path, 0700), 0);
    cr_assert_eq(symlink(path, link), 0);
    cr_assert_null(eddy_plugin_dir_open(link, &err));
    cr_assert(strstr(err.msg, "symbolic link"), "%s", err.msg);
    char slashed[300];
    snprintf(slashed, sizeof slashed, "%s//", link);
    cr_assert_null(eddy_plugin_dir_open(slashed, &err), "a trailing slash follows the link");
    cr_assert(strstr(err.msg, "symbolic link"), "%s", err.msg);

    if (geteuid() == 0) {
        cr_assert_eq(chown(path, 65534, 65534), 0);
        cr_assert_null(eddy_plugin_dir_open(path, &err));
        cr_assert(strstr(err.msg, "owned by uid 65534"), "%s", err.msg);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
