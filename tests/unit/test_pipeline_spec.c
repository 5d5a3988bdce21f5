/* test_pipeline_spec.c - pipeline specs (plan/pipeline_spec.h): a Nexmark
 * spec loads with its steps, lines and columns; each kind of mistake is an
 * error naming file, line and field. */
#include <criterion/criterion.h>
#include <string.h>
#include "plan/pipeline_spec.h"
static const char *q2 =
"name: q2\n"
"source:\n"
"  format: csv\n"
"  ragged: true\n"
"  columns: [event, date_time, auction, bidder, price, channel, c6, c7, c8]\n"
"steps:\n"
"  - filter: event == 'B'\n"
"  - map:\n"
"      auction: int(auction)\n"
"      price: price\n"
"  - filter: auction % 123 == 0\n"
"sink:\n"
"  output: /tmp/out.tsv\n";
Test(pipeline_spec, q2) {
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = eddy_pipeline_spec_parse("q2.yaml", q2, strlen(q2), &err);
    cr_assert(s, "%s", err.msg);
    cr_assert_eq(s->n_steps, 3);
    cr_assert_eq(s->steps[1].line, 8);
    cr_assert_str_eq(s->steps[1].columns[1], "price");
    cr_assert(s->ragged);
    uint32_t n; char **c = eddy_pipeline_spec_columns_at(s, NULL, 3, &n);
    cr_assert_eq(n, 2); cr_assert_str_eq(c[0], "auction");
    eddy_pipeline_spec_destroy(&s);
}
static void bad(const char *t, const char *want) {
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = eddy_pipeline_spec_parse("p.yaml", t, strlen(t), &err);
    cr_expect_null(s); eddy_pipeline_spec_destroy(&s);
    cr_expect(strstr(err.msg, want), "got '%s' want '%s'", err.msg, want);
}
Test(pipeline_spec, errors) {
    bad("source: {format: csv, columns: [a, b]}\nsteps:\n  - filter: c > 1\n", "p.yaml:3: steps[0].filter: column 1: unknown field 'c'");
    bad("source: {format: csv, columns: [a, b]}\nsteps:\n  - map: {x: a}\n  - filter: b > 1\n", "p.yaml:4: steps[1].filter: column 1: unknown field 'b'");
    bad("source: {format: csv, columns: [a, b]}\nsteps:\n  - fliter: a\n", "p.yaml:3: steps[0]: unknown key 'fliter' (expected filter, map, key_by, window, aggregate, max_by, join, union, plugin)");
    bad("source: {format: xml}\n", "p.yaml:1: source.format: 'xml' is not csv, json or text");
    bad("source: {format: csv}\n", "csv input needs columns");
    bad("source: {format: csv, columns: [a, a]}\n", "column 'a' named twice");
    bad("source: {format: csv, columns: [a]}\nparallelism: 0\n", "p.yaml:2: parallelism: '0' is not a number in 1..32768");
    bad("sorce: {}\n", "unknown key 'sorce'");
    bad("a: [\n", "p.yaml:");
    bad("source: {format: csv, columns: [a]}\nsteps:\n  - map: {x: a +}\n", "p.yaml:3: steps[0].map.x: column 4: unexpected end");
}
