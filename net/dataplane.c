/* dataplane.c - DATA/BARRIER/EOS/CREDIT codecs (see dataplane.h).
 *
 * The batch writer is the hot path of every operator's output: it packs
 * straight into a growing buffer and reserves a fixed-width (array32)
 * header so the element count can be written once the batch is full. */
#include "net/dataplane.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/prefault.h"

#define HEADER_FIELDS 7 /* type + 6 channel fields */

void eddy_batch_writer_init(eddy_batch_writer_t *w)
{
    msgpack_sbuffer_init(&w->buf);
    msgpack_packer_init(&w->pk, &w->buf, msgpack_sbuffer_write);
    w->records = 0;
    w->count_offset = 0;
    w->ingest_us = 0;
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
    static const char i64[9] = {(char)0xd3, 0, 0, 0, 0, 0, 0, 0, 0}; /* ingest, patched */
    msgpack_sbuffer_write(&w->buf, i64, sizeof i64);
    w->records = 0;
    w->ingest_us = 0;
}

/* Smallest msgpack form of an integer, as msgpack-c's packer writes it. */
static size_t put_int(unsigned char *p, int64_t v)
{
    if (v >= 0) {
        uint64_t u = (uint64_t)v;
        if (u < 128) {
            p[0] = (unsigned char)u;
            return 1;
        }
        int n = u < 256 ? 1 : u < 65536 ? 2 : u < 4294967296ull ? 4 : 8;
        p[0] = (unsigned char)(n == 1 ? 0xcc : n == 2 ? 0xcd : n == 4 ? 0xce : 0xcf);
        for (int i = 0; i < n; i++)
            p[1 + i] = (unsigned char)(u >> (8 * (n - 1 - i)));
        return 1 + (size_t)n;
    }
    if (v >= -32) {
        p[0] = (unsigned char)(int8_t)v;
        return 1;
    }
    int n = v >= -128 ? 1 : v >= -32768 ? 2 : v >= -2147483648ll ? 4 : 8;
    p[0] = (unsigned char)(n == 1 ? 0xd0 : n == 2 ? 0xd1 : n == 4 ? 0xd2 : 0xd3);
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < n; i++)
        p[1 + i] = (unsigned char)(u >> (8 * (n - 1 - i)));
    return 1 + (size_t)n;
}

/* The hot path of every operator's output: one record appended with direct
 * stores instead of five packer callbacks (same bytes msgpack-c writes). */
void eddy_batch_writer_add(eddy_batch_writer_t *w, const eddy_record_t *rec)
{
    size_t need = 1 + 9 + 9 + 5 + (size_t)rec->len;
    if (w->buf.alloc - w->buf.size < need) {
        size_t cap = w->buf.alloc * 2 > w->buf.size + need ? w->buf.alloc * 2 : w->buf.size + need;
        char *data = realloc(w->buf.data, cap);
        if (!data)
            return; /* the record is lost only when memory is exhausted */
        w->buf.data = data;
        w->buf.alloc = cap;
    }
    unsigned char *p = (unsigned char *)w->buf.data + w->buf.size, *start = p;
    p += put_int(p, rec->kind);
    p += put_int(p, rec->value);
    p += put_int(p, rec->timestamp);
    uint32_t len = rec->len;
    if (len < 256) {
        *p++ = 0xc4;
        *p++ = (unsigned char)len;
    } else if (len < 65536) {
        *p++ = 0xc5;
        *p++ = (unsigned char)(len >> 8);
        *p++ = (unsigned char)len;
    } else {
        *p++ = 0xc6;
        for (int i = 3; i >= 0; i--)
            *p++ = (unsigned char)(len >> (8 * i));
    }
    if (len)
        memcpy(p, rec->data, len);
    p += len;
    w->buf.size += (size_t)(p - start);
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
    uint32_t elements = HEADER_FIELDS + 2 + 4 * w->records;
    put_be32(w->buf.data + 1, elements);
    put_be32(w->buf.data + w->count_offset + 1, w->records);
    uint64_t ingest = (uint64_t)w->ingest_us;
    put_be32(w->buf.data + w->count_offset + 6, (uint32_t)(ingest >> 32));
    put_be32(w->buf.data + w->count_offset + 10, (uint32_t)ingest);
    w->records = 0;
    w->ingest_us = 0;
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

char *eddy_watermark_encode(const eddy_channel_id_t *ch, int64_t watermark, bool idle, size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, HEADER_FIELDS + 2);
    pack_channel(&w.pk, EDDY_DATA_WATERMARK, ch);
    eddy_mpw_i64(&w, watermark);
    eddy_mpw_u64(&w, idle ? 1 : 0);
    return eddy_mpw_release(&w, len);
}

