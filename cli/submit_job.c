/* submit_job.c - building and sending a job to a running coordinator, the
 * one copy that `eddy submit` and `eddy upgrade` share (cli.h,
 * eddy_cli_job_t): the job's kind (--job, --plugin, --pipeline, --sql),
 * its flags and guarantee, the plugin's upload, and --from-savepoint.
 *
 * Preparing loads the plugin and builds the job's graph here, so that a
 * plugin that fails or bad job flags stop the command before anything
 * reaches the cluster; submitting reads and checks the savepoint against
 * that graph (its manifest goes with the request: the coordinator reads no
 * state), uploads the plugin and sends `submit`. Errors come back in err
 * with the exit status they mean; the commands print them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/guarantee.h"
#include "plan/registry.h"
#include "plan/sql_compile.h"
#include "state/savepoint.h"

int eddy_cli_job_resolve(eddy_cli_job_t *j, eddy_err_t *err)
{
    if (j->resolved)
        return 0;
    if (j->pipeline && j->sql)
        return eddy_err_set(err, "give --pipeline or --sql, not both");
    if (j->sql && eddy_cli_sql_job(j->sql, &j->job, &j->args, &j->spec_text, err) < 0)
        return -1;
    if (j->pipeline && eddy_cli_pipeline_job(j->pipeline, &j->job, &j->args, &j->spec_text, err) < 0)
        return -1;
    j->resolved = true;
    return 0;
}

int eddy_cli_job_prepare(eddy_cli_job_t *j, eddy_err_t *err)
{
    if (eddy_cli_job_resolve(j, err) < 0)
        return -1;
    if (j->sql && j->spec_text && eddy_sql_explains(j->spec_text, strlen(j->spec_text)))
        return eddy_err_set(err, "%s is an EXPLAIN: it prints a plan and runs nothing (eddy plan --sql)",
                            j->sql);
    if (!j->job)
        return eddy_err_set(err, "--job is required (see eddy jobs)");
    eddy_guarantee_t g;
    if (j->guarantee && eddy_guarantee_parse(j->guarantee, &g) < 0)
        return eddy_err_set(err, "--guarantee: expected exactly-once, at-least-once or at-most-once");
    if (j->plugin && eddy_plugin_load(j->plugin, eddy_registry_default(), j->hash, err) < 0)
        return -1;
    if (eddy_job_build(&j->graph, j->job, j->args.count, j->args.items, err) < 0)
        return -1;
    j->built = true;
    return 0;
}

void eddy_cli_job_clear(eddy_cli_job_t *j)
{
    if (j->built)
        eddy_graph_clear(&j->graph);
    j->built = false;
    eddy_args_free(&j->args);
    free(j->spec_text);
    j->spec_text = NULL;
}

/* Sends the plugin's bytes to the coordinator (PLUGIN), which stores it by
 * content hash and serves it to the workers. */
static int upload_plugin(const char *coordinator, const eddy_keys_t *keys, const char *path,
                         const char *hash, eddy_err_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return eddy_err_set(err, "cannot open plugin %s: %s", path, strerror(errno));
    eddy_msg_t up = {.type = EDDY_MSG_PLUGIN};
    snprintf(up.u.plugin.hash, sizeof up.u.plugin.hash, "%s", hash);
    char *data = NULL;
    size_t len = 0, n;
    char buf[65536];
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        char *grown = len + n <= EDDY_PLUGIN_MAX_WIRE ? realloc(data, len + n) : NULL;
        if (!grown) {
            free(data);
            fclose(f);
            return eddy_err_set(err, "plugin %s is larger than %u bytes", path, EDDY_PLUGIN_MAX_WIRE);
        }
        data = grown;
        memcpy(data + len, buf, n);
        len += n;
    }
    fclose(f);
    up.u.plugin.data = data;
    up.u.plugin.len = (uint32_t)len;
    int64_t status = -1;
    char *body = NULL;
    int rc = eddy_client_send(coordinator, keys, &up, 30000, &status, &body, err);
    free(data);
    if (rc == 0 && status != 0)
        rc = eddy_err_set(err, "the coordinator refused plugin %s: %s", path, body ? body : "");
    free(body);
    return rc;
}

