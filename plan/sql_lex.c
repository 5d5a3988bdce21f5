/* sql_lex.c - the SQL tokenizer and the shared error form (sql_lex.h).
 *
 * Comments (`-- to end of line`, `/ * ... * /`) and white space separate
 * tokens and are dropped. Numbers are kept as text: the parser decides
 * whether a literal fits 64 bits, so its message can point at it. */
#include "plan/sql_lex.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The source line's shown part: at most this many bytes either side of
 * the caret, so the message fits eddy_err_t. */
#define SHOW_AROUND 70

int eddy_sql_fail(const eddy_sql_src_t *src, uint32_t pos, eddy_err_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = eddy_sql_vfail(src, pos, err, fmt, ap);
    va_end(ap);
    return rc;
}

int eddy_sql_vfail(const eddy_sql_src_t *src, uint32_t pos, eddy_err_t *err, const char *fmt,
                   va_list ap)
{
    char msg[300];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (pos > src->len)
        pos = (uint32_t)src->len;
    uint32_t line = 1, start = 0;
    for (uint32_t i = 0; i < pos; i++)
        if (src->text[i] == '\n') {
            line++;
            start = i + 1;
        }
    uint32_t end = start;
    while (end < src->len && src->text[end] != '\n' && src->text[end] != '\r')
        end++;
    uint32_t from = pos - start > SHOW_AROUND ? pos - SHOW_AROUND : start;
    uint32_t to = end - pos > SHOW_AROUND ? pos + SHOW_AROUND : end;
    char shown[2 * SHOW_AROUND + 1], caret[SHOW_AROUND + 2];
    uint32_t n = 0;
    for (uint32_t i = from; i < to; i++)
        shown[n++] = src->text[i] == '\t' ? ' ' : src->text[i]; /* so the caret lines up */
    shown[n] = '\0';
    memset(caret, ' ', pos - from);
    caret[pos - from] = '^';
    caret[pos - from + 1] = '\0';
    return eddy_err_set(err, "%s:%u:%u: %s\n  %s\n  %s", src->file, line, pos - start + 1, msg,
                        shown, caret);
}

bool eddy_sql_tok_is(const eddy_sql_tok_t *tok, const char *kw)
{
    if (tok->kind == EDDY_SQL_TOK_PUNCT)
        return !strcmp(tok->text, kw);
    return tok->kind == EDDY_SQL_TOK_IDENT && !tok->quoted && !strcasecmp(tok->text, kw);
}

static int push(eddy_sql_toks_t *t, uint32_t *cap, eddy_sql_tok_kind_t kind, uint32_t pos,
                const char *text, size_t len, bool quoted, eddy_err_t *err)
{
    if (t->n == *cap) {
        uint32_t ncap = *cap ? *cap * 2 : 64;
        eddy_sql_tok_t *v = realloc(t->v, ncap * sizeof *v);
        if (!v)
            return eddy_err_set(err, "out of memory");
        t->v = v;
        *cap = ncap;
    }
    char *s = malloc(len + 1);
    if (!s)
        return eddy_err_set(err, "out of memory");
    memcpy(s, text, len);
    s[len] = '\0';
    t->v[t->n++] = (eddy_sql_tok_t){kind, pos, s, quoted};
    return 0;
}

/* A quoted string or name from p (at its quote q); doubled quotes are one.
 * Sets *end past the closing quote. */
static int quoted(const eddy_sql_src_t *src, size_t p, char q, eddy_sql_toks_t *t, uint32_t *cap,
                  size_t *end, eddy_err_t *err)
{
    char *buf = malloc(src->len - p + 1);
    if (!buf)
        return eddy_err_set(err, "out of memory");
    size_t n = 0, i = p + 1;
    for (;; i++) {
        if (i >= src->len) {
            free(buf);
            return eddy_sql_fail(src, (uint32_t)p, err, "unterminated %s",
                                 q == '\'' ? "string" : "quoted name");
        }
        if (src->text[i] == q) {
            if (i + 1 < src->len && src->text[i + 1] == q) {
                buf[n++] = q;
                i++;
                continue;
            }
            break;
        }
        buf[n++] = src->text[i];
    }
    if (q == '`' && n == 0) {
        free(buf);
        return eddy_sql_fail(src, (uint32_t)p, err, "empty quoted name");
    }
    int rc = push(t, cap, q == '\'' ? EDDY_SQL_TOK_STRING : EDDY_SQL_TOK_IDENT, (uint32_t)p, buf,
                  n, q == '`', err);
    free(buf);
    *end = i + 1;
    return rc;
}

