/* test_expr.c - the pipeline expression language (plan/expr.h): parsing
 * errors that name the column, arithmetic and comparisons over typed and
 * string-typed fields, SQL's three-valued logic, the functions, and that
 * no input makes eval fail or read out of bounds. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/expr.h"

static const char *const fields[] = {"auction", "bidder", "price", "city", "ts", "note"};
#define N_FIELDS 6

static eddy_val_t row[N_FIELDS];

static void setup(void)
{
    row[0] = eddy_val_int(246);
    row[1] = eddy_val_str("1001", 4); /* CSV: a number as text */
    row[2] = eddy_val_str("150", 3);
    row[3] = eddy_val_str("  Portland ", 11);
    row[4] = eddy_val_int(1700000012345);
    row[5] = eddy_val_null();
}

/* The expression's value formatted ("" for null, "<null>" to tell). */
static char *run(const char *text)
{
    eddy_err_t err = {{0}};
    eddy_expr_t *e = eddy_expr_new(text, fields, N_FIELDS, &err);
    cr_assert(e, "'%s' did not parse: %s", text, err.msg);
    eddy_val_t v = eddy_expr_eval(e, row);
    char buf[256];
    if (v.type == EDDY_VAL_NULL)
        snprintf(buf, sizeof buf, "<null>");
    else
        eddy_val_format(&v, buf, sizeof buf);
    eddy_expr_destroy(&e);
    cr_assert_null(e);
    return strdup(buf);
}

static void expect(const char *text, const char *want)
{
    char *got = run(text);
    cr_expect_str_eq(got, want, "'%s' gave '%s', want '%s'", text, got, want);
    free(got);
}

static void expect_error(const char *text, const char *want)
{
    eddy_err_t err = {{0}};
    eddy_expr_t *e = eddy_expr_new(text, fields, N_FIELDS, &err);
    cr_expect_null(e, "'%s' parsed", text);
    eddy_expr_destroy(&e);
    cr_expect(strstr(err.msg, want), "'%s': error '%s' does not say '%s'", text, err.msg, want);
}

TestSuite(expr, .init = setup);

Test(expr, arithmetic_and_precedence)
{
    expect("1 + 2 * 3", "7");
    expect("(1 + 2) * 3", "9");
    expect("price * 908 / 1000", "136"); /* q1: integer division, string field as number */
    expect("auction % 123", "0");
    expect("-price + 1", "-149");
    expect("7 / 2.0", "3.5");
    expect("1.5e3 - 500", "1000");
    expect("10 - 2 - 3", "5"); /* left associative */
}

Test(expr, nulls_and_bad_numbers_never_fail)
{
    expect("1 / 0", "<null>");
    expect("1 % 0", "<null>");
    expect("city + 1", "<null>");
    expect("note * 2", "<null>");
    expect("9223372036854775807 + 1", "<null>");
    expect("-9223372036854775807 - 1 - 1", "<null>");
    expect("note == 1", "<null>");
    expect("is_null(note)", "true");
    expect("coalesce(note, city)", "  Portland ");
}

Test(expr, comparisons_coerce_numeric_strings)
{
    expect("price > 100", "true");
    expect("price > 1000", "false");
    expect("bidder == 1001", "true");
    expect("bidder == '1001'", "true");
    expect("city == 'Portland'", "false");
    expect("trim(city) == 'Portland'", "true");
    expect("'abc' < 'abd'", "true");
    expect("city == 5", "false");
    expect("auction >= 246 and auction <= 246", "true");
    expect("2 != 2.0", "false");
}

Test(expr, three_valued_logic)
{
    expect("true and note == 1", "<null>");
    expect("false and note == 1", "false");
    expect("true or note == 1", "true");
    expect("note == 1 or false", "<null>");
    expect("not (note == 1)", "<null>");
    expect("not price > 100", "false");
    expect("!(auction % 123 == 0) || bidder == 1001", "true");
    expect("auction % 123 == 0 && not is_null(bidder)", "true");
}

