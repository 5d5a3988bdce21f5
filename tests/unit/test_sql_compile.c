/* test_sql_compile.c - SQL compiled into pipeline specs
 * (plan/sql_compile.h): the examples/sql Nexmark scripts become the steps
 * the YAML specs in examples/pipelines/ hold; unknown tables and columns
 * name the closest one, type mismatches and unsupported constructs are
 * named, each at its line and column with a caret; UNION ALL becomes a
 * union step and SELECT DISTINCT a GROUP BY of its columns; an EXPLAIN
 * statement compiles as its statement and marks the script as one whose
 * plan is printed; a CUMULATE TVF becomes a cumulate window. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/pipeline_join.h"
#include "plan/sql_compile.h"
#include "tests/unit/leak_check.h"

TestSuite(sql_compile, .fini = eddy_test_leak_check);

static eddy_pipeline_spec_t *compile(const char *text, bool output, eddy_err_t *err)
{
    eddy_sql_compile_opts_t o = {.has_output = output};
    return eddy_sql_compile("t.sql", text, strlen(text), &o, err);
}

static char *example(const char *q)
{
    char path[600];
    snprintf(path, sizeof path, "%s/examples/sql/%s.sql", EDDY_SOURCE_DIR, q);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* The kinds of s's steps as letters: f filter, m map, k key_by, w window,
 * a aggregate, x max_by, j join. */
static void kinds(const eddy_pipeline_spec_t *s, char *out)
{
    for (uint32_t i = 0; i < s->n_steps; i++)
        out[i] = "fmjpkwax"[s->steps[i].kind];
    out[s->n_steps] = '\0';
}

Test(sql_compile, nexmark_examples)
{
    static const struct {
        const char *q, *kinds;
    } cases[] = {
        {"q0", "fmmm"}, {"q1", "fmmm"}, {"q2", "fmfmm"}, {"q3", "fmfjmm"}, {"q4", "fmjkamkamm"},
        {"q5", "fmkwammkwxmm"}, {"q7", "fmmmkwxmm"}, {"q8", "fmjmmm"}, {"q11", "fmkwamm"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eddy_err_t err = {{0}};
        eddy_pipeline_spec_t *s = compile(example(cases[i].q), true, &err);
        cr_assert(s, "%s: %s", cases[i].q, err.msg);
        char k[64];
        kinds(s, k);
        cr_expect_str_eq(k, cases[i].kinds, "%s: %s", cases[i].q, k);
        bool windowed = !strcmp(cases[i].q, "q5") || !strcmp(cases[i].q, "q7") ||
                        !strcmp(cases[i].q, "q11");
        cr_expect_eq(s->time_column, windowed ? 1 : -1, "%s", cases[i].q);
        if (s->time_column >= 0)
            cr_expect_eq(s->watermark_delay_ms, 4000);
        eddy_pipeline_spec_destroy(&s);
    }
}

Test(sql_compile, blackhole_and_filesystem_sinks)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = compile(example("q2"), false, &err);
    cr_assert(s, "%s", err.msg);
    cr_expect_str_eq(s->steps[s->n_steps - 1].filter, "false"); /* nothing reaches a blackhole */
    eddy_pipeline_spec_destroy(&s);
    const char *fs =
        "CREATE TABLE src (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)\n"
        "  WITH ('connector' = 'filesystem', 'path' = '/in.csv', 'format' = 'csv');\n"
        "CREATE TABLE dst (k STRING, n BIGINT, total BIGINT, w TIMESTAMP(3))\n"
        "  WITH ('connector' = 'filesystem', 'path' = '/out.tsv', 'format' = 'csv');\n"
        "INSERT INTO dst SELECT k, COUNT(*), SUM(v), window_end\n"
        "FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '1' MINUTE))\n"
        "WHERE v > 0 GROUP BY k, window_start, window_end HAVING COUNT(*) > 1;\n";
    s = compile(fs, false, &err);
    cr_assert(s, "%s", err.msg);
    cr_expect_str_eq(s->input, "/in.csv");
    cr_expect_str_eq(s->output, "/out.tsv");
    cr_expect_eq(s->time_column, 2);
    char k[64];
    kinds(s, k);
    cr_expect_str_eq(k, "fkwafmm");
    cr_expect_eq(s->steps[2].window.size_ms, 60000);
    eddy_pipeline_spec_destroy(&s);
}

