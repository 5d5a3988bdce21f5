/* savepoint_manifest.h - what a savepoint holds, as the JSON document
 * LOCATION/savepoint.json (docs/savepoints.md): its encoder and decoder,
 * pure (no I/O; state/savepoint.h reads and writes it).
 *
 * A savepoint is a full checkpoint written under its own location: its
 * state files are LOCATION/JOB/chk-ID/STAGE/kg-KG.snap (keyed stages, one
 * per key group) and LOCATION/JOB/chk-ID/SOURCE/kg-I.snap (a source
 * instance's event time), each a snapshot file with its own 24-byte header
 * (length and XXH64 of the payload, state/snapshot_store.h). The manifest
 * names them all with their sizes, so a missing or truncated file is found
 * without reading state, and every key is relative: the directory can be
 * moved or copied elsewhere.
 *
 * Contract of the document (format_version 1):
 *   {"format_version": 1, "job": "wordcount", "checkpoint": 7,
 *    "plan_fingerprint": "0123456789abcdef", "max_parallelism": 128,
 *    "created_ms": 1700000000000, "stopped": true,
 *    "sinks_committed": 7,             // checkpoint two-phase-commit sinks
 *                                      // committed up to (0: not committed)
 *    "operators": [{"uid": "count", "keyed": true, "parallelism": 2,
 *                   "kinds": ["count"], "source": false,
 *                   "key_groups": [[0, 64], [64, 128]],
 *                   "states": [{"name": "seen", "version": 2}]}],
 *                   // named states (api/state.h) of the stage's operators,
 *                   // with their schema versions; absent in savepoints
 *                   // written before named state (none recorded)
 *    "positions": [{"operator": "source", "instance": 0, "position": 1234,
 *                   "state": "BASE64"}],      // state absent when none
 *    "files": [{"key": "wordcount/chk-7/count/kg-0.snap", "size": 120}]}
 * A document whose format_version is above EDDY_SAVEPOINT_FORMAT_VERSION
 * is refused ("newer format"); unknown members are ignored. Every length is
 * bounded by the limits below. An operator's uid is the name of its stage
 * (the uid of the stage's first step), the name its state files are under. */
#ifndef EDDY_STATE_SAVEPOINT_MANIFEST_H
#define EDDY_STATE_SAVEPOINT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EDDY_SAVEPOINT_FORMAT_VERSION 1u
#define EDDY_SAVEPOINT_MANIFEST_NAME "savepoint.json"
#define EDDY_SAVEPOINT_NAME_MAX 64        /* uids, kinds, the job (incl. NUL) */
#define EDDY_SAVEPOINT_MAX_OPERATORS 64
#define EDDY_SAVEPOINT_MAX_KINDS 8        /* chained operators of one stage */
#define EDDY_SAVEPOINT_MAX_INSTANCES 32768
#define EDDY_SAVEPOINT_MAX_FILES 4194304
#define EDDY_SAVEPOINT_KEY_MAX 512
#define EDDY_SAVEPOINT_STATE_MAX 65536    /* a source's state bytes */
#define EDDY_SAVEPOINT_MAX_STATES 32      /* named states of one stage */

typedef struct eddy_savepoint_operator {
    char uid[EDDY_SAVEPOINT_NAME_MAX];
    bool keyed, source;
    uint32_t parallelism;
    uint32_t n_kinds;
    char kinds[EDDY_SAVEPOINT_MAX_KINDS][EDDY_SAVEPOINT_NAME_MAX];
    uint32_t n_states;
    struct {
        char name[EDDY_SAVEPOINT_NAME_MAX];
        uint32_t version;
    } states[EDDY_SAVEPOINT_MAX_STATES];
} eddy_savepoint_operator_t;

typedef struct eddy_savepoint_position {
    char op[EDDY_SAVEPOINT_NAME_MAX];
    uint32_t instance;
    int64_t position;
    char *state; /* owned; NULL when none */
    uint32_t state_len;
} eddy_savepoint_position_t;

typedef struct eddy_savepoint_file {
    char *key; /* owned, relative to the location */
    uint64_t size;
} eddy_savepoint_file_t;

typedef struct eddy_savepoint_manifest {
    uint32_t format_version;
    char job[EDDY_SAVEPOINT_NAME_MAX];
    uint64_t checkpoint;
    uint64_t plan_fingerprint;
    uint32_t max_parallelism;
    int64_t created_ms;
    bool stopped;
    uint64_t sinks_committed;
    uint32_t n_operators;
    eddy_savepoint_operator_t *operators;
    uint32_t n_positions;
    eddy_savepoint_position_t *positions;
    uint32_t n_files;
    eddy_savepoint_file_t *files;
} eddy_savepoint_manifest_t;

/* Malloc'd NUL-terminated JSON (*len without the NUL), NULL when out of memory. */
char *eddy_savepoint_manifest_encode(const eddy_savepoint_manifest_t *m, size_t *len);
/* Fills m (eddy_savepoint_manifest_clear frees it, also after a failure) or
 * returns -1 with err saying what is wrong (not JSON, a missing or bad
 * member, a newer format, a limit exceeded). */
int eddy_savepoint_manifest_decode(const char *data, size_t len, eddy_savepoint_manifest_t *m,
                                   eddy_err_t *err);
void eddy_savepoint_manifest_clear(eddy_savepoint_manifest_t *m);
/* The operator named uid, or NULL. */
const eddy_savepoint_operator_t *eddy_savepoint_manifest_operator(const eddy_savepoint_manifest_t *m,
                                                                  const char *uid);
/* Appends a file (key copied). 0, or -1 when out of memory. */
int eddy_savepoint_manifest_add_file(eddy_savepoint_manifest_t *m, const char *key, uint64_t size);

#endif
