/* nexmark.c - the Nexmark queries as a built-in job (DESIGN.md, "Nexmark").
 *
 * Owns the job's flags, the per-query projection operator that parses each
 * event line strictly (a malformed line fails the task with the line's
 * problem, so the job ends with a clear cause rather than a wrong answer),
 * and the window and process functions the queries are built from. Every
 * query is an ordinary pipeline of eddy's operators: event time from the
 * events' date_time with bounded out-of-orderness (--max-delay-ms), keyed
 * windows (operators/window.c), keyed process functions for the joins
 * (operators/process.c; q3 and q8 read persons and auctions as two inputs,
 * eddy_process2), and "global per-window" steps keyed by the
 * window's end. Results go to --output as byte-sorted lines written at end
 * of input, or to stdout as they come. Every query but q4 is append-only:
 * its rows go to exactly-once part files merged into the output at the end
 * (eddy_job_rows_merged_add); q4's updating averages, and every query with
 * --output-table, are counted per distinct line in keyed state first, so a
 * restore neither loses nor repeats a row.
 *
 * Projections put the key first and tab-separate the rest, so the key
 * selector "tab_prefix" works for every keyed step ("nexmark_key" where a
 * row may be its key alone).
 *
 * Late events (--late-output, q4 q5 q7 q8 q11): windows run with late =
 * "emit" and q4's timer step and q8's window join call eddy_process_late, so a late row goes on
 * as EDDY_LATE past every later step (api/operator.h) to the query's last
 * step. The late file must hold the event's input line, which a row does
 * not determine (q5 keeps only the auction), so with --late-output the
 * projection keeps the line after each row, behind a '\n' (a line holds
 * none): key selectors and window functions read a row only up to it
 * (row_key, row_len). A second reader of the last step (eddy_late_records)
 * takes the late rows, "nexmark_origin" cuts them to their line, and the
 * lines are counted per distinct line in keyed state and written byte-sorted
 * at end of input, like the result rows: exactly once through restores. */
#include "jobs/nexmark.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/process.h"
#include "api/window.h"
#include "common/flags.h"
#include "common/fmt.h"
#include "connectors/nexmark.h"
#include "jobs/line_source.h"
#include "operators/operators.h"

#define WINDOW_MS 10000
#define SLIDE_MS 2000
#define SESSION_GAP_MS 10000
#define ROW_MAX 1024

static const char *const queries[] = {"q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q11", "q12"};

/* ---- projection ------------------------------------------------------- */

typedef struct project_op {
    char query[8];
    bool origin;           /* config origin: keep the event line after each row */
    const char *line;      /* the event line of the current call */
    uint32_t line_len;
} project_op_t;

static void *project_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    project_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(op->query, sizeof op->query, "%s",
             eddy_config_str(ctx->config, "query", "q0"));
    op->origin = eddy_config_bool(ctx->config, "origin", false);
    return op;
}

static void emit_row(eddy_collector_t *out, const char *row, int len, int64_t value, int64_t ts)
{
    if (len <= 0 || len >= ROW_MAX)
        return;
    eddy_record_t rec = {row, (uint32_t)len, EDDY_INSERT, value, ts};
    eddy_emit(out, &rec);
}

/* A projected row, with "\n" and the event line after it when the
 * projection keeps origins (row has room for ROW_MAX + 1 + ROW_MAX). */
static void project_emit(const project_op_t *op, eddy_collector_t *out, char *row, int len,
                         int64_t value, int64_t ts)
{
    if (len <= 0 || len >= ROW_MAX)
        return;
    if (op->origin) {
        row[len++] = '\n';
        memcpy(row + len, op->line, op->line_len);
        len += (int)op->line_len;
    }
    eddy_record_t rec = {row, (uint32_t)len, EDDY_INSERT, value, ts};
    eddy_emit(out, &rec);
}

/* A row of n integers separated by tabs (the projections of every record,
 * where snprintf was the largest cost); returns its length. */
static int int_row(char *row, const int64_t *v, int n)
{
    char *p = row;
    for (int i = 0; i < n; i++) {
        if (i)
            *p++ = '\t';
        p = eddy_fmt_i64(p, v[i]);
    }
    return (int)(p - row);
}

