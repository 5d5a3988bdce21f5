/* cmd_upgrade.c - `eddy upgrade JOB (--plugin F.so | --pipeline F.yaml |
 * --sql F.sql) [flags] [job flags]`: a running job replaced by a new
 * version of its code that keeps its state (docs/savepoints.md, "Upgrading
 * a job").
 *
 * The steps, each a request a user could make by hand: the new version is
 * built here first (a typo in the spec or a bad flag stops the command
 * before JOB is touched); JOB is stopped with a savepoint; the new version
 * is submitted from it (eddy_cli_job_submit, as `eddy submit
 * --from-savepoint`) under the id the coordinator gives (the job's name
 * made unique: pipeline-2, wordcount-3); then the job's status is polled,
 * with a deadline, until it runs (upgraded) or fails to (a restore after a
 * failure, a failed job, the deadline). A new version that the coordinator
 * refuses or that fails to start is cancelled and the old one is started
 * again from the same savepoint (`submit --like OLD`: the old job's name,
 * flags and guarantee as the coordinator holds them), and one line says
 * why, with exit status 1. Without job flags the new version gets the old
 * job's (as `eddy status --json` shows them, its pipeline spec left out),
 * and without --guarantee the old job's guarantee. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/clock.h"
#include "common/redact.h"
#include "state/savepoint.h"

#define POLL_MS 100

typedef struct upgrade {
    const char *coordinator, *keys_dir;
    eddy_keys_t *keys;
    uint32_t timeout_ms;
    json_t *status;     /* the status the old job was found in */
    const json_t *old;  /* that job, borrowed from status */
    char old_id[128];
    char location[EDDY_STORAGE_URI_MAX];
} upgrade_t;

static bool ended(const json_t *job)
{
    return eddy_cli_job_state_ended(json_string_value(json_object_get(job, "state")));
}

static json_t *fetch_status(upgrade_t *u, eddy_err_t *err)
{
    char *body = NULL;
    if (eddy_cli_request(u->coordinator, u->keys, "status", 0, NULL, 5000, &body, err) != 0)
        return NULL;
    json_error_t jerr;
    json_t *doc = json_loads(body, 0, &jerr);
    free(body);
    if (!doc)
        eddy_err_set(err, "the coordinator's status is not JSON: %s", jerr.text);
    return doc;
}

/* The job `name` names as the coordinator resolves it: that id unless it
 * ended, else the newest job of that name that has not ended. */
static const json_t *find_job(const json_t *status, const char *name)
{
    const json_t *jobs = json_object_get(status, "jobs"), *exact = NULL, *named = NULL;
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j)
    {
        const char *id = json_string_value(json_object_get(j, "id"));
        const char *job = json_string_value(json_object_get(j, "job"));
        bool live = !ended(j);
        if (id && !strcmp(id, name))
            exact = j;
        if (live && job && !strcmp(job, name))
            named = j; /* oldest first: the last is the newest */
    }
    if (exact && !ended(exact))
        return exact;
    return named ? named : exact;
}

/* The job flags that say which spec a pipeline job runs: left out of the
 * old job's flags when they go to a new version. */
static bool spec_flag(const char *arg)
{
    return !strcmp(arg, "--spec") || !strcmp(arg, "--spec-file") || !strcmp(arg, "--sql") ||
           !strcmp(arg, "--sql-file");
}

/* The old job's flags (borrowed from the status) into args. */
static int old_flags(const upgrade_t *u, eddy_args_t *args, eddy_err_t *err)
{
    const json_t *list = json_object_get(u->old, "args");
    size_t n = json_array_size(list);
    args->items = calloc(n + 1, sizeof *args->items);
    if (!args->items)
        return eddy_err_set(err, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *a = json_string_value(json_array_get(list, i));
        if (!a)
            continue;
        if (spec_flag(a)) {
            i++; /* and its value */
            continue;
        }
        if (strstr(a, EDDY_REDACTED))
            return eddy_err_set(err, "job %s's flags hold a credential the coordinator does not "
                                "show (%s): give the job flags on the command line", u->old_id, a);
        args->items[args->count++] = (char *)a;
    }
    return 0;
}

