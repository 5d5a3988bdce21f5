/* test_dataplane.c - the data-plane codecs (net/dataplane.c).
 *
 * DATA batches of 0, 1 and 1000 records (every row kind, extreme values and
 * timestamps, binary payloads with NUL bytes and lengths across the bin8,
 * bin16 and bin32 encodings) written with the batch writer and read back
 * record by record; BARRIER, EOS and CREDIT round trips; and a decoder that
 * rejects every truncation, batches whose record count disagrees with their
 * length, malformed records, unknown types and garbage - and never crashes
 * on a changed byte. Malformed messages are written by hand with the
 * eddy_mpw_* helpers so the exact layout under test is visible. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/dataplane.h"
#include "net/proto.h"

#include "leak_check.h"

TestSuite(dataplane, .fini = eddy_test_leak_check);

static const eddy_channel_id_t chan = {
    .job = 7, .epoch = 4000000000u, .src_stage = 1, .src_instance = 300,
    .dst_stage = 2, .dst_instance = 65536,
};

static void assert_channel_eq(const eddy_channel_id_t *a, const eddy_channel_id_t *b)
{
    cr_assert_eq(a->job, b->job);
    cr_assert_eq(a->epoch, b->epoch);
    cr_assert_eq(a->src_stage, b->src_stage);
    cr_assert_eq(a->src_instance, b->src_instance);
    cr_assert_eq(a->dst_stage, b->dst_stage);
    cr_assert_eq(a->dst_instance, b->dst_instance);
}

/* Record i of a test batch; its bytes live in `store` (at least 70000). */
static eddy_record_t sample_record(uint32_t i, char *store)
{
    static const int64_t values[] = {0, 1, -1, INT64_MAX, INT64_MIN, 127, -32, 128, -33, 65536};
    static const uint32_t lens[] = {0, 1, 3, 31, 32, 255, 256, 65535, 65536, 70000};
    eddy_record_t r;
    r.kind = (uint8_t)(i % 5); /* EDDY_INSERT .. EDDY_LATE */
    r.value = i < 10 ? values[i] : (int64_t)i * -7919 + (int64_t)i * i;
    r.timestamp = i % 5 == 0 ? 0 : i % 5 == 1 ? INT64_MAX : (int64_t)1700000000000 + i;
    r.len = i < 10 ? lens[i] : i % 37;
    for (uint32_t k = 0; k < r.len; k++)
        store[k] = (char)((k * 31 + i) % 7 == 0 ? 0 : (k + i) & 0xff); /* NULs included */
    r.data = store;
    return r;
}

/* Writes a batch of n sample records; returns the encoding. */
static char *write_batch(uint32_t n, size_t *len)
{
    char *store = malloc(70000);
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    eddy_batch_writer_begin(&w, &chan);
    for (uint32_t i = 0; i < n; i++) {
        eddy_record_t r = sample_record(i, store);
        eddy_batch_writer_add(&w, &r);
    }
    cr_assert_gt(eddy_batch_writer_bytes(&w), 0);
    char *out = eddy_batch_writer_finish(&w, len);
    eddy_batch_writer_free(&w);
    free(store);
    return out;
}

static void check_batch(const char *enc, size_t len, uint32_t n)
{
    char *store = malloc(70000);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_data_decode(enc, len, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.type, EDDY_DATA_BATCH);
    assert_channel_eq(&msg.channel, &chan);
    cr_assert_eq(msg.records, n);
    for (uint32_t i = 0; i < n; i++) {
        eddy_record_t want = sample_record(i, store), got;
        cr_assert_eq(eddy_data_next_record(&msg, &got, &err), 1, "record %u: %s", i, err.msg);
        cr_assert_eq(got.kind, want.kind, "record %u", i);
        cr_assert_eq(got.value, want.value, "record %u", i);
        cr_assert_eq(got.timestamp, want.timestamp, "record %u", i);
        cr_assert_eq(got.len, want.len, "record %u", i);
        if (want.len)
            cr_assert_eq(memcmp(got.data, want.data, want.len), 0, "record %u bytes", i);
        /* Records point into the caller's buffer. */
        if (got.len)
            cr_assert(got.data >= enc && got.data + got.len <= enc + len);
    }
    cr_assert_eq(eddy_data_next_record(&msg, &(eddy_record_t){0}, &err), 0);
    cr_assert_eq(eddy_data_next_record(&msg, &(eddy_record_t){0}, &err), 0, "end is sticky");
    eddy_data_msg_close(&msg);
    eddy_data_msg_close(&msg); /* harmless twice */
    free(store);
}