char *eddy_handoff_encode(const eddy_channel_id_t *ch, uint64_t version, uint32_t to,
                          const uint32_t *kgs, uint32_t n, size_t *len)
{
    if (n > EDDY_HANDOFF_MAX_GROUPS)
        return NULL;
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, HEADER_FIELDS + 3);
    pack_channel(&w.pk, EDDY_DATA_HANDOFF, ch);
    eddy_mpw_u64(&w, version);
    eddy_mpw_u64(&w, to);
    eddy_mpw_array(&w, n);
    for (uint32_t i = 0; i < n; i++)
        eddy_mpw_u64(&w, kgs[i]);
    return eddy_mpw_release(&w, len);
}

uint64_t eddy_state_chunk_checksum(const void *bytes, size_t len)
{
    return XXH64(bytes, len, 0);
}

char *eddy_state_chunk_encode(const eddy_channel_id_t *ch, uint64_t version, uint32_t kg,
                              uint64_t offset, uint64_t total, const void *bytes, uint32_t len,
                              size_t *out_len)
{
    return eddy_state_chunk_encode_stamped(ch, version, kg, offset, total, bytes, len, 0, out_len);
}

/* The header goes through msgpack; the chunk's bytes are copied once into a
 * buffer of the exact size (an sbuffer would grow by doubling, copying a
 * megabyte chunk several times and touching fresh pages each time). */
char *eddy_state_chunk_encode_stamped(const eddy_channel_id_t *ch, uint64_t version, uint32_t kg,
                                      uint64_t offset, uint64_t total, const void *bytes,
                                      uint32_t len, int64_t sent_us, size_t *out_len)
{
    if (len > EDDY_STATE_CHUNK_MAX || offset > total || len > total - offset)
        return NULL;
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, HEADER_FIELDS + 6 + (sent_us ? 1 : 0));
    pack_channel(&w.pk, EDDY_DATA_STATE_CHUNK, ch);
    eddy_mpw_u64(&w, version);
    eddy_mpw_u64(&w, kg);
    eddy_mpw_u64(&w, offset);
    eddy_mpw_u64(&w, total);
    eddy_mpw_u64(&w, eddy_state_chunk_checksum(bytes, len));
    msgpack_pack_bin(&w.pk, len);
    size_t head;
    char *hdr = eddy_mpw_release(&w, &head);
    size_t stamp = sent_us ? 9 : 0;
    char *m = hdr ? malloc(head + len + stamp) : NULL;
    if (!m) {
        free(hdr);
        return NULL;
    }
    eddy_prefault(m, head + len + stamp);
    memcpy(m, hdr, head);
    free(hdr);
    if (len)
        memcpy(m + head, bytes, len);
    if (stamp) { /* msgpack int64: 0xd3, big endian */
        unsigned char *p = (unsigned char *)m + head + len;
        p[0] = 0xd3;
        for (int i = 0; i < 8; i++)
            p[1 + i] = (unsigned char)((uint64_t)sent_us >> (56 - 8 * i));
    }
    *out_len = head + len + stamp;
    return m;
}

/* ---- DATA fast path ------------------------------------------------------
 * A batch holds thousands of records; building msgpack-c's object tree for
 * each (four objects per record, zone-allocated) cost more than the work
 * done on the records. DATA is therefore read in place by this cursor, which
 * understands exactly the msgpack forms a batch may use and bounds-checks
 * every length against the end of the buffer. */

typedef struct cursor {
    const unsigned char *p, *end;
} cursor_t;

static uint64_t be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Reads an integer; *negative set for a negative value (returned as int64). */
static int cur_int(cursor_t *c, uint64_t *u, int64_t *i, bool *negative)
{
    if (c->p >= c->end)
        return -1;
    unsigned t = *c->p++;
    *negative = false;
    if (t <= 0x7f) {
        *u = t;
    } else if (t >= 0xe0) {
        *negative = true;
        *i = (int8_t)t;
    } else if (t >= 0xcc && t <= 0xcf) {
        int n = 1 << (t - 0xcc);
        if (c->end - c->p < n)
            return -1;
        *u = be(c->p, n);
        c->p += n;
    } else if (t >= 0xd0 && t <= 0xd3) {
        int n = 1 << (t - 0xd0);
        if (c->end - c->p < n)
            return -1;
        uint64_t raw = be(c->p, n);
        c->p += n;
        int shift = 64 - 8 * n;
        *i = (int64_t)(raw << shift) >> shift; /* sign-extend */
        if (*i >= 0)
            *u = (uint64_t)*i;
        else
            *negative = true;
    } else {
        return -1;
    }
    if (!*negative)
        *i = *u <= (uint64_t)INT64_MAX ? (int64_t)*u : 0;
    return 0;
}

