/* redis_uri.h - redis://HOST:PORT/STREAMS[?bounded=latest&group=G], the
 * address of a Redis Streams source or sink (DESIGN.md "Sources by URI").
 *
 * STREAMS is one stream name, a comma list, or glob patterns (events:*),
 * each entry at most EDDY_REDIS_NAME_MAX bytes; a sink takes exactly one
 * plain name. Names cannot contain ',', '?', '&' or '/' (no percent
 * decoding). The parser only checks the text: nothing here connects. */
#ifndef EDDY_CONNECTORS_REDIS_URI_H
#define EDDY_CONNECTORS_REDIS_URI_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

#define EDDY_REDIS_NAME_MAX 256
#define EDDY_REDIS_MAX_STREAMS 64

typedef struct eddy_redis_uri {
    char host[256];
    uint16_t port;
    uint32_t n_streams;
    char streams[EDDY_REDIS_MAX_STREAMS][EDDY_REDIS_NAME_MAX]; /* names or patterns */
    bool bounded;                  /* ?bounded=latest */
    char group[EDDY_REDIS_NAME_MAX]; /* ?group=G, "" without */
} eddy_redis_uri_t;

/* True when text starts with "redis://" (so it is meant as a Redis URI). */
bool eddy_redis_uri_is(const char *text);
int eddy_redis_uri_parse(const char *text, eddy_redis_uri_t *out, eddy_err_t *err);
/* True when a stream entry is a glob pattern (has *, ? or [). */
bool eddy_redis_is_pattern(const char *name);

#endif
