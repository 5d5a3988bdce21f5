/* etl_records.c - the etl job's record operator (etl_records.h): parsing,
 * cleaning (operators/etl_clean.h), enrichment (operators/etl_table.h,
 * connectors/postgres/pg_table.h) and rejects, per record, stateless.
 *
 * The reference table is loaded in open(), synchronously: open() runs when
 * the task is deployed, before it gets records, so no record can pass
 * unenriched. A PostgreSQL table is read with a connect and a statement
 * timeout (enrich_timeout_s, default 10 s) so a deploy never hangs on it.
 *
 * Rejected records are counted per instance (logged once a second while
 * they happen, in a summary line when the instance closes, and in the
 * task's eddy_rejected_records_total at /metrics) and, with
 * `rejects`, appended as "reason<TAB>line" to that file with one write()
 * per record (O_APPEND: instances and workers on one machine share it).
 * At least once: records replayed after a restore are rejected again. */
#include "jobs/etl_records.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/log.h"
#include "connectors/postgres/pg_table.h"
#include "connectors/postgres/pg_uri.h"
#include "operators/etl_clean.h"
#include "operators/etl_record.h"
#include "operators/etl_table.h"

#define HEADER_MAX 65536

typedef struct etl_op {
    const char *stage;
    uint32_t instance;
    bool json_in, json_out, header, trim, date_only, enrich_required;
    eddy_strv_t columns, out_columns, lower, upper, date, number, split;
    const char *enrich_key;
    eddy_etl_table_t *table;
    int rejects_fd;
    uint64_t in, written, rejected;
    uint64_t *rejected_metric; /* the task's eddy_rejected_records_total */
    eddy_etl_record_t rec;
    eddy_buf_t out, line;
    eddy_log_limit_t limit;
} etl_op_t;

static void etl_close(void *self)
{
    etl_op_t *op = self;
    if (op->in)
        eddy_info("etl %s[%u]: %" PRIu64 " records read, %" PRIu64 " written, %" PRIu64
                  " rejected (malformed)",
                  op->stage, op->instance, op->in, op->written, op->rejected);
    eddy_strv_t *lists[] = {&op->columns, &op->out_columns, &op->lower, &op->upper,
                            &op->date, &op->number, &op->split};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        eddy_strv_clear(lists[i]);
    eddy_etl_table_destroy(&op->table);
    if (op->rejects_fd >= 0)
        close(op->rejects_fd);
    eddy_etl_record_clear(&op->rec);
    free(op->rec.fields);
    eddy_buf_free(&op->out);
    eddy_buf_free(&op->line);
    free(op);
}

static int list_flag(const eddy_config_t *cfg, const char *key, eddy_strv_t *out, eddy_err_t *err)
{
    const char *v = eddy_config_str(cfg, key, "");
    if (!v[0])
        return 0;
    if (eddy_strv_split_list(out, v, err) < 0)
        return eddy_err_wrap(err, "etl %s", key);
    return 0;
}

/* The CSV columns from the first line of the input file (.gz or plain). */
static int header_from_file(etl_op_t *op, const char *path, eddy_err_t *err)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        return eddy_err_set(err, "etl --header: %s: %s", path, strerror(errno));
    char *buf = malloc(HEADER_MAX);
    int rc = 0;
    if (!buf || !gzgets(f, buf, HEADER_MAX)) {
        rc = eddy_err_set(err, "etl --header: %s: no header line", path);
    } else {
        size_t n = strcspn(buf, "\r\n");
        if (eddy_etl_csv_split(buf, n, &op->columns, err) < 0)
            rc = eddy_err_wrap(err, "etl --header: %s", path);
    }
    free(buf);
    gzclose(f);
    return rc;
}

