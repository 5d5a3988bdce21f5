/* local_copies.c - a worker's in-memory copies of the key groups it wrote
 * to checkpoint storage (see local_copies.h): per job, per operator, per key
 * group a short list of copies (the newest completed checkpoint's and those
 * of checkpoints in flight), each with the checkpoints it serves. */
#include "state/local_copies.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "net/proto.h"

/* Checkpoints one copy serves: its holder, then referring ones. Only the
 * newest few matter (older ones are dropped when a newer one completes). */
#define LC_VALID_MAX 8

typedef struct lc_copy {
    struct lc_copy *next;
    uint64_t valid[LC_VALID_MAX]; /* ascending; valid[0] is the holder until trimmed */
    uint32_t n_valid;
    char *data;
    size_t len;
    uint64_t hash;
} lc_copy_t;

typedef struct lc_op {
    struct lc_op *next;
    char name[EDDY_NAME_MAX];
    uint32_t n_kg;
    lc_copy_t **kg; /* [n_kg] lists */
} lc_op_t;

typedef struct lc_job {
    struct lc_job *next;
    char name[EDDY_NAME_MAX];
    uint64_t completed; /* the newest checkpoint COMPLETE named here */
    lc_op_t *ops;
} lc_job_t;

struct eddy_local_copies {
    lc_job_t *jobs;
};

eddy_local_copies_t *eddy_local_copies_new(void)
{
    return calloc(1, sizeof(eddy_local_copies_t));
}

static void free_copy(lc_copy_t *c)
{
    free(c->data);
    free(c);
}

static void free_job(lc_job_t *j)
{
    while (j->ops) {
        lc_op_t *o = j->ops;
        j->ops = o->next;
        for (uint32_t kg = 0; kg < o->n_kg; kg++)
            while (o->kg[kg]) {
                lc_copy_t *c = o->kg[kg];
                o->kg[kg] = c->next;
                free_copy(c);
            }
        free(o->kg);
        free(o);
    }
    free(j);
}

void eddy_local_copies_destroy(eddy_local_copies_t **self_p)
{
    eddy_local_copies_t *self = *self_p;
    if (!self)
        return;
    while (self->jobs) {
        lc_job_t *j = self->jobs;
        self->jobs = j->next;
        free_job(j);
    }
    free(self);
    *self_p = NULL;
}

static lc_job_t *find_job(const eddy_local_copies_t *self, const char *job)
{
    for (lc_job_t *j = self->jobs; j; j = j->next)
        if (!strcmp(j->name, job))
            return j;
    return NULL;
}

static lc_op_t *find_op(const lc_job_t *j, const char *op)
{
    for (lc_op_t *o = j ? j->ops : NULL; o; o = o->next)
        if (!strcmp(o->name, op))
            return o;
    return NULL;
}

/* The list of (job, op, kg), NULL when nothing was ever kept for it. */
static lc_copy_t **list_of(const eddy_local_copies_t *self, const char *job, const char *op,
                           uint32_t kg)
{
    lc_op_t *o = find_op(find_job(self, job), op);
    return o && kg < o->n_kg ? &o->kg[kg] : NULL;
}

static bool serves(const lc_copy_t *c, uint64_t checkpoint)
{
    for (uint32_t i = 0; i < c->n_valid; i++)
        if (c->valid[i] == checkpoint)
            return true;
    return false;
}

static void add_valid(lc_copy_t *c, uint64_t checkpoint)
{
    if (serves(c, checkpoint))
        return;
    if (c->n_valid == LC_VALID_MAX) { /* the oldest goes */
        memmove(c->valid, c->valid + 1, (LC_VALID_MAX - 1) * sizeof *c->valid);
        c->n_valid--;
    }
    c->valid[c->n_valid++] = checkpoint;
}

/* Keeps in c only the checkpoints keep() accepts; true when none is left. */
static bool trim(lc_copy_t *c, bool (*keep)(uint64_t id, uint64_t bound), uint64_t bound)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->n_valid; i++)
        if (keep(c->valid[i], bound))
            c->valid[n++] = c->valid[i];
    c->n_valid = n;
    return n == 0;
}

/* Applies trim to every copy of j, freeing those left serving nothing. */
static void trim_job(lc_job_t *j, bool (*keep)(uint64_t id, uint64_t bound), uint64_t bound)
{
    for (lc_op_t *o = j->ops; o; o = o->next)
        for (uint32_t kg = 0; kg < o->n_kg; kg++)
            for (lc_copy_t **pp = &o->kg[kg]; *pp;) {
                lc_copy_t *c = *pp;
                if (trim(c, keep, bound)) {
                    *pp = c->next;
                    free_copy(c);
                } else {
                    pp = &c->next;
                }
            }
}

