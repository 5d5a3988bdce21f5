/* test_plan.c - the logical plan (plan/plan.c), the stream builder that
 * records it (plan/builder.c) and operator configurations (api/config.c).
 *
 * The plan is what the submitting side ships to workers, so its encoding
 * must round-trip exactly, reject every truncation and survive every byte
 * being replaced, and its fingerprint must change with any step, parallelism
 * or configuration value. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/config.h"
#include "api/stream.h"
#include "plan/builder.h"
#include "plan/explain.h"
#include "plan/plan.h"
#include "net/mpcodec.h"
#include "tests/unit/leak_check.h"

TestSuite(plan, .fini = eddy_test_leak_check);
TestSuite(config, .fini = eddy_test_leak_check);

/* wordcount's shape: source -> split, key_by(word) -> count, global -> sink. */
static eddy_plan_t *wordcount_plan(uint32_t count_parallelism, const char *output)
{
    eddy_job_builder_t *b = eddy_job_builder_new("wordcount");
    cr_assert(b);
    eddy_builder_set_default_parallelism(b, 2);
    eddy_config_t *src = eddy_config_new();
    eddy_config_set_str(src, "path", "/data/in.txt");
    eddy_config_set_int(src, "lines", 1000);
    eddy_stream_t lines = eddy_source(b, "source", "file", src);
    eddy_stream_t words = eddy_flat_map(lines, "split", "split_words", NULL);
    eddy_config_t *sum = eddy_config_new();
    eddy_config_set_bool(sum, "final", true);
    eddy_config_set_double(sum, "cost_us", 0.5);
    eddy_stream_t counts = eddy_aggregate(eddy_key_by(words, "whole_record"), "count", "sum", sum);
    eddy_set_parallelism(counts, count_parallelism);
    eddy_config_t *out = eddy_config_new();
    eddy_config_set_str(out, "path", output);
    eddy_sink(eddy_global(counts), "sink", "table_file", out);
    eddy_err_t err = {{0}};
    eddy_plan_t *p = eddy_job_builder_finish(b, &err);
    cr_assert(p, "%s", err.msg);
    eddy_job_builder_destroy(&b);
    return p;
}

Test(plan, builder_records_steps_and_chains_them_into_stages)
{
    eddy_plan_t *p = wordcount_plan(3, "out.tsv");
    cr_assert_eq(p->n_nodes, 4);
    cr_assert_eq(p->nodes[1].edge, EDDY_EDGE_FORWARD);
    cr_assert_eq(p->nodes[2].edge, EDDY_EDGE_HASH);
    cr_assert_str_eq(p->nodes[2].key_kind, "whole_record");
    cr_assert_eq(p->nodes[3].edge, EDDY_EDGE_GLOBAL);
    cr_assert_eq(eddy_plan_parallelism(p, 0), 2);
    cr_assert_eq(eddy_plan_parallelism(p, 2), 3);
    cr_assert_eq(eddy_plan_parallelism(p, 3), 1);
    uint32_t stage_of[4];
    eddy_err_t err;
    cr_assert_eq(eddy_plan_stages(p, stage_of, &err), 3);
    cr_assert_eq(stage_of[0], 0);
    cr_assert_eq(stage_of[1], 0, "split chains with its source");
    cr_assert_eq(stage_of[2], 1);
    cr_assert_eq(stage_of[3], 2);
    eddy_plan_destroy(&p);
    cr_assert_null(p);
}

Test(plan, chaining_stops_at_a_parallelism_change_and_a_fan_out)
{
    eddy_job_builder_t *b = eddy_job_builder_new("fan");
    eddy_stream_t s = eddy_source(b, "src", "generator", NULL);
    eddy_stream_t m = eddy_set_parallelism(eddy_map(s, "wide", "upper", NULL), 4);
    eddy_sink(m, "a", "changelog", NULL);
    eddy_sink(m, "b", "changelog", NULL);
    eddy_err_t err = {{0}};
    eddy_plan_t *p = eddy_job_builder_finish(b, &err);
    cr_assert(p, "%s", err.msg);
    uint32_t stage_of[4];
    cr_assert_eq(eddy_plan_stages(p, stage_of, &err), 4);
    eddy_plan_destroy(&p);
    eddy_job_builder_destroy(&b);
}

