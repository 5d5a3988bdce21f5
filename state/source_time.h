/* source_time.h - a source instance's event-time progress in a checkpoint:
 * the watermark it had emitted and the largest timestamp it had seen when
 * its barrier went out. A restored source resumes from both, so its first
 * watermark is never below one it sent before the checkpoint and nothing
 * downstream sees event time go backwards (runtime/task.c).
 *
 * The snapshot store keeps it as "key group" <instance> of the source
 * stage's directory (ROOT/JOB/chk-N/<source stage>/kg-<instance>.snap): a
 * source stage has no keyed state, so the names are free, and the file is
 * written and made durable by the snapshot writer like any key group,
 * before the source's ACK goes out.
 *
 * Encoding (msgpack): ["eddy-src-time", 1, watermark (int), max_timestamp
 * (int)]; the decoder bounds-checks everything. */
#ifndef EDDY_STATE_SOURCE_TIME_H
#define EDDY_STATE_SOURCE_TIME_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct eddy_source_time {
    int64_t watermark;
    int64_t max_timestamp;
} eddy_source_time_t;

/* Malloc'd bytes (NULL when out of memory). */
char *eddy_source_time_encode(const eddy_source_time_t *st, size_t *len);
/* -1 with err when data is not such a record. */
int eddy_source_time_decode(const void *data, size_t len, eddy_source_time_t *st, eddy_err_t *err);

#endif
