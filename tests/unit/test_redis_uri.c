/* test_redis_uri.c - redis:// source/sink addresses and stream ids. */
#include <criterion/criterion.h>
#include <string.h>

#include "connectors/redis/redis_conn.h"
#include "connectors/redis/redis_uri.h"

Test(redis_uri, one_stream)
{
    eddy_redis_uri_t u;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_redis_uri_parse("redis://127.0.0.1:6379/events", &u, &err), 0, "%s", err.msg);
    cr_assert_str_eq(u.host, "127.0.0.1");
    cr_assert_eq(u.port, 6379);
    cr_assert_eq(u.n_streams, 1);
    cr_assert_str_eq(u.streams[0], "events");
    cr_assert(!u.bounded);
    cr_assert_str_eq(u.group, "");
}

Test(redis_uri, list_pattern_and_parameters)
{
    eddy_redis_uri_t u;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_redis_uri_parse("redis://redis.local:7000/a:1,events:*?bounded=latest&group=g1",
                                      &u, &err), 0, "%s", err.msg);
    cr_assert_str_eq(u.host, "redis.local");
    cr_assert_eq(u.port, 7000);
    cr_assert_eq(u.n_streams, 2);
    cr_assert_str_eq(u.streams[0], "a:1");
    cr_assert_str_eq(u.streams[1], "events:*");
    cr_assert(!eddy_redis_is_pattern(u.streams[0]));
    cr_assert(eddy_redis_is_pattern(u.streams[1]));
    cr_assert(u.bounded);
    cr_assert_str_eq(u.group, "g1");
}

Test(redis_uri, bad_uris_say_why)
{
    const struct {
        const char *uri, *why;
    } cases[] = {
        {"file:///x", "does not start with redis://"},
        {"redis://host/s", "HOST:PORT"},
        {"redis://:6379/s", "HOST:PORT"},
        {"redis://h:0/s", "1..65535"},
        {"redis://h:65536/s", "1..65535"},
        {"redis://h:12x/s", "1..65535"},
        {"redis://h:6379", "needs a stream"},
        {"redis://h:6379/", "needs a stream"},
        {"redis://h:6379/a,,b", "empty stream name"},
        {"redis://h:6379/a,a", "named twice"},
        {"redis://h:6379/a?bounded=earliest", "only value is 'latest'"},
        {"redis://h:6379/a?group=", "group name"},
        {"redis://h:6379/a?color=red", "unknown parameter 'color'"},
        {"redis://h:6379/a?bounded", "needs a value"},
        {"redis://h:6379/a?bounded=latest&", "trailing"},
        {"redis://h:6379/a/b", "cannot contain"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eddy_redis_uri_t u;
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_redis_uri_parse(cases[i].uri, &u, &err), -1, "%s parsed", cases[i].uri);
        cr_assert(strstr(err.msg, cases[i].why), "%s: '%s' lacks '%s'", cases[i].uri, err.msg,
                  cases[i].why);
        cr_assert(strstr(err.msg, cases[i].uri), "%s: the message names the URI: %s",
                  cases[i].uri, err.msg);
    }
}

Test(redis_uri, long_names_and_too_many_streams)
{
    char uri[EDDY_REDIS_NAME_MAX * 2 + 64];
    eddy_redis_uri_t u;
    eddy_err_t err = {{0}};
    int n = snprintf(uri, sizeof uri, "redis://h:1/");
    memset(uri + n, 'x', EDDY_REDIS_NAME_MAX);
    uri[n + EDDY_REDIS_NAME_MAX] = '\0';
    cr_assert_eq(eddy_redis_uri_parse(uri, &u, &err), -1);
    cr_assert(strstr(err.msg, "longer than"), "%s", err.msg);

    char many[EDDY_REDIS_MAX_STREAMS * 8 + 64];
    n = snprintf(many, sizeof many, "redis://h:1/");
    for (int i = 0; i <= EDDY_REDIS_MAX_STREAMS; i++)
        n += snprintf(many + n, sizeof many - (size_t)n, "%ss%d", i ? "," : "", i);
    cr_assert_eq(eddy_redis_uri_parse(many, &u, &err), -1);
    cr_assert(strstr(err.msg, "more than"), "%s", err.msg);
}

Test(redis_id, parse_format_compare)
{
    eddy_redis_id_t a, b, c;
    cr_assert_eq(eddy_redis_id_parse("1700000000000-5", 15, &a), 0);
    cr_assert_eq(a.ms, 1700000000000ull);
    cr_assert_eq(a.seq, 5);
    cr_assert_eq(eddy_redis_id_parse("1700000000000", 13, &b), 0);
    cr_assert_eq(b.seq, 0);
    cr_assert_eq(eddy_redis_id_parse("18446744073709551615-18446744073709551615", 41, &c), 0);
    cr_assert_lt(eddy_redis_id_cmp(b, a), 0);
    cr_assert_gt(eddy_redis_id_cmp(c, a), 0);
    cr_assert_eq(eddy_redis_id_cmp(a, a), 0);
    char buf[EDDY_REDIS_ID_TEXT];
    eddy_redis_id_format(c, buf, sizeof buf);
    cr_assert_str_eq(buf, "18446744073709551615-18446744073709551615");
    cr_assert_eq(eddy_redis_id_parse("x-1", 3, &a), -1);
    cr_assert_eq(eddy_redis_id_parse("1-", 2, &a), -1);
    cr_assert_eq(eddy_redis_id_parse("", 0, &a), -1);
}