static bool q3_state(eddy_nexmark_str_t s)
{
    return s.len == 2 && (!memcmp(s.ptr, "OR", 2) || !memcmp(s.ptr, "ID", 2) || !memcmp(s.ptr, "CA", 2));
}

static int project_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                           eddy_err_t *err)
{
    project_op_t *op = self;
    eddy_nexmark_event_t ev;
    uint32_t len = rec->len;
    if (len && rec->data[len - 1] == '\r')
        len--;
    if (eddy_nexmark_parse(rec->data, len, &ev, err) < 0)
        return eddy_err_wrap(err, "nexmark event '%.*s'", (int)(len > 80 ? 80 : len), rec->data);
    if (op->origin && len >= ROW_MAX)
        return eddy_err_set(err, "nexmark event of %u bytes is too long to keep for "
                            "--late-output (at most %d)", len, ROW_MAX - 1);
    op->line = rec->data;
    op->line_len = len;
    char row[2 * ROW_MAX + 1];
    int64_t ts = ev.date_time;
    const char *q = op->query;
    const eddy_nexmark_bid_t *b = &ev.u.bid;
    const eddy_nexmark_person_t *p = &ev.u.person;
    const eddy_nexmark_auction_t *a = &ev.u.auction;
    bool bid = ev.type == EDDY_NEXMARK_BID;
    if (!strcmp(q, "q0") || !strcmp(q, "q1") || !strcmp(q, "q7")) {
        if (!bid)
            return 0;
        int64_t price = !strcmp(q, "q1") ? eddy_nexmark_q1_price(b->price) : b->price;
        project_emit(op, out, row,
                     int_row(row, (int64_t[]){b->auction, b->bidder, price, ev.date_time}, 4),
                     price, ts);
    } else if (!strcmp(q, "q2")) {
        if (bid && b->auction % 123 == 0)
            project_emit(op, out, row,
                         int_row(row, (int64_t[]){b->auction, b->price}, 2), 1,
                         ts);
    } else if (!strcmp(q, "q3")) {
        /* Rows of the join's two inputs, tagged with their side for
         * nexmark_side, which splits them (add_join). */
        if (ev.type == EDDY_NEXMARK_PERSON && q3_state(p->state))
            project_emit(op, out, row,
                         snprintf(row, ROW_MAX, "P\t%" PRId64 "\t%.*s\t%.*s\t%.*s", p->id,
                                  (int)p->name.len, p->name.ptr, (int)p->city.len, p->city.ptr,
                                  (int)p->state.len, p->state.ptr),
                         1, ts);
        else if (ev.type == EDDY_NEXMARK_AUCTION && a->category == 10)
            project_emit(op, out, row,
                         snprintf(row, ROW_MAX, "A\t%" PRId64 "\t%" PRId64, a->seller, a->id), 1,
                         ts);
    } else if (!strcmp(q, "q4")) {
        if (ev.type == EDDY_NEXMARK_AUCTION)
            project_emit(op, out, row,
                         snprintf(row, ROW_MAX, "%" PRId64 "\tA\t%" PRId64 "\t%" PRId64 "\t%" PRId64,
                                  a->id, ev.date_time, a->expires, a->category),
                         1, ts);
        else if (bid)
            project_emit(op, out, row,
                         snprintf(row, ROW_MAX, "%" PRId64 "\tB\t%" PRId64, b->auction, b->price),
                         b->price, ts);
    } else if (!strcmp(q, "q5")) {
        if (bid)
            project_emit(op, out, row, int_row(row, &b->auction, 1), 1, ts);
    } else if (!strcmp(q, "q8")) {
        if (ev.type == EDDY_NEXMARK_PERSON)
            project_emit(op, out, row,
                         snprintf(row, ROW_MAX, "P\t%" PRId64 "\t%.*s", p->id, (int)p->name.len,
                                  p->name.ptr),
                         1, ts);
        else if (ev.type == EDDY_NEXMARK_AUCTION)
            project_emit(op, out, row, snprintf(row, ROW_MAX, "A\t%" PRId64, a->seller), 1, ts);
    } else if (!strcmp(q, "q11") || !strcmp(q, "q12")) {
        if (bid)
            project_emit(op, out, row, int_row(row, &b->bidder, 1), 1, ts);
    }
    return 0;
}

