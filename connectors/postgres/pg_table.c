/* pg_table.c - a PostgreSQL table read once into an etl reference table
 * (pg_table.h). One SELECT in a read-only session; the etl operator calls
 * it from open(), so both the connect and the query have a timeout. */
#include "connectors/postgres/pg_table.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connectors/postgres/pg_uri.h"

static const char *first_line(const char *msg, char *buf, size_t size)
{
    size_t n = strcspn(msg, "\n");
    snprintf(buf, size, "%.*s", (int)n, msg);
    return buf;
}

eddy_etl_table_t *eddy_pg_table_load(const char *uri_text, int timeout_s, eddy_err_t *err)
{
    eddy_pg_uri_t u;
    if (eddy_pg_uri_parse(uri_text, &u, err) < 0)
        return NULL;
    char port[8], timeout[16], options[64], line[400];
    snprintf(port, sizeof port, "%d", u.port);
    snprintf(timeout, sizeof timeout, "%d", timeout_s);
    snprintf(options, sizeof options, "-c statement_timeout=%d", timeout_s * 1000);
    const char *keys[] = {"host", "port", "dbname", "user", "connect_timeout",
                          "application_name", "options", "password", NULL};
    const char *vals[] = {u.host, port, u.db, u.user, timeout, "eddy-etl-enrich", options,
                          u.password, NULL};
    if (!u.password[0])
        keys[7] = NULL;
    PGconn *conn = PQconnectdbParams(keys, vals, 0);
    if (!conn || PQstatus(conn) != CONNECTION_OK) {
        eddy_err_set(err, "PostgreSQL at %s:%d: cannot connect: %s", u.host, u.port,
                     conn ? first_line(PQerrorMessage(conn), line, sizeof line) : "out of memory");
        PQfinish(conn);
        return NULL;
    }
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", u.table);
    PGresult *r = PQexec(conn, sql);
    eddy_etl_table_t *t = NULL;
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        eddy_err_set(err, "PostgreSQL at %s:%d: reading table %s: %s", u.host, u.port, u.table,
                     first_line(PQresultErrorMessage(r), line, sizeof line));
        goto done;
    }
    int cols = PQnfields(r), rows = PQntuples(r);
    if (cols < 2) {
        eddy_err_set(err, "table %s needs a key column and at least one more", u.table);
        goto done;
    }
    eddy_strv_t names = {0};
    for (int c = 1; c < cols; c++)
        if (eddy_strv_push(&names, PQfname(r, c), strlen(PQfname(r, c))) < 0) {
            eddy_strv_clear(&names);
            eddy_err_set(err, "out of memory");
            goto done;
        }
    t = eddy_etl_table_new(&names);
    eddy_strv_clear(&names);
    const char **values = calloc((size_t)cols, sizeof *values);
    if (!t || !values) {
        eddy_err_set(err, "out of memory");
        eddy_etl_table_destroy(&t);
        free(values);
        goto done;
    }
    int rc = 0;
    for (int i = 0; rc == 0 && i < rows; i++) {
        if (PQgetisnull(r, i, 0))
            continue; /* a NULL key matches nothing */
        for (int c = 1; c < cols; c++)
            values[c - 1] = PQgetisnull(r, i, c) ? NULL : PQgetvalue(r, i, c);
        rc = eddy_etl_table_add(t, PQgetvalue(r, i, 0), values, err);
    }
    free(values);
    if (rc < 0 || eddy_etl_table_seal(t, err) < 0) {
        eddy_err_wrap(err, "table %s", u.table);
        eddy_etl_table_destroy(&t);
    }
done:
    PQclear(r);
    PQfinish(conn);
    return t;
}