static void bad(const char *text, const char *want)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = compile(text, true, &err);
    cr_expect_null(s, "'%s' compiled", text);
    eddy_pipeline_spec_destroy(&s);
    cr_expect(strstr(err.msg, want), "got '%s'\nwant '%s'", err.msg, want);
}

Test(sql_compile, unknown_names_suggest_the_closest)
{
    bad("SELECT auction FROM bids", "t.sql:1:21: unknown table 'bids' (did you mean 'bid'?)\n"
                                    "  SELECT auction FROM bids\n"
                                    "                      ^");
    bad("SELECT auction,\n  prise FROM bid", "t.sql:2:3: unknown column 'prise' (did you mean 'price'?)\n"
                                            "    prise FROM bid\n"
                                            "    ^");
    bad("SELECT B.auction FROM bid AS A", "unknown table or alias 'B' in 'B.auction'");
    bad("SELECT id FROM auction A JOIN person P ON A.seller = P.id", "t.sql:1:8: ambiguous column 'id'");
    bad("SELECT lowr(name) FROM person", "unknown function 'lowr' (did you mean LOWER?)");
    bad("INSERT INTO nowhere SELECT id FROM person", "t.sql:1:13: unknown table 'nowhere'");
    bad("SELECT a FROM v2; CREATE VIEW v AS SELECT id AS a FROM person", "unknown table 'v2' (did you mean 'v'?)");
}

Test(sql_compile, type_mismatches)
{
    bad("SELECT id FROM person WHERE id + 1", "t.sql:1:29: type mismatch: WHERE needs a BOOLEAN, not BIGINT");
    bad("SELECT id FROM person WHERE name = 3", "t.sql:1:29: type mismatch: STRING = INT cannot be compared");
    bad("SELECT name + 1 FROM person", "type mismatch: STRING + INT");
    bad("SELECT id FROM person WHERE id LIKE 'a%'", "type mismatch: BIGINT LIKE STRING");
    bad("SELECT SUM(name) FROM person GROUP BY id", "type mismatch: SUM of STRING");
    bad("CREATE TABLE t (a BIGINT, WATERMARK FOR a AS a) WITH ('connector' = 'print'); SELECT id FROM person",
        "type mismatch: WATERMARK FOR a BIGINT column");
}

Test(sql_compile, unsupported_constructs_are_named)
{
    bad("SELECT * FROM (SELECT auction, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 1",
        "ROW_NUMBER() OVER is not supported");
    bad("SELECT auction, SUM(price) OVER (PARTITION BY auction) FROM bid",
        "OVER windows other than a top-1 by RANK() are not supported");
    bad("SELECT * FROM (SELECT auction, RANK() OVER (PARTITION BY auction ORDER BY price DESC) AS rk FROM bid) WHERE rk <= 3",
        "top-N with N other than 1 is not supported");
    bad("SELECT P.name FROM person P FULL JOIN auction A ON P.id = A.seller",
        "RIGHT and FULL joins are not supported");
    bad("SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(expires), INTERVAL '2' SECOND)) GROUP BY window_start, window_end",
        "unknown column 'expires'");
    bad("SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(expires), INTERVAL '2' SECOND)) GROUP BY window_start, window_end",
        "DESCRIPTOR(expires): not a time attribute");
    bad("CREATE TABLE t (a BIGINT) WITH ('connector' = 'kafka'); SELECT id FROM person",
        "t.sql:1:33: connector 'kafka' is not supported");
    bad("CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', 'path' = '/x', 'format' = 'csv', 'pth' = 'y'); SELECT id FROM person",
        "unknown option 'pth' for connector 'filesystem' (did you mean 'path'?)");
    bad("CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', 'path' = '/x', 'format' = 'csv'); SELECT a FROM t JOIN person ON a = id",
        "reading table 'person' besides 't' is not supported");
    bad("SELECT id FROM person; SELECT id FROM person", "a second INSERT or query is not supported");
    bad("SELECT P.id FROM person P, auction A WHERE P.id > A.seller", "a join without an equality");
    bad("SELECT id FROM person WHERE id NOT IN (SELECT seller FROM auction)", "NOT IN (SELECT ...) (an anti-join) is not supported");
    bad("SELECT id FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) P "
        "WHERE id IN (SELECT seller FROM auction)", "a semi-join of window TVFs needs both sides windowed");
    bad("CREATE TABLE t (a BIGINT) WITH ('connector' = 'print'); INSERT INTO t SELECT id, name FROM person",
        "the query has 2 columns, table 't' has 1");
    bad("CREATE VIEW v AS SELECT * FROM v; SELECT * FROM v", "view 'v' refers to itself");
    bad("SELECT name, COUNT(*) FROM person GROUP BY id", "t.sql:1:8: column 'name' is neither in GROUP BY nor in an aggregate");
    bad("SELECT COUNT(*) FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '3' SECOND, INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
        "HOP windows whose size is not a multiple of their slide are not supported");
}

