/* dataplane.h - codecs of the data-plane messages between operator instances.
 *
 * Every message names its channel: (job, epoch, source stage/instance,
 * destination stage/instance). Messages of an older epoch are stale (the
 * job was rescaled or restored meanwhile) and are dropped by the receiver.
 *   DATA    [32, job, epoch, ss, si, ds, di, n, ingest, kind, value, ts, bytes, ...]
 *           a batch: n records, four elements each; ingest is when the
 *           oldest record in it (or the one it derives from) was read by
 *           its source, wall clock in microseconds, 0 unknown (record
 *           latency, runtime/task.c). A batch without ingest (8 + 4n
 *           elements) still decodes, as ingest 0.
 *   BARRIER [33, job, epoch, ss, si, ds, di, checkpoint]
 *   EOS     [34, job, epoch, ss, si, ds, di]            end of this channel
 *   CREDIT  [35, job, epoch, ss, si, ds, di, batches]   receiver -> sender
 *   WATERMARK [36, job, epoch, ss, si, ds, di, watermark, idle]
 *           event time: no record with a timestamp <= watermark follows on
 *           this channel (int64 ms); idle 1 says the sender has nothing to
 *           send for now and is to be left out of the receiver's minimum
 *           until it sends again (Flink's WatermarkStatus.IDLE)
 *   HANDOFF [37, job, epoch, ss, si, ds, di, version, to, [kg, ...]]
 *           fluid migration (docs/architecture.md): from here on this sender
 *           routes the listed key groups (at most EDDY_HANDOFF_MAX_GROUPS)
 *           to instance `to` of the destination stage by routing version
 *           `version`; nothing of theirs follows on this channel
 *   STATE_CHUNK [38, job, epoch, ss, si, ds, di, version, kg, offset, total,
 *           xxh64, bytes, sent_us?]  the old owner (ss = ds, si) sends one
 *           key group's serialised state to the new owner (di) in chunks:
 *           bytes are [offset, offset + len) of the group's `total` bytes,
 *           xxh64 is XXH64(bytes, seed 0); the receiver checks both (checks
 *           here: offset + len <= total, len <= EDDY_STATE_CHUNK_MAX).
 *           sent_us (optional, int): wall-clock microseconds when the old
 *           owner began serialising the step, so the new owner can time the
 *           copy itself (absent or 0: unknown)
 * Flow control is credit based (as Flink's): a sender may have at most its
 * credit of DATA batches unconsumed per channel, so no queue and no ZeroMQ
 * high-water mark is ever exceeded and nothing is dropped. */
#ifndef EDDY_NET_DATAPLANE_H
#define EDDY_NET_DATAPLANE_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "net/mpcodec.h"
#include "net/record.h"

typedef enum eddy_data_type {
    EDDY_DATA_BATCH = 32,
    EDDY_DATA_BARRIER = 33,
    EDDY_DATA_EOS = 34,
    EDDY_DATA_CREDIT = 35,
    EDDY_DATA_WATERMARK = 36,
    EDDY_DATA_HANDOFF = 37,
    EDDY_DATA_STATE_CHUNK = 38,
} eddy_data_type_t;

#define EDDY_HANDOFF_MAX_GROUPS 1024u
#define EDDY_STATE_CHUNK_MAX (1024u * 1024u)

typedef struct eddy_channel_id {
    uint32_t job, epoch;
    uint32_t src_stage, src_instance;
    uint32_t dst_stage, dst_instance;
} eddy_channel_id_t;

/* Builds one DATA batch. The count field is patched when the batch is
 * finished, so records are appended without knowing the total up front. */
typedef struct eddy_batch_writer {
    msgpack_sbuffer buf;
    msgpack_packer pk;
    uint32_t records;
    size_t count_offset;
    /* Wall-clock microseconds the oldest record's input was read by its
     * source (0: unknown); the writer's user keeps it, finish encodes it. */
    int64_t ingest_us;
} eddy_batch_writer_t;

