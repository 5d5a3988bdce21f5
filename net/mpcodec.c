/* mpcodec.c - msgpack writer/reader helpers shared by all wire codecs.
 *
 * Decoding is the attack surface of every process (anything can connect to
 * a ZeroMQ port), so this file is where bounds are enforced once: a message
 * is first walked by eddy_msgpack_validate (which allocates nothing and
 * rejects anything msgpack-c could not parse or would over-allocate for),
 * then parsed completely by msgpack-c before any field is looked at, and
 * field access can never index past the array it walks. */
#include "net/mpcodec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- structural validation ------------------------------------------------ */

static inline uint32_t load_be16(const unsigned char *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

static inline uint32_t load_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads a big-endian length of `width` (1, 2 or 4) bytes at *p, advancing *p.
 * Returns false when the buffer ends first. */
static inline bool load_len(const unsigned char **p, const unsigned char *end, unsigned width,
                            uint64_t *out)
{
    if ((size_t)(end - *p) < width)
        return false;
    *out = width == 1 ? **p : width == 2 ? load_be16(*p) : load_be32(*p);
    *p += width;
    return true;
}

/* The walk keeps, for every open container, how many of its elements are
 * still to come (left[]), plus the total over all levels (pending). Each
 * element takes at least one byte, so pending can never exceed the bytes
 * left; checking that when a container opens is what bounds msgpack-c's
 * up-front allocation by the input size. */
static int validate(const unsigned char *base, size_t len, uint32_t max_depth, eddy_err_t *err)
{
    const unsigned char *p = base;
    const unsigned char *const end = base + len;
    uint64_t left[EDDY_MSGPACK_MAX_DEPTH];
    uint32_t depth = 0;
    uint64_t pending = 1; /* the top-level value */

    while (pending) {
        if (p == end)
            return eddy_err_set(err, "truncated msgpack: %llu more values expected at byte %zu",
                                (unsigned long long)pending, len);
        const unsigned char *item = p;
        unsigned b = *p++;
        uint64_t skip = 0;  /* payload bytes after the header */
        uint64_t items = 0; /* elements of a container (2 per map entry) */
        unsigned width = 0; /* bytes of a length/count field */
        bool container = false;
        pending--;

        if (b <= 0x7f || b >= 0xe0) {
            /* positive / negative fixint */
        } else if (b >= 0xa0 && b <= 0xbf) {
            skip = b & 0x1f; /* fixstr */
        } else if (b <= 0x8f) {
            container = true; /* fixmap */
            items = 2u * (b & 0x0f);
        } else if (b <= 0x9f) {
            container = true; /* fixarray */
            items = b & 0x0f;
        } else {
            switch (b) {
            case 0xc0: /* nil */
            case 0xc2: /* false */
            case 0xc3: /* true */
                break;
            case 0xc1:
                return eddy_err_set(err, "invalid msgpack: reserved byte 0xc1 at byte %zu",
                                    (size_t)(item - base));
            case 0xc4: case 0xc5: case 0xc6: /* bin 8/16/32 */
                width = 1u << (b - 0xc4);
                break;
            case 0xc7: case 0xc8: case 0xc9: /* ext 8/16/32: length, type, data */
                width = 1u << (b - 0xc7);
                skip = 1;
                break;
            case 0xca: skip = 4; break; /* float 32 */
            case 0xcb: skip = 8; break; /* float 64 */
            case 0xcc: case 0xcd: case 0xce: case 0xcf: /* uint 8..64 */
                skip = 1u << (b - 0xcc);
                break;
            case 0xd0: case 0xd1: case 0xd2: case 0xd3: /* int 8..64 */
                skip = 1u << (b - 0xd0);
                break;
            case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: /* fixext 1..16 */
                skip = 1 + (1u << (b - 0xd4));
                break;
            case 0xd9: case 0xda: case 0xdb: /* str 8/16/32 */
                width = 1u << (b - 0xd9);
                break;
            case 0xdc: case 0xdd: /* array 16/32 */
                container = true;
                width = b == 0xdc ? 2 : 4;
                break;
            default: /* 0xde, 0xdf: map 16/32 */
                container = true;
                width = b == 0xde ? 2 : 4;
                break;
            }
            if (width) {
                uint64_t n;
                if (!load_len(&p, end, width, &n))
                    return eddy_err_set(err, "truncated msgpack: header 0x%02x at byte %zu "
                                             "needs %u length bytes", b, (size_t)(item - base),
                                        width);
                if (!container)
                    skip += n;
                else
                    items = b >= 0xde ? 2 * n : n; /* maps: key + value */
            }
        }

        if (container) {
            if (depth >= max_depth)
                return eddy_err_set(err, "invalid msgpack: containers nested deeper than %u "
                                         "at byte %zu", max_depth, (size_t)(item - base));
            if (items + pending > (uint64_t)(end - p))
                return eddy_err_set(err, "truncated msgpack: container at byte %zu announces "
                                         "%llu elements; with %llu more expected after it, "
                                         "that is more than the %zu bytes left",
                                    (size_t)(item - base), (unsigned long long)items,
                                    (unsigned long long)pending, (size_t)(end - p));
            if (items) {
                left[depth++] = items;
                pending += items;
                continue;
            }
        } else {
            if (skip > (uint64_t)(end - p))
                return eddy_err_set(err, "truncated msgpack: value at byte %zu needs %llu "
                                         "payload bytes, only %zu left", (size_t)(item - base),
                                    (unsigned long long)skip, (size_t)(end - p));
            p += skip;
        }
        /* A value is complete: close every container it completes. */
        while (depth && --left[depth - 1] == 0)
            depth--;
    }
    if (p != end)
        return eddy_err_set(err, "invalid msgpack: %zu trailing bytes from byte %zu on",
                            (size_t)(end - p), (size_t)(p - base));
    return 0;
}

int eddy_msgpack_validate(const void *data, size_t len, uint32_t max_depth, eddy_err_t *err)
{
    if (len == 0)
        return eddy_err_set(err, "truncated msgpack: empty buffer");
    if (!data)
        return eddy_err_set(err, "invalid msgpack: NULL buffer");
    if (max_depth > EDDY_MSGPACK_MAX_DEPTH)
        max_depth = EDDY_MSGPACK_MAX_DEPTH;
    return validate(data, len, max_depth, err);
}

/* ---- writer ----------------------------------------------------------------- */

void eddy_mpw_init(eddy_mpw_t *w)
{
    msgpack_sbuffer_init(&w->buf);
    msgpack_packer_init(&w->pk, &w->buf, msgpack_sbuffer_write);
}

void eddy_mpw_reset(eddy_mpw_t *w)
{
    msgpack_sbuffer_clear(&w->buf);
}

void eddy_mpw_free(eddy_mpw_t *w)
{
    msgpack_sbuffer_destroy(&w->buf);
    w->buf.data = NULL;
    w->buf.size = w->buf.alloc = 0;
}

char *eddy_mpw_release(eddy_mpw_t *w, size_t *len)
{
    *len = w->buf.size;
    return msgpack_sbuffer_release(&w->buf);
}

void eddy_mpw_str(eddy_mpw_t *w, const char *s)
{
    if (!s) {
        msgpack_pack_nil(&w->pk);
        return;
    }
    size_t n = strlen(s);
    msgpack_pack_str(&w->pk, n);
    msgpack_pack_str_body(&w->pk, s, n);
}

void eddy_mpw_bin(eddy_mpw_t *w, const void *p, size_t len)
{
    msgpack_pack_bin(&w->pk, len);
    msgpack_pack_bin_body(&w->pk, p, len);
}

void eddy_mpw_u64(eddy_mpw_t *w, uint64_t v) { msgpack_pack_uint64(&w->pk, v); }
void eddy_mpw_i64(eddy_mpw_t *w, int64_t v) { msgpack_pack_int64(&w->pk, v); }
void eddy_mpw_bool(eddy_mpw_t *w, bool v) { v ? msgpack_pack_true(&w->pk) : msgpack_pack_false(&w->pk); }
void eddy_mpw_double(eddy_mpw_t *w, double v) { msgpack_pack_double(&w->pk, v); }
void eddy_mpw_array(eddy_mpw_t *w, uint32_t n) { msgpack_pack_array(&w->pk, n); }

int eddy_mpr_open(eddy_mpr_t *r, const void *data, size_t len, eddy_err_t *err)
{
    memset(r, 0, sizeof *r);
    msgpack_unpacked_init(&r->unpacked);
    /* Before msgpack-c sees the bytes: it allocates for announced counts. */
    if (eddy_msgpack_validate(data, len, EDDY_MSGPACK_MAX_DEPTH, err) < 0)
        return eddy_err_wrap(err, "malformed message (%zu bytes)", len);
    size_t off = 0;
    msgpack_unpack_return rc = msgpack_unpack_next(&r->unpacked, data, len, &off);
    if (rc != MSGPACK_UNPACK_SUCCESS && rc != MSGPACK_UNPACK_EXTRA_BYTES) {
        msgpack_unpacked_destroy(&r->unpacked);
        return eddy_err_set(err, rc == MSGPACK_UNPACK_CONTINUE
                                     ? "truncated message (%zu bytes)"
                                     : "malformed message (%zu bytes)", len);
    }
    if (off != len) {
        msgpack_unpacked_destroy(&r->unpacked);
        return eddy_err_set(err, "malformed message: %zu trailing bytes", len - off);
    }
    if (r->unpacked.data.type != MSGPACK_OBJECT_ARRAY) {
        msgpack_unpacked_destroy(&r->unpacked);
        return eddy_err_set(err, "malformed message: not an array");
    }
    r->items = r->unpacked.data.via.array.ptr;
    r->count = r->unpacked.data.via.array.size;
    r->next = 0;
    r->ok = true;
    return 0;
}

void eddy_mpr_close(eddy_mpr_t *r)
{
    msgpack_unpacked_destroy(&r->unpacked);
    r->items = NULL;
    r->count = r->next = 0;
}

static void fail(eddy_mpr_t *r, const char *what)
{
    if (r->ok) {
        r->ok = false;
        snprintf(r->what, sizeof r->what, "field %u: %s", r->next, what);
    }
}

/* For an element that take() already consumed: name its index, not the next. */
static void fail_taken(eddy_mpr_t *r, const char *what)
{
    if (r->ok) {
        r->ok = false;
        snprintf(r->what, sizeof r->what, "field %u: %s", r->next - 1, what);
    }
}

void eddy_mpr_fail(eddy_mpr_t *r, const char *what)
{
    fail(r, what);
}

static const msgpack_object *take(eddy_mpr_t *r)
{
    if (!r->ok)
        return NULL;
    if (r->next >= r->count) {
        fail(r, "missing");
        return NULL;
    }
    return &r->items[r->next++];
}

uint32_t eddy_mpr_remaining(const eddy_mpr_t *r)
{
    return r->ok ? r->count - r->next : 0;
}

uint64_t eddy_mpr_u64(eddy_mpr_t *r, uint64_t max)
{
    const msgpack_object *o = take(r);
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        fail_taken(r, "expected an unsigned integer");
        return 0;
    }
    if (o->via.u64 > max) {
        fail_taken(r, "integer out of range");
        return 0;
    }
    return o->via.u64;
}

