/* sources.c - file, generator and socket sources (see sources.h). None
 * blocks the worker loop: the socket source connects on its own thread. */
#include "connectors/sources.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "connectors/line_reader.h"

/* ---- file --------------------------------------------------------------- */

#define FILE_BUF (1u << 20)

typedef struct file_source {
    int fd;
    char *buf;
    size_t buf_len, buf_pos;  /* bytes in buf, next unread byte */
    int64_t buf_offset;       /* file offset of buf[0] */
    int64_t split_end;        /* lines starting at or past this belong to the next split */
    int64_t position;         /* offset of the next line */
    char *carry;              /* a line longer than the buffer */
    size_t carry_len, carry_cap;
    char path[4096];
    /* A .gz file cannot be split at byte ranges: instance 0 reads it whole
     * (position = uncompressed offset), the others have nothing to read. */
    bool gz;
    eddy_line_reader_t *gz_reader;
} file_source_t;

static int file_fill(file_source_t *s, eddy_err_t *err)
{
    s->buf_offset += (int64_t)s->buf_len;
    s->buf_len = s->buf_pos = 0;
    for (;;) {
        ssize_t n = read(s->fd, s->buf, FILE_BUF);
        if (n >= 0) {
            s->buf_len = (size_t)n;
            return 0;
        }
        if (errno != EINTR)
            return eddy_err_set(err, "reading %s: %s", s->path, strerror(errno));
    }
}

static int file_seek(file_source_t *s, int64_t offset, eddy_err_t *err)
{
    if (lseek(s->fd, offset, SEEK_SET) < 0)
        return eddy_err_set(err, "seeking %s: %s", s->path, strerror(errno));
    s->buf_offset = offset;
    s->buf_len = s->buf_pos = 0;
    return 0;
}

static void file_close(void *self)
{
    file_source_t *s = self;
    if (s->fd >= 0)
        close(s->fd);
    eddy_line_reader_destroy(&s->gz_reader);
    free(s->buf);
    free(s->carry);
    free(s);
}

int eddy_file_source_check(const char *path, eddy_err_t *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return eddy_err_set(err, "cannot read input %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) {
        const char *what = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISFIFO(st.st_mode) ? "a FIFO"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                                                  : "not a regular file";
        return eddy_err_set(err, "input %s is %s; it must be a regular file (use a socket for a stream)",
                            path, what);
    }
    if (access(path, R_OK) != 0)
        return eddy_err_set(err, "cannot read input %s: %s", path, strerror(errno));
    return 0;
}

static void *file_open(const eddy_op_context_t *ctx, int64_t start_position, eddy_err_t *err)
{
    const eddy_file_source_config_t *cfg = ctx->config;
    if (eddy_file_source_check(cfg->path, err) < 0)
        return NULL;
    file_source_t *s = calloc(1, sizeof *s);
    if (!s) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(s->path, sizeof s->path, "%s", cfg->path);
    if (eddy_path_is_gz(cfg->path)) {
        s->fd = -1;
        s->gz = true;
        if (ctx->instance == 0) {
            s->gz_reader = eddy_line_reader_open(cfg->path, start_position, err);
            if (!s->gz_reader) {
                file_close(s);
                return NULL;
            }
        }
        return s;
    }
    s->fd = open(cfg->path, O_RDONLY | O_CLOEXEC);
    s->buf = malloc(FILE_BUF);
    struct stat st;
    if (s->fd < 0 || fstat(s->fd, &st) < 0) {
        eddy_err_set(err, "cannot read input %s: %s", cfg->path, strerror(errno));
        file_close(s);
        return NULL;
    }
    if (!s->buf) {
        eddy_err_set(err, "out of memory");
        file_close(s);
        return NULL;
    }
    int64_t size = st.st_size;
    int64_t start = size * ctx->instance / ctx->parallelism;
    s->split_end = size * (ctx->instance + 1) / ctx->parallelism;
    if (start_position >= 0) {
        start = start_position;
    } else if (start > 0) {
        /* The split starts at the first line that begins at or after start. */
        if (file_seek(s, start - 1, err) < 0) {
            file_close(s);
            return NULL;
        }
        for (;;) {
            if (s->buf_pos == s->buf_len && file_fill(s, err) < 0) {
                file_close(s);
                return NULL;
            }
            if (s->buf_len == 0) {
                start = size;
                break;
            }
            char *nl = memchr(s->buf + s->buf_pos, '\n', s->buf_len - s->buf_pos);
            if (nl) {
                start = s->buf_offset + (nl - s->buf) + 1;
                break;
            }
            s->buf_pos = s->buf_len;
        }
    }
    if (file_seek(s, start, err) < 0) {
        file_close(s);
        return NULL;
    }
    s->position = start;
    return s;
}

