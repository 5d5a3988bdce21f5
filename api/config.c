/* config.c - typed key/value configuration of one operator (see config.h).
 *
 * Owns: a sorted array of entries and their msgpack form. Sorted keys make
 * the encoding canonical, which the plan's fingerprint relies on. */
#include "api/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"

typedef struct config_entry {
    char key[EDDY_CONFIG_MAX_KEY];
    eddy_config_type_t type;
    char *str;
    int64_t i;
    double d;
} config_entry_t;

struct eddy_config {
    config_entry_t *entries;
    size_t count, cap;
};

eddy_config_t *eddy_config_new(void)
{
    return calloc(1, sizeof(eddy_config_t));
}

void eddy_config_destroy(eddy_config_t **self_p)
{
    eddy_config_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->count; i++)
        free(self->entries[i].str);
    free(self->entries);
    free(self);
    *self_p = NULL;
}

eddy_config_t *eddy_config_dup(const eddy_config_t *self)
{
    eddy_config_t *copy = eddy_config_new();
    if (!copy || !self)
        return copy;
    copy->entries = calloc(self->count ? self->count : 1, sizeof *copy->entries);
    if (!copy->entries) {
        free(copy);
        return NULL;
    }
    copy->cap = self->count;
    for (size_t i = 0; i < self->count; i++) {
        copy->entries[i] = self->entries[i];
        if (self->entries[i].str && !(copy->entries[i].str = strdup(self->entries[i].str))) {
            copy->count = i;
            eddy_config_destroy(&copy);
            return NULL;
        }
        copy->count = i + 1;
    }
    return copy;
}

/* Index of key, or of where it would be inserted (*found false). */
static size_t locate(const eddy_config_t *self, const char *key, bool *found)
{
    size_t lo = 0, hi = self ? self->count : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(self->entries[mid].key, key);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static const config_entry_t *lookup(const eddy_config_t *self, const char *key,
                                    eddy_config_type_t type)
{
    bool found;
    size_t i = locate(self, key, &found);
    return found && self->entries[i].type == type ? &self->entries[i] : NULL;
}

/* The entry for key, created (empty) in key order when missing. */
static config_entry_t *slot(eddy_config_t *self, const char *key)
{
    size_t klen = key ? strlen(key) : 0;
    if (klen == 0 || klen >= EDDY_CONFIG_MAX_KEY)
        return NULL;
    bool found;
    size_t i = locate(self, key, &found);
    if (found) {
        free(self->entries[i].str);
        self->entries[i].str = NULL;
        return &self->entries[i];
    }
    if (self->count >= EDDY_CONFIG_MAX_ENTRIES)
        return NULL;
    if (self->count == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 8;
        config_entry_t *grown = realloc(self->entries, cap * sizeof *grown);
        if (!grown)
            return NULL;
        self->entries = grown;
        self->cap = cap;
    }
    memmove(&self->entries[i + 1], &self->entries[i], (self->count - i) * sizeof *self->entries);
    self->count++;
    config_entry_t *e = &self->entries[i];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, klen + 1);
    return e;
}

static void unslot(eddy_config_t *self, config_entry_t *e)
{
    size_t i = (size_t)(e - self->entries);
    memmove(&self->entries[i], &self->entries[i + 1], (self->count - i - 1) * sizeof *e);
    self->count--;
}

int eddy_config_set_str(eddy_config_t *self, const char *key, const char *value)
{
    if (!value || strlen(value) > EDDY_CONFIG_MAX_STRING)
        return -1;
    config_entry_t *e = slot(self, key);
    if (!e)
        return -1;
    e->type = EDDY_CONFIG_STR;
    if (!(e->str = strdup(value))) {
        unslot(self, e);
        return -1;
    }
    return 0;
}

int eddy_config_set_int(eddy_config_t *self, const char *key, int64_t value)
{
    config_entry_t *e = slot(self, key);
    if (!e)
        return -1;
    e->type = EDDY_CONFIG_INT;
    e->i = value;
    return 0;
}

int eddy_config_set_double(eddy_config_t *self, const char *key, double value)
{
    config_entry_t *e = slot(self, key);
    if (!e)
        return -1;
    e->type = EDDY_CONFIG_DOUBLE;
    e->d = value;
    return 0;
}

int eddy_config_set_bool(eddy_config_t *self, const char *key, bool value)
{
    config_entry_t *e = slot(self, key);
    if (!e)
        return -1;
    e->type = EDDY_CONFIG_BOOL;
    e->i = value;
    return 0;
}

bool eddy_config_has(const eddy_config_t *self, const char *key)
{
    bool found;
    locate(self, key, &found);
    return found;
}

const char *eddy_config_str(const eddy_config_t *self, const char *key, const char *dflt)
{
    const config_entry_t *e = lookup(self, key, EDDY_CONFIG_STR);
    return e ? e->str : dflt;
}

int64_t eddy_config_int(const eddy_config_t *self, const char *key, int64_t dflt)
{
    const config_entry_t *e = lookup(self, key, EDDY_CONFIG_INT);
    return e ? e->i : dflt;
}

