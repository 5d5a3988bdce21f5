/* snapshot_store.c - checkpoint files on a local (or mounted) filesystem
 * (see snapshot_store.h).
 *
 * Owns the directory layout, the file header and the atomic-write protocol.
 * A write goes to ".NAME.tmp.PID.SEQ" in the final directory, is fsync'ed,
 * renamed over NAME and then the directory is fsync'ed, so after a crash a
 * reader sees the old file, the new file or none - never a prefix. Newly
 * created directories are fsync'ed into their parents for the same reason.
 *
 * File format: 24-byte header then the payload.
 *   bytes 0..7    magic "EDDYSNP1"
 *   bytes 8..15   payload length, u64 little-endian
 *   bytes 16..23  XXH64(payload, seed 0), u64 little-endian
 * A reader insists the file is exactly 24 + length bytes and the checksum
 * matches; anything else is an error naming the file. The store itself only
 * holds the root path, so one store can be used from several threads. */
#include "state/snapshot_store.h"

#include "common/byteorder.h"
#include "common/fsutil.h"
#include "state/object_store.h"
#include "state/snapshot_manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <xxhash.h>

#define SNAP_MAGIC "EDDYSNP1"
#define SNAP_MAGIC_LEN 8
#define SNAP_HEADER_LEN 24
#define SNAP_NAME_MAX 200

struct eddy_snapshot_store {
    char *root;                 /* the location as given (path or URI) */
    char *dir;                  /* file: the directory; NULL for s3:// */
    eddy_object_store_t *objects; /* s3://: opened at first use */
    pthread_mutex_t lock;       /* guards the lazy open of objects and preloaded */
    /* Payloads read ahead by another thread (eddy_snapshot_store_preload),
     * keyed like the files; read_group takes them out before any I/O. */
    struct preloaded *preloaded;
    /* Merged manifests of (job, checkpoint, operator) restores read through
     * (see read_group), newest first, at most REFS_CACHED. */
    struct refs *refs;
};

/* Where each key group of one (job, checkpoint, operator) is held: holder[kg]
 * (0: the checkpoint itself), for kg < n; n == 0 when it has no manifest. */
typedef struct refs {
    struct refs *next;
    char *key; /* JOB/chk-ID/OP */
    uint64_t *holder;
    uint32_t n;
} refs_t;

#define REFS_CACHED 8

static void refs_free(refs_t *r)
{
    while (r) {
        refs_t *next = r->next;
        free(r->key);
        free(r->holder);
        free(r);
        r = next;
    }
}

typedef struct preloaded {
    struct preloaded *next;
    char *key;  /* JOB/chk-ID/OP/kg-KG.snap */
    char *data; /* the payload, owned */
    size_t len;
} preloaded_t;

static atomic_uint_fast64_t tmp_seq;

/* --- small helpers -------------------------------------------------------- */

static int check_name(const char *kind, const char *name, eddy_err_t *err)
{
    if (!name)
        return eddy_err_set(err, "snapshot store: %s name is missing", kind);
    size_t len = strlen(name);
    if (len == 0)
        return eddy_err_set(err, "snapshot store: %s name is empty", kind);
    if (len > SNAP_NAME_MAX)
        return eddy_err_set(err, "snapshot store: %s name is longer than %d characters", kind,
                            SNAP_NAME_MAX);
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return eddy_err_set(err, "snapshot store: %s name \"%s\" is not allowed", kind, name);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return eddy_err_set(err,
                                "snapshot store: invalid %s name \"%s\": byte 0x%02x at offset %zu "
                                "is not in [A-Za-z0-9._-]",
                                kind, name, c, i);
    }
    return 0;
}

static int fmt_path(char *buf, size_t size, eddy_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fmt_path(char *buf, size_t size, eddy_err_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size)
        return eddy_err_set(err, "snapshot store: path too long under %.200s", buf);
    return 0;
}