Test(dataplane, batch_round_trip)
{
    static const uint32_t sizes[] = {0, 1, 10, 1000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t len;
        char *enc = write_batch(sizes[s], &len);
        check_batch(enc, len, sizes[s]);
        free(enc);
    }
}

Test(dataplane, batch_writer_is_reusable)
{
    char *store = malloc(70000);
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    for (uint32_t round = 0; round < 3; round++) {
        eddy_batch_writer_begin(&w, &chan);
        for (uint32_t i = 0; i < 10 * round; i++) {
            eddy_record_t r = sample_record(i, store);
            eddy_batch_writer_add(&w, &r);
        }
        size_t len;
        char *enc = eddy_batch_writer_finish(&w, &len);
        check_batch(enc, len, 10 * round);
        free(enc);
    }
    /* begin twice without finishing discards the first batch */
    eddy_batch_writer_begin(&w, &chan);
    eddy_record_t r = sample_record(3, store);
    eddy_batch_writer_add(&w, &r);
    eddy_batch_writer_begin(&w, &chan);
    size_t len;
    char *enc = eddy_batch_writer_finish(&w, &len);
    check_batch(enc, len, 0);
    free(enc);
    eddy_batch_writer_free(&w);
    free(store);
}

Test(dataplane, small_messages_round_trip)
{
    eddy_channel_id_t big = {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX,
                             UINT32_MAX};
    const eddy_channel_id_t *chans[] = {&chan, &big, &(eddy_channel_id_t){0}};
    for (size_t c = 0; c < 3; c++) {
        eddy_data_msg_t msg;
        eddy_err_t err = {{0}};
        size_t len;
        eddy_record_t rec;

        char *enc = eddy_barrier_encode(chans[c], UINT64_MAX - c, &len);
        cr_assert_eq(eddy_data_decode(enc, len, &msg, &err), 0, "%s", err.msg);
        cr_assert_eq(msg.type, EDDY_DATA_BARRIER);
        assert_channel_eq(&msg.channel, chans[c]);
        cr_assert_eq(msg.checkpoint, UINT64_MAX - c);
        cr_assert_eq(eddy_data_next_record(&msg, &rec, &err), 0, "a barrier has no records");
        eddy_data_msg_close(&msg);
        free(enc);

        enc = eddy_eos_encode(chans[c], &len);
        cr_assert_eq(eddy_data_decode(enc, len, &msg, &err), 0, "%s", err.msg);
        cr_assert_eq(msg.type, EDDY_DATA_EOS);
        assert_channel_eq(&msg.channel, chans[c]);
        eddy_data_msg_close(&msg);
        free(enc);

        enc = eddy_credit_encode(chans[c], UINT32_MAX - (uint32_t)c, &len);
        cr_assert_eq(eddy_data_decode(enc, len, &msg, &err), 0, "%s", err.msg);
        cr_assert_eq(msg.type, EDDY_DATA_CREDIT);
        assert_channel_eq(&msg.channel, chans[c]);
        cr_assert_eq(msg.credit, UINT32_MAX - (uint32_t)c);
        eddy_data_msg_close(&msg);
        free(enc);

        int64_t wms[] = {INT64_MIN, -1, 0, 1700000000123, INT64_MAX};
        for (size_t k = 0; k < sizeof wms / sizeof wms[0]; k++) {
            enc = eddy_watermark_encode(chans[c], wms[k], k % 2 == 1, &len);
            cr_assert_eq(eddy_data_decode(enc, len, &msg, &err), 0, "%s", err.msg);
            cr_assert_eq(msg.type, EDDY_DATA_WATERMARK);
            assert_channel_eq(&msg.channel, chans[c]);
            cr_assert_eq(msg.watermark, wms[k]);
            cr_assert_eq(msg.idle, k % 2 == 1);
            eddy_data_msg_close(&msg);
            free(enc);
        }
    }
}

/* ---- damaged input ------------------------------------------------------- */

