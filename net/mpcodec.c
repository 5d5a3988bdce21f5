/* mpcodec.c - msgpack writer/reader helpers shared by all wire codecs.
 *
 * Decoding is the attack surface of every process (anything can connect to
 * a ZeroMQ port), so this file is where bounds are enforced once: a message
 * is parsed completely by msgpack-c before any field is looked at, and field
 * access can never index past the array it walks. */
#include "net/mpcodec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        fail(r, "expected an unsigned integer");
        return 0;
    }
    if (o->via.u64 > max) {
        fail(r, "integer out of range");
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
    fail(r, "expected a signed integer");
    return 0;
}

bool eddy_mpr_bool(eddy_mpr_t *r)
{
    const msgpack_object *o = take(r);
    if (!o)
        return false;
    if (o->type != MSGPACK_OBJECT_BOOLEAN) {
        fail(r, "expected a boolean");
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
    fail(r, "expected a number");
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
            fail(r, "string too long");
            return NULL;
        }
        *len = o->via.bin.size;
        return o->via.bin.ptr;
    }
    fail(r, "expected a string");
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
        fail(r, "expected a string");
        return;
    }
    if (o->via.str.size >= dst_size) {
        fail(r, "string too long");
        return;
    }
    if (o->via.str.size) /* msgpack-c gives empty strings a NULL ptr */
        memcpy(dst, o->via.str.ptr, o->via.str.size);
    dst[o->via.str.size] = '\0';
}

char *eddy_mpr_strdup(eddy_mpr_t *r, uint32_t max)
{
    const msgpack_object *o = take(r);
    if (!o || o->type == MSGPACK_OBJECT_NIL)
        return NULL;
    if (o->type != MSGPACK_OBJECT_STR) {
        fail(r, "expected a string");
        return NULL;
    }
    if (o->via.str.size > max) {
        fail(r, "string too long");
        return NULL;
    }
    char *s = malloc(o->via.str.size + 1);
    if (!s) {
        fail(r, "out of memory");
        return NULL;
    }
    if (o->via.str.size)
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
        fail(r, "expected an array");
        return 0;
    }
    if (o->via.array.size > max) {
        fail(r, "array too long");
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
