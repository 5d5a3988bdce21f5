/* test_op_report.c - operator reports (net/op_report.c) and their trailing
 * field in a heartbeat's task metrics (net/proto.c, field 21): round trip,
 * an older worker's 19- or 20-field entry read as an empty report, and bounds: too many
 * gauges, names that are not [a-z0-9_], text too long. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"
#include "net/op_report.h"
#include "net/proto.h"

static eddy_msg_t heartbeat_with(const eddy_op_report_t *r)
{
    eddy_msg_t m = {.type = EDDY_MSG_HEARTBEAT};
    m.u.heartbeat.worker_id = 3;
    m.u.heartbeat.n_tasks = 1;
    m.u.heartbeat.tasks = calloc(1, sizeof *m.u.heartbeat.tasks);
    m.u.heartbeat.tasks[0].job = 1;
    m.u.heartbeat.tasks[0].watermark = INT64_MIN;
    m.u.heartbeat.tasks[0].report = *r;
    return m;
}

Test(op_report, fill_and_round_trip)
{
    eddy_op_report_t r;
    eddy_op_report_clear(&r);
    eddy_op_report_text(&r, "filters 'a' %d%%\nsecond line", 3);
    cr_assert_str_eq(r.text, "filters 'a' 3% second line", "text is one line");
    cr_assert_eq(eddy_op_report_gauge(&r, "pipeline_filter_position", "filter",
                                      "name == \"x\\y\"", 2, false), 0);
    cr_assert_eq(eddy_op_report_gauge(&r, "pipeline_reorders_total", NULL, NULL, 7, true), 0);
    cr_assert_eq(eddy_op_report_gauge(&r, "Bad-Name", NULL, NULL, 1, false), -1);
    cr_assert_eq(eddy_op_report_gauge(&r, "ok", "bad key", "v", 1, false), -1);
    cr_assert_eq(r.n_gauges, 2);

    eddy_msg_t m = heartbeat_with(&r), back = {0};
    size_t len;
    char *bytes = eddy_msg_encode(&m, &len);
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_msg_decode(bytes, len, &back, &err), 0, "%s", err.msg);
    const eddy_op_report_t *b = &back.u.heartbeat.tasks[0].report;
    cr_assert_str_eq(b->text, r.text);
    cr_assert_eq(b->n_gauges, 2);
    cr_assert_str_eq(b->gauges[0].name, "pipeline_filter_position");
    cr_assert_str_eq(b->gauges[0].label_key, "filter");
    cr_assert_str_eq(b->gauges[0].label, "name == \"x\\y\"");
    cr_assert_eq(b->gauges[0].value, 2.0);
    cr_assert(!b->gauges[0].counter);
    cr_assert_str_eq(b->gauges[1].label_key, "");
    cr_assert(b->gauges[1].counter);
    free(bytes);
    eddy_msg_clear(&m);
    eddy_msg_clear(&back);
}

Test(op_report, full_report_refuses_more)
{
    eddy_op_report_t r;
    eddy_op_report_clear(&r);
    for (int i = 0; i < EDDY_OP_REPORT_GAUGES; i++)
        cr_assert_eq(eddy_op_report_gauge(&r, "g", "i", "x", i, false), 0);
    cr_assert_eq(eddy_op_report_gauge(&r, "g", "i", "x", 0, false), -1);
    /* The most a worker may send round-trips. */
    eddy_msg_t m = heartbeat_with(&r), back = {0};
    size_t len;
    char *bytes = eddy_msg_encode(&m, &len);
    cr_assert_eq(eddy_msg_decode(bytes, len, &back, NULL), 0);
    cr_assert_eq(back.u.heartbeat.tasks[0].report.n_gauges, EDDY_OP_REPORT_GAUGES);
    free(bytes);
    eddy_msg_clear(&m);
    eddy_msg_clear(&back);
}

/* A heartbeat with one task entry of `fields` metrics fields (19 or 20: an
 * older worker's, without the key loads or the report) and, when fields is
 * 21, `report` written by hand. */