Test(sql_compile, expressions_become_pipeline_expressions)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = compile(
        "SELECT CASE WHEN price BETWEEN 1 AND 10 THEN 'low' ELSE 'high' END AS c,\n"
        "       UPPER(channel) || '!' AS u, CAST(price AS DOUBLE) / 2 AS h,\n"
        "       dateTime + INTERVAL '1' MINUTE AS later, SUBSTRING(channel, 2, 3) AS s\n"
        "FROM bid WHERE channel LIKE 'A_c%' AND NOT auction IN (1, 2) AND url IS NULL", true, &err);
    cr_assert(s, "%s", err.msg);
    const eddy_pstep_t *m = &s->steps[s->n_steps - 2];
    cr_assert_eq(m->kind, EDDY_PSTEP_MAP);
    cr_expect_str_eq(m->exprs[0], "if(((price >= 1) and (price <= 10)), 'low', 'high')");
    cr_expect_str_eq(m->exprs[1], "concat(upper(channel), '!')");
    cr_expect_str_eq(m->exprs[2], "(float(price) / 2)");
    cr_expect_str_eq(m->exprs[3], "(dateTime + 60000)");
    cr_expect_str_eq(m->exprs[4], "substr(channel, (2) - 1, 3)");
    cr_expect_str_eq(s->steps[2].filter, "(matches(channel, '^A.c.*$'))");
    cr_expect_str_eq(s->steps[3].filter, "(not ((auction == 1) or (auction == 2)))");
    cr_expect_str_eq(s->steps[4].filter, "(is_null(url))");
    /* TIMESTAMP(3) is written as text at the end */
    cr_expect(strstr(s->steps[s->n_steps - 1].exprs[3], "datetime(later)"), "%s",
              s->steps[s->n_steps - 1].exprs[3]);
    eddy_pipeline_spec_destroy(&s);
}

Test(sql_compile, window_join)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = compile(
        "SELECT P.id, P.name, A.id AS auction, P.window_start\n"
        "FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) P\n"
        "JOIN TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) A\n"
        "ON P.id = A.seller AND P.window_start = A.window_start AND P.window_end = A.window_end",
        true, &err);
    cr_assert(s, "%s", err.msg);
    cr_assert_eq(s->steps[2].kind, EDDY_PSTEP_JOIN);
    cr_expect_eq(s->steps[2].join->window_ms, 10000);
    cr_expect(!s->steps[2].join->semi);
    eddy_pipeline_spec_destroy(&s);
}

/* A right time column between bounds over the left's columns is an
 * interval join (Flink's q4 writes one as a regular join's WHERE): the
 * bounds become the join window's from and to, strict comparisons move by
 * a millisecond, and half an interval stays a filter of the joined rows. */
