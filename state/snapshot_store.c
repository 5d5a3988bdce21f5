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

#include "common/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
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
    char *root;
};

static atomic_uint_fast64_t tmp_seq;

/* --- small helpers -------------------------------------------------------- */

static void put_u64le(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

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
    memcpy(header, SNAP_MAGIC, SNAP_MAGIC_LEN);
    put_u64le(header + 8, (uint64_t)len);
    put_u64le(header + 16, XXH64(len ? data : "", len, 0));

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
    if (memcmp(header, SNAP_MAGIC, SNAP_MAGIC_LEN) != 0) {
        eddy_err_set(err, "snapshot file %s has a bad magic (not an eddy snapshot)", path);
        goto fail;
    }
    uint64_t plen = get_u64le(header + 8);
    uint64_t sum = get_u64le(header + 16);
    if (plen > UINT64_MAX - SNAP_HEADER_LEN || plen > SIZE_MAX - 1 ||
        plen > (uint64_t)SSIZE_MAX) {
        eddy_err_set(err, "snapshot file %s has a corrupt length field (%" PRIu64 ")", path, plen);
        goto fail;
    }
    uint64_t expected = SNAP_HEADER_LEN + plen;
    if (size < expected) {
        eddy_err_set(err, "snapshot file %s is truncated (%" PRIu64 " of %" PRIu64 " bytes)", path,
                     size, expected);
        goto fail;
    }
    if (size > expected) {
        eddy_err_set(err,
                     "snapshot file %s has %" PRIu64 " trailing bytes (%" PRIu64
                     " bytes, expected %" PRIu64 ")",
                     path, size - expected, size, expected);
        goto fail;
    }
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
    uint64_t actual = XXH64(buf, (size_t)plen, 0);
    if (actual != sum) {
        eddy_err_set(err,
                     "snapshot file %s is corrupt (checksum mismatch: stored %016" PRIx64
                     ", computed %016" PRIx64 ")",
                     path, sum, actual);
        goto fail;
    }
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

/* --- public API ----------------------------------------------------------- */

eddy_snapshot_store_t *eddy_snapshot_store_new(const char *root, eddy_err_t *err)
{
    if (!root || !*root) {
        eddy_err_set(err, "snapshot store: root directory is empty");
        return NULL;
    }
    size_t len = strlen(root);
    while (len > 1 && root[len - 1] == '/')
        len--;
    if (len >= PATH_MAX - 2 * SNAP_NAME_MAX - 64) {
        eddy_err_set(err, "snapshot store: root path too long: %.200s", root);
        return NULL;
    }
    eddy_snapshot_store_t *self = calloc(1, sizeof *self);
    if (!self || !(self->root = strndup(root, len))) {
        free(self);
        eddy_err_set(err, "snapshot store: out of memory");
        return NULL;
    }
    if (eddy_mkdir_p(self->root, err) != 0) {
        eddy_err_wrap(err, "snapshot store: cannot create root %s", self->root);
        eddy_snapshot_store_destroy(&self);
        return NULL;
    }
    return self;
}

void eddy_snapshot_store_destroy(eddy_snapshot_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->root);
    free(*self_p);
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
    char dir[PATH_MAX], name[32];
    if (check_name("job", job, err) != 0 || check_name("operator", op, err) != 0)
        return -1;
    if (fmt_path(dir, sizeof dir, err, "%s/%s/chk-%" PRIu64 "/%s", self->root, job, checkpoint,
                 op) != 0)
        return -1;
    snprintf(name, sizeof name, "kg-%" PRIu32 ".snap", kg);
    return write_file(dir, name, data, len, err);
}

int eddy_snapshot_store_write_groups(eddy_snapshot_store_t *self, const char *job,
                                     uint64_t checkpoint, const char *op, uint32_t n,
                                     const uint32_t *kgs, char *const *data, const size_t *lens,
                                     bool durable, eddy_err_t *err)
{
    char dir[PATH_MAX];
    if (check_name("job", job, err) != 0 || check_name("operator", op, err) != 0)
        return -1;
    if (fmt_path(dir, sizeof dir, err, "%s/%s/chk-%" PRIu64 "/%s", self->root, job, checkpoint,
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

int eddy_snapshot_store_read_group(eddy_snapshot_store_t *self, const char *job,
                                   uint64_t checkpoint, const char *op, uint32_t kg,
                                   char **data, size_t *len, eddy_err_t *err)
{
    char path[PATH_MAX];
    if (check_name("job", job, err) != 0 || check_name("operator", op, err) != 0)
        return -1;
    if (fmt_path(path, sizeof path, err, "%s/%s/chk-%" PRIu64 "/%s/kg-%" PRIu32 ".snap",
                 self->root, job, checkpoint, op, kg) != 0)
        return -1;
    return read_file(path, data, len, err);
}

int eddy_snapshot_store_write_blob(eddy_snapshot_store_t *self, const char *job,
                                   uint64_t checkpoint, const char *name, const void *data,
                                   size_t len, eddy_err_t *err)
{
    char dir[PATH_MAX], file[SNAP_NAME_MAX + 8];
    if (check_name("job", job, err) != 0 || check_name("blob", name, err) != 0)
        return -1;
    if (fmt_path(dir, sizeof dir, err, "%s/%s/chk-%" PRIu64, self->root, job, checkpoint) != 0)
        return -1;
    snprintf(file, sizeof file, "%s.blob", name);
    return write_file(dir, file, data, len, err);
}

int eddy_snapshot_store_read_blob(eddy_snapshot_store_t *self, const char *job,
                                  uint64_t checkpoint, const char *name, char **data,
                                  size_t *len, eddy_err_t *err)
{
    char path[PATH_MAX];
    if (check_name("job", job, err) != 0 || check_name("blob", name, err) != 0)
        return -1;
    if (fmt_path(path, sizeof path, err, "%s/%s/chk-%" PRIu64 "/%s.blob", self->root, job,
                 checkpoint, name) != 0)
        return -1;
    return read_file(path, data, len, err);
}

int eddy_snapshot_store_remove_checkpoint(eddy_snapshot_store_t *self, const char *job,
                                          uint64_t checkpoint, eddy_err_t *err)
{
    char job_dir[PATH_MAX], path[PATH_MAX];
    if (check_name("job", job, err) != 0)
        return -1;
    if (fmt_path(job_dir, sizeof job_dir, err, "%s/%s", self->root, job) != 0 ||
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
