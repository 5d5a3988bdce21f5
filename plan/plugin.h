/* plugin.h - loading a plugin: a shared library written against api/ that
 * registers jobs and kinds from its entry point (api/plugin.h).
 *
 * Loading reads the library's declared ABI version before running any of
 * its code, runs the entry point against a scratch registry, and merges
 * what it registered into the target registry only when the entry point
 * succeeded and no name clashes, so a failing plugin changes nothing.
 * A plugin is identified by its content hash (XXH3-128 of the file, 32 hex
 * digits), which is how the coordinator stores and workers fetch it.
 * Loaded libraries stay loaded for the life of the process: registered
 * kinds point into them. */
#ifndef EDDY_PLAN_PLUGIN_H
#define EDDY_PLAN_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "plan/registry.h"

#define EDDY_PLUGIN_HASH_LEN 32
#define EDDY_PLUGIN_MAX_BYTES (256u << 20)

/* Content hash of a file (hex, NUL-terminated) . 0, or -1 with err. */
int eddy_plugin_hash_file(const char *path, char hash[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err);
void eddy_plugin_hash_bytes(const void *data, size_t len, char hash[EDDY_PLUGIN_HASH_LEN + 1]);

/* Loads path into registry. Loading the same content twice is a no-op
 * (0). -1 with err naming the library for a missing file, a missing or
 * mismatching ABI declaration, a missing entry point, a failing entry point
 * (its message) or a name clash. hash (may be NULL) gets its content hash. */
int eddy_plugin_load(const char *path, eddy_registry_t *registry,
                     char hash[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err);

/* Whether a plugin with this content hash is loaded into registry. */
bool eddy_plugin_loaded(const eddy_registry_t *registry, const char *hash);

/* A plugin received as bytes (uploaded, or fetched from the coordinator):
 * checks that the bytes have the content hash expected (unless NULL),
 * writes them to dir/<hash>.so (created if missing; temp + rename, so
 * processes sharing dir never see half a file), and loads that file. */
int eddy_plugin_load_bytes(const void *data, size_t len, const char *expected_hash, const char *dir,
                           eddy_registry_t *registry, char hash[EDDY_PLUGIN_HASH_LEN + 1],
                           eddy_err_t *err);
/* dir/<hash>.so when it exists, else NULL: a plugin stored or cached before. */
int eddy_plugin_path(const char *dir, const char *hash, char *path, size_t size);

#endif