static void expect_reject(const void *data, size_t len, const char *needle)
{
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    int rc = eddy_data_decode(data, len, &msg, &err);
    if (rc == 0)
        eddy_data_msg_close(&msg);
    cr_assert_eq(rc, -1, "decoded %zu bytes that should be rejected", len);
    cr_assert(!msg.reader_open, "a failed decode must not leave the reader open");
    if (needle)
        cr_assert_not_null(strstr(err.msg, needle), "'%s' not in '%s'", needle, err.msg);
}

static void every_truncation(const char *enc, size_t len)
{
    for (size_t n = 0; n < len; n++) {
        char *cut = malloc(n ? n : 1); /* exact size, so ASan sees over-reads */
        memcpy(cut, enc, n);
        expect_reject(cut, n, NULL);
        free(cut);
    }
}

Test(dataplane, every_truncation_rejected, .timeout = 60)
{
    size_t len;
    char *enc = write_batch(7, &len); /* records of 0..256 bytes: every length */
    every_truncation(enc, len);
    free(enc);
    /* With the 65535/65536/70000-byte records (too long to try every
     * length under ASan): every length within the first 32 bytes of each
     * record (its kind, value, timestamp and bin header), every 61st length
     * elsewhere, and the last 300. */
    enum { N = 12 };
    size_t starts[N];
    char *store = malloc(70000);
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    eddy_batch_writer_begin(&w, &chan);
    for (uint32_t i = 0; i < N; i++) {
        starts[i] = eddy_batch_writer_bytes(&w);
        eddy_record_t r = sample_record(i, store);
        eddy_batch_writer_add(&w, &r);
    }
    enc = eddy_batch_writer_finish(&w, &len);
    eddy_batch_writer_free(&w);
    free(store);
    check_batch(enc, len, N);
    char *cut = malloc(len);
    size_t tried = 0;
    for (size_t n = 0; n < len; n++) {
        bool pick = n % 61 == 0 || len - n <= 300;
        for (int i = 0; i < N && !pick; i++)
            pick = n >= starts[i] && n - starts[i] < 32;
        if (!pick)
            continue;
        memcpy(cut, enc, n);
        expect_reject(cut, n, NULL);
        tried++;
    }
    cr_assert_gt(tried, 3000);
    free(cut);
    free(enc);
    enc = write_batch(0, &len);
    every_truncation(enc, len);
    free(enc);
    enc = eddy_barrier_encode(&chan, 99, &len);
    every_truncation(enc, len);
    free(enc);
    enc = eddy_eos_encode(&chan, &len);
    every_truncation(enc, len);
    free(enc);
    enc = eddy_credit_encode(&chan, 8, &len);
    every_truncation(enc, len);
    free(enc);
}

static void pack_header(eddy_mpw_t *w, uint32_t elements, uint64_t type)
{
    eddy_mpw_array(w, elements);
    eddy_mpw_u64(w, type);
    eddy_mpw_u64(w, chan.job);
    eddy_mpw_u64(w, chan.epoch);
    eddy_mpw_u64(w, chan.src_stage);
    eddy_mpw_u64(w, chan.src_instance);
    eddy_mpw_u64(w, chan.dst_stage);
    eddy_mpw_u64(w, chan.dst_instance);
}

static void pack_record(eddy_mpw_t *w, uint64_t kind, int64_t value, int64_t ts, const char *s)
{
    eddy_mpw_u64(w, kind);
    eddy_mpw_i64(w, value);
    eddy_mpw_i64(w, ts);
    eddy_mpw_bin(w, s, strlen(s));
}

/* A DATA message announcing `announced` records and carrying `present`. */
static void expect_count_mismatch(uint64_t announced, uint32_t present)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    pack_header(&w, 8 + 4 * present, EDDY_DATA_BATCH);
    eddy_mpw_u64(&w, announced);
    for (uint32_t i = 0; i < present; i++)
        pack_record(&w, 0, i, 0, "x");
    char expected[64];
    snprintf(expected, sizeof expected, "%llu records announced, %u fields",
             (unsigned long long)announced, 4 * present);
    expect_reject(w.buf.data, w.buf.size, announced <= UINT32_MAX ? expected : NULL);
    eddy_mpw_free(&w);
}