static int cur_uint(cursor_t *c, uint64_t max, uint64_t *out)
{
    int64_t i;
    bool neg;
    if (cur_int(c, out, &i, &neg) < 0 || neg || *out > max)
        return -1;
    return 0;
}

static int cur_i64(cursor_t *c, int64_t *out)
{
    uint64_t u = 0;
    bool neg;
    if (cur_int(c, &u, out, &neg) < 0 || (!neg && u > (uint64_t)INT64_MAX))
        return -1;
    return 0;
}

static int cur_bytes(cursor_t *c, const char **data, uint32_t *len)
{
    if (c->p >= c->end)
        return -1;
    unsigned t = *c->p++;
    uint64_t n;
    int hdr;
    if (t >= 0xa0 && t <= 0xbf) {
        n = t & 0x1f;
        hdr = 0;
    } else if (t == 0xc4 || t == 0xd9) {
        hdr = 1;
    } else if (t == 0xc5 || t == 0xda) {
        hdr = 2;
    } else if (t == 0xc6 || t == 0xdb) {
        hdr = 4;
    } else {
        return -1;
    }
    if (hdr) {
        if (c->end - c->p < hdr)
            return -1;
        n = be(c->p, hdr);
        c->p += hdr;
    }
    if (n > EDDY_RECORD_MAX_BYTES || (uint64_t)(c->end - c->p) < n)
        return -1;
    *data = (const char *)c->p;
    *len = (uint32_t)n;
    c->p += n;
    return 0;
}

static int cur_array(cursor_t *c, uint64_t *n)
{
    if (c->p >= c->end)
        return -1;
    unsigned t = *c->p++;
    if (t >= 0x90 && t <= 0x9f) {
        *n = t & 0x0f;
        return 0;
    }
    int hdr = t == 0xdc ? 2 : t == 0xdd ? 4 : 0;
    if (!hdr || c->end - c->p < hdr)
        return -1;
    *n = be(c->p, hdr);
    c->p += hdr;
    return 0;
}

/* Reads one record; NULL or the name of what was wrong. */
static const char *cur_record(cursor_t *c, eddy_record_t *rec)
{
    uint64_t kind;
    if (cur_uint(c, EDDY_ROW_KIND_MAX, &kind) < 0)
        return "kind is not a row kind (0..5)";
    if (cur_i64(c, &rec->value) < 0)
        return "value: expected a signed integer";
    if (cur_i64(c, &rec->timestamp) < 0)
        return "timestamp: expected a signed integer";
    if (cur_bytes(c, &rec->data, &rec->len) < 0)
        return "data: expected a string or bin within the message";
    rec->kind = (uint8_t)kind;
    return NULL;
}

/* 1: decoded as DATA; 0: not a DATA message (use the general path); -1: bad DATA. */
static int decode_batch(const void *data, size_t len, eddy_data_msg_t *msg, eddy_err_t *err)
{
    cursor_t c = {data, (const unsigned char *)data + len};
    uint64_t elements, type, v[7];
    if (cur_array(&c, &elements) < 0 || cur_uint(&c, UINT64_MAX, &type) < 0 ||
        type != EDDY_DATA_BATCH)
        return 0;
    if (elements < HEADER_FIELDS + 1)
        return eddy_err_set(err, "malformed DATA message: announces %llu elements",
                            (unsigned long long)elements);
    for (int i = 0; i < 7; i++)
        if (cur_uint(&c, UINT32_MAX, &v[i]) < 0)
            return eddy_err_set(err, "malformed DATA message: field %d: missing or not an "
                                     "unsigned 32-bit integer", i + 1);
    msg->type = EDDY_DATA_BATCH;
    msg->channel = (eddy_channel_id_t){(uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2],
                                       (uint32_t)v[3], (uint32_t)v[4], (uint32_t)v[5]};
    msg->records = (uint32_t)v[6];
    /* Batches of older senders carry no ingestion time. */
    if (elements == HEADER_FIELDS + 2 + 4ull * msg->records) {
        if (cur_i64(&c, &msg->ingest_us) < 0)
            return eddy_err_set(err, "malformed DATA message: ingestion time: expected a signed "
                                     "integer");
        if (msg->ingest_us < 0)
            msg->ingest_us = 0;
    } else if (elements != HEADER_FIELDS + 1 + 4ull * msg->records)
        return eddy_err_set(err, "malformed DATA message: %u records announced, %llu fields",
                            msg->records, (unsigned long long)(elements - HEADER_FIELDS - 1));
    /* every record needs at least 4 bytes: reject impossible counts up front */
    if ((uint64_t)(c.end - c.p) < 4ull * msg->records)
        return eddy_err_set(err, "truncated DATA message: %u records in %zu bytes", msg->records,
                            (size_t)(c.end - c.p));
    /* Check every record before any is used: a frame is accepted whole or not
     * at all. This pass allocates nothing; next_record then re-reads in place. */
    cursor_t check = c;
    for (uint32_t i = 0; i < msg->records; i++) {
        eddy_record_t rec;
        const char *what = cur_record(&check, &rec);
        if (what)
            return eddy_err_set(err, "malformed DATA message: record %u: %s", i, what);
    }
    if (check.p != check.end)
        return eddy_err_set(err, "malformed DATA message: %zu trailing bytes",
                            (size_t)(check.end - check.p));
    msg->cursor = c.p;
    msg->end = c.end;
    msg->records_left = msg->records;
    return 1;
}

