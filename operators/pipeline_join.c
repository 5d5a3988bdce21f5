/* pipeline_join.c - a pipeline's join as a keyed process function (see
 * pipeline_join.h). State per key: list "L" and "R" of each side's rows
 * (their columns, the key and time cut off), under namespaces of the side
 * and, when windowed, the window's start; an event-time timer at the
 * window's last millisecond clears both. A semi-join keeps one right row
 * per key (and window) as the mark that there is a match, and only the
 * left rows still waiting for one. A left join (windowed) emits, when the
 * window ends, each left row of a key whose right list is empty with the
 * right's columns null. The interval join (its own kind, with a
 * per-key value for its timer) is below. */
#include "operators/pipeline_join.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api/process.h"

typedef struct join_conf {
    bool semi;
    bool union_all;
    bool left_outer;
    int64_t window_ms;
    int64_t right_columns; /* a left join's null row has this many */
} join_conf_t;

static join_conf_t conf_of(eddy_process_context_t *ctx)
{
    const eddy_config_t *c = eddy_process_config(ctx);
    const char *type = eddy_config_str(c, "type", "inner");
    join_conf_t j = {!strcmp(type, "semi"), !strcmp(type, "union"), !strcmp(type, "left"),
                     eddy_config_int(c, "window_ms", 0), eddy_config_int(c, "right_columns", 0)};
    return j;
}

/* The row's columns after its key and n_times times: *cols; the times
 * (integers, epoch ms) into ts[0..n_times). */
static bool split_row(const eddy_record_t *rec, uint32_t n_times, const char **cols,
                      uint32_t *len, int64_t *ts)
{
    const char *p = memchr(rec->data, '\t', rec->len), *end = rec->data + rec->len;
    if (!p)
        return false;
    p++;
    for (uint32_t t = 0; t < n_times; t++) {
        bool neg = p < end && *p == '-';
        const char *d = p + neg;
        int64_t v = 0;
        for (; d < end && *d >= '0' && *d <= '9'; d++) {
            if (v > (INT64_MAX - 9) / 10)
                return false;
            v = v * 10 + (*d - '0');
        }
        if (d == p + neg || d >= end || *d != '\t')
            return false;
        ts[t] = neg ? -v : v;
        p = d + 1;
    }
    *cols = p;
    *len = (uint32_t)(end - p);
    return true;
}

/* Emits the left row's columns then the right's, at time ts. */
static int emit_pair_at(const eddy_record_t *l, const eddy_record_t *r, int64_t ts,
                        eddy_collector_t *out, eddy_err_t *err)
{
    size_t n = (size_t)l->len + 1 + r->len;
    char *row = malloc(n ? n : 1);
    if (!row)
        return eddy_err_set(err, "out of memory");
    memcpy(row, l->data, l->len);
    row[l->len] = '\t';
    memcpy(row + l->len + 1, r->data, r->len);
    eddy_record_t rec = {row, (uint32_t)n, EDDY_INSERT, 1, ts};
    eddy_emit(out, &rec);
    free(row);
    return 0;
}

static int emit_pair(const eddy_record_t *l, const eddy_record_t *r, eddy_collector_t *out,
                     eddy_err_t *err)
{
    return emit_pair_at(l, r, l->timestamp > r->timestamp ? l->timestamp : r->timestamp, out, err);
}

/* A list's namespace: the side and, windowed, the window's start. */
static uint32_t namespace_of(char ns[9], char side, const join_conf_t *j, int64_t start)
{
    ns[0] = side;
    if (!j->window_ms)
        return 1;
    memcpy(ns + 1, &start, sizeof start);
    return 9;
}

/* ---- interval joins ------------------------------------------------------
 * Per key: list "L" of the left rows waiting, each stored with timestamp =
 * its `to` and value = its `from`; list "R" of the right rows, timestamp =
 * their time. A row lives while the watermark is below its end (a left
 * row's `to`, a right row's time): later no row that is not late could
 * join it (a left row arrives before the watermark passes its `from`, which
 * is at most the right time it joins). The value holds the time of the one
 * event-time timer a key has pending, at the earliest end among its rows;
 * when it fires, the lists drop the rows that ended and the timer moves to
 * the next end. */

