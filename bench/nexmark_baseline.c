/* nexmark_baseline.c - single-process, single-thread Nexmark baseline for
 * q0, q1 and q5: what the distributed engine is compared against.
 *
 * usage: nexmark_baseline [--events N] [--seed S] [--disorder-ms D] [--runs R]
 *                         [--output-dir DIR]
 *
 * Generates N events as CSV lines in memory with the generator of
 * connectors/nexmark.h (not timed), then for each query times, in one
 * thread, splitting the lines, parsing every event (eddy_nexmark_parse) and
 * computing the query's rows into an output buffer:
 *   q0  every bid as `auction bidder price date_time`
 *   q1  the same with price * 908 / 1000
 *   q5  sliding windows of 10 s every 2 s: a count per (window, auction) in
 *       a hash table per open window; a window fires when the bounded
 *       out-of-orderness watermark (max date_time - D - 1) reaches its end,
 *       emitting the auctions with the window's maximum count
 * The rows are not sorted nor written during the timing (without
 * --output-dir the buffer is reused every MB, as a writer would); with
 * --output-dir DIR each query's rows go to DIR/QUERY.tsv afterwards,
 * unsorted (`LC_ALL=C sort` them to diff with nexmark_ref).
 * Each query runs R times (3) and the fastest run is reported, so a first
 * run's page faults and a busy neighbour weigh less. Prints one line per
 * query on stdout:
 *   baseline QUERY events=N seconds=S events_per_s=R rows=M */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/flags.h"
#include "connectors/nexmark.h"

static void die(const char *what)
{
    fprintf(stderr, "nexmark_baseline: %s\n", what);
    exit(1);
}

/* ---- output rows -------------------------------------------------------- */

typedef struct sink {
    char *buf;
    size_t len, cap;
    int keep;       /* grow and keep every row (for --output-dir) */
    uint64_t rows;
} sink_t;

static void sink_reserve(sink_t *s, size_t n)
{
    if (s->len + n <= s->cap)
        return;
    if (!s->keep && s->cap >= n) {
        s->len = 0; /* "written": reuse the buffer */
        return;
    }
    size_t cap = s->cap ? s->cap : 1 << 20;
    while (cap < s->len + n)
        cap *= 2;
    if (!(s->buf = realloc(s->buf, cap)))
        die("out of memory");
    s->cap = cap;
}

static char *put_i64(char *p, int64_t v)
{
    char tmp[24], *q = tmp + sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        *--q = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--q = '-';
    size_t n = (size_t)(tmp + sizeof tmp - q);
    memcpy(p, q, n);
    return p + n;
}

static void row4(sink_t *s, int64_t a, int64_t b, int64_t c, int64_t d)
{
    sink_reserve(s, 4 * 21);
    char *p = s->buf + s->len;
    p = put_i64(p, a);
    *p++ = '\t';
    p = put_i64(p, b);
    *p++ = '\t';
    p = put_i64(p, c);
    *p++ = '\t';
    p = put_i64(p, d);
    *p++ = '\n';
    s->len = (size_t)(p - s->buf);
    s->rows++;
}

/* ---- the queries -------------------------------------------------------- */

typedef void (*query_fn)(const char *text, size_t len, int64_t disorder, sink_t *out);

#define FOR_EACH_EVENT(text, len, ev)                                                              \
    for (const char *p_ = (text), *end_ = (text) + (len), *nl_; p_ < end_; p_ = nl_ + 1)           \
        if (!(nl_ = memchr(p_, '\n', (size_t)(end_ - p_))) ||                                     \
            eddy_nexmark_parse(p_, (size_t)(nl_ - p_), &(ev), NULL) < 0)                           \
            die("malformed generated event");                                                      \
        else

static void q0(const char *text, size_t len, int64_t disorder, sink_t *out)
{
    (void)disorder;
    eddy_nexmark_event_t ev;
    FOR_EACH_EVENT(text, len, ev)
    {
        if (ev.type == EDDY_NEXMARK_BID)
            row4(out, ev.u.bid.auction, ev.u.bid.bidder, ev.u.bid.price, ev.date_time);
    }
}

