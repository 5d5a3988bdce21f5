/* fuzz_decode.c - libFuzzer harness for every decoder of untrusted bytes.
 *
 * Anything can connect to a worker's or the coordinator's ZeroMQ ports, so
 * each input is fed to the msgpack validator, the control-plane decoder
 * and the data-plane decoder (draining all records). Besides crashes and
 * sanitizer reports it checks three properties and aborts when one fails:
 *   - a buffer eddy_msgpack_validate accepts is parsed completely by
 *     msgpack-c (the validator is never stricter than it claims to be);
 *   - a control message that decodes re-encodes to bytes that decode to a
 *     message with the same encoding (decode/encode are inverse);
 *   - a DATA batch yields exactly its announced number of records, or an
 *     error.
 * Not built by default: configure with a clang compiler and -DEDDY_FUZZ=ON,
 *   CC=clang cmake -B build-fuzz -S . -DEDDY_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_decode
 *   mkdir -p corpus && EDDY_FUZZ_SEEDS=corpus ./build-fuzz/fuzz_decode -runs=0
 *   ./build-fuzz/fuzz_decode corpus -max_total_time=300
 * The EDDY_FUZZ_SEEDS run writes one valid encoding of every message type
 * into the directory, so the fuzzer starts from well-formed messages. */
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/dataplane.h"
#include "net/mpcodec.h"
#include "net/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_decode: property violated: %s\n", what);
        abort();
    }
}

static void fuzz_validator(const uint8_t *data, size_t size)
{
    if (eddy_msgpack_validate(data, size, EDDY_MSGPACK_MAX_DEPTH, NULL) != 0)
        return;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    msgpack_unpack_return rc = msgpack_unpack_next(&u, (const char *)data, size, &off);
    check((rc == MSGPACK_UNPACK_SUCCESS || rc == MSGPACK_UNPACK_EXTRA_BYTES) && off == size,
          "validated bytes that msgpack-c cannot parse");
    msgpack_unpacked_destroy(&u);
}

static void fuzz_control(const uint8_t *data, size_t size)
{
    eddy_msg_t m;
    eddy_err_t err;
    if (eddy_msg_decode(data, size, &m, &err) != 0)
        return;
    size_t len, len2;
    char *enc = eddy_msg_encode(&m, &len);
    eddy_msg_t m2;
    check(eddy_msg_decode(enc, len, &m2, &err) == 0, "re-encoded message does not decode");
    char *enc2 = eddy_msg_encode(&m2, &len2);
    check(len == len2 && memcmp(enc, enc2, len) == 0, "decode/encode is not stable");
    free(enc2);
    free(enc);
    eddy_msg_clear(&m2);
    eddy_msg_clear(&m);
}

static void fuzz_data(const uint8_t *data, size_t size)
{
    eddy_data_msg_t msg;
    eddy_err_t err;
    if (eddy_data_decode(data, size, &msg, &err) != 0)
        return;
    eddy_record_t rec;
    uint32_t n = 0;
    int rc;
    while ((rc = eddy_data_next_record(&msg, &rec, &err)) == 1) {
        n++;
        check(rec.len == 0 || ((const uint8_t *)rec.data >= data &&
                               (const uint8_t *)rec.data + rec.len <= data + size),
              "record bytes outside the input");
    }
    if (rc == 0 && msg.type == EDDY_DATA_BATCH)
        check(n == msg.records, "record count differs from the announced one");
    eddy_data_msg_close(&msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_validator(data, size);
    fuzz_control(data, size);
    fuzz_data(data, size);
    return 0;
}

/* ---- seed corpus ----------------------------------------------------------- */

static void write_seed(const char *dir, const char *name, char *bytes, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(bytes, 1, len, f);
        fclose(f);
    }
    free(bytes);
}

static void write_seeds(const char *dir)
{
    static char *const argv[] = {"--rate=10", "x"};
    for (int t = EDDY_MSG_REGISTER; t < EDDY_MSG_TYPE_COUNT; t++) {
        eddy_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = (eddy_msg_type_t)t;
        eddy_task_metrics_t tm = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -1, 2.5};
        uint32_t worker_of[2] = {1, 2};
        eddy_stage_placement_t stage = {.parallelism = 2, .worker_of = worker_of};
        eddy_worker_endpoint_t worker = {1, "tcp://127.0.0.1:5000"};
        eddy_source_position_t pos = {0, 1, 42};
        switch (m.type) {
        case EDDY_MSG_HEARTBEAT:
            m.u.heartbeat.n_tasks = 1;
            m.u.heartbeat.tasks = &tm;
            break;
        case EDDY_MSG_DEPLOY:
            strcpy(m.u.deploy.job_id, "wc");
            strcpy(m.u.deploy.job_name, "wordcount");
            m.u.deploy.plan = (char *)"\x95\x01";
            m.u.deploy.plan_len = 2;
            m.u.deploy.n_plugins = 2;
            m.u.deploy.plugins = (char **)argv;
            m.u.deploy.n_stages = 1;
            m.u.deploy.stages = &stage;
            m.u.deploy.n_workers = 1;
            m.u.deploy.workers = &worker;
            m.u.deploy.n_positions = 1;
            m.u.deploy.positions = &pos;
            break;
        case EDDY_MSG_REQUEST:
            strcpy(m.u.request.verb, "submit");
            m.u.request.argc = 2;
            m.u.request.argv = (char **)argv;
            break;
        case EDDY_MSG_REPLY:
            m.u.reply.body = "ok";
            break;
        default:
            break;
        }
        size_t len;
        char *enc = eddy_msg_encode(&m, &len); /* m borrows; nothing to clear */
        write_seed(dir, eddy_msg_type_name(m.type), enc, len);
    }
    eddy_channel_id_t ch = {1, 2, 0, 1, 1, 0};
    eddy_batch_writer_t w;
    eddy_batch_writer_init(&w);
    eddy_batch_writer_begin(&w, &ch);
    for (int i = 0; i < 3; i++) {
        eddy_record_t r = eddy_record_make("a\0b", (uint32_t)i, i - 1);
        r.kind = (uint8_t)i;
        eddy_batch_writer_add(&w, &r);
    }
    size_t len;
    char *enc = eddy_batch_writer_finish(&w, &len);
    eddy_batch_writer_free(&w);
    write_seed(dir, "DATA", enc, len);
    enc = eddy_barrier_encode(&ch, 7, &len);
    write_seed(dir, "BARRIER", enc, len);
    enc = eddy_eos_encode(&ch, &len);
    write_seed(dir, "EOS", enc, len);
    enc = eddy_credit_encode(&ch, 4, &len);
    write_seed(dir, "CREDIT", enc, len);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("EDDY_FUZZ_SEEDS");
    if (dir && *dir)
        write_seeds(dir);
    return 0;
}