static int check_columns(const etl_op_t *op, const eddy_strv_t *list, const char *flag,
                         eddy_err_t *err)
{
    /* JSON fields may be missing from a record; CSV columns are known. */
    for (size_t i = 0; !op->json_in && i < list->n; i++)
        if (!eddy_strv_has(&op->columns, list->v[i]))
            return eddy_err_set(err, "etl --%s %s: no such column", flag, list->v[i]);
    return 0;
}

static void *etl_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    const eddy_config_t *cfg = ctx->config;
    etl_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    op->stage = ctx->stage_name;
    op->instance = ctx->instance;
    op->rejected_metric = ctx->rejected_records;
    op->rejects_fd = -1;
    op->json_in = !strcmp(eddy_config_str(cfg, "format", "csv"), "json");
    op->json_out = !strcmp(eddy_config_str(cfg, "output_format", op->json_in ? "json" : "csv"),
                           "json");
    op->header = eddy_config_bool(cfg, "header", false);
    op->trim = eddy_config_bool(cfg, "trim", false);
    op->date_only = eddy_config_bool(cfg, "date_only", false);
    op->enrich_required = eddy_config_bool(cfg, "enrich_required", false);
    op->enrich_key = eddy_config_str(cfg, "enrich_key", NULL);
    if (list_flag(cfg, "columns", &op->columns, err) < 0 ||
        list_flag(cfg, "lower", &op->lower, err) < 0 ||
        list_flag(cfg, "upper", &op->upper, err) < 0 ||
        list_flag(cfg, "date", &op->date, err) < 0 ||
        list_flag(cfg, "number", &op->number, err) < 0)
        goto fail;
    const char *header_file = eddy_config_str(cfg, "header_file", "");
    if (!op->json_in && !op->columns.n) {
        if (!header_file[0]) {
            eddy_err_set(err, "etl: CSV input needs --columns or --header");
            goto fail;
        }
        if (header_from_file(op, header_file, err) < 0)
            goto fail;
    }
    if (check_columns(op, &op->lower, "lower", err) < 0 ||
        check_columns(op, &op->upper, "upper", err) < 0 ||
        check_columns(op, &op->date, "date", err) < 0 ||
        check_columns(op, &op->number, "number", err) < 0)
        goto fail;
    const char *table = eddy_config_str(cfg, "enrich_table", "");
    if (table[0]) {
        if (!op->enrich_key) {
            eddy_err_set(err, "etl: --enrich-table needs --enrich-key");
            goto fail;
        }
        eddy_strv_t key = {0};
        eddy_strv_push(&key, op->enrich_key, strlen(op->enrich_key));
        int bad = check_columns(op, &key, "enrich-key", err);
        eddy_strv_clear(&key);
        if (bad < 0)
            goto fail;
        int64_t timeout = eddy_config_int(cfg, "enrich_timeout_s", 10);
        op->table = eddy_pg_uri_is(table)
                        ? eddy_pg_table_load(table, (int)timeout, err)
                        : eddy_etl_table_load_csv(table, err);
        if (!op->table) {
            eddy_err_wrap(err, "etl --enrich-table");
            goto fail;
        }
        eddy_info("etl %s[%u]: reference table %s: %zu rows", op->stage, op->instance,
                  eddy_pg_uri_is(table) ? "(PostgreSQL)" : table, eddy_etl_table_rows(op->table));
    }
    /* Output columns: the input's (or the JSON projection) and then the
     * reference table's; none: every field of each JSON record. */
    for (size_t i = 0; i < op->columns.n; i++)
        eddy_strv_push(&op->out_columns, op->columns.v[i], strlen(op->columns.v[i]));
    if (op->columns.n && op->table) {
        const eddy_strv_t *tc = eddy_etl_table_columns(op->table);
        for (size_t i = 0; i < tc->n; i++)
            if (!eddy_strv_has(&op->out_columns, tc->v[i]))
                eddy_strv_push(&op->out_columns, tc->v[i], strlen(tc->v[i]));
    }
    if (op->json_in && op->json_out == false && !op->out_columns.n) {
        eddy_err_set(err, "etl: CSV output of JSON input needs --columns");
        goto fail;
    }
    const char *rejects = eddy_config_str(cfg, "rejects", "");
    if (rejects[0]) {
        op->rejects_fd = open(rejects, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (op->rejects_fd < 0) {
            eddy_err_set(err, "etl --rejects %s: %s", rejects, strerror(errno));
            goto fail;
        }
    }
    return op;
fail:
    etl_close(op);
    return NULL;
}