static void project_close(void *self)
{
    free(self);
}

static const eddy_operator_ops_t project_ops = {
    .kind = "nexmark_project", .open = project_open, .process = project_process,
    .close = project_close};
static const eddy_operator_kind_t project_kind = {.name = "nexmark_project", .ops = &project_ops};

/* The event time of a line read from a file: its second field. */
static int64_t line_date_time(const eddy_record_t *rec)
{
    const char *p = memchr(rec->data, ',', rec->len);
    int64_t v = 0;
    if (!p)
        return 0;
    for (p++; p < rec->data + rec->len && *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (*p - '0');
    return v;
}

static const eddy_timestamp_kind_t date_time_kind = {.name = "nexmark_date_time",
                                                     .timestamp = line_date_time};

/* The key of a projected row: up to its first tab, or to the '\n' before a
 * kept event line (a row without either is all key, like whole_record). */
static uint32_t row_key(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    for (uint32_t i = 0; i < rec->len; i++)
        if (rec->data[i] == '\t' || rec->data[i] == '\n')
            return i;
    return rec->len;
}

static const eddy_key_kind_t row_key_kind = {.name = "nexmark_key", .key = row_key};

/* One side of a join's tagged rows ("P<TAB>row" or "A<TAB>row", config
 * side = "P" | "A"), without the tag. */
static void side_rows(const eddy_record_t *in, eddy_collector_t *out, const eddy_config_t *cfg)
{
    const char *side = eddy_config_str(cfg, "side", "");
    if (in->len < 2 || in->data[1] != '\t' || in->data[0] != side[0])
        return;
    eddy_record_t r = *in;
    r.data += 2;
    r.len -= 2;
    eddy_emit(out, &r);
}

/* The late output's line: the event line a late row kept after its '\n'. */
static void origin_line(const eddy_record_t *in, eddy_collector_t *out, const eddy_config_t *cfg)
{
    (void)cfg;
    const char *nl = memchr(in->data, '\n', in->len);
    if (!nl)
        return; /* not from a projection that keeps lines: nothing to write */
    eddy_record_t r = *in;
    r.data = nl + 1;
    r.len = (uint32_t)(in->data + in->len - r.data);
    r.value = 1;
    eddy_emit(out, &r);
}

/* ---- window functions ------------------------------------------------- */

static void count_add(void *acc, const eddy_record_t *rec)
{
    (void)rec;
    *(int64_t *)acc += 1;
}
static void count_merge(void *acc, const void *other)
{
    *(int64_t *)acc += *(const int64_t *)other;
}
static int64_t count_result(const void *acc)
{
    return *(const int64_t *)acc;
}
static const eddy_aggregate_udf_t count_udf = {.acc_size = sizeof(int64_t), .add = count_add,
                                               .merge = count_merge, .result = count_result};

/* q5 step 1: bids per auction per sliding window, as "end<TAB>auction". */
static void q5_counts(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                      eddy_collector_t *out)
{
    eddy_record_t r = eddy_window_element(elements, 0);
    char row[ROW_MAX];
    emit_row(out, row, snprintf(row, sizeof row, "%" PRId64 "\t%.*s", ctx->window.end,
                                (int)ctx->key_len, ctx->key),
             r.value, ctx->window.end - 1);
}

/* The largest value among the elements. */
static int64_t max_value(const eddy_window_elements_t *elements)
{
    int64_t max = INT64_MIN;
    for (size_t i = 0; i < elements->count; i++) {
        eddy_record_t r = eddy_window_element(elements, i);
        if (r.value > max)
            max = r.value;
    }
    return max;
}

/* The length of a row without the event line the projection may keep
 * after it (--late-output): everything before the first '\n'. */
static uint32_t row_len(const eddy_record_t *r)
{
    const char *nl = memchr(r->data, '\n', r->len);
    return nl ? (uint32_t)(nl - r->data) : r->len;
}

/* What follows the first tab of a row (without a kept event line). */
static const char *after_tab(const eddy_record_t *r, int *len)
{
    uint32_t n = row_len(r);
    const char *tab = memchr(r->data, '\t', n);
    const char *rest = tab ? tab + 1 : r->data + n;
    *len = (int)(r->data + n - rest);
    return rest;
}

/* q5 step 2, keyed by the window's end: the auctions with the most bids. */
static void q5_hottest(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                       eddy_collector_t *out)
{
    (void)ctx;
    int64_t max = max_value(elements);
    for (size_t i = 0; i < elements->count; i++) {
        eddy_record_t r = eddy_window_element(elements, i);
        if (r.value != max)
            continue;
        int rest_len;
        const char *rest = after_tab(&r, &rest_len);
        int64_t end = r.timestamp + 1;
        char row[ROW_MAX];
        emit_row(out, row,
                 snprintf(row, sizeof row, "%" PRId64 "\t%" PRId64 "\t%.*s\t%" PRId64,
                          end - WINDOW_MS, end, rest_len, rest, r.value),
                 r.value, r.timestamp);
    }
}

/* q7 step 1, per auction and window: its highest bids, as "end<TAB>row". */
static void q7_local(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                     eddy_collector_t *out)
{
    int64_t max = max_value(elements);
    for (size_t i = 0; i < elements->count; i++) {
        eddy_record_t r = eddy_window_element(elements, i);
        if (r.value != max)
            continue;
        char row[ROW_MAX];
        emit_row(out, row,
                 snprintf(row, sizeof row, "%" PRId64 "\t%.*s", ctx->window.end, (int)row_len(&r),
                          r.data),
                 r.value, ctx->window.end - 1);
    }
}

/* q7 step 2, keyed by the window's end: the bids with the window's highest price. */
static void q7_global(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                      eddy_collector_t *out)
{
    (void)ctx;
    int64_t max = max_value(elements);
    for (size_t i = 0; i < elements->count; i++) {
        eddy_record_t r = eddy_window_element(elements, i);
        if (r.value != max)
            continue;
        int rest_len;
        const char *rest = after_tab(&r, &rest_len);
        int64_t end = r.timestamp + 1;
        char row[ROW_MAX];
        emit_row(out, row,
                 snprintf(row, sizeof row, "%" PRId64 "\t%" PRId64 "\t%.*s", end - WINDOW_MS, end,
                          rest_len, rest),
                 r.value, r.timestamp);
    }
}

/* q11 and q12: a bidder's count per (session) window. */
static void bidder_count(const eddy_window_context_t *ctx, const eddy_window_elements_t *elements,
                         eddy_collector_t *out)
{
    eddy_record_t r = eddy_window_element(elements, 0);
    char row[ROW_MAX];
    emit_row(out, row,
             snprintf(row, sizeof row, "%.*s\t%" PRId64 "\t%" PRId64 "\t%" PRId64,
                      (int)ctx->key_len, ctx->key, r.value, ctx->window.start, ctx->window.end),
             r.value, ctx->window.end - 1);
}

/* q5's hottest auctions and q7's highest bids keep, per window, only the
 * rows with the largest value so far (api/window.h max_by), not every row:
 * the functions above then see just the rows they emit. */
typedef struct window_fn {
    const char *name;
    eddy_window_udf_t udf;
} window_fn_t;

static const window_fn_t window_fns[] = {
    {"nexmark_q5_counts", {.aggregate = count_udf, .process = q5_counts}},
    {"nexmark_q5_hottest", {.process = q5_hottest, .max_by = {.rank = eddy_window_rank_value}}},
    {"nexmark_q7_local", {.process = q7_local, .max_by = {.rank = eddy_window_rank_value}}},
    {"nexmark_q7_global", {.process = q7_global, .max_by = {.rank = eddy_window_rank_value}}},
    {"nexmark_bidder_count", {.aggregate = count_udf, .process = bidder_count}},
};

/* ---- the job ----------------------------------------------------------- */

typedef struct nexmark_flags {
    const char *query, *input, *output, *late_output, *rate;
    uint64_t events, seed;
    int64_t max_delay_ms, disorder_ms, idle_ms;
    uint32_t parallelism, max_parallelism;
    bool no_combine, output_table;
} nexmark_flags_t;

/* late: the window sends its late records on (for --late-output).
 * Windows pre-aggregate before the shuffle where that is exact (q5's
 * counts, api/window.h "combine") unless --no-local-aggregation. */
static eddy_config_t *window_config(bool combine, const char *assigner, int64_t size, int64_t slide,
                                    const char *time, bool late)
{
    eddy_config_t *c = eddy_config_new();
    if (!c)
        return NULL;
    eddy_config_set_str(c, "assigner", assigner);
    if (!combine)
        eddy_config_set_bool(c, "combine", false);
    if (late)
        eddy_config_set_str(c, "late", "emit");
    if (!strcmp(assigner, "session"))
        eddy_config_set_int(c, "gap_ms", size);
    else
        eddy_config_set_int(c, "size_ms", size);
    if (slide)
        eddy_config_set_int(c, "slide_ms", slide);
    eddy_config_set_str(c, "time", time);
    return c;
}

static eddy_stream_t add_source(eddy_job_builder_t *b, const nexmark_flags_t *f)
{
    eddy_stream_t src;
    eddy_event_time_spec_t et = {.max_delay_ms = f->max_delay_ms, .idle_timeout_ms = f->idle_ms};
    if (f->input) {
        eddy_line_source_flags_t lf = {.input = f->input, .rate = f->rate,
                                       .parallelism = f->parallelism};
        src = eddy_line_source_add(b, &lf);
        et.timestamps = "nexmark_date_time";
    } else {
        eddy_config_t *c = eddy_config_new();
        if (c) {
            eddy_config_set_int(c, "events", (int64_t)f->events);
            eddy_config_set_int(c, "seed", (int64_t)f->seed);
            eddy_config_set_int(c, "disorder_ms", f->disorder_ms);
            if (f->rate) {
                eddy_rate_schedule_t check;
                eddy_err_t err = {{0}};
                if (eddy_job_rate_parse(&check, f->rate, &err) < 0)
                    eddy_builder_fail(b, "--rate: %s", err.msg);
                eddy_config_set_str(c, "rate", f->rate);
            }
        }
        src = eddy_source(b, "source", "nexmark", c);
        et.timestamps = EDDY_TIMESTAMPS_FROM_SOURCE;
    }
    return eddy_event_time(src, &et);
}

/* The queries in event time whose steps may judge a record late: their
 * projection keeps each event's line for --late-output. */
static bool may_be_late(const char *q)
{
    return !strcmp(q, "q4") || !strcmp(q, "q5") || !strcmp(q, "q7") || !strcmp(q, "q8") ||
           !strcmp(q, "q11");
}

/* late: windows and q4's timer step send late records on (kind EDDY_LATE,
 * each row with its event line after a '\n'), else they drop them. */
static eddy_config_t *project_config(const char *q, bool late)
{
    eddy_config_t *pc = eddy_config_new();
    if (pc) {
        eddy_config_set_str(pc, "query", q);
        eddy_config_set_bool(pc, "origin", late);
    }
    return pc;
}

static eddy_config_t *side_config(const char *side)
{
    eddy_config_t *c = eddy_config_new();
    if (c)
        eddy_config_set_str(c, "side", side);
    return c;
}

/* q3 and q8 join persons and auctions: the projection (chained with the
 * source, so bids never leave it) tags each row with its side; two steps
 * split them into persons and auctions, which are connected into one keyed
 * two-input step (eddy_process2), persons keyed by id, auctions by seller. */
static eddy_stream_t add_join(eddy_stream_t rows, const char *uid, const char *kind,
                              eddy_config_t *config)
{
    eddy_stream_t persons = eddy_flat_map(rows, "persons", "nexmark_side", side_config("P"));
    eddy_stream_t auctions = eddy_flat_map(rows, "auctions", "nexmark_side", side_config("A"));
    return eddy_process2(eddy_key_by(persons, "nexmark_key"), eddy_key_by(auctions, "nexmark_key"),
                         uid, kind, config);
}

static eddy_stream_t add_query(eddy_stream_t events, const char *q, bool late, bool combine,
                               bool *final_table)
{
    late = late && may_be_late(q);
    *final_table = false;
    eddy_stream_t rows = eddy_flat_map(events, "project", "nexmark_project",
                                       project_config(q, late));
    if (!strcmp(q, "q3"))
        return add_join(rows, "join", "nexmark_q3_join", NULL);
    if (!strcmp(q, "q8")) {
        eddy_config_t *jc = eddy_config_new();
        if (jc && late)
            eddy_config_set_str(jc, "late", "emit");
        return add_join(rows, "new_sellers", "nexmark_q8_join", jc);
    }
    if (!strcmp(q, "q0") || !strcmp(q, "q1") || !strcmp(q, "q2"))
        return rows;
    if (!strcmp(q, "q4")) {
        eddy_config_t *wc = eddy_config_new();
        if (wc && late)
            eddy_config_set_str(wc, "late", "emit");
        eddy_stream_t winners =
            eddy_process(eddy_key_by(rows, "tab_prefix"), "winning_bids", "nexmark_q4_winning", wc);
        eddy_config_t *avg = eddy_config_new();
        if (avg)
            eddy_config_set_str(avg, "emit", "final");
        *final_table = true;
        return eddy_aggregate(eddy_key_by(winners, "whole_record"), "average", "nexmark_average", avg);
    }
    if (!strcmp(q, "q5")) {
        eddy_stream_t counts = eddy_window(eddy_key_by(rows, "nexmark_key"), "bids_per_auction",
                                           "nexmark_q5_counts",
                                           window_config(combine, "sliding", WINDOW_MS, SLIDE_MS, "event", late));
        return eddy_window(eddy_key_by(counts, "tab_prefix"), "hottest", "nexmark_q5_hottest",
                           window_config(combine, "tumbling", SLIDE_MS, 0, "event", late));
    }
    if (!strcmp(q, "q7")) {
        eddy_stream_t local = eddy_window(eddy_key_by(rows, "tab_prefix"), "max_per_auction",
                                          "nexmark_q7_local",
                                          window_config(combine, "tumbling", WINDOW_MS, 0, "event", late));
        return eddy_window(eddy_key_by(local, "tab_prefix"), "highest_bids", "nexmark_q7_global",
                           window_config(combine, "tumbling", WINDOW_MS, 0, "event", late));
    }
    if (!strcmp(q, "q11"))
        return eddy_window(eddy_key_by(rows, "nexmark_key"), "sessions", "nexmark_bidder_count",
                           window_config(combine, "session", SESSION_GAP_MS, 0, "event", late));
    /* q12: processing time, nothing is late */
    return eddy_window(eddy_key_by(rows, "whole_record"), "bids_per_bidder", "nexmark_bidder_count",
                       window_config(combine, "tumbling", WINDOW_MS, 0, "processing", false));
}

static int build(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    nexmark_flags_t f = {.events = 0, .seed = 42, .parallelism = 2,
                         .max_parallelism = EDDY_DEFAULT_MAX_PARALLELISM};
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("query", &f.query, "Q", "q0 q1 q2 q3 q4 q5 q7 q8 q11 q12"),
        EDDY_FLAG_U64("events", &f.events, 1, UINT64_MAX, "N", "generate N events"),
        EDDY_FLAG_STR("input", &f.input, "FILE", "read events (CSV lines) from FILE"),
        EDDY_FLAG_U64("seed", &f.seed, 0, INT64_MAX, "S", "generator seed (42)"),
        EDDY_FLAG_I64("disorder-ms", &f.disorder_ms, 0, EDDY_NEXMARK_MAX_DISORDER_MS, "D",
                      "generated events out of order by up to D ms (0)"),
        EDDY_FLAG_STR("rate", &f.rate, "R|T:R,..", "cap the source at R events/s"),
        EDDY_FLAG_I64("max-delay-ms", &f.max_delay_ms, 0, EDDY_NEXMARK_MAX_DISORDER_MS, "D",
                      "watermark delay: bounded out-of-orderness (0)"),
        EDDY_FLAG_I64("idle-timeout-ms", &f.idle_ms, 0, EDDY_FLAG_MS_MAX, "MS",
                      "a source without events for MS is idle (0: never)"),
        EDDY_FLAG_STR("output", &f.output, "FILE", "result rows, byte-sorted, at end of input"),
        EDDY_FLAG_STR("late-output", &f.late_output, "FILE",
                      "late events' lines, byte-sorted, at end of input"),
        EDDY_FLAG_SWITCH("output-table", &f.output_table,
                         "--output through a table of rows in keyed state, not part files"),
        EDDY_FLAG_U32("parallelism", &f.parallelism, 1, EDDY_MAX_KEY_GROUPS, "P",
                      "parallelism of every step (2)"),
        EDDY_FLAG_U32("max-parallelism", &f.max_parallelism, 1, EDDY_MAX_KEY_GROUPS, "K",
                      "key groups (128)"),
        EDDY_FLAG_SWITCH("no-local-aggregation", &f.no_combine,
                         "shuffle every event to the windows and the result table"),
        EDDY_FLAG_END,
    };
    int rc = eddy_flags_parse(flags, argc, argv, NULL, NULL, err);
    if (rc == 1)
        return eddy_err_set(err, "nexmark: --help is handled by the caller");
    if (rc < 0)
        return eddy_err_wrap(err, "nexmark");
    if (!f.query)
        return eddy_err_set(err, "nexmark needs --query (q0 q1 q2 q3 q4 q5 q7 q8 q11 q12)");
    bool known = false;
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++)
        known |= !strcmp(f.query, queries[i]);
    if (!known)
        return eddy_err_set(err, "nexmark: unknown query '%s' (q0 q1 q2 q3 q4 q5 q7 q8 q11 q12)",
                            f.query);
    if ((f.input != NULL) == (f.events != 0))
        return eddy_err_set(err, "nexmark needs exactly one of --events N and --input FILE");
    if (f.input && f.disorder_ms)
        return eddy_err_set(err, "--disorder-ms applies to generated events (--events), not --input");
    if (f.late_output && !may_be_late(f.query))
        return eddy_err_set(err, "--late-output: nothing is late in %s (only q4 q5 q7 q8 q11 "
                            "judge events late)", f.query);
    if (f.parallelism > f.max_parallelism)
        return eddy_err_set(err, "--parallelism: %u is out of range 1..%u (--max-parallelism)",
                            f.parallelism, f.max_parallelism);
    eddy_builder_set_max_parallelism(b, f.max_parallelism);
    eddy_builder_set_default_parallelism(b, f.parallelism);
    bool final_table;
    eddy_stream_t rows = add_query(add_source(b, &f), f.query, f.late_output != NULL,
                                   !f.no_combine, &final_table);
    if (f.late_output) {
        /* Late records pass every later step unseen (api/operator.h) and
         * leave the last one with its rows; a second reader of that step
         * takes them, and each distinct line is counted in keyed state, as
         * the rows below, so a restore neither loses nor repeats one. */
        eddy_stream_t lines = eddy_flat_map(eddy_late_records(rows, "late"), "late_lines",
                                            "nexmark_origin", NULL);
        eddy_job_rows_table_add(lines, f.late_output, !f.no_combine, "collect_late", "late_sink");
    }
    if (f.output && !final_table && !f.output_table) {
        /* Every query but q4 is append-only: its rows are never retracted
         * or updated, so part files merged at the end give the same file
         * as the table of rows, without keyed state per row. q0-q2's rows
         * leave the source's stage, the others' a keyed stage. */
        bool unkeyed = !strcmp(f.query, "q0") || !strcmp(f.query, "q1") || !strcmp(f.query, "q2");
        eddy_job_rows_merged_add(rows, f.output, unkeyed, "sink");
    } else if (f.output && !final_table) {
        eddy_job_rows_table_add(rows, f.output, !f.no_combine, "collect", "sink");
    } else if (f.output) {
        eddy_config_t *out = eddy_config_new();
        if (out && eddy_config_set_str(out, "path", f.output) < 0)
            eddy_builder_fail(b, "--output path is too long");
        eddy_sink(eddy_global(rows), "sink", "table_file", out);
    } else {
        eddy_sink(eddy_global(rows), "sink", final_table ? "changelog" : "print", NULL);
    }
    return eddy_builder_error(b) ? -1 : 0;
}