/* Polls job id until it runs (0) or fails to: -1 with the cause in err. */
static int wait_running(upgrade_t *u, const char *id, eddy_err_t *err)
{
    uint64_t deadline = eddy_mono_ms() + u->timeout_ms;
    for (;;) {
        eddy_err_t serr = {{0}};
        json_t *doc = fetch_status(u, &serr);
        const json_t *j = doc ? find_job(doc, id) : NULL;
        const char *state = j ? json_string_value(json_object_get(j, "state")) : NULL;
        const char *cause = j ? json_string_value(json_object_get(j, "last_failure")) : NULL;
        int rc = 1; /* 1: wait on */
        if (j && state && (!strcmp(state, "failed") || !strcmp(state, "cancelled"))) {
            const char *e = json_string_value(json_object_get(j, "error"));
            rc = eddy_err_set(err, "%s", cause ? cause : e ? e : state);
        } else if (j && json_integer_value(json_object_get(j, "restarts")) > 0) {
            rc = eddy_err_set(err, "%s", cause ? cause : "it restarted");
        } else if (state && (!strcmp(state, "running") || !strcmp(state, "finished"))) {
            rc = 0;
        } else if (eddy_mono_ms() >= deadline) {
            rc = eddy_err_set(err, "it was not running after %u ms (%s%s)", u->timeout_ms,
                              state ? state : doc ? "not in the status" : "no status: ",
                              state || doc ? "" : serr.msg);
        }
        json_decref(doc);
        if (rc <= 0)
            return rc;
        eddy_sleep_ms(POLL_MS);
    }
}

/* The old version again from the savepoint: its id in *id, or -1 with err. */
static int roll_back(upgrade_t *u, char **id, eddy_err_t *err)
{
    char root[EDDY_STORAGE_URI_MAX];
    char *text;
    if (eddy_cli_savepoint_text(u->location, NULL, false, root, sizeof root, &text, err) < 0)
        return -1;
    char *args[] = {"--from-savepoint", root, "--savepoint-manifest", text, "--like", u->old_id};
    int rc = eddy_cli_request(u->coordinator, u->keys, "submit", 6, args, 10000, id, err);
    free(text);
    if (rc != 0)
        return -1;
    return wait_running(u, *id, err);
}

static int usage(void)
{
    printf("usage: eddy upgrade JOB (--plugin FILE.so | --pipeline FILE | --sql FILE) [--job NAME] "
           "[flags] [job flags]\n\n"
           "stops JOB with a savepoint and starts the new version from it (a new job id, printed "
           "last); if the new version is refused or fails to start, the old one starts again from "
           "the same savepoint and the command says why (exit status 1). Without job flags the "
           "new version gets JOB's (its pipeline spec left out).\n\nflags:\n");
    return 0;
}

/* Stop with a savepoint, start the new version, roll back if it fails. */
static int run(upgrade_t *u, eddy_cli_job_t *job, const char *dir, bool allow)
{
    eddy_err_t err = {{0}};
    char *args[4] = {u->old_id, "--stop"};
    int n = 2;
    if (dir) {
        args[n++] = "--dir";
        args[n++] = (char *)dir;
    }
    char *body = NULL;
    int rc = eddy_cli_request(u->coordinator, u->keys, "savepoint", n, args, u->timeout_ms, &body, &err);
    if (rc != 0) {
        fprintf(stderr, "eddy upgrade: the stop-with-savepoint of %s failed: %s\n", u->old_id, err.msg);
        return rc;
    }
    snprintf(u->location, sizeof u->location, "%s", body);
    free(body);
    printf("savepoint %s\n", u->location);
    fflush(stdout);
    char *id = NULL;
    char why[EDDY_ERROR_MAX + 64];
    rc = eddy_cli_job_submit(job, u->coordinator, u->keys_dir, u->location, allow, &id, &err);
    if (rc != 0) {
        snprintf(why, sizeof why, "the new version was refused: %s", err.msg);
    } else if (wait_running(u, id, &err) < 0) {
        snprintf(why, sizeof why, "the new version (%s) failed to start: %s", id, err.msg);
        char *cancel[] = {id};
        eddy_err_t cerr = {{0}};
        eddy_cli_request(u->coordinator, u->keys, "cancel", 1, cancel, 5000, NULL, &cerr);
    } else {
        printf("%s\n", id); /* the new job's id, the last line */
        free(id);
        return 0;
    }
    free(id);
    id = NULL;
    eddy_err_t rerr = {{0}};
    if (roll_back(u, &id, &rerr) < 0)
        fprintf(stderr, "eddy upgrade: %s; the rollback to the old version failed too: %s (the "
                "savepoint is %s)\n", why, rerr.msg, u->location);
    else
        fprintf(stderr, "eddy upgrade: %s; rolled back: %s runs again as %s from savepoint %s\n",
                why, u->old_id, id, u->location);
    free(id);
    return 1;
}

