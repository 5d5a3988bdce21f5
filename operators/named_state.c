/* named_state.c - named keyed state (api/state.h) on keyed list state: the
 * handles' operations, per key group serialisation with schema versions,
 * and migration on restore (see named_state.h for the layout). */
#include "operators/named_state.h"

#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"
#include "net/record.h"
#include "state/list_state.h"

#define NAMED_FORMAT_VERSION 1u
#define MAX_ACC 4096u

struct eddy_state {
    eddy_named_states_t *owner;
    const eddy_state_desc_t *desc;
    uint32_t name_len;
};

struct eddy_named_states {
    eddy_list_state_t *lists;
    uint32_t n;
    eddy_state_t *handles;
    uint32_t max_key_groups;
    const char *key;
    uint32_t key_len;
    uint32_t kg;
    char *ns; /* scratch: name, NUL, user key */
    size_t ns_cap;
    char acc[MAX_ACC];
};

int eddy_state_descs_check(const eddy_state_desc_t *descs, uint32_t n, eddy_err_t *err)
{
    if (n && !descs)
        return eddy_err_set(err, "states: %u declared but no array", n);
    if (n > EDDY_STATE_MAX_STATES)
        return eddy_err_set(err, "states: %u declared, at most %u", n, EDDY_STATE_MAX_STATES);
    for (uint32_t i = 0; i < n; i++) {
        const eddy_state_desc_t *d = &descs[i];
        size_t len = d->name ? strlen(d->name) : 0;
        if (len == 0 || len > EDDY_STATE_NAME_MAX)
            return eddy_err_set(err, "state %u: a name of 1..%u bytes is needed", i,
                                EDDY_STATE_NAME_MAX);
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(descs[j].name, d->name))
                return eddy_err_set(err, "state '%s' is declared twice", d->name);
        if (d->kind < EDDY_STATE_VALUE || d->kind > EDDY_STATE_AGGREGATING)
            return eddy_err_set(err, "state '%s': unknown kind %d", d->name, (int)d->kind);
        if (d->version == 0)
            return eddy_err_set(err, "state '%s': schema versions start at 1", d->name);
        if (d->kind == EDDY_STATE_AGGREGATING &&
            (!d->add || d->acc_size == 0 || d->acc_size > MAX_ACC))
            return eddy_err_set(err, "state '%s': an aggregating state needs add() and an "
                                "accumulator of 1..%u bytes", d->name, MAX_ACC);
    }
    return 0;
}

