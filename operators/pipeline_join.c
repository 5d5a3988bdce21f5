/* pipeline_join.c - a pipeline's join as a keyed process function (see
 * pipeline_join.h). State per key: list "L" and "R" of each side's rows
 * (their columns, the key and time cut off), under namespaces of the side
 * and, when windowed, the window's start; an event-time timer at the
 * window's last millisecond clears both. A semi-join keeps one right row
 * per key (and window) as the mark that there is a match, and only the
 * left rows still waiting for one. */
#include "operators/pipeline_join.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api/process.h"

typedef struct join_conf {
    bool semi;
    int64_t window_ms;
} join_conf_t;

static join_conf_t conf_of(eddy_process_context_t *ctx)
{
    const eddy_config_t *c = eddy_process_config(ctx);
    join_conf_t j = {!strcmp(eddy_config_str(c, "type", "inner"), "semi"),
                     eddy_config_int(c, "window_ms", 0)};
    return j;
}

/* The row's columns after its key (and time): *cols; the time into *ts. */
static bool split_row(const eddy_record_t *rec, bool timed, const char **cols, uint32_t *len,
                      int64_t *ts)
{
    const char *p = memchr(rec->data, '\t', rec->len), *end = rec->data + rec->len;
    if (!p)
        return false;
    p++;
    if (timed) {
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
        *ts = neg ? -v : v;
        p = d + 1;
    }
    *cols = p;
    *len = (uint32_t)(end - p);
    return true;
}

static int emit_pair(const eddy_record_t *l, const eddy_record_t *r, eddy_collector_t *out,
                     eddy_err_t *err)
{
    size_t n = (size_t)l->len + 1 + r->len;
    char *row = malloc(n ? n : 1);
    if (!row)
        return eddy_err_set(err, "out of memory");
    memcpy(row, l->data, l->len);
    row[l->len] = '\t';
    memcpy(row + l->len + 1, r->data, r->len);
    eddy_record_t rec = {row, (uint32_t)n, EDDY_INSERT, 1,
                         l->timestamp > r->timestamp ? l->timestamp : r->timestamp};
    eddy_emit(out, &rec);
    free(row);
    return 0;
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

static int join_process(eddy_process_context_t *ctx, const eddy_record_t *rec,
                        eddy_collector_t *out, eddy_err_t *err)
{
    join_conf_t j = conf_of(ctx);
    const char *cols;
    uint32_t len;
    int64_t ts = rec->timestamp, start = 0;
    if (!split_row(rec, j.window_ms > 0, &cols, &len, &ts))
        return eddy_err_set(err, "pipeline join: a row without its key%s: '%.*s'",
                            j.window_ms ? " and time" : "", (int)(rec->len > 60 ? 60 : rec->len),
                            rec->data);
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

static int join_on_timer(eddy_process_context_t *ctx, eddy_time_domain_t domain, int64_t time,
                         const void *tns, uint32_t tns_len, eddy_collector_t *out, eddy_err_t *err)
{
    (void)domain;
    (void)time;
    (void)out;
    join_conf_t j = conf_of(ctx);
    int64_t start;
    if (tns_len != sizeof start || !j.window_ms)
        return eddy_err_set(err, "pipeline join: a timer without its window");
    memcpy(&start, tns, sizeof start);
    char l[9], r[9];
    uint32_t ns_len = namespace_of(l, 'L', &j, start);
    namespace_of(r, 'R', &j, start);
    eddy_process_list_clear(ctx, l, ns_len);
    eddy_process_list_clear(ctx, r, ns_len);
    return 0;
}

static const eddy_process_udf_t join_udf = {.process = join_process, .on_timer = join_on_timer};

int eddy_pipeline_join_register(eddy_registry_t *r, eddy_err_t *err)
{
    return eddy_register_process(r, EDDY_PIPELINE_JOIN_KIND, &join_udf, err);
}
