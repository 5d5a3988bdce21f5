/* cmd_plan.c - `eddy plan`: build a job's plan from its flags, exactly as
 * `eddy local` and `eddy submit` would, and print it without running it:
 * stages, chained steps, edges, parallelism, keys, uids, configurations,
 * and the fingerprint workers check. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "plan/explain.h"
#include "plan/plugin.h"
#include "plan/registry.h"

int eddy_cmd_plan(int argc, char **argv)
{
    const char *job = NULL, *plugin = NULL;
    bool json = false;
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("job", &job, "NAME", "the job (see eddy jobs)"),
        EDDY_FLAG_STR("plugin", &plugin, "FILE.so", "load the job (or its kinds) from a plugin"),
        EDDY_FLAG_SWITCH("json", &json, "print the plan as JSON"),
        EDDY_FLAG_END,
    };
    eddy_args_t job_args = {0};
    int code;
    if (eddy_cli_parse("plan", "--job NAME [--plugin FILE.so] [--json] [job flags]", flags, argc, argv,
                       NULL, &job_args, &code) < 0) {
        eddy_args_free(&job_args);
        return code;
    }
    eddy_err_t err = {{0}};
    eddy_registry_t *r = eddy_registry_default();
    if (!job || (plugin && eddy_plugin_load(plugin, r, NULL, &err) < 0)) {
        eddy_args_free(&job_args);
        return eddy_usage_error("plan", job ? err.msg : "--job is required (see eddy jobs)");
    }
    eddy_plan_t *plan = eddy_registry_build_plan(r, job, job_args.count, job_args.items, &err);
    eddy_args_free(&job_args);
    if (!plan)
        return eddy_usage_error("plan", err.msg);
    /* Instantiating checks every kind and configuration, as a worker will. */
    eddy_job_graph_t graph;
    if (eddy_plan_instantiate(plan, r, &graph, &err) < 0) {
        eddy_plan_destroy(&plan);
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
    } else if (eddy_plan_explain_text(plan, stdout, &err) < 0) {
        rc = 1;
    }
    if (rc)
        fprintf(stderr, "eddy plan: %s\n", err.msg);
    eddy_plan_destroy(&plan);
    return rc;
}
