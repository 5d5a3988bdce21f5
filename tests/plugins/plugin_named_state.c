/* plugin_named_state.c - a job for tests/integration/test_named_state.c,
 * written against api/ only: a keyed process function whose count lives in
 * named state (api/state.h), in two versions of the same plugin.
 *
 *   file --input ==> split_words ==HASH(word)==> count (ns_count)
 *        ==GLOBAL==> table_file --output (word TAB count, at end of input)
 *
 * Version 1 (this file) keeps each word's count in the VALUE state "count",
 * schema version 1, as decimal text. Version 2 (plugin_named_state_v2.c,
 * this file with NAMED_STATE_V 2) keeps it as an int64, schema version 2,
 * migrating version 1's text, and adds the AGGREGATING state "chars" (the
 * bytes of the word seen since the upgrade, checked against the word's
 * length). NAMED_STATE_NO_MIGRATE leaves the migrate callback out
 * (plugin_named_state_nomigrate.c): a restore from version 1 is refused.
 * Each key's count is emitted by an event-time timer at the end of input.
 * Flags: --input FILE --output FILE [--rate R] [--parallelism P]. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/eddy.h"

#ifndef NAMED_STATE_V
#define NAMED_STATE_V 1
#endif

EDDY_PLUGIN_DECLARE();

/* The current key's count as state "count" holds it. */
static int64_t count_of(eddy_state_t *count)
{
    size_t len = 0;
    const char *v = eddy_state_get(count, &len);
    if (!v)
        return 0;
#if NAMED_STATE_V == 1
    char text[32];
    snprintf(text, sizeof text, "%.*s", (int)(len < 31 ? len : 31), v);
    return strtoll(text, NULL, 10);
#else
    int64_t n = 0;
    if (len == sizeof n)
        memcpy(&n, v, sizeof n);
    return len == sizeof n ? n : -1;
#endif
}

static int put_count(eddy_state_t *count, int64_t n)
{
#if NAMED_STATE_V == 1
    char text[32];
    int len = snprintf(text, sizeof text, "%" PRId64, n);
    return eddy_state_put(count, text, (size_t)len);
#else
    return eddy_state_put(count, &n, sizeof n);
#endif
}

static int count_process(eddy_process_context_t *ctx, const eddy_record_t *rec,
                         eddy_collector_t *out, eddy_err_t *err)
{
    (void)out;
    eddy_state_t *count = eddy_process_state(ctx, "count");
    int64_t n = count_of(count);
    if (n < 0)
        return eddy_err_set(err, "state count holds no int64");
    if (put_count(count, n + 1) < 0)
        return eddy_err_set(err, "out of memory");
#if NAMED_STATE_V >= 2
    if (eddy_state_add(eddy_process_state(ctx, "chars"), rec->data, rec->len) < 0)
        return eddy_err_set(err, "out of memory");
#else
    (void)rec;
#endif
    if (n == 0 && eddy_process_timer_register(ctx, EDDY_EVENT_TIME, EDDY_WATERMARK_MAX, "", 0) < 0)
        return eddy_err_set(err, "out of memory");
    return 0;
}

static int count_on_timer(eddy_process_context_t *ctx, eddy_time_domain_t domain, int64_t time,
                          const void *ns, uint32_t ns_len, eddy_collector_t *out, eddy_err_t *err)
{
    (void)domain;
    (void)ns;
    (void)ns_len;
    const char *key;
    uint32_t key_len = eddy_process_key(ctx, &key);
    int64_t n = count_of(eddy_process_state(ctx, "count"));
    if (n <= 0)
        return eddy_err_set(err, "word '%.*s': no count", (int)key_len, key);
#if NAMED_STATE_V >= 2
    size_t len = 0;
    const int64_t *chars = eddy_state_get(eddy_process_state(ctx, "chars"), &len);
    if (chars && (len != sizeof *chars || !key_len || *chars % key_len))
        return eddy_err_set(err, "word '%.*s': state chars is off", (int)key_len, key);
#endif
    eddy_record_t r = eddy_record_make(key, key_len, n);
    r.timestamp = time;
    eddy_emit(out, &r);
    return 0;
}