int64_t eddy_mpr_i64(eddy_mpr_t *r)
{
    const msgpack_object *o = take(r);
    if (!o)
        return 0;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return o->via.i64;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= (uint64_t)INT64_MAX)
        return (int64_t)o->via.u64;
    fail_taken(r, "expected a signed integer");
    return 0;
}

bool eddy_mpr_bool(eddy_mpr_t *r)
{
    const msgpack_object *o = take(r);
    if (!o)
        return false;
    if (o->type != MSGPACK_OBJECT_BOOLEAN) {
        fail_taken(r, "expected a boolean");
        return false;
    }
    return o->via.boolean;
}

double eddy_mpr_double(eddy_mpr_t *r)
{
    const msgpack_object *o = take(r);
    if (!o)
        return 0;
    if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
        return o->via.f64;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return (double)o->via.u64;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return (double)o->via.i64;
    fail_taken(r, "expected a number");
    return 0;
}

const char *eddy_mpr_bytes(eddy_mpr_t *r, uint32_t max, uint32_t *len)
{
    *len = 0;
    const msgpack_object *o = take(r);
    if (!o)
        return NULL;
    if (o->type == MSGPACK_OBJECT_STR || o->type == MSGPACK_OBJECT_BIN) {
        /* str and bin share layout in msgpack_object */
        if (o->via.bin.size > max) {
            fail_taken(r, "string too long");
            return NULL;
        }
        *len = o->via.bin.size;
        /* msgpack-c may leave ptr NULL (or stale) for an empty str/bin. */
        return o->via.bin.size ? o->via.bin.ptr : "";
    }
    fail_taken(r, "expected a string");
    return NULL;
}