static void expect_invalid(eddy_job_builder_t *b, const char *needle)
{
    eddy_err_t err = {{0}};
    eddy_plan_t *p = eddy_job_builder_finish(b, &err);
    cr_assert_null(p, "expected an error containing '%s'", needle);
    cr_assert(strstr(err.msg, needle), "error '%s' lacks '%s'", err.msg, needle);
    eddy_job_builder_destroy(&b);
}

Test(plan, invalid_plans_are_refused_with_a_reason)
{
    eddy_job_builder_t *b = eddy_job_builder_new("dup");
    eddy_stream_t s = eddy_source(b, "x", "generator", NULL);
    eddy_sink(s, "x", "changelog", NULL);
    expect_invalid(b, "uid 'x'");

    b = eddy_job_builder_new("unkeyed");
    s = eddy_source(b, "src", "generator", NULL);
    eddy_keyed_stream_t k = {b, s.node, "whole_record"}; /* a hand-made handle with no HASH edge */
    eddy_reduce(k, "r", "sum", NULL);
    expect_invalid(b, "keyed");

    b = eddy_job_builder_new("toowide");
    eddy_builder_set_max_parallelism(b, 8);
    s = eddy_source(b, "src", "generator", NULL);
    eddy_set_parallelism(eddy_map(s, "m", "upper", NULL), 9);
    expect_invalid(b, "out of range 1..8");

    b = eddy_job_builder_new("sticky");
    eddy_builder_fail(b, "--lines: %s", "bad");
    s = eddy_source(b, "src", "generator", NULL);
    cr_assert_lt(s.node, 0);
    cr_assert_str_eq(eddy_builder_error(b), "--lines: bad");
    expect_invalid(b, "--lines: bad");

    b = eddy_job_builder_new("empty");
    expect_invalid(b, "no steps");
}

Test(plan, encoding_round_trips_exactly)
{
    eddy_plan_t *p = wordcount_plan(3, "out.tsv");
    size_t len;
    char *bytes = eddy_plan_encode(p, &len);
    cr_assert(bytes);
    eddy_err_t err = {{0}};
    eddy_plan_t *q = eddy_plan_decode(bytes, len, &err);
    cr_assert(q, "%s", err.msg);
    size_t len2;
    char *bytes2 = eddy_plan_encode(q, &len2);
    cr_assert_eq(len, len2);
    cr_assert_eq(memcmp(bytes, bytes2, len), 0);
    cr_assert_eq(eddy_plan_fingerprint(p), eddy_plan_fingerprint(q));
    cr_assert_str_eq(eddy_config_str(q->nodes[0].config, "path", NULL), "/data/in.txt");
    cr_assert_eq(eddy_config_int(q->nodes[0].config, "lines", 0), 1000);
    cr_assert(eddy_config_bool(q->nodes[2].config, "final", false));
    cr_assert_float_eq(eddy_config_double(q->nodes[2].config, "cost_us", 0), 0.5, 1e-12);
    free(bytes);
    free(bytes2);
    eddy_plan_destroy(&p);
    eddy_plan_destroy(&q);
}

