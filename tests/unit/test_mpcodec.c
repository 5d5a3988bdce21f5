/* test_mpcodec.c - the msgpack structural validator and reader (net/mpcodec.c).
 *
 * eddy_msgpack_validate stands between untrusted network bytes and
 * msgpack-c, whose unpacker allocates for an announced array/map size before
 * checking that the elements exist. These tests cover every msgpack format
 * (accepted when complete, rejected at every truncation), the reserved byte,
 * trailing bytes, the depth limit, the "more elements than bytes" rule and
 * hostile 32-bit headers, and cross-check the validator against msgpack-c
 * itself on many random inputs that cannot make msgpack-c over-allocate.
 * The reader tests check that eddy_mpr_open refuses what the validator
 * refuses and that the string getters reject embedded NULs. */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/mpcodec.h"

#include "leak_check.h"

TestSuite(mpcodec_validate, .fini = eddy_test_leak_check);
TestSuite(mpcodec_reader, .fini = eddy_test_leak_check);

#define D EDDY_MSGPACK_MAX_DEPTH

static int check(const void *data, size_t len)
{
    eddy_err_t err = {{0}};
    int rc = eddy_msgpack_validate(data, len, D, &err);
    if (rc < 0)
        cr_assert_neq(err.msg[0], '\0', "a rejection must say why");
    return rc;
}

static void expect_ok(const void *data, size_t len, const char *what)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_msgpack_validate(data, len, D, &err), 0, "%s: %s", what, err.msg);
}

static void expect_reject(const void *data, size_t len, const char *needle)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_msgpack_validate(data, len, D, &err), -1, "accepted %zu bytes", len);
    if (needle)
        cr_assert_not_null(strstr(err.msg, needle), "'%s' not in '%s'", needle, err.msg);
}

/* What msgpack-c says about the same bytes: 0 when it parses exactly one
 * complete value that uses all of them. Only call on inputs that cannot make
 * it allocate much (see the file comment). */
static int msgpack_c_accepts(const void *data, size_t len)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    msgpack_unpack_return rc = msgpack_unpack_next(&u, data, len, &off);
    msgpack_unpacked_destroy(&u);
    return (rc == MSGPACK_UNPACK_SUCCESS || rc == MSGPACK_UNPACK_EXTRA_BYTES) && off == len ? 0
                                                                                            : -1;
}

/* One complete value of every msgpack format, written by hand so the exact
 * header bytes are the ones under test. */
typedef struct sample {
    const char *name;
    const unsigned char *bytes;
    size_t len;
} sample_t;

#define S(name, ...)                                                                       \
    {name, (const unsigned char[]){__VA_ARGS__}, sizeof((const unsigned char[]){__VA_ARGS__})}

