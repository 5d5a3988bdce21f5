/* snapshot_manifest.c - encoding of an incremental checkpoint's reference
 * list (see snapshot_manifest.h). */
#include "state/snapshot_manifest.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/byteorder.h"
#include "state/keygroup.h"

#define MANIFEST_HEAD 16
#define MANIFEST_ENTRY 12

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
    eddy_put_le32(p + 4, n);
    eddy_put_le64(p + 8, checkpoint);
    for (uint32_t i = 0; i < n; i++) {
        eddy_put_le32(p + MANIFEST_HEAD + (size_t)i * MANIFEST_ENTRY, entries[i].kg);
        eddy_put_le64(p + MANIFEST_HEAD + (size_t)i * MANIFEST_ENTRY + 4, entries[i].holder);
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
    uint32_t count = eddy_get_le32(p + 4);
    uint64_t own = eddy_get_le64(p + 8);
    if (own != checkpoint)
        return eddy_err_set(err, "checkpoint manifest of checkpoint %" PRIu64 " found in checkpoint %" PRIu64,
                            own, checkpoint);
    if (count > EDDY_MAX_KEY_GROUPS || len != MANIFEST_HEAD + (size_t)count * MANIFEST_ENTRY)
        return eddy_err_set(err, "checkpoint manifest: %u entries do not fit its %zu bytes", count, len);
    eddy_manifest_entry_t *e = calloc(count ? count : 1, sizeof *e);
    if (!e)
        return eddy_err_set(err, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        e[i].kg = eddy_get_le32(p + MANIFEST_HEAD + (size_t)i * MANIFEST_ENTRY);
        e[i].holder = eddy_get_le64(p + MANIFEST_HEAD + (size_t)i * MANIFEST_ENTRY + 4);
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
