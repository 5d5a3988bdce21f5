/* test_sql_fuzz.c - truncated and mangled SQL never crashes the lexer,
 * parser or compiler (run it under ASan): every prefix of each
 * examples/sql script, and deterministic random mutations of them, either
 * compile or fail with a "t.sql:LINE:COLUMN: ..." message. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/sql_compile.h"
#include "tests/unit/leak_check.h"

TestSuite(sql_fuzz, .fini = eddy_test_leak_check, .timeout = 120);

static const char *const queries[] = {"q0", "q1", "q2", "q3", "q5", "q7", "q8", "q11"};

static char *example(const char *q, size_t *len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/examples/sql/%s.sql", EDDY_SOURCE_DIR, q);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    char *buf = malloc(65536);
    *len = fread(buf, 1, 65535, f);
    fclose(f);
    buf[*len] = '\0';
    return buf;
}

static void check(const char *text, size_t len)
{
    eddy_err_t err = {{0}};
    eddy_sql_compile_opts_t o = {.has_output = true};
    eddy_pipeline_spec_t *s = eddy_sql_compile("t.sql", text, len, &o, &err);
    if (s) {
        eddy_pipeline_spec_destroy(&s);
        return;
    }
    cr_assert(!strncmp(err.msg, "t.sql:", 6), "no position in '%s' for:\n%.*s", err.msg, (int)len, text);
}

Test(sql_fuzz, every_prefix)
{
    for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
        size_t len;
        char *text = example(queries[q], &len);
        char *cut = malloc(len + 1);
        for (size_t n = 0; n <= len; n++) {
            memcpy(cut, text, n);
            cut[n] = '\0';
            check(cut, n);
        }
        free(cut);
        free(text);
    }
}

Test(sql_fuzz, random_mutations)
{
    static const char *const tokens[] = {"(", ")", ",", ";", "'", "`", "SELECT", "FROM", "WHERE",
                                         "GROUP BY", "JOIN", "ON", "OVER", "*", "-", "--", "/*",
                                         "TABLE(", "INTERVAL", "NULL", "CASE", "END", "AS", " ",
                                         "\n", "\x01", "\xff", "9999999999999999999999", "1e999"};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 3000; round++) {
        size_t len;
        char *text = example(queries[round % (sizeof queries / sizeof queries[0])], &len);
        char *buf = malloc(len + 256);
        memcpy(buf, text, len);
        for (int k = 0; k < 1 + round % 4; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(seed >> 33) % (len + 1);
            const char *tok = tokens[(seed >> 13) % (sizeof tokens / sizeof tokens[0])];
            size_t tl = strlen(tok), del = (size_t)(seed >> 7) % 8;
            if (del > len - at)
                del = len - at;
            if (len - del + tl >= len + 200)
                continue;
            memmove(buf + at + tl, buf + at + del, len - at - del);
            memcpy(buf + at, tok, tl);
            len = len - del + tl;
        }
        buf[len] = '\0';
        check(buf, len);
        free(buf);
        free(text);
    }
}
