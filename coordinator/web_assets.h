/* web_assets.h - the web dashboard's files, compiled into the binary
 * (cmake/embed_web.cmake generates the table from coordinator/web/), and
 * their lookup by URL path for the coordinator's HTTP routes (views.c). */
#ifndef EDDY_COORDINATOR_WEB_ASSETS_H
#define EDDY_COORDINATOR_WEB_ASSETS_H

#include <stddef.h>

typedef struct coord_web_asset {
    const char *path;         /* "/index.html" */
    const char *content_type;
    const char *data;         /* len bytes, then a NUL */
    size_t len;
} coord_web_asset_t;

extern const coord_web_asset_t coord_web_assets[];
extern const size_t coord_web_asset_count;

/* The asset served at path ("/" is "/index.html"), or NULL. */
const coord_web_asset_t *coord_web_asset_find(const char *path);

#endif