Test(expr, string_functions)
{
    expect("lower(trim(city))", "portland");
    expect("upper(city)", "  PORTLAND ");
    expect("length(city)", "11");
    expect("concat(trim(city), '/', auction, '/', note)", "Portland/246/");
    expect("substr(trim(city), 0, 4)", "Port");
    expect("substr('abc', 5)", "");
    expect("substr('abc', 1)", "bc");
    expect("contains(city, 'land')", "true");
    expect("contains(city, '')", "true");
    expect("contains(city, 'Portland ')", "true"); /* at the very end */
    expect("contains(city, '  P')", "true");       /* at the start */
    expect("contains(city, 'and  ')", "false");
    expect("contains(city, 'Portlant')", "false");
    expect("starts_with(trim(city), 'Port')", "true");
    expect("ends_with(city, 'x')", "false");
    expect("matches(city, '^ +P[a-z]+ $')", "true");
    expect("matches('a.b', 'a\\.b')", "true");
    expect("matches('axb', 'a\\.b')", "false");
    expect("contains(note, 'x')", "<null>");
    expect("string(3.25)", "3.25");
    expect("int('42') + 1", "43");
    expect("int(2.9)", "2");
    expect("float('1') / 4", "0.25");
    expect("abs(-3)", "3");
    expect("if(price > 100, 'high', 'low')", "high");
}

Test(expr, time_functions)
{
    expect("tumble_start(ts, 10000)", "1700000010000");
    expect("tumble_start(-1, 10)", "-10");
    expect("date(ts)", "2023-11-14");
    expect("datetime(ts)", "2023-11-14T22:13:32.345Z");
    expect("hour(ts)", "22");
}

Test(expr, reads_lists_the_fields)
{
    eddy_err_t err = {{0}};
    eddy_expr_t *e = eddy_expr_new("price > 1 and contains(city, 'x') or price < 0", fields,
                                   N_FIELDS, &err);
    cr_assert(e, "%s", err.msg);
    cr_assert_eq(eddy_expr_reads(e), (1u << 2) | (1u << 3));
    cr_assert_str_eq(eddy_expr_text(e), "price > 1 and contains(city, 'x') or price < 0");
    eddy_expr_destroy(&e);
    e = eddy_expr_new("1 + 2", fields, N_FIELDS, &err);
    cr_assert_eq(eddy_expr_reads(e), 0);
    eddy_expr_destroy(&e);
}

Test(expr, errors_name_the_column)
{
    expect_error("prise > 1", "column 1: unknown field 'prise'");
    expect_error("price >", "column 8: unexpected end of expression");
    expect_error("price = 1", "column 7: '=' is not a comparison: use '=='");
    expect_error("lowr(city)", "column 1: unknown function 'lowr'");
    expect_error("lower(city, 1)", "lower() takes 1 argument, not 2");
    expect_error("substr(city)", "substr() takes 2 to 3 arguments, not 1");
    expect_error("matches(city, note)", "needs a string literal");
    expect_error("matches(city, '(')", "bad regular expression");
    expect_error("'abc", "column 1: unterminated string");
    expect_error("(1 + 2", "expected ')'");
    expect_error("1 2", "column 3: unexpected '2'");
    expect_error("", "empty expression");
    expect_error("99999999999999999999", "integer out of range");
    expect_error("12abc", "malformed number");
    expect_error("price $ 2", "unexpected '$'");
}

Test(expr, deep_nesting_is_refused_not_a_crash)
{
    size_t n = 100000;
    char *text = malloc(2 * n + 2);
    memset(text, '(', n);
    text[n] = '1';
    memset(text + n + 1, ')', n);
    text[2 * n + 1] = '\0';
    expect_error(text, "nested too deeply");
    memset(text, '-', n);
    expect_error(text, "nested too deeply");
    for (size_t i = 0; i < n; i += 4)
        memcpy(text + i, "not ", 4);
    expect_error(text, "nested too deeply");
    free(text);
}

Test(expr, random_text_never_crashes)
{
    static const char alphabet[] = "()'\"\\ +-*/%<>=!&|,.0123456789eabcdnotpriceifnull_";
    srand(7);
    char text[64];
    unsigned parsed = 0;
    for (int i = 0; i < 20000; i++) {
        size_t len = (size_t)(rand() % 40);
        for (size_t j = 0; j < len; j++)
            text[j] = alphabet[rand() % (int)(sizeof alphabet - 1)];
        text[len] = '\0';
        eddy_err_t err = {{0}};
        eddy_expr_t *e = eddy_expr_new(text, fields, N_FIELDS, &err);
        if (e) {
            parsed++;
            eddy_val_t v = eddy_expr_eval(e, row);
            (void)v;
        } else {
            cr_assert(err.msg[0], "'%s' failed without a message", text);
        }
        eddy_expr_destroy(&e);
    }
    cr_log_info("%u of 20000 random texts parsed", parsed);
}

