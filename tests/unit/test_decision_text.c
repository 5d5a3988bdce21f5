/* test_decision_text.c - what `eddy scaling` prints: local ISO 8601 times
 * with their offset, the job's time, honest rounding in the DS2 formula
 * (1.002 -> 2 is not shown as "1.00 -> 2"), and which decisions count as
 * changes (the rest are hidden without --all). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/fmt.h"
#include "controller/decision_text.h"
#include "tests/unit/leak_check.h"

TestSuite(decision_text, .fini = eddy_test_leak_check);

static void set_tz(const char *tz)
{
    setenv("TZ", tz, 1);
    tzset();
}

Test(decision_text, local_iso8601_with_offset)
{
    char buf[48];
    set_tz("UTC0");
    cr_assert_str_eq(eddy_format_local_time(buf, sizeof buf, 1764756902250), "2025-12-03T10:15:02+00:00");
    set_tz("CET-1"); /* POSIX: one hour east of UTC */
    cr_assert_str_eq(eddy_format_local_time(buf, sizeof buf, 1764756902250), "2025-12-03T11:15:02+01:00");
    set_tz("<-0330>3:30");
    cr_assert_str_eq(eddy_format_local_time(buf, sizeof buf, 1764756902250), "2025-12-03T06:45:02-03:30");
}

Test(decision_text, ceil_operands_are_shown_as_precisely_as_the_rounding_needs)
{
    char buf[32];
    cr_assert_str_eq(eddy_fmt_ceil_operand(buf, sizeof buf, 3.125, 4), "3.12");
    cr_assert_str_eq(eddy_fmt_ceil_operand(buf, sizeof buf, 1.002, 2), "1.002");
    cr_assert_str_eq(eddy_fmt_ceil_operand(buf, sizeof buf, 2.0004, 3), "2.0004");
    cr_assert_str_eq(eddy_fmt_ceil_operand(buf, sizeof buf, 1.999, 2), "2.00");
    cr_assert_str_eq(eddy_fmt_ceil_operand(buf, sizeof buf, 4.0, 4), "4.00");
    cr_assert_str_eq(eddy_fmt_ceil_operand(buf, sizeof buf, 0.3, 1), "0.30");
    /* a tolerance or a bound rounded it: show the value, not a false "x.00" */
    cr_assert_str_eq(eddy_fmt_ceil_operand(buf, sizeof buf, 2.0000000001, 2), "2.00");
    cr_assert_str_eq(eddy_fmt_ceil_operand(buf, sizeof buf, 7.5, 3), "7.5");
}

Test(decision_text, a_change_with_local_time_and_job_time)
{
    set_tz("UTC0");
    json_t *d = json_pack("{s:I, s:I, s:s, s:s, s:i, s:i, s:s, s:b, s:s}", "time_ms",
                          (json_int_t)1764756902250, "job_time_ms", (json_int_t)65230, "job",
                          "wordcount", "operator", "count", "old_parallelism", 2,
                          "new_parallelism", 4, "action", "scale_up", "applied", 1, "reason",
                          "target 25000 rec/s / (10000 rec/s per instance x 0.80) = 3.12 -> 4");
    char line[512];
    cr_assert(eddy_scaling_decision_changes(d));
    cr_assert_str_eq(eddy_scaling_decision_text(d, line, sizeof line),
                     "2025-12-03T10:15:02+00:00 wordcount/count 2 -> 4 scale_up at 65.2 s: target 25000 "
                     "rec/s / (10000 rec/s per instance x 0.80) = 3.12 -> 4");
    json_object_set_new(d, "applied", json_false());
    cr_assert(strstr(eddy_scaling_decision_text(d, line, sizeof line), "scale_up (not applied) at 65.2 s: "),
              "%s", line);
    json_object_set_new(d, "policy", json_string("ds2")); /* the rules that decided */
    cr_assert(strstr(eddy_scaling_decision_text(d, line, sizeof line),
                     "scale_up (not applied) at 65.2 s [ds2]: target"),
              "%s", line);
    json_decref(d);
}

Test(decision_text, no_change_and_old_records)
{
    set_tz("UTC0");
    json_t *d = json_pack("{s:I, s:s, s:s, s:i, s:i, s:s, s:b, s:s}", "time_ms", (json_int_t)1764756902250,
                          "job", "wordcount", "operator", "count", "old_parallelism", 3,
                          "new_parallelism", 3, "action", "no_change", "applied", 0, "reason", "ok");
    char line[512];
    cr_assert_not(eddy_scaling_decision_changes(d));
    cr_assert_str_eq(eddy_scaling_decision_text(d, line, sizeof line),
                     "2025-12-03T10:15:02+00:00 wordcount/count 3 no_change: ok");
    json_decref(d);
    json_t *empty = json_object();
    cr_assert_str_eq(eddy_scaling_decision_text(empty, line, sizeof line), "? ?/? 0 ?: ");
    json_decref(empty);
}

/* The inputs line lists what the decision knew, and nothing when it knew
 * none (older records, the pool's decisions). */
Test(decision_text, inputs_line_lists_the_known_inputs)
{
    json_t *d = json_pack("{s:{s:f, s:f, s:f, s:f, s:n, s:f, s:f}}", "rates", "observed_input_rate",
                          10000.0, "target_input_rate", 25000.0, "true_rate_per_instance", 10000.0,
                          "utilisation", 0.99, "selectivity", "backlog", 20000.0, "state_bytes",
                          12.0 * 1024 * 1024);
    char line[512];
    cr_assert_str_eq(eddy_scaling_decision_inputs_text(d, line, sizeof line),
                     "inputs: processed 10000 rec/s of 25000 wanted, 10000 rec/s per instance "
                     "when busy, busy 99%, backlog 20000, state 12.0 MB");
    json_object_del(json_object_get(d, "rates"), "observed_input_rate");
    json_object_set_new(json_object_get(d, "rates"), "latency_p99_ms", json_real(850.0));
    cr_assert_str_eq(eddy_scaling_decision_inputs_text(d, line, sizeof line),
                     "inputs: 25000 rec/s wanted, 10000 rec/s per instance when busy, busy 99%, "
                     "backlog 20000, p99 850 ms, state 12.0 MB");
    json_decref(d);
    d = json_pack("{s:{s:n, s:n}}", "rates", "target_input_rate", "utilisation");
    cr_assert_null(eddy_scaling_decision_inputs_text(d, line, sizeof line));
    cr_assert_str_eq(line, "");
    json_decref(d);
    char tiny[12];
    d = json_pack("{s:{s:f}}", "rates", "utilisation", 0.5);
    cr_assert_str_eq(eddy_scaling_decision_inputs_text(d, tiny, sizeof tiny), "inputs: bus");
    json_decref(d);
}
