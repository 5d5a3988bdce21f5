/* etl.c - the etl job: source -> parse/filter/transform -> exactly-once part files.
 *
 *   source (file | dir | redis | generator | socket) + flat_map(transform
 *   or etl_records)  ==REBALANCE==>  sink (part files in --output-dir, or
 *   PostgreSQL rows, both two-phase commit; or a Redis stream)
 *
 * With --format csv|json the transform is the etl_records operator
 * (jobs/etl_records.c): records parsed, cleaned, enriched from a reference
 * table and written as CSV or JSON lines, malformed ones rejected. Without
 * it, input lines are "user,item,amount"; lines with amount >= --min-amount
 * become "user<TAB>item<TAB>amount*2" (see eddy_etl_transform); malformed
 * lines (a CSV header too) are dropped. The sink publishes part files only
 * for completed checkpoints (and at the end, once every task is done), so
 * with a replayable source (--input, --generate) the committed files,
 * concatenated, hold each output line exactly once, whatever fails. */
#include "jobs/etl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/flags.h"
#include "connectors/postgres/pg_uri.h"
#include "connectors/sources.h"
#include "connectors/redis/redis_uri.h"
#include "jobs/etl_records.h"
#include "jobs/line_source.h"
#include "operators/etl_record.h"

/* ---- transform ----------------------------------------------------------- */

int eddy_etl_transform(const char *line, size_t len, int64_t min_amount, char *out, size_t size)
{
    if (len && line[len - 1] == '\r')
        len--;
    const char *c1 = memchr(line, ',', len);
    if (!c1)
        return -1;
    const char *c2 = memchr(c1 + 1, ',', len - (size_t)(c1 + 1 - line));
    if (!c2)
        return -1;
    const char *amount = c2 + 1, *end = line + len;
    if (memchr(amount, ',', (size_t)(end - amount)))
        return -1;
    size_t ulen = (size_t)(c1 - line), ilen = (size_t)(c2 - c1 - 1);
    if (ulen == 0 || ilen == 0)
        return -1;
    /* amount: optional '-', 1..18 digits (so doubling cannot overflow) */
    const char *p = amount;
    bool neg = p < end && *p == '-';
    if (neg)
        p++;
    size_t digits = (size_t)(end - p);
    if (digits == 0 || digits > 18)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < digits; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    if (neg)
        v = -v;
    if (v < min_amount)
        return -1;
    int n = snprintf(out, size, "%.*s\t%.*s\t%" PRId64, (int)ulen, line, (int)ilen, c1 + 1, v * 2);
    if (n < 0 || (size_t)n >= size)
        return -1;
    return n;
}

/* Amounts have at most 18 digits (see eddy_etl_transform). */
#define MAX_AMOUNT 999999999999999999ll

/* ---- generated CSV lines ------------------------------------------------- */

/* The generator's config with the CSV line function and its own config. */
typedef struct csv_generator {
    eddy_generator_config_t generator;
    uint64_t users, items;
} csv_generator_t;

/* Line n: "u<user>,i<item>,<amount 0..999>", deterministic in (seed, n);
 * served by the built-in generator source. */
static uint32_t csv_line(const eddy_generator_config_t *cfg, uint64_t n, char *buf, uint32_t size)
{
    const csv_generator_t *csv = cfg->line_arg;
    uint64_t h = eddy_generator_mix(cfg->seed ^ eddy_generator_mix(n));
    int len = snprintf(buf, size, "u%" PRIu64 ",i%" PRIu64 ",%" PRIu64, h % csv->users,
                       (h >> 20) % csv->items, (h >> 40) % 1000);
    if (len < 0)
        return 0;
    return (uint32_t)len < size ? (uint32_t)len : size - 1;
}