int eddy_cmd_upgrade(int argc, char **argv)
{
    upgrade_t u = {.coordinator = eddy_client_default_coordinator(),
                   .keys_dir = eddy_cli_default_keys(), .timeout_ms = 120000};
    const char *dir = NULL;
    bool allow = false;
    eddy_cli_job_t job = {0};
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("coordinator", &u.coordinator, "tcp://HOST:PORT",
                      "coordinator to talk to (env EDDY_COORDINATOR, default " EDDY_DEFAULT_COORDINATOR ")"),
        EDDY_CLI_KEYS_FLAG(u.keys_dir), EDDY_CLI_JOB_FLAGS(job),
        EDDY_FLAG_SWITCH("allow-non-restored-state", &allow,
                         "drop saved state that no operator of the new version claims"),
        EDDY_FLAG_STR("dir", &dir, "URI", "where the savepoint goes (as eddy savepoint --dir)"),
        EDDY_FLAG_U32("timeout-ms", &u.timeout_ms, 1, EDDY_FLAG_MS_MAX, "MS",
                      "wait this long for the savepoint, and for the new version to run (120000)"),
        EDDY_FLAG_END};
    bool help = argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"));
    if (!help && (argc < 1 || argv[0][0] == '-'))
        return eddy_usage_error("upgrade", "expected JOB first (eddy upgrade JOB --pipeline FILE ...)");
    eddy_err_t err = {{0}};
    int rc = help ? 1 : eddy_flags_parse(flags, argc - 1, argv + 1, NULL, &job.args, &err);
    if (rc == 1) {
        usage();
        eddy_flags_print_help(stdout, flags);
        eddy_cli_job_clear(&job);
        return 0;
    }
    int given = !!job.plugin + !!job.pipeline + !!job.sql;
    if (rc == 0 && given != 1)
        rc = eddy_err_set(&err, "give the new version: one of --plugin FILE.so, --pipeline FILE, --sql FILE");
    if (rc == 0 && job.job && !job.plugin)
        rc = eddy_err_set(&err, "--job names a job of the new --plugin");
    if (rc < 0) {
        eddy_cli_job_clear(&job);
        return eddy_usage_error("upgrade", err.msg);
    }
    char root[EDDY_STORAGE_URI_MAX];
    if (dir && eddy_savepoint_location(dir, root, sizeof root, &err) < 0) {
        eddy_cli_job_clear(&job);
        return eddy_usage_error("upgrade", err.msg);
    }
    snprintf(u.old_id, sizeof u.old_id, "%s", argv[0]);
    if (eddy_cli_load_keys("upgrade", u.keys_dir, EDDY_KEYS_CLIENT, &u.keys) != 0) {
        eddy_cli_job_clear(&job);
        return 2;
    }
    /* built before JOB is touched: a bad spec or flag changes nothing;
     * with job flags given (and the job named) even before the cluster is
     * asked anything */
    bool early = job.args.count > 0 && (job.job || !job.plugin);
    if (early && eddy_cli_job_prepare(&job, &err) < 0) {
        fprintf(stderr, "eddy upgrade: %s (%s was not touched)\n", err.msg, argv[0]);
        rc = 2;
    } else if (!(u.status = fetch_status(&u, &err))) {
        fprintf(stderr, "eddy upgrade: %s\n", err.msg);
        rc = 1;
    } else if (!(u.old = find_job(u.status, argv[0])) || ended(u.old)) {
        fprintf(stderr, "eddy upgrade: no running job '%s' (eddy status lists them)\n", argv[0]);
        rc = 2;
    } else {
        snprintf(u.old_id, sizeof u.old_id, "%s", json_string_value(json_object_get(u.old, "id")));
        if (!job.job && job.plugin)
            job.job = json_string_value(json_object_get(u.old, "job"));
        if (!job.guarantee) /* the old job's, as its flags */
            job.guarantee = json_string_value(json_object_get(u.old, "guarantee"));
        if (!early && ((job.args.count == 0 && old_flags(&u, &job.args, &err) < 0) ||
                       eddy_cli_job_prepare(&job, &err) < 0)) {
            fprintf(stderr, "eddy upgrade: %s (%s was not touched)\n", err.msg, u.old_id);
            rc = 2;
        } else if ((rc = eddy_cli_job_upload(&job, u.coordinator, u.keys_dir, &err)) != 0) {
            /* e.g. the registry refuses a name the old plugin registered */
            fprintf(stderr, "eddy upgrade: %s (%s was not touched)\n", err.msg, u.old_id);
        } else {
            rc = run(&u, &job, dir ? root : NULL, allow);
        }
    }
    eddy_cli_job_clear(&job);
    json_decref(u.status);
    eddy_keys_destroy(&u.keys);
    return rc;
}
