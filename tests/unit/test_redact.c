/* test_redact.c - job arguments as status views show them (common/redact.c):
 * URI passwords, secret query fields and secret flags become "***", and
 * everything else is left exactly as given. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/redact.h"

static void expect(const char *prev, const char *arg, const char *want)
{
    char *got = eddy_redact_arg(prev, arg);
    cr_assert(got, "out of memory");
    cr_assert_str_eq(got, want, "redact(%s, %s)", prev ? prev : "NULL", arg);
    free(got);
}

Test(redact, uri_passwords)
{
    expect("--output", "postgresql://eddy:s3cret@db:5432/x?table=t",
           "postgresql://eddy:***@db:5432/x?table=t");
    expect(NULL, "--output=postgres://u:p@ss@h/d", "--output=postgres://u:***@h/d");
    expect("--output", "postgresql://u:pw@h/d?table=t&password=x&sslkey=/etc/k.pem",
           "postgresql://u:***@h/d?table=t&password=***&sslkey=***");
    expect("--input", "redis://:hunter2@127.0.0.1:6379/s", "redis://:***@127.0.0.1:6379/s");
}

Test(redact, secret_flags)
{
    expect("--password", "hunter2", "***");
    expect("--api-token", "abc", "***");
    expect(NULL, "--db-password=hunter2", "--db-password=***");
    expect("--keys", "/etc/eddy/keys", "***");
    expect(NULL, "--keys=/etc/eddy/keys", "--keys=***");
    expect("--client-secret", "--next-flag", "--next-flag"); /* a flag is not a value */
}

Test(redact, everything_else_unchanged)
{
    expect(NULL, "--input", "--input");
    expect("--input", "/data/in.txt", "/data/in.txt");
    expect("--input", "file:///data/in.gz", "file:///data/in.gz");
    expect("--output", "postgresql://eddy@db:5432/x?table=t", "postgresql://eddy@db:5432/x?table=t");
    expect("--input", "redis://127.0.0.1:6379/s?bounded=latest&group=g",
           "redis://127.0.0.1:6379/s?bounded=latest&group=g");
    expect("--keyed", "word", "word");
    expect("--key", "user_id", "user_id"); /* a key field, not a key file */
    expect("--enrich-key", "id", "id");
    expect("--rate", "2000", "2000");
    expect(NULL, "", "");
}
