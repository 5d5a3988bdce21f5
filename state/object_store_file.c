/* object_store_file.c - the object store on a local (or mounted) directory
 * (see object_store.h).
 *
 * Key "a/b/c" is the file ROOT/a/b/c, its bytes exactly the value (no
 * header: checksums are the caller's business). put() writes
 * ".c.tmp.PID.SEQ" beside it, fsyncs it, renames it over c and fsyncs the
 * directory, so after a crash a reader sees the old value, the new one or
 * none; directories it creates are fsync'ed into their parents
 * (eddy_mkdir_p). Keys never have a segment starting with '.', so temporary
 * files are never keys and list() skips them. delete() removes the
 * directories it leaves empty, up to the root; a put() racing with that
 * re-creates its directory and tries again. The root must exist: a missing
 * root is an error, not silently created, so a mistyped URI does not scatter
 * checkpoints. The store holds only the root path, so any number of threads
 * may use it at once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "state/object_store_backend.h"

#define PUT_ATTEMPTS 3

typedef struct {
    char *root;
    size_t max_object;
} file_store_t;

static atomic_uint_fast64_t tmp_seq;

static int root_exists(const file_store_t *fs, eddy_err_t *err)
{
    struct stat st;
    if (stat(fs->root, &st) != 0)
        return eddy_err_set(err, "root directory %s: %s%s", fs->root, strerror(errno),
                            errno == ENOENT ? " (create it first)" : "");
    if (!S_ISDIR(st.st_mode))
        return eddy_err_set(err, "root %s is not a directory", fs->root);
    return 0;
}

void *eddy_object_store_file_open(const char *dir, const eddy_object_store_opts_t *opts,
                                  eddy_err_t *err)
{
    if (strlen(dir) + EDDY_OBJECT_STORE_KEY_MAX + 64 >= PATH_MAX) {
        eddy_err_set(err, "root path too long: %.200s", dir);
        return NULL;
    }
    file_store_t *fs = calloc(1, sizeof *fs);
    if (!fs || !(fs->root = strdup(dir))) {
        free(fs);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    fs->max_object = opts->max_object_bytes;
    if (root_exists(fs, err) < 0 ||
        (access(fs->root, R_OK | W_OK | X_OK) != 0 &&
         eddy_err_set(err, "root directory %s is not usable: %s", fs->root, strerror(errno)))) {
        free(fs->root);
        free(fs);
        return NULL;
    }
    return fs;
}

static void file_destroy(void **impl_p)
{
    file_store_t *fs = *impl_p;
    if (!fs)
        return;
    free(fs->root);
    free(fs);
    *impl_p = NULL;
}

/* ROOT/key into path (fits: open() checked the root's length). */
static void key_path(const file_store_t *fs, const char *key, char *path)
{
    snprintf(path, PATH_MAX, "%s/%s", fs->root, key);
}