static int carry_append(file_source_t *s, const char *p, size_t n, eddy_err_t *err)
{
    if (s->carry_len + n > s->carry_cap) {
        size_t cap = (s->carry_len + n) * 2;
        if (cap > EDDY_RECORD_MAX_BYTES * 2)
            return eddy_err_set(err, "%s: line at offset %lld is longer than %u bytes", s->path,
                                (long long)s->position, EDDY_RECORD_MAX_BYTES);
        char *c = realloc(s->carry, cap);
        if (!c)
            return eddy_err_set(err, "out of memory");
        s->carry = c;
        s->carry_cap = cap;
    }
    memcpy(s->carry + s->carry_len, p, n);
    s->carry_len += n;
    return 0;
}

static int file_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    file_source_t *s = self;
    if (s->gz) {
        uint32_t emitted;
        return s->gz_reader ? eddy_line_reader_poll(s->gz_reader, out, max, &emitted, err) : 0;
    }
    for (uint32_t emitted = 0; emitted < max;) {
        if (s->position >= s->split_end)
            return 0;
        if (s->buf_pos == s->buf_len) {
            if (file_fill(s, err) < 0)
                return -1;
            if (s->buf_len == 0) { /* end of file: a last line without '\n' */
                if (s->carry_len) {
                    eddy_record_t rec = eddy_record_make(s->carry, (uint32_t)s->carry_len, 1);
                    eddy_emit(out, &rec);
                    s->position += (int64_t)s->carry_len;
                    s->carry_len = 0;
                }
                s->split_end = s->position;
                return 0;
            }
        }
        char *start = s->buf + s->buf_pos;
        size_t avail = s->buf_len - s->buf_pos;
        char *nl = memchr(start, '\n', avail);
        if (!nl) {
            if (carry_append(s, start, avail, err) < 0)
                return -1;
            s->buf_pos = s->buf_len;
            continue;
        }
        size_t n = (size_t)(nl - start);
        s->buf_pos += n + 1;
        eddy_record_t rec;
        if (s->carry_len) {
            if (carry_append(s, start, n, err) < 0)
                return -1;
            rec = eddy_record_make(s->carry, (uint32_t)s->carry_len, 1);
            s->position += (int64_t)s->carry_len + 1;
            s->carry_len = 0;
        } else {
            rec = eddy_record_make(start, (uint32_t)n, 1);
            s->position += (int64_t)n + 1;
        }
        eddy_emit(out, &rec);
        emitted++;
    }
    return 1;
}

static int64_t file_position(void *self)
{
    file_source_t *s = self;
    if (s->gz)
        return s->gz_reader ? eddy_line_reader_offset(s->gz_reader) : 0;
    return s->position;
}

const eddy_source_ops_t eddy_file_source_ops = {
    .kind = "file", .replayable = true, .open = file_open, .poll = file_poll,
    .position = file_position, .close = file_close};

/* ---- generator ---------------------------------------------------------- */

uint64_t eddy_generator_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint32_t eddy_generator_line(const eddy_generator_config_t *cfg, uint64_t n, char *buf,
                             uint32_t size)
{
    uint32_t len = 0;
    /* Jobs reject a vocabulary of 0, but a config can come from an older
     * client: one word then, rather than a division by zero in every worker. */
    uint64_t vocabulary = cfg->vocabulary ? cfg->vocabulary : 1;
    uint64_t state = eddy_generator_mix(cfg->seed ^ eddy_generator_mix(n));
    for (uint32_t w = 0; w < cfg->words_per_line; w++) {
        state = eddy_generator_mix(state);
        /* Skewed toward low ids, like word frequencies in text. */
        uint64_t a = (state & 0xffffffffu) % vocabulary;
        uint64_t b = (state >> 32) % vocabulary;
        uint64_t id = a * b / vocabulary;
        /* 53 bits of another draw, uniform in [0, 1) */
        bool hot = cfg->hot_key_share > 0 &&
                   (double)(eddy_generator_mix(~state) >> 11) * 0x1.0p-53 < cfg->hot_key_share;
        int k = hot ? snprintf(buf + len, size - len, "%s" EDDY_GENERATOR_HOT_WORD, w ? " " : "")
                    : snprintf(buf + len, size - len, "%sw%llu", w ? " " : "", (unsigned long long)id);
        if (k < 0 || (uint32_t)k >= size - len)
            break;
        len += (uint32_t)k;
    }
    return len;
}

