/* nexmark_baseline.c - single-process, single-thread Nexmark baseline for
 * every query bench/nexmark.sh runs (q0 q1 q2 q3 q5 q7 q8 q11): what the
 * distributed engine is compared against. Each query is computed the way a
 * one-thread streaming program would, in one pass over the events with hash
 * tables and watermark-fired windows, and gives the rows of eddy's query
 * (`nexmark_ref` computes them independently; see --output-dir).
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
 *   q2  `auction price` of bids with auction % 123 == 0
 *   q3  `name city state auction_id`: an incremental join of persons in OR,
 *       ID or CA (hash table by id) and auctions of category 10 (lists by
 *       seller); each side joins the other's stored rows as it arrives
 *   q5  sliding windows of 10 s every 2 s: a count per (window, auction) in
 *       a hash table per open window; a window fires when the bounded
 *       out-of-orderness watermark (max date_time - D - 1) reaches its end,
 *       emitting the auctions with the window's maximum count
 *   q7  tumbling 10 s windows: a running max price per window and the bids
 *       at that price, emitted when the window fires
 *   q8  tumbling 10 s windows: per window the persons that registered (id,
 *       name) and the set of sellers; at firing the persons among the sellers
 *   q11 session windows per bidder, 10 s gap: the open session per bidder
 *       and a queue of session ends; a session is emitted when the watermark
 *       passes its end. Needs events in time order (--disorder-ms 0; with
 *       D > 0 q11 is skipped with a note on stderr)
 * The rows are not sorted nor written during the timing (without
 * --output-dir the buffer is reused every MB, as a writer would); with
 * --output-dir DIR each query's rows go to DIR/QUERY.tsv afterwards,
 * unsorted (`LC_ALL=C sort` them to diff with nexmark_ref).
 * Each query runs R times (3) and the fastest run is reported, so a first
 * run's page faults and a busy neighbour weigh less. Prints one line per
 * query on stdout:
 *   baseline QUERY events=N seconds=S events_per_s=R rows=M
 * --queries "q0 q5" runs only those. */
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

/* A row of at most n bytes starts at the returned pointer: fields are
 * written with field_i64 / field_str (each ends in a tab) and row_end turns
 * the last tab into the newline. */
static char *row_begin(sink_t *s, size_t n)
{
    sink_reserve(s, n);
    return s->buf + s->len;
}

static char *field_i64(char *p, int64_t v)
{
    p = put_i64(p, v);
    *p++ = '\t';
    return p;
}

static char *field_str(char *p, eddy_nexmark_str_t v)
{
    memcpy(p, v.ptr, v.len);
    p += v.len;
    *p++ = '\t';
    return p;
}

static void row_end(sink_t *s, char *p)
{
    p[-1] = '\n';
    s->len = (size_t)(p - s->buf);
    s->rows++;
}

static void row4(sink_t *s, int64_t a, int64_t b, int64_t c, int64_t d)
{
    char *p = row_begin(s, 4 * 21);
    p = field_i64(p, a);
    p = field_i64(p, b);
    p = field_i64(p, c);
    p = field_i64(p, d);
    row_end(s, p);
}

/* Appends room for one more element to a growable array (a, n used, cap). */
#define GROW(a, n, cap)                                                                            \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            (cap) = (cap) ? (cap) * 2 : 256;                                                       \
            if (!((a) = realloc((a), (cap) * sizeof *(a))))                                        \
                die("out of memory");                                                              \
        }                                                                                          \
    } while (0)

/* ---- int64 -> int64 hash table (open addressing; keys >= 0) ------------- */

typedef struct i64map {
    int64_t *keys; /* -1 = empty slot */
    int64_t *vals;
    size_t cap, used;
} i64map_t;

static size_t i64map_home(int64_t key, size_t cap)
{
    return (uint64_t)key * 0x9e3779b97f4a7c15ull >> 20 & (cap - 1);
}

static void i64map_grow(i64map_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 256;
    int64_t *keys = malloc(cap * sizeof *keys), *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals)
        die("out of memory");
    memset(keys, 0xff, cap * sizeof *keys);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] < 0)
            continue;
        size_t j = i64map_home(m->keys[i], cap);
        while (keys[j] >= 0)
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
}

