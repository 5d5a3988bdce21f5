/* pipeline_row.c - COPY-text rows (see pipeline_row.h). */
#include "operators/pipeline_row.h"

#include <stdlib.h>
#include <string.h>

int eddy_row_split(const char *line, size_t len, eddy_val_t *vals, uint32_t n, eddy_buf_t *scratch,
                   eddy_err_t *err)
{
    if (eddy_buf_reset(scratch, len + 1) < 0)
        return eddy_err_set(err, "out of memory");
    uint32_t field = 0;
    size_t start = 0;
    /* Field by field with memchr: most fields have no escape to undo. */
    for (;;) {
        const char *f = line + start, *tab = len > start ? memchr(f, '\t', len - start) : NULL;
        size_t flen = tab ? (size_t)(tab - f) : len - start;
        if (field == n)
            return eddy_err_set(err, "expected %u fields, got more", n);
        if (flen == 2 && f[0] == '\\' && f[1] == 'N') {
            vals[field] = eddy_val_null();
        } else if (!flen || !memchr(f, '\\', flen)) {
            vals[field] = eddy_val_str(f, flen);
        } else {
            char *out = scratch->p + scratch->len;
            size_t o = 0;
            for (size_t j = 0; j < flen; j++) {
                char c = f[j];
                if (c == '\\' && j + 1 < flen) {
                    char e = f[++j];
                    c = e == 't' ? '\t' : e == 'n' ? '\n' : e == 'r' ? '\r' : e;
                }
                out[o++] = c;
            }
            scratch->len += o;
            vals[field] = eddy_val_str(out, o);
        }
        field++;
        if (!tab)
            break;
        start += flen + 1;
    }
    if (field != n)
        return eddy_err_set(err, "expected %u fields, got %u", n, field);
    return 0;
}

int eddy_row_join(const eddy_val_t *vals, uint32_t n, eddy_buf_t *out)
{
    for (uint32_t i = 0; i < n; i++) {
        if (i && eddy_buf_add(out, "\t", 1) < 0)
            return -1;
        const eddy_val_t *v = &vals[i];
        if (v->type == EDDY_VAL_NULL) {
            if (eddy_buf_add(out, "\\N", 2) < 0)
                return -1;
            continue;
        }
        char num[64];
        const char *p = num;
        size_t len;
        if (v->type == EDDY_VAL_STR) {
            p = v->u.s.ptr;
            len = v->u.s.len;
        } else {
            len = eddy_val_format(v, num, sizeof num);
            if (len >= sizeof num)
                len = sizeof num - 1;
        }
        size_t run = 0;
        for (size_t j = 0; j < len; j++) {
            char c = p[j];
            const char *esc = c == '\\' ? "\\\\" : c == '\t' ? "\\t" : c == '\n' ? "\\n"
                            : c == '\r' ? "\\r" : NULL;
            if (!esc)
                continue;
            if (eddy_buf_add(out, p + run, j - run) < 0 || eddy_buf_add(out, esc, 2) < 0)
                return -1;
            run = j + 1;
        }
        if (eddy_buf_add(out, p + run, len - run) < 0)
            return -1;
    }
    return 0;
}
