/* dir_source.c - the dir source (see dir_source.h).
 *
 * An inotify descriptor (non-blocking, read on every poll, never waited on)
 * watches the directory from open(), before the initial scan, so no file
 * can fall between the two; a file seen both ways is queued once. Queued
 * files are read in name order, one at a time, through a line reader. When
 * the kernel's event queue overflows, the directory is scanned again. */
#include "connectors/dir_source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "connectors/line_reader.h"
#include "net/mpcodec.h"

#define STATE_FORMAT 1
#define WATCH_MASK (IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | \
                    IN_MOVE_SELF | IN_ONLYDIR)

/* ---- sorted name sets -------------------------------------------------------- */

typedef struct name_set {
    char **v;
    uint32_t n, cap;
} name_set_t;

/* Index of name, or -(insertion point) - 1. */
static int64_t set_find(char *const *v, uint32_t n, const char *name)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid], name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -(int64_t)lo - 1;
}

static bool set_has(char *const *v, uint32_t n, const char *name)
{
    return set_find(v, n, name) >= 0;
}

/* Adds name (no-op when present); -1 when out of memory. */
static int set_add(char ***v, uint32_t *n, uint32_t *cap, const char *name)
{
    int64_t at = set_find(*v, *n, name);
    if (at >= 0)
        return 0;
    uint32_t pos = (uint32_t)(-at - 1);
    if (*n == *cap) {
        uint32_t ncap = *cap ? *cap * 2 : 16;
        char **nv = realloc(*v, ncap * sizeof *nv);
        if (!nv)
            return -1;
        *v = nv;
        *cap = ncap;
    }
    char *copy = strdup(name);
    if (!copy)
        return -1;
    memmove(*v + pos + 1, *v + pos, (*n - pos) * sizeof **v);
    (*v)[pos] = copy;
    (*n)++;
    return 0;
}

static void set_remove(char **v, uint32_t *n, const char *name)
{
    int64_t at = set_find(v, *n, name);
    if (at < 0)
        return;
    free(v[at]);
    memmove(v + at, v + at + 1, (*n - (uint32_t)at - 1) * sizeof *v);
    (*n)--;
}

static void set_free(char ***v, uint32_t *n, uint32_t *cap)
{
    for (uint32_t i = 0; *v && i < *n; i++)
        free((*v)[i]);
    free(*v);
    *v = NULL;
    *n = *cap = 0;
}

/* ---- names, owners, state bytes ----------------------------------------------- */

bool eddy_dir_source_wanted(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n < EDDY_DIR_NAME_MAX && name[0] != '.' &&
           !(n >= 4 && !strcmp(name + n - 4, ".tmp"));
}

uint32_t eddy_dir_source_owner(const char *name, uint32_t parallelism)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: stable across builds and hosts */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return parallelism ? (uint32_t)(h % parallelism) : 0;
}

static bool valid_entry_name(const char *name)
{
    return eddy_dir_source_wanted(name) && !strchr(name, '/');
}

void eddy_dir_progress_clear(eddy_dir_progress_t *p)
{
    set_free(&p->done, &p->n_done, &p->cap_done);
    memset(p, 0, sizeof *p);
}

int eddy_dir_state_encode(const eddy_dir_progress_t *p, char **out, size_t *len, eddy_err_t *err)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 4);
    eddy_mpw_u64(&w, STATE_FORMAT);
    eddy_mpw_str(&w, p->current);
    eddy_mpw_i64(&w, p->offset);
    eddy_mpw_array(&w, p->n_done);
    for (uint32_t i = 0; i < p->n_done; i++)
        eddy_mpw_str(&w, p->done[i]);
    *out = eddy_mpw_release(&w, len);
    if (!*out)
        return eddy_err_set(err, "out of memory");
    return 0;
}

