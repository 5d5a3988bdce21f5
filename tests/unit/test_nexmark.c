/* test_nexmark.c - Nexmark events (connectors/nexmark.c): the generator is
 * deterministic, keeps Nexmark's 1:3:46 mix and consistent ids, bounds its
 * disorder; lines round-trip through the parser, which rejects malformed
 * ones; a cursor or source resumed at a position, or split across parallel
 * instances, makes exactly the events of one sequential run. Then the
 * reference queries (tests/support/nexmark_ref.c) on small hand-written
 * event files with hand-computed rows. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "connectors/kinds.h"
#include "connectors/nexmark.h"
#include "plan/registry.h"
#include "tests/support/nexmark_ref.h"
#include "tests/support/proc.h"
#include "tests/unit/leak_check.h"

TestSuite(nexmark, .fini = eddy_test_leak_check);

#define N 10000

static char *line_at(const eddy_nexmark_config_t *cfg, uint64_t i)
{
    char buf[EDDY_NEXMARK_MAX_LINE];
    uint32_t len = eddy_nexmark_line_at(cfg, i, buf, sizeof buf, NULL);
    cr_assert_gt(len, 0);
    return strndup(buf, len);
}

Test(nexmark, same_seed_same_bytes_other_seed_other_events)
{
    eddy_nexmark_config_t a = {.seed = 7}, b = {.seed = 7}, c = {.seed = 8};
    int differ = 0;
    for (uint64_t i = 0; i < N; i++) {
        char *x = line_at(&a, i), *y = line_at(&b, i), *z = line_at(&c, i);
        cr_assert_str_eq(x, y);
        differ += strcmp(x, z) != 0;
        free(x);
        free(y);
        free(z);
    }
    cr_assert_gt(differ, N / 2);
    /* A fixed point, so a change of the generator's rules shows up here. */
    eddy_nexmark_config_t dflt = {.seed = 42};
    char *first = line_at(&dflt, 0);
    cr_assert_str_eq(first, "P,1700000000000,1000,Sarah Abrams,yfqabpb@htnwb.com,"
                            "4669 1136 2616 7357,Boise,WA");
    free(first);
}

Test(nexmark, mix_is_1_3_46_and_ids_refer_to_earlier_entities)
{
    eddy_nexmark_config_t cfg = {.seed = 3};
    uint64_t counts[3] = {0};
    int64_t next_person = 1000, next_auction = 1000;
    uint64_t hot_bids = 0, bids = 0;
    for (uint64_t i = 0; i < N; i++) {
        eddy_nexmark_event_t ev;
        eddy_nexmark_scratch_t sc;
        eddy_nexmark_event_at(&cfg, i, &ev, &sc);
        uint64_t off = i % 50;
        cr_assert_eq(ev.type, off == 0 ? 'P' : off <= 3 ? 'A' : 'B', "event %llu", (unsigned long long)i);
        cr_assert_eq(ev.date_time, EDDY_NEXMARK_BASE_MS + (int64_t)i);
        switch (ev.type) {
        case EDDY_NEXMARK_PERSON:
            counts[0]++;
            cr_assert_eq(ev.u.person.id, next_person++);
            break;
        case EDDY_NEXMARK_AUCTION: {
            counts[1]++;
            const eddy_nexmark_auction_t *a = &ev.u.auction;
            cr_assert_eq(a->id, next_auction++);
            cr_assert(a->seller >= 1000 && a->seller < next_person, "seller %lld", (long long)a->seller);
            cr_assert(a->category >= 10 && a->category <= 14);
            cr_assert(a->expires - ev.date_time >= 2000 && a->expires - ev.date_time < 40000);
            cr_assert(a->initial_bid >= 100 && a->reserve > a->initial_bid);
            break;
        }
        default: {
            counts[2]++;
            const eddy_nexmark_bid_t *b = &ev.u.bid;
            cr_assert(b->auction >= 1000 && b->auction < next_auction);
            cr_assert(b->bidder >= 1000 && b->bidder < next_person);
            cr_assert(b->price >= 100 && b->price < 100000000);
            /* Hot auctions: the same auction gets a large share of bids. */
            int64_t hot = (next_auction - 1000 - 1) / 100 * 100 + 1000;
            bids++;
            hot_bids += b->auction == hot;
            break;
        }
        }
    }
    cr_assert_eq(counts[0], N / 50);
    cr_assert_eq(counts[1], N / 50 * 3);
    cr_assert_eq(counts[2], N / 50 * 46);
    cr_assert_gt(hot_bids, bids / 3, "the hot auction gets about half the bids");
}