static void *csv_generator_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    int64_t lines = eddy_config_int(cfg, "lines", 1000000), seed = eddy_config_int(cfg, "seed", 42);
    int64_t users = eddy_config_int(cfg, "users", 1000), items = eddy_config_int(cfg, "items", 100);
    if (lines < 0 || users < 1 || items < 1) {
        eddy_err_set(err, "'lines' must be >= 0, 'users' and 'items' >= 1");
        return NULL;
    }
    csv_generator_t *c = calloc(1, sizeof *c);
    if (!c) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    c->users = (uint64_t)users;
    c->items = (uint64_t)items;
    c->generator = (eddy_generator_config_t){.lines = (uint64_t)lines, .seed = (uint64_t)seed,
                                             .make_line = csv_line, .line_arg = c};
    return c;
}

/* ---- job ------------------------------------------------------------------- */

static void transform_line(const eddy_record_t *in, eddy_collector_t *out, const eddy_config_t *config)
{
    char buf[4096];
    int n = eddy_etl_transform(in->data, in->len, eddy_config_int(config, "min_amount", 0), buf,
                               sizeof buf);
    if (n < 0)
        return;
    eddy_record_t rec = eddy_record_make(buf, (uint32_t)n, 1);
    rec.timestamp = in->timestamp;
    eddy_emit(out, &rec);
}

/* The record pipeline's flags (--format and what goes with it). */
typedef struct record_flags {
    const char *format, *output_format, *columns, *lower, *upper, *date, *number;
    const char *enrich_key, *enrich_table, *rejects;
    bool header, trim, date_only, enrich_required;
    uint32_t enrich_timeout_s;
} record_flags_t;

static bool format_ok(const char *f)
{
    return !strcmp(f, "csv") || !strcmp(f, "json");
}