static void q1(const char *text, size_t len, int64_t disorder, sink_t *out)
{
    (void)disorder;
    eddy_nexmark_event_t ev;
    FOR_EACH_EVENT(text, len, ev)
    {
        if (ev.type == EDDY_NEXMARK_BID)
            row4(out, ev.u.bid.auction, ev.u.bid.bidder, eddy_nexmark_q1_price(ev.u.bid.price),
                 ev.date_time);
    }
}

/* One open q5 window: auction -> bid count, open addressing. */
typedef struct window {
    int64_t *keys; /* auction ids; -1 = empty slot */
    int64_t *counts;
    size_t cap, used;
} window_t;

static void window_grow(window_t *w)
{
    size_t cap = w->cap ? w->cap * 2 : 256;
    int64_t *keys = malloc(cap * sizeof *keys), *counts = malloc(cap * sizeof *counts);
    if (!keys || !counts)
        die("out of memory");
    memset(keys, 0xff, cap * sizeof *keys);
    for (size_t i = 0; i < w->cap; i++) {
        if (w->keys[i] < 0)
            continue;
        size_t j = (uint64_t)w->keys[i] * 0x9e3779b97f4a7c15ull >> 20 & (cap - 1);
        while (keys[j] >= 0)
            j = (j + 1) & (cap - 1);
        keys[j] = w->keys[i];
        counts[j] = w->counts[i];
    }
    free(w->keys);
    free(w->counts);
    w->keys = keys;
    w->counts = counts;
    w->cap = cap;
}

static void window_add(window_t *w, int64_t auction)
{
    if ((w->used + 1) * 2 > w->cap)
        window_grow(w);
    size_t j = (uint64_t)auction * 0x9e3779b97f4a7c15ull >> 20 & (w->cap - 1);
    while (w->keys[j] >= 0 && w->keys[j] != auction)
        j = (j + 1) & (w->cap - 1);
    if (w->keys[j] < 0) {
        w->keys[j] = auction;
        w->counts[j] = 0;
        w->used++;
    }
    w->counts[j]++;
}

static void window_fire(window_t *w, int64_t start, sink_t *out)
{
    int64_t max = 0;
    for (size_t i = 0; i < w->cap; i++)
        if (w->keys[i] >= 0 && w->counts[i] > max)
            max = w->counts[i];
    for (size_t i = 0; i < w->cap; i++) {
        if (w->keys[i] < 0)
            continue;
        if (w->counts[i] == max)
            row4(out, start, start + 10000, w->keys[i], max);
        w->keys[i] = -1;
    }
    w->used = 0;
}

#define SIZE 10000
#define SLIDE 2000

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b < 0);
}

static void q5(const char *text, size_t len, int64_t disorder, sink_t *out)
{
    /* Windows k (start k * SLIDE) open at once span SIZE + disorder. */
    size_t ring = (size_t)((SIZE + disorder) / SLIDE + 4);
    window_t *w = calloc(ring, sizeof *w);
    if (!w)
        die("out of memory");
    int started = 0;
    int64_t k_lo = 0, k_hi = 0, max_ts = INT64_MIN;
    eddy_nexmark_event_t ev;
    FOR_EACH_EVENT(text, len, ev)
    {
        if (ev.type != EDDY_NEXMARK_BID)
            continue;
        int64_t t = ev.date_time;
        int64_t first = floor_div(t - SIZE, SLIDE) + 1, last = floor_div(t, SLIDE);
        if (!started) {
            started = 1;
            k_lo = floor_div(t - disorder - SIZE, SLIDE) + 1;
            k_hi = k_lo;
        }
        if (first < k_lo)
            die("a bid later than the disorder bound");
        if (last - k_lo >= (int64_t)ring)
            die("q5 window ring too small");
        for (int64_t k = first; k <= last; k++)
            window_add(&w[(uint64_t)k % ring], ev.u.bid.auction);
        if (last > k_hi)
            k_hi = last;
        if (t > max_ts) {
            max_ts = t;
            int64_t wm = max_ts - disorder - 1;
            while (k_lo <= k_hi && k_lo * SLIDE + SIZE - 1 <= wm) {
                window_fire(&w[(uint64_t)k_lo % ring], k_lo * SLIDE, out);
                k_lo++;
            }
        }
    }
    for (; started && k_lo <= k_hi; k_lo++) /* end of input: every window fires */
        window_fire(&w[(uint64_t)k_lo % ring], k_lo * SLIDE, out);
    for (size_t i = 0; i < ring; i++) {
        free(w[i].keys);
        free(w[i].counts);
    }
    free(w);
}

