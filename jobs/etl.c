/* etl.c - the etl job: source -> parse/filter/transform -> exactly-once part files.
 *
 *   source (file | generator | socket) + flat_map(transform)  ==REBALANCE==>
 *   sink (part files in --output-dir, two-phase commit)
 *
 * Input lines are "user,item,amount"; lines with amount >= --min-amount
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
#include "jobs/line_source.h"
#include "operators/operators.h"
#include "connectors/sources.h"

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

typedef struct csv_line_config {
    uint64_t users, items;
} csv_line_config_t;

/* Line n: "u<user>,i<item>,<amount 0..999>", deterministic in (seed, n);
 * served by the built-in generator source. */
static uint32_t csv_line(const eddy_generator_config_t *cfg, uint64_t n, char *buf, uint32_t size)
{
    const csv_line_config_t *csv = cfg->line_arg;
    uint64_t h = eddy_generator_mix(cfg->seed ^ eddy_generator_mix(n));
    int len = snprintf(buf, size, "u%" PRIu64 ",i%" PRIu64 ",%" PRIu64, h % csv->users,
                       (h >> 20) % csv->items, (h >> 40) % 1000);
    if (len < 0)
        return 0;
    return (uint32_t)len < size ? (uint32_t)len : size - 1;
}

/* ---- job ------------------------------------------------------------------- */

typedef struct etl_config {
    eddy_line_source_t source;
    csv_line_config_t csv;
    int64_t min_amount;
    eddy_flat_map_config_t transform;
    eddy_part_file_config_t output;
} etl_config_t;

static void transform_line(const eddy_record_t *in, eddy_collector_t *out, const void *arg)
{
    const etl_config_t *cfg = arg;
    char buf[4096];
    int n = eddy_etl_transform(in->data, in->len, cfg->min_amount, buf, sizeof buf);
    if (n < 0)
        return;
    eddy_record_t rec = eddy_record_make(buf, (uint32_t)n, 1);
    rec.timestamp = in->timestamp;
    eddy_emit(out, &rec);
}

static int build(eddy_job_graph_t *g, int argc, char **argv, eddy_err_t *err)
{
    const char *input = NULL, *socket = NULL, *output = NULL, *rate = NULL;
    bool generate = false;
    uint32_t parallelism = 2, sink_parallelism = 2;
    uint64_t lines = 1000000, users = 1000, items = 100, seed = 42;
    int64_t min_amount = 0;
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
        EDDY_FLAG_STR("rate", &rate, "R|T:R,..", "cap the source at R lines/s (or a schedule)"),
        EDDY_FLAG_U32("parallelism", &parallelism, 1, EDDY_DEFAULT_MAX_PARALLELISM, "P", "source/transform instances (2)"),
        EDDY_FLAG_U32("sink-parallelism", &sink_parallelism, 1, EDDY_DEFAULT_MAX_PARALLELISM, "P", "sink instances (2)"),
        EDDY_FLAG_END,
    };
    int rc = eddy_flags_parse(flags, argc, argv, NULL, NULL, err);
    if (rc == 1)
        return eddy_err_set(err, "etl: --help is handled by the caller");
    if (rc < 0)
        return eddy_err_wrap(err, "etl");
    if (eddy_line_source_check("etl", input, socket, generate, err) < 0)
        return -1;
    if (!output || !output[0])
        return eddy_err_set(err, "etl needs --output-dir DIR");

    etl_config_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return eddy_err_set(err, "out of memory");
    g->config = cfg;
    g->free_config = free;
    cfg->min_amount = min_amount;
    if (strlen(output) >= sizeof cfg->output.directory)
        return eddy_err_set(err, "--output-dir path is too long");
    strcpy(cfg->output.directory, output);

    const eddy_source_ops_t *source_ops;
    const void *source_cfg;
    uint32_t source_parallelism = parallelism;
    cfg->csv = (csv_line_config_t){users, items};
    cfg->source.generator = (eddy_generator_config_t){
        .lines = lines, .seed = seed, .make_line = csv_line, .line_arg = &cfg->csv};
    if (eddy_line_source_choose(&cfg->source, input, socket, &source_ops, &source_cfg,
                                &source_parallelism, err) < 0)
        return -1;
    cfg->transform.fn = transform_line;
    cfg->transform.arg = cfg;

    int src = eddy_graph_add_source(g, "source", source_parallelism, source_ops, source_cfg, err);
    if (src < 0 || eddy_graph_chain(g, src, &eddy_flat_map_ops, &cfg->transform, err) < 0)
        return -1;
    if (rate && eddy_job_rate_parse(&g->stages[src].rate, rate, err) < 0)
        return eddy_err_wrap(err, "--rate");
    int sink = eddy_graph_add_stage(g, "sink", sink_parallelism, src,
                                    EDDY_EDGE_REBALANCE, NULL, err);
    if (sink < 0)
        return -1;
    return eddy_graph_chain(g, sink, &eddy_part_file_sink_ops, &cfg->output, err);
}

const eddy_job_def_t eddy_etl_job = {
    .name = "etl",
    .summary = "filter and transform user,item,amount lines into exactly-once part files",
    .usage = "  --input FILE | --generate [--lines N --users N --items N --seed N]\n"
             "  | --socket HOST:PORT           where CSV lines user,item,amount come from\n"
             "                                 (exactly one; malformed lines are dropped)\n"
             "  --min-amount N                 keep lines with amount >= N (default 0)\n"
             "  --output-dir DIR               part files, one line user<TAB>item<TAB>2*amount\n"
             "                                 per kept input line (required; use a new or\n"
             "                                 empty directory per job, same path on every\n"
             "                                 worker). Files are published per completed\n"
             "                                 checkpoint as DIR/part-<instance>-<checkpoint>.txt\n"
             "                                 and at the end; DIR/.pending holds the rest.\n"
             "  --rate R | --rate T:R,T:R      cap the source at R lines/s in total\n"
             "  --parallelism P                source/transform instances (default 2)\n"
             "  --sink-parallelism P           sink instances (default 2)\n"
             "exactly once: with --input or --generate every kept line is in the committed\n"
             "part files once, across worker failures and restores. --socket is NOT\n"
             "replayable: lines read after the last checkpoint are lost on a restore\n"
             "(at-most-once for those). wordcount's changelog stdout sink, by contrast, is\n"
             "at-least-once (rows after the last checkpoint are printed again).\n",
    .build = build,
};
