/* test_etl_record.c - the etl record model (operators/etl_record.c): CSV
 * splitting with quotes, field counts, JSON objects with typed values,
 * and both writers (quoting, escaping, projections, nulls); and the
 * reference table (operators/etl_table.c): lookups, duplicates, files. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "operators/etl_record.h"
#include "operators/etl_table.h"
#include "tests/unit/leak_check.h"

TestSuite(etl_record, .fini = eddy_test_leak_check);
TestSuite(etl_table, .fini = eddy_test_leak_check);

static eddy_err_t err;

static void split_is(const char *line, size_t n, const char *const *want)
{
    eddy_strv_t v = {0};
    memset(&err, 0, sizeof err);
    cr_assert_eq(eddy_etl_csv_split(line, strlen(line), &v, &err), 0, "%s: %s", line, err.msg);
    cr_assert_eq(v.n, n, "%s: %zu fields", line, v.n);
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(v.v[i], want[i], "%s: field %zu", line, i);
    eddy_strv_clear(&v);
}

static void split_bad(const char *line, const char *needle)
{
    eddy_strv_t v = {0};
    memset(&err, 0, sizeof err);
    cr_assert_eq(eddy_etl_csv_split(line, strlen(line), &v, &err), -1, "%s accepted", line);
    cr_assert(strstr(err.msg, needle), "%s: '%s'", line, err.msg);
    eddy_strv_clear(&v);
}

Test(etl_record, csv_split)
{
    split_is("a,b,c", 3, (const char *[]){"a", "b", "c"});
    split_is("", 1, (const char *[]){""});
    split_is(",", 2, (const char *[]){"", ""});
    split_is("\"x,y\",\"say \"\"hi\"\"\",", 3, (const char *[]){"x,y", "say \"hi\"", ""});
    split_is(" a , b ", 2, (const char *[]){" a ", " b "});
    split_bad("\"open,b", "unterminated");
    split_bad("a\"b,c", "quote inside");
    split_bad("\"a\"b,c", "after the closing quote");
}

/* The zero-copy splitter the pipelines read CSV with: the same fields as
 * eddy_etl_csv_split, unquoted text in the caller's buffer, counts past max. */
Test(etl_record, csv_spans_match_the_copying_split)
{
    const char *lines[] = {"a,b,c", "", ",", "\"x,y\",\"say \"\"hi\"\"\",", " a , b ",
                           "\"\",\"\"\"\",plain,\"q\"", "1,2,3,4,5,6,7,8,9,10"};
    eddy_buf_t unquoted = {0};
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++) {
        const char *line = lines[k];
        eddy_strv_t v = {0};
        cr_assert_eq(eddy_etl_csv_split(line, strlen(line), &v, &err), 0, "%s: %s", line, err.msg);
        eddy_csv_span_t spans[4];
        size_t n = 99;
        cr_assert_eq(eddy_etl_csv_spans(line, strlen(line), spans, 4, &n, &unquoted, &err), 0,
                     "%s: %s", line, err.msg);
        cr_assert_eq(n, v.n, "%s: %zu fields, split says %zu", line, n, v.n);
        for (size_t i = 0; i < n && i < 4; i++) {
            cr_assert_eq(spans[i].len, strlen(v.v[i]), "%s: field %zu", line, i);
            cr_assert(!memcmp(spans[i].p, v.v[i], spans[i].len), "%s: field %zu", line, i);
        }
        eddy_strv_clear(&v);
    }
    size_t n;
    eddy_csv_span_t spans[2];
    const char *bad[][2] = {{"\"open,b", "unterminated quoted field 1"},
                            {"a,b\"c", "quote inside unquoted field 2"},
                            {"a,\"a\"b,c", "after the closing quote of field 2"}};
    for (size_t k = 0; k < 3; k++) {
        memset(&err, 0, sizeof err);
        cr_assert_eq(eddy_etl_csv_spans(bad[k][0], strlen(bad[k][0]), spans, 2, &n, &unquoted, &err),
                     -1, "%s accepted", bad[k][0]);
        cr_assert(strstr(err.msg, bad[k][1]), "%s: '%s'", bad[k][0], err.msg);
    }
    /* Longer than the 64 fields eddy_etl_csv_split first tries. */
    char wide[400] = "";
    for (int i = 0; i < 100; i++)
        snprintf(wide + strlen(wide), sizeof wide - strlen(wide), "%s%d", i ? "," : "", i % 10);
    eddy_strv_t v = {0};
    cr_assert_eq(eddy_etl_csv_split(wide, strlen(wide), &v, &err), 0, "%s", err.msg);
    cr_assert_eq(v.n, 100);
    cr_assert_str_eq(v.v[99], "9");
    eddy_strv_clear(&v);
    eddy_buf_free(&unquoted);
}

Test(etl_record, csv_parse_counts_fields)
{
    eddy_strv_t cols = {0};
    eddy_etl_record_t rec = {0};
    cr_assert_eq(eddy_strv_split_list(&cols, "id, name ,city", &err), 0);
    cr_assert_str_eq(cols.v[1], "name");
    cr_assert_eq(eddy_etl_parse_csv("1,Ann,Oslo", 10, &cols, &rec, &err), 0);
    cr_assert_str_eq(eddy_etl_record_get(&rec, "city")->value, "Oslo");
    cr_assert_eq(eddy_etl_parse_csv("1,Ann", 5, &cols, &rec, &err), -1);
    cr_assert(strstr(err.msg, "expected 3 fields, got 2"), "%s", err.msg);
    cr_assert_eq(eddy_strv_split_list(&cols, "a,,b", &err), -1);
    eddy_etl_record_clear(&rec);
    free(rec.fields);
    eddy_strv_clear(&cols);
}

