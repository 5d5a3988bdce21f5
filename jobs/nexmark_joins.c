/* nexmark_joins.c - Nexmark's join queries as keyed process functions.
 *
 * q3 (incremental join, unbounded state) and q8 (window join) are two-input
 * steps (eddy_process2): persons are the left input (keyed by id), auctions
 * the right (keyed by seller), so each call knows its side from
 * eddy_process_input. q3: a person in OR/ID/CA is kept for good; an auction
 * of category 10 whose seller is not seen yet waits in list state; each
 * pair is emitted once, whichever side comes first. q8, per person id and
 * tumbling 10 s window [start, end): the person's row and a mark that an
 * auction came wait in list state under the window's start; an event-time
 * timer at end - 1 emits the person when both came and clears the window.
 * As with a window operator (operators/window.c), a record whose window's
 * end - 1 the watermark has reached is late (eddy_process_late). q4's first step, keyed by auction id: the auction's window
 * (date_time..expires) and its highest bid in it; an event-time timer at
 * `expires` emits (category, winning price) once the watermark has passed
 * the auction's end and leaves a small tombstone of the auction (its window,
 * no bids). Bids that arrive before their auction wait in list state; a bid
 * that arrives after the timer fired finds the tombstone: in the auction's
 * window it is late for q4 (eddy_process_late: counted, and sent on for
 * --late-output), outside it it never counted and is dropped. So q4 keeps
 * a few bytes per auction for good (like q3's unbounded state) instead of
 * keeping such bids waiting in a list forever. Rows come from nexmark.c's
 * projection (each possibly followed by '\n' and its event line; q3 and q8
 * rows without the side tag that nexmark_side split them by):
 *   q3  persons "id<TAB>name<TAB>city<TAB>state", auctions "seller<TAB>auction"
 *   q8  persons "id<TAB>name", auctions "seller"
 *   q4  "id<TAB>A<TAB>date_time<TAB>expires<TAB>category" | "auction<TAB>B<TAB>price"
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/process.h"
#include "jobs/nexmark.h"

#define ROW_MAX 1024

/* The i-th tab-separated field of a row (0 is the key). */
static bool field(const eddy_record_t *r, int i, const char **p, int *len)
{
    const char *s = r->data, *end = r->data + r->len;
    for (; i > 0; i--) {
        const char *tab = memchr(s, '\t', (size_t)(end - s));
        if (!tab)
            return false;
        s = tab + 1;
    }
    const char *tab = memchr(s, '\t', (size_t)(end - s));
    *p = s;
    *len = (int)((tab ? tab : end) - s);
    return true;
}

static int64_t field_int(const eddy_record_t *r, int i)
{
    const char *p;
    int len;
    int64_t v = 0;
    if (!field(r, i, &p, &len))
        return 0;
    for (int k = 0; k < len && p[k] >= '0' && p[k] <= '9'; k++)
        v = v * 10 + (p[k] - '0');
    return v;
}

static char side_of(const eddy_record_t *r)
{
    const char *p;
    int len;
    return field(r, 1, &p, &len) && len == 1 ? p[0] : '?';
}

static int emit_pair(const eddy_record_t *person, const eddy_record_t *auction,
                     eddy_collector_t *out, eddy_err_t *err)
{
    const char *name, *city, *state, *id;
    int nl, cl, sl, il;
    if (!field(person, 1, &name, &nl) || !field(person, 2, &city, &cl) ||
        !field(person, 3, &state, &sl) || !field(auction, 1, &id, &il))
        return eddy_err_set(err, "nexmark q3: malformed row");
    char row[ROW_MAX];
    int n = snprintf(row, sizeof row, "%.*s\t%.*s\t%.*s\t%.*s", nl, name, cl, city, sl, state, il, id);
    if (n < 0 || n >= (int)sizeof row)
        return eddy_err_set(err, "nexmark q3: row too long");
    int64_t ts = person->timestamp > auction->timestamp ? person->timestamp : auction->timestamp;
    eddy_record_t rec = {row, (uint32_t)n, EDDY_INSERT, 1, ts};
    eddy_emit(out, &rec);
    return 0;
}

