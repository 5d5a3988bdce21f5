/* pipeline.c - the built-in job that runs a declarative pipeline
 * (docs/pipelines.md): `eddy local|submit --pipeline FILE` passes the
 * file's text as --spec (one argument, so the coordinator builds the same
 * graph the client checked, and workers get it in the plan). The spec is
 * parsed and checked (plan/pipeline_spec.h), its steps planned by the
 * optimizer (plan/pipeline_opt.h), and each fused group of stateless steps
 * becomes one pipeline_chain operator (operators/pipeline_chain.h).
 *
 * Output: with an output file, the rows, byte-sorted, at end of input (as
 * the Nexmark job writes them: each distinct row counted in keyed state, so
 * a restore neither loses nor repeats one); without, rows on stdout as they
 * come. */
#include "jobs/pipeline.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/flags.h"
#include "jobs/line_source.h"
#include "jobs/pipeline_window.h"
#include "operators/pipeline_agg.h"
#include "operators/pipeline_chain.h"
#include "operators/pipeline_join.h"
#include "plan/pipeline_join.h"
#include "plan/pipeline_opt.h"
#include "plan/registry.h"
#include "plan/pipeline_spec.h"
#include "plan/sql_compile.h"

typedef struct pipeline_flags {
    const char *spec, *spec_file, *sql, *sql_file, *input, *output, *rate;
    uint32_t parallelism;
    bool no_optimize;
} pipeline_flags_t;

/* The config of the chain running steps order[from..to). */
static eddy_config_t *chain_config(const eddy_pipeline_spec_t *s, const eddy_pipeline_opt_t *o,
                                   uint32_t from, uint32_t to, bool adaptive)
{
    eddy_config_t *c = eddy_config_new();
    if (!c)
        return NULL;
    uint32_t n_cols;
    char **cols = eddy_pipeline_spec_columns_at(s, o->order, from, &n_cols);
    char *list = eddy_pipeline_join_columns(cols, n_cols);
    int rc = list ? 0 : -1;
    rc |= eddy_config_set_str(c, "input", from == 0 ? s->format : "row");
    rc |= eddy_config_set_bool(c, "ragged", from == 0 && s->ragged);
    rc |= eddy_config_set_str(c, "columns", list ? list : "");
    free(list);
    rc |= eddy_config_set_int(c, "steps", (int64_t)(to - from));
    rc |= eddy_config_set_bool(c, "adaptive", adaptive);
    for (uint32_t k = from; rc == 0 && k < to; k++) {
        const eddy_pstep_t *st = &s->steps[o->order[k]];
        char key[64];
        if (st->kind == EDDY_PSTEP_FILTER) {
            snprintf(key, sizeof key, "step.%u.filter", k - from);
            rc |= eddy_config_set_str(c, key, st->filter);
            continue;
        }
        snprintf(key, sizeof key, "step.%u.map", k - from);
        char *outs = eddy_pipeline_join_columns(st->columns, st->n);
        rc |= outs ? eddy_config_set_str(c, key, outs) : -1;
        free(outs);
        for (uint32_t j = 0; rc == 0 && j < st->n; j++) {
            snprintf(key, sizeof key, "step.%u.map.%u", k - from, j);
            rc |= eddy_config_set_str(c, key, st->exprs[j]);
        }
    }
    if (rc) {
        eddy_config_destroy(&c);
        return NULL;
    }
    return c;
}