Test(sql_compile, interval_join)
{
    static const struct {
        const char *cond, *from, *to;
    } cases[] = {
        {"B.dateTime BETWEEN A.dateTime AND A.expires", "dateTime", "expires"},
        {"A.dateTime <= B.dateTime AND B.dateTime < A.expires", "dateTime", "(expires) - 1"},
        {"B.dateTime > A.dateTime - INTERVAL '1' SECOND AND A.expires >= B.dateTime",
         "((dateTime - 1000)) + 1", "expires"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char q[512];
        snprintf(q, sizeof q, "SELECT A.id, B.price FROM auction A, bid B WHERE A.id = B.auction AND %s",
                 cases[i].cond);
        eddy_err_t err = {{0}};
        eddy_pipeline_spec_t *s = compile(q, true, &err);
        cr_assert(s, "%s: %s", cases[i].cond, err.msg);
        cr_assert_eq(s->steps[2].kind, EDDY_PSTEP_JOIN, "%s", cases[i].cond);
        const eddy_pipeline_join_t *j = s->steps[2].join;
        cr_expect_eq(j->window_ms, 0);
        cr_expect_str_eq(j->left_from ? j->left_from : "(none)", cases[i].from, "%s", cases[i].cond);
        cr_expect_str_eq(j->left_to ? j->left_to : "(none)", cases[i].to, "%s", cases[i].cond);
        cr_expect_str_eq(j->right_time ? j->right_time : "(none)", "dateTime_2", "%s", cases[i].cond);
        eddy_pipeline_spec_destroy(&s);
    }
    /* one bound only: a join without a window, the bound filters its rows */
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = compile("SELECT A.id, B.price FROM auction A JOIN bid B ON A.id = B.auction "
                                      "AND B.dateTime >= A.dateTime", true, &err);
    cr_assert(s, "%s", err.msg);
    cr_assert_eq(s->steps[2].kind, EDDY_PSTEP_JOIN);
    cr_expect(!s->steps[2].join->left_from && !s->steps[2].join->window_ms);
    cr_assert_eq(s->steps[3].kind, EDDY_PSTEP_FILTER);
    cr_expect(strstr(s->steps[3].filter, "dateTime_2 >= dateTime"), "%s", s->steps[3].filter);
    eddy_pipeline_spec_destroy(&s);
}

/* LEFT JOIN: a window join only (a window's end says a row found no match),
 * conditions on the left alone in its ON refused; RIGHT and FULL refused. */
Test(sql_compile, left_window_join)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = compile(
        "SELECT P.id, A.id AS auction, P.window_start\n"
        "FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) P\n"
        "LEFT JOIN TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) A\n"
        "ON P.id = A.seller AND P.window_start = A.window_start AND A.category = 10",
        true, &err);
    cr_assert(s, "%s", err.msg);
    cr_assert_eq(s->steps[2].kind, EDDY_PSTEP_JOIN);
    cr_expect(s->steps[2].join->left_outer && !s->steps[2].join->semi);
    cr_expect_eq(s->steps[2].join->window_ms, 10000);
    /* the right side's own condition filters it before the join */
    const eddy_pipeline_spec_t *r = s->steps[2].join->right;
    bool filtered = false;
    for (uint32_t i = 0; i < r->n_steps; i++)
        filtered |= r->steps[i].kind == EDDY_PSTEP_FILTER && strstr(r->steps[i].filter, "category");
    cr_expect(filtered, "the right's condition is not a filter of the right side");
    eddy_pipeline_spec_destroy(&s);
    static const struct {
        const char *q, *msg;
    } bad_cases[] = {
        {"SELECT P.id FROM person P LEFT JOIN auction A ON P.id = A.seller",
         "a LEFT JOIN must be a window join"},
        {"SELECT P.id FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) P "
         "LEFT JOIN TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) A "
         "ON P.id = A.seller AND P.window_start = A.window_start AND P.id > 5",
         "a condition on the left side alone in a LEFT JOIN's ON is not supported"},
        {"SELECT P.id FROM person P RIGHT JOIN auction A ON P.id = A.seller",
         "RIGHT and FULL joins are not supported"},
    };
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        eddy_err_t e = {{0}};
        eddy_pipeline_spec_t *b = compile(bad_cases[i].q, true, &e);
        cr_expect(!b && strstr(e.msg, bad_cases[i].msg), "%s: %s", bad_cases[i].q, e.msg);
        eddy_pipeline_spec_destroy(&b);
    }
}

