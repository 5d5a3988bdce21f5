/* redis.h - Redis Streams source and sink (hiredis), plan kind "redis" for
 * both, configured by {uri} (redis_uri.h).
 *
 * Source: reads entries of its streams (field `line`) in id order, on a
 * reader thread of its own that hands them to poll() through a bounded
 * queue, so the worker loop never waits for Redis. Instance i of p reads
 * the listed streams at places i, i+p, ... and the streams found by a
 * pattern whose name hashes to i (mod p), stable as streams come and go; a
 * pattern is rescanned every second in an unbounded job. Its state
 * (write_state) is, per stream, the id of the last entry it emitted (and
 * with ?bounded=latest the last id present when the job started): a restore
 * re-reads exactly the entries after it. Redis down: the thread retries
 * with backoff, logging at most once a second; nothing is lost or doubled.
 * With ?group=G it reads as consumer "eddy-<instance>" of group G (created
 * at 0 if missing) and XACKs entries only when the checkpoint covering them
 * completed (commit); after a restore it first re-reads its own pending
 * entries after the restored id (and acks those before it, which the
 * restored checkpoint covers). Entries without a `line` field are skipped.
 *
 * Sink: XADD STREAM * line DATA value VALUE kind +I|-U|+U|-D per record,
 * at least once (see redis_sink.c). */
#ifndef EDDY_CONNECTORS_REDIS_H
#define EDDY_CONNECTORS_REDIS_H

#include "api/operator.h"
#include "api/plugin.h"
#include "connectors/redis/redis_uri.h"

extern const eddy_source_ops_t eddy_redis_source_ops;
extern const eddy_operator_ops_t eddy_redis_sink_ops;

int eddy_redis_register(eddy_registry_t *r, eddy_err_t *err);

#endif