int main(int argc, char **argv)
{
    uint64_t events = 2000000, seed = 42;
    uint32_t runs = 3;
    int64_t disorder = 0;
    const char *output_dir = NULL;
    eddy_flag_t flags[] = {
        EDDY_FLAG_U64("events", &events, 1, UINT64_MAX, "N", "events to generate (2000000)"),
        EDDY_FLAG_U64("seed", &seed, 0, INT64_MAX, "S", "generator seed (42)"),
        EDDY_FLAG_I64("disorder-ms", &disorder, 0, EDDY_NEXMARK_MAX_DISORDER_MS, "D",
                      "events out of order by up to D ms (0)"),
        EDDY_FLAG_U32("runs", &runs, 1, 1000, "R", "time each query R times, report the fastest (3)"),
        EDDY_FLAG_STR("output-dir", &output_dir, "DIR", "write each query's rows to DIR/QUERY.tsv"),
        EDDY_FLAG_END,
    };
    eddy_err_t err = {{0}};
    int rc = eddy_flags_parse(flags, argc - 1, argv + 1, NULL, NULL, &err);
    if (rc == 1) {
        printf("usage: nexmark_baseline [flags]\n\nflags:\n");
        eddy_flags_print_help(stdout, flags);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "nexmark_baseline: %s\n", err.msg);
        return 2;
    }

    eddy_nexmark_config_t cfg = {.events = events, .seed = seed, .disorder_ms = disorder};
    eddy_nexmark_cursor_t cursor;
    eddy_nexmark_cursor_init(&cursor, &cfg, 0, 1, 0);
    size_t cap = 64 << 20, len = 0;
    char *text = malloc(cap);
    for (;;) {
        if (!text)
            die("out of memory");
        if (cap - len < EDDY_NEXMARK_MAX_LINE + 1) {
            cap *= 2;
            text = realloc(text, cap);
            continue;
        }
        uint32_t n = eddy_nexmark_cursor_next(&cursor, text + len, EDDY_NEXMARK_MAX_LINE, NULL);
        if (!n)
            break;
        len += n;
        text[len++] = '\n';
    }

    static const struct {
        const char *name;
        query_fn fn;
    } queries[] = {{"q0", q0}, {"q1", q1}, {"q5", q5}};
    for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
        sink_t out = {0};
        double seconds = 0;
        for (uint32_t r = 0; r < runs; r++) {
            free(out.buf);
            /* Only the last run keeps its rows for --output-dir. */
            out = (sink_t){.keep = output_dir != NULL && r == runs - 1};
            uint64_t t0 = eddy_mono_ns();
            queries[q].fn(text, len, disorder, &out);
            double s = (double)(eddy_mono_ns() - t0) / 1e9;
            if (r == 0 || s < seconds)
                seconds = s;
        }
        printf("baseline %s events=%" PRIu64 " seconds=%.3f events_per_s=%.0f rows=%" PRIu64 "\n",
               queries[q].name, events, seconds, (double)events / seconds, out.rows);
        fflush(stdout);
        if (output_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.tsv", output_dir, queries[q].name);
            FILE *f = fopen(path, "w");
            if (!f || fwrite(out.buf, 1, out.len, f) != out.len || fclose(f) != 0) {
                fprintf(stderr, "nexmark_baseline: writing %s: %s\n", path, strerror(errno));
                return 1;
            }
        }
        free(out.buf);
    }
    free(text);
    return 0;
}
