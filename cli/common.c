/* common.c - what every subcommand shares: flag parsing with uniform
 * --help and errors (the coordinator's client is net/client.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

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

int eddy_usage_error(const char *sub, const char *msg)
{
    fprintf(stderr, "eddy %s: %s\n", sub, msg);
    return 2;
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

