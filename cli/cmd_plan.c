/* cmd_plan.c - `eddy plan`: build a job's plan from its flags, exactly as
 * `eddy local` and `eddy submit` would, and print it without running it:
 * stages, chained steps, edges, parallelism, keys, uids, configurations,
 * and the fingerprint workers check. With --pipeline, also the pipeline's
 * steps as written and as the optimizer ordered and fused them, with each
 * rewrite's rule and why it was safe. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "jobs/pipeline.h"
#include "plan/pipeline_join.h"
#include "plan/pipeline_window.h"
#include "plan/explain.h"
#include "plan/plugin.h"
#include "plan/registry.h"

static void print_steps(const eddy_pipeline_spec_t *spec, const char *indent);

static void print_step(const eddy_pstep_t *st, const char *indent)
{
    printf("%ssteps[%u] ", indent, st->index);
    if (st->kind == EDDY_PSTEP_FILTER) {
        printf("filter %s", st->filter);
    } else if (st->kind == EDDY_PSTEP_MAP) {
        printf("map");
        for (uint32_t j = 0; j < st->n; j++)
            printf("%s %s: %s", j ? "," : "", st->columns[j], st->exprs[j]);
    } else if (st->kind == EDDY_PSTEP_PLUGIN) {
        printf("plugin %s", st->plugin);
        for (uint32_t j = 0; j < st->n_config; j++)
            printf("%s %s=%s", j ? "," : "", st->config_keys[j], st->config_values[j]);
    } else if (st->kind == EDDY_PSTEP_JOIN) {
        const eddy_pipeline_join_t *j = st->join;
        if (j->union_all)
            printf("union all (spread by %s / %s)", j->left_key, j->right_key);
        else
            printf("join (%s) on %s = %s", eddy_pipeline_join_type(j), j->left_key, j->right_key);
        if (j->window_ms)
            printf(", tumbling %lld ms windows of %s / %s", (long long)j->window_ms, j->left_time,
                   j->right_time);
        else if (j->left_from)
            printf(", interval: left %s <= right %s <= left %s", j->left_from, j->right_time,
                   j->left_to);
    } else {
        char what[600];
        eddy_pipeline_stateful_describe(st, what, sizeof what);
        printf("%s", what);
    }
    if (st->parallelism)
        printf("   [parallelism %u]", st->parallelism);
    if (st->max_parallelism)
        printf("   [max_parallelism %u]", st->max_parallelism);
    if (st->uid)
        printf("   [uid %s]", st->uid);
    printf("   (line %u)\n", st->line);
    if (st->kind == EDDY_PSTEP_JOIN) {
        char deeper[32];
        snprintf(deeper, sizeof deeper, "%s    ", indent);
        printf("%s  with%s%s:\n", indent, st->join->right->input ? " " : "",
               st->join->right->input ? st->join->right->input : "");
        print_steps(st->join->right, deeper);
    }
}

static void print_steps(const eddy_pipeline_spec_t *spec, const char *indent)
{
    for (uint32_t i = 0; i < spec->n_steps; i++)
        print_step(&spec->steps[i], indent);
}

/* A step that keeps state (an aggregate or max_by, with its window, or a
 * join) without `uid:` has its state saved under a uid derived from its
 * position: a savepoint does not survive a step added before it. Flink
 * warns the same way. */
static void warn_missing_uids(const eddy_pipeline_spec_t *spec)
{
    for (uint32_t i = 0; i < spec->n_steps; i++) {
        const eddy_pstep_t *st = &spec->steps[i];
        bool stateful = st->kind == EDDY_PSTEP_AGGREGATE || st->kind == EDDY_PSTEP_MAX_BY ||
                        st->kind == EDDY_PSTEP_JOIN;
        const eddy_pstep_t *win = i && spec->steps[i - 1].kind == EDDY_PSTEP_WINDOW
                                      ? &spec->steps[i - 1] : NULL;
        if (stateful && !st->uid && !(win && win->uid))
            fprintf(stderr, "eddy plan: warning: steps[%u] (line %u) keeps state but has no uid: "
                    "its state is saved under one derived from its position, so a savepoint "
                    "does not survive steps added before it; give it `uid: NAME` "
                    "(docs/savepoints.md)\n", st->index, st->line);
    }
}

