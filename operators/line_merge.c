/* line_merge.c - external merge sort of line files (see line_merge.h). */
#include "operators/line_merge.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/fsutil.h"

#define IO_BUF ((size_t)1 << 20)
#define RUN_BUF ((size_t)256 << 10)
#define PATH_MAX_LEN 4400

/* A line in the arena. prefix: its first 8 bytes, big-endian, zero-padded,
 * so that most comparisons end without touching the bytes; where the
 * prefixes differ their order is the bytes' order (a zero pad sorts like
 * "shorter first"), where they are equal the bytes decide. */
typedef struct line_ref {
    uint64_t prefix;
    const char *p;
    size_t len;
} line_ref_t;

typedef struct merger {
    const char *tmp_dir;
    size_t budget, used;
    char *arena;
    size_t arena_size, arena_used;
    line_ref_t *refs;
    size_t n, cap;
    char **runs;
    size_t n_runs, cap_runs;
    char *iobuf;
    eddy_line_merge_stats_t st;
} merger_t;

static uint64_t prefix_of(const char *p, size_t len)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++)
        v = (v << 8) | (i < len ? (unsigned char)p[i] : 0u);
    return v;
}

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    size_t common = al < bl ? al : bl;
    /* an empty line may have no bytes at all (NULL): memcmp must not see it */
    int c = common ? memcmp(a, b, common) : 0;
    if (c)
        return c;
    return (al > bl) - (al < bl);
}

static int ref_cmp(const void *x, const void *y)
{
    const line_ref_t *a = x, *b = y;
    if (a->prefix != b->prefix)
        return a->prefix < b->prefix ? -1 : 1;
    return bytes_cmp(a->p, a->len, b->p, b->len);
}

static int write_refs(FILE *f, const line_ref_t *refs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fwrite(refs[i].p, 1, refs[i].len, f) != refs[i].len || putc('\n', f) == EOF)
            return -1;
    return 0;
}

/* Sorts the lines in memory and writes them as the next run file. */
static int flush_run(merger_t *m, eddy_err_t *err)
{
    if (!m->n)
        return 0;
    qsort(m->refs, m->n, sizeof *m->refs, ref_cmp);
    if (m->n_runs == m->cap_runs) {
        size_t cap = m->cap_runs ? m->cap_runs * 2 : 8;
        char **runs = realloc(m->runs, cap * sizeof *runs);
        if (!runs)
            return eddy_err_set(err, "out of memory");
        m->runs = runs;
        m->cap_runs = cap;
    }
    char path[PATH_MAX_LEN];
    snprintf(path, sizeof path, "%s/run-%d-%zu", m->tmp_dir, (int)getpid(), m->n_runs);
    char *copy = strdup(path);
    FILE *f = copy ? fopen(path, "w") : NULL;
    if (!f) {
        free(copy);
        return copy ? eddy_err_set(err, "cannot write %s: %m", path)
                    : eddy_err_set(err, "out of memory");
    }
    m->runs[m->n_runs++] = copy; /* removed at the end whatever happens */
    setvbuf(f, m->iobuf, _IOFBF, IO_BUF);
    int ok = write_refs(f, m->refs, m->n) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        return eddy_err_set(err, "cannot write %s: %m", path);
    m->n = 0;
    m->used = 0;
    m->arena_used = 0;
    return 0;
}

static int add_line(merger_t *m, const char *p, size_t len, eddy_err_t *err)
{
    size_t cost = len + sizeof(line_ref_t);
    if (m->n && m->used + cost > m->budget && flush_run(m, err) < 0)
        return -1;
    if (m->arena_used + len > m->arena_size) {
        /* only a line longer than the budget gets here, into an empty run */
        char *arena = realloc(m->arena, len);
        if (!arena)
            return eddy_err_set(err, "out of memory (a line of %zu bytes)", len);
        m->arena = arena;
        m->arena_size = len;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 4096;
        line_ref_t *refs = realloc(m->refs, cap * sizeof *refs);
        if (!refs)
            return eddy_err_set(err, "out of memory");
        m->refs = refs;
        m->cap = cap;
    }
    char *dst = m->arena + m->arena_used;
    memcpy(dst, p, len);
    m->arena_used += len;
    m->refs[m->n++] = (line_ref_t){.prefix = prefix_of(dst, len), .p = dst, .len = len};
    m->used += cost;
    m->st.lines++;
    return 0;
}

static int read_stream(merger_t *m, FILE *f, const char *path, eddy_err_t *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    errno = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n')
            len--;
        rc = add_line(m, line, (size_t)len, err);
    }
    if (rc == 0 && ferror(f))
        rc = eddy_err_set(err, "cannot read %s: %m", path);
    free(line);
    return rc;
}

static int read_input(merger_t *m, const char *path, eddy_err_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return eddy_err_set(err, "cannot read %s: %m", path);
    setvbuf(f, NULL, _IOFBF, RUN_BUF);
    int rc = read_stream(m, f, path, err);
    fclose(f);
    return rc;
}

