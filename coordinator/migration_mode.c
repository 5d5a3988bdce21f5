/* migration_mode.c - the names of the key-group migration modes
 * (--migration, coordinator.h). */
#include <string.h>

#include "coordinator/coordinator.h"

int eddy_migration_mode_parse(const char *name, eddy_migration_mode_t *out)
{
    if (!strcmp(name, "sudden"))
        *out = EDDY_MIGRATION_SUDDEN;
    else if (!strcmp(name, "fluid"))
        *out = EDDY_MIGRATION_FLUID;
    else
        return -1;
    return 0;
}

const char *eddy_migration_mode_name(eddy_migration_mode_t mode)
{
    return mode == EDDY_MIGRATION_FLUID ? "fluid" : "sudden";
}