eddy_named_states_t *eddy_named_states_new(const eddy_state_desc_t *descs, uint32_t n,
                                           uint32_t max_key_groups)
{
    eddy_named_states_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->n = n;
    self->max_key_groups = max_key_groups;
    self->lists = eddy_list_state_new(max_key_groups);
    self->handles = calloc(n ? n : 1, sizeof *self->handles);
    self->ns_cap = EDDY_STATE_NAME_MAX + 64;
    self->ns = malloc(self->ns_cap);
    if (!self->lists || !self->handles || !self->ns) {
        eddy_named_states_destroy(&self);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        self->handles[i] = (eddy_state_t){self, &descs[i], (uint32_t)strlen(descs[i].name)};
    self->key = "";
    return self;
}

void eddy_named_states_destroy(eddy_named_states_t **self_p)
{
    eddy_named_states_t *self = *self_p;
    if (!self)
        return;
    eddy_list_state_destroy(&self->lists);
    free(self->handles);
    free(self->ns);
    free(self);
    *self_p = NULL;
}

void eddy_named_states_set_key(eddy_named_states_t *self, const char *key, uint32_t key_len,
                               uint32_t kg)
{
    self->key = key_len ? key : "";
    self->key_len = key_len;
    self->kg = kg;
}

eddy_state_t *eddy_named_states_find(eddy_named_states_t *self, const char *name)
{
    for (uint32_t i = 0; self && name && i < self->n; i++)
        if (!strcmp(self->handles[i].desc->name, name))
            return &self->handles[i];
    return NULL;
}

/* ---- the handles ---------------------------------------------------------- */

/* The namespace of h's entry for user key k (k_len 0: the state's only
 * list); NULL when out of memory or too long. */
static const char *ns_of(eddy_state_t *h, const void *k, size_t k_len, uint32_t *ns_len)
{
    eddy_named_states_t *s = h->owner;
    size_t need = (size_t)h->name_len + 1 + k_len;
    if (need > UINT32_MAX)
        return NULL;
    if (need > s->ns_cap) {
        char *ns = realloc(s->ns, need);
        if (!ns)
            return NULL;
        s->ns = ns;
        s->ns_cap = need;
    }
    memcpy(s->ns, h->desc->name, h->name_len + 1);
    if (k_len)
        memcpy(s->ns + h->name_len + 1, k, k_len);
    *ns_len = (uint32_t)need;
    return s->ns;
}

/* Element 0 of (current key, ns), NULL when absent. */
static const void *first(eddy_state_t *h, const void *k, size_t k_len, size_t *len)
{
    eddy_named_states_t *s = h->owner;
    uint32_t ns_len;
    const char *ns = ns_of(h, k, k_len, &ns_len);
    eddy_record_t rec;
    if (!ns || !eddy_list_state_at(s->lists, s->kg, s->key, s->key_len, ns, ns_len, 0, &rec))
        return NULL;
    if (len)
        *len = rec.len;
    return rec.data;
}

/* Makes (current key, ns) the one element value. */
static int set_one(eddy_state_t *h, const void *k, size_t k_len, const void *value, size_t len)
{
    eddy_named_states_t *s = h->owner;
    uint32_t ns_len;
    const char *ns = ns_of(h, k, k_len, &ns_len);
    if (!ns || len > UINT32_MAX || (len && !value))
        return -1;
    eddy_list_state_clear(s->lists, s->kg, s->key, s->key_len, ns, ns_len);
    eddy_record_t rec = eddy_record_make(len ? value : "", (uint32_t)len, 0);
    return eddy_list_state_add(s->lists, s->kg, s->key, s->key_len, ns, ns_len, &rec);
}

const void *eddy_state_get(eddy_state_t *h, size_t *len)
{
    if (!h || (h->desc->kind != EDDY_STATE_VALUE && h->desc->kind != EDDY_STATE_AGGREGATING))
        return NULL;
    return first(h, NULL, 0, len);
}

int eddy_state_put(eddy_state_t *h, const void *value, size_t len)
{
    if (!h || h->desc->kind != EDDY_STATE_VALUE)
        return -1;
    return set_one(h, NULL, 0, value, len);
}

/* Visits the lists of group kg whose namespace is h's (and whose key is the
 * current key when only_key); the ctx of the list state walk. */
typedef struct walk {
    eddy_state_t *h;
    bool only_key;
    eddy_state_visit_fn visit;
    eddy_state_group_visit_fn group_visit;
    void *arg;
    size_t n;
} walk_t;

/* Whether (key, ns) is an entry of h (of the current key when only_key). */
static bool is_entry_of(const eddy_state_t *h, bool only_key, const void *key, uint32_t key_len,
                        const void *ns, uint32_t ns_len)
{
    const eddy_named_states_t *s = h->owner;
    uint32_t prefix = h->name_len + 1;
    if (ns_len < prefix || memcmp(ns, h->desc->name, prefix))
        return false;
    return !only_key || (key_len == s->key_len && (!key_len || !memcmp(key, s->key, key_len)));
}

static void walk_list(void *ctx, const void *key, uint32_t key_len, const void *ns,
                      uint32_t ns_len, size_t n)
{
    walk_t *w = ctx;
    eddy_named_states_t *s = w->h->owner;
    if (!is_entry_of(w->h, w->only_key, key, key_len, ns, ns_len))
        return;
    uint32_t prefix = w->h->name_len + 1;
    const char *k = (const char *)ns + prefix;
    size_t k_len = ns_len - prefix;
    bool is_map = w->h->desc->kind == EDDY_STATE_MAP;
    for (size_t i = 0; i < n; i++) {
        eddy_record_t rec;
        if (!eddy_list_state_at(s->lists, s->kg, key, key_len, ns, ns_len, i, &rec))
            break;
        if (w->visit)
            w->visit(w->arg, is_map ? k : NULL, is_map ? k_len : 0, rec.data, rec.len);
        else
            w->group_visit(w->arg, key, key_len, is_map ? k : NULL, is_map ? k_len : 0, rec.data,
                           rec.len);
        w->n++;
    }
}

const void *eddy_state_map_get(eddy_state_t *h, const void *k, size_t k_len, size_t *len)
{
    if (!h || h->desc->kind != EDDY_STATE_MAP)
        return NULL;
    return first(h, k, k_len, len);
}

int eddy_state_map_put(eddy_state_t *h, const void *k, size_t k_len, const void *value, size_t len)
{
    if (!h || h->desc->kind != EDDY_STATE_MAP || (k_len && !k))
        return -1;
    return set_one(h, k, k_len, value, len);
}

bool eddy_state_map_remove(eddy_state_t *h, const void *k, size_t k_len)
{
    if (!h || h->desc->kind != EDDY_STATE_MAP || (k_len && !k))
        return false;
    eddy_named_states_t *s = h->owner;
    uint32_t ns_len;
    const char *ns = ns_of(h, k, k_len, &ns_len);
    return ns && eddy_list_state_clear(s->lists, s->kg, s->key, s->key_len, ns, ns_len);
}

int eddy_state_list_add(eddy_state_t *h, const void *value, size_t len)
{
    if (!h || h->desc->kind != EDDY_STATE_LIST || len > UINT32_MAX || (len && !value))
        return -1;
    eddy_named_states_t *s = h->owner;
    uint32_t ns_len;
    const char *ns = ns_of(h, NULL, 0, &ns_len);
    if (!ns)
        return -1;
    eddy_record_t rec = eddy_record_make(len ? value : "", (uint32_t)len, 0);
    return eddy_list_state_add(s->lists, s->kg, s->key, s->key_len, ns, ns_len, &rec);
}

int eddy_state_add(eddy_state_t *h, const void *in, size_t len)
{
    if (!h || h->desc->kind != EDDY_STATE_AGGREGATING)
        return -1;
    eddy_named_states_t *s = h->owner;
    size_t size = h->desc->acc_size, have = 0;
    const void *cur = first(h, NULL, 0, &have);
    memset(s->acc, 0, size);
    if (cur)
        memcpy(s->acc, cur, have < size ? have : size);
    h->desc->add(s->acc, in, len);
    return set_one(h, NULL, 0, s->acc, size);
}

size_t eddy_state_foreach(eddy_state_t *h, eddy_state_visit_fn visit, void *arg)
{
    if (!h || !visit)
        return 0;
    walk_t w = {.h = h, .only_key = true, .visit = visit, .arg = arg};
    eddy_named_states_t *s = h->owner;
    if (h->desc->kind != EDDY_STATE_MAP) { /* one list: no walk of the group */
        uint32_t ns_len;
        const char *ns = ns_of(h, NULL, 0, &ns_len);
        size_t n = ns ? eddy_list_state_size(s->lists, s->kg, s->key, s->key_len, ns, ns_len) : 0;
        if (n)
            walk_list(&w, s->key, s->key_len, ns, ns_len, n);
        return w.n;
    }
    eddy_list_state_foreach(s->lists, s->kg, walk_list, &w);
    return w.n;
}

size_t eddy_state_foreach_group(eddy_state_t *h, eddy_state_group_visit_fn visit, void *arg)
{
    if (!h || !visit)
        return 0;
    walk_t w = {.h = h, .group_visit = visit, .arg = arg};
    eddy_list_state_foreach(h->owner->lists, h->owner->kg, walk_list, &w);
    return w.n;
}

/* ---- per key group --------------------------------------------------------- */

void eddy_named_states_drop_group(eddy_named_states_t *self, uint32_t kg)
{
    eddy_list_state_drop_group(self->lists, kg);
}

int eddy_named_states_write_group(eddy_named_states_t *self, uint32_t kg, char **out,
                                  size_t *len, eddy_err_t *err)
{
    char *lists = NULL;
    size_t lists_len = 0;
    if (eddy_list_state_write_group(self->lists, kg, &lists, &lists_len, err) < 0)
        return -1;
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 3);
    eddy_mpw_u64(&w, NAMED_FORMAT_VERSION);
    eddy_mpw_array(&w, 2 * self->n);
    for (uint32_t i = 0; i < self->n; i++) {
        eddy_mpw_str(&w, self->handles[i].desc->name);
        eddy_mpw_u64(&w, self->handles[i].desc->version);
    }
    eddy_mpw_bin(&w, lists, lists_len);
    free(lists);
    *out = eddy_mpw_release(&w, len);
    if (!*out)
        return eddy_err_set(err, "named state: out of memory writing key group %u", kg);
    return 0;
}