static int q3_process(eddy_process_context_t *ctx, const eddy_record_t *rec, eddy_collector_t *out,
                      eddy_err_t *err)
{
    eddy_record_t person;
    bool have_person = eddy_process_list_at(ctx, "P", 1, 0, &person);
    if (eddy_process_input(ctx) == 0) { /* a person */
        if (have_person)
            return 0; /* a person registers once */
        if (eddy_process_list_add(ctx, "P", 1, rec) < 0)
            return eddy_err_set(err, "out of memory");
        eddy_record_t auction;
        for (size_t i = 0; eddy_process_list_at(ctx, "A", 1, i, &auction); i++)
            if (emit_pair(rec, &auction, out, err) < 0)
                return -1;
        eddy_process_list_clear(ctx, "A", 1);
        return 0;
    }
    if (have_person) /* an auction */
        return emit_pair(&person, rec, out, err);
    return eddy_process_list_add(ctx, "A", 1, rec) < 0 ? eddy_err_set(err, "out of memory") : 0;
}

/* ---- q8 ----------------------------------------------------------------- */

#define Q8_WINDOW_MS 10000

/* A window's list namespace: the side ('P' or 'A') and the window's start. */
static void q8_namespace(char ns[9], char side, int64_t start)
{
    ns[0] = side;
    memcpy(ns + 1, &start, sizeof start);
}

static int q8_process(eddy_process_context_t *ctx, const eddy_record_t *rec, eddy_collector_t *out,
                      eddy_err_t *err)
{
    int64_t ts = rec->timestamp;
    int64_t start = ts - (ts % Q8_WINDOW_MS + Q8_WINDOW_MS) % Q8_WINDOW_MS;
    if (start > INT64_MAX - Q8_WINDOW_MS)
        return eddy_err_set(err, "nexmark q8: timestamp %" PRId64 " has no window", ts);
    int64_t last = start + Q8_WINDOW_MS - 1;
    if (last <= eddy_process_watermark(ctx)) {
        eddy_process_late(ctx, rec, out); /* its window has fired */
        return 0;
    }
    char ns[9];
    q8_namespace(ns, eddy_process_input(ctx) == 0 ? 'P' : 'A', start);
    /* One auction is enough to qualify; a person registers once. */
    if (eddy_process_list_size(ctx, ns, sizeof ns) == 0 &&
        eddy_process_list_add(ctx, ns, sizeof ns, rec) < 0)
        return eddy_err_set(err, "out of memory");
    if (eddy_process_timer_register(ctx, EDDY_EVENT_TIME, last, &start, sizeof start) < 0)
        return eddy_err_set(err, "out of memory");
    return 0;
}

static int q8_on_timer(eddy_process_context_t *ctx, eddy_time_domain_t domain, int64_t time,
                       const void *tns, uint32_t tns_len, eddy_collector_t *out, eddy_err_t *err)
{
    (void)domain;
    int64_t start;
    if (tns_len != sizeof start)
        return eddy_err_set(err, "nexmark q8: a timer without its window");
    memcpy(&start, tns, sizeof start);
    char pns[9], ans[9];
    q8_namespace(pns, 'P', start);
    q8_namespace(ans, 'A', start);
    eddy_record_t person;
    if (eddy_process_list_at(ctx, pns, sizeof pns, 0, &person) &&
        eddy_process_list_size(ctx, ans, sizeof ans) > 0) {
        const char *name;
        int nl;
        if (!field(&person, 1, &name, &nl))
            return eddy_err_set(err, "nexmark q8: malformed person row");
        const char *nlpos = memchr(name, '\n', (size_t)nl); /* a kept event line follows */
        if (nlpos)
            nl = (int)(nlpos - name);
        const char *key;
        uint32_t klen = eddy_process_key(ctx, &key);
        char row[ROW_MAX];
        int n = snprintf(row, sizeof row, "%.*s\t%.*s\t%" PRId64, (int)klen, key, nl, name, start);
        if (n < 0 || n >= (int)sizeof row)
            return eddy_err_set(err, "nexmark q8: row too long");
        eddy_record_t rec = {row, (uint32_t)n, EDDY_INSERT, 1, time};
        eddy_emit(out, &rec);
    }
    eddy_process_list_clear(ctx, pns, sizeof pns);
    eddy_process_list_clear(ctx, ans, sizeof ans);
    return 0;
}

