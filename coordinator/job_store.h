/* job_store.h - the job record and checkpoint metadata in the metadata store.
 *
 * Keys: /eddy/jobs/JOB (the job record), /eddy/jobs/JOB/counters and
 * /eddy/jobs/JOB/checkpoints/ID
 * (20 digits; one per complete checkpoint, written when it completes: that
 * write is the checkpoint's commit point). This file is the ONE writer and
 * ONE reader of both JSON documents; job_store.c also turns a coordinator's
 * job into a record and, at startup, records back into jobs. */
#ifndef EDDY_COORDINATOR_JOB_STORE_H
#define EDDY_COORDINATOR_JOB_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "net/proto.h"

#define COORD_KEY_MAX 256

typedef struct coord_job_record {
    char id[EDDY_NAME_MAX];
    char job[EDDY_NAME_MAX];     /* registered job builder */
    char state[16];
    uint32_t argc;
    char **argv;                 /* owned */
    uint32_t n_plugins;
    char **plugins;              /* owned: content hashes of the plugins the job needs */
    char *plan;                  /* owned: the serialised plan it was submitted with */
    size_t plan_len;
    uint32_t n_stages;
    char stage[EDDY_MAX_STAGES][EDDY_NAME_MAX];
    uint32_t parallelism[EDDY_MAX_STAGES];
    uint64_t last_checkpoint;    /* last complete checkpoint the coordinator knew, 0 none */
    int64_t submitted_ms;
    uint32_t epoch;              /* highest epoch ever deployed (or about to be) */
    uint32_t restarts;
    eddy_guarantee_t guarantee;  /* "guarantee" in the JSON; absent: exactly-once */
    int64_t ended_ms;            /* wall clock when it ended, 0: not ended (or unknown) */
    char *counters;              /* owned: the job's counters as compact JSON (counters.h), NULL none */
    /* "savepoint": the location of the job's last savepoint (absent: none) */
    char savepoint[EDDY_STORAGE_URI_MAX];
} coord_job_record_t;

/* JSON {"stage", "instance", "position", "state"?}: state is the source's
 * write_state bytes in base64 (at most EDDY_SOURCE_STATE_MAX decoded), absent
 * when it has none; records written before it existed stay readable. */
typedef struct coord_position_record {
    char stage[EDDY_NAME_MAX];
    uint32_t instance;
    int64_t position;
    char *state;                 /* owned by a parsed record, NULL: none */
    uint32_t state_len;
} coord_position_record_t;

/* A task finished before the checkpoint (FLIP-147): restored as finished. */
typedef struct coord_finished_record {
    char stage[EDDY_NAME_MAX];
    uint32_t instance;
} coord_finished_record_t;

typedef struct coord_checkpoint_record {
    uint64_t id;
    uint32_t epoch;
    int64_t time_ms;
    double duration_ms;
    uint64_t bytes, files;
    uint32_t n_positions;
    coord_position_record_t *positions; /* owned */
    uint32_t n_finished;                /* "finished" (absent: none) */
    coord_finished_record_t *finished;  /* owned by a parsed record */
    uint32_t n_stages;                  /* parallelism at the checkpoint */
    char stage[EDDY_MAX_STAGES][EDDY_NAME_MAX];
    uint32_t parallelism[EDDY_MAX_STAGES];
    char snapshot_dir[1024];
} coord_checkpoint_record_t;

void coord_job_key(char *buf, size_t size, const char *job_id);
void coord_checkpoint_key(char *buf, size_t size, const char *job_id, uint64_t checkpoint);
/* "/eddy/jobs/JOB/checkpoints/" */
void coord_checkpoint_prefix(char *buf, size_t size, const char *job_id);
/* "/eddy/jobs/JOB/counters": the job's counters (counters.h), saved every second */
void coord_counters_key(char *buf, size_t size, const char *job_id);

/* Compact JSON with sorted keys, malloc'd; NULL when out of memory. */
char *coord_job_record_encode(const coord_job_record_t *r);
/* 0, or -1 with err naming what is missing or malformed; *r is then cleared. */
int coord_job_record_parse(const char *text, coord_job_record_t *r, eddy_err_t *err);
void coord_job_record_clear(coord_job_record_t *r);

char *coord_checkpoint_record_encode(const coord_checkpoint_record_t *r);
int coord_checkpoint_record_parse(const char *text, coord_checkpoint_record_t *r, eddy_err_t *err);
void coord_checkpoint_record_clear(coord_checkpoint_record_t *r);

#endif
