/* op_report.h - the few figures an operator instance shows about itself:
 * one line of text for `eddy status` and /api/v1/jobs, and named gauges
 * (or counters) exported at /metrics as
 * eddy_NAME{job,operator,instance,worker,LABEL_KEY="LABEL"}.
 *
 * The task owns one report per instance (eddy_op_context_t.report) and
 * sends a copy with its metrics in every heartbeat (net/proto.c, the
 * task metrics' trailing field), so the operator just overwrites it when
 * its figures change; nothing else to call. Fixed-size, so a heartbeat
 * stays small and a peer cannot make the coordinator allocate: names are
 * [a-z0-9_], at most EDDY_OP_REPORT_GAUGES of them. The pipelines' filter
 * eddy uses it for its order (operators/pipeline_chain.c). */
#ifndef EDDY_NET_OP_REPORT_H
#define EDDY_NET_OP_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EDDY_OP_REPORT_TEXT 256
#define EDDY_OP_REPORT_GAUGES 32
#define EDDY_OP_REPORT_NAME 48
#define EDDY_OP_REPORT_LABEL_KEY 24
#define EDDY_OP_REPORT_LABEL 96

typedef struct eddy_op_gauge {
    char name[EDDY_OP_REPORT_NAME];           /* exported as eddy_<name> */
    char label_key[EDDY_OP_REPORT_LABEL_KEY]; /* "" for no extra label */
    char label[EDDY_OP_REPORT_LABEL];
    double value;
    bool counter; /* cumulative since the instance started */
} eddy_op_gauge_t;

typedef struct eddy_op_report {
    char text[EDDY_OP_REPORT_TEXT]; /* "" for none */
    uint32_t n_gauges;
    eddy_op_gauge_t gauges[EDDY_OP_REPORT_GAUGES];
} eddy_op_report_t;

void eddy_op_report_clear(eddy_op_report_t *r);
void eddy_op_report_text(eddy_op_report_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Adds a gauge (label_key NULL or "" for none; label truncated to fit).
 * -1 when the report is full or name/label_key is not [a-z0-9_]+ and fits. */
int eddy_op_report_gauge(eddy_op_report_t *r, const char *name, const char *label_key,
                         const char *label, double value, bool counter);
/* Whether s is a usable metric or label name: [a-z0-9_]+, shorter than size. */
bool eddy_op_report_name_ok(const char *s, size_t size);

#endif
