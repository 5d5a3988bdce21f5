/* pg_sink.h - the PostgreSQL sink: exactly once by two-phase commit, like
 * Flink's JDBC XA sink.
 *
 * Each instance writes the records of one checkpoint interval in one
 * transaction and PREPAREs it at the checkpoint's barrier with the global id
 * eddy:<job>:<stage>:<instance>:<checkpoint>:<epoch>; COMMIT PREPARED
 * follows the checkpoint's COMPLETE. Upsert mode (a keyed result stream of
 * [key, value] records): +I/+U upsert by key (INSERT ... ON CONFLICT (key)
 * DO UPDATE), -D deletes, -U is ignored (the +U after it carries the new
 * value); the prepared transaction stages these changes in
 * eddy_upsert_stage, moved into the table after each commit (a prepared
 * transaction's row locks would block the next checkpoint's upserts).
 * Append mode inserts every record's bytes as one row of the table.
 *
 * All libpq calls run on one thread per instance, so the worker loop never
 * waits for the database: prepare() hands the interval's rows to it and
 * leaves a call in the sync list that waits for the PREPARE on the
 * snapshot writer thread, so the checkpoint's ACK follows the PREPARE.
 *
 * open() connects (on that thread), refuses max_prepared_transactions = 0,
 * creates the table if missing, and resolves the transactions an earlier
 * attempt of this operator left prepared (any instance, any parallelism):
 * those with a checkpoint <= ctx->restored_checkpoint are committed (it
 * completed; its COMPLETE may have been lost), later ones rolled back (they
 * are replayed). Only gids of an older epoch are touched, so instances of
 * the current attempt never undo each other; every commit repeats that
 * sweep, which removes what a closing instance of the old attempt prepared
 * late. The final commit (COMPLETE of EDDY_FINAL_CHECKPOINT, once every
 * task is done) also commits what the other instances of this attempt
 * prepared: if a worker dies during the final commit the job fails and no
 * restore would ever resolve its instance's last transaction. A connection or SQL error makes the instance fail (the next
 * process() or prepare returns it), so the job restores with the cause.
 * abort() (the job was cancelled or failed for good) rolls back what the
 * instance prepared and was not told to commit, then runs the same sweep;
 * it waits for its thread at most a bounded time. */
#ifndef EDDY_CONNECTORS_POSTGRES_PG_SINK_H
#define EDDY_CONNECTORS_POSTGRES_PG_SINK_H

#include <stdbool.h>

#include "api/operator.h"
#include "api/plugin.h"
#include "connectors/postgres/pg_uri.h"

typedef struct eddy_pg_sink_config {
    eddy_pg_uri_t uri;
    bool upsert;
    char key_column[EDDY_PG_IDENT_MAX];   /* upsert: text primary key */
    char value_column[EDDY_PG_IDENT_MAX]; /* upsert: bigint */
    char line_column[EDDY_PG_IDENT_MAX];  /* append: text */
} eddy_pg_sink_config_t;

extern const eddy_operator_ops_t eddy_pg_sink_ops;

/* The plan kind "postgres": config {uri, mode: upsert|append, key_column,
 * value_column, line_column}. */
int eddy_pg_sink_register(eddy_registry_t *r, eddy_err_t *err);

/* The exact error for a server without prepared transactions. */
#define EDDY_PG_NO_PREPARED_XACTS                                                         \
    "PostgreSQL has max_prepared_transactions = 0; exactly-once needs it > 0 (set it in " \
    "postgresql.conf and restart)"

#endif