Test(nexmark, q3_has_results_within_a_few_thousand_events)
{
    for (uint64_t seed = 1; seed <= 20; seed++) {
        eddy_nexmark_config_t cfg = {.seed = seed};
        char states[5000 / 50][3];
        int results = 0;
        for (uint64_t i = 0; i < 5000; i++) {
            eddy_nexmark_event_t ev;
            eddy_nexmark_scratch_t sc;
            eddy_nexmark_event_at(&cfg, i, &ev, &sc);
            if (ev.type == EDDY_NEXMARK_PERSON)
                snprintf(states[i / 50], 3, "%.*s", (int)ev.u.person.state.len, ev.u.person.state.ptr);
            if (ev.type == EDDY_NEXMARK_AUCTION && ev.u.auction.category == 10) {
                const char *s = states[ev.u.auction.seller - 1000];
                results += !strcmp(s, "OR") || !strcmp(s, "ID") || !strcmp(s, "CA");
            }
        }
        cr_assert_gt(results, 0, "seed %llu", (unsigned long long)seed);
    }
}

Test(nexmark, disorder_moves_date_times_back_by_at_most_d_and_nothing_else)
{
    eddy_nexmark_config_t in_order = {.seed = 5}, disordered = {.seed = 5, .disorder_ms = 300};
    int64_t max_seen = 0;
    int out_of_order = 0;
    for (uint64_t i = 0; i < N; i++) {
        eddy_nexmark_event_t a, b;
        eddy_nexmark_scratch_t sa, sb;
        eddy_nexmark_event_at(&in_order, i, &a, &sa);
        eddy_nexmark_event_at(&disordered, i, &b, &sb);
        int64_t nominal = EDDY_NEXMARK_BASE_MS + (int64_t)i;
        cr_assert_eq(a.date_time, nominal);
        cr_assert(b.date_time <= nominal && b.date_time >= nominal - 300);
        cr_assert(b.date_time >= max_seen - 300, "out of order by more than D");
        out_of_order += b.date_time < max_seen;
        if (b.date_time > max_seen)
            max_seen = b.date_time;
        if (a.type == EDDY_NEXMARK_BID) {
            cr_assert_eq(a.u.bid.auction, b.u.bid.auction);
            cr_assert_eq(a.u.bid.bidder, b.u.bid.bidder);
            cr_assert_eq(a.u.bid.price, b.u.bid.price);
        } else if (a.type == EDDY_NEXMARK_AUCTION) {
            cr_assert_eq(a.u.auction.expires - a.date_time, b.u.auction.expires - b.date_time);
            cr_assert_eq(a.u.auction.seller, b.u.auction.seller);
        }
    }
    cr_assert_gt(out_of_order, N / 4);
}

Test(nexmark, lines_round_trip_through_the_parser)
{
    eddy_nexmark_config_t cfg = {.seed = 11, .disorder_ms = 50};
    for (uint64_t i = 0; i < N; i++) {
        char line[EDDY_NEXMARK_MAX_LINE], again[EDDY_NEXMARK_MAX_LINE];
        int64_t dt;
        uint32_t len = eddy_nexmark_line_at(&cfg, i, line, sizeof line, &dt);
        eddy_nexmark_event_t gen, parsed;
        eddy_nexmark_scratch_t sc;
        eddy_nexmark_event_at(&cfg, i, &gen, &sc);
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_nexmark_parse(line, len, &parsed, &err), 0, "%s: %.*s", err.msg, (int)len, line);
        cr_assert_eq(parsed.type, gen.type);
        cr_assert_eq(parsed.date_time, dt);
        if (gen.type == EDDY_NEXMARK_BID) {
            cr_assert_eq(parsed.u.bid.price, gen.u.bid.price);
            cr_assert_eq(parsed.u.bid.channel.len, gen.u.bid.channel.len);
        } else if (gen.type == EDDY_NEXMARK_PERSON) {
            cr_assert_eq(parsed.u.person.id, gen.u.person.id);
            cr_assert_eq(memcmp(parsed.u.person.email.ptr, gen.u.person.email.ptr, 17), 0);
        } else {
            cr_assert_eq(parsed.u.auction.expires, gen.u.auction.expires);
            cr_assert_eq(parsed.u.auction.category, gen.u.auction.category);
        }
        uint32_t len2 = eddy_nexmark_format(&parsed, again, sizeof again);
        cr_assert_eq(len2, len);
        cr_assert_eq(memcmp(line, again, len), 0);
        cr_assert_eq(eddy_nexmark_format(&parsed, again, len - 1), 0, "too small a buffer");
    }
    eddy_nexmark_event_t ev;
    const char *max = "B,9223372036854775807,0,1,2,";
    cr_assert_eq(eddy_nexmark_parse(max, strlen(max), &ev, NULL), 0);
    cr_assert_eq(ev.date_time, INT64_MAX);
    cr_assert_eq(ev.u.bid.channel.len, 0);
    cr_assert_eq(eddy_nexmark_q1_price(1999), 1815);
    cr_assert_eq(eddy_nexmark_q1_price(INT64_MAX), (int64_t)((__int128)INT64_MAX * 908 / 1000));
}

