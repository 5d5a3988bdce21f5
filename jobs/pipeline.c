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
#include "plan/pipeline_opt.h"
#include "plan/pipeline_spec.h"

typedef struct pipeline_flags {
    const char *spec, *spec_file, *input, *output, *rate;
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
    if (!f->spec)
        return eddy_err_set(err, "pipeline needs --spec (eddy local --pipeline FILE)");
    return 0;
}

/* The spec of parsed flags f, checked and planned. */
static int load(const pipeline_flags_t *f, eddy_pipeline_spec_t **spec, eddy_pipeline_opt_t *opt,
                eddy_err_t *err)
{
    *spec = eddy_pipeline_spec_parse(f->spec_file ? f->spec_file : "pipeline", f->spec,
                                     strlen(f->spec), err);
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
                          f.spec_file ? f.spec_file : "pipeline");
    if (rc == 0)
        rc = eddy_line_source_check("pipeline", input, NULL, false, err);
    if (rc < 0) {
        eddy_pipeline_opt_clear(&o);
        eddy_pipeline_spec_destroy(&s);
        return -1;
    }
    eddy_builder_set_default_parallelism(b, parallelism);
    eddy_line_source_flags_t lf = {.input = input, .rate = f.rate, .parallelism = parallelism};
    eddy_stream_t rows = eddy_line_source_add(b, &lf);
    if (s->time_column >= 0) {
        char ts[64];
        snprintf(ts, sizeof ts, "%s%d", EDDY_PIPELINE_CSV_TIME_PREFIX, s->time_column);
        eddy_event_time_spec_t et = {.timestamps = ts, .max_delay_ms = s->watermark_delay_ms};
        rows = eddy_event_time(rows, &et);
    }
    if (s->format && strcmp(s->format, "text") && o.n_groups == 0) {
        /* No steps: the parse still runs, to write rows. */
        o.group_end[o.n_groups++] = 0;
    }
    /* keyed: the rows carry a key_by's key field in front, which the next
     * stateful step reads (jobs/pipeline_window.h). */
    bool keyed = false;
    uint32_t from = 0;
    for (uint32_t g = 0; g < o.n_groups; g++) {
        uint32_t to = o.group_end[g];
        const eddy_pstep_t *st = from < o.n ? &s->steps[o.order[from]] : NULL;
        const eddy_pstep_t *last = to > 0 && to <= o.n ? &s->steps[o.order[to - 1]] : NULL;
        if (st && !eddy_pstep_stateless(st) && st->kind != EDDY_PSTEP_KEY_BY) {
            bool w = st->kind == EDDY_PSTEP_WINDOW;
            rows = eddy_pipeline_add_window(rows, s, &o, w ? from + 1 : from, w ? st : NULL);
            keyed = false;
            from = to;
            continue;
        }
        /* Stateless steps, and the key_by whose key they compute. */
        const eddy_pstep_t *key_by = last && last->kind == EDDY_PSTEP_KEY_BY ? last : NULL;
        uint32_t end = key_by ? to - 1 : to;
        eddy_config_t *c = chain_config(s, &o, from, end, !f.no_optimize);
        if (!c) {
            eddy_builder_fail(b, "out of memory");
            break;
        }
        char uid[64];
        if (end - from == 1)
            snprintf(uid, sizeof uid, "step%u_%s", s->steps[o.order[from]].index,
                     s->steps[o.order[from]].kind == EDDY_PSTEP_FILTER ? "filter" : "map");
        else if (end == from && key_by)
            snprintf(uid, sizeof uid, "step%u_key_by", key_by->index);
        else
            snprintf(uid, sizeof uid, "steps%u", g);
        rows = eddy_pipeline_add_chain(rows, uid, c, &keyed, end > from, key_by);
        from = to;
    }
    if (keyed) {
        /* A key_by no stateful step read: its rows lose the key field. */
        eddy_config_t *c = chain_config(s, &o, o.n, o.n, false);
        rows = c ? eddy_pipeline_add_chain(rows, "unkey", c, &keyed, false, NULL) : rows;
    }
    if (output) {
        eddy_job_rows_table_add(rows, output, true, "collect", "sink");
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
    if (eddy_pipeline_chain_register(r, err) < 0 || eddy_pipeline_agg_register(r, err) < 0)
        return -1;
    return eddy_register_job(r, &pipeline_job, err);
}
