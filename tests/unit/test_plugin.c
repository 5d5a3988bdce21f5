/* test_plugin.c - loading plugins (plan/plugin.c) built by CMake from
 * tests/plugins/: a good one registers its kinds and job (once, whatever
 * how often it is loaded); another ABI version, a failing entry point, a
 * file that is no plugin and a missing file are refused with a message
 * naming the library, and leave the registry unchanged. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

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
