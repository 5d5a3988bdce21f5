/* plugin_fails.c - a plugin whose entry point registers a kind and then
 * fails: the failure is reported and the kind is not registered. */
#include "api/plugin.h"

EDDY_PLUGIN_DECLARE();

static uint32_t whole(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len;
}
static const eddy_key_kind_t half_registered = {.name = "test_half_registered", .key = whole};

int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);
int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
{
    (void)abi_version;
    if (eddy_register_key(r, &half_registered, err) < 0)
        return -1;
    return eddy_err_set(err, "cannot reach the model server");
}