/* What read_group does with a saved state's entries. */
typedef enum { KEEP, MIGRATE, DROP } fate_t;

typedef struct saved {
    uint32_t n;
    char names[EDDY_STATE_MAX_STATES][EDDY_STATE_NAME_MAX + 1];
    uint32_t versions[EDDY_STATE_MAX_STATES];
} saved_t;

/* The fate of the lists under namespace ns (a saved state's), and in *h the
 * declared state; -1 with err when the saved version cannot be restored. */
static int fate_of(eddy_named_states_t *self, const saved_t *sv, const char *ns, uint32_t ns_len,
                   eddy_state_t **h, uint32_t *from, fate_t *fate, eddy_err_t *err)
{
    const char *nul = memchr(ns, '\0', ns_len);
    *fate = DROP;
    if (!nul)
        return 0;
    uint32_t i = 0;
    while (i < sv->n && strcmp(sv->names[i], ns))
        i++;
    *h = eddy_named_states_find(self, ns);
    if (i == sv->n || !*h)
        return 0; /* no version saved for it, or no longer declared */
    const eddy_state_desc_t *d = (*h)->desc;
    *from = sv->versions[i];
    if (*from == d->version) {
        *fate = KEEP;
        return 0;
    }
    if (*from > d->version || !d->migrate)
        return eddy_err_set(err, "state '%s': saved with schema version %u, the operator "
                            "declares %u%s", d->name, *from, d->version,
                            *from > d->version ? " (older code)" : " and no migrate callback");
    *fate = MIGRATE;
    return 0;
}