static const sample_t samples[] = {
    S("positive fixint", 0x00),
    S("positive fixint max", 0x7f),
    S("negative fixint", 0xe0),
    S("negative fixint -1", 0xff),
    S("nil", 0xc0),
    S("false", 0xc2),
    S("true", 0xc3),
    S("float32", 0xca, 0x3f, 0x80, 0x00, 0x00),
    S("float64", 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0),
    S("uint8", 0xcc, 0xff),
    S("uint16", 0xcd, 0xff, 0xff),
    S("uint32", 0xce, 0xff, 0xff, 0xff, 0xff),
    S("uint64", 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
    S("int8", 0xd0, 0x80),
    S("int16", 0xd1, 0x80, 0x00),
    S("int32", 0xd2, 0x80, 0, 0, 0),
    S("int64", 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0),
    S("fixstr empty", 0xa0),
    S("fixstr", 0xa3, 'a', 'b', 'c'),
    S("str8", 0xd9, 0x02, 'h', 'i'),
    S("str16", 0xda, 0x00, 0x03, 'x', 'y', 'z'),
    S("str32", 0xdb, 0x00, 0x00, 0x00, 0x01, 'q'),
    S("str8 empty", 0xd9, 0x00),
    S("bin8", 0xc4, 0x02, 0x00, 0x01),
    S("bin16", 0xc5, 0x00, 0x01, 0x00),
    S("bin32", 0xc6, 0x00, 0x00, 0x00, 0x03, 0, 0, 0),
    S("bin8 empty", 0xc4, 0x00),
    S("fixext1", 0xd4, 0x01, 0xaa),
    S("fixext2", 0xd5, 0x01, 0xaa, 0xbb),
    S("fixext4", 0xd6, 0x01, 1, 2, 3, 4),
    S("fixext8", 0xd7, 0x01, 1, 2, 3, 4, 5, 6, 7, 8),
    S("fixext16", 0xd8, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16),
    S("ext8", 0xc7, 0x02, 0x05, 0xaa, 0xbb),
    S("ext16", 0xc8, 0x00, 0x01, 0x05, 0xaa),
    S("ext32", 0xc9, 0x00, 0x00, 0x00, 0x02, 0x05, 0xaa, 0xbb),
    S("fixarray empty", 0x90),
    S("fixarray", 0x93, 0x01, 0xc0, 0xa1, 'x'),
    S("array16", 0xdc, 0x00, 0x02, 0x01, 0x02),
    S("array32", 0xdd, 0x00, 0x00, 0x00, 0x01, 0xc3),
    S("array16 empty", 0xdc, 0x00, 0x00),
    S("fixmap empty", 0x80),
    S("fixmap", 0x82, 0x01, 0x02, 0xa1, 'k', 0x90),
    S("map16", 0xde, 0x00, 0x01, 0x01, 0x02),
    S("map32", 0xdf, 0x00, 0x00, 0x00, 0x01, 0xc0, 0xc0),
    S("nested", 0x92, 0x81, 0xa1, 'a', 0x91, 0x91, 0x90, 0xdc, 0x00, 0x01, 0xc4, 0x01, 0x00),
};

#define N_SAMPLES (sizeof samples / sizeof samples[0])

Test(mpcodec_validate, accepts_every_format)
{
    for (size_t i = 0; i < N_SAMPLES; i++) {
        expect_ok(samples[i].bytes, samples[i].len, samples[i].name);
        cr_assert_eq(msgpack_c_accepts(samples[i].bytes, samples[i].len), 0,
                     "msgpack-c disagrees on %s", samples[i].name);
    }
}

Test(mpcodec_validate, rejects_every_truncation_of_every_format)
{
    for (size_t i = 0; i < N_SAMPLES; i++)
        for (size_t n = 0; n < samples[i].len; n++) {
            eddy_err_t err = {{0}};
            cr_assert_eq(eddy_msgpack_validate(samples[i].bytes, n, D, &err), -1,
                         "%s cut to %zu bytes accepted", samples[i].name, n);
            cr_assert_not_null(strstr(err.msg, "truncated"), "%s/%zu: %s", samples[i].name, n,
                               err.msg);
        }
}

Test(mpcodec_validate, rejects_trailing_bytes)
{
    for (size_t i = 0; i < N_SAMPLES; i++) {
        unsigned char buf[64];
        memcpy(buf, samples[i].bytes, samples[i].len);
        buf[samples[i].len] = 0x00;
        buf[samples[i].len + 1] = 0xc0;
        expect_reject(buf, samples[i].len + 1, "1 trailing byte");
        expect_reject(buf, samples[i].len + 2, "2 trailing bytes");
    }
}

Test(mpcodec_validate, rejects_reserved_byte)
{
    expect_reject("\xc1", 1, "0xc1");
    expect_reject("\x92\x01\xc1", 3, "0xc1 at byte 2");
    expect_reject("\x81\xc1\x01", 3, "0xc1");
    expect_reject("\x81\x01\xc1", 3, "0xc1");
}

Test(mpcodec_validate, rejects_empty_and_null)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_msgpack_validate("", 0, D, &err), -1);
    cr_assert_not_null(strstr(err.msg, "empty"));
    cr_assert_eq(eddy_msgpack_validate(NULL, 0, D, &err), -1);
    cr_assert_eq(eddy_msgpack_validate(NULL, 5, D, &err), -1);
    cr_assert_not_null(strstr(err.msg, "NULL"));
    cr_assert_eq(eddy_msgpack_validate("\x01", 1, D, NULL), 0); /* NULL err is fine */
    cr_assert_eq(eddy_msgpack_validate("\xc1", 1, D, NULL), -1);
}

