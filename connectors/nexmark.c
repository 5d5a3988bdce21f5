/* nexmark.c - Nexmark events: the CSV parser and formatter, the generator
 * and the "nexmark" source (rules in nexmark.h). The parser and formatter
 * run once per event in the benchmark, so they scan by hand and never
 * allocate; the generator draws each event from a splitmix64 stream seeded
 * by (seed, event number), which is what lets any event be made directly. */
#include "connectors/nexmark.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/fmt.h"
#include "connectors/sources.h"

/* ---- parser ------------------------------------------------------------- */

#define MAX_FIELDS 9

static const char *const person_fields[] = {"type", "date_time", "id", "name", "email",
                                            "credit_card", "city", "state"};
static const char *const auction_fields[] = {"type", "date_time", "id", "item_name", "initial_bid",
                                             "reserve", "expires", "seller", "category"};
static const char *const bid_fields[] = {"type", "date_time", "auction", "bidder", "price",
                                         "channel"};

static const char *type_name(char type)
{
    return type == 'P' ? "person" : type == 'A' ? "auction" : "bid";
}

/* Splits at commas into f[0..MAX_FIELDS); returns the field count, or
 * MAX_FIELDS + 1 when there are more. */
static int split(const char *line, size_t len, eddy_nexmark_str_t *f)
{
    const char *p = line, *end = line + len;
    int n = 0;
    for (;;) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        const char *stop = c ? c : end;
        if (n == MAX_FIELDS)
            return MAX_FIELDS + 1;
        f[n].ptr = p;
        f[n].len = (uint32_t)(stop - p);
        n++;
        if (!c)
            return n;
        p = c + 1;
    }
}

static int parse_num(eddy_nexmark_str_t s, char type, const char *what, int64_t *out,
                     eddy_err_t *err)
{
    if (s.len == 0)
        return eddy_err_set(err, "%s event: %s is empty", type_name(type), what);
    uint64_t v = 0;
    for (uint32_t i = 0; i < s.len; i++) {
        unsigned d = (unsigned char)s.ptr[i] - '0';
        if (d > 9)
            return eddy_err_set(err, "%s event: %s '%.*s' is not a non-negative integer",
                                type_name(type), what, (int)(s.len > 40 ? 40 : s.len), s.ptr);
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return eddy_err_set(err, "%s event: %s '%.*s' does not fit in 64 bits", type_name(type),
                                what, (int)(s.len > 40 ? 40 : s.len), s.ptr);
        v = v * 10 + d;
    }
    *out = (int64_t)v;
    return 0;
}

/* Output rows are tab separated and line based: a field with a tab, CR or
 * LF would corrupt them, so such an event is malformed. */
static int check_text(eddy_nexmark_str_t s, char type, const char *what, eddy_err_t *err)
{
    for (uint32_t i = 0; i < s.len; i++) {
        char c = s.ptr[i];
        if (c == '\t' || c == '\n' || c == '\r')
            return eddy_err_set(err, "%s event: %s contains a %s", type_name(type), what,
                                c == '\t' ? "tab" : "line break");
    }
    return 0;
}

