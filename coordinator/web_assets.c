/* web_assets.c - finds a dashboard file by the URL path it is served at.
 * The files themselves are the generated table (build/generated/). */
#include "coordinator/web_assets.h"

#include <string.h>

const coord_web_asset_t *coord_web_asset_find(const char *path)
{
    if (!path)
        return NULL;
    if (!strcmp(path, "/"))
        path = "/index.html";
    for (size_t i = 0; i < coord_web_asset_count; i++)
        if (!strcmp(coord_web_assets[i].path, path))
            return &coord_web_assets[i];
    return NULL;
}