static char *hand_heartbeat(uint32_t fields, void (*report)(eddy_mpw_t *w), size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 4);
    eddy_mpw_u64(&w, EDDY_MSG_HEARTBEAT);
    eddy_mpw_u64(&w, 3);
    eddy_mpw_array(&w, 1);
    eddy_mpw_array(&w, fields);
    for (int i = 0; i < 11; i++) /* job .. state_bytes */
        eddy_mpw_u64(&w, 0);
    eddy_mpw_i64(&w, -1);        /* position */
    eddy_mpw_double(&w, 0);      /* offered_rate */
    eddy_mpw_i64(&w, INT64_MIN); /* watermark */
    eddy_mpw_u64(&w, 0);         /* late */
    eddy_mpw_i64(&w, -1);        /* source_lag */
    eddy_mpw_u64(&w, 0);         /* rejected */
    for (int h = 0; h < 2; h++) {
        eddy_mpw_array(&w, 1 + EDDY_HIST_BUCKETS);
        for (uint32_t i = 0; i < 1 + EDDY_HIST_BUCKETS; i++)
            eddy_mpw_u64(&w, 0);
    }
    if (fields >= 20)
        eddy_mpw_array(&w, 0); /* no key loads */
    if (fields == 21)
        report(&w);
    eddy_mpw_u64(&w, 0); /* leader epoch */
    return eddy_mpw_release(&w, len);
}

Test(op_report, older_entry_reads_as_empty_report)
{
    for (uint32_t fields = 19; fields <= 20; fields++) {
        size_t len;
        char *bytes = hand_heartbeat(fields, NULL, &len);
        eddy_msg_t back = {0};
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_msg_decode(bytes, len, &back, &err), 0, "%u fields: %s", fields, err.msg);
        cr_assert_eq(back.u.heartbeat.tasks[0].report.n_gauges, 0);
        cr_assert_str_eq(back.u.heartbeat.tasks[0].report.text, "");
        free(bytes);
        eddy_msg_clear(&back);
    }
}

static void too_many_gauges(eddy_mpw_t *w)
{
    eddy_mpw_array(w, 2);
    eddy_mpw_str(w, "");
    eddy_mpw_array(w, EDDY_OP_REPORT_GAUGES + 1);
    for (int i = 0; i < EDDY_OP_REPORT_GAUGES + 1; i++) {
        eddy_mpw_array(w, 5);
        eddy_mpw_str(w, "g");
        eddy_mpw_str(w, "");
        eddy_mpw_str(w, "");
        eddy_mpw_double(w, 1);
        eddy_mpw_bool(w, false);
    }
}

static void bad_name(eddy_mpw_t *w)
{
    eddy_mpw_array(w, 2);
    eddy_mpw_str(w, "");
    eddy_mpw_array(w, 1);
    eddy_mpw_array(w, 5);
    eddy_mpw_str(w, "x} 1\neddy_fake");
    eddy_mpw_str(w, "");
    eddy_mpw_str(w, "");
    eddy_mpw_double(w, 1);
    eddy_mpw_bool(w, false);
}

static void long_text(eddy_mpw_t *w)
{
    char text[EDDY_OP_REPORT_TEXT + 1];
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    eddy_mpw_array(w, 2);
    eddy_mpw_str(w, text);
    eddy_mpw_array(w, 0);
}

static void odd_shape(eddy_mpw_t *w)
{
    eddy_mpw_array(w, 1);
    eddy_mpw_str(w, "only text");
}

static void expect_refused(void (*report)(eddy_mpw_t *w), const char *why)
{
    size_t len;
    char *bytes = hand_heartbeat(21, report, &len);
    eddy_msg_t back = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_msg_decode(bytes, len, &back, &err), -1, "%s accepted", why);
    cr_assert(strstr(err.msg, "HEARTBEAT"), "%s: %s", why, err.msg);
    free(bytes);
    eddy_msg_clear(&back);
}

Test(op_report, bounds_checked)
{
    expect_refused(too_many_gauges, "33 gauges");
    expect_refused(bad_name, "a gauge name with a newline");
    expect_refused(long_text, "text longer than the report holds");
    expect_refused(odd_shape, "a one-element report");
}