Test(mpcodec_validate, hostile_headers_rejected_quickly, .timeout = 5)
{
    /* Container headers announcing billions of elements over a few bytes. */
    expect_reject("\xdd\xff\xff\xff\xff", 5, "announces 4294967295 elements");
    expect_reject("\xdf\xff\xff\xff\xff", 5, "announces 8589934590 elements");
    expect_reject("\xdc\xff\xff", 3, "announces 65535 elements");
    expect_reject("\xde\xff\xff", 3, "announces 131070 elements");
    expect_reject("\xdd\xff\xff\xff\xff\x01\x02\x03\x04\x05\x06\x07\x08", 13, "announces");
    /* Same, nested below a harmless prefix. */
    expect_reject("\x93\x01\xa1x\xdd\xff\xff\xff\xff\x01\x01", 11, "at byte 4");
    expect_reject("\x92\x01\xdf\x7f\xff\xff\xff\x01\x01", 9, "announces");
    /* Payload lengths far past the end. */
    expect_reject("\xdb\xff\xff\xff\xff", 5, "truncated");
    expect_reject("\xc6\xff\xff\xff\xff\x00", 6, "truncated");
    expect_reject("\xc9\xff\xff\xff\xff\x01", 6, "truncated");
    expect_reject("\xda\xff\xff", 3, "truncated");

    /* Under the limit for one container but not once the pending elements of
     * the enclosing ones are counted too: [[5 elements], x] over 5 bytes. */
    expect_reject("\x92\xdc\x00\x05\x01\x01\x01\x01\x01", 9, "announces 5 elements");
    expect_ok("\x92\xdc\x00\x05\x01\x01\x01\x01\x01\x01", 10, "[[1,1,1,1,1],1]");
    /* A map needs two elements per entry: {3 entries} over 5 bytes. */
    expect_reject("\x83\x01\x01\x01\x01\x01", 6, "announces 6 elements");

    /* The hostile headers must also be refused by the reader, i.e. before
     * msgpack-c sees them (it would try to allocate ~100 GB and abort
     * under ASan, or run out of memory). */
    static const char *const hostile[] = {"\xdd\xff\xff\xff\xff", "\xdf\xff\xff\xff\xff",
                                          "\x91\xdd\xff\xff\xff\xff", "\x91\xdf\xff\xff\xff\xff"};
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        eddy_mpr_t r;
        eddy_err_t err = {{0}};
        size_t len = hostile[i][0] == '\x91' ? 6 : 5;
        cr_assert_eq(eddy_mpr_open(&r, hostile[i], len, &err), -1);
        cr_assert_not_null(strstr(err.msg, "malformed message"), "%s", err.msg);
    }
    /* And padded out, so the header alone is not short. */
    unsigned char *buf = calloc(1, 1 << 16);
    memcpy(buf, "\xdd\xff\xff\xff\xff", 5);
    for (int i = 0; i < 1000; i++)
        expect_reject(buf, 1 << 16, "announces");
    free(buf);
}

static size_t nest(unsigned char *buf, unsigned levels, unsigned char opener)
{
    size_t n = 0;
    for (unsigned i = 0; i < levels; i++) {
        buf[n++] = opener;
        if (opener == 0x81)
            buf[n++] = 0x00; /* key */
    }
    buf[n++] = 0x01; /* innermost value */
    return n;
}