Test(dataplane, record_count_mismatch_rejected)
{
    expect_count_mismatch(3, 2);
    expect_count_mismatch(1, 2);
    expect_count_mismatch(1, 0);
    expect_count_mismatch(0, 1);
    expect_count_mismatch(UINT32_MAX, 1);
    expect_count_mismatch(1ull << 32, 1);
    expect_count_mismatch((1ull << 30) + 1, 1); /* 4 x count wraps in 32 bits */

    /* A record cut short: the element count is not 8 + 4n. */
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    pack_header(&w, 8 + 4 + 3, EDDY_DATA_BATCH);
    eddy_mpw_u64(&w, 2);
    pack_record(&w, 0, 1, 2, "abc");
    eddy_mpw_u64(&w, 0);
    eddy_mpw_i64(&w, 1);
    eddy_mpw_i64(&w, 2);
    expect_reject(w.buf.data, w.buf.size, "2 records announced, 7 fields");
    eddy_mpw_free(&w);

    /* The writer's own patched count, off by one either way. */
    size_t len;
    char *enc = write_batch(5, &len);
    eddy_batch_writer_t probe;
    eddy_batch_writer_init(&probe);
    eddy_batch_writer_begin(&probe, &chan);
    size_t count_at = probe.count_offset + 4; /* last byte of the big-endian u32 */
    eddy_batch_writer_free(&probe);
    cr_assert_eq((unsigned char)enc[count_at], 5);
    /* 21 fields after the count: the ingestion time and 5 records. */
    enc[count_at] = 4;
    expect_reject(enc, len, "4 records announced, 21 fields");
    enc[count_at] = 6;
    expect_reject(enc, len, "6 records announced, 21 fields");
    free(enc);
}

/* A batch is accepted whole or not at all: a bad record anywhere makes the
 * decode fail, before any record of it reaches an operator. */
Test(dataplane, malformed_records_reject_the_batch)
{
    static const struct {
        const char *what;
        const char *needle;
    } cases[] = {
        {"kind 6", "record 1: kind is not a row kind"},
        {"value as string", "record 1: value: expected a signed integer"},
        {"timestamp too large", "record 1: timestamp: expected a signed integer"},
        {"data as integer", "record 1: data: expected a string"},
        {"data too long", "record 1: data: expected a string"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        eddy_mpw_t w;
        eddy_mpw_init(&w);
        pack_header(&w, 8 + 8, EDDY_DATA_BATCH);
        eddy_mpw_u64(&w, 2);
        pack_record(&w, 1, -5, 10, "good");
        eddy_mpw_u64(&w, c == 0 ? 6 : 3);
        if (c == 1)
            eddy_mpw_str(&w, "12");
        else
            eddy_mpw_i64(&w, 12);
        if (c == 2)
            eddy_mpw_u64(&w, (uint64_t)INT64_MAX + 1);
        else
            eddy_mpw_i64(&w, 0);
        char *big = NULL;
        if (c == 3) {
            eddy_mpw_u64(&w, 1);
        } else if (c == 4) {
            big = calloc(1, EDDY_RECORD_MAX_BYTES + 1);
            eddy_mpw_bin(&w, big, EDDY_RECORD_MAX_BYTES + 1);
        } else {
            eddy_mpw_bin(&w, "\0\0", 2);
        }

        eddy_data_msg_t msg;
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_data_decode(w.buf.data, w.buf.size, &msg, &err), -1, "%s decoded",
                     cases[c].what);
        cr_assert_not_null(strstr(err.msg, cases[c].needle), "%s: '%s'", cases[c].what, err.msg);
        eddy_data_msg_close(&msg);
        eddy_mpw_free(&w);
        free(big);
    }
    /* The largest record that is allowed. */
    char *big = calloc(1, EDDY_RECORD_MAX_BYTES);
    eddy_batch_writer_t bw;
    eddy_batch_writer_init(&bw);
    eddy_batch_writer_begin(&bw, &chan);
    eddy_record_t r = eddy_record_make(big, EDDY_RECORD_MAX_BYTES, 1);
    eddy_batch_writer_add(&bw, &r);
    size_t len;
    char *enc = eddy_batch_writer_finish(&bw, &len);
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_data_decode(enc, len, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_data_next_record(&msg, &r, &err), 1, "%s", err.msg);
    cr_assert_eq(r.len, EDDY_RECORD_MAX_BYTES);
    eddy_data_msg_close(&msg);
    free(enc);
    eddy_batch_writer_free(&bw);
    free(big);
}

