/* plugin_bad_abi.c - a plugin that claims another ABI version: eddy must
 * refuse it without running its entry point (which would crash). */
#include <stdint.h>
#include <stdlib.h>

#include "api/plugin.h"

const uint32_t eddy_plugin_abi_version = EDDY_ABI_VERSION + 1;

int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);
int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
{
    (void)r;
    (void)abi_version;
    (void)err;
    abort();
}
