/* plugin.c - loading plugins (see plugin.h).
 *
 * Owns: the list of content hashes loaded into this process, so a plugin
 * shipped with every job of a user loads once; the one verified load
 * (open, SHA-256 of the bytes read from the descriptor, compare, dlopen of
 * /proc/self/fd/N) that every caller goes through; private plugin
 * directories. SHA-256 is libcrypto's (EVP), not a hash of ours. */
#include "plan/plugin.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"

#define MAX_LOADED 256

typedef struct loaded {
    const eddy_registry_t *registry;
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
} loaded_t;

static loaded_t loaded_plugins[MAX_LOADED];
static unsigned n_loaded;

struct eddy_plugin_dir {
    int fd;
    bool temp; /* made by eddy_plugin_dir_temp: removed by destroy */
    char path[4096];
};

static atomic_uint tmp_counter;

static void to_hex(const unsigned char *md, char hash[EDDY_PLUGIN_HASH_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < EDDY_PLUGIN_HASH_LEN / 2; i++) {
        hash[2 * i] = digits[md[i] >> 4];
        hash[2 * i + 1] = digits[md[i] & 15];
    }
    hash[EDDY_PLUGIN_HASH_LEN] = '\0';
}

void eddy_plugin_hash_bytes(const void *data, size_t len, char hash[EDDY_PLUGIN_HASH_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL) != 1 ||
        md_len != EDDY_PLUGIN_HASH_LEN / 2)
        memset(md, 0, sizeof md); /* never matches a real plugin's name */
    to_hex(md, hash);
}

bool eddy_plugin_hash_valid(const char *text)
{
    return text && strlen(text) == EDDY_PLUGIN_HASH_LEN &&
           strspn(text, "0123456789abcdef") == EDDY_PLUGIN_HASH_LEN;
}