/* ---- the k-way merge of the run files ------------------------------------ */

typedef struct run_reader {
    FILE *f;
    char *line, *buf;
    size_t cap, len;
} run_reader_t;

static bool reader_next(run_reader_t *r)
{
    ssize_t len = getline(&r->line, &r->cap, r->f);
    if (len < 0)
        return false;
    r->len = (size_t)len - (len > 0 && r->line[len - 1] == '\n');
    return true;
}

static bool reader_less(const run_reader_t *rs, size_t a, size_t b)
{
    return bytes_cmp(rs[a].line, rs[a].len, rs[b].line, rs[b].len) < 0;
}

static void heap_down(size_t *heap, size_t n, size_t i, const run_reader_t *rs)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, min = i;
        if (l < n && reader_less(rs, heap[l], heap[min]))
            min = l;
        if (r < n && reader_less(rs, heap[r], heap[min]))
            min = r;
        if (min == i)
            return;
        size_t t = heap[i];
        heap[i] = heap[min];
        heap[min] = t;
        i = min;
    }
}

/* Merges the sorted files runs[0..n_runs) into out. check: the runs may
 * not be sorted after all; then it stops at the first line that is less
 * than the one written before it (an unsorted input always shows so) and
 * returns 1. */
static int merge_runs(char *const *runs, size_t n_runs, bool check, FILE *out, size_t *lines,
                      eddy_err_t *err)
{
    run_reader_t *rs = calloc(n_runs ? n_runs : 1, sizeof *rs);
    size_t *heap = calloc(n_runs ? n_runs : 1, sizeof *heap);
    int rc = rs && heap ? 0 : eddy_err_set(err, "out of memory");
    size_t n = 0;
    char *last = NULL;
    size_t last_len = 0, last_cap = 0;
    bool any = false;
    for (size_t i = 0; rc == 0 && i < n_runs; i++) {
        rs[i].f = fopen(runs[i], "r");
        if (!rs[i].f) {
            rc = eddy_err_set(err, "cannot read %s: %m", runs[i]);
            break;
        }
        if ((rs[i].buf = malloc(RUN_BUF)))
            setvbuf(rs[i].f, rs[i].buf, _IOFBF, RUN_BUF);
        if (reader_next(&rs[i]))
            heap[n++] = i;
    }
    for (size_t i = n / 2; rc == 0 && i-- > 0;)
        heap_down(heap, n, i, rs);
    while (rc == 0 && n > 0) {
        run_reader_t *r = &rs[heap[0]];
        if (check) {
            if (any && bytes_cmp(r->line, r->len, last, last_len) < 0) {
                rc = 1;
                break;
            }
            if (r->len > last_cap) {
                char *grown = realloc(last, r->len);
                if (!grown) {
                    rc = eddy_err_set(err, "out of memory");
                    break;
                }
                last = grown;
                last_cap = r->len;
            }
            if (r->len)
                memcpy(last, r->line, r->len);
            last_len = r->len;
            any = true;
        }
        ++*lines;
        if (fwrite(r->line, 1, r->len, out) != r->len || putc('\n', out) == EOF)
            rc = eddy_err_set(err, "cannot write the merged output: %m");
        else if (!reader_next(r))
            heap[0] = heap[--n];
        heap_down(heap, n, 0, rs);
    }
    for (size_t i = 0; rs && i < n_runs; i++) {
        if (rs[i].f && ferror(rs[i].f) && rc == 0)
            rc = eddy_err_set(err, "cannot read %s: %m", runs[i]);
        if (rs[i].f)
            fclose(rs[i].f);
        free(rs[i].line);
        free(rs[i].buf);
    }
    free(rs);
    free(heap);
    free(last);
    return rc;
}

/* Writes the sorted lines to f (named name): those in memory (no runs),
 * the runs merged, or (sorted) the inputs merged as they are; 1 when
 * those turned out not to be sorted. */
static int write_lines(merger_t *m, char *const *sorted, size_t n_sorted, FILE *f,
                       const char *name, eddy_err_t *err)
{
    if (sorted)
        return merge_runs(sorted, n_sorted, true, f, &m->st.lines, err);
    if (m->n_runs > 0) {
        size_t merged = 0; /* counted when read */
        return merge_runs(m->runs, m->n_runs, false, f, &merged, err);
    }
    if (!m->n)
        return 0; /* refs may be NULL */
    qsort(m->refs, m->n, sizeof *m->refs, ref_cmp);
    return write_refs(f, m->refs, m->n) < 0 ? eddy_err_set(err, "cannot write %s: %m", name) : 0;
}

/* Writes the result beside output and renames it there: the lines in
 * memory (no runs), the runs merged, or (sorted) the inputs merged as they
 * are; 1 (nothing renamed) when those turned out not to be sorted. */
