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
 * The registry copies kind structs and names; the ops they point to must
 * stay valid while the process runs (static storage). A kind's configure()
 * turns a step's eddy_config_t into what the ops see as ctx->config (and
 * release() frees it); it gets the kind's arg too. Without configure() the
 * ops see the eddy_config_t itself. Names are unique across eddy and every
 * plugin.
 *
 * Most operators need no ops of their own: eddy_register_flat_map, _filter
 * and _aggregate turn a function (or an accumulator's functions) into a
 * kind, with eddy's batching, state, checkpoints and rescaling around it. */
#ifndef EDDY_API_PLUGIN_H
#define EDDY_API_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "api/config.h"
#include "api/operator.h"
#include "api/stream.h"
#include "common/err.h"

/* Bumped whenever a struct or function of api/ changes incompatibly. */
#define EDDY_ABI_VERSION 7u
#define EDDY_PLUGIN_ENTRY_SYMBOL "eddy_plugin_init"
#define EDDY_PLUGIN_ABI_SYMBOL "eddy_plugin_abi_version"

/* Every plugin states, once, the ABI it was compiled against; eddy reads it
 * before running any of the plugin's code and refuses a mismatch. */
#define EDDY_PLUGIN_DECLARE() const uint32_t eddy_plugin_abi_version = EDDY_ABI_VERSION

typedef struct eddy_registry eddy_registry_t;

typedef void *(*eddy_configure_fn)(const eddy_config_t *config, const void *arg, eddy_err_t *err);

typedef struct eddy_operator_kind {
    const char *name;
    const eddy_operator_ops_t *ops;
    eddy_configure_fn configure;       /* may be NULL */
    void (*release)(void *configured); /* may be NULL */
    const void *arg;                   /* handed to configure() */
} eddy_operator_kind_t;

typedef struct eddy_source_kind {
    const char *name;
    const eddy_source_ops_t *ops;
    eddy_configure_fn configure;       /* may be NULL */
    void (*release)(void *configured); /* may be NULL */
    const void *arg;
} eddy_source_kind_t;

typedef struct eddy_key_kind {
    const char *name;
    eddy_key_fn key;
} eddy_key_kind_t;

/* Event time: a record's timestamp (epoch ms), for sources that use it
 * (eddy_event_time in stream.h). */
typedef struct eddy_timestamp_kind {
    const char *name;
    int64_t (*timestamp)(const eddy_record_t *rec);
} eddy_timestamp_kind_t;

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
int eddy_register_timestamp(eddy_registry_t *r, const eddy_timestamp_kind_t *kind, eddy_err_t *err);
int eddy_register_job(eddy_registry_t *r, const eddy_job_kind_t *kind, eddy_err_t *err);

/* Function operators. config is the step's configuration (never NULL). */
typedef void (*eddy_flat_map_udf)(const eddy_record_t *in, eddy_collector_t *out,
                                  const eddy_config_t *config);
typedef bool (*eddy_filter_udf)(const eddy_record_t *in, const eddy_config_t *config);
/* A keyed aggregate (Flink's AggregateFunction): one accumulator of acc_size
 * bytes per key, zeroed and then create()d when the key is new; add() folds
 * a record in; merge() combines two (may be NULL); result() is the value
 * emitted with the key. The step's config says when: {emit: "changelog"}
 * (+I/-U/+U on every update, the default) or {emit: "final"} (once per key
 * at end of input). Accumulators are keyed state: checkpointed, restored
 * and moved with their key groups. They are copied as bytes, so they must
 * hold no pointers. */
typedef struct eddy_aggregate_udf {
    size_t acc_size;
    void (*create)(void *acc);
    void (*add)(void *acc, const eddy_record_t *rec);
    void (*merge)(void *acc, const void *other);
    int64_t (*result)(const void *acc);
} eddy_aggregate_udf_t;

int eddy_register_flat_map(eddy_registry_t *r, const char *name, eddy_flat_map_udf fn,
                           eddy_err_t *err);
int eddy_register_filter(eddy_registry_t *r, const char *name, eddy_filter_udf fn, eddy_err_t *err);
int eddy_register_aggregate(eddy_registry_t *r, const char *name, const eddy_aggregate_udf_t *udf,
                            eddy_err_t *err);

typedef int (*eddy_plugin_init_fn)(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);

#endif