Test(dataplane, malformed_small_messages_rejected)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);

    /* Missing or extra trailing fields. */
    pack_header(&w, 7, EDDY_DATA_BARRIER);
    expect_reject(w.buf.data, w.buf.size, "BARRIER message: field 7: missing");
    eddy_mpw_reset(&w);
    pack_header(&w, 9, EDDY_DATA_BARRIER);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_u64(&w, 2);
    expect_reject(w.buf.data, w.buf.size, "unexpected extra fields");
    eddy_mpw_reset(&w);
    pack_header(&w, 8, EDDY_DATA_EOS);
    eddy_mpw_u64(&w, 1);
    expect_reject(w.buf.data, w.buf.size, "EOS message: field 7: unexpected extra fields");
    eddy_mpw_reset(&w);
    pack_header(&w, 7, EDDY_DATA_CREDIT);
    expect_reject(w.buf.data, w.buf.size, "missing");
    eddy_mpw_reset(&w);
    pack_header(&w, 8, EDDY_DATA_WATERMARK);
    eddy_mpw_i64(&w, 5);
    expect_reject(w.buf.data, w.buf.size, "WATERMARK message: field 8: missing");
    eddy_mpw_reset(&w);
    pack_header(&w, 9, EDDY_DATA_WATERMARK);
    eddy_mpw_i64(&w, 5);
    eddy_mpw_u64(&w, 2);
    expect_reject(w.buf.data, w.buf.size, "integer out of range");
    eddy_mpw_reset(&w);
    pack_header(&w, 7, EDDY_DATA_BATCH);
    expect_reject(w.buf.data, w.buf.size, "DATA message: announces 7 elements");

    /* Out of range and wrongly typed values. */
    eddy_mpw_reset(&w);
    pack_header(&w, 8, EDDY_DATA_CREDIT);
    eddy_mpw_u64(&w, (uint64_t)UINT32_MAX + 1);
    expect_reject(w.buf.data, w.buf.size, "integer out of range");
    eddy_mpw_reset(&w);
    pack_header(&w, 8, EDDY_DATA_BARRIER);
    eddy_mpw_i64(&w, -1);
    expect_reject(w.buf.data, w.buf.size, "expected an unsigned integer");
    eddy_mpw_reset(&w);
    eddy_mpw_array(&w, 7);
    eddy_mpw_u64(&w, EDDY_DATA_EOS);
    eddy_mpw_u64(&w, (uint64_t)UINT32_MAX + 1); /* job */
    for (int i = 0; i < 5; i++)
        eddy_mpw_u64(&w, 0);
    expect_reject(w.buf.data, w.buf.size, "EOS message: field 1: integer out of range");
    eddy_mpw_reset(&w);
    eddy_mpw_array(&w, 7);
    eddy_mpw_u64(&w, EDDY_DATA_EOS);
    for (int i = 0; i < 5; i++)
        eddy_mpw_u64(&w, 0);
    eddy_mpw_str(&w, "0"); /* dst instance */
    expect_reject(w.buf.data, w.buf.size, "field 6: expected an unsigned integer");

    /* Unknown types: in range of the reader but not a data message, above
     * the range, a control message, not an integer. */
    static const uint64_t bad_types[] = {0, 1, 31, 36, 255, UINT64_MAX};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        eddy_mpw_reset(&w);
        pack_header(&w, 7, bad_types[i]);
        expect_reject(w.buf.data, w.buf.size, NULL);
    }
    eddy_mpw_reset(&w);
    pack_header(&w, 7, 31);
    expect_reject(w.buf.data, w.buf.size, "unknown data message type 31");
    eddy_msg_t ctrl = {.type = EDDY_MSG_START};
    size_t len;
    char *enc = eddy_msg_encode(&ctrl, &len);
    expect_reject(enc, len, "unknown data message type 6");
    free(enc);
    eddy_mpw_reset(&w);
    eddy_mpw_array(&w, 1);
    eddy_mpw_str(&w, "DATA");
    expect_reject(w.buf.data, w.buf.size, "expected an unsigned integer");
    eddy_mpw_free(&w);
}

