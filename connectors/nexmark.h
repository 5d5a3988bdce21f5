/* nexmark.h - the Nexmark benchmark's events: model, CSV format and strict
 * parser, a deterministic generator, and the "nexmark" source.
 *
 * Format (DESIGN.md, "Nexmark"): one event per line, no quoting, fields
 * never contain a comma, a tab, '\r' or '\n'; date_time in epoch ms.
 *   P,date_time,id,name,email,credit_card,city,state
 *   A,date_time,id,item_name,initial_bid,reserve,expires,seller,category
 *   B,date_time,auction,bidder,price,channel
 * Numbers are plain non-negative decimals (no sign, no spaces, fit int64).
 *
 * Generator rules (modelled on the Nexmark project's generator; every
 * event i is a pure function of (seed, disorder_ms, i), so it can be made
 * directly, and the same seed gives the same bytes everywhere: integer
 * arithmetic only):
 *   - Type by i % 50: 0 a person, 1..3 an auction, 4..49 a bid
 *     (persons:auctions:bids = 1:3:46).
 *   - Ids increase from 1000: the person of block b = i / 50 has id
 *     1000 + b, its auctions 1000 + 3b + (i % 50 - 1).
 *   - References always name an entity generated before (in event order):
 *     an auction's seller is with probability 3/4 a "hot" seller (the last
 *     person id rounded down to a multiple of 100), else uniform among the
 *     last 1000 persons; a bid's auction is with probability 1/2 the hot
 *     auction (the last auction id rounded down to a multiple of 100), else
 *     uniform among the last 101 auctions; its bidder is with probability
 *     3/4 the hot bidder (the last person id rounded down to a multiple of
 *     100, plus 1; the last person while that one does not exist yet), else
 *     uniform among the last 1000 persons. (Nexmark also lets a reference run up to 10 ids ahead;
 *     here it never does, so every id a bid or auction names exists.)
 *   - Categories 10..14 uniformly; states uniformly from AZ CA ID OR WA WY
 *     (half of them OR/ID/CA, so Nexmark q3 has results within a few
 *     thousand events), cities from a list of ten, independently.
 *   - Prices in cents, log-uniform like Nexmark's 100 * 10^(6u): a decade
 *     0..5 uniformly, then uniform in [100*10^d, 1000*10^d). reserve =
 *     initial_bid + another price; expires = date_time + 2 s .. 40 s.
 *   - Channels: Google, Facebook, Baidu, Apple (together 1/2) or
 *     channel-0 .. channel-9.
 *   - Time: event i's nominal time is EDDY_NEXMARK_BASE_MS + i (one event
 *     per ms: 100k events span 100 s). With disorder_ms D its date_time is
 *     the nominal time minus a pseudo-random 0..D ms, so date_times are out
 *     of order by at most D (every other field is the same whatever D).
 *   - Parallel split: instance j of p makes the events j, j+p, j+2p, ...
 *     (global numbers below `events` when bounded); its position is how
 *     many it made, and restored at position k it resumes at j + k*p.
 */
#ifndef EDDY_CONNECTORS_NEXMARK_H
#define EDDY_CONNECTORS_NEXMARK_H

#include <stddef.h>
#include <stdint.h>

#include "api/operator.h"
#include "common/err.h"

#define EDDY_NEXMARK_BASE_MS 1700000000000LL /* 2023-11-14T22:13:20Z, a multiple of 10 s */
#define EDDY_NEXMARK_FIRST_PERSON_ID 1000
#define EDDY_NEXMARK_FIRST_AUCTION_ID 1000
#define EDDY_NEXMARK_FIRST_CATEGORY 10
#define EDDY_NEXMARK_CATEGORIES 5
#define EDDY_NEXMARK_MAX_DISORDER_MS 3600000LL
/* A generated event's line is always shorter than this. */
#define EDDY_NEXMARK_MAX_LINE 256

/* Borrowed text: points into the parsed line or the generator's scratch. */
typedef struct eddy_nexmark_str {
    const char *ptr;
    uint32_t len;
} eddy_nexmark_str_t;