/* Checks the record flags and makes the etl_records step's config. */
static eddy_config_t *record_config(const record_flags_t *f, const char *input, eddy_err_t *err)
{
    if (!f->format) {
        const char *given = f->output_format ? "output-format" : f->columns ? "columns"
                            : f->header ? "header" : f->trim ? "trim" : f->lower ? "lower"
                            : f->upper ? "upper" : f->date ? "date" : f->date_only ? "date-only"
                            : f->number ? "number" : f->enrich_key ? "enrich-key"
                            : f->enrich_table ? "enrich-table"
                            : f->enrich_required ? "enrich-required" : f->rejects ? "rejects"
                            : NULL;
        if (given)
            eddy_err_set(err, "etl: --%s needs --format csv|json", given);
        return NULL;
    }
    if (!format_ok(f->format) || (f->output_format && !format_ok(f->output_format))) {
        eddy_err_set(err, "etl: --format and --output-format take csv or json");
        return NULL;
    }
    bool json = !strcmp(f->format, "json");
    const char *out_format = f->output_format ? f->output_format : f->format;
    eddy_strv_t cols = {0}, list = {0};
    const char *lists[][2] = {{"columns", f->columns}, {"lower", f->lower}, {"upper", f->upper},
                              {"date", f->date}, {"number", f->number}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        if (!lists[i][1])
            continue;
        eddy_strv_clear(&list);
        if (eddy_strv_split_list(i == 0 ? &cols : &list, lists[i][1], err) < 0) {
            eddy_err_wrap(err, "etl --%s", lists[i][0]);
            goto fail;
        }
        for (size_t k = 0; !json && cols.n && k < list.n; k++)
            if (!eddy_strv_has(&cols, list.v[k])) {
                eddy_err_set(err, "etl --%s %s: not one of --columns", lists[i][0], list.v[k]);
                goto fail;
            }
    }
    if (f->enrich_key && !json && cols.n && !eddy_strv_has(&cols, f->enrich_key)) {
        eddy_err_set(err, "etl --enrich-key %s: not one of --columns", f->enrich_key);
        goto fail;
    }
    const char *header_file = NULL;
    if (json && f->header) {
        eddy_err_set(err, "etl: --header is for --format csv");
        goto fail;
    }
    if (!json && !cols.n) {
        const char *kind, *path;
        eddy_err_t ignored;
        if (!f->header) {
            eddy_err_set(err, "etl: --format csv needs --columns a,b,c or --header");
            goto fail;
        }
        if (!input || eddy_input_parse(input, &kind, &path, &ignored) < 0 || strcmp(kind, "file")) {
            eddy_err_set(err, "etl: --header without --columns reads the names from --input "
                              "FILE's first line; give --columns for other sources");
            goto fail;
        }
        header_file = path;
    }
    if (json && !strcmp(out_format, "csv") && !cols.n) {
        eddy_err_set(err, "etl: CSV output of JSON input needs --columns (the output columns)");
        goto fail;
    }
    if (!f->enrich_key != !f->enrich_table) {
        eddy_err_set(err, "etl: --enrich-key and --enrich-table go together");
        goto fail;
    }
    if (f->enrich_required && !f->enrich_table) {
        eddy_err_set(err, "etl: --enrich-required needs --enrich-table");
        goto fail;
    }
    if (f->enrich_table && eddy_pg_uri_is(f->enrich_table)) {
        eddy_pg_uri_t uri;
        if (eddy_pg_uri_parse(f->enrich_table, &uri, err) < 0) {
            eddy_err_wrap(err, "etl --enrich-table");
            goto fail;
        }
    }
    eddy_strv_clear(&cols);
    eddy_strv_clear(&list);
    eddy_config_t *c = eddy_config_new();
    const char *strs[][2] = {{"format", f->format}, {"output_format", out_format},
                             {"columns", f->columns}, {"header_file", header_file},
                             {"lower", f->lower}, {"upper", f->upper}, {"date", f->date},
                             {"number", f->number}, {"enrich_key", f->enrich_key},
                             {"enrich_table", f->enrich_table}, {"rejects", f->rejects}};
    int rc = c ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < sizeof strs / sizeof strs[0]; i++)
        if (strs[i][1])
            rc = eddy_config_set_str(c, strs[i][0], strs[i][1]);
    if (rc == 0)
        rc = eddy_config_set_bool(c, "header", f->header) | eddy_config_set_bool(c, "trim", f->trim) |
             eddy_config_set_bool(c, "date_only", f->date_only) |
             eddy_config_set_bool(c, "enrich_required", f->enrich_required) |
             eddy_config_set_int(c, "enrich_timeout_s", f->enrich_timeout_s);
    if (rc < 0) {
        eddy_config_destroy(&c);
        eddy_err_set(err, "etl: a flag value is too long");
    }
    return c;
fail:
    eddy_strv_clear(&cols);
    eddy_strv_clear(&list);
    return NULL;
}

