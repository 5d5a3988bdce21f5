/* test_pipeline_join.c - a pipeline join's interval window
 * (docs/pipelines.md, Joins): the spec's `window: {from, to, time}` is
 * checked with errors naming file, line and field; the operator
 * (operators/pipeline_join.h, "pipeline_interval_join"), made as a worker
 * makes it, joins a right row to the left rows whose [from, to] holds its
 * time in either arrival order, drops each row when the watermark passes
 * its end, counts late rows, and keeps its rows and timer in key groups
 * that move on a rescale. A `union` step is the join without keys or
 * state: its other side's columns by position, every row of both sides
 * passed on as it came. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "operators/pipeline_join.h"
#include "plan/pipeline_join.h"
#include "plan/pipeline_spec.h"
#include "plan/registry.h"
#include "state/keygroup.h"
#include "tests/unit/leak_check.h"

TestSuite(pipeline_join, .fini = eddy_test_leak_check);

/* ---- the spec ----------------------------------------------------------- */

static const char *q4_like =
    "source: {format: csv, columns: [event, t, id, until, price]}\n"
    "steps:\n"
    "  - filter: event == 'A'\n"
    "  - map: {id: id, start: t, until: until}\n"
    "  - join:\n"
    "      with:\n"
    "        steps:\n"
    "          - filter: event == 'B'\n"
    "          - map: {auction: id, price: price, t: t}\n"
    "      left_key: id\n"
    "      right_key: auction\n"
    "      window: {from: start, to: until + 1, time: t}\n";

Test(pipeline_join, an_interval_window_parses_into_left_bounds_and_a_right_time)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = eddy_pipeline_spec_parse("p.yaml", q4_like, strlen(q4_like), &err);
    cr_assert(s, "%s", err.msg);
    const eddy_pipeline_join_t *j = s->steps[2].join;
    cr_assert_str_eq(j->left_from, "start");
    cr_assert_str_eq(j->left_to, "until + 1");
    cr_assert_str_eq(j->right_time, "t");
    cr_assert_null(j->left_time);
    cr_assert_eq(j->window_ms, 0);
    cr_assert_eq(s->steps[2].n, 6, "id, start, until, auction, price, t");
    eddy_pipeline_spec_destroy(&s);
}

/* q4_like with its window line replaced by window (and type by type). */
static void bad_window(const char *window, const char *type, const char *want)
{
    char text[1200];
    const char *w = strstr(q4_like, "      window:");
    snprintf(text, sizeof text, "%.*s%s%s\n", (int)(w - q4_like), q4_like, type ? type : "",
             window);
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = eddy_pipeline_spec_parse("p.yaml", text, strlen(text), &err);
    cr_expect_null(s, "accepted: %s", window);
    eddy_pipeline_spec_destroy(&s);
    cr_expect(strstr(err.msg, want), "%s: got '%s' want '%s'", window, err.msg, want);
}

Test(pipeline_join, interval_window_mistakes_name_file_line_and_field)
{
    bad_window("      window: {from: start, time: t}", NULL,
               "p.yaml:12: steps[2].join.window: an interval window needs both from and to");
    bad_window("      window: {to: until, time: t}", NULL,
               "p.yaml:12: steps[2].join.window: an interval window needs both from and to");
    bad_window("      window: {from: begin, to: until, time: t}", NULL,
               "p.yaml:12: steps[2].join.window.from: column 1: unknown field 'begin'");
    bad_window("      window: {from: start, to: price, time: t}", NULL,
               "steps[2].join.window.to: column 1: unknown field 'price'"); /* the right's */
    bad_window("      window: {from: start, to: until, time: until}", NULL,
               "steps[2].join.window.time: column 1: unknown field 'until'"); /* the left's */
    bad_window("      window: {from: start, to: until}", NULL,
               "p.yaml:12: steps[2].join.window: an interval window needs time: EXPR");
    bad_window("      window: {from: start, to: until, time: t, size: 10s}", NULL,
               "steps[2].join.window: size is a tumbling window's");
    bad_window("      window: {from: start, to: until, left_time: start, right_time: t}", NULL,
               "steps[2].join.window: an interval window bounds the left row by from and to");
    bad_window("      window: {from: start, to: until, time: t, right_time: t}", NULL,
               "steps[2].join.window: give time or right_time, not both");
    bad_window("      window: {from: lower(start), to: until, time: t}", NULL,
               "steps[2].join.window.from: type mismatch");
    bad_window("      window: {from: start, to: until, time: t}", "      type: semi\n",
               "p.yaml:13: steps[2].join.window: an interval window joins inner only");
    bad_window("      window: {from: start, to: until, time: t, upto: 3}", NULL,
               "steps[2].join.window: unknown key 'upto'");
    bad_window("      window: {from: start, to: until, time: t}", "      type: left\n",
               "steps[2].join: type: left needs a tumbling window");
    bad_window("      window: {from: start, to: until, time: t}", "      type: outer\n",
               "steps[2].join.type: expected inner, semi or left");
}