Test(plan, every_truncation_is_rejected_and_no_byte_change_crashes)
{
    eddy_plan_t *p = wordcount_plan(3, "out.tsv");
    size_t len;
    char *bytes = eddy_plan_encode(p, &len);
    for (size_t cut = 0; cut < len; cut++) {
        eddy_err_t err = {{0}};
        eddy_plan_t *q = eddy_plan_decode(bytes, cut, &err);
        cr_assert_null(q, "a plan cut to %zu of %zu bytes was accepted", cut, len);
        cr_assert(err.msg[0]);
    }
    char *copy = malloc(len);
    for (size_t i = 0; i < len; i++) {
        for (int v = 0; v < 256; v += 17) {
            memcpy(copy, bytes, len);
            copy[i] = (char)v;
            eddy_err_t err = {{0}};
            eddy_plan_t *q = eddy_plan_decode(copy, len, &err);
            if (q) /* whatever decodes must be a valid plan */
                cr_assert_eq(eddy_plan_validate(q, &err), 0, "%s", err.msg);
            eddy_plan_destroy(&q);
        }
    }
    free(copy);
    free(bytes);
    eddy_plan_destroy(&p);
}

Test(plan, another_version_is_refused)
{
    eddy_plan_t *p = wordcount_plan(3, "out.tsv");
    size_t len;
    char *bytes = eddy_plan_encode(p, &len);
    cr_assert_eq((unsigned char)bytes[1], EDDY_PLAN_VERSION); /* [version, ...]: fixarray, fixint */
    bytes[1] = EDDY_PLAN_VERSION + 1;
    eddy_err_t err = {{0}};
    cr_assert_null(eddy_plan_decode(bytes, len, &err));
    cr_assert(strstr(err.msg, "version"), "%s", err.msg);
    free(bytes);
    eddy_plan_destroy(&p);
}

Test(plan, fingerprint_changes_with_any_step_parallelism_or_config)
{
    eddy_plan_t *base = wordcount_plan(3, "out.tsv");
    eddy_plan_t *same = wordcount_plan(3, "out.tsv");
    eddy_plan_t *wider = wordcount_plan(4, "out.tsv");
    eddy_plan_t *other_out = wordcount_plan(3, "other.tsv");
    uint64_t fp = eddy_plan_fingerprint(base);
    cr_assert_eq(fp, eddy_plan_fingerprint(same));
    cr_assert_neq(fp, eddy_plan_fingerprint(wider));
    cr_assert_neq(fp, eddy_plan_fingerprint(other_out));
    snprintf(same->nodes[1].kind, sizeof same->nodes[1].kind, "split_lines");
    cr_assert_neq(fp, eddy_plan_fingerprint(same));
    snprintf(same->nodes[1].kind, sizeof same->nodes[1].kind, "split_words");
    cr_assert_eq(fp, eddy_plan_fingerprint(same));
    eddy_set_name((eddy_stream_t){NULL, -1}, "ignored"); /* a failed handle is a no-op */
    snprintf(same->nodes[2].name, sizeof same->nodes[2].name, "counter");
    cr_assert_neq(fp, eddy_plan_fingerprint(same));
    eddy_plan_destroy(&base);
    eddy_plan_destroy(&same);
    eddy_plan_destroy(&wider);
    eddy_plan_destroy(&other_out);
}

Test(config, keys_are_sorted_so_the_encoding_is_canonical)
{
    eddy_config_t *a = eddy_config_new(), *b = eddy_config_new();
    eddy_config_set_int(a, "zeta", 1);
    eddy_config_set_str(a, "alpha", "x");
    eddy_config_set_str(b, "alpha", "y");
    eddy_config_set_int(b, "zeta", 1);
    eddy_config_set_str(b, "alpha", "x"); /* replaces */
    size_t la, lb;
    char *ea = eddy_config_encode(a, &la), *eb = eddy_config_encode(b, &lb);
    cr_assert_eq(la, lb);
    cr_assert_eq(memcmp(ea, eb, la), 0);
    cr_assert_eq(eddy_config_count(a), 2);
    cr_assert_str_eq(eddy_config_key_at(a, 0), "alpha");
    char buf[32];
    cr_assert_str_eq(eddy_config_text_at(a, 1, buf, sizeof buf), "1");
    /* wrong type or missing: the default */
    cr_assert_eq(eddy_config_int(a, "alpha", 7), 7);
    cr_assert_str_eq(eddy_config_str(NULL, "alpha", "d"), "d");
    free(ea);
    free(eb);
    eddy_config_destroy(&a);
    eddy_config_destroy(&b);
}

