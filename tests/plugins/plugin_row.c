/* plugin_row.c - a plugin operator for pipelines (tests/integration/
 * test_pipelines.c): "test_tag_row" appends a column to each pipeline row
 * (tab-separated text), the config's `tag` repeated `times` times, and
 * drops rows whose first column is config `drop` - so a test sees that
 * the step ran with its config. Written against api/ only. */
#include <stdlib.h>
#include <string.h>

#include "api/plugin.h"

EDDY_PLUGIN_DECLARE();

static void tag_row(const eddy_record_t *in, eddy_collector_t *out, const eddy_config_t *config)
{
    const char *tag = eddy_config_str(config, "tag", "none");
    const char *drop = eddy_config_str(config, "drop", NULL);
    int64_t times = eddy_config_int(config, "times", 1);
    const char *tab = memchr(in->data, '\t', in->len);
    size_t first = tab ? (size_t)(tab - in->data) : in->len;
    if (drop && strlen(drop) == first && !memcmp(in->data, drop, first))
        return;
    size_t tl = strlen(tag);
    if (times < 1 || times > 8)
        times = 1;
    char *row = malloc(in->len + 1 + tl * (size_t)times);
    if (!row)
        return;
    memcpy(row, in->data, in->len);
    row[in->len] = '\t';
    for (int64_t i = 0; i < times; i++)
        memcpy(row + in->len + 1 + tl * (size_t)i, tag, tl);
    eddy_record_t rec = *in;
    rec.data = row;
    rec.len = (uint32_t)(in->len + 1 + tl * (size_t)times);
    eddy_emit(out, &rec);
    free(row);
}

int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);
int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
{
    (void)abi_version;
    return eddy_register_flat_map(r, "test_tag_row", tag_row, err);
}