static int parse_flags(int argc, char **argv, pipeline_flags_t *f, eddy_err_t *err)
{
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("spec", &f->spec, "YAML", "the pipeline (eddy local --pipeline FILE gives it)"),
        EDDY_FLAG_STR("spec-file", &f->spec_file, "FILE", "the spec's file name, for messages"),
        EDDY_FLAG_STR("sql", &f->sql, "SQL", "SQL statements instead of a spec (eddy local --sql FILE gives them)"),
        EDDY_FLAG_STR("sql-file", &f->sql_file, "FILE", "the SQL's file name, for messages"),
        EDDY_FLAG_STR("input", &f->input, "FILE|URI", "read lines from here (overrides source.input)"),
        EDDY_FLAG_STR("output", &f->output, "FILE", "result rows, byte-sorted, at end of input"),
        EDDY_FLAG_STR("rate", &f->rate, "R|T:R,..", "cap the source at R lines/s"),
        EDDY_FLAG_U32("parallelism", &f->parallelism, 1, EDDY_MAX_KEY_GROUPS, "P",
                      "instances of every step (2)"),
        EDDY_FLAG_SWITCH("no-optimize", &f->no_optimize, "run the steps as written, one operator each"),
        EDDY_FLAG_END,
    };
    int rc = eddy_flags_parse(flags, argc, argv, NULL, NULL, err);
    if (rc == 1)
        return eddy_err_set(err, "pipeline: --help is handled by the caller");
    if (rc < 0)
        return eddy_err_wrap(err, "pipeline");
    if (!f->spec == !f->sql)
        return eddy_err_set(err, "pipeline needs --spec or --sql (eddy local --pipeline FILE or "
                            "--sql FILE), not both");
    return 0;
}

/* The spec of parsed flags f, checked and planned. */
static int load(const pipeline_flags_t *f, eddy_pipeline_spec_t **spec, eddy_pipeline_opt_t *opt,
                eddy_err_t *err)
{
    if (f->sql) {
        /* SQL compiles into the same spec (plan/sql_compile.h) */
        eddy_sql_compile_opts_t so = {.has_output = f->output != NULL};
        *spec = eddy_sql_compile(f->sql_file ? f->sql_file : "sql", f->sql, strlen(f->sql), &so, err);
    } else {
        *spec = eddy_pipeline_spec_parse(f->spec_file ? f->spec_file : "pipeline", f->spec,
                                         strlen(f->spec), err);
    }
    if (!*spec)
        return -1;
    if (eddy_pipeline_optimize(*spec, !f->no_optimize, opt, err) < 0) {
        eddy_pipeline_spec_destroy(spec);
        return -1;
    }
    return 0;
}

int eddy_pipeline_load(int argc, char **argv, eddy_pipeline_spec_t **spec, eddy_pipeline_opt_t *opt,
                       eddy_err_t *err)
{
    pipeline_flags_t f = {.parallelism = 0};
    if (parse_flags(argc, argv, &f, err) < 0)
        return -1;
    return load(&f, spec, opt, err);
}

/* The event-time expressions a join side writes after its key: none
 * (no window), one (a tumbling window's time; an interval's right time) or
 * two (an interval's left from and to). */
typedef struct join_times {
    const char *expr[2];
    uint32_t n;
} join_times_t;

static join_times_t join_times(const eddy_pipeline_join_t *j, bool left)
{
    join_times_t t = {{NULL, NULL}, 0};
    if (left && j->left_from)
        t = (join_times_t){{j->left_from, j->left_to}, 2};
    else if (left ? j->left_time != NULL : j->right_time != NULL)
        t = (join_times_t){{left ? j->left_time : j->right_time, NULL}, 1};
    return t;
}

/* Appends to a chain's config the steps that put a join's key (and
 * window times: a tumbling window's time, an interval's from and to or
 * the right's time) first in each row, as the join step reads them
 * (operators/pipeline_join.h); rows with a null key or time never join. */
