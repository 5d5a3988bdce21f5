/* wordcount.c - the wordcount job: source -> split -> keyBy(word) -> count -> sink.
 *
 * Words are tokens separated by spaces and tabs (lines by '\n'), kept as
 * they are, so the result equals `tr -s ' \t' '\n' | sort | uniq -c`.
 * With --output the counts are written at end of input as "word<TAB>count"
 * lines in byte order; without it, a Flink-style changelog goes to stdout. */
#include <stdlib.h>
#include <string.h>

#include "common/flags.h"
#include "jobs/line_source.h"
#include "jobs/wordcount.h"
#include "plan/graph.h"
#include "operators/operators.h"
#include "connectors/sources.h"

typedef struct wordcount_config {
    eddy_line_source_t source;
    eddy_flat_map_config_t split;
    eddy_aggregate_config_t count;
    eddy_table_file_config_t output;
} wordcount_config_t;

static void split_words(const eddy_record_t *in, eddy_collector_t *out, const void *arg)
{
    (void)arg;
    const char *p = in->data, *end = in->data + in->len;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *w = p;
        while (p < end && *p != ' ' && *p != '\t')
            p++;
        if (p > w) {
            eddy_record_t rec = eddy_record_make(w, (uint32_t)(p - w), 1);
            rec.timestamp = in->timestamp;
            eddy_emit(out, &rec);
        }
    }
}

/* A line of 4 KB holds at most a few hundred words. */
#define MAX_WORDS_PER_LINE 256
/* A second per word: beyond that the job is a typo, not a demo. */
#define MAX_COST_US 1e6

static uint32_t whole_record_key(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len;
}

