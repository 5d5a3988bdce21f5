/* test_savepoint_manifest.c - the savepoint manifest (state/savepoint_manifest.c):
 * round trip of every member, the documented JSON names, key-group ranges
 * derived from the parallelism, and malformed documents refused by name
 * (a newer format version first of all). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/savepoint_manifest.h"

static eddy_savepoint_manifest_t sample(eddy_savepoint_operator_t *ops,
                                        eddy_savepoint_position_t *pos)
{
    memset(ops, 0, 2 * sizeof *ops);
    snprintf(ops[0].uid, sizeof ops[0].uid, "source");
    ops[0].source = true;
    ops[0].parallelism = 1;
    ops[0].n_kinds = 0;
    snprintf(ops[1].uid, sizeof ops[1].uid, "count");
    ops[1].keyed = true;
    ops[1].parallelism = 3;
    ops[1].n_kinds = 2;
    snprintf(ops[1].kinds[0], sizeof ops[1].kinds[0], "count");
    snprintf(ops[1].kinds[1], sizeof ops[1].kinds[1], "changelog");
    ops[1].n_states = 2;
    snprintf(ops[1].states[0].name, sizeof ops[1].states[0].name, "seen");
    ops[1].states[0].version = 1;
    snprintf(ops[1].states[1].name, sizeof ops[1].states[1].name, "count");
    ops[1].states[1].version = 3;
    memset(pos, 0, sizeof *pos);
    snprintf(pos->op, sizeof pos->op, "source");
    pos->position = 4242;
    pos->state = "\x01\x00\x02";
    pos->state_len = 3;
    eddy_savepoint_manifest_t m = {.format_version = EDDY_SAVEPOINT_FORMAT_VERSION,
                                   .checkpoint = 9, .plan_fingerprint = 0xfedcba9876543210ull,
                                   .max_parallelism = 128, .created_ms = 1700000000000,
                                   .stopped = true, .sinks_committed = 9, .n_operators = 2,
                                   .operators = ops, .n_positions = 1, .positions = pos};
    snprintf(m.job, sizeof m.job, "wordcount");
    return m;
}

Test(savepoint_manifest, round_trip)
{
    eddy_savepoint_operator_t ops[2];
    eddy_savepoint_position_t pos;
    eddy_savepoint_manifest_t m = sample(ops, &pos);
    eddy_savepoint_manifest_t built = {0};
    cr_assert_eq(eddy_savepoint_manifest_add_file(&built, "wordcount/chk-9/count/kg-0.snap", 64), 0);
    m.files = built.files;
    m.n_files = built.n_files;
    size_t len = 0;
    char *text = eddy_savepoint_manifest_encode(&m, &len);
    cr_assert_not_null(text);
    cr_assert_eq(strlen(text), len);
    cr_assert(strstr(text, "\"format_version\": 1"));
    cr_assert(strstr(text, "\"plan_fingerprint\": \"fedcba9876543210\""));
    cr_assert(strstr(text, "\"state\": \"AQAC\""));
    eddy_savepoint_manifest_t out;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_savepoint_manifest_decode(text, len, &out, &err), 0, "%s", err.msg);
    cr_assert_str_eq(out.job, "wordcount");
    cr_assert_eq(out.checkpoint, 9);
    cr_assert_eq(out.plan_fingerprint, 0xfedcba9876543210ull);
    cr_assert_eq(out.max_parallelism, 128);
    cr_assert(out.stopped);
    cr_assert_eq(out.sinks_committed, 9);
    cr_assert_eq(out.n_operators, 2);
    const eddy_savepoint_operator_t *count = eddy_savepoint_manifest_operator(&out, "count");
    cr_assert_not_null(count);
    cr_assert(count->keyed && !count->source);
    cr_assert_eq(count->parallelism, 3);
    cr_assert_eq(count->n_kinds, 2);
    cr_assert_str_eq(count->kinds[1], "changelog");
    cr_assert_eq(count->n_states, 2, "named states and their schema versions");
    cr_assert_str_eq(count->states[1].name, "count");
    cr_assert_eq(count->states[1].version, 3);
    cr_assert_eq(eddy_savepoint_manifest_operator(&out, "source")->n_states, 0);
    cr_assert_null(eddy_savepoint_manifest_operator(&out, "nope"));
    cr_assert_eq(out.n_positions, 1);
    cr_assert_eq(out.positions[0].position, 4242);
    cr_assert_eq(out.positions[0].state_len, 3);
    cr_assert(!memcmp(out.positions[0].state, "\x01\x00\x02", 3));
    cr_assert_eq(out.n_files, 1);
    cr_assert_str_eq(out.files[0].key, "wordcount/chk-9/count/kg-0.snap");
    cr_assert_eq(out.files[0].size, 64);
    /* ranges as Flink's KeyGroupRangeAssignment: 128 groups over 3 */
    cr_assert(strstr(text, "43"));
    eddy_savepoint_manifest_clear(&out);
    eddy_savepoint_manifest_clear(&built);
    free(text);
}