int eddy_nexmark_parse(const char *line, size_t len, eddy_nexmark_event_t *ev, eddy_err_t *err)
{
    if (len > EDDY_RECORD_MAX_BYTES)
        return eddy_err_set(err, "event line is longer than %u bytes", EDDY_RECORD_MAX_BYTES);
    if (len < 2 || line[1] != ',' || (line[0] != 'P' && line[0] != 'A' && line[0] != 'B'))
        return eddy_err_set(err, "event line '%.*s' does not start with P, A or B and a comma",
                            (int)(len > 40 ? 40 : len), line);
    char type = line[0];
    eddy_nexmark_str_t f[MAX_FIELDS];
    int n = split(line, len, f);
    int want = type == 'P' ? 8 : type == 'A' ? 9 : 6;
    if (n != want)
        return eddy_err_set(err, "%s event has %s%d fields, not %d", type_name(type),
                            n > MAX_FIELDS ? "more than " : "", n > MAX_FIELDS ? MAX_FIELDS : n,
                            want);
    ev->type = (eddy_nexmark_type_t)type;
    const char *const *names = type == 'P' ? person_fields : type == 'A' ? auction_fields : bid_fields;
    if (parse_num(f[1], type, names[1], &ev->date_time, err) < 0)
        return -1;
    switch (type) {
    case 'P': {
        eddy_nexmark_person_t *p = &ev->u.person;
        if (parse_num(f[2], type, names[2], &p->id, err) < 0)
            return -1;
        p->name = f[3];
        p->email = f[4];
        p->credit_card = f[5];
        p->city = f[6];
        p->state = f[7];
        for (int i = 3; i <= 7; i++)
            if (check_text(f[i], type, names[i], err) < 0)
                return -1;
        return 0;
    }
    case 'A': {
        eddy_nexmark_auction_t *a = &ev->u.auction;
        a->item_name = f[3];
        if (parse_num(f[2], type, names[2], &a->id, err) < 0 ||
            check_text(f[3], type, names[3], err) < 0 ||
            parse_num(f[4], type, names[4], &a->initial_bid, err) < 0 ||
            parse_num(f[5], type, names[5], &a->reserve, err) < 0 ||
            parse_num(f[6], type, names[6], &a->expires, err) < 0 ||
            parse_num(f[7], type, names[7], &a->seller, err) < 0 ||
            parse_num(f[8], type, names[8], &a->category, err) < 0)
            return -1;
        return 0;
    }
    default: {
        eddy_nexmark_bid_t *b = &ev->u.bid;
        b->channel = f[5];
        if (parse_num(f[2], type, names[2], &b->auction, err) < 0 ||
            parse_num(f[3], type, names[3], &b->bidder, err) < 0 ||
            parse_num(f[4], type, names[4], &b->price, err) < 0 ||
            check_text(f[5], type, names[5], err) < 0)
            return -1;
        return 0;
    }
    }
}

/* ---- formatter ---------------------------------------------------------- */

typedef struct out {
    char *p, *end;
    bool full;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->full || (size_t)(o->end - o->p) < n) {
        o->full = true;
        return;
    }
    memcpy(o->p, s, n);
    o->p += n;
}

static void put_str(out_t *o, eddy_nexmark_str_t s)
{
    put(o, ",", 1);
    put(o, s.ptr, s.len);
}

static void put_int(out_t *o, int64_t v)
{
    char tmp[1 + EDDY_I64_CHARS];
    tmp[0] = ',';
    put(o, tmp, (size_t)(eddy_fmt_i64(tmp + 1, v) - tmp));
}

uint32_t eddy_nexmark_format(const eddy_nexmark_event_t *ev, char *buf, size_t size)
{
    out_t o = {buf, buf + size, false};
    char type = (char)ev->type;
    put(&o, &type, 1);
    put_int(&o, ev->date_time);
    switch (ev->type) {
    case EDDY_NEXMARK_PERSON: {
        const eddy_nexmark_person_t *p = &ev->u.person;
        put_int(&o, p->id);
        put_str(&o, p->name);
        put_str(&o, p->email);
        put_str(&o, p->credit_card);
        put_str(&o, p->city);
        put_str(&o, p->state);
        break;
    }
    case EDDY_NEXMARK_AUCTION: {
        const eddy_nexmark_auction_t *a = &ev->u.auction;
        put_int(&o, a->id);
        put_str(&o, a->item_name);
        put_int(&o, a->initial_bid);
        put_int(&o, a->reserve);
        put_int(&o, a->expires);
        put_int(&o, a->seller);
        put_int(&o, a->category);
        break;
    }
    case EDDY_NEXMARK_BID: {
        const eddy_nexmark_bid_t *b = &ev->u.bid;
        put_int(&o, b->auction);
        put_int(&o, b->bidder);
        put_int(&o, b->price);
        put_str(&o, b->channel);
        break;
    }
    default:
        return 0;
    }
    if (o.full || o.p - buf > (ptrdiff_t)UINT32_MAX)
        return 0;
    return (uint32_t)(o.p - buf);
}

