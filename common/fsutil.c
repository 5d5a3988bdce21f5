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
