/* flags.h - the one command-line flag parser used by every subcommand and
 * every job, so `--name value`, `--name=value`, errors and --help text look
 * the same everywhere.
 *
 * Table-driven: each eddy_flag_t names a flag, its kind and where to store
 * it. A numeric flag is parsed straight into its real type (uint32_t,
 * uint64_t, int64_t, double) and checked against its inclusive range, so a
 * value that does not fit is "--name: V is out of range MIN..MAX" instead of
 * being truncated later. Build table entries with the EDDY_FLAG_* macros
 * below; end the table with EDDY_FLAG_END.
 *
 * Positional arguments are collected in order. In pass-through mode,
 * unknown flags (and the values following them) are collected instead of
 * rejected, so `eddy local` can hand the job's flags on to the job. */
#ifndef EDDY_COMMON_FLAGS_H
#define EDDY_COMMON_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

typedef enum eddy_flag_kind {
    EDDY_FLAG_STRING, /* target: const char ** (points into argv), non-empty */
    EDDY_FLAG_BOOL,   /* target: bool *, takes no value */
    EDDY_FLAG_UINT32, /* target: uint32_t *, decimal, range umin..umax */
    EDDY_FLAG_UINT64, /* target: uint64_t *, decimal, range umin..umax */
    EDDY_FLAG_INT64,  /* target: int64_t *, decimal, range imin..imax */
    EDDY_FLAG_DOUBLE, /* target: double *, finite, range dmin..dmax */
} eddy_flag_kind_t;

typedef struct eddy_flag {
    const char *name;     /* without the leading "--" */
    eddy_flag_kind_t kind;
    void *target;
    const char *metavar;  /* "N", "FILE", ... for the help text */
    const char *help;
    uint64_t umin, umax;  /* EDDY_FLAG_UINT32/UINT64 */
    int64_t imin, imax;   /* EDDY_FLAG_INT64 */
    double dmin, dmax;    /* EDDY_FLAG_DOUBLE */
    bool seen;            /* set by the parser */
} eddy_flag_t;

#define EDDY_FLAG_STR(name_, target_, metavar_, help_)                                             \
    {.name = (name_), .kind = EDDY_FLAG_STRING, .target = (target_), .metavar = (metavar_),       \
     .help = (help_)}
#define EDDY_FLAG_SWITCH(name_, target_, help_)                                                    \
    {.name = (name_), .kind = EDDY_FLAG_BOOL, .target = (target_), .help = (help_)}
#define EDDY_FLAG_U32(name_, target_, min_, max_, metavar_, help_)                                \
    {.name = (name_), .kind = EDDY_FLAG_UINT32, .target = (target_), .metavar = (metavar_),       \
     .help = (help_), .umin = (min_), .umax = (max_)}
#define EDDY_FLAG_U64(name_, target_, min_, max_, metavar_, help_)                                \
    {.name = (name_), .kind = EDDY_FLAG_UINT64, .target = (target_), .metavar = (metavar_),       \
     .help = (help_), .umin = (min_), .umax = (max_)}
#define EDDY_FLAG_I64(name_, target_, min_, max_, metavar_, help_)                                \
    {.name = (name_), .kind = EDDY_FLAG_INT64, .target = (target_), .metavar = (metavar_),        \
     .help = (help_), .imin = (min_), .imax = (max_)}
#define EDDY_FLAG_F64(name_, target_, min_, max_, metavar_, help_)                                \
    {.name = (name_), .kind = EDDY_FLAG_DOUBLE, .target = (target_), .metavar = (metavar_),       \
     .help = (help_), .dmin = (min_), .dmax = (max_)}
#define EDDY_FLAG_END {.name = NULL}

/* Common ranges. */
#define EDDY_FLAG_PORT_MAX 65535u
#define EDDY_FLAG_MS_MAX 3600000u /* an hour: longer waits and intervals are typos */

typedef struct eddy_args {
    int count;
    char **items;         /* borrowed from argv */
} eddy_args_t;

/* Parses argv[0..argc). Returns 0, 1 when --help/-h was given, or -1 with err
 * for an unknown flag (unless passthrough is set), a missing, malformed or
 * out-of-range value; the message names the flag. positional and passthrough
 * may be NULL when not accepted. */
int eddy_flags_parse(eddy_flag_t *flags, int argc, char **argv, eddy_args_t *positional,
                     eddy_args_t *passthrough, eddy_err_t *err);
void eddy_args_free(eddy_args_t *args);
void eddy_flags_print_help(FILE *out, const eddy_flag_t *flags);
/* Parses a whole decimal uint64 (no sign, no junk); -1 on failure. */
int eddy_parse_uint(const char *text, uint64_t *out);
/* Parses text as a whole number in min..max for a value called what (a flag
 * "--name" or a positional "PARALLELISM"); -1 with the same messages as the
 * flags ("WHAT: V is out of range MIN..MAX"). */
int eddy_parse_uint_in(const char *what, const char *text, uint64_t min, uint64_t max,
                       uint64_t *out, eddy_err_t *err);

#endif