int eddy_dir_state_decode(const void *data, size_t len, eddy_dir_progress_t *p, eddy_err_t *err)
{
    memset(p, 0, sizeof *p);
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) < 0)
        return eddy_err_wrap(err, "dir source state");
    uint32_t fields = eddy_mpr_remaining(&r);
    if (fields != 4) {
        eddy_mpr_close(&r);
        return eddy_err_set(err, "dir source state: %u fields, expected 4", fields);
    }
    uint64_t format = eddy_mpr_u64(&r, UINT64_MAX);
    if (r.ok && format != STATE_FORMAT) {
        eddy_mpr_close(&r);
        return eddy_err_set(err, "dir source state: format %llu, this eddy reads format %d",
                            (unsigned long long)format, STATE_FORMAT);
    }
    eddy_mpr_strcpy(&r, p->current, sizeof p->current);
    p->offset = eddy_mpr_i64(&r);
    if (r.ok && p->offset < 0)
        eddy_mpr_fail(&r, "negative offset");
    if (r.ok && p->current[0] && !valid_entry_name(p->current))
        eddy_mpr_fail(&r, "current file is not a file name");
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(&r, EDDY_SOURCE_STATE_MAX, &si, &sc, &sn);
    char name[EDDY_DIR_NAME_MAX];
    for (uint32_t i = 0; i < n && r.ok; i++) {
        eddy_mpr_strcpy(&r, name, sizeof name);
        if (!r.ok)
            break;
        if (!valid_entry_name(name))
            eddy_mpr_fail(&r, "a name of a read file is not a file name");
        else if (p->n_done && strcmp(p->done[p->n_done - 1], name) >= 0)
            eddy_mpr_fail(&r, "names of read files are not sorted and distinct");
        else if (set_add(&p->done, &p->n_done, &p->cap_done, name) < 0)
            eddy_mpr_fail(&r, "out of memory");
    }
    eddy_mpr_leave(&r, si, sc, sn);
    int rc = eddy_mpr_finish(&r, "dir source state", err);
    eddy_mpr_close(&r);
    if (rc < 0)
        eddy_dir_progress_clear(p);
    return rc;
}

/* ---- the source ------------------------------------------------------------------ */

typedef struct dir_source {
    char dir[4096];
    uint32_t instance, parallelism;
    int ifd;
    eddy_dir_progress_t progress; /* done set, current file and offset */
    name_set_t pending;           /* this instance's complete files not read yet */
    eddy_line_reader_t *reader;   /* open on progress.current, or NULL */
    int64_t lines;
} dir_source_t;

int eddy_dir_source_check(const char *path, eddy_err_t *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return eddy_err_set(err, "cannot watch input directory %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return eddy_err_set(err, "input %s is not a directory (dir:// watches a directory)", path);
    if (access(path, R_OK | X_OK) != 0)
        return eddy_err_set(err, "cannot read input directory %s: %s", path, strerror(errno));
    return 0;
}

static bool is_regular(const dir_source_t *s, const char *name)
{
    char path[4096 + EDDY_DIR_NAME_MAX + 1];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A complete file appeared (or was found): queue it when it is ours and new. */
static int offer(dir_source_t *s, const char *name, eddy_err_t *err)
{
    if (!eddy_dir_source_wanted(name) || eddy_dir_source_owner(name, s->parallelism) != s->instance)
        return 0;
    if (!strcmp(name, s->progress.current) || set_has(s->progress.done, s->progress.n_done, name))
        return 0;
    if (!is_regular(s, name))
        return 0;
    if (set_add(&s->pending.v, &s->pending.n, &s->pending.cap, name) < 0)
        return eddy_err_set(err, "out of memory");
    return 0;
}

/* Queues every complete file of ours and forgets read files that are gone. */
static int scan(dir_source_t *s, eddy_err_t *err)
{
    DIR *d = opendir(s->dir);
    if (!d)
        return eddy_err_set(err, "cannot list input directory %s: %s", s->dir, strerror(errno));
    name_set_t present = {0};
    int rc = 0;
    struct dirent *e;
    errno = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (!eddy_dir_source_wanted(e->d_name))
            continue;
        if (set_add(&present.v, &present.n, &present.cap, e->d_name) < 0 || offer(s, e->d_name, err) < 0)
            rc = eddy_err_set(err, "out of memory");
    }
    if (rc == 0 && errno)
        rc = eddy_err_set(err, "cannot list input directory %s: %s", s->dir, strerror(errno));
    closedir(d);
    for (uint32_t i = 0; rc == 0 && i < s->progress.n_done;) {
        if (set_has(present.v, present.n, s->progress.done[i]))
            i++;
        else
            set_remove(s->progress.done, &s->progress.n_done, s->progress.done[i]);
    }
    set_free(&present.v, &present.n, &present.cap);
    return rc;
}

static void dir_close(void *self)
{
    dir_source_t *s = self;
    if (s->ifd >= 0)
        close(s->ifd);
    eddy_line_reader_destroy(&s->reader);
    eddy_dir_progress_clear(&s->progress);
    set_free(&s->pending.v, &s->pending.n, &s->pending.cap);
    free(s);
}

static void *dir_open(const eddy_op_context_t *ctx, int64_t start_position, eddy_err_t *err)
{
    (void)start_position; /* progress is the state bytes */
    const eddy_dir_source_config_t *cfg = ctx->config;
    if (eddy_dir_source_check(cfg->path, err) < 0)
        return NULL;
    dir_source_t *s = calloc(1, sizeof *s);
    if (!s) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    s->ifd = -1;
    snprintf(s->dir, sizeof s->dir, "%s", cfg->path);
    s->instance = ctx->instance;
    s->parallelism = ctx->parallelism;
    if (ctx->source_state &&
        eddy_dir_state_decode(ctx->source_state, ctx->source_state_len, &s->progress, err) < 0) {
        eddy_err_wrap(err, "restoring the dir source of %s", s->dir);
        dir_close(s);
        return NULL;
    }
    s->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (s->ifd < 0 || inotify_add_watch(s->ifd, s->dir, WATCH_MASK) < 0) {
        eddy_err_set(err, "cannot watch input directory %s: %s", s->dir, strerror(errno));
        dir_close(s);
        return NULL;
    }
    if (scan(s, err) < 0) {
        dir_close(s);
        return NULL;
    }
    return s;
}

/* Reads what inotify has queued, without waiting. */
static int drain_events(dir_source_t *s, eddy_err_t *err)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(s->ifd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return eddy_err_set(err, "watching %s: %s", s->dir, strerror(errno));
        }
        bool rescan = false;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
                return eddy_err_set(err, "input directory %s was removed or moved", s->dir);
            if (ev->mask & IN_Q_OVERFLOW) {
                rescan = true;
                continue;
            }
            if (!ev->len || (ev->mask & IN_ISDIR))
                continue;
            if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
                set_remove(s->progress.done, &s->progress.n_done, ev->name);
                set_remove(s->pending.v, &s->pending.n, ev->name);
            } else if (offer(s, ev->name, err) < 0) {
                return -1;
            }
        }
        if (rescan && scan(s, err) < 0)
            return -1;
    }
}

