/* plugin.h - loading a plugin: a shared library written against api/ that
 * registers jobs and kinds from its entry point (api/plugin.h).
 *
 * Loading reads the library's declared ABI version before running any of
 * its code, runs the entry point against a scratch registry, and merges
 * what it registered into the target registry only when the entry point
 * succeeded and no name clashes, so a failing plugin changes nothing.
 * A plugin is identified by its content hash: the SHA-256 of the file
 * (libcrypto), 64 lower-case hex digits; the coordinator stores it and
 * workers fetch it by that name.
 *
 * Every load is a verified load: the file is opened once, the bytes read
 * from that descriptor are hashed (and compared with the hash expected, when
 * the caller names one), and the library is dlopen()ed as /proc/self/fd/N of
 * the same descriptor, so what runs is what was hashed, whatever the name
 * points to meanwhile. Stores and caches of plugins (eddy_plugin_dir_t) are
 * private directories (0700, owned by this process's user, not a symlink):
 * a file planted in one under an expected name is refused, never run.
 * Loaded libraries stay loaded for the life of the process: registered
 * kinds point into them. */
#ifndef EDDY_PLAN_PLUGIN_H
#define EDDY_PLAN_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "plan/registry.h"

#define EDDY_PLUGIN_HASH_LEN 64
#define EDDY_PLUGIN_MAX_BYTES (256u << 20)

/* Content hash of a file (hex, NUL-terminated). 0, or -1 with err. */
int eddy_plugin_hash_file(const char *path, char hash[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err);
void eddy_plugin_hash_bytes(const void *data, size_t len, char hash[EDDY_PLUGIN_HASH_LEN + 1]);
/* Whether text is a content hash (64 lower-case hex digits). */
bool eddy_plugin_hash_valid(const char *text);

/* Loads the file a user named (--plugin) into registry, verified as above
 * against the bytes it reads. Loading the same content twice is a no-op
 * (0). -1 with err naming the library for a missing file, a missing or
 * mismatching ABI declaration, a missing entry point, a failing entry point
 * (its message) or a name clash. hash (may be NULL) gets its content hash. */
int eddy_plugin_load(const char *path, eddy_registry_t *registry,
                     char hash[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err);

/* Whether a plugin with this content hash is loaded into registry. */
bool eddy_plugin_loaded(const eddy_registry_t *registry, const char *hash);

/* ---- a private directory of plugins, <hash>.so each ---------------------- */

typedef struct eddy_plugin_dir eddy_plugin_dir_t;

/* Opens (creating it 0700) the directory at path; refused, with err saying
 * why, unless it is a directory (not a symlink) owned by this process's
 * effective uid with no group or other permissions. */
eddy_plugin_dir_t *eddy_plugin_dir_open(const char *path, eddy_err_t *err);
/* A fresh directory of this process (mkdtemp in $TMPDIR or /tmp, 0700),
 * removed with its files by destroy: for workers with no cache directory. */
eddy_plugin_dir_t *eddy_plugin_dir_temp(eddy_err_t *err);
void eddy_plugin_dir_destroy(eddy_plugin_dir_t **self_p);
const char *eddy_plugin_dir_path(const eddy_plugin_dir_t *self);

/* Loads <hash>.so from the directory, verified against hash. 1 when loaded
 * (or loaded before), 0 when there is no such file, -1 with err when it is
 * not a regular file of this user, its bytes do not hash to hash (the file
 * is then removed: it is not what its name says, and never ran) or it does
 * not load. */
int eddy_plugin_dir_load(eddy_plugin_dir_t *self, const char *hash, eddy_registry_t *registry,
                         eddy_err_t *err);
/* A plugin received as bytes (uploaded, or fetched from the coordinator):
 * checks that the bytes hash to expected_hash (unless NULL), writes them
 * to <hash>.so (0600; temp + rename, replacing whatever had that name
 * unless it already holds exactly these bytes) and loads it, verified.
 * hash (may be NULL) gets the content hash. */
int eddy_plugin_dir_load_bytes(eddy_plugin_dir_t *self, const void *data, size_t len,
                               const char *expected_hash, eddy_registry_t *registry,
                               char hash[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err);
/* Reads <hash>.so (at most max bytes) into *data (malloc'd), verified
 * against hash: 1, 0 when absent, -1 with err (a mismatching file is
 * removed). */
int eddy_plugin_dir_read(eddy_plugin_dir_t *self, const char *hash, size_t max, char **data,
                         size_t *len, eddy_err_t *err);

#endif