/* Reads up to len bytes; returns the number read (short only at EOF) or -1. */
static ssize_t read_all(int fd, void *data, size_t len)
{
    char *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t n = read(fd, p + done, len - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

/* Whether a payload's XXH64 is the sum its header stored; what names the
 * kind of store ("snapshot file", "snapshot object") for the error. */
static int check_sum(const char *what, const char *name, const void *payload, uint64_t plen,
                     uint64_t sum, eddy_err_t *err)
{
    uint64_t actual = XXH64(payload, (size_t)plen, 0);
    if (actual == sum)
        return 0;
    return eddy_err_set(err,
                        "%s %s is corrupt (checksum mismatch: stored %016" PRIx64
                        ", computed %016" PRIx64 ")",
                        what, name, sum, actual);
}

/* The header of a file of size bytes: magic and a length that fits the
 * size exactly. The payload length in *plen. */
static int check_header(const char *path, const unsigned char *header, uint64_t size,
                        uint64_t *plen, eddy_err_t *err)
{
    if (memcmp(header, SNAP_MAGIC, SNAP_MAGIC_LEN) != 0)
        return eddy_err_set(err, "snapshot file %s has a bad magic (not an eddy snapshot)", path);
    uint64_t n = eddy_get_le64(header + 8);
    if (n > UINT64_MAX - SNAP_HEADER_LEN || n > SIZE_MAX - 1 || n > (uint64_t)SSIZE_MAX)
        return eddy_err_set(err, "snapshot file %s has a corrupt length field (%" PRIu64 ")", path,
                            n);
    uint64_t expected = SNAP_HEADER_LEN + n;
    if (size < expected)
        return eddy_err_set(err, "snapshot file %s is truncated (%" PRIu64 " of %" PRIu64 " bytes)",
                            path, size, expected);
    if (size > expected)
        return eddy_err_set(err,
                            "snapshot file %s has %" PRIu64 " trailing bytes (%" PRIu64
                            " bytes, expected %" PRIu64 ")",
                            path, size - expected, size, expected);
    *plen = n;
    return 0;
}

static void fill_header(unsigned char header[SNAP_HEADER_LEN], const void *data, size_t len)
{
    memcpy(header, SNAP_MAGIC, SNAP_MAGIC_LEN);
    eddy_put_le64(header + 8, (uint64_t)len);
    eddy_put_le64(header + 16, XXH64(len ? data : "", len, 0));
}

/* --- file protocol -------------------------------------------------------- */

/* Writes header + data to a new temporary file in dir (which must exist) and
 * closes it, fsync'ing first when durable is set. tmp_path gets its name. */
static int write_temp(const char *dir, const char *name, const void *data, size_t len,
                      bool durable, char *tmp_path, eddy_err_t *err)
{
    if (!data && len)
        return eddy_err_set(err, "snapshot store: NULL data for %s/%s", dir, name);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        uint64_t seq = atomic_fetch_add(&tmp_seq, 1);
        if (fmt_path(tmp_path, PATH_MAX, err, "%s/.%s.tmp.%ld.%" PRIu64, dir, name,
                     (long)getpid(), seq) != 0)
            return -1;
        fd = open(tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            return eddy_err_set(err, "cannot create %s: %s", tmp_path, strerror(errno));
    }
    if (fd < 0)
        return eddy_err_set(err, "cannot create a temporary file for %s/%s", dir, name);

    unsigned char header[SNAP_HEADER_LEN];
    fill_header(header, data, len);

    if (eddy_write_all(fd, header, sizeof header) != 0 || eddy_write_all(fd, data, len) != 0) {
        eddy_err_set(err, "cannot write %s: %s", tmp_path, strerror(errno));
        goto fail;
    }
    if (durable && fsync(fd) != 0) {
        eddy_err_set(err, "cannot fsync %s: %s", tmp_path, strerror(errno));
        goto fail;
    }
    int rc = close(fd);
    fd = -1;
    if (rc != 0) {
        eddy_err_set(err, "cannot close %s: %s", tmp_path, strerror(errno));
        goto fail;
    }
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp_path);
    return -1;
}

static int publish(const char *tmp_path, const char *final_path, eddy_err_t *err)
{
    if (rename(tmp_path, final_path) != 0) {
        eddy_err_set(err, "cannot rename %s to %s: %s", tmp_path, final_path, strerror(errno));
        unlink(tmp_path);
        return -1;
    }
    return 0;
}

static int write_file(const char *dir, const char *name, const void *data, size_t len,
                      eddy_err_t *err)
{
    char final_path[PATH_MAX], tmp_path[PATH_MAX];
    if (fmt_path(final_path, sizeof final_path, err, "%s/%s", dir, name) != 0)
        return -1;
    if (eddy_mkdir_p(dir, err) != 0)
        return eddy_err_wrap(err, "cannot write snapshot file %s", final_path);
    if (write_temp(dir, name, data, len, true, tmp_path, err) != 0 ||
        publish(tmp_path, final_path, err) != 0)
        return -1;
    return eddy_fsync_dir(dir, err);
}

static int read_file(const char *path, char **data, size_t *len, eddy_err_t *err)
{
    if (!data || !len)
        return eddy_err_set(err, "snapshot store: NULL output for %s", path);
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return eddy_err_set(err, "snapshot file %s does not exist", path);
        return eddy_err_set(err, "cannot open snapshot file %s: %s", path, strerror(errno));
    }
    char *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        eddy_err_set(err, "cannot stat snapshot file %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        eddy_err_set(err, "snapshot file %s is not a regular file", path);
        goto fail;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < SNAP_HEADER_LEN) {
        eddy_err_set(err, "snapshot file %s is truncated (%" PRIu64 " bytes, header alone is %d)",
                     path, size, SNAP_HEADER_LEN);
        goto fail;
    }
    unsigned char header[SNAP_HEADER_LEN];
    ssize_t got = read_all(fd, header, sizeof header);
    if (got < 0) {
        eddy_err_set(err, "cannot read snapshot file %s: %s", path, strerror(errno));
        goto fail;
    }
    if (got != SNAP_HEADER_LEN) {
        eddy_err_set(err, "snapshot file %s is truncated (%zd of %d header bytes)", path, got,
                     SNAP_HEADER_LEN);
        goto fail;
    }
    uint64_t plen;
    if (check_header(path, header, size, &plen, err) < 0)
        goto fail;
    uint64_t expected = SNAP_HEADER_LEN + plen;
    uint64_t sum = eddy_get_le64(header + 16);
    buf = malloc(plen ? (size_t)plen : 1);
    if (!buf) {
        eddy_err_set(err, "out of memory reading snapshot file %s (%" PRIu64 " bytes)", path,
                     plen);
        goto fail;
    }
    got = read_all(fd, buf, (size_t)plen);
    if (got < 0) {
        eddy_err_set(err, "cannot read snapshot file %s: %s", path, strerror(errno));
        goto fail;
    }
    if ((uint64_t)got != plen) {
        eddy_err_set(err, "snapshot file %s is truncated (%" PRIu64 " of %" PRIu64 " bytes)", path,
                     (uint64_t)got + SNAP_HEADER_LEN, expected);
        goto fail;
    }
    if (check_sum("snapshot file", path, buf, plen, sum, err) < 0)
        goto fail;
    close(fd);
    *data = buf;
    *len = (size_t)plen;
    return 0;

fail:
    free(buf);
    close(fd);
    return -1;
}

