/* etl_record.h - one ETL record as named text fields, read from and written
 * to CSV or JSON lines (the etl job's record model, jobs/etl_records.c).
 *
 * A field's value is text; `raw` marks a JSON literal (a number, true,
 * false, null, or a nested array/object in compact JSON) that JSON output
 * writes unquoted and CSV output writes as it is (null as an empty field).
 * CSV is RFC 4180 without line breaks inside fields: comma-separated,
 * fields may be double-quoted, "" inside quotes is a quote. JSON lines are
 * one object each; field order is the object's order. No I/O here. */
#ifndef EDDY_OPERATORS_ETL_RECORD_H
#define EDDY_OPERATORS_ETL_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* A growable list of owned strings. */
typedef struct eddy_strv {
    char **v;
    size_t n, cap;
} eddy_strv_t;

int eddy_strv_push(eddy_strv_t *self, const char *s, size_t len);
void eddy_strv_clear(eddy_strv_t *self);
/* Splits a comma-separated flag value ("a,b,c"), trimming blanks; empty
 * items are an error. */
int eddy_strv_split_list(eddy_strv_t *self, const char *list, eddy_err_t *err);
bool eddy_strv_has(const eddy_strv_t *self, const char *s);

/* A growable byte buffer, NUL-terminated. */
typedef struct eddy_buf {
    char *p;
    size_t len, cap;
} eddy_buf_t;

int eddy_buf_add(eddy_buf_t *self, const char *s, size_t len);
/* Empties the buffer and makes room for cap bytes, so that pointers into
 * what is then written in place (without eddy_buf_add) stay valid. */
int eddy_buf_reset(eddy_buf_t *self, size_t cap);
void eddy_buf_free(eddy_buf_t *self);

typedef struct eddy_etl_field {
    char *name;
    char *value;
    bool raw;
} eddy_etl_field_t;

typedef struct eddy_etl_record {
    eddy_etl_field_t *fields;
    size_t n, cap;
} eddy_etl_record_t;

/* Sets field name (replacing its value, or appending it). */
int eddy_etl_record_set(eddy_etl_record_t *self, const char *name, const char *value, size_t len,
                        bool raw);
eddy_etl_field_t *eddy_etl_record_get(eddy_etl_record_t *self, const char *name);
void eddy_etl_record_clear(eddy_etl_record_t *self);

/* One field of a CSV line: not NUL-terminated; in the line itself, or
 * (a quoted field) in the caller's buffer. */
typedef struct eddy_csv_span {
    const char *p;
    size_t len;
} eddy_csv_span_t;

/* The fields of one CSV line without copying them: the first max into
 * spans, their count (also beyond max) into *n. Quoted fields are unquoted
 * into `unquoted`, grown to len + 1 first and reused from its start, so
 * spans stay valid until it is used again. A quote in an unquoted field or
 * an unterminated quoted field is an error. */
int eddy_etl_csv_spans(const char *line, size_t len, eddy_csv_span_t *spans, size_t max,
                       size_t *n, eddy_buf_t *unquoted, eddy_err_t *err);
/* The same fields as owned strings into out (cleared first). */
int eddy_etl_csv_split(const char *line, size_t len, eddy_strv_t *out, eddy_err_t *err);
/* A CSV line as record fields named by columns; a different field count is
 * an error ("expected 3 fields, got 4"). */
int eddy_etl_parse_csv(const char *line, size_t len, const eddy_strv_t *columns,
                       eddy_etl_record_t *rec, eddy_err_t *err);
/* A JSON object line as record fields (strings as text, the rest raw). */
int eddy_etl_parse_json(const char *line, size_t len, eddy_etl_record_t *rec, eddy_err_t *err);

/* Writes rec as one line (no '\n') into out (cleared first). columns: the
 * fields to write, in order (a missing one is empty / null); NULL or empty:
 * every field of rec in its order. */
int eddy_etl_write_csv(const eddy_etl_record_t *rec, const eddy_strv_t *columns, eddy_buf_t *out);
int eddy_etl_write_json(const eddy_etl_record_t *rec, const eddy_strv_t *columns, eddy_buf_t *out);

#endif
