/* test_job_store.c - the job record and checkpoint metadata JSON
 * (coordinator/job_store.c): what is encoded parses back to the same
 * values, keys are laid out as documented, older records without the newer
 * fields still parse, and malformed documents are refused with a reason. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/job_store.h"
#include "tests/unit/leak_check.h"

TestSuite(job_store, .fini = eddy_test_leak_check);

Test(job_store, job_record_round_trip)
{
    char *argv[] = {"--input", "/tmp/in file.txt", "--parallelism", "3"};
    coord_job_record_t r = {.argc = 4, .argv = argv, .n_stages = 2, .last_checkpoint = 41,
                            .submitted_ms = 1700000000123, .epoch = 4000000000u, .restarts = 3,
                            .guarantee = EDDY_GUARANTEE_AT_LEAST_ONCE};
    strcpy(r.id, "wordcount-2");
    strcpy(r.job, "wordcount");
    strcpy(r.state, "running");
    strcpy(r.stage[0], "source");
    strcpy(r.stage[1], "count");
    r.parallelism[0] = 2;
    r.parallelism[1] = 5;
    char plan[] = {0x00, (char)0xff, 0x7f, 0x10};
    char *plugins[] = {"0123456789abcdef0123456789abcdef", NULL};
    r.plan = plan;
    r.plan_len = sizeof plan;
    r.plugins = plugins;
    r.n_plugins = 1;
    char *text = coord_job_record_encode(&r);
    cr_assert(text);
    coord_job_record_t back;
    eddy_err_t err = {{0}};
    cr_assert_eq(coord_job_record_parse(text, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back.plan_len, sizeof plan, "the plan the job was submitted with is kept");
    cr_assert(!memcmp(back.plan, plan, sizeof plan));
    cr_assert_eq(back.n_plugins, 1);
    cr_assert_str_eq(back.plugins[0], plugins[0]);
    cr_assert_str_eq(back.id, "wordcount-2");
    cr_assert_str_eq(back.job, "wordcount");
    cr_assert_str_eq(back.state, "running");
    cr_assert_eq(back.argc, 4);
    for (int i = 0; i < 4; i++)
        cr_assert_str_eq(back.argv[i], argv[i]);
    cr_assert_eq(back.last_checkpoint, 41);
    cr_assert_eq(back.submitted_ms, 1700000000123);
    cr_assert_eq(back.epoch, 4000000000u);
    cr_assert_eq(back.restarts, 3);
    cr_assert_eq(back.guarantee, EDDY_GUARANTEE_AT_LEAST_ONCE);
    cr_assert(strstr(text, "\"guarantee\":\"at-least-once\""), "%s", text);
    cr_assert_eq(back.n_stages, 2);
    for (uint32_t s = 0; s < 2; s++) {
        int q = strcmp(back.stage[s], "source") == 0 ? 0 : 1;
        cr_assert_str_eq(back.stage[s], r.stage[q]);
        cr_assert_eq(back.parallelism[s], r.parallelism[q]);
    }
    coord_job_record_clear(&back);
    free(text);
}

Test(job_store, record_written_before_epochs_and_restarts_parses)
{
    const char *old = "{\"args\":[],\"id\":\"etl\",\"job\":\"etl\",\"last_checkpoint\":0,"
                      "\"parallelism\":{\"sink\":1},\"state\":\"waiting\",\"submitted_ms\":5}";
    coord_job_record_t r;
    eddy_err_t err = {{0}};
    cr_assert_eq(coord_job_record_parse(old, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.epoch, 0);
    cr_assert_eq(r.restarts, 0);
    cr_assert_eq(r.argc, 0);
    cr_assert_eq(r.guarantee, EDDY_GUARANTEE_EXACTLY_ONCE, "no guarantee recorded: the default");
    coord_job_record_clear(&r);
}

Test(job_store, malformed_records_are_refused)
{
    const char *bad[] = {
        "",
        "[]",
        "{\"id\":\"x\"}",
        "{\"args\":[1],\"id\":\"x\",\"job\":\"x\",\"last_checkpoint\":0,\"parallelism\":{},\"state\":\"running\"}",
        "{\"args\":[],\"id\":\"x\",\"job\":\"x\",\"last_checkpoint\":-1,\"parallelism\":{},\"state\":\"running\"}",
        "{\"args\":[],\"id\":\"x\",\"job\":\"x\",\"last_checkpoint\":0,\"parallelism\":{\"a\":0},\"state\":\"running\"}",
        "{\"args\":[],\"id\":\"x\",\"job\":\"x\",\"last_checkpoint\":0,\"parallelism\":{},\"state\":\"running\",\"epoch\":-3}",
        "{\"args\":[],\"id\":\"x\",\"job\":\"x\",\"last_checkpoint\":0,\"parallelism\":{},\"state\":\"running\",\"guarantee\":\"twice\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        coord_job_record_t r;
        eddy_err_t err = {{0}};
        cr_assert_eq(coord_job_record_parse(bad[i], &r, &err), -1, "accepted: %s", bad[i]);
        cr_assert(err.msg[0], "no reason for: %s", bad[i]);
        cr_assert_null(r.argv);
    }
}

Test(job_store, checkpoint_record_round_trip)
{
    char state[] = {'d', 'i', 'r', 0, (char)0xff, '\n'};
    coord_position_record_t pos[2] = {{"source", 0, 123456789012345, NULL, 0},
                                      {"source", 1, -1, state, sizeof state}};
    coord_checkpoint_record_t r = {.id = 9, .epoch = 3, .time_ms = 17, .duration_ms = 12.5,
                                   .bytes = 1000, .files = 8, .n_positions = 2, .positions = pos,
                                   .n_stages = 1};
    strcpy(r.stage[0], "source");
    r.parallelism[0] = 2;
    strcpy(r.snapshot_dir, "/tmp/snaps");
    char *text = coord_checkpoint_record_encode(&r);
    cr_assert(text);
    coord_checkpoint_record_t back;
    eddy_err_t err = {{0}};
    cr_assert_eq(coord_checkpoint_record_parse(text, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back.id, 9);
    cr_assert_eq(back.epoch, 3);
    cr_assert_eq(back.bytes, 1000);
    cr_assert_eq(back.files, 8);
    cr_assert_float_eq(back.duration_ms, 12.5, 1e-9);
    cr_assert_eq(back.n_positions, 2);
    cr_assert_str_eq(back.positions[0].stage, "source");
    cr_assert_eq(back.positions[0].position, 123456789012345);
    cr_assert_eq(back.positions[1].instance, 1);
    cr_assert_eq(back.positions[1].position, -1);
    cr_assert_null(back.positions[0].state);
    cr_assert_eq(back.positions[1].state_len, sizeof state);
    cr_assert_eq(memcmp(back.positions[1].state, state, sizeof state), 0);
    cr_assert_eq(back.n_stages, 1);
    cr_assert_eq(back.parallelism[0], 2);
    cr_assert_str_eq(back.snapshot_dir, "/tmp/snaps");
    coord_checkpoint_record_clear(&back);
    free(text);

    cr_assert_eq(coord_checkpoint_record_parse("{\"id\":0,\"positions\":[]}", &back, &err), -1);
    cr_assert_eq(coord_checkpoint_record_parse("{\"id\":2,\"positions\":[{\"stage\":\"s\"}]}", &back, &err), -1);
    /* a state that is not base64, or decodes to more than the limit */
    cr_assert_eq(coord_checkpoint_record_parse("{\"id\":2,\"positions\":[{\"stage\":\"s\",\"instance\":0,"
                                               "\"position\":1,\"state\":\"!!!!\"}]}", &back, &err), -1);
    cr_assert(strstr(err.msg, "base64"), "%s", err.msg);
    size_t big = (EDDY_SOURCE_STATE_MAX + 3) / 3 * 4 + 4;
    char *doc = malloc(big + 128);
    cr_assert(doc);
    int n = sprintf(doc, "{\"id\":2,\"positions\":[{\"stage\":\"s\",\"instance\":0,\"position\":1,\"state\":\"");
    memset(doc + n, 'A', big);
    strcpy(doc + n + big, "\"}]}");
    cr_assert_eq(coord_checkpoint_record_parse(doc, &back, &err), -1);
    free(doc);
    /* a record of an older eddy, without states, stays readable */
    cr_assert_eq(coord_checkpoint_record_parse("{\"id\":2,\"positions\":[{\"stage\":\"s\",\"instance\":0,"
                                               "\"position\":1}]}", &back, &err), 0, "%s", err.msg);
    cr_assert_null(back.positions[0].state);
    cr_assert_eq(back.n_finished, 0, "a record without \"finished\" has none");
    coord_checkpoint_record_clear(&back);
}

