/* redact.c - secrets out of job arguments before they are shown (see
 * redact.h). Job arguments are stored and replayed as given (a restarted
 * coordinator rebuilds the plan from them); only their renderings are
 * redacted. The rules are by shape, not by job, so a plugin's job flags get
 * the same treatment as the built-in ones. */
#include "common/redact.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A name (of a flag without its "--", or of a URI query field) that says
 * its value is secret. */
static bool secret_name(const char *name, size_t len)
{
    static const char *const words[] = {"password", "passwd", "token", "secret", "key-file",
                                        "keyfile", "sslkey", "credential"};
    char buf[128];
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    memcpy(buf, name, len);
    buf[len] = '\0';
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcasestr(buf, words[i]))
            return true;
    return false;
}

/* A flag ("--name", or the name part of "--name=value") holding a secret;
 * --keys names the directory of a cluster's keys. */
static bool secret_flag(const char *arg, size_t name_len)
{
    if (name_len < 3 || strncmp(arg, "--", 2))
        return false;
    if (name_len == 6 && !strncmp(arg, "--keys", 6))
        return true;
    return secret_name(arg + 2, name_len - 2);
}

/* Appends n bytes of s to out at *len (out has room: redaction never makes
 * a URI longer than the original plus a few stars per secret). */
static void put(char *out, size_t *len, const char *s, size_t n)
{
    memcpy(out + *len, s, n);
    *len += n;
}

/* The URI with its userinfo password and any password=... query or
 * key=value values replaced; arg returned unchanged when it has neither. */
static char *redact_uri(const char *arg)
{
    const char *scheme_end = strstr(arg, "://");
    size_t n = strlen(arg);
    /* every secret becomes at most 3 bytes; a secret is at least 0 bytes */
    size_t cap = n + 3 * (n + 1) + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t len = 0;
    const char *p = arg;
    if (scheme_end) {
        const char *auth = scheme_end + 3;
        size_t auth_len = strcspn(auth, "/?#");
        const char *at = NULL; /* the last '@' of the authority ends the userinfo */
        for (size_t i = 0; i < auth_len; i++)
            if (auth[i] == '@')
                at = auth + i;
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon) {
            put(out, &len, arg, (size_t)(colon + 1 - arg));
            put(out, &len, EDDY_REDACTED, strlen(EDDY_REDACTED));
            p = at;
        }
    }
    const char *query = strchr(p, '?');
    if (!query) {
        put(out, &len, p, strlen(p));
        out[len] = '\0';
        return out;
    }
    put(out, &len, p, (size_t)(query + 1 - p));
    for (const char *f = query + 1; *f;) {
        size_t flen = strcspn(f, "&#");
        const char *eq = memchr(f, '=', flen);
        if (eq && secret_name(f, (size_t)(eq - f))) {
            put(out, &len, f, (size_t)(eq + 1 - f));
            put(out, &len, EDDY_REDACTED, strlen(EDDY_REDACTED));
        } else {
            put(out, &len, f, flen);
        }
        f += flen;
        if (*f)
            put(out, &len, f++, 1);
    }
    out[len] = '\0';
    return out;
}

char *eddy_redact_arg(const char *prev, const char *arg)
{
    if (!arg)
        return NULL;
    const char *eq = strchr(arg, '=');
    if (!strncmp(arg, "--", 2) && eq && secret_flag(arg, (size_t)(eq - arg))) {
        size_t keep = (size_t)(eq + 1 - arg);
        char *out = malloc(keep + strlen(EDDY_REDACTED) + 1);
        if (out) {
            memcpy(out, arg, keep);
            strcpy(out + keep, EDDY_REDACTED);
        }
        return out;
    }
    if (prev && !strchr(prev, '=') && secret_flag(prev, strlen(prev)) && strncmp(arg, "--", 2))
        return strdup(EDDY_REDACTED);
    const char *value = eq && !strncmp(arg, "--", 2) ? eq + 1 : arg;
    if (!strstr(value, "://") && !strchr(value, '?'))
        return strdup(arg);
    char *r = redact_uri(value);
    if (!r || value == arg)
        return r;
    size_t keep = (size_t)(value - arg);
    char *out = malloc(keep + strlen(r) + 1);
    if (out) {
        memcpy(out, arg, keep);
        strcpy(out + keep, r);
    }
    free(r);
    return out;
}