/* ---- the operator ------------------------------------------------------- */

#define K 8u
#define MAX_ROWS 64

typedef struct rows {
    eddy_collector_t base;
    char row[MAX_ROWS][48];
    int64_t ts[MAX_ROWS];
    int n;
} rows_t;

static void collect(eddy_collector_t *c, const eddy_record_t *rec)
{
    rows_t *self = (rows_t *)c;
    cr_assert_lt(self->n, MAX_ROWS);
    snprintf(self->row[self->n], sizeof self->row[0], "%.*s", (int)rec->len, rec->data);
    self->ts[self->n++] = rec->timestamp;
}

static uint32_t tab_key(const eddy_record_t *rec, const char **key)
{
    const char *tab = memchr(rec->data, '\t', rec->len);
    *key = rec->data;
    return tab ? (uint32_t)(tab - rec->data) : rec->len;
}

typedef struct fixture {
    eddy_registry_t *registry;
    const eddy_operator_kind_t *kind;
    eddy_config_t *config;
    void *configured;
    uint32_t input; /* the task's current input, as a two-input task keeps it */
    uint64_t late;
    rows_t out;
} fixture_t;

/* The operator of kind with config type (NULL: none). */
static void fixture_init_kind(fixture_t *f, const char *kind, const char *type)
{
    memset(f, 0, sizeof *f);
    f->out.base.emit = collect;
    eddy_err_t err = {{0}};
    f->registry = eddy_registry_new();
    cr_assert_eq(eddy_pipeline_join_register(f->registry, &err), 0, "%s", err.msg);
    f->kind = eddy_registry_operator(f->registry, kind);
    cr_assert_not_null(f->kind);
    f->config = eddy_config_new();
    if (type)
        cr_assert_eq(eddy_config_set_str(f->config, "type", type), 0);
    f->configured = f->kind->configure(f->config, f->kind->arg, &err);
    cr_assert_not_null(f->configured, "%s", err.msg);
}

static void fixture_init(fixture_t *f)
{
    fixture_init_kind(f, EDDY_PIPELINE_INTERVAL_JOIN_KIND, NULL);
}

static void fixture_fini(fixture_t *f)
{
    f->kind->release(f->configured);
    eddy_config_destroy(&f->config);
    eddy_registry_destroy(&f->registry);
}

static void *open_instance(fixture_t *f, uint32_t instance, uint32_t parallelism)
{
    eddy_op_context_t ctx = {.job_id = "t", .stage_name = "join", .instance = instance,
                             .parallelism = parallelism, .max_parallelism = K,
                             .key_groups = eddy_kg_range_for(instance, parallelism, K),
                             .key_fn = tab_key, .second_key_fn = tab_key, .input = &f->input,
                             .late_records = &f->late, .config = f->configured};
    eddy_err_t err = {{0}};
    void *op = f->kind->ops->open(&ctx, &err);
    cr_assert_not_null(op, "%s", err.msg);
    return op;
}

/* A left row "KEY<TAB>FROM<TAB>TO<TAB>COLS" or a right row "KEY<TAB>TIME<TAB>COLS". */
static void feed(fixture_t *f, void *op, uint32_t input, const char *line)
{
    eddy_record_t rec = {line, (uint32_t)strlen(line), EDDY_INSERT, 1, 0};
    f->input = input;
    eddy_err_t err = {{0}};
    cr_assert_eq(f->kind->ops->process(op, &rec, &f->out.base, &err), 0, "%s", err.msg);
}

static void left(fixture_t *f, void *op, const char *line)
{
    feed(f, op, 0, line);
}

static void right(fixture_t *f, void *op, const char *line)
{
    feed(f, op, 1, line);
}

static void watermark(fixture_t *f, void *op, int64_t wm)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(f->kind->ops->watermark(op, wm, &f->out.base, &err), 0, "%s", err.msg);
}

static size_t group_bytes(fixture_t *f, void *op, uint32_t kg)
{
    char *buf = NULL;
    size_t len = 0;
    eddy_err_t err = {{0}};
    cr_assert_eq(f->kind->ops->write_group(op, kg, &buf, &len, &err), 0, "%s", err.msg);
    free(buf);
    return len;
}