static int add_key_steps(eddy_config_t *c, const char *key, const join_times_t *times,
                         char **cols, uint32_t n_cols)
{
    static const join_times_t none = {{NULL, NULL}, 0};
    if (!times)
        times = &none;
    int64_t k = eddy_config_int(c, "steps", 0);
    char name[64], test[1400], *list = eddy_pipeline_join_columns(cols, n_cols);
    int at = snprintf(test, sizeof test, "not is_null(%s)", key);
    for (uint32_t t = 0; t < times->n && at > 0 && (size_t)at < sizeof test; t++)
        at += snprintf(test + at, sizeof test - (size_t)at, " and not is_null(int(%s))",
                       times->expr[t]);
    snprintf(name, sizeof name, "step.%" PRId64 ".filter", k);
    int rc = list ? eddy_config_set_str(c, name, test) : -1;
    snprintf(name, sizeof name, "step.%" PRId64 ".map", k + 1);
    size_t len = list ? strlen(list) + 24 : 0;
    char *outs = list ? malloc(len) : NULL;
    if (outs)
        snprintf(outs, len, "_key,%s%s%s", times->n > 0 ? "_time," : "",
                 times->n > 1 ? "_time2," : "", list);
    rc |= outs ? eddy_config_set_str(c, name, outs) : -1;
    uint32_t j = 0;
    char expr[600];
    snprintf(name, sizeof name, "step.%" PRId64 ".map.%u", k + 1, j++);
    snprintf(expr, sizeof expr, "string(%s)", key);
    rc |= eddy_config_set_str(c, name, expr);
    for (uint32_t t = 0; t < times->n; t++) {
        snprintf(name, sizeof name, "step.%" PRId64 ".map.%u", k + 1, j++);
        snprintf(expr, sizeof expr, "int(%s)", times->expr[t]);
        rc |= eddy_config_set_str(c, name, expr);
    }
    for (uint32_t i = 0; i < n_cols; i++) {
        snprintf(name, sizeof name, "step.%" PRId64 ".map.%u", k + 1, j++);
        rc |= eddy_config_set_str(c, name, cols[i]);
    }
    rc |= eddy_config_set_int(c, "steps", k + 2);
    free(list);
    free(outs);
    return rc ? -1 : 0;
}

/* Where the rows of one side of a pipeline are while it is built. */
typedef struct side {
    eddy_job_builder_t *b;
    const eddy_pipeline_spec_t *spec;
    const eddy_pipeline_opt_t *opt;
    eddy_stream_t rows;
    bool raw;            /* rows are still the source's lines */
    const char *tag;     /* "" for the pipeline, "join2_" for a join's other side */
    uint32_t default_parallelism;
    bool adaptive;
    const char *spec_file;
    bool keyed;          /* rows carry a key_by's key field in front (jobs/pipeline_window.h) */
} side_t;

static uint32_t step_parallelism(const side_t *sd, const eddy_pstep_t *st)
{
    return st->parallelism ? st->parallelism : sd->default_parallelism;
}

/* The chain of steps order[from..to) (a parse alone when from == to),
 * ending with a join's key steps when key is set, or writing key_by's key
 * first in each row when key_by is set. */
static void add_chain(side_t *sd, uint32_t from, uint32_t to, const char *key,
                      const join_times_t *time, const eddy_pstep_t *key_by, uint32_t parallelism,
                      const char *uid)
{
    eddy_config_t *c = sd->raw ? chain_config(sd->spec, sd->opt, from, to, sd->adaptive) : NULL;
    if (!sd->raw) {
        /* Rows already: a chain over the columns the step at from sees. */
        uint32_t n_cols;
        char **cols = eddy_pipeline_spec_columns_at(sd->spec, sd->opt->order, from, &n_cols);
        c = chain_config(sd->spec, sd->opt, from, to, sd->adaptive);
        char *list = eddy_pipeline_join_columns(cols, n_cols);
        if (c && (!list || eddy_config_set_str(c, "input", "row") < 0 ||
                  eddy_config_set_bool(c, "ragged", false) < 0 ||
                  eddy_config_set_str(c, "columns", list) < 0))
            eddy_config_destroy(&c);
        free(list);
    }
    if (c && key) {
        uint32_t n_cols;
        char **cols = eddy_pipeline_spec_columns_at(sd->spec, sd->opt->order, to, &n_cols);
        if (add_key_steps(c, key, time, cols, n_cols) < 0)
            eddy_config_destroy(&c);
    }
    if (!c) {
        eddy_builder_fail(sd->b, "out of memory");
        return;
    }
    sd->rows = eddy_set_parallelism(eddy_pipeline_add_chain(sd->rows, uid, c, &sd->keyed,
                                                            to > from, key_by),
                                    parallelism);
    sd->raw = false;
}

/* Builds the groups of sd's steps up to (not including) a join at
 * position stop (or all: stop = n), the last chain ending with key steps
 * when key is set. */
static void add_steps(side_t *sd, uint32_t g_from, uint32_t g_to, const char *key,
                      const join_times_t *time, uint32_t join_index);

