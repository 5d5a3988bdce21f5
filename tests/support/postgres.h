/* postgres.h - a real PostgreSQL server for a test: initdb into a fresh temp
 * dir, postgres on a free 127.0.0.1 port (unix socket in the same dir),
 * trust authentication, superuser "postgres", database "postgres".
 *
 * PostgreSQL refuses to run as root: when the test runs as root, initdb and
 * postgres run as the `postgres` system user (the temp dir is chown'ed to
 * it). Start polls until the server accepts connections (deadline); stop
 * shuts it down (fast), kills it after a grace period, and removes the dir.
 * The server gets SIGKILL if the test process dies. */
#ifndef EDDY_TESTS_SUPPORT_POSTGRES_H
#define EDDY_TESTS_SUPPORT_POSTGRES_H

#include <libpq-fe.h>
#include <stddef.h>

#include "common/err.h"

/* The server binaries: $EDDY_PG_BINDIR, else this. */
#define EDDY_TEST_PG_BINDIR "/usr/lib/postgresql/15/bin"

typedef struct eddy_test_pg eddy_test_pg_t;

/* max_prepared_transactions as given (0 makes exactly-once impossible). */
eddy_test_pg_t *eddy_test_pg_start(int max_prepared_transactions, eddy_err_t *err);
void eddy_test_pg_stop(eddy_test_pg_t **self_p);
int eddy_test_pg_port(const eddy_test_pg_t *self);
/* "postgresql://postgres@127.0.0.1:PORT/postgres?table=TABLE" into buf. */
const char *eddy_test_pg_uri(const eddy_test_pg_t *self, const char *table, char *buf, size_t size);
/* A new connection (PQfinish it), or NULL with err. */
PGconn *eddy_test_pg_connect(const eddy_test_pg_t *self, eddy_err_t *err);
/* Runs sql; returns the result (PQclear it) or NULL with err. */
PGresult *eddy_test_pg_query(PGconn *conn, const char *sql, eddy_err_t *err);

/* The rows of a query as lines, columns joined by tabs, sorted bytewise,
 * each ending in '\n' (malloc'd; length in *len), to compare a table with
 * a reference; NULL with err when the query fails. */
char *eddy_test_pg_rows_text(PGconn *conn, const char *sql, size_t *len, eddy_err_t *err);
/* The single integer a query returns, or -1 with err. */
long long eddy_test_pg_scalar(PGconn *conn, const char *sql, eddy_err_t *err);

#endif