/* key's value, inserted as 0 if absent. */
static int64_t *i64map_get(i64map_t *m, int64_t key)
{
    if ((m->used + 1) * 2 > m->cap)
        i64map_grow(m);
    size_t j = i64map_home(key, m->cap);
    while (m->keys[j] >= 0 && m->keys[j] != key)
        j = (j + 1) & (m->cap - 1);
    if (m->keys[j] < 0) {
        m->keys[j] = key;
        m->vals[j] = 0;
        m->used++;
    }
    return &m->vals[j];
}

/* key's value, or NULL. */
static int64_t *i64map_find(const i64map_t *m, int64_t key)
{
    if (!m->cap)
        return NULL;
    for (size_t j = i64map_home(key, m->cap); m->keys[j] >= 0; j = (j + 1) & (m->cap - 1))
        if (m->keys[j] == key)
            return &m->vals[j];
    return NULL;
}

static void i64map_clear(i64map_t *m)
{
    if (m->used)
        memset(m->keys, 0xff, m->cap * sizeof *m->keys);
    m->used = 0;
}

static void i64map_free(i64map_t *m)
{
    free(m->keys);
    free(m->vals);
}

/* ---- event-time windows fired by a bounded out-of-orderness watermark --- */

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b < 0);
}

/* Windows k = [k * slide, k * slide + size); the open ones live in a ring of
 * `ring` slots (slot k % ring) kept by the caller. */
typedef struct wclock {
    int64_t size, slide, disorder, k_lo, k_hi, max_ts;
    size_t ring;
    int started;
} wclock_t;

static void wclock_init(wclock_t *c, int64_t size, int64_t slide, int64_t disorder)
{
    /* Windows open at once span size + disorder. */
    *c = (wclock_t){.size = size, .slide = slide, .disorder = disorder, .max_ts = INT64_MIN,
                    .ring = (size_t)((size + disorder) / slide + 4)};
}

/* The caller's ring of open windows: c->ring zeroed slots of size bytes. */
static void *wclock_ring(const wclock_t *c, size_t size)
{
    void *w = calloc(c->ring, size);
    if (!w)
        die("out of memory");
    return w;
}

/* The windows [*first, *last] that hold time t. */
static void wclock_span(wclock_t *c, int64_t t, int64_t *first, int64_t *last)
{
    *first = floor_div(t - c->size, c->slide) + 1;
    *last = floor_div(t, c->slide);
    if (!c->started) {
        c->started = 1;
        c->k_lo = floor_div(t - c->disorder - c->size, c->slide) + 1;
        c->k_hi = c->k_lo;
    }
    if (*first < c->k_lo)
        die("an event later than the disorder bound");
    if (*last - c->k_lo >= (int64_t)c->ring)
        die("window ring too small");
    if (*last > c->k_hi)
        c->k_hi = *last;
}

/* After an event at time t (end: the input ended, every window is due):
 * the next window the watermark (max time - disorder - 1) has passed, in
 * order, in *k; 0 when none is due. */
