/* plugin.h - registering kinds of sources, operators and key selectors, and
 * jobs built from them; the entry point a plugin exports.
 *
 * A plan names kinds; workers look them up in their registry and open
 * operators from them. Built-in kinds are registered by eddy itself; a
 * plugin (a shared library written against api/ only, like a Redis module)
 * registers its own from its entry point:
 *
 *   EDDY_PLUGIN_DECLARE();
 *   int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
 *   {
 *       (void)abi_version; // eddy checked eddy_plugin_abi_version already
 *       return eddy_register_operator(r, &my_filter, err);
 *   }
 *
 * A failing entry point registers nothing (eddy registers a plugin's kinds
 * only once its entry point succeeded).
 *
 * Kind structs must stay valid while the process runs (static storage).
 * A kind's configure() turns a step's eddy_config_t into what the ops see
 * as ctx->config (and release() frees it); without configure() they see the
 * eddy_config_t itself. Names are unique across eddy and every plugin. */
#ifndef EDDY_API_PLUGIN_H
#define EDDY_API_PLUGIN_H

#include <stdint.h>

#include "api/config.h"
#include "api/operator.h"
#include "api/stream.h"
#include "common/err.h"

/* Bumped whenever a struct or function of api/ changes incompatibly. */
#define EDDY_ABI_VERSION 1u
#define EDDY_PLUGIN_ENTRY_SYMBOL "eddy_plugin_init"
#define EDDY_PLUGIN_ABI_SYMBOL "eddy_plugin_abi_version"

/* Every plugin states, once, the ABI it was compiled against; eddy reads it
 * before running any of the plugin's code and refuses a mismatch. */
#define EDDY_PLUGIN_DECLARE() const uint32_t eddy_plugin_abi_version = EDDY_ABI_VERSION

typedef struct eddy_registry eddy_registry_t;

typedef struct eddy_operator_kind {
    const char *name;
    const eddy_operator_ops_t *ops;
    void *(*configure)(const eddy_config_t *config, eddy_err_t *err); /* may be NULL */
    void (*release)(void *configured);                                /* may be NULL */
} eddy_operator_kind_t;

typedef struct eddy_source_kind {
    const char *name;
    const eddy_source_ops_t *ops;
    void *(*configure)(const eddy_config_t *config, eddy_err_t *err); /* may be NULL */
    void (*release)(void *configured);                                /* may be NULL */
} eddy_source_kind_t;

typedef struct eddy_key_kind {
    const char *name;
    eddy_key_fn key;
} eddy_key_kind_t;

/* A job: parses its flags and records its pipeline. No I/O here: the build
 * runs on the submitting side, which may not see the job's files. */
typedef struct eddy_job_kind {
    const char *name;
    const char *summary; /* one line for `eddy jobs` */
    const char *usage;   /* flag help for `eddy local --job NAME --help` */
    int (*build)(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err);
} eddy_job_kind_t;

int eddy_register_operator(eddy_registry_t *r, const eddy_operator_kind_t *kind, eddy_err_t *err);
int eddy_register_source(eddy_registry_t *r, const eddy_source_kind_t *kind, eddy_err_t *err);
int eddy_register_key(eddy_registry_t *r, const eddy_key_kind_t *kind, eddy_err_t *err);
int eddy_register_job(eddy_registry_t *r, const eddy_job_kind_t *kind, eddy_err_t *err);

typedef int (*eddy_plugin_init_fn)(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);

#endif
