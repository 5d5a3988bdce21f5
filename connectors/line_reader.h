/* line_reader.h - the lines of one file, plain or gzip-compressed, as the
 * file sources emit them: split at '\n' (the '\n' is not part of a line, an
 * empty line is an empty record, a last line without '\n' still counts),
 * value 1, at most EDDY_RECORD_MAX_BYTES each.
 *
 * A name ending in ".gz" is inflated with zlib (concatenated members too);
 * its offsets count uncompressed bytes, so resuming at an offset inflates
 * from the start and skips. Corrupt or truncated gzip data is an error that
 * names the file. Reading a local file is the only I/O; it never waits for
 * anything else. Single thread. */
#ifndef EDDY_CONNECTORS_LINE_READER_H
#define EDDY_CONNECTORS_LINE_READER_H

#include <stdbool.h>
#include <stdint.h>

#include "api/operator.h"

typedef struct eddy_line_reader eddy_line_reader_t;

/* True when path names a gzip file (ends in ".gz"). */
bool eddy_path_is_gz(const char *path);

/* Opens path and skips its first offset (uncompressed) bytes: 0, or an
 * offset eddy_line_reader_offset gave, which starts a line. */
eddy_line_reader_t *eddy_line_reader_open(const char *path, int64_t offset, eddy_err_t *err);
void eddy_line_reader_destroy(eddy_line_reader_t **self_p);

/* Emits up to max lines (*emitted says how many). Returns 1 while more may
 * follow, 0 at the end of the file, -1 on error. */
int eddy_line_reader_poll(eddy_line_reader_t *self, eddy_collector_t *out, uint32_t max,
                          uint32_t *emitted, eddy_err_t *err);
/* The (uncompressed) offset of the next line. */
int64_t eddy_line_reader_offset(const eddy_line_reader_t *self);

#endif