static const eddy_job_kind_t nexmark_job = {
    .name = "nexmark",
    .summary = "the Nexmark benchmark queries over generated or recorded auction events",
    .usage = "  --query Q                      q0 q1 q2 q3 q4 q5 q7 q8 q11 q12 (DESIGN.md)\n"
             "  --events N | --input FILE      generate N events, or read them (CSV lines)\n"
             "  --seed S --disorder-ms D       generator seed (42); out-of-order by up to D ms\n"
             "  --rate R                       cap the source at R events/s\n"
             "  --max-delay-ms D               watermark delay (bounded out-of-orderness, 0)\n"
             "  --idle-timeout-ms MS           a source instance without events is idle after MS\n"
             "  --output FILE                  result rows, tab-separated, byte-sorted, written at\n"
             "                                 end of input; without it rows go to stdout as they come\n"
             "                                 (exactly once: part files per checkpoint, merged at the\n"
             "                                 end; q4's updating result: a table in keyed state)\n"
             "  --output-table                 every query's --output through the table in keyed\n"
             "                                 state (the updating results' path; slower)\n"
             "  --late-output FILE             events too late for their window (q5 q7 q8 q11) or\n"
             "                                 for q4's auction end, as their input lines, byte-\n"
             "                                 sorted, written at end of input (without it they are\n"
             "                                 dropped; both ways counted in eddy_late_records_total)\n"
             "  --parallelism P                instances of every step (default 2)\n"
             "  --no-local-aggregation         no pre-aggregation before the shuffle (on by\n"
             "                                 default where exact: q5's counts, the result table)\n"
             "  --max-parallelism K            key groups (default 128)\n",
    .build = build,
};

