/* test_sql_parse.c - the SQL lexer and parser (plan/sql_lex.h,
 * plan/sql_parse.h): a script with every statement form loads into the
 * tree it says; each kind of mistake (lexical, syntax, unsupported
 * construct) is "FILE:LINE:COLUMN: message", the line and a caret. */
#include <criterion/criterion.h>
#include <string.h>

#include "plan/sql_parse.h"
#include "tests/unit/leak_check.h"

TestSuite(sql_parse, .fini = eddy_test_leak_check);

static eddy_sql_script_t *parse(const char *text, eddy_err_t *err)
{
    eddy_sql_src_t src = {"t.sql", text, strlen(text)};
    return eddy_sql_parse(&src, err);
}

Test(sql_parse, statements_and_their_parts)
{
    const char *text =
        "/* a comment */ CREATE TEMPORARY TABLE t (\n"
        "  a BIGINT, b DECIMAL(10, 2), c VARCHAR, d TIMESTAMP(3), e BOOLEAN NOT NULL, f DOUBLE,\n"
        "  WATERMARK FOR d AS d - INTERVAL '4' SECOND,\n"
        "  PRIMARY KEY (a) NOT ENFORCED\n"
        ") WITH ('connector' = 'filesystem', 'path' = '/x', 'format' = 'csv'); -- trailing\n"
        "CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t WHERE a BETWEEN 1 AND 2 GROUP BY a;\n"
        "INSERT INTO s SELECT CASE WHEN a IN (1, 2) THEN 'x' ELSE 'y' END, CAST(b AS INT),\n"
        "  c LIKE 'a%', COALESCE(c, 'n'), NOT e OR e AND a <> 3 FROM v AS x JOIN t ON x.a = t.a;\n"
        "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(d), INTERVAL '2' SECOND, INTERVAL '10' SECOND))\n";
    eddy_err_t err = {{0}};
    eddy_sql_script_t *s = parse(text, &err);
    cr_assert(s, "%s", err.msg);
    cr_assert_eq(s->n, 4);
    const eddy_sql_stmt_t *t = &s->stmts[0];
    cr_assert_eq(t->kind, EDDY_SQL_CREATE_TABLE);
    cr_assert(t->temporary);
    cr_assert_eq(t->n_columns, 6);
    cr_assert_eq(t->columns[1].type, EDDY_SQL_T_DECIMAL);
    cr_assert_eq(t->columns[1].precision, 10);
    cr_assert_eq(t->columns[1].scale, 2);
    cr_assert_eq(t->columns[3].type, EDDY_SQL_T_TIMESTAMP);
    cr_assert_str_eq(t->watermark, "d");
    cr_assert_eq(t->watermark_delay_ms, 4000);
    cr_assert_eq(t->n_primary_key, 1);
    cr_assert_eq(t->n_options, 3);
    cr_assert_str_eq(t->options[1].value, "/x");
    cr_assert_eq(s->stmts[1].kind, EDDY_SQL_CREATE_VIEW);
    cr_assert_eq(s->stmts[1].query->n_group_by, 1);
    const eddy_sql_stmt_t *ins = &s->stmts[2];
    cr_assert_eq(ins->kind, EDDY_SQL_INSERT);
    cr_assert_eq(ins->query->n_items, 5);
    cr_assert_eq(ins->query->items[0]->kind, EDDY_SQL_X_CASE);
    cr_assert_eq(ins->query->items[1]->kind, EDDY_SQL_X_CAST);
    cr_assert_eq(ins->query->items[4]->op, EDDY_SQL_OP_OR); /* AND binds tighter */
    cr_assert_eq(ins->query->from->kind, EDDY_SQL_FROM_JOIN);
    const eddy_sql_from_t *tvf = s->stmts[3].query->from;
    cr_assert_eq(tvf->kind, EDDY_SQL_FROM_TVF);
    cr_assert_eq(tvf->n_intervals, 2);
    cr_assert_eq(tvf->intervals[1]->i, 10000);
    eddy_sql_script_destroy(&s);
}

static void bad(const char *text, const char *want)
{
    eddy_err_t err = {{0}};
    eddy_sql_script_t *s = parse(text, &err);
    cr_expect_null(s, "'%s' parsed", text);
    eddy_sql_script_destroy(&s);
    cr_expect(strstr(err.msg, want), "got '%s' want '%s'", err.msg, want);
}

Test(sql_parse, errors_name_line_column_with_a_caret)
{
    bad("SELECT a\nFROM t WHERE a = 'x", "t.sql:2:18: unterminated string\n  FROM t WHERE a = 'x\n                   ^");
    bad("SELECT a FROM t /* open", "t.sql:1:17: unterminated comment");
    bad("SELECT a # b FROM t", "t.sql:1:10: unexpected character '#'");
    bad("SELECT \"a\" FROM t", "t.sql:1:8: \"...\" is not SQL");
    bad("SELECT a t", "t.sql:1:11: expected 'FROM', found the end of the input");
    bad("SELECT a FROM t WHERE", "expected an expression, found the end of the input");
    bad("SELECT a,, b FROM t", "t.sql:1:10: expected an expression, found ','");
    bad("INSERT INTO SELECT a FROM t", "t.sql:1:13: expected a table name, found 'SELECT'");
    bad("CREATE TABLE t (a BIGINT) WITH ('connector' 'x')", "t.sql:1:45: expected '=', found 'x'");
    bad("CREATE TABLE t (a BIGINT)", "expected WITH ('connector' = ...)");
    bad("CREATE TABLE t (a FOO) WITH ('connector' = 'print')", "t.sql:1:19: expected a type");
    bad("SELECT a FROM t; SELECT b FROM", "t.sql:1:31: expected a table name");
    bad("", "t.sql:1:1: no statements");
}

Test(sql_parse, unsupported_constructs_are_named)
{
    bad("SELECT a FROM t ORDER BY a", "t.sql:1:17: ORDER BY (other than in ROW_NUMBER() OVER) is not supported");
    bad("SELECT a FROM t LIMIT 3", "LIMIT, FETCH and OFFSET are not supported");
    bad("SET 'x' = 'y'", "t.sql:1:1: SET statements are not supported");
    bad("SELECT a FROM t UNION SELECT a FROM t", "UNION without ALL (use UNION ALL) is not supported");
    bad("CREATE TABLE t (a AS b + 1) WITH ('connector' = 'print')", "t.sql:1:19: computed columns are not supported");
    bad("CREATE TABLE t (a TIMESTAMP(6)) WITH ('connector' = 'print')", "TIMESTAMP(6) is not supported");
    bad("SELECT (SELECT 1 FROM t) FROM t", "scalar subqueries are not supported");
    bad("SELECT a FROM t NATURAL JOIN u", "NATURAL joins are not supported");
    bad("SELECT SUM(a) OVER (ORDER BY b ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
        "OVER window frames (ROWS/RANGE) are not supported");
    bad("CREATE TABLE t (d TIMESTAMP(3), WATERMARK FOR d AS d - INTERVAL '1' MONTH) WITH ('connector' = 'print')",
        "year-month intervals are not supported");
}

Test(sql_parse, nesting_is_capped)
{
    char text[4000] = "SELECT ";
    for (int i = 0; i < 600; i++)
        strcat(text, "(");
    strcat(text, "1");
    eddy_err_t err = {{0}};
    eddy_sql_script_t *s = parse(text, &err);
    cr_assert_null(s);
    cr_assert(strstr(err.msg, "nested too deeply"), "%s", err.msg);
}
