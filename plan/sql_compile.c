/* sql_compile.c - SQL into a pipeline spec (sql_compile.h): the script
 * parsed and its catalog built, the one INSERT (or bare SELECT) that runs
 * found, its query planned (plan/sql_compile_int.h lists the files that do
 * that), the sink's columns and TIMESTAMP text put in a final map, and the
 * document tree (source, steps, sink) loaded as a pipeline spec, so every
 * check of pipelines applies. */
#include "plan/sql_compile.h"

#include <stdlib.h>
#include <string.h>

#include "plan/sql_compile_int.h"
#include "plan/sql_parse.h"

/* The final map: the sink's column names, TIMESTAMP(3) written as text. */
static int output_map(comp_t *c, eddy_ynode_t *steps, const rel_t *r, const eddy_sql_table_t *t,
                      uint32_t pos)
{
    const char **names = calloc(r->r.n, sizeof *names), **exprs = calloc(r->r.n, sizeof *exprs);
    int rc = names && exprs ? 0 : sqlc_oom(c);
    for (uint32_t i = 0; rc == 0 && i < r->r.n; i++) {
        const eddy_sql_col_t *col = &r->r.cols[i];
        names[i] = sqlc_fresh(c, t ? t->names[i] : col->name, NULL, names, i);
        bool ts = col->type == EDDY_SQL_T_TIMESTAMP || (t && t->types[i] == EDDY_SQL_T_TIMESTAMP);
        exprs[i] = ts ? sqlc_fmt(c, "concat(date(%s), ' ', substr(datetime(%s), 11, 12))", col->field,
                            col->field)
                      : col->field;
        if (!names[i] || !exprs[i])
            rc = sqlc_oom(c);
    }
    if (rc == 0)
        rc = sqlc_add_map(c, steps, names, exprs, r->r.n, pos);
    free(names);
    free(exprs);
    return rc;
}

static eddy_ynode_t *source_node(comp_t *c)
{
    const eddy_sql_table_t *t = c->source;
    eddy_ynode_t *src = eddy_sql_ymap(1), *cols = eddy_sql_yseq(1);
    bool nexmark = t->connector == EDDY_SQL_CONN_NEXMARK_CSV;
    int e = 0;
    uint32_t n = nexmark ? EDDY_SQL_NEXMARK_N_COLUMNS : t->n_columns;
    for (uint32_t i = 0; i < n; i++)
        e |= eddy_sql_ypush(cols, eddy_sql_yscalar(nexmark ? eddy_sql_nexmark_columns[i] : t->names[i],
                                                   false, 1));
    if (!nexmark)
        e |= eddy_sql_yput_str(src, "input", t->path, 1);
    e |= eddy_sql_yput_str(src, "format", nexmark ? "csv" : t->format, 1);
    if (nexmark)
        e |= eddy_sql_yput_str(src, "ragged", "true", 1);
    e |= eddy_sql_yput(src, "columns", cols);
    if (e) {
        eddy_ynode_free(src);
        return NULL;
    }
    return src;
}

