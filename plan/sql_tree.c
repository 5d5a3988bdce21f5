/* sql_tree.c - in-memory pipeline document trees (sql_tree.h). */
#include "plan/sql_tree.h"

#include <stdlib.h>
#include <string.h>

static eddy_ynode_t *node(eddy_ynode_kind_t kind, uint32_t line)
{
    eddy_ynode_t *n = calloc(1, sizeof *n);
    if (n) {
        n->kind = kind;
        n->line = line ? line : 1;
    }
    return n;
}

eddy_ynode_t *eddy_sql_ymap(uint32_t line)
{
    return node(EDDY_YNODE_MAP, line);
}

eddy_ynode_t *eddy_sql_yseq(uint32_t line)
{
    return node(EDDY_YNODE_SEQ, line);
}

eddy_ynode_t *eddy_sql_yscalar(const char *text, bool quoted, uint32_t line)
{
    eddy_ynode_t *n = node(EDDY_YNODE_SCALAR, line);
    if (n && !(n->scalar = strdup(text))) {
        free(n);
        return NULL;
    }
    if (n)
        n->quoted = quoted;
    return n;
}

static int add(eddy_ynode_t *parent, const char *key, eddy_ynode_t *v)
{
    if (!parent || !v) {
        eddy_ynode_free(v);
        return -1;
    }
    eddy_ynode_t **items = realloc(parent->items, (parent->n + 1) * sizeof *items);
    if (items)
        parent->items = items;
    char **keys = parent->keys;
    if (items && key) {
        keys = realloc(parent->keys, (parent->n + 1) * sizeof *keys);
        if (keys)
            parent->keys = keys;
    }
    char *k = key && keys ? strdup(key) : NULL;
    if (!items || (key && !k)) {
        eddy_ynode_free(v);
        return -1;
    }
    if (key)
        keys[parent->n] = k;
    items[parent->n++] = v;
    return 0;
}

int eddy_sql_yput(eddy_ynode_t *map, const char *key, eddy_ynode_t *v)
{
    return add(map, key, v);
}

int eddy_sql_ypush(eddy_ynode_t *seq, eddy_ynode_t *v)
{
    return add(seq, NULL, v);
}

int eddy_sql_yput_str(eddy_ynode_t *map, const char *key, const char *text, uint32_t line)
{
    return text ? add(map, key, eddy_sql_yscalar(text, false, line)) : 0;
}