/* decode of text must fail with a message containing want */
static void refused(const char *text, const char *want)
{
    eddy_savepoint_manifest_t out;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_savepoint_manifest_decode(text, strlen(text), &out, &err), -1, "%s", text);
    cr_assert(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
    eddy_savepoint_manifest_clear(&out);
}

#define HEAD "\"job\": \"wc\", \"checkpoint\": 3, \"plan_fingerprint\": \"0000000000000001\", " \
             "\"max_parallelism\": 128"

Test(savepoint_manifest, malformed_refused)
{
    refused("{\"format_version\": 2, " HEAD ", \"operators\": [], \"positions\": [], \"files\": []}",
            "format version 2 is newer");
    refused("not json", "not valid JSON");
    refused("[]", "not a JSON object");
    refused("{\"format_version\": 1, \"checkpoint\": 3}", "\"job\"");
    refused("{\"format_version\": 1, " HEAD ", \"positions\": [], \"files\": []}", "\"operators\"");
    refused("{\"format_version\": 1, " HEAD ", \"operators\": [{\"uid\": \"a\", \"parallelism\": 1, "
            "\"kinds\": []}, {\"uid\": \"a\", \"parallelism\": 1, \"kinds\": []}], "
            "\"positions\": [], \"files\": []}", "two operators");
    refused("{\"format_version\": 1, " HEAD ", \"operators\": [{\"uid\": \"a\", \"parallelism\": 1, "
            "\"kinds\": [], \"key_groups\": [[0, 129]]}], \"positions\": [], \"files\": []}",
            "key group range");
    refused("{\"format_version\": 1, " HEAD ", \"operators\": [], \"positions\": [{\"operator\": "
            "\"s\", \"instance\": 0, \"position\": 1, \"state\": \"!!\"}], \"files\": []}", "base64");
    refused("{\"format_version\": 1, " HEAD ", \"operators\": [], \"positions\": [], "
            "\"files\": [{\"key\": \"../etc/passwd\", \"size\": 1}]}", "relative key");
    refused("{\"format_version\": 1, \"job\": \"wc\", \"checkpoint\": 3, \"plan_fingerprint\": "
            "\"xyz\", \"max_parallelism\": 128, \"operators\": [], \"positions\": [], \"files\": []}",
            "plan_fingerprint");
}

/* A manifest written before named state has no "states": none recorded. A
 * malformed one is refused. */
Test(savepoint_manifest, states_are_optional_and_checked)
{
    const char *old = "{\"format_version\": 1, \"job\": \"j\", \"checkpoint\": 1, "
                      "\"plan_fingerprint\": \"0000000000000001\", \"max_parallelism\": 8, "
                      "\"created_ms\": 1, \"stopped\": false, \"sinks_committed\": 0, "
                      "\"operators\": [{\"uid\": \"c\", \"keyed\": true, \"source\": false, "
                      "\"parallelism\": 1, \"kinds\": [\"process\"]%s}], \"positions\": [], "
                      "\"files\": []}";
    char text[1024];
    eddy_savepoint_manifest_t out;
    eddy_err_t err = {{0}};
    snprintf(text, sizeof text, old, "");
    cr_assert_eq(eddy_savepoint_manifest_decode(text, strlen(text), &out, &err), 0, "%s", err.msg);
    cr_assert_eq(out.operators[0].n_states, 0);
    eddy_savepoint_manifest_clear(&out);
    snprintf(text, sizeof text, old, ", \"states\": [{\"name\": \"s\"}]");
    cr_assert_eq(eddy_savepoint_manifest_decode(text, strlen(text), &out, &err), -1);
    cr_assert(strstr(err.msg, "operator c: state 0"), "%s", err.msg);
    eddy_savepoint_manifest_clear(&out);
}
