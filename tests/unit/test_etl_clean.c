/* test_etl_clean.c - the etl job's cleaning rules (operators/etl_clean.c):
 * trim, case, every accepted date form and its rejections, numbers with
 * thousands and decimal separators and their rejections. */
#include <criterion/criterion.h>
#include <string.h>

#include "operators/etl_clean.h"
#include "tests/unit/leak_check.h"

TestSuite(etl_clean, .fini = eddy_test_leak_check);

static eddy_err_t err;

static void date_is(const char *in, bool date_only, const char *want)
{
    char out[EDDY_ETL_DATE_MAX];
    memset(&err, 0, sizeof err);
    cr_assert_eq(eddy_etl_date(in, date_only, out, &err), 0, "'%s': %s", in, err.msg);
    cr_assert_str_eq(out, want, "'%s'", in);
}

static void not_date(const char *in)
{
    char out[EDDY_ETL_DATE_MAX];
    memset(&err, 0, sizeof err);
    cr_assert_eq(eddy_etl_date(in, false, out, &err), -1, "'%s' was accepted as %s", in, out);
    cr_assert(strstr(err.msg, "date"), "%s", err.msg);
}

static void number_is(const char *in, const char *want)
{
    char out[128];
    memset(&err, 0, sizeof err);
    cr_assert_eq(eddy_etl_number(in, out, &err), 0, "'%s': %s", in, err.msg);
    cr_assert_str_eq(out, want, "'%s'", in);
}

static void not_number(const char *in)
{
    char out[128];
    memset(&err, 0, sizeof err);
    cr_assert_eq(eddy_etl_number(in, out, &err), -1, "'%s' was accepted as %s", in, out);
    cr_assert(strstr(err.msg, "not a number"), "%s", err.msg);
}

Test(etl_clean, trim)
{
    const char *s;
    cr_assert_eq(eddy_etl_trim("  a b\t\r\n", 8, &s), 3);
    cr_assert_eq(strncmp(s, "a b", 3), 0);
    cr_assert_eq(eddy_etl_trim(" \t ", 3, &s), 0);
    cr_assert_eq(eddy_etl_trim("x", 1, &s), 1);
}

Test(etl_clean, case_is_ascii_only)
{
    char a[] = "MiXeD Ünï 42", b[] = "MiXeD ünï 42";
    eddy_etl_lower(a);
    cr_assert_str_eq(a, "mixed Ünï 42");
    eddy_etl_upper(b);
    cr_assert_str_eq(b, "MIXED üNï 42");
}

Test(etl_clean, iso_dates)
{
    date_is("2024-02-29", false, "2024-02-29T00:00:00Z");
    date_is("2024-02-29", true, "2024-02-29");
    date_is(" 2024-03-01T12:34:56Z ", false, "2024-03-01T12:34:56Z");
    date_is("2024-03-01T12:34", false, "2024-03-01T12:34:00Z");
    date_is("2024-03-01 12:34:56.789", false, "2024-03-01T12:34:56Z");
    date_is("2024-03-01T01:30:00+02:00", false, "2024-02-29T23:30:00Z");
    date_is("2024-03-01T01:30:00+0200", true, "2024-02-29");
    date_is("2023-12-31T23:00:00-01", false, "2024-01-01T00:00:00Z");
}

Test(etl_clean, other_forms)
{
    date_is("2024/07/04", false, "2024-07-04T00:00:00Z");
    date_is("2024/07/04 08:09:10", false, "2024-07-04T08:09:10Z");
    date_is("04.07.2024", true, "2024-07-04");
    date_is("04.07.2024 23:59", false, "2024-07-04T23:59:00Z");
}

Test(etl_clean, epoch_seconds_and_milliseconds)
{
    date_is("0", false, "1970-01-01T00:00:00Z");
    date_is("1700000000", false, "2023-11-14T22:13:20Z");
    date_is("1700000000123", false, "2023-11-14T22:13:20Z");
    date_is("-1", false, "1969-12-31T23:59:59Z");
    date_is("-1500", false, "1969-12-31T23:35:00Z");
    date_is("99999999999", true, "5138-11-16");
}

Test(etl_clean, bad_dates)
{
    not_date("");
    not_date("2023-02-29");
    not_date("2024-13-01");
    not_date("2024-00-10");
    not_date("2024-01-32");
    not_date("2024-1-5");
    not_date("2024-01-01T24:00:00");
    not_date("2024-01-01T10:60");
    not_date("2024-01-01T10:00:00+25:00");
    not_date("2024-01-01X10:00");
    not_date("2024/01/01T10:00");
    not_date("31.04.2024");
    not_date("yesterday");
    not_date("12ab");
    not_date("2024-01-01T10:00:00Z junk");
    not_date("99999999999999999"); /* ms beyond year 9999 */
}

Test(etl_clean, numbers)
{
    number_is("42", "42");
    number_is(" -42 ", "-42");
    number_is("+007", "7");
    number_is("1,234", "1234");
    number_is("1,234,567.50", "1234567.5");
    number_is("1.234.567,50", "1234567.5");
    number_is("1 234,5", "1234.5");
    number_is("1_000_000", "1000000");
    number_is("1'000", "1000");
    number_is("3,5", "3.5");
    number_is("12.345", "12.345");
    number_is("1,2345", "1.2345");
    number_is(".5", "0.5");
    number_is(",5", "0.5");
    number_is("5.", "5");
    number_is("-0.000", "0");
    number_is("0,000", "0");
    number_is("100.00", "100");
}

Test(etl_clean, bad_numbers)
{
    not_number("");
    not_number("-");
    not_number(".");
    not_number("abc");
    not_number("1e5");
    not_number("12,34,567");
    not_number("1,23,456.7");
    not_number("1.234,567.8");
    not_number("1,,234");
    not_number("1 234_567");
    not_number("1.2.3,4.5");
    not_number("--1");
    not_number("1-");
    not_number("0x1F");
}