Test(nexmark, malformed_lines_are_rejected_with_the_field_named)
{
    static const struct {
        const char *line, *error;
    } bad[] = {
        {"", "does not start with P, A or B"},
        {"X,1,2", "does not start with P, A or B"},
        {"B1,2,3,4,5", "does not start with P, A or B"},
        {"B,1,2,3,4", "bid event has 5 fields, not 6"},
        {"B,1,2,3,4,c,extra", "bid event has 7 fields, not 6"},
        {"P,1,2,n,e,c,ci,st,x,y,z", "person event has more than 9 fields, not 8"},
        {"A,1,2,item,1,2,3,4", "auction event has 8 fields, not 9"},
        {"B,1,2,x,4,c", "bidder 'x' is not a non-negative integer"},
        {"B,1,2,3,-4,c", "price '-4' is not a non-negative integer"},
        {"B,1,2,3,+4,c", "price '+4' is not"},
        {"B,1,2,3, 4,c", "price ' 4' is not"},
        {"B,,2,3,4,c", "bid event: date_time is empty"},
        {"B,9223372036854775808,2,3,4,c", "date_time '9223372036854775808' does not fit in 64 bits"},
        {"B,1,2,3,99999999999999999999999,c", "price '99999999999999999999999' does not fit"},
        {"A,1,2,item,1,2,3,4,1x", "auction event: category '1x' is not"},
        {"P,1,2,na\tme,e,c,ci,st", "person event: name contains a tab"},
        {"B,1,2,3,4,c\r", "bid event: channel contains a line break"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        eddy_nexmark_event_t ev;
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_nexmark_parse(bad[i].line, strlen(bad[i].line), &ev, &err), -1, "%s",
                     bad[i].line);
        cr_assert(strstr(err.msg, bad[i].error), "'%s': got '%s'", bad[i].line, err.msg);
    }
}

/* A sequential run's lines, to compare resumed and split runs with. */
static char **sequential(const eddy_nexmark_config_t *cfg, uint64_t n)
{
    char **lines = calloc(n, sizeof *lines);
    eddy_nexmark_cursor_t c;
    eddy_nexmark_cursor_init(&c, cfg, 0, 1, 0);
    char buf[EDDY_NEXMARK_MAX_LINE];
    for (uint64_t i = 0; i < n; i++) {
        uint32_t len = eddy_nexmark_cursor_next(&c, buf, sizeof buf, NULL);
        cr_assert_gt(len, 0);
        lines[i] = strndup(buf, len);
    }
    cr_assert_eq(eddy_nexmark_cursor_next(&c, buf, sizeof buf, NULL), 0, "bounded at n");
    cr_assert_eq(c.made, n);
    return lines;
}