typedef struct interval_state {
    int64_t timer; /* the pending timer's time; 0 with none */
    uint8_t armed;
} interval_state_t;

/* Keeps one timer pending at the earliest end among the key's rows. */
static int interval_arm(eddy_process_context_t *ctx, int64_t end, eddy_err_t *err)
{
    interval_state_t *st = eddy_process_value(ctx, NULL);
    if (!st)
        return eddy_err_set(err, "out of memory");
    if (st->armed && st->timer <= end)
        return 0;
    if (st->armed)
        eddy_process_timer_delete(ctx, EDDY_EVENT_TIME, st->timer, "", 0);
    if (eddy_process_timer_register(ctx, EDDY_EVENT_TIME, end, "", 0) < 0)
        return eddy_err_set(err, "out of memory");
    st->timer = end;
    st->armed = 1;
    return 0;
}

static bool interval_covers(const eddy_record_t *left, int64_t t)
{
    return left->value <= t && t <= left->timestamp;
}

static int interval_process(eddy_process_context_t *ctx, const eddy_record_t *rec,
                            eddy_collector_t *out, eddy_err_t *err)
{
    bool left = eddy_process_input(ctx) == 0;
    const char *cols;
    uint32_t len;
    int64_t ts[2] = {0, 0};
    if (!split_row(rec, left ? 2 : 1, &cols, &len, ts))
        return eddy_err_set(err, "pipeline join: a row without its key and %s: '%.*s'",
                            left ? "from and to" : "time", (int)(rec->len > 60 ? 60 : rec->len),
                            rec->data);
    int64_t watermark = eddy_process_watermark(ctx);
    if (left) {
        /* from in value, to in timestamp: as the row is kept in "L" */
        eddy_record_t row = {cols, len, EDDY_INSERT, ts[0], ts[1]};
        if (row.timestamp <= watermark) {
            eddy_process_late(ctx, rec, out); /* every right row it could join has ended */
            return 0;
        }
        if (row.value > row.timestamp)
            return 0; /* an empty interval joins nothing */
        eddy_record_t r;
        for (size_t i = 0; eddy_process_list_at(ctx, "R", 1, i, &r); i++)
            if (interval_covers(&row, r.timestamp) &&
                emit_pair_at(&row, &r, r.timestamp, out, err) < 0)
                return -1;
        if (eddy_process_list_add(ctx, "L", 1, &row) < 0)
            return eddy_err_set(err, "out of memory");
        return interval_arm(ctx, row.timestamp, err);
    }
    eddy_record_t row = {cols, len, EDDY_INSERT, 1, ts[0]};
    bool matched = false;
    eddy_record_t l;
    for (size_t i = 0; eddy_process_list_at(ctx, "L", 1, i, &l); i++)
        if (interval_covers(&l, row.timestamp)) {
            matched = true;
            if (emit_pair_at(&l, &row, row.timestamp, out, err) < 0)
                return -1;
        }
    if (row.timestamp <= watermark) {
        /* Behind the watermark: it joined the left rows still kept; no left
         * row that is not late can come for it any more. */
        if (!matched)
            eddy_process_late(ctx, rec, out);
        return 0;
    }
    if (eddy_process_list_add(ctx, "R", 1, &row) < 0)
        return eddy_err_set(err, "out of memory");
    return interval_arm(ctx, row.timestamp, err);
}

/* Drops the rows of list ns whose end (timestamp) is at or before time;
 * the earliest end kept goes into *next (unchanged when none is). */