/* One attempt: 0 done, 1 the directory vanished (retry), -1 error. */
static int put_once(const file_store_t *fs, const char *dir, const char *name,
                    const char *final_path, const void *data, size_t len, eddy_err_t *err)
{
    if (eddy_mkdir_p(dir, err) != 0)
        return -1;
    char tmp[PATH_MAX];
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; i++) {
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%ld.%" PRIu64, dir, name, (long)getpid(),
                 (uint64_t)atomic_fetch_add(&tmp_seq, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == ENOENT)
            return 1;
        if (fd < 0 && errno != EEXIST)
            return eddy_err_set(err, "cannot create %s: %s", tmp, strerror(errno));
    }
    if (fd < 0)
        return eddy_err_set(err, "cannot create a temporary file in %s", dir);
    if (eddy_write_all(fd, data, len) != 0) {
        eddy_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (fsync(fd) != 0) {
        eddy_err_set(err, "cannot fsync %s: %s", tmp, strerror(errno));
        goto fail;
    }
    int rc = close(fd);
    fd = -1;
    if (rc != 0) {
        eddy_err_set(err, "cannot close %s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (rename(tmp, final_path) != 0) {
        int e = errno;
        unlink(tmp);
        if (e == ENOENT)
            return 1;
        return eddy_err_set(err, "cannot rename %s to %s: %s", tmp, final_path, strerror(e));
    }
    (void)fs;
    return eddy_fsync_dir(dir, err);
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return -1;
}

static int file_put(void *impl, const char *key, const void *data, size_t len, eddy_err_t *err)
{
    file_store_t *fs = impl;
    if (root_exists(fs, err) < 0)
        return -1;
    char path[PATH_MAX], dir[PATH_MAX];
    key_path(fs, key, path);
    memcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    const char *name = slash + 1;
    for (int attempt = 0; attempt < PUT_ATTEMPTS; attempt++) {
        int rc = put_once(fs, dir, name, path, data ? data : "", len, err);
        if (rc <= 0)
            return rc;
    }
    return eddy_err_set(err, "directory %s kept disappearing while writing %s", dir, key);
}

static int file_get(void *impl, const char *key, char **data, size_t *len, eddy_err_t *err)
{
    file_store_t *fs = impl;
    char path[PATH_MAX];
    key_path(fs, key, path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return root_exists(fs, err) < 0 ? -1 : 0;
        return eddy_err_set(err, "cannot open %s: %s", path, strerror(errno));
    }
    char *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        eddy_err_set(err, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        /* a directory: "a" when only "a/b" exists is no object */
        close(fd);
        return S_ISDIR(st.st_mode) ? 0 : eddy_err_set(err, "%s is not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size > fs->max_object) {
        eddy_err_set(err, "%s has %" PRIu64 " bytes, more than the limit of %zu", path, size,
                     fs->max_object);
        goto fail;
    }
    buf = malloc((size_t)size + 1);
    if (!buf) {
        eddy_err_set(err, "out of memory reading %s (%" PRIu64 " bytes)", path, size);
        goto fail;
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = read(fd, buf + done, (size_t)size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            eddy_err_set(err, "cannot read %s: %s", path, strerror(errno));
            goto fail;
        }
        if (n == 0) {
            eddy_err_set(err, "%s shrank while being read (%zu of %" PRIu64 " bytes)", path,
                         done, size);
            goto fail;
        }
        done += (size_t)n;
    }
    close(fd);
    buf[size] = '\0';
    *data = buf;
    *len = (size_t)size;
    return 1;
fail:
    free(buf);
    close(fd);
    return -1;
}

static int file_del(void *impl, const char *key, eddy_err_t *err)
{
    file_store_t *fs = impl;
    char path[PATH_MAX];
    key_path(fs, key, path);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0; /* a "directory" of keys is no object */
    if (unlink(path) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return root_exists(fs, err) < 0 ? -1 : 0;
        return eddy_err_set(err, "cannot remove %s: %s", path, strerror(errno));
    }
    /* fsync the directory, then drop the directories left empty */
    size_t root_len = strlen(fs->root);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (eddy_fsync_dir(path, err) < 0)
        return -1;
    while (strlen(path) > root_len) {
        if (rmdir(path) != 0)
            break; /* not empty (or in use): keep it and its parents */
        slash = strrchr(path, '/');
        *slash = '\0';
        if (eddy_fsync_dir(path, err) < 0)
            return -1;
    }
    return 0;
}

/* ---- list ---------------------------------------------------------------- */

typedef struct {
    char *key;
    uint64_t size;
} entry_t;

typedef struct {
    entry_t *items;
    size_t n, cap;
} entries_t;

static int push(entries_t *es, const char *key, uint64_t size, eddy_err_t *err)
{
    if (es->n == es->cap) {
        size_t cap = es->cap ? es->cap * 2 : 64;
        entry_t *grown = realloc(es->items, cap * sizeof *grown);
        if (!grown)
            return eddy_err_set(err, "out of memory");
        es->items = grown;
        es->cap = cap;
    }
    char *k = strdup(key);
    if (!k)
        return eddy_err_set(err, "out of memory");
    es->items[es->n++] = (entry_t){k, size};
    return 0;
}

/* Collects the regular files under ROOT/rel (rel "" or ending in '/') whose
 * key starts with prefix. A missing directory has no keys. */
static int walk(const file_store_t *fs, char *rel, size_t rel_len, const char *prefix,
                entries_t *out, eddy_err_t *err)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", fs->root, rel);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        return eddy_err_set(err, "cannot open directory %s: %s", dir, strerror(errno));
    }
    size_t plen = strlen(prefix);
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                rc = eddy_err_set(err, "cannot list directory %s: %s", dir, strerror(errno));
            break;
        }
        size_t n = strlen(de->d_name);
        if (de->d_name[0] == '.' || rel_len + n + 1 > EDDY_OBJECT_STORE_KEY_MAX)
            continue; /* temporary files, "." and "..", or too long to be a key */
        memcpy(rel + rel_len, de->d_name, n + 1);
        /* only descend where keys with the prefix can be */
        size_t cmp = rel_len + n < plen ? rel_len + n : plen;
        if (memcmp(rel, prefix, cmp) != 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT)
                continue; /* deleted meanwhile */
            rc = eddy_err_set(err, "cannot stat %s/%s: %s", dir, de->d_name, strerror(errno));
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            rel[rel_len + n] = '/';
            rel[rel_len + n + 1] = '\0';
            rc = walk(fs, rel, rel_len + n + 1, prefix, out, err);
            if (rc < 0)
                break;
        } else if (S_ISREG(st.st_mode) && rel_len + n >= plen &&
                   eddy_object_store_check_key(rel, NULL) == 0) {
            rc = push(out, rel, (uint64_t)st.st_size, err);
            if (rc < 0)
                break;
        }
    }
    closedir(d);
    rel[rel_len] = '\0';
    return rc;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const entry_t *)a)->key, ((const entry_t *)b)->key);
}

static int file_list(void *impl, const char *prefix, eddy_object_store_list_fn fn, void *ctx,
                     eddy_err_t *err)
{
    file_store_t *fs = impl;
    if (root_exists(fs, err) < 0)
        return -1;
    /* start at the deepest directory the prefix names */
    char rel[EDDY_OBJECT_STORE_KEY_MAX + 2];
    const char *last = strrchr(prefix, '/');
    size_t rel_len = last ? (size_t)(last - prefix) + 1 : 0;
    memcpy(rel, prefix, rel_len);
    rel[rel_len] = '\0';
    entries_t es = {0};
    int rc = walk(fs, rel, rel_len, prefix, &es, err);
    if (rc == 0) {
        if (es.n)
            qsort(es.items, es.n, sizeof *es.items, by_key);
        for (size_t i = 0; i < es.n && rc == 0; i++)
            if (fn(es.items[i].key, es.items[i].size, ctx) != 0)
                rc = 1;
    }
    for (size_t i = 0; i < es.n; i++)
        free(es.items[i].key);
    free(es.items);
    return rc;
}

const eddy_object_store_ops_t eddy_object_store_file_ops = {
    .name = "file",
    .put = file_put,
    .get = file_get,
    .del = file_del,
    .list = file_list,
    .destroy = file_destroy,
};