/* rm -r without following symlinks; a missing path is not an error. */
static int remove_tree(const char *path, eddy_err_t *err)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        return eddy_err_set(err, "cannot stat %s: %s", path, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0 && errno != ENOENT)
            return eddy_err_set(err, "cannot remove %s: %s", path, strerror(errno));
        return 0;
    }
    DIR *d = opendir(path);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return eddy_err_set(err, "cannot open directory %s: %s", path, strerror(errno));
    }
    int rc = 0;
    struct dirent *de;
    char child[PATH_MAX];
    for (;;) {
        errno = 0;
        de = readdir(d);
        if (!de) {
            if (errno != 0)
                rc = eddy_err_set(err, "cannot list directory %s: %s", path, strerror(errno));
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (fmt_path(child, sizeof child, err, "%s/%s", path, de->d_name) != 0 ||
            remove_tree(child, err) != 0) {
            rc = -1;
            break;
        }
    }
    closedir(d);
    if (rc != 0)
        return -1;
    if (rmdir(path) != 0 && errno != ENOENT)
        return eddy_err_set(err, "cannot remove directory %s: %s", path, strerror(errno));
    return 0;
}

/* --- object store (s3://) ------------------------------------------------- */

/* The object store, opened at first use on the calling thread (the open
 * probes the bucket: a network call, so never in _new, which event loops
 * call). */
static eddy_object_store_t *objects(eddy_snapshot_store_t *self, eddy_err_t *err)
{
    pthread_mutex_lock(&self->lock);
    if (!self->objects)
        self->objects = eddy_object_store_open(self->root, NULL, err);
    eddy_object_store_t *o = self->objects;
    pthread_mutex_unlock(&self->lock);
    return o;
}

static int put_object(eddy_snapshot_store_t *self, const char *key, const void *data, size_t len,
                      eddy_err_t *err)
{
    if (!data && len)
        return eddy_err_set(err, "snapshot store: NULL data for %s", key);
    eddy_object_store_t *o = objects(self, err);
    if (!o)
        return -1;
    char *buf = malloc(SNAP_HEADER_LEN + len);
    if (!buf)
        return eddy_err_set(err, "out of memory writing snapshot object %s", key);
    fill_header((unsigned char *)buf, data, len);
    if (len)
        memcpy(buf + SNAP_HEADER_LEN, data, len);
    int rc = eddy_object_store_put(o, key, buf, SNAP_HEADER_LEN + len, err);
    free(buf);
    return rc;
}

