/* cmd_savepoint.c - `eddy savepoint JOB [--stop] [--dir URI]` (asks the
 * coordinator; the location is the last line of stdout), `eddy savepoint
 * inspect LOC` (reads the savepoint, starts nothing), and the opening and
 * checking of a savepoint that `eddy local` and `eddy submit` do before
 * anything starts (docs/savepoints.md). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/flags.h"
#include "coordinator/coordinator.h"
#include "net/client.h"
#include "plan/graph.h"
#include "state/savepoint.h"

int eddy_cli_savepoint_read(const char *loc, const eddy_job_graph_t *g, bool allow_non_restored,
                            char *root, size_t cap, eddy_savepoint_manifest_t *m, eddy_err_t *err)
{
    if (eddy_savepoint_location(loc, root, cap, err) < 0 ||
        eddy_savepoint_open(root, true, m, err) < 0 ||
        (g && eddy_savepoint_check_graph(g, root, m, allow_non_restored, err) < 0)) {
        eddy_savepoint_manifest_clear(m);
        return -1;
    }
    return 0;
}

int eddy_cli_open_savepoint(const char *sub, const char *loc, const eddy_job_graph_t *g,
                            bool allow_non_restored, char *root, size_t cap,
                            eddy_savepoint_manifest_t *m)
{
    eddy_err_t err = {{0}};
    if (eddy_cli_savepoint_read(loc, g, allow_non_restored, root, cap, m, &err) < 0) {
        fprintf(stderr, "eddy %s: --from-savepoint: %s\n", sub, err.msg);
        return 2;
    }
    return 0;
}

static int inspect(const char *loc)
{
    char root[EDDY_STORAGE_URI_MAX];
    eddy_savepoint_manifest_t m;
    eddy_err_t err = {{0}};
    if (eddy_savepoint_location(loc, root, sizeof root, &err) < 0 ||
        eddy_savepoint_open(root, true, &m, &err) < 0) {
        fprintf(stderr, "eddy savepoint inspect: %s\n", err.msg);
        return 2;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < m.n_files; i++)
        total += m.files[i].size;
    printf("savepoint %s\n  format version %u, job %s, checkpoint %" PRIu64 ", plan %016" PRIx64
           ", max parallelism %u%s\n  %u files, %" PRIu64 " bytes (checksums verified)\n",
           root, m.format_version, m.job, m.checkpoint, m.plan_fingerprint, m.max_parallelism,
           m.stopped ? ", taken with --stop (sinks committed up to it)" : "", m.n_files, total);
    for (uint32_t i = 0; i < m.n_operators; i++) {
        const eddy_savepoint_operator_t *o = &m.operators[i];
        char prefix[EDDY_SAVEPOINT_NAME_MAX + 2];
        snprintf(prefix, sizeof prefix, "%s/", o->uid);
        uint64_t bytes = 0;
        uint32_t files = 0;
        for (uint32_t f = 0; f < m.n_files; f++) {
            const char *k = strchr(m.files[f].key, '/');
            k = k ? strchr(k + 1, '/') : NULL; /* JOB/chk-ID/ */
            if (k && !strncmp(k + 1, prefix, strlen(prefix))) {
                bytes += m.files[f].size;
                files++;
            }
        }
        printf("  operator %s: %s, parallelism %u, kinds", o->uid,
               o->keyed ? "keyed state" : o->source ? "source" : "no state", o->parallelism);
        for (uint32_t k = 0; k < o->n_kinds; k++)
            printf("%s%s", k ? "," : " ", o->kinds[k]);
        printf("%s; %u files, %" PRIu64 " bytes", o->n_kinds ? "" : " -", files, bytes);
        if (o->keyed)
            printf("; key groups 0..%u", m.max_parallelism - 1);
        printf("\n");
        for (uint32_t k = 0; k < o->n_states; k++)
            printf("    state %s: schema version %u\n", o->states[k].name, o->states[k].version);
    }
    for (uint32_t i = 0; i < m.n_positions; i++)
        printf("  source %s[%u]: position %" PRId64 "%s\n", m.positions[i].op, m.positions[i].instance,
               m.positions[i].position, m.positions[i].state_len ? " (with source state)" : "");
    eddy_savepoint_manifest_clear(&m);
    return 0;
}

int eddy_cmd_savepoint(int argc, char **argv)
{
    if (argc >= 1 && !strcmp(argv[0], "inspect")) {
        if (argc == 2 && strcmp(argv[1], "--help"))
            return inspect(argv[1]);
        if (argc == 2) {
            printf("usage: eddy savepoint inspect LOCATION\n\nprints a savepoint's operators, "
                   "state, key groups, sizes and source positions, after checking every file\n");
            return 0;
        }
        return eddy_usage_error("savepoint", "usage: eddy savepoint inspect LOCATION");
    }
    const char *coordinator = eddy_client_default_coordinator(), *keys = eddy_cli_default_keys();
    const char *dir = NULL;
    bool stop = false;
    uint32_t timeout = 120000;
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("coordinator", &coordinator, "tcp://HOST:PORT",
                      "coordinator to talk to (env EDDY_COORDINATOR, default " EDDY_DEFAULT_COORDINATOR ")"),
        EDDY_CLI_KEYS_FLAG(keys),
        EDDY_FLAG_SWITCH("stop", &stop, "stop the job at the savepoint: sources stop at its barrier, "
                         "two-phase-commit sinks commit up to it, the job ends as stopped"),
        EDDY_FLAG_STR("dir", &dir, "URI", "where: a directory, file:///DIR or s3://BUCKET/PREFIX "
                      "(default: the coordinator's --savepoint-dir, else savepoints/ beside its "
                      "checkpoint directory); the savepoint is a new directory in it"),
        EDDY_FLAG_U32("timeout-ms", &timeout, 1, EDDY_FLAG_MS_MAX, "MS", "wait this long (120000)"),
        EDDY_FLAG_END};
    eddy_args_t pos = {0};
    int code;
    if (eddy_cli_parse("savepoint", "JOB [--stop] [--dir URI] [flags] | inspect LOCATION", flags,
                       argc, argv, &pos, NULL, &code) < 0) {
        eddy_args_free(&pos);
        return code;
    }
    if (pos.count != 1) {
        eddy_args_free(&pos);
        return eddy_usage_error("savepoint", "expected JOB (or inspect LOCATION)");
    }
    char root[EDDY_STORAGE_URI_MAX];
    eddy_err_t err = {{0}};
    if (dir && eddy_savepoint_location(dir, root, sizeof root, &err) < 0) {
        eddy_args_free(&pos);
        return eddy_usage_error("savepoint", err.msg);
    }
    char *args[4] = {pos.items[0]};
    int n = 1;
    if (stop)
        args[n++] = "--stop";
    if (dir) {
        args[n++] = "--dir";
        args[n++] = root;
    }
    eddy_keys_t *k;
    if (eddy_cli_load_keys("savepoint", keys, EDDY_KEYS_CLIENT, &k) != 0) {
        eddy_args_free(&pos);
        return 2;
    }
    char *body = NULL;
    int rc = eddy_cli_request(coordinator, k, "savepoint", n, args, timeout, &body, &err);
    eddy_keys_destroy(&k);
    eddy_args_free(&pos);
    if (rc != 0)
        fprintf(stderr, "eddy savepoint: %s\n", err.msg);
    else
        printf("%s\n", body); /* the location, the last line */
    free(body);
    return rc;
}