static int build(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    const char *input = NULL, *socket = NULL, *output = NULL, *rate = NULL, *pg = NULL;
    bool generate = false;
    uint32_t parallelism = 2, sink_parallelism = 2;
    uint64_t lines = 1000000, users = 1000, items = 100, seed = 42;
    int64_t min_amount = INT64_MIN; /* outside the flag's range: not given */
    record_flags_t rf = {.enrich_timeout_s = 10};
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("input", &input, "FILE", "read CSV lines from FILE"),
        EDDY_FLAG_STR("socket", &socket, "HOST:PORT", "read lines from a TCP server (not replayable)"),
        EDDY_FLAG_SWITCH("generate", &generate, "generate deterministic CSV lines"),
        EDDY_FLAG_U64("lines", &lines, 0, UINT64_MAX, "N", "lines to generate, 0 = unbounded (1000000)"),
        EDDY_FLAG_U64("users", &users, 1, UINT64_MAX, "N", "distinct generated users (1000)"),
        EDDY_FLAG_U64("items", &items, 1, UINT64_MAX, "N", "distinct generated items (100)"),
        EDDY_FLAG_U64("seed", &seed, 0, UINT64_MAX, "N", "generator seed (42)"),
        EDDY_FLAG_I64("min-amount", &min_amount, -MAX_AMOUNT, MAX_AMOUNT, "N", "keep lines with amount >= N (0)"),
        EDDY_FLAG_STR("output-dir", &output, "DIR", "directory for the part files"),
        EDDY_FLAG_STR("output", &pg, "URI", "postgresql://USER@HOST:PORT/DB?table=T (rows appended) or redis://HOST:PORT/STREAM"),
        EDDY_FLAG_STR("rate", &rate, "R|T:R,..", "cap the source at R lines/s (or a schedule)"),
        EDDY_FLAG_U32("parallelism", &parallelism, 1, EDDY_DEFAULT_MAX_PARALLELISM, "P", "source/transform instances (2)"),
        EDDY_FLAG_U32("sink-parallelism", &sink_parallelism, 1, EDDY_DEFAULT_MAX_PARALLELISM, "P", "sink instances (2)"),
        EDDY_FLAG_STR("format", &rf.format, "csv|json", "parse records as CSV or JSON lines"),
        EDDY_FLAG_STR("output-format", &rf.output_format, "csv|json", "output records as (--format)"),
        EDDY_FLAG_STR("columns", &rf.columns, "A,B,..", "CSV column names (JSON: output fields)"),
        EDDY_FLAG_SWITCH("header", &rf.header, "CSV input starts with a header line"),
        EDDY_FLAG_SWITCH("trim", &rf.trim, "trim blanks around every value"),
        EDDY_FLAG_STR("lower", &rf.lower, "F,..", "lower-case these fields"),
        EDDY_FLAG_STR("upper", &rf.upper, "F,..", "upper-case these fields"),
        EDDY_FLAG_STR("date", &rf.date, "F,..", "dates to ISO 8601 UTC (or reject)"),
        EDDY_FLAG_SWITCH("date-only", &rf.date_only, "--date writes YYYY-MM-DD"),
        EDDY_FLAG_STR("number", &rf.number, "F,..", "normalise numbers (or reject)"),
        EDDY_FLAG_STR("enrich-key", &rf.enrich_key, "F", "the field to look up in --enrich-table"),
        EDDY_FLAG_STR("enrich-table", &rf.enrich_table, "FILE|URI", "reference table (CSV file or postgresql://)"),
        EDDY_FLAG_SWITCH("enrich-required", &rf.enrich_required, "reject records without a reference row"),
        EDDY_FLAG_U32("enrich-timeout", &rf.enrich_timeout_s, 1, 3600, "S", "PostgreSQL reference table timeout (10)"),
        EDDY_FLAG_STR("rejects", &rf.rejects, "FILE", "append rejected records with the reason"),
        EDDY_FLAG_END,
    };
    int rc = eddy_flags_parse(flags, argc, argv, NULL, NULL, err);
    if (rc == 1)
        return eddy_err_set(err, "etl: --help is handled by the caller");
    if (rc < 0)
        return eddy_err_wrap(err, "etl");
    bool min_amount_given = min_amount != INT64_MIN;
    if (!min_amount_given)
        min_amount = 0;
    if (eddy_line_source_check("etl", input, socket, generate, err) < 0)
        return -1;
    err->msg[0] = '\0';
    eddy_config_t *records = record_config(&rf, input, err);
    if (!records && err->msg[0])
        return -1;
    if (records && min_amount_given) {
        eddy_config_destroy(&records);
        return eddy_err_set(err, "etl: --min-amount is for the user,item,amount lines "
                                 "(without --format)");
    }
    bool redis = pg && eddy_redis_uri_is(pg);
    if (pg && output) {
        eddy_config_destroy(&records);
        return eddy_err_set(err, "etl: give --output-dir or --output, not both");
    }
    if (pg && !redis) {
        eddy_pg_uri_t uri;
        if (!eddy_pg_uri_is(pg)) {
            eddy_config_destroy(&records);
            return eddy_err_set(err, "etl: --output takes a postgresql:// or redis:// URI (part "
                                     "files: --output-dir DIR)");
        }
        if (eddy_pg_uri_parse(pg, &uri, err) < 0) {
            eddy_config_destroy(&records);
            return eddy_err_wrap(err, "etl: --output");
        }
    } else if (!pg && (!output || !output[0])) {
        eddy_config_destroy(&records);
        return eddy_err_set(err, "etl needs --output-dir DIR or --output postgresql://... or "
                                 "redis://...");
    }

    eddy_config_t *gen = eddy_config_new();
    if (gen) {
        eddy_config_set_int(gen, "lines", (int64_t)lines);
        eddy_config_set_int(gen, "seed", (int64_t)seed);
        eddy_config_set_int(gen, "users", (int64_t)users);
        eddy_config_set_int(gen, "items", (int64_t)items);
    }
    eddy_line_source_flags_t src = {.input = input, .socket = socket, .generate = generate,
                                    .rate = rate, .parallelism = parallelism,
                                    .generator_kind = "etl_csv_generator", .generator = gen};
    eddy_builder_set_default_parallelism(b, parallelism);
    eddy_stream_t lines_s = eddy_line_source_add(b, &src);
    eddy_stream_t rows;
    if (records) {
        rows = eddy_flat_map(lines_s, "records", EDDY_ETL_RECORDS_KIND, records);
    } else {
        eddy_config_t *tcfg = eddy_config_new();
        if (tcfg)
            eddy_config_set_int(tcfg, "min_amount", min_amount);
        rows = eddy_flat_map(lines_s, "transform", "etl_transform", tcfg);
    }
    rows = eddy_set_parallelism(rows, eddy_line_source_parallelism(&src));
    eddy_config_t *out = eddy_config_new();
    if (redis) {
        eddy_set_parallelism(eddy_job_sink_add(eddy_rebalance(rows), pg, "redis", out),
                             sink_parallelism);
        return eddy_builder_error(b) ? -1 : 0;
    }
    if (pg) {
        /* One row per output line, appended exactly once (two-phase commit). */
        if (out && (eddy_config_set_str(out, "uri", pg) < 0 ||
                    eddy_config_set_str(out, "mode", "append") < 0))
            eddy_builder_fail(b, "--output URI is too long");
        eddy_set_parallelism(eddy_sink(eddy_rebalance(rows), "sink", "postgres", out), sink_parallelism);
        return eddy_builder_error(b) ? -1 : 0;
    }
    if (out && eddy_config_set_str(out, "directory", output) < 0)
        eddy_builder_fail(b, "--output-dir path is too long");
    eddy_set_parallelism(eddy_sink(eddy_rebalance(rows), "sink", "part_file", out), sink_parallelism);
    return eddy_builder_error(b) ? -1 : 0;
}

