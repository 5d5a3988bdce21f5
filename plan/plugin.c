/* plugin.c - loading plugins (see plugin.h).
 *
 * Owns: the list of content hashes loaded into this process, so a plugin
 * shipped with every job of a user loads once. */
#include "plan/plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/fsutil.h"


#define MAX_LOADED 256

typedef struct loaded {
    const eddy_registry_t *registry;
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
} loaded_t;

static loaded_t loaded_plugins[MAX_LOADED];
static unsigned n_loaded;

void eddy_plugin_hash_bytes(const void *data, size_t len, char hash[EDDY_PLUGIN_HASH_LEN + 1])
{
    XXH128_hash_t h = XXH3_128bits(data, len);
    snprintf(hash, EDDY_PLUGIN_HASH_LEN + 1, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
}

int eddy_plugin_hash_file(const char *path, char hash[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return eddy_err_set(err, "cannot open plugin %s: %s", path, strerror(errno));
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        fclose(f);
        return eddy_err_set(err, "out of memory");
    }
    XXH3_128bits_reset(st);
    char buf[65536];
    size_t n, total = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        XXH3_128bits_update(st, buf, n);
        total += n;
    }
    int bad = ferror(f);
    fclose(f);
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    if (bad)
        return eddy_err_set(err, "cannot read plugin %s", path);
    if (total == 0)
        return eddy_err_set(err, "plugin %s is empty", path);
    snprintf(hash, EDDY_PLUGIN_HASH_LEN + 1, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
    return 0;
}

bool eddy_plugin_loaded(const eddy_registry_t *registry, const char *hash)
{
    for (unsigned i = 0; i < n_loaded; i++)
        if (loaded_plugins[i].registry == registry && !strcmp(loaded_plugins[i].hash, hash))
            return true;
    return false;
}

int eddy_plugin_load(const char *path, eddy_registry_t *registry,
                     char hash_out[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err)
{
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
    struct stat st;
    if (stat(path, &st) < 0)
        return eddy_err_set(err, "plugin %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return eddy_err_set(err, "plugin %s is not a regular file", path);
    if ((unsigned long long)st.st_size > EDDY_PLUGIN_MAX_BYTES)
        return eddy_err_set(err, "plugin %s is larger than %u bytes", path, EDDY_PLUGIN_MAX_BYTES);
    if (eddy_plugin_hash_file(path, hash, err) < 0)
        return -1;
    if (hash_out)
        memcpy(hash_out, hash, sizeof hash);
    if (eddy_plugin_loaded(registry, hash))
        return 0;
    if (n_loaded >= MAX_LOADED)
        return eddy_err_set(err, "plugin %s: more than %d plugins loaded", path, MAX_LOADED);

    /* dlopen resolves paths without a slash through the library path: the
     * user means the file they named. */
    char resolved[4096];
    if (!realpath(path, resolved))
        return eddy_err_set(err, "plugin %s: %s", path, strerror(errno));
    void *lib = dlopen(resolved, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return eddy_err_set(err, "cannot load plugin %s: %s", path, dlerror());
    const uint32_t *abi = dlsym(lib, EDDY_PLUGIN_ABI_SYMBOL);
    if (!abi) {
        dlclose(lib);
        return eddy_err_set(err, "%s is not an eddy plugin (no %s; build it with EDDY_PLUGIN_DECLARE())",
                            path, EDDY_PLUGIN_ABI_SYMBOL);
    }
    if (*abi != EDDY_ABI_VERSION) {
        uint32_t theirs = *abi;
        dlclose(lib);
        return eddy_err_set(err, "plugin %s was built for eddy ABI %u; this eddy has ABI %u: rebuild it against this eddy's headers",
                            path, theirs, EDDY_ABI_VERSION);
    }
    eddy_plugin_init_fn init;
    *(void **)&init = dlsym(lib, EDDY_PLUGIN_ENTRY_SYMBOL);
    if (!init) {
        dlclose(lib);
        return eddy_err_set(err, "plugin %s has no entry point %s()", path, EDDY_PLUGIN_ENTRY_SYMBOL);
    }
    eddy_registry_t *scratch = eddy_registry_new();
    if (!scratch) {
        dlclose(lib);
        return eddy_err_set(err, "out of memory");
    }
    eddy_err_t ierr = {{0}};
    int rc = init(scratch, EDDY_ABI_VERSION, &ierr);
    if (rc < 0) {
        eddy_err_set(err, "plugin %s: %s() failed: %s", path, EDDY_PLUGIN_ENTRY_SYMBOL,
                     ierr.msg[0] ? ierr.msg : "no reason given");
    } else {
        eddy_registry_set_origin(scratch, hash);
        rc = eddy_registry_merge(registry, scratch, &ierr);
        if (rc < 0)
            eddy_err_set(err, "plugin %s: %s", path, ierr.msg);
    }
    eddy_registry_destroy(&scratch);
    if (rc < 0) {
        /* Its kinds were never registered, so nothing points into it. */
        dlclose(lib);
        return -1;
    }
    loaded_plugins[n_loaded].registry = registry;
    memcpy(loaded_plugins[n_loaded].hash, hash, sizeof hash);
    n_loaded++;
    return 0;
}

int eddy_plugin_path(const char *dir, const char *hash, char *path, size_t size)
{
    if (strlen(hash) != EDDY_PLUGIN_HASH_LEN || strspn(hash, "0123456789abcdef") != EDDY_PLUGIN_HASH_LEN)
        return -1;
    snprintf(path, size, "%s/%s.so", dir, hash);
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? 0 : -1;
}

int eddy_plugin_load_bytes(const void *data, size_t len, const char *expected_hash, const char *dir,
                           eddy_registry_t *registry, char hash_out[EDDY_PLUGIN_HASH_LEN + 1],
                           eddy_err_t *err)
{
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
    if (len == 0 || len > EDDY_PLUGIN_MAX_BYTES)
        return eddy_err_set(err, "a plugin of %zu bytes (expected 1..%u)", len, EDDY_PLUGIN_MAX_BYTES);
    eddy_plugin_hash_bytes(data, len, hash);
    if (expected_hash && strcmp(hash, expected_hash))
        return eddy_err_set(err, "plugin bytes hash to %s, not %s", hash, expected_hash);
    if (hash_out)
        memcpy(hash_out, hash, sizeof hash);
    char existing[4300];
    if (eddy_plugin_path(dir, hash, existing, sizeof existing) == 0) /* stored before */
        return eddy_plugin_load(existing, registry, NULL, err);
    if (eddy_mkdir_p(dir, err) < 0)
        return eddy_err_wrap(err, "plugin directory");
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s.so", dir, hash);
    snprintf(tmp, sizeof tmp, "%s/.%s.so.%d", dir, hash, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return eddy_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
    size_t wrote = fwrite(data, 1, len, f);
    int close_rc = fclose(f);
    if (wrote != len || close_rc != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return eddy_err_set(err, "cannot write %s: %s", path, strerror(e));
    }
    return eddy_plugin_load(path, registry, NULL, err);
}