Test(dataplane, garbage_rejected, .timeout = 10)
{
    expect_reject("", 0, "empty");
    expect_reject(NULL, 0, NULL);
    expect_reject("\xc1", 1, "0xc1");
    expect_reject("hello, world", 12, NULL);
    expect_reject("\x01", 1, "not an array");
    expect_reject("\x80", 1, "not an array");
    expect_reject("\x90", 1, "missing");
    expect_reject("\xdd\xff\xff\xff\xff", 5, "announces 4294967295 elements");
    expect_reject("\xdf\xff\xff\xff\xff", 5, "announces");
    expect_reject("\xdd\x00\x00\x00\x08\x20", 6, "DATA message: field 1: missing");
    /* A plausible header, then a record whose bin claims 4 GiB. */
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    pack_header(&w, 12, EDDY_DATA_BATCH);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_u64(&w, 0);
    eddy_mpw_i64(&w, 0);
    eddy_mpw_i64(&w, 0);
    msgpack_sbuffer_write(&w.buf, "\xc6\xff\xff\xff\xff" "abcdefgh", 13);
    expect_reject(w.buf.data, w.buf.size, "record 0: data");
    /* Trailing bytes after a valid message. */
    eddy_mpw_reset(&w);
    pack_header(&w, 7, EDDY_DATA_EOS);
    eddy_mpw_u64(&w, 0);
    expect_reject(w.buf.data, w.buf.size, "1 trailing byte");
    eddy_mpw_free(&w);

    /* Random bytes: whatever happens, no crash, no leak, and a rejection. */
    uint64_t s = 0x243F6A8885A308D3ull;
    unsigned char buf[256];
    for (int iter = 0; iter < 100000; iter++) {
        size_t len = 1 + (s >> 40) % sizeof buf;
        for (size_t i = 0; i < len; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            buf[i] = (unsigned char)s;
        }
        if (iter % 2)
            buf[0] = 0x90 | (buf[0] & 0x0f); /* often start like an array */
        eddy_data_msg_t msg;
        eddy_err_t err;
        if (eddy_data_decode(buf, len, &msg, &err) == 0) {
            eddy_record_t rec;
            while (eddy_data_next_record(&msg, &rec, &err) == 1)
                ;
            eddy_data_msg_close(&msg);
        }
    }
}

Test(dataplane, every_byte_change_fails_cleanly_or_decodes, .timeout = 120)
{
    size_t len;
    char *enc = write_batch(7, &len); /* records of 0..256 bytes */
    cr_assert_lt(len, 2000);
    char *buf = malloc(len);
    unsigned long ok = 0, bad_decode = 0, bad_record = 0;
    for (size_t i = 0; i < len; i++) {
        for (unsigned v = 0; v < 256; v++) {
            memcpy(buf, enc, len);
            buf[i] = (char)v;
            eddy_data_msg_t msg;
            eddy_err_t err = {{0}};
            if (eddy_data_decode(buf, len, &msg, &err) < 0) {
                cr_assert(!msg.reader_open);
                cr_assert_neq(err.msg[0], '\0');
                bad_decode++;
                continue;
            }
            eddy_record_t rec;
            int rc;
            uint32_t n = 0;
            while ((rc = eddy_data_next_record(&msg, &rec, &err)) == 1) {
                n++;
                cr_assert_leq(rec.kind, EDDY_ROW_KIND_MAX);
                cr_assert_leq(rec.len, EDDY_RECORD_MAX_BYTES);
                if (rec.len)
                    cr_assert(rec.data >= buf && rec.data + rec.len <= buf + len);
            }
            if (rc < 0)
                bad_record++;
            else if (msg.type == EDDY_DATA_BATCH)
                cr_assert_eq(n, msg.records);
            ok += rc == 0;
            eddy_data_msg_close(&msg);
        }
    }
    free(buf);
    free(enc);
    cr_assert_gt(ok, 0);
    cr_assert_gt(bad_decode, 0);
    cr_assert_eq(bad_record, 0, "a decoded batch must read to its end");
    cr_log_info("byte changes: %lu read fully, %lu rejected, %lu bad records", ok, bad_decode,
                bad_record);
}

/* A batch carries when its oldest record was ingested; one without the
 * field (an older sender) decodes as unknown (0). */