Test(sql_compile, union_all_becomes_a_union_step_whose_other_side_reads_the_source_again)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = compile(
        "SELECT auction AS id, price FROM bid WHERE price > 100\n"
        "UNION ALL SELECT id, CAST(initialBid AS DOUBLE) FROM auction\n"
        "UNION ALL SELECT id, 0 FROM person WHERE state = 'OR'", true, &err);
    cr_assert(s, "%s", err.msg);
    char k[64];
    kinds(s, k);
    cr_expect_str_eq(k, "fmfmjjm"); /* bids, then two unions, then the output map */
    for (int i = 4; i < 6; i++) {
        const eddy_pipeline_join_t *j = s->steps[i].join;
        cr_assert(j->union_all);
        cr_expect_eq(s->steps[i].line, (uint32_t)i - 2, "the UNION's line");
        cr_expect_eq(s->steps[i].n, 2);
        cr_expect_str_eq(s->steps[i].columns[0], "id"); /* the first SELECT's names */
        cr_expect_str_eq(s->steps[i].columns[1], "price");
        char rk[16];
        kinds(j->right, rk);
        cr_expect_str_eq(rk, i == 4 ? "fmm" : "fmfm", "steps[%d]'s other side", i);
    }
    cr_expect_str_eq(s->steps[4].join->right->steps[0].filter, "event == 'A'");
    eddy_pipeline_spec_destroy(&s);
    /* a view of a union, read by a query that windows it */
    s = compile("CREATE VIEW v AS SELECT auction, dateTime FROM bid\n"
                "  UNION ALL SELECT id, dateTime FROM auction;\n"
                "SELECT auction, COUNT(*) FROM v GROUP BY auction", true, &err);
    cr_assert(s, "%s", err.msg);
    kinds(s, k);
    cr_expect_str_eq(k, "fmmjkamm");
    eddy_pipeline_spec_destroy(&s);
}

Test(sql_compile, union_all_needs_the_same_columns)
{
    bad("SELECT auction, price FROM bid UNION ALL SELECT id FROM auction",
        "t.sql:1:32: UNION ALL of SELECTs with 2 and 1 columns: each SELECT needs as many "
        "columns as the first\n"
        "  SELECT auction, price FROM bid UNION ALL SELECT id FROM auction\n"
        "                                 ^");
    bad("SELECT auction, price FROM bid\nUNION ALL SELECT id, name FROM person",
        "t.sql:2:22: type mismatch: UNION ALL column 2 ('price') is BIGINT in the first SELECT "
        "(line 1) and STRING here\n"
        "  UNION ALL SELECT id, name FROM person\n"
        "                       ^");
    bad("SELECT dateTime FROM bid UNION ALL SELECT 1.5 FROM auction",
        "type mismatch: UNION ALL column 1 ('dateTime') is TIMESTAMP(3)");
    bad("SELECT auction FROM bid UNION ALL SELECT seller FROM auction GROUP BY seller",
        "t.sql:1:35: a SELECT after the first of a UNION ALL that groups, windows, joins or ranks "
        "is not supported");
    bad("SELECT auction FROM bid UNION SELECT seller FROM auction",
        "UNION without ALL (use UNION ALL) is not supported");
    bad("SELECT id FROM person WHERE id IN (SELECT seller FROM auction UNION ALL SELECT bidder FROM bid)",
        "IN (SELECT ...) other than one column of a table");
    bad("CREATE VIEW v AS SELECT id, name FROM person\nUNION ALL SELECT seller, itemName FROM auction;\n"
        "SELECT B.auction, v.name FROM bid B JOIN v ON B.bidder = v.id",
        "t.sql:2:1: UNION ALL inside a join's right side (a view) is not supported");
    bad("CREATE VIEW v AS SELECT P.id FROM person P JOIN auction A ON P.id = A.seller;\n"
        "SELECT B.auction FROM bid B JOIN v ON B.bidder = v.id",
        "a join inside a join's right side (a view that joins) is not supported");
}

Test(sql_compile, select_distinct_is_a_group_by_of_its_columns)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = compile("SELECT DISTINCT auction, channel FROM bid", true, &err);
    cr_assert(s, "%s", err.msg);
    char k[64];
    kinds(s, k);
    cr_expect_str_eq(k, "fmkamm");
    cr_expect(strstr(s->steps[2].expr, "auction") && strstr(s->steps[2].expr, "channel"), "%s",
              s->steps[2].expr);
    eddy_pipeline_spec_destroy(&s);
    /* per window: each window's distinct rows when it ends */
    s = compile("SELECT DISTINCT window_start, window_end, auction\n"
                "FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))",
                true, &err);
    cr_assert(s, "%s", err.msg);
    kinds(s, k);
    cr_expect_str_eq(k, "fmkwamm");
    cr_expect_str_eq(s->steps[2].expr, "auction");
    cr_expect_eq(s->steps[3].window.size_ms, 10000);
    eddy_pipeline_spec_destroy(&s);
    bad("SELECT DISTINCT * FROM bid", "t.sql:1:17: SELECT DISTINCT * is not supported (name the columns)");
    bad("SELECT DISTINCT COUNT(*) FROM bid", "SELECT DISTINCT with an aggregate or OVER is not supported");
    bad("SELECT DISTINCT auction FROM bid GROUP BY auction", "SELECT DISTINCT with GROUP BY or HAVING");
}

