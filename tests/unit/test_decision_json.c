/* test_decision_json.c - scaling decisions to JSON and back: a round trip
 * (through text, as the store keeps it), NaN as null, and rejection of
 * missing keys, wrong types, out-of-range values and inconsistent actions. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/decision_json.h"
#include "controller/pool.h"

static eddy_scaling_decision_t sample_decision(void)
{
    eddy_scaling_decision_t d;
    memset(&d, 0, sizeof d);
    d.time_ms = 1700000000123;
    strcpy(d.job, "wordcount");
    strcpy(d.operator_name, "count");
    d.old_parallelism = 1;
    d.new_parallelism = 4;
    d.action = EDDY_SCALING_SCALE_UP;
    d.applied = true;
    strcpy(d.reason, "target 25000 rec/s / (10000 rec/s per instance x 0.80) = 3.12 -> 4");
    d.rates.target_input_rate = 25000.0;
    d.rates.true_rate_per_instance = 10000.0;
    d.rates.observed_input_rate = 9876.5;
    d.rates.selectivity = 1.0 / 3.0;
    d.rates.utilisation = 0.99;
    d.rates.target_utilisation = 0.8;
    d.rates.projected_utilisation = 0.625;
    return d;
}

static json_t *encode(const eddy_scaling_decision_t *d)
{
    eddy_err_t err = {{0}};
    json_t *obj = eddy_scaling_decision_to_json(d, &err);
    cr_assert_not_null(obj, "encode: %s", err.msg);
    return obj;
}

/* Encodes, dumps to text, parses back and decodes. */
static eddy_scaling_decision_t round_trip(const eddy_scaling_decision_t *d)
{
    json_t *obj = encode(d);
    char *text = json_dumps(obj, JSON_COMPACT);
    cr_assert_not_null(text);
    json_decref(obj);
    json_error_t json_err;
    json_t *parsed = json_loads(text, 0, &json_err);
    cr_assert_not_null(parsed, "parse %s: %s", text, json_err.text);
    free(text);
    eddy_scaling_decision_t back;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_scaling_decision_from_json(parsed, &back, &err), 0, "decode: %s", err.msg);
    json_decref(parsed);
    return back;
}

Test(decision_json, round_trip_keeps_every_field)
{
    eddy_scaling_decision_t d = sample_decision();
    eddy_scaling_decision_t back = round_trip(&d);

    cr_assert_eq(back.time_ms, d.time_ms);
    cr_assert_str_eq(back.job, d.job);
    cr_assert_str_eq(back.operator_name, d.operator_name);
    cr_assert_eq(back.old_parallelism, d.old_parallelism);
    cr_assert_eq(back.new_parallelism, d.new_parallelism);
    cr_assert_eq(back.action, d.action);
    cr_assert_eq(back.applied, d.applied);
    cr_assert_str_eq(back.reason, d.reason);
    /* %.17g keeps doubles exact */
    cr_assert_eq(back.rates.target_input_rate, d.rates.target_input_rate);
    cr_assert_eq(back.rates.true_rate_per_instance, d.rates.true_rate_per_instance);
    cr_assert_eq(back.rates.observed_input_rate, d.rates.observed_input_rate);
    cr_assert_eq(back.rates.selectivity, d.rates.selectivity);
    cr_assert_eq(back.rates.utilisation, d.rates.utilisation);
    cr_assert_eq(back.rates.target_utilisation, d.rates.target_utilisation);
    cr_assert_eq(back.rates.projected_utilisation, d.rates.projected_utilisation);
}

