/* json_filter.c - an eddy plugin job: keep the JSON lines whose field has a
 * given value (or contains a string), keep only some fields, and write the
 * result exactly once into part files. Stateless; written against eddy's
 * api/ only, with jansson for JSON.
 *
 *   eddy local --plugin ./libjson_filter.so --job json_filter \
 *       --input events.jsonl --field type --equals click --project user,page \
 *       --output-dir out/
 *
 * Lines that are not JSON objects are dropped. Output lines are compact JSON
 * objects with the projected fields in the order given (missing ones left
 * out). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/eddy.h"

EDDY_PLUGIN_DECLARE();

static bool field_matches(json_t *obj, const eddy_config_t *config)
{
    json_t *v = json_object_get(obj, eddy_config_str(config, "field", ""));
    if (!v)
        return false;
    const char *equals = eddy_config_str(config, "equals", NULL);
    const char *contains = eddy_config_str(config, "contains", NULL);
    char num[64];
    const char *text = json_string_value(v);
    if (!text && json_is_integer(v)) {
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        text = num;
    }
    if (!text)
        return false;
    if (equals && strcmp(text, equals))
        return false;
    if (contains && !strstr(text, contains))
        return false;
    return true;
}

/* One JSON line in, zero or one projected JSON line out. */
static void filter_project(const eddy_record_t *in, eddy_collector_t *out, const eddy_config_t *config)
{
    json_error_t jerr;
    json_t *obj = json_loadb(in->data, in->len, 0, &jerr);
    if (!json_is_object(obj) || !field_matches(obj, config)) {
        json_decref(obj);
        return;
    }
    json_t *projected = json_object();
    char fields[1024];
    snprintf(fields, sizeof fields, "%s", eddy_config_str(config, "project", ""));
    for (char *save = NULL, *f = strtok_r(fields, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        json_t *v = json_object_get(obj, f);
        if (v)
            json_object_set(projected, f, v);
    }
    char *text = json_dumps(json_object_size(projected) ? projected : obj,
                            JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text) {
        eddy_record_t rec = {.data = text, .len = (uint32_t)strlen(text), .value = 1,
                             .timestamp = in->timestamp};
        eddy_emit(out, &rec);
        free(text);
    }
    json_decref(projected);
    json_decref(obj);
}

static const char *flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return NULL;
}

static int build(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    for (int i = 0; i < argc; i += 2) {
        static const char *known[] = {"--input", "--field", "--equals", "--contains", "--project",
                                      "--output-dir", "--parallelism", "--rate"};
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            ok |= !strcmp(argv[i], known[k]);
        if (!ok || i + 1 >= argc)
            return eddy_err_set(err, "json_filter: %s '%s'", ok ? "missing value for" : "unknown flag",
                                argv[i]);
    }
    const char *input = flag(argc, argv, "--input"), *field = flag(argc, argv, "--field");
    const char *output = flag(argc, argv, "--output-dir");
    if (!input || !field || !output)
        return eddy_err_set(err, "json_filter needs --input FILE, --field NAME and --output-dir DIR");
    int parallelism = flag(argc, argv, "--parallelism") ? atoi(flag(argc, argv, "--parallelism")) : 2;
    if (parallelism < 1 || parallelism > 128)
        return eddy_err_set(err, "json_filter: --parallelism must be 1..128");
    eddy_builder_set_default_parallelism(b, (uint32_t)parallelism);

    eddy_config_t *src = eddy_config_new();
    eddy_config_set_str(src, "path", input);
    if (flag(argc, argv, "--rate"))
        eddy_config_set_str(src, "rate", flag(argc, argv, "--rate"));
    eddy_config_t *cfg = eddy_config_new();
    eddy_config_set_str(cfg, "field", field);
    if (flag(argc, argv, "--equals"))
        eddy_config_set_str(cfg, "equals", flag(argc, argv, "--equals"));
    if (flag(argc, argv, "--contains"))
        eddy_config_set_str(cfg, "contains", flag(argc, argv, "--contains"));
    if (flag(argc, argv, "--project"))
        eddy_config_set_str(cfg, "project", flag(argc, argv, "--project"));
    eddy_config_t *sink = eddy_config_new();
    eddy_config_set_str(sink, "directory", output);

    eddy_stream_t lines = eddy_source(b, "source", "file", src);
    eddy_stream_t kept = eddy_flat_map(lines, "filter", "json_filter_project", cfg);
    eddy_sink(eddy_rebalance(kept), "sink", "part_file", sink);
    return 0;
}

static const eddy_job_kind_t job = {
    .name = "json_filter",
    .summary = "keep JSON lines whose field matches, project fields, exactly-once part files",
    .usage = "  --input FILE          JSON lines\n"
             "  --field NAME          the field to test\n"
             "  --equals VALUE | --contains TEXT\n"
             "  --project A,B,...     fields to keep (default: all)\n"
             "  --output-dir DIR      part files (exactly once)\n"
             "  --parallelism P       (default 2)   --rate R  lines/s\n",
    .build = build,
};

int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);
int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
{
    (void)abi_version;
    if (eddy_register_flat_map(r, "json_filter_project", filter_project, err) < 0)
        return -1;
    return eddy_register_job(r, &job, err);
}
