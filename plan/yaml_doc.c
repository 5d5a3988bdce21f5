/* yaml_doc.c - libyaml events into an eddy_ynode_t tree (see yaml_doc.h).
 *
 * A stack of open collections: a scalar or a collection start adds a node
 * to the innermost open one (as a mapping's key when the mapping waits for
 * one), a collection end pops. Duplicate mapping keys are an error (YAML
 * says so; silently taking the last would hide a typo in a spec). */
#include "plan/yaml_doc.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 64
#define MAX_NODES 100000
#define MAX_SCALAR (1u << 20)

struct eddy_ydoc {
    eddy_ynode_t *root;
};

typedef struct loader {
    eddy_ynode_t *stack[MAX_DEPTH];
    char *pending_key[MAX_DEPTH]; /* a mapping's key waiting for its value */
    uint32_t depth;
    uint32_t nodes;
    eddy_ynode_t *root;
    eddy_err_t *err;
} loader_t;

void eddy_ynode_free(eddy_ynode_t *n)
{
    if (!n)
        return;
    for (uint32_t i = 0; i < n->n; i++) {
        eddy_ynode_free(n->items[i]);
        if (n->keys)
            free(n->keys[i]);
    }
    free(n->items);
    free(n->keys);
    free(n->scalar);
    free(n);
}

static int fail_at(loader_t *l, const yaml_mark_t *m, const char *what)
{
    return eddy_err_set(l->err, "%zu:%zu: %s", m->line + 1, m->column + 1, what);
}

static int append(eddy_ynode_t *parent, char *key, eddy_ynode_t *child)
{
    eddy_ynode_t **items = realloc(parent->items, (parent->n + 1) * sizeof *items);
    if (!items)
        return -1;
    parent->items = items;
    if (parent->kind == EDDY_YNODE_MAP) {
        char **keys = realloc(parent->keys, (parent->n + 1) * sizeof *keys);
        if (!keys)
            return -1;
        parent->keys = keys;
        parent->keys[parent->n] = key;
    }
    parent->items[parent->n++] = child;
    return 0;
}

/* Places a new node (scalar or collection) where the open collection
 * wants it. A scalar that is a mapping's key is taken as the key instead
 * (*consumed set; the node is freed). */
static int place(loader_t *l, eddy_ynode_t *n, const yaml_mark_t *m, bool *consumed)
{
    *consumed = false;
    if (l->depth == 0) {
        if (l->root) {
            eddy_ynode_free(n);
            return fail_at(l, m, "more than one document");
        }
        l->root = n;
        return 0;
    }
    eddy_ynode_t *parent = l->stack[l->depth - 1];
    if (parent->kind == EDDY_YNODE_MAP && !l->pending_key[l->depth - 1]) {
        if (n->kind != EDDY_YNODE_SCALAR) {
            eddy_ynode_free(n);
            return fail_at(l, m, "a mapping key must be a plain scalar");
        }
        for (uint32_t i = 0; i < parent->n; i++) {
            if (!strcmp(parent->keys[i], n->scalar)) {
                char msg[160];
                snprintf(msg, sizeof msg, "duplicate key '%.100s'", n->scalar);
                eddy_ynode_free(n);
                return fail_at(l, m, msg);
            }
        }
        l->pending_key[l->depth - 1] = n->scalar;
        n->scalar = NULL;
        eddy_ynode_free(n);
        *consumed = true;
        return 0;
    }
    char *key = NULL;
    if (parent->kind == EDDY_YNODE_MAP) {
        key = l->pending_key[l->depth - 1];
        l->pending_key[l->depth - 1] = NULL;
    }
    if (append(parent, key, n) < 0) {
        free(key);
        eddy_ynode_free(n);
        return fail_at(l, m, "out of memory");
    }
    return 0;
}

static eddy_ynode_t *new_node(loader_t *l, eddy_ynode_kind_t kind, const yaml_mark_t *m)
{
    if (++l->nodes > MAX_NODES) {
        fail_at(l, m, "document too large");
        return NULL;
    }
    eddy_ynode_t *n = calloc(1, sizeof *n);
    if (!n) {
        fail_at(l, m, "out of memory");
        return NULL;
    }
    n->kind = kind;
    n->line = (uint32_t)m->line + 1;
    return n;
}

