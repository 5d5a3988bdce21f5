/* sql_ast.h - the syntax tree of a streaming SQL script (docs/sql.md), as
 * plan/sql_parse.c reads it and plan/sql_compile.c turns it into a
 * pipeline spec.
 *
 * Every node keeps the byte offset of its first token (pos) in the script,
 * so a later stage (the compiler's "unknown column", "type mismatch") can
 * point its error at the line and column it is about. Names are kept as
 * written; the compiler compares them case-sensitively, as Flink does for
 * identifiers, and keywords case-insensitively. Nodes own their children;
 * eddy_sql_script_destroy frees the whole tree. */
#ifndef EDDY_PLAN_SQL_AST_H
#define EDDY_PLAN_SQL_AST_H

#include <stdbool.h>
#include <stdint.h>

typedef enum eddy_sql_type {
    EDDY_SQL_T_ANY = 0, /* not known from the form (a NULL literal) */
    EDDY_SQL_T_BOOLEAN,
    EDDY_SQL_T_INT,
    EDDY_SQL_T_BIGINT,
    EDDY_SQL_T_DOUBLE,
    EDDY_SQL_T_DECIMAL,
    EDDY_SQL_T_STRING,
    EDDY_SQL_T_TIMESTAMP, /* TIMESTAMP(3): epoch milliseconds inside a job */
    EDDY_SQL_T_INTERVAL,  /* INTERVAL '..' unit: milliseconds */
} eddy_sql_type_t;

typedef enum eddy_sql_op {
    EDDY_SQL_OP_ADD, EDDY_SQL_OP_SUB, EDDY_SQL_OP_MUL, EDDY_SQL_OP_DIV, EDDY_SQL_OP_MOD,
    EDDY_SQL_OP_EQ, EDDY_SQL_OP_NE, EDDY_SQL_OP_LT, EDDY_SQL_OP_LE, EDDY_SQL_OP_GT,
    EDDY_SQL_OP_GE, EDDY_SQL_OP_AND, EDDY_SQL_OP_OR, EDDY_SQL_OP_CONCAT,
} eddy_sql_op_t;

typedef enum eddy_sql_expr_kind {
    EDDY_SQL_X_COLUMN,   /* [qual.]name */
    EDDY_SQL_X_INT,      /* i */
    EDDY_SQL_X_FLOAT,    /* text: the literal as written (2.5, 1e3) */
    EDDY_SQL_X_STRING,   /* text */
    EDDY_SQL_X_BOOL,     /* i: 0 or 1 */
    EDDY_SQL_X_NULL,
    EDDY_SQL_X_INTERVAL, /* i: milliseconds */
    EDDY_SQL_X_BINARY,   /* op, args[0] op args[1] */
    EDDY_SQL_X_NOT,      /* args[0] */
    EDDY_SQL_X_NEG,      /* args[0] */
    EDDY_SQL_X_IS_NULL,  /* args[0] IS [NOT] NULL (negated) */
    EDDY_SQL_X_BETWEEN,  /* args[0] [NOT] BETWEEN args[1] AND args[2] */
    EDDY_SQL_X_IN,       /* args[0] [NOT] IN (args[1..]) or IN (sub) */
    EDDY_SQL_X_LIKE,     /* args[0] [NOT] LIKE args[1] */
    EDDY_SQL_X_CASE,     /* args: WHEN, THEN pairs, then ELSE when has_else; operand
                          * (CASE x WHEN ...) in operand */
    EDDY_SQL_X_CAST,     /* CAST(args[0] AS cast_type) */
    EDDY_SQL_X_CALL,     /* name(args), name(DISTINCT args), name(*) (star) */
    EDDY_SQL_X_STAR,     /* * or qual.* in a select list */
    EDDY_SQL_X_OVER,     /* name() OVER (PARTITION BY partition ORDER BY order) */
    EDDY_SQL_X_EXISTS,   /* [NOT] EXISTS (sub) */
} eddy_sql_expr_kind_t;

struct eddy_sql_select;

typedef struct eddy_sql_expr {
    eddy_sql_expr_kind_t kind;
    uint32_t pos;
    eddy_sql_op_t op;
    char *name, *qual;  /* COLUMN, CALL, OVER; qual: a table alias or NULL */
    char *text;         /* FLOAT, STRING */
    int64_t i;          /* INT, BOOL, INTERVAL */
    struct eddy_sql_expr **args;
    uint32_t n_args;
    struct eddy_sql_expr *operand; /* CASE x WHEN ... */
    bool negated, distinct, star, has_else;
    eddy_sql_type_t cast_type;
    struct eddy_sql_select *sub;   /* IN (SELECT ...), EXISTS */
    struct eddy_sql_expr **partition, **order; /* OVER */
    bool *order_desc;
    uint32_t n_partition, n_order;
} eddy_sql_expr_t;

