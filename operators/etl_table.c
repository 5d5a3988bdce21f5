/* etl_table.c - the etl reference table (etl_table.h): a sorted array of
 * rows; reference tables are loaded once and read-only after. */
#include "operators/etl_table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
    char *key;
    char **values;
} row_t;

struct eddy_etl_table {
    eddy_strv_t columns;
    row_t *rows;
    size_t n, cap;
    bool sealed;
};

eddy_etl_table_t *eddy_etl_table_new(const eddy_strv_t *columns)
{
    eddy_etl_table_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    for (size_t i = 0; i < columns->n; i++)
        if (eddy_strv_push(&t->columns, columns->v[i], strlen(columns->v[i])) < 0) {
            eddy_etl_table_destroy(&t);
            return NULL;
        }
    return t;
}

static void row_free(row_t *r, size_t n_columns)
{
    for (size_t c = 0; r->values && c < n_columns; c++)
        free(r->values[c]);
    free(r->values);
    free(r->key);
}

void eddy_etl_table_destroy(eddy_etl_table_t **self_p)
{
    eddy_etl_table_t *t = *self_p;
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        row_free(&t->rows[i], t->columns.n);
    free(t->rows);
    eddy_strv_clear(&t->columns);
    free(t);
    *self_p = NULL;
}

int eddy_etl_table_add(eddy_etl_table_t *self, const char *key, const char *const *values,
                       eddy_err_t *err)
{
    if (self->n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 64;
        row_t *rows = realloc(self->rows, cap * sizeof *rows);
        if (!rows)
            return eddy_err_set(err, "out of memory");
        self->rows = rows;
        self->cap = cap;
    }
    row_t r = {strdup(key), calloc(self->columns.n ? self->columns.n : 1, sizeof(char *))};
    bool ok = r.key && r.values;
    for (size_t c = 0; ok && c < self->columns.n; c++)
        if (values[c] && !(r.values[c] = strdup(values[c])))
            ok = false;
    if (!ok) {
        row_free(&r, self->columns.n);
        return eddy_err_set(err, "out of memory");
    }
    self->rows[self->n++] = r;
    self->sealed = false;
    return 0;
}

static int cmp_row(const void *a, const void *b)
{
    return strcmp(((const row_t *)a)->key, ((const row_t *)b)->key);
}

int eddy_etl_table_seal(eddy_etl_table_t *self, eddy_err_t *err)
{
    if (self->n)
        qsort(self->rows, self->n, sizeof *self->rows, cmp_row);
    for (size_t i = 1; i < self->n; i++)
        if (!strcmp(self->rows[i - 1].key, self->rows[i].key))
            return eddy_err_set(err, "key '%.64s' appears twice", self->rows[i].key);
    self->sealed = true;
    return 0;
}

char *const *eddy_etl_table_find(const eddy_etl_table_t *self, const char *key)
{
    if (!self->sealed)
        return NULL;
    row_t probe = {(char *)key, NULL};
    const row_t *r = self->n ? bsearch(&probe, self->rows, self->n, sizeof *self->rows, cmp_row)
                             : NULL;
    return r ? r->values : NULL;
}

const eddy_strv_t *eddy_etl_table_columns(const eddy_etl_table_t *self)
{
    return &self->columns;
}

size_t eddy_etl_table_rows(const eddy_etl_table_t *self)
{
    return self->n;
}

eddy_etl_table_t *eddy_etl_table_load_csv(const char *path, eddy_err_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        eddy_err_set(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    eddy_etl_table_t *t = NULL;
    eddy_strv_t fields = {0}, columns = {0};
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            n--;
        if (n == 0)
            continue;
        if (eddy_etl_csv_split(line, (size_t)n, &fields, err) < 0) {
            rc = eddy_err_wrap(err, "%s:%zu", path, lineno);
            break;
        }
        if (!t) {
            if (fields.n < 2) {
                rc = eddy_err_set(err, "%s: the header must name the key column and at least one "
                                       "more", path);
                break;
            }
            for (size_t i = 1; rc == 0 && i < fields.n; i++)
                if (eddy_strv_push(&columns, fields.v[i], strlen(fields.v[i])) < 0)
                    rc = eddy_err_set(err, "out of memory");
            if (rc == 0 && !(t = eddy_etl_table_new(&columns)))
                rc = eddy_err_set(err, "out of memory");
            continue;
        }
        if (fields.n != columns.n + 1) {
            rc = eddy_err_set(err, "%s:%zu: expected %zu fields, got %zu", path, lineno,
                              columns.n + 1, fields.n);
            break;
        }
        rc = eddy_etl_table_add(t, fields.v[0], (const char *const *)fields.v + 1, err);
    }
    if (rc == 0 && ferror(f))
        rc = eddy_err_set(err, "%s: read error", path);
    if (rc == 0 && !t)
        rc = eddy_err_set(err, "%s: empty (a header line is needed)", path);
    if (rc == 0 && eddy_etl_table_seal(t, err) < 0)
        rc = eddy_err_wrap(err, "%s", path);
    free(line);
    fclose(f);
    eddy_strv_clear(&fields);
    eddy_strv_clear(&columns);
    if (rc < 0)
        eddy_etl_table_destroy(&t);
    return t;
}