/* q4's average of winning prices per category (integer division). */
typedef struct avg_acc {
    int64_t sum, count;
} avg_acc_t;
static void avg_add(void *acc, const eddy_record_t *rec)
{
    avg_acc_t *a = acc;
    a->sum += rec->value;
    a->count++;
}
static void avg_merge(void *acc, const void *other)
{
    avg_acc_t *a = acc;
    const avg_acc_t *o = other;
    a->sum += o->sum;
    a->count += o->count;
}
static int64_t avg_result(const void *acc)
{
    const avg_acc_t *a = acc;
    return a->count ? a->sum / a->count : 0;
}
static const eddy_aggregate_udf_t avg_udf = {.acc_size = sizeof(avg_acc_t), .add = avg_add,
                                             .merge = avg_merge, .result = avg_result};

int eddy_nexmark_register(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_register_operator(r, &project_kind, err) < 0 ||
        eddy_register_timestamp(r, &date_time_kind, err) < 0 ||
        eddy_register_key(r, &row_key_kind, err) < 0 ||
        eddy_register_flat_map(r, "nexmark_origin", origin_line, err) < 0 ||
        eddy_register_flat_map(r, "nexmark_side", side_rows, err) < 0 ||
        eddy_register_aggregate(r, "nexmark_count", &count_udf, err) < 0 ||
        eddy_register_aggregate(r, "nexmark_average", &avg_udf, err) < 0)
        return -1;
    for (size_t i = 0; i < sizeof window_fns / sizeof window_fns[0]; i++)
        if (eddy_register_window(r, window_fns[i].name, &window_fns[i].udf, err) < 0)
            return -1;
    if (eddy_nexmark_register_joins(r, err) < 0)
        return -1;
    return eddy_register_job(r, &nexmark_job, err);
}
