/* pg_uri.h - the PostgreSQL sink's --output URI.
 *
 *   postgresql://USER[:PASSWORD]@HOST[:PORT]/DB?table=T
 *
 * (`postgres://` too; PORT defaults to 5432.) USER, DB and T are plain
 * identifiers ([A-Za-z_][A-Za-z0-9_$]*, at most 63 bytes, PostgreSQL's
 * limit), so they never need quoting rules beyond double quotes; HOST is a
 * name or an IPv4 address (an IPv6 one in brackets). Every bad input gets a
 * one-line error naming the part that is wrong. No I/O. */
#ifndef EDDY_CONNECTORS_POSTGRES_PG_URI_H
#define EDDY_CONNECTORS_POSTGRES_PG_URI_H

#include <stdbool.h>

#include "common/err.h"

#define EDDY_PG_IDENT_MAX 64
#define EDDY_PG_HOST_MAX 256
#define EDDY_PG_PASSWORD_MAX 128

typedef struct eddy_pg_uri {
    char user[EDDY_PG_IDENT_MAX];
    char password[EDDY_PG_PASSWORD_MAX]; /* "" when none */
    char host[EDDY_PG_HOST_MAX];         /* without brackets */
    int port;
    char db[EDDY_PG_IDENT_MAX];
    char table[EDDY_PG_IDENT_MAX];
} eddy_pg_uri_t;

/* True when text starts with postgresql:// or postgres:// (an --output that
 * is meant as this sink, not as a file path). */
bool eddy_pg_uri_is(const char *text);
int eddy_pg_uri_parse(const char *text, eddy_pg_uri_t *out, eddy_err_t *err);
/* A PostgreSQL identifier check as used for user, db, table and columns. */
bool eddy_pg_ident_ok(const char *s);

#endif
