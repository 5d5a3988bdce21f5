/* common.c - what every subcommand shares: flag parsing with uniform
 * --help and errors (the coordinator's client is net/client.c). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"
#include "net/proto.h"
#include "plan/sql_compile.h"

const char *eddy_cli_default_keys(void)
{
    const char *env = getenv("EDDY_KEYS");
    return env && *env ? env : NULL;
}

int eddy_cli_load_keys(const char *sub, const char *dir, eddy_keys_use_t use, eddy_keys_t **keys)
{
    *keys = NULL;
    if (!dir || !*dir)
        return 0;
    eddy_err_t err = {{0}};
    *keys = eddy_keys_load(dir, use, &err);
    return *keys ? 0 : eddy_usage_error(sub, err.msg);
}

int eddy_cli_check_exposure(const char *sub, bool keys, bool insecure, const char *what)
{
    if (keys || !what)
        return 0;
    if (!insecure) {
        fprintf(stderr, "eddy %s: %s without --keys: anyone who can "
                "reach the port can run code on the workers through plugins; give --keys DIR "
                "(see eddy keygen, docs/security.md), or --insecure to accept that\n", sub, what);
        return 2;
    }
    eddy_warn("INSECURE (--insecure): %s without --keys: anyone who "
              "can reach the port can run code on the workers through plugins (docs/security.md)",
              what);
    return 0;
}

int eddy_usage_error(const char *sub, const char *msg)
{
    fprintf(stderr, "eddy %s: %s\n", sub, msg);
    return 2;
}

int eddy_cli_checkpoint_storage(const char *sub, const char *storage, const char **dir,
                                const char **uri)
{
    *uri = NULL;
    if (!storage)
        return 0;
    if (strlen(storage) >= EDDY_STORAGE_URI_MAX) {
        char msg[160];
        snprintf(msg, sizeof msg, "--checkpoint-storage: the URI is longer than %d bytes",
                 EDDY_STORAGE_URI_MAX - 1);
        return eddy_usage_error(sub, msg);
    }
    if (!strncmp(storage, "file://", 7)) {
        const char *path = storage + 7;
        if (!strncmp(path, "localhost/", 10))
            path += 9;
        if (path[0] != '/')
            return eddy_usage_error(sub, "--checkpoint-storage: want file:///ABSOLUTE/DIR "
                                         "(a file URI has no host)");
        if (*dir)
            return eddy_usage_error(sub, "--checkpoint-storage file:///DIR and --snapshot-dir "
                                         "both name the checkpoint directory: give one");
        *dir = path;
        return 0;
    }
    if (strncmp(storage, "s3://", 5))
        return eddy_usage_error(sub, "--checkpoint-storage: want file:///DIR or "
                                     "s3://BUCKET/PREFIX?endpoint=URL&region=R");
    const char *at = strchr(storage + 5, '@'), *slash = strchr(storage + 5, '/');
    if (at && (!slash || at < slash))
        return eddy_usage_error(sub, "--checkpoint-storage: no credentials in the URI (they come "
                                     "from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)");
    *uri = storage;
    return 0;
}

int eddy_cli_parse(const char *sub, const char *usage, eddy_flag_t *flags, int argc, char **argv,
                   eddy_args_t *positional, eddy_args_t *passthrough, int *exit_code)
{
    eddy_err_t err = {{0}};
    int rc = eddy_flags_parse(flags, argc, argv, positional, passthrough, &err);
    if (rc == 1) {
        printf("usage: eddy %s %s\n\nflags:\n", sub, usage);
        eddy_flags_print_help(stdout, flags);
        *exit_code = 0;
        return -1;
    }
    if (rc < 0) {
        *exit_code = eddy_usage_error(sub, err.msg);
        return -1;
    }
    return 0;
}


/* --pipeline FILE or --sql FILE (flag): the file's text as the job
 * pipeline's --spec or --sql, and its name as --spec-file or --sql-file. */
static int pipeline_text_job(const char *flag, const char *file, const char **job,
                             eddy_args_t *job_args, char **text, eddy_err_t *err)
{
    if (*job && strcmp(*job, "pipeline"))
        return eddy_err_set(err, "--%s runs the job 'pipeline': give --job or --%s, not both", flag, flag);
    FILE *f = fopen(file, "rb");
    if (!f)
        return eddy_err_set(err, "--%s %s: %s", flag, file, strerror(errno));
    size_t cap = EDDY_ARG_MAX, n = 0;
    char *buf = malloc(cap);
    if (buf)
        n = fread(buf, 1, cap - 1, f);
    bool too_big = buf && n == cap - 1 && fgetc(f) != EOF;
    bool failed = ferror(f);
    fclose(f);
    if (!buf || failed || too_big) {
        free(buf);
        if (too_big)
            return eddy_err_set(err, "--%s %s: larger than %u bytes", flag, file, EDDY_ARG_MAX - 1);
        return eddy_err_set(err, "--%s %s: cannot read it", flag, file);
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        free(buf);
        return eddy_err_set(err, "--%s %s: not a text file (NUL byte)", flag, file);
    }
    char **items = realloc(job_args->items, (size_t)(job_args->count + 5) * sizeof *items);
    if (!items) {
        free(buf);
        return eddy_err_set(err, "out of memory");
    }
    memmove(items + 4, items, (size_t)job_args->count * sizeof *items);
    bool sql = !strcmp(flag, "sql");
    items[0] = sql ? "--sql" : "--spec";
    items[1] = buf;
    items[2] = sql ? "--sql-file" : "--spec-file";
    items[3] = (char *)file;
    job_args->items = items;
    job_args->count += 4;
    *job = "pipeline";
    *text = buf;
    return 0;
}

int eddy_cli_pipeline_job(const char *file, const char **job, eddy_args_t *job_args, char **text,
                          eddy_err_t *err)
{
    return pipeline_text_job("pipeline", file, job, job_args, text, err);
}

int eddy_cli_sql_job(const char *file, const char **job, eddy_args_t *job_args, char **text,
                     eddy_err_t *err)
{
    return pipeline_text_job("sql", file, job, job_args, text, err);
}

int eddy_cli_sql_explain(const char *file, const char *text, const eddy_args_t *job_args)
{
    if (!text || !eddy_sql_explains(text, strlen(text)))
        return -1;
    int n = job_args->count - 4 + 2; /* --sql FILE, then the job flags */
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    if (!argv)
        return eddy_usage_error("plan", "out of memory");
    argv[0] = "--sql";
    argv[1] = (char *)file;
    for (int i = 4; i < job_args->count; i++)
        argv[i - 2] = job_args->items[i];
    int rc = eddy_cmd_plan(n, argv);
    free(argv);
    return rc;
}
