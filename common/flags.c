/* flags.c - table-driven flag parsing (see flags.h). */
#include "common/flags.h"

#include <errno.h>
#include <math.h>
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
    switch (f->kind) {
    case EDDY_FLAG_STRING:
        if (!*value)
            return eddy_err_set(err, "--%s needs a non-empty value", f->name);
        *(const char **)f->target = value;
        return 0;
    case EDDY_FLAG_UINT: {
        uint64_t v;
        if (eddy_parse_uint(value, &v) < 0)
            return eddy_err_set(err, "--%s expects a whole number, got '%s'", f->name, value);
        *(uint64_t *)f->target = v;
        return 0;
    }
    case EDDY_FLAG_DOUBLE: {
        errno = 0;
        char *end;
        double v = strtod(value, &end);
        if (!*value || *end || errno || !isfinite(v) || v < 0)
            return eddy_err_set(err, "--%s expects a non-negative number, got '%s'", f->name, value);
        *(double *)f->target = v;
        return 0;
    }
    case EDDY_FLAG_BOOL:
        *(bool *)f->target = true;
        return 0;
    }
    return -1;
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