static int wclock_due(wclock_t *c, int64_t t, int end, int64_t *k)
{
    if (t > c->max_ts)
        c->max_ts = t;
    if (!c->started || c->k_lo > c->k_hi)
        return 0;
    if (!end && c->k_lo * c->slide + c->size - 1 > c->max_ts - c->disorder - 1)
        return 0;
    *k = c->k_lo++;
    return 1;
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

static void q2(const char *text, size_t len, int64_t disorder, sink_t *out)
{
    (void)disorder;
    eddy_nexmark_event_t ev;
    FOR_EACH_EVENT(text, len, ev)
    {
        if (ev.type == EDDY_NEXMARK_BID && ev.u.bid.auction % 123 == 0) {
            char *p = row_begin(out, 2 * 21);
            p = field_i64(p, ev.u.bid.auction);
            p = field_i64(p, ev.u.bid.price);
            row_end(out, p);
        }
    }
}

/* q3's stored persons (in OR, ID or CA) and auctions (category 10). */
typedef struct q3_person {
    eddy_nexmark_str_t name, city, state;
} q3_person_t;

typedef struct q3_auction {
    int64_t id, next; /* next: index + 1 of the seller's previous auction, 0 = none */
} q3_auction_t;

static void q3_row(sink_t *out, const q3_person_t *p, int64_t auction)
{
    char *w = row_begin(out, p->name.len + p->city.len + p->state.len + 24);
    w = field_str(w, p->name);
    w = field_str(w, p->city);
    w = field_str(w, p->state);
    w = field_i64(w, auction);
    row_end(out, w);
}

static void q3(const char *text, size_t len, int64_t disorder, sink_t *out)
{
    (void)disorder;
    i64map_t persons = {0}, sellers = {0}; /* id -> index + 1; seller -> auction index + 1 */
    q3_person_t *pv = NULL;
    q3_auction_t *av = NULL;
    size_t np = 0, pcap = 0, na = 0, acap = 0;
    eddy_nexmark_event_t ev;
    FOR_EACH_EVENT(text, len, ev)
    {
        if (ev.type == EDDY_NEXMARK_PERSON) {
            eddy_nexmark_str_t st = ev.u.person.state;
            if (st.len != 2 || (memcmp(st.ptr, "OR", 2) && memcmp(st.ptr, "ID", 2) &&
                                memcmp(st.ptr, "CA", 2)))
                continue;
            GROW(pv, np, pcap);
            pv[np] = (q3_person_t){ev.u.person.name, ev.u.person.city, st};
            *i64map_get(&persons, ev.u.person.id) = (int64_t)++np;
            const int64_t *head = i64map_find(&sellers, ev.u.person.id);
            for (int64_t a = head ? *head : 0; a; a = av[a - 1].next)
                q3_row(out, &pv[np - 1], av[a - 1].id);
        } else if (ev.type == EDDY_NEXMARK_AUCTION && ev.u.auction.category == 10) {
            GROW(av, na, acap);
            int64_t *head = i64map_get(&sellers, ev.u.auction.seller);
            av[na] = (q3_auction_t){ev.u.auction.id, *head};
            *head = (int64_t)++na;
            const int64_t *p = i64map_find(&persons, ev.u.auction.seller);
            if (p)
                q3_row(out, &pv[*p - 1], ev.u.auction.id);
        }
    }
    i64map_free(&persons);
    i64map_free(&sellers);
    free(pv);
    free(av);
}

/* q8: per tumbling window the persons that registered and the sellers. */
typedef struct q8_person {
    int64_t id;
    eddy_nexmark_str_t name;
} q8_person_t;

typedef struct q8_window {
    q8_person_t *persons;
    size_t n, cap;
    i64map_t sellers; /* seller -> 1 */
} q8_window_t;

static void q8_fire(q8_window_t *w, int64_t start, sink_t *out)
{
    for (size_t i = 0; i < w->n; i++) {
        if (!i64map_find(&w->sellers, w->persons[i].id))
            continue;
        char *p = row_begin(out, w->persons[i].name.len + 2 * 21 + 2);
        p = field_i64(p, w->persons[i].id);
        p = field_str(p, w->persons[i].name);
        p = field_i64(p, start);
        row_end(out, p);
    }
    w->n = 0;
    i64map_clear(&w->sellers);
}

static void q8(const char *text, size_t len, int64_t disorder, sink_t *out)
{
    wclock_t c;
    wclock_init(&c, 10000, 10000, disorder);
    q8_window_t *w = wclock_ring(&c, sizeof *w);
    eddy_nexmark_event_t ev;
    int64_t first, last, k;
    FOR_EACH_EVENT(text, len, ev)
    {
        if (ev.type == EDDY_NEXMARK_BID)
            continue;
        wclock_span(&c, ev.date_time, &first, &last);
        q8_window_t *win = &w[(uint64_t)last % c.ring];
        if (ev.type == EDDY_NEXMARK_PERSON) {
            GROW(win->persons, win->n, win->cap);
            win->persons[win->n++] = (q8_person_t){ev.u.person.id, ev.u.person.name};
        } else {
            *i64map_get(&win->sellers, ev.u.auction.seller) = 1;
        }
        while (wclock_due(&c, ev.date_time, 0, &k))
            q8_fire(&w[(uint64_t)k % c.ring], k * 10000, out);
    }
    while (wclock_due(&c, INT64_MIN, 1, &k))
        q8_fire(&w[(uint64_t)k % c.ring], k * 10000, out);
    for (size_t i = 0; i < c.ring; i++) {
        free(w[i].persons);
        i64map_free(&w[i].sellers);
    }
    free(w);
}

/* q11: the open session per bidder; count 0 = none open. */
typedef struct q11_session {
    int64_t start, last, count;
} q11_session_t;

typedef struct q11_end {
    int64_t bidder, end;
} q11_end_t;

#define Q11_GAP 10000

/* Emits bidder's session if it is open and ends at end (else the entry is
 * stale: the session went on, or was emitted). */
static void q11_fire(i64map_t *bidders, q11_session_t *sv, q11_end_t e, sink_t *out)
{
    q11_session_t *s = &sv[*i64map_find(bidders, e.bidder) - 1];
    if (!s->count || s->last + Q11_GAP != e.end)
        return;
    row4(out, e.bidder, s->count, s->start, e.end);
    s->count = 0;
}

static void q11(const char *text, size_t len, int64_t disorder, sink_t *out)
{
    (void)disorder; /* main runs q11 only in time order */
    i64map_t bidders = {0}; /* bidder -> session index + 1 */
    q11_session_t *sv = NULL;
    q11_end_t *ends = NULL; /* a queue of session ends, in time order */
    size_t ns = 0, scap = 0, head = 0, ne = 0, ecap = 0;
    int64_t max_ts = INT64_MIN;
    eddy_nexmark_event_t ev;
    FOR_EACH_EVENT(text, len, ev)
    {
        if (ev.type != EDDY_NEXMARK_BID)
            continue;
        int64_t t = ev.date_time;
        if (t < max_ts)
            die("q11: bids out of time order");
        max_ts = t;
        /* The watermark t - 1 has passed every end <= t. */
        for (; head < ne && ends[head].end <= t; head++)
            q11_fire(&bidders, sv, ends[head], out);
        if (head > 65536 && head * 2 > ne) {
            memmove(ends, ends + head, (ne - head) * sizeof *ends);
            ne -= head;
            head = 0;
        }
        int64_t *slot = i64map_get(&bidders, ev.u.bid.bidder);
        if (!*slot) {
            GROW(sv, ns, scap);
            sv[ns] = (q11_session_t){0};
            *slot = (int64_t)++ns;
        }
        q11_session_t *s = &sv[*slot - 1];
        if (s->count && t < s->last + Q11_GAP) {
            s->last = t;
            s->count++;
        } else {
            *s = (q11_session_t){t, t, 1};
        }
        GROW(ends, ne, ecap);
        ends[ne++] = (q11_end_t){ev.u.bid.bidder, t + Q11_GAP};
    }
    for (; head < ne; head++) /* end of input: every session ends */
        q11_fire(&bidders, sv, ends[head], out);
    i64map_free(&bidders);
    free(sv);
    free(ends);
}

static void q5_fire(i64map_t *w, int64_t start, sink_t *out)
{
    int64_t max = 0;
    for (size_t i = 0; i < w->cap; i++)
        if (w->keys[i] >= 0 && w->vals[i] > max)
            max = w->vals[i];
    for (size_t i = 0; i < w->cap; i++)
        if (w->keys[i] >= 0 && w->vals[i] == max)
            row4(out, start, start + 10000, w->keys[i], max);
    i64map_clear(w);
}

static void q5(const char *text, size_t len, int64_t disorder, sink_t *out)
{
    wclock_t c;
    wclock_init(&c, 10000, 2000, disorder);
    i64map_t *w = wclock_ring(&c, sizeof *w); /* per window: auction -> bids */
    eddy_nexmark_event_t ev;
    int64_t first, last, k;
    FOR_EACH_EVENT(text, len, ev)
    {
        if (ev.type != EDDY_NEXMARK_BID)
            continue;
        wclock_span(&c, ev.date_time, &first, &last);
        for (k = first; k <= last; k++)
            ++*i64map_get(&w[(uint64_t)k % c.ring], ev.u.bid.auction);
        while (wclock_due(&c, ev.date_time, 0, &k))
            q5_fire(&w[(uint64_t)k % c.ring], k * 2000, out);
    }
    while (wclock_due(&c, INT64_MIN, 1, &k))
        q5_fire(&w[(uint64_t)k % c.ring], k * 2000, out);
    for (size_t i = 0; i < c.ring; i++)
        i64map_free(&w[i]);
    free(w);
}

/* q7: per tumbling window the running max price and the bids at it. */
typedef struct q7_bid {
    int64_t auction, bidder, price, date_time;
} q7_bid_t;

typedef struct q7_window {
    int64_t max;
    q7_bid_t *bids;
    size_t n, cap;
} q7_window_t;

static void q7_fire(q7_window_t *w, int64_t start, sink_t *out)
{
    for (size_t i = 0; i < w->n; i++) {
        char *p = row_begin(out, 6 * 21);
        p = field_i64(p, start);
        p = field_i64(p, start + 10000);
        p = field_i64(p, w->bids[i].auction);
        p = field_i64(p, w->bids[i].bidder);
        p = field_i64(p, w->bids[i].price);
        p = field_i64(p, w->bids[i].date_time);
        row_end(out, p);
    }
    w->n = 0;
    w->max = -1;
}

static void q7(const char *text, size_t len, int64_t disorder, sink_t *out)
{
    wclock_t c;
    wclock_init(&c, 10000, 10000, disorder);
    q7_window_t *w = wclock_ring(&c, sizeof *w);
    for (size_t i = 0; i < c.ring; i++)
        w[i].max = -1;
    eddy_nexmark_event_t ev;
    int64_t first, last, k;
    FOR_EACH_EVENT(text, len, ev)
    {
        if (ev.type != EDDY_NEXMARK_BID)
            continue;
        wclock_span(&c, ev.date_time, &first, &last);
        q7_window_t *win = &w[(uint64_t)last % c.ring];
        if (ev.u.bid.price > win->max) {
            win->max = ev.u.bid.price;
            win->n = 0;
        }
        if (ev.u.bid.price == win->max) {
            GROW(win->bids, win->n, win->cap);
            win->bids[win->n++] = (q7_bid_t){ev.u.bid.auction, ev.u.bid.bidder, ev.u.bid.price,
                                             ev.date_time};
        }
        while (wclock_due(&c, ev.date_time, 0, &k))
            q7_fire(&w[(uint64_t)k % c.ring], k * 10000, out);
    }
    while (wclock_due(&c, INT64_MIN, 1, &k))
        q7_fire(&w[(uint64_t)k % c.ring], k * 10000, out);
    for (size_t i = 0; i < c.ring; i++)
        free(w[i].bids);
    free(w);
}

/* True when name is a word of list (separated by spaces or commas). */
static int list_has(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ' ' || p[-1] == ',') && (!p[n] || p[n] == ' ' || p[n] == ','))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t events = 2000000, seed = 42;
    uint32_t runs = 3;
    int64_t disorder = 0;
    const char *output_dir = NULL, *only = NULL;
    eddy_flag_t flags[] = {
        EDDY_FLAG_U64("events", &events, 1, UINT64_MAX, "N", "events to generate (2000000)"),
        EDDY_FLAG_U64("seed", &seed, 0, INT64_MAX, "S", "generator seed (42)"),
        EDDY_FLAG_I64("disorder-ms", &disorder, 0, EDDY_NEXMARK_MAX_DISORDER_MS, "D",
                      "events out of order by up to D ms (0)"),
        EDDY_FLAG_U32("runs", &runs, 1, 1000, "R", "time each query R times, report the fastest (3)"),
        EDDY_FLAG_STR("output-dir", &output_dir, "DIR", "write each query's rows to DIR/QUERY.tsv"),
        EDDY_FLAG_STR("queries", &only, "LIST", "run only these queries (\"q0 q5\"; default all)"),
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
    } queries[] = {{"q0", q0}, {"q1", q1}, {"q2", q2}, {"q3", q3}, {"q5", q5},
                   {"q7", q7}, {"q8", q8}, {"q11", q11}};
    size_t nq = sizeof queries / sizeof queries[0];
    if (only) { /* every name in the list must be a query */
        char list[256];
        snprintf(list, sizeof list, "%s", only);
        for (char *save = NULL, *w = strtok_r(list, " ,", &save); w; w = strtok_r(NULL, " ,", &save)) {
            size_t q = 0;
            while (q < nq && strcmp(queries[q].name, w))
                q++;
            if (q == nq) {
                fprintf(stderr, "nexmark_baseline: --queries: unknown query '%s'\n", w);
                return 2;
            }
        }
    }
    for (size_t q = 0; q < nq; q++) {
        if (only && !list_has(only, queries[q].name))
            continue;
        if (disorder && queries[q].fn == q11) {
            fprintf(stderr, "nexmark_baseline: q11 skipped: it needs --disorder-ms 0\n");
            continue;
        }
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
