/* test_pipeline_window.c - a spec's stateful steps (plan/pipeline_window.h):
 * windows, aggregates and max_by load with their columns and event time;
 * every misuse is an error naming file, line and field; aggregate
 * functions and durations parse; a cumulate window keeps its step. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "plan/pipeline_window.h"

#define SRC "source: {format: csv, columns: [event, ts, auction, price]}\n"

static eddy_pipeline_spec_t *load(const char *text)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = eddy_pipeline_spec_parse("w.yaml", text, strlen(text), &err);
    cr_assert(s, "%s", err.msg);
    return s;
}

static void bad(const char *text, const char *want)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = eddy_pipeline_spec_parse("w.yaml", text, strlen(text), &err);
    cr_expect_null(s);
    eddy_pipeline_spec_destroy(&s);
    cr_expect(strstr(err.msg, want), "got '%s', want '%s'", err.msg, want);
}

Test(pipeline_window, windowed_aggregate_columns_and_event_time)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - key_by: auction\n"
                                   "  - window: {type: sliding, size: 10s, slide: 2000, timestamp: ts,"
                                   " watermark_delay: 500ms}\n"
                                   "  - aggregate:\n      bids: count()\n      top: max(price)\n"
                                   "      p: quantile(price, 0.9)\n");
    cr_assert_eq(s->n_steps, 3);
    cr_assert_eq(s->time_column, 1);
    cr_assert_eq(s->watermark_delay_ms, 500);
    cr_assert_eq(s->steps[1].window.size_ms, 10000);
    cr_assert_eq(s->steps[1].window.slide_ms, 2000);
    cr_assert(s->steps[2].windowed);
    uint32_t n;
    char **c = eddy_pipeline_spec_columns_at(s, NULL, 3, &n);
    cr_assert_eq(n, 6);
    const char *want[] = {"auction", "window_start", "window_end", "bids", "top", "p"};
    for (uint32_t i = 0; i < n; i++)
        cr_assert_str_eq(c[i], want[i]);
    eddy_pipeline_spec_destroy(&s);

    /* A key that is an expression is the column "key"; no window: no bounds. */
    s = load(SRC "steps:\n  - key_by: auction % 10\n  - aggregate: {n: count()}\n");
    c = eddy_pipeline_spec_columns_at(s, NULL, 2, &n);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(c[0], "key");
    cr_assert(!s->steps[1].windowed);
    eddy_pipeline_spec_destroy(&s);
}

Test(pipeline_window, a_cumulate_window_keeps_its_step)
{
    eddy_pipeline_spec_t *s = load(SRC "steps:\n  - key_by: auction\n"
                                   "  - window: {type: cumulate, size: 10s, step: 2s, timestamp: ts}\n"
                                   "  - aggregate: {bids: count()}\n");
    cr_assert_str_eq(s->steps[1].window.type, "cumulate");
    cr_assert_eq(s->steps[1].window.size_ms, 10000);
    cr_assert_eq(s->steps[1].window.slide_ms, 2000);
    char what[200];
    eddy_pipeline_stateful_describe(&s->steps[1], what, sizeof what);
    cr_expect_str_eq(what, "window cumulate size 10000 ms step 2000 ms (event time)");
    eddy_pipeline_spec_destroy(&s);
}

