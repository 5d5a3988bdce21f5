/* pipeline_window.c - a pipeline's stateful steps as job steps (see
 * pipeline_window.h). An aggregate without a window runs in a
 * processing-time tumbling window too long to ever close, which fires at
 * end of a bounded input (api/window.h: finish() fires every open
 * processing-time window): per key, over the whole input, emitted at end. */
#include "jobs/pipeline_window.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "operators/pipeline_agg.h"
#include "operators/pipeline_chain.h"
#include "plan/pipeline_window.h"

/* 2^60 ms, some 36 million years: the window of a whole input. */
#define WHOLE_INPUT_MS (INT64_C(1) << 60)

eddy_stream_t eddy_pipeline_add_chain(eddy_stream_t rows, const char *uid, eddy_config_t *c,
                                      bool *keyed, bool has_steps, const eddy_pstep_t *key_by)
{
    int rc = 0;
    bool after_shuffle = *keyed && has_steps;
    if (*keyed)
        rc |= eddy_config_set_bool(c, "keyed_input", true);
    if (key_by)
        rc |= eddy_config_set_str(c, "key", key_by->expr);
    else if (after_shuffle)
        rc |= eddy_config_set_bool(c, "keep_key", true);
    if (rc < 0)
        eddy_builder_fail(rows.builder, "out of memory");
    *keyed = key_by || after_shuffle;
    /* Steps between a key_by and its window or aggregate run on the keyed
     * rows, after the shuffle, as written (the optimizer moves filters
     * ahead of the key_by). */
    if (after_shuffle)
        return eddy_process(eddy_key_by(rows, "tab_prefix"), uid, EDDY_PIPELINE_CHAIN_KIND, c);
    return eddy_flat_map(rows, uid, EDDY_PIPELINE_CHAIN_KIND, c);
}

char *eddy_pipeline_join_columns(char **v, uint32_t n)
{
    size_t len = 1;
    for (uint32_t i = 0; i < n; i++)
        len += strlen(v[i]) + 1;
    char *out = calloc(1, len);
    for (uint32_t i = 0; out && i < n; i++) {
        if (i)
            strcat(out, ",");
        strcat(out, v[i]);
    }
    return out;
}

static int window_keys(eddy_config_t *c, const eddy_pstep_t *w)
{
    if (!w) {
        int rc = eddy_config_set_str(c, "assigner", "tumbling");
        rc |= eddy_config_set_int(c, "size_ms", WHOLE_INPUT_MS);
        rc |= eddy_config_set_str(c, "time", "processing");
        return rc;
    }
    const eddy_pwindow_t *win = &w->window;
    int rc = eddy_config_set_str(c, "assigner", win->type);
    if (!strcmp(win->type, "session"))
        rc |= eddy_config_set_int(c, "gap_ms", win->gap_ms);
    else
        rc |= eddy_config_set_int(c, "size_ms", win->size_ms);
    if (!strcmp(win->type, "sliding") || !strcmp(win->type, "cumulate")) /* cumulate: its step */
        rc |= eddy_config_set_int(c, "slide_ms", win->slide_ms);
    rc |= eddy_config_set_str(c, "time", win->processing ? "processing" : "event");
    if (!win->processing && win->lateness_ms)
        rc |= eddy_config_set_int(c, "lateness_ms", win->lateness_ms);
    return rc;
}

eddy_stream_t eddy_pipeline_add_window(eddy_stream_t rows, const eddy_pipeline_spec_t *s,
                                       const eddy_pipeline_opt_t *o, uint32_t pos,
                                       const eddy_pstep_t *window)
{
    const eddy_pstep_t *st = &s->steps[o->order[pos]];
    eddy_config_t *c = eddy_config_new();
    uint32_t n_cols;
    char **cols = eddy_pipeline_spec_columns_at(s, o->order, pos, &n_cols);
    char *list = eddy_pipeline_join_columns(cols, n_cols);
    int rc = c && list ? window_keys(c, window) : -1;
    rc |= c && list ? eddy_config_set_str(c, "columns", list) : -1;
    free(list);
    if (rc == 0 && st->kind == EDDY_PSTEP_MAX_BY) {
        rc |= eddy_config_set_str(c, "mode", "max_by");
        rc |= eddy_config_set_str(c, "max_by", st->expr);
    } else if (rc == 0) {
        rc |= eddy_config_set_str(c, "mode", "aggregate");
        rc |= eddy_config_set_bool(c, "windowed", window != NULL);
        int64_t n = 0;
        for (uint32_t i = 0; rc == 0 && i < st->n; i++) {
            if (!st->exprs[i])
                continue; /* the key and window columns */
            char key[32];
            snprintf(key, sizeof key, "agg.%" PRId64, n++);
            rc |= eddy_config_set_str(c, key, st->exprs[i]);
        }
        rc |= eddy_config_set_int(c, "aggs", n);
    }
    if (rc < 0) {
        eddy_config_destroy(&c);
        eddy_builder_fail(rows.builder, "out of memory");
    }
    char uid[64];
    const char *given = st->uid ? st->uid : window ? window->uid : NULL; /* `uid:` */
    if (given)
        snprintf(uid, sizeof uid, "%s", given);
    else
        snprintf(uid, sizeof uid, "step%u_%s", st->index,
                 st->kind == EDDY_PSTEP_MAX_BY ? "max_by" : "aggregate");
    const char *kind = st->state == EDDY_PIPELINE_STATE_FIXED     ? EDDY_PIPELINE_WINDOW_FIXED_KIND
                       : st->state == EDDY_PIPELINE_STATE_ORDERED ? EDDY_PIPELINE_WINDOW_ORDERED_KIND
                       : st->kind == EDDY_PSTEP_MAX_BY            ? EDDY_PIPELINE_WINDOW_MAX_BY_KIND
                                                                  : EDDY_PIPELINE_WINDOW_KIND;
    return eddy_window(eddy_key_by(rows, "tab_prefix"), uid, kind, c);
}
