/* snapshot_manifest.h - the reference list of an incremental checkpoint:
 * for each key group one task snapshotted, which checkpoint's object holds
 * the group's bytes.
 *
 * With --checkpoint-full-every N > 1 a keyed task writes, per checkpoint C,
 * only the key groups that changed since its last completed checkpoint (see
 * state/snapshot_chain.h) and one manifest naming, for every group it held
 * at the barrier, its holder: C itself (the group's object is
 * JOB/chk-C/OP/kg-KG.snap) or an earlier completed checkpoint H (the object
 * is JOB/chk-H/OP/kg-KG.snap). A holder is always the checkpoint that wrote
 * the object, never one that refers on: a restore reads one manifest level,
 * and deletion (state/snapshot_gc.h) knows every object a checkpoint needs
 * from its own manifests.
 *
 * Stored by the snapshot store (state/snapshot_store.h) as the snapshot file
 * JOB/chk-C/OP/refs-<INSTANCE>.ref (the usual 24-byte header and checksum),
 * one per task. Payload, little endian:
 *   0  "EKR", version byte 1    4  u32 n entries
 *   8  u64 C (the manifest's own checkpoint)
 *   16 n entries of 12 bytes: u32 kg, u64 holder
 * Entries are in ascending kg order, each kg < EDDY_MAX_KEY_GROUPS once,
 * 1 <= holder <= C. The decoder checks all of it and the exact length.
 * A checkpoint (or operator) without manifests - written with N = 1, a
 * migration snapshot, or before incremental checkpoints - holds every group
 * itself. Pure: no I/O. */
#ifndef EDDY_STATE_SNAPSHOT_MANIFEST_H
#define EDDY_STATE_SNAPSHOT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct eddy_manifest_entry {
    uint32_t kg;
    uint64_t holder;
} eddy_manifest_entry_t;

/* Malloc'd payload for n entries (ascending kg) of checkpoint; NULL when
 * out of memory or the entries break the rules above. */
char *eddy_manifest_encode(uint64_t checkpoint, const eddy_manifest_entry_t *entries, uint32_t n,
                           size_t *len);
/* Decodes a payload that must belong to checkpoint; *entries malloc'd (may
 * be NULL when *n is 0). -1 with err naming what is wrong. */
int eddy_manifest_decode(const void *data, size_t len, uint64_t checkpoint,
                         eddy_manifest_entry_t **entries, uint32_t *n, eddy_err_t *err);

#endif