Test(pipeline_window, misuse_names_file_line_and_field)
{
    bad(SRC "steps:\n  - window: {type: tumbling, size: 1s, timestamp: ts}\n  - aggregate: {n: count()}\n",
        "w.yaml:3: steps[0].window: a window groups keyed rows: it needs a key_by before it");
    bad(SRC "steps:\n  - aggregate: {n: count()}\n",
        "w.yaml:3: steps[0].aggregate: aggregate works per key: it needs a key_by before it");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: tumbling, size: 1s, timestamp: ts}\n",
        "w.yaml:4: steps[1].window: a window must be followed by aggregate or max_by");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: tumbling, size: 1s}\n  - max_by: price\n",
        "w.yaml:4: steps[1].window: an event-time window needs timestamp: COLUMN");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: tumbling, size: ten, timestamp: ts}\n"
            "  - max_by: price\n",
        "w.yaml:4: steps[1].window.size: 'ten' is not a duration");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: hopping, size: 1s}\n  - max_by: price\n",
        "w.yaml:4: steps[1].window.type: expected tumbling, sliding, session or cumulate");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: cumulate, size: 10s, timestamp: ts}\n"
            "  - max_by: price\n",
        "w.yaml:4: steps[1].window: a cumulate window needs step (> 0, dividing size)");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: cumulate, size: 10s, step: 3s, timestamp: ts}\n"
            "  - max_by: price\n",
        "a cumulate window needs step (> 0, dividing size)");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: tumbling, size: 10s, step: 2s, timestamp: ts}\n"
            "  - max_by: price\n",
        "step is for cumulate windows");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: session, size: 1s, timestamp: ts}\n"
            "  - max_by: price\n",
        "a session window takes gap (> 0), not size or slide");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: tumbling, size: 1s, timestamp: prise}\n"
            "  - max_by: price\n",
        "w.yaml:4: steps[1].window.timestamp: 'prise' is not a source column");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: tumbling, size: 1s, timestamp: ts, siez: 1}\n"
            "  - max_by: price\n",
        "w.yaml:4: steps[1].window: unknown key 'siez'");
    bad(SRC "steps:\n  - key_by: auction\n  - aggregate: {n: cnt(price)}\n",
        "w.yaml:4: steps[1].aggregate.n: unknown aggregate 'cnt'");
    bad(SRC "steps:\n  - key_by: auction\n  - aggregate: {n: sum(prise)}\n",
        "w.yaml:4: steps[1].aggregate.n: column 1: unknown field 'prise'");
    bad(SRC "steps:\n  - key_by: auction\n  - aggregate: {auction: count()}\n",
        "w.yaml:4: steps[1].aggregate.auction: column 'auction' named twice");
    bad(SRC "steps:\n  - key_by: auction\n  - aggregate: {n: count()}\n  - max_by: n\n",
        "w.yaml:5: steps[2].max_by: max_by works per key: it needs a key_by before it");
    bad(SRC "steps:\n  - key_by: auction\n  - window: {type: tumbling, size: 1s, timestamp: ts}\n"
            "  - aggregate: {n: count()}\n  - key_by: window_end\n"
            "  - window: {type: tumbling, size: 1s, timestamp: ts}\n  - max_by: n\n",
        "w.yaml:7: steps[4].window.timestamp: a window after a window runs on the first one's result times");
    bad("source: {format: json, columns: [ts]}\nsteps:\n  - key_by: ts\n"
        "  - window: {type: tumbling, size: 1s, timestamp: ts}\n  - max_by: ts\n",
        "event time reads a column of a csv source");
}

Test(pipeline_window, aggregate_functions_parse)
{
    eddy_agg_t a;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_pipeline_agg_parse(" count( ) ", &a, &err), 0, "%s", err.msg);
    cr_assert_eq(a.fn, EDDY_AGG_COUNT);
    cr_assert_null(a.arg);
    cr_assert_eq(eddy_pipeline_agg_parse("quantile(coalesce(x, 1), 0.99)", &a, &err), 0, "%s", err.msg);
    cr_assert_eq(a.fn, EDDY_AGG_QUANTILE);
    cr_assert_str_eq(a.arg, "coalesce(x, 1)");
    cr_assert_float_eq(a.q, 0.99, 1e-12);
    eddy_pipeline_agg_clear(&a);
    cr_assert_eq(eddy_pipeline_agg_parse("max(concat(a, ','))", &a, &err), 0, "%s", err.msg);
    cr_assert_str_eq(a.arg, "concat(a, ',')");
    eddy_pipeline_agg_clear(&a);
    cr_assert_eq(eddy_pipeline_agg_parse("sum()", &a, &err), -1);
    cr_assert_eq(eddy_pipeline_agg_parse("quantile(x, 2)", &a, &err), -1);
    cr_assert_eq(eddy_pipeline_agg_parse("quantile(x)", &a, &err), -1);
    cr_assert_eq(eddy_pipeline_agg_parse("sum x", &a, &err), -1);
}

