/* mpcodec.h - the two halves every eddy wire codec is built from.
 *
 * Writing: an eddy_mpw_t wraps msgpack-c's sbuffer + packer.
 * Reading: eddy_mpr_t parses one whole msgpack value from untrusted bytes
 * and then walks the elements of its top-level array with typed getters.
 * The bytes are first checked by eddy_msgpack_validate (a structural walk
 * that allocates nothing), and only then handed to msgpack_unpack_next:
 * msgpack-c reserves count * sizeof(msgpack_object) for an array or map
 * before it checks that the elements exist, so a five-byte header such as
 * `dd ff ff ff ff` would otherwise make it allocate ~100 GB. Every getter checks
 * the element exists and has the right type and range; the first failure
 * sticks, so a decoder reads all fields and checks `ok` once at the end.
 * Strings and bins returned by the reader point into the input buffer. */
#ifndef EDDY_NET_MPCODEC_H
#define EDDY_NET_MPCODEC_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* The deepest container nesting eddy_msgpack_validate accepts; msgpack-c's
 * unpacker cannot parse deeper values anyway (MSGPACK_EMBED_STACK_SIZE). */
#define EDDY_MSGPACK_MAX_DEPTH 32

/* Checks that data[0..len) is exactly one well-formed msgpack value: every
 * header and payload is inside the buffer, no reserved byte (0xc1) is used,
 * containers nest at most max_depth deep (a top-level array is depth 1;
 * values above EDDY_MSGPACK_MAX_DEPTH are clamped to it), no container
 * announces more elements than there are bytes left to hold them, and no
 * bytes follow the value. Returns 0, or -1 with err saying what and where.
 * One pass, no allocation; a buffer it accepts is safe to give to
 * msgpack_unpack_next (at most ~24 bytes of msgpack_object per input byte). */
int eddy_msgpack_validate(const void *data, size_t len, uint32_t max_depth, eddy_err_t *err);

typedef struct eddy_mpw {
    msgpack_sbuffer buf;
    msgpack_packer pk;
} eddy_mpw_t;

void eddy_mpw_init(eddy_mpw_t *w);
void eddy_mpw_reset(eddy_mpw_t *w);
void eddy_mpw_free(eddy_mpw_t *w);
/* Transfers the written bytes to the caller (free()), leaving w empty. */
char *eddy_mpw_release(eddy_mpw_t *w, size_t *len);
void eddy_mpw_str(eddy_mpw_t *w, const char *s);      /* NULL packs nil */
void eddy_mpw_bin(eddy_mpw_t *w, const void *p, size_t len);
void eddy_mpw_u64(eddy_mpw_t *w, uint64_t v);
void eddy_mpw_i64(eddy_mpw_t *w, int64_t v);
void eddy_mpw_bool(eddy_mpw_t *w, bool v);
void eddy_mpw_double(eddy_mpw_t *w, double v);
void eddy_mpw_array(eddy_mpw_t *w, uint32_t n);

typedef struct eddy_mpr {
    msgpack_unpacked unpacked;
    const msgpack_object *items; /* elements of the current array */
    uint32_t count;
    uint32_t next;
    bool ok;
    char what[128]; /* first problem seen */
} eddy_mpr_t;

/* Parses data as exactly one msgpack array. Returns -1 (and fills err) when
 * the bytes fail eddy_msgpack_validate (with EDDY_MSGPACK_MAX_DEPTH) or are
 * not an array. */
int eddy_mpr_open(eddy_mpr_t *r, const void *data, size_t len, eddy_err_t *err);
void eddy_mpr_close(eddy_mpr_t *r);

uint32_t eddy_mpr_remaining(const eddy_mpr_t *r);
uint64_t eddy_mpr_u64(eddy_mpr_t *r, uint64_t max);
int64_t eddy_mpr_i64(eddy_mpr_t *r);
bool eddy_mpr_bool(eddy_mpr_t *r);
double eddy_mpr_double(eddy_mpr_t *r);
/* str or bin; *len gets the length; NULL (and not ok) when longer than max. */
const char *eddy_mpr_bytes(eddy_mpr_t *r, uint32_t max, uint32_t *len);
/* Copies a str into dst (NUL-terminated); not ok when it does not fit or
 * contains a NUL byte. nil gives "". */
void eddy_mpr_strcpy(eddy_mpr_t *r, char *dst, size_t dst_size);
/* Returns a malloc'd copy of a str (nil gives NULL); not ok when longer than
 * max or when it contains a NUL byte. */
char *eddy_mpr_strdup(eddy_mpr_t *r, uint32_t max);
/* Enters a nested array: the reader walks it until eddy_mpr_leave.
 * Returns its length (0 and not ok when longer than max). */
uint32_t eddy_mpr_enter(eddy_mpr_t *r, uint32_t max, const msgpack_object **saved_items,
                        uint32_t *saved_count, uint32_t *saved_next);
void eddy_mpr_leave(eddy_mpr_t *r, const msgpack_object *saved_items, uint32_t saved_count,
                    uint32_t saved_next);
/* Marks the reader failed (unless it already is) with a reason naming the
 * current field: for checks the getters cannot make (odd counts, no memory). */
void eddy_mpr_fail(eddy_mpr_t *r, const char *what);
/* Ends decoding: -1 with err naming the first bad field, or when fields are left over. */
int eddy_mpr_finish(eddy_mpr_t *r, const char *message_name, eddy_err_t *err);

#endif
