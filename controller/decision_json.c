/* decision_json.c - encode and strictly decode scaling decisions (see
 * decision_json.h for the format). */
#include "controller/decision_json.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The rates object's keys, in output order, with where each lives and
 * whether it must be at most 1 as well as >= 0. */
typedef struct rate_field {
    const char *key;
    size_t offset;
    int is_fraction_of_one;
    int optional; /* written only when known; absent reads as NaN */
} rate_field_t;

static const rate_field_t RATE_FIELDS[] = {
    {"target_input_rate", offsetof(eddy_scaling_rates_t, target_input_rate), 0, 0},
    {"true_rate_per_instance", offsetof(eddy_scaling_rates_t, true_rate_per_instance), 0, 0},
    {"observed_input_rate", offsetof(eddy_scaling_rates_t, observed_input_rate), 0, 0},
    {"selectivity", offsetof(eddy_scaling_rates_t, selectivity), 0, 0},
    {"utilisation", offsetof(eddy_scaling_rates_t, utilisation), 0, 0},
    {"target_utilisation", offsetof(eddy_scaling_rates_t, target_utilisation), 1, 0},
    {"projected_utilisation", offsetof(eddy_scaling_rates_t, projected_utilisation), 0, 0},
    {"backlog", offsetof(eddy_scaling_rates_t, backlog), 0, 1},
    {"latency_p99_ms", offsetof(eddy_scaling_rates_t, latency_p99_ms), 0, 1},
    {"state_bytes", offsetof(eddy_scaling_rates_t, state_bytes), 0, 1},
};
#define RATE_FIELD_COUNT (sizeof RATE_FIELDS / sizeof RATE_FIELDS[0])

/* "effect" (optional): its numbers; decided_ms, from and to are integers. */
static const rate_field_t EFFECT_FIELDS[] = {
    {"predicted_rate", offsetof(eddy_scaling_effect_t, predicted_rate), 0, 0},
    {"observed_rate", offsetof(eddy_scaling_effect_t, observed_rate), 0, 0},
    {"predicted_utilisation", offsetof(eddy_scaling_effect_t, predicted_utilisation), 0, 0},
    {"observed_utilisation", offsetof(eddy_scaling_effect_t, observed_utilisation), 0, 0},
};
#define EFFECT_FIELD_COUNT (sizeof EFFECT_FIELDS / sizeof EFFECT_FIELDS[0])
static const char *const EFFECT_INT_KEYS[] = {"decided_ms", "from", "to", NULL};

/* The keys a decision may have besides the struct's own: what its writers
 * add (the controller: job_time_ms; the worker pool: kind "pool",
 * target_workers and worker). Anything else is refused, so what is stored
 * and shown is exactly this schema. */
static const char *const DECISION_KEYS[] = {
    "time_ms", "job", "operator", "old_parallelism", "new_parallelism", "action", "applied",
    "infeasible", "reason", "rates", "job_time_ms", "kind", "target_workers", "worker",
    "memory_parallelism", "policy", "effect", NULL};
/* The worker pool's "worker": a container or process name. */
#define DECISION_WORKER_MAX 128

/* Takes ownership of value; a NULL value (failed allocation) counts as failure. */
static int set_owned(json_t *obj, const char *key, json_t *value)
{
    return value ? json_object_set_new(obj, key, value) : -1;
}

static json_t *rate_value(double rate)
{
    return isfinite(rate) ? json_real(rate) : json_null();
}

/* The fields[0..count) of base as numbers (NaN as null; optional unknown
 * ones left out). */
