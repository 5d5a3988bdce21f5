/* expr.h - field expressions of declarative pipelines (docs/pipelines.md):
 * `price * 908 / 1000`, `auction % 123 == 0 and not is_null(bidder)`,
 * `lower(trim(city))`, `matches(email, '@example\.(com|org)$')`.
 *
 * An expression is parsed once against the names of the row's fields (the
 * plan checks it; a bad one is an error naming the column) and evaluated
 * per row by the pipeline's operators. Values are dynamically typed:
 * null, bool, int (int64), float (double), string. Evaluation never fails
 * on data: a type that does not fit (a string that is not a number in
 * arithmetic, division by zero, an int overflow) yields null, so a hostile
 * record cannot fail a job — a filter passes a row only when its predicate
 * is true (null is not). Strings that are numbers compare and compute as
 * numbers when the other side is a number (CSV fields arrive as strings).
 *
 * What an expression reads (eddy_expr_reads) is what the optimizer needs
 * to decide whether two steps commute. */
#ifndef EDDY_PLAN_EXPR_H
#define EDDY_PLAN_EXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum eddy_val_type {
    EDDY_VAL_NULL = 0,
    EDDY_VAL_BOOL,
    EDDY_VAL_INT,
    EDDY_VAL_FLOAT,
    EDDY_VAL_STR,
} eddy_val_type_t;

typedef struct eddy_val {
    eddy_val_type_t type;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *ptr; /* not NUL-terminated */
            size_t len;
        } s;
    } u;
} eddy_val_t;

typedef struct eddy_expr eddy_expr_t;

/* Parses text; identifiers name fields[0..n_fields). NULL with err ("column
 * 7: unknown field 'prise'") on a syntax error, an unknown field or
 * function, a wrong argument count, a regex that does not compile. */
eddy_expr_t *eddy_expr_new(const char *text, const char *const *fields, uint32_t n_fields,
                           eddy_err_t *err);
void eddy_expr_destroy(eddy_expr_t **self_p);

/* The value of the expression for row[0..n_fields). Strings it makes live
 * in self until the next eval on self (copy what must outlive it); strings
 * it passes through point into row. */
eddy_val_t eddy_expr_eval(eddy_expr_t *self, const eddy_val_t *row);

/* Fields the expression reads: bit i for field i (i < 64); bit 63 also
 * stands for every field from 63 on. */
uint64_t eddy_expr_reads(const eddy_expr_t *self);

/* The type of the expression's value whatever the row (or null), where its
 * form says: a comparison, and/or/not or a test is EDDY_VAL_BOOL,
 * arithmetic and numeric functions EDDY_VAL_FLOAT (a number, int or
 * float), string functions EDDY_VAL_STR, a literal its own type;
 * EDDY_VAL_NULL when it depends on the data (a field, if, coalesce). For
 * spec checks such as "a filter needs a boolean". */
eddy_val_type_t eddy_expr_static_type(const eddy_expr_t *self);

/* The text it was parsed from. */
const char *eddy_expr_text(const eddy_expr_t *self);

/* True only for a bool true (a filter's test). */
bool eddy_val_is_true(const eddy_val_t *v);

/* A string field's value as a typed value: "" and NULL stay strings (and
 * null when null_if_empty), numbers stay strings (eval coerces them).
 * Inline, as every field of every row is made by one of these. */
static inline eddy_val_t eddy_val_str(const char *ptr, size_t len)
{
    return (eddy_val_t){.type = EDDY_VAL_STR, .u.s = {ptr ? ptr : "", ptr ? len : 0}};
}
static inline eddy_val_t eddy_val_int(int64_t i)
{
    return (eddy_val_t){.type = EDDY_VAL_INT, .u.i = i};
}
static inline eddy_val_t eddy_val_float(double f)
{
    return (eddy_val_t){.type = EDDY_VAL_FLOAT, .u.f = f};
}
static inline eddy_val_t eddy_val_bool(bool b)
{
    return (eddy_val_t){.type = EDDY_VAL_BOOL, .u.b = b};
}
static inline eddy_val_t eddy_val_null(void)
{
    return (eddy_val_t){.type = EDDY_VAL_NULL};
}

/* Writes v as text (null as "", floats in the shortest form that reads
 * back the same, bools as true/false) into out[size]; returns the length it
 * needs (like snprintf). */
size_t eddy_val_format(const eddy_val_t *v, char *out, size_t size);

/* Three-way comparison for sorting and min/max: null < bool < numbers <
 * strings; numbers by value (an int and a float compare exactly enough for
 * aggregation), strings bytewise. */
int eddy_val_compare(const eddy_val_t *a, const eddy_val_t *b);

/* v as a number when it is one or a string that is one entirely; false
 * otherwise. *is_int tells which of *i / *f holds it. */
bool eddy_val_number(const eddy_val_t *v, bool *is_int, int64_t *i, double *f);

#endif