typedef enum eddy_sql_from_kind {
    EDDY_SQL_FROM_TABLE,    /* name [alias] */
    EDDY_SQL_FROM_SUBQUERY, /* (sub) [AS] alias */
    EDDY_SQL_FROM_TVF,      /* TABLE(name(TABLE input [PARTITION BY ...], DESCRIPTOR(col), intervals)) */
    EDDY_SQL_FROM_JOIN,     /* left [INNER|LEFT] JOIN right ON on; or left, right (a comma) */
} eddy_sql_from_kind_t;

typedef enum eddy_sql_join_type {
    EDDY_SQL_JOIN_INNER,
    EDDY_SQL_JOIN_LEFT,
    EDDY_SQL_JOIN_RIGHT,
    EDDY_SQL_JOIN_FULL,
    EDDY_SQL_JOIN_CROSS, /* a comma, or CROSS JOIN: the WHERE holds the condition */
} eddy_sql_join_type_t;

#define EDDY_SQL_TVF_MAX_INTERVALS 3

typedef struct eddy_sql_from {
    eddy_sql_from_kind_t kind;
    uint32_t pos;
    char *name;                    /* TABLE: the table; TVF: TUMBLE, HOP, CUMULATE or SESSION */
    char *alias;
    struct eddy_sql_select *sub;   /* SUBQUERY */
    char *input;                   /* TVF: TABLE input */
    uint32_t input_pos;
    char *descriptor;              /* TVF: DESCRIPTOR(col) */
    uint32_t descriptor_pos;
    eddy_sql_expr_t **partition;   /* TVF SESSION: PARTITION BY keys */
    uint32_t n_partition;
    eddy_sql_expr_t *intervals[EDDY_SQL_TVF_MAX_INTERVALS]; /* TVF: as written */
    uint32_t n_intervals;
    struct eddy_sql_from *left, *right; /* JOIN */
    eddy_sql_join_type_t join_type;
    eddy_sql_expr_t *on;
} eddy_sql_from_t;

typedef struct eddy_sql_select {
    uint32_t pos;
    bool distinct;
    eddy_sql_expr_t **items;
    char **aliases;      /* NULL where none */
    uint32_t n_items;
    eddy_sql_from_t *from;
    eddy_sql_expr_t *where;
    eddy_sql_expr_t **group_by;
    uint32_t n_group_by;
    eddy_sql_expr_t *having;
    struct eddy_sql_select *union_all; /* the next SELECT of a UNION ALL */
    uint32_t union_pos;
} eddy_sql_select_t;

typedef enum eddy_sql_stmt_kind {
    EDDY_SQL_CREATE_TABLE,
    EDDY_SQL_CREATE_VIEW,
    EDDY_SQL_INSERT,
    EDDY_SQL_QUERY, /* a bare SELECT: its rows are the job's result */
} eddy_sql_stmt_kind_t;

typedef struct eddy_sql_column {
    char *name;
    uint32_t pos;
    eddy_sql_type_t type;
    uint32_t precision, scale; /* DECIMAL(p, s); TIMESTAMP(p) */
} eddy_sql_column_t;

typedef struct eddy_sql_option {
    char *key, *value;
    uint32_t pos; /* of the key */
} eddy_sql_option_t;

typedef struct eddy_sql_stmt {
    eddy_sql_stmt_kind_t kind;
    uint32_t pos;
    char *name;          /* the table or view created, the INSERT's target */
    uint32_t name_pos;
    bool temporary;
    bool explain;        /* EXPLAIN [PLAN FOR] INSERT ... / SELECT ...: its plan, not its rows */
    eddy_sql_column_t *columns; /* CREATE TABLE */
    uint32_t n_columns;
    char *watermark;     /* WATERMARK FOR watermark AS watermark - INTERVAL ... */
    uint32_t watermark_pos;
    int64_t watermark_delay_ms;
    char **primary_key;
    uint32_t n_primary_key;
    eddy_sql_option_t *options; /* WITH (...) */
    uint32_t n_options;
    eddy_sql_select_t *query;   /* CREATE VIEW, INSERT, QUERY */
} eddy_sql_stmt_t;

typedef struct eddy_sql_script {
    eddy_sql_stmt_t *stmts;
    uint32_t n;
} eddy_sql_script_t;

void eddy_sql_expr_free(eddy_sql_expr_t *x);
void eddy_sql_select_free(eddy_sql_select_t *s);
void eddy_sql_from_free(eddy_sql_from_t *f);
void eddy_sql_script_destroy(eddy_sql_script_t **self_p);

/* "BIGINT", "TIMESTAMP(3)" and so on, for messages. */
const char *eddy_sql_type_name(eddy_sql_type_t t);

#endif
