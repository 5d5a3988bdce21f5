/* group_envelope.c - one key group's snapshot bytes (see group_envelope.h).
 *
 * The decoder copies nothing: the keyed and operator parts point into the
 * file's bytes, which the task frees after loading them. A legacy file is
 * recognised by its first element, which is an integer (the keyed-state
 * format's version) rather than the "eddy-kg" tag. */
#include "state/group_envelope.h"

#include <stdlib.h>
#include <string.h>

#include "common/prefault.h"
#include "net/mpcodec.h"

#define TAG "eddy-kg"
#define VERSION 3u
#define VERSION_NO_KINDS 2u
#define MAX_PART (1u << 31)

static unsigned char *put_be(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

/* msgpack bin32 header: valid for any length (a reader takes any width). */
static unsigned char *put_bin(unsigned char *p, const char *data, size_t len)
{
    *p++ = 0xc6;
    p = put_be(p, len, 4);
    if (len)
        memcpy(p, data, len);
    return p + len;
}

/* Written by hand into one buffer of the exact size, with fixed-width
 * fields (int64 watermark, bin32 parts): a key group's bytes are copied
 * once, not through an sbuffer that doubles (and copies) as it grows. The
 * same input always gives the same bytes. */
char *eddy_group_envelope_encode(const eddy_group_envelope_t *env, size_t *len)
{
    if (env->n_ops > EDDY_GROUP_MAX_OPS)
        return NULL;
    size_t keyed_len = env->keyed ? env->keyed_len : 0;
    if (keyed_len >= MAX_PART)
        return NULL;
    size_t size = 1 + 8 + 1 + 9 + 5 + keyed_len + 1;
    size_t kind_len[EDDY_GROUP_MAX_OPS];
    size += 1;
    for (uint32_t i = 0; i < env->n_ops; i++) {
        size_t n = env->ops[i] ? env->op_lens[i] : 0;
        kind_len[i] = env->kinds[i] ? strlen(env->kinds[i]) : 0;
        if (n >= MAX_PART || kind_len[i] > EDDY_GROUP_KIND_MAX)
            return NULL;
        size += 5 + n + 2 + kind_len[i];
    }
    unsigned char *buf = malloc(size), *p = buf;
    if (!buf)
        return NULL;
    eddy_prefault(buf, size);
    *p++ = 0x96;              /* fixarray of 6 */
    *p++ = 0xa7;              /* fixstr of 7 */
    memcpy(p, TAG, 7);
    p += 7;
    *p++ = VERSION;           /* positive fixint */
    *p++ = 0xd3;              /* int64 */
    p = put_be(p, (uint64_t)env->watermark, 8);
    p = put_bin(p, env->keyed, keyed_len);
    *p++ = (unsigned char)(0x90 | env->n_ops); /* fixarray, n_ops <= 8 */
    for (uint32_t i = 0; i < env->n_ops; i++)
        p = put_bin(p, env->ops[i], env->ops[i] ? env->op_lens[i] : 0);
    *p++ = (unsigned char)(0x90 | env->n_ops);
    for (uint32_t i = 0; i < env->n_ops; i++) {
        *p++ = 0xd9; /* str8 */
        *p++ = (unsigned char)kind_len[i];
        if (kind_len[i])
            memcpy(p, env->kinds[i], kind_len[i]);
        p += kind_len[i];
    }
    *len = (size_t)(p - buf);
    return (char *)buf;
}

/* The envelope's first bytes: fixarray(6), or (5) before the kinds, then
 * fixstr(7) "eddy-kg". */
static int is_envelope(const unsigned char *p, size_t len)
{
    static const unsigned char head[] = {0xa7, 'e', 'd', 'd', 'y', '-', 'k', 'g'};
    return len >= 1 + sizeof head && (p[0] == 0x95 || p[0] == 0x96) &&
           memcmp(p + 1, head, sizeof head) == 0;
}

int eddy_group_envelope_decode(const void *data, size_t len, eddy_group_envelope_t *env,
                               eddy_err_t *err)
{
    memset(env, 0, sizeof *env);
    if (!is_envelope(data, len)) {
        env->watermark = EDDY_GROUP_NO_WATERMARK;
        env->keyed = data;
        env->keyed_len = len;
        return 0;
    }
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) < 0)
        return eddy_err_wrap(err, "key group snapshot");
    char tag[16];
    eddy_mpr_strcpy(&r, tag, sizeof tag);
    uint64_t version = eddy_mpr_u64(&r, UINT64_MAX);
    if (r.ok && version != VERSION && version != VERSION_NO_KINDS)
        eddy_mpr_fail(&r, "unsupported key group snapshot version");
    env->watermark = eddy_mpr_i64(&r);
    uint32_t n;
    env->keyed = eddy_mpr_bytes(&r, MAX_PART, &n);
    env->keyed_len = n;
    const msgpack_object *items;
    uint32_t count, next;
    uint32_t n_ops = eddy_mpr_enter(&r, EDDY_GROUP_MAX_OPS, &items, &count, &next);
    for (uint32_t i = 0; r.ok && i < n_ops; i++) {
        env->ops[i] = eddy_mpr_bytes(&r, MAX_PART, &n);
        env->op_lens[i] = n;
        if (n == 0)
            env->ops[i] = NULL;
    }
    eddy_mpr_leave(&r, items, count, next);
    if (r.ok && version == VERSION) {
        uint32_t n_kinds = eddy_mpr_enter(&r, EDDY_GROUP_MAX_OPS, &items, &count, &next);
        if (r.ok && n_kinds != n_ops)
            eddy_mpr_fail(&r, "kinds: not one per operator");
        for (uint32_t i = 0; r.ok && i < n_kinds; i++) {
            env->kinds[i] = eddy_mpr_bytes(&r, EDDY_GROUP_KIND_MAX, &n);
            env->kind_lens[i] = n;
        }
        eddy_mpr_leave(&r, items, count, next);
    }
    env->n_ops = r.ok ? n_ops : 0;
    int rc = eddy_mpr_finish(&r, "key group snapshot", err);
    eddy_mpr_close(&r);
    if (rc < 0) {
        memset(env, 0, sizeof *env);
        return -1;
    }
    return 0;
}
