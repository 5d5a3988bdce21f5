/* snapshot_manifest.c - encoding of an incremental checkpoint's reference
 * list (see snapshot_manifest.h). */
#include "state/snapshot_manifest.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "state/keygroup.h"

#define MANIFEST_HEAD 16
#define MANIFEST_ENTRY 12

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The rules an entry list keeps (ascending, in range, holder <= checkpoint);
 * the index of the first entry that breaks them, or n. */
static uint32_t first_bad(uint64_t checkpoint, const eddy_manifest_entry_t *e, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (e[i].kg >= EDDY_MAX_KEY_GROUPS || e[i].holder == 0 || e[i].holder > checkpoint ||
            (i && e[i].kg <= e[i - 1].kg))
            return i;
    return n;
}

char *eddy_manifest_encode(uint64_t checkpoint, const eddy_manifest_entry_t *entries, uint32_t n,
                           size_t *len)
{
    if (n > EDDY_MAX_KEY_GROUPS || first_bad(checkpoint, entries, n) != n)
        return NULL;
    size_t size = MANIFEST_HEAD + (size_t)n * MANIFEST_ENTRY;
    unsigned char *p = malloc(size);
    if (!p)
        return NULL;
    memcpy(p, "EKR\1", 4);
    put32(p + 4, n);
    put64(p + 8, checkpoint);
    for (uint32_t i = 0; i < n; i++) {
        put32(p + MANIFEST_HEAD + (size_t)i * MANIFEST_ENTRY, entries[i].kg);
        put64(p + MANIFEST_HEAD + (size_t)i * MANIFEST_ENTRY + 4, entries[i].holder);
    }
    *len = size;
    return (char *)p;
}

int eddy_manifest_decode(const void *data, size_t len, uint64_t checkpoint,
                         eddy_manifest_entry_t **entries, uint32_t *n, eddy_err_t *err)
{
    const unsigned char *p = data;
    *entries = NULL;
    *n = 0;
    if (!p || len < MANIFEST_HEAD || memcmp(p, "EKR", 3) != 0)
        return eddy_err_set(err, "not a checkpoint manifest (%zu bytes)", len);
    if (p[3] != 1)
        return eddy_err_set(err, "checkpoint manifest version %u is unknown", p[3]);
    uint32_t count = get32(p + 4);
    uint64_t own = get64(p + 8);
    if (own != checkpoint)
        return eddy_err_set(err, "checkpoint manifest of checkpoint %" PRIu64 " found in checkpoint %" PRIu64,
                            own, checkpoint);
    if (count > EDDY_MAX_KEY_GROUPS || len != MANIFEST_HEAD + (size_t)count * MANIFEST_ENTRY)
        return eddy_err_set(err, "checkpoint manifest: %u entries do not fit its %zu bytes", count, len);
    eddy_manifest_entry_t *e = calloc(count ? count : 1, sizeof *e);
    if (!e)
        return eddy_err_set(err, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        e[i].kg = get32(p + MANIFEST_HEAD + (size_t)i * MANIFEST_ENTRY);
        e[i].holder = get64(p + MANIFEST_HEAD + (size_t)i * MANIFEST_ENTRY + 4);
    }
    uint32_t bad = first_bad(checkpoint, e, count);
    if (bad != count) {
        eddy_err_set(err, "checkpoint manifest: entry %u (key group %u, holder %" PRIu64
                     ") is out of order or out of range", bad, e[bad].kg, e[bad].holder);
        free(e);
        return -1;
    }
    *entries = e;
    *n = count;
    return 0;
}