static void free_lines(char **lines, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

typedef struct gathered {
    eddy_collector_t base;
    char **lines;      /* by global event number */
    uint64_t instance, stride, made;
    int64_t last_ts;
} gathered_t;

static void gather(eddy_collector_t *c, const eddy_record_t *rec)
{
    gathered_t *g = (gathered_t *)c;
    uint64_t global = g->instance + g->made * g->stride;
    cr_assert_null(g->lines[global], "event %llu emitted twice", (unsigned long long)global);
    g->lines[global] = strndup(rec->data, rec->len);
    eddy_nexmark_event_t ev;
    cr_assert_eq(eddy_nexmark_parse(rec->data, rec->len, &ev, NULL), 0);
    cr_assert_eq(rec->timestamp, ev.date_time, "timestamp is the event's date_time");
    g->made++;
}

Test(nexmark, resumed_and_parallel_sources_make_the_sequential_events)
{
    const uint64_t n = 3001;
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_connectors_register(r, &err), 0, "%s", err.msg);
    const eddy_source_kind_t *kind = eddy_registry_source(r, "nexmark");
    cr_assert_not_null(kind);
    cr_assert(kind->ops->replayable);
    eddy_config_t *config = eddy_config_new();
    eddy_config_set_int(config, "events", (int64_t)n);
    eddy_config_set_int(config, "seed", 9);
    eddy_config_set_int(config, "disorder_ms", 20);
    eddy_nexmark_config_t *cfg = kind->configure(config, kind->arg, &err);
    cr_assert_not_null(cfg, "%s", err.msg);
    char **want = sequential(cfg, n);

    /* Direct access and a cursor resumed at a position agree with it. */
    eddy_nexmark_cursor_t c;
    eddy_nexmark_cursor_init(&c, cfg, 0, 1, 1234);
    char buf[EDDY_NEXMARK_MAX_LINE];
    uint32_t len = eddy_nexmark_cursor_next(&c, buf, sizeof buf, NULL);
    cr_assert_eq(strncmp(want[1234], buf, len), 0);
    cr_assert_eq(strlen(want[1234]), len);

    /* p = 3 instances, each closed after a few polls and reopened at its
     * position, together emit every event exactly once. */
    char **got = calloc(n, sizeof *got);
    for (uint32_t j = 0; j < 3; j++) {
        gathered_t g = {{gather}, got, j, 3, 0, 0};
        eddy_op_context_t ctx = {.instance = j, .parallelism = 3, .config = cfg};
        int64_t position = -1;
        int rc = 1;
        while (rc == 1) {
            void *src = kind->ops->open(&ctx, position, &err);
            cr_assert_not_null(src, "%s", err.msg);
            for (int polls = 0; polls < 3 && rc == 1; polls++)
                rc = kind->ops->poll(src, &g.base, 97, &err);
            cr_assert_neq(rc, -1, "%s", err.msg);
            position = kind->ops->position(src);
            cr_assert_eq((uint64_t)position, g.made);
            kind->ops->close(src);
        }
        cr_assert_eq(g.made, (n - j + 2) / 3);
    }
    for (uint64_t i = 0; i < n; i++) {
        cr_assert_not_null(got[i], "event %llu missing", (unsigned long long)i);
        cr_assert_str_eq(got[i], want[i]);
    }
    free_lines(got, n);
    free_lines(want, n);

    /* Configuration is checked where the plan is opened. */
    eddy_config_set_int(config, "disorder_ms", EDDY_NEXMARK_MAX_DISORDER_MS + 1);
    cr_assert_null(kind->configure(config, kind->arg, &err));
    cr_assert(strstr(err.msg, "disorder_ms"), "%s", err.msg);
    kind->release(cfg);
    eddy_config_destroy(&config);
    eddy_registry_destroy(&r);
}

