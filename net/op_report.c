/* op_report.c - filling an operator's report (see op_report.h). */
#include "net/op_report.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

void eddy_op_report_clear(eddy_op_report_t *r)
{
    r->text[0] = '\0';
    r->n_gauges = 0;
}

void eddy_op_report_text(eddy_op_report_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof r->text, fmt, ap);
    va_end(ap);
    /* One line: status prints it as one. */
    for (char *p = r->text; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

bool eddy_op_report_name_ok(const char *s, size_t size)
{
    size_t n = strnlen(s, size);
    if (n == 0 || n >= size)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

int eddy_op_report_gauge(eddy_op_report_t *r, const char *name, const char *label_key,
                         const char *label, double value, bool counter)
{
    if (r->n_gauges >= EDDY_OP_REPORT_GAUGES || !eddy_op_report_name_ok(name, EDDY_OP_REPORT_NAME))
        return -1;
    bool labelled = label_key && label_key[0];
    if (labelled && !eddy_op_report_name_ok(label_key, EDDY_OP_REPORT_LABEL_KEY))
        return -1;
    eddy_op_gauge_t *g = &r->gauges[r->n_gauges++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    if (labelled) {
        snprintf(g->label_key, sizeof g->label_key, "%s", label_key);
        snprintf(g->label, sizeof g->label, "%s", label ? label : "");
    }
    g->value = value;
    g->counter = counter;
    return 0;
}
