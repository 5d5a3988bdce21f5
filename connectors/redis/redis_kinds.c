/* redis_kinds.c - plan kind "redis" as a source and as a sink: {uri}
 * checked where a worker opens the plan (redis.h, redis_uri.h). */
#include <stdlib.h>

#include "connectors/redis/redis.h"

static void *redis_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    const char *uri = eddy_config_str(cfg, "uri", NULL);
    if (!uri || !uri[0]) {
        eddy_err_set(err, "needs 'uri' (redis://HOST:PORT/STREAM)");
        return NULL;
    }
    eddy_redis_uri_t *u = malloc(sizeof *u);
    if (!u) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    if (eddy_redis_uri_parse(uri, u, err) < 0) {
        free(u);
        return NULL;
    }
    return u;
}

static const eddy_source_kind_t redis_source_kind = {
    .name = "redis",
    .ops = &eddy_redis_source_ops,
    .configure = redis_configure,
    .release = free,
};

static const eddy_operator_kind_t redis_sink_kind = {
    .name = "redis",
    .ops = &eddy_redis_sink_ops,
    .configure = redis_configure,
    .release = free,
};

int eddy_redis_register(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_register_source(r, &redis_source_kind, err) < 0 ||
        eddy_register_operator(r, &redis_sink_kind, err) < 0)
        return -1;
    return 0;
}