static int get_object(eddy_snapshot_store_t *self, const char *key, char **data, size_t *len,
                      eddy_err_t *err)
{
    if (!data || !len)
        return eddy_err_set(err, "snapshot store: NULL output for %s", key);
    *data = NULL;
    *len = 0;
    eddy_object_store_t *o = objects(self, err);
    if (!o)
        return -1;
    char *buf = NULL;
    size_t size = 0;
    int got = eddy_object_store_get(o, key, &buf, &size, err);
    if (got < 0)
        return -1;
    if (got == 0)
        return eddy_err_set(err, "snapshot object %s/%s does not exist", self->root, key);
    uint64_t plen;
    if (size < SNAP_HEADER_LEN) {
        eddy_err_set(err, "snapshot object %s is truncated (%zu bytes, header alone is %d)", key,
                     size, SNAP_HEADER_LEN);
        goto fail;
    }
    if (check_header(key, (const unsigned char *)buf, size, &plen, err) < 0)
        goto fail;
    uint64_t sum = eddy_get_le64((const unsigned char *)buf + 16);
    if (check_sum("snapshot object", key, buf + SNAP_HEADER_LEN, plen, sum, err) < 0)
        goto fail;
    memmove(buf, buf + SNAP_HEADER_LEN, (size_t)plen);
    buf[plen] = '\0';
    *data = buf;
    *len = (size_t)plen;
    return 0;
fail:
    free(buf);
    return -1;
}

typedef struct key_list {
    char **keys;
    size_t n, cap;
} key_list_t;

static int collect_key(const char *key, uint64_t size, void *ctx)
{
    (void)size;
    key_list_t *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **grown = realloc(l->keys, cap * sizeof *grown);
        if (!grown)
            return 1;
        l->keys = grown;
        l->cap = cap;
    }
    if (!(l->keys[l->n] = strdup(key)))
        return 1;
    l->n++;
    return 0;
}

/* Deletes every object under prefix: listed first, then deleted, so the
 * listing never runs over keys it removes. */
static int remove_objects(eddy_snapshot_store_t *self, const char *prefix, eddy_err_t *err)
{
    eddy_object_store_t *o = objects(self, err);
    if (!o)
        return -1;
    key_list_t l = {0};
    int rc = eddy_object_store_list(o, prefix, collect_key, &l, err);
    if (rc == 1)
        rc = eddy_err_set(err, "out of memory listing %s", prefix);
    for (size_t i = 0; i < l.n; i++) {
        if (rc == 0 && eddy_object_store_delete(o, l.keys[i], err) < 0)
            rc = -1;
        free(l.keys[i]);
    }
    free(l.keys);
    return rc < 0 ? -1 : 0;
}

/* --- listing (both backends) ---------------------------------------------- */

static int read_key(eddy_snapshot_store_t *self, const char *key, char **data, size_t *len,
                    eddy_err_t *err);

/* Every regular file under dir (relative name rel, "" at the top), as keys
 * "rel/name"; names starting with '.' (temporary files) are skipped. */
static int walk_dir(const char *dir, const char *rel, eddy_snapshot_store_list_fn fn, void *ctx,
                    eddy_err_t *err)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        return eddy_err_set(err, "cannot open directory %s: %s", dir, strerror(errno));
    }
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0)
                rc = eddy_err_set(err, "cannot list directory %s: %s", dir, strerror(errno));
            break;
        }
        if (de->d_name[0] == '.')
            continue;
        char path[PATH_MAX], key[PATH_MAX];
        struct stat st;
        if (fmt_path(path, sizeof path, err, "%s/%s", dir, de->d_name) != 0 ||
            fmt_path(key, sizeof key, err, "%s%s%s", rel, *rel ? "/" : "", de->d_name) != 0) {
            rc = -1;
            break;
        }
        if (lstat(path, &st) != 0)
            continue; /* removed meanwhile */
        if (S_ISDIR(st.st_mode))
            rc = walk_dir(path, key, fn, ctx, err);
        else if (S_ISREG(st.st_mode))
            rc = fn(key, (uint64_t)st.st_size, ctx);
        if (rc != 0)
            break;
    }
    closedir(d);
    return rc;
}

int eddy_snapshot_store_list_keys(eddy_snapshot_store_t *self, const char *dir,
                                  eddy_snapshot_store_list_fn fn, void *ctx, eddy_err_t *err)
{
    char prefix[PATH_MAX], path[PATH_MAX];
    if (!dir || !*dir || dir[0] == '/' || dir[strlen(dir) - 1] == '/' || strstr(dir, ".."))
        return eddy_err_set(err, "snapshot store: bad directory key \"%s\"", dir ? dir : "");
    if (!self->dir) {
        eddy_object_store_t *o = objects(self, err);
        if (!o || fmt_path(prefix, sizeof prefix, err, "%s/", dir) != 0)
            return -1;
        return eddy_object_store_list(o, prefix, fn, ctx, err);
    }
    if (fmt_path(path, sizeof path, err, "%s/%s", self->dir, dir) != 0)
        return -1;
    return walk_dir(path, dir, fn, ctx, err);
}

