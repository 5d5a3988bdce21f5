/* redis_uri.c - parsing redis:// source and sink addresses (redis_uri.h). */
#include "connectors/redis/redis_uri.h"

#include <stdio.h>
#include <string.h>

#include "common/flags.h"

#define PREFIX "redis://"

bool eddy_redis_uri_is(const char *text)
{
    return text && strncmp(text, PREFIX, strlen(PREFIX)) == 0;
}

bool eddy_redis_is_pattern(const char *name)
{
    return strpbrk(name, "*?[") != NULL;
}

static int parse_streams(const char *p, size_t len, eddy_redis_uri_t *out, eddy_err_t *err)
{
    const char *end = p + len;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        size_t n = (size_t)(stop - p);
        if (n == 0)
            return eddy_err_set(err, "empty stream name in the list");
        if (n >= EDDY_REDIS_NAME_MAX)
            return eddy_err_set(err, "stream name '%.*s...' is longer than %d bytes", 32, p,
                                EDDY_REDIS_NAME_MAX - 1);
        if (out->n_streams == EDDY_REDIS_MAX_STREAMS)
            return eddy_err_set(err, "more than %d streams", EDDY_REDIS_MAX_STREAMS);
        for (uint32_t i = 0; i < out->n_streams; i++)
            if (strlen(out->streams[i]) == n && !memcmp(out->streams[i], p, n))
                return eddy_err_set(err, "stream '%.*s' is named twice", (int)n, p);
        memcpy(out->streams[out->n_streams], p, n);
        out->streams[out->n_streams][n] = '\0';
        out->n_streams++;
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

static int parse_query(const char *q, eddy_redis_uri_t *out, eddy_err_t *err)
{
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        const char *eq = memchr(q, '=', n);
        if (!eq)
            return eddy_err_set(err, "parameter '%.*s' needs a value (NAME=VALUE)", (int)n, q);
        size_t klen = (size_t)(eq - q), vlen = n - klen - 1;
        const char *v = eq + 1;
        if (klen == 7 && !memcmp(q, "bounded", 7)) {
            if (vlen != 6 || memcmp(v, "latest", 6))
                return eddy_err_set(err, "bounded=%.*s: the only value is 'latest'", (int)vlen, v);
            out->bounded = true;
        } else if (klen == 5 && !memcmp(q, "group", 5)) {
            if (vlen == 0 || vlen >= sizeof out->group)
                return eddy_err_set(err, "group name must be 1..%zu bytes", sizeof out->group - 1);
            memcpy(out->group, v, vlen);
            out->group[vlen] = '\0';
        } else {
            return eddy_err_set(err, "unknown parameter '%.*s' (known: bounded, group)",
                                (int)klen, q);
        }
        q += n + (amp ? 1 : 0);
        if (amp && !*q)
            return eddy_err_set(err, "trailing '&'");
    }
    return 0;
}

static int parse(const char *text, eddy_redis_uri_t *out, eddy_err_t *err)
{
    memset(out, 0, sizeof *out);
    if (!eddy_redis_uri_is(text))
        return eddy_err_set(err, "does not start with " PREFIX);
    const char *hp = text + strlen(PREFIX);
    const char *slash = strchr(hp, '/');
    if (!slash)
        return eddy_err_set(err, "needs a stream: redis://HOST:PORT/STREAM");
    const char *colon = memrchr(hp, ':', (size_t)(slash - hp));
    if (!colon || colon == hp)
        return eddy_err_set(err, "needs HOST:PORT before the stream");
    if ((size_t)(colon - hp) >= sizeof out->host)
        return eddy_err_set(err, "host is longer than %zu bytes", sizeof out->host - 1);
    char port[8];
    size_t plen = (size_t)(slash - colon - 1);
    uint64_t p;
    if (plen == 0 || plen >= sizeof port)
        return eddy_err_set(err, "port must be 1..65535");
    memcpy(port, colon + 1, plen);
    port[plen] = '\0';
    if (eddy_parse_uint(port, &p) < 0 || p == 0 || p > 65535)
        return eddy_err_set(err, "port '%s' must be 1..65535", port);
    memcpy(out->host, hp, (size_t)(colon - hp));
    out->host[colon - hp] = '\0';
    out->port = (uint16_t)p;
    const char *streams = slash + 1;
    const char *query = strchr(streams, '?');
    size_t slen = query ? (size_t)(query - streams) : strlen(streams);
    if (slen == 0)
        return eddy_err_set(err, "needs a stream: redis://HOST:PORT/STREAM");
    if (memchr(streams, '/', slen) || memchr(streams, '&', slen))
        return eddy_err_set(err, "stream names cannot contain '/' or '&'");
    if (parse_streams(streams, slen, out, err) < 0)
        return -1;
    return query ? parse_query(query + 1, out, err) : 0;
}

int eddy_redis_uri_parse(const char *text, eddy_redis_uri_t *out, eddy_err_t *err)
{
    if (parse(text, out, err) < 0)
        return eddy_err_wrap(err, "%s", text ? text : "(null)");
    return 0;
}
