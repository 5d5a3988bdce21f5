/* sql_parse.h - a streaming SQL script (docs/sql.md) into its syntax tree
 * (plan/sql_ast.h): statements separated by `;`, CREATE [TEMPORARY]
 * TABLE / VIEW, INSERT INTO ... SELECT, and bare SELECTs.
 *
 * Errors are "FILE:LINE:COLUMN: message" with the line and a caret
 * (plan/sql_lex.h): a syntax error says what was expected, and a construct
 * that is SQL but not eddy's (ORDER BY, LIMIT, SET, a computed column ...)
 * says "... is not supported". */
#ifndef EDDY_PLAN_SQL_PARSE_H
#define EDDY_PLAN_SQL_PARSE_H

#include "common/err.h"
#include "plan/sql_ast.h"
#include "plan/sql_lex.h"

eddy_sql_script_t *eddy_sql_parse(const eddy_sql_src_t *src, eddy_err_t *err);

#endif