/* The tasks finished at a checkpoint (FLIP-147) round-trip; a malformed
 * entry makes the record unreadable rather than restore them unfinished. */
Test(job_store, checkpoint_record_finished_tasks)
{
    coord_position_record_t pos[1] = {{"source", 0, -1, NULL, 0}};
    coord_finished_record_t fin[2] = {{"source", 2}, {"count", 0}};
    coord_checkpoint_record_t r = {.id = 4, .n_positions = 1, .positions = pos, .n_finished = 2,
                                   .finished = fin};
    char *text = coord_checkpoint_record_encode(&r);
    cr_assert(text);
    coord_checkpoint_record_t back;
    eddy_err_t err = {{0}};
    cr_assert_eq(coord_checkpoint_record_parse(text, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back.n_finished, 2);
    cr_assert_str_eq(back.finished[0].stage, "source");
    cr_assert_eq(back.finished[0].instance, 2);
    cr_assert_str_eq(back.finished[1].stage, "count");
    cr_assert_eq(back.finished[1].instance, 0);
    coord_checkpoint_record_clear(&back);
    free(text);
    cr_assert_eq(coord_checkpoint_record_parse("{\"id\":2,\"positions\":[],\"finished\":"
                                               "[{\"stage\":\"s\"}]}", &back, &err), -1);
    cr_assert(strstr(err.msg, "finished"), "%s", err.msg);
    cr_assert_eq(coord_checkpoint_record_parse("{\"id\":2,\"positions\":[],\"finished\":7}",
                                               &back, &err), -1);
}

Test(job_store, keys)
{
    char key[COORD_KEY_MAX];
    coord_job_key(key, sizeof key, "etl");
    cr_assert_str_eq(key, "/eddy/jobs/etl");
    coord_checkpoint_key(key, sizeof key, "etl", 42);
    cr_assert_str_eq(key, "/eddy/jobs/etl/checkpoints/00000000000000000042");
    coord_checkpoint_prefix(key, sizeof key, "etl");
    cr_assert_str_eq(key, "/eddy/jobs/etl/checkpoints/");
}
