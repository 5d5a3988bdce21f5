/* sql_catalog.h - the tables a SQL script can name: the built-in Nexmark
 * tables person, auction and bid (the suite's column names, read from
 * eddy's Nexmark CSV given as the job's --input), and the script's own
 * CREATE TABLE / CREATE VIEW, checked here: their connector and its
 * options (unknown options are errors), watermark and primary key.
 *
 * A script's table of the same name hides a built-in one, as a Flink
 * session's own DDL would. */
#ifndef EDDY_PLAN_SQL_CATALOG_H
#define EDDY_PLAN_SQL_CATALOG_H

#include "common/err.h"
#include "plan/sql_ast.h"
#include "plan/sql_lex.h"

typedef enum eddy_sql_connector {
    EDDY_SQL_CONN_NEXMARK_CSV, /* a built-in table: the job's Nexmark CSV input */
    EDDY_SQL_CONN_FILESYSTEM,
    EDDY_SQL_CONN_PRINT,
    EDDY_SQL_CONN_BLACKHOLE,
    EDDY_SQL_CONN_VIEW,        /* not a connector: a view */
} eddy_sql_connector_t;

typedef struct eddy_sql_table {
    const char *name;
    const eddy_sql_stmt_t *stmt; /* its CREATE, NULL for a built-in table */
    eddy_sql_connector_t connector;
    const char *const *names;    /* columns (for a view: none, its query decides) */
    const eddy_sql_type_t *types;
    const char *const *fields;   /* a built-in table: each column's CSV field ("" none) */
    uint32_t n_columns;
    char event;                  /* a built-in table: its lines' first field (P, A, B) */
    const char *path, *format;   /* filesystem */
    int watermark;               /* the event-time column, -1 none */
    int64_t watermark_delay_ms;
} eddy_sql_table_t;

typedef struct eddy_sql_catalog {
    eddy_sql_table_t *v;
    uint32_t n;
    char **names;                /* the script tables' column names, owned */
    eddy_sql_type_t **types;
    uint32_t n_owned;
} eddy_sql_catalog_t;

/* The built-in tables and every CREATE of script, checked. */
int eddy_sql_catalog_build(const eddy_sql_src_t *src, const eddy_sql_script_t *script,
                           eddy_sql_catalog_t *out, eddy_err_t *err);
void eddy_sql_catalog_clear(eddy_sql_catalog_t *cat);
/* The table or view called name (the last of that name), or NULL. */
const eddy_sql_table_t *eddy_sql_catalog_find(const eddy_sql_catalog_t *cat, const char *name);
/* "unknown table 'x' (did you mean 'y'?)" at pos; returns -1. */
int eddy_sql_catalog_unknown(const eddy_sql_src_t *src, const eddy_sql_catalog_t *cat,
                             const char *name, uint32_t pos, eddy_err_t *err);

/* The Nexmark CSV's columns (the pipeline source's), its event-time
 * column and the built-in tables' watermark delay. */
extern const char *const eddy_sql_nexmark_columns[];
#define EDDY_SQL_NEXMARK_N_COLUMNS 9
#define EDDY_SQL_NEXMARK_TIME_COLUMN "date_time"
#define EDDY_SQL_NEXMARK_DELAY_MS 4000

#endif
