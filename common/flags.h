/* flags.h - the one command-line flag parser used by every subcommand and
 * every job, so `--name value`, `--name=value`, errors and --help text look
 * the same everywhere.
 *
 * Table-driven: each eddy_flag_t names a flag, its kind and where to store
 * it. Positional arguments are collected in order. In pass-through mode,
 * unknown flags (and the values following them) are collected instead of
 * rejected, so `eddy local` can hand the job's flags on to the job. */
#ifndef EDDY_COMMON_FLAGS_H
#define EDDY_COMMON_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

typedef enum eddy_flag_kind {
    EDDY_FLAG_STRING, /* target: const char ** (points into argv) */
    EDDY_FLAG_UINT,   /* target: uint64_t *, decimal, no sign */
    EDDY_FLAG_DOUBLE, /* target: double *, finite, >= 0 */
    EDDY_FLAG_BOOL,   /* target: bool *, takes no value */
} eddy_flag_kind_t;

typedef struct eddy_flag {
    const char *name;     /* without the leading "--" */
    eddy_flag_kind_t kind;
    void *target;
    const char *metavar;  /* "N", "FILE", ... for the help text */
    const char *help;
    bool seen;
} eddy_flag_t;

typedef struct eddy_args {
    int count;
    char **items;         /* borrowed from argv */
} eddy_args_t;

/* Parses argv[0..argc). Returns 0, 1 when --help/-h was given, or -1 with err
 * for an unknown flag (unless passthrough is set), a missing or malformed
 * value. positional and passthrough may be NULL when not accepted. */
int eddy_flags_parse(eddy_flag_t *flags, int argc, char **argv, eddy_args_t *positional,
                     eddy_args_t *passthrough, eddy_err_t *err);
void eddy_args_free(eddy_args_t *args);
void eddy_flags_print_help(FILE *out, const eddy_flag_t *flags);
/* Parses a whole decimal uint64 (no sign, no junk); -1 on failure. */
int eddy_parse_uint(const char *text, uint64_t *out);

#endif
