/* redis.h - Redis Streams source and sink (hiredis), plan kind "redis" for
 * both, configured by {uri} (redis_uri.h).
 *
 * Source: reads entries of its streams (field `line`) in id order, on a
 * reader thread of its own that hands them to poll() through a bounded
 * queue, so the worker loop never waits for Redis. Instance i of p reads
 * the streams whose name hashes to i (mod p), stable as streams come and
 * go; a pattern is rescanned every second in an unbounded job. Its state
 * (write_state) is, per stream, the id of the last entry it emitted (and
 * with ?bounded=latest the last id present when the job started): a restore
 * re-reads exactly the entries after it. Redis down: the thread retries
 * with backoff, logging at most once a second; nothing is lost or doubled.
 * With ?group=G it reads as consumer "eddy-<instance>" of group G (created
 * at 0 if missing) and XACKs entries only when the checkpoint covering them
 * completed (commit); after a restore it first re-reads its own pending
 * entries after the restored id. Entries without a `line` field are skipped.
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

/* Source progress as bytes and its commit (see above); the source ops
 * carry them once the runtime takes source state as bytes. */
int eddy_redis_source_write_state(void *self, char **out, size_t *len, eddy_err_t *err);
void eddy_redis_source_commit(void *self, uint64_t checkpoint);
/* open() with the restored states of every old instance (any number). */
void *eddy_redis_source_open_state(const eddy_op_context_t *ctx, const char *const *states,
                                   const size_t *lens, size_t n_states, eddy_err_t *err);

int eddy_redis_register(eddy_registry_t *r, eddy_err_t *err);

#endif
