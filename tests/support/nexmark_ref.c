/* nexmark_ref.c - the reference Nexmark queries (see nexmark_ref.h): all
 * events in memory, each query as sorting and scanning, rows built with
 * asprintf. Independent of the job's operators on purpose; it shares only
 * the event parser (connectors/nexmark.h), which has its own unit tests. */
#include "tests/support/nexmark_ref.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connectors/nexmark.h"

typedef struct events {
    char *text;
    eddy_nexmark_event_t *items;
    size_t count;
} events_t;

typedef struct rows {
    eddy_ref_lines_t lines;
    size_t cap;
    bool oom;
} rows_t;

static void add_row(rows_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_row(rows_t *r, const char *fmt, ...)
{
    if (r->oom)
        return;
    if (r->lines.count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        char **items = realloc(r->lines.items, cap * sizeof *items);
        if (!items) {
            r->oom = true;
            return;
        }
        r->lines.items = items;
        r->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *s;
    if (vasprintf(&s, fmt, ap) < 0)
        r->oom = true;
    else
        r->lines.items[r->lines.count++] = s;
    va_end(ap);
}

static int load(const char *path, events_t *ev, eddy_err_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return eddy_err_set(err, "cannot read %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    for (;;) {
        if (!text) {
            fclose(f);
            return eddy_err_set(err, "out of memory");
        }
        len += fread(text + len, 1, cap - len, f);
        if (len < cap)
            break;
        cap *= 2;
        char *t = realloc(text, cap);
        if (!t)
            free(text);
        text = t;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(text);
        return eddy_err_set(err, "cannot read %s", path);
    }
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    ev->text = text;
    ev->items = calloc(lines + 1, sizeof *ev->items);
    ev->count = 0;
    if (!ev->items)
        return eddy_err_set(err, "out of memory");
    size_t start = 0, lineno = 0;
    while (start < len) {
        char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        lineno++;
        if (eddy_nexmark_parse(text + start, end - start, &ev->items[ev->count], err) < 0)
            return eddy_err_wrap(err, "%s line %zu", path, lineno);
        ev->count++;
        start = end + 1;
    }
    return 0;
}

static int cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

static int cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

#define STR(s) (int)(s).len, (s).ptr

static int64_t window_of(int64_t t, int64_t size)
{
    return t - ((t % size) + size) % size;
}

/* ---- q3, q4, q8: joins by sorting ------------------------------------- */

static const eddy_nexmark_event_t **collect(const events_t *ev, eddy_nexmark_type_t type, size_t *n)
{
    const eddy_nexmark_event_t **out = malloc((ev->count + 1) * sizeof *out);
    *n = 0;
    if (out)
        for (size_t i = 0; i < ev->count; i++)
            if (ev->items[i].type == type)
                out[(*n)++] = &ev->items[i];
    return out;
}

static int cmp_person_id(const void *a, const void *b)
{
    return cmp_i64((*(const eddy_nexmark_event_t *const *)a)->u.person.id,
                   (*(const eddy_nexmark_event_t *const *)b)->u.person.id);
}

/* First index in persons (sorted by id) with id >= key. */
static size_t lower_person(const eddy_nexmark_event_t **persons, size_t n, int64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (persons[mid]->u.person.id < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool q3_state(eddy_nexmark_str_t s)
{
    return s.len == 2 && (!memcmp(s.ptr, "OR", 2) || !memcmp(s.ptr, "ID", 2) ||
                          !memcmp(s.ptr, "CA", 2));
}

static void q3(const events_t *ev, rows_t *r)
{
    size_t np;
    const eddy_nexmark_event_t **persons = collect(ev, EDDY_NEXMARK_PERSON, &np);
    if (!persons) {
        r->oom = true;
        return;
    }
    qsort(persons, np, sizeof *persons, cmp_person_id);
    for (size_t i = 0; i < ev->count; i++) {
        const eddy_nexmark_event_t *e = &ev->items[i];
        if (e->type != EDDY_NEXMARK_AUCTION || e->u.auction.category != 10)
            continue;
        for (size_t k = lower_person(persons, np, e->u.auction.seller);
             k < np && persons[k]->u.person.id == e->u.auction.seller; k++) {
            const eddy_nexmark_person_t *p = &persons[k]->u.person;
            if (q3_state(p->state))
                add_row(r, "%.*s\t%.*s\t%.*s\t%lld", STR(p->name), STR(p->city), STR(p->state),
                        (long long)e->u.auction.id);
        }
    }
    free(persons);
}

typedef struct win {
    const eddy_nexmark_event_t *auction;
    int64_t best; /* -1: no bid in time */
} win_t;

static int cmp_win_id(const void *a, const void *b)
{
    return cmp_i64(((const win_t *)a)->auction->u.auction.id,
                   ((const win_t *)b)->auction->u.auction.id);
}

typedef struct pair {
    int64_t a, b, c;
    const eddy_nexmark_event_t *e;
} pair_t;

static int cmp_pair(const void *x, const void *y)
{
    const pair_t *p = x, *q = y;
    int c = cmp_i64(p->a, q->a);
    if (!c)
        c = cmp_i64(p->b, q->b);
    if (!c)
        c = cmp_i64(p->c, q->c);
    return c;
}

static void q4(const events_t *ev, rows_t *r)
{
    size_t na = 0;
    win_t *wins = malloc((ev->count + 1) * sizeof *wins);
    pair_t *cats = malloc((ev->count + 1) * sizeof *cats);
    if (!wins || !cats) {
        free(wins);
        free(cats);
        r->oom = true;
        return;
    }
    for (size_t i = 0; i < ev->count; i++)
        if (ev->items[i].type == EDDY_NEXMARK_AUCTION)
            wins[na++] = (win_t){&ev->items[i], -1};
    qsort(wins, na, sizeof *wins, cmp_win_id);
    for (size_t i = 0; i < ev->count; i++) {
        const eddy_nexmark_event_t *b = &ev->items[i];
        if (b->type != EDDY_NEXMARK_BID)
            continue;
        size_t lo = 0, hi = na;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (wins[mid].auction->u.auction.id < b->u.bid.auction)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < na && wins[lo].auction->u.auction.id == b->u.bid.auction; lo++) {
            const eddy_nexmark_event_t *a = wins[lo].auction;
            if (a->date_time <= b->date_time && b->date_time <= a->u.auction.expires &&
                b->u.bid.price > wins[lo].best)
                wins[lo].best = b->u.bid.price;
        }
    }
    size_t nc = 0;
    for (size_t i = 0; i < na; i++)
        if (wins[i].best >= 0)
            cats[nc++] = (pair_t){wins[i].auction->u.auction.category, wins[i].best, 0, NULL};
    qsort(cats, nc, sizeof *cats, cmp_pair);
    for (size_t i = 0; i < nc;) {
        size_t j = i;
        int64_t sum = 0;
        for (; j < nc && cats[j].a == cats[i].a; j++)
            sum += cats[j].b;
        add_row(r, "%lld\t%lld", (long long)cats[i].a, (long long)(sum / (int64_t)(j - i)));
        i = j;
    }
    free(wins);
    free(cats);
}

static void q8(const events_t *ev, rows_t *r)
{
    /* (window, seller) of every auction, sorted, then a lookup per person. */
    pair_t *opened = malloc((ev->count + 1) * sizeof *opened);
    if (!opened) {
        r->oom = true;
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < ev->count; i++) {
        const eddy_nexmark_event_t *e = &ev->items[i];
        if (e->type == EDDY_NEXMARK_AUCTION)
            opened[n++] = (pair_t){window_of(e->date_time, 10000), e->u.auction.seller, 0, NULL};
    }
    qsort(opened, n, sizeof *opened, cmp_pair);
    for (size_t i = 0; i < ev->count; i++) {
        const eddy_nexmark_event_t *e = &ev->items[i];
        if (e->type != EDDY_NEXMARK_PERSON)
            continue;
        pair_t key = {window_of(e->date_time, 10000), e->u.person.id, 0, NULL};
        if (bsearch(&key, opened, n, sizeof *opened, cmp_pair))
            add_row(r, "%lld\t%.*s\t%lld", (long long)e->u.person.id, STR(e->u.person.name),
                    (long long)key.a);
    }
    free(opened);
}

/* ---- windows ------------------------------------------------------------ */

static void q5(const events_t *ev, rows_t *r)
{
    size_t bids = 0;
    for (size_t i = 0; i < ev->count; i++)
        bids += ev->items[i].type == EDDY_NEXMARK_BID;
    pair_t *p = malloc((bids * 5 + 1) * sizeof *p);
    pair_t *counts = malloc((bids * 5 + 1) * sizeof *counts);
    if (!p || !counts) {
        free(p);
        free(counts);
        r->oom = true;
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < ev->count; i++) {
        const eddy_nexmark_event_t *e = &ev->items[i];
        if (e->type != EDDY_NEXMARK_BID)
            continue;
        /* The windows holding t: starts s (multiples of 2000) with s <= t < s + 10000. */
        for (int64_t s = window_of(e->date_time, 2000); s > e->date_time - 10000; s -= 2000)
            p[n++] = (pair_t){s, e->u.bid.auction, 0, NULL};
    }
    qsort(p, n, sizeof *p, cmp_pair);
    size_t nc = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && p[j].a == p[i].a && p[j].b == p[i].b)
            j++;
        counts[nc++] = (pair_t){p[i].a, p[i].b, (int64_t)(j - i), NULL};
        i = j;
    }
    for (size_t i = 0; i < nc;) {
        size_t j = i;
        int64_t max = 0;
        for (; j < nc && counts[j].a == counts[i].a; j++)
            if (counts[j].c > max)
                max = counts[j].c;
        for (size_t k = i; k < j; k++)
            if (counts[k].c == max)
                add_row(r, "%lld\t%lld\t%lld\t%lld", (long long)counts[k].a,
                        (long long)(counts[k].a + 10000), (long long)counts[k].b,
                        (long long)counts[k].c);
        i = j;
    }
    free(p);
    free(counts);
}

static void q7(const events_t *ev, rows_t *r)
{
    pair_t *p = malloc((ev->count + 1) * sizeof *p);
    if (!p) {
        r->oom = true;
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < ev->count; i++) {
        const eddy_nexmark_event_t *e = &ev->items[i];
        if (e->type == EDDY_NEXMARK_BID)
            p[n++] = (pair_t){window_of(e->date_time, 10000), e->u.bid.price, 0, e};
    }
    qsort(p, n, sizeof *p, cmp_pair);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && p[j].a == p[i].a)
            j++;
        int64_t max = p[j - 1].b; /* sorted by price within the window */
        for (size_t k = i; k < j; k++) {
            if (p[k].b != max)
                continue;
            const eddy_nexmark_event_t *e = p[k].e;
            add_row(r, "%lld\t%lld\t%lld\t%lld\t%lld\t%lld", (long long)p[k].a,
                    (long long)(p[k].a + 10000), (long long)e->u.bid.auction,
                    (long long)e->u.bid.bidder, (long long)e->u.bid.price,
                    (long long)e->date_time);
        }
        i = j;
    }
    free(p);
}