Test(pipeline_window, top_k_parses_and_refuses_bad_k)
{
    eddy_agg_t a;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_pipeline_agg_parse("top_k(concat(a, ','), 3)", &a, &err), 0, "%s", err.msg);
    cr_assert_eq(a.fn, EDDY_AGG_TOP_K);
    cr_assert_str_eq(a.arg, "concat(a, ',')");
    cr_assert_eq(a.k, 3);
    eddy_pipeline_agg_clear(&a);
    cr_assert_eq(eddy_pipeline_agg_parse("top_k( x ,16 )", &a, &err), 0, "%s", err.msg);
    cr_assert_eq(a.k, EDDY_PIPELINE_TOP_K_MAX);
    eddy_pipeline_agg_clear(&a);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"top_k(x)", "top_k takes 2 arguments, (EXPR, K)"},
        {"top_k(x, 3, 4)", "top_k takes 2 arguments"},
        {"top_k(, 3)", "top_k takes 2 arguments"},
        {"top_k(x, 0)", "K must be an integer constant in 1..16"},
        {"top_k(x, 17)", "in 1..16"},
        {"top_k(x, -2)", "in 1..16"},
        {"top_k(x, 2.5)", "in 1..16"},
        {"top_k(x, n)", "integer constant"},
        {"top_k(x, 1 + 2)", "integer constant"},
        {"top_k(x, 99999999999999999999)", "in 1..16"},
        {"quantile(x, y, 0.5)", "quantile takes 2 arguments"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(eddy_pipeline_agg_parse(bad[i].text, &a, &err), -1, "%s", bad[i].text);
        cr_assert(strstr(err.msg, bad[i].want), "%s: '%s' does not say '%s'", bad[i].text, err.msg,
                  bad[i].want);
    }
}

Test(pipeline_window, durations)
{
    int64_t ms;
    cr_assert(eddy_pipeline_duration("10s", &ms) == 0 && ms == 10000);
    cr_assert(eddy_pipeline_duration("500ms", &ms) == 0 && ms == 500);
    cr_assert(eddy_pipeline_duration("2m", &ms) == 0 && ms == 120000);
    cr_assert(eddy_pipeline_duration("1h", &ms) == 0 && ms == 3600000);
    cr_assert(eddy_pipeline_duration("250", &ms) == 0 && ms == 250);
    cr_assert_eq(eddy_pipeline_duration("-1s", &ms), -1);
    cr_assert_eq(eddy_pipeline_duration("1d", &ms), -1);
    cr_assert_eq(eddy_pipeline_duration("s", &ms), -1);
}

/* The store an aggregate step keeps (plan/pipeline_window.h), by its
 * aggregates and window. */
static int state_of(const char *window, const char *aggs)
{
    char text[8192];
    snprintf(text, sizeof text, SRC "steps:\n  - key_by: auction\n%s  - aggregate: {%s}\n", window,
             aggs);
    eddy_pipeline_spec_t *s = load(text);
    int st = s->steps[s->n_steps - 1].state;
    char line[600];
    eddy_pipeline_stateful_describe(&s->steps[s->n_steps - 1], line, sizeof line);
    cr_assert(strstr(line, eddy_pipeline_state_name((eddy_pipeline_state_t)st)), "%s", line);
    eddy_pipeline_spec_destroy(&s);
    return st;
}

Test(pipeline_window, aggregates_keep_fixed_state_or_rows)
{
    const char *tumbling = "  - window: {type: tumbling, size: 1s, timestamp: ts}\n";
    const char *session = "  - window: {type: session, gap: 1s, timestamp: ts}\n";
    cr_assert_eq(state_of(tumbling, "n: count(), d: count_distinct(price)"), EDDY_PIPELINE_STATE_FIXED);
    cr_assert_eq(state_of(session, "n: count(), d: count_distinct(price)"), EDDY_PIPELINE_STATE_FIXED);
    cr_assert_eq(state_of(tumbling, "n: count(), s: sum(price), a: avg(price)"),
                 EDDY_PIPELINE_STATE_ORDERED);
    cr_assert_eq(state_of(tumbling, "q: 'quantile(price, 0.5)', t: 'top_k(price, 3)'"),
                 EDDY_PIPELINE_STATE_ORDERED);
    cr_assert_eq(state_of("", "s: sum(price)"), EDDY_PIPELINE_STATE_ORDERED); /* whole input */
    /* Orderly folds do not merge: a session keeps its rows. */
    cr_assert_eq(state_of(session, "n: count(), s: sum(price)"), EDDY_PIPELINE_STATE_ROWS);
    /* Values of any length keep rows. */
    cr_assert_eq(state_of(tumbling, "n: count(), m: max(price)"), EDDY_PIPELINE_STATE_ROWS);
    cr_assert_eq(state_of(tumbling, "f: first(event)"), EDDY_PIPELINE_STATE_ROWS);
    /* Above EDDY_WINDOW_MAX_ACC: 61 count-min sketches of ~17 KiB. */
    char many[4096];
    size_t len = 0;
    for (int i = 0; i < 61; i++)
        len += (size_t)snprintf(many + len, sizeof many - len, "%st%d: 'top_k(price, 2)'", i ? ", " : "", i);
    cr_assert_eq(state_of(tumbling, many), EDDY_PIPELINE_STATE_ROWS);
}
