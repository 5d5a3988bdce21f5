/* metastore_file.c - the embedded metastore backend: one file per key below
 * a root directory (see metastore.h; used by `eddy local` and tests).
 *
 * Why files: the local mode needs a store that survives restarts of any of
 * its processes without running etcd, and a directory is the simplest thing
 * that several processes can share safely.
 *
 * Layout and rules:
 *   - A key maps to exactly one file name: bytes in [A-Za-z0-9_-] and '.'
 *     (except as the first byte) are kept, every other byte becomes %XX
 *     (upper-case hex). '/' is escaped, so no key can name anything outside
 *     the directory, and no name is ".", ".." or hidden.
 *   - put writes "~tmp.<pid>.<n>", fsyncs it, renames it over the key's file
 *     and fsyncs the directory, so readers (in any process) see the old or
 *     the new value, never a torn one, and a returned put survives a crash.
 *     delete unlinks and fsyncs the directory.
 *   - list scans the directory and keeps only names that are the canonical
 *     encoding of a valid key: temp files ('~' is always escaped in keys) and
 *     foreign files are ignored. Temp files older than a minute (left by a
 *     crashed writer) are removed at open.
 * All I/O goes through a directory fd, so a relative root keeps meaning the
 * directory it named at open time.
 *
 * Private and sealed (docs/security.md, "File metadata store"):
 *   - the directory is 0700 and every record 0600: created so, and made so
 *     at open when an older eddy left them 0755/0644;
 *   - every record is encrypted (AES-256-GCM, libcrypto) with the store's
 *     key, ".key" in the directory (32 random bytes, 0600, made at first
 *     open), and bound to its file name (the AEAD's associated data), so the
 *     job arguments a record holds (postgresql://user:PASSWORD@...) are
 *     never on disk in plain text, and a record moved to another key does
 *     not decrypt. Sealed: "EDDYENC1" nonce[12] tag[16] ciphertext. A record
 *     without the magic is an older eddy's plain text: read as is, sealed
 *     when the store is locked (eddy_metastore_lock);
 *   - eddy_metastore_lock takes an exclusive flock on ".lock" (holding the
 *     holder's pid), so a second coordinator on the same directory stops at
 *     start with "metadata directory D is in use by pid P".
 * Names starting with '.' are never keys, so list skips .key and .lock. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "state/metastore_backend.h"

#define NAME_LIMIT 255           /* NAME_MAX on Linux file systems */
#define TMP_PREFIX "~tmp."
#define STALE_TMP_SECONDS 60
#define KEY_NAME ".key"
#define LOCK_NAME ".lock"
#define KEY_BYTES 32
#define SEAL_MAGIC "EDDYENC1"
#define SEAL_MAGIC_LEN 8
#define SEAL_NONCE 12
#define SEAL_TAG 16
#define SEAL_HEADER (SEAL_MAGIC_LEN + SEAL_NONCE + SEAL_TAG)

typedef struct {
    char *dir; /* as given, for messages */
    int dirfd;
    int lockfd; /* -1 until eddy_metastore_lock */
    unsigned char key[KEY_BYTES];
} file_store_t;

static atomic_ulong tmp_counter;

/* ---- key <-> file name --------------------------------------------------- */

static int is_plain(unsigned char c, size_t pos)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || (c == '.' && pos > 0);
}

/* Encodes key into name[NAME_LIMIT + 1]; -1 when it does not fit. */
static int encode_key(const char *key, char *name)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; key[i]; i++) {
        unsigned char c = (unsigned char)key[i];
        if (is_plain(c, i)) {
            if (o + 1 > NAME_LIMIT)
                return -1;
            name[o++] = (char)c;
        } else {
            if (o + 3 > NAME_LIMIT)
                return -1;
            name[o++] = '%';
            name[o++] = hex[c >> 4];
            name[o++] = hex[c & 15];
        }
    }
    name[o] = '\0';
    return 0;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1; /* lower case is never produced, so never canonical */
}

/* Decodes a directory entry name into a malloc'd *key. Returns 1, 0 when
 * the name is not the canonical encoding of a valid key (not ours: skip it),
 * -1 when out of memory. */
