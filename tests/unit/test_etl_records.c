/* test_etl_records.c - the etl job's record operator (jobs/etl_records.c)
 * opened from the registry and driven record by record: header lines,
 * CSV columns from a .gz input's first line, cleaning order (trim, case,
 * then dates/numbers, then the lookup), the left join and the required
 * join, empty values, the rejects file's exact lines, and open() errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "jobs/etl_records.h"
#include "plan/registry.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"
#include "tests/unit/leak_check.h"

TestSuite(etl_records, .fini = eddy_test_leak_check);

typedef struct collected {
    eddy_collector_t base;
    char text[4096];
} collected_t;

static void collect(eddy_collector_t *c, const eddy_record_t *rec)
{
    collected_t *self = (collected_t *)c;
    size_t n = strlen(self->text);
    cr_assert_lt(n + rec->len + 2, sizeof self->text);
    memcpy(self->text + n, rec->data, rec->len);
    strcpy(self->text + n + rec->len, "\n");
}

static eddy_registry_t *reg;
static const eddy_operator_ops_t *ops;
static char *dir;

static void setup(void)
{
    eddy_err_t err = {{0}};
    reg = eddy_registry_new();
    cr_assert_eq(eddy_etl_records_register(reg, &err), 0, "%s", err.msg);
    ops = eddy_registry_operator(reg, EDDY_ETL_RECORDS_KIND)->ops;
    dir = eddy_test_mkdtemp("etl-records", &err);
    cr_assert(dir, "%s", err.msg);
}

static void teardown(void)
{
    eddy_registry_destroy(&reg);
    eddy_test_rm_rf(dir);
    free(dir);
    eddy_test_leak_check();
}

static void *open_op(eddy_config_t *cfg, eddy_err_t *err)
{
    eddy_op_context_t ctx = {.job_id = "j", .stage_name = "records", .parallelism = 1,
                             .config = cfg};
    return ops->open(&ctx, err);
}

/* Feeds lines (NULL-terminated) and returns what came out. */
static void feed(void *op, const char *const *lines, collected_t *out)
{
    eddy_err_t err = {{0}};
    out->base.emit = collect;
    out->text[0] = '\0';
    for (size_t i = 0; lines[i]; i++) {
        eddy_record_t rec = eddy_record_make(lines[i], (uint32_t)strlen(lines[i]), 1);
        cr_assert_eq(ops->process(op, &rec, &out->base, &err), 0, "%s", err.msg);
    }
}

Test(etl_records, csv_clean_join_rejects, .init = setup, .fini = teardown)
{
    char ref[600], rej[600];
    snprintf(ref, sizeof ref, "%s/ref.csv", dir);
    snprintf(rej, sizeof rej, "%s/rejects", dir);
    const char *table = "code,country\nSE,Sweden\n";
    cr_assert_eq(eddy_write_file(ref, table, strlen(table)), 0);
    eddy_config_t *cfg = eddy_config_new();
    eddy_config_set_str(cfg, "format", "csv");
    eddy_config_set_str(cfg, "columns", "name,cc,day,n");
    eddy_config_set_bool(cfg, "header", true);
    eddy_config_set_bool(cfg, "trim", true);
    eddy_config_set_str(cfg, "upper", "cc");
    eddy_config_set_str(cfg, "date", "day");
    eddy_config_set_bool(cfg, "date_only", true);
    eddy_config_set_str(cfg, "number", "n");
    eddy_config_set_str(cfg, "enrich_key", "cc");
    eddy_config_set_str(cfg, "enrich_table", ref);
    eddy_config_set_bool(cfg, "enrich_required", true);
    eddy_config_set_str(cfg, "rejects", rej);
    eddy_err_t err = {{0}};
    void *op = open_op(cfg, &err);
    cr_assert(op, "%s", err.msg);
    collected_t out;
    feed(op,
         (const char *[]){"name,cc,day,n", " a , se ,31.12.1999, 1'000.0 \r", "  ",
                          "b,se,,", "c,fi,2000-01-01,1", "d,se,2000-01-01,1e3",
                          "e,se,2000-02-30,1", "f,se", NULL},
         &out);
    cr_assert_str_eq(out.text, "a,SE,1999-12-31,1000,Sweden\nb,SE,,,Sweden\n");
    ops->close(op);
    char *text = eddy_read_file(rej, NULL);
    cr_assert(text);
    cr_assert_str_eq(text, "no reference row for cc 'FI'\tc,fi,2000-01-01,1\n"
                           "field n: not a number: '1e3'\td,se,2000-01-01,1e3\n"
                           "field day: not a date: '2000-02-30'\te,se,2000-02-30,1\n"
                           "expected 4 fields, got 2\tf,se\n");
    free(text);
    eddy_config_destroy(&cfg);
}

Test(etl_records, header_from_gz_input_and_json_output, .init = setup, .fini = teardown)
{
    char in[600];
    snprintf(in, sizeof in, "%s/in.csv.gz", dir);
    gzFile gz = gzopen(in, "wb");
    cr_assert(gz);
    gzputs(gz, "k,\"v w\"\r\nx,1\n");
    gzclose(gz);
    eddy_config_t *cfg = eddy_config_new();
    eddy_config_set_str(cfg, "format", "csv");
    eddy_config_set_str(cfg, "output_format", "json");
    eddy_config_set_bool(cfg, "header", true);
    eddy_config_set_str(cfg, "header_file", in);
    eddy_err_t err = {{0}};
    void *op = open_op(cfg, &err);
    cr_assert(op, "%s", err.msg);
    collected_t out;
    feed(op, (const char *[]){"k,v w", "x,1", "y,\"2,3\"", NULL}, &out);
    cr_assert_str_eq(out.text, "{\"k\":\"x\",\"v w\":\"1\"}\n{\"k\":\"y\",\"v w\":\"2,3\"}\n");
    ops->close(op);
    eddy_config_destroy(&cfg);
}

static void open_fails(eddy_config_t *cfg, const char *needle)
{
    eddy_err_t err = {{0}};
    void *op = open_op(cfg, &err);
    cr_assert_null(op, "opened; expected '%s'", needle);
    cr_assert(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
    eddy_config_destroy(&cfg);
}

Test(etl_records, open_errors, .init = setup, .fini = teardown)
{
    eddy_config_t *c = eddy_config_new();
    eddy_config_set_str(c, "format", "csv");
    open_fails(c, "needs --columns or --header");

    c = eddy_config_new();
    eddy_config_set_str(c, "format", "csv");
    eddy_config_set_str(c, "header_file", "/nonexistent/in.csv");
    open_fails(c, "/nonexistent/in.csv");

    c = eddy_config_new();
    eddy_config_set_str(c, "format", "csv");
    eddy_config_set_str(c, "columns", "a,b");
    eddy_config_set_str(c, "number", "c");
    open_fails(c, "--number c: no such column");

    c = eddy_config_new();
    eddy_config_set_str(c, "format", "json");
    eddy_config_set_str(c, "enrich_key", "a");
    eddy_config_set_str(c, "enrich_table", "/nonexistent/ref.csv");
    open_fails(c, "--enrich-table: /nonexistent/ref.csv");

    c = eddy_config_new();
    eddy_config_set_str(c, "format", "json");
    eddy_config_set_str(c, "rejects", "/nonexistent/dir/rejects");
    open_fails(c, "--rejects /nonexistent/dir/rejects");
}