Test(expr, values_compare_and_format)
{
    eddy_val_t a = eddy_val_int(2), b = eddy_val_float(2.5), s = eddy_val_str("x", 1);
    eddy_val_t n = eddy_val_null(), t = eddy_val_bool(true);
    cr_assert_lt(eddy_val_compare(&a, &b), 0);
    cr_assert_gt(eddy_val_compare(&s, &b), 0);
    cr_assert_lt(eddy_val_compare(&n, &t), 0);
    cr_assert_lt(eddy_val_compare(&t, &a), 0);
    cr_assert_eq(eddy_val_compare(&a, &a), 0);
    char buf[32];
    eddy_val_t f = eddy_val_float(0.1);
    eddy_val_format(&f, buf, sizeof buf);
    cr_assert_str_eq(buf, "0.1");
    cr_assert_eq(eddy_val_format(&s, buf, 1), 1); /* the length it needs */
    cr_assert_str_eq(buf, "");
}

/* Numeric text: the fast path for plain decimal ints must agree with the
 * general one (strtoll/strtod) at its edges. */
Test(expr, numeric_text_reads_as_the_general_parser_does)
{
    struct {
        const char *text;
        bool ok, is_int;
        int64_t i;
        double f;
    } cases[] = {
        {"0", true, true, 0, 0},
        {"-0", true, true, 0, 0},
        {"+42", true, true, 42, 0},
        {"007", true, true, 7, 0},
        {"-123456789012345678", true, true, -123456789012345678, 0},  /* 18 digits */
        {"9223372036854775807", true, true, INT64_MAX, 0},           /* 19: strtoll */
        {"-9223372036854775808", true, true, INT64_MIN, 0},
        {"9223372036854775808", true, false, 0, 9223372036854775808.0}, /* overflow: a float */
        {"1.5", true, false, 0, 1.5},
        {"1e3", true, false, 0, 1000},
        {"-", false, false, 0, 0},
        {"+", false, false, 0, 0},
        {"", false, false, 0, 0},
        {" 1", false, false, 0, 0},
        {"1 ", false, false, 0, 0},
        {"12a", false, false, 0, 0},
        {"0x10", true, false, 0, 16}, /* strtod reads hex, as it always did */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        eddy_val_t v = eddy_val_str(cases[k].text, strlen(cases[k].text));
        bool is_int = false;
        int64_t i = -1;
        double f = -1;
        bool ok = eddy_val_number(&v, &is_int, &i, &f);
        cr_expect_eq(ok, cases[k].ok, "'%s': number %d", cases[k].text, ok);
        if (!ok || !cases[k].ok)
            continue;
        cr_expect_eq(is_int, cases[k].is_int, "'%s': int %d", cases[k].text, is_int);
        if (cases[k].is_int)
            cr_expect_eq(i, cases[k].i, "'%s': %lld", cases[k].text, (long long)i);
        else
            cr_expect_eq(f, cases[k].f, "'%s': %g", cases[k].text, f);
    }
}

Test(expr, ints_format_like_printf)
{
    int64_t ints[] = {0, 7, -7, 10, 1700000012345, INT64_MAX, INT64_MIN};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        char want[32], got[32];
        snprintf(want, sizeof want, "%lld", (long long)ints[k]);
        eddy_val_t v = eddy_val_int(ints[k]);
        cr_expect_eq(eddy_val_format(&v, got, sizeof got), strlen(want));
        cr_expect_str_eq(got, want);
        /* Cut short like snprintf, and the length it needs still told. */
        cr_expect_eq(eddy_val_format(&v, got, 2), strlen(want));
        cr_expect_eq(got[0], want[0]);
        cr_expect_eq(got[1], '\0');
        cr_expect_eq(eddy_val_format(&v, NULL, 0), strlen(want));
    }
}

Test(expr, static_types_for_spec_checks)
{
    static const char *const fields[] = {"a", "b"};
    static const struct {
        const char *text;
        eddy_val_type_t want;
    } cases[] = {{"a > 1", EDDY_VAL_BOOL},     {"a and not b", EDDY_VAL_BOOL},
                 {"contains(a, 'x')", EDDY_VAL_BOOL}, {"a + 1", EDDY_VAL_FLOAT},
                 {"-a", EDDY_VAL_FLOAT},       {"length(a)", EDDY_VAL_FLOAT},
                 {"lower(a)", EDDY_VAL_STR},   {"'x'", EDDY_VAL_STR},
                 {"a", EDDY_VAL_NULL},         {"if(a, 1, 'x')", EDDY_VAL_NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eddy_err_t err = {{0}};
        eddy_expr_t *e = eddy_expr_new(cases[i].text, fields, 2, &err);
        cr_assert(e, "%s: %s", cases[i].text, err.msg);
        cr_assert_eq(eddy_expr_static_type(e), cases[i].want, "%s", cases[i].text);
        eddy_expr_destroy(&e);
    }
}