Test(nexmark, cli_generate_writes_the_generators_lines_and_rejects_bad_flags)
{
    char path[] = "/tmp/eddy-nexmark-gen-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    char *gen[] = {EDDY_BINARY, "nexmark", "generate", "--events", "777", "--seed", "5",
                   "--disorder-ms", "40", "--output", path, NULL};
    char *errout = NULL;
    cr_assert_eq(eddy_proc_run(gen, 60000, NULL, &errout), 0, "%s", errout);
    free(errout);
    size_t len;
    char *text = eddy_read_file(path, &len);
    unlink(path);
    cr_assert_not_null(text);
    eddy_nexmark_config_t cfg = {.events = 777, .seed = 5, .disorder_ms = 40};
    char **want = sequential(&cfg, 777);
    const char *p = text;
    for (uint64_t i = 0; i < 777; i++) {
        size_t n = strlen(want[i]);
        cr_assert(strncmp(p, want[i], n) == 0 && p[n] == '\n', "line %llu", (unsigned long long)i);
        p += n + 1;
    }
    cr_assert_eq((size_t)(p - text), len);
    free_lines(want, 777);
    free(text);

    char *out = NULL;
    char *to_stdout[] = {EDDY_BINARY, "nexmark", "generate", "--events", "3", NULL};
    cr_assert_eq(eddy_proc_run(to_stdout, 60000, &out, NULL), 0);
    cr_assert_eq(strncmp(out, "P,1700000000000,1000,", 21), 0, "%s", out);
    free(out);

    char *bad[][8] = {
        {EDDY_BINARY, "nexmark", "generate", NULL},
        {EDDY_BINARY, "nexmark", "generate", "--events", "0", NULL},
        {EDDY_BINARY, "nexmark", "generate", "--events", "5", "--disorder-ms", "-1", NULL},
        {EDDY_BINARY, "nexmark", "generate", "--events", "5", "--bogus", NULL},
        {EDDY_BINARY, "nexmark", "frobnicate", NULL},
        {EDDY_BINARY, "nexmark", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errout = NULL;
        cr_assert_eq(eddy_proc_run(bad[i], 60000, NULL, &errout), 2, "case %zu", i);
        cr_assert(errout && strchr(errout, '\n') == errout + strlen(errout) - 1,
                  "one line, case %zu: %s", i, errout);
        free(errout);
    }
    char *help[] = {EDDY_BINARY, "nexmark", "generate", "--help", NULL};
    cr_assert_eq(eddy_proc_run(help, 60000, &out, NULL), 0);
    cr_assert(strstr(out, "--disorder-ms"), "%s", out);
    free(out);
}

/* ---- reference queries on hand-written events --------------------------- */

static void check_reference(const char *query, const char *events, const char **want, size_t n)
{
    char path[] = "/tmp/eddy-nexmark-ref-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, events, strlen(events)), (ssize_t)strlen(events));
    close(fd);
    eddy_ref_lines_t lines;
    eddy_err_t err = {{0}};
    int rc = eddy_nexmark_reference(query, path, &lines, &err);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", err.msg);
    char *got = eddy_ref_lines_join(&lines, NULL);
    for (size_t i = 0; i < n && i < lines.count; i++)
        cr_expect_str_eq(lines.items[i], want[i], "%s row %zu; all:\n%s", query, i, got);
    cr_assert_eq(lines.count, n, "%s: %zu rows, not %zu:\n%s", query, lines.count, n, got);
    free(got);
    eddy_ref_lines_free(&lines);
}

#define CHECK(query, events, ...)                                                                  \
    do {                                                                                           \
        const char *want_[] = {__VA_ARGS__};                                                       \
        check_reference(query, events, want_, sizeof want_ / sizeof want_[0]);                     \
    } while (0)

static const char simple_events[] = "B,1000,246,7,1999,Google\n"
                                    "P,500,7,Ann Lee,a@b.com,1111 2222 3333 4444,Boise,ID\n"
                                    "B,2000,1001,8,1000,Apple\n";

Test(nexmark, reference_q0_q1_q2)
{
    CHECK("q0", simple_events, "1001\t8\t1000\t2000", "246\t7\t1999\t1000");
    CHECK("q1", simple_events, "1001\t8\t908\t2000", "246\t7\t1815\t1000");
    CHECK("q2", simple_events, "246\t1999");
}

Test(nexmark, reference_q3_joins_sellers_in_or_id_ca_with_category_10)
{
    CHECK("q3",
          "P,100,1,Ann,a@x.com,1,Boise,ID\n"
          "P,100,2,Bob,b@x.com,2,Phoenix,AZ\n"
          "P,100,3,Cy,c@x.com,3,Portland,OR\n"
          "A,200,10,item,5,6,9000,1,10\n"  /* Ann */
          "A,200,11,item,5,6,9000,2,10\n"  /* Bob is in AZ */
          "A,200,12,item,5,6,9000,3,11\n"  /* category 11 */
          "A,50,13,item,5,6,9000,3,10\n"   /* before Cy registered: still joins */
          "A,200,14,item,5,6,9000,99,10\n", /* no such person */
          "Ann\tBoise\tID\t10", "Cy\tPortland\tOR\t13");
}