int eddy_snapshot_store_delete_key(eddy_snapshot_store_t *self, const char *key, eddy_err_t *err)
{
    char path[PATH_MAX];
    if (eddy_object_store_check_key(key, err) < 0)
        return -1;
    if (!self->dir) {
        eddy_object_store_t *o = objects(self, err);
        return o ? eddy_object_store_delete(o, key, err) : -1;
    }
    if (fmt_path(path, sizeof path, err, "%s/%s", self->dir, key) != 0)
        return -1;
    if (unlink(path) != 0 && errno != ENOENT)
        return eddy_err_set(err, "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

/* --- manifests (incremental checkpoints) ------------------------------------ */

static int collect_manifest(const char *key, uint64_t size, void *ctx)
{
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    size_t n = strlen(base);
    if (strncmp(base, "refs-", 5) || n < 10 || strcmp(base + n - 4, ".ref"))
        return 0;
    return collect_key(key, size, ctx);
}

/* Reads and merges every manifest of (job, checkpoint, op) into r. */
static int load_refs(eddy_snapshot_store_t *self, const char *dirkey, uint64_t checkpoint,
                     refs_t *r, eddy_err_t *err)
{
    key_list_t l = {0};
    int rc = eddy_snapshot_store_list_keys(self, dirkey, collect_manifest, &l, err);
    if (rc == 1)
        rc = eddy_err_set(err, "out of memory listing %s", dirkey);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        char *data = NULL;
        size_t len = 0;
        eddy_manifest_entry_t *e = NULL;
        uint32_t n = 0;
        if (eddy_snapshot_store_read_key(self, l.keys[i], &data, &len, err) < 0 ||
            eddy_manifest_decode(data, len, checkpoint, &e, &n, err) < 0) {
            rc = eddy_err_wrap(err, "checkpoint manifest %s/%s", self->root, l.keys[i]);
        } else if (n && e[n - 1].kg >= r->n) {
            uint64_t *grown = realloc(r->holder, (size_t)(e[n - 1].kg + 1) * sizeof *grown);
            if (!grown) {
                rc = eddy_err_set(err, "out of memory");
            } else {
                memset(grown + r->n, 0, (size_t)(e[n - 1].kg + 1 - r->n) * sizeof *grown);
                r->holder = grown;
                r->n = e[n - 1].kg + 1;
            }
        }
        for (uint32_t k = 0; rc == 0 && k < n; k++) {
            if (r->holder[e[k].kg])
                rc = eddy_err_set(err, "checkpoint manifest %s/%s: key group %u is named by "
                                  "another manifest too", self->root, l.keys[i], e[k].kg);
            r->holder[e[k].kg] = e[k].holder;
        }
        free(e);
        free(data);
    }
    for (size_t i = 0; i < l.n; i++)
        free(l.keys[i]);
    free(l.keys);
    return rc < 0 ? -1 : 0;
}

/* The checkpoint whose object holds (job, checkpoint, op, kg): read once
 * per (job, checkpoint, op) from its manifests and kept (a completed
 * checkpoint never changes). */
static int resolve(eddy_snapshot_store_t *self, const char *job, uint64_t checkpoint,
                   const char *op, uint32_t kg, uint64_t *holder, eddy_err_t *err)
{
    char dirkey[PATH_MAX];
    if (fmt_path(dirkey, sizeof dirkey, err, "%s/chk-%" PRIu64 "/%s", job, checkpoint, op) != 0)
        return -1;
    pthread_mutex_lock(&self->lock);
    for (refs_t *r = self->refs; r; r = r->next)
        if (!strcmp(r->key, dirkey)) {
            if (kg < r->n && r->holder[kg])
                *holder = r->holder[kg];
            pthread_mutex_unlock(&self->lock);
            return 0;
        }
    pthread_mutex_unlock(&self->lock);
    refs_t *r = calloc(1, sizeof *r);
    if (!r || !(r->key = strdup(dirkey))) {
        free(r);
        return eddy_err_set(err, "out of memory");
    }
    if (load_refs(self, dirkey, checkpoint, r, err) < 0) {
        refs_free(r);
        return -1;
    }
    if (kg < r->n && r->holder[kg])
        *holder = r->holder[kg];
    pthread_mutex_lock(&self->lock);
    r->next = self->refs;
    self->refs = r;
    refs_t **pp = &self->refs;
    for (int i = 0; *pp && i < REFS_CACHED; i++)
        pp = &(*pp)->next;
    refs_t *old = *pp;
    *pp = NULL;
    pthread_mutex_unlock(&self->lock);
    refs_free(old);
    return 0;
}

/* --- public API ----------------------------------------------------------- */

eddy_snapshot_store_t *eddy_snapshot_store_new(const char *root, eddy_err_t *err)
{
    if (!root || !*root) {
        eddy_err_set(err, "snapshot store: root directory is empty");
        return NULL;
    }
    const char *path = root;
    bool s3 = !strncmp(root, "s3://", 5);
    if (!strncmp(root, "file://", 7)) {
        path = root + 7;
        if (!strncmp(path, "localhost/", 10))
            path += 9;
        if (path[0] != '/') {
            eddy_err_set(err, "snapshot store %.200s: want file:///ABSOLUTE/DIR", root);
            return NULL;
        }
    } else if (strstr(root, "://") && !s3) {
        eddy_err_set(err, "snapshot store %.200s: unsupported scheme (want a directory, "
                     "file:///DIR or s3://BUCKET/PREFIX?endpoint=URL&region=R)", root);
        return NULL;
    }
    size_t len = strlen(path);
    while (!s3 && len > 1 && path[len - 1] == '/')
        len--;
    if (len >= PATH_MAX - 2 * SNAP_NAME_MAX - 64) {
        eddy_err_set(err, "snapshot store: root path too long: %.200s", root);
        return NULL;
    }
    eddy_snapshot_store_t *self = calloc(1, sizeof *self);
    if (!self || !(self->root = strdup(root)) || (!s3 && !(self->dir = strndup(path, len)))) {
        if (self)
            free(self->root);
        free(self);
        eddy_err_set(err, "snapshot store: out of memory");
        return NULL;
    }
    pthread_mutex_init(&self->lock, NULL);
    if (self->dir && eddy_mkdir_p(self->dir, err) != 0) {
        eddy_err_wrap(err, "snapshot store: cannot create root %s", self->dir);
        eddy_snapshot_store_destroy(&self);
        return NULL;
    }
    return self;
}

int eddy_snapshot_store_probe(eddy_snapshot_store_t *self, eddy_err_t *err)
{
    return self->dir || objects(self, err) ? 0 : -1;
}

void eddy_snapshot_store_destroy(eddy_snapshot_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_snapshot_store_t *self = *self_p;
    eddy_snapshot_store_preload_clear(self);
    refs_free(self->refs);
    eddy_object_store_destroy(&self->objects);
    pthread_mutex_destroy(&self->lock);
    free(self->root);
    free(self->dir);
    free(self);
    *self_p = NULL;
}

const char *eddy_snapshot_store_root(const eddy_snapshot_store_t *self)
{
    return self->root;
}

int eddy_snapshot_store_write_group(eddy_snapshot_store_t *self, const char *job,
                                    uint64_t checkpoint, const char *op, uint32_t kg,
                                    const void *data, size_t len, eddy_err_t *err)
{
    char *const bufs[1] = {(char *)data};
    return eddy_snapshot_store_write_groups(self, job, checkpoint, op, 1, &kg, bufs, &len, true,
                                            err);
}

static int write_groups_objects(eddy_snapshot_store_t *self, const char *job, uint64_t checkpoint,
                                const char *op, uint32_t n, const uint32_t *kgs,
                                char *const *data, const size_t *lens, eddy_err_t *err)
{
    char key[PATH_MAX];
    for (uint32_t i = 0; i < n; i++)
        if (fmt_path(key, sizeof key, err, "%s/chk-%" PRIu64 "/%s/kg-%" PRIu32 ".snap", job,
                     checkpoint, op, kgs[i]) != 0 ||
            put_object(self, key, data[i], lens[i], err) != 0)
            return -1;
    return 0;
}

int eddy_snapshot_store_write_groups(eddy_snapshot_store_t *self, const char *job,
                                     uint64_t checkpoint, const char *op, uint32_t n,
                                     const uint32_t *kgs, char *const *data, const size_t *lens,
                                     bool durable, eddy_err_t *err)
{
    char dir[PATH_MAX];
    if (check_name("job", job, err) != 0 || check_name("operator", op, err) != 0)
        return -1;
    if (!self->dir)
        return write_groups_objects(self, job, checkpoint, op, n, kgs, data, lens, err);
    if (n == 1 && durable) { /* one file: fsync it rather than the whole file system */
        char name[32];
        if (fmt_path(dir, sizeof dir, err, "%s/%s/chk-%" PRIu64 "/%s", self->dir, job,
                     checkpoint, op) != 0)
            return -1;
        snprintf(name, sizeof name, "kg-%" PRIu32 ".snap", kgs[0]);
        return write_file(dir, name, data[0], lens[0], err);
    }
    if (fmt_path(dir, sizeof dir, err, "%s/%s/chk-%" PRIu64 "/%s", self->dir, job, checkpoint,
                 op) != 0)
        return -1;
    if (eddy_mkdir_p(dir, err) != 0)
        return eddy_err_wrap(err, "cannot write snapshot files in %s", dir);
    char (*tmp)[PATH_MAX] = calloc(n ? n : 1, PATH_MAX);
    if (!tmp)
        return eddy_err_set(err, "out of memory");
    uint32_t written = 0;
    int rc = -1;
    for (; written < n; written++) {
        char name[32];
        snprintf(name, sizeof name, "kg-%" PRIu32 ".snap", kgs[written]);
        if (write_temp(dir, name, data[written], lens[written], false, tmp[written], err) != 0)
            goto out;
    }
    /* One flush of the file system instead of one fsync per file: each fsync
     * is a journal commit, and a checkpoint writes one file per key group. */
    if (durable) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || syncfs(dfd) != 0) {
            eddy_err_set(err, "cannot sync %s: %s", dir, strerror(errno));
            if (dfd >= 0)
                close(dfd);
            goto out;
        }
        close(dfd);
    }
    for (uint32_t i = 0; i < n; i++) {
        char final_path[PATH_MAX], name[32];
        snprintf(name, sizeof name, "kg-%" PRIu32 ".snap", kgs[i]);
        if (fmt_path(final_path, sizeof final_path, err, "%s/%s", dir, name) != 0 ||
            publish(tmp[i], final_path, err) != 0) {
            for (uint32_t k = i + 1; k < n; k++)
                unlink(tmp[k]);
            written = 0;
            goto out_free;
        }
    }
    written = 0;
    rc = durable ? eddy_fsync_dir(dir, err) : 0;
    goto out_free;
