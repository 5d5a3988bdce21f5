/* sql_catalog.c - built-in Nexmark tables and the script's CREATEs
 * (sql_catalog.h). */
#include "plan/sql_catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/sql_expr.h"

const char *const eddy_sql_nexmark_columns[] = {"event", "date_time", "f2", "f3", "f4",
                                                "f5",    "f6",        "f7", "f8"};

#define S EDDY_SQL_T_STRING
#define B EDDY_SQL_T_BIGINT
#define T EDDY_SQL_T_TIMESTAMP

/* The Nexmark suite's columns over eddy's CSV lines
 * P,date_time,id,name,email,credit_card,city,state
 * A,date_time,id,item_name,initial_bid,reserve,expires,seller,category
 * B,date_time,auction,bidder,price,channel
 * ("" : a column the CSV lacks, read as an empty string). */
static const char *const person_names[] = {"id", "name", "emailAddress", "creditCard",
                                           "city", "state", "dateTime", "extra"};
static const eddy_sql_type_t person_types[] = {B, S, S, S, S, S, T, S};
static const char *const person_fields[] = {"f2", "f3", "f4", "f5", "f6", "f7", "date_time", ""};
static const char *const auction_names[] = {"id", "itemName", "description", "initialBid", "reserve",
                                            "dateTime", "expires", "seller", "category", "extra"};
static const eddy_sql_type_t auction_types[] = {B, S, S, B, B, T, T, B, B, S};
static const char *const auction_fields[] = {"f2", "f3", "", "f4", "f5", "date_time", "f6", "f7",
                                             "f8", ""};
static const char *const bid_names[] = {"auction", "bidder", "price", "channel", "url",
                                        "dateTime", "extra"};
static const eddy_sql_type_t bid_types[] = {B, B, B, S, S, T, S};
static const char *const bid_fields[] = {"f2", "f3", "f4", "f5", "", "date_time", ""};

#undef S
#undef B
#undef T

#define BUILTIN(n, e, pre, wm) \
    {n, NULL, EDDY_SQL_CONN_NEXMARK_CSV, pre##_names, pre##_types, pre##_fields, \
     sizeof pre##_names / sizeof pre##_names[0], e, NULL, NULL, wm, EDDY_SQL_NEXMARK_DELAY_MS}

static const eddy_sql_table_t builtins[] = {
    BUILTIN("person", 'P', person, 6),
    BUILTIN("auction", 'A', auction, 5),
    BUILTIN("bid", 'B', bid, 5),
};

static const char *option(const eddy_sql_stmt_t *st, const char *key)
{
    for (uint32_t i = 0; i < st->n_options; i++)
        if (!strcmp(st->options[i].key, key))
            return st->options[i].value;
    return NULL;
}

/* The connector and its options of CREATE TABLE st into t. */
static int connector(const eddy_sql_src_t *src, const eddy_sql_stmt_t *st, eddy_sql_table_t *t,
                     eddy_err_t *err)
{
    static const char *const fs_keys[] = {"connector", "path", "format", NULL};
    static const char *const plain_keys[] = {"connector", NULL};
    static const char *const known[] = {"filesystem", "print", "blackhole"};
    const char *conn = option(st, "connector");
    if (!conn)
        return eddy_sql_fail(src, st->name_pos, err, "table '%s' has no 'connector' option "
                             "(filesystem, print or blackhole)", st->name);
    const char *const *keys = plain_keys;
    if (!strcmp(conn, "filesystem")) {
        t->connector = EDDY_SQL_CONN_FILESYSTEM;
        keys = fs_keys;
    } else if (!strcmp(conn, "print")) {
        t->connector = EDDY_SQL_CONN_PRINT;
    } else if (!strcmp(conn, "blackhole")) {
        t->connector = EDDY_SQL_CONN_BLACKHOLE;
    } else {
        uint32_t pos = st->pos;
        for (uint32_t i = 0; i < st->n_options; i++)
            if (!strcmp(st->options[i].key, "connector"))
                pos = st->options[i].pos;
        const char *near = eddy_sql_closest(conn, known, 3);
        return eddy_sql_fail(src, pos, err, "connector '%s' is not supported (eddy's: "
                             "filesystem, print, blackhole)%s%s%s", conn,
                             near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
    }
    for (uint32_t i = 0; i < st->n_options; i++) {
        const char *k = st->options[i].key;
        bool ok = false;
        uint32_t n = 0;
        for (const char *const *a = keys; *a; a++, n++)
            ok |= !strcmp(*a, k);
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(st->options[j].key, k))
                return eddy_sql_fail(src, st->options[i].pos, err, "option '%s' given twice", k);
        if (!ok) {
            const char *near = eddy_sql_closest(k, keys, n);
            return eddy_sql_fail(src, st->options[i].pos, err, "unknown option '%s' for connector "
                                 "'%s'%s%s%s", k, conn, near ? " (did you mean '" : "",
                                 near ? near : "", near ? "'?)" : "");
        }
    }
    if (t->connector == EDDY_SQL_CONN_FILESYSTEM) {
        t->path = option(st, "path");
        t->format = option(st, "format");
        if (!t->path || !t->path[0])
            return eddy_sql_fail(src, st->name_pos, err, "table '%s': connector 'filesystem' needs "
                                 "'path'", st->name);
        if (!t->format || (strcmp(t->format, "csv") && strcmp(t->format, "json")))
            return eddy_sql_fail(src, st->name_pos, err, "table '%s': connector 'filesystem' needs "
                                 "'format' = 'csv' or 'json'", st->name);
    }
    return 0;
}

static int add_table(eddy_sql_catalog_t *cat, const eddy_sql_table_t *t, eddy_err_t *err)
{
    eddy_sql_table_t *v = realloc(cat->v, (cat->n + 1) * sizeof *v);
    if (!v)
        return eddy_err_set(err, "out of memory");
    cat->v = v;
    v[cat->n++] = *t;
    return 0;
}

static int create_table(const eddy_sql_src_t *src, const eddy_sql_stmt_t *st,
                        eddy_sql_catalog_t *cat, eddy_err_t *err)
{
    eddy_sql_table_t t = {.name = st->name, .stmt = st, .watermark = -1};
    if (st->n_columns == 0)
        return eddy_sql_fail(src, st->name_pos, err, "table '%s' has no columns", st->name);
    char **names = calloc(st->n_columns, sizeof *names);
    eddy_sql_type_t *types = calloc(st->n_columns, sizeof *types);
    char **nv = realloc(cat->names, (cat->n_owned + 1) * sizeof *nv);
    eddy_sql_type_t **tv = nv ? realloc(cat->types, (cat->n_owned + 1) * sizeof *tv) : NULL;
    if (nv)
        cat->names = nv;
    if (tv)
        cat->types = tv;
    if (!names || !types || !nv || !tv) {
        free(names);
        free(types);
        return eddy_err_set(err, "out of memory");
    }
    /* names points at the statement's strings; only the arrays are owned */
    cat->names[cat->n_owned] = (char *)names;
    cat->types[cat->n_owned++] = types;
    for (uint32_t i = 0; i < st->n_columns; i++) {
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(st->columns[j].name, st->columns[i].name))
                return eddy_sql_fail(src, st->columns[i].pos, err, "column '%s' named twice",
                                     st->columns[i].name);
        names[i] = st->columns[i].name;
        types[i] = st->columns[i].type;
        if (st->watermark && !strcmp(st->watermark, st->columns[i].name))
            t.watermark = (int)i;
    }
    t.names = (const char *const *)names;
    t.types = types;
    t.n_columns = st->n_columns;
    if (st->watermark && t.watermark < 0)
        return eddy_sql_fail(src, st->watermark_pos, err, "WATERMARK FOR unknown column '%s'",
                             st->watermark);
    if (t.watermark >= 0 && types[t.watermark] != EDDY_SQL_T_TIMESTAMP)
        return eddy_sql_fail(src, st->watermark_pos, err, "type mismatch: WATERMARK FOR a %s "
                             "column (a TIMESTAMP(3) is needed)", eddy_sql_type_name(types[t.watermark]));
    t.watermark_delay_ms = st->watermark_delay_ms;
    for (uint32_t k = 0; k < st->n_primary_key; k++) {
        bool found = false;
        for (uint32_t i = 0; i < st->n_columns; i++)
            found |= !strcmp(st->columns[i].name, st->primary_key[k]);
        if (!found)
            return eddy_sql_fail(src, st->pos, err, "PRIMARY KEY names unknown column '%s'",
                                 st->primary_key[k]);
    }
    if (connector(src, st, &t, err) < 0)
        return -1;
    return add_table(cat, &t, err);
}