Test(etl_record, json_parse_and_write)
{
    eddy_etl_record_t rec = {0};
    eddy_buf_t out = {0};
    const char *line = "{\"id\":7,\"name\":\"A \\\"q\\\"\",\"ok\":true,\"x\":null,\"v\":1.5,"
                       "\"tags\":[1,2]}";
    cr_assert_eq(eddy_etl_parse_json(line, strlen(line), &rec, &err), 0, "%s", err.msg);
    cr_assert_eq(rec.n, 6);
    cr_assert_str_eq(rec.fields[0].name, "id");
    cr_assert(rec.fields[0].raw);
    cr_assert_str_eq(rec.fields[1].value, "A \"q\"");
    cr_assert_not(rec.fields[1].raw);
    cr_assert_eq(eddy_etl_write_json(&rec, NULL, &out), 0);
    cr_assert_str_eq(out.p, line);
    cr_assert_eq(eddy_etl_write_csv(&rec, NULL, &out), 0);
    cr_assert_str_eq(out.p, "7,\"A \"\"q\"\"\",true,,1.5,\"[1,2]\"");
    eddy_strv_t cols = {0};
    cr_assert_eq(eddy_strv_split_list(&cols, "name,missing,id", &err), 0);
    cr_assert_eq(eddy_etl_write_json(&rec, &cols, &out), 0);
    cr_assert_str_eq(out.p, "{\"name\":\"A \\\"q\\\"\",\"missing\":null,\"id\":7}");
    cr_assert_eq(eddy_etl_write_csv(&rec, &cols, &out), 0);
    cr_assert_str_eq(out.p, "\"A \"\"q\"\"\",,7");
    cr_assert_eq(eddy_etl_record_set(&rec, "name", "tab\there\n", 10, false), 0);
    cr_assert_eq(eddy_etl_write_json(&rec, &cols, &out), 0);
    cr_assert_str_eq(out.p, "{\"name\":\"tab\\there\\n\",\"missing\":null,\"id\":7}");
    eddy_strv_clear(&cols);
    eddy_etl_record_clear(&rec);
    free(rec.fields);
    eddy_buf_free(&out);
}

Test(etl_record, json_rejects)
{
    eddy_etl_record_t rec = {0};
    const char *bad[] = {"{\"a\":1", "[1,2]", "42", "{\"a\":1,\"a\":2}", "not json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        cr_assert_eq(eddy_etl_parse_json(bad[i], strlen(bad[i]), &rec, &err), -1, "%s", bad[i]);
        cr_assert(err.msg[0] && !strchr(err.msg, '\n'), "%s: '%s'", bad[i], err.msg);
    }
    free(rec.fields);
}

Test(etl_table, lookup_and_duplicates)
{
    eddy_strv_t cols = {0};
    cr_assert_eq(eddy_strv_split_list(&cols, "country,tier", &err), 0);
    eddy_etl_table_t *t = eddy_etl_table_new(&cols);
    cr_assert_eq(eddy_etl_table_add(t, "u2", (const char *[]){"NO", NULL}, &err), 0);
    cr_assert_eq(eddy_etl_table_add(t, "u1", (const char *[]){"SE", "gold"}, &err), 0);
    cr_assert_eq(eddy_etl_table_seal(t, &err), 0);
    char *const *row = eddy_etl_table_find(t, "u1");
    cr_assert(row);
    cr_assert_str_eq(row[0], "SE");
    cr_assert_str_eq(row[1], "gold");
    row = eddy_etl_table_find(t, "u2");
    cr_assert(row && row[1] == NULL);
    cr_assert_null(eddy_etl_table_find(t, "u3"));
    cr_assert_eq(eddy_etl_table_add(t, "u1", (const char *[]){"DK", "x"}, &err), 0);
    cr_assert_eq(eddy_etl_table_seal(t, &err), -1);
    cr_assert(strstr(err.msg, "'u1' appears twice"), "%s", err.msg);
    eddy_etl_table_destroy(&t);
    cr_assert_null(t);
    eddy_strv_clear(&cols);
}

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/etl_table_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

Test(etl_table, csv_file)
{
    char *path = write_tmp("user,country,\"tier, level\"\r\nu1,SE,gold\n\nu2,\"N,O\",\n");
    eddy_etl_table_t *t = eddy_etl_table_load_csv(path, &err);
    cr_assert(t, "%s", err.msg);
    cr_assert_eq(eddy_etl_table_rows(t), 2);
    cr_assert_str_eq(eddy_etl_table_columns(t)->v[1], "tier, level");
    cr_assert_str_eq(eddy_etl_table_find(t, "u2")[0], "N,O");
    cr_assert_str_eq(eddy_etl_table_find(t, "u2")[1], "");
    eddy_etl_table_destroy(&t);
    unlink(path);
    free(path);

    const char *bad[][2] = {{"key\nu1\n", "at least one more"},
                            {"k,v\nu1,a,b\n", ":2: expected 2 fields, got 3"},
                            {"k,v\nu1,a\nu1,b\n", "'u1' appears twice"},
                            {"", "empty"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        path = write_tmp(bad[i][0]);
        memset(&err, 0, sizeof err);
        cr_assert_null(eddy_etl_table_load_csv(path, &err));
        cr_assert(strstr(err.msg, bad[i][1]), "%zu: '%s'", i, err.msg);
        unlink(path);
        free(path);
    }
    cr_assert_null(eddy_etl_table_load_csv("/nonexistent/ref.csv", &err));
    cr_assert(strstr(err.msg, "No such file"), "%s", err.msg);
}