out:
    for (uint32_t i = 0; i < written; i++)
        unlink(tmp[i]);
out_free:
    free(tmp);
    return rc;
}

/* Reads the file or object at key (relative to the root). */
static int read_key(eddy_snapshot_store_t *self, const char *key, char **data, size_t *len,
                    eddy_err_t *err)
{
    char path[PATH_MAX];
    if (!self->dir)
        return get_object(self, key, data, len, err);
    if (fmt_path(path, sizeof path, err, "%s/%s", self->dir, key) != 0)
        return -1;
    return read_file(path, data, len, err);
}

int eddy_snapshot_store_read_group(eddy_snapshot_store_t *self, const char *job,
                                   uint64_t checkpoint, const char *op, uint32_t kg,
                                   char **data, size_t *len, eddy_err_t *err)
{
    char key[PATH_MAX];
    if (check_name("job", job, err) != 0 || check_name("operator", op, err) != 0)
        return -1;
    if (fmt_path(key, sizeof key, err, "%s/chk-%" PRIu64 "/%s/kg-%" PRIu32 ".snap", job,
                 checkpoint, op, kg) != 0)
        return -1;
    if (self->preloaded) {
        pthread_mutex_lock(&self->lock);
        for (preloaded_t **pp = &self->preloaded; *pp; pp = &(*pp)->next) {
            preloaded_t *e = *pp;
            if (strcmp(e->key, key))
                continue;
            *pp = e->next;
            pthread_mutex_unlock(&self->lock);
            *data = e->data;
            *len = e->len;
            free(e->key);
            free(e);
            return 0;
        }
        pthread_mutex_unlock(&self->lock);
    }
    uint64_t holder = checkpoint;
    if (resolve(self, job, checkpoint, op, kg, &holder, err) < 0)
        return -1;
    if (holder == checkpoint)
        return read_key(self, key, data, len, err);
    if (fmt_path(key, sizeof key, err, "%s/chk-%" PRIu64 "/%s/kg-%" PRIu32 ".snap", job, holder,
                 op, kg) != 0 ||
        read_key(self, key, data, len, err) < 0)
        return eddy_err_wrap(err, "key group %" PRIu32 " of %s in checkpoint %" PRIu64
                             " is held by checkpoint %" PRIu64, kg, op, checkpoint, holder);
    return 0;
}

