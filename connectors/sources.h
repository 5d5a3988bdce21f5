/* sources.h - built-in sources.
 *   file       lines of a file; instance i of p reads the i-th byte range,
 *              aligned to line starts (Hadoop-style splits); the position is
 *              the byte offset of the next line, so it is replayable. A
 *              .gz file is decompressed (line_reader.h) and read whole by
 *              instance 0 (position: the uncompressed offset); the other
 *              instances end at once.
 *   generator  deterministic lines of words from a seeded hash of the line
 *              number; instance i of p makes lines i, i+p, ...; position is
 *              the count of lines made; replayable.
 *   socket     lines from a TCP server (like Spark's socketTextStream);
 *              NOT replayable: after a failure, lost lines are not re-read. */
#ifndef EDDY_CONNECTORS_SOURCES_H
#define EDDY_CONNECTORS_SOURCES_H

#include <stdint.h>

#include "api/operator.h"

typedef struct eddy_file_source_config {
    char path[4096];
} eddy_file_source_config_t;
extern const eddy_source_ops_t eddy_file_source_ops;
/* A replayable input is a readable regular file: a directory, FIFO, socket
 * or device (/dev/zero) cannot be re-read from an offset after a failure,
 * and some never end. The file source's open() checks this on the worker;
 * `eddy local`, whose workers share its file system, checks it up front. */
int eddy_file_source_check(const char *path, eddy_err_t *err);

typedef struct eddy_generator_config eddy_generator_config_t;
/* Writes the text of line n into buf (size > 0); returns its length. */
typedef uint32_t (*eddy_generator_line_fn)(const eddy_generator_config_t *cfg, uint64_t n,
                                           char *buf, uint32_t size);

struct eddy_generator_config {
    uint64_t lines;          /* total over all instances; 0 = unbounded */
    uint32_t words_per_line;
    uint32_t vocabulary;     /* distinct words */
    uint64_t seed;
    /* The share [0, 1) of words that are the one word EDDY_GENERATOR_HOT_WORD
     * (a hot key); 0: none, and the lines are as without the field. */
    double hot_key_share;
    /* Another kind of line (e.g. a job's CSV rows); NULL: eddy_generator_line.
     * line_arg is the function's own configuration. */
    eddy_generator_line_fn make_line;
    const void *line_arg;
};
extern const eddy_source_ops_t eddy_generator_source_ops;
#define EDDY_GENERATOR_HOT_WORD "hot"
/* The default line n: words_per_line words "w<id>" of a skewed vocabulary
 * (with hot_key_share, each word is EDDY_GENERATOR_HOT_WORD with that
 * probability instead). */
uint32_t eddy_generator_line(const eddy_generator_config_t *cfg, uint64_t n, char *buf,
                             uint32_t size);
/* splitmix64: the generators' deterministic mixing of (seed, line number). */
uint64_t eddy_generator_mix(uint64_t x);

typedef struct eddy_socket_source_config {
    char host[256];
    uint16_t port;
} eddy_socket_source_config_t;
extern const eddy_source_ops_t eddy_socket_source_ops;

#endif