static void add_join(side_t *sd, const eddy_pstep_t *st, eddy_stream_t source, const char *input,
                     const char *rate, uint32_t source_parallelism)
{
    const eddy_pipeline_join_t *j = st->join;
    eddy_pipeline_opt_t ro;
    eddy_err_t err = {{0}};
    if (eddy_pipeline_optimize(j->right, sd->adaptive, &ro, &err) < 0) {
        eddy_builder_fail(sd->b, "%s", err.msg);
        return;
    }
    char tag[32];
    snprintf(tag, sizeof tag, "join%u_", st->index);
    side_t right = {sd->b, j->right, &ro, source, true, tag, sd->default_parallelism, sd->adaptive,
                    sd->spec_file, false};
    const char *rinput = j->right->input ? j->right->input : input;
    if (strcmp(rinput, input)) {
        char uid[64];
        snprintf(uid, sizeof uid, "%ssource", tag);
        eddy_line_source_flags_t lf = {.input = rinput, .rate = rate,
                                       .parallelism = source_parallelism, .uid = uid};
        right.rows = eddy_line_source_add(sd->b, &lf);
    }
    join_times_t rt = join_times(j, false);
    add_steps(&right, 0, ro.n_groups, j->right_key, &rt, st->index);
    eddy_pipeline_opt_clear(&ro);
    eddy_config_t *c = eddy_config_new();
    if (!c || eddy_config_set_str(c, "type", eddy_pipeline_join_type(j)) < 0 ||
        eddy_config_set_int(c, "window_ms", j->window_ms) < 0 ||
        eddy_config_set_int(c, "right_columns", j->n_right) < 0) {
        eddy_config_destroy(&c);
        eddy_builder_fail(sd->b, "out of memory");
        return;
    }
    char uid[64];
    if (st->uid)
        snprintf(uid, sizeof uid, "%s", st->uid);
    else
        snprintf(uid, sizeof uid, "step%u_join", st->index);
    sd->rows = eddy_set_parallelism(eddy_process2(eddy_key_by(sd->rows, "tab_prefix"),
                                                  eddy_key_by(right.rows, "tab_prefix"), uid,
                                                  j->left_from ? EDDY_PIPELINE_INTERVAL_JOIN_KIND
                                                               : EDDY_PIPELINE_JOIN_KIND,
                                                  c),
                                    step_parallelism(sd, st));
}

static void add_plugin(side_t *sd, const eddy_pstep_t *st)
{
    if (!eddy_registry_operator(eddy_registry_default(), st->plugin)) {
        eddy_builder_fail(sd->b, "%s:%u: steps[%u].plugin: no operator kind '%s' (is its plugin "
                          "loaded with --plugin FILE.so?)", sd->spec_file, st->line, st->index,
                          st->plugin);
        return;
    }
    eddy_config_t *c = eddy_config_new();
    int rc = c ? 0 : -1;
    for (uint32_t i = 0; rc == 0 && i < st->n_config; i++) {
        const char *k = st->config_keys[i], *v = st->config_values[i];
        char *end = NULL;
        long long n = strtoll(v, &end, 10);
        if (st->config_quoted[i] || !v[0])
            rc = eddy_config_set_str(c, k, v);
        else if (!strcmp(v, "true") || !strcmp(v, "false"))
            rc = eddy_config_set_bool(c, k, !strcmp(v, "true"));
        else if (!*end)
            rc = eddy_config_set_int(c, k, n);
        else
            rc = eddy_config_set_str(c, k, v);
    }
    if (rc < 0) {
        eddy_config_destroy(&c);
        eddy_builder_fail(sd->b, "out of memory");
        return;
    }
    char uid[64];
    if (st->uid)
        snprintf(uid, sizeof uid, "%s%s", sd->tag, st->uid);
    else
        snprintf(uid, sizeof uid, "%sstep%u_plugin", sd->tag, st->index);
    sd->rows = eddy_set_parallelism(eddy_flat_map(sd->rows, uid, st->plugin, c),
                                    step_parallelism(sd, st));
}

