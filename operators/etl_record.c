/* etl_record.c - ETL records: CSV and JSON lines in and out (etl_record.h).
 * Values are copied per record: the etl job's throughput is bound by its
 * sinks, and owned strings keep the cleaning rules simple. */
#include "operators/etl_record.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_n(const char *s, size_t len)
{
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

int eddy_strv_push(eddy_strv_t *self, const char *s, size_t len)
{
    if (self->n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 8;
        char **v = realloc(self->v, cap * sizeof *v);
        if (!v)
            return -1;
        self->v = v;
        self->cap = cap;
    }
    char *p = dup_n(s, len);
    if (!p)
        return -1;
    self->v[self->n++] = p;
    return 0;
}

void eddy_strv_clear(eddy_strv_t *self)
{
    for (size_t i = 0; i < self->n; i++)
        free(self->v[i]);
    free(self->v);
    *self = (eddy_strv_t){0};
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

int eddy_strv_split_list(eddy_strv_t *self, const char *list, eddy_err_t *err)
{
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && is_blank(*a))
            a++;
        while (b > a && is_blank(b[-1]))
            b--;
        if (a == b)
            return eddy_err_set(err, "empty name in list '%s'", list);
        if (eddy_strv_push(self, a, (size_t)(b - a)) < 0)
            return eddy_err_set(err, "out of memory");
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

bool eddy_strv_has(const eddy_strv_t *self, const char *s)
{
    for (size_t i = 0; i < self->n; i++)
        if (!strcmp(self->v[i], s))
            return true;
    return false;
}

int eddy_buf_reset(eddy_buf_t *self, size_t cap)
{
    if (self->cap < cap) {
        char *p = realloc(self->p, cap);
        if (!p)
            return -1;
        self->p = p;
        self->cap = cap;
    }
    self->len = 0;
    return 0;
}

int eddy_buf_add(eddy_buf_t *self, const char *s, size_t len)
{
    if (self->len + len + 1 > self->cap) {
        size_t cap = self->cap ? self->cap : 256;
        while (cap < self->len + len + 1)
            cap *= 2;
        char *p = realloc(self->p, cap);
        if (!p)
            return -1;
        self->p = p;
        self->cap = cap;
    }
    memcpy(self->p + self->len, s, len);
    self->len += len;
    self->p[self->len] = '\0';
    return 0;
}

void eddy_buf_free(eddy_buf_t *self)
{
    free(self->p);
    *self = (eddy_buf_t){0};
}

eddy_etl_field_t *eddy_etl_record_get(eddy_etl_record_t *self, const char *name)
{
    for (size_t i = 0; i < self->n; i++)
        if (!strcmp(self->fields[i].name, name))
            return &self->fields[i];
    return NULL;
}

int eddy_etl_record_set(eddy_etl_record_t *self, const char *name, const char *value, size_t len,
                        bool raw)
{
    char *v = dup_n(value, len);
    if (!v)
        return -1;
    eddy_etl_field_t *f = eddy_etl_record_get(self, name);
    if (f) {
        free(f->value);
        f->value = v;
        f->raw = raw;
        return 0;
    }
    if (self->n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 8;
        eddy_etl_field_t *fs = realloc(self->fields, cap * sizeof *fs);
        if (!fs) {
            free(v);
            return -1;
        }
        self->fields = fs;
        self->cap = cap;
    }
    char *n = dup_n(name, strlen(name));
    if (!n) {
        free(v);
        return -1;
    }
    self->fields[self->n++] = (eddy_etl_field_t){n, v, raw};
    return 0;
}

void eddy_etl_record_clear(eddy_etl_record_t *self)
{
    for (size_t i = 0; i < self->n; i++) {
        free(self->fields[i].name);
        free(self->fields[i].value);
    }
    self->n = 0;
}

int eddy_etl_csv_spans(const char *line, size_t len, eddy_csv_span_t *spans, size_t max,
                       size_t *n, eddy_buf_t *unquoted, eddy_err_t *err)
{
    *n = 0;
    /* Unquoting never lengthens a field, so len + 1 bytes are enough for
     * every quoted field of the line and pointers into it stay valid. */
    if (eddy_buf_reset(unquoted, len + 1) < 0)
        return eddy_err_set(err, "out of memory");
    size_t i = 0;
    for (;;) {
        const char *field;
        size_t flen;
        if (i < len && line[i] == '"') {
            char *out = unquoted->p + unquoted->len;
            flen = 0;
            for (i++;; i++) {
                if (i >= len)
                    return eddy_err_set(err, "unterminated quoted field %zu", *n + 1);
                if (line[i] == '"') {
                    if (i + 1 < len && line[i + 1] == '"') {
                        out[flen++] = '"';
                        i++;
                        continue;
                    }
                    i++;
                    break;
                }
                out[flen++] = line[i];
            }
            if (i < len && line[i] != ',')
                return eddy_err_set(err, "text after the closing quote of field %zu", *n + 1);
            field = out;
            unquoted->len += flen;
        } else {
            /* memchr, not a byte loop: fields can be long (text, JSON). */
            field = line + i;
            const char *comma = i < len ? memchr(field, ',', len - i) : NULL;
            flen = comma ? (size_t)(comma - field) : len - i;
            if (flen && memchr(field, '"', flen))
                return eddy_err_set(err, "quote inside unquoted field %zu", *n + 1);
            i += flen;
        }
        if (*n < max)
            spans[*n] = (eddy_csv_span_t){field, flen};
        (*n)++;
        if (i >= len)
            return 0;
        i++; /* the comma */
    }
}

int eddy_etl_csv_split(const char *line, size_t len, eddy_strv_t *out, eddy_err_t *err)
{
    for (size_t i = 0; i < out->n; i++)
        free(out->v[i]);
    out->n = 0;
    eddy_csv_span_t few[64], *spans = few;
    eddy_buf_t unquoted = {0};
    size_t n;
    int rc = eddy_etl_csv_spans(line, len, spans, 64, &n, &unquoted, err);
    if (rc == 0 && n > 64) {
        spans = malloc(n * sizeof *spans);
        rc = spans ? eddy_etl_csv_spans(line, len, spans, n, &n, &unquoted, err)
                   : eddy_err_set(err, "out of memory");
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (eddy_strv_push(out, spans[i].p, spans[i].len) < 0)
            rc = eddy_err_set(err, "out of memory");
    if (spans != few)
        free(spans);
    eddy_buf_free(&unquoted);
    return rc;
}

int eddy_etl_parse_csv(const char *line, size_t len, const eddy_strv_t *columns,
                       eddy_etl_record_t *rec, eddy_err_t *err)
{
    eddy_strv_t fields = {0};
    eddy_etl_record_clear(rec);
    int rc = eddy_etl_csv_split(line, len, &fields, err);
    if (rc == 0 && fields.n != columns->n)
        rc = eddy_err_set(err, "expected %zu fields, got %zu", columns->n, fields.n);
    for (size_t i = 0; rc == 0 && i < fields.n; i++)
        if (eddy_etl_record_set(rec, columns->v[i], fields.v[i], strlen(fields.v[i]), false) < 0)
            rc = eddy_err_set(err, "out of memory");
    eddy_strv_clear(&fields);
    return rc;
}

int eddy_etl_parse_json(const char *line, size_t len, eddy_etl_record_t *rec, eddy_err_t *err)
{
    eddy_etl_record_clear(rec);
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return eddy_err_set(err, "invalid JSON: %s", jerr.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = eddy_err_set(err, "not a JSON object");
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        int set;
        if (json_is_string(v)) {
            set = eddy_etl_record_set(rec, key, json_string_value(v), json_string_length(v), false);
        } else {
            char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
            set = text ? eddy_etl_record_set(rec, key, text, strlen(text), true) : -1;
            free(text);
        }
        if (set < 0) {
            rc = eddy_err_set(err, "out of memory");
            break;
        }
    }
done:
    json_decref(root);
    return rc;
}

static const eddy_etl_field_t *find(const eddy_etl_record_t *rec, const char *name)
{
    return eddy_etl_record_get((eddy_etl_record_t *)rec, name);
}

/* The fields to write: columns, or every field of rec. */
static size_t out_count(const eddy_etl_record_t *rec, const eddy_strv_t *columns)
{
    return columns && columns->n ? columns->n : rec->n;
}

static const eddy_etl_field_t *out_field(const eddy_etl_record_t *rec, const eddy_strv_t *columns,
                                         size_t i, const char **name)
{
    if (columns && columns->n) {
        *name = columns->v[i];
        return find(rec, columns->v[i]);
    }
    *name = rec->fields[i].name;
    return &rec->fields[i];
}

int eddy_etl_write_csv(const eddy_etl_record_t *rec, const eddy_strv_t *columns, eddy_buf_t *out)
{
    out->len = 0;
    if (eddy_buf_add(out, "", 0) < 0)
        return -1;
    for (size_t i = 0, n = out_count(rec, columns); i < n; i++) {
        const char *name;
        const eddy_etl_field_t *f = out_field(rec, columns, i, &name);
        const char *v = f && !(f->raw && !strcmp(f->value, "null")) ? f->value : "";
        if (i && eddy_buf_add(out, ",", 1) < 0)
            return -1;
        if (!strpbrk(v, ",\"\r\n")) {
            if (eddy_buf_add(out, v, strlen(v)) < 0)
                return -1;
            continue;
        }
        if (eddy_buf_add(out, "\"", 1) < 0)
            return -1;
        for (const char *p = v; *p; p++)
            if ((*p == '"' && eddy_buf_add(out, "\"", 1) < 0) || eddy_buf_add(out, p, 1) < 0)
                return -1;
        if (eddy_buf_add(out, "\"", 1) < 0)
            return -1;
    }
    return 0;
}

static int add_json_string(eddy_buf_t *out, const char *s)
{
    if (eddy_buf_add(out, "\"", 1) < 0)
        return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        const char *e = NULL;
        switch (*p) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                e = esc;
            }
        }
        if (e ? eddy_buf_add(out, e, strlen(e)) < 0 : eddy_buf_add(out, (const char *)p, 1) < 0)
            return -1;
    }
    return eddy_buf_add(out, "\"", 1);
}

int eddy_etl_write_json(const eddy_etl_record_t *rec, const eddy_strv_t *columns, eddy_buf_t *out)
{
    out->len = 0;
    if (eddy_buf_add(out, "{", 1) < 0)
        return -1;
    for (size_t i = 0, n = out_count(rec, columns); i < n; i++) {
        const char *name;
        const eddy_etl_field_t *f = out_field(rec, columns, i, &name);
        if ((i && eddy_buf_add(out, ",", 1) < 0) || add_json_string(out, name) < 0 ||
            eddy_buf_add(out, ":", 1) < 0)
            return -1;
        int rc = !f ? eddy_buf_add(out, "null", 4)
                 : f->raw ? eddy_buf_add(out, f->value, strlen(f->value))
                          : add_json_string(out, f->value);
        if (rc < 0)
            return -1;
    }
    return eddy_buf_add(out, "}", 1);
}