Test(decision_json, encodes_the_documented_keys)
{
    eddy_scaling_decision_t d = sample_decision();
    json_t *obj = encode(&d);
    cr_assert_eq(json_integer_value(json_object_get(obj, "time_ms")), 1700000000123);
    cr_assert_str_eq(json_string_value(json_object_get(obj, "job")), "wordcount");
    cr_assert_str_eq(json_string_value(json_object_get(obj, "operator")), "count");
    cr_assert_eq(json_integer_value(json_object_get(obj, "old_parallelism")), 1);
    cr_assert_eq(json_integer_value(json_object_get(obj, "new_parallelism")), 4);
    cr_assert_str_eq(json_string_value(json_object_get(obj, "action")), "scale_up");
    cr_assert(json_is_true(json_object_get(obj, "applied")));
    cr_assert_not_null(json_object_get(obj, "reason"));
    json_t *rates = json_object_get(obj, "rates");
    cr_assert(json_is_object(rates));
    const char *keys[] = {"target_input_rate", "true_rate_per_instance", "observed_input_rate",
                          "selectivity", "utilisation"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_assert(json_is_number(json_object_get(rates, keys[i])), "rates.%s", keys[i]);
    json_decref(obj);
}

Test(decision_json, unknown_rates_are_null_and_come_back_as_nan)
{
    eddy_scaling_decision_t d = sample_decision();
    d.action = EDDY_SCALING_NO_CHANGE;
    d.applied = false;
    d.new_parallelism = d.old_parallelism;
    d.rates.true_rate_per_instance = NAN;
    d.rates.projected_utilisation = NAN;
    json_t *obj = encode(&d);
    json_t *rates = json_object_get(obj, "rates");
    cr_assert(json_is_null(json_object_get(rates, "true_rate_per_instance")));
    json_decref(obj);

    eddy_scaling_decision_t back = round_trip(&d);
    cr_assert(isnan(back.rates.true_rate_per_instance));
    cr_assert(isnan(back.rates.projected_utilisation));
    cr_assert_eq(back.rates.target_input_rate, 25000.0);
}

/* Decoding text that is one edit away from a valid decision must fail with
 * a message naming the problem. */
static void expect_rejected(void (*mutate)(json_t *obj), const char *expected_in_message)
{
    eddy_scaling_decision_t d = sample_decision();
    json_t *obj = encode(&d);
    mutate(obj);
    eddy_scaling_decision_t out;
    memset(&out, 0x5a, sizeof out);
    eddy_scaling_decision_t untouched = out;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_scaling_decision_from_json(obj, &out, &err), -1);
    cr_assert(strstr(err.msg, expected_in_message), "expected \"%s\" in: %s",
              expected_in_message, err.msg);
    cr_assert_eq(memcmp(&out, &untouched, sizeof out), 0, "output written on failure");
    json_decref(obj);
}

