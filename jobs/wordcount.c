/* wordcount.c - the wordcount job: source -> split -> keyBy(word) -> count -> sink.
 *
 * Words are tokens separated by spaces and tabs (lines by '\n'), kept as
 * they are, so the result equals `tr -s ' \t' '\n' | sort | uniq -c`.
 * With --output the counts are written at end of input as "word<TAB>count"
 * lines in byte order; without it, a Flink-style changelog goes to stdout. */
#include <stdlib.h>
#include <string.h>

#include "common/flags.h"
#include "connectors/postgres/pg_uri.h"
#include "connectors/redis/redis_uri.h"
#include "jobs/line_source.h"
#include "jobs/wordcount.h"

static void split_words(const eddy_record_t *in, eddy_collector_t *out, const eddy_config_t *config)
{
    (void)config;
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

static int build(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    const char *input = NULL, *socket = NULL, *output = NULL, *rate = NULL, *rate_schedule = NULL;
    bool generate = false, cost_sleep = false, no_combine = false;
    uint32_t parallelism = 2, max_parallelism = EDDY_DEFAULT_MAX_PARALLELISM, source_parallelism = 0;
    uint32_t vocabulary = 10000, words = 8;
    uint64_t lines = 1000000, seed = 42;
    double cost_us = 0, hot_key_share = 0;
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("input", &input, "FILE|URI", "read lines from FILE or redis://HOST:PORT/STREAM"),
        EDDY_FLAG_STR("socket", &socket, "HOST:PORT", "read lines from a TCP server"),
        EDDY_FLAG_SWITCH("generate", &generate, "generate deterministic lines"),
        EDDY_FLAG_U64("lines", &lines, 0, UINT64_MAX, "N", "lines to generate, 0 = unbounded (1000000)"),
        EDDY_FLAG_U32("vocabulary", &vocabulary, 1, UINT32_MAX, "N", "distinct generated words (10000)"),
        EDDY_FLAG_U32("words-per-line", &words, 1, MAX_WORDS_PER_LINE, "N", "generated words per line (8)"),
        EDDY_FLAG_U64("seed", &seed, 0, UINT64_MAX, "N", "generator seed (42)"),
        EDDY_FLAG_F64("hot-key-share", &hot_key_share, 0, 0.99, "F",
                      "share of generated words that are the word 'hot' (0)"),
        EDDY_FLAG_STR("output", &output, "FILE|URI", "write final counts to FILE, redis://HOST:PORT/STREAM or postgresql://..."),
        EDDY_FLAG_STR("rate", &rate, "R|T:R,..", "cap the source at R lines/s (or a schedule)"),
        EDDY_FLAG_STR("rate-schedule", &rate_schedule, "T:R,..", "same as --rate"),
        EDDY_FLAG_U32("parallelism", &parallelism, 1, EDDY_MAX_KEY_GROUPS, "P", "parallelism of source and count (2)"),
        EDDY_FLAG_U32("source-parallelism", &source_parallelism, 1, EDDY_MAX_KEY_GROUPS, "S", "parallelism of the source alone (default --parallelism; a savepoint resumes at the same)"),
        EDDY_FLAG_U32("max-parallelism", &max_parallelism, 1, EDDY_MAX_KEY_GROUPS, "K", "key groups (128)"),
        EDDY_FLAG_F64("cost-us", &cost_us, 0, MAX_COST_US, "US", "simulated cost per counted word (0)"),
        EDDY_FLAG_SWITCH("cost-sleep", &cost_sleep, "the cost sleeps instead of spinning"),
        EDDY_FLAG_SWITCH("no-local-aggregation", &no_combine,
                         "shuffle every word (no pre-aggregation before the shuffle)"),
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
    bool to_postgres = eddy_pg_uri_is(output);
    if (to_postgres) {
        eddy_pg_uri_t uri;
        if (eddy_pg_uri_parse(output, &uri, err) < 0)
            return eddy_err_wrap(err, "wordcount: --output");
    }
    const char *input_kind = NULL, *input_path;
    eddy_redis_uri_t redis_in;
    if (input && output && !to_postgres && eddy_redis_uri_is(input) &&
        eddy_redis_uri_parse(input, &redis_in, err) == 0 && !redis_in.bounded)
        return eddy_err_set(err, "--output is written at the end of the input, which an unbounded "
                                 "redis:// input never reaches; add ?bounded=latest, or leave "
                                 "--output out and follow the changelog on stdout");
    if (input && output && !to_postgres && !eddy_redis_uri_is(input) &&
        eddy_input_parse(input, &input_kind, &input_path, err) == 0 &&
        !strcmp(input_kind, "dir"))
        return eddy_err_set(err, "--output is written at the end of the input, which a dir:// "
                                 "input never reaches; leave it out and follow the changelog "
                                 "on stdout");
    if (parallelism > max_parallelism)
        return eddy_err_set(err, "--parallelism: %u is out of range 1..%u (--max-parallelism)",
                            parallelism, max_parallelism);

    eddy_builder_set_max_parallelism(b, max_parallelism);
    eddy_builder_set_default_parallelism(b, parallelism);
    eddy_config_t *gen = eddy_config_new();
    if (gen) {
        eddy_config_set_int(gen, "lines", (int64_t)lines);
        eddy_config_set_int(gen, "vocabulary", vocabulary);
        eddy_config_set_int(gen, "words_per_line", words);
        eddy_config_set_int(gen, "seed", (int64_t)seed);
        if (hot_key_share > 0) /* absent otherwise: plans stay as they were */
            eddy_config_set_double(gen, "hot_key_share", hot_key_share);
    }
    eddy_line_source_flags_t src = {.input = input, .socket = socket, .generate = generate,
                                    .rate = rate,
                                    .parallelism = source_parallelism ? source_parallelism : parallelism,
                                    .generator_kind = "generator", .generator = gen};
    eddy_stream_t lines_s = eddy_line_source_add(b, &src);
    eddy_stream_t words_s = eddy_set_parallelism(eddy_flat_map(lines_s, "split", "split_words", NULL),
                                                 eddy_line_source_parallelism(&src));
    eddy_config_t *sum = eddy_config_new();
    if (sum) {
        /* A table is upserted per checkpoint as counts change; a file is
         * written once at the end. */
        eddy_config_set_str(sum, "emit", output && !to_postgres ? "final" : "changelog");
        eddy_config_set_double(sum, "cost_us", cost_us);
        eddy_config_set_bool(sum, "cost_sleep", cost_sleep);
        eddy_config_set_bool(sum, "combine", !no_combine);
    }
    eddy_stream_t counts = eddy_aggregate(eddy_key_by(words_s, "whole_record"), "count", "sum", sum);
    if (to_postgres) {
        eddy_config_t *out = eddy_config_new();
        if (out && (eddy_config_set_str(out, "uri", output) < 0 ||
                    eddy_config_set_str(out, "mode", "upsert") < 0 ||
                    eddy_config_set_str(out, "key_column", "word") < 0 ||
                    eddy_config_set_str(out, "value_column", "count") < 0))
            eddy_builder_fail(b, "--output URI is too long");
        eddy_sink(eddy_global(counts), "sink", "postgres", out);
    } else if (output) {
        eddy_config_t *out = eddy_config_new();
        if (out && eddy_config_set_str(out, "path", output) < 0)
            eddy_builder_fail(b, "--output path is too long");
        eddy_job_sink_add(eddy_global(counts), output, "table_file", out);
    } else {
        eddy_sink(eddy_global(counts), "sink", "changelog", NULL);
    }
    return eddy_builder_error(b) ? -1 : 0;
}

const eddy_job_kind_t eddy_wordcount_job = {
    .name = "wordcount",
    .summary = "count words (space/tab separated) from a file, socket or generator",
    .usage = "  --input FILE | --socket HOST:PORT | --generate [--lines N --vocabulary N\n"
             "  --words-per-line N --seed N --hot-key-share F]\n"
             "                                 where lines come from (exactly one); FILE is a\n"
             "                                 path or file:///PATH (.gz is decompressed), or\n"
             "                                 dir:///DIR: every file that appears in DIR,\n"
             "                                 once, in name order (unbounded: no --output,\n"
             "                                 stop it with Ctrl-C or eddy cancel)\n"
             "  --input redis://HOST:PORT/STREAM[,S2|PATTERN*][?bounded=latest&group=G]\n"
             "                                 a Redis stream's entries (field line), replayable\n"
             "  --output FILE                  final counts as word<TAB>count, byte order;\n"
             "                                 without it a changelog (+I[w, 1]) on stdout\n"
             "  --output redis://HOST:PORT/STREAM  XADD each final count (line=word, value=count;\n"
             "                                 at least once)\n"
             "  --output postgresql://USER@HOST:PORT/DB?table=T\n"
             "                                 upsert counts into table T (word text primary\n"
             "                                 key, count bigint), created if missing; exactly\n"
             "                                 once by PREPARE TRANSACTION per checkpoint and\n"
             "                                 COMMIT PREPARED when it completes (needs the\n"
             "                                 server's max_prepared_transactions > 0)\n"
             "  --rate R | --rate T:R,T:R      cap the source at R lines/s (schedule: from T s)\n"
             "  --rate-schedule T:R,T:R        same as --rate\n"
             "  --parallelism P                source and count instances (default 2)\n"
             "  --source-parallelism S         source instances alone (default P)\n"
             "  --max-parallelism K            key groups (default 128)\n"
             "  --cost-us US                   simulated per-word cost in count (demos)\n"
             "  --cost-sleep                   the cost sleeps instead of spinning (needs no CPU:\n"
             "                                 for more instances than cores)\n"
             "  --no-local-aggregation         with --output, shuffle every word instead of\n"
             "                                 per-instance partial counts (local-global)\n"
             "  --hot-key-share F              with --generate, each word is 'hot' with\n"
             "                                 probability F (a hot key; 0 <= F <= 0.99)\n",
    .build = build,
};

int eddy_wordcount_register(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_register_flat_map(r, "split_words", split_words, err) < 0)
        return -1;
    return eddy_register_job(r, &eddy_wordcount_job, err);
}
