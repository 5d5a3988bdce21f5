/* registry.h - the kinds a process knows (built in and from plugins) and
 * turning a plan into the job graph tasks run (see api/plugin.h).
 *
 * One registry per process (eddy_registry_default), filled at start by the
 * built-in modules and later by plugins; lookups are by name. Not
 * thread-safe: registration happens on the main thread before or between
 * loop iterations. */
#ifndef EDDY_PLAN_REGISTRY_H
#define EDDY_PLAN_REGISTRY_H

#include "api/plugin.h"
#include "plan/graph.h"
#include "plan/plan.h"

#define EDDY_PLUGIN_ORIGIN_MAX 65 /* a SHA-256 in hex and NUL (plan/plugin.h) */

eddy_registry_t *eddy_registry_new(void);
void eddy_registry_destroy(eddy_registry_t **self_p);
/* The process's registry (created on first use). */
eddy_registry_t *eddy_registry_default(void);

const eddy_operator_kind_t *eddy_registry_operator(const eddy_registry_t *self, const char *name);
const eddy_source_kind_t *eddy_registry_source(const eddy_registry_t *self, const char *name);
const eddy_key_kind_t *eddy_registry_key(const eddy_registry_t *self, const char *name);
const eddy_timestamp_kind_t *eddy_registry_timestamp(const eddy_registry_t *self, const char *name);
const eddy_job_kind_t *eddy_registry_job(const eddy_registry_t *self, const char *name);
uint32_t eddy_registry_job_count(const eddy_registry_t *self);
const eddy_job_kind_t *eddy_registry_job_at(const eddy_registry_t *self, uint32_t i);

/* Moves every entry of from into self; nothing moves (and -1 with err names
 * the clash) when any name is taken in self already. */
int eddy_registry_merge(eddy_registry_t *self, eddy_registry_t *from, eddy_err_t *err);
/* Marks every entry as registered by the plugin with this content hash
 * (plan/plugin.c, on its scratch registry before the merge). */
void eddy_registry_set_origin(eddy_registry_t *self, const char *origin);
/* The content hashes of the plugins whose kinds (or job) the plan uses, as
 * a NULL-terminated malloc'd vector (eddy_strv_free). */
int eddy_registry_plan_plugins(const eddy_registry_t *self, const eddy_plan_t *plan, char ***hashes,
                               uint32_t *n, eddy_err_t *err);
/* eddy_register_operator whose kind's arg is owned_arg (malloc'd), freed with
 * the registry entry (also on failure): for adapters that make kinds. */
int eddy_registry_add_operator_owned(eddy_registry_t *r, const eddy_operator_kind_t *kind,
                                     void *owned_arg, eddy_err_t *err);

/* Builds job `name` from its flags into a validated plan; clear errors for
 * an unknown job and for the job's own flag problems. */
eddy_plan_t *eddy_registry_build_plan(const eddy_registry_t *self, const char *name, int argc,
                                      char **argv, eddy_err_t *err);

/* The stages a plan chains into (plan.h), with every step's kind looked up
 * and configured; g owns what configure() made. Fails with a message naming
 * the step for an unknown kind or a configuration its kind refuses. */
int eddy_plan_instantiate(const eddy_plan_t *plan, const eddy_registry_t *registry,
                          eddy_job_graph_t *g, eddy_err_t *err);

/* A job's graph from its name and flags: eddy_registry_build_plan on the
 * process registry, then eddy_plan_instantiate; the graph owns the plan. */
int eddy_job_build(eddy_job_graph_t *g, const char *name, int argc, char **argv, eddy_err_t *err);

/* A job's graph from a serialised plan (a DEPLOY's): decoded, its
 * fingerprint checked against the one that travelled with it (0: not
 * checked), instantiated through the process registry; the graph owns the
 * plan. An unknown kind names the step and says which plugin may be missing. */
int eddy_job_build_from_plan(eddy_job_graph_t *g, const void *bytes, size_t len,
                             uint64_t fingerprint, eddy_err_t *err);
/* The plan a graph made by eddy_job_build(_from_plan) owns, else NULL. */
const eddy_plan_t *eddy_graph_plan(const eddy_job_graph_t *g);

#endif
