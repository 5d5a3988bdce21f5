/* config.h - an operator's configuration: typed key/value pairs.
 *
 * A job's plan carries every operator's configuration as data, never as
 * pointers, so the plan can be serialised, fingerprinted and shipped to
 * workers (like Flink's Configuration). Keys are kept sorted, so two configs
 * with the same entries encode to the same bytes whatever order they were
 * set in. Values are strings, 64-bit integers, doubles or booleans. */
#ifndef EDDY_API_CONFIG_H
#define EDDY_API_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EDDY_CONFIG_MAX_ENTRIES 256
#define EDDY_CONFIG_MAX_KEY 64
#define EDDY_CONFIG_MAX_STRING (64u * 1024u)

typedef struct eddy_config eddy_config_t;

typedef enum eddy_config_type {
    EDDY_CONFIG_STR = 0,
    EDDY_CONFIG_INT = 1,
    EDDY_CONFIG_DOUBLE = 2,
    EDDY_CONFIG_BOOL = 3,
} eddy_config_type_t;

eddy_config_t *eddy_config_new(void);
void eddy_config_destroy(eddy_config_t **self_p);
eddy_config_t *eddy_config_dup(const eddy_config_t *self);

/* Set (or replace) a value. -1 when out of memory, the key is empty or
 * longer than EDDY_CONFIG_MAX_KEY - 1, the string too long, or the config full. */
int eddy_config_set_str(eddy_config_t *self, const char *key, const char *value);
int eddy_config_set_int(eddy_config_t *self, const char *key, int64_t value);
int eddy_config_set_double(eddy_config_t *self, const char *key, double value);
int eddy_config_set_bool(eddy_config_t *self, const char *key, bool value);

/* Getters return dflt when the key is missing or has another type. A NULL
 * config reads as empty. */
bool eddy_config_has(const eddy_config_t *self, const char *key);
const char *eddy_config_str(const eddy_config_t *self, const char *key, const char *dflt);
int64_t eddy_config_int(const eddy_config_t *self, const char *key, int64_t dflt);
double eddy_config_double(const eddy_config_t *self, const char *key, double dflt);
bool eddy_config_bool(const eddy_config_t *self, const char *key, bool dflt);

/* Iteration in key order, for printing plans. */
size_t eddy_config_count(const eddy_config_t *self);
const char *eddy_config_key_at(const eddy_config_t *self, size_t i);
eddy_config_type_t eddy_config_type_at(const eddy_config_t *self, size_t i);
/* The value at i as text ("true", "42", "0.5", or the string itself) into buf. */
const char *eddy_config_text_at(const eddy_config_t *self, size_t i, char *buf, size_t size);

/* One msgpack value (an array of [key, type, value] triples, in key order).
 * encode returns malloc'd bytes (NULL when out of memory); decode rejects
 * anything malformed, unsorted, duplicated or out of bounds. */
char *eddy_config_encode(const eddy_config_t *self, size_t *len);
eddy_config_t *eddy_config_decode(const void *data, size_t len, eddy_err_t *err);

#endif