typedef struct generator_source {
    const eddy_generator_config_t *cfg;
    uint64_t next_line;   /* global line number of the next line */
    uint64_t made;        /* lines made by this instance: the position */
    uint32_t stride;
    eddy_generator_line_fn make_line;
    char line[4096];
} generator_source_t;

static void *generator_open(const eddy_op_context_t *ctx, int64_t start_position, eddy_err_t *err)
{
    generator_source_t *s = calloc(1, sizeof *s);
    if (!s) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    s->cfg = ctx->config;
    s->make_line = s->cfg->make_line ? s->cfg->make_line : eddy_generator_line;
    s->stride = ctx->parallelism;
    s->made = start_position > 0 ? (uint64_t)start_position : 0;
    s->next_line = ctx->instance + s->made * s->stride;
    return s;
}

static int generator_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    (void)err;
    generator_source_t *s = self;
    for (uint32_t i = 0; i < max; i++) {
        if (s->cfg->lines && s->next_line >= s->cfg->lines)
            return 0;
        uint32_t len = s->make_line(s->cfg, s->next_line, s->line, sizeof s->line);
        eddy_record_t rec = eddy_record_make(s->line, len, 1);
        eddy_emit(out, &rec);
        s->next_line += s->stride;
        s->made++;
    }
    return (s->cfg->lines && s->next_line >= s->cfg->lines) ? 0 : 1;
}

static int64_t generator_position(void *self)
{
    return (int64_t)((generator_source_t *)self)->made;
}

const eddy_source_ops_t eddy_generator_source_ops = {
    .kind = "generator", .replayable = true, .open = generator_open, .poll = generator_poll,
    .position = generator_position, .close = free};

/* ---- socket ------------------------------------------------------------- */

/* Resolving and connecting can take seconds (DNS, a server that does not
 * answer SYNs), so they run on a detached thread per source; the source's
 * poll only looks at the outcome, and the worker loop never waits. The
 * connection is shared by the two until both let go of it (refs): a source
 * closed while its thread still connects leaves the cleanup to the thread. */
enum { CONNECTING, CONNECTED, CONNECT_FAILED };

typedef struct connection {
    pthread_mutex_t lock;
    int refs;
    int state;
    int fd;
    char host[256];
    char port[16];
    char where[300];
    char error[sizeof(eddy_err_t)];
} connection_t;

static void connection_release(connection_t *c)
{
    pthread_mutex_lock(&c->lock);
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&c->lock);
    if (!last)
        return;
    if (c->fd >= 0)
        close(c->fd);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void *connect_thread(void *arg)
{
    connection_t *c = arg;
    char error[sizeof(eddy_err_t)] = "";
    int fd = -1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(c->host, c->port, &hints, &res);
    if (rc != 0) {
        snprintf(error, sizeof error, "cannot resolve socket source %s: %s", c->where,
                 gai_strerror(rc));
    } else {
        int last_errno = 0;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
            if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
                break;
            last_errno = errno;
            if (fd >= 0)
                close(fd);
            fd = -1;
        }
        freeaddrinfo(res);
        if (fd < 0)
            snprintf(error, sizeof error, "cannot connect to socket source %s: %s", c->where,
                     strerror(last_errno));
        else
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    pthread_mutex_lock(&c->lock);
    c->fd = fd;
    c->state = fd >= 0 ? CONNECTED : CONNECT_FAILED;
    snprintf(c->error, sizeof c->error, "%s", error);
    pthread_mutex_unlock(&c->lock);
    connection_release(c);
    return NULL;
}

typedef struct socket_source {
    connection_t *conn;
    int fd;               /* the connected socket (owned by conn), -1 until then */
    char buf[65536];
    size_t pos, len;      /* buf[pos, len) is read but not yet emitted */
    int64_t consumed;
    bool eof;
    char where[300];
    int *wait_fd;         /* the task's (ctx->wait_fd): set once connected */
} socket_source_t;

