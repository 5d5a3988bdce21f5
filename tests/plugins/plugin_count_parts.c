/* plugin_count_parts.c - a job for tests/integration/test_recovery_commit.c,
 * written against api/ only: keyed state and an appending two-phase-commit
 * sink, which no built-in job combines.
 *
 *   file --input ==> split_words ==HASH(word)==> count (sum, changelog)
 *        ==GLOBAL==> format ("+U[word, n]") -> part_file --output-dir
 *
 * Every update of a count is one output line ("+U[word, n]"), published per
 * completed checkpoint, so a replay published twice shows as repeated
 * lines. Flags: --input FILE --output-dir DIR [--rate R] [--parallelism P]. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/plugin.h"

EDDY_PLUGIN_DECLARE();

/* A count update as one line of text, as the changelog sink prints it. */
static void *format_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)ctx;
    (void)err;
    return (void *)1;
}

static int format_process(void *self, const eddy_record_t *rec, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self;
    static const char *const kinds[] = {"+I", "-U", "+U", "-D"};
    char line[512];
    int n = snprintf(line, sizeof line, "%s[%.*s, %" PRId64 "]", rec->kind <= 3 ? kinds[rec->kind] : "?",
                     (int)(rec->len < 400 ? rec->len : 400), rec->data, rec->value);
    if (n < 0)
        return eddy_err_set(err, "cannot format a record");
    eddy_record_t r = *rec;
    r.data = line;
    r.len = (uint32_t)n;
    r.kind = 0;
    eddy_emit(out, &r);
    return 0;
}

static const eddy_operator_ops_t format_ops = {.kind = "test_format_update", .open = format_open,
                                               .process = format_process};
static const eddy_operator_kind_t format_kind = {.name = "test_format_update", .ops = &format_ops};

static int build(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    const char *input = NULL, *output = NULL, *rate = NULL;
    long parallelism = 2;
    for (int i = 0; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--input"))
            input = argv[i + 1];
        else if (!strcmp(argv[i], "--output-dir"))
            output = argv[i + 1];
        else if (!strcmp(argv[i], "--rate"))
            rate = argv[i + 1];
        else if (!strcmp(argv[i], "--parallelism"))
            parallelism = strtol(argv[i + 1], NULL, 10);
        else
            return eddy_err_set(err, "test_count_parts: unknown flag %s", argv[i]);
    }
    if (argc % 2 || !input || !output || parallelism < 1 || parallelism > 16)
        return eddy_err_set(err, "usage: --input FILE --output-dir DIR [--rate R] [--parallelism 1..16]");
    eddy_builder_set_default_parallelism(b, (uint32_t)parallelism);
    eddy_config_t *src = eddy_config_new();
    eddy_config_t *sum = eddy_config_new();
    eddy_config_t *out = eddy_config_new();
    if (!src || !sum || !out) {
        eddy_config_destroy(&src);
        eddy_config_destroy(&sum);
        eddy_config_destroy(&out);
        return eddy_err_set(err, "out of memory");
    }
    eddy_config_set_str(src, "path", input);
    if (rate)
        eddy_config_set_str(src, "rate", rate);
    eddy_config_set_str(sum, "emit", "changelog");
    eddy_config_set_str(out, "directory", output);
    eddy_stream_t lines = eddy_source(b, "source", "file", src);
    eddy_stream_t words = eddy_flat_map(lines, "split", "split_words", NULL);
    eddy_stream_t counts = eddy_aggregate(eddy_key_by(words, "whole_record"), "count", "sum", sum);
    eddy_stream_t lines_out = eddy_set_parallelism(eddy_map(eddy_global(counts), "format", "test_format_update", NULL), 1);
    eddy_set_parallelism(eddy_sink(lines_out, "sink", "part_file", out), 1);
    return 0;
}

static const eddy_job_kind_t job = {.name = "test_count_parts",
                                    .summary = "keyed counts into part files (tests)",
                                    .usage = "--input FILE --output-dir DIR [--rate R]", .build = build};

int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);
int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
{
    (void)abi_version;
    if (eddy_register_operator(r, &format_kind, err) < 0)
        return -1;
    return eddy_register_job(r, &job, err);
}