/* Hashes the whole regular file open at fd (read from offset 0). */
static int hash_fd(int fd, const char *shown, char hash[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return eddy_err_set(err, "plugin %s: %s", shown, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return eddy_err_set(err, "plugin %s is not a regular file", shown);
    if ((unsigned long long)st.st_size > EDDY_PLUGIN_MAX_BYTES)
        return eddy_err_set(err, "plugin %s is larger than %u bytes", shown, EDDY_PLUGIN_MAX_BYTES);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return eddy_err_set(err, "plugin %s: cannot start SHA-256", shown);
    }
    static __thread char buf[65536];
    off_t off = 0;
    int rc = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof buf, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = eddy_err_set(err, "cannot read plugin %s: %s", shown, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        off += n;
        if ((unsigned long long)off > EDDY_PLUGIN_MAX_BYTES) {
            rc = eddy_err_set(err, "plugin %s is larger than %u bytes", shown, EDDY_PLUGIN_MAX_BYTES);
            break;
        }
        if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
            rc = eddy_err_set(err, "plugin %s: SHA-256 failed", shown);
            break;
        }
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (rc == 0 && (EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || md_len != EDDY_PLUGIN_HASH_LEN / 2))
        rc = eddy_err_set(err, "plugin %s: SHA-256 failed", shown);
    EVP_MD_CTX_free(ctx);
    if (rc < 0)
        return -1;
    if (off == 0)
        return eddy_err_set(err, "plugin %s is empty", shown);
    to_hex(md, hash);
    return 0;
}

int eddy_plugin_hash_file(const char *path, char hash[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return eddy_err_set(err, "cannot open plugin %s: %s", path, strerror(errno));
    int rc = hash_fd(fd, path, hash, err);
    close(fd);
    return rc;
}

bool eddy_plugin_loaded(const eddy_registry_t *registry, const char *hash)
{
    for (unsigned i = 0; i < n_loaded; i++)
        if (loaded_plugins[i].registry == registry && !strcmp(loaded_plugins[i].hash, hash))
            return true;
    return false;
}

/* Runs the library dlopen()ed as lib: ABI check, entry point into a scratch
 * registry, merge. Closes lib on failure. */
static int init_library(void *lib, const char *shown, const char *hash, eddy_registry_t *registry,
                        eddy_err_t *err)
{
    const uint32_t *abi = dlsym(lib, EDDY_PLUGIN_ABI_SYMBOL);
    if (!abi) {
        dlclose(lib);
        return eddy_err_set(err, "%s is not an eddy plugin (no %s; build it with EDDY_PLUGIN_DECLARE())",
                            shown, EDDY_PLUGIN_ABI_SYMBOL);
    }
    if (*abi != EDDY_ABI_VERSION) {
        uint32_t theirs = *abi;
        dlclose(lib);
        return eddy_err_set(err, "plugin %s was built for eddy ABI %u; this eddy has ABI %u: rebuild it against this eddy's headers",
                            shown, theirs, EDDY_ABI_VERSION);
    }
    eddy_plugin_init_fn init;
    *(void **)&init = dlsym(lib, EDDY_PLUGIN_ENTRY_SYMBOL);
    if (!init) {
        dlclose(lib);
        return eddy_err_set(err, "plugin %s has no entry point %s()", shown, EDDY_PLUGIN_ENTRY_SYMBOL);
    }
    eddy_registry_t *scratch = eddy_registry_new();
    if (!scratch) {
        dlclose(lib);
        return eddy_err_set(err, "out of memory");
    }
    eddy_err_t ierr = {{0}};
    int rc = init(scratch, EDDY_ABI_VERSION, &ierr);
    if (rc < 0) {
        eddy_err_set(err, "plugin %s: %s() failed: %s", shown, EDDY_PLUGIN_ENTRY_SYMBOL,
                     ierr.msg[0] ? ierr.msg : "no reason given");
    } else {
        eddy_registry_set_origin(scratch, hash);
        rc = eddy_registry_merge(registry, scratch, &ierr);
        if (rc < 0)
            eddy_err_set(err, "plugin %s: %s", shown, ierr.msg);
    }
    eddy_registry_destroy(&scratch);
    if (rc < 0) {
        /* Its kinds were never registered, so nothing points into it. */
        dlclose(lib);
        return -1;
    }
    return 0;
}

/* The verified load: hashes what fd holds, compares it with expected (when
 * not NULL), and loads that same open file. -2 (with err) when the bytes do
 * not hash to expected: nothing of the file ran. */
static int load_fd(int fd, const char *shown, const char *expected, eddy_registry_t *registry,
                   char hash_out[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err)
{
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
    if (hash_fd(fd, shown, hash, err) < 0)
        return -1;
    if (expected && strcmp(hash, expected)) {
        eddy_err_set(err, "plugin %s hashes to %s, not %s: refused, not loaded", shown, hash,
                     expected);
        return -2;
    }
    if (hash_out)
        memcpy(hash_out, hash, sizeof hash);
    if (eddy_plugin_loaded(registry, hash))
        return 0;
    if (n_loaded >= MAX_LOADED)
        return eddy_err_set(err, "plugin %s: more than %d plugins loaded", shown, MAX_LOADED);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    void *lib = dlopen(proc, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return eddy_err_set(err, "cannot load plugin %s: %s", shown, dlerror());
    if (init_library(lib, shown, hash, registry, err) < 0)
        return -1;
    loaded_plugins[n_loaded].registry = registry;
    memcpy(loaded_plugins[n_loaded].hash, hash, sizeof hash);
    n_loaded++;
    return 0;
}

int eddy_plugin_load(const char *path, eddy_registry_t *registry,
                     char hash_out[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return eddy_err_set(err, "plugin %s: %s", path, strerror(errno));
    int rc = load_fd(fd, path, NULL, registry, hash_out, err);
    close(fd);
    return rc < 0 ? -1 : 0;
}

/* ---- private plugin directories ------------------------------------------ */

eddy_plugin_dir_t *eddy_plugin_dir_open(const char *path, eddy_err_t *err)
{
    if (strlen(path) >= sizeof ((eddy_plugin_dir_t *)0)->path) {
        eddy_err_set(err, "plugin directory path too long: %.200s", path);
        return NULL;
    }
    int fd = eddy_private_dir_open(path, "plugin directory", err);
    if (fd < 0)
        return NULL;
    eddy_plugin_dir_t *self = calloc(1, sizeof *self);
    if (!self) {
        close(fd);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->fd = fd;
    snprintf(self->path, sizeof self->path, "%s", path);
    return self;
}

eddy_plugin_dir_t *eddy_plugin_dir_temp(eddy_err_t *err)
{
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/eddy-plugins-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(path)) {
        eddy_err_set(err, "cannot create a plugin directory %s: %s", path, strerror(errno));
        return NULL;
    }
    eddy_plugin_dir_t *self = eddy_plugin_dir_open(path, err);
    if (!self)
        rmdir(path);
    else
        self->temp = true;
    return self;
}

void eddy_plugin_dir_destroy(eddy_plugin_dir_t **self_p)
{
    eddy_plugin_dir_t *self = *self_p;
    if (!self)
        return;
    if (self->temp) {
        int dfd = dup(self->fd);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d && dfd >= 0)
            close(dfd);
        for (struct dirent *de; d && (de = readdir(d));)
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                unlinkat(self->fd, de->d_name, 0);
        if (d)
            closedir(d);
        rmdir(self->path);
    }
    close(self->fd);
    free(self);
    *self_p = NULL;
}

const char *eddy_plugin_dir_path(const eddy_plugin_dir_t *self)
{
    return self->path;
}

/* Opens <hash>.so for reading when it is a regular file of this user that
 * only its owner may write. fd >= 0; -1 when absent (err untouched); -2
 * with err when it is not acceptable (then removed). */
static int open_member(eddy_plugin_dir_t *self, const char *hash, char *shown, size_t size,
                       eddy_err_t *err)
{
    char name[EDDY_PLUGIN_HASH_LEN + 8];
    snprintf(name, sizeof name, "%s.so", hash);
    snprintf(shown, size, "%s/%s", self->path, name);
    int fd = openat(self->fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return -1;
        eddy_err_set(err, "plugin %s: %s: refused", shown,
                     errno == ELOOP ? "a symbolic link" : strerror(errno));
        unlinkat(self->fd, name, 0);
        return -2;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 022)) {
        eddy_err_set(err, "plugin %s is not a regular file of this user writable only by it: refused",
                     shown);
        close(fd);
        unlinkat(self->fd, name, 0);
        return -2;
    }
    return fd;
}

/* 1 when <hash>.so holds bytes that hash to hash; else 0 (absent, or
 * refused and removed). */
static int member_matches(eddy_plugin_dir_t *self, const char *hash)
{
    char shown[4200], got[EDDY_PLUGIN_HASH_LEN + 1];
    eddy_err_t err = {{0}};
    int fd = open_member(self, hash, shown, sizeof shown, &err);
    if (fd < 0)
        return 0;
    int ok = hash_fd(fd, shown, got, &err) == 0 && !strcmp(got, hash);
    close(fd);
    if (!ok) {
        char name[EDDY_PLUGIN_HASH_LEN + 8];
        snprintf(name, sizeof name, "%s.so", hash);
        unlinkat(self->fd, name, 0);
    }
    return ok;
}

/* eddy_plugin_dir_load, with -2 for a file that was there but refused
 * (and removed). */
static int dir_load(eddy_plugin_dir_t *self, const char *hash, eddy_registry_t *registry,
                    eddy_err_t *err)
{
    if (!eddy_plugin_hash_valid(hash))
        return eddy_err_set(err, "'%.80s' is not a plugin's content hash (SHA-256, 64 hex digits)",
                            hash);
    if (eddy_plugin_loaded(registry, hash))
        return 1;
    char shown[4200];
    int fd = open_member(self, hash, shown, sizeof shown, err);
    if (fd == -1)
        return 0;
    if (fd < 0)
        return -2;
    int rc = load_fd(fd, shown, hash, registry, NULL, err);
    close(fd);
    if (rc == -2) {
        char name[EDDY_PLUGIN_HASH_LEN + 8];
        snprintf(name, sizeof name, "%s.so", hash);
        unlinkat(self->fd, name, 0);
    }
    return rc < 0 ? rc : 1;
}

int eddy_plugin_dir_load(eddy_plugin_dir_t *self, const char *hash, eddy_registry_t *registry,
                         eddy_err_t *err)
{
    int rc = dir_load(self, hash, registry, err);
    return rc < 0 ? -1 : rc;
}

int eddy_plugin_dir_load_bytes(eddy_plugin_dir_t *self, const void *data, size_t len,
                               const char *expected_hash, eddy_registry_t *registry,
                               char hash_out[EDDY_PLUGIN_HASH_LEN + 1], eddy_err_t *err)
{
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
    if (len == 0 || len > EDDY_PLUGIN_MAX_BYTES)
        return eddy_err_set(err, "a plugin of %zu bytes (expected 1..%u)", len, EDDY_PLUGIN_MAX_BYTES);
    eddy_plugin_hash_bytes(data, len, hash);
    if (expected_hash && strcmp(hash, expected_hash))
        return eddy_err_set(err, "plugin bytes hash to %s, not %s", hash, expected_hash);
    if (hash_out)
        memcpy(hash_out, hash, sizeof hash);
    /* Stored before, and still exactly these bytes? (Checked even when
     * loaded already: others are served, and restarts load, this file.) */
    if (member_matches(self, hash) == 1) {
        int rc = dir_load(self, hash, registry, err);
        return rc == 1 ? 0 : -1;
    }
    /* absent, or a file under this name that was refused and removed */
    int rc;
    char name[EDDY_PLUGIN_HASH_LEN + 8], tmp[EDDY_PLUGIN_HASH_LEN + 64];
    snprintf(name, sizeof name, "%s.so", hash);
    snprintf(tmp, sizeof tmp, ".%s.so.%d.%u", hash, (int)getpid(), atomic_fetch_add(&tmp_counter, 1));
    int fd = openat(self->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return eddy_err_set(err, "cannot write %s/%s: %s", self->path, tmp, strerror(errno));
    int wrote = eddy_write_all(fd, data, len);
    int e = errno;
    if (close(fd) != 0 && wrote == 0) {
        wrote = -1;
        e = errno;
    }
    if (wrote < 0 || renameat(self->fd, tmp, self->fd, name) != 0) {
        if (wrote == 0)
            e = errno;
        unlinkat(self->fd, tmp, 0);
        return eddy_err_set(err, "cannot write %s/%s: %s", self->path, name, strerror(e));
    }
    rc = dir_load(self, hash, registry, err);
    if (rc == 0)
        return eddy_err_set(err, "plugin %s/%s vanished as it was written", self->path, name);
    return rc < 0 ? -1 : 0;
}

int eddy_plugin_dir_read(eddy_plugin_dir_t *self, const char *hash, size_t max, char **data,
                         size_t *len, eddy_err_t *err)
{
    *data = NULL;
    *len = 0;
    if (!eddy_plugin_hash_valid(hash))
        return eddy_err_set(err, "'%.80s' is not a plugin's content hash (SHA-256, 64 hex digits)",
                            hash);
    char shown[4200];
    int fd = open_member(self, hash, shown, sizeof shown, err);
    if (fd == -1)
        return 0;
    if (fd < 0)
        return -1;
    struct stat st;
    int rc = -1;
    char *buf = NULL;
    size_t n = 0;
    if (fstat(fd, &st) < 0 || st.st_size <= 0 || (unsigned long long)st.st_size > max) {
        eddy_err_set(err, "plugin %s: size %lld is not in 1..%zu", shown, (long long)st.st_size, max);
        goto out;
    }
    if (!(buf = malloc((size_t)st.st_size))) {
        eddy_err_set(err, "out of memory");
        goto out;
    }
    while (n < (size_t)st.st_size) {
        ssize_t r = pread(fd, buf + n, (size_t)st.st_size - n, (off_t)n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            eddy_err_set(err, "cannot read plugin %s: %s", shown, r < 0 ? strerror(errno) : "short");
            goto out;
        }
        n += (size_t)r;
    }
    char got[EDDY_PLUGIN_HASH_LEN + 1];
    eddy_plugin_hash_bytes(buf, n, got);
    if (strcmp(got, hash)) {
        eddy_err_set(err, "plugin %s hashes to %s: refused (removed)", shown, got);
        char name[EDDY_PLUGIN_HASH_LEN + 8];
        snprintf(name, sizeof name, "%s.so", hash);
        unlinkat(self->fd, name, 0);
        goto out;
    }
    *data = buf;
    *len = n;
    buf = NULL;
    rc = 1;
out:
    free(buf);
    close(fd);
    return rc;
}