#if NAMED_STATE_V >= 2 && !defined(NAMED_STATE_NO_MIGRATE)
/* Version 1's decimal text as version 2's int64. */
static int count_migrate(uint32_t from_version, const void *old, size_t old_len, char **out,
                         size_t *out_len, eddy_err_t *err)
{
    char text[32];
    if (from_version != 1 || old_len == 0 || old_len > 20)
        return eddy_err_set(err, "cannot migrate a count of version %u", from_version);
    snprintf(text, sizeof text, "%.*s", (int)old_len, (const char *)old);
    int64_t n = strtoll(text, NULL, 10);
    if (!(*out = malloc(sizeof n)))
        return eddy_err_set(err, "out of memory");
    memcpy(*out, &n, sizeof n);
    *out_len = sizeof n;
    return 0;
}
#endif

#if NAMED_STATE_V >= 2
static void chars_add(void *acc, const void *in, size_t in_len)
{
    (void)in;
    *(int64_t *)acc += (int64_t)in_len;
}
#endif

static const eddy_state_desc_t states[] = {
#if NAMED_STATE_V == 1
    {.name = "count", .kind = EDDY_STATE_VALUE, .version = 1},
#else
#ifdef NAMED_STATE_NO_MIGRATE
    {.name = "count", .kind = EDDY_STATE_VALUE, .version = 2},
#else
    {.name = "count", .kind = EDDY_STATE_VALUE, .version = 2, .migrate = count_migrate},
#endif
    {.name = "chars", .kind = EDDY_STATE_AGGREGATING, .version = 1, .acc_size = sizeof(int64_t),
     .add = chars_add},
#endif
};

static const eddy_process_udf_t ns_count = {.process = count_process, .on_timer = count_on_timer,
                                            .states = states,
                                            .n_states = sizeof states / sizeof states[0]};

static int build(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    const char *input = NULL, *output = NULL, *rate = NULL;
    long parallelism = 2;
    for (int i = 0; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--input"))
            input = argv[i + 1];
        else if (!strcmp(argv[i], "--output"))
            output = argv[i + 1];
        else if (!strcmp(argv[i], "--rate"))
            rate = argv[i + 1];
        else if (!strcmp(argv[i], "--parallelism"))
            parallelism = strtol(argv[i + 1], NULL, 10);
        else
            return eddy_err_set(err, "test_named_state: unknown flag %s", argv[i]);
    }
    if (argc % 2 || !input || !output || parallelism < 1 || parallelism > 16)
        return eddy_err_set(err, "usage: --input FILE --output FILE [--rate R] [--parallelism 1..16]");
    eddy_builder_set_default_parallelism(b, (uint32_t)parallelism);
    eddy_config_t *src = eddy_config_new();
    eddy_config_t *out = eddy_config_new();
    if (!src || !out) {
        eddy_config_destroy(&src);
        eddy_config_destroy(&out);
        return eddy_err_set(err, "out of memory");
    }
    eddy_config_set_str(src, "path", input);
    if (rate)
        eddy_config_set_str(src, "rate", rate);
    eddy_config_set_str(out, "path", output);
    eddy_stream_t lines = eddy_set_parallelism(eddy_source(b, "source", "file", src), 1);
    eddy_stream_t words = eddy_flat_map(lines, "split", "split_words", NULL);
    eddy_stream_t counts = eddy_process(eddy_key_by(words, "whole_record"), "count", "ns_count", NULL);
    eddy_set_parallelism(eddy_sink(eddy_global(counts), "sink", "table_file", out), 1);
    return 0;
}

static const eddy_job_kind_t job = {.name = "test_named_state",
                                    .summary = "word counts in named state (tests)",
                                    .usage = "--input FILE --output FILE [--rate R]", .build = build};

int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);
int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
{
    (void)abi_version;
    if (eddy_register_process(r, "ns_count", &ns_count, err) < 0)
        return -1;
    return eddy_register_job(r, &job, err);
}