/* Migrates every element of (key, ns) of group kg in place. */
static int migrate_list(eddy_named_states_t *self, eddy_state_t *h, uint32_t from, uint32_t kg,
                        const char *key, uint32_t key_len, const char *ns, uint32_t ns_len,
                        eddy_err_t *err)
{
    size_t n = eddy_list_state_size(self->lists, kg, key, key_len, ns, ns_len);
    char **bufs = calloc(n ? n : 1, sizeof *bufs);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    int rc = bufs && lens ? 0 : eddy_err_set(err, "out of memory migrating state");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        eddy_record_t rec;
        eddy_list_state_at(self->lists, kg, key, key_len, ns, ns_len, i, &rec);
        rc = h->desc->migrate(from, rec.data, rec.len, &bufs[i], &lens[i], err);
        if (rc < 0)
            eddy_err_wrap(err, "state '%s': migrating from schema version %u", h->desc->name,
                          from);
        else if (h->desc->kind == EDDY_STATE_AGGREGATING && lens[i] != h->desc->acc_size)
            rc = eddy_err_set(err, "state '%s': migrate gave %zu bytes for a %zu-byte "
                              "accumulator", h->desc->name, lens[i], h->desc->acc_size);
        else if (lens[i] > UINT32_MAX)
            rc = eddy_err_set(err, "state '%s': migrate gave too many bytes", h->desc->name);
    }
    if (rc == 0) {
        eddy_list_state_clear(self->lists, kg, key, key_len, ns, ns_len);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            eddy_record_t rec = eddy_record_make(lens[i] ? bufs[i] : "", (uint32_t)lens[i], 0);
            if (eddy_list_state_add(self->lists, kg, key, key_len, ns, ns_len, &rec) < 0)
                rc = eddy_err_set(err, "out of memory migrating state");
        }
    }
    for (size_t i = 0; bufs && i < n; i++)
        free(bufs[i]);
    free(bufs);
    free(lens);
    return rc;
}

/* Every (key, ns) of a group, copied (the walk may not change the group). */
typedef struct idents {
    char **ident; /* key then ns */
    uint32_t *key_len, *ns_len;
    size_t n, cap;
    bool oom;
} idents_t;

static void collect_ident(void *ctx, const void *key, uint32_t key_len, const void *ns,
                          uint32_t ns_len, size_t n)
{
    (void)n;
    idents_t *ids = ctx;
    if (ids->oom)
        return;
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 16;
        char **i2 = realloc(ids->ident, cap * sizeof *i2);
        if (i2)
            ids->ident = i2;
        uint32_t *k2 = i2 ? realloc(ids->key_len, cap * sizeof *k2) : NULL;
        if (k2)
            ids->key_len = k2;
        uint32_t *n2 = k2 ? realloc(ids->ns_len, cap * sizeof *n2) : NULL;
        if (!n2) {
            ids->oom = true;
            return;
        }
        ids->ns_len = n2;
        ids->cap = cap;
    }
    char *c = malloc((size_t)key_len + ns_len + 1);
    if (!c) {
        ids->oom = true;
        return;
    }
    memcpy(c, key, key_len);
    memcpy(c + key_len, ns, ns_len);
    ids->ident[ids->n] = c;
    ids->key_len[ids->n] = key_len;
    ids->ns_len[ids->n++] = ns_len;
}