static void drop_operator(json_t *o) { json_object_del(o, "operator"); }
static void drop_rate(json_t *o) { json_object_del(json_object_get(o, "rates"), "selectivity"); }
static void time_as_string(json_t *o) { json_object_set_new(o, "time_ms", json_string("now")); }
static void negative_time(json_t *o) { json_object_set_new(o, "time_ms", json_integer(-5)); }
static void zero_parallelism(json_t *o)
{
    json_object_set_new(o, "old_parallelism", json_integer(0));
}
static void huge_parallelism(json_t *o)
{
    json_object_set_new(o, "new_parallelism", json_integer(5000000000LL));
}
static void real_parallelism(json_t *o)
{
    json_object_set_new(o, "new_parallelism", json_real(4.0));
}
static void bad_action(json_t *o) { json_object_set_new(o, "action", json_string("sideways")); }
static void applied_as_int(json_t *o) { json_object_set_new(o, "applied", json_integer(1)); }
static void action_disagrees(json_t *o)
{
    json_object_set_new(o, "action", json_string("scale_down"));
}
static void negative_rate(json_t *o)
{
    json_object_set_new(json_object_get(o, "rates"), "target_input_rate", json_real(-1.0));
}
static void utilisation_above_one(json_t *o)
{
    json_object_set_new(json_object_get(o, "rates"), "target_utilisation", json_real(1.5));
}
static void rate_as_string(json_t *o)
{
    json_object_set_new(json_object_get(o, "rates"), "selectivity", json_string("1"));
}
static void rates_not_object(json_t *o) { json_object_set_new(o, "rates", json_array()); }
static void long_operator(json_t *o)
{
    char name[EDDY_SCALING_NAME_MAX + 1];
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    json_object_set_new(o, "operator", json_string(name));
}
static void empty_operator(json_t *o) { json_object_set_new(o, "operator", json_string("")); }
static void nul_in_job(json_t *o) { json_object_set_new(o, "job", json_stringn("a\0b", 3)); }
static void unknown_key(json_t *o) { json_object_set_new(o, "script", json_string("<img src=x>")); }
static void unknown_rate(json_t *o)
{
    json_object_set_new(json_object_get(o, "rates"), "evil", json_real(1.0));
}
static void parallelism_as_string(json_t *o)
{
    json_object_set_new(o, "old_parallelism", json_string("<img src=x onerror=alert(1)>"));
}
static void job_time_as_string(json_t *o) { json_object_set_new(o, "job_time_ms", json_string("1")); }
static void bad_kind(json_t *o) { json_object_set_new(o, "kind", json_string("<b>")); }
static void worker_without_pool(json_t *o) { json_object_set_new(o, "worker", json_string("w1")); }
static void long_worker(json_t *o)
{
    char name[300];
    memset(name, 'w', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    json_object_set_new(o, "kind", json_string("pool"));
    json_object_set_new(o, "worker", json_string(name));
}
static void long_reason(json_t *o)
{
    char text[EDDY_SCALING_REASON_MAX + 1];
    memset(text, 'r', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    json_object_set_new(o, "reason", json_string(text));
}

Test(decision_json, rejects_malformed_decisions)
{
    expect_rejected(drop_operator, "missing key \"operator\"");
    expect_rejected(drop_rate, "rates.selectivity");
    expect_rejected(time_as_string, "time_ms");
    expect_rejected(negative_time, "time_ms");
    expect_rejected(zero_parallelism, "old_parallelism");
    expect_rejected(huge_parallelism, "new_parallelism");
    expect_rejected(real_parallelism, "new_parallelism");
    expect_rejected(bad_action, "action");
    expect_rejected(applied_as_int, "applied");
    expect_rejected(action_disagrees, "does not fit");
    expect_rejected(negative_rate, "target_input_rate");
    expect_rejected(utilisation_above_one, "target_utilisation");
    expect_rejected(rate_as_string, "selectivity");
    expect_rejected(rates_not_object, "rates");
    expect_rejected(long_operator, "longer than");
    expect_rejected(empty_operator, "empty");
    expect_rejected(nul_in_job, "NUL");
    expect_rejected(unknown_key, "unknown key \"script\"");
    expect_rejected(unknown_rate, "unknown key \"rates.evil\"");
    expect_rejected(parallelism_as_string, "must be an integer");
    expect_rejected(job_time_as_string, "job_time_ms");
    expect_rejected(bad_kind, "kind");
    expect_rejected(worker_without_pool, "worker pool");
    expect_rejected(long_worker, "\"worker\" longer than");
    expect_rejected(long_reason, "\"reason\" longer than");
}

/* What the writers add is part of the schema: the controller's job_time_ms,
 * the pool's kind, target_workers and worker (with 0 live workers). */
Test(decision_json, writers_extra_keys_are_accepted)
{
    eddy_scaling_decision_t d = sample_decision();
    json_t *obj = encode(&d);
    json_object_set_new(obj, "job_time_ms", json_integer(12300));
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_scaling_decision_check_json(obj, &err), 0, "%s", err.msg);
    json_object_set_new(obj, "kind", json_string("pool"));
    json_object_set_new(obj, "target_workers", json_integer(3));
    json_object_set_new(obj, "worker", json_string("eddy-pool-2"));
    json_object_set_new(obj, "old_parallelism", json_integer(0));
    cr_assert_eq(eddy_scaling_decision_check_json(obj, &err), 0, "%s", err.msg);
    json_object_del(obj, "kind");
    cr_assert_eq(eddy_scaling_decision_check_json(obj, &err), -1);
    json_decref(obj);
}

Test(decision_json, rejects_non_objects)
{
    eddy_scaling_decision_t out;
    eddy_err_t err = {{0}};
    json_t *array = json_array();
    cr_assert_eq(eddy_scaling_decision_from_json(array, &out, &err), -1);
    cr_assert_eq(eddy_scaling_decision_from_json(NULL, &out, &err), -1);
    json_decref(array);
    cr_assert_null(eddy_scaling_decision_to_json(NULL, &err));
}

Test(decision_json, applied_no_change_is_inconsistent)
{
    eddy_scaling_decision_t d = sample_decision();
    d.action = EDDY_SCALING_NO_CHANGE;
    d.new_parallelism = d.old_parallelism;
    d.applied = true;
    json_t *obj = encode(&d);
    eddy_scaling_decision_t out;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_scaling_decision_from_json(obj, &out, &err), -1);
    json_decref(obj);
}

/* What the worker pool and the controller post passes the coordinator's
 * check: a pool growing from no live worker, and shrinking to none. */
Test(decision_json, pool_decisions_pass_the_check)
{
    eddy_pool_decision_t pd = {.time_ms = 5, .action = EDDY_POOL_GROW, .live = 0, .target = 2, .grow = 2};
    snprintf(pd.job, sizeof pd.job, "wordcount");
    snprintf(pd.reason, sizeof pd.reason, "2 slots wanted");
    json_t *doc = eddy_pool_decision_to_json(&pd, 1700000000000);
    eddy_err_t err = {{0}};
    cr_assert(doc);
    cr_assert_eq(eddy_scaling_decision_check_json(doc, &err), 0, "%s", err.msg);
    json_decref(doc);
    pd.action = EDDY_POOL_SHRINK;
    pd.live = 1;
    pd.target = 0;
    pd.grow = 0;
    snprintf(pd.release, sizeof pd.release, "eddy-pool-1");
    doc = eddy_pool_decision_to_json(&pd, 1700000000000);
    cr_assert(doc);
    cr_assert_eq(eddy_scaling_decision_check_json(doc, &err), 0, "%s", err.msg);
    json_decref(doc);
}

/* memory_parallelism (a state budget's need) is optional: absent when 0,
 * round-trips when set, and a zero or non-integer value is refused. */