Test(mpcodec_validate, depth_limit)
{
    unsigned char buf[256];
    for (unsigned char opener = 0x91; opener; opener = opener == 0x91 ? 0x81 : 0) {
        size_t n = nest(buf, D, opener);
        expect_ok(buf, n, "32 levels");
        cr_assert_eq(msgpack_c_accepts(buf, n), 0);
        n = nest(buf, D + 1, opener);
        expect_reject(buf, n, "nested deeper than 32");
        cr_assert_eq(msgpack_c_accepts(buf, n), -1, "msgpack-c cannot parse 33 levels either");
    }
    /* An empty innermost container counts as a level too (as in msgpack-c). */
    memset(buf, 0x91, D);
    buf[D] = 0x90;
    expect_reject(buf, D + 1, "deeper");
    cr_assert_eq(msgpack_c_accepts(buf, D + 1), -1);
    cr_assert_eq(check(buf + 1, D), 0);

    /* Caller-chosen limits. */
    eddy_err_t err;
    cr_assert_eq(eddy_msgpack_validate("\x01", 1, 0, &err), 0);
    cr_assert_eq(eddy_msgpack_validate("\x90", 1, 0, &err), -1);
    cr_assert_eq(eddy_msgpack_validate("\x92\x01\x02", 3, 1, &err), 0);
    cr_assert_eq(eddy_msgpack_validate("\x92\x01\x90", 3, 1, &err), -1);
    cr_assert_eq(eddy_msgpack_validate("\x92\x91\x01\x90", 4, 2, &err), 0);
    /* Siblings do not add up: depth is nesting, not a count of containers. */
    cr_assert_eq(eddy_msgpack_validate("\x94\x91\x01\x91\x01\x91\x01\x90", 8, 2, &err), 0);
    /* Limits above EDDY_MSGPACK_MAX_DEPTH are clamped to it. */
    {
        size_t n = nest(buf, D + 1, 0x91);
        cr_assert_eq(eddy_msgpack_validate(buf, n, 1000, &err), -1);
        cr_assert_eq(eddy_msgpack_validate(buf, n, UINT32_MAX, &err), -1);
    }
}

Test(mpcodec_validate, large_valid_values)
{
    /* array32 and map32 with many real elements, and a 1 MiB bin. */
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 100000);
    for (uint32_t i = 0; i < 100000; i++)
        eddy_mpw_u64(&w, (uint64_t)i * 7919u);
    expect_ok(w.buf.data, w.buf.size, "array of 100000");
    cr_assert_eq(msgpack_c_accepts(w.buf.data, w.buf.size), 0);
    /* One byte short of the last element: the count no longer fits. */
    expect_reject(w.buf.data, w.buf.size - 1, "truncated");

    eddy_mpw_reset(&w);
    msgpack_pack_map(&w.pk, 70000);
    for (uint32_t i = 0; i < 70000; i++) {
        eddy_mpw_u64(&w, i);
        eddy_mpw_str(&w, "v");
    }
    expect_ok(w.buf.data, w.buf.size, "map of 70000");
    cr_assert_eq(msgpack_c_accepts(w.buf.data, w.buf.size), 0);

    eddy_mpw_reset(&w);
    char *blob = calloc(1, 1 << 20);
    eddy_mpw_array(&w, 2);
    eddy_mpw_bin(&w, blob, 1 << 20);
    eddy_mpw_str(&w, "after");
    expect_ok(w.buf.data, w.buf.size, "1 MiB bin");
    expect_reject(w.buf.data, w.buf.size - 6, "truncated");
    free(blob);
    eddy_mpw_free(&w);
}

/* xorshift64*: deterministic, seeded per test. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* A random byte biased towards headers, never a 16/32-bit array or map
 * header, so msgpack-c allocates at most 15 elements per container. */
static unsigned char random_byte(void)
{
    static const unsigned char interesting[] = {
        0x00, 0x01, 0x7f, 0x80, 0x81, 0x82, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x9f, 0xa0, 0xa1,
        0xa2, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xcb,
        0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9,
        0xda, 0xdb, 0xe0, 0xff};
    uint64_t r = rnd();
    unsigned char b = (r & 1) ? interesting[(r >> 8) % sizeof interesting] : (unsigned char)(r >> 16);
    if (b >= 0xdc && b <= 0xdf)
        b = 0x90;
    return b;
}

