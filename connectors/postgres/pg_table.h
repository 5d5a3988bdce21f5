/* pg_table.h - reading a whole PostgreSQL table into an etl reference
 * table (operators/etl_table.h): the etl job's --enrich-table
 * postgresql://USER@HOST:PORT/DB?table=T.
 *
 * The table's first column (by ordinal position) is the key, the others
 * become the enrichment columns, every value as text (NULL stays NULL).
 * Blocking: it connects, reads and disconnects on the caller's thread,
 * bounded by timeout_s for the connection and for the query
 * (connect_timeout, statement_timeout). */
#ifndef EDDY_CONNECTORS_POSTGRES_PG_TABLE_H
#define EDDY_CONNECTORS_POSTGRES_PG_TABLE_H

#include "common/err.h"
#include "operators/etl_table.h"

eddy_etl_table_t *eddy_pg_table_load(const char *uri, int timeout_s, eddy_err_t *err);

#endif