static int decode_name(const char *name, char **key_out)
{
    *key_out = NULL;
    size_t n = strlen(name);
    if (n == 0 || n > NAME_LIMIT)
        return 0;
    char *key = malloc(n + 1);
    if (!key)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '%') {
            int hi = i + 2 < n ? hexval((unsigned char)name[i + 1]) : -1;
            int lo = hi >= 0 ? hexval((unsigned char)name[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                goto not_ours;
            unsigned char d = (unsigned char)(hi * 16 + lo);
            if (d < 0x20 || d > 0x7e || is_plain(d, o))
                goto not_ours;
            key[o++] = (char)d;
            i += 2;
        } else if (is_plain(c, o)) {
            key[o++] = (char)c;
        } else {
            goto not_ours;
        }
    }
    key[o] = '\0';
    *key_out = key;
    return 1;
not_ours:
    free(key);
    return 0;
}

static int name_for(const file_store_t *fs, const char *key, char *name, eddy_err_t *err)
{
    if (encode_key(key, name) < 0)
        return eddy_err_set(err, "key is too long for the file store in %s (its escaped file "
                            "name would exceed %d bytes)", fs->dir, NAME_LIMIT);
    return 0;
}

/* ---- small I/O helpers --------------------------------------------------- */

/* Reads the file name in the store dir. Returns 1 with *out (NUL-terminated,
 * malloc'd) and *len, 0 when absent, 2 when it is not a regular file, -1 on
 * error. */
static int read_value(const file_store_t *fs, const char *name, char **out, size_t *len,
                      eddy_err_t *err)
{
    *out = NULL;
    *len = 0;
    int fd = openat(fs->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        if (errno == ELOOP)
            return 2;
        return eddy_err_set(err, "open %s/%s: %s", fs->dir, name, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return eddy_err_set(err, "stat %s/%s: %s", fs->dir, name, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return 2;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return eddy_err_set(err, "out of memory reading %s/%s (%zu bytes)", fs->dir, name,
                            cap - 1);
    }
    for (;;) {
        if (n + 1 == cap) { /* grew since fstat; it should not, but cope */
            char *nb = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                close(fd);
                return eddy_err_set(err, "out of memory reading %s/%s", fs->dir, name);
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            return eddy_err_set(err, "read %s/%s: %s", fs->dir, name, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 1;
}

static int sync_dir(const file_store_t *fs, eddy_err_t *err)
{
    if (fsync(fs->dirfd) < 0)
        return eddy_err_set(err, "fsync directory %s: %s", fs->dir, strerror(errno));
    return 0;
}

static int write_record(file_store_t *fs, const char *name, const void *value, size_t len,
                        eddy_err_t *err);

static void remove_stale_temps(const file_store_t *fs)
{
    int fd = openat(fs->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (strncmp(de->d_name, TMP_PREFIX, sizeof TMP_PREFIX - 1) == 0 &&
            fstatat(fs->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode) && now - st.st_mtime > STALE_TMP_SECONDS)
            unlinkat(fs->dirfd, de->d_name, 0);
    }
    closedir(d);
}

/* ---- sealing ------------------------------------------------------------- */

static bool is_sealed(const char *data, size_t len)
{
    return len >= SEAL_HEADER && !memcmp(data, SEAL_MAGIC, SEAL_MAGIC_LEN);
}

/* AES-256-GCM of value under the store's key, name as associated data:
 * *out (malloc'd) is SEAL_HEADER + len bytes. */
static int seal(const file_store_t *fs, const char *name, const void *value, size_t len,
                unsigned char **out, size_t *out_len, eddy_err_t *err)
{
    if (len > INT_MAX - SEAL_HEADER)
        return eddy_err_set(err, "value too large to seal (%zu bytes)", len);
    unsigned char *buf = malloc(SEAL_HEADER + len);
    if (!buf)
        return eddy_err_set(err, "out of memory");
    memcpy(buf, SEAL_MAGIC, SEAL_MAGIC_LEN);
    unsigned char *nonce = buf + SEAL_MAGIC_LEN, *tag = nonce + SEAL_NONCE, *ct = tag + SEAL_TAG;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, fin = 0;
    bool ok = ctx && RAND_bytes(nonce, SEAL_NONCE) == 1 &&
              EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, fs->key, nonce) == 1 &&
              EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)name, (int)strlen(name)) == 1 &&
              EVP_EncryptUpdate(ctx, ct, &n, value, (int)len) == 1 &&
              EVP_EncryptFinal_ex(ctx, ct + n, &fin) == 1 &&
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SEAL_TAG, tag) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
        free(buf);
        return eddy_err_set(err, "cannot encrypt the record (libcrypto)");
    }
    *out = buf;
    *out_len = SEAL_HEADER + len;
    return 0;
}

