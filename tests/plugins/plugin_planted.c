/* plugin_planted.c - what an attacker plants in a plugin cache under the
 * name (content hash) of a genuine plugin: a well-formed plugin whose
 * constructor creates the file named by $EDDY_TEST_PLANT_MARKER the moment
 * it is loaded. Tests prove eddy never loads it (the marker never appears)
 * and replaces it with the genuine bytes. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "api/plugin.h"

EDDY_PLUGIN_DECLARE();

__attribute__((constructor)) static void planted_runs(void)
{
    const char *marker = getenv("EDDY_TEST_PLANT_MARKER");
    if (marker) {
        int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
    }
}

int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);
int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
{
    (void)r;
    (void)abi_version;
    (void)err;
    return 0;
}