static int interval_expire(eddy_process_context_t *ctx, const char *ns, int64_t time,
                           int64_t *next, bool *any, eddy_err_t *err)
{
    size_t n = eddy_process_list_size(ctx, ns, 1), kept = 0;
    if (n == 0)
        return 0;
    eddy_record_t *keep = calloc(n, sizeof *keep);
    if (!keep)
        return eddy_err_set(err, "out of memory");
    int rc = 0;
    eddy_record_t r;
    for (size_t i = 0; eddy_process_list_at(ctx, ns, 1, i, &r); i++) {
        if (r.timestamp <= time)
            continue;
        keep[kept] = r;
        if (!(keep[kept].data = malloc(r.len ? r.len : 1))) {
            rc = eddy_err_set(err, "out of memory");
            break;
        }
        memcpy((char *)keep[kept].data, r.data, r.len);
        kept++;
    }
    if (rc == 0 && kept < n) {
        eddy_process_list_clear(ctx, ns, 1);
        for (size_t i = 0; rc == 0 && i < kept; i++)
            if (eddy_process_list_add(ctx, ns, 1, &keep[i]) < 0)
                rc = eddy_err_set(err, "out of memory");
    }
    for (size_t i = 0; i < kept; i++) {
        if (!*any || keep[i].timestamp < *next)
            *next = keep[i].timestamp;
        *any = true;
        free((char *)keep[i].data);
    }
    free(keep);
    return rc;
}

static int interval_on_timer(eddy_process_context_t *ctx, eddy_time_domain_t domain, int64_t time,
                             const void *ns, uint32_t ns_len, eddy_collector_t *out,
                             eddy_err_t *err)
{
    (void)domain;
    (void)ns;
    (void)ns_len;
    (void)out;
    interval_state_t *st = eddy_process_value_get(ctx);
    if (st && st->armed && st->timer > time)
        return 0; /* a timer deleted in spirit: the pending one is later */
    /* Everything the watermark passed ends now: one pass, not a timer per
     * end when the watermark jumped over several. */
    int64_t upto = eddy_process_watermark(ctx), next = 0;
    if (upto < time)
        upto = time;
    bool any = false;
    if (interval_expire(ctx, "L", upto, &next, &any, err) < 0 ||
        interval_expire(ctx, "R", upto, &next, &any, err) < 0)
        return -1;
    if (!any) {
        eddy_process_value_clear(ctx);
        return 0;
    }
    if ((st = eddy_process_value_get(ctx))) /* the list calls may have moved it */
        st->armed = 0;
    return interval_arm(ctx, next, err);
}

static int join_process(eddy_process_context_t *ctx, const eddy_record_t *rec,
                        eddy_collector_t *out, eddy_err_t *err)
{
    join_conf_t j = conf_of(ctx);
    const char *cols;
    uint32_t len;
    int64_t ts = rec->timestamp, start = 0;
    if (!split_row(rec, j.window_ms > 0 ? 1 : 0, &cols, &len, &ts))
        return eddy_err_set(err, "pipeline join: a row without its key%s: '%.*s'",
                            j.window_ms ? " and time" : "", (int)(rec->len > 60 ? 60 : rec->len),
                            rec->data);
    if (j.union_all) { /* a union: every row of either side goes on, as it came */
        eddy_record_t row = {cols, len, EDDY_INSERT, 1, ts};
        eddy_emit(out, &row);
        return 0;
    }
    if (j.window_ms) {
        start = ts - ((ts % j.window_ms) + j.window_ms) % j.window_ms;
        if (start > INT64_MAX - j.window_ms)
            return eddy_err_set(err, "pipeline join: time %" PRId64 " has no window", ts);
        int64_t last = start + j.window_ms - 1;
        if (last <= eddy_process_watermark(ctx)) {
            eddy_process_late(ctx, rec, out); /* its window has been dropped */
            return 0;
        }
        if (eddy_process_timer_register(ctx, EDDY_EVENT_TIME, last, &start, sizeof start) < 0)
            return eddy_err_set(err, "out of memory");
    }
    bool left = eddy_process_input(ctx) == 0;
    eddy_record_t row = {cols, len, EDDY_INSERT, 1, ts};
    char own[9], other[9];
    uint32_t ns_len = namespace_of(own, left ? 'L' : 'R', &j, start);
    namespace_of(other, left ? 'R' : 'L', &j, start);
    if (j.semi) {
        bool matched = eddy_process_list_size(ctx, left ? other : own, ns_len) > 0;
        if (left) {
            if (matched)
                eddy_emit(out, &row);
            else if (eddy_process_list_add(ctx, own, ns_len, &row) < 0)
                return eddy_err_set(err, "out of memory");
            return 0;
        }
        if (matched)
            return 0;
        eddy_record_t waiting;
        for (size_t i = 0; eddy_process_list_at(ctx, other, ns_len, i, &waiting); i++)
            eddy_emit(out, &waiting);
        eddy_process_list_clear(ctx, other, ns_len);
        return eddy_process_list_add(ctx, own, ns_len, &row) < 0 ? eddy_err_set(err, "out of memory")
                                                                  : 0;
    }
    eddy_record_t match;
    for (size_t i = 0; eddy_process_list_at(ctx, other, ns_len, i, &match); i++)
        if (emit_pair(left ? &row : &match, left ? &match : &row, out, err) < 0)
            return -1;
    return eddy_process_list_add(ctx, own, ns_len, &row) < 0 ? eddy_err_set(err, "out of memory") : 0;
}