Test(config, decode_rejects_unsorted_duplicate_and_bad_entries)
{
    eddy_err_t err;
    /* [["b",1,1],["a",1,2]]: unsorted */
    const unsigned char unsorted[] = {0x92, 0x93, 0xa1, 'b', 0x01, 0x01, 0x93, 0xa1, 'a', 0x01, 0x02};
    cr_assert_null(eddy_config_decode(unsorted, sizeof unsorted, &err));
    /* [["a",1,1],["a",1,2]]: duplicate */
    const unsigned char dup[] = {0x92, 0x93, 0xa1, 'a', 0x01, 0x01, 0x93, 0xa1, 'a', 0x01, 0x02};
    cr_assert_null(eddy_config_decode(dup, sizeof dup, &err));
    /* [["a",9,1]]: unknown type */
    const unsigned char type[] = {0x91, 0x93, 0xa1, 'a', 0x09, 0x01};
    cr_assert_null(eddy_config_decode(type, sizeof type, &err));
    /* [["a",1,"x"]]: int entry holding a string */
    const unsigned char mismatch[] = {0x91, 0x93, 0xa1, 'a', 0x01, 0xa1, 'x'};
    cr_assert_null(eddy_config_decode(mismatch, sizeof mismatch, &err));
    /* [["a",1,5]]: fine */
    const unsigned char good[] = {0x91, 0x93, 0xa1, 'a', 0x01, 0x05};
    eddy_config_t *c = eddy_config_decode(good, sizeof good, &err);
    cr_assert(c, "%s", err.msg);
    cr_assert_eq(eddy_config_int(c, "a", 0), 5);
    eddy_config_destroy(&c);
}

Test(plan, explain_names_stages_steps_keys_and_configs)
{
    eddy_plan_t *p = wordcount_plan(3, "out.tsv");
    eddy_err_t err = {{0}};
    json_t *doc = eddy_plan_explain_json(p, &err);
    cr_assert(doc, "%s", err.msg);
    json_t *stages = json_object_get(doc, "stages");
    cr_assert_eq(json_array_size(stages), 3);
    json_t *count = json_array_get(stages, 1);
    cr_assert_str_eq(json_string_value(json_object_get(count, "name")), "count");
    cr_assert(json_is_true(json_object_get(count, "keyed")));
    cr_assert_eq(json_integer_value(json_object_get(count, "parallelism")), 3);
    cr_assert_str_eq(json_string_value(json_object_get(count, "key")), "whole_record");
    json_t *first = json_array_get(stages, 0);
    cr_assert_eq(json_array_size(json_object_get(first, "steps")), 2);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_eq(eddy_plan_explain_text(p, f, &err), 0, "%s", err.msg);
    fclose(f);
    cr_assert(strstr(text, "by key (whole_record), rescalable"), "%s", text);
    cr_assert(strstr(text, "path=\"/data/in.txt\""), "%s", text);
    free(text);
    json_decref(doc);
    eddy_plan_destroy(&p);
}

/* ---- two-input steps (eddy_process2) ------------------------------------ */

/* Persons and auctions from one source, connected into one keyed join. */
static eddy_plan_t *join_plan(const char *right_key, uint32_t join_parallelism)
{
    eddy_job_builder_t *b = eddy_job_builder_new("join");
    cr_assert(b);
    eddy_builder_set_default_parallelism(b, 2);
    eddy_stream_t events = eddy_source(b, "source", "nexmark", NULL);
    eddy_stream_t persons = eddy_filter(events, "persons", "is_person", NULL);
    eddy_stream_t auctions = eddy_filter(events, "auctions", "is_auction", NULL);
    eddy_stream_t joined = eddy_process2(eddy_key_by(persons, "person_id"),
                                         eddy_key_by(auctions, right_key), "join", "q3_join", NULL);
    eddy_set_parallelism(joined, join_parallelism);
    eddy_sink(eddy_global(joined), "sink", "print", NULL);
    eddy_err_t err = {{0}};
    eddy_plan_t *p = eddy_job_builder_finish(b, &err);
    cr_assert(p, "%s", err.msg);
    eddy_job_builder_destroy(&b);
    return p;
}

