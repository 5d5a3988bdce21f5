/* test_yaml_doc.c - YAML into a node tree with lines (plan/yaml_doc.h):
 * values and lines as written, and what a spec must not contain
 * (duplicate keys, anchors/aliases, several documents, deep nesting) is
 * an error naming line and column. */
#include <criterion/criterion.h>
#include <string.h>
#include "plan/yaml_doc.h"
Test(yaml_doc, basic) {
    const char *t = "name: q1\nsteps:\n  - filter: \"kind == 'B'\"\n  - map:\n      price: price * 2\n      n: '5'\n";
    eddy_err_t err = {{0}};
    eddy_ydoc_t *d = eddy_ydoc_parse(t, strlen(t), &err);
    cr_assert(d, "%s", err.msg);
    const eddy_ynode_t *r = eddy_ydoc_root(d);
    cr_assert_str_eq(eddy_ynode_get(r, "name")->scalar, "q1");
    const eddy_ynode_t *steps = eddy_ynode_get(r, "steps");
    cr_assert_eq(steps->kind, EDDY_YNODE_SEQ); cr_assert_eq(steps->n, 2); cr_assert_eq(steps->line, 3);
    const eddy_ynode_t *m = eddy_ynode_get(steps->items[1], "map");
    cr_assert_eq(m->line, 5);
    cr_assert_str_eq(eddy_ynode_get(m, "price")->scalar, "price * 2");
    cr_assert(eddy_ynode_get(m, "n")->quoted);
    eddy_ydoc_destroy(&d);
}
static void bad(const char *t, const char *want) {
    eddy_err_t err = {{0}};
    eddy_ydoc_t *d = eddy_ydoc_parse(t, strlen(t), &err);
    cr_expect_null(d, "%s parsed", t); eddy_ydoc_destroy(&d);
    cr_expect(strstr(err.msg, want), "'%s' -> '%s' want '%s'", t, err.msg, want);
}
Test(yaml_doc, bad) {
    bad("a: 1\na: 2\n", "2:1: duplicate key 'a'");
    bad("a: &x 1\nb: *x\n", "anchors");
    bad("a: [1, 2\n", "2:1:");
    bad("a: 1\n---\nb: 2\n", "more than one document");
    bad("? [1]\n: 2\n", "plain scalar");
}
Test(yaml_doc, deep_nesting_refused)
{
    char t[400];
    memset(t, '[', 200);
    t[200] = '\0';
    bad(t, "nested too deeply");
}
