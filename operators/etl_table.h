/* etl_table.h - the etl job's reference table for enrichment: rows of text
 * columns by a unique key, looked up by binary search.
 *
 * Filled with add() (or from a CSV file: a header line naming the key
 * column and then the value columns, one row a line, eddy_etl_csv_split's
 * CSV), then sealed; a key given twice is an error. A NULL value (a SQL
 * NULL) reads as null in JSON and empty in CSV. The table is immutable
 * once sealed; one per operator instance. */
#ifndef EDDY_OPERATORS_ETL_TABLE_H
#define EDDY_OPERATORS_ETL_TABLE_H

#include <stddef.h>

#include "common/err.h"
#include "operators/etl_record.h"

typedef struct eddy_etl_table eddy_etl_table_t;

/* columns: the value columns' names (copied). */
eddy_etl_table_t *eddy_etl_table_new(const eddy_strv_t *columns);
void eddy_etl_table_destroy(eddy_etl_table_t **self_p);
/* values: one per column, NULL for a SQL NULL (copied). */
int eddy_etl_table_add(eddy_etl_table_t *self, const char *key, const char *const *values,
                       eddy_err_t *err);
/* Sorts and checks keys are unique; required before find(). */
int eddy_etl_table_seal(eddy_etl_table_t *self, eddy_err_t *err);
/* The row's values (one per column), or NULL when key has none. */
char *const *eddy_etl_table_find(const eddy_etl_table_t *self, const char *key);
const eddy_strv_t *eddy_etl_table_columns(const eddy_etl_table_t *self);
size_t eddy_etl_table_rows(const eddy_etl_table_t *self);
/* Reads a CSV reference file (see above). Blocking file I/O. */
eddy_etl_table_t *eddy_etl_table_load_csv(const char *path, eddy_err_t *err);

#endif
