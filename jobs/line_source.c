/* line_source.c - choosing a built-in job's line source (see line_source.h). */
#include "jobs/line_source.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/flags.h"
#include "connectors/redis/redis_uri.h"

int eddy_parse_host_port(const char *text, char *host, size_t host_size, uint16_t *port,
                         eddy_err_t *err)
{
    const char *colon = strrchr(text, ':');
    uint64_t p;
    if (!colon || colon == text || (size_t)(colon - text) >= host_size ||
        eddy_parse_uint(colon + 1, &p) < 0 || p == 0 || p > 65535)
        return eddy_err_set(err, "expected HOST:PORT, got '%s'", text);
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    *port = (uint16_t)p;
    return 0;
}

int eddy_input_parse(const char *input, const char **kind, const char **path, eddy_err_t *err)
{
    static const struct {
        const char *prefix, *kind;
    } schemes[] = {{"file://", "file"}, {"dir://", "dir"}};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i].prefix);
        if (strncmp(input, schemes[i].prefix, n))
            continue;
        if (input[n] != '/')
            return eddy_err_set(err, "expected %s/ABSOLUTE/PATH (three slashes), got '%s'",
                                schemes[i].prefix, input);
        *kind = schemes[i].kind;
        *path = input + n;
        return 0;
    }
    const char *sep = strstr(input, "://");
    if (sep && sep != input && !memchr(input, '/', (size_t)(sep - input)))
        return eddy_err_set(err, "unknown input '%s': expected a path, file:///PATH, dir:///PATH "
                            "or redis://HOST:PORT/STREAM", input);
    *kind = "file";
    *path = input;
    return 0;
}

int eddy_line_source_check(const char *job, const char *input, const char *socket, bool generate,
                           eddy_err_t *err)
{
    if ((input != NULL) + (socket != NULL) + generate != 1)
        return eddy_err_set(err, "%s needs exactly one of --input FILE, --socket HOST:PORT, --generate",
                            job);
    const char *kind, *path;
    if (input && !eddy_redis_uri_is(input) && eddy_input_parse(input, &kind, &path, err) < 0)
        return eddy_err_wrap(err, "--input");
    return 0;
}

int eddy_job_rate_parse(eddy_rate_schedule_t *rate, const char *text, eddy_err_t *err)
{
    if (eddy_rate_parse(rate, text, err) < 0)
        return -1;
    for (uint32_t i = 0; i < rate->steps; i++) {
        if (rate->rate[i] > EDDY_JOB_MAX_RATE)
            return eddy_err_set(err, "%g lines/s is out of range 0..%g", rate->rate[i],
                                EDDY_JOB_MAX_RATE);
        if (rate->at_s[i] > EDDY_JOB_MAX_RATE_AT_S)
            return eddy_err_set(err, "a step at %g s is out of range 0..%g s", rate->at_s[i],
                                EDDY_JOB_MAX_RATE_AT_S);
    }
    return 0;
}

uint32_t eddy_line_source_parallelism(const eddy_line_source_flags_t *f)
{
    return f->socket ? 1 : f->parallelism;
}

eddy_stream_t eddy_job_sink_add(eddy_stream_t s, const char *output, const char *file_kind,
                                eddy_config_t *file_config)
{
    eddy_err_t err = {{0}};
    if (!eddy_redis_uri_is(output))
        return eddy_sink(s, "sink", file_kind, file_config);
    eddy_config_destroy(&file_config);
    eddy_redis_uri_t uri;
    eddy_job_builder_t *b = s.builder;
    if (eddy_redis_uri_parse(output, &uri, &err) < 0)
        eddy_builder_fail(b, "--output: %s", err.msg);
    else if (uri.n_streams != 1 || eddy_redis_is_pattern(uri.streams[0]) || uri.bounded ||
             uri.group[0])
        eddy_builder_fail(b, "--output %s: a Redis sink takes one stream name, no parameters",
                          output);
    eddy_config_t *cfg = eddy_config_new();
    if (cfg && eddy_config_set_str(cfg, "uri", output) < 0)
        eddy_builder_fail(b, "--output URI is too long");
    return eddy_sink(s, "sink", "redis", cfg);
}