static eddy_pipeline_spec_t *compile(comp_t *c, const eddy_sql_script_t *script,
                                     const eddy_sql_compile_opts_t *opts)
{
    const eddy_sql_stmt_t *run = NULL;
    for (uint32_t i = 0; i < script->n; i++) {
        const eddy_sql_stmt_t *st = &script->stmts[i];
        if (st->kind != EDDY_SQL_INSERT && st->kind != EDDY_SQL_QUERY)
            continue;
        if (run && (run->explain || st->explain)) {
            sqlc_fail(c, st->pos, "EXPLAIN beside another INSERT or query is not supported (a "
                      "script with EXPLAIN is run by printing that statement's plan)");
            return NULL;
        }
        if (run) {
            sqlc_fail(c, st->pos, "a second INSERT or query is not supported (an eddy SQL job has "
                      "one sink)");
            return NULL;
        }
        run = st;
    }
    if (!run) {
        sqlc_fail(c, script->stmts[script->n - 1].pos, "nothing to run: no INSERT INTO ... SELECT or "
             "SELECT in the script");
        return NULL;
    }
    const eddy_sql_table_t *sink = NULL;
    if (run->kind == EDDY_SQL_INSERT) {
        sink = eddy_sql_catalog_find(&c->cat, run->name);
        if (!sink) {
            eddy_sql_catalog_unknown(c->src, &c->cat, run->name, run->name_pos, c->err);
            return NULL;
        }
        if (sink->connector == EDDY_SQL_CONN_VIEW || sink->connector == EDDY_SQL_CONN_NEXMARK_CSV) {
            sqlc_fail(c, run->name_pos, "'%s' is a %s: INSERT INTO a table with a sink connector "
                 "(filesystem, print, blackhole)", run->name,
                 sink->connector == EDDY_SQL_CONN_VIEW ? "view" : "built-in source table");
            return NULL;
        }
    }
    eddy_ynode_t *root = eddy_sql_ymap(1), *steps = eddy_sql_yseq(sqlc_line_of(c, run->pos));
    rel_t out;
    sqlc_rel_init(&out);
    int rc = root && steps ? 0 : sqlc_oom(c);
    if (rc == 0)
        rc = sqlc_compile_query(c, run->query, steps, NULL, &out);
    if (rc == 0 && out.top.pending)
        rc = sqlc_fail(c, out.top.pos, "OVER windows other than a top-1 by RANK() (an outer WHERE "
                  "rk <= 1) are not supported");
    if (rc == 0 && sink && sink->n_columns != out.r.n)
        rc = sqlc_fail(c, run->query->pos, "the query has %u columns, table '%s' has %u", out.r.n,
                  sink->name, sink->n_columns);
    if (rc == 0)
        rc = output_map(c, steps, &out, sink, run->query->pos);
    if (rc == 0 && sink && sink->connector == EDDY_SQL_CONN_BLACKHOLE && !opts->has_output)
        rc = sqlc_add_filter(c, steps, "false", run->pos);
    int e = 0;
    if (rc == 0) {
        e |= eddy_sql_yput_str(root, "name", "sql", 1);
        e |= eddy_sql_yput(root, "source", source_node(c));
        e |= eddy_sql_yput(root, "steps", steps);
        steps = NULL;
        if (sink && sink->connector == EDDY_SQL_CONN_FILESYSTEM) {
            eddy_ynode_t *sk = eddy_sql_ymap(1);
            e |= eddy_sql_yput_str(sk, "output", sink->path, 1);
            e |= eddy_sql_yput(root, "sink", sk);
        }
        if (e || c->oom)
            rc = sqlc_oom(c);
    }
    eddy_pipeline_spec_t *spec = NULL;
    if (rc == 0) {
        eddy_err_t e2 = {{0}};
        spec = eddy_pipeline_spec_from_tree(c->src->file, root, &e2);
        if (!spec) /* a bug of this compiler: say what it made wrong */
            eddy_err_set(c->err, "%s: the SQL compiled into a pipeline that does not load: %s",
                         c->src->file, e2.msg);
    }
    eddy_ynode_free(steps);
    eddy_ynode_free(root);
    sqlc_rel_clear(&out);
    return spec;
}

eddy_pipeline_spec_t *eddy_sql_compile(const char *file, const char *text, size_t len,
                                       const eddy_sql_compile_opts_t *opts, eddy_err_t *err)
{
    eddy_sql_src_t src = {file ? file : "sql", text, len};
    eddy_sql_compile_opts_t none = {0};
    if (memchr(text, '\0', len)) {
        eddy_err_set(err, "%s: not a text file (NUL byte)", src.file);
        return NULL;
    }
    eddy_sql_script_t *script = eddy_sql_parse(&src, err);
    if (!script)
        return NULL;
    comp_t c = {.src = &src, .err = err};
    eddy_pipeline_spec_t *spec = NULL;
    if (eddy_sql_catalog_build(&src, script, &c.cat, err) == 0)
        spec = compile(&c, script, opts ? opts : &none);
    for (uint32_t i = 0; i < c.n_kept; i++)
        free(c.kept[i]);
    free(c.kept);
    eddy_sql_catalog_clear(&c.cat);
    eddy_sql_script_destroy(&script);
    return spec;
}

bool eddy_sql_explains(const char *text, size_t len)
{
    eddy_sql_src_t src = {"sql", text, len};
    if (memchr(text, '\0', len))
        return false;
    eddy_err_t err = {{0}};
    eddy_sql_script_t *script = eddy_sql_parse(&src, &err);
    bool explain = false;
    for (uint32_t i = 0; script && i < script->n; i++)
        explain |= script->stmts[i].explain;
    eddy_sql_script_destroy(&script);
    return explain;
}