/* The value of a sealed record in place of *data (NUL-terminated, *len
 * updated); -1 when it does not authenticate. */
static int unseal(const file_store_t *fs, const char *name, char **data, size_t *len,
                  eddy_err_t *err)
{
    unsigned char *in = (unsigned char *)*data;
    size_t ct_len = *len - SEAL_HEADER;
    unsigned char *nonce = in + SEAL_MAGIC_LEN, *tag = nonce + SEAL_NONCE, *ct = tag + SEAL_TAG;
    char *out = malloc(ct_len + 1);
    if (!out)
        return eddy_err_set(err, "out of memory");
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, fin = 0;
    bool ok = ctx && ct_len <= INT_MAX &&
              EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, fs->key, nonce) == 1 &&
              EVP_DecryptUpdate(ctx, NULL, &n, (const unsigned char *)name, (int)strlen(name)) == 1 &&
              EVP_DecryptUpdate(ctx, (unsigned char *)out, &n, ct, (int)ct_len) == 1 &&
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SEAL_TAG, tag) == 1 &&
              EVP_DecryptFinal_ex(ctx, (unsigned char *)out + n, &fin) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
        free(out);
        return eddy_err_set(err, "%s/%s does not decrypt with %s/" KEY_NAME
                            " (damaged, or written with another store's key)", fs->dir, name,
                            fs->dir);
    }
    out[ct_len] = '\0';
    free(*data);
    *data = out;
    *len = ct_len;
    return 0;
}

/* read_value, then unsealed (plain text of an older eddy passes as is). */
static int read_record(const file_store_t *fs, const char *name, char **out, size_t *len,
                       eddy_err_t *err)
{
    int rc = read_value(fs, name, out, len, err);
    if (rc == 1 && is_sealed(*out, *len) && unseal(fs, name, out, len, err) < 0) {
        free(*out);
        *out = NULL;
        *len = 0;
        return -1;
    }
    return rc;
}

/* The store's key: read from .key, or made (random, 0600) when there is
 * none; two processes making it at once agree through link(). */
static int load_key(file_store_t *fs, eddy_err_t *err)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int fd = openat(fs->dirfd, KEY_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            struct stat st;
            ssize_t got = -1;
            if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == KEY_BYTES &&
                st.st_uid == geteuid()) {
                if (st.st_mode & 077)
                    fchmod(fd, 0600);
                got = pread(fd, fs->key, KEY_BYTES, 0);
            }
            close(fd);
            if (got != KEY_BYTES)
                return eddy_err_set(err, "file store %s: %s/" KEY_NAME " is not a key of this "
                                    "user (%d bytes, regular file, owned by uid %u)", fs->dir,
                                    fs->dir, KEY_BYTES, (unsigned)geteuid());
            return 0;
        }
        if (errno != ENOENT)
            return eddy_err_set(err, "file store %s: open " KEY_NAME ": %s", fs->dir,
                                strerror(errno));
        unsigned char key[KEY_BYTES];
        if (RAND_bytes(key, KEY_BYTES) != 1)
            return eddy_err_set(err, "file store %s: no random bytes for a key", fs->dir);
        char tmp[64];
        snprintf(tmp, sizeof tmp, TMP_PREFIX "key.%ld.%lu", (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1));
        fd = openat(fs->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return eddy_err_set(err, "file store %s: create %s: %s", fs->dir, tmp, strerror(errno));
        bool wrote = eddy_write_all(fd, key, KEY_BYTES) == 0 && fsync(fd) == 0;
        close(fd);
        int linked = wrote ? linkat(fs->dirfd, tmp, fs->dirfd, KEY_NAME, 0) : -1;
        int e = errno;
        unlinkat(fs->dirfd, tmp, 0);
        if (linked == 0) {
            memcpy(fs->key, key, KEY_BYTES);
            return sync_dir(fs, err);
        }
        if (!wrote || e != EEXIST)
            return eddy_err_set(err, "file store %s: cannot make " KEY_NAME ": %s", fs->dir,
                                strerror(e));
        /* another process made it first: use theirs */
    }
    return eddy_err_set(err, "file store %s: cannot settle on a key", fs->dir);
}