int eddy_sql_catalog_build(const eddy_sql_src_t *src, const eddy_sql_script_t *script,
                           eddy_sql_catalog_t *out, eddy_err_t *err)
{
    *out = (eddy_sql_catalog_t){0};
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (add_table(out, &builtins[i], err) < 0)
            return -1;
    for (uint32_t i = 0; i < script->n; i++) {
        const eddy_sql_stmt_t *st = &script->stmts[i];
        if (st->kind == EDDY_SQL_CREATE_TABLE && create_table(src, st, out, err) < 0) {
            eddy_sql_catalog_clear(out);
            return -1;
        }
        if (st->kind == EDDY_SQL_CREATE_VIEW) {
            eddy_sql_table_t t = {.name = st->name, .stmt = st, .connector = EDDY_SQL_CONN_VIEW,
                                  .watermark = -1};
            if (add_table(out, &t, err) < 0) {
                eddy_sql_catalog_clear(out);
                return -1;
            }
        }
    }
    return 0;
}

void eddy_sql_catalog_clear(eddy_sql_catalog_t *cat)
{
    for (uint32_t i = 0; i < cat->n_owned; i++) {
        free(cat->names[i]);
        free(cat->types[i]);
    }
    free(cat->names);
    free(cat->types);
    free(cat->v);
    *cat = (eddy_sql_catalog_t){0};
}

const eddy_sql_table_t *eddy_sql_catalog_find(const eddy_sql_catalog_t *cat, const char *name)
{
    for (uint32_t i = cat->n; i-- > 0;)
        if (!strcmp(cat->v[i].name, name))
            return &cat->v[i];
    return NULL;
}

int eddy_sql_catalog_unknown(const eddy_sql_src_t *src, const eddy_sql_catalog_t *cat,
                             const char *name, uint32_t pos, eddy_err_t *err)
{
    const char **names = calloc(cat->n ? cat->n : 1, sizeof *names);
    for (uint32_t i = 0; names && i < cat->n; i++)
        names[i] = cat->v[i].name;
    const char *near = names ? eddy_sql_closest(name, names, cat->n) : NULL;
    char hint[200] = "";
    if (near)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    free(names);
    return eddy_sql_fail(src, pos, err, "unknown table '%s'%s", name, hint);
}
