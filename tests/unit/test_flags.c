/* test_flags.c - the flag parser's typed, ranged numeric flags (common/flags.h).
 *
 * Why: a value checked as 64-bit and stored into 32 bits became 0
 * (--vocabulary 4294967296) and crashed every worker; each kind must accept
 * exactly its range and name the flag when it refuses a value. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "common/flags.h"
#include "tests/unit/leak_check.h"

TestSuite(flags, .fini = eddy_test_leak_check);

typedef struct parsed {
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    double d;
    bool on;
    const char *s;
} parsed_t;

/* Parses one "--name value" pair into p; 0, or -1 with err. */
static int parse(parsed_t *p, const char *name, const char *value, eddy_err_t *err)
{
    eddy_flag_t flags[] = {
        EDDY_FLAG_U32("u32", &p->u32, 1, UINT32_MAX, "N", ""),
        EDDY_FLAG_U32("port", &p->u32, 1, EDDY_FLAG_PORT_MAX, "PORT", ""),
        EDDY_FLAG_U64("u64", &p->u64, 0, UINT64_MAX, "N", ""),
        EDDY_FLAG_I64("i64", &p->i64, -1000, 1000, "N", ""),
        EDDY_FLAG_F64("f64", &p->d, 0, 1e6, "X", ""),
        EDDY_FLAG_SWITCH("on", &p->on, ""),
        EDDY_FLAG_STR("s", &p->s, "S", ""),
        EDDY_FLAG_END,
    };
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", name);
    char *argv[] = {flag, (char *)value};
    return eddy_flags_parse(flags, value ? 2 : 1, argv, NULL, NULL, err);
}

static void refused(const char *name, const char *value, const char *message)
{
    parsed_t p = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(parse(&p, name, value, &err), -1, "--%s %s was accepted", name, value);
    cr_assert(strstr(err.msg, message), "--%s %s: '%s' lacks '%s'", name, value, err.msg, message);
}

Test(flags, uint32_takes_exactly_its_range)
{
    parsed_t p = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(parse(&p, "u32", "4294967295", &err), 0, "%s", err.msg);
    cr_assert_eq(p.u32, UINT32_MAX);
    refused("u32", "4294967296", "--u32: 4294967296 is out of range 1..4294967295");
    refused("u32", "0", "--u32: 0 is out of range 1..4294967295");
    refused("u32", "-1", "--u32: -1 is out of range");
    refused("u32", "99999999999999999999999", "out of range");
    refused("u32", "12abc", "--u32: expected a whole number, got '12abc'");
    refused("u32", "", "expected a whole number");
    refused("port", "65536", "--port: 65536 is out of range 1..65535");
}

Test(flags, uint64_and_int64_ranges)
{
    parsed_t p = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(parse(&p, "u64", "18446744073709551615", &err), 0, "%s", err.msg);
    cr_assert_eq(p.u64, UINT64_MAX);
    refused("u64", "18446744073709551616", "out of range 0..18446744073709551615");
    cr_assert_eq(parse(&p, "i64", "-1000", &err), 0, "%s", err.msg);
    cr_assert_eq(p.i64, -1000);
    refused("i64", "1001", "--i64: 1001 is out of range -1000..1000");
    refused("i64", "-99999999999999999999", "out of range");
    refused("i64", "1e3", "expected a whole number");
}

Test(flags, double_is_finite_and_bounded)
{
    parsed_t p = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(parse(&p, "f64", "2.5", &err), 0, "%s", err.msg);
    cr_assert_float_eq(p.d, 2.5, 1e-12);
    refused("f64", "1e300", "--f64: 1e300 is out of range 0..1e+06");
    refused("f64", "1e400", "out of range");
    refused("f64", "inf", "out of range");
    refused("f64", "-0.5", "out of range");
    refused("f64", "nan", "expected a number");
    refused("f64", "1.5x", "expected a number");
}

Test(flags, equals_form_switches_and_strings)
{
    parsed_t p = {0};
    eddy_err_t err = {{0}};
    eddy_flag_t flags[] = {EDDY_FLAG_U32("n", &p.u32, 1, 10, "N", ""),
                           EDDY_FLAG_SWITCH("on", &p.on, ""), EDDY_FLAG_STR("s", &p.s, "S", ""),
                           EDDY_FLAG_END};
    char *argv[] = {"--n=7", "--on", "--s", "x"};
    cr_assert_eq(eddy_flags_parse(flags, 4, argv, NULL, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(p.u32, 7);
    cr_assert(p.on && !strcmp(p.s, "x") && flags[0].seen);
    char *bad[] = {"--n=11"};
    cr_assert_eq(eddy_flags_parse(flags, 1, bad, NULL, NULL, &err), -1);
    cr_assert(strstr(err.msg, "--n: 11 is out of range 1..10"), "%s", err.msg);
    refused("u32", NULL, "--u32 needs a value");
}

Test(flags, positional_values_use_the_same_ranges)
{
    uint64_t v = 0;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_parse_uint_in("PARALLELISM", "4", 1, 8, &v, &err), 0);
    cr_assert_eq(v, 4);
    cr_assert_eq(eddy_parse_uint_in("PARALLELISM", "9", 1, 8, &v, &err), -1);
    cr_assert(strstr(err.msg, "PARALLELISM: 9 is out of range 1..8"), "%s", err.msg);
}