const eddy_job_kind_t eddy_etl_job = {
    .name = "etl",
    .summary = "ETL: CSV/JSON records cleaned, enriched and written exactly once (or the "
               "user,item,amount transform)",
    .usage = "  --input FILE|URI | --generate [--lines N --users N --items N --seed N]\n"
             "  | --socket HOST:PORT           where the lines come from (exactly one).\n"
             "                                 FILE: a path or file:///PATH (.gz is\n"
             "                                 decompressed), dir:///DIR: every file that\n"
             "                                 appears in DIR, once (unbounded; part files are\n"
             "                                 published per checkpoint), redis://HOST:PORT/S:\n"
             "                                 a Redis stream (field line)\n"
             "  --output-dir DIR               part files, one output line each (use a new or\n"
             "                                 empty directory per job, same path on every\n"
             "                                 worker). Files are published per completed\n"
             "                                 checkpoint as DIR/part-<instance>-<checkpoint>.txt\n"
             "                                 and at the end; DIR/.pending holds the rest.\n"
             "  --output postgresql://USER@HOST:PORT/DB?table=T\n"
             "                                 instead of part files: append each output line\n"
             "                                 as a row (column line) of table T, created if\n"
             "                                 missing; exactly once by PREPARE TRANSACTION per\n"
             "                                 checkpoint (needs max_prepared_transactions > 0)\n"
             "  --output redis://HOST:PORT/STREAM\n"
             "                                 instead: XADD each output line (field line)\n"
             "  --rate R | --rate T:R,T:R      cap the source at R lines/s in total\n"
             "  --parallelism P                source/transform instances (default 2)\n"
             "  --sink-parallelism P           sink instances (default 2)\n"
             "records (with --format; docs/connectors.md, \"The etl job\"):\n"
             "  --format csv|json              parse each line as CSV (RFC 4180 quoting) or a\n"
             "                                 JSON object; blank lines are skipped\n"
             "  --columns A,B,..               CSV: the column names (a line equal to them is a\n"
             "                                 header and skipped); JSON: the output fields,\n"
             "                                 in order (default: each record's own)\n"
             "  --header                       CSV: lines equal to the column names are headers;\n"
             "                                 without --columns the names are the first line\n"
             "                                 of --input FILE\n"
             "  --output-format csv|json       output lines as (default: --format); CSV output\n"
             "                                 of JSON input needs --columns\n"
             "  --trim                         trim blanks around every string value\n"
             "  --lower F,.. / --upper F,..    ASCII lower/upper case of these fields\n"
             "  --date F,..                    dates to UTC YYYY-MM-DDTHH:MM:SSZ; accepts ISO\n"
             "                                 8601 (with zone or UTC), YYYY/MM/DD, DD.MM.YYYY\n"
             "                                 (each optionally with HH:MM[:SS]), and epoch\n"
             "                                 seconds (|n| < 1e11) or milliseconds\n"
             "  --date-only                    --date writes YYYY-MM-DD\n"
             "  --number F,..                  numbers normalised: thousands separators\n"
             "                                 (, . _ ' space) dropped, decimal '.', no leading\n"
             "                                 or trailing zeros (\"1.234,50\" -> 1234.5)\n"
             "  --enrich-key F --enrich-table FILE|postgresql://USER@HOST:PORT/DB?table=T\n"
             "                                 left join with a reference table (CSV file with\n"
             "                                 a header: key column first; or a PostgreSQL\n"
             "                                 table, first column the key), loaded when the\n"
             "                                 job deploys; its other columns are added to each\n"
             "                                 record (empty / null without a match)\n"
             "  --enrich-required              reject records whose key has no reference row\n"
             "  --enrich-timeout S             bound on connecting to and reading a PostgreSQL\n"
             "                                 reference table (default 10)\n"
             "  --rejects FILE                 append each rejected record as reason<TAB>line\n"
             "                                 (at least once: replays after a restore repeat)\n"
             "  Malformed records (a wrong CSV field count, invalid JSON, a date or number\n"
             "  that does not parse, a missing required reference row) are dropped, counted\n"
             "  and logged per instance (a summary line when it ends).\n"
             "without --format: CSV lines user,item,amount; lines with amount >= N become\n"
             "  user<TAB>item<TAB>2*amount, malformed lines are dropped.\n"
             "  --min-amount N                 keep lines with amount >= N (default 0)\n"
             "exactly once: with --input (dir:// too) or --generate every output line is in the\n"
             "committed part files (or table rows) once, across worker failures and restores.\n"
             "--socket is NOT replayable: lines read after the last checkpoint are lost on a\n"
             "restore (at-most-once for those). The Redis sink is at least once.\n",
    .build = build,
};

static const eddy_source_kind_t csv_generator_kind = {
    .name = "etl_csv_generator",
    .ops = &eddy_generator_source_ops,
    .configure = csv_generator_configure,
    .release = free,
};

int eddy_etl_register(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_register_source(r, &csv_generator_kind, err) < 0 ||
        eddy_register_flat_map(r, "etl_transform", transform_line, err) < 0 ||
        eddy_etl_records_register(r, err) < 0)
        return -1;
    return eddy_register_job(r, &eddy_etl_job, err);
}