Test(mpcodec_validate, agrees_with_msgpack_c_on_random_input, .timeout = 60)
{
    rng_state = 0x9E3779B97F4A7C15ull;
    unsigned char buf[40];
    unsigned accepted = 0;
    for (int iter = 0; iter < 1000000; iter++) {
        size_t len = 1 + rnd() % ((rnd() & 1) ? 6 : sizeof buf);
        for (size_t i = 0; i < len; i++)
            buf[i] = random_byte();
        /* Lengths of str/bin/ext are mostly small so values can complete. */
        for (size_t i = 0; i + 1 < len; i++)
            if (buf[i] >= 0xc4 && buf[i] <= 0xdb && (rnd() & 3))
                buf[i + 1] = (unsigned char)(rnd() % 4);
        int ours = check(buf, len);
        int theirs = msgpack_c_accepts(buf, len);
        if (ours != theirs) {
            char hex[sizeof buf * 3 + 1];
            for (size_t i = 0; i < len; i++)
                snprintf(hex + 3 * i, 4, "%02x ", buf[i]);
            cr_assert_fail("validator %d, msgpack-c %d on %s", ours, theirs, hex);
        }
        accepted += ours == 0;
    }
    /* The generator must produce a fair share of valid values, or this
     * test would only compare rejections. */
    cr_assert_gt(accepted, 25000, "only %u valid inputs", accepted);
    cr_log_info("%u of 1000000 random inputs valid", accepted);
}

Test(mpcodec_validate, agrees_with_msgpack_c_on_every_prefix_and_flip)
{
    /* A realistic message: every prefix and every single-byte change that
     * does not introduce a 16/32-bit container header. */
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 8);
    eddy_mpw_u64(&w, 4);
    eddy_mpw_str(&w, "wordcount");
    eddy_mpw_i64(&w, -123456789);
    eddy_mpw_double(&w, 2.5);
    eddy_mpw_bool(&w, true);
    eddy_mpw_bin(&w, "\0\1\2", 3);
    eddy_mpw_array(&w, 2);
    eddy_mpw_str(&w, NULL);
    eddy_mpw_u64(&w, UINT64_MAX);
    msgpack_pack_map(&w.pk, 1);
    eddy_mpw_str(&w, "k");
    eddy_mpw_u64(&w, 300);
    unsigned char *buf = (unsigned char *)w.buf.data;
    size_t len = w.buf.size;
    for (size_t n = 0; n <= len; n++)
        cr_assert_eq(check(buf, n), msgpack_c_accepts(buf, n), "prefix %zu", n);
    for (size_t i = 0; i < len; i++) {
        unsigned char saved = buf[i];
        for (unsigned v = 0; v < 256; v++) {
            if (v >= 0xdc && v <= 0xdf)
                continue;
            buf[i] = (unsigned char)v;
            cr_assert_eq(check(buf, len), msgpack_c_accepts(buf, len), "byte %zu = 0x%02x", i,
                         v);
        }
        buf[i] = saved;
    }
    eddy_mpw_free(&w);
}