void eddy_mpr_strcpy(eddy_mpr_t *r, char *dst, size_t dst_size)
{
    dst[0] = '\0';
    const msgpack_object *o = take(r);
    if (!o)
        return;
    if (o->type == MSGPACK_OBJECT_NIL)
        return;
    if (o->type != MSGPACK_OBJECT_STR) {
        fail_taken(r, "expected a string");
        return;
    }
    if (o->via.str.size >= dst_size) {
        fail_taken(r, "string too long");
        return;
    }
    if (o->via.str.size && memchr(o->via.str.ptr, '\0', o->via.str.size)) {
        fail_taken(r, "string contains a NUL byte");
        return;
    }
    if (o->via.str.size) /* ptr may be NULL when empty */
        memcpy(dst, o->via.str.ptr, o->via.str.size);
    dst[o->via.str.size] = '\0';
}

char *eddy_mpr_strdup(eddy_mpr_t *r, uint32_t max)
{
    const msgpack_object *o = take(r);
    if (!o || o->type == MSGPACK_OBJECT_NIL)
        return NULL;
    if (o->type != MSGPACK_OBJECT_STR) {
        fail_taken(r, "expected a string");
        return NULL;
    }
    if (o->via.str.size > max) {
        fail_taken(r, "string too long");
        return NULL;
    }
    if (o->via.str.size && memchr(o->via.str.ptr, '\0', o->via.str.size)) {
        fail_taken(r, "string contains a NUL byte");
        return NULL;
    }
    char *s = malloc(o->via.str.size + 1);
    if (!s) {
        fail_taken(r, "out of memory");
        return NULL;
    }
    if (o->via.str.size) /* ptr may be NULL when empty */
        memcpy(s, o->via.str.ptr, o->via.str.size);
    s[o->via.str.size] = '\0';
    return s;
}