static void q11(const events_t *ev, rows_t *r)
{
    pair_t *p = malloc((ev->count + 1) * sizeof *p);
    if (!p) {
        r->oom = true;
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < ev->count; i++) {
        const eddy_nexmark_event_t *e = &ev->items[i];
        if (e->type == EDDY_NEXMARK_BID)
            p[n++] = (pair_t){e->u.bid.bidder, e->date_time, 0, NULL};
    }
    qsort(p, n, sizeof *p, cmp_pair);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        /* Sorted by time, a bid within the gap of the previous one extends
         * the session; that covers merging sessions bridged by a late bid. */
        while (j < n && p[j].a == p[i].a && p[j].b < p[j - 1].b + 10000)
            j++;
        add_row(r, "%lld\t%lld\t%lld\t%lld", (long long)p[i].a, (long long)(j - i),
                (long long)p[i].b, (long long)(p[j - 1].b + 10000));
        i = j;
    }
    free(p);
}

static void simple(const events_t *ev, int query, rows_t *r)
{
    for (size_t i = 0; i < ev->count; i++) {
        const eddy_nexmark_event_t *e = &ev->items[i];
        if (e->type != EDDY_NEXMARK_BID)
            continue;
        const eddy_nexmark_bid_t *b = &e->u.bid;
        if (query == 0)
            add_row(r, "%lld\t%lld\t%lld\t%lld", (long long)b->auction, (long long)b->bidder,
                    (long long)b->price, (long long)e->date_time);
        else if (query == 1)
            add_row(r, "%lld\t%lld\t%lld\t%lld", (long long)b->auction, (long long)b->bidder,
                    (long long)eddy_nexmark_q1_price(b->price), (long long)e->date_time);
        else if (b->auction % 123 == 0)
            add_row(r, "%lld\t%lld", (long long)b->auction, (long long)b->price);
    }
}