static int reject(etl_op_t *op, const char *line, size_t len, const char *reason, eddy_err_t *err)
{
    op->rejected++;
    if (op->rejected_metric)
        (*op->rejected_metric)++;
    eddy_log_limited(&op->limit, EDDY_LOG_WARN, "etl %s[%u]: record dropped: %s (%" PRIu64
                     " so far)", op->stage, op->instance, reason, op->rejected);
    if (op->rejects_fd < 0)
        return 0;
    op->line.len = 0;
    if (eddy_buf_add(&op->line, reason, strcspn(reason, "\t\n")) < 0 ||
        eddy_buf_add(&op->line, "\t", 1) < 0 || eddy_buf_add(&op->line, line, len) < 0 ||
        eddy_buf_add(&op->line, "\n", 1) < 0)
        return eddy_err_set(err, "out of memory");
    /* One write() per line, so lines of concurrent writers never mix. */
    ssize_t n = write(op->rejects_fd, op->line.p, op->line.len);
    if (n != (ssize_t)op->line.len)
        return eddy_err_set(err, "etl --rejects: write failed: %s",
                            n < 0 ? strerror(errno) : "short write");
    return 0;
}

static bool is_null(const eddy_etl_field_t *f)
{
    return f->raw && !strcmp(f->value, "null");
}

/* Cleans rec; -1 with the reason in err when a value is malformed. */
static int clean(etl_op_t *op, eddy_err_t *err)
{
    eddy_etl_record_t *rec = &op->rec;
    for (size_t i = 0; op->trim && i < rec->n; i++) {
        eddy_etl_field_t *f = &rec->fields[i];
        if (f->raw)
            continue;
        const char *start;
        size_t n = eddy_etl_trim(f->value, strlen(f->value), &start);
        memmove(f->value, start, n);
        f->value[n] = '\0';
    }
    for (size_t i = 0; i < op->lower.n + op->upper.n; i++) {
        bool lower = i < op->lower.n;
        eddy_etl_field_t *f = eddy_etl_record_get(rec, lower ? op->lower.v[i]
                                                             : op->upper.v[i - op->lower.n]);
        if (f && !f->raw)
            (lower ? eddy_etl_lower : eddy_etl_upper)(f->value);
    }
    char buf[EDDY_ETL_DATE_MAX];
    for (size_t i = 0; i < op->date.n; i++) {
        eddy_etl_field_t *f = eddy_etl_record_get(rec, op->date.v[i]);
        if (!f || is_null(f))
            continue;
        const char *start;
        if (!eddy_etl_trim(f->value, strlen(f->value), &start)) {
            eddy_etl_record_set(rec, f->name, "null", 4, true);
            continue;
        }
        if (eddy_etl_date(f->value, op->date_only, buf, err) < 0)
            return eddy_err_wrap(err, "field %s", f->name);
        if (eddy_etl_record_set(rec, f->name, buf, strlen(buf), false) < 0)
            return eddy_err_set(err, "out of memory");
    }
    for (size_t i = 0; i < op->number.n; i++) {
        eddy_etl_field_t *f = eddy_etl_record_get(rec, op->number.v[i]);
        if (!f || is_null(f))
            continue;
        const char *start;
        if (!eddy_etl_trim(f->value, strlen(f->value), &start)) {
            eddy_etl_record_set(rec, f->name, "null", 4, true);
            continue;
        }
        char *num = malloc(strlen(f->value) + 3);
        if (!num)
            return eddy_err_set(err, "out of memory");
        int rc = eddy_etl_number(f->value, num, err);
        if (rc == 0 && eddy_etl_record_set(rec, f->name, num, strlen(num), true) < 0)
            rc = eddy_err_set(err, "out of memory");
        free(num);
        if (rc < 0)
            return eddy_err_wrap(err, "field %s", op->number.v[i]);
    }
    return 0;
}

