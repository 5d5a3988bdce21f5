/* A key group's snapshot bytes: envelope round trip, legacy bare keyed
 * state, and damaged input. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "net/mpcodec.h"
#include "state/group_envelope.h"

Test(group_envelope, round_trip)
{
    eddy_group_envelope_t in = {.watermark = 1700000000123, .keyed = "KEYED", .keyed_len = 5,
                                .n_ops = 3};
    in.ops[0] = "window";
    in.op_lens[0] = 6;
    in.ops[2] = "timers!";
    in.op_lens[2] = 7;
    size_t len;
    char *enc = eddy_group_envelope_encode(&in, &len);
    cr_assert_not_null(enc);
    eddy_group_envelope_t out;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_group_envelope_decode(enc, len, &out, &err), 0, "%s", err.msg);
    cr_assert_eq(out.watermark, in.watermark);
    cr_assert_eq(out.keyed_len, 5);
    cr_assert(!memcmp(out.keyed, "KEYED", 5));
    cr_assert_eq(out.n_ops, 3);
    cr_assert_eq(out.op_lens[0], 6);
    cr_assert(!memcmp(out.ops[0], "window", 6));
    cr_assert_null(out.ops[1]);
    cr_assert_eq(out.op_lens[2], 7);
    free(enc);
}

Test(group_envelope, legacy_bytes_are_bare_keyed_state)
{
    /* The keyed-state format starts with [1, kg, ...]: not an envelope. */
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 4);
    eddy_mpw_u64(&w, 1);
    eddy_mpw_u64(&w, 3);
    eddy_mpw_u64(&w, 8);
    eddy_mpw_u64(&w, 0);
    eddy_group_envelope_t out;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_group_envelope_decode(w.buf.data, w.buf.size, &out, &err), 0);
    cr_assert_eq(out.watermark, EDDY_GROUP_NO_WATERMARK);
    cr_assert_eq((const void *)out.keyed, (const void *)w.buf.data);
    cr_assert_eq(out.keyed_len, w.buf.size);
    cr_assert_eq(out.n_ops, 0);
    eddy_mpw_free(&w);
}

Test(group_envelope, damaged_input_is_rejected)
{
    eddy_group_envelope_t in = {.watermark = 5, .keyed = "K", .keyed_len = 1, .n_ops = 1};
    in.ops[0] = "op";
    in.op_lens[0] = 2;
    size_t len;
    char *enc = eddy_group_envelope_encode(&in, &len);
    eddy_group_envelope_t out;
    for (size_t cut = 9; cut < len; cut++) {
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_group_envelope_decode(enc, cut, &out, &err), -1, "cut at %zu", cut);
        cr_assert(strstr(err.msg, "key group snapshot"), "%s", err.msg);
    }
    /* Another version. */
    enc[9] = 9;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_group_envelope_decode(enc, len, &out, &err), -1);
    cr_assert(strstr(err.msg, "version"), "%s", err.msg);
    free(enc);

    eddy_group_envelope_t too_many = {.n_ops = EDDY_GROUP_MAX_OPS + 1};
    cr_assert_null(eddy_group_envelope_encode(&too_many, &len));
}

/* Each operator's kind goes with its bytes (a restore matches a chain's
 * operators by it); a version 2 envelope has none (matched by position). */
Test(group_envelope, kinds_round_trip_and_version_2_has_none)
{
    eddy_group_envelope_t in = {.watermark = 7, .keyed = "K", .keyed_len = 1, .n_ops = 2};
    in.ops[0] = "agg";
    in.op_lens[0] = 3;
    in.kinds[0] = "pipeline_aggregate";
    in.kinds[1] = NULL; /* "" */
    size_t len;
    char *enc = eddy_group_envelope_encode(&in, &len);
    cr_assert_not_null(enc);
    eddy_group_envelope_t out;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_group_envelope_decode(enc, len, &out, &err), 0, "%s", err.msg);
    cr_assert_eq(out.n_ops, 2);
    cr_assert_eq(out.kind_lens[0], strlen("pipeline_aggregate"));
    cr_assert(!memcmp(out.kinds[0], "pipeline_aggregate", out.kind_lens[0]));
    cr_assert_eq(out.kind_lens[1], 0);
    free(enc);

    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 5);
    eddy_mpw_str(&w, "eddy-kg");
    eddy_mpw_u64(&w, 2);
    eddy_mpw_i64(&w, 9);
    eddy_mpw_bin(&w, "K", 1);
    eddy_mpw_array(&w, 1);
    eddy_mpw_bin(&w, "op", 2);
    cr_assert_eq(eddy_group_envelope_decode(w.buf.data, w.buf.size, &out, &err), 0, "%s", err.msg);
    cr_assert_eq(out.watermark, 9);
    cr_assert_eq(out.n_ops, 1);
    cr_assert_eq(out.op_lens[0], 2);
    cr_assert_eq(out.kind_lens[0], 0);
    eddy_mpw_free(&w);
}