static void zero_memory(json_t *o) { json_object_set_new(o, "memory_parallelism", json_integer(0)); }
static void memory_as_string(json_t *o)
{
    json_object_set_new(o, "memory_parallelism", json_string("3"));
}

Test(decision_json, memory_parallelism_is_optional)
{
    eddy_scaling_decision_t d = sample_decision();
    json_t *obj = encode(&d);
    cr_assert_null(json_object_get(obj, "memory_parallelism"));
    json_decref(obj);
    cr_assert_eq(round_trip(&d).memory_parallelism, 0);
    d.memory_parallelism = 3;
    cr_assert_eq(round_trip(&d).memory_parallelism, 3);
    expect_rejected(zero_memory, "memory_parallelism");
    expect_rejected(memory_as_string, "memory_parallelism");
}

/* "policy" (the rules that decided, policy.h) is optional: absent when
 * empty (the pool's decisions, older ones), round-trips when set, and an
 * empty or non-string value is refused. */
static void empty_policy(json_t *o) { json_object_set_new(o, "policy", json_string("")); }
static void policy_as_number(json_t *o) { json_object_set_new(o, "policy", json_integer(2)); }

Test(decision_json, policy_is_optional)
{
    eddy_scaling_decision_t d = sample_decision();
    json_t *obj = encode(&d);
    cr_assert_null(json_object_get(obj, "policy"));
    json_decref(obj);
    cr_assert_str_eq(round_trip(&d).policy, "");
    strcpy(d.policy, "flink");
    cr_assert_str_eq(round_trip(&d).policy, "flink");
    expect_rejected(empty_policy, "policy");
    expect_rejected(policy_as_number, "policy");
}

/* "effect" (an earlier rescale's prediction against what it did) and
 * "rates.state_bytes" are optional: absent when unknown, exact when set,
 * and a malformed effect is refused by name. */
static json_t *sample_effect(void)
{
    return json_pack("{s:I, s:i, s:i, s:f, s:f, s:f, s:f}", "decided_ms", (json_int_t)1000, "from",
                     1, "to", 4, "predicted_rate", 25000.0, "observed_rate", 24000.0,
                     "predicted_utilisation", 0.625, "observed_utilisation", 0.6);
}
static void effect_with_unknown_key(json_t *o)
{
    json_t *e = sample_effect();
    json_object_set_new(e, "bogus", json_integer(1));
    json_object_set_new(o, "effect", e);
}
static void effect_without_decided(json_t *o)
{
    json_t *e = sample_effect();
    json_object_del(e, "decided_ms");
    json_object_set_new(o, "effect", e);
}
static void effect_with_negative_rate(json_t *o)
{
    json_t *e = sample_effect();
    json_object_set_new(e, "observed_rate", json_real(-1.0));
    json_object_set_new(o, "effect", e);
}
static void effect_as_string(json_t *o) { json_object_set_new(o, "effect", json_string("good")); }

Test(decision_json, effect_and_state_bytes_are_optional)
{
    eddy_scaling_decision_t d = sample_decision();
    d.rates.state_bytes = NAN;
    json_t *obj = encode(&d);
    cr_assert_null(json_object_get(obj, "effect"));
    cr_assert_null(json_object_get(json_object_get(obj, "rates"), "state_bytes"));
    json_decref(obj);
    eddy_scaling_decision_t back = round_trip(&d);
    cr_assert_not(back.effect.known);
    cr_assert(isnan(back.rates.state_bytes));

    d.rates.state_bytes = 123456789.0;
    d.effect = (eddy_scaling_effect_t){.known = true, .decided_ms = 1000, .from = 1, .to = 4,
                                       .predicted_rate = 25000.0, .observed_rate = 24000.5,
                                       .predicted_utilisation = 0.625,
                                       .observed_utilisation = 0.6};
    back = round_trip(&d);
    cr_assert_eq(back.rates.state_bytes, 123456789.0);
    cr_assert(back.effect.known);
    cr_assert_eq(back.effect.decided_ms, 1000);
    cr_assert_eq(back.effect.from, 1);
    cr_assert_eq(back.effect.to, 4);
    cr_assert_eq(back.effect.predicted_rate, 25000.0);
    cr_assert_eq(back.effect.observed_rate, 24000.5);
    cr_assert_eq(back.effect.predicted_utilisation, 0.625);
    cr_assert_eq(back.effect.observed_utilisation, 0.6);

    expect_rejected(effect_with_unknown_key, "effect.bogus");
    expect_rejected(effect_without_decided, "effect.decided_ms");
    expect_rejected(effect_with_negative_rate, "effect.observed_rate");
    expect_rejected(effect_as_string, "\"effect\" must be an object");
}