int eddy_local_copies_keep(eddy_local_copies_t *self, const char *job, const char *op,
                           uint64_t checkpoint, uint32_t kg, char *data, size_t len,
                           uint64_t hash, eddy_err_t *err)
{
    if (strlen(job) >= EDDY_NAME_MAX || strlen(op) >= EDDY_NAME_MAX || kg >= (1u << 20))
        return eddy_err_set(err, "local copy of %s/%s key group %u: bad name or group", job, op,
                            kg);
    lc_job_t *j = find_job(self, job);
    if (!j) {
        if (!(j = calloc(1, sizeof *j)))
            return eddy_err_set(err, "out of memory");
        strcpy(j->name, job);
        j->next = self->jobs;
        self->jobs = j;
    }
    lc_op_t *o = find_op(j, op);
    if (!o) {
        if (!(o = calloc(1, sizeof *o)))
            return eddy_err_set(err, "out of memory");
        strcpy(o->name, op);
        o->next = j->ops;
        j->ops = o;
    }
    if (kg >= o->n_kg) {
        uint32_t n = kg + 1 > 2 * o->n_kg ? kg + 1 : 2 * o->n_kg;
        lc_copy_t **grown = realloc(o->kg, n * sizeof *grown);
        if (!grown)
            return eddy_err_set(err, "out of memory");
        memset(grown + o->n_kg, 0, (n - o->n_kg) * sizeof *grown);
        o->kg = grown;
        o->n_kg = n;
    }
    lc_copy_t *c = calloc(1, sizeof *c);
    if (!c)
        return eddy_err_set(err, "out of memory");
    /* Written again at the same checkpoint (a retried unit): the new bytes
     * win; no other copy may claim checkpoint any more. */
    for (lc_copy_t **pp = &o->kg[kg]; *pp;) {
        lc_copy_t *old = *pp;
        for (uint32_t i = 0; i < old->n_valid; i++)
            if (old->valid[i] == checkpoint) {
                memmove(old->valid + i, old->valid + i + 1,
                        (old->n_valid - i - 1) * sizeof *old->valid);
                old->n_valid--;
                break;
            }
        if (!old->n_valid) {
            *pp = old->next;
            free_copy(old);
        } else {
            pp = &old->next;
        }
    }
    c->valid[0] = checkpoint;
    c->n_valid = 1;
    c->data = data;
    c->len = len;
    c->hash = hash;
    c->next = o->kg[kg];
    o->kg[kg] = c;
    return 0;
}

void eddy_local_copies_refer(eddy_local_copies_t *self, const char *job, const char *op,
                             uint64_t checkpoint, uint32_t kg, uint64_t holder)
{
    lc_copy_t **list = list_of(self, job, op, kg);
    for (lc_copy_t *c = list ? *list : NULL; c; c = c->next)
        if (serves(c, holder)) {
            add_valid(c, checkpoint);
            return;
        }
}

static bool at_or_after(uint64_t id, uint64_t bound)
{
    return id >= bound;
}

static bool not_after(uint64_t id, uint64_t bound)
{
    return id <= bound;
}

void eddy_local_copies_complete(eddy_local_copies_t *self, const char *job, uint64_t checkpoint)
{
    lc_job_t *j = find_job(self, job);
    if (!j || checkpoint < j->completed)
        return;
    j->completed = checkpoint;
    trim_job(j, at_or_after, checkpoint);
}

void eddy_local_copies_new_epoch(eddy_local_copies_t *self, const char *job)
{
    lc_job_t *j = find_job(self, job);
    if (j)
        trim_job(j, not_after, j->completed);
}

void eddy_local_copies_drop_job(eddy_local_copies_t *self, const char *job)
{
    for (lc_job_t **pp = &self->jobs; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->name, job)) {
            lc_job_t *j = *pp;
            *pp = j->next;
            free_job(j);
            return;
        }
}

int eddy_local_copies_get(eddy_local_copies_t *self, const char *job, const char *op,
                          uint64_t checkpoint, uint32_t kg, char **data, size_t *len,
                          eddy_err_t *err)
{
    lc_job_t *j = find_job(self, job);
    if (!j || !checkpoint || checkpoint > j->completed)
        return 0;
    lc_copy_t **list = list_of(self, job, op, kg);
    for (lc_copy_t **pp = list; pp && *pp; pp = &(*pp)->next) {
        lc_copy_t *c = *pp;
        if (!serves(c, checkpoint))
            continue;
        if (XXH64(c->data, c->len, 0) != c->hash) {
            eddy_err_set(err, "the local copy of %s/%s key group %u for checkpoint %llu fails "
                         "its checksum", job, op, kg, (unsigned long long)checkpoint);
            *pp = c->next;
            free_copy(c);
            return -1;
        }
        char *dup = malloc(c->len ? c->len : 1);
        if (!dup)
            return eddy_err_set(err, "out of memory");
        memcpy(dup, c->data, c->len);
        *data = dup;
        *len = c->len;
        return 1;
    }
    return 0;
}

void eddy_local_copies_usage(const eddy_local_copies_t *self, uint64_t *copies, uint64_t *bytes)
{
    *copies = *bytes = 0;
    for (const lc_job_t *j = self->jobs; j; j = j->next)
        for (const lc_op_t *o = j->ops; o; o = o->next)
            for (uint32_t kg = 0; kg < o->n_kg; kg++)
                for (const lc_copy_t *c = o->kg[kg]; c; c = c->next) {
                    *copies += 1;
                    *bytes += c->len;
                }
}

void eddy_local_copies_corrupt(eddy_local_copies_t *self, const char *job)
{
    lc_job_t *j = find_job(self, job);
    for (lc_op_t *o = j ? j->ops : NULL; o; o = o->next)
        for (uint32_t kg = 0; kg < o->n_kg; kg++)
            for (lc_copy_t *c = o->kg[kg]; c; c = c->next)
                if (c->len)
                    c->data[c->len / 2] ^= 0x5a;
}