static void idents_free(idents_t *ids)
{
    for (size_t i = 0; i < ids->n; i++)
        free(ids->ident[i]);
    free(ids->ident);
    free(ids->key_len);
    free(ids->ns_len);
}

bool eddy_state_remove(eddy_state_t *h)
{
    if (!h)
        return false;
    eddy_named_states_t *s = h->owner;
    if (h->desc->kind != EDDY_STATE_MAP) {
        uint32_t ns_len;
        const char *ns = ns_of(h, NULL, 0, &ns_len);
        return ns && eddy_list_state_clear(s->lists, s->kg, s->key, s->key_len, ns, ns_len);
    }
    /* the map's entries are lists of the group: found first, then cleared */
    idents_t ids = {0};
    eddy_list_state_foreach(s->lists, s->kg, collect_ident, &ids);
    bool removed = false;
    for (size_t i = 0; i < ids.n; i++) {
        const char *key = ids.ident[i], *ns = ids.ident[i] + ids.key_len[i];
        if (is_entry_of(h, true, key, ids.key_len[i], ns, ids.ns_len[i]))
            removed |= eddy_list_state_clear(s->lists, s->kg, key, ids.key_len[i], ns,
                                             ids.ns_len[i]);
    }
    idents_free(&ids);
    return removed;
}

/* After a load: migrate or drop what the declarations say (see the top). */
static int settle(eddy_named_states_t *self, uint32_t kg, const saved_t *sv, eddy_err_t *err)
{
    idents_t ids = {0};
    eddy_list_state_foreach(self->lists, kg, collect_ident, &ids);
    int rc = ids.oom ? eddy_err_set(err, "out of memory restoring named state") : 0;
    for (size_t i = 0; rc == 0 && i < ids.n; i++) {
        const char *key = ids.ident[i], *ns = ids.ident[i] + ids.key_len[i];
        eddy_state_t *h = NULL;
        uint32_t from = 0;
        fate_t fate;
        rc = fate_of(self, sv, ns, ids.ns_len[i], &h, &from, &fate, err);
        if (rc == 0 && fate == DROP)
            eddy_list_state_clear(self->lists, kg, key, ids.key_len[i], ns, ids.ns_len[i]);
        else if (rc == 0 && fate == MIGRATE)
            rc = migrate_list(self, h, from, kg, key, ids.key_len[i], ns, ids.ns_len[i], err);
    }
    idents_free(&ids);
    return rc;
}

int eddy_named_states_read_group(eddy_named_states_t *self, uint32_t kg, const void *data,
                                 size_t len, eddy_err_t *err)
{
    eddy_list_state_drop_group(self->lists, kg);
    if (len == 0)
        return 0;
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) < 0)
        return eddy_err_wrap(err, "named state: key group %u", kg);
    uint64_t version = eddy_mpr_u64(&r, UINT64_MAX);
    if (r.ok && version != NAMED_FORMAT_VERSION)
        eddy_mpr_fail(&r, "version: unsupported");
    saved_t sv = {0};
    const msgpack_object *items;
    uint32_t count, next;
    uint32_t n = eddy_mpr_enter(&r, 2 * EDDY_STATE_MAX_STATES, &items, &count, &next);
    if (r.ok && n % 2)
        eddy_mpr_fail(&r, "states: not name/version pairs");
    for (uint32_t i = 0; r.ok && i < n / 2; i++) {
        eddy_mpr_strcpy(&r, sv.names[i], sizeof sv.names[i]);
        sv.versions[i] = (uint32_t)eddy_mpr_u64(&r, UINT32_MAX);
        sv.n = i + 1;
    }
    eddy_mpr_leave(&r, items, count, next);
    uint32_t lists_len = 0;
    const char *lists = eddy_mpr_bytes(&r, UINT32_MAX, &lists_len);
    int rc = eddy_mpr_finish(&r, "named state", err);
    if (rc == 0 && eddy_list_state_read_group(self->lists, kg, lists, lists_len, err) < 0)
        rc = -1;
    eddy_mpr_close(&r);
    if (rc == 0)
        rc = settle(self, kg, &sv, err);
    if (rc < 0) {
        eddy_list_state_drop_group(self->lists, kg);
        return eddy_err_wrap(err, "named state: key group %u", kg);
    }
    return 0;
}