/* Left join with the reference table; -1 with the reason in err when the
 * row is required and missing. */
static int enrich(etl_op_t *op, eddy_err_t *err)
{
    if (!op->table)
        return 0;
    eddy_etl_field_t *k = eddy_etl_record_get(&op->rec, op->enrich_key);
    char *const *values = k && !is_null(k) ? eddy_etl_table_find(op->table, k->value) : NULL;
    if (!values && op->enrich_required)
        return eddy_err_set(err, "no reference row for %s '%.64s'", op->enrich_key,
                            k ? k->value : "");
    const eddy_strv_t *cols = eddy_etl_table_columns(op->table);
    for (size_t i = 0; i < cols->n; i++) {
        const char *v = values ? values[i] : NULL;
        int rc = v ? eddy_etl_record_set(&op->rec, cols->v[i], v, strlen(v), false)
                   : eddy_etl_record_set(&op->rec, cols->v[i], "null", 4, true);
        if (rc < 0)
            return eddy_err_set(err, "out of memory");
    }
    return 0;
}

/* A CSV line equal to the column names (a header; every file of a
 * directory source may start with one). */
static bool is_header(etl_op_t *op, const char *line, size_t len)
{
    eddy_err_t ignored;
    if (!op->header || eddy_etl_csv_split(line, len, &op->split, &ignored) < 0 ||
        op->split.n != op->columns.n)
        return false;
    for (size_t i = 0; i < op->split.n; i++)
        if (strcmp(op->split.v[i], op->columns.v[i]))
            return false;
    return true;
}

static int etl_process(void *self, const eddy_record_t *in, eddy_collector_t *out, eddy_err_t *err)
{
    etl_op_t *op = self;
    size_t len = in->len;
    const char *line = in->data;
    while (len && (line[len - 1] == '\r' || line[len - 1] == '\n'))
        len--;
    const char *start;
    if (!eddy_etl_trim(line, len, &start) || (!op->json_in && is_header(op, line, len)))
        return 0; /* blank lines and headers are not records */
    op->in++;
    eddy_err_t why = {{0}};
    int rc = op->json_in ? eddy_etl_parse_json(line, len, &op->rec, &why)
                         : eddy_etl_parse_csv(line, len, &op->columns, &op->rec, &why);
    if (rc == 0)
        rc = clean(op, &why);
    if (rc == 0)
        rc = enrich(op, &why);
    if (rc < 0)
        return reject(op, line, len, why.msg, err);
    rc = op->json_out ? eddy_etl_write_json(&op->rec, &op->out_columns, &op->out)
                      : eddy_etl_write_csv(&op->rec, &op->out_columns, &op->out);
    if (rc < 0)
        return eddy_err_set(err, "out of memory");
    if (op->out.len > UINT32_MAX)
        return reject(op, line, len, "output record too large", err);
    eddy_record_t rec = eddy_record_make(op->out.p, (uint32_t)op->out.len, 1);
    rec.timestamp = in->timestamp;
    eddy_emit(out, &rec);
    op->written++;
    return 0;
}

static const eddy_operator_ops_t etl_ops = {
    .kind = EDDY_ETL_RECORDS_KIND, .open = etl_open, .process = etl_process, .close = etl_close};
static const eddy_operator_kind_t etl_kind = {.name = EDDY_ETL_RECORDS_KIND, .ops = &etl_ops};

int eddy_etl_records_register(eddy_registry_t *r, eddy_err_t *err)
{
    return eddy_register_operator(r, &etl_kind, err);
}