/* The pipeline's steps before and after the optimizer, and its rewrites. */
static int print_pipeline(int argc, char **argv, eddy_err_t *err)
{
    eddy_pipeline_spec_t *spec = NULL;
    eddy_pipeline_opt_t opt;
    if (eddy_pipeline_load(argc, argv, &spec, &opt, err) < 0)
        return -1;
    printf("\npipeline steps as written:\n");
    print_steps(spec, "    ");
    printf("after optimization (%u operator%s):\n", opt.n_groups, opt.n_groups == 1 ? "" : "s");
    uint32_t from = 0;
    for (uint32_t g = 0; g < opt.n_groups; g++) {
        printf("  operator %u:\n", g);
        for (uint32_t k = from; k < opt.group_end[g]; k++)
            print_step(&spec->steps[opt.order[k]], "    ");
        from = opt.group_end[g];
    }
    printf("rewrites:%s\n", opt.n_log ? "" : " none");
    for (uint32_t i = 0; i < opt.n_log; i++)
        printf("  - %s\n", opt.log[i]);
    warn_missing_uids(spec);
    eddy_pipeline_opt_clear(&opt);
    eddy_pipeline_spec_destroy(&spec);
    return 0;
}

static int run_plan(int argc, char **argv, char **spec_text);

int eddy_cmd_plan(int argc, char **argv)
{
    char *spec_text = NULL;
    int rc = run_plan(argc, argv, &spec_text);
    free(spec_text);
    return rc;
}

static int run_plan(int argc, char **argv, char **spec_text)
{
    const char *job = NULL, *plugin = NULL, *pipeline = NULL, *sql = NULL;
    bool json = false;
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("job", &job, "NAME", "the job (see eddy jobs)"),
        EDDY_FLAG_STR("plugin", &plugin, "FILE.so", "load the job (or its kinds) from a plugin"),
        EDDY_FLAG_STR("pipeline", &pipeline, "FILE", "a declarative pipeline (docs/pipelines.md)"),
        EDDY_FLAG_STR("sql", &sql, "FILE", "SQL statements (docs/sql.md): the pipeline they compile to"),
        EDDY_FLAG_SWITCH("json", &json, "print the plan as JSON"),
        EDDY_FLAG_END,
    };
    eddy_args_t job_args = {0};
    int code;
    if (eddy_cli_parse("plan", "(--job NAME [--plugin FILE.so] | --pipeline FILE | --sql FILE) [--json] [job flags]",
                       flags, argc, argv, NULL, &job_args, &code) < 0) {
        eddy_args_free(&job_args);
        return code;
    }
    eddy_err_t err = {{0}};
    if ((pipeline && sql && eddy_err_set(&err, "give --pipeline or --sql, not both") < 0) ||
        (sql && eddy_cli_sql_job(sql, &job, &job_args, spec_text, &err) < 0) ||
        (pipeline && eddy_cli_pipeline_job(pipeline, &job, &job_args, spec_text, &err) < 0)) {
        eddy_args_free(&job_args);
        return eddy_usage_error("plan", err.msg);
    }
    eddy_registry_t *r = eddy_registry_default();
    if (!job || (plugin && eddy_plugin_load(plugin, r, NULL, &err) < 0)) {
        eddy_args_free(&job_args);
        return eddy_usage_error("plan", job ? err.msg : "--job is required (see eddy jobs)");
    }
    eddy_plan_t *plan = eddy_registry_build_plan(r, job, job_args.count, job_args.items, &err);
    if (!plan) {
        eddy_args_free(&job_args);
        return eddy_usage_error("plan", err.msg);
    }
    /* Instantiating checks every kind and configuration, as a worker will. */
    eddy_job_graph_t graph;
    if (eddy_plan_instantiate(plan, r, &graph, &err) < 0) {
        eddy_plan_destroy(&plan);
        eddy_args_free(&job_args);
        return eddy_usage_error("plan", err.msg);
    }
    eddy_graph_clear(&graph);
    int rc = 0;
    if (json) {
        json_t *doc = eddy_plan_explain_json(plan, &err);
        char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        if (text)
            printf("%s\n", text);
        else
            rc = 1;
        free(text);
        json_decref(doc);
    } else if (eddy_plan_explain_text(plan, stdout, &err) < 0 ||
               ((pipeline || sql) && print_pipeline(job_args.count, job_args.items, &err) < 0)) {
        rc = 1;
    }
    eddy_args_free(&job_args);
    if (rc)
        fprintf(stderr, "eddy plan: %s\n", err.msg);
    eddy_plan_destroy(&plan);
    return rc;
}