void eddy_job_rows_table_add(eddy_stream_t rows, const char *path, bool combine,
                             const char *collect_uid, const char *sink_uid)
{
    eddy_config_t *cc = eddy_config_new(), *out = eddy_config_new();
    if (cc)
        eddy_config_set_str(cc, "emit", "final");
    if (cc && !combine)
        eddy_config_set_bool(cc, "combine", false);
    if (out && (eddy_config_set_str(out, "path", path) < 0 ||
                eddy_config_set_str(out, "format", "lines") < 0))
        eddy_builder_fail(rows.builder, "output path is too long: %.64s...", path);
    eddy_stream_t counted =
        eddy_aggregate(eddy_key_by(rows, "whole_record"), collect_uid, "nexmark_count", cc);
    eddy_sink(eddy_global(counted), sink_uid, "table_file", out);
}

void eddy_job_rows_merged_add(eddy_stream_t rows, const char *path, bool chained,
                              const char *sink_uid)
{
    char dir[4200];
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(dir, sizeof dir, "%.*s/.%s.parts", (int)(slash - path), path, slash + 1);
    else
        snprintf(dir, sizeof dir, ".%s.parts", path);
    eddy_config_t *out = eddy_config_new();
    if (out && (eddy_config_set_str(out, "directory", dir) < 0 ||
                eddy_config_set_str(out, "merge_to", path) < 0))
        eddy_builder_fail(rows.builder, "output path is too long: %.64s...", path);
    eddy_sink(chained ? rows : eddy_rebalance(rows), sink_uid, "part_file", out);
}

eddy_stream_t eddy_line_source_add(eddy_job_builder_t *b, eddy_line_source_flags_t *f)
{
    eddy_config_t *cfg = NULL;
    const char *kind;
    eddy_err_t err = {{0}};
    if (f->input && eddy_redis_uri_is(f->input)) {
        kind = "redis";
        eddy_redis_uri_t uri;
        if (eddy_redis_uri_parse(f->input, &uri, &err) < 0)
            eddy_builder_fail(b, "--input: %s", err.msg);
        cfg = eddy_config_new();
        if (cfg && eddy_config_set_str(cfg, "uri", f->input) < 0)
            eddy_builder_fail(b, "--input URI is too long");
    } else if (f->input) {
        const char *path = f->input;
        kind = "file";
        if (eddy_input_parse(f->input, &kind, &path, &err) < 0)
            eddy_builder_fail(b, "--input: %s", err.msg);
        cfg = eddy_config_new();
        if (cfg && eddy_config_set_str(cfg, "path", path) < 0)
            eddy_builder_fail(b, "--input path is too long");
    } else if (f->socket) {
        kind = "socket";
        char host[256] = "";
        uint16_t port = 0;
        if (eddy_parse_host_port(f->socket, host, sizeof host, &port, &err) < 0)
            eddy_builder_fail(b, "--socket: %s", err.msg); /* the step below is then a no-op */
        cfg = eddy_config_new();
        if (cfg) {
            eddy_config_set_str(cfg, "host", host);
            eddy_config_set_int(cfg, "port", port);
        }
    } else {
        kind = f->generator_kind;
        cfg = f->generator;
    }
    f->generator = cfg == f->generator ? NULL : f->generator;
    eddy_config_destroy(&f->generator); /* not taken by the step: another source was chosen */
    if (!cfg) {
        eddy_builder_fail(b, "out of memory");
    } else if (f->rate) {
        eddy_rate_schedule_t check;
        if (eddy_job_rate_parse(&check, f->rate, &err) < 0)
            eddy_builder_fail(b, "--rate: %s", err.msg);
        else
            eddy_config_set_str(cfg, "rate", f->rate);
    }
    eddy_stream_t s = eddy_source(b, f->uid ? f->uid : "source", kind, cfg);
    return eddy_set_parallelism(s, eddy_line_source_parallelism(f));
}