static int lex(const eddy_sql_src_t *src, eddy_sql_toks_t *t, uint32_t *cap, eddy_err_t *err)
{
    static const char *const two[] = {"<>", "!=", "<=", ">=", "||", "=>", NULL};
    const char *s = src->text;
    size_t i = 0, len = src->len;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        if (isspace(c)) {
            i++;
        } else if (c == '-' && i + 1 < len && s[i + 1] == '-') {
            while (i < len && s[i] != '\n')
                i++;
        } else if (c == '/' && i + 1 < len && s[i + 1] == '*') {
            size_t start = i;
            for (i += 2; i + 1 < len && !(s[i] == '*' && s[i + 1] == '/'); i++)
                ;
            if (i + 1 >= len)
                return eddy_sql_fail(src, (uint32_t)start, err, "unterminated comment");
            i += 2;
        } else if (c == '\'' || c == '`') {
            if (quoted(src, i, (char)c, t, cap, &i, err) < 0)
                return -1;
        } else if (c == '"') {
            return eddy_sql_fail(src, (uint32_t)i, err, "\"...\" is not SQL: a string is "
                                 "'text', a quoted name `name`");
        } else if (isalpha(c) || c == '_') {
            size_t start = i;
            while (i < len && (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '$'))
                i++;
            if (push(t, cap, EDDY_SQL_TOK_IDENT, (uint32_t)start, s + start, i - start, false,
                     err) < 0)
                return -1;
        } else if (isdigit(c) || (c == '.' && i + 1 < len && isdigit((unsigned char)s[i + 1]))) {
            size_t start = i;
            bool is_float = false;
            while (i < len && isdigit((unsigned char)s[i]))
                i++;
            if (i < len && s[i] == '.') {
                is_float = true;
                for (i++; i < len && isdigit((unsigned char)s[i]); i++)
                    ;
            }
            if (i < len && (s[i] == 'e' || s[i] == 'E')) {
                size_t e = i + 1;
                if (e < len && (s[e] == '+' || s[e] == '-'))
                    e++;
                if (e < len && isdigit((unsigned char)s[e])) {
                    is_float = true;
                    for (i = e; i < len && isdigit((unsigned char)s[i]); i++)
                        ;
                }
            }
            if (i < len && (isalpha((unsigned char)s[i]) || s[i] == '_'))
                return eddy_sql_fail(src, (uint32_t)start, err, "malformed number");
            if (push(t, cap, is_float ? EDDY_SQL_TOK_FLOAT : EDDY_SQL_TOK_INT, (uint32_t)start,
                     s + start, i - start, false, err) < 0)
                return -1;
        } else {
            size_t n = 0;
            for (const char *const *p = two; *p && !n; p++)
                if (i + 1 < len && s[i] == (*p)[0] && s[i + 1] == (*p)[1])
                    n = 2;
            if (!n && strchr("(),;.*+-/%=<>", c) && c)
                n = 1;
            if (!n)
                return eddy_sql_fail(src, (uint32_t)i, err, "unexpected character '%c'",
                                     isprint(c) ? c : '?');
            if (push(t, cap, EDDY_SQL_TOK_PUNCT, (uint32_t)i, s + i, n, false, err) < 0)
                return -1;
            i += n;
        }
    }
    return push(t, cap, EDDY_SQL_TOK_END, (uint32_t)len, "", 0, false, err);
}

int eddy_sql_lex(const eddy_sql_src_t *src, eddy_sql_toks_t *out, eddy_err_t *err)
{
    *out = (eddy_sql_toks_t){0};
    uint32_t cap = 0;
    if (src->len >= UINT32_MAX / 2)
        return eddy_err_set(err, "%s: too large", src->file);
    if (lex(src, out, &cap, err) < 0) {
        eddy_sql_toks_clear(out);
        return -1;
    }
    return 0;
}

void eddy_sql_toks_clear(eddy_sql_toks_t *toks)
{
    for (uint32_t i = 0; i < toks->n; i++)
        free(toks->v[i].text);
    free(toks->v);
    *toks = (eddy_sql_toks_t){0};
}