int eddy_nexmark_reference(const char *query, const char *events_path, eddy_ref_lines_t *out,
                           eddy_err_t *err)
{
    static const char *const known[] = {"q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q11"};
    int q = -1;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(query, known[i]))
            q = atoi(query + 1);
    memset(out, 0, sizeof *out);
    if (q < 0)
        return eddy_err_set(err, "no reference for query '%s' (q0 q1 q2 q3 q4 q5 q7 q8 q11)", query);
    events_t ev = {0};
    rows_t r = {0};
    int rc = load(events_path, &ev, err);
    if (rc == 0) {
        switch (q) {
        case 0: case 1: case 2: simple(&ev, q, &r); break;
        case 3: q3(&ev, &r); break;
        case 4: q4(&ev, &r); break;
        case 5: q5(&ev, &r); break;
        case 7: q7(&ev, &r); break;
        case 8: q8(&ev, &r); break;
        default: q11(&ev, &r); break;
        }
        if (r.oom)
            rc = eddy_err_set(err, "out of memory");
    }
    free(ev.text);
    free(ev.items);
    if (rc < 0) {
        eddy_ref_lines_free(&r.lines);
        return -1;
    }
    qsort(r.lines.items, r.lines.count, sizeof *r.lines.items, cmp_lines);
    *out = r.lines;
    return 0;
}

char *eddy_ref_lines_join(const eddy_ref_lines_t *lines, size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < lines->count; i++)
        total += strlen(lines->items[i]) + 1;
    char *text = malloc(total + 1), *p = text;
    if (!text)
        return NULL;
    for (size_t i = 0; i < lines->count; i++) {
        size_t n = strlen(lines->items[i]);
        memcpy(p, lines->items[i], n);
        p[n] = '\n';
        p += n + 1;
    }
    *p = '\0';
    if (len)
        *len = total;
    return text;
}

void eddy_ref_lines_free(eddy_ref_lines_t *lines)
{
    for (size_t i = 0; i < lines->count; i++)
        free(lines->items[i]);
    free(lines->items);
    lines->items = NULL;
    lines->count = 0;
}
