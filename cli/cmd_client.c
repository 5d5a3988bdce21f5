/* cmd_client.c - subcommands that talk to a running coordinator: submit,
 * rescale, status, scaling, cancel; and `jobs`, which lists built-in jobs. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/clock.h"
#include "common/guarantee.h"
#include "controller/decision_text.h"
#include "plan/registry.h"

/* What a view prints: with `all` false, only what matters now (running
 * jobs, decisions that change something). */
/* job: only this job (NULL: all); returns the exit status. */
typedef int (*render_fn)(json_t *doc, bool all, const char *job);

/* `eddy status JOB`: what the last complete checkpoint cost (the slowest
 * task's time in each part) and how many completed and failed. */
static void render_checkpoint(const json_t *ck)
{
    if (json_integer_value(json_object_get(ck, "id")) <= 0)
        return;
    printf("    checkpoint %lld: %.1f ms (sync %.3f ms, async %.1f ms, alignment %.1f ms), %lld bytes "
           "in %lld files; %lld key groups referred to earlier checkpoints; %lld completed, %lld failed\n",
           (long long)json_integer_value(json_object_get(ck, "id")),
           json_number_value(json_object_get(ck, "duration_ms")),
           json_number_value(json_object_get(ck, "sync_ms")),
           json_number_value(json_object_get(ck, "async_ms")),
           json_number_value(json_object_get(ck, "alignment_ms")),
           (long long)json_integer_value(json_object_get(ck, "bytes")),
           (long long)json_integer_value(json_object_get(ck, "objects")),
           (long long)json_integer_value(json_object_get(ck, "objects_referenced")),
           (long long)json_integer_value(json_object_get(ck, "completed")),
           (long long)json_integer_value(json_object_get(ck, "failed")));
}

static int call_and_print(const char *sub, const char *coordinator, const char *keys_dir,
                          const char *verb, int argc, char **argv, uint32_t timeout_ms,
                          bool json_out, render_fn render, bool all, const char *job)
{
    char *body = NULL;
    eddy_err_t err = {{0}};
    eddy_keys_t *keys;
    if (eddy_cli_load_keys(sub, keys_dir, EDDY_KEYS_CLIENT, &keys) != 0)
        return 2;
    int rc = eddy_cli_request(coordinator, keys, verb, argc, argv, timeout_ms, &body, &err);
    eddy_keys_destroy(&keys);
    if (rc != 0) {
        fprintf(stderr, "eddy %s: %s\n", sub, err.msg);
    } else if (json_out || !render) {
        printf("%s\n", body);
    } else {
        json_error_t jerr;
        json_t *doc = json_loads(body, 0, &jerr);
        if (doc)
            rc = render(doc, all, job);
        else
            printf("%s\n", body);
        json_decref(doc);
    }
    free(body);
    return rc;
}

#define COORDINATOR_FLAG(var)                                                                      \
    EDDY_FLAG_STR("coordinator", &(var), "tcp://HOST:PORT",                                         \
                  "coordinator to talk to (env EDDY_COORDINATOR, default " EDDY_DEFAULT_COORDINATOR ")")

int eddy_cmd_rescale(int argc, char **argv)
{
    const char *coordinator = eddy_client_default_coordinator(), *keys = eddy_cli_default_keys();
    uint32_t timeout = 60000;
    eddy_flag_t flags[] = {COORDINATOR_FLAG(coordinator), EDDY_CLI_KEYS_FLAG(keys),
                           EDDY_FLAG_U32("timeout-ms", &timeout, 1, EDDY_FLAG_MS_MAX, "MS",
                                         "wait this long for the rescale (60000)"),
                           EDDY_FLAG_END};
    eddy_args_t pos = {0};
    int code;
    if (eddy_cli_parse("rescale", "JOB OPERATOR PARALLELISM [flags]", flags, argc, argv, &pos, NULL, &code) < 0) {
        eddy_args_free(&pos);
        return code;
    }
    uint64_t p;
    if (pos.count != 3) {
        eddy_args_free(&pos);
        return eddy_usage_error("rescale", "expected JOB OPERATOR PARALLELISM");
    }
    eddy_err_t err = {{0}};
    if (eddy_parse_uint_in("PARALLELISM", pos.items[2], 1, EDDY_MAX_KEY_GROUPS, &p, &err) < 0) {
        eddy_args_free(&pos);
        return eddy_usage_error("rescale", err.msg);
    }
    int rc = call_and_print("rescale", coordinator, keys, "rescale", 3, pos.items, timeout, true, NULL, false, NULL);
    eddy_args_free(&pos);
    return rc;
}

