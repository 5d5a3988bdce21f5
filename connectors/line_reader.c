/* line_reader.c - lines of a plain or gzip file (see line_reader.h). One
 * buffer of raw (or inflated) bytes; a line longer than the buffer goes
 * through a carry buffer, like the file source's. */
#include "connectors/line_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define READ_BUF (256u << 10)

struct eddy_line_reader {
    int fd;           /* plain files */
    gzFile gz;        /* .gz files (owns its descriptor) */
    char *buf;
    size_t buf_len, buf_pos;
    bool eof;
    int64_t offset;   /* (uncompressed) offset of the next line */
    char *carry;
    size_t carry_len, carry_cap;
    char path[4096];
};

bool eddy_path_is_gz(const char *path)
{
    size_t n = strlen(path);
    return n > 3 && !strcmp(path + n - 3, ".gz");
}

void eddy_line_reader_destroy(eddy_line_reader_t **self_p)
{
    eddy_line_reader_t *r = *self_p;
    if (!r)
        return;
    if (r->gz)
        gzclose_r(r->gz);
    else if (r->fd >= 0)
        close(r->fd);
    free(r->buf);
    free(r->carry);
    free(r);
    *self_p = NULL;
}

static int gz_failure(eddy_line_reader_t *r, eddy_err_t *err)
{
    int code = Z_OK;
    const char *msg = gzerror(r->gz, &code);
    if (code == Z_ERRNO)
        return eddy_err_set(err, "reading %s: %s", r->path, strerror(errno));
    return eddy_err_set(err, "%s: corrupt gzip data (%s)", r->path, msg && msg[0] ? msg : "unknown error");
}

eddy_line_reader_t *eddy_line_reader_open(const char *path, int64_t offset, eddy_err_t *err)
{
    eddy_line_reader_t *r = calloc(1, sizeof *r);
    if (!r) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    r->fd = -1;
    if (strlen(path) >= sizeof r->path) {
        free(r);
        eddy_err_set(err, "path is longer than %zu bytes", sizeof r->path - 1);
        return NULL;
    }
    snprintf(r->path, sizeof r->path, "%s", path);
    r->buf = malloc(READ_BUF);
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0 || !r->buf) {
        if (r->fd < 0)
            eddy_err_set(err, "cannot read %s: %s", path, strerror(errno));
        else
            eddy_err_set(err, "out of memory");
        eddy_line_reader_destroy(&r);
        return NULL;
    }
    if (eddy_path_is_gz(path)) {
        r->gz = gzdopen(r->fd, "rb");
        if (!r->gz) {
            eddy_err_set(err, "cannot read %s: out of memory", path);
            eddy_line_reader_destroy(&r);
            return NULL;
        }
        r->fd = -1; /* the gzFile closes it */
        gzbuffer(r->gz, READ_BUF);
        /* zlib would pass plain bytes through unchanged: a .gz that is not
         * gzip is a mistake worth saying, not text to count. */
        if (gzdirect(r->gz)) {
            eddy_err_set(err, "%s: not gzip data (a .gz input is decompressed)", path);
            eddy_line_reader_destroy(&r);
            return NULL;
        }
        if (offset > 0 && gzseek(r->gz, (z_off_t)offset, SEEK_SET) < 0) {
            gz_failure(r, err);
            eddy_line_reader_destroy(&r);
            return NULL;
        }
    } else if (offset > 0 && lseek(r->fd, offset, SEEK_SET) < 0) {
        eddy_err_set(err, "seeking %s: %s", path, strerror(errno));
        eddy_line_reader_destroy(&r);
        return NULL;
    }
    r->offset = offset > 0 ? offset : 0;
    return r;
}

static int fill(eddy_line_reader_t *r, eddy_err_t *err)
{
    r->buf_len = r->buf_pos = 0;
    for (;;) {
        if (r->gz) {
            int n = gzread(r->gz, r->buf, READ_BUF);
            if (n < 0)
                return gz_failure(r, err);
            if (n == 0) {
                int code = Z_OK;
                gzerror(r->gz, &code);
                if (code != Z_OK) /* Z_BUF_ERROR: the stream ended early */
                    return eddy_err_set(err, "%s: truncated gzip data (unexpected end of file)",
                                        r->path);
                r->eof = true;
            }
            r->buf_len = (size_t)n;
            return 0;
        }
        ssize_t n = read(r->fd, r->buf, READ_BUF);
        if (n >= 0) {
            r->buf_len = (size_t)n;
            r->eof = n == 0;
            return 0;
        }
        if (errno != EINTR)
            return eddy_err_set(err, "reading %s: %s", r->path, strerror(errno));
    }
}

static int carry_append(eddy_line_reader_t *r, const char *p, size_t n, eddy_err_t *err)
{
    if (r->carry_len + n > r->carry_cap) {
        size_t cap = (r->carry_len + n) * 2;
        if (r->carry_len + n > EDDY_RECORD_MAX_BYTES)
            return eddy_err_set(err, "%s: line at offset %lld is longer than %u bytes", r->path,
                                (long long)r->offset, EDDY_RECORD_MAX_BYTES);
        char *c = realloc(r->carry, cap);
        if (!c)
            return eddy_err_set(err, "out of memory");
        r->carry = c;
        r->carry_cap = cap;
    }
    memcpy(r->carry + r->carry_len, p, n);
    r->carry_len += n;
    return 0;
}

int eddy_line_reader_poll(eddy_line_reader_t *r, eddy_collector_t *out, uint32_t max,
                          uint32_t *emitted, eddy_err_t *err)
{
    *emitted = 0;
    while (*emitted < max) {
        if (r->buf_pos == r->buf_len) {
            if (r->eof || fill(r, err) < 0)
                return r->eof ? 0 : -1;
            if (r->buf_len == 0) { /* end of file: a last line without '\n' */
                if (r->carry_len) {
                    eddy_record_t rec = eddy_record_make(r->carry, (uint32_t)r->carry_len, 1);
                    eddy_emit(out, &rec);
                    (*emitted)++;
                    r->offset += (int64_t)r->carry_len;
                    r->carry_len = 0;
                }
                return 0;
            }
        }
        char *start = r->buf + r->buf_pos;
        size_t avail = r->buf_len - r->buf_pos;
        char *nl = memchr(start, '\n', avail);
        if (!nl) {
            if (carry_append(r, start, avail, err) < 0)
                return -1;
            r->buf_pos = r->buf_len;
            continue;
        }
        size_t n = (size_t)(nl - start);
        r->buf_pos += n + 1;
        eddy_record_t rec;
        if (r->carry_len) {
            if (carry_append(r, start, n, err) < 0)
                return -1;
            rec = eddy_record_make(r->carry, (uint32_t)r->carry_len, 1);
            r->offset += (int64_t)r->carry_len + 1;
            r->carry_len = 0;
        } else {
            if (n > EDDY_RECORD_MAX_BYTES)
                return eddy_err_set(err, "%s: line at offset %lld is longer than %u bytes", r->path,
                                    (long long)r->offset, EDDY_RECORD_MAX_BYTES);
            rec = eddy_record_make(start, (uint32_t)n, 1);
            r->offset += (int64_t)n + 1;
        }
        eddy_emit(out, &rec);
        (*emitted)++;
    }
    return 1;
}

int64_t eddy_line_reader_offset(const eddy_line_reader_t *r)
{
    return r->offset;
}
