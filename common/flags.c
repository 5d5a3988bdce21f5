/* flags.c - table-driven flag parsing (see flags.h). */
#include "common/flags.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int eddy_parse_uint(const char *text, uint64_t *out)
{
    if (!text || !*text || *text < '0' || *text > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* Whole decimal digits after an optional '-': the shape of an integer, so a
 * value of the right shape but the wrong size is "out of range", not
 * "not a number". */
static bool integer_shaped(const char *text)
{
    if (*text == '-')
        text++;
    if (!*text)
        return false;
    for (; *text; text++)
        if (*text < '0' || *text > '9')
            return false;
    return true;
}

int eddy_parse_uint_in(const char *what, const char *text, uint64_t min, uint64_t max,
                       uint64_t *out, eddy_err_t *err)
{
    if (!integer_shaped(text))
        return eddy_err_set(err, "%s: expected a whole number, got '%s'", what, text);
    uint64_t v;
    if (eddy_parse_uint(text, &v) < 0 || v < min || v > max)
        return eddy_err_set(err, "%s: %s is out of range %llu..%llu", what, text,
                            (unsigned long long)min, (unsigned long long)max);
    *out = v;
    return 0;
}

static int parse_int64_in(const char *what, const char *text, int64_t min, int64_t max,
                          int64_t *out, eddy_err_t *err)
{
    if (!integer_shaped(text))
        return eddy_err_set(err, "%s: expected a whole number, got '%s'", what, text);
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (errno || *end || v < min || v > max)
        return eddy_err_set(err, "%s: %s is out of range %lld..%lld", what, text, (long long)min,
                            (long long)max);
    *out = v;
    return 0;
}

static int parse_double_in(const char *what, const char *text, double min, double max,
                           double *out, eddy_err_t *err)
{
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (!*text || *end || isnan(v))
        return eddy_err_set(err, "%s: expected a number, got '%s'", what, text);
    /* ERANGE on underflow is harmless (the value is ~0); overflow and
     * infinities are caught by the range. */
    if (!isfinite(v) || v < min || v > max)
        return eddy_err_set(err, "%s: %s is out of range %g..%g", what, text, min, max);
    *out = v;
    return 0;
}

static eddy_flag_t *find(eddy_flag_t *flags, const char *name, size_t len)
{
    for (eddy_flag_t *f = flags; f && f->name; f++)
        if (strlen(f->name) == len && !strncmp(f->name, name, len))
            return f;
    return NULL;
}

static int push(eddy_args_t *args, char *item, eddy_err_t *err)
{
    char **items = realloc(args->items, (size_t)(args->count + 1) * sizeof *items);
    if (!items)
        return eddy_err_set(err, "out of memory");
    args->items = items;
    args->items[args->count++] = item;
    return 0;
}

static int store(eddy_flag_t *f, const char *value, eddy_err_t *err)
{
    char what[80];
    snprintf(what, sizeof what, "--%s", f->name);
    switch (f->kind) {
    case EDDY_FLAG_STRING:
        if (!*value)
            return eddy_err_set(err, "%s needs a non-empty value", what);
        *(const char **)f->target = value;
        return 0;
    case EDDY_FLAG_BOOL:
        *(bool *)f->target = true;
        return 0;
    case EDDY_FLAG_UINT32: {
        uint64_t v;
        uint64_t max = f->umax < UINT32_MAX ? f->umax : UINT32_MAX;
        if (eddy_parse_uint_in(what, value, f->umin, max, &v, err) < 0)
            return -1;
        *(uint32_t *)f->target = (uint32_t)v;
        return 0;
    }
    case EDDY_FLAG_UINT64:
        return eddy_parse_uint_in(what, value, f->umin, f->umax, (uint64_t *)f->target, err);
    case EDDY_FLAG_INT64:
        return parse_int64_in(what, value, f->imin, f->imax, (int64_t *)f->target, err);
    case EDDY_FLAG_DOUBLE:
        return parse_double_in(what, value, f->dmin, f->dmax, (double *)f->target, err);
    }
    return eddy_err_set(err, "%s: unknown flag kind", what);
}

int eddy_flags_parse(eddy_flag_t *flags, int argc, char **argv, eddy_args_t *positional,
                     eddy_args_t *passthrough, eddy_err_t *err)
{
    bool only_positional = false;
    for (int i = 0; i < argc; i++) {
        char *arg = argv[i];
        if (only_positional || arg[0] != '-' || !arg[1]) {
            if (passthrough && !positional) {
                if (push(passthrough, arg, err) < 0)
                    return -1;
                continue;
            }
            if (!positional)
                return eddy_err_set(err, "unexpected argument '%s'", arg);
            if (push(positional, arg, err) < 0)
                return -1;
            continue;
        }
        if (!strcmp(arg, "--")) {
            only_positional = true;
            continue;
        }
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
            return 1;
        if (arg[1] != '-') {
            if (passthrough) {
                if (push(passthrough, arg, err) < 0)
                    return -1;
                continue;
            }
            return eddy_err_set(err, "unknown flag '%s'", arg);
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        eddy_flag_t *f = find(flags, name, len);
        if (!f) {
            if (passthrough) {
                if (push(passthrough, arg, err) < 0)
                    return -1;
                /* its value, if any, follows as a non-flag argument */
                if (!eq && i + 1 < argc && argv[i + 1][0] != '-') {
                    if (push(passthrough, argv[++i], err) < 0)
                        return -1;
                }
                continue;
            }
            return eddy_err_set(err, "unknown flag '--%.*s'", (int)len, name);
        }
        const char *value;
        if (f->kind == EDDY_FLAG_BOOL) {
            if (eq)
                return eddy_err_set(err, "--%s takes no value", f->name);
            value = "";
        } else if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc)
                return eddy_err_set(err, "--%s needs a value (%s)", f->name,
                                    f->metavar ? f->metavar : "VALUE");
            value = argv[++i];
        }
        if (store(f, value, err) < 0)
            return -1;
        f->seen = true;
    }
    return 0;
}

void eddy_args_free(eddy_args_t *args)
{
    free(args->items);
    args->items = NULL;
    args->count = 0;
}

void eddy_flags_print_help(FILE *out, const eddy_flag_t *flags)
{
    for (const eddy_flag_t *f = flags; f && f->name; f++) {
        char left[64];
        if (f->kind == EDDY_FLAG_BOOL)
            snprintf(left, sizeof left, "--%s", f->name);
        else
            snprintf(left, sizeof left, "--%s %s", f->name, f->metavar ? f->metavar : "VALUE");
        fprintf(out, "  %-28s %s\n", left, f->help ? f->help : "");
    }
}