int eddy_data_decode(const void *data, size_t len, eddy_data_msg_t *msg, eddy_err_t *err)
{
    memset(msg, 0, sizeof *msg);
    int batch = decode_batch(data, len, msg, err);
    if (batch != 0) {
        if (batch < 0)
            memset(msg, 0, sizeof *msg);
        return batch < 0 ? -1 : 0;
    }
    if (eddy_mpr_open(&msg->reader, data, len, err) < 0)
        return -1;
    eddy_mpr_t *r = &msg->reader;
    msg->reader_open = true;
    uint64_t type = eddy_mpr_u64(r, UINT64_MAX);
    if (r->ok && (type < EDDY_DATA_BATCH || type > EDDY_DATA_STATE_CHUNK)) {
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
    case EDDY_DATA_BATCH: /* well-formed batches took the fast path */
        eddy_data_msg_close(msg);
        return eddy_err_set(err, "malformed DATA message: unreadable header");
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
    case EDDY_DATA_WATERMARK:
        name = "WATERMARK";
        msg->watermark = eddy_mpr_i64(r);
        msg->idle = eddy_mpr_u64(r, 1) != 0;
        break;
    case EDDY_DATA_HANDOFF: {
        name = "HANDOFF";
        msg->version = eddy_mpr_u64(r, UINT64_MAX);
        msg->handoff_to = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        const msgpack_object *saved;
        uint32_t saved_n, saved_next;
        uint32_t n = eddy_mpr_enter(r, EDDY_HANDOFF_MAX_GROUPS, &saved, &saved_n, &saved_next);
        if (r->ok && n) {
            msg->kgs = malloc(n * sizeof *msg->kgs);
            if (!msg->kgs)
                eddy_mpr_fail(r, "out of memory");
        }
        for (uint32_t i = 0; r->ok && i < n; i++)
            msg->kgs[msg->n_kgs++] = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        eddy_mpr_leave(r, saved, saved_n, saved_next);
        break;
    }
    case EDDY_DATA_STATE_CHUNK:
        name = "STATE_CHUNK";
        msg->version = eddy_mpr_u64(r, UINT64_MAX);
        msg->kg = (uint32_t)eddy_mpr_u64(r, UINT32_MAX);
        msg->offset = eddy_mpr_u64(r, UINT64_MAX);
        msg->total = eddy_mpr_u64(r, UINT64_MAX);
        msg->checksum = eddy_mpr_u64(r, UINT64_MAX);
        msg->chunk = eddy_mpr_bytes(r, EDDY_STATE_CHUNK_MAX, &msg->chunk_len);
        if (r->ok && (msg->offset > msg->total || msg->chunk_len > msg->total - msg->offset))
            eddy_mpr_fail(r, "chunk lies beyond its group's total");
        if (r->ok && eddy_mpr_remaining(r) > 0) /* optional: absent from older senders */
            msg->sent_us = eddy_mpr_i64(r);
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
    if (msg->type != EDDY_DATA_BATCH || msg->records_left == 0)
        return 0;
    cursor_t c = {msg->cursor, msg->end};
    const char *what = cur_record(&c, rec); /* validated by decode: cannot fail */
    if (what) {
        msg->records_left = 0;
        return eddy_err_set(err, "malformed DATA message: %s", what);
    }
    msg->cursor = c.p;
    msg->records_left--;
    return 1;
}

void eddy_data_msg_close(eddy_data_msg_t *msg)
{
    free(msg->kgs);
    msg->kgs = NULL;
    msg->n_kgs = 0;
    if (msg->reader_open)
        eddy_mpr_close(&msg->reader);
    msg->reader_open = false;
}