uint32_t eddy_mpr_enter(eddy_mpr_t *r, uint32_t max, const msgpack_object **saved_items,
                        uint32_t *saved_count, uint32_t *saved_next)
{
    const msgpack_object *o = take(r);
    *saved_items = r->items;
    *saved_count = r->count;
    *saved_next = r->next;
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_ARRAY) {
        fail_taken(r, "expected an array");
        return 0;
    }
    if (o->via.array.size > max) {
        fail_taken(r, "array too long");
        return 0;
    }
    r->items = o->via.array.ptr;
    r->count = o->via.array.size;
    r->next = 0;
    return r->count;
}

void eddy_mpr_leave(eddy_mpr_t *r, const msgpack_object *saved_items, uint32_t saved_count,
                    uint32_t saved_next)
{
    if (r->ok && r->next != r->count)
        fail(r, "unexpected extra elements in nested array");
    r->items = saved_items;
    r->count = saved_count;
    r->next = saved_next;
}

int eddy_mpr_finish(eddy_mpr_t *r, const char *message_name, eddy_err_t *err)
{
    if (r->ok && r->next != r->count)
        fail(r, "unexpected extra fields");
    if (!r->ok)
        return eddy_err_set(err, "malformed %s message: %s", message_name, r->what);
    return 0;
}
