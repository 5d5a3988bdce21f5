/* plugin_ok.c - a minimal plugin for tests/unit/test_plugin.c: one
 * operator kind, one key selector and one job, written against api/ only. */
#include "api/plugin.h"

EDDY_PLUGIN_DECLARE();

static void *upper_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)err;
    return (void *)ctx->config;
}

static int upper_process(void *self, const eddy_record_t *rec, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self;
    (void)err;
    eddy_emit(out, rec);
    return 0;
}

static const eddy_operator_ops_t upper_ops = {.kind = "test_upper", .open = upper_open,
                                              .process = upper_process};
static const eddy_operator_kind_t upper_kind = {.name = "test_upper", .ops = &upper_ops};

static uint32_t first_byte(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len ? 1 : 0;
}
static const eddy_key_kind_t first_byte_kind = {.name = "test_first_byte", .key = first_byte};

static int build(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    (void)argc;
    (void)argv;
    (void)err;
    eddy_stream_t s = eddy_source(b, "source", "test_lines", NULL);
    s = eddy_map(s, "upper", "test_upper", NULL);
    eddy_sink(s, "sink", "test_upper", NULL);
    return 0;
}
static const eddy_job_kind_t job = {.name = "test_plugin_job", .summary = "a plugin's job", .usage = "", .build = build};

int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);
int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
{
    (void)abi_version;
    if (eddy_register_operator(r, &upper_kind, err) < 0 || eddy_register_key(r, &first_byte_kind, err) < 0)
        return -1;
    return eddy_register_job(r, &job, err);
}