static bool job_ended(const json_t *j)
{
    return eddy_cli_job_state_ended(json_string_value(json_object_get(j, "state")));
}

/* The lines an operator's instances reported about themselves (a
 * pipeline's filter order and figures), one per instance. */
static void render_reports(const json_t *op)
{
    size_t m;
    json_t *r;
    json_array_foreach(json_object_get(op, "reports"), m, r)
    {
        const char *text = json_string_value(json_object_get(r, "text"));
        if (text && text[0])
            printf("      [%lld] %s\n", (long long)json_integer_value(json_object_get(r, "instance")),
                   text);
    }
}

static const char *job_id(const json_t *j)
{
    const char *id = json_string_value(json_object_get(j, "id"));
    return id ? id : "";
}

static bool has_job(const json_t *jobs, const char *job)
{
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j)
    {
        if (!strcmp(job_id(j), job))
            return true;
    }
    return false;
}

/* "spread over workers 1/2/3: 2/2/1 instances": how many instances of the
 * job each worker holds, by worker id (a placement that leaves a live
 * worker idle shows as a missing id; the WORKERS list has all of them). */
static void render_spread(const json_t *j)
{
    enum { MAX_SHOWN = 64 };
    long long ids[MAX_SHOWN], counts[MAX_SHOWN];
    size_t n = 0, k, m;
    json_t *op, *inst;
    json_array_foreach(json_object_get(j, "operators"), k, op)
    {
        json_array_foreach(json_object_get(op, "instances"), m, inst)
        {
            json_t *w = json_object_get(inst, "worker");
            if (!json_is_integer(w))
                continue;
            long long id = (long long)json_integer_value(w);
            size_t x = 0;
            while (x < n && ids[x] != id)
                x++;
            if (x == n) {
                if (n == MAX_SHOWN)
                    continue;
                size_t at = n++; /* sorted by id */
                while (at > 0 && ids[at - 1] > id) {
                    ids[at] = ids[at - 1];
                    counts[at] = counts[at - 1];
                    at--;
                }
                ids[at] = id;
                counts[at] = 0;
                x = at;
            }
            counts[x]++;
        }
    }
    if (n == 0)
        return;
    printf("    spread over workers ");
    for (size_t x = 0; x < n; x++)
        printf("%s%lld", x ? "/" : "", ids[x]);
    printf(": ");
    for (size_t x = 0; x < n; x++)
        printf("%s%lld", x ? "/" : "", counts[x]);
    printf(" instances\n");
}

