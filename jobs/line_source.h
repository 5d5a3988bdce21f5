/* line_source.h - the line sources the built-in jobs offer, chosen by the
 * job's flags: exactly one of --input FILE|URI, --socket HOST:PORT, --generate
 * (a redis:// URI is a Redis stream, connectors/redis/redis.h).
 * One place for the choice, its checks and its messages, so every job reads
 * its input the same way. Building does no I/O: the job may be built where
 * its input does not exist (a client submitting to a cluster); the file
 * source checks its file where it runs. */
#ifndef EDDY_JOBS_LINE_SOURCE_H
#define EDDY_JOBS_LINE_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "api/stream.h"
#include "common/err.h"
#include "plan/graph.h"

/* Bounds of a --rate (schedule): a billion lines/s is far above any source,
 * a year is far beyond any schedule step; larger values are typos. */
#define EDDY_JOB_MAX_RATE 1e9
#define EDDY_JOB_MAX_RATE_AT_S (365.0 * 24 * 3600)

typedef struct eddy_line_source_flags {
    const char *input;   /* --input FILE | file:///FILE | dir:///DIR */
    const char *socket;  /* --socket HOST:PORT */
    bool generate;       /* --generate */
    const char *rate;    /* --rate R | T:R,..., or NULL */
    uint32_t parallelism;
    const char *uid;     /* the source step's uid (NULL: "source") */
    /* --generate: the generator kind and its configuration (taken). */
    const char *generator_kind;
    eddy_config_t *generator;
} eddy_line_source_flags_t;

/* --input's forms: a path or file:///PATH (the file source; .gz is
 * decompressed) or dir:///PATH (the dir source: every file that appears in
 * the directory, unbounded). Sets *kind ("file" or "dir") and *path (into
 * input); an unknown scheme or a relative URI path is an error. */
int eddy_input_parse(const char *input, const char **kind, const char **path, eddy_err_t *err);
/* Checks that exactly one source was named (job names the job in the
 * message). */
int eddy_line_source_check(const char *job, const char *input, const char *socket, bool generate,
                           eddy_err_t *err);
/* Adds the step "source" for the named source to b (taking f->generator)
 * and returns it; its parallelism is f->parallelism, or 1 for the socket
 * source (one connection, read by one instance): steps chained to it must
 * use eddy_line_source_parallelism(f). Bad flags fail the builder. */
eddy_stream_t eddy_line_source_add(eddy_job_builder_t *b, eddy_line_source_flags_t *f);
/* The job's --output: a redis:// URI becomes the Redis sink (file_config
 * is then dropped), anything else the sink file_kind with file_config. */
eddy_stream_t eddy_job_sink_add(eddy_stream_t s, const char *output, const char *file_kind,
                                eddy_config_t *file_config);
/* Rows as whole lines into a table file at path, byte-sorted and written
 * at end of input: each distinct row is counted in keyed state (the
 * "nexmark_count" aggregate, emit final), so a restore neither loses nor
 * repeats one. combine: pre-aggregate before the shuffle. The steps are
 * collect_uid and sink_uid. */
void eddy_job_rows_table_add(eddy_stream_t rows, const char *path, bool combine,
                             const char *collect_uid, const char *sink_uid);
/* Rows of an append-only stream (never retracted or updated: projections,
 * filters, window results, joins) as whole lines into path, byte-sorted,
 * exactly once: the part file sink (operators.h, two-phase commit) writes
 * each instance's rows into part files in the hidden directory
 * "<dir of path>/.<name of path>.parts", and at the job's end merges the
 * committed parts into path (an external merge in bounded memory, on the
 * snapshot writer thread). No keyed state per row. chained: rows come
 * from a stage that is not keyed (the sink joins it, no shuffle); else the
 * sink reads them round robin, so the keyed stage stays rescalable. */
void eddy_job_rows_merged_add(eddy_stream_t rows, const char *path, bool chained,
                              const char *sink_uid);
uint32_t eddy_line_source_parallelism(const eddy_line_source_flags_t *f);
int eddy_parse_host_port(const char *text, char *host, size_t host_size, uint16_t *port,
                         eddy_err_t *err);
/* eddy_rate_parse within EDDY_JOB_MAX_RATE and EDDY_JOB_MAX_RATE_AT_S. */
int eddy_job_rate_parse(eddy_rate_schedule_t *rate, const char *text, eddy_err_t *err);

#endif
