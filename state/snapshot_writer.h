/* snapshot_writer.h - makes checkpoint data durable off the task loop.
 *
 * At a barrier a task hands over its key groups, either serialised (the
 * synchronous mode) or as a frozen copy-on-write view that the writer thread
 * serialises (serialise/release below), and forwards the barrier; the
 * writer thread then writes, fsyncs and renames the files (Flink's
 * asynchronous snapshot phase). The task's ACK travels
 * with the unit and is handed back once the files are durable (or with the
 * error filled in), so a checkpoint never completes before its data is safe.
 * A unit may also carry a sync list (state/sync_list.h): fsyncs that
 * two-phase-commit operators handed over, run before the message goes out.
 * A read unit goes the other way: the thread reads a restore's key groups
 * (from an s3:// store) so the worker's loop does not wait on the network.
 * Units are finished in submission order.
 * Submit and poll are called from the worker's thread only. */
#ifndef EDDY_STATE_SNAPSHOT_WRITER_H
#define EDDY_STATE_SNAPSHOT_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "net/proto.h"
#include "state/sync_list.h"

typedef struct eddy_snapshot_unit {
    struct eddy_snapshot_unit *next;
    char root[EDDY_STORAGE_URI_MAX]; /* snapshot store root (path or URI) */
    char job[EDDY_NAME_MAX];
    char op[EDDY_NAME_MAX];
    uint64_t checkpoint;
    bool durable;       /* false: a migration snapshot, page cache is enough */
    uint32_t n_groups;
    uint32_t *groups;   /* key group ids */
    char **data;        /* serialised groups, owned */
    size_t *lens;
    /* An asynchronous unit: data[i] is NULL until the writer thread fills
     * data[i]/lens[i] with serialise(view, groups[i], ...), and an ACK's
     * bytes_written then. view belongs to the producer: eddy_snapshot_unit_free
     * calls release(view), on the thread that frees the unit (the worker's,
     * after poll handed it back, so after the writer thread is done). */
    void *view;
    int (*serialise)(void *view, uint32_t kg, char **out, size_t *len, eddy_err_t *err);
    void (*release)(void *view);
    uint64_t barrier_ns;             /* the producer's time at the barrier (ACK's sync_us) */
    uint64_t serialise_ns, write_ns; /* the writer thread's time, for logs */
    uint64_t submitted_ns;           /* set by submit: its ACK's async_us counts from here */
    bool sync_only;     /* no key groups: only the sync list */
    /* An incremental checkpoint's manifest (state/snapshot_manifest.h) of
     * task instance manifest_instance, owned; written after the groups,
     * and counted in the ACK's bytes_written. NULL: none. */
    char *manifest;
    size_t manifest_len;
    uint32_t manifest_instance;
    /* Local recovery (state/local_copies.h): once the groups are durable
     * the writer thread fills hashes[i] = XXH64(data[i]) (malloc'd, freed
     * with the unit) so the worker can keep data[i] as a verified local
     * copy without hashing on its loop. */
    bool keep_local;
    uint64_t *hashes;
    /* A read unit (a restore's read-ahead): the writer thread READS groups
     * of checkpoint from root into data[i]/lens[i] instead of writing them;
     * a group it cannot read stays NULL (the first error in error) and is
     * read again, and reported, by whoever needed it. owner is the
     * submitter's, to recognise the unit when poll hands it back. */
    bool read;
    void *owner;
    eddy_sync_list_t *sync; /* owned, may be NULL */
    /* The message to send once durable: an ACK (its error is filled on
     * failure), another message (see error), or none (type 0). Owned:
     * eddy_snapshot_unit_free clears it (an ACK's source state). */
    eddy_msg_t ack;
    char error[EDDY_ERROR_MAX]; /* why the unit failed, "" when durable */
} eddy_snapshot_unit_t;

typedef struct eddy_snapshot_writer eddy_snapshot_writer_t;

eddy_snapshot_writer_t *eddy_snapshot_writer_new(eddy_err_t *err);
/* Finishes the queued units, then stops the thread. */
void eddy_snapshot_writer_destroy(eddy_snapshot_writer_t **self_p);
/* Allocates a unit for n groups (NULL on allocation failure). */
eddy_snapshot_unit_t *eddy_snapshot_unit_new(uint32_t n_groups);
void eddy_snapshot_unit_free(eddy_snapshot_unit_t *unit);
/* Queues the unit; the writer owns it until poll returns it. */
void eddy_snapshot_writer_submit(eddy_snapshot_writer_t *self, eddy_snapshot_unit_t *unit);
/* A finished unit, or NULL when none is ready. The caller frees it. */
eddy_snapshot_unit_t *eddy_snapshot_writer_poll(eddy_snapshot_writer_t *self);
/* Readable while finished units wait for poll: the worker loop waits on
 * it rather than polling the writer on a timer. */
int eddy_snapshot_writer_fd(const eddy_snapshot_writer_t *self);

#endif
