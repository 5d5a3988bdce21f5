/* wc_baseline.c - single-process, single-thread wordcount baseline.
 *
 * usage: wc_baseline INPUT OUTPUT
 *
 * Same semantics as `eddy local --job wordcount --input INPUT --output OUTPUT`:
 * words are split on ' ', '\t' and '\n', counted in an open-addressing hash
 * table keyed by XXH64, and written as "word<TAB>count" lines sorted bytewise
 * (memcmp, shorter prefix first). Reads with large read(2) calls. Prints the
 * word count, elapsed time and words/s (read+count+sort+write) on stdout. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define READ_SIZE (4u << 20)

typedef struct entry {
    uint64_t hash;
    uint64_t count;
    uint32_t off; /* into the arena; 0 = empty slot */
    uint32_t len;
} entry_t;

static entry_t *table;
static size_t cap, used;
static char *arena;
static size_t arena_len = 1, arena_cap;

static void die(const char *what)
{
    fprintf(stderr, "wc_baseline: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void grow(void)
{
    size_t ncap = cap ? cap * 2 : 1u << 16;
    entry_t *nt = calloc(ncap, sizeof *nt);
    if (!nt)
        die("calloc");
    for (size_t i = 0; i < cap; i++) {
        if (!table[i].off)
            continue;
        size_t j = table[i].hash & (ncap - 1);
        while (nt[j].off)
            j = (j + 1) & (ncap - 1);
        nt[j] = table[i];
    }
    free(table);
    table = nt;
    cap = ncap;
}

static void add(const char *w, size_t len)
{
    uint64_t h = XXH64(w, len, 0);
    size_t j = h & (cap - 1);
    for (;;) {
        entry_t *e = &table[j];
        if (!e->off)
            break;
        if (e->hash == h && e->len == len && memcmp(arena + e->off, w, len) == 0) {
            e->count++;
            return;
        }
        j = (j + 1) & (cap - 1);
    }
    if (arena_len + len > arena_cap) {
        arena_cap = arena_cap ? arena_cap * 2 : 1u << 20;
        while (arena_len + len > arena_cap)
            arena_cap *= 2;
        if (arena_cap > UINT32_MAX || !(arena = realloc(arena, arena_cap)))
            die("arena");
    }
    memcpy(arena + arena_len, w, len);
    table[j] = (entry_t){.hash = h, .count = 1, .off = (uint32_t)arena_len, .len = (uint32_t)len};
    arena_len += len;
    if (++used * 4 > cap * 3) /* keep load <= 0.75 */
        grow();
}

static int cmp(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(arena + x->off, arena + y->off, n);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

static inline int is_sep(char c) { return c == ' ' || c == '\t' || c == '\n'; }

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: wc_baseline INPUT OUTPUT\n\nCounts the words of INPUT in one thread, writes \"word<TAB>count\"\n"
               "lines sorted bytewise to OUTPUT, and prints the word count, time and words/s.\n");
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "wc_baseline: unknown flag '%s' (see --help)\n", argv[i]);
            return 2;
        }
    if (argc != 3) {
        fprintf(stderr, "usage: %s INPUT OUTPUT\n", argv[0]);
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        die(argv[1]);
    grow();
    char *buf = malloc(READ_SIZE * 2);
    if (!buf)
        die("malloc");
    size_t carry = 0; /* bytes of an unfinished word at the start of buf */
    uint64_t words = 0;
    for (;;) {
        ssize_t n = read(fd, buf + carry, READ_SIZE);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("read");
        }
        size_t have = carry + (size_t)n;
        const char *p = buf, *end = buf + have;
        /* Only words followed by a separator are complete, except at EOF. */
        const char *limit = end;
        if (n > 0) {
            while (limit > buf && !is_sep(limit[-1]))
                limit--;
        }
        while (p < limit) {
            while (p < limit && is_sep(*p))
                p++;
            const char *w = p;
            while (p < limit && !is_sep(*p))
                p++;
            if (p > w) {
                add(w, (size_t)(p - w));
                words++;
            }
        }
        if (n == 0)
            break;
        carry = (size_t)(end - limit);
        if (carry >= READ_SIZE) { /* a single word longer than READ_SIZE */
            errno = E2BIG;
            die("word too long");
        }
        memmove(buf, limit, carry);
    }
    close(fd);

    /* Compact the table, sort, write. */
    size_t k = 0;
    for (size_t i = 0; i < cap; i++)
        if (table[i].off)
            table[k++] = table[i];
    qsort(table, k, sizeof *table, cmp);
    FILE *f = fopen(argv[2], "w");
    if (!f)
        die(argv[2]);
    static char obuf[1 << 20];
    setvbuf(f, obuf, _IOFBF, sizeof obuf);
    for (size_t i = 0; i < k; i++) {
        fwrite(arena + table[i].off, 1, table[i].len, f);
        fprintf(f, "\t%" PRIu64 "\n", table[i].count);
    }
    if (fclose(f) != 0)
        die(argv[2]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("words %" PRIu64 " distinct %zu seconds %.3f words_per_s %.0f\n", words, k, secs,
           secs > 0 ? (double)words / secs : 0.0);
    free(buf);
    free(table);
    free(arena);
    return 0;
}
