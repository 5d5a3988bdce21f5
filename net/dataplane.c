/* dataplane.c - DATA/BARRIER/EOS/CREDIT codecs (see dataplane.h).
 *
 * The batch writer is the hot path of every operator's output: it packs
 * straight into a growing buffer and reserves a fixed-width (array32)
 * header so the element count can be written once the batch is full. */
#include "net/dataplane.h"

#include <stdlib.h>
#include <string.h>

#define HEADER_FIELDS 7 /* type + 6 channel fields */

void eddy_batch_writer_init(eddy_batch_writer_t *w)
{
    msgpack_sbuffer_init(&w->buf);
    msgpack_packer_init(&w->pk, &w->buf, msgpack_sbuffer_write);
    w->records = 0;
    w->count_offset = 0;
}

void eddy_batch_writer_free(eddy_batch_writer_t *w)
{
    msgpack_sbuffer_destroy(&w->buf);
    memset(&w->buf, 0, sizeof w->buf);
}

static void pack_channel(msgpack_packer *pk, uint32_t type, const eddy_channel_id_t *ch)
{
    msgpack_pack_uint32(pk, type);
    msgpack_pack_uint32(pk, ch->job);
    msgpack_pack_uint32(pk, ch->epoch);
    msgpack_pack_uint32(pk, ch->src_stage);
    msgpack_pack_uint32(pk, ch->src_instance);
    msgpack_pack_uint32(pk, ch->dst_stage);
    msgpack_pack_uint32(pk, ch->dst_instance);
}

/* Batches are handed off whole (finish releases the buffer), so each one
 * would otherwise grow from nothing through many reallocations. */
#define BATCH_RESERVE (48u * 1024u)

void eddy_batch_writer_begin(eddy_batch_writer_t *w, const eddy_channel_id_t *ch)
{
    msgpack_sbuffer_clear(&w->buf);
    if (w->buf.alloc < BATCH_RESERVE) {
        char *data = realloc(w->buf.data, BATCH_RESERVE);
        if (data) {
            w->buf.data = data;
            w->buf.alloc = BATCH_RESERVE;
        }
    }
    static const char array32[5] = {(char)0xdd, 0, 0, 0, 0};
    msgpack_sbuffer_write(&w->buf, array32, sizeof array32);
    pack_channel(&w->pk, EDDY_DATA_BATCH, ch);
    w->count_offset = w->buf.size;
    static const char u32[5] = {(char)0xce, 0, 0, 0, 0}; /* record count, patched */
    msgpack_sbuffer_write(&w->buf, u32, sizeof u32);
    w->records = 0;
}

void eddy_batch_writer_add(eddy_batch_writer_t *w, const eddy_record_t *rec)
{
    msgpack_pack_uint8(&w->pk, rec->kind);
    msgpack_pack_int64(&w->pk, rec->value);
    msgpack_pack_int64(&w->pk, rec->timestamp);
    msgpack_pack_bin(&w->pk, rec->len);
    msgpack_pack_bin_body(&w->pk, rec->data, rec->len);
    w->records++;
}

static void put_be32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

char *eddy_batch_writer_finish(eddy_batch_writer_t *w, size_t *len)
{
    uint32_t elements = HEADER_FIELDS + 1 + 4 * w->records;
    put_be32(w->buf.data + 1, elements);
    put_be32(w->buf.data + w->count_offset + 1, w->records);
    w->records = 0;
    *len = w->buf.size;
    return msgpack_sbuffer_release(&w->buf);
}

static char *encode_small(uint32_t type, const eddy_channel_id_t *ch, int extra, uint64_t value,
                          size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, HEADER_FIELDS + (extra ? 1 : 0));
    pack_channel(&w.pk, type, ch);
    if (extra)
        eddy_mpw_u64(&w, value);
    return eddy_mpw_release(&w, len);
}

char *eddy_barrier_encode(const eddy_channel_id_t *ch, uint64_t checkpoint, size_t *len)
{
    return encode_small(EDDY_DATA_BARRIER, ch, 1, checkpoint, len);
}

char *eddy_eos_encode(const eddy_channel_id_t *ch, size_t *len)
{
    return encode_small(EDDY_DATA_EOS, ch, 0, 0, len);
}

char *eddy_credit_encode(const eddy_channel_id_t *ch, uint32_t batches, size_t *len)
{
    return encode_small(EDDY_DATA_CREDIT, ch, 1, batches, len);
}

int eddy_data_decode(const void *data, size_t len, eddy_data_msg_t *msg, eddy_err_t *err)
{
    memset(msg, 0, sizeof *msg);
    if (eddy_mpr_open(&msg->reader, data, len, err) < 0)
        return -1;
    eddy_mpr_t *r = &msg->reader;
    msg->reader_open = true;
    uint64_t type = eddy_mpr_u64(r, UINT64_MAX);
    if (r->ok && (type < EDDY_DATA_BATCH || type > EDDY_DATA_CREDIT)) {
        /* Checked before the channel, so a control message sent to a data
         * port is named as such rather than as a missing field. */
        eddy_data_msg_close(msg);
        return eddy_err_set(err, "malformed message: unknown data message type %llu",
                            (unsigned long long)type);
    }
    msg->type = (eddy_data_type_t)type;
    msg->channel.job = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    msg->channel.epoch = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    msg->channel.src_stage = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    msg->channel.src_instance = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    msg->channel.dst_stage = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    msg->channel.dst_instance = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
    const char *name = "data";
    switch (type) {
    case EDDY_DATA_BATCH: {
        name = "DATA";
        msg->records = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        uint32_t fields = eddy_mpr_remaining(r); /* before close, which zeroes the count */
        if (r->ok && fields != 4ull * msg->records) {
            eddy_data_msg_close(msg);
            return eddy_err_set(err, "malformed DATA message: %u records announced, %u fields",
                                msg->records, fields);
        }
        break;
    }
    case EDDY_DATA_BARRIER:
        name = "BARRIER";
        msg->checkpoint = eddy_mpr_u64(r, UINT64_MAX);
        break;
    case EDDY_DATA_EOS:
        name = "EOS";
        break;
    case EDDY_DATA_CREDIT:
        name = "CREDIT";
        msg->credit = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        break;
    default: /* the type was not an unsigned integer: r is failed */
        break;
    }
    if (type != EDDY_DATA_BATCH || !r->ok) {
        int rc = eddy_mpr_finish(r, name, err);
        if (rc < 0) {
            eddy_data_msg_close(msg);
            return -1;
        }
    }
    return 0;
}

int eddy_data_next_record(eddy_data_msg_t *msg, eddy_record_t *rec, eddy_err_t *err)
{
    eddy_mpr_t *r = &msg->reader;
    if (eddy_mpr_remaining(r) == 0)
        return r->ok ? 0 : eddy_mpr_finish(r, "DATA", err);
    rec->kind = (uint8_t)eddy_mpr_u64(r, EDDY_DELETE);
    rec->value = eddy_mpr_i64(r);
    rec->timestamp = eddy_mpr_i64(r);
    rec->data = eddy_mpr_bytes(r, EDDY_RECORD_MAX_BYTES, &rec->len);
    if (!r->ok)
        return eddy_mpr_finish(r, "DATA", err);
    return 1;
}

void eddy_data_msg_close(eddy_data_msg_t *msg)
{
    if (msg->reader_open)
        eddy_mpr_close(&msg->reader);
    msg->reader_open = false;
}