static int on_event(loader_t *l, const yaml_event_t *ev)
{
    const yaml_mark_t *m = &ev->start_mark;
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        return fail_at(l, m, "aliases are not supported");
    case YAML_SCALAR_EVENT: {
        if (ev->data.scalar.anchor)
            return fail_at(l, m, "anchors are not supported");
        if (ev->data.scalar.length > MAX_SCALAR)
            return fail_at(l, m, "value too long");
        eddy_ynode_t *n = new_node(l, EDDY_YNODE_SCALAR, m);
        if (!n)
            return -1;
        n->scalar = malloc(ev->data.scalar.length + 1);
        if (!n->scalar) {
            free(n);
            return fail_at(l, m, "out of memory");
        }
        memcpy(n->scalar, ev->data.scalar.value, ev->data.scalar.length);
        n->scalar[ev->data.scalar.length] = '\0';
        if (strlen(n->scalar) != ev->data.scalar.length) {
            eddy_ynode_free(n);
            return fail_at(l, m, "a value contains a NUL byte");
        }
        n->quoted = ev->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                    ev->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        bool consumed;
        return place(l, n, m, &consumed);
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool seq = ev->type == YAML_SEQUENCE_START_EVENT;
        if (seq ? ev->data.sequence_start.anchor != NULL : ev->data.mapping_start.anchor != NULL)
            return fail_at(l, m, "anchors are not supported");
        if (l->depth == MAX_DEPTH)
            return fail_at(l, m, "nested too deeply");
        eddy_ynode_t *n = new_node(l, seq ? EDDY_YNODE_SEQ : EDDY_YNODE_MAP, m);
        if (!n)
            return -1;
        bool consumed;
        if (place(l, n, m, &consumed) < 0)
            return -1;
        l->stack[l->depth] = n;
        l->pending_key[l->depth] = NULL;
        l->depth++;
        return 0;
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        if (l->depth) {
            l->depth--;
            free(l->pending_key[l->depth]);
            l->pending_key[l->depth] = NULL;
        }
        return 0;
    default:
        return 0;
    }
}

eddy_ydoc_t *eddy_ydoc_parse(const char *text, size_t len, eddy_err_t *err)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    loader_t *l = calloc(1, sizeof *l);
    eddy_ydoc_t *doc = calloc(1, sizeof *doc);
    int rc = l && doc ? 0 : eddy_err_set(err, "out of memory");
    if (l)
        l->err = err;
    bool done = false;
    while (rc == 0 && !done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = eddy_err_set(err, "%zu:%zu: %s%s%s", parser.problem_mark.line + 1,
                              parser.problem_mark.column + 1,
                              parser.problem ? parser.problem : "malformed YAML",
                              parser.context ? " " : "", parser.context ? parser.context : "");
            break;
        }
        if (ev.type == YAML_DOCUMENT_START_EVENT && l->root)
            rc = fail_at(l, &ev.start_mark, "more than one document");
        else
            rc = on_event(l, &ev);
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    if (l) {
        for (uint32_t i = 0; i < MAX_DEPTH; i++)
            free(l->pending_key[i]);
    }
    if (rc < 0 || !doc) {
        if (l)
            eddy_ynode_free(l->root);
        free(l);
        free(doc);
        return NULL;
    }
    doc->root = l->root;
    free(l);
    return doc;
}

void eddy_ydoc_destroy(eddy_ydoc_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_ynode_free((*self_p)->root);
    free(*self_p);
    *self_p = NULL;
}

const eddy_ynode_t *eddy_ydoc_root(const eddy_ydoc_t *self)
{
    return self->root;
}

const eddy_ynode_t *eddy_ynode_get(const eddy_ynode_t *map, const char *key)
{
    if (!map || map->kind != EDDY_YNODE_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->n; i++)
        if (!strcmp(map->keys[i], key))
            return map->items[i];
    return NULL;
}
