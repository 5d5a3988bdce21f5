/* snapshot_gc.c - deletion by reference of checkpoint objects (see
 * snapshot_gc.h). */
#include "state/snapshot_gc.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/snapshot_manifest.h"

typedef struct strs {
    char **v;
    size_t n, cap;
} strs_t;

static int strs_add(strs_t *s, const char *str)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        char **grown = realloc(s->v, cap * sizeof *grown);
        if (!grown)
            return -1;
        s->v = grown;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(str)))
        return -1;
    s->n++;
    return 0;
}

static void strs_free(strs_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_key(const char *key, uint64_t size, void *ctx)
{
    (void)size;
    return strs_add(ctx, key) < 0 ? 1 : 0;
}

/* The checkpoint id of "JOB/chk-ID/..." (0: not a checkpoint's key), and
 * where the part after "chk-ID/" starts. */
static uint64_t key_checkpoint(const char *key, size_t job_len, const char **rest)
{
    const char *p = key + job_len + 1;
    if (strncmp(p, "chk-", 4))
        return 0;
    char *end;
    unsigned long long id = strtoull(p + 4, &end, 10);
    if (end == p + 4 || *end != '/')
        return 0;
    *rest = end + 1;
    return id;
}

static bool kept(uint64_t id, const uint64_t *keep, uint32_t n_keep)
{
    for (uint32_t i = 0; i < n_keep; i++)
        if (keep[i] == id)
            return true;
    return false;
}

/* rest is "OP/refs-I.ref": the operator name into op. */
static bool manifest_op(const char *rest, char *op, size_t size)
{
    const char *slash = strchr(rest, '/');
    if (!slash || strchr(slash + 1, '/') || strncmp(slash + 1, "refs-", 5) ||
        (size_t)(slash - rest) >= size)
        return false;
    size_t n = strlen(slash + 1);
    if (n < 10 || strcmp(slash + 1 + n - 4, ".ref"))
        return false;
    memcpy(op, rest, (size_t)(slash - rest));
    op[slash - rest] = '\0';
    return true;
}

/* The objects kept checkpoint id's manifest at key refers to outside id. */
static int add_references(eddy_snapshot_store_t *store, const char *job, uint64_t id,
                          const char *key, const char *op, strs_t *refs, eddy_err_t *err)
{
    char *data = NULL;
    size_t len = 0;
    eddy_manifest_entry_t *e = NULL;
    uint32_t n = 0;
    int rc = 0;
    if (eddy_snapshot_store_read_key(store, key, &data, &len, err) < 0 ||
        eddy_manifest_decode(data, len, id, &e, &n, err) < 0) {
        rc = eddy_err_wrap(err, "checkpoint manifest %s of retained checkpoint %" PRIu64
                           " (nothing was deleted)", key, id);
    }
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        if (e[i].holder == id)
            continue;
        char ref[1024];
        snprintf(ref, sizeof ref, "%s/chk-%" PRIu64 "/%s/kg-%" PRIu32 ".snap", job, e[i].holder,
                 op, e[i].kg);
        if (strs_add(refs, ref) < 0)
            rc = eddy_err_set(err, "out of memory");
    }
    free(e);
    free(data);
    return rc;
}

static bool referenced(const strs_t *refs, const char *key)
{
    return refs->n && bsearch(&key, refs->v, refs->n, sizeof *refs->v, cmp_str) != NULL;
}

/* Whether any reference is to an object of checkpoint id. */
static bool any_referenced(const strs_t *refs, const char *job, uint64_t id)
{
    char prefix[512];
    int len = snprintf(prefix, sizeof prefix, "%s/chk-%" PRIu64 "/", job, id);
    for (size_t i = 0; i < refs->n; i++)
        if (!strncmp(refs->v[i], prefix, (size_t)len))
            return true;
    return false;
}

int eddy_snapshot_gc_collect(eddy_snapshot_store_t *store, const char *job, uint64_t upto,
                             const uint64_t *keep, uint32_t n_keep, eddy_snapshot_gc_stats_t *stats,
                             eddy_err_t *err)
{
    eddy_snapshot_gc_stats_t none;
    if (!stats)
        stats = &none;
    *stats = (eddy_snapshot_gc_stats_t){0};
    strs_t keys = {0}, refs = {0};
    size_t job_len = strlen(job);
    int rc = eddy_snapshot_store_list_keys(store, job, add_key, &keys, err);
    if (rc == 1)
        rc = eddy_err_set(err, "out of memory listing the checkpoints of job %s", job);
    /* What the kept checkpoints refer to. */
    for (size_t i = 0; rc == 0 && i < keys.n; i++) {
        const char *rest;
        char op[256];
        uint64_t id = key_checkpoint(keys.v[i], job_len, &rest);
        if (id && kept(id, keep, n_keep) && manifest_op(rest, op, sizeof op))
            rc = add_references(store, job, id, keys.v[i], op, &refs, err);
    }
    if (rc == 0 && refs.n)
        qsort(refs.v, refs.n, sizeof *refs.v, cmp_str);
    /* The others up to upto: whole, or what nobody refers to. */
    uint64_t *done = calloc(keys.n ? keys.n : 1, sizeof *done);
    size_t n_done = 0;
    if (!done && rc == 0)
        rc = eddy_err_set(err, "out of memory");
    for (size_t i = 0; rc == 0 && i < keys.n; i++) {
        const char *rest;
        uint64_t id = key_checkpoint(keys.v[i], job_len, &rest);
        if (!id || id > upto || kept(id, keep, n_keep))
            continue;
        if (!any_referenced(&refs, job, id)) {
            bool seen = false;
            for (size_t k = 0; k < n_done && !seen; k++)
                seen = done[k] == id;
            if (seen)
                continue;
            done[n_done++] = id;
            rc = eddy_snapshot_store_remove_checkpoint(store, job, id, err);
            stats->checkpoints_removed += rc == 0;
        } else if (referenced(&refs, keys.v[i])) {
            stats->objects_kept++;
        } else {
            rc = eddy_snapshot_store_delete_key(store, keys.v[i], err);
            stats->objects_removed += rc == 0;
        }
    }
    free(done);
    strs_free(&keys);
    strs_free(&refs);
    return rc < 0 ? -1 : 0;
}
