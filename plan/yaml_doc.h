/* yaml_doc.h - a YAML document as a tree of scalars, mappings and
 * sequences, each node with the line it starts on, so that a pipeline
 * spec's validation errors can name the file, line and field.
 *
 * Loaded with libyaml's event parser. Anchors and aliases, tags other than
 * the plain ones, and more than one document are refused (a spec has no
 * use for them, and aliases are the way to make a small file expand into
 * a huge tree). Limits: depth, node count and scalar size. */
#ifndef EDDY_PLAN_YAML_DOC_H
#define EDDY_PLAN_YAML_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum eddy_ynode_kind {
    EDDY_YNODE_SCALAR,
    EDDY_YNODE_MAP,
    EDDY_YNODE_SEQ,
} eddy_ynode_kind_t;

typedef struct eddy_ynode eddy_ynode_t;
struct eddy_ynode {
    eddy_ynode_kind_t kind;
    uint32_t line;        /* 1-based */
    char *scalar;         /* EDDY_YNODE_SCALAR (NUL-terminated) */
    bool quoted;          /* a quoted scalar: a string even if it reads as a number */
    char **keys;          /* EDDY_YNODE_MAP: keys[i] -> items[i] */
    eddy_ynode_t **items; /* MAP values or SEQ elements */
    uint32_t n;
};

typedef struct eddy_ydoc eddy_ydoc_t;

/* Parses text; NULL with err "LINE:COL: what" on bad YAML or a limit. */
eddy_ydoc_t *eddy_ydoc_parse(const char *text, size_t len, eddy_err_t *err);
void eddy_ydoc_destroy(eddy_ydoc_t **self_p);
/* The root node (NULL for an empty document). */
const eddy_ynode_t *eddy_ydoc_root(const eddy_ydoc_t *self);

/* Frees a node and everything below it (a tree built outside a document,
 * as plan/sql_tree.c builds one); NULL is a no-op. */
void eddy_ynode_free(eddy_ynode_t *n);

/* The value under key in a mapping, NULL when absent or not a mapping. */
const eddy_ynode_t *eddy_ynode_get(const eddy_ynode_t *map, const char *key);

#endif