int eddy_cli_savepoint_text(const char *loc, const eddy_job_graph_t *g, bool allow_non_restored,
                            char *root, size_t cap, char **text, eddy_err_t *err)
{
    eddy_savepoint_manifest_t m = {0};
    *text = NULL;
    if (eddy_cli_savepoint_read(loc, g, allow_non_restored, root, cap, &m, err) < 0)
        return -1;
    *text = eddy_savepoint_manifest_encode(&m, NULL);
    eddy_savepoint_manifest_clear(&m);
    if (!*text || strlen(*text) >= EDDY_ARG_MAX) {
        free(*text);
        *text = NULL;
        return eddy_err_set(err, "its manifest is too large to send");
    }
    return 0;
}

bool eddy_cli_job_state_ended(const char *state)
{
    return state && (!strcmp(state, "finished") || !strcmp(state, "failed") ||
                     !strcmp(state, "cancelled") || !strcmp(state, "stopped"));
}

/* The coordinator's request: [--from-savepoint LOC --savepoint-manifest
 * JSON [--allow-non-restored-state]] [--guarantee G] JOB [job flags]. */
static int send_submit(const char *coordinator, const eddy_keys_t *keys, const eddy_cli_job_t *j,
                       const char *root, const char *sp_text, bool allow, char **job_id,
                       eddy_err_t *err)
{
    char **args = calloc((size_t)j->args.count + 8, sizeof *args);
    if (!args) {
        eddy_err_set(err, "out of memory");
        return 1;
    }
    int n = 0;
    if (sp_text) {
        args[n++] = "--from-savepoint";
        args[n++] = (char *)root;
        args[n++] = "--savepoint-manifest";
        args[n++] = (char *)sp_text;
        if (allow)
            args[n++] = "--allow-non-restored-state";
    }
    if (j->guarantee) {
        args[n++] = "--guarantee";
        args[n++] = (char *)j->guarantee;
    }
    args[n++] = (char *)j->job;
    for (int i = 0; i < j->args.count; i++)
        args[n++] = j->args.items[i];
    int rc = eddy_cli_request(coordinator, keys, "submit", n, args, 10000, job_id, err);
    free(args);
    return rc;
}

/* --keys DIR loaded into *keys (NULL without); 2 with err. */
static int load_keys(const char *keys_dir, eddy_keys_t **keys, eddy_err_t *err)
{
    *keys = NULL;
    if (keys_dir && *keys_dir && !(*keys = eddy_keys_load(keys_dir, EDDY_KEYS_CLIENT, err)))
        return 2;
    return 0;
}

int eddy_cli_job_upload(eddy_cli_job_t *j, const char *coordinator, const char *keys_dir,
                        eddy_err_t *err)
{
    if (!j->plugin || j->uploaded)
        return 0;
    eddy_keys_t *keys;
    if (load_keys(keys_dir, &keys, err) != 0)
        return 2;
    int rc = upload_plugin(coordinator, keys, j->plugin, j->hash, err) < 0 ? 1 : 0;
    eddy_keys_destroy(&keys);
    j->uploaded = rc == 0;
    return rc;
}

int eddy_cli_job_submit(eddy_cli_job_t *j, const char *coordinator, const char *keys_dir,
                        const char *from_savepoint, bool allow_non_restored, char **job_id,
                        eddy_err_t *err)
{
    char root[EDDY_STORAGE_URI_MAX];
    char *sp_text = NULL;
    if (from_savepoint && eddy_cli_savepoint_text(from_savepoint, &j->graph, allow_non_restored,
                                                  root, sizeof root, &sp_text, err) < 0) {
        eddy_err_wrap(err, "--from-savepoint");
        return 2;
    }
    eddy_keys_t *keys;
    int rc;
    if ((rc = eddy_cli_job_upload(j, coordinator, keys_dir, err)) == 0 &&
        (rc = load_keys(keys_dir, &keys, err)) == 0) {
        rc = send_submit(coordinator, keys, j, root, sp_text, allow_non_restored, job_id, err);
        eddy_keys_destroy(&keys);
    }
    free(sp_text);
    return rc;
}

int eddy_cli_request(const char *coordinator, const eddy_keys_t *keys, const char *verb, int argc,
                     char **argv, uint32_t timeout_ms, char **body, eddy_err_t *err)
{
    int64_t status;
    char *reply = NULL;
    if (eddy_client_call(coordinator, keys, verb, argc, argv, timeout_ms, &status, &reply, err) < 0)
        return 1;
    if (status != 0) {
        eddy_err_set(err, "%s", reply ? reply : "");
        free(reply);
        return status == 2 ? 2 : 1;
    }
    if (body)
        *body = reply;
    else
        free(reply);
    return 0;
}