Test(nexmark, reference_q4_averages_winning_prices_of_bids_in_time)
{
    CHECK("q4",
          "A,1000,1,i,1,1,5000,9,10\n"
          "A,1000,2,i,1,1,3000,9,10\n"
          "A,1000,3,i,1,1,3000,9,11\n"
          "A,1000,4,i,1,1,3000,9,12\n"
          "B,1000,1,5,100,c\n"  /* at the auction's start: counts */
          "B,5000,1,5,300,c\n"  /* at expires: counts, wins auction 1 */
          "B,5001,1,5,999,c\n"  /* after expires */
          "B,2000,2,5,201,c\n"  /* wins auction 2 */
          "B,999,3,5,500,c\n"   /* before the auction */
          "B,2999,3,5,50,c\n"   /* wins auction 3 */
          "B,3001,4,5,70,c\n"   /* auction 4 has no bid in time: category 12 is left out */
          "B,2000,77,5,70,c\n", /* no such auction */
          "10\t250", "11\t50");
}

Test(nexmark, reference_q5_keeps_every_auction_tied_for_the_most_bids)
{
    /* 101000 and 101500 fall in the windows starting 92000..100000, one bid
     * each for auctions 1 and 2 (a tie: both rows); 111000..111800 in
     * 102000..110000, where auction 2 has two bids and auction 1 one. */
    CHECK("q5",
          "B,101000,1,7,1,c\n"
          "B,101500,2,7,1,c\n"
          "B,111000,1,7,1,c\n"
          "B,111500,2,7,1,c\n"
          "B,111800,2,7,1,c\n",
          "100000\t110000\t1\t1", "100000\t110000\t2\t1",
          "102000\t112000\t2\t2", "104000\t114000\t2\t2", "106000\t116000\t2\t2",
          "108000\t118000\t2\t2", "110000\t120000\t2\t2",
          "92000\t102000\t1\t1", "92000\t102000\t2\t1", "94000\t104000\t1\t1",
          "94000\t104000\t2\t1", "96000\t106000\t1\t1", "96000\t106000\t2\t1",
          "98000\t108000\t1\t1", "98000\t108000\t2\t1");
}

Test(nexmark, reference_q7_keeps_every_bid_at_the_window_maximum)
{
    CHECK("q7",
          "B,100,1,7,50,c\n"
          "B,300,3,9,80,c\n"
          "B,200,2,8,80,c\n"
          "B,10000,4,1,10,c\n"
          "B,9999,5,2,5,c\n",
          "0\t10000\t2\t8\t80\t200", "0\t10000\t3\t9\t80\t300", "10000\t20000\t4\t1\t10\t10000");
}

Test(nexmark, reference_q8_needs_registration_and_auction_in_one_window)
{
    CHECK("q8",
          "P,1000,1,Ann,a,c,ci,OR\n"
          "P,12000,2,Bob,b,c,ci,OR\n"
          "P,3000,3,Cy,c,c,ci,OR\n"
          "A,9999,10,i,1,1,20000,1,10\n"   /* Ann, window 0 */
          "A,10001,11,i,1,1,20000,3,10\n"  /* Cy registered in window 0: no */
          "A,15000,12,i,1,1,20000,2,10\n"  /* Bob, window 10000 */
          "A,16000,13,i,1,1,20000,2,10\n", /* Bob again: still one row */
          "1\tAnn\t0", "2\tBob\t10000");
}

Test(nexmark, reference_q11_merges_sessions_bridged_by_a_late_bid)
{
    /* Bidder 7: 1000 and 20000 are 19 s apart, two sessions, until 10500
     * arrives and bridges them. Bidder 8: exactly the gap apart is apart. */
    CHECK("q11",
          "B,1000,1,7,1,c\n"
          "B,20000,1,7,1,c\n"
          "B,5000,1,8,1,c\n"
          "B,15000,1,8,1,c\n"
          "B,10500,1,7,1,c\n",
          "7\t3\t1000\t30000", "8\t1\t15000\t25000", "8\t1\t5000\t15000");
}

Test(nexmark, reference_rejects_unknown_queries_and_malformed_files)
{
    eddy_ref_lines_t lines;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_nexmark_reference("q12", "/nonexistent", &lines, &err), -1);
    cr_assert(strstr(err.msg, "q12"), "%s", err.msg);
    char path[] = "/tmp/eddy-nexmark-ref-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_eq(write(fd, "B,1,2,3,4,c\nB,1,2,3\n", 20), 20);
    close(fd);
    cr_assert_eq(eddy_nexmark_reference("q0", path, &lines, &err), -1);
    unlink(path);
    cr_assert(strstr(err.msg, "line 2") && strstr(err.msg, "4 fields"), "%s", err.msg);
}