Test(mpcodec_validate, fast_on_large_batches)
{
    /* ~1 MB of small elements, the shape of a DATA batch. */
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 4 * 50000);
    for (uint32_t i = 0; i < 50000; i++) {
        eddy_mpw_u64(&w, i & 3);
        eddy_mpw_i64(&w, -(int64_t)i * 1000003);
        eddy_mpw_i64(&w, (int64_t)i * 17);
        eddy_mpw_bin(&w, "some-word", 9);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(check(w.buf.data, w.buf.size), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    /* 20 x 1 MB; generous enough for sanitizer builds on a slow machine. */
    cr_assert_lt(s, 5.0, "validation took %.3f s", s);
    eddy_mpw_free(&w);
}

/* ---- reader ------------------------------------------------------------- */

Test(mpcodec_reader, open_requires_one_complete_array)
{
    eddy_mpr_t r;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_mpr_open(&r, "\x92\x01\xa1x", 4, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_mpr_remaining(&r), 2);
    cr_assert_eq(eddy_mpr_u64(&r, 10), 1);
    uint32_t n;
    const char *s = eddy_mpr_bytes(&r, 10, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(s[0], 'x');
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), 0);
    eddy_mpr_close(&r);

    cr_assert_eq(eddy_mpr_open(&r, "\x01", 1, &err), -1);
    cr_assert_not_null(strstr(err.msg, "not an array"), "%s", err.msg);
    cr_assert_eq(eddy_mpr_open(&r, "\x92\x01", 2, &err), -1);
    cr_assert_not_null(strstr(err.msg, "truncated"), "%s", err.msg);
    cr_assert_eq(eddy_mpr_open(&r, "\x91\x01\x01", 3, &err), -1);
    cr_assert_not_null(strstr(err.msg, "trailing"), "%s", err.msg);
    cr_assert_eq(eddy_mpr_open(&r, NULL, 0, &err), -1);
    cr_assert_eq(eddy_mpr_open(&r, "\x91\xc1", 2, &err), -1);
}

Test(mpcodec_reader, getters_check_type_and_range)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 6);
    eddy_mpw_u64(&w, 5);
    eddy_mpw_i64(&w, -5);
    eddy_mpw_double(&w, 1.5);
    eddy_mpw_bool(&w, true);
    eddy_mpw_str(&w, "abc");
    eddy_mpw_str(&w, NULL);
    eddy_mpr_t r;
    eddy_err_t err = {{0}};

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    cr_assert_eq(eddy_mpr_u64(&r, 5), 5);
    cr_assert_eq(eddy_mpr_i64(&r), -5);
    cr_assert_eq(eddy_mpr_double(&r), 1.5);
    cr_assert(eddy_mpr_bool(&r));
    char small[4];
    eddy_mpr_strcpy(&r, small, sizeof small);
    cr_assert_str_eq(small, "abc");
    cr_assert_null(eddy_mpr_strdup(&r, 10)); /* nil */
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), 0, "%s", err.msg);
    eddy_mpr_close(&r);

    /* Out of range sticks and names the field. */
    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    cr_assert_eq(eddy_mpr_u64(&r, 4), 0);
    cr_assert_eq(eddy_mpr_remaining(&r), 0);
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_str_eq(err.msg, "malformed T message: field 0: integer out of range");
    eddy_mpr_close(&r);

    /* A string that does not fit the destination, and leftovers. */
    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    for (int i = 0; i < 4; i++)
        (void)eddy_mpr_double(&r); /* u64, i64, double are numbers; bool is not */
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_not_null(strstr(err.msg, "field 3: expected a number"), "%s", err.msg);
    eddy_mpr_close(&r);

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    for (int i = 0; i < 4; i++)
        (void)eddy_mpr_u64(&r, UINT64_MAX);
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_not_null(strstr(err.msg, "field 1: expected an unsigned"), "%s", err.msg);
    eddy_mpr_close(&r);

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    (void)eddy_mpr_u64(&r, 9);
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_not_null(strstr(err.msg, "unexpected extra fields"), "%s", err.msg);
    eddy_mpr_close(&r);

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    for (int i = 0; i < 3; i++)
        (void)eddy_mpr_double(&r);
    eddy_mpr_fail(&r, "custom reason");
    eddy_mpr_fail(&r, "second reason is ignored");
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_not_null(strstr(err.msg, "custom reason"), "%s", err.msg);
    eddy_mpr_close(&r);
    eddy_mpw_free(&w);
}