static int render_status(json_t *doc, bool all, const char *job)
{
    json_t *jobs = json_object_get(doc, "jobs"), *workers = json_object_get(doc, "workers");
    size_t i, hidden = 0;
    json_t *j;
    if (job && !has_job(jobs, job)) {
        fprintf(stderr, "eddy status: no job '%s' (eddy status --all lists them)\n", job);
        return 2;
    }
    printf("JOBS\n");
    json_array_foreach(jobs, i, j)
    {
        if (job && strcmp(job_id(j), job))
            continue;
        if (!job && !all && job_ended(j)) {
            hidden++;
            continue;
        }
        json_t *ck = json_object_get(j, "last_checkpoint");
        char submitted[48] = "?", ended[64] = "";
        json_t *t = json_object_get(j, "submitted_ms");
        if (json_is_integer(t))
            eddy_format_local_time(submitted, sizeof submitted, (int64_t)json_integer_value(t));
        t = json_object_get(j, "ended_ms");
        if (json_is_integer(t)) {
            char when[48];
            snprintf(ended, sizeof ended, ", ended %s",
                     eddy_format_local_time(when, sizeof when, (int64_t)json_integer_value(t)));
        }
        /* rescales_total counts the rescales of earlier coordinators too */
        const json_t *rescales = json_object_get(j, "rescales_total");
        printf("  %s (%s) %s, submitted %s%s, epoch %lld, last checkpoint %lld, rescales %lld, restarts %lld\n",
               json_string_value(json_object_get(j, "id")), json_string_value(json_object_get(j, "job")),
               json_string_value(json_object_get(j, "state")), submitted, ended,
               (long long)json_integer_value(json_object_get(j, "epoch")),
               (long long)json_integer_value(json_object_get(ck, "id")),
               json_is_integer(rescales) ? (long long)json_integer_value(rescales)
                                         : (long long)json_array_size(json_object_get(j, "rescales")),
               (long long)json_integer_value(json_object_get(j, "restarts")));
        if (json_string_value(json_object_get(j, "error")))
            printf("    error: %s\n", json_string_value(json_object_get(j, "error")));
        if (json_string_value(json_object_get(j, "savepoint")))
            printf("    savepoint: %s\n", json_string_value(json_object_get(j, "savepoint")));
        if (json_string_value(json_object_get(j, "restored_from_savepoint")))
            printf("    started from savepoint: %s\n",
                   json_string_value(json_object_get(j, "restored_from_savepoint")));
        if (job)
            render_checkpoint(ck);
        size_t k;
        json_t *op;
        json_array_foreach(json_object_get(j, "operators"), k, op)
        {
            printf("    %-12s parallelism %-3lld records in %-12lld out %-12lld",
                   json_string_value(json_object_get(op, "name")),
                   (long long)json_integer_value(json_object_get(op, "parallelism")),
                   (long long)json_integer_value(json_object_get(op, "records_in")),
                   (long long)json_integer_value(json_object_get(op, "records_out")));
            const json_t *lag = json_object_get(op, "source_lag"); /* entries not read yet */
            if (json_is_integer(lag))
                printf(" lag %lld", (long long)json_integer_value(lag));
            if (json_is_true(json_object_get(op, "keyed"))) {
                printf(" key groups");
                size_t m;
                json_t *inst;
                json_array_foreach(json_object_get(op, "instances"), m, inst)
                {
                    json_t *kg = json_object_get(inst, "key_groups");
                    printf(" %lld-%lld", (long long)json_integer_value(json_array_get(kg, 0)),
                           (long long)json_integer_value(json_array_get(kg, 1)) - 1);
                }
            }
            printf("\n");
            render_reports(op);
        }
        if (job_ended(j)) /* its rescales are history too: --all shows the totals above */
            continue;
        render_spread(j);
        json_t *r;
        json_array_foreach(json_object_get(j, "rescales"), k, r)
        {
            const char *kind = json_string_value(json_object_get(r, "kind"));
            if (kind && !strcmp(kind, "migration")) {
                printf("    migration %s: %lld instances moved, paused %.1f ms, moved %lld bytes (%s)\n",
                       json_string_value(json_object_get(r, "operator")),
                       (long long)json_integer_value(json_object_get(r, "instances_moved")),
                       json_real_value(json_object_get(r, "pause_ms")),
                       (long long)json_integer_value(json_object_get(r, "bytes_moved")),
                       json_string_value(json_object_get(r, "reason")) ? json_string_value(json_object_get(r, "reason")) : "");
                continue;
            }
            printf("    rescale %s %lld -> %lld, paused %.1f ms, moved %lld bytes\n",
                   json_string_value(json_object_get(r, "operator")),
                   (long long)json_integer_value(json_object_get(r, "old_parallelism")),
                   (long long)json_integer_value(json_object_get(r, "new_parallelism")),
                   json_real_value(json_object_get(r, "pause_ms")),
                   (long long)json_integer_value(json_object_get(r, "bytes_moved")));
        }
    }
    if (hidden)
        printf("  (%zu ended job%s not shown: eddy status --all)\n", hidden, hidden == 1 ? "" : "s");
    else if (json_array_size(jobs) == 0)
        printf("  none\n");
    printf("WORKERS\n");
    json_array_foreach(workers, i, j)
    {
        const char *state = json_string_value(json_object_get(j, "state"));
        if (!state) /* an older coordinator */
            state = json_is_true(json_object_get(j, "alive")) ? "alive" : "dead";
        /* busy: its loop silent past the heartbeat timeout, the process alive */
        char busy[64] = "";
        if (json_is_true(json_object_get(j, "busy")))
            snprintf(busy, sizeof busy, ", busy (loop silent %lld ms)",
                     (long long)json_integer_value(json_object_get(j, "last_heartbeat_ms_ago")));
        printf("  %-4lld %-12s %-24s pid %-8lld tasks %-4lld %s%s\n",
               (long long)json_integer_value(json_object_get(j, "id")),
               json_string_value(json_object_get(j, "name")), json_string_value(json_object_get(j, "address")),
               (long long)json_integer_value(json_object_get(j, "pid")),
               (long long)json_integer_value(json_object_get(j, "tasks")), state, busy);
    }
    return 0;
}

