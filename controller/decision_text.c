/* decision_text.c - a recorded scaling decision as one readable line (see
 * decision_text.h). Reads the JSON leniently: a field that is missing or
 * of another type prints as "?" rather than failing the whole listing. */
#include "controller/decision_text.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"

static const char *str_or(const json_t *d, const char *key, const char *fallback)
{
    const char *s = json_string_value(json_object_get(d, key));
    return s ? s : fallback;
}

bool eddy_scaling_decision_changes(const json_t *decision)
{
    return strcmp(str_or(decision, "action", "no_change"), "no_change") != 0;
}

char *eddy_scaling_decision_text(const json_t *d, char *buf, size_t size)
{
    char when[48] = "?", job_time[48] = "";
    const json_t *t = json_object_get(d, "time_ms");
    if (json_is_integer(t))
        eddy_format_local_time(when, sizeof when, (int64_t)json_integer_value(t));
    const json_t *jt = json_object_get(d, "job_time_ms");
    if (json_is_integer(jt))
        snprintf(job_time, sizeof job_time, " at %.1f s", (double)json_integer_value(jt) / 1000.0);
    long long from = (long long)json_integer_value(json_object_get(d, "old_parallelism"));
    long long to = (long long)json_integer_value(json_object_get(d, "new_parallelism"));
    char change[64];
    if (eddy_scaling_decision_changes(d))
        snprintf(change, sizeof change, "%lld -> %lld", from, to);
    else
        snprintf(change, sizeof change, "%lld", from);
    const char *applied = !eddy_scaling_decision_changes(d) || json_is_true(json_object_get(d, "applied"))
                              ? ""
                              : " (not applied)";
    char policy[40] = ""; /* only decisions that name theirs */
    if (json_is_string(json_object_get(d, "policy")))
        snprintf(policy, sizeof policy, " [%.24s]", str_or(d, "policy", ""));
    snprintf(buf, size, "%s %s/%s %s %s%s%s%s: %s", when, str_or(d, "job", "?"),
             str_or(d, "operator", "?"), change, str_or(d, "action", "?"), applied, job_time,
             policy, str_or(d, "reason", ""));
    return buf;
}

/* Appends ", " (after the first input) and text to buf (size bytes). */
static void add_input(char *buf, size_t size, const char *text)
{
    size_t used = strnlen(buf, size);
    snprintf(buf + used, size - used, "%s%s", used > strlen("inputs: ") ? ", " : "", text);
}

/* A rate of the decision, or NAN when it is absent or null. */
static double rate_of(const json_t *d, const char *key)
{
    const json_t *v = json_object_get(json_object_get(d, "rates"), key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

char *eddy_scaling_decision_inputs_text(const json_t *d, char *buf, size_t size)
{
    if (!size)
        return NULL;
    snprintf(buf, size, "inputs: ");
    double observed = rate_of(d, "observed_input_rate"), target = rate_of(d, "target_input_rate");
    double per_instance = rate_of(d, "true_rate_per_instance"), busy = rate_of(d, "utilisation");
    double backlog = rate_of(d, "backlog"), p99 = rate_of(d, "latency_p99_ms");
    double state = rate_of(d, "state_bytes");
    char text[96] = "";
    if (isfinite(observed) && isfinite(target))
        snprintf(text, sizeof text, "processed %.0f rec/s of %.0f wanted", observed, target);
    else if (isfinite(observed))
        snprintf(text, sizeof text, "processed %.0f rec/s", observed);
    else if (isfinite(target))
        snprintf(text, sizeof text, "%.0f rec/s wanted", target);
    if (isfinite(observed) || isfinite(target))
        add_input(buf, size, text);
    if (isfinite(per_instance)) {
        snprintf(text, sizeof text, "%.0f rec/s per instance when busy", per_instance);
        add_input(buf, size, text);
    }
    if (isfinite(busy)) {
        snprintf(text, sizeof text, "busy %.0f%%", busy * 100.0);
        add_input(buf, size, text);
    }
    if (isfinite(backlog)) {
        snprintf(text, sizeof text, "backlog %.0f", backlog);
        add_input(buf, size, text);
    }
    if (isfinite(p99)) {
        snprintf(text, sizeof text, "p99 %.0f ms", p99);
        add_input(buf, size, text);
    }
    if (isfinite(state)) {
        snprintf(text, sizeof text, "state %.1f MB", state / (1024.0 * 1024.0));
        add_input(buf, size, text);
    }
    if (strlen(buf) == strlen("inputs: ")) {
        buf[0] = '\0';
        return NULL;
    }
    return buf;
}