static int build(eddy_job_graph_t *g, int argc, char **argv, eddy_err_t *err)
{
    const char *input = NULL, *socket = NULL, *output = NULL, *rate = NULL, *rate_schedule = NULL;
    bool generate = false, cost_sleep = false;
    uint32_t parallelism = 2, max_parallelism = EDDY_DEFAULT_MAX_PARALLELISM;
    uint32_t vocabulary = 10000, words = 8;
    uint64_t lines = 1000000, seed = 42;
    double cost_us = 0;
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("input", &input, "FILE", "read lines from FILE"),
        EDDY_FLAG_STR("socket", &socket, "HOST:PORT", "read lines from a TCP server"),
        EDDY_FLAG_SWITCH("generate", &generate, "generate deterministic lines"),
        EDDY_FLAG_U64("lines", &lines, 0, UINT64_MAX, "N", "lines to generate, 0 = unbounded (1000000)"),
        EDDY_FLAG_U32("vocabulary", &vocabulary, 1, UINT32_MAX, "N", "distinct generated words (10000)"),
        EDDY_FLAG_U32("words-per-line", &words, 1, MAX_WORDS_PER_LINE, "N", "generated words per line (8)"),
        EDDY_FLAG_U64("seed", &seed, 0, UINT64_MAX, "N", "generator seed (42)"),
        EDDY_FLAG_STR("output", &output, "FILE", "write final counts to FILE"),
        EDDY_FLAG_STR("rate", &rate, "R|T:R,..", "cap the source at R lines/s (or a schedule)"),
        EDDY_FLAG_STR("rate-schedule", &rate_schedule, "T:R,..", "same as --rate"),
        EDDY_FLAG_U32("parallelism", &parallelism, 1, EDDY_MAX_KEY_GROUPS, "P", "parallelism of source and count (2)"),
        EDDY_FLAG_U32("max-parallelism", &max_parallelism, 1, EDDY_MAX_KEY_GROUPS, "K", "key groups (128)"),
        EDDY_FLAG_F64("cost-us", &cost_us, 0, MAX_COST_US, "US", "simulated cost per counted word (0)"),
        EDDY_FLAG_SWITCH("cost-sleep", &cost_sleep, "the cost sleeps instead of spinning"),
        EDDY_FLAG_END,
    };
    int rc = eddy_flags_parse(flags, argc, argv, NULL, NULL, err);
    if (rc == 1)
        return eddy_err_set(err, "wordcount: --help is handled by the caller");
    if (rc < 0)
        return eddy_err_wrap(err, "wordcount");
    if (rate && rate_schedule)
        return eddy_err_set(err, "give --rate or --rate-schedule, not both");
    if (rate_schedule)
        rate = rate_schedule;
    if (eddy_line_source_check("wordcount", input, socket, generate, err) < 0)
        return -1;
    if (parallelism > max_parallelism)
        return eddy_err_set(err, "--parallelism: %u is out of range 1..%u (--max-parallelism)",
                            parallelism, max_parallelism);

    wordcount_config_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return eddy_err_set(err, "out of memory");
    g->config = cfg;
    g->free_config = free;
    g->max_parallelism = max_parallelism;

    const eddy_source_ops_t *source_ops;
    const void *source_cfg;
    uint32_t source_parallelism = parallelism;
    cfg->source.generator.lines = lines;
    cfg->source.generator.vocabulary = vocabulary;
    cfg->source.generator.words_per_line = words;
    cfg->source.generator.seed = seed;
    if (eddy_line_source_choose(&cfg->source, input, socket, &source_ops, &source_cfg,
                                &source_parallelism, err) < 0)
        return -1;
    cfg->split.fn = split_words;
    eddy_aggregate_sum_config(&cfg->count, output ? EDDY_EMIT_FINAL : EDDY_EMIT_CHANGELOG);
    cfg->count.cost_us = cost_us;
    cfg->count.cost_sleep = cost_sleep;

    int src = eddy_graph_add_source(g, "source", source_parallelism, source_ops, source_cfg, err);
    if (src < 0 || eddy_graph_chain(g, src, &eddy_flat_map_ops, &cfg->split, err) < 0)
        return -1;
    if (rate && eddy_job_rate_parse(&g->stages[src].rate, rate, err) < 0)
        return eddy_err_wrap(err, rate_schedule ? "--rate-schedule" : "--rate");
    int count = eddy_graph_add_stage(g, "count", parallelism, src, EDDY_EDGE_HASH,
                                     whole_record_key, err);
    if (count < 0 || eddy_graph_chain(g, count, &eddy_aggregate_ops, &cfg->count, err) < 0)
        return -1;
    int sink = eddy_graph_add_stage(g, "sink", 1, count, EDDY_EDGE_GLOBAL, NULL, err);
    if (sink < 0)
        return -1;
    if (output) {
        if (strlen(output) >= sizeof cfg->output.path)
            return eddy_err_set(err, "--output path is too long");
        strcpy(cfg->output.path, output);
        return eddy_graph_chain(g, sink, &eddy_table_file_sink_ops, &cfg->output, err);
    }
    return eddy_graph_chain(g, sink, &eddy_changelog_sink_ops, NULL, err);
}

const eddy_job_def_t eddy_wordcount_job = {
    .name = "wordcount",
    .summary = "count words (space/tab separated) from a file, socket or generator",
    .usage = "  --input FILE | --socket HOST:PORT | --generate [--lines N --vocabulary N\n"
             "  --words-per-line N --seed N]   where lines come from (exactly one)\n"
             "  --output FILE                  final counts as word<TAB>count, byte order;\n"
             "                                 without it a changelog (+I[w, 1]) on stdout\n"
             "  --rate R | --rate T:R,T:R      cap the source at R lines/s (schedule: from T s)\n"
             "  --rate-schedule T:R,T:R        same as --rate\n"
             "  --parallelism P                source and count instances (default 2)\n"
             "  --max-parallelism K            key groups (default 128)\n"
             "  --cost-us US                   simulated per-word cost in count (demos)\n"
             "  --cost-sleep                   the cost sleeps instead of spinning (needs no CPU:\n"
             "                                 for more instances than cores)\n",
    .build = build,
};