/* Opens the next queued file (name order); false when none is queued. */
static int next_file(dir_source_t *s, eddy_err_t *err)
{
    while (!s->reader) {
        if (!s->progress.current[0]) {
            if (s->pending.n == 0)
                return 0;
            snprintf(s->progress.current, sizeof s->progress.current, "%s", s->pending.v[0]);
            s->progress.offset = 0;
            set_remove(s->pending.v, &s->pending.n, s->pending.v[0]);
        }
        char path[4096 + EDDY_DIR_NAME_MAX + 1];
        snprintf(path, sizeof path, "%s/%s", s->dir, s->progress.current);
        s->reader = eddy_line_reader_open(path, s->progress.offset, err);
        if (s->reader)
            return 1;
        if (access(path, F_OK) != 0 && errno == ENOENT) { /* removed before we got to it */
            s->progress.current[0] = '\0';
            continue;
        }
        return -1;
    }
    return 1;
}

static int dir_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    dir_source_t *s = self;
    if (drain_events(s, err) < 0)
        return -1;
    uint32_t total = 0;
    while (total < max) {
        int rc = next_file(s, err);
        if (rc < 0)
            return -1;
        if (rc == 0)
            return total ? 1 : EDDY_SOURCE_IDLE;
        uint32_t got = 0;
        rc = eddy_line_reader_poll(s->reader, out, max - total, &got, err);
        total += got;
        s->lines += got;
        s->progress.offset = eddy_line_reader_offset(s->reader);
        if (rc < 0)
            return -1;
        if (rc == 0) { /* read through: it counts as read from now on */
            eddy_line_reader_destroy(&s->reader);
            if (set_add(&s->progress.done, &s->progress.n_done, &s->progress.cap_done,
                        s->progress.current) < 0)
                return eddy_err_set(err, "out of memory");
            s->progress.current[0] = '\0';
            s->progress.offset = 0;
        }
    }
    return 1;
}

static int64_t dir_position(void *self)
{
    return ((dir_source_t *)self)->lines;
}

static int dir_write_state(void *self, char **out, size_t *len, eddy_err_t *err)
{
    dir_source_t *s = self;
    if (eddy_dir_state_encode(&s->progress, out, len, err) < 0)
        return -1;
    if (*len > EDDY_SOURCE_STATE_MAX) {
        eddy_err_set(err, "the names of the %u files read from %s (%zu bytes) exceed the source "
                          "state limit of %u bytes; remove files from the directory once read",
                     s->progress.n_done, s->dir, *len, EDDY_SOURCE_STATE_MAX);
        free(*out);
        *out = NULL;
        *len = 0;
        return -1;
    }
    return 0;
}

const eddy_source_ops_t eddy_dir_source_ops = {
    .kind = "dir", .replayable = true, .open = dir_open, .poll = dir_poll,
    .position = dir_position, .close = dir_close, .write_state = dir_write_state};
