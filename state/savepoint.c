/* savepoint.c - writes a savepoint's manifest after its state files and
 * opens (and checks) a savepoint before a restore (see savepoint.h). The
 * manifest goes through the object store (a plain file at the location's
 * top, readable by people); state files through the snapshot store, whose
 * header checksum each read verifies. */
#include "state/savepoint.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/object_store.h"
#include "state/snapshot_store.h"

#define SNAP_HEADER_BYTES 24u /* state/snapshot_store.h: magic, length, XXH64 */

int eddy_savepoint_location(const char *loc, char *out, size_t cap, eddy_err_t *err)
{
    if (!loc || !*loc)
        return eddy_err_set(err, "savepoint location is empty");
    if (strstr(loc, "://") && strncmp(loc, "file:///", 8) && strncmp(loc, "s3://", 5))
        return eddy_err_set(err, "savepoint location %.200s: unsupported scheme (want a directory, "
                            "file:///DIR or s3://BUCKET/PREFIX)", loc);
    int n;
    if (loc[0] == '/' || strstr(loc, "://")) {
        n = snprintf(out, cap, "%s", loc);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return eddy_err_set(err, "savepoint location %.200s: no working directory: %s", loc,
                                strerror(errno));
        n = snprintf(out, cap, "%s/%s", cwd, loc);
    }
    if (n < 0 || (size_t)n >= cap)
        return eddy_err_set(err, "savepoint location too long: %.200s", loc);
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/' && strncmp(out, "s3://", 5))
        out[--len] = '\0';
    return 0;
}

/* The object store of a root: a directory as file://DIR. */
static eddy_object_store_t *objects_of(const char *root, eddy_err_t *err)
{
    char uri[PATH_MAX + 16];
    if (root[0] == '/')
        snprintf(uri, sizeof uri, "file://%s", root);
    else
        snprintf(uri, sizeof uri, "%s", root);
    return eddy_object_store_open(uri, NULL, err);
}

static int add_listed(const char *key, uint64_t size, void *ctx)
{
    return eddy_savepoint_manifest_add_file(ctx, key, size) == 0 ? 0 : -1;
}

int eddy_savepoint_seal(const char *root, eddy_savepoint_manifest_t *m, eddy_err_t *err)
{
    char dir[EDDY_SAVEPOINT_NAME_MAX + 32];
    snprintf(dir, sizeof dir, "%s/chk-%" PRIu64, m->job, m->checkpoint);
    eddy_snapshot_store_t *store = eddy_snapshot_store_new(root, err);
    int rc = store ? eddy_snapshot_store_list_keys(store, dir, add_listed, m, err) : -1;
    eddy_snapshot_store_destroy(&store);
    if (rc != 0)
        return rc > 0 ? eddy_err_set(err, "savepoint %s: out of memory", root) : -1;
    size_t len;
    char *text = eddy_savepoint_manifest_encode(m, &len);
    eddy_object_store_t *objects = text ? objects_of(root, err) : NULL;
    rc = objects ? eddy_object_store_put(objects, EDDY_SAVEPOINT_MANIFEST_NAME, text, len, err) : -1;
    if (!text)
        eddy_err_set(err, "savepoint %s: out of memory", root);
    eddy_object_store_destroy(&objects);
    free(text);
    return rc;
}

/* Every file the manifest names: there, of its size, its checksum right. */
static int verify_files(const char *root, const eddy_savepoint_manifest_t *m, eddy_err_t *err)
{
    eddy_snapshot_store_t *store = eddy_snapshot_store_new(root, err);
    if (!store)
        return -1;
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < m->n_files; i++) {
        char *data = NULL;
        size_t len = 0;
        if (eddy_snapshot_store_read_key(store, m->files[i].key, &data, &len, err) < 0)
            rc = -1;
        else if (len + SNAP_HEADER_BYTES != m->files[i].size)
            rc = eddy_err_set(err, "%s/%s: %zu bytes, the manifest says %" PRIu64, root,
                              m->files[i].key, len + SNAP_HEADER_BYTES, m->files[i].size);
        free(data);
    }
    eddy_snapshot_store_destroy(&store);
    return rc;
}

int eddy_savepoint_open(const char *root, bool verify, eddy_savepoint_manifest_t *m, eddy_err_t *err)
{
    memset(m, 0, sizeof *m);
    struct stat st;
    if (root[0] == '/' && stat(root, &st) != 0)
        return eddy_err_set(err, "%s: no savepoint there (%s)", root, strerror(errno));
    eddy_err_t oerr = {{0}};
    eddy_object_store_t *objects = objects_of(root, &oerr);
    if (!objects)
        return eddy_err_set(err, "%s: cannot read the savepoint: %s", root, oerr.msg);
    char *text = NULL;
    size_t len = 0;
    int got = eddy_object_store_get(objects, EDDY_SAVEPOINT_MANIFEST_NAME, &text, &len, &oerr);
    eddy_object_store_destroy(&objects);
    if (got <= 0) {
        free(text);
        if (got == 0)
            return eddy_err_set(err, "%s/%s: no savepoint there (the manifest does not exist)",
                                root, EDDY_SAVEPOINT_MANIFEST_NAME);
        return eddy_err_set(err, "%s/%s: cannot read the manifest: %s", root,
                            EDDY_SAVEPOINT_MANIFEST_NAME, oerr.msg);
    }
    eddy_err_t derr = {{0}};
    int rc = eddy_savepoint_manifest_decode(text, len, m, &derr);
    free(text);
    if (rc < 0) {
        eddy_savepoint_manifest_clear(m);
        return eddy_err_set(err, "%s/%s: %s", root, EDDY_SAVEPOINT_MANIFEST_NAME, derr.msg);
    }
    if (verify && verify_files(root, m, err) < 0) {
        eddy_savepoint_manifest_clear(m);
        return -1;
    }
    return 0;
}
