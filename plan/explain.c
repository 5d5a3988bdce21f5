/* explain.c - rendering a plan for `eddy plan` (see explain.h). Both forms
 * come from one JSON document, so they never disagree. */
#include "plan/explain.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static json_t *config_json(const eddy_config_t *cfg)
{
    json_t *o = json_object();
    for (size_t i = 0; i < eddy_config_count(cfg); i++) {
        const char *key = eddy_config_key_at(cfg, i);
        switch (eddy_config_type_at(cfg, i)) {
        case EDDY_CONFIG_STR:
            json_object_set_new(o, key, json_string(eddy_config_str(cfg, key, "")));
            break;
        case EDDY_CONFIG_INT:
            json_object_set_new(o, key, json_integer(eddy_config_int(cfg, key, 0)));
            break;
        case EDDY_CONFIG_DOUBLE:
            json_object_set_new(o, key, json_real(eddy_config_double(cfg, key, 0)));
            break;
        case EDDY_CONFIG_BOOL:
            json_object_set_new(o, key, json_boolean(eddy_config_bool(cfg, key, false)));
            break;
        }
    }
    return o;
}

json_t *eddy_plan_explain_json(const eddy_plan_t *plan, eddy_err_t *err)
{
    uint32_t stage_of[EDDY_PLAN_MAX_NODES];
    int n_stages = eddy_plan_stages(plan, stage_of, err);
    if (n_stages < 0)
        return NULL;
    char fp[32];
    snprintf(fp, sizeof fp, "%016" PRIx64, eddy_plan_fingerprint(plan));
    json_t *stages = json_array();
    for (int s = 0; s < n_stages; s++) {
        json_t *steps = json_array();
        json_t *stage = NULL;
        for (uint32_t i = 0; i < plan->n_nodes; i++) {
            if (stage_of[i] != (uint32_t)s)
                continue;
            const eddy_plan_node_t *n = &plan->nodes[i];
            json_array_append_new(steps, json_pack("{s:s, s:s, s:s, s:s, s:o}", "uid", n->uid, "name",
                                                   n->name, "kind", n->kind, "role",
                                                   eddy_node_role_name(n->role), "config",
                                                   config_json(n->config)));
            if (stage)
                continue;
            uint32_t p = eddy_plan_parallelism(plan, i);
            stage = json_pack("{s:i, s:s, s:i, s:b}", "stage", s, "name", n->name, "parallelism", p,
                              "keyed", n->edge == EDDY_EDGE_HASH);
            if (n->input >= 0) {
                eddy_edge_t edge = n->edge;
                if (edge == EDDY_EDGE_FORWARD && p != eddy_plan_parallelism(plan, (uint32_t)n->input))
                    edge = EDDY_EDGE_REBALANCE;
                json_object_set_new(stage, "input", json_pack("{s:i, s:s}", "stage",
                                                              (int)stage_of[n->input], "edge",
                                                              eddy_edge_name(edge)));
                if (n->edge == EDDY_EDGE_HASH)
                    json_object_set_new(stage, "key", json_string(n->key_kind));
            }
            if (n->second_input >= 0) {
                json_object_set_new(stage, "second_input",
                                    json_pack("{s:i, s:s}", "stage", (int)stage_of[n->second_input],
                                              "edge", eddy_edge_name(n->second_edge)));
                json_object_set_new(stage, "second_key", json_string(n->second_key_kind));
            }
        }
        json_object_set_new(stage, "steps", steps);
        json_array_append_new(stages, stage);
    }
    return json_pack("{s:s, s:s, s:i, s:i, s:o}", "job", plan->job, "fingerprint", fp,
                     "max_parallelism", plan->max_parallelism, "steps", plan->n_nodes, "stages",
                     stages);
}

int eddy_plan_explain_text(const eddy_plan_t *plan, FILE *out, eddy_err_t *err)
{
    json_t *doc = eddy_plan_explain_json(plan, err);
    if (!doc)
        return -1;
    fprintf(out, "job %s  (fingerprint %s, max parallelism %d, %zu stages)\n",
            json_string_value(json_object_get(doc, "job")),
            json_string_value(json_object_get(doc, "fingerprint")),
            (int)json_integer_value(json_object_get(doc, "max_parallelism")),
            json_array_size(json_object_get(doc, "stages")));
    size_t s;
    json_t *stage;
    json_array_foreach(json_object_get(doc, "stages"), s, stage) {
        json_t *input = json_object_get(stage, "input");
        fprintf(out, "stage %zu  %s  parallelism %d", s, json_string_value(json_object_get(stage, "name")),
                (int)json_integer_value(json_object_get(stage, "parallelism")));
        if (!input)
            fprintf(out, "  (source)");
        else if (json_object_get(stage, "second_input"))
            fprintf(out, "  <- stage %d by key (%s) and stage %d by key (%s), rescalable",
                    (int)json_integer_value(json_object_get(input, "stage")),
                    json_string_value(json_object_get(stage, "key")),
                    (int)json_integer_value(
                        json_object_get(json_object_get(stage, "second_input"), "stage")),
                    json_string_value(json_object_get(stage, "second_key")));
        else if (json_is_true(json_object_get(stage, "keyed")))
            fprintf(out, "  <- stage %d by key (%s), rescalable",
                    (int)json_integer_value(json_object_get(input, "stage")),
                    json_string_value(json_object_get(stage, "key")));
        else
            fprintf(out, "  <- stage %d (%s)", (int)json_integer_value(json_object_get(input, "stage")),
                    json_string_value(json_object_get(input, "edge")));
        fputc('\n', out);
        size_t k;
        json_t *step;
        json_array_foreach(json_object_get(stage, "steps"), k, step) {
            fprintf(out, "  %s %-9s %-14s uid=%s", k ? "->" : "  ",
                    json_string_value(json_object_get(step, "role")),
                    json_string_value(json_object_get(step, "kind")),
                    json_string_value(json_object_get(step, "uid")));
            const char *name = json_string_value(json_object_get(step, "name"));
            if (strcmp(name, json_string_value(json_object_get(step, "uid"))))
                fprintf(out, " name=%s", name);
            const char *key;
            json_t *v;
            json_object_foreach(json_object_get(step, "config"), key, v) {
                char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
                fprintf(out, " %s=%s", key, text ? text : "?");
                free(text);
            }
            fputc('\n', out);
        }
    }
    json_decref(doc);
    return 0;
}