double eddy_config_double(const eddy_config_t *self, const char *key, double dflt)
{
    const config_entry_t *e = lookup(self, key, EDDY_CONFIG_DOUBLE);
    return e ? e->d : dflt;
}

bool eddy_config_bool(const eddy_config_t *self, const char *key, bool dflt)
{
    const config_entry_t *e = lookup(self, key, EDDY_CONFIG_BOOL);
    return e ? e->i != 0 : dflt;
}

size_t eddy_config_count(const eddy_config_t *self)
{
    return self ? self->count : 0;
}

const char *eddy_config_key_at(const eddy_config_t *self, size_t i)
{
    return i < eddy_config_count(self) ? self->entries[i].key : NULL;
}

eddy_config_type_t eddy_config_type_at(const eddy_config_t *self, size_t i)
{
    return i < eddy_config_count(self) ? self->entries[i].type : EDDY_CONFIG_STR;
}

const char *eddy_config_text_at(const eddy_config_t *self, size_t i, char *buf, size_t size)
{
    if (size == 0)
        return "";
    buf[0] = '\0';
    if (i >= eddy_config_count(self))
        return buf;
    const config_entry_t *e = &self->entries[i];
    switch (e->type) {
    case EDDY_CONFIG_STR:
        snprintf(buf, size, "%s", e->str);
        break;
    case EDDY_CONFIG_INT:
        snprintf(buf, size, "%lld", (long long)e->i);
        break;
    case EDDY_CONFIG_DOUBLE:
        snprintf(buf, size, "%.17g", e->d);
        break;
    case EDDY_CONFIG_BOOL:
        snprintf(buf, size, "%s", e->i ? "true" : "false");
        break;
    }
    return buf;
}

char *eddy_config_encode(const eddy_config_t *self, size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    size_t n = eddy_config_count(self);
    eddy_mpw_array(&w, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        const config_entry_t *e = &self->entries[i];
        eddy_mpw_array(&w, 3);
        eddy_mpw_str(&w, e->key);
        eddy_mpw_u64(&w, (uint64_t)e->type);
        switch (e->type) {
        case EDDY_CONFIG_STR:
            eddy_mpw_str(&w, e->str);
            break;
        case EDDY_CONFIG_INT:
            eddy_mpw_i64(&w, e->i);
            break;
        case EDDY_CONFIG_DOUBLE:
            eddy_mpw_double(&w, e->d);
            break;
        case EDDY_CONFIG_BOOL:
            eddy_mpw_bool(&w, e->i != 0);
            break;
        }
    }
    return eddy_mpw_release(&w, len);
}

eddy_config_t *eddy_config_decode(const void *data, size_t len, eddy_err_t *err)
{
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) < 0)
        return NULL;
    eddy_config_t *cfg = eddy_config_new();
    if (!cfg) {
        eddy_mpr_close(&r);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    uint32_t n = eddy_mpr_remaining(&r);
    if (n > EDDY_CONFIG_MAX_ENTRIES)
        eddy_mpr_fail(&r, "too many config entries");
    char previous[EDDY_CONFIG_MAX_KEY] = "";
    for (uint32_t i = 0; r.ok && i < n; i++) {
        const msgpack_object *items;
        uint32_t count, next;
        if (eddy_mpr_enter(&r, 3, &items, &count, &next) != 3) {
            eddy_mpr_fail(&r, "config entry is not [key, type, value]");
            break;
        }
        char key[EDDY_CONFIG_MAX_KEY];
        eddy_mpr_strcpy(&r, key, sizeof key);
        uint64_t type = eddy_mpr_u64(&r, EDDY_CONFIG_BOOL);
        if (r.ok && (!key[0] || (i > 0 && strcmp(previous, key) >= 0)))
            eddy_mpr_fail(&r, "config keys must be non-empty, sorted and unique");
        int rc = 0;
        if (r.ok) {
            switch ((eddy_config_type_t)type) {
            case EDDY_CONFIG_STR: {
                char *s = eddy_mpr_strdup(&r, EDDY_CONFIG_MAX_STRING);
                rc = r.ok ? eddy_config_set_str(cfg, key, s ? s : "") : 0;
                free(s);
                break;
            }
            case EDDY_CONFIG_INT: {
                int64_t v = eddy_mpr_i64(&r);
                rc = r.ok ? eddy_config_set_int(cfg, key, v) : 0;
                break;
            }
            case EDDY_CONFIG_DOUBLE: {
                double v = eddy_mpr_double(&r);
                rc = r.ok ? eddy_config_set_double(cfg, key, v) : 0;
                break;
            }
            case EDDY_CONFIG_BOOL: {
                bool v = eddy_mpr_bool(&r);
                rc = r.ok ? eddy_config_set_bool(cfg, key, v) : 0;
                break;
            }
            }
        }
        if (rc < 0)
            eddy_mpr_fail(&r, "out of memory");
        eddy_mpr_leave(&r, items, count, next);
        memcpy(previous, key, sizeof previous);
    }
    int rc = eddy_mpr_finish(&r, "config", err);
    eddy_mpr_close(&r);
    if (rc < 0)
        eddy_config_destroy(&cfg);
    return cfg;
}