typedef struct eddy_nexmark_person {
    int64_t id;
    eddy_nexmark_str_t name, email, credit_card, city, state;
} eddy_nexmark_person_t;

typedef struct eddy_nexmark_auction {
    int64_t id;
    eddy_nexmark_str_t item_name;
    int64_t initial_bid, reserve, expires, seller, category;
} eddy_nexmark_auction_t;

typedef struct eddy_nexmark_bid {
    int64_t auction, bidder, price;
    eddy_nexmark_str_t channel;
} eddy_nexmark_bid_t;

typedef enum eddy_nexmark_type {
    EDDY_NEXMARK_PERSON = 'P',
    EDDY_NEXMARK_AUCTION = 'A',
    EDDY_NEXMARK_BID = 'B',
} eddy_nexmark_type_t;

typedef struct eddy_nexmark_event {
    eddy_nexmark_type_t type;
    int64_t date_time;
    union {
        eddy_nexmark_person_t person;
        eddy_nexmark_auction_t auction;
        eddy_nexmark_bid_t bid;
    } u;
} eddy_nexmark_event_t;

/* Parses one line (without its '\n') into ev, whose strings then point into
 * line. Strict: exact field count, numbers as above, no tab/CR/LF in a
 * field. No allocation. -1 with err naming the field on malformed input. */
int eddy_nexmark_parse(const char *line, size_t len, eddy_nexmark_event_t *ev, eddy_err_t *err);

/* Writes ev's CSV line (no '\n') into buf; returns its length, or 0 when it
 * does not fit in size bytes (a generated event always fits in
 * EDDY_NEXMARK_MAX_LINE). */
uint32_t eddy_nexmark_format(const eddy_nexmark_event_t *ev, char *buf, size_t size);

/* Nexmark q1's currency conversion, price * 908 / 1000 for a non-negative
 * price without overflowing. */
int64_t eddy_nexmark_q1_price(int64_t price);

/* ---- generator ---------------------------------------------------------- */

typedef struct eddy_nexmark_config {
    uint64_t events;     /* total over all instances; 0 = unbounded */
    uint64_t seed;
    int64_t disorder_ms; /* 0..EDDY_NEXMARK_MAX_DISORDER_MS */
} eddy_nexmark_config_t;

/* Where a generated event's strings live (copy what outlives it). */
typedef struct eddy_nexmark_scratch {
    char buf[128];
} eddy_nexmark_scratch_t;

/* Makes global event i (whatever cfg->events says). */
void eddy_nexmark_event_at(const eddy_nexmark_config_t *cfg, uint64_t i, eddy_nexmark_event_t *ev,
                           eddy_nexmark_scratch_t *scratch);
/* Event i's line into buf (size >= EDDY_NEXMARK_MAX_LINE); returns its
 * length and, when date_time is not NULL, its date_time. */
uint32_t eddy_nexmark_line_at(const eddy_nexmark_config_t *cfg, uint64_t i, char *buf, size_t size,
                              int64_t *date_time);

/* Sequential generation for instance j of p from a position (see above). */
typedef struct eddy_nexmark_cursor {
    eddy_nexmark_config_t cfg;
    uint64_t next;     /* global number of the next event */
    uint64_t stride;   /* p */
    uint64_t made;     /* events this instance made: its position */
} eddy_nexmark_cursor_t;

void eddy_nexmark_cursor_init(eddy_nexmark_cursor_t *c, const eddy_nexmark_config_t *cfg,
                              uint32_t instance, uint32_t parallelism, uint64_t position);
/* Writes the next event's line into buf (size >= EDDY_NEXMARK_MAX_LINE) and
 * returns its length; 0 at the end of a bounded stream. */
uint32_t eddy_nexmark_cursor_next(eddy_nexmark_cursor_t *c, char *buf, size_t size,
                                  int64_t *date_time);

/* ---- source ------------------------------------------------------------- */

/* Source kind "nexmark", config eddy_nexmark_config_t: emits each event's
 * line with rec.timestamp = its date_time; replayable, its position is the
 * number of events the instance emitted. Never blocks, never rate-limits
 * (the runtime's rate limit applies on top). */
extern const eddy_source_ops_t eddy_nexmark_source_ops;

#endif