static int write_output(merger_t *m, char *const *sorted, size_t n_sorted, const char *output,
                        eddy_err_t *err)
{
    char tmp[PATH_MAX_LEN], dir[PATH_MAX_LEN];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", output, (int)getpid());
    snprintf(dir, sizeof dir, "%s", output);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir] = '\0'; /* "/x" keeps "/" */
    FILE *f = fopen(tmp, "w");
    if (!f)
        return eddy_err_set(err, "cannot write %s: %m", tmp);
    setvbuf(f, m->iobuf, _IOFBF, IO_BUF);
    int rc = write_lines(m, sorted, n_sorted, f, tmp, err);
    if (rc == 0 && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        rc = eddy_err_set(err, "cannot write %s: %m", tmp);
    if (fclose(f) != 0 && rc == 0)
        rc = eddy_err_set(err, "cannot write %s: %m", tmp);
    if (rc == 0 && rename(tmp, output) != 0)
        rc = eddy_err_set(err, "cannot rename %s to %s: %m", tmp, output);
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    return eddy_fsync_dir(dir, err);
}

/* Sorts the inputs' lines into output or, with in_place (open for reading
 * and writing, named by inputs[0]), back into that file. */
static int sort_lines(const char *const *inputs, size_t n_inputs, FILE *in_place,
                      const char *tmp_dir, const char *output, size_t budget,
                      eddy_line_merge_stats_t *stats, eddy_err_t *err)
{
    merger_t m = {.tmp_dir = tmp_dir, .budget = budget ? budget : EDDY_LINE_MERGE_BUDGET};
    m.arena_size = m.budget;
    m.arena = malloc(m.arena_size);
    m.iobuf = malloc(IO_BUF);
    int rc = m.arena && m.iobuf ? 0 : eddy_err_set(err, "out of memory");
    if (rc == 0)
        rc = eddy_mkdir_p(tmp_dir, err);
    for (size_t i = 0; rc == 0 && !in_place && i < n_inputs; i++)
        rc = read_input(&m, inputs[i], err);
    if (rc == 0 && in_place)
        rc = read_stream(&m, in_place, inputs[0], err);
    if (rc == 0 && m.n_runs > 0) /* the rest joins the runs on disk */
        rc = flush_run(&m, err);
    if (rc == 0)
        m.st.runs = m.n_runs ? m.n_runs : 1;
    if (rc == 0 && !in_place) {
        rc = write_output(&m, NULL, 0, output, err);
    } else if (rc == 0) {
        /* every line is read: write them back over the same bytes (the
         * same lines, each with its '\n'), then cut what is left */
        rewind(in_place);
        rc = write_lines(&m, NULL, 0, in_place, inputs[0], err);
        long end = rc == 0 && fflush(in_place) == 0 ? ftell(in_place) : -1;
        if (rc == 0 && (end < 0 || ftruncate(fileno(in_place), (off_t)end) != 0 ||
                        fsync(fileno(in_place)) != 0))
            rc = eddy_err_set(err, "cannot write %s: %m", inputs[0]);
    }
    for (size_t i = 0; i < m.n_runs; i++) {
        unlink(m.runs[i]);
        free(m.runs[i]);
    }
    free(m.runs);
    free(m.refs);
    free(m.arena);
    free(m.iobuf);
    if (rc == 0 && stats)
        *stats = m.st;
    return rc;
}

int eddy_line_merge_sorted(const char *const *inputs, size_t n_inputs, const char *tmp_dir,
                           const char *output, size_t budget, eddy_line_merge_stats_t *stats,
                           eddy_err_t *err)
{
    merger_t m = {.tmp_dir = tmp_dir};
    m.iobuf = malloc(IO_BUF);
    if (!m.iobuf)
        return eddy_err_set(err, "out of memory");
    int rc = write_output(&m, (char *const *)inputs, n_inputs, output, err);
    free(m.iobuf);
    if (rc == 1) /* an input was not sorted: sort them all */
        return eddy_line_merge(inputs, n_inputs, tmp_dir, output, budget, stats, err);
    if (rc == 0 && stats)
        *stats = (eddy_line_merge_stats_t){.lines = m.st.lines, .runs = n_inputs};
    return rc;
}

int eddy_line_merge(const char *const *inputs, size_t n_inputs, const char *tmp_dir,
                    const char *output, size_t budget, eddy_line_merge_stats_t *stats,
                    eddy_err_t *err)
{
    return sort_lines(inputs, n_inputs, NULL, tmp_dir, output, budget, stats, err);
}

int eddy_line_sort_in_place(const char *path, const char *tmp_dir, size_t budget,
                            eddy_line_merge_stats_t *stats, eddy_err_t *err)
{
    /* never created: a file removed meanwhile stays removed */
    int fd = open(path, O_RDWR | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r+") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return eddy_err_set(err, "cannot open %s: %m", path);
    }
    int rc = sort_lines((const char *const[]){path}, 1, f, tmp_dir, NULL, budget, stats, err);
    if (fclose(f) != 0 && rc == 0)
        rc = eddy_err_set(err, "cannot write %s: %m", path);
    return rc;
}
