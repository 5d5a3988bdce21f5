/* kinds.c - the built-in sources' plan kinds: configurations checked and
 * turned into each source's own config struct (see kinds.h). */
#include "connectors/kinds.h"

#include <stdlib.h>
#include <string.h>

#include "connectors/dir_source.h"
#include "connectors/nexmark.h"
#include "connectors/postgres/pg_sink.h"
#include "connectors/redis/redis.h"
#include "connectors/sources.h"

static int copy_string(char *dst, size_t size, const eddy_config_t *cfg, const char *key,
                       eddy_err_t *err)
{
    const char *v = eddy_config_str(cfg, key, NULL);
    if (!v || !v[0])
        return eddy_err_set(err, "needs '%s'", key);
    if (strlen(v) >= size)
        return eddy_err_set(err, "'%s' is longer than %zu bytes", key, size - 1);
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

static int int_in_range(const eddy_config_t *cfg, const char *key, int64_t dflt, int64_t min,
                        int64_t max, int64_t *out, eddy_err_t *err)
{
    *out = eddy_config_int(cfg, key, dflt);
    if (*out < min || *out > max)
        return eddy_err_set(err, "'%s' is %lld, outside %lld..%lld", key, (long long)*out,
                            (long long)min, (long long)max);
    return 0;
}

/* A configuration built on the stack, handed over as the heap copy the
 * source kind owns (released with free). */
static void *heap_copy(const void *config, size_t size, eddy_err_t *err)
{
    void *c = malloc(size);
    if (!c) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    memcpy(c, config, size);
    return c;
}

static void *file_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    eddy_file_source_config_t c = {0};
    if (copy_string(c.path, sizeof c.path, cfg, "path", err) < 0)
        return NULL;
    return heap_copy(&c, sizeof c, err);
}

static void *dir_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    eddy_dir_source_config_t c = {0};
    if (copy_string(c.path, sizeof c.path, cfg, "path", err) < 0)
        return NULL;
    return heap_copy(&c, sizeof c, err);
}

static void *generator_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    int64_t lines, words, vocabulary, seed;
    if (int_in_range(cfg, "lines", 1000000, 0, INT64_MAX, &lines, err) < 0 ||
        int_in_range(cfg, "words_per_line", 8, 1, 256, &words, err) < 0 ||
        int_in_range(cfg, "vocabulary", 10000, 1, UINT32_MAX, &vocabulary, err) < 0 ||
        int_in_range(cfg, "seed", 42, INT64_MIN, INT64_MAX, &seed, err) < 0)
        return NULL;
    eddy_generator_config_t c = {.lines = (uint64_t)lines, .words_per_line = (uint32_t)words,
                                 .vocabulary = (uint32_t)vocabulary, .seed = (uint64_t)seed};
    c.hot_key_share = eddy_config_double(cfg, "hot_key_share", 0);
    if (!(c.hot_key_share >= 0 && c.hot_key_share < 1)) {
        eddy_err_set(err, "'hot_key_share' is %g, outside [0, 1)", c.hot_key_share);
        return NULL;
    }
    return heap_copy(&c, sizeof c, err);
}

static void *nexmark_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    int64_t events, seed, disorder;
    if (int_in_range(cfg, "events", 1000000, 0, INT64_MAX, &events, err) < 0 ||
        int_in_range(cfg, "seed", 42, INT64_MIN, INT64_MAX, &seed, err) < 0 ||
        int_in_range(cfg, "disorder_ms", 0, 0, EDDY_NEXMARK_MAX_DISORDER_MS, &disorder, err) < 0)
        return NULL;
    eddy_nexmark_config_t c = {.events = (uint64_t)events, .seed = (uint64_t)seed,
                               .disorder_ms = disorder};
    return heap_copy(&c, sizeof c, err);
}

static void *socket_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    eddy_socket_source_config_t c = {0};
    int64_t port;
    if (copy_string(c.host, sizeof c.host, cfg, "host", err) < 0 ||
        int_in_range(cfg, "port", 0, 1, 65535, &port, err) < 0)
        return NULL;
    c.port = (uint16_t)port;
    return heap_copy(&c, sizeof c, err);
}

static const eddy_source_kind_t file_kind = {
    .name = "file",
    .ops = &eddy_file_source_ops,
    .configure = file_configure,
    .release = free,
};
static const eddy_source_kind_t dir_kind = {
    .name = "dir",
    .ops = &eddy_dir_source_ops,
    .configure = dir_configure,
    .release = free,
};
static const eddy_source_kind_t generator_kind = {
    .name = "generator",
    .ops = &eddy_generator_source_ops,
    .configure = generator_configure,
    .release = free,
};
static const eddy_source_kind_t nexmark_kind = {
    .name = "nexmark",
    .ops = &eddy_nexmark_source_ops,
    .configure = nexmark_configure,
    .release = free,
};
static const eddy_source_kind_t socket_kind = {
    .name = "socket",
    .ops = &eddy_socket_source_ops,
    .configure = socket_configure,
    .release = free,
};

int eddy_connectors_register(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_register_source(r, &file_kind, err) < 0 ||
        eddy_register_source(r, &dir_kind, err) < 0 ||
        eddy_register_source(r, &generator_kind, err) < 0 ||
        eddy_register_source(r, &nexmark_kind, err) < 0 ||
        eddy_register_source(r, &socket_kind, err) < 0 || eddy_redis_register(r, err) < 0 ||
        eddy_pg_sink_register(r, err) < 0)
        return -1;
    return 0;
}