typedef struct auction_state {
    int64_t date_time, expires, category, max_price;
    uint8_t has_auction, has_bid, fired;
} auction_state_t;

static void offer_bid(auction_state_t *a, int64_t ts, int64_t price)
{
    if (ts < a->date_time || ts > a->expires)
        return;
    if (!a->has_bid || price > a->max_price)
        a->max_price = price;
    a->has_bid = 1;
}

static int q4_process(eddy_process_context_t *ctx, const eddy_record_t *rec, eddy_collector_t *out,
                      eddy_err_t *err)
{
    (void)out;
    auction_state_t *a = eddy_process_value(ctx, NULL);
    if (!a)
        return eddy_err_set(err, "out of memory");
    switch (side_of(rec)) {
    case 'A': {
        if (a->has_auction)
            return 0;
        a->has_auction = 1;
        a->date_time = field_int(rec, 2);
        a->expires = field_int(rec, 3);
        a->category = field_int(rec, 4);
        eddy_record_t bid;
        for (size_t i = 0; eddy_process_list_at(ctx, "B", 1, i, &bid); i++)
            offer_bid(a, bid.timestamp, bid.value);
        eddy_process_list_clear(ctx, "B", 1);
        if (eddy_process_timer_register(ctx, EDDY_EVENT_TIME, a->expires, "", 0) < 0)
            return eddy_err_set(err, "out of memory");
        return 0;
    }
    case 'B':
        if (a->fired) {
            if (rec->timestamp >= a->date_time && rec->timestamp <= a->expires)
                eddy_process_late(ctx, rec, out);
            return 0;
        }
        if (a->has_auction) {
            offer_bid(a, rec->timestamp, rec->value);
            return 0;
        }
        return eddy_process_list_add(ctx, "B", 1, rec) < 0 ? eddy_err_set(err, "out of memory") : 0;
    default:
        return eddy_err_set(err, "nexmark q4: a row that is neither an auction nor a bid");
    }
}

static int q4_on_timer(eddy_process_context_t *ctx, eddy_time_domain_t domain, int64_t time,
                       const void *ns, uint32_t ns_len, eddy_collector_t *out, eddy_err_t *err)
{
    (void)domain;
    (void)ns;
    (void)ns_len;
    (void)err;
    auction_state_t *a = eddy_process_value_get(ctx);
    if (!a || !a->has_auction || a->fired)
        return 0;
    if (a->has_bid) {
        char row[32];
        int n = snprintf(row, sizeof row, "%" PRId64, a->category);
        eddy_record_t rec = {row, (uint32_t)n, EDDY_INSERT, a->max_price, time};
        eddy_emit(out, &rec);
    }
    a->fired = 1; /* the tombstone: see the file comment */
    a->has_bid = 0;
    return 0;
}

static const eddy_process_udf_t q3_udf = {.process = q3_process};
static const eddy_process_udf_t q8_udf = {.process = q8_process, .on_timer = q8_on_timer};
static const eddy_process_udf_t q4_udf = {.value_size = sizeof(auction_state_t),
                                          .process = q4_process, .on_timer = q4_on_timer};

int eddy_nexmark_register_joins(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_register_process(r, "nexmark_q3_join", &q3_udf, err) < 0 ||
        eddy_register_process(r, "nexmark_q8_join", &q8_udf, err) < 0 ||
        eddy_register_process(r, "nexmark_q4_winning", &q4_udf, err) < 0)
        return -1;
    return 0;
}