int eddy_snapshot_store_preload(eddy_snapshot_store_t *self, const char *job, uint64_t checkpoint,
                                const char *op, uint32_t kg, char *data, size_t len,
                                eddy_err_t *err)
{
    char key[PATH_MAX];
    if (check_name("job", job, err) != 0 || check_name("operator", op, err) != 0 ||
        fmt_path(key, sizeof key, err, "%s/chk-%" PRIu64 "/%s/kg-%" PRIu32 ".snap", job,
                 checkpoint, op, kg) != 0)
        return -1;
    preloaded_t *e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key))) {
        free(e);
        return eddy_err_set(err, "out of memory");
    }
    e->data = data;
    e->len = len;
    pthread_mutex_lock(&self->lock);
    e->next = self->preloaded;
    self->preloaded = e;
    pthread_mutex_unlock(&self->lock);
    return 0;
}

void eddy_snapshot_store_preload_clear(eddy_snapshot_store_t *self)
{
    pthread_mutex_lock(&self->lock);
    preloaded_t *e = self->preloaded;
    self->preloaded = NULL;
    pthread_mutex_unlock(&self->lock);
    while (e) {
        preloaded_t *next = e->next;
        free(e->key);
        free(e->data);
        free(e);
        e = next;
    }
}

bool eddy_snapshot_store_is_remote(const eddy_snapshot_store_t *self)
{
    return self->dir == NULL;
}

