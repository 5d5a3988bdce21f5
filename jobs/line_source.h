/* line_source.h - the line sources the built-in jobs offer, chosen by the
 * job's flags: exactly one of --input FILE, --socket HOST:PORT, --generate.
 * One place for the choice, its checks and its messages, so every job reads
 * its input the same way. */
#ifndef EDDY_JOBS_LINE_SOURCE_H
#define EDDY_JOBS_LINE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "connectors/sources.h"
#include "plan/graph.h"

/* Bounds of a --rate (schedule): a billion lines/s is far above any source,
 * a year is far beyond any schedule step; larger values are typos. */
#define EDDY_JOB_MAX_RATE 1e9
#define EDDY_JOB_MAX_RATE_AT_S (365.0 * 24 * 3600)

/* The configs of all three sources; the chosen one is read by the graph, so
 * this lives inside the job's config for as long as the graph. */
typedef struct eddy_line_source {
    eddy_file_source_config_t file;
    eddy_socket_source_config_t socket;
    eddy_generator_config_t generator; /* the job fills it for --generate */
} eddy_line_source_t;

/* Checks that exactly one source was named (job names the job in the
 * message) before the job allocates anything. */
int eddy_line_source_check(const char *job, const char *input, const char *socket, bool generate,
                           eddy_err_t *err);
/* Fills src for the named source and points *ops and *config at it. An
 * unreadable --input, or one that is not a regular file (a directory, FIFO,
 * socket or device), is an error here, where the job is built (CLI,
 * coordinator, workers), so a typo stops everything before it starts. The
 * socket source is one connection, read by one instance: *parallelism
 * becomes 1 for it. */
int eddy_line_source_choose(eddy_line_source_t *src, const char *input, const char *socket,
                            const eddy_source_ops_t **ops, const void **config,
                            uint32_t *parallelism, eddy_err_t *err);
/* eddy_rate_parse plus the bounds above, for a job's --rate flag. */
int eddy_job_rate_parse(eddy_rate_schedule_t *rate, const char *text, eddy_err_t *err);
int eddy_parse_host_port(const char *text, char *host, size_t host_size, uint16_t *port,
                         eddy_err_t *err);

#endif