Test(plan, a_two_input_step_starts_a_keyed_stage_with_both_inputs)
{
    eddy_plan_t *p = join_plan("seller", 3);
    const eddy_plan_node_t *join = &p->nodes[3];
    cr_assert_eq(join->role, EDDY_NODE_PROCESS);
    cr_assert_eq(join->input, 1);
    cr_assert_eq(join->edge, EDDY_EDGE_HASH);
    cr_assert_str_eq(join->key_kind, "person_id");
    cr_assert_eq(join->second_input, 2);
    cr_assert_eq(join->second_edge, EDDY_EDGE_HASH);
    cr_assert_str_eq(join->second_key_kind, "seller");
    cr_assert_eq(p->nodes[1].second_input, -1, "one-input steps have no second input");
    uint32_t stage_of[5];
    eddy_err_t err = {{0}};
    /* The source feeds two steps, so neither chains with it. */
    cr_assert_eq(eddy_plan_stages(p, stage_of, &err), 5, "%s", err.msg);
    cr_assert_neq(stage_of[1], stage_of[0]);
    cr_assert_neq(stage_of[3], stage_of[1]);
    cr_assert_neq(stage_of[3], stage_of[2]);

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_eq(eddy_plan_explain_text(p, out, &err), 0, "%s", err.msg);
    fclose(out);
    cr_assert(strstr(text, "join  parallelism 3  <- stage 1 by key (person_id) and stage 2 by "
                           "key (seller), rescalable"), "%s", text);
    free(text);
    eddy_plan_destroy(&p);
}

Test(plan, two_input_steps_need_two_keyed_inputs_of_one_job)
{
    /* The right input is not keyed: a hand-made handle without a HASH edge. */
    eddy_job_builder_t *b = eddy_job_builder_new("unkeyed_right");
    eddy_stream_t s = eddy_source(b, "src", "generator", NULL);
    eddy_stream_t m = eddy_map(s, "m", "upper", NULL);
    eddy_process2(eddy_key_by(s, "all"), (eddy_keyed_stream_t){b, m.node, "all"}, "j", "join",
                  NULL);
    expect_invalid(b, "both inputs of a two-input step must be keyed");

    b = eddy_job_builder_new("unkeyed_left");
    s = eddy_source(b, "src", "generator", NULL);
    m = eddy_map(s, "m", "upper", NULL);
    eddy_process2((eddy_keyed_stream_t){b, m.node, "all"}, eddy_key_by(s, "all"), "j", "join",
                  NULL);
    expect_invalid(b, "input 1 is not");

    /* Key groups belong to a job: another job's stream has other ones. */
    b = eddy_job_builder_new("mine");
    eddy_job_builder_t *other = eddy_job_builder_new("theirs");
    s = eddy_source(b, "src", "generator", NULL);
    eddy_stream_t t = eddy_source(other, "src", "generator", NULL);
    eddy_process2(eddy_key_by(s, "all"), eddy_key_by(t, "all"), "j", "join", NULL);
    expect_invalid(b, "different jobs");
    eddy_job_builder_destroy(&other);

    b = eddy_job_builder_new("twice");
    s = eddy_source(b, "src", "generator", NULL);
    eddy_process2(eddy_key_by(s, "a"), eddy_key_by(s, "b"), "j", "join", NULL);
    expect_invalid(b, "as both of its inputs");

    /* Only a process step takes two inputs. */
    eddy_plan_t *p = join_plan("seller", 2);
    p->nodes[3].role = EDDY_NODE_REDUCE;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_plan_validate(p, &err), -1);
    cr_assert(strstr(err.msg, "only a process step takes two inputs"), "%s", err.msg);
    p->nodes[3].role = EDDY_NODE_PROCESS;
    p->nodes[3].second_input = -1; /* a second edge without its input */
    cr_assert_eq(eddy_plan_validate(p, &err), -1);
    cr_assert(strstr(err.msg, "no second input"), "%s", err.msg);
    eddy_plan_destroy(&p);
}