/* A read-only view of the coordinator: rendered for people, or --json
 * (everything the coordinator holds, whatever --all says: scripts wait
 * for a job's "finished" there). */
static int view_command(const char *sub, const char *usage, const char *all_help, bool takes_job,
                        int argc, char **argv, render_fn render)
{
    const char *coordinator = eddy_client_default_coordinator(), *keys = eddy_cli_default_keys();
    bool json_out = false, all = false;
    eddy_flag_t flags[] = {COORDINATOR_FLAG(coordinator), EDDY_CLI_KEYS_FLAG(keys),
                           EDDY_FLAG_SWITCH("all", &all, all_help),
                           EDDY_FLAG_SWITCH("json", &json_out, "print JSON (always everything)"),
                           EDDY_FLAG_END};
    eddy_args_t pos = {0};
    int code;
    if (eddy_cli_parse(sub, usage, flags, argc, argv, takes_job ? &pos : NULL, NULL, &code) < 0) {
        eddy_args_free(&pos);
        return code;
    }
    if (pos.count > 1) {
        eddy_args_free(&pos);
        return eddy_usage_error(sub, "expected at most one JOB");
    }
    int rc = call_and_print(sub, coordinator, keys, sub, 0, NULL, 5000, json_out, render, all,
                            pos.count ? pos.items[0] : NULL);
    eddy_args_free(&pos);
    return rc;
}

int eddy_cmd_status(int argc, char **argv)
{
    /* With JOB: that job only (ended or not), with each operator's own
     * report lines (a pipeline's filter order and figures). */
    return view_command("status", "[JOB] [--all] [--json] [flags]",
                        "include ended jobs (finished, cancelled, failed, stopped)", true, argc, argv,
                        render_status);
}

static int render_scaling(json_t *doc, bool all, const char *job)
{
    (void)job;
    size_t i, hidden = 0;
    json_t *d;
    if (json_array_size(doc) == 0)
        printf("no scaling decisions yet\n");
    json_array_foreach(doc, i, d)
    {
        if (!all && !eddy_scaling_decision_changes(d)) {
            hidden++;
            continue;
        }
        char line[1536];
        printf("%s\n", eddy_scaling_decision_text(d, line, sizeof line));
        if (eddy_scaling_decision_inputs_text(d, line, sizeof line))
            printf("    %s\n", line);
    }
    if (hidden)
        printf("(%zu no-change decision%s not shown: eddy scaling --all)\n", hidden,
               hidden == 1 ? "" : "s");
    return 0;
}