/* A left join's rows without a match in their window: each left row of
 * list l paired with a right row of nulls (\N, tab-separated), at time. */
static int emit_unmatched(eddy_process_context_t *ctx, const join_conf_t *j, const char *l,
                          uint32_t ns_len, int64_t time, eddy_collector_t *out, eddy_err_t *err)
{
    if (j->right_columns <= 0 || j->right_columns > 100000)
        return eddy_err_set(err, "pipeline join: a left join without its right columns");
    size_t len = (size_t)j->right_columns * 3 - 1;
    char *nulls = malloc(len + 1);
    if (!nulls)
        return eddy_err_set(err, "out of memory");
    for (int64_t c = 0; c < j->right_columns; c++)
        memcpy(nulls + 3 * c, "\\N\t", 3); /* the last tab is cut off by len */
    eddy_record_t none = {nulls, (uint32_t)len, EDDY_INSERT, 1, time}, row;
    int rc = 0;
    for (size_t i = 0; rc == 0 && eddy_process_list_at(ctx, l, ns_len, i, &row); i++)
        rc = emit_pair_at(&row, &none, time, out, err);
    free(nulls);
    return rc;
}

static int join_on_timer(eddy_process_context_t *ctx, eddy_time_domain_t domain, int64_t time,
                         const void *tns, uint32_t tns_len, eddy_collector_t *out, eddy_err_t *err)
{
    (void)domain;
    join_conf_t j = conf_of(ctx);
    int64_t start;
    if (tns_len != sizeof start || !j.window_ms)
        return eddy_err_set(err, "pipeline join: a timer without its window");
    memcpy(&start, tns, sizeof start);
    char l[9], r[9];
    uint32_t ns_len = namespace_of(l, 'L', &j, start);
    namespace_of(r, 'R', &j, start);
    if (j.left_outer && eddy_process_list_size(ctx, r, ns_len) == 0 &&
        emit_unmatched(ctx, &j, l, ns_len, time, out, err) < 0)
        return -1;
    eddy_process_list_clear(ctx, l, ns_len);
    eddy_process_list_clear(ctx, r, ns_len);
    return 0;
}

static const eddy_process_udf_t join_udf = {.process = join_process, .on_timer = join_on_timer};
static const eddy_process_udf_t interval_udf = {.value_size = sizeof(interval_state_t),
                                                .process = interval_process,
                                                .on_timer = interval_on_timer};

int eddy_pipeline_join_register(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_register_process(r, EDDY_PIPELINE_JOIN_KIND, &join_udf, err) < 0)
        return -1;
    return eddy_register_process(r, EDDY_PIPELINE_INTERVAL_JOIN_KIND, &interval_udf, err);
}