void eddy_batch_writer_init(eddy_batch_writer_t *w);
void eddy_batch_writer_free(eddy_batch_writer_t *w);
void eddy_batch_writer_begin(eddy_batch_writer_t *w, const eddy_channel_id_t *ch);
void eddy_batch_writer_add(eddy_batch_writer_t *w, const eddy_record_t *rec);
static inline size_t eddy_batch_writer_bytes(const eddy_batch_writer_t *w) { return w->buf.size; }
/* Returns the encoded batch (caller frees) and leaves the writer empty. */
char *eddy_batch_writer_finish(eddy_batch_writer_t *w, size_t *len);

/* Small messages. */
char *eddy_barrier_encode(const eddy_channel_id_t *ch, uint64_t checkpoint, size_t *len);
char *eddy_eos_encode(const eddy_channel_id_t *ch, size_t *len);
char *eddy_credit_encode(const eddy_channel_id_t *ch, uint32_t batches, size_t *len);
char *eddy_watermark_encode(const eddy_channel_id_t *ch, int64_t watermark, bool idle, size_t *len);
/* NULL when n exceeds EDDY_HANDOFF_MAX_GROUPS. */
char *eddy_handoff_encode(const eddy_channel_id_t *ch, uint64_t version, uint32_t to,
                          const uint32_t *kgs, uint32_t n, size_t *len);
/* One chunk of key group kg's `total` serialised bytes, starting at offset;
 * the checksum is computed here. NULL when len exceeds EDDY_STATE_CHUNK_MAX
 * or the chunk does not lie within total. */
char *eddy_state_chunk_encode(const eddy_channel_id_t *ch, uint64_t version, uint32_t kg,
                              uint64_t offset, uint64_t total, const void *bytes, uint32_t len,
                              size_t *out_len);
/* The same with the step's start stamp (sent_us; 0 leaves it out). */
char *eddy_state_chunk_encode_stamped(const eddy_channel_id_t *ch, uint64_t version, uint32_t kg,
                                      uint64_t offset, uint64_t total, const void *bytes,
                                      uint32_t len, int64_t sent_us, size_t *out_len);
/* XXH64 (seed 0) of a chunk's bytes, as STATE_CHUNK carries it. */
uint64_t eddy_state_chunk_checksum(const void *bytes, size_t len);

/* A decoded data-plane message. For DATA, records are read one by one with
 * eddy_data_next_record; they point into the caller's buffer, which must
 * outlive the reader. */
typedef struct eddy_data_msg {
    eddy_data_type_t type;
    eddy_channel_id_t channel;
    uint64_t checkpoint;  /* BARRIER */
    uint32_t credit;      /* CREDIT */
    int64_t watermark;    /* WATERMARK */
    bool idle;            /* WATERMARK */
    uint64_t version;     /* HANDOFF, STATE_CHUNK: routing version of the step */
    uint32_t handoff_to;  /* HANDOFF: the groups' new owner */
    uint32_t n_kgs;       /* HANDOFF */
    uint32_t *kgs;        /* HANDOFF: owned, freed by eddy_data_msg_close */
    uint32_t kg;          /* STATE_CHUNK */
    uint64_t offset, total, checksum; /* STATE_CHUNK */
    const char *chunk;    /* STATE_CHUNK: points into the message's bytes */
    int64_t sent_us;      /* STATE_CHUNK: the step's start at the old owner, 0 unknown */
    uint32_t chunk_len;
    uint32_t records;     /* DATA */
    int64_t ingest_us;    /* DATA: see above, 0 unknown */
    eddy_mpr_t reader;    /* BARRIER, EOS, CREDIT */
    bool reader_open;
    const unsigned char *cursor, *end; /* DATA: records are read in place */
    uint32_t records_left;
} eddy_data_msg_t;

int eddy_data_decode(const void *data, size_t len, eddy_data_msg_t *msg, eddy_err_t *err);
/* 1 and *rec filled, 0 at the end, -1 on a malformed record (err filled). */
int eddy_data_next_record(eddy_data_msg_t *msg, eddy_record_t *rec, eddy_err_t *err);
void eddy_data_msg_close(eddy_data_msg_t *msg);

#endif