static void add_steps(side_t *sd, uint32_t g_from, uint32_t g_to, const char *key,
                      const join_times_t *time, uint32_t join_index)
{
    char uid[64];
    const eddy_pipeline_opt_t *o = sd->opt;
    uint32_t from = g_from ? o->group_end[g_from - 1] : 0;
    for (uint32_t g = g_from; g < g_to; g++) {
        uint32_t to = o->group_end[g];
        const eddy_pstep_t *st = &sd->spec->steps[o->order[from]];
        bool last = g + 1 == g_to;
        if (st->kind == EDDY_PSTEP_PLUGIN || (!eddy_pstep_stateless(st) &&
                                              st->kind != EDDY_PSTEP_KEY_BY)) {
            if (st->kind == EDDY_PSTEP_PLUGIN) {
                snprintf(uid, sizeof uid, "%sstep%u_parse", sd->tag, st->index);
                if (sd->raw) /* a plugin gets rows: parse first */
                    add_chain(sd, from, from, NULL, NULL, NULL, sd->default_parallelism, uid);
                add_plugin(sd, st);
            } else {
                /* A window with its aggregate or max_by, or either alone;
                 * the parallelism of the step that names the output. */
                bool w = st->kind == EDDY_PSTEP_WINDOW;
                const eddy_pstep_t *out = &sd->spec->steps[o->order[to - 1]];
                sd->rows = eddy_set_parallelism(
                    eddy_pipeline_add_window(sd->rows, sd->spec, o, w ? from + 1 : from,
                                             w ? st : NULL),
                    step_parallelism(sd, out->parallelism ? out : st));
                sd->keyed = false;
                sd->raw = false;
            }
            snprintf(uid, sizeof uid, "%sstep%u_key", sd->tag, join_index);
            if (last && key) /* the join's key after the plugin or aggregate */
                add_chain(sd, to, to, key, time, NULL, step_parallelism(sd, st), uid);
            from = to;
            continue;
        }
        /* Stateless steps, and the key_by whose key they compute. */
        const eddy_pstep_t *tail = &sd->spec->steps[o->order[to - 1]];
        const eddy_pstep_t *key_by = tail->kind == EDDY_PSTEP_KEY_BY ? tail : NULL;
        uint32_t end = key_by ? to - 1 : to;
        if (end - from == 1)
            snprintf(uid, sizeof uid, "%sstep%u_%s", sd->tag, st->index,
                     st->kind == EDDY_PSTEP_FILTER ? "filter" : "map");
        else if (end == from && key_by)
            snprintf(uid, sizeof uid, "%sstep%u_key_by", sd->tag, key_by->index);
        else
            snprintf(uid, sizeof uid, "%ssteps%u", sd->tag, g);
        add_chain(sd, from, end, last ? key : NULL, last ? time : NULL, key_by,
                  step_parallelism(sd, st), uid);
        from = to;
    }
    if (g_from == g_to && (key || sd->raw)) {
        /* No steps: the parse (and the key) still run. */
        if (key)
            snprintf(uid, sizeof uid, "%sstep%u_key", sd->tag, join_index);
        else
            snprintf(uid, sizeof uid, "%sparse", sd->tag);
        add_chain(sd, from, from, key, time, NULL, sd->default_parallelism, uid);
    }
    if (sd->keyed && !key) {
        /* A key_by no stateful step read: its rows lose the key field. */
        snprintf(uid, sizeof uid, "%sunkey", sd->tag);
        add_chain(sd, from, from, NULL, NULL, NULL, sd->default_parallelism, uid);
    }
}