Test(dataplane, batch_ingestion_time)
{
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    eddy_batch_writer_begin(&w, &chan);
    eddy_record_t rec = eddy_record_make("abc", 3, 7);
    eddy_batch_writer_add(&w, &rec);
    w.ingest_us = 1764750000123456ll;
    size_t len;
    char *enc = eddy_batch_writer_finish(&w, &len);
    eddy_batch_writer_free(&w);
    eddy_data_msg_t msg;
    eddy_err_t err;
    cr_assert_eq(eddy_data_decode(enc, len, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.ingest_us, 1764750000123456ll);
    eddy_record_t got;
    cr_assert_eq(eddy_data_next_record(&msg, &got, &err), 1);
    cr_assert_eq(got.value, 7);
    eddy_data_msg_close(&msg);
    free(enc);

    eddy_mpw_t old;
    eddy_mpw_init(&old);
    pack_header(&old, 8 + 4, EDDY_DATA_BATCH);
    eddy_mpw_u64(&old, 1);
    pack_record(&old, 0, 5, 0, "x");
    cr_assert_eq(eddy_data_decode(old.buf.data, old.buf.size, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.ingest_us, 0);
    cr_assert_eq(msg.records, 1);
    eddy_data_msg_close(&msg);
    eddy_mpw_free(&old);
}

/* Fluid migration's messages: HANDOFF's key groups and STATE_CHUNK's
 * bytes and checksum round-trip; a chunk beyond its group's total, a
 * truncated message and a HANDOFF over the group limit are refused. */
Test(dataplane, fluid_messages_round_trip_and_bounds)
{
    eddy_channel_id_t ch = {3, 4, 1, 0, 2, 1};
    eddy_data_msg_t msg;
    eddy_err_t err = {{0}};
    size_t len;
    uint32_t kgs[] = {0, 7, 127};
    char *enc = eddy_handoff_encode(&ch, 9, 1, kgs, 3, &len);
    cr_assert_eq(eddy_data_decode(enc, len, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.type, EDDY_DATA_HANDOFF);
    assert_channel_eq(&msg.channel, &ch);
    cr_assert_eq(msg.version, 9);
    cr_assert_eq(msg.handoff_to, 1);
    cr_assert_eq(msg.n_kgs, 3);
    cr_assert_eq(msg.kgs[2], 127);
    eddy_data_msg_close(&msg);
    every_truncation(enc, len);
    free(enc);
    uint32_t many[EDDY_HANDOFF_MAX_GROUPS + 1] = {0};
    cr_assert_null(eddy_handoff_encode(&ch, 1, 0, many, EDDY_HANDOFF_MAX_GROUPS + 1, &len));

    const char bytes[] = "state of a key group";
    enc = eddy_state_chunk_encode(&ch, 9, 7, 100, 200, bytes, sizeof bytes, &len);
    cr_assert_eq(eddy_data_decode(enc, len, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.type, EDDY_DATA_STATE_CHUNK);
    cr_assert_eq(msg.kg, 7);
    cr_assert_eq(msg.offset, 100);
    cr_assert_eq(msg.total, 200);
    cr_assert_eq(msg.chunk_len, sizeof bytes);
    cr_assert_eq(memcmp(msg.chunk, bytes, sizeof bytes), 0);
    cr_assert_eq(msg.checksum, eddy_state_chunk_checksum(bytes, sizeof bytes));
    eddy_data_msg_close(&msg);
    every_truncation(enc, len);
    free(enc);
    cr_assert_null(eddy_state_chunk_encode(&ch, 9, 7, 190, 200, bytes, sizeof bytes, &len));
    /* a chunk claiming to lie beyond its total, built by hand */
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 13);
    uint32_t head[] = {EDDY_DATA_STATE_CHUNK, 3, 4, 1, 0, 2, 1};
    for (int i = 0; i < 7; i++)
        eddy_mpw_u64(&w, head[i]);
    eddy_mpw_u64(&w, 9);
    eddy_mpw_u64(&w, 7);
    eddy_mpw_u64(&w, 190);
    eddy_mpw_u64(&w, 200);
    eddy_mpw_u64(&w, 0);
    msgpack_pack_bin(&w.pk, sizeof bytes);
    msgpack_pack_bin_body(&w.pk, bytes, sizeof bytes);
    enc = eddy_mpw_release(&w, &len);
    expect_reject(enc, len, "beyond");
    free(enc);
}
