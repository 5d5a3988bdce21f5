/* sql_lex.h - tokens of a streaming SQL script (docs/sql.md), and the
 * error form every SQL stage shares:
 *
 *   q.sql:3:12: unknown column 'prise' (did you mean 'price'?)
 *     SELECT prise FROM bid
 *            ^
 *
 * The whole script is split into tokens up front (the parser looks ahead a
 * few tokens to tell `name(` from `name`, `TABLE(` from a table). */
#ifndef EDDY_PLAN_SQL_LEX_H
#define EDDY_PLAN_SQL_LEX_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* A script being read: its file name (for messages) and text. */
typedef struct eddy_sql_src {
    const char *file;
    const char *text;
    size_t len;
} eddy_sql_src_t;

typedef enum eddy_sql_tok_kind {
    EDDY_SQL_TOK_END,
    EDDY_SQL_TOK_IDENT,   /* a name or keyword; quoted: `name` (never a keyword) */
    EDDY_SQL_TOK_STRING,  /* 'text' ('' inside is one quote), unescaped in text */
    EDDY_SQL_TOK_INT,     /* digits */
    EDDY_SQL_TOK_FLOAT,   /* digits with . or an exponent */
    EDDY_SQL_TOK_PUNCT,   /* ( ) , ; . * + - / % = <> != < <= > >= || => */
} eddy_sql_tok_kind_t;

typedef struct eddy_sql_tok {
    eddy_sql_tok_kind_t kind;
    uint32_t pos;   /* byte offset in the script */
    char *text;     /* the token's text (a STRING's without its quotes) */
    bool quoted;    /* IDENT in backquotes */
} eddy_sql_tok_t;

typedef struct eddy_sql_toks {
    eddy_sql_tok_t *v;
    uint32_t n; /* the last is EDDY_SQL_TOK_END */
} eddy_sql_toks_t;

/* Splits src into tokens; -1 with "FILE:LINE:COL: ..." on an unterminated
 * string, quoted name or comment, or a character SQL does not use. */
int eddy_sql_lex(const eddy_sql_src_t *src, eddy_sql_toks_t *out, eddy_err_t *err);
void eddy_sql_toks_clear(eddy_sql_toks_t *toks);

/* True when tok is the unquoted keyword kw (case-insensitive) or the
 * punctuation kw. */
bool eddy_sql_tok_is(const eddy_sql_tok_t *tok, const char *kw);

/* "FILE:LINE:COLUMN: message", then the line and a caret under pos; returns -1. */
int eddy_sql_fail(const eddy_sql_src_t *src, uint32_t pos, eddy_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with a va_list, for the compiler's own error wrappers. */
int eddy_sql_vfail(const eddy_sql_src_t *src, uint32_t pos, eddy_err_t *err, const char *fmt,
                   va_list ap) __attribute__((format(printf, 4, 0)));

#endif