static int build(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    pipeline_flags_t f = {.parallelism = 0};
    if (parse_flags(argc, argv, &f, err) < 0)
        return -1;
    eddy_pipeline_spec_t *s = NULL;
    eddy_pipeline_opt_t o;
    if (load(&f, &s, &o, err) < 0)
        return -1;
    const char *input = f.input ? f.input : s->input;
    const char *output = f.output ? f.output : s->output;
    uint32_t parallelism = f.parallelism ? f.parallelism : s->parallelism ? s->parallelism : 2;
    int rc = 0;
    if (!input)
        rc = eddy_err_set(err, "%s: no input (source.input in the spec, or --input)",
                          f.spec_file ? f.spec_file : f.sql_file ? f.sql_file : "pipeline");
    if (rc == 0)
        rc = eddy_line_source_check("pipeline", input, NULL, false, err);
    if (rc < 0) {
        eddy_pipeline_opt_clear(&o);
        eddy_pipeline_spec_destroy(&s);
        return -1;
    }
    eddy_builder_set_default_parallelism(b, parallelism);
    if (s->max_parallelism)
        eddy_builder_set_max_parallelism(b, s->max_parallelism);
    eddy_line_source_flags_t lf = {.input = input, .rate = f.rate, .parallelism = parallelism};
    eddy_stream_t source = eddy_line_source_add(b, &lf);
    if (s->time_column >= 0) {
        char ts[64];
        snprintf(ts, sizeof ts, "%s%d", EDDY_PIPELINE_CSV_TIME_PREFIX, s->time_column);
        eddy_event_time_spec_t et = {.timestamps = ts, .max_delay_ms = s->watermark_delay_ms};
        source = eddy_event_time(source, &et);
    }
    side_t sd = {b, s, &o, source, true, "", parallelism, !f.no_optimize,
                 f.spec_file ? f.spec_file : f.sql_file ? f.sql_file : "pipeline", false};
    if (!strcmp(s->format, "text") && o.n_groups == 0)
        sd.raw = false; /* a text line is its own one-column row */
    uint32_t g_from = 0;
    for (uint32_t g = 0; g < o.n_groups; g++) {
        uint32_t at = g ? o.group_end[g - 1] : 0;
        const eddy_pstep_t *st = &s->steps[o.order[at]];
        if (st->kind != EDDY_PSTEP_JOIN)
            continue;
        join_times_t lt = join_times(st->join, true);
        add_steps(&sd, g_from, g, st->join->left_key, &lt, st->index);
        add_join(&sd, st, source, input, f.rate, parallelism);
        g_from = g + 1;
    }
    add_steps(&sd, g_from, o.n_groups, NULL, NULL, 0);
    eddy_stream_t rows = sd.rows;
    if (output) {
        /* A spec's rows are appended, never retracted (an aggregate without
         * a window emits once, at end of input), so they go to part files
         * merged at the end, chained with the source when every step is
         * stateless. A plugin step's rows may mean anything: the table. */
        bool plugin = false, stateless = true;
        for (uint32_t i = 0; i < s->n_steps; i++) {
            plugin |= s->steps[i].kind == EDDY_PSTEP_PLUGIN;
            stateless &= eddy_pstep_stateless(&s->steps[i]);
        }
        if (plugin)
            eddy_job_rows_table_add(rows, output, true, "collect", "sink");
        else
            eddy_job_rows_merged_add(rows, output, stateless, "sink");
    } else {
        eddy_sink(eddy_global(rows), "sink", "print", NULL);
    }
    eddy_pipeline_opt_clear(&o);
    eddy_pipeline_spec_destroy(&s);
    return eddy_builder_error(b) ? -1 : 0;
}

static const eddy_job_kind_t pipeline_job = {
    .name = "pipeline",
    .summary = "a declarative pipeline from a YAML spec (eddy local --pipeline FILE; docs/pipelines.md)",
    .usage = "  --spec YAML                    the spec's text (--pipeline FILE reads it for you)\n"
             "  --sql SQL                      SQL statements instead (--sql FILE reads them; docs/sql.md)\n"
             "  --input FILE|URI               read lines from here instead of source.input\n"
             "  --output FILE                  rows, byte-sorted, at end of input, instead of\n"
             "                                 sink.output (neither: rows on stdout as they come)\n"
             "  --rate R                       cap the source at R lines/s\n"
             "  --parallelism P                instances of every step (default 2)\n"
             "  --no-optimize                  run the steps as written, one operator each\n",
    .build = build,
};

int eddy_pipeline_register(eddy_registry_t *r, eddy_err_t *err)
{
    if (eddy_pipeline_chain_register(r, err) < 0 || eddy_pipeline_agg_register(r, err) < 0 ||
        eddy_pipeline_join_register(r, err) < 0)
        return -1;
    return eddy_register_job(r, &pipeline_job, err);
}
