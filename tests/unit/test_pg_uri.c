/* test_pg_uri.c - the PostgreSQL sink's URI parser (connectors/postgres/pg_uri.c):
 * every part, defaults, and bad inputs with messages naming what is wrong. */
#include <criterion/criterion.h>
#include <string.h>

#include "connectors/postgres/pg_uri.h"

static eddy_pg_uri_t u;
static eddy_err_t err;

static void ok(const char *text)
{
    memset(&err, 0, sizeof err);
    cr_assert_eq(eddy_pg_uri_parse(text, &u, &err), 0, "%s: %s", text, err.msg);
}

static void bad(const char *text, const char *needle)
{
    memset(&err, 0, sizeof err);
    cr_assert_eq(eddy_pg_uri_parse(text, &u, &err), -1, "%s was accepted", text);
    cr_assert(strstr(err.msg, needle), "%s: message '%s' lacks '%s'", text, err.msg, needle);
    cr_assert(!strchr(err.msg, '\n'), "multi-line message: %s", err.msg);
}

Test(pg_uri, full)
{
    ok("postgresql://eddy@db.example.org:6543/analytics?table=word_counts");
    cr_assert_str_eq(u.user, "eddy");
    cr_assert_str_eq(u.password, "");
    cr_assert_str_eq(u.host, "db.example.org");
    cr_assert_eq(u.port, 6543);
    cr_assert_str_eq(u.db, "analytics");
    cr_assert_str_eq(u.table, "word_counts");
}

Test(pg_uri, defaults_and_variants)
{
    ok("postgres://u@127.0.0.1/d?table=t");
    cr_assert_eq(u.port, 5432);
    cr_assert_str_eq(u.host, "127.0.0.1");
    ok("postgresql://u:s3cret@h:1/d?table=T_1");
    cr_assert_str_eq(u.password, "s3cret");
    cr_assert_eq(u.port, 1);
    ok("postgresql://u@[::1]:5433/d?table=t");
    cr_assert_str_eq(u.host, "::1");
    cr_assert_eq(u.port, 5433);
    cr_assert(eddy_pg_uri_is("postgresql://x"));
    cr_assert(eddy_pg_uri_is("postgres://x"));
    cr_assert(!eddy_pg_uri_is("/tmp/out.tsv"));
    cr_assert(!eddy_pg_uri_is(NULL));
}

Test(pg_uri, bad_inputs)
{
    bad("mysql://u@h:1/d?table=t", "is not a postgresql://");
    bad("postgresql://u@h:1", "no /DB");
    bad("postgresql://h:1/d?table=t", "no USER@");
    bad("postgresql://@h:1/d?table=t", "no user");
    bad("postgresql://u@:1/d?table=t", "no host");
    bad("postgresql://u@h:/d?table=t", "empty port");
    bad("postgresql://u@h:0/d?table=t", "port 0 is out of range");
    bad("postgresql://u@h:65536/d?table=t", "out of range");
    bad("postgresql://u@h:12ab/d?table=t", "is not a number");
    bad("postgresql://u@h:1/?table=t", "no database");
    bad("postgresql://u@h:1/d", "no ?table=T");
    bad("postgresql://u@h:1/d?table=", "no table");
    bad("postgresql://u@h:1/d?table=drop;table", "table 'drop;table' is not an identifier");
    bad("postgresql://u@h:1/d?table=1abc", "is not an identifier");
    bad("postgresql://u@h:1/d?table=t&mode=x", "unknown parameter 'mode'");
    bad("postgresql://u@h:1/d?tablet", "is not NAME=VALUE");
    bad("postgresql://u-x@h:1/d?table=t", "user 'u-x' is not an identifier");
    bad("postgresql://u@h h:1/d?table=t", "bad character");
    bad("postgresql://u@[::1/d?table=t", "without ']'");
    /* A password never appears in a message. */
    bad("postgresql://u:hunter2@h:1/d", "postgresql://u:***@h:1/d: no ?table=T");
    cr_assert(!strstr(err.msg, "hunter2"), "%s", err.msg);
    char longt[200] = "postgresql://u@h:1/d?table=";
    memset(longt + strlen(longt), 'a', 100);
    bad(longt, "at most 63 bytes");
}