Test(mpcodec_reader, strings_with_nul_are_rejected)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 3);
    msgpack_pack_str(&w.pk, 3);
    msgpack_pack_str_body(&w.pk, "a\0b", 3);
    msgpack_pack_str(&w.pk, 3);
    msgpack_pack_str_body(&w.pk, "a\0b", 3);
    eddy_mpw_bin(&w, "a\0b", 3);
    eddy_mpr_t r;
    eddy_err_t err = {{0}};

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    char dst[16];
    eddy_mpr_strcpy(&r, dst, sizeof dst);
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_not_null(strstr(err.msg, "field 0: string contains a NUL byte"), "%s", err.msg);
    eddy_mpr_close(&r);

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    uint32_t n;
    cr_assert_not_null(eddy_mpr_bytes(&r, 16, &n)); /* bytes may hold anything */
    cr_assert_null(eddy_mpr_strdup(&r, 16));
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_not_null(strstr(err.msg, "field 1: string contains a NUL byte"), "%s", err.msg);
    eddy_mpr_close(&r);

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    (void)eddy_mpr_bytes(&r, 16, &n);
    (void)eddy_mpr_bytes(&r, 16, &n);
    const char *b = eddy_mpr_bytes(&r, 16, &n);
    cr_assert_eq(n, 3);
    cr_assert_eq(memcmp(b, "a\0b", 3), 0);
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), 0);
    eddy_mpr_close(&r);
    eddy_mpw_free(&w);
}

Test(mpcodec_reader, nested_arrays)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 3);
    eddy_mpw_array(&w, 2);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_u64(&w, 2);
    eddy_mpw_array(&w, 0);
    eddy_mpw_u64(&w, 3);
    eddy_mpr_t r;
    eddy_err_t err = {{0}};
    const msgpack_object *si;
    uint32_t sc, sn;

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    cr_assert_eq(eddy_mpr_enter(&r, 2, &si, &sc, &sn), 2);
    cr_assert_eq(eddy_mpr_u64(&r, 9), 1);
    cr_assert_eq(eddy_mpr_u64(&r, 9), 2);
    eddy_mpr_leave(&r, si, sc, sn);
    cr_assert_eq(eddy_mpr_enter(&r, 2, &si, &sc, &sn), 0);
    eddy_mpr_leave(&r, si, sc, sn);
    cr_assert_eq(eddy_mpr_u64(&r, 9), 3);
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), 0, "%s", err.msg);
    eddy_mpr_close(&r);

    /* Too long, elements left inside, and not an array. */
    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    cr_assert_eq(eddy_mpr_enter(&r, 1, &si, &sc, &sn), 0);
    eddy_mpr_leave(&r, si, sc, sn);
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_not_null(strstr(err.msg, "array too long"), "%s", err.msg);
    eddy_mpr_close(&r);

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    cr_assert_eq(eddy_mpr_enter(&r, 2, &si, &sc, &sn), 2);
    (void)eddy_mpr_u64(&r, 9);
    eddy_mpr_leave(&r, si, sc, sn);
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_not_null(strstr(err.msg, "extra elements"), "%s", err.msg);
    eddy_mpr_close(&r);

    cr_assert_eq(eddy_mpr_open(&r, w.buf.data, w.buf.size, &err), 0);
    (void)eddy_mpr_enter(&r, 2, &si, &sc, &sn);
    (void)eddy_mpr_u64(&r, 9);
    (void)eddy_mpr_u64(&r, 9);
    eddy_mpr_leave(&r, si, sc, sn);
    (void)eddy_mpr_enter(&r, 2, &si, &sc, &sn);
    eddy_mpr_leave(&r, si, sc, sn);
    cr_assert_eq(eddy_mpr_enter(&r, 2, &si, &sc, &sn), 0);
    eddy_mpr_leave(&r, si, sc, sn);
    cr_assert_eq(eddy_mpr_finish(&r, "T", &err), -1);
    cr_assert_not_null(strstr(err.msg, "field 2: expected an array"), "%s", err.msg);
    eddy_mpr_close(&r);
    eddy_mpw_free(&w);
}
