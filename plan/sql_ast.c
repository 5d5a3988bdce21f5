/* sql_ast.c - freeing a SQL syntax tree (sql_ast.h) and naming its types
 * in messages. */
#include "plan/sql_ast.h"

#include <stdlib.h>

static void exprs_free(eddy_sql_expr_t **v, uint32_t n)
{
    for (uint32_t i = 0; v && i < n; i++)
        eddy_sql_expr_free(v[i]);
    free(v);
}

void eddy_sql_expr_free(eddy_sql_expr_t *x)
{
    if (!x)
        return;
    free(x->name);
    free(x->qual);
    free(x->text);
    exprs_free(x->args, x->n_args);
    eddy_sql_expr_free(x->operand);
    eddy_sql_select_free(x->sub);
    exprs_free(x->partition, x->n_partition);
    exprs_free(x->order, x->n_order);
    free(x->order_desc);
    free(x);
}

void eddy_sql_from_free(eddy_sql_from_t *f)
{
    if (!f)
        return;
    free(f->name);
    free(f->alias);
    eddy_sql_select_free(f->sub);
    free(f->input);
    free(f->descriptor);
    exprs_free(f->partition, f->n_partition);
    for (uint32_t i = 0; i < f->n_intervals; i++)
        eddy_sql_expr_free(f->intervals[i]);
    eddy_sql_from_free(f->left);
    eddy_sql_from_free(f->right);
    eddy_sql_expr_free(f->on);
    free(f);
}

void eddy_sql_select_free(eddy_sql_select_t *s)
{
    while (s) {
        eddy_sql_select_t *next = s->union_all;
        exprs_free(s->items, s->n_items);
        for (uint32_t i = 0; s->aliases && i < s->n_items; i++)
            free(s->aliases[i]);
        free(s->aliases);
        eddy_sql_from_free(s->from);
        eddy_sql_expr_free(s->where);
        exprs_free(s->group_by, s->n_group_by);
        eddy_sql_expr_free(s->having);
        free(s);
        s = next;
    }
}

void eddy_sql_script_destroy(eddy_sql_script_t **self_p)
{
    eddy_sql_script_t *s = self_p ? *self_p : NULL;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n; i++) {
        eddy_sql_stmt_t *st = &s->stmts[i];
        free(st->name);
        for (uint32_t c = 0; c < st->n_columns; c++)
            free(st->columns[c].name);
        free(st->columns);
        free(st->watermark);
        for (uint32_t k = 0; k < st->n_primary_key; k++)
            free(st->primary_key[k]);
        free(st->primary_key);
        for (uint32_t o = 0; o < st->n_options; o++) {
            free(st->options[o].key);
            free(st->options[o].value);
        }
        free(st->options);
        eddy_sql_select_free(st->query);
    }
    free(s->stmts);
    free(s);
    *self_p = NULL;
}

const char *eddy_sql_type_name(eddy_sql_type_t t)
{
    switch (t) {
    case EDDY_SQL_T_BOOLEAN: return "BOOLEAN";
    case EDDY_SQL_T_INT: return "INT";
    case EDDY_SQL_T_BIGINT: return "BIGINT";
    case EDDY_SQL_T_DOUBLE: return "DOUBLE";
    case EDDY_SQL_T_DECIMAL: return "DECIMAL";
    case EDDY_SQL_T_STRING: return "STRING";
    case EDDY_SQL_T_TIMESTAMP: return "TIMESTAMP(3)";
    case EDDY_SQL_T_INTERVAL: return "INTERVAL";
    case EDDY_SQL_T_ANY: break;
    }
    return "NULL";
}
