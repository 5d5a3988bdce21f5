/* fsutil.c - durable-file primitives (see fsutil.h). */
#include "common/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int eddy_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int eddy_fsync_dir(const char *path, eddy_err_t *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return eddy_err_set(err, "cannot open directory %s: %s", path, strerror(errno));
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL)
        rc = eddy_err_set(err, "cannot fsync directory %s: %s", path, strerror(errno));
    close(fd);
    return rc;
}

int eddy_mkdir_p(const char *path, eddy_err_t *err)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0)
        return eddy_err_set(err, "empty directory path");
    if (len >= sizeof buf)
        return eddy_err_set(err, "path too long: %.200s", path);
    memcpy(buf, path, len + 1);

    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        if (buf[i - 1] == '/')
            continue; /* repeated or trailing slash */
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) == 0) {
            char parent[PATH_MAX];
            memcpy(parent, buf, i + 1);
            char *slash = strrchr(parent, '/');
            if (!slash)
                strcpy(parent, ".");
            else if (slash == parent)
                parent[1] = '\0';
            else
                *slash = '\0';
            if (eddy_fsync_dir(parent, err) != 0)
                return -1;
        } else if (errno == EEXIST) {
            struct stat st;
            if (stat(buf, &st) != 0)
                return eddy_err_set(err, "cannot stat %s: %s", buf, strerror(errno));
            if (!S_ISDIR(st.st_mode))
                return eddy_err_set(err, "cannot create directory %s: a file of that name exists", buf);
        } else {
            return eddy_err_set(err, "cannot create directory %s: %s", buf, strerror(errno));
        }
        buf[i] = saved;
    }
    return 0;
}

int eddy_private_dir_open(const char *given, const char *what, eddy_err_t *err)
{
    if (!given || !given[0])
        return eddy_err_set(err, "%s: empty directory path", what);
    /* without trailing slashes: "link/" would follow the link */
    char path[PATH_MAX];
    size_t n = strlen(given);
    if (n >= sizeof path)
        return eddy_err_set(err, "%s: path too long: %.200s", what, given);
    memcpy(path, given, n + 1);
    while (n > 1 && path[n - 1] == '/')
        path[--n] = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        if (errno != ENOENT)
            return eddy_err_set(err, "%s %s: cannot create it: %s", what, path, strerror(errno));
        char parent[PATH_MAX];
        size_t len = strlen(path);
        if (len >= sizeof parent)
            return eddy_err_set(err, "%s: path too long: %.200s", what, path);
        memcpy(parent, path, len + 1);
        while (len > 1 && parent[len - 1] == '/')
            parent[--len] = '\0';
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
            *slash = '\0';
            if (eddy_mkdir_p(parent, err) < 0)
                return eddy_err_wrap(err, "%s %s", what, path);
        }
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return eddy_err_set(err, "%s %s: cannot create it: %s", what, path, strerror(errno));
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP || errno == ENOTDIR)
            return eddy_err_set(err, "%s %s is a symbolic link or not a directory: refused "
                                "(it must be a directory of this user, mode 0700)", what, path);
        return eddy_err_set(err, "%s %s: %s", what, path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return eddy_err_set(err, "%s %s: %s", what, path, strerror(e));
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        return eddy_err_set(err, "%s %s is owned by uid %u, not by this process (uid %u): refused "
                            "(anyone owning it could plant code; remove it or choose another directory)",
                            what, path, (unsigned)st.st_uid, (unsigned)geteuid());
    }
    if (st.st_mode & 077) {
        close(fd);
        return eddy_err_set(err, "%s %s has mode %04o: refused (it must be private to its owner: "
                            "chmod 700 %s)", what, path, (unsigned)(st.st_mode & 07777), path);
    }
    return fd;
}