Test(sql_compile, explain_compiles_as_its_statement)
{
    const char *plain = "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0";
    static const char *const explained[] = {
        "EXPLAIN SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0",
        "-- the plan\nexplain plan for\nSELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;",
    };
    cr_expect(!eddy_sql_explains(plain, strlen(plain)));
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *want = compile(plain, true, &err);
    cr_assert(want, "%s", err.msg);
    char wk[64], k[64];
    kinds(want, wk);
    for (size_t i = 0; i < 2; i++) {
        cr_expect(eddy_sql_explains(explained[i], strlen(explained[i])), "%s", explained[i]);
        eddy_pipeline_spec_t *s = compile(explained[i], true, &err);
        cr_assert(s, "%s", err.msg);
        kinds(s, k);
        cr_expect_str_eq(k, wk);
        cr_expect_str_eq(s->steps[2].filter, want->steps[2].filter);
        eddy_pipeline_spec_destroy(&s);
    }
    eddy_pipeline_spec_destroy(&want);
    const char *broken = "EXPLAIN SELEC 1";
    cr_expect(!eddy_sql_explains(broken, strlen(broken)), "a script that does not parse");
    bad("EXPLAIN CHANGELOG_MODE SELECT id FROM person",
        "t.sql:1:9: EXPLAIN other than EXPLAIN [PLAN FOR] INSERT or SELECT (details such as "
        "CHANGELOG_MODE, other statements) is not supported");
    bad("EXPLAIN CREATE VIEW v AS SELECT id FROM person", "EXPLAIN other than EXPLAIN [PLAN FOR]");
    bad("EXPLAIN PLAN SELECT id FROM person", "t.sql:1:14: expected 'FOR'");
    bad("EXPLAIN SELECT id FROM person;\nSELECT id FROM person",
        "t.sql:2:1: EXPLAIN beside another INSERT or query is not supported");
}

Test(sql_compile, cumulate_windows)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = compile(
        "SELECT auction, window_start, window_end, COUNT(*) AS bids\n"
        "FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))\n"
        "GROUP BY auction, window_start, window_end", true, &err);
    cr_assert(s, "%s", err.msg);
    char k[64];
    kinds(s, k);
    cr_expect_str_eq(k, "fmkwamm");
    cr_expect_str_eq(s->steps[3].window.type, "cumulate");
    cr_expect_eq(s->steps[3].window.size_ms, 10000);
    cr_expect_eq(s->steps[3].window.slide_ms, 2000);
    cr_expect_eq(s->time_column, 1);
    eddy_pipeline_spec_destroy(&s);
    /* the top auctions of every cumulating window: the second window is
     * tumbling by the step, over the first's result times */
    s = compile("SELECT auction, n, window_end FROM (\n"
                "  SELECT *, RANK() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rk\n"
                "  FROM (SELECT auction, window_start, window_end, COUNT(*) AS n\n"
                "        FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))\n"
                "        GROUP BY auction, window_start, window_end))\n"
                "WHERE rk <= 1", true, &err);
    cr_assert(s, "%s", err.msg);
    kinds(s, k);
    cr_expect_str_eq(k, "fmkwammkwxmm");
    cr_expect_str_eq(s->steps[8].window.type, "tumbling");
    cr_expect_eq(s->steps[8].window.size_ms, 2000);
    eddy_pipeline_spec_destroy(&s);
    bad("SELECT COUNT(*) FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '3' SECOND, INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
        "t.sql:1:28: CUMULATE windows whose size is not a multiple of their step are not supported");
    bad("SELECT COUNT(*) FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '3' SECOND)) GROUP BY window_start, window_end",
        "CUMULATE needs its step and size");
    bad("SELECT auction, window_start FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))",
        "rows of a cumulate window TVF are supported only grouped by window_start and window_end");
    bad("SELECT auction, COUNT(*) FROM bid GROUP BY auction, CUMULATE(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND)",
        "GROUP BY CUMULATE(...) is not SQL");
}