static void socket_close(void *self)
{
    socket_source_t *s = self;
    if (s->conn)
        connection_release(s->conn);
    free(s);
}

static void *socket_open(const eddy_op_context_t *ctx, int64_t start_position, eddy_err_t *err)
{
    (void)start_position;
    const eddy_socket_source_config_t *cfg = ctx->config;
    socket_source_t *s = calloc(1, sizeof *s);
    connection_t *c = calloc(1, sizeof *c);
    if (!s || !c) {
        free(s);
        free(c);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    s->fd = -1;
    s->wait_fd = ctx->wait_fd;
    snprintf(s->where, sizeof s->where, "%s:%u", cfg->host, cfg->port);
    pthread_mutex_init(&c->lock, NULL);
    c->refs = 2;
    c->state = CONNECTING;
    c->fd = -1;
    snprintf(c->host, sizeof c->host, "%s", cfg->host);
    snprintf(c->port, sizeof c->port, "%u", cfg->port);
    snprintf(c->where, sizeof c->where, "%s", s->where);
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&thread, &attr, connect_thread, c);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        free(s);
        eddy_err_set(err, "socket source %s: cannot start a thread to connect: %s", cfg->host,
                     strerror(rc));
        return NULL;
    }
    s->conn = c;
    return s;
}

/* 1: connected, 0: still connecting, -1: failed (err names host:port). */
static int socket_connected(socket_source_t *s, eddy_err_t *err)
{
    if (s->fd >= 0)
        return 1;
    pthread_mutex_lock(&s->conn->lock);
    int state = s->conn->state;
    s->fd = s->conn->fd;
    if (state == CONNECT_FAILED)
        eddy_err_set(err, "%s", s->conn->error);
    pthread_mutex_unlock(&s->conn->lock);
    /* From now on the task waits for data in the worker's poll set. */
    if (s->fd >= 0 && s->wait_fd)
        *s->wait_fd = s->fd;
    return state == CONNECTED ? 1 : state == CONNECTING ? 0 : -1;
}

static int socket_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    socket_source_t *s = self;
    int connected = socket_connected(s, err);
    if (connected <= 0)
        return connected < 0 ? -1 : EDDY_SOURCE_IDLE;
    uint32_t emitted = 0;
    while (emitted < max) {
        /* Lines are emitted from buf at pos; the unread rest moves to the
         * front only when the buffer must be refilled, so a full buffer of
         * short lines costs one copy, not one per line. */
        char *line = s->buf + s->pos;
        size_t avail = s->len - s->pos;
        char *nl = memchr(line, '\n', avail);
        if (nl) {
            size_t n = (size_t)(nl - line);
            eddy_record_t rec = eddy_record_make(line, (uint32_t)n, 1);
            eddy_emit(out, &rec);
            s->pos += n + 1;
            s->consumed += (int64_t)n + 1;
            emitted++;
            continue;
        }
        if (s->eof) {
            if (avail) {
                eddy_record_t rec = eddy_record_make(line, (uint32_t)avail, 1);
                eddy_emit(out, &rec);
                s->consumed += (int64_t)avail;
            }
            s->pos = s->len = 0;
            return 0;
        }
        if (s->pos) {
            memmove(s->buf, line, avail);
            s->pos = 0;
            s->len = avail;
        }
        if (s->len == sizeof s->buf)
            return eddy_err_set(err, "socket source %s: line longer than %zu bytes", s->where,
                                sizeof s->buf);
        ssize_t n = recv(s->fd, s->buf + s->len, sizeof s->buf - s->len, 0);
        if (n > 0) {
            s->len += (size_t)n;
        } else if (n == 0) {
            s->eof = true;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            /* Nothing now: the task waits for the socket in the worker's
             * poll set, so an idle socket neither spins nor blocks the
             * loop, and a line is read as soon as it arrives. */
            return emitted ? 1 : EDDY_SOURCE_IDLE;
        } else if (errno != EINTR) {
            return eddy_err_set(err, "socket source %s: %s", s->where, strerror(errno));
        }
    }
    return 1;
}

static int64_t socket_position(void *self)
{
    return ((socket_source_t *)self)->consumed;
}

const eddy_source_ops_t eddy_socket_source_ops = {
    .kind = "socket", .replayable = false, .open = socket_open, .poll = socket_poll,
    .position = socket_position, .close = socket_close};