Test(plan, a_two_input_plan_round_trips_and_its_fingerprint_covers_the_second_input)
{
    eddy_plan_t *p = join_plan("seller", 3);
    size_t len;
    char *bytes = eddy_plan_encode(p, &len);
    eddy_err_t err = {{0}};
    eddy_plan_t *q = eddy_plan_decode(bytes, len, &err);
    cr_assert(q, "%s", err.msg);
    size_t len2;
    char *bytes2 = eddy_plan_encode(q, &len2);
    cr_assert_eq(len, len2);
    cr_assert_eq(memcmp(bytes, bytes2, len), 0);
    cr_assert_eq(q->nodes[3].second_input, 2);
    cr_assert_str_eq(q->nodes[3].second_key_kind, "seller");
    cr_assert_eq(eddy_plan_fingerprint(p), eddy_plan_fingerprint(q));

    eddy_plan_t *other_key = join_plan("bidder", 3);
    cr_assert_neq(eddy_plan_fingerprint(p), eddy_plan_fingerprint(other_key));
    q->nodes[3].second_input = 1;
    q->nodes[3].input = 2; /* inputs swapped */
    cr_assert_neq(eddy_plan_fingerprint(p), eddy_plan_fingerprint(q));

    /* Every truncation fails, every byte change decodes to a valid plan or not at all. */
    for (size_t cut = 0; cut < len; cut++) {
        eddy_plan_t *r = eddy_plan_decode(bytes, cut, &err);
        cr_assert_null(r, "a plan cut to %zu of %zu bytes was accepted", cut, len);
    }
    char *copy = malloc(len);
    for (size_t i = 0; i < len; i++) {
        for (int v = 0; v < 256; v += 17) {
            memcpy(copy, bytes, len);
            copy[i] = (char)v;
            eddy_plan_t *r = eddy_plan_decode(copy, len, &err);
            if (r)
                cr_assert_eq(eddy_plan_validate(r, &err), 0, "%s", err.msg);
            eddy_plan_destroy(&r);
        }
    }
    /* A step of 10 elements is neither form: a clear error. */
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 5);
    eddy_mpw_u64(&w, EDDY_PLAN_VERSION);
    eddy_mpw_str(&w, "ten");
    eddy_mpw_u64(&w, 128);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_array(&w, 1);
    eddy_mpw_array(&w, 10);
    eddy_mpw_str(&w, "src");
    eddy_mpw_str(&w, "src");
    eddy_mpw_str(&w, "generator");
    eddy_mpw_u64(&w, EDDY_NODE_SOURCE);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_i64(&w, -1);
    eddy_mpw_u64(&w, EDDY_EDGE_NONE);
    eddy_mpw_str(&w, "");
    eddy_config_t *empty = eddy_config_new();
    size_t clen;
    char *cfg = eddy_config_encode(empty, &clen);
    eddy_mpw_bin(&w, cfg, clen);
    eddy_mpw_i64(&w, -1);
    size_t tlen;
    char *ten = eddy_mpw_release(&w, &tlen);
    cr_assert_null(eddy_plan_decode(ten, tlen, &err));
    cr_assert(strstr(err.msg, "9-element (one input) or 12-element (two inputs)"), "%s", err.msg);
    free(ten);
    free(cfg);
    eddy_config_destroy(&empty);
    free(copy);
    free(bytes);
    free(bytes2);
    eddy_plan_destroy(&p);
    eddy_plan_destroy(&q);
    eddy_plan_destroy(&other_key);
}