int eddy_cmd_scaling(int argc, char **argv)
{
    return view_command("scaling", "[--all] [--json] [flags]",
                        "include decisions that changed nothing (no_change)", false, argc, argv,
                        render_scaling);
}

int eddy_cmd_submit(int argc, char **argv)
{
    const char *coordinator = eddy_client_default_coordinator(), *keys_dir = eddy_cli_default_keys();
    const char *from_savepoint = NULL;
    bool allow_non_restored = false;
    eddy_cli_job_t job = {0};
    eddy_flag_t flags[] = {COORDINATOR_FLAG(coordinator), EDDY_CLI_KEYS_FLAG(keys_dir),
                           EDDY_FLAG_STR("from-savepoint", &from_savepoint, "LOC",
                                         "start the job from this savepoint (docs/savepoints.md)"),
                           EDDY_FLAG_SWITCH("allow-non-restored-state", &allow_non_restored,
                                            "with --from-savepoint: drop saved state no operator claims"),
                           EDDY_CLI_JOB_FLAGS(job), EDDY_FLAG_END};
    eddy_err_t err = {{0}};
    int rc = eddy_flags_parse(flags, argc, argv, NULL, &job.args, &err);
    if (rc == 1) {
        printf("usage: eddy submit [--plugin FILE.so] [--guarantee G] (--job JOB | --pipeline FILE | --sql FILE) [job flags] [--coordinator tcp://HOST:PORT] [--keys DIR]\n\nflags:\n");
        eddy_flags_print_help(stdout, flags);
        eddy_cli_job_clear(&job);
        return 0;
    }
    /* EXPLAIN: the plan is printed, nothing is submitted */
    if (rc == 0 && job.sql && eddy_cli_job_resolve(&job, &err) == 0) {
        int explained = eddy_cli_sql_explain(job.sql, job.spec_text, &job.args);
        if (explained >= 0) {
            eddy_cli_job_clear(&job);
            return explained;
        }
    }
    /* Load and build here first: a plugin that fails, or bad job flags, stop
     * the submit before anything reaches the cluster. */
    if (rc < 0 || eddy_cli_job_prepare(&job, &err) < 0) {
        eddy_cli_job_clear(&job);
        return eddy_usage_error("submit", err.msg);
    }
    char *id = NULL;
    rc = eddy_cli_job_submit(&job, coordinator, keys_dir, from_savepoint, allow_non_restored, &id, &err);
    eddy_cli_job_clear(&job);
    if (rc != 0) {
        fprintf(stderr, "eddy submit: %s\n", err.msg);
        return rc;
    }
    printf("%s\n", id);
    free(id);
    return 0;
}

int eddy_cmd_cancel(int argc, char **argv)
{
    const char *coordinator = eddy_client_default_coordinator(), *keys = eddy_cli_default_keys();
    eddy_flag_t flags[] = {COORDINATOR_FLAG(coordinator), EDDY_CLI_KEYS_FLAG(keys), EDDY_FLAG_END};
    eddy_args_t pos = {0};
    int code;
    if (eddy_cli_parse("cancel", "JOB [flags]", flags, argc, argv, &pos, NULL, &code) < 0) {
        eddy_args_free(&pos);
        return code;
    }
    if (pos.count != 1) {
        eddy_args_free(&pos);
        return eddy_usage_error("cancel", "expected JOB");
    }
    int rc = call_and_print("cancel", coordinator, keys, "cancel", 1, pos.items, 5000, true, NULL, false, NULL);
    eddy_args_free(&pos);
    return rc;
}

int eddy_cmd_jobs(int argc, char **argv)
{
    eddy_flag_t flags[] = {EDDY_FLAG_END};
    int code;
    if (eddy_cli_parse("jobs", "", flags, argc, argv, NULL, NULL, &code) < 0)
        return code;
    const eddy_registry_t *r = eddy_registry_default();
    for (uint32_t i = 0; i < eddy_registry_job_count(r); i++)
        printf("%-16s %s\n", eddy_registry_job_at(r, i)->name, eddy_registry_job_at(r, i)->summary);
    return 0;
}