static json_t *numbers_to_json(const void *base, const rate_field_t *fields, size_t count)
{
    json_t *obj = json_object();
    if (!obj)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        const double *value = (const double *)((const char *)base + fields[i].offset);
        if (fields[i].optional && !isfinite(*value))
            continue;
        if (set_owned(obj, fields[i].key, rate_value(*value)) < 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

static json_t *effect_to_json(const eddy_scaling_effect_t *e)
{
    json_t *obj = numbers_to_json(e, EFFECT_FIELDS, EFFECT_FIELD_COUNT);
    if (obj && (set_owned(obj, "decided_ms", json_integer((json_int_t)e->decided_ms)) < 0 ||
                set_owned(obj, "from", json_integer(e->from)) < 0 ||
                set_owned(obj, "to", json_integer(e->to)) < 0)) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

json_t *eddy_scaling_decision_to_json(const eddy_scaling_decision_t *d, eddy_err_t *err)
{
    if (!d) {
        eddy_err_set(err, "decision json: no decision");
        return NULL;
    }
    json_t *obj = json_object();
    if (!obj) {
        eddy_err_set(err, "decision json: out of memory");
        return NULL;
    }
    int failed = 0;
    failed |= set_owned(obj, "time_ms", json_integer((json_int_t)d->time_ms));
    failed |= set_owned(obj, "job", json_string(d->job));
    failed |= set_owned(obj, "operator", json_string(d->operator_name));
    failed |= set_owned(obj, "old_parallelism", json_integer(d->old_parallelism));
    failed |= set_owned(obj, "new_parallelism", json_integer(d->new_parallelism));
    failed |= set_owned(obj, "action", json_string(eddy_scaling_action_name(d->action)));
    failed |= set_owned(obj, "applied", json_boolean(d->applied));
    failed |= set_owned(obj, "infeasible", json_boolean(d->infeasible));
    failed |= set_owned(obj, "reason", json_string(d->reason));
    failed |= set_owned(obj, "rates", numbers_to_json(&d->rates, RATE_FIELDS, RATE_FIELD_COUNT));
    if (d->effect.known)
        failed |= set_owned(obj, "effect", effect_to_json(&d->effect));
    if (d->memory_parallelism)
        failed |= set_owned(obj, "memory_parallelism", json_integer(d->memory_parallelism));
    if (d->policy[0])
        failed |= set_owned(obj, "policy", json_string(d->policy));
    if (failed) {
        /* json_string() also fails on invalid UTF-8, e.g. a cut-off name. */
        json_decref(obj);
        eddy_err_set(err, "decision json: cannot encode decision for operator %.63s "
                          "(out of memory or invalid UTF-8)",
                     d->operator_name);
        return NULL;
    }
    return obj;
}

static const json_t *require_key(const json_t *obj, const char *key, eddy_err_t *err)
{
    const json_t *value = json_object_get(obj, key);
    if (!value)
        eddy_err_set(err, "decision json: missing key \"%s\"", key);
    return value;
}

/* Copies a JSON string of fewer than cap bytes, without embedded NULs. */
static int decode_string(const json_t *obj, const char *key, char *out, size_t cap,
                         int allow_empty, eddy_err_t *err)
{
    const json_t *value = require_key(obj, key, err);
    if (!value)
        return -1;
    if (!json_is_string(value))
        return eddy_err_set(err, "decision json: \"%s\" must be a string", key);
    const char *text = json_string_value(value);
    size_t len = json_string_length(value);
    if (strlen(text) != len)
        return eddy_err_set(err, "decision json: \"%s\" contains a NUL byte", key);
    if (len >= cap)
        return eddy_err_set(err, "decision json: \"%s\" longer than %zu bytes", key, cap - 1);
    if (len == 0 && !allow_empty)
        return eddy_err_set(err, "decision json: \"%s\" must not be empty", key);
    memcpy(out, text, len + 1);
    return 0;
}

static int decode_parallelism(const json_t *obj, const char *key, json_int_t min, uint32_t *out,
                              eddy_err_t *err)
{
    const json_t *value = require_key(obj, key, err);
    if (!value)
        return -1;
    if (!json_is_integer(value))
        return eddy_err_set(err, "decision json: \"%s\" must be an integer", key);
    json_int_t n = json_integer_value(value);
    if (n < min || n > (json_int_t)UINT32_MAX)
        return eddy_err_set(err, "decision json: \"%s\" = %lld out of range [%lld, %u]", key,
                            (long long)n, (long long)min, UINT32_MAX);
    *out = (uint32_t)n;
    return 0;
}

/* One number of the object named prefix ("rates", "effect"). */
static int decode_number(const json_t *obj, const char *prefix, const rate_field_t *field,
                         double *out, eddy_err_t *err)
{
    const json_t *value = json_object_get(obj, field->key);
    if (!value && field->optional) {
        *out = NAN;
        return 0;
    }
    if (!value)
        return eddy_err_set(err, "decision json: missing key \"%s.%s\"", prefix, field->key);
    if (json_is_null(value)) {
        *out = NAN;
        return 0;
    }
    if (!json_is_number(value))
        return eddy_err_set(err, "decision json: \"%s.%s\" must be a number or null", prefix,
                            field->key);
    double number = json_number_value(value);
    if (!isfinite(number) || number < 0.0 || (field->is_fraction_of_one && number > 1.0))
        return eddy_err_set(err, "decision json: \"%s.%s\" = %g out of range [0, %s]", prefix,
                            field->key, number, field->is_fraction_of_one ? "1" : "inf");
    *out = number;
    return 0;
}

static int decode_numbers(const json_t *obj, const char *prefix, const rate_field_t *fields,
                          size_t count, void *base, eddy_err_t *err)
{
    for (size_t i = 0; i < count; i++) {
        double *value = (double *)((char *)base + fields[i].offset);
        if (decode_number(obj, prefix, &fields[i], value, err) < 0)
            return -1;
    }
    return 0;
}

/* "effect" (optional): an applied rescale's prediction against what it did. */
static int decode_effect(const json_t *obj, eddy_scaling_effect_t *e, eddy_err_t *err)
{
    memset(e, 0, sizeof *e);
    const json_t *effect = json_object_get(obj, "effect");
    if (!effect)
        return 0;
    if (!json_is_object(effect))
        return eddy_err_set(err, "decision json: \"effect\" must be an object");
    const json_t *decided = json_object_get(effect, "decided_ms");
    if (!json_is_integer(decided) || json_integer_value(decided) < 0)
        return eddy_err_set(err, "decision json: \"effect.decided_ms\" must be an integer >= 0");
    e->decided_ms = (int64_t)json_integer_value(decided);
    if (decode_parallelism(effect, "from", 1, &e->from, err) < 0 ||
        decode_parallelism(effect, "to", 1, &e->to, err) < 0 ||
        decode_numbers(effect, "effect", EFFECT_FIELDS, EFFECT_FIELD_COUNT, e, err) < 0)
        return -1;
    e->known = true;
    return 0;
}

static int check_action_matches(const eddy_scaling_decision_t *d, eddy_err_t *err)
{
    int ok;
    switch (d->action) {
    case EDDY_SCALING_SCALE_UP:
        ok = d->new_parallelism > d->old_parallelism;
        break;
    case EDDY_SCALING_SCALE_DOWN:
        ok = d->new_parallelism < d->old_parallelism;
        break;
    default:
        ok = d->new_parallelism == d->old_parallelism && !d->applied;
        break;
    }
    if (!ok)
        return eddy_err_set(err,
                            "decision json: action %s does not fit parallelism %u -> %u%s",
                            eddy_scaling_action_name(d->action), d->old_parallelism,
                            d->new_parallelism, d->applied ? " (applied)" : "");
    return 0;
}

static bool known_key(const char *key, const char *const *keys)
{
    for (; *keys; keys++)
        if (!strcmp(key, *keys))
            return true;
    return false;
}

static bool known_field(const char *key, const rate_field_t *fields, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!strcmp(key, fields[i].key))
            return true;
    return false;
}

/* The object obj[name], when present, has no key but fields' and ints'. */
static int check_nested_keys(const json_t *obj, const char *name, const rate_field_t *fields,
                             size_t count, const char *const *ints, eddy_err_t *err)
{
    const json_t *nested = json_object_get(obj, name);
    const char *key;
    const json_t *value;
    if (json_is_object(nested))
        json_object_foreach((json_t *)nested, key, value) {
            if (!known_field(key, fields, count) && !(ints && known_key(key, ints)))
                return eddy_err_set(err, "decision json: unknown key \"%s.%.64s\"", name, key);
        }
    return 0;
}

static int check_keys(const json_t *obj, eddy_err_t *err)
{
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        if (!known_key(key, DECISION_KEYS))
            return eddy_err_set(err, "decision json: unknown key \"%.64s\"", key);
    }
    if (check_nested_keys(obj, "rates", RATE_FIELDS, RATE_FIELD_COUNT, NULL, err) < 0 ||
        check_nested_keys(obj, "effect", EFFECT_FIELDS, EFFECT_FIELD_COUNT, EFFECT_INT_KEYS,
                          err) < 0)
        return -1;
    return 0;
}

/* An optional integer in [0, max]. */
static int check_count(const json_t *obj, const char *key, json_int_t max, eddy_err_t *err)
{
    const json_t *value = json_object_get(obj, key);
    if (value && (!json_is_integer(value) || json_integer_value(value) < 0 ||
                  json_integer_value(value) > max))
        return eddy_err_set(err, "decision json: \"%s\" must be an integer in [0, %lld]", key,
                            (long long)max);
    return 0;
}

/* The writers' keys (DECISION_KEYS); *pool tells a worker pool's decision. */
static int check_extras(const json_t *obj, bool *pool, eddy_err_t *err)
{
    *pool = false;
    const json_t *kind = json_object_get(obj, "kind");
    if (kind) {
        if (!json_is_string(kind) || strcmp(json_string_value(kind), "pool"))
            return eddy_err_set(err, "decision json: \"kind\" must be \"pool\" when present");
        *pool = true;
    }
    if (check_count(obj, "job_time_ms", INT64_MAX, err) < 0 ||
        check_count(obj, "target_workers", UINT32_MAX, err) < 0)
        return -1;
    if (!*pool && (json_object_get(obj, "target_workers") || json_object_get(obj, "worker")))
        return eddy_err_set(err, "decision json: \"target_workers\" and \"worker\" belong to "
                                 "a worker pool's decision (\"kind\": \"pool\")");
    char worker[DECISION_WORKER_MAX];
    if (json_object_get(obj, "worker") &&
        decode_string(obj, "worker", worker, sizeof worker, 0, err) < 0)
        return -1;
    return 0;
}

int eddy_scaling_decision_check_json(const json_t *obj, eddy_err_t *err)
{
    eddy_scaling_decision_t d;
    return eddy_scaling_decision_from_json(obj, &d, err);
}

int eddy_scaling_decision_from_json(const json_t *obj, eddy_scaling_decision_t *out,
                                    eddy_err_t *err)
{
    if (!out)
        return eddy_err_set(err, "decision json: no output decision");
    if (!json_is_object(obj))
        return eddy_err_set(err, "decision json: not an object");
    bool pool;
    if (check_keys(obj, err) < 0 || check_extras(obj, &pool, err) < 0)
        return -1;
    /* a pool's "parallelism" is its live workers, which may be none */
    json_int_t min_parallelism = pool ? 0 : 1;
    eddy_scaling_decision_t d;
    memset(&d, 0, sizeof d);

    const json_t *time_ms = require_key(obj, "time_ms", err);
    if (!time_ms)
        return -1;
    if (!json_is_integer(time_ms) || json_integer_value(time_ms) < 0)
        return eddy_err_set(err, "decision json: \"time_ms\" must be an integer >= 0");
    d.time_ms = (int64_t)json_integer_value(time_ms);

    if (decode_string(obj, "job", d.job, sizeof d.job, 1, err) < 0 ||
        decode_string(obj, "operator", d.operator_name, sizeof d.operator_name, 0, err) < 0 ||
        decode_string(obj, "reason", d.reason, sizeof d.reason, 1, err) < 0 ||
        decode_parallelism(obj, "old_parallelism", min_parallelism, &d.old_parallelism, err) < 0 ||
        decode_parallelism(obj, "new_parallelism", min_parallelism, &d.new_parallelism, err) < 0)
        return -1;

    const json_t *action = require_key(obj, "action", err);
    if (!action)
        return -1;
    if (!json_is_string(action) ||
        eddy_scaling_action_parse(json_string_value(action), &d.action) < 0)
        return eddy_err_set(err,
                            "decision json: \"action\" must be \"scale_up\", \"scale_down\" or "
                            "\"no_change\"");

    const json_t *applied = require_key(obj, "applied", err);
    if (!applied)
        return -1;
    if (!json_is_boolean(applied))
        return eddy_err_set(err, "decision json: \"applied\" must be true or false");
    d.applied = json_is_true(applied);
    /* optional: decisions stored before it existed have none */
    const json_t *infeasible = json_object_get(obj, "infeasible");
    if (infeasible && !json_is_boolean(infeasible))
        return eddy_err_set(err, "decision json: \"infeasible\" must be true or false");
    d.infeasible = json_is_true(infeasible);
    /* optional: decisions stored before policies were selectable have none */
    if (json_object_get(obj, "policy") &&
        decode_string(obj, "policy", d.policy, sizeof d.policy, 0, err) < 0)
        return -1;
    /* optional: only decisions under a state budget have it */
    if (json_object_get(obj, "memory_parallelism") &&
        decode_parallelism(obj, "memory_parallelism", 1, &d.memory_parallelism, err) < 0)
        return -1;

    const json_t *rates = require_key(obj, "rates", err);
    if (!rates)
        return -1;
    if (!json_is_object(rates))
        return eddy_err_set(err, "decision json: \"rates\" must be an object");
    if (decode_numbers(rates, "rates", RATE_FIELDS, RATE_FIELD_COUNT, &d.rates, err) < 0 ||
        decode_effect(obj, &d.effect, err) < 0)
        return -1;

    if (check_action_matches(&d, err) < 0)
        return -1;
    *out = d;
    return 0;
}
