/* pg_uri.c - parses the PostgreSQL sink's URI (see pg_uri.h). Hand-written
 * rather than libpq's conninfo parser: libpq accepts far more (any
 * parameter, percent-escapes, several hosts) than the sink supports, and its
 * errors do not say which part of an eddy flag is wrong. */
#include "connectors/postgres/pg_uri.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT 5432

bool eddy_pg_uri_is(const char *text)
{
    return text && (!strncmp(text, "postgresql://", 13) || !strncmp(text, "postgres://", 11));
}

bool eddy_pg_ident_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= EDDY_PG_IDENT_MAX)
        return false;
    if (!isalpha((unsigned char)s[0]) && s[0] != '_')
        return false;
    for (size_t i = 1; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '$')
            return false;
    return true;
}

/* Copies [p, end) into dst (size bytes) if it fits. */
static bool take(char *dst, size_t size, const char *p, const char *end)
{
    size_t n = (size_t)(end - p);
    if (n >= size)
        return false;
    memcpy(dst, p, n);
    dst[n] = '\0';
    return true;
}

static int parse_ident(const char *what, char *dst, const char *p, const char *end,
                       const char *uri, eddy_err_t *err)
{
    if (p == end)
        return eddy_err_set(err, "%s: no %s", uri, what);
    if (!take(dst, EDDY_PG_IDENT_MAX, p, end) || !eddy_pg_ident_ok(dst))
        return eddy_err_set(err, "%s: %s '%.*s' is not an identifier ([A-Za-z_][A-Za-z0-9_$]*, "
                            "at most %d bytes)", uri, what, (int)(end - p), p, EDDY_PG_IDENT_MAX - 1);
    return 0;
}

static int parse_host_port(const char *p, const char *end, eddy_pg_uri_t *out, const char *uri,
                           eddy_err_t *err)
{
    const char *host = p, *host_end, *colon;
    if (p > end)
        return eddy_err_set(err, "%s: no host", uri);
    if (p < end && *p == '[') {
        host = p + 1;
        host_end = memchr(host, ']', (size_t)(end - host));
        if (!host_end)
            return eddy_err_set(err, "%s: '[' without ']' in the host", uri);
        colon = host_end + 1 < end ? host_end + 1 : NULL;
        if (colon && *colon != ':')
            return eddy_err_set(err, "%s: expected ':PORT' after ']'", uri);
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        host_end = colon ? colon : end;
    }
    if (host_end == host)
        return eddy_err_set(err, "%s: no host", uri);
    if (!take(out->host, sizeof out->host, host, host_end))
        return eddy_err_set(err, "%s: host is longer than %zu bytes", uri, sizeof out->host - 1);
    for (const char *c = host; c < host_end; c++)
        if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' && *c != '_' && *c != ':')
            return eddy_err_set(err, "%s: host '%s' has a bad character '%c'", uri, out->host, *c);
    out->port = DEFAULT_PORT;
    if (colon) {
        const char *ps = colon + 1;
        if (ps == end)
            return eddy_err_set(err, "%s: empty port after ':'", uri);
        long port = 0;
        for (const char *c = ps; c < end; c++) {
            if (!isdigit((unsigned char)*c) || port > 65535)
                return eddy_err_set(err, "%s: port '%.*s' is not a number in 1..65535", uri,
                                    (int)(end - ps), ps);
            port = port * 10 + (*c - '0');
        }
        if (port < 1 || port > 65535)
            return eddy_err_set(err, "%s: port %ld is out of range 1..65535", uri, port);
        out->port = (int)port;
    }
    return 0;
}

static int parse_query(const char *q, eddy_pg_uri_t *out, const char *uri, eddy_err_t *err)
{
    while (*q) {
        const char *amp = strchr(q, '&');
        const char *end = amp ? amp : q + strlen(q);
        const char *eq = memchr(q, '=', (size_t)(end - q));
        if (!eq)
            return eddy_err_set(err, "%s: query part '%.*s' is not NAME=VALUE", uri, (int)(end - q), q);
        if ((size_t)(eq - q) == 5 && !strncmp(q, "table", 5)) {
            if (parse_ident("table", out->table, eq + 1, end, uri, err) < 0)
                return -1;
        } else {
            return eddy_err_set(err, "%s: unknown parameter '%.*s' (only table=T)", uri,
                                (int)(eq - q), q);
        }
        q = amp ? amp + 1 : end;
    }
    return 0;
}

/* text with a password replaced by "***", for error messages. */
static void redact(const char *text, char *out, size_t size)
{
    const char *p = strstr(text, "://") + 3;
    const char *slash = strchr(p, '/');
    const char *at = memchr(p, '@', slash ? (size_t)(slash - p) : strlen(p));
    const char *colon = at ? memchr(p, ':', (size_t)(at - p)) : NULL;
    if (colon)
        snprintf(out, size, "%.*s***%s", (int)(colon + 1 - text), text, at);
    else
        snprintf(out, size, "%s", text);
}

static int parse(const char *text, const char *shown, eddy_pg_uri_t *out, eddy_err_t *err);

int eddy_pg_uri_parse(const char *text, eddy_pg_uri_t *out, eddy_err_t *err)
{
    memset(out, 0, sizeof *out);
    if (!eddy_pg_uri_is(text))
        return eddy_err_set(err, "'%s' is not a postgresql://USER@HOST:PORT/DB?table=T URI",
                            text ? text : "");
    char shown[512];
    redact(text, shown, sizeof shown);
    return parse(text, shown, out, err);
}

static int parse(const char *text, const char *shown, eddy_pg_uri_t *out, eddy_err_t *err)
{
    const char *p = strstr(text, "://") + 3;
    const char *slash = strchr(p, '/');
    if (!slash)
        return eddy_err_set(err, "%s: no /DB (expected postgresql://USER@HOST:PORT/DB?table=T)", shown);
    const char *at = memchr(p, '@', (size_t)(slash - p));
    if (!at)
        return eddy_err_set(err, "%s: no USER@ (expected postgresql://USER@HOST:PORT/DB?table=T)", shown);
    const char *pw = memchr(p, ':', (size_t)(at - p));
    if (parse_ident("user", out->user, p, pw ? pw : at, shown, err) < 0)
        return -1;
    if (pw && !take(out->password, sizeof out->password, pw + 1, at))
        return eddy_err_set(err, "%s: password is longer than %zu bytes", shown,
                            sizeof out->password - 1);
    if (parse_host_port(at + 1, slash, out, shown, err) < 0)
        return -1;
    const char *qmark = strchr(slash + 1, '?');
    const char *db_end = qmark ? qmark : slash + 1 + strlen(slash + 1);
    if (parse_ident("database", out->db, slash + 1, db_end, shown, err) < 0)
        return -1;
    if (qmark && parse_query(qmark + 1, out, shown, err) < 0)
        return -1;
    if (!out->table[0])
        return eddy_err_set(err, "%s: no ?table=T", shown);
    return 0;
}