/* Calls fn on every entry of the store directory. */
static void each_entry(const file_store_t *fs, void (*fn)(const file_store_t *, const char *, void *),
                       void *arg)
{
    int fd = openat(fs->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            fn(fs, de->d_name, arg);
    closedir(d);
}

/* Records an older eddy made 0644: 0600 (symlinks are left alone: never
 * followed, never read). */
static void make_private(const file_store_t *fs, const char *name, void *arg)
{
    (void)arg;
    struct stat st;
    if (fstatat(fs->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        (st.st_mode & 077))
        fchmodat(fs->dirfd, name, st.st_mode & 0700, 0);
}

/* ---- backend operations -------------------------------------------------- */

void *eddy_metastore_file_open(const char *dir, eddy_err_t *err)
{
    if (!dir[0]) {
        eddy_err_set(err, "file store: empty directory path");
        return NULL;
    }
    file_store_t *fs = calloc(1, sizeof *fs);
    if (!fs || !(fs->dir = strdup(dir))) {
        free(fs);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    fs->lockfd = -1;
    fs->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fs->dirfd < 0 && errno == ENOENT) {
        if (eddy_mkdir_p(dir, err) < 0) {
            eddy_err_wrap(err, "file store %s", dir);
            goto fail;
        }
        fs->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (fs->dirfd < 0) {
        eddy_err_set(err, "file store %s: %s", dir, strerror(errno));
        goto fail;
    }
    if (faccessat(fs->dirfd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
        eddy_err_set(err, "file store %s: directory is not writable: %s", dir, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (fstat(fs->dirfd, &st) < 0 || ((st.st_mode & 077) && fchmod(fs->dirfd, 0700) < 0)) {
        eddy_err_set(err, "file store %s: cannot make the directory private (mode 0700): %s", dir,
                     strerror(errno));
        goto fail;
    }
    if (load_key(fs, err) < 0)
        goto fail;
    each_entry(fs, make_private, NULL);
    remove_stale_temps(fs);
    return fs;
fail:
    if (fs->dirfd >= 0)
        close(fs->dirfd);
    free(fs->dir);
    free(fs);
    return NULL;
}

static void file_destroy(void **impl_p)
{
    file_store_t *fs = *impl_p;
    if (!fs)
        return;
    if (fs->lockfd >= 0)
        close(fs->lockfd); /* releases the flock */
    close(fs->dirfd);
    OPENSSL_cleanse(fs->key, sizeof fs->key);
    free(fs->dir);
    free(fs);
    *impl_p = NULL;
}

static int file_put(void *impl, const char *key, const void *value, size_t len,
                    eddy_err_t *err)
{
    file_store_t *fs = impl;
    char name[NAME_LIMIT + 1];
    if (name_for(fs, key, name, err) < 0)
        return -1;
    return write_record(fs, name, value, len, err);
}

/* Seals value and puts it at name: temp (0600) + fsync + rename + fsync. */
static int write_record(file_store_t *fs, const char *name, const void *plain, size_t plain_len,
                        eddy_err_t *err)
{
    unsigned char *value = NULL;
    size_t len = 0;
    if (seal(fs, name, plain, plain_len, &value, &len, err) < 0)
        return -1;
    char tmp[64];
    snprintf(tmp, sizeof tmp, TMP_PREFIX "%ld.%lu", (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    int fd = openat(fs->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        free(value);
        return eddy_err_set(err, "create %s/%s: %s", fs->dir, tmp, strerror(errno));
    }
    const char *step = NULL;
    if (eddy_write_all(fd, value, len) < 0)
        step = "write";
    else if (fsync(fd) < 0)
        step = "fsync";
    int e = errno;
    if (close(fd) < 0 && !step) {
        step = "close";
        e = errno;
    }
    if (!step && renameat(fs->dirfd, tmp, fs->dirfd, name) < 0) {
        step = "rename to";
        e = errno;
    }
    free(value);
    if (step) {
        unlinkat(fs->dirfd, tmp, 0);
        return eddy_err_set(err, "%s %s/%s: %s", step, fs->dir,
                            strcmp(step, "rename to") == 0 ? name : tmp, strerror(e));
    }
    return sync_dir(fs, err);
}

static int file_get(void *impl, const char *key, char **value, size_t *len, eddy_err_t *err)
{
    file_store_t *fs = impl;
    char name[NAME_LIMIT + 1];
    if (name_for(fs, key, name, err) < 0)
        return -1;
    int rc = read_record(fs, name, value, len, err);
    if (rc == 2)
        return eddy_err_set(err, "%s/%s is not a regular file", fs->dir, name);
    return rc;
}

static int file_del(void *impl, const char *key, eddy_err_t *err)
{
    file_store_t *fs = impl;
    char name[NAME_LIMIT + 1];
    if (name_for(fs, key, name, err) < 0)
        return -1;
    if (unlinkat(fs->dirfd, name, 0) < 0) {
        if (errno == ENOENT)
            return 0;
        return eddy_err_set(err, "unlink %s/%s: %s", fs->dir, name, strerror(errno));
    }
    return sync_dir(fs, err);
}

static int file_list(void *impl, const char *prefix, eddy_kv_list_t *out, eddy_err_t *err)
{
    file_store_t *fs = impl;
    int fd = openat(fs->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return eddy_err_set(err, "open directory %s: %s", fs->dir, strerror(errno));
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return eddy_err_set(err, "open directory %s: %s", fs->dir, strerror(e));
    }
    size_t plen = strlen(prefix), cap = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                rc = eddy_err_set(err, "read directory %s: %s", fs->dir, strerror(errno));
            break;
        }
        if (de->d_name[0] == '.' || de->d_name[0] == '~')
            continue;
        char *key;
        int dr = decode_name(de->d_name, &key);
        if (dr < 0) {
            rc = eddy_err_set(err, "out of memory");
            break;
        }
        if (dr == 0)
            continue;
        if (strncmp(key, prefix, plen) != 0) {
            free(key);
            continue;
        }
        char *value;
        size_t len;
        int r = read_record(fs, de->d_name, &value, &len, err);
        if (r != 1) {
            free(key);
            if (r < 0) { /* 0: deleted meanwhile; 2: not ours */
                rc = -1;
                break;
            }
            continue;
        }
        if (eddy_kv_list_push(out, &cap, key, value, len, err) < 0) {
            rc = -1;
            break;
        }
    }
    closedir(d);
    if (rc < 0)
        eddy_kv_list_clear(out);
    return rc;
}

/* An older eddy's plain-text record: sealed in place. */
static void seal_plain(const file_store_t *fs, const char *name, void *arg)
{
    eddy_err_t *err = arg;
    char *key, *value;
    size_t len;
    if (err->msg[0] || name[0] == '.' || name[0] == '~' || decode_name(name, &key) != 1)
        return;
    free(key);
    if (read_value(fs, name, &value, &len, err) == 1 && !is_sealed(value, len))
        write_record((file_store_t *)fs, name, value, len, err);
    free(value);
}

static int file_lock(void *impl, eddy_err_t *err)
{
    file_store_t *fs = impl;
    if (fs->lockfd >= 0)
        return 0;
    int fd = openat(fs->dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return eddy_err_set(err, "metadata directory %s: cannot open " LOCK_NAME ": %s", fs->dir,
                            strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = e == EWOULDBLOCK ? pread(fd, pid, sizeof pid - 1, 0) : -1;
        close(fd);
        if (e != EWOULDBLOCK)
            return eddy_err_set(err, "metadata directory %s: cannot lock " LOCK_NAME ": %s",
                                fs->dir, strerror(e));
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        return eddy_err_set(err, "metadata directory %s is in use by pid %s (one coordinator per "
                            "directory: give this one its own --metastore, or use etcd:// for "
                            "standby coordinators)", fs->dir, pid[0] ? pid : "(unknown)");
    }
    char pid[32];
    int plen = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)plen, 0) != plen) {
        int e = errno;
        close(fd);
        return eddy_err_set(err, "metadata directory %s: cannot write " LOCK_NAME ": %s", fs->dir,
                            strerror(e));
    }
    fs->lockfd = fd;
    eddy_err_t serr = {{0}};
    each_entry(fs, seal_plain, &serr);
    if (serr.msg[0])
        return eddy_err_set(err, "metadata directory %s: cannot encrypt an older record: %s",
                            fs->dir, serr.msg);
    return 0;
}

const eddy_metastore_ops_t eddy_metastore_file_ops = {
    .name = "file",
    .put = file_put,
    .get = file_get,
    .del = file_del,
    .list = file_list,
    .destroy = file_destroy,
    .lock = file_lock,
};
