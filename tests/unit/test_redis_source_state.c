/* test_redis_source_state.c - the Redis source's state bytes and its
 * non-blocking poll, with no Redis to talk to (port 1 refuses): restored
 * ids come back out of write_state unchanged before Redis ever answers,
 * malformed state is refused with a clear error, and poll() returns idle
 * at once rather than waiting for the connection. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "connectors/redis/redis.h"

#define MAGIC "eddy-redis-source 1\n"

static void *open_with(const char *uri_text, uint32_t instance, uint32_t parallelism,
                       const char *state, eddy_err_t *err)
{
    static eddy_redis_uri_t uri;
    cr_assert_eq(eddy_redis_uri_parse(uri_text, &uri, err), 0, "%s", err->msg);
    eddy_op_context_t ctx = {.job_id = "t", .instance = instance, .parallelism = parallelism,
                             .config = &uri, .source_state = state,
                             .source_state_len = state ? strlen(state) : 0};
    return eddy_redis_source_ops.open(&ctx, -1, err);
}

Test(redis_source_state, restored_ids_survive_a_checkpoint_before_redis_answers)
{
    const char *state = MAGIC "s1\t5-1\t-\t7\n"
                              "s2\t9-0\t12-3\t4\n";
    eddy_err_t err = {{0}};
    void *s = open_with("redis://127.0.0.1:1/s1,s2", 0, 1, state, &err);
    cr_assert(s, "%s", err.msg);
    char *out = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_redis_source_ops.write_state(s, &out, &len, &err), 0, "%s", err.msg);
    cr_assert_eq(len, strlen(state));
    cr_assert(!memcmp(out, state, len), "state changed: %.*s", (int)len, out);
    free(out);
    eddy_redis_source_ops.close(s);
}

Test(redis_source_state, instances_keep_only_their_streams)
{
    eddy_err_t err = {{0}};
    /* Listed streams go by their place: a, c to instance 0; b to 1. */
    void *s0 = open_with("redis://127.0.0.1:1/a,b,c", 0, 2, NULL, &err);
    void *s1 = open_with("redis://127.0.0.1:1/a,b,c", 1, 2, NULL, &err);
    cr_assert(s0 && s1, "%s", err.msg);
    char *out = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_redis_source_ops.write_state(s0, &out, &len, &err), 0);
    cr_assert_str_eq(out, MAGIC "a\t0-0\t-\t0\nc\t0-0\t-\t0\n");
    free(out);
    cr_assert_eq(eddy_redis_source_ops.write_state(s1, &out, &len, &err), 0);
    cr_assert_str_eq(out, MAGIC "b\t0-0\t-\t0\n");
    free(out);
    eddy_redis_source_ops.close(s0);
    eddy_redis_source_ops.close(s1);
}

Test(redis_source_state, malformed_state_is_refused)
{
    const struct {
        const char *state, *why;
    } cases[] = {
        {"garbage", "not a redis source's state"},
        {MAGIC "s1\t1-1\n", "malformed line"},
        {MAGIC "s1\tx-1\t-\t0\n", "bad id"},
        {MAGIC "s1\t1-1\t2-x\t0\n", "bad end id"},
        {MAGIC "s1\t1-1\t-\tmany\n", "bad entry count"},
        {MAGIC "s1\t1-1\t-\t0", "truncated"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eddy_err_t err = {{0}};
        void *s = open_with("redis://127.0.0.1:1/s1", 0, 1, cases[i].state, &err);
        cr_assert_null(s, "accepted: %s", cases[i].state);
        cr_assert(strstr(err.msg, cases[i].why), "'%s' lacks '%s'", err.msg, cases[i].why);
    }
}

static void discard(eddy_collector_t *self, const eddy_record_t *rec)
{
    (void)self;
    (void)rec;
    cr_assert_fail("a record from an unreachable Redis");
}

Test(redis_source_state, poll_is_idle_at_once_while_redis_is_unreachable)
{
    eddy_err_t err = {{0}};
    void *s = open_with("redis://127.0.0.1:1/s1?bounded=latest", 0, 1, NULL, &err);
    cr_assert(s, "%s", err.msg);
    eddy_collector_t out = {discard};
    uint64_t start = eddy_mono_ms();
    for (int i = 0; i < 100; i++)
        cr_assert_eq(eddy_redis_source_ops.poll(s, &out, 1000, &err), EDDY_SOURCE_IDLE);
    /* 100 polls: no connect or command on the caller's thread. */
    cr_assert_lt(eddy_mono_ms() - start, 500);
    eddy_redis_source_ops.close(s);
}