int64_t eddy_nexmark_q1_price(int64_t price)
{
    /* price = 1000q + r: price * 908 / 1000 = 908q + 908r / 1000. */
    return price / 1000 * 908 + price % 1000 * 908 / 1000;
}

/* ---- generator ---------------------------------------------------------- */

#define PROPORTION 50      /* events per block: 1 person, 3 auctions, 46 bids */
#define ACTIVE_PEOPLE 1000 /* Nexmark's numActivePeople */
#define IN_FLIGHT_AUCTIONS 100
#define HOT_RATIO 100      /* Nexmark's HOT_{AUCTION,SELLER,BIDDER}_RATIO */

static const char *const first_names[] = {"Peter", "Paul",  "Luke",  "John",   "Saul",  "Vicky",
                                          "Kate",  "Julie", "Sarah", "Deiter", "Walter"};
static const char *const last_names[] = {"Shultz", "Abrams", "Spencer", "White", "Bartels",
                                         "Walton", "Smith",  "Jones",   "Noris"};
static const char *const cities[] = {"Phoenix", "Los Angeles", "San Francisco", "Boise",
                                     "Portland", "Bend",        "Redmond",       "Seattle",
                                     "Kent",     "Cheyenne"};
static const char *const states[] = {"AZ", "CA", "ID", "OR", "WA", "WY"};
static const char *const channels[] = {"Google",    "Facebook",  "Baidu",     "Apple",
                                       "channel-0", "channel-1", "channel-2", "channel-3",
                                       "channel-4", "channel-5", "channel-6", "channel-7",
                                       "channel-8", "channel-9"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* splitmix64: the value at the state, then the state moves on. */
static uint64_t draw(uint64_t *s)
{
    uint64_t v = eddy_generator_mix(*s);
    *s += 0x9e3779b97f4a7c15ull;
    return v;
}

static uint64_t below(uint64_t *s, uint64_t n)
{
    return draw(s) % n;
}

static eddy_nexmark_str_t text(const char *s)
{
    return (eddy_nexmark_str_t){s, (uint32_t)strlen(s)};
}

/* Nexmark's prices: log-uniform over 1 dollar .. 1 million dollars (cents). */
static int64_t price(uint64_t *s)
{
    int64_t lo = 100;
    for (uint64_t d = below(s, 6); d > 0; d--)
        lo *= 10;
    return lo + (int64_t)below(s, (uint64_t)(9 * lo));
}

typedef struct scratch_writer {
    eddy_nexmark_scratch_t *sc;
    uint32_t used;
} scratch_writer_t;

static char *scratch_take(scratch_writer_t *w, uint32_t n)
{
    char *p = w->sc->buf + w->used;
    w->used += n;
    return p;
}

static eddy_nexmark_str_t letters(scratch_writer_t *w, uint64_t *s, uint32_t n)
{
    char *p = scratch_take(w, n);
    for (uint32_t i = 0; i < n; i++)
        p[i] = (char)('a' + below(s, 26));
    return (eddy_nexmark_str_t){p, n};
}

/* A person among the last ACTIVE_PEOPLE (base 0), never one not made yet. */
static uint64_t recent_person(uint64_t *s, uint64_t last)
{
    uint64_t people = last + 1;
    uint64_t active = people < ACTIVE_PEOPLE ? people : ACTIVE_PEOPLE;
    return people - active + below(s, active);
}

void eddy_nexmark_event_at(const eddy_nexmark_config_t *cfg, uint64_t i, eddy_nexmark_event_t *ev,
                           eddy_nexmark_scratch_t *scratch)
{
    uint64_t s = eddy_generator_mix(cfg->seed ^ eddy_generator_mix(i));
    uint64_t disorder = cfg->disorder_ms > 0 ? (uint64_t)cfg->disorder_ms : 0;
    /* Drawn whatever D is, so D changes date_times and nothing else. */
    uint64_t back = below(&s, disorder + 1);
    ev->date_time = EDDY_NEXMARK_BASE_MS + (int64_t)i - (int64_t)back;
    uint64_t block = i / PROPORTION, offset = i % PROPORTION;
    uint64_t last_person = block; /* base 0: each block starts with its person */
    scratch_writer_t w = {scratch, 0};
    if (offset == 0) {
        ev->type = EDDY_NEXMARK_PERSON;
        eddy_nexmark_person_t *p = &ev->u.person;
        p->id = EDDY_NEXMARK_FIRST_PERSON_ID + (int64_t)block;
        const char *first = first_names[below(&s, COUNT(first_names))];
        const char *last = last_names[below(&s, COUNT(last_names))];
        size_t fl = strlen(first), ll = strlen(last);
        char *name = scratch_take(&w, (uint32_t)(fl + 1 + ll));
        memcpy(name, first, fl);
        name[fl] = ' ';
        memcpy(name + fl + 1, last, ll);
        p->name = (eddy_nexmark_str_t){name, (uint32_t)(fl + 1 + ll)};
        char *email = w.sc->buf + w.used;
        letters(&w, &s, 7);
        memcpy(scratch_take(&w, 1), "@", 1);
        letters(&w, &s, 5);
        memcpy(scratch_take(&w, 4), ".com", 4);
        p->email = (eddy_nexmark_str_t){email, 17};
        char *card = scratch_take(&w, 19);
        for (int k = 0; k < 19; k++)
            card[k] = k % 5 == 4 ? ' ' : (char)('0' + below(&s, 10));
        p->credit_card = (eddy_nexmark_str_t){card, 19};
        p->city = text(cities[below(&s, COUNT(cities))]);
        p->state = text(states[below(&s, COUNT(states))]);
    } else if (offset <= 3) {
        ev->type = EDDY_NEXMARK_AUCTION;
        eddy_nexmark_auction_t *a = &ev->u.auction;
        a->id = EDDY_NEXMARK_FIRST_AUCTION_ID + (int64_t)(block * 3 + offset - 1);
        a->item_name = letters(&w, &s, 3 + (uint32_t)below(&s, 18));
        a->initial_bid = price(&s);
        a->reserve = a->initial_bid + price(&s);
        a->expires = ev->date_time + 2000 + (int64_t)below(&s, 38000);
        uint64_t seller = below(&s, 4) > 0 ? last_person / HOT_RATIO * HOT_RATIO
                                           : recent_person(&s, last_person);
        a->seller = EDDY_NEXMARK_FIRST_PERSON_ID + (int64_t)seller;
        a->category = EDDY_NEXMARK_FIRST_CATEGORY + (int64_t)below(&s, EDDY_NEXMARK_CATEGORIES);
    } else {
        ev->type = EDDY_NEXMARK_BID;
        eddy_nexmark_bid_t *b = &ev->u.bid;
        uint64_t last_auction = block * 3 + 2;
        uint64_t auction;
        if (below(&s, 2) > 0) {
            auction = last_auction / HOT_RATIO * HOT_RATIO;
        } else {
            uint64_t min = last_auction > IN_FLIGHT_AUCTIONS ? last_auction - IN_FLIGHT_AUCTIONS : 0;
            auction = min + below(&s, last_auction - min + 1);
        }
        uint64_t bidder;
        if (below(&s, 4) > 0) {
            bidder = last_person / HOT_RATIO * HOT_RATIO + 1;
            if (bidder > last_person)
                bidder = last_person;
        } else {
            bidder = recent_person(&s, last_person);
        }
        b->auction = EDDY_NEXMARK_FIRST_AUCTION_ID + (int64_t)auction;
        b->bidder = EDDY_NEXMARK_FIRST_PERSON_ID + (int64_t)bidder;
        b->price = price(&s);
        /* Half of the bids come through the four hot channels. */
        b->channel = text(below(&s, 2) ? channels[below(&s, 4)] : channels[4 + below(&s, 10)]);
    }
}

uint32_t eddy_nexmark_line_at(const eddy_nexmark_config_t *cfg, uint64_t i, char *buf, size_t size,
                              int64_t *date_time)
{
    eddy_nexmark_event_t ev;
    eddy_nexmark_scratch_t scratch;
    eddy_nexmark_event_at(cfg, i, &ev, &scratch);
    if (date_time)
        *date_time = ev.date_time;
    return eddy_nexmark_format(&ev, buf, size);
}

void eddy_nexmark_cursor_init(eddy_nexmark_cursor_t *c, const eddy_nexmark_config_t *cfg,
                              uint32_t instance, uint32_t parallelism, uint64_t position)
{
    c->cfg = *cfg;
    c->stride = parallelism ? parallelism : 1;
    c->made = position;
    c->next = instance + position * c->stride;
}

uint32_t eddy_nexmark_cursor_next(eddy_nexmark_cursor_t *c, char *buf, size_t size,
                                  int64_t *date_time)
{
    if (c->cfg.events && c->next >= c->cfg.events)
        return 0;
    uint32_t len = eddy_nexmark_line_at(&c->cfg, c->next, buf, size, date_time);
    if (len) {
        c->next += c->stride;
        c->made++;
    }
    return len;
}

/* ---- source ------------------------------------------------------------- */

typedef struct nexmark_source {
    eddy_nexmark_cursor_t cursor;
    char line[EDDY_NEXMARK_MAX_LINE];
} nexmark_source_t;

static void *nexmark_open(const eddy_op_context_t *ctx, int64_t start_position, eddy_err_t *err)
{
    const eddy_nexmark_config_t *cfg = ctx->config;
    if (cfg->disorder_ms < 0 || cfg->disorder_ms > EDDY_NEXMARK_MAX_DISORDER_MS) {
        eddy_err_set(err, "nexmark source: disorder_ms %lld is outside 0..%lld",
                     (long long)cfg->disorder_ms, (long long)EDDY_NEXMARK_MAX_DISORDER_MS);
        return NULL;
    }
    nexmark_source_t *s = calloc(1, sizeof *s);
    if (!s) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    eddy_nexmark_cursor_init(&s->cursor, cfg, ctx->instance, ctx->parallelism,
                             start_position > 0 ? (uint64_t)start_position : 0);
    return s;
}

static bool nexmark_done(const nexmark_source_t *s)
{
    return s->cursor.cfg.events && s->cursor.next >= s->cursor.cfg.events;
}

static int nexmark_poll(void *self, eddy_collector_t *out, uint32_t max, eddy_err_t *err)
{
    nexmark_source_t *s = self;
    for (uint32_t i = 0; i < max; i++) {
        int64_t date_time;
        uint32_t len = eddy_nexmark_cursor_next(&s->cursor, s->line, sizeof s->line, &date_time);
        if (!len) {
            if (nexmark_done(s))
                return 0;
            return eddy_err_set(err, "nexmark source: event %llu does not fit in %d bytes",
                                (unsigned long long)s->cursor.next, EDDY_NEXMARK_MAX_LINE);
        }
        eddy_record_t rec = eddy_record_make(s->line, len, 1);
        rec.timestamp = date_time;
        eddy_emit(out, &rec);
    }
    return nexmark_done(s) ? 0 : 1;
}

static int64_t nexmark_position(void *self)
{
    return (int64_t)((nexmark_source_t *)self)->cursor.made;
}

const eddy_source_ops_t eddy_nexmark_source_ops = {
    .kind = "nexmark", .replayable = true, .open = nexmark_open, .poll = nexmark_poll,
    .position = nexmark_position, .close = free};
