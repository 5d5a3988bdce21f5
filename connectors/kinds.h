/* kinds.h - the built-in sources as plan kinds (api/plugin.h):
 *   file       {path}                  lines of a file (replayable)
 *   generator  {lines, words_per_line, vocabulary, seed, hot_key_share}
 *                                      deterministic lines of words (replayable)
 *   nexmark    {events, seed, disorder_ms}
 *                                      Nexmark events as CSV lines, timestamped
 *                                      (connectors/nexmark.h; replayable)
 *   socket     {host, port}            lines from a TCP server (not replayable)
 *   redis      {uri}                   a Redis stream's entries (connectors/redis;
 *                                      replayable); also the Redis sink's kind
 * and the sinks that need a client library, each in its folder:
 *   postgres   {uri, mode, key_column, value_column, line_column}
 *                                      connectors/postgres/pg_sink.h (libpq)
 * Every source also takes {rate}: "R" or "T:R,T:R" lines/s (plan/registry.c).
 * Configurations are checked here, where a worker opens the plan, so a plan
 * from an older or hostile client cannot smuggle in a zero divisor. */
#ifndef EDDY_CONNECTORS_KINDS_H
#define EDDY_CONNECTORS_KINDS_H

#include "api/plugin.h"

int eddy_connectors_register(eddy_registry_t *r, eddy_err_t *err);

#endif
