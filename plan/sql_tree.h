/* sql_tree.h - building a pipeline document tree (plan/yaml_doc.h's nodes)
 * in memory, for plan/sql_compile.c: the SQL compiler writes the same
 * mapping a YAML spec would hold and eddy_pipeline_spec_from_tree checks
 * and loads it, so SQL gets every check and derived field of pipelines.
 *
 * Builders take their children: put and push free the child when they
 * fail, and accept a NULL child (an earlier out of memory) by failing, so
 * a chain of calls needs one check at its end. */
#ifndef EDDY_PLAN_SQL_TREE_H
#define EDDY_PLAN_SQL_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/yaml_doc.h"

eddy_ynode_t *eddy_sql_ymap(uint32_t line);
eddy_ynode_t *eddy_sql_yseq(uint32_t line);
/* A scalar; quoted: a string even when it reads as a number. */
eddy_ynode_t *eddy_sql_yscalar(const char *text, bool quoted, uint32_t line);
/* map[key] = v; -1 (v freed) on out of memory or a NULL map or v. */
int eddy_sql_yput(eddy_ynode_t *map, const char *key, eddy_ynode_t *v);
/* Appends v to seq; the same. */
int eddy_sql_ypush(eddy_ynode_t *seq, eddy_ynode_t *v);
/* map[key] = a plain scalar text (NULL text: nothing is put). */
int eddy_sql_yput_str(eddy_ynode_t *map, const char *key, const char *text, uint32_t line);

#endif