/* Every key group holds nothing: no rows, no value, no timer. */
static void expect_no_state(fixture_t *f, void *op)
{
    void *fresh = open_instance(f, 0, 1);
    for (uint32_t kg = 0; kg < K; kg++)
        cr_expect_eq(group_bytes(f, op, kg), group_bytes(f, fresh, kg), "key group %u kept state",
                     kg);
    f->kind->ops->close(fresh);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void run_pairs(bool rights_first, rows_t *got)
{
    fixture_t f;
    fixture_init(&f);
    void *op = open_instance(&f, 0, 1);
    const char *rights[] = {"k\t99\tr99", "k\t100\tr100", "k\t150\tr150", "k\t200\tr200",
                            "k\t201\tr201", "j\t150\tj150"};
    if (!rights_first)
        left(&f, op, "k\t100\t200\tL");
    for (size_t i = 0; i < sizeof rights / sizeof rights[0]; i++)
        right(&f, op, rights[i]);
    left(&f, op, rights_first ? "k\t100\t200\tL" : "k\t150\t160\tM");
    if (rights_first)
        left(&f, op, "k\t150\t160\tM");
    left(&f, op, "k\t300\t200\tempty"); /* from > to: joins nothing */
    watermark(&f, op, EDDY_WATERMARK_MAX);
    expect_no_state(&f, op);
    cr_assert_eq(f.late, 0);
    *got = f.out;
    qsort(got->row, (size_t)got->n, sizeof got->row[0], str_cmp);
    f.kind->ops->close(op);
    fixture_fini(&f);
}

Test(pipeline_join, a_right_row_joins_the_left_rows_whose_interval_holds_its_time)
{
    for (int order = 0; order < 2; order++) {
        rows_t got;
        run_pairs(order == 1, &got);
        const char *want[] = {"L\tr100", "L\tr150", "L\tr200", "M\tr150"};
        cr_assert_eq(got.n, 4, "order %d: %d rows", order, got.n);
        for (int i = 0; i < 4; i++)
            cr_assert_str_eq(got.row[i], want[i], "order %d", order);
    }
}

Test(pipeline_join, rows_leave_state_when_the_watermark_passes_their_end)
{
    fixture_t f;
    fixture_init(&f);
    void *op = open_instance(&f, 0, 1);
    left(&f, op, "k\t100\t200\tL");
    right(&f, op, "k\t150\tr150");
    cr_assert_eq(f.out.n, 1);
    cr_assert_str_eq(f.out.row[0], "L\tr150");
    cr_assert_eq(f.out.ts[0], 150, "a pair carries the right row's time");

    watermark(&f, op, 150); /* r150 ended; L lives until 200 */
    left(&f, op, "k\t120\t180\tM");
    cr_assert_eq(f.out.n, 1, "r150 was dropped when the watermark reached it");
    right(&f, op, "k\t140\tr140"); /* behind the watermark: joins the kept L and M */
    cr_assert_eq(f.out.n, 3);
    cr_assert_eq(f.late, 0, "a row that joined is not late");
    right(&f, op, "j\t140\tj140"); /* behind the watermark, nothing to join */
    cr_assert_eq(f.late, 1);

    watermark(&f, op, 200); /* L (to 200) and M (to 180) end */
    expect_no_state(&f, op);
    left(&f, op, "k\t150\t200\tlate"); /* its interval has ended */
    cr_assert_eq(f.late, 2);
    right(&f, op, "k\t250\tr250"); /* waits for a left row */
    left(&f, op, "k\t240\t260\tN");
    cr_assert_eq(f.out.n, 4);
    cr_assert_str_eq(f.out.row[3], "N\tr250");
    watermark(&f, op, 259); /* r250 ended, N has not */
    right(&f, op, "k\t255\tr255");
    cr_assert_eq(f.out.n, 5);
    cr_assert_str_eq(f.out.row[4], "N\tr255");
    watermark(&f, op, 260);
    expect_no_state(&f, op);
    f.kind->ops->close(op);
    fixture_fini(&f);
}

Test(pipeline_join, rows_and_timers_move_with_their_key_groups)
{
    fixture_t f;
    fixture_init(&f);
    void *old = open_instance(&f, 0, 1);
    const char *keys[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    size_t n = sizeof keys / sizeof keys[0];
    for (size_t i = 0; i < n; i++) {
        char line[48];
        snprintf(line, sizeof line, "%s\t100\t%d\tL%s", keys[i], 200 + (int)i, keys[i]);
        left(&f, old, line);
    }
    void *to[2] = {open_instance(&f, 0, 2), open_instance(&f, 1, 2)};
    for (uint32_t kg = 0; kg < K; kg++) {
        char *buf = NULL;
        size_t len = 0;
        eddy_err_t err = {{0}};
        cr_assert_eq(f.kind->ops->write_group(old, kg, &buf, &len, &err), 0, "%s", err.msg);
        void *dst = to[eddy_kg_owner(kg, 2, K)];
        cr_assert_eq(f.kind->ops->read_group(dst, kg, buf, len, &err), 0, "%s", err.msg);
        free(buf);
        f.kind->ops->drop_group(old, kg);
    }
    expect_no_state(&f, old);
    f.kind->ops->close(old);
    for (size_t i = 0; i < n; i++) {
        char line[48];
        snprintf(line, sizeof line, "%s\t%d\tr%s", keys[i], 150 + (int)i, keys[i]);
        uint32_t kg = eddy_key_group_of(keys[i], 1, K);
        right(&f, to[eddy_kg_owner(kg, 2, K)], line);
    }
    cr_assert_eq(f.out.n, (int)n, "each moved left row joined its right row");
    for (int i = 0; i < 2; i++)
        watermark(&f, to[i], 204); /* the timers moved: left rows of a..e end */
    right(&f, to[eddy_kg_owner(eddy_key_group_of("a", 1, K), 2, K)], "a\t180\tlate_a");
    right(&f, to[eddy_kg_owner(eddy_key_group_of("j", 1, K), 2, K)], "j\t180\tra2");
    cr_assert_eq(f.late, 1, "a's row ended on its new instance");
    cr_assert_eq(f.out.n, (int)n + 1);
    cr_assert_str_eq(f.out.row[n], "Lj\tra2");
    for (int i = 0; i < 2; i++) {
        watermark(&f, to[i], 209);
        expect_no_state(&f, to[i]);
        f.kind->ops->close(to[i]);
    }
    fixture_fini(&f);
}

/* ---- union -------------------------------------------------------------- */

static const char *unioned =
    "source: {format: csv, columns: [event, t, id, price]}\n"
    "steps:\n"
    "  - filter: event == 'A'\n"
    "  - map: {id: id, t: t}\n"
    "  - union:\n"
    "      with:\n"
    "        steps:\n"
    "          - filter: event == 'B'\n"
    "          - map: {auction: id, at: t}\n"
    "  - filter: id > 3\n";

Test(pipeline_join, a_union_takes_the_other_sides_columns_by_position)
{
    eddy_err_t err = {{0}};
    eddy_pipeline_spec_t *s = eddy_pipeline_spec_parse("p.yaml", unioned, strlen(unioned), &err);
    cr_assert(s, "%s", err.msg);
    const eddy_pstep_t *st = &s->steps[2];
    cr_assert_eq(st->kind, EDDY_PSTEP_JOIN);
    cr_assert(st->join->union_all);
    cr_assert_eq(st->n, 2);
    cr_expect_str_eq(st->columns[0], "id");
    cr_expect_str_eq(st->columns[1], "t");
    cr_expect_str_eq(st->join->left_key, "coalesce(string(id), '')");
    cr_expect_str_eq(st->join->right_key, "coalesce(string(auction), '')");
    eddy_pipeline_spec_destroy(&s);
    static const struct {
        const char *from, *to, *want;
    } bad[] = {
        {"{auction: id, at: t}", "{auction: id}",
         "p.yaml:6: steps[2].union: the other side has 1 columns, the rows so far 2"},
        {"      with:\n", "      on: id\n      with:\n", "steps[2].union: unknown key 'on'"},
        {"          - map: {auction: id, at: t}\n",
         "          - map: {auction: id, at: t}\n          - key_by: at\n",
         "steps[2].union.with.steps[2].key_by: a join's other side has no keyed steps"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[1200];
        const char *at = strstr(unioned, bad[i].from);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - unioned), unioned, bad[i].to,
                 at + strlen(bad[i].from));
        s = eddy_pipeline_spec_parse("p.yaml", text, strlen(text), &err);
        cr_expect_null(s, "accepted: %s", text);
        eddy_pipeline_spec_destroy(&s);
        cr_expect(strstr(err.msg, bad[i].want), "got '%s' want '%s'", err.msg, bad[i].want);
    }
}

Test(pipeline_join, a_union_passes_every_row_of_both_sides_on_and_keeps_no_state)
{
    fixture_t f;
    fixture_init_kind(&f, EDDY_PIPELINE_JOIN_KIND, "union");
    void *op = open_instance(&f, 0, 1);
    left(&f, op, "k\tL1\t1");
    right(&f, op, "k\tR1\t1"); /* the same row on both sides: twice */
    left(&f, op, "k\tR1\t1");
    right(&f, op, "j\tR2\t2");
    watermark(&f, op, EDDY_WATERMARK_MAX);
    cr_assert_eq(f.out.n, 4);
    const char *want[] = {"L1\t1", "R1\t1", "R1\t1", "R2\t2"};
    for (int i = 0; i < 4; i++)
        cr_expect_str_eq(f.out.row[i], want[i]);
    expect_no_state(&f, op);
    f.kind->ops->close(op);
    fixture_fini(&f);
}