bool eddy_snapshot_store_root_is_remote(const char *root)
{
    return root && !strncmp(root, "s3://", 5);
}

int eddy_snapshot_store_write_manifest(eddy_snapshot_store_t *self, const char *job,
                                       uint64_t checkpoint, const char *op, uint32_t instance,
                                       const void *data, size_t len, eddy_err_t *err)
{
    char dir[PATH_MAX], name[32];
    if (check_name("job", job, err) != 0 || check_name("operator", op, err) != 0)
        return -1;
    snprintf(name, sizeof name, "refs-%" PRIu32 ".ref", instance);
    if (!self->dir) {
        if (fmt_path(dir, sizeof dir, err, "%s/chk-%" PRIu64 "/%s/%s", job, checkpoint, op,
                     name) != 0)
            return -1;
        return put_object(self, dir, data, len, err);
    }
    if (fmt_path(dir, sizeof dir, err, "%s/%s/chk-%" PRIu64 "/%s", self->dir, job, checkpoint,
                 op) != 0)
        return -1;
    return write_file(dir, name, data, len, err);
}

int eddy_snapshot_store_read_key(eddy_snapshot_store_t *self, const char *key, char **data,
                                 size_t *len, eddy_err_t *err)
{
    if (eddy_object_store_check_key(key, err) < 0)
        return -1;
    return read_key(self, key, data, len, err);
}

int eddy_snapshot_store_write_blob(eddy_snapshot_store_t *self, const char *job,
                                   uint64_t checkpoint, const char *name, const void *data,
                                   size_t len, eddy_err_t *err)
{
    char dir[PATH_MAX], file[SNAP_NAME_MAX + 8];
    if (check_name("job", job, err) != 0 || check_name("blob", name, err) != 0)
        return -1;
    if (!self->dir) {
        if (fmt_path(dir, sizeof dir, err, "%s/chk-%" PRIu64 "/%s.blob", job, checkpoint,
                     name) != 0)
            return -1;
        return put_object(self, dir, data, len, err);
    }
    if (fmt_path(dir, sizeof dir, err, "%s/%s/chk-%" PRIu64, self->dir, job, checkpoint) != 0)
        return -1;
    snprintf(file, sizeof file, "%s.blob", name);
    return write_file(dir, file, data, len, err);
}

int eddy_snapshot_store_read_blob(eddy_snapshot_store_t *self, const char *job,
                                  uint64_t checkpoint, const char *name, char **data,
                                  size_t *len, eddy_err_t *err)
{
    char key[PATH_MAX];
    if (check_name("job", job, err) != 0 || check_name("blob", name, err) != 0)
        return -1;
    if (fmt_path(key, sizeof key, err, "%s/chk-%" PRIu64 "/%s.blob", job, checkpoint, name) != 0)
        return -1;
    return read_key(self, key, data, len, err);
}

int eddy_snapshot_store_remove_checkpoint(eddy_snapshot_store_t *self, const char *job,
                                          uint64_t checkpoint, eddy_err_t *err)
{
    char job_dir[PATH_MAX], path[PATH_MAX];
    if (check_name("job", job, err) != 0)
        return -1;
    if (!self->dir) {
        if (fmt_path(path, sizeof path, err, "%s/chk-%" PRIu64 "/", job, checkpoint) != 0)
            return -1;
        if (remove_objects(self, path, err) != 0)
            return eddy_err_wrap(err, "cannot remove checkpoint %" PRIu64 " of job %s",
                                 checkpoint, job);
        return 0;
    }
    if (fmt_path(job_dir, sizeof job_dir, err, "%s/%s", self->dir, job) != 0 ||
        fmt_path(path, sizeof path, err, "%s/chk-%" PRIu64, job_dir, checkpoint) != 0)
        return -1;
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT)
        return 0;
    if (remove_tree(path, err) != 0)
        return eddy_err_wrap(err, "cannot remove checkpoint %" PRIu64 " of job %s", checkpoint,
                             job);
    return eddy_fsync_dir(job_dir, err);
}
